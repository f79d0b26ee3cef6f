"""Management of a cluster: any node answers for the whole cluster's nodes
and queue owners, moves and drains queues through the metadata store, and
rebalances them."""
import collections
import time

import pytest
from proton import Message, float32

from cluster_util import Cluster, connect
from mgmt_client import Mgmt


@pytest.fixture
def cluster():
    c = Cluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:n2"]'})
    yield c
    c.stop()


@pytest.fixture
def free_cluster():
    """No rules: placement and REBALANCE may use every node."""
    c = Cluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05})
    yield c
    c.stop()


def test_any_node_shows_every_node_and_every_owner(cluster):
    n1 = cluster.nodes[0]
    conn = connect(n1)
    try:
        conn.create_sender("seen-everywhere").send(Message(body="x", durable=True))
    finally:
        conn.close()
    for node in cluster.nodes:
        m = Mgmt(node.url)
        try:
            nodes = {r["name"]: r for r in m.query("wharf.node")}
            assert set(nodes) == {"n1", "n2", "n3"} and all(r["state"] == "active" for r in nodes.values())
            owners = {r["name"]: r for r in m.query("owner", ["name", "node", "epoch", "reason"])}
            assert owners["seen-everywhere"]["node"] == "n2"
            assert "rule '*' -> node n2" in owners["seen-everywhere"]["reason"]
            # wharf.queue: the owner record merged with the owner node's figures.
            queues = {r["name"]: r for r in m.query("queue", ["name", "node", "epoch", "depth"])}
            q = queues["seen-everywhere"]
            assert q["node"] == "n2" and q["epoch"] == 1
            assert q["depth"] == 1  # from n2, asked by whichever node answers
        finally:
            m.close()


def test_move_and_drain_through_management(cluster):
    n1, n2, n3 = cluster.nodes
    conn = connect(n1)
    try:
        snd = conn.create_sender("managed")
        for i in range(20):
            snd.send(Message(id=i, body="m%d" % i, durable=True))
    finally:
        conn.close()
    m = Mgmt(n3.url)  # any node will do
    try:
        status, desc, body = m.call("MOVE", type="wharf.queue", name="managed", body={"node": "n3"})
        assert status == 200 and body["state"] == "moving" and body["to"] == "n3", (status, desc)
        cluster.wait_for(lambda: cluster.owners()["managed"] == ("n3", None), what="the move to end")
        status, desc, _ = m.call("MOVE", type="wharf.owner", name="managed", body={"node": "n9"})
        assert status == 403 and "n9" in desc
        status, desc, _ = m.call("MOVE", type="wharf.owner", name="managed")
        assert status == 400 and "node" in desc
        status, desc, body = m.call("DRAIN", type="wharf.node", name="n3")
        assert status == 200 and body["draining"] is True
        cluster.wait_for(lambda: cluster.owners()["managed"][0] != "n3" and cluster.owners()["managed"][1] is None,
                         what="the drain to move the queue away")
        assert m.call("UNDRAIN", type="wharf.node", name="n3")[0] == 200
        status, _, body = m.call("UPDATE", type="node", name="n1", body={"state": "draining"})
        assert status == 200 and body["draining"] is True
        assert m.call("UPDATE", type="node", name="n1", body={"state": "active"})[0] == 200
        status, desc, _ = m.call("UPDATE", type="node", name="n1", body={"state": "sleepy"})
        assert status == 400 and "draining" in desc
    finally:
        m.close()
    # Every message travelled with the queue.
    conn = connect(n1)
    try:
        r = conn.create_receiver("managed", credit=50)
        got = set()
        while len(got) < 20:
            got.add(r.receive(timeout=10).id)
            r.accept()
        assert got == set(range(20))
    finally:
        conn.close()


def test_routes_decide_placement_and_mode_on_every_node(cluster):
    from cluster_util import attach
    n1, n2, n3 = cluster.nodes
    m = Mgmt(n2.url)
    try:
        status, desc, body = m.call("CREATE", type="wharf.route", name="fast.*",
                                    body={"node": "n3", "mode": "redirect"})
        assert status == 201 and body["node"] == "n3" and body["mode"] == "redirect", (status, desc)
        # Every node follows within a poll interval: n1 now redirects fast.* to n3.
        got = cluster.wait_for(lambda: (lambda a: a if a != "local" and a["condition"] == "amqp:link:redirect"
                                        else None)(attach(n1, "fast.1")), what="n1 to follow the route")
        assert int(got["info"]["port"]) == n3.port
        assert cluster.owners()["fast.1"][0] == "n3"
        status, _, body = m.call("UPDATE", type="wharf.route", name="fast.*", body={"node": "n1", "mode": "relay"})
        assert status == 200 and body["node"] == "n1"
        cluster.wait_for(lambda: attach(n2, "fast.2") == "local", what="relay mode for fast.*")
        assert cluster.owners()["fast.2"][0] == "n1"
        routes = m.query("route")
        assert routes == [{"name": "fast.*", "pattern": "fast.*", "node": "n1", "group": None, "mode": "relay"}]
        for body, status, words in [({}, 400, "node"), ({"node": "n1", "group": "g"}, 400, "not both"),
                                    ({"node": 3}, 400, "node"), ({"group": "eu", "mode": "teleport"}, 400, "mode")]:
            got = m.call("CREATE", type="wharf.route", name="other.*", body=body)
            assert got[0] == status and words in got[1], (body, got)
        assert m.call("CREATE", type="wharf.route", name="fast.*", body={"node": "n2"})[0] == 403
        assert m.call("DELETE", type="wharf.route", name="fast.*")[0] == 204
        assert m.call("READ", type="wharf.route", name="fast.*")[0] == 404
        assert m.call("DELETE", type="wharf.route", name="fast.*")[0] == 404
    finally:
        m.close()


def test_the_placement_policy_is_read_and_changed_through_management(cluster):
    m = Mgmt(cluster.nodes[0].url)
    try:
        status, _, body = m.call("READ", type="wharf.placement", name="placement")
        assert status == 200 and body["policy"] == "least-loaded" and body["source"] == "config"
        status, _, body = m.call("UPDATE", type="placement", name="placement", body={"policy": "round-robin"})
        assert status == 200 and body["policy"] == "round-robin"
        assert m.call("READ", type="wharf.placement", name="placement")[2]["source"] == "management"
        status, desc, _ = m.call("UPDATE", type="placement", name="placement", body={"policy": "random"})
        assert status == 400 and "random" in desc
    finally:
        m.close()


def test_nodes_show_lease_expiry_and_load_score(cluster):
    conn = connect(cluster.nodes[0])
    try:
        conn.create_sender("scored").send(Message(body="x", durable=True))  # the rule puts it on n2
    finally:
        conn.close()
    m = Mgmt(cluster.nodes[2].url)
    try:
        before_ms = time.time() * 1000
        nodes = {r["name"]: r for r in m.query("wharf.node")}
        weights = m.call("READ", type="wharf.placement", name="placement")[2]
    finally:
        m.close()
    owned = collections.Counter(node for node, _ in cluster.owners().values())
    assert owned["n2"] >= 1
    for r in nodes.values():
        # Live members: the lease lapses in the future (lease-ttl is 1 s, renewed every third of it).
        assert before_ms < r["leaseExpiry"] < before_ms + 5000, r
        # The score placement uses: queues owned, messages and connections, weighted.
        expected = (owned[r["name"]] * float(weights["weightQueues"]) +
                    r["messages"] * float(weights["weightMessages"]) +
                    r["connections"] * float(weights["weightConnections"]))
        assert float(r["loadScore"]) == pytest.approx(expected), r


def test_placement_weights_are_read_and_changed_and_every_node_places_with_them(free_cluster):
    n1, n2, n3 = free_cluster.nodes
    m1, m3 = Mgmt(n1.url), Mgmt(n3.url)
    try:
        status, _, body = m1.call("READ", type="wharf.placement", name="placement")
        assert status == 200
        assert (body["weightQueues"], body["weightMessages"], body["weightMessageRate"], body["weightConnections"],
                body["weightsSource"]) == ("1.0", "0.001", "0.01", "0.1", "config")
        for bad in [{"weightConnections": -1}, {"weightQueues": "heavy"}, {"weightMessages": True}]:
            status, desc, _ = m1.call("UPDATE", type="placement", name="placement", body=bad)
            assert status == 400 and list(bad)[0] in desc, (bad, status, desc)
        assert m1.call("READ", type="wharf.placement", name="placement")[2]["weightsSource"] == "config"

        assert m1.call("CREATE", type="wharf.queue", name="weighed", body={"node": "n1"})[0] == 201
        status, desc, body = m1.call("UPDATE", type="placement", name="placement",
                                     body={"weightQueues": 1000, "weightMessages": 0.5})
        assert status == 200, (status, desc)
        assert (body["weightQueues"], body["weightMessages"], body["weightsSource"]) == ("1000.0", "0.5", "management")
        assert body["weightConnections"] == "0.1"  # not given: kept
        # An AMQP float is the number its sender wrote (0.3, not the
        # 0.30000001192092896 its binary form is), and a negative one is refused.
        status, desc, body = m1.call("UPDATE", type="placement", name="placement",
                                     body={"weightMessageRate": float32(0.3)})
        assert status == 200 and body["weightMessageRate"] == "0.3", (status, desc, body)
        status, desc, _ = m1.call("UPDATE", type="placement", name="placement", body={"weightQueues": -2.5})
        assert status == 400 and "weightQueues" in desc and "-2.5" in desc, (status, desc)

        # n3 places with the new weights: n1's one queue now scores over 1000.
        probes = iter(range(1000))

        def placed_with_new_weights():
            status, desc, body = m3.call("CREATE", type="queue", name="probe-%d" % next(probes))
            assert status == 201, (status, desc)
            return "n1=100" in body["reason"] and body["node"] != "n1"
        free_cluster.wait_for(placed_with_new_weights, what="n3 to place with the new weights")
    finally:
        m1.close()
        m3.close()


def test_rebalance_evens_out_queues_made_on_one_node_without_losing_a_message(free_cluster):
    n1, n2, n3 = free_cluster.nodes
    queues = ["rb-%d" % i for i in range(9)]
    m3 = Mgmt(n3.url)
    try:
        for q in queues:
            status, desc, _ = m3.call("CREATE", type="wharf.queue", name=q, body={"node": "n1"})
            assert status == 201, (q, status, desc)
    finally:
        m3.close()
    conn = connect(n1)
    try:
        for q in queues:
            snd = conn.create_sender(q)
            for i in range(5):
                snd.send(Message(id="%s/%d" % (q, i), body="m", durable=True))
    finally:
        conn.close()

    def counts():
        owners = {q: o for q, o in free_cluster.owners().items() if q in queues}
        if any(moving for _, moving in owners.values()):
            return None
        return collections.Counter(node for node, _ in owners.values())

    m2 = Mgmt(n2.url)  # any node will do
    try:
        status, desc, body = m2.call("REBALANCE", type="wharf.placement", name="placement", body={"dryRun": True})
        assert status == 200 and body["moves"] == 6 and body["dryRun"] is True, (status, desc, body)
        assert counts() == {"n1": 9}  # a dry run only plans
        status, desc, _ = m2.call("REBALANCE", type="wharf.placement", name="placement", body={"max": 0})
        assert status == 400 and "max" in desc
        status, desc, body = m2.call("REBALANCE", type="wharf.placement", name="placement")
        assert status == 200 and body["moves"] == 6, (status, desc, body)
        moves = body["plan"].split(",")
        assert len(moves) == 6 and all(mv.split(":")[1].startswith("n1->") for mv in moves), body["plan"]
    finally:
        m2.close()
    final = free_cluster.wait_for(lambda: (lambda c: c if c and max(c.values()) - min(c.values()) <= 1 and
                                           len(c) == 3 else None)(counts()),
                                  what="the moves to even out the queues")
    assert sorted(final.values()) == [3, 3, 3]
    # Every message travelled with its queue.
    conn = connect(n1)
    try:
        got = set()
        for q in queues:
            r = conn.create_receiver(q, credit=10)
            for _ in range(5):
                got.add(r.receive(timeout=10).id)
                r.accept()
            r.close()
        assert got == {"%s/%d" % (q, i) for q in queues for i in range(5)}
    finally:
        conn.close()


def test_create_a_queue_on_a_chosen_node_and_see_it_from_another(cluster):
    n1, n2, n3 = cluster.nodes
    m3, m2 = Mgmt(n3.url), Mgmt(n2.url)
    try:
        status, desc, body = m3.call("CREATE", type="wharf.queue", name="made-here", body={"node": "n1"})
        assert status == 201 and body["node"] == "n1", (status, desc)
        seen = {r["name"]: r for r in m2.query("queue", ["name", "node", "reason"])}
        assert seen["made-here"]["node"] == "n1" and "created by management" in seen["made-here"]["reason"]
        assert m3.call("CREATE", type="wharf.queue", name="made-here", body={"node": "n2"})[0] == 403
        status, desc, _ = m3.call("CREATE", type="wharf.queue", name="nowhere", body={"node": "n9"})
        assert status == 403 and "n9" in desc
        status, _, body = m3.call("CREATE", type="queue", name="placed")  # placement decides: the rule says n2
        assert status == 201 and body["node"] == "n2"
    finally:
        m3.close()
        m2.close()
    # A message sent through n2 lands at n1, which holds it.
    conn = connect(n2)
    try:
        conn.create_sender("made-here").send(Message(body="kept at n1", durable=True))
    finally:
        conn.close()
    m1 = Mgmt(n1.url)
    try:
        assert m1.call("READ", type="wharf.queue", name="made-here")[2]["depth"] == 1
    finally:
        m1.close()
