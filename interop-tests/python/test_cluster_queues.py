"""wharf.queue across a cluster: any node shows every queue's figures (asked
of its owner), and changes a queue's settings, purges and deletes it, where
ever it lives. Settings are kept in the metadata store: they follow a move."""
import os
import signal

import pytest
from proton import Delivery, Message
from proton.utils import SendException

from cluster_util import Cluster, connect
from mgmt_client import Mgmt


@pytest.fixture
def cluster():
    c = Cluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:n2"]'})
    yield c
    c.stop()


def send(node, queue, n, prefix="m"):
    conn = connect(node)
    try:
        s = conn.create_sender(queue)
        for i in range(n):
            s.send(Message(id="%s%d" % (prefix, i), body="%s%d" % (prefix, i), durable=True))
    finally:
        conn.close()


def receive_all(node, queue, expected):
    conn = connect(node)
    got = []
    try:
        r = conn.create_receiver(queue, credit=expected)
        while len(got) < expected:
            got.append(r.receive(timeout=10).body)
            r.accept()
    finally:
        conn.close()
    return got


def read(node, queue):
    m = Mgmt(node.url)
    try:
        return m.call("READ", type="wharf.queue", name=queue)
    finally:
        m.close()


def test_every_node_shows_the_owners_figures(cluster):
    n1, n2, n3 = cluster.nodes
    send(n1, "figures", 5)
    for node in (n1, n2, n3):
        m = Mgmt(node.url)
        try:
            rows = {r["name"]: r for r in m.query("wharf.queue",
                                                  ["name", "node", "depth", "enqueued", "durable", "producers"])}
            assert rows["figures"] == {"name": "figures", "node": "n2", "depth": 5, "enqueued": 5, "durable": True,
                                       "producers": 0}
            status, _, body = m.call("READ", type="queue", name="figures")
            assert status == 200 and body["depth"] == 5 and body["node"] == "n2"
        finally:
            m.close()


def test_update_from_any_node_reaches_the_owner_and_follows_a_move(cluster):
    n1, n2, n3 = cluster.nodes
    send(n1, "limited", 4)
    m = Mgmt(n3.url)  # not the owner
    try:
        status, desc, body = m.call("UPDATE", type="wharf.queue", name="limited",
                                    body={"maxDepth": 5, "overflow": "reject", "deadLetterAddress": "limited-dlq"})
        assert status == 200, desc
        assert body["maxDepth"] == 5 and body["overflow"] == "reject" and body["node"] == "n2"
    finally:
        m.close()
    # The owner applies it within its poll interval; every node then shows it.
    cluster.wait_for(lambda: read(n1, "limited")[2].get("maxDepth") == 5, timeout=10, what="the owner to apply it")
    _, _, body = read(n1, "limited")
    assert body["overflow"] == "reject" and body["deadLetterAddress"] == "limited-dlq"
    # The limit holds at the owner: the 6th message is refused, whoever sends.
    send(n3, "limited", 1, prefix="fifth")
    with pytest.raises(SendException) as err:
        send(n1, "limited", 1, prefix="sixth")
    assert err.value.state == Delivery.REJECTED
    # Settings live in the metadata store: the new owner has them too.
    m = Mgmt(n1.url)
    try:
        status, desc, _ = m.call("MOVE", type="wharf.queue", name="limited", body={"node": "n3"})
        assert status == 200, desc
    finally:
        m.close()
    cluster.wait_for(lambda: cluster.owners()["limited"] == ("n3", None), what="the move")
    cluster.wait_for(lambda: read(n2, "limited")[2].get("depth") == 5, timeout=10, what="figures from n3")
    _, _, body = read(n2, "limited")
    assert body["node"] == "n3" and body["maxDepth"] == 5 and body["overflow"] == "reject"
    assert sorted(receive_all(n1, "limited", 5)) == sorted(["m0", "m1", "m2", "m3", "fifth0"])


def test_purge_and_delete_from_a_node_that_does_not_own_the_queue(cluster):
    n1, n2, n3 = cluster.nodes
    send(n1, "doomed", 3)
    m = Mgmt(n1.url)
    try:
        status, desc, body = m.call("PURGE", type="wharf.queue", name="doomed")
        assert status == 200 and body["purged"] == 3 and body["node"] == "n2", (status, desc, body)
        assert read(n3, "doomed")[2]["depth"] == 0
        send(n3, "doomed", 2)
        status, desc, _ = m.call("DELETE", type="wharf.queue", name="doomed")
        assert status == 204, desc
        names = [r["name"] for r in m.query("wharf.queue", ["name"])]
        assert "doomed" not in names
        status, desc, _ = m.call("DELETE", type="wharf.queue", name="doomed")
        assert status == 404 and "doomed" in desc
    finally:
        m.close()
    assert "doomed" not in cluster.owners()


def test_a_queue_made_again_after_delete_starts_with_fresh_settings(cluster):
    n1 = cluster.nodes[0]
    m = Mgmt(n1.url)
    try:
        status, desc, body = m.call("CREATE", type="wharf.queue", name="again", body={"node": "n1", "maxDepth": 1})
        assert status == 201 and body["maxDepth"] == 1, desc
        # Owned here and never used: a purge finds nothing, and says so.
        status, desc, body = m.call("PURGE", type="wharf.queue", name="again")
        assert status == 200 and body["purged"] == 0 and body["node"] == "n1", (status, desc, body)
        assert m.call("DELETE", type="wharf.queue", name="again")[0] == 204
        status, desc, body = m.call("CREATE", type="wharf.queue", name="again", body={"node": "n1"})
        assert status == 201 and "maxDepth" not in body, (status, desc, body)
    finally:
        m.close()
    send(n1, "again", 3)  # the old limit of 1 is gone with the old queue
    cluster.wait_for(lambda: read(n1, "again")[2].get("depth") == 3, what="three messages held")
    assert read(n1, "again")[2].get("maxDepth") in (None, 0)


def test_bad_updates_are_refused_with_the_setting_named(cluster):
    n1 = cluster.nodes[0]
    send(n1, "strict", 1)
    m = Mgmt(n1.url)
    try:
        cases = [({"maxDepth": "ten"}, "maxDepth"), ({"maxDepth": -1}, "maxDepth"),
                 ({"overflow": "sideways"}, "overflow"), ({"deadLetterAddress": 7}, "deadLetterAddress"),
                 ({"deadLetterAddress": "strict"}, "itself"), ({"maxdepth": 5}, "'maxdepth' is not a setting"),
                 ({"depth": 0}, "'depth' is not a setting"), ({}, "changes one of")]
        for args, named in cases:
            status, desc, _ = m.call("UPDATE", type="wharf.queue", name="strict", body=args)
            assert status == 400 and named in desc, (args, status, desc)
        status, desc, _ = m.call("UPDATE", type="wharf.queue", name="never-made", body={"maxDepth": 1})
        assert status == 404 and "never-made" in desc
    finally:
        m.close()


def test_a_down_owner_leaves_its_figures_empty_but_the_answer_comes(cluster):
    n1, n2, n3 = cluster.nodes
    send(n1, "orphan", 2)
    os.kill(n2.pid, signal.SIGSTOP)  # alive to the OS, silent to its peers: the worst case
    try:
        m = Mgmt(n1.url)
        try:
            # The answer comes within the client's wait for a reply (10 s):
            # a peer gets 2 s, and a silent one only costs its figures.
            rows = {r["name"]: r for r in m.query("wharf.queue", ["name", "node", "depth"])}
            assert rows["orphan"]["node"] == "n2" and rows["orphan"]["depth"] is None
        finally:
            m.close()
    finally:
        os.kill(n2.pid, signal.SIGCONT)


def test_any_node_lists_every_nodes_connections_and_closes_one_elsewhere(cluster):
    n1, n2, n3 = cluster.nodes
    client = connect(n3)
    try:
        client.create_receiver("watched")
        container = client.conn.container
        m = Mgmt(n1.url)
        try:
            conns = [r for r in m.query("wharf.connection", ["name", "node", "container"]) if r["container"] == container]
            assert len(conns) == 1 and conns[0]["node"] == "n3" and conns[0]["name"].startswith("n3/connection-")
            links = [r for r in m.query("wharf.link", ["name", "node", "connection", "address"])
                     if r["connection"] == conns[0]["name"]]
            assert [(r["node"], r["address"]) for r in links] == [("n3", "watched")]
            assert links[0]["name"].startswith(conns[0]["name"] + "/")
            # n1's own connection (this management client) keeps its plain name.
            assert any(r["node"] == "n1" and "/" not in r["name"] for r in m.query("wharf.connection", ["name", "node"]))
            status, desc, _ = m.call("DELETE", type="wharf.connection", name=conns[0]["name"], body={"reason": "test"})
            assert status == 204, desc
            status, desc, _ = m.call("DELETE", type="wharf.connection", name="n9/connection-1")
            assert status == 404 and "n9/connection-1" in desc
        finally:
            m.close()

        def closed():
            try:
                client.create_sender("after")
                return False
            except Exception:
                cond = client.conn.remote_condition
                return cond is not None and cond.name == "amqp:connection:forced" and "test" in cond.description
        cluster.wait_for(closed, timeout=10, what="n3 to close the connection")
    finally:
        try:
            client.close()
        except Exception:
            pass


def test_a_queue_is_not_deleted_while_it_moves_and_is_once_the_move_ends():
    # A long lease: n3 stays a live member while it is stopped, so the move
    # to it waits (state "moving") instead of being called off.
    c = Cluster(n=3, wlm={"lease-ttl": 10, "poll-interval": 0.05, "rules": '["* -> node:n2"]'})
    try:
        n1, n2, n3 = c.nodes
        send(n1, "in-transit", 3)
        m = Mgmt(n1.url)
        try:
            os.kill(n3.pid, signal.SIGSTOP)
            try:
                status, desc, body = m.call("MOVE", type="wharf.queue", name="in-transit", body={"node": "n3"})
                assert status == 200 and body["state"] == "moving", (status, desc, body)
                status, desc, _ = m.call("DELETE", type="wharf.queue", name="in-transit")
                assert status == 403 and "moving from n2 to n3" in desc, (status, desc)
                assert c.owners()["in-transit"] == ("n2", "n3")  # the refused DELETE changed nothing
            finally:
                os.kill(n3.pid, signal.SIGCONT)
            c.wait_for(lambda: c.owners()["in-transit"][1] is None, what="the move to end")
            status, desc, _ = m.call("DELETE", type="wharf.queue", name="in-transit")
            assert status == 204, (status, desc)
        finally:
            m.close()
        assert "in-transit" not in c.owners()
    finally:
        c.stop()
