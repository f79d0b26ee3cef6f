"""What no client library sends, written by hand (raw_amqp.py): each gets a
condition that says what was wrong, nothing is lost, and the node goes on
serving everyone else."""
import time

from proton import Message
from proton.utils import BlockingConnection

from raw_amqp import RawConnection, message, transfer_on_a_receivers_link

CAPPED = '[[queue]]\nname = "capped"\nmax-depth-messages = 5\noverflow-policy = "block"\n'


def send_and_take(url, queue, bodies):
    """Sends `bodies` to `queue`, then takes everything it holds."""
    c = BlockingConnection(url, timeout=10, sasl_enabled=False)
    try:
        s = c.create_sender(queue)
        for b in bodies:
            s.send(Message(body=b))
        return take_all(c, queue)
    finally:
        c.close()


def take_all(c, queue):
    r = c.create_receiver(queue, credit=100)
    got = []
    while True:
        try:
            m = r.receive(timeout=1)
        except Exception:  # proton.Timeout: the queue is empty
            return got
        got.append(m.body)
        r.accept()


def test_transfers_beyond_the_credit_given_end_the_link(make_wharfd):
    # A full queue under "block" gives its producer no more credit; a
    # producer that sends anyway used to have every message held at the
    # node (20,000 of 5 KB: 280 MB), however many it sent.
    node = make_wharfd(config_text=CAPPED)
    raw = RawConnection(node.port)
    raw.open()
    raw.attach("capped", role_receiver=False)
    flow = raw.wait_for("flow")
    credit = int(flow.field(6))
    assert credit > 5, flow
    body = message("x" * 1000)
    for i in range(credit + 200):
        raw.transfer(0, i, b"t%d" % i, body)
    detach = raw.wait_for("detach")
    assert detach is not None, raw.frames
    name, description = detach.condition()
    assert name == "amqp:link:transfer-limit-exceeded", detach
    assert "beyond the credit" in description, description
    # The queue holds its five; the connection and the node go on.
    c = BlockingConnection(node.url, timeout=10, sasl_enabled=False)
    try:
        assert len(take_all(c, "capped")) == 5
    finally:
        c.close()
    assert send_and_take(node.url, "after", ["ok"]) == ["ok"]
    raw.close()


def test_a_transfer_on_a_receivers_link_closes_the_connection_and_nothing_is_lost(wharfd):
    # A client attached as receiver that sends a transfer: Proton made it
    # the link's current delivery, and the node wrote the queue's next
    # message into it, under the client's tag (its accept was then of no
    # message, and the message came again). Now the connection is closed
    # (Proton would hold the link's detach back forever) before the node
    # sends anything on the link.
    c = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    s = c.create_sender("kept")
    for body in ("m1", "m2"):
        s.send(Message(body=body))
    transfer_on_a_receivers_link(wharfd.port, "kept")
    # Both messages are still there, once each, and nothing else.
    assert sorted(take_all(c, "kept")) == ["m1", "m2"]
    c.close()


def test_connections_that_never_open_are_dropped_and_free_their_slots(make_wharfd):
    # A socket that sends nothing, half a header, or the SASL header alone
    # used to hold a connection slot for good: three of them locked every
    # client out of a node with max-connections 3.
    import socket
    import time
    node = make_wharfd("--max-connections", "3", "--idle-timeout", "1")
    socks = []
    for data in (b"", b"AMQ", b"AMQP\x03\x01\x00\x00"):
        s = socket.create_connection(("127.0.0.1", node.port), timeout=10)
        if data:
            s.sendall(data)
        socks.append(s)
    deadline = time.monotonic() + 10
    for s in socks:  # each is closed by the node (at most a tick after its second)
        s.settimeout(max(0.1, deadline - time.monotonic()))
        while s.recv(4096):
            pass
        s.close()
    assert send_and_take(node.url, "after", ["in"]) == ["in"]


def test_an_idle_timeout_too_short_to_keep_is_refused_with_a_reason(wharfd):
    # A client asking for 1 ms: the node sent heartbeats without pause (a
    # whole core, and the other clients slowed) for as long as it stayed.
    raw = RawConnection(wharfd.port)
    raw.open(idle_timeout_ms=1, session=False)
    close = raw.wait_for("close")
    assert close is not None, raw.frames
    name, description = close.condition()
    assert name == "amqp:invalid-field", close
    assert "idle-time-out 1 ms" in description and "at least 100 ms" in description, description
    assert len(raw.named("empty")) < 100, len(raw.named("empty"))  # heartbeats
    raw.close()
    ok = RawConnection(wharfd.port)
    ok.open(idle_timeout_ms=100)  # the shortest it keeps
    ok.attach("kept-alive", role_receiver=False)
    assert ok.wait_for("close", seconds=1) is None, ok.frames
    ok.close()


def test_a_credit_of_2_to_the_31_or_more_ends_the_link_with_a_reason(wharfd):
    # A legal uint that Proton keeps in a signed int: the consumer got no
    # messages and no answer to its drain, and waited for good.
    send_and_take(wharfd.url, "counted", [])
    for credit in (0x80000000, 0xFFFFFFFF):
        raw = RawConnection(wharfd.port)
        raw.open()
        raw.attach("counted", role_receiver=True)
        raw.flow(0, 0, credit)
        detach = raw.wait_for("detach")
        assert detach is not None, raw.frames
        name, description = detach.condition()
        assert name == "amqp:invalid-field" and "at most 2147483647" in description, detach
        raw.close()
    c = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    c.create_sender("counted").send(Message(body="for the largest grant"))
    c.close()
    raw = RawConnection(wharfd.port)
    raw.open()
    raw.attach("counted", role_receiver=True)
    raw.flow(0, 0, 0x7FFFFFFF)  # the most it counts: taken, and served
    assert raw.wait_for("transfer") is not None, raw.frames
    assert not raw.named("detach"), raw.frames
    raw.close()


def test_a_consumer_may_lower_its_credit_under_the_messages_on_their_way(wharfd):
    # Legal, and not a grant of 2^31: a consumer whose session window lets
    # one transfer through at a time grants 10, then lowers its credit to 0
    # while nine wait at the node, then grants again. It gets all ten, and
    # keeps its link (a first version of the 2^31 check ended it).
    send_and_take(wharfd.url, "lowered", [])
    c = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    s = c.create_sender("lowered")
    for i in range(10):
        s.send(Message(body="m%d" % i))
    c.close()
    raw = RawConnection(wharfd.port)
    raw.open(incoming_window=1)
    raw.attach("lowered", role_receiver=True)
    raw.flow(0, 0, 10, incoming_window=1)
    assert raw.wait_for("transfer") is not None, raw.frames
    raw.flow(0, 1, 0, next_incoming_id=1, incoming_window=0)  # credit 0, nine on their way
    raw.flow(0, 1, 20, next_incoming_id=1, incoming_window=2048)  # and more again
    deadline = time.monotonic() + 10
    while len(raw.named("transfer")) < 10 and not raw.named("detach") and time.monotonic() < deadline:
        raw.read(0.2)
    assert not raw.named("detach"), raw.frames
    assert len(raw.named("transfer")) == 10, raw.frames
    raw.close()


def test_a_detach_fits_the_smallest_max_frame_size_a_client_may_ask_for(wharfd):
    # A client with AMQP's smallest max-frame-size, 512: a detach whose
    # description named ten unknown filters was 1,089 bytes, and the
    # client's Proton closed the connection with a framing error instead of
    # reading the detach.
    from proton import Described, symbol, ulong
    filters = {symbol("f%02d-" % i + "x" * 124): Described(ulong(0x99), "v") for i in range(10)}
    raw = RawConnection(wharfd.port)
    raw.open(max_frame=512)
    raw.attach("filtered", role_receiver=True, source_filter=filters)
    detach = raw.wait_for("detach")
    assert detach is not None, raw.frames
    name, description = detach.condition()
    assert name == "amqp:not-implemented" and description.endswith("..."), detach
    assert max(f.size for f in raw.frames) <= 512, [(f.name, f.size) for f in raw.frames]
    raw.close()
