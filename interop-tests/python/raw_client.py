"""A Python Proton client that sends and receives the raw bytes of messages,
so tests can compare them byte for byte (proton.Message would re-encode)."""
from proton import Delivery
from proton.handlers import MessagingHandler
from proton.reactor import Container


class RawRoundTrip(MessagingHandler):
    """Sends each payload unsettled to `address`, then receives as many and
    records their exact bytes and the outcomes the broker gave the sends."""

    def __init__(self, url, address, payloads, release_first=False):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        self.url = url
        self.address = address
        self.payloads = list(payloads)
        self.release_first = release_first
        self.sent = 0
        self.outcomes = []      # in the order they came
        self.outcome_of = {}    # by payload index
        self.received = []
        self.released = False
        self.error = None

    def on_start(self, event):
        event.container.connect(self.url, sasl_enabled=False)

    def on_connection_opened(self, event):
        self.sender = event.container.create_sender(event.connection, self.address)

    def on_sendable(self, event):
        while self.sent < len(self.payloads) and self.sender.credit > 0:
            self.sender.delivery(str(self.sent))
            self.sender.stream(self.payloads[self.sent])
            self.sender.advance()
            self.sent += 1

    def on_accepted(self, event):
        self._outcome(event, "accepted")

    def on_rejected(self, event):
        self._outcome(event, "rejected:%s" % (event.delivery.remote.condition.name
                                              if event.delivery.remote.condition else ""))

    def on_released(self, event):
        self._outcome(event, "released")

    def _outcome(self, event, name):
        self.outcomes.append(name)
        self.outcome_of[int(event.delivery.tag)] = name
        event.delivery.settle()
        if len(self.outcomes) == len(self.payloads):
            if self.outcomes.count("accepted") == 0:
                event.connection.close()
                return
            self.receiver = event.container.create_receiver(event.connection, self.address)
            self.receiver.flow(len(self.payloads) + 1)

    def on_delivery(self, event):
        # Runs before MessagingHandler's own delivery handlers (which then find
        # nothing readable): take the raw bytes here. Sender-side updates are
        # left to them (on_accepted and friends).
        dlv = event.delivery
        link = event.link
        if link.is_sender:
            return
        if not dlv.readable or dlv.partial:
            return
        data = link.recv(dlv.pending)
        link.advance()
        if self.release_first and not self.released:
            self.released = True
            dlv.update(Delivery.RELEASED)
            dlv.settle()
            link.flow(1)
            return
        self.received.append(data)
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        if len(self.received) == self.outcomes.count("accepted"):
            event.connection.close()

    def on_transport_error(self, event):
        self.error = str(event.transport.condition)

    def on_link_error(self, event):
        self.error = str(event.link.remote_condition)


def round_trip(url, address, payloads, release_first=False, timeout=10):
    handler = RawRoundTrip(url, address, payloads, release_first)
    container = Container(handler)
    container.timeout = 0.2
    container.start()
    import time
    deadline = time.monotonic() + timeout
    while container.process():
        if time.monotonic() > deadline:
            container.stop()
            raise TimeoutError("round trip did not finish: sent %d, outcomes %r, received %d, error %r"
                               % (handler.sent, handler.outcomes, len(handler.received), handler.error))
    return handler
