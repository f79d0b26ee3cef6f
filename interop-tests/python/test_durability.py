"""Durable queues through Python Proton: clean restarts and kill -9."""
import random
import threading
import time

from proton import Message
from proton.utils import BlockingConnection

from wharfd_process import Wharfd


def connect(node):
    return BlockingConnection(node.url, timeout=10, sasl_enabled=False)


def drain(node, address, expect=None, quiet=1.0):
    """Receives (and accepts) everything on `address` until nothing arrives
    for `quiet` seconds (or `expect` messages came); returns the messages."""
    conn = connect(node)
    try:
        rcv = conn.create_receiver(address, credit=500)
        got = []
        while expect is None or len(got) < expect:
            try:
                m = rcv.receive(timeout=quiet)
            except Exception:  # proton.Timeout: the queue is empty
                break
            got.append(m)
            rcv.accept()
        return got
    finally:
        conn.close()


def test_clean_restart_keeps_messages_order_counts_and_dead_letters(make_wharfd):
    node = make_wharfd()
    conn = connect(node)
    snd = conn.create_sender("orders")
    for i in range(10):
        snd.send(Message(body="order-%d" % i, durable=True))
    snd.send(Message(body="transient", durable=False))
    conn.create_sender("poison").send(Message(body="poison", durable=True))
    conn.create_sender("dc").send(Message(body="counted", durable=True))
    # poison: taken once and lost with its connection (count 1), then rejected.
    c1 = connect(node)
    c1.create_receiver("poison", credit=1).receive(timeout=10)
    c1.close()
    rcv = conn.create_receiver("poison", credit=1)
    assert rcv.receive(timeout=10).delivery_count == 1
    rcv.reject()
    # dc: taken and lost with its connection: delivery-count 1 from now on.
    c2 = connect(node)
    c2.create_receiver("dc", credit=1).receive(timeout=10)
    c2.close()
    conn.close()
    data = node.data_dir
    assert node.stop() == 0

    node2 = make_wharfd(data_dir=data)
    got = drain(node2, "orders", expect=10)
    assert [m.body for m in got] == ["order-%d" % i for i in range(10)]
    dead = drain(node2, "DLQ", expect=1)
    assert [m.body for m in dead] == ["poison"]
    assert dead[0].delivery_count == 1
    counted = drain(node2, "dc", expect=1)
    assert counted[0].delivery_count == 1
    assert counted[0].first_acquirer is False
    # The non-durable message is gone, as documented.
    assert drain(node2, "orders", quiet=0.5) == []


def test_refuses_data_dir_of_another_node(make_wharfd, tmp_path):
    node = make_wharfd()
    data = node.data_dir
    node.stop()
    import subprocess
    import os
    res = subprocess.run([os.environ["WHARFD"], "--listen", "127.0.0.1:0", "--node-id", "other",
                          "--data-dir", data], capture_output=True, text=True, timeout=20)
    assert res.returncode == 2
    assert "belongs to node 'py'" in res.stderr


class Producer(threading.Thread):
    def __init__(self, node, start_id, accepted):
        super().__init__(daemon=True)
        self.node, self.next_id, self.accepted = node, start_id, accepted

    def run(self):
        try:
            conn = connect(self.node)
            snd = conn.create_sender("crash")
            while True:
                i = self.next_id
                self.next_id += 1
                snd.send(Message(id=i, body="m%d" % i, durable=True))  # returns once accepted
                self.accepted.add(i)
        except Exception:
            pass  # the node was killed; what was not accepted does not count


class Consumer(threading.Thread):
    def __init__(self, node, received):
        super().__init__(daemon=True)
        self.node, self.received = node, received

    def run(self):
        try:
            conn = connect(self.node)
            rcv = conn.create_receiver("crash", credit=100)
            while True:
                m = rcv.receive(timeout=30)
                self.received.append(m.id)
                rcv.accept()
        except Exception:
            pass


def test_kill_9_loses_no_accepted_message(make_wharfd):
    rng = random.Random(20261202)
    accepted, received = set(), []
    node = make_wharfd()
    data = node.data_dir
    next_id = 0
    cycles = 12
    for cycle in range(cycles):
        p = Producer(node, next_id, accepted)
        c = Consumer(node, received)
        p.start()
        c.start()
        deadline = time.monotonic() + rng.uniform(0.3, 1.2)
        while time.monotonic() < deadline and p.is_alive():
            p.join(timeout=0.05)
        node.kill()
        p.join(timeout=15)
        c.join(timeout=15)
        assert not p.is_alive() and not c.is_alive(), "a client hung after the kill"
        next_id = p.next_id + 1000
        node = make_wharfd(data_dir=data)
    received += [m.id for m in drain(node, "crash", quiet=1.5)]
    lost = accepted - set(received)
    duplicates = len(received) - len(set(received))
    print("\ncrash test: %d cycles, %d accepted, %d received, %d received twice, %d lost"
          % (cycles, len(accepted), len(received), duplicates, len(lost)))
    assert len(accepted) > 100, "too little traffic to mean anything"
    assert not lost, "accepted but never received: %s" % sorted(lost)[:20]


def test_full_disk_refuses_producers_serves_consumers_and_recovers(make_wharfd):
    """A real write failure: the node's file-size limit (RLIMIT_FSIZE) is
    lowered below its journal's size, so every write fails with EFBIG, as it
    would with ENOSPC on a full disk; then it is lifted again."""
    import resource
    from raw_client import round_trip

    node = make_wharfd()
    conn = connect(node)
    snd = conn.create_sender("kept")
    for i in range(50):
        snd.send(Message(body="kept-%d" % i, durable=True))
    conn.close()

    unlimited = resource.RLIM_INFINITY
    resource.prlimit(node.pid, resource.RLIMIT_FSIZE, (1024, unlimited))
    try:
        durable = Message(body="refused", durable=True).encode()
        h = round_trip(node.url, "while-full", [durable])
        assert h.outcomes == ["rejected:amqp:resource-limit-exceeded"]
        h = round_trip(node.url, "while-full", [durable])
        assert h.outcomes == ["rejected:amqp:resource-limit-exceeded"], "refused at once while failing"
        # Consumers are still served.
        got = drain(node, "kept", expect=50)
        assert [m.body for m in got] == ["kept-%d" % i for i in range(50)]
        # Non-durable messages need no disk.
        transient = Message(body="transient", durable=False).encode()
        assert round_trip(node.url, "transient", [transient]).outcomes == ["accepted"]
    finally:
        resource.prlimit(node.pid, resource.RLIMIT_FSIZE, (unlimited, unlimited))
    # Space is back: within a few seconds durable messages are accepted again.
    deadline = time.monotonic() + 10
    outcome = None
    while time.monotonic() < deadline:
        outcome = round_trip(node.url, "after", [Message(body="ok", durable=True).encode()]).outcomes[0]
        if outcome == "accepted":
            break
        time.sleep(0.2)  # poll interval; the condition is checked with a deadline
    assert outcome == "accepted"
    assert node.stop() == 0
