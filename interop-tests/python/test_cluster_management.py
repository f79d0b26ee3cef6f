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
        status, desc, body = m.call("MOVE", type="wharf.owner", name="managed", body={"node": "n3"})
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
