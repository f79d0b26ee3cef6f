"""Wharf driven by the Python Proton API (Debian python3-qpid-proton)."""
import struct

import pytest
from proton import Message, symbol
from proton.reactor import Selector
from proton.utils import BlockingConnection, LinkDetached

from link_churn import growth_kb
from raw_client import round_trip


def sym8(s):
    b = s.encode()
    return b"\xa3" + bytes([len(b)]) + b


def str8(s):
    b = s.encode()
    return b"\xa1" + bytes([len(b)]) + b


def map8(pairs):
    body = b"".join(k + v for k, v in pairs)
    return b"\xc1" + bytes([len(body) + 1, 2 * len(pairs)]) + body


def section(code, value):
    return b"\x00\x53" + bytes([code]) + value


def message_with_every_section():
    """Header, both annotations, properties, application properties, two data
    sections and a footer, built by hand (Proton's Message has no footer)."""
    m = Message(address="every", subject="s", reply_to="r", correlation_id=7,
                content_type="application/octet-stream", durable=True, priority=7,
                ttl=60, properties={"k": "v", "n": 5},
                annotations={symbol("x-opt-a"): "ma"},
                instructions={symbol("x-opt-d"): "da"})
    m.body = None
    head = m.encode()
    # Some Proton versions write an amqp-value null body for body=None: drop it.
    null_body = section(0x77, b"\x40")
    if head.endswith(null_body):
        head = head[: -len(null_body)]
    data1 = section(0x75, b"\xa0\x05" + b"\x00\x01\x02\xff\xfe")
    data2 = section(0x75, b"\xb0" + struct.pack(">I", 3) + b"xyz")
    footer = section(0x78, map8([(sym8("x-opt-f"), str8("footer"))]))
    return head + data1 + data2 + footer


def test_every_section_passes_through_byte_exact(wharfd):
    payloads = [
        message_with_every_section(),
        Message(body={"map": [1, 2.5, None, True]}).encode(),
        Message(body=[b"seq", 1]).encode(),
        section(0x75, b"\xa0\x00"),  # no header at all, empty data
    ]
    h = round_trip(wharfd.url, "exact", payloads)
    assert h.outcomes == ["accepted"] * len(payloads)
    assert h.received == payloads


def test_release_rewrites_only_the_header(wharfd):
    payload = message_with_every_section()
    h = round_trip(wharfd.url, "rel", [payload], release_first=True)
    assert len(h.received) == 1
    again = h.received[0]
    m = Message()
    m.decode(again)
    assert m.first_acquirer is False
    assert m.delivery_count == 0  # released does not count a delivery
    assert m.priority == 7 and m.durable
    # Everything after the header is unchanged.
    original = Message()
    original.decode(payload)
    header_len = len(section(0x70, b""))  # prefix only; compare tails instead
    assert again.endswith(payload[payload.index(b"\x00\x53\x71"):])
    assert header_len > 0


def test_malformed_message_is_rejected_link_stays_usable(wharfd):
    bad = b"\x00\x53\x70\xc0\x10"  # a header list that runs off the end
    good = Message(body="fine").encode()
    h = round_trip(wharfd.url, "bad", [bad, good])
    assert h.outcomes[0] == "rejected:amqp:decode-error"
    assert h.outcomes[1] == "accepted"
    assert h.received == [good]


@pytest.mark.parametrize("sasl", [False, True])
def test_blocking_client_with_and_without_sasl(wharfd, sasl):
    kwargs = {"sasl_enabled": False} if not sasl else {"allowed_mechs": "ANONYMOUS"}
    conn = BlockingConnection(wharfd.url, timeout=10, **kwargs)
    try:
        snd = conn.create_sender("greetings")
        for i in range(20):
            snd.send(Message(body="hello %d" % i, durable=True))
        rcv = conn.create_receiver("greetings", credit=100)
        got = []
        for _ in range(20):
            got.append(rcv.receive(timeout=10).body)
            rcv.accept()
        assert got == ["hello %d" % i for i in range(20)]
    finally:
        conn.close()


def test_unknown_address_refused_when_auto_create_off(make_wharfd):
    node = make_wharfd("--auto-create-queues", "false")
    conn = BlockingConnection(node.url, timeout=10, sasl_enabled=False)
    try:
        with pytest.raises(LinkDetached) as err:
            conn.create_receiver("nowhere")
        assert "amqp:not-found" in str(err.value)
        assert "nowhere" in str(err.value)
    finally:
        conn.close()


def test_request_reply_through_dynamic_queue(wharfd):
    conn = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        replies = conn.create_receiver(None, dynamic=True, credit=10)
        reply_to = replies.remote_source.address
        assert reply_to
        requests_out = conn.create_sender("service")
        requests_out.send(Message(body="ping", reply_to=reply_to))
        service_in = conn.create_receiver("service", credit=10)
        req = service_in.receive(timeout=10)
        service_in.accept()
        anon = conn.create_sender(None)
        anon.send(Message(address=req.reply_to, body="pong"))
        assert replies.receive(timeout=10).body == "pong"
        replies.accept()
    finally:
        conn.close()


def test_a_selector_gives_the_receiver_only_what_it_selects(wharfd):
    """proton.reactor.Selector: a filter named "selector" whose descriptor is
    the symbol apache.org:selector-filter:string."""
    conn = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        snd = conn.create_sender("paint")
        for i, colour in enumerate(["red", "blue", "red", "green"]):
            snd.send(Message(body="%s%d" % (colour, i), properties={"colour": colour, "n": i}))
        reds = conn.create_receiver("paint", credit=10, name="reds", options=Selector("colour = 'red' AND n >= 0"))
        got = []
        for _ in range(2):
            got.append(reds.receive(timeout=10).body)
            reds.accept()
        assert got == ["red0", "red2"]
        rest = conn.create_receiver("paint", credit=10, name="rest")
        got = []
        for _ in range(2):
            got.append(rest.receive(timeout=10).body)
            rest.accept()
        assert got == ["blue1", "green3"], "what the selector left did not stay"
        with pytest.raises(LinkDetached) as err:
            conn.create_receiver("paint", name="bad", options=Selector("colour = = 'red'"))
        assert "amqp:invalid-field" in str(err.value)
    finally:
        conn.close()


def test_links_and_sessions_that_come_and_go_leave_no_memory_behind(wharfd):
    # Each attach used to leave its link's state behind until the connection
    # closed (about 6 KB a link), so a long-lived client that opens a link
    # per request grew the node for good.
    conn = BlockingConnection(wharfd.url)
    try:
        conn.create_sender("churn-kept").send(Message(body="kept"))
        [grown] = growth_kb(conn, "churned", [wharfd.pid])
        assert grown < 4096, "the node grew %d KiB over 2,000 links that came and went" % grown
        # The connection and what it held are as they were.
        rcv = conn.create_receiver("churn-kept", credit=1)
        assert rcv.receive(timeout=10).body == "kept"
        rcv.accept()
    finally:
        conn.close()
