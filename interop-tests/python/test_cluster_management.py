"""Management of a cluster: any node answers for the whole cluster's nodes
and queue owners, and moves and drains queues through the metadata store."""
import pytest
from proton import Message

from cluster_util import Cluster, connect
from mgmt_client import Mgmt


@pytest.fixture
def cluster():
    c = Cluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:n2"]'})
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
        assert m.call("REBALANCE", type="placement", name="placement")[0] == 501
    finally:
        m.close()


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
