"""AMQP 1.0 frames written and read by hand, for what no client library will
send: transfers beyond credit, transfers on a receiver's link, absurd
idle time-outs and credits. Performatives are encoded and decoded with
Proton's Data codec; the framing (AMQP 1.0 §2.3) is done here."""
import socket
import struct
import time

from proton import Data, Described, uint, ulong

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
NAMES = {0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer",
         0x15: "disposition", 0x16: "detach", 0x17: "end", 0x18: "close"}


def encode(value):
    d = Data()
    d.put_object(value)
    return d.encode()


def frame(code, fields, payload=b"", channel=0):
    body = encode(Described(ulong(code), list(fields))) + payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def message(text):
    """A message whose only section is an amqp-value string."""
    return encode(Described(ulong(0x77), text))


class Frame:
    def __init__(self, name, fields, payload, size=0):
        self.name, self.fields, self.payload, self.size = name, fields, payload, size

    def field(self, i):
        return self.fields[i] if self.fields is not None and i < len(self.fields) else None

    def condition(self):
        """(name, description) of a detach's, end's or close's error, or None."""
        at = {"detach": 2, "end": 0, "close": 0}.get(self.name)
        err = self.field(at) if at is not None else None
        if err is None:
            return None
        fields = err.value if isinstance(err, Described) else err
        return (str(fields[0]), fields[1] if len(fields) > 1 else None)

    def __repr__(self):
        return "%s %r" % (self.name, self.fields)


class RawConnection:
    """One socket to a node: send frames, read what comes back."""

    def __init__(self, port, host="127.0.0.1", timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.header = None
        self.frames = []
        self.eof = False

    def send(self, data):
        self.sock.sendall(data)

    def read(self, seconds):
        """Reads what comes within `seconds` (or until the node closes)."""
        deadline = time.monotonic() + seconds
        while not self.eof and time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
            self._parse()

    def _parse(self):
        if self.header is None and len(self.buf) >= 8:
            self.header, self.buf = self.buf[:8], self.buf[8:]
        while len(self.buf) >= 8:
            size, doff = struct.unpack(">IB", self.buf[:5])
            if len(self.buf) < size:
                return
            body, self.buf = self.buf[4 * doff:size], self.buf[size:]
            if not body:
                self.frames.append(Frame("empty", None, b""))
                continue
            d = Data()
            n = d.decode(body)
            d.rewind()
            d.next()
            v = d.get_object()
            self.frames.append(Frame(NAMES.get(int(v.descriptor), hex(int(v.descriptor))), list(v.value), body[n:],
                                     size))

    def wait_for(self, name, seconds=10):
        """The first frame named `name` (reading up to `seconds`), or None."""
        deadline = time.monotonic() + seconds
        while True:
            for f in self.frames:
                if f.name == name:
                    return f
            if self.eof or time.monotonic() >= deadline:
                return None
            self.read(min(0.2, deadline - time.monotonic()))

    def named(self, name):
        return [f for f in self.frames if f.name == name]

    def open(self, idle_timeout_ms=None, session=True, max_frame=None, incoming_window=2048):
        fields = ["raw-amqp", None, uint(max_frame) if max_frame else None, None]
        if idle_timeout_ms is not None:
            fields.append(uint(idle_timeout_ms))
        self.send(AMQP_HEADER + frame(OPEN, fields))
        assert self.wait_for("open"), self.frames
        if not session:
            return
        self.send(frame(BEGIN, [None, uint(0), uint(incoming_window), uint(2048)]))
        assert self.wait_for("begin"), self.frames

    def attach(self, address, role_receiver, handle=0, source_filter=None):
        """role_receiver False: a sender link (this side sends to `address`).
        source_filter: a dict for the source's filter-set (a symbol-keyed map)."""
        source_fields = [address if role_receiver else None]
        if source_filter is not None:
            source_fields += [None, None, None, None, None, None, source_filter]  # filter: field 7
        source = Described(ulong(0x28), source_fields)
        target = Described(ulong(0x29), [None if role_receiver else address])
        fields = ["raw-%d" % handle, uint(handle), role_receiver, None, None, source, target]
        if not role_receiver:
            fields += [None, None, uint(0)]  # initial-delivery-count
        self.send(frame(ATTACH, fields))
        assert self.wait_for("attach"), self.frames

    def flow(self, handle, delivery_count, credit, next_incoming_id=0, incoming_window=2048):
        self.send(frame(FLOW, [uint(next_incoming_id), uint(incoming_window), uint(0), uint(2048), uint(handle),
                               uint(delivery_count), uint(credit)]))

    def transfer(self, handle, delivery_id, tag, payload, settled=False):
        self.send(frame(TRANSFER, [uint(handle), uint(delivery_id), tag, uint(0), settled, False], payload))

    def close(self):
        self.sock.close()


def transfer_on_a_receivers_link(port, address):
    """Attaches as receiver to `address`, sends a transfer on that link and
    grants credit; checks the node closed the connection with
    amqp:not-allowed before sending anything under the client's tag."""
    raw = RawConnection(port)
    try:
        raw.open()
        raw.attach(address, role_receiver=True)
        raw.transfer(0, 0, b"mine", message("injected"))
        raw.flow(0, 0, 10)
        close = raw.wait_for("close")
        assert close is not None, raw.frames
        name, description = close.condition()
        assert name == "amqp:not-allowed" and "the sender" in description, close
        assert all(f.field(2) != b"mine" for f in raw.named("transfer")), raw.frames
    finally:
        raw.close()


__all__ = ["RawConnection", "message", "frame", "transfer_on_a_receivers_link"]
