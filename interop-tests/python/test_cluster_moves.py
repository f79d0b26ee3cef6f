"""Moving queues between the nodes of a cluster: an operator's move under
load, a drain, and a node that dies and comes back after its queues got new
owners. Nothing is lost in any of them."""
import os
import subprocess
import threading
import time

from proton import ConnectionException, Message, Timeout
from proton.utils import ConnectionClosed, LinkDetached, SendException

from cluster_util import Cluster, attach, connect, owned_by
from wharfd_process import WHARFD

import pytest

# Redirect mode: the clients here follow redirects themselves, and ownership
# shows in where they end up.
FAST = {"lease-ttl": 1, "poll-interval": 0.05, "mode": '"redirect"'}


@pytest.fixture
def cluster():
    c = Cluster(wlm=FAST)
    yield c
    c.stop()


def redirect_target(cluster, err):
    """The node a LinkDetached's amqp:link:redirect names, or None."""
    cond = getattr(getattr(err, "link", None), "remote_condition", None)
    if cond is not None and cond.name == "amqp:link:redirect" and cond.info:
        return cluster.by_port.get(int(cond.info["port"]))
    return None


class Producer(threading.Thread):
    """Sends ids 0..count-1 to `queue`, one at a time, each settled before
    the next; follows redirects and sends again what was not confirmed (at
    least once)."""

    def __init__(self, cluster, node, queue, count):
        super().__init__(daemon=True)
        self.cluster, self.node, self.queue, self.count = cluster, node, queue, count
        self.sent = 0
        self.nodes_used = []
        self.error = None

    def run(self):
        conn = snd = None
        deadline = time.monotonic() + 120
        while self.sent < self.count and time.monotonic() < deadline:
            try:
                if snd is None:
                    conn = connect(self.node, timeout=40)
                    snd = conn.create_sender(self.queue)
                    self.nodes_used.append(self.node.node_id)
                snd.send(Message(id=self.sent, body="m-%d" % self.sent, durable=True), timeout=20)
                self.sent += 1
            except (LinkDetached, ConnectionClosed, ConnectionException, SendException, Timeout) as e:
                self.node = redirect_target(self.cluster, e) or self.node
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:
                        pass
                conn = snd = None
        if conn is not None:
            conn.close()
        if self.sent < self.count:
            self.error = "sent only %d of %d" % (self.sent, self.count)


class Consumer(threading.Thread):
    """Receives from `queue` until it has every id in 0..count-1 (duplicates
    are counted, not lost); follows redirects."""

    def __init__(self, cluster, node, queue, count, credit=10):
        super().__init__(daemon=True)
        self.cluster, self.node, self.queue, self.count, self.credit = cluster, node, queue, count, credit
        self.order = []          # ids in arrival order, duplicates included
        self.nodes_used = []

    def distinct(self):
        return len(set(self.order))

    def run(self):
        conn = rcv = None
        deadline = time.monotonic() + 120
        while self.distinct() < self.count and time.monotonic() < deadline:
            try:
                if rcv is None:
                    conn = connect(self.node, timeout=40)
                    rcv = conn.create_receiver(self.queue, credit=self.credit)
                    self.nodes_used.append(self.node.node_id)
                m = rcv.receive(timeout=1)
                self.order.append(m.id)
                rcv.accept()
            except Timeout:
                continue
            except (LinkDetached, ConnectionClosed, ConnectionException) as e:
                self.node = redirect_target(self.cluster, e) or self.node
                try:
                    conn.close()
                except Exception:
                    pass
                conn = rcv = None
        if conn is not None:
            conn.close()


def test_a_queue_moved_under_a_steady_producer_and_consumer_loses_nothing(cluster):
    n1, n2 = cluster.nodes[0], cluster.nodes[1]
    queue = owned_by(cluster, n1, "moving")[0]
    count = 1500
    producer = Producer(cluster, n1, queue, count)
    consumer = Consumer(cluster, n1, queue, count)
    producer.start()
    consumer.start()
    cluster.wait_for(lambda: consumer.distinct() >= count // 4, what="traffic before the move")
    moved = cluster.wlm_command("move", queue, n2.node_id, "--wait", "30")
    assert moved.returncode == 0, moved.stderr
    producer.join(timeout=150)
    consumer.join(timeout=150)
    assert producer.error is None, producer.error
    # Every message sent reached the consumer; the move happened mid-stream.
    assert set(consumer.order) == set(range(count))
    assert producer.nodes_used[0] == "n1" and producer.nodes_used[-1] == "n2", producer.nodes_used
    assert consumer.nodes_used[0] == "n1" and consumer.nodes_used[-1] == "n2", consumer.nodes_used
    # Order holds except for what was out for delivery when the links moved.
    first_seen, late = [], 0
    for i in consumer.order:
        if i not in first_seen:
            late += bool(first_seen) and i < max(first_seen)
            first_seen.append(i)
    assert late <= 2 * consumer.credit, late
    assert cluster.owners()[queue] == ("n2", None)
    assert attach(n2, queue) == "local"
    assert int(attach(n1, queue)["info"]["port"]) == n2.port


def test_links_at_the_old_owner_are_redirected_to_the_new_one(cluster):
    n1, n3 = cluster.nodes[0], cluster.nodes[2]
    queue = owned_by(cluster, n1, "redirected")[0]
    conn = connect(n1)
    try:
        conn.create_sender(queue).send(Message(body="travels along", durable=True))
        rcv = conn.create_receiver(queue, credit=0)  # attached, takes nothing
        assert cluster.wlm_command("move", queue, n3.node_id, "--wait", "30").returncode == 0
        with pytest.raises(LinkDetached) as err:
            rcv.receive(timeout=15)
        cond = err.value.link.remote_condition  # before the connection goes
    finally:
        conn.close()
    assert cond is not None, str(err.value)
    assert cond.name == "amqp:link:redirect"
    assert int(cond.info["port"]) == n3.port and cond.info["address"] == queue
    assert "n3" in cond.description
    conn = connect(n3)
    try:
        rcv = conn.create_receiver(queue, credit=1)
        assert rcv.receive(timeout=10).body == "travels along"
        rcv.accept()
    finally:
        conn.close()


def test_move_requests_that_cannot_be_done_say_why(cluster):
    n1, n2 = cluster.nodes[0], cluster.nodes[1]
    queue = owned_by(cluster, n1, "refused")[0]
    out = cluster.wlm_command("move", "never-used", "n2")
    assert out.returncode == 1 and "has no owner" in out.stderr
    out = cluster.wlm_command("move", queue, "n9")
    assert out.returncode == 1 and "'n9' is not a live member" in out.stderr
    out = cluster.wlm_command("move", queue, "n1")
    assert out.returncode == 1 and "already on node n1" in out.stderr
    assert cluster.wlm_command("drain", "n2").returncode == 0
    out = cluster.wlm_command("move", queue, "n2")
    assert out.returncode == 1 and "draining" in out.stderr
    assert attach(n1, queue) == "local"  # nothing changed


def fill(node, queue, count):
    conn = connect(node)
    try:
        snd = conn.create_sender(queue)
        for i in range(count):
            snd.send(Message(id=i, body="%s-%d" % (queue, i), durable=True))
    finally:
        conn.close()


def drain_all(node, queue, count, timeout=30):
    """Every message of `queue` at `node`: their ids (accepting each)."""
    got = []
    conn = connect(node)
    try:
        rcv = conn.create_receiver(queue, credit=50)
        deadline = time.monotonic() + timeout
        while len(set(got)) < count and time.monotonic() < deadline:
            try:
                got.append(rcv.receive(timeout=1).id)
                rcv.accept()
            except Timeout:
                pass
    finally:
        conn.close()
    return got


def test_draining_a_node_moves_all_its_queues_away_and_it_gets_no_new_ones(cluster):
    n1 = cluster.nodes[0]
    mine = owned_by(cluster, n1, "drained", count=4)
    for q in mine:
        fill(n1, q, 25)
    assert cluster.wlm_command("drain", "n1").returncode == 0
    cluster.wait_for(lambda: not any(o[0] == "n1" for o in cluster.owners().values()),
                     what="n1 to own nothing")
    owners = cluster.owners()
    for q in mine:
        owner = cluster.node(owners[q][0])
        assert sorted(set(drain_all(owner, q, 25))) == list(range(25)), q
    # New queues go elsewhere while n1 drains, even when first used at n1.
    for i in range(6):
        assert attach(n1, "after-drain-%d" % i) != "local"
    assert cluster.wlm_command("undrain", "n1").returncode == 0
    cluster.wait_for(lambda: any(attach(n1, "undrained-%d" % i) == "local" for i in range(12)),
                     what="n1 to take queues again")


def test_a_killed_node_has_its_queues_reassigned_and_its_messages_reach_the_new_owner():
    c = Cluster(wlm=dict(FAST, **{"reassign-after": 2}))
    try:
        n1, n2 = c.nodes[0], c.nodes[1]
        queue = owned_by(c, n1, "orphan")[0]
        fill(n1, queue, 200)
        n1.kill()  # SIGKILL: its lease lapses, its queues are orphaned
        owner = c.wait_for(lambda: (c.owners()[queue][0] != "n1") and c.owners()[queue][0],
                           what="the queue to be reassigned")
        new_owner = c.node(owner)
        assert "reassigned: node n1 down for over 2 s" in c.wlm_command("status").stdout
        # The new owner serves the queue (empty until n1 returns).
        c.wait_for(lambda: attach(new_owner, queue) == "local", what="the new owner to serve")
        conn = connect(new_owner)
        try:
            conn.create_sender(queue).send(Message(id=1000, body="after the crash", durable=True))
        finally:
            conn.close()
        n1 = c.restart(n1)
        ids = drain_all(new_owner, queue, 201, timeout=60)
        assert set(ids) == set(range(200)) | {1000}
        # n1 kept no copy: the queue is not served there.
        assert attach(n1, queue) != "local"
        c.wait_for(lambda: n1_holds_nothing(c, n1, queue), what="n1 to drop its copy")
    finally:
        c.stop()


def n1_holds_nothing(cluster, n1, queue):
    status = cluster.wlm_command("status").stdout
    line = next(l for l in status.splitlines() if l.strip().startswith("n1 "))
    return "messages=0" in line


def test_a_move_whose_target_refuses_a_message_for_good_is_abandoned_and_keeps_every_message():
    # n2 takes nothing over 2000 bytes: the large messages can never move.
    c = Cluster(n=2, wlm=FAST, node_broker={"n2": "max-message-size = 2000"})
    try:
        n1 = c.nodes[0]
        queue = owned_by(c, n1, "bigq")[0]
        conn = connect(n1)
        try:
            snd = conn.create_sender(queue)
            for i in range(6):  # large (5000 B) and small, interleaved
                snd.send(Message(id=i, body="x" * 5000 if i % 2 == 0 else "small-%d" % i, durable=True))
        finally:
            conn.close()
        out = c.wlm_command("move", queue, "n2", "--wait", "30")
        assert out.returncode == 1, out.stdout
        assert "move to n2 abandoned" in out.stderr, out.stderr
        assert "amqp:link:message-size-exceeded" in out.stderr, out.stderr
        assert c.owners()[queue] == ("n1", None)
        assert "message-size-exceeded" in c.wlm_command("status").stdout
        # n1 serves the queue again, and the move no longer blocks others.
        assert attach(n1, queue) == "local"
        # wharfctl's --wait stops with the reason too, rather than wait out
        # its deadline (the large messages are still there: abandoned again).
        started = time.monotonic()
        out = subprocess.run([os.path.join(os.path.dirname(WHARFD), "wharfctl"), "-b", n1.url, "move", queue,
                              "n2", "--wait", "30"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1, (out.stdout, out.stderr)
        assert "ended on n1" in out.stderr and "message-size-exceeded" in out.stderr, out.stderr
        assert time.monotonic() - started < 25, "waited out its deadline"
        ids = drain_all(n1, queue, 6)
        # Each message exactly once (what n2 took came back); the ones that
        # stayed at n1 in their order.
        assert sorted(ids) == list(range(6)), ids
        assert [i for i in ids if i % 2 == 0] == [0, 2, 4], ids
    finally:
        c.stop()


def test_a_move_back_to_the_owner_cancels_a_move_under_way():
    # n2's queues hold one message and reject the rest: the move retries.
    c = Cluster(n=2, wlm=FAST,
                node_broker={"n2": "[queue-defaults]\nmax-depth-messages = 1\noverflow-policy = \"reject\""})
    try:
        n1 = c.nodes[0]
        queue = owned_by(c, n1, "stuck")[0]
        fill(n1, queue, 5)
        out = c.wlm_command("move", queue, "n2", "--wait", "1")
        assert out.returncode == 1 and "still moving" in out.stderr, (out.stdout, out.stderr)
        out = c.wlm_command("move", queue, "n1")
        assert out.returncode == 0, out.stderr
        assert "cancelled" in out.stdout, out.stdout
        assert c.owners()[queue] == ("n1", None)
        assert "move to n2 cancelled" in c.wlm_command("status").stdout
        assert attach(n1, queue) == "local"
        ids = drain_all(n1, queue, 5)
        # The one n2 took comes back behind the ones that stayed, in order.
        assert sorted(ids) == list(range(5)), ids
        assert [i for i in ids if i != 0] == [1, 2, 3, 4], ids
    finally:
        c.stop()


def test_an_attach_to_a_queue_whose_owner_died_while_moving_it_is_refused_at_once():
    # n2's queues hold one message and reject the rest: the move stays under
    # way until n1 dies (park-timeout: the default 30 s).
    c = Cluster(n=2, wlm=FAST,
                node_broker={"n2": "[queue-defaults]\nmax-depth-messages = 1\noverflow-policy = \"reject\""})
    try:
        n1, n2 = c.nodes[0], c.nodes[1]
        queue = owned_by(c, n1, "orphaned")[0]
        fill(n1, queue, 3)
        assert c.wlm_command("move", queue, "n2").returncode == 0
        n1.kill()
        c.wait_for(lambda: c.members() == {"n2"}, what="n1's lease to lapse")
        started = time.monotonic()
        got = attach(n2, queue)  # the connection's own time-out is 10 s
        assert time.monotonic() - started < 5, "the attach waited for a move that cannot end"
        assert got != "local"
        assert got["condition"] == "amqp:link:detach-forced", got
        assert "owned by node n1, which is down" in got["description"], got
        assert "moving it to node n2" in got["description"], got
    finally:
        c.stop()


def test_a_drain_says_once_that_a_pinned_queue_has_nowhere_to_go():
    c = Cluster(n=2, wlm=dict(FAST, rules='["pinned-* -> node:n1"]'))
    try:
        n1 = c.nodes[0]
        pinned = ["pinned-%d" % i for i in range(4)]
        for q in pinned:
            assert attach(n1, q) == "local"
        free = owned_by(c, n1, "free", count=2)
        for q in free:
            fill(n1, q, 50)
        assert c.wlm_command("drain", "n1").returncode == 0
        # The free queues move (every tick walks while they do); the pinned
        # ones stay.
        c.wait_for(lambda: all(c.owners()[q] == ("n2", None) for q in free), what="the free queues to move")
        assert all(c.owners()[q] == ("n1", None) for q in pinned)
        log = n1.log()
        for q in pinned:
            assert log.count("queue '%s' has nowhere to go" % q) == 1, log[-2000:]
        # A new drain says it again.
        assert c.wlm_command("undrain", "n1").returncode == 0
        assert c.wlm_command("drain", "n1").returncode == 0
        c.wait_for(lambda: all(n1.log().count("queue '%s' has nowhere to go" % q) >= 2 for q in pinned),
                   what="the second drain to look at the pinned queues")
    finally:
        c.stop()
