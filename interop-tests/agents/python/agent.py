#!/usr/bin/python3
"""The Python Proton interop agent (Debian's python3-qpid-proton, the
event-driven Container API). Contract: ../CONTRACT.md."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from proton import Delivery, Message  # noqa: E402
from proton.handlers import MessagingHandler  # noqa: E402
from proton.reactor import Container, Selector  # noqa: E402

import typed  # noqa: E402

OUTCOMES = {Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected", Delivery.RELEASED: "released",
            Delivery.MODIFIED: "modified"}


class Agent(MessagingHandler):
    def __init__(self, args):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.args = args
        self.result = None
        self.failure = None
        self.conn = None
        self.stopping = False
        self.sent = False
        self.reply_to = None

    # ---- common -----------------------------------------------------------------------

    def on_start(self, event):
        a = self.args
        self.container = event.container
        event.container.schedule(a.timeout, self)
        kw = {"sasl_enabled": a.sasl == "anonymous"}
        if a.sasl == "anonymous":
            kw["allowed_mechs"] = "ANONYMOUS"
        self.conn = event.container.connect("amqp://" + a.url, **kw)
        getattr(self, "start_" + a.command.replace("-", "_"))(event)

    def on_timer_task(self, event):
        if self.result is None and self.failure is None:
            self.fail("timed out after %ss" % self.args.timeout)

    def finish(self, result):
        if self.result is None and self.failure is None:
            self.result = result
        self.stop()

    def fail(self, what):
        if self.result is None and self.failure is None:
            self.failure = what
        self.stop()

    def stop(self):
        """Closes the connection and stops once the broker closed it too (so
        the last dispositions reach it), or 2 s later."""
        if self.stopping:
            return
        self.stopping = True
        if self.conn is not None and self.conn.state & self.conn.LOCAL_ACTIVE:
            self.conn.close()
            self.container.schedule(2.0, _Later(self.container.stop))
        else:
            self.container.stop()

    def on_connection_closed(self, event):
        if self.stopping:
            self.container.stop()

    def on_transport_error(self, event):
        cond = event.transport.condition
        self.fail("transport error: %s" % (cond.description if cond else "?"))

    def on_connection_error(self, event):
        cond = event.connection.remote_condition
        self.fail("connection closed: %s %s" % (cond.name, cond.description) if cond else "connection closed")

    def on_link_error(self, event):
        if self.args.command == "attach":
            return self.on_link_closing(event)
        cond = event.link.remote_condition
        self.fail("link detached: %s %s" % (cond.name, cond.description) if cond else "link detached")

    # ---- send -------------------------------------------------------------------------

    def start_send(self, event):
        with open(self.args.file) as f:
            self.to_send = [typed.to_message(m) for m in json.load(f)]
        self.next = 0
        self.outcomes = [None] * len(self.to_send)
        self.index = {}
        self.sender = event.container.create_sender(self.conn, self.args.queue)

    def on_sendable(self, event):
        if self.args.command != "send":
            return self.on_sendable_other(event)
        while self.next < len(self.to_send) and event.sender.credit > 0:
            d = event.sender.send(self.to_send[self.next])
            self.index[d] = self.next
            self.next += 1

    def on_settled(self, event):
        if self.args.command not in ("send", "request"):
            return
        d = event.delivery
        if d in getattr(self, "index", {}):
            self.outcomes[self.index.pop(d)] = OUTCOMES.get(d.remote_state, str(d.remote_state))
            if all(o is not None for o in self.outcomes):
                self.finish({"outcomes": self.outcomes})

    def on_sendable_other(self, event):
        if self.args.command in ("request", "mgmt-query"):
            self.try_send()

    def try_send(self):
        """request, mgmt-query: the one request, once the reply queue is known
        and the sender has credit."""
        if self.sent or not self.reply_to or self.out.credit <= 0:
            return
        self.request.reply_to = self.reply_to
        self.out.send(self.request)
        self.sent = True

    # ---- receive ----------------------------------------------------------------------

    def start_receive(self, event):
        a = self.args
        self.messages, self.seen, self.final = [], set(), 0
        # --selector: Python Proton's own Selector option (a filter named
        # "selector", described by the filter's symbol).
        options = Selector(a.selector) if a.selector is not None else None
        self.receiver = event.container.create_receiver(self.conn, a.queue, options=options)
        self.receiver.flow(a.credit)

    def on_message(self, event):
        a = self.args
        if a.command == "request":
            self.finish({"reply_to": self.reply_to, "reply": typed.from_message(event.message)})
            return
        if self.stopping:
            return  # past --count: the rest stays with the broker
        if a.command == "mgmt-query":
            m = event.message
            self.finish({"status": int((m.properties or {}).get("statusCode", 0)), "body": typed.to_typed(m.body)})
            return
        m, d = event.message, event.delivery
        self.messages.append(typed.from_message(m))
        want = (m.properties or {}).get("want") if a.outcomes else None
        key = json.dumps(typed.to_typed(m.id)) if m.id is not None else None
        first = key not in self.seen
        self.seen.add(key)
        if want == "release" and first:
            self.release(d, delivered=False)
        elif want == "modify" and first:
            d.local.failed = True
            d.update(Delivery.MODIFIED)
            d.settle()
        elif want == "reject":
            self.reject(d)
            self.final += 1
        else:
            self.accept(d)
            self.final += 1
        if a.refill == "each":
            event.receiver.flow(1)
        elif event.receiver.credit < a.credit // 2 or event.receiver.credit == 0:
            event.receiver.flow(a.credit - event.receiver.credit)
        if self.final >= a.count:
            self.finish({"messages": self.messages})

    # ---- attach -----------------------------------------------------------------------

    def start_attach(self, event):
        a = self.args
        if a.role == "sender":
            self.link = event.container.create_sender(self.conn, a.queue)
        else:
            self.link = event.container.create_receiver(self.conn, a.queue)

    def on_link_opened(self, event):
        a, link = self.args, event.link
        if a.command == "attach" and link == self.link:
            # Stays attached for 2 s: then it counts as opened.
            self.container.schedule(2.0, _Later(lambda: self.finish({"opened": True})))
        elif a.command in ("request", "mgmt-query") and link == self.replies:
            self.reply_to = link.remote_source.address
            self.try_send()

    def on_link_closing(self, event):
        if self.args.command != "attach":
            return
        cond = event.link.remote_condition
        info = None
        if cond is not None and cond.info is not None:
            info = typed.to_typed(dict(cond.info))
        self.finish({"detached": {"condition": str(cond.name) if cond else None,
                                  "description": cond.description if cond else None, "info": info}})

    # ---- request ----------------------------------------------------------------------

    def start_request(self, event):
        with open(self.args.file) as f:
            self.request = typed.to_message(json.load(f)[0])
        self.request.address = self.args.queue
        self.open_request_links(event, None)  # anonymous relay: the target is null

    def start_mgmt_query(self, event):
        self.request = Message(id="q1", properties={"operation": "QUERY", "type": "org.amqp.management",
                                                    "name": "self", "entityType": self.args.entity_type},
                               body={"attributeNames": []})
        self.open_request_links(event, "$management")

    def open_request_links(self, event, target):
        self.sent, self.reply_to = False, None
        self.replies = event.container.create_receiver(self.conn, None, dynamic=True)
        self.replies.flow(1)
        self.out = event.container.create_sender(self.conn, target)


class _Later:
    def __init__(self, fn):
        self.fn = fn

    def on_timer_task(self, event):
        self.fn()


def main():
    ap = argparse.ArgumentParser(prog="agent.py")
    ap.add_argument("command", choices=["send", "receive", "attach", "request", "mgmt-query"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--sasl", choices=["none", "anonymous"], default="none")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--queue")
    ap.add_argument("--file")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--credit", type=int, default=100)
    ap.add_argument("--refill", choices=["each", "window"], default="window")
    ap.add_argument("--outcomes", action="store_true")
    ap.add_argument("--selector")
    ap.add_argument("--role", choices=["sender", "receiver"], default="receiver")
    ap.add_argument("--entity-type", dest="entity_type")
    args = ap.parse_args()
    try:
        if args.command == "send":
            with open(args.file) as f:
                for m in json.load(f):
                    typed.to_message(m)  # what Python Proton cannot send shows before connecting
    except NotImplementedError as e:
        print(json.dumps({"unsupported": str(e)}))
        return 3
    agent = Agent(args)
    Container(agent).run()
    if agent.failure is not None:
        print(json.dumps({"error": agent.failure}))
        return 1
    print(json.dumps(agent.result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
