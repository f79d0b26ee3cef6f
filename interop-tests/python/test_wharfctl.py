"""wharfctl end to end: the command-line tool against a real wharfd and a
three-node cluster, through the $management node of whichever node it asks."""
import json
import os
import subprocess
import time

import pytest
from proton import Message
from proton.utils import BlockingConnection

from cluster_util import Cluster, connect, free_port
from test_cluster_moves import Consumer, Producer
from wharfd_process import WHARFD

WHARFCTL = os.path.join(os.path.dirname(WHARFD), "wharfctl") if WHARFD else ""


def wharfctl(node_url, *args, timeout=60):
    cmd = [WHARFCTL] + (["-b", node_url] if node_url else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def ok_json(node_url, *args):
    out = wharfctl(node_url, *args, "--json")
    assert out.returncode == 0, (args, out.returncode, out.stderr)
    return json.loads(out.stdout)


def rows(body):
    return [dict(zip(body["attributeNames"], r)) for r in body["results"]]


def send(url, queue, n):
    c = BlockingConnection(url, timeout=10, sasl_enabled=False)
    try:
        s = c.create_sender(queue)
        for i in range(n):
            s.send(Message(id=i, body="m%d" % i, durable=True))
    finally:
        c.close()


def wait_for(cond, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)  # poll interval; the deadline bounds the wait
    raise AssertionError("timed out waiting for " + what)


# ---- one node --------------------------------------------------------------------

def test_query_queue_shows_what_was_sent(wharfd):
    send(wharfd.url, "ctl-orders", 4)
    q = {r["name"]: r for r in rows(ok_json(wharfd.url, "query", "queue"))}
    assert q["ctl-orders"]["depth"] == 4 and q["ctl-orders"]["enqueued"] == 4
    only = ok_json(wharfd.url, "query", "wharf.queue", "--attrs", "name,depth")
    assert only["attributeNames"] == ["name", "depth"] and ["ctl-orders", 4] in only["results"]
    table = wharfctl(wharfd.url, "query", "queue", "--attrs", "name,depth")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split() == ["name", "depth"]
    assert any(line.split() == ["ctl-orders", "4"] for line in table.stdout.splitlines())


def test_read_and_status_on_a_single_node(wharfd):
    send(wharfd.url, "ctl-read", 2)
    entity = ok_json(wharfd.url, "read", "queue", "ctl-read")
    assert entity["name"] == "ctl-read" and entity["depth"] == 2
    out = wharfctl(wharfd.url, "status")
    assert out.returncode == 0, out.stderr
    assert "single node" in out.stdout and "ctl-read" in out.stdout and "$dynamic" not in out.stdout
    status = ok_json(wharfd.url, "status")
    assert status["cluster"] is False and [q["depth"] for q in status["queues"] if q["name"] == "ctl-read"] == [2]


def test_errors_from_the_node_exit_1_with_the_status(wharfd):
    out = wharfctl(wharfd.url, "read", "queue", "no-such-queue")
    assert out.returncode == 1 and "404" in out.stderr and "no-such-queue" in out.stderr, out.stderr
    out = wharfctl(wharfd.url, "query", "wharf.nothing")
    assert out.returncode == 1 and out.stderr.startswith("wharfctl: 404 "), out.stderr
    out = wharfctl(wharfd.url, "create", "connection", "c1")
    assert out.returncode == 1 and "501" in out.stderr, out.stderr
    out = wharfctl(wharfd.url, "update", "queue", "no-such-queue", "maxDepth=10")
    assert out.returncode == 1 and "404" in out.stderr, out.stderr
    out = wharfctl(wharfd.url, "query", "queue", "--attrs", "name,bogus")
    assert out.returncode == 1 and "400" in out.stderr and "bogus" in out.stderr
    out = wharfctl(wharfd.url, "rebalance")
    assert out.returncode == 1 and "404" in out.stderr and "cannot rebalance" in out.stderr, out.stderr


def test_unreachable_broker_exits_3_naming_it():
    port = free_port()  # nothing listens there
    out = wharfctl("127.0.0.1:%d" % port, "status", "--timeout", "5")
    assert out.returncode == 3, (out.returncode, out.stderr)
    assert "127.0.0.1:%d" % port in out.stderr


def test_bad_usage_exits_2(wharfd):
    assert wharfctl(wharfd.url).returncode == 2                          # no command
    assert wharfctl(wharfd.url, "frobnicate").returncode == 2
    assert wharfctl(wharfd.url, "read", "queue").returncode == 2          # no name
    assert wharfctl(wharfd.url, "status", "--timeout", "-1").returncode == 2
    assert wharfctl(wharfd.url, "update", "queue", "q", "novalue").returncode == 2
    assert wharfctl("not a url:x", "status").returncode == 2
    help_ = wharfctl(None, "--help")
    assert help_.returncode == 0 and "move" in help_.stdout


# ---- a cluster ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster():
    c = Cluster(n=3, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["ctl-* -> node:n2"]'})
    yield c
    c.stop()


def owner_of(node, queue):
    return {r["name"]: r for r in rows(ok_json(node.url, "query", "owner"))}.get(queue)


def test_status_lists_every_node(cluster):
    n1 = cluster.nodes[0]
    send(n1.url, "ctl-status", 3)
    status = ok_json(n1.url, "status")
    assert status["cluster"] is True
    assert sorted(n["name"] for n in status["nodes"]) == ["n1", "n2", "n3"]
    q = next(q for q in status["queues"] if q["name"] == "ctl-status")
    assert q["node"] == "n2" and q["depth"] == 3  # n1 asked n2, the owner
    at_owner = ok_json(cluster.node("n2").url, "status")
    assert next(q for q in at_owner["queues"] if q["name"] == "ctl-status")["depth"] == 3
    text = wharfctl(n1.url, "status")
    assert text.returncode == 0 and "cluster of 3 nodes" in text.stdout
    lines = text.stdout.splitlines()
    assert sum(1 for line in lines if line.split()[:1] in (["n1"], ["n2"], ["n3"])) == 3


def test_query_owner_from_another_node(cluster):
    n1, n2, n3 = cluster.nodes
    send(n2.url, "ctl-seen", 1)
    for node in (n1, n3):
        seen = owner_of(node, "ctl-seen")
        assert seen and seen["node"] == "n2" and seen["state"] == "active"


def test_move_with_wait_then_drain(cluster):
    n1 = cluster.nodes[0]
    send(n1.url, "ctl-moved", 10)
    assert owner_of(n1, "ctl-moved")["node"] == "n2"
    out = wharfctl(n1.url, "move", "ctl-moved", "n3", "--wait", "30")
    assert out.returncode == 0, out.stderr
    assert "is on n3" in out.stdout
    after = owner_of(cluster.node("n2"), "ctl-moved")
    assert after["node"] == "n3" and after["state"] == "active"
    assert ok_json(cluster.node("n3").url, "read", "queue", "ctl-moved")["depth"] == 10

    out = wharfctl(n1.url, "move", "ctl-moved", "n9")
    assert out.returncode == 1 and "403" in out.stderr and "n9" in out.stderr

    out = wharfctl(n1.url, "drain", "n3")
    assert out.returncode == 0 and "draining" in out.stdout, out.stderr
    try:
        wait_for(lambda: (lambda o: o["node"] != "n3" and o["state"] == "active")(owner_of(n1, "ctl-moved")),
                 what="the drain to move ctl-moved off n3")
        nodes = {n["name"]: n for n in rows(ok_json(n1.url, "query", "node"))}
        assert nodes["n3"]["draining"] is True
    finally:
        out = wharfctl(n1.url, "undrain", "n3")
        assert out.returncode == 0 and "no longer draining" in out.stdout, out.stderr
    # Every message travelled with the queue.
    c = connect(n1)
    try:
        r = c.create_receiver("ctl-moved", credit=20)
        got = set()
        while len(got) < 10:
            got.add(r.receive(timeout=10).id)
            r.accept()
        assert got == set(range(10))
    finally:
        c.close()


def test_create_a_queue_on_a_chosen_node_and_see_it_from_another(cluster):
    n1, n2, n3 = cluster.nodes
    # n1 learns of its peers (and of n3's undrain in an earlier test) within a poll interval.
    out = wait_for(lambda: (lambda o: o if "not a live member" not in o.stderr and "draining" not in o.stderr
                            else None)(
        wharfctl(n1.url, "create", "queue", "ctl-made", "node=n3", "maxDepth=500", "--json")),
        timeout=10, what="n1 to know n3")
    assert out.returncode == 0, out.stderr
    made = json.loads(out.stdout)
    assert made["node"] == "n3" and made["maxDepth"] == 500
    send(n1.url, "ctl-made", 2)  # through n1, stored at n3

    def seen_from_n2():
        seen = {r["name"]: r for r in rows(ok_json(n2.url, "query", "queue", "--attrs", "name,node,depth,maxDepth"))}
        return seen.get("ctl-made")
    # n3 applies the settings within its poll interval of the queue's first use.
    wait_for(lambda: (seen_from_n2() or {}).get("maxDepth") == 500, timeout=10, what="n3 to apply maxDepth")
    assert seen_from_n2() == {"name": "ctl-made", "node": "n3", "depth": 2, "maxDepth": 500}
    out = wharfctl(n2.url, "create", "queue", "ctl-made", "node=n1")
    assert out.returncode == 1 and "403" in out.stderr and "exists" in out.stderr


def test_move_under_load_loses_nothing(cluster):
    n1, n2, n3 = cluster.nodes
    count = 1000
    producer = Producer(cluster, n1, "ctl-load", count)  # relayed to the owner, n2
    consumer = Consumer(cluster, n3, "ctl-load", count)
    producer.start()
    consumer.start()
    wait_for(lambda: consumer.distinct() >= count // 4, what="traffic before the move")
    out = wharfctl(n1.url, "move", "ctl-load", "n3", "--wait", "30")
    assert out.returncode == 0, out.stderr
    producer.join(timeout=150)
    consumer.join(timeout=150)
    assert producer.error is None, producer.error
    assert set(consumer.order) == set(range(count))
    assert owner_of(n2, "ctl-load")["node"] == "n3"


def test_a_route_change_steers_new_queues(cluster):
    n1, n2, n3 = cluster.nodes
    out = wharfctl(n2.url, "create", "route", "ctl-routed-*", "node=n1")
    assert out.returncode == 0, out.stderr
    try:
        send(n3.url, "ctl-routed-a", 1)
        assert owner_of(n3, "ctl-routed-a")["node"] == "n1"
        updated = ok_json(n3.url, "update", "route", "ctl-routed-*", "node=n3")
        assert updated["node"] == "n3"

        # Every node follows within its poll interval: a new queue lands on n3.
        def lands_on_n3():
            name = "ctl-routed-%d" % int(time.monotonic() * 1000)
            send(n1.url, name, 1)
            return owner_of(n1, name)["node"] == "n3"
        wait_for(lands_on_n3, timeout=10, what="new queues to follow the route")
        assert owner_of(n1, "ctl-routed-a")["node"] == "n1"  # placed before: stays
    finally:
        wharfctl(n2.url, "delete", "route", "ctl-routed-*")


def test_close_a_connection(cluster):
    n2 = cluster.node("n2")
    c = BlockingConnection(n2.url, timeout=10, sasl_enabled=False, container=None)
    try:
        container = c.conn.container
        conns = rows(ok_json(n2.url, "query", "connection"))
        mine = next(r for r in conns if r["container"] == container)
        out = wharfctl(n2.url, "delete", "connection", mine["name"])
        assert out.returncode == 0 and "204" in out.stdout, out.stderr

        def closed_by_node():
            try:
                c.create_sender("ctl-after-close")
                return False
            except Exception:
                cond = c.conn.remote_condition
                return cond is not None and cond.name == "amqp:connection:forced"
        wait_for(closed_by_node, timeout=10, what="the connection to be closed")
    finally:
        try:
            c.close()
        except Exception:
            pass
    wait_for(lambda: mine["name"] not in [r["name"] for r in rows(ok_json(n2.url, "query", "connection"))],
             timeout=10, what="the connection to leave the list")


def test_rebalance_dry_run_plans_without_moving(cluster):
    n1 = cluster.nodes[0]
    before = {r["name"]: r["node"] for r in rows(ok_json(n1.url, "query", "owner"))}
    plan = ok_json(n1.url, "rebalance", "--dry-run", "--max", "2")
    assert plan["dryRun"] is True and 0 <= plan["moves"] <= 2, plan
    assert {r["name"]: r["node"] for r in rows(ok_json(n1.url, "query", "owner"))} == before
    out = wharfctl(n1.url, "rebalance", "--max", "0")
    assert out.returncode == 2 and "max" in out.stderr


def test_status_shows_a_dead_owner():
    c = Cluster(n=2, wlm={"lease-ttl": 1, "poll-interval": 0.05, "rules": '["* -> node:n2"]'})
    try:
        n1, n2 = c.nodes
        send(n1.url, "ctl-orphan", 1)
        n2.kill()

        def shows_down():
            status = ok_json(n1.url, "status")
            nodes = {n["name"]: n["state"] for n in status["nodes"]}
            q = next(q for q in status["queues"] if q["name"] == "ctl-orphan")
            return nodes.get("n2") == "down" and q["nodeState"] == "down"
        wait_for(shows_down, what="n2 to be seen down")
        text = wharfctl(n1.url, "status")
        assert any(line.split()[:3] == ["ctl-orphan", "n2", "owner"] for line in text.stdout.splitlines()), text.stdout
    finally:
        c.stop()
