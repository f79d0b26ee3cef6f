"""Relay mode (the default): a client connected to a node that does not own
a queue uses it as if it were local; the node relays the link to the owner."""
import os
import signal
import time

import pytest
from proton import Delivery, Endpoint, Message, Timeout
from proton.utils import ConnectionClosed, LinkDetached, SendException

from cluster_util import Cluster, attach, connect
from link_churn import growth_kb
from raw_client import round_trip
from mgmt_client import Mgmt

# n2 owns every queue; clients connect to n1. No node can take nowhere-*
# (its rule names a node that is not in the cluster).
PINNED = {"lease-ttl": 1, "poll-interval": 0.05, "rules": '["nowhere-* -> node:n9", "* -> node:n2"]'}


@pytest.fixture
def cluster():
    c = Cluster(n=2, wlm=PINNED)
    yield c
    c.stop()


def test_messages_flow_through_the_relay_unchanged(cluster):
    n1, n2 = cluster.nodes
    conn = connect(n1)
    try:
        snd = conn.create_sender("relayed")
        for i in range(200):
            snd.send(Message(id=i, subject="s%d" % i, properties={"k": i}, body={"n": i, "pad": "x" * i},
                             durable=True))
        rcv = conn.create_receiver("relayed", credit=20)
        for i in range(200):
            m = rcv.receive(timeout=10)
            assert (m.id, m.subject, m.properties, m.body) == (i, "s%d" % i, {"k": i}, {"n": i, "pad": "x" * i})
            rcv.accept()
    finally:
        conn.close()
    # The queue is at n2: it holds nothing now, and n1 holds no copy.
    assert "relayed" in cluster.owners() and cluster.owners()["relayed"][0] == "n2"


def test_management_lists_relayed_links_as_relayed(cluster):
    # A sender and a receiver on one address: Proton names both
    # CONTAINER-ADDRESS, so they are told apart by direction. At n1 both are
    # relayed; at n2, the owner, the relay's own links are ordinary ones.
    n1, n2 = cluster.nodes
    conn = connect(n1)
    mgmt = Mgmt(n1.url)
    try:
        conn.create_receiver("listed-relayed", credit=1)
        conn.create_sender("listed-relayed")
        links = [l for l in mgmt.query("link", ["name", "node", "address", "direction", "relayed"])
                 if l["address"] == "listed-relayed"]
        assert sorted((l["node"], l["direction"], l["relayed"]) for l in links) == [
            ("n1", "in", True), ("n1", "out", True), ("n2", "in", False), ("n2", "out", False)], links
        assert len({l["name"] for l in links}) == 4, links
    finally:
        mgmt.close()
        conn.close()


def test_relayed_links_that_come_and_go_leave_no_memory_behind(cluster):
    # The client's connection at n1, n1's connection to n2 and n2's side of
    # it all live on while the links come and go: none may keep them.
    n1, n2 = cluster.nodes
    conn = connect(n1)
    try:
        grown = growth_kb(conn, "churned-relayed", [n1.pid, n2.pid])
        assert max(grown) < 4096, "n1 and n2 grew %s KiB over 2,000 relayed links that came and went" % grown
        snd = conn.create_sender("churned-relayed")
        snd.send(Message(body="still relayed"))
        rcv = conn.create_receiver("churned-relayed", credit=1)
        assert rcv.receive(timeout=10).body == "still relayed"
        rcv.accept()
    finally:
        conn.close()


def test_outcomes_travel_both_ways(cluster):
    n1, n2 = cluster.nodes
    conn = connect(n1)
    try:
        conn.create_sender("outcomes").send(Message(body="again"))
        rcv = conn.create_receiver("outcomes", credit=1)
        assert rcv.receive(timeout=10).body == "again"
        rcv.release()  # back to the queue at the owner
        again = rcv.receive(timeout=10)
        assert again.body == "again"
        rcv.reject()   # dead-lettered at the owner
    finally:
        conn.close()
    direct = connect(n2)
    try:
        dlq = direct.create_receiver("DLQ", credit=1)
        assert dlq.receive(timeout=10).body == "again"
        dlq.accept()
    finally:
        direct.close()


def test_each_message_of_a_burst_gets_its_own_outcome_from_the_owner(cluster):
    # n1 passes a burst on to n2 several messages to a delivery (relay
    # batches); n2 answers for each message, so a refusal reaches only the
    # message refused, and every other one is accepted and stored.
    n1, n2 = cluster.nodes
    bad = b"\x00\x53\x70\xc0\x10"  # a header list that runs off the end
    payloads = [bad if i % 7 == 3 else Message(body="m%d" % i).encode() for i in range(60)]
    h = round_trip(n1.url, "burst-outcomes", payloads)
    assert h.outcome_of == {i: "rejected:amqp:decode-error" if p == bad else "accepted"
                            for i, p in enumerate(payloads)}
    assert h.received == [p for p in payloads if p != bad]


def test_a_queue_no_node_can_take_is_refused_and_logged_once(cluster):
    n1, n2 = cluster.nodes
    got = attach(n1, "nowhere-1")
    assert got != "local" and got["condition"] == "amqp:link:detach-forced", got
    assert "no node can take queue 'nowhere-1'" in got["description"], got
    assert n1.log().count("cannot place queue 'nowhere-1'") == 1, n1.log()


def test_the_owners_refusal_reaches_the_client():
    c = Cluster(n=2, wlm=PINNED, broker="auto-create-queues = false")
    try:
        conn = connect(c.nodes[0])
        try:
            with pytest.raises(LinkDetached) as err:
                conn.create_receiver("ghost", credit=1)
            cond = err.value.link.remote_condition
            # Answered by the owner (n2), whose queues are not created on use.
            assert cond.name == "amqp:not-found", cond
            assert "ghost" in cond.description
        finally:
            conn.close()
    finally:
        c.stop()


def receive_after_restart(c, owner, queue, wanted, timeout=30):
    """Restarts the killed `owner` once its lease lapsed, then receives from
    `queue` through the other node until every id in `wanted` arrived; the
    ids received. (A fresh connection per try: Python Proton re-attaches a
    link name before it sends the detach of the old one, which a peer
    refuses.)"""
    c.wait_for(lambda: owner.node_id not in c.members(), what="the owner's lease to lapse")
    c.restart(owner)
    front = next(n for n in c.nodes if n.node_id != owner.node_id)
    got = set()
    deadline = time.monotonic() + timeout
    while not got.issuperset(wanted) and time.monotonic() < deadline:
        again = connect(front)
        try:
            r = again.create_receiver(queue, credit=100)
            while not got.issuperset(wanted):
                got.add(r.receive(timeout=5).id)
                r.accept()
        except (LinkDetached, ConnectionClosed, Timeout):
            time.sleep(0.1)  # the owner still joining; poll again until the deadline
        finally:
            again.close()
    return got


def test_a_killed_owner_detaches_relayed_links_and_keeps_the_client_connected():
    c = Cluster(n=2, wlm=PINNED)
    try:
        n1, n2 = c.nodes
        producer = connect(n1)
        snd = producer.create_sender("fragile")
        for i in range(50):
            snd.send(Message(id=i, body="m%d" % i, durable=True))  # each accepted = stored at n2
        producer.close()
        conn = connect(n1)  # one relayed link on it when the owner dies
        rcv = conn.create_receiver("fragile", credit=5)
        assert rcv.receive(timeout=10).id == 0  # taken, not settled
        n2.kill()
        with pytest.raises(LinkDetached) as err:
            for _ in range(100):
                rcv.receive(timeout=10)
        assert "amqp:link:detach-forced" in str(err.value)
        assert "n2" in str(err.value)
        # The client's connection to n1 is still up: a temporary queue works.
        tmp = conn.create_receiver(None, dynamic=True)
        assert tmp.link.remote_source.address.startswith("$dynamic.n1.")
        # Every message the producer saw accepted is there after the restart.
        conn.close()
        assert receive_after_restart(c, n2, "fragile", set(range(50))) == set(range(50))
    finally:
        c.stop()


def test_request_reply_across_nodes_through_temporary_queues(cluster):
    n1, n2 = cluster.nodes
    requester = connect(n1)
    service = connect(n2)
    try:
        replies = requester.create_receiver(None, dynamic=True, credit=5)
        reply_to = replies.link.remote_source.address
        assert reply_to.startswith("$dynamic.n1.")
        requester.create_sender("service").send(Message(body="ping", reply_to=reply_to))
        inbox = service.create_receiver("service", credit=1)
        req = inbox.receive(timeout=10)
        inbox.accept()
        # The service, at n2, answers to a temporary queue that lives at n1.
        service.create_sender(req.reply_to).send(Message(body="pong"))
        assert replies.receive(timeout=10).body == "pong"
        replies.accept()
    finally:
        requester.close()
        service.close()


def test_temporary_queues_work_across_nodes_whose_ids_hold_dots():
    # The default node id is "wharf-" + the host name, and host names often
    # hold dots: a temporary queue's name ($dynamic.<node>.<n>) must still
    # name its node, for replies from another node and for management.
    front_id, owner_id = "wharf-a.example.net", "wharf-b.example.net"
    c = Cluster(ids=[front_id, owner_id],
                wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:%s"]' % owner_id})
    front, owner = c.nodes
    requester = connect(front)
    service = connect(owner)
    m = None
    try:
        replies = requester.create_receiver(None, dynamic=True, credit=5)
        reply_to = replies.link.remote_source.address
        assert reply_to.startswith("$dynamic.%s." % front_id)
        requester.create_sender("service").send(Message(body="ping", reply_to=reply_to))
        inbox = service.create_receiver("service", credit=1)
        req = inbox.receive(timeout=10)
        inbox.accept()
        service.create_sender(req.reply_to).send(Message(body="pong"))  # from the owner to the front
        assert replies.receive(timeout=10).body == "pong"
        replies.accept()
        m = Mgmt(front.url)  # its replies go to a temporary queue of the front
        status, desc, _ = m.call("READ", type="wharf.queue", name="service")
        assert status == 200, desc
    finally:
        if m:
            m.close()
        requester.close()
        service.close()
        c.stop()


def test_anonymous_relay_sends_each_message_to_its_owner_and_returns_its_outcome():
    tiny = '[[queue]]\nname = "tiny"\nmax-depth-messages = 1\noverflow-policy = "reject"\n'
    c = Cluster(n=2, wlm=PINNED, broker=tiny)
    try:
        n1, n2 = c.nodes
        conn = connect(n1)
        try:
            anon = conn.create_sender(None)
            for q in ("anon-a", "anon-b"):
                for i in range(3):
                    anon.send(Message(address=q, id=i, body="%s-%d" % (q, i)))  # accepted by n2
            anon.send(Message(address="tiny", body="fits"))
            with pytest.raises(SendException) as err:
                anon.send(Message(address="tiny", body="does not fit"))  # n2 rejects: full
            assert err.value.state == Delivery.REJECTED
        finally:
            conn.close()
        # Everything is at the owner, n2, in order.
        direct = connect(n2)
        try:
            for q in ("anon-a", "anon-b"):
                rcv = direct.create_receiver(q, credit=10)
                assert [rcv.receive(timeout=10).body for _ in range(3)] == ["%s-%d" % (q, i) for i in range(3)]
                rcv.accept()
        finally:
            direct.close()
        assert set(c.owners()) >= {"anon-a", "anon-b", "tiny"}
        assert all(o[0] == "n2" for o in c.owners().values())
    finally:
        c.stop()


def test_a_killed_owner_under_a_producer_loses_nothing_it_accepted():
    c = Cluster(n=2, wlm=PINNED)
    try:
        n1, n2 = c.nodes
        conn = connect(n1)
        snd = conn.create_sender("fragile-in")
        accepted = []
        with pytest.raises(LinkDetached) as err:
            for i in range(100000):
                snd.send(Message(id=i, body="m%d" % i, durable=True), timeout=10)
                accepted.append(i)  # the owner stored it
                if i == 200:
                    n2.kill()
        assert "amqp:link:detach-forced" in str(err.value) and "n2" in str(err.value)
        assert len(accepted) >= 201
        conn.close()
        got = receive_after_restart(c, n2, "fragile-in", set(accepted))
        assert got.issuperset(accepted), sorted(set(accepted) - got)[:10]
    finally:
        c.stop()


def test_a_client_that_goes_away_returns_its_unsettled_messages_to_the_owner(cluster):
    n1, n2 = cluster.nodes
    conn = connect(n1)
    snd = conn.create_sender("held")
    for i in range(5):
        snd.send(Message(id=i, body="m%d" % i))
    rcv = conn.create_receiver("held", credit=5)
    taken = [rcv.receive(timeout=10).id for _ in range(5)]  # none settled
    assert taken == list(range(5))
    conn.close()  # the relayed link ends: the owner gets them back
    direct = connect(n2)
    try:
        r = direct.create_receiver("held", credit=5)
        again = [r.receive(timeout=10) for _ in range(5)]
        r.accept()
        assert [m.id for m in again] == list(range(5))
        assert all(m.delivery_count == 1 for m in again)  # delivered once before
    finally:
        direct.close()


def drain_until(conn, queue, sentinel, limit=1000):
    """The ids of the messages in `queue` before `sentinel` (all accepted)."""
    r = conn.create_receiver(queue, credit=50)
    seen = []
    for _ in range(limit):
        m = r.receive(timeout=10)
        r.accept()
        if m.id == sentinel:
            return seen
        seen.append(m.id)
    raise AssertionError("no sentinel in %d messages" % limit)


def left_after_a_relayed_consumer(cluster, queue, n, credit, settle):
    """Sends n messages (ids 0..n-1) to `queue` through n1, takes them all on a
    relayed receiver with `credit`, settles them with settle(receiver, id) in
    order, detaches at once, then returns the ids n2 (the owner) still holds."""
    n1, n2 = cluster.nodes
    conn = connect(n1)
    try:
        snd = conn.create_sender(queue)
        for i in range(n):
            snd.send(Message(id=i, body="m%d" % i))
        rcv = conn.create_receiver(queue, credit=credit)
        taken = [rcv.receive(timeout=10).id for _ in range(n)]  # none settled yet
        assert taken == list(range(n))
        for i in taken:  # settles the oldest taken first
            settle(rcv, i)
        rcv.close()
        snd.send(Message(id="end", body="sentinel"))
    finally:
        conn.close()
    direct = connect(n2)
    try:
        return drain_until(direct, queue, "end")
    finally:
        direct.close()


def test_messages_a_relayed_consumer_accepted_are_gone_even_when_it_detaches_at_once(cluster):
    # Owner -> relay, messages travel several to a delivery and the client's
    # outcomes go back as control records; a detach right after the last
    # accept must not hand any accepted message back to the queue.
    assert left_after_a_relayed_consumer(cluster, "taken", 300, 300, lambda rcv, i: rcv.accept()) == []


def unread_bytes(port):
    """Bytes waiting in the kernel, unread, on the established TCP
    connections whose local port is `port` (/proc/net/tcp)."""
    total = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "01" and int(local.split(":")[1], 16) == port:
                total += int(queues.split(":")[1], 16)
    return total


def pump_until(conn, condition, timeout=10):
    """Runs conn's I/O until condition(), checked every 10 ms, holds (a
    BlockingConnection's own wait blocks on input: none comes here)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        try:
            conn.wait(lambda: False, timeout=0.01)
        except Timeout:
            pass


def test_a_relayed_consumers_detach_waits_for_outcomes_the_owner_has_not_taken_yet():
    # The relay passes a client's outcomes to the owner as control
    # deliveries, on a link where the owner grants credit-window (here 1)
    # credits at a time. With the owner stopped, the first half of the
    # accepts goes out on the one credit and the second half waits at the
    # relay for credit when the client detaches. Written at once, the detach
    # would overtake that second half and the owner would hand its 150
    # accepted messages back to the queue; the relay must hold it.
    c = Cluster(n=2, wlm=PINNED, broker="credit-window = 1\n")
    n1, n2 = c.nodes
    try:
        conn = connect(n1)
        snd = conn.create_sender("held")
        for i in range(300):
            snd.send(Message(id=i, body="m%d" % i))
        rcv = conn.create_receiver("held", credit=300)
        assert [rcv.receive(timeout=10).id for _ in range(300)] == list(range(300))
        before = unread_bytes(n2.port)
        os.kill(n2.pid, signal.SIGSTOP)
        try:
            for _ in range(150):
                rcv.accept()
            # The first control delivery has reached the stopped owner: the
            # relay has no credit left for the next one.
            pump_until(conn, lambda: unread_bytes(n2.port) > before)
            for _ in range(150):
                rcv.accept()
            rcv.link.close()
            # n1 answers $management itself, after the frames before it on
            # this connection (the accepts and the detach).
            conn.create_sender("$management").close()
        finally:
            os.kill(n2.pid, signal.SIGCONT)
        conn.wait(lambda: rcv.link.state & Endpoint.REMOTE_CLOSED, timeout=10)
        snd.send(Message(id="end", body="sentinel"))
        conn.close()
        direct = connect(n2)
        try:
            assert drain_until(direct, "held", "end") == []
        finally:
            direct.close()
    finally:
        c.stop()


def test_each_message_a_relayed_consumer_took_in_one_batch_gets_its_own_outcome(cluster):
    # 40 messages reach n1 in a few deliveries; the client accepts some,
    # releases some and rejects one: each outcome reaches its own message.
    def settle(rcv, i):
        if i == 13:
            rcv.reject()
        elif i % 2:
            rcv.release(delivered=False)
        else:
            rcv.accept()

    back = left_after_a_relayed_consumer(cluster, "mixed", 40, 40, settle)
    assert sorted(back) == [i for i in range(40) if i % 2 and i != 13], back
    direct = connect(cluster.nodes[1])
    try:
        dlq = direct.create_receiver("DLQ", credit=1)
        assert dlq.receive(timeout=10).id == 13
        dlq.accept()
    finally:
        direct.close()


def test_a_relayed_link_to_a_moved_queue_is_redirected_to_the_new_owner():
    c = Cluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:n2"]'})
    try:
        n1, n2, n3 = c.nodes
        conn = connect(n1)
        try:
            conn.create_sender("wandering").send(Message(body="with me", durable=True))
            rcv = conn.create_receiver("wandering", credit=0)  # relayed to n2, takes nothing
            moved = c.wlm_command("move", "wandering", "n3", "--wait", "30")
            assert moved.returncode == 0, moved.stderr
            with pytest.raises(LinkDetached) as err:
                rcv.receive(timeout=15)
            cond = err.value.link.remote_condition
        finally:
            conn.close()
        assert cond.name == "amqp:link:redirect"
        assert int(cond.info["port"]) == n3.port and cond.info["address"] == "wandering"
        # Through n1 again, the relay now reaches n3, and the message moved with the queue.
        again = connect(n1)
        try:
            r = again.create_receiver("wandering", credit=1)
            assert r.receive(timeout=10).body == "with me"
            r.accept()
        finally:
            again.close()
    finally:
        c.stop()
