"""Three wharfd nodes sharing one SQLite metadata file, with the wlm plugin
in redirect mode: every queue gets exactly one owner; the others redirect to
it."""
import os
import signal
import subprocess
import threading
import time

import pytest
from proton import Message
from proton.utils import LinkDetached

from cluster_util import Cluster, attach, connect, free_port
from wharfd_process import WHARFD

# These tests look at ownership through redirects (relay mode would hide it).
REDIRECT = {"mode": '"redirect"'}


@pytest.fixture
def cluster():
    c = Cluster(wlm=REDIRECT)
    yield c
    c.stop()


def test_thirty_queues_spread_evenly_over_three_nodes(cluster):
    first = cluster.nodes[0]
    counts = {n.node_id: 0 for n in cluster.nodes}
    for i in range(30):
        got = attach(first, "spread-%d" % i)
        if got == "local":
            counts[first.node_id] += 1
        else:
            assert got["condition"] == "amqp:link:redirect", got
            counts[cluster.by_port[int(got["info"]["port"])].node_id] += 1
    assert sum(counts.values()) == 30
    assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_redirect_names_the_owner_and_the_owner_serves(cluster):
    first = cluster.nodes[0]
    for i in range(10):  # find a queue that lives elsewhere
        queue = "elsewhere-%d" % i
        got = attach(first, queue)
        if got != "local":
            break
    assert got != "local"
    info = got["info"]
    assert got["condition"] == "amqp:link:redirect"
    assert info["hostname"] == "127.0.0.1" and info["network-host"] == "127.0.0.1"
    assert info["address"] == queue
    assert "attach there" in got["description"]
    owner = cluster.by_port[int(info["port"])]
    # Following the redirect works: the owner serves the queue.
    conn = connect(owner)
    try:
        conn.create_sender(queue).send(Message(body="found you"))
        rcv = conn.create_receiver(queue, credit=1)
        assert rcv.receive(timeout=10).body == "found you"
        rcv.accept()
    finally:
        conn.close()
    # Every other node sends clients to the same owner.
    for n in cluster.nodes:
        if n is not owner:
            assert int(attach(n, queue)["info"]["port"]) == owner.port


def test_same_queue_at_all_nodes_at_once_gets_one_owner(cluster):
    for round_ in range(5):
        queue = "race-%d" % round_
        barrier = threading.Barrier(len(cluster.nodes))
        results = {}

        def go(node):
            conn = connect(node)  # connect first, so the attaches start together
            barrier.wait()
            try:
                conn.create_receiver(queue).close()
                results[node.node_id] = ("local", node.port)
            except LinkDetached as e:
                cond = e.link.remote_condition
                results[node.node_id] = (cond.name, int(cond.info["port"]))
            finally:
                conn.close()

        threads = [threading.Thread(target=go, args=(n,)) for n in cluster.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        locals_ = [k for k, v in results.items() if v[0] == "local"]
        assert len(locals_) == 1, results
        owner_port = results[locals_[0]][1]
        assert all(v[1] == owner_port for v in results.values()), results


def test_a_node_that_loses_its_lease_detaches_its_links_and_rejoins():
    c = Cluster(wlm=dict(REDIRECT, **{"lease-ttl": 1, "poll-interval": 0.05}))
    try:
        n1, n2 = c.nodes[0], c.nodes[1]
        queue = None
        for i in range(20):
            if attach(n1, "lease-%d" % i) == "local":
                queue = "lease-%d" % i
                break
        assert queue
        conn = connect(n1)
        rcv = conn.create_receiver(queue, credit=10)
        os.kill(n1.pid, signal.SIGSTOP)  # n1 stops renewing its lease
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                got = attach(n2, queue)
                if got != "local" and got["condition"] == "amqp:link:detach-forced":
                    break
                time.sleep(0.1)  # poll interval; the condition is checked with a deadline
            assert "which is down" in got["description"], got
        finally:
            os.kill(n1.pid, signal.SIGCONT)
        # n1 finds its lease gone: its consumer is detached, saying why.
        with pytest.raises(LinkDetached) as err:
            rcv.receive(timeout=15)
        assert "amqp:link:detach-forced" in str(err.value)
        assert "lost its cluster membership" in str(err.value)
        conn.close()
        # It rejoins and serves its queue again.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and attach(n1, queue) != "local":
            time.sleep(0.1)
        assert attach(n1, queue) == "local"
    finally:
        c.stop()


def test_wlm_config_errors_stop_the_node_naming_the_key(tmp_path):
    res = subprocess.run([WHARFD, "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d"),
                          "--plugin", "wlm"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "metadata" in res.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text("plugins = [\"wlm\"]\nmetadata = \"sqlite:%s\"\n[plugin.wlm]\nplacement = \"random\"\n"
                   % (tmp_path / "m.db"))
    res = subprocess.run([WHARFD, "--listen", "127.0.0.1:%d" % free_port(), "--data-dir",
                          str(tmp_path / "d2"), "--config", str(cfg)],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    assert "plugin.wlm.placement" in res.stderr
    # Durations must be finite and at most a year (1e10 s used to overflow
    # into "reassign at once").
    for value in ("1e10", "inf", "1e300"):
        cfg.write_text("plugins = [\"wlm\"]\nmetadata = \"sqlite:%s\"\n[plugin.wlm]\nreassign-after = %s\n"
                       % (tmp_path / "m.db", value))
        res = subprocess.run([WHARFD, "--listen", "127.0.0.1:%d" % free_port(), "--data-dir",
                              str(tmp_path / "d3"), "--config", str(cfg)],
                             capture_output=True, text=True, timeout=30)
        assert res.returncode == 2, (value, res.stderr)
        assert "plugin.wlm.reassign-after" in res.stderr and "more than a year" in res.stderr, res.stderr


def test_anonymous_relay_never_makes_a_second_owner(cluster):
    first = cluster.nodes[0]
    # A queue that lives elsewhere.
    for i in range(10):
        queue = "anon-%d" % i
        got = attach(first, queue)
        if got != "local":
            break
    conn = connect(first)
    try:
        anon = conn.create_sender(None)
        from proton.utils import SendException
        with pytest.raises(SendException):
            anon.send(Message(address=queue, body="wrong node"))
    finally:
        conn.close()
    owner = cluster.by_port[int(got["info"]["port"])]
    # Still exactly one owner, and the message was not queued at the first node.
    assert attach(owner, queue) == "local"
    assert attach(first, queue) != "local"
