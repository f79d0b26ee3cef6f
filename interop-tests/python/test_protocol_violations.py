"""What no client library sends, written by hand (raw_amqp.py): each gets a
condition that says what was wrong, nothing is lost, and the node goes on
serving everyone else."""
from proton import Message
from proton.utils import BlockingConnection

from raw_amqp import RawConnection, message

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
    raw = RawConnection(wharfd.port)
    raw.open()
    raw.attach("kept", role_receiver=True)
    raw.transfer(0, 0, b"mine", message("injected"))
    raw.flow(0, 0, 10)
    close = raw.wait_for("close")
    assert close is not None, raw.frames
    name, description = close.condition()
    assert name == "amqp:not-allowed" and "the sender" in description, close
    sent = [f for f in raw.named("transfer")]
    assert all(f.field(2) != b"mine" for f in sent), sent  # never under the client's tag
    raw.close()
    # Both messages are still there, once each, and nothing else.
    assert sorted(take_all(c, "kept")) == ["m1", "m2"]
    c.close()
