"""The interop matrix: each client library's agent (../agents) against a
3-node cluster, at the node that owns the queue and at one that relays to
it. Every difference between what was sent and what arrived must be one a
client limitation in known.py explains; anything else fails."""
import json
import threading

import pytest
from proton import Message
from proton.utils import BlockingConnection

import agents
import known
import report
import vectors
from mgmt_client import Mgmt

CLIENTS = list(agents.CLIENTS)
PLACES = ["owner", "relay"]


def node_for(cluster, place):
    return cluster.node("n2") if place == "owner" else cluster.node("n1")


def need(*clients):
    for c in clients:
        why = agents.missing(c)
        if why:
            pytest.fail("the %s agent cannot run: %s" % (c, why))


def subject(m):
    return m.get("properties", {}).get("subject")


def normal(m):
    """One spelling of what agents may print two ways: a sequence section as
    a typed list or a bare one, one data section as a list of one."""
    m = json.loads(json.dumps(m))
    body = m.get("body", {})
    if "sequence" in body:
        body["sequence"] = [s["value"] if isinstance(s, dict) and s.get("type") == "list" else s
                            for s in body["sequence"]]
    if isinstance(body.get("data"), list) and len(body["data"]) == 1:
        body["data"] = body["data"][0]
    return m


_cannot_send = {}  # client -> {subject: why}


def sendable(client, url, messages):
    """The messages `client` can send (probing one at a time, once per client
    and message set, when it refuses the whole set) and why not the rest."""
    key = (client, json.dumps([subject(m) for m in messages]))
    if key not in _cannot_send:
        r = agents.send(client, url, "probe-%s" % client, messages)
        if r.rc == 0:
            _cannot_send[key] = {}
        elif r.rc == 3:
            refused = {}
            for m in messages:
                one = agents.send(client, url, "probe-%s" % client, [m])
                if one.rc == 3:
                    refused[subject(m)] = one.unsupported
                else:
                    assert one.rc == 0, (client, subject(m), one)
            _cannot_send[key] = refused
        else:
            pytest.fail("%s send: %r" % (client, r))
    refused = _cannot_send[key]
    return [m for m in messages if subject(m) not in refused], refused


def round_trip(cluster, scenario, sender, receiver, place, messages):
    need(sender, receiver)
    url = node_for(cluster, place).url
    queue = "%s-%s-%s-%s" % (scenario, sender, receiver, place)
    can, refused = sendable(sender, url, messages)
    unreadable = known.CANNOT_RECEIVE.get(receiver, {})
    can = [m for m in can if subject(m) not in unreadable]
    cell = (scenario, "%s -> %s" % (sender, receiver), place)
    sent = agents.send(sender, url, queue, can)
    if not (sent.rc == 0 and sent.doc["outcomes"] == ["accepted"] * len(can)):
        report.record(*cell, ok=False, failure="send failed")
        pytest.fail("send failed: %r" % (sent,))
    got = agents.run(receiver, "receive", url, queue=queue, count=len(can))
    if got.rc != 0 or len(got.doc["messages"]) != len(can):
        report.record(*cell, ok=False, failure="receive failed")
        pytest.fail("receive failed (lost or duplicated?): %r" % (got,))
    by_subject = {subject(m): normal(m) for m in got.doc["messages"]}
    notes, failures = set(), []
    for m in can:
        m = normal(m)
        have = by_subject.get(subject(m))
        assert have is not None, "%s never arrived" % subject(m)
        for field, want, was in agents.differences(m, have):
            why = known.explain(sender, receiver, field, want, was)
            if why:
                notes.add(why)
            else:
                failures.append("%s %s: sent %s, got %s" % (subject(m), field, json.dumps(want), json.dumps(was)))
    for name, why in sorted(refused.items()):
        notes.add("%s cannot send this: %s" % (sender, why))
    for name in sorted(set(unreadable) & {subject(m) for m in messages}):
        notes.add("%s cannot receive this: %s" % (receiver, unreadable[name]))
    report.record(*cell, ok=True, known=sorted(notes), failure=failures or None)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("receiver", CLIENTS)
@pytest.mark.parametrize("sender", CLIENTS)
def test_types(cluster, sender, receiver, place):
    round_trip(cluster, "types", sender, receiver, place, vectors.type_messages())


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("receiver", CLIENTS)
@pytest.mark.parametrize("sender", CLIENTS)
def test_properties(cluster, sender, receiver, place):
    round_trip(cluster, "properties", sender, receiver, place, vectors.property_messages())


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("client", CLIENTS)
def test_large(cluster, client, place):
    need(client)
    node = node_for(cluster, place)
    queue = "large-%s-%s" % (client, place)
    messages = [{"properties": {"subject": "1MB", "message_id": {"type": "string", "value": "1MB"}},
                 "body": {"data": vectors.pattern_hex(1 << 20)}},
                {"properties": {"subject": "10MB", "message_id": {"type": "string", "value": "10MB"}},
                 "body": {"data": vectors.pattern_hex(10 << 20)}}]
    sent = agents.send(client, node.small_url, queue, messages, timeout=120)
    assert sent.rc == 0 and sent.doc["outcomes"] == ["accepted", "accepted"], sent
    got = agents.run(client, "receive", node.big_url, queue=queue, count=2, timeout=120)
    assert got.rc == 0, got
    bodies = {subject(m): normal(m)["body"].get("data") for m in got.doc["messages"]}
    ok = bodies == {"1MB": messages[0]["body"]["data"], "10MB": messages[1]["body"]["data"]}
    report.record("large", client, place, ok=ok, failure=None if ok else "bodies differ")
    assert ok, {k: len(v or "") for k, v in bodies.items()}


def dlq_enqueued(cluster):
    m = Mgmt(cluster.node("n2").url)
    try:
        status, _, body = m.call("READ", type="wharf.queue", name="DLQ")
        return body["enqueued"] if status == 200 else 0
    finally:
        m.close()


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("client", CLIENTS)
def test_outcomes(cluster, client, place):
    need(client)
    node = node_for(cluster, place)
    queue = "outcomes-%s-%s" % (client, place)
    wants = ["accept", "release", "modify", "reject"] + ["accept"] * 6
    messages = [{"properties": {"message_id": {"type": "string", "value": "m%d" % i}},
                 "application_properties": {"want": {"type": "string", "value": wants[i % 10]}},
                 "body": {"value": {"type": "int", "value": i}}} for i in range(1000)]
    before = dlq_enqueued(cluster)
    sent = agents.send("python", node.url, queue, messages)
    assert sent.rc == 0, sent
    got = agents.run(client, "receive", node.url, queue=queue, count=1000, outcomes=True, timeout=120)
    assert got.rc == 0, got
    arrivals = {}
    for m in got.doc["messages"]:
        arrivals.setdefault(m["properties"]["message_id"]["value"], []).append((m.get("header") or {}).get("delivery_count", 0))
    notes, failures = [], []
    if set(arrivals) != {"m%d" % i for i in range(1000)}:
        failures.append("missing: %d" % (1000 - len(arrivals)))
    for i in range(1000):
        counts = arrivals.get("m%d" % i, [])
        w = wants[i % 10]
        want_counts = {"release": [0, 0], "modify": [0, 1]}.get(w, [0])
        if w == "modify" and counts == [0, 0] and client in known.MODIFY_WITHOUT_FAILED:
            notes = [known.MODIFY_WITHOUT_FAILED[client]]
        elif counts != want_counts:
            failures.append("m%d (%s): delivery counts %s, wanted %s" % (i, w, counts, want_counts))
    rejected = dlq_enqueued(cluster) - before
    if rejected != 100:
        failures.append("the DLQ got %d, wanted 100" % rejected)
    report.record("outcomes", client, place, ok=True, known=notes, failure=failures or None)
    assert not failures, failures[:10]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("client", CLIENTS)
def test_selector(cluster, client, place):
    """A receiver of each client with a JMS selector, in the filter form that
    client builds (rhea's filter.selector, Python's Selector, ...), gets
    only what it selects, in order; what it does not select stays."""
    need(client)
    node = node_for(cluster, place)
    queue = "selector-%s-%s" % (client, place)
    colours = ["red", "blue", "green"] * 4
    messages = [{"properties": {"message_id": {"type": "string", "value": "m%d" % i},
                                "subject": "order" if i % 2 == 0 else "invoice"},
                 "application_properties": {"colour": {"type": "string", "value": c}},
                 "body": {"value": {"type": "int", "value": i}}} for i, c in enumerate(colours)]
    sent = agents.send("python", node.url, queue, messages)
    assert sent.rc == 0 and sent.doc["outcomes"] == ["accepted"] * len(messages), sent

    def ids(result):
        assert result.rc == 0, result
        return [m["properties"]["message_id"]["value"] for m in result.doc["messages"]]
    selected = ids(agents.run(client, "receive", node.url, queue=queue, count=4,
                              selector="colour IN ('red', 'green') AND JMSType = 'order'"))
    rest = ids(agents.run("python", "receive", node.url, queue=queue, count=8))
    failures = []
    if selected != ["m0", "m2", "m6", "m8"]:
        failures.append("the selecting receiver got %s" % selected)
    if rest != ["m%d" % i for i in (1, 3, 4, 5, 7, 9, 10, 11)]:
        failures.append("a plain receiver then got %s" % rest)
    report.record("selector", client, place, ok=not failures, failure=failures or None)
    assert not failures, failures


class EchoService(threading.Thread):
    """Answers requests on `queue` at `node`: body echoed, correlation-id =
    the request's message-id, sent to its reply-to on an anonymous sender."""

    def __init__(self, node, queue, count):
        super().__init__(daemon=True)
        self.conn = BlockingConnection(node.url, timeout=30, sasl_enabled=False)
        self.receiver = self.conn.create_receiver(queue, credit=count)
        self.sender = self.conn.create_sender(None)
        self.count, self.error = count, None

    def run(self):
        try:
            for _ in range(self.count):
                m = self.receiver.receive(timeout=30)
                self.sender.send(Message(address=m.reply_to, correlation_id=m.id, body={"echo": m.body}))
                self.receiver.accept()
        except Exception as e:  # reported by the test
            self.error = repr(e)
        finally:
            self.conn.close()


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("client", CLIENTS)
def test_request_reply(cluster, client, place):
    need(client)
    queue = "service-%s-%s" % (client, place)
    service = EchoService(cluster.node("n3"), queue, 1)
    service.start()
    request = {"properties": {"message_id": {"type": "string", "value": "req-1"}},
               "body": {"value": {"type": "string", "value": "ping"}}}
    got = agents.request(client, node_for(cluster, place).url, queue, request)
    service.join(timeout=40)
    assert not service.is_alive(), "the echo service never got the request"
    assert service.error is None, service.error
    assert got.rc == 0, got
    reply = normal(got.doc["reply"])
    ok = (reply["properties"].get("correlation_id") == {"type": "string", "value": "req-1"}
          and "echo" in json.dumps(reply["body"]) and "ping" in json.dumps(reply["body"])
          and got.doc["reply_to"].startswith("$dynamic." + node_for(cluster, place).node_id + "."))
    report.record("request", client, place, ok=ok, failure=None if ok else json.dumps(reply)[:200])
    assert ok, got.doc


@pytest.mark.parametrize("client", CLIENTS)
def test_redirect(cluster, client):
    need(client)
    n1, n2 = cluster.node("n1"), cluster.node("n2")
    queue = "redir-%s" % client
    got = agents.run(client, "attach", n1.url, queue=queue)
    assert got.rc == 0 and "detached" in got.doc, got
    d = got.doc["detached"]
    assert d["condition"] == "amqp:link:redirect", d
    notes = []
    info = d.get("info")
    if info is None:
        why = known.NO_REDIRECT_INFO.get(client)
        assert why, "no info map on the redirect: %r" % d
        notes.append(why)
    else:
        pairs = {k["value"]: (k["type"], v) for k, v in info["value"]}
        want = {"hostname": "127.0.0.1", "network-host": "127.0.0.1", "port": n2.port, "address": queue}
        for key, value in want.items():
            kind, v = pairs[key]
            if kind != "symbol":
                why = known.explain("wharf", client, "redirect-key", {"type": "symbol", "value": key},
                                    {"type": kind, "value": key})
                assert why, "key %s is a %s" % (key, kind)
                notes.append(why)
            if key == "port":  # some clients decode every number as a float
                assert int(float(v["value"])) == value, (key, v)
            else:
                assert str(v["value"]) == str(value), (key, v)
        # The test follows it: the same client at the node the info names.
        again = agents.run(client, "attach", "%s:%s" % (pairs["network-host"][1]["value"],
                                                         int(float(pairs["port"][1]["value"]))), queue=queue)
        assert again.rc == 0 and again.doc == {"opened": True}, again
    report.record("redirect", client, "n1 -> n2", ok=True, known=notes)


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("client", CLIENTS)
def test_management_query(cluster, client, place):
    need(client)
    node = node_for(cluster, place)
    c = BlockingConnection(node.url, sasl_enabled=False)
    try:
        c.create_sender("listed-queue").send(Message(body="x"))
    finally:
        c.close()
    got = agents.run(client, "mgmt-query", node.url, entity_type="wharf.queue")
    assert got.rc == 0 and got.doc["status"] == 200, got
    body = {k["value"]: v for k, v in got.doc["body"]["value"]}
    names = [n["value"] for n in body["attributeNames"]["value"]]
    rows = [dict(zip(names, [c.get("value") for c in r["value"]])) for r in body["results"]["value"]]
    listed = [r for r in rows if r["name"] == "listed-queue"]
    ok = len(listed) == 1 and listed[0]["node"] == "n2" and int(float(listed[0]["depth"] or 0)) >= 1
    report.record("management", client, place, ok=ok, failure=None if ok else "listed-queue missing or empty")
    assert ok, rows[:5]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("sasl", ["none", "anonymous"])
@pytest.mark.parametrize("client", CLIENTS)
def test_sasl_and_little_credit(cluster, client, sasl, place):
    need(client)
    url = node_for(cluster, place).url
    queue = "credit-%s-%s-%s" % (client, sasl, place)
    messages = [{"properties": {"message_id": {"type": "string", "value": "c%d" % i}},
                 "body": {"value": {"type": "int", "value": i}}} for i in range(50)]
    sent = agents.send(client, url, queue, messages, sasl=sasl)
    assert sent.rc == 0, sent
    got = agents.run(client, "receive", url, queue=queue, count=50, credit=1, refill="each", sasl=sasl)
    assert got.rc == 0, got
    order = [m["properties"]["message_id"]["value"] for m in got.doc["messages"]]
    ok = order == ["c%d" % i for i in range(50)]
    report.record("sasl-credit", client, "%s, %s" % (sasl, place), ok=ok, failure=None if ok else "order")
    assert ok, order
