"""The $management node, from Python Proton: the protocol shape existing
tools send (qdmanage's QUERY), every node operation, and a hundred and more
malformed requests, each answered with the right status and a reason."""
import pytest
from proton import Delivery, Message, ulong, uint
from proton.utils import LinkDetached, SendException

from mgmt_client import Mgmt


@pytest.fixture
def mgmt(wharfd):
    m = Mgmt(wharfd.url)
    yield m
    m.close()


def fill(wharfd, queue, n):
    from proton.utils import BlockingConnection
    c = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        s = c.create_sender(queue)
        for i in range(n):
            s.send(Message(body="x" * 10))
    finally:
        c.close()


def test_qdmanage_shaped_query_works_unchanged(wharfd, mgmt):
    fill(wharfd, "counted", 3)
    # Exactly what Qpid Dispatch's qdmanage sends.
    reply = mgmt.request({"name": "self", "type": "org.amqp.management", "operation": "QUERY",
                          "entityType": "wharf.queue", "offset": uint(0), "count": ulong(500)},
                         {"attributeNames": []})
    assert reply.properties["statusCode"] == 200
    assert reply.correlation_id == "req-%d" % mgmt.next_id
    names = reply.body["attributeNames"]
    rows = [dict(zip(names, r)) for r in reply.body["results"]]
    counted = next(r for r in rows if r["name"] == "counted")
    assert counted["depth"] == 3 and counted["enqueued"] == 3
    assert reply.properties["count"] == len(rows)


def test_query_pages_are_stable_and_attributes_selectable(wharfd, mgmt):
    for q in ("p-a", "p-b", "p-c", "p-d"):
        fill(wharfd, q, 1)
    first = mgmt.query("queue", ["name"], offset=0, count=2)   # short type name
    second = mgmt.query("wharf.queue", ["name"], offset=2, count=2)
    names = [r["name"] for r in first + second]
    assert names == sorted(names) and len(set(names)) == 4
    assert all(set(r) == {"name"} for r in first)


def test_query_takes_attribute_names_as_an_array_too(wharfd, mgmt):
    from proton import Array, Data, UNDESCRIBED
    fill(wharfd, "arrayed", 2)
    reply = mgmt.request({"operation": "QUERY", "type": "org.amqp.management", "entityType": "wharf.queue"},
                         {"attributeNames": Array(UNDESCRIBED, Data.STRING, "name", "depth")})
    assert reply.properties["statusCode"] == 200, reply.properties
    assert reply.body["attributeNames"] == ["name", "depth"]
    assert ["arrayed", 2] in reply.body["results"]
    reply = mgmt.request({"operation": "QUERY", "type": "org.amqp.management", "entityType": "wharf.queue"},
                         {"attributeNames": Array(UNDESCRIBED, Data.INT, 1, 2)})
    assert reply.properties["statusCode"] == 400 and "attributeNames" in reply.properties["statusDescription"]


def test_node_operations_describe_the_types(mgmt):
    status, _, types = mgmt.call("GET-TYPES")
    assert status == 200 and "wharf.queue" in types and "org.amqp.management" in types
    status, _, attrs = mgmt.call("GET-ATTRIBUTES", entityType="wharf.queue")
    assert status == 200 and "depth" in attrs["wharf.queue"]
    status, _, ops = mgmt.call("GET-OPERATIONS")
    assert status == 200 and "QUERY" in ops["org.amqp.management"] and "READ" in ops["wharf.queue"]
    status, _, nodes = mgmt.call("GET-MGMT-NODES")
    assert status == 200 and nodes == []


def test_read_finds_an_entity_by_name_or_says_404(wharfd, mgmt):
    fill(wharfd, "readable", 2)
    status, _, body = mgmt.call("READ", type="wharf.queue", name="readable")
    assert status == 200 and body["depth"] == 2
    status, _, body = mgmt.call("READ", type="wharf.queue", identity="readable")
    assert status == 200 and body["name"] == "readable"
    status, desc, _ = mgmt.call("READ", type="wharf.queue", name="nothing-here")
    assert status == 404 and "nothing-here" in desc


def test_the_reply_correlates_by_message_id_else_correlation_id(mgmt):
    r = mgmt.request({"operation": "GET-MGMT-NODES", "type": "org.amqp.management"}, message_id=False,
                     correlation_id="corr-7")
    assert r.correlation_id == "corr-7" and r.properties["statusCode"] == 200


def test_a_request_without_reply_to_is_rejected_saying_why(mgmt):
    with pytest.raises(SendException):
        mgmt.sender.send(Message(properties={"operation": "GET-TYPES"}))
    # The node and the link go on.
    assert mgmt.call("GET-TYPES")[0] == 200


def malformed_requests():
    """(properties, body, expected status, words the description must hold)."""
    cases = [
        ({}, None, 400, "operation"),
        ({"operation": 7}, None, 400, "operation"),
        ({"operation": ""}, None, 400, "operation"),
        ({"operation": "QUERY"}, None, 400, "entityType"),
        ({"operation": "QUERY", "entityType": "wharf.nothing"}, None, 404, "wharf.nothing"),
        ({"operation": "QUERY", "entityType": "wharf.queue"}, "not a map", 400, "not a map"),
        ({"operation": "QUERY", "entityType": "wharf.queue"}, {"attributeNames": ["depth", "colour"]}, 400, "colour"),
        ({"operation": "QUERY", "entityType": "wharf.queue"}, {"attributeNames": [1, 2]}, 400, "attributeNames"),
        ({"operation": "QUERY", "entityType": "wharf.queue", "offset": -1}, None, 400, "offset"),
        ({"operation": "QUERY", "entityType": "wharf.queue", "count": -5}, None, 400, "count"),
        ({"operation": "QUERY", "entityType": "wharf.queue", "offset": "1"}, None, 400, "'offset' must be a whole"),
        ({"operation": "QUERY", "entityType": "wharf.queue", "count": "1"}, None, 400, "'count' must be a whole"),
        ({"operation": "QUERY", "entityType": "wharf.queue", "count": True}, None, 400, "'count'"),
        ({"operation": "QUERY", "entityType": "wharf.queue"}, {"attributeNames": "name"}, 400,
         "attributeNames is not a list"),
        ({"operation": "QUERY", "entityType": "wharf.queue"}, {"attributeNames": {"name": 1}}, 400,
         "attributeNames is not a list"),
        ({"operation": "FROB", "type": "org.amqp.management"}, None, 501, "FROB"),
        ({"operation": "READ", "type": "wharf.queue"}, None, 400, "name"),
        ({"operation": "READ", "type": "wharf.queue", "name": "absent"}, None, 404, "absent"),
        ({"operation": "DELETE", "type": "wharf.queue", "name": "x"}, None, 404, "'x'"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, None, 400, "changes one of"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"maxDepth": 3}, 404, "'x'"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"maxDepth": "3"}, 400, "maxDepth"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"maxDepht": 3}, 400, "'maxDepht' is not a setting"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"maxDeliveryCount": 2 ** 32}, 400,
         "'maxDeliveryCount' is at most 4294967295"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"deadLetterAddress": "x"}, 400, "itself"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"deadLetterAddress": "$m"}, 400, "'$m'"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"deadLetterAddress": "d\nlq"}, 400,
         "control character"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"deadLetterAddress": "dlq\x7f"}, 400,
         "control character"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"deadLetterAddress": "d" * 65536}, 400,
         "at most 65535 bytes"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "n" * 65536}, None, 400, "at most 65535 bytes"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "$bad"}, None, 400, "$bad"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "y"}, {"overflow": 1}, 400, "overflow"),
        ({"operation": "FROB", "type": "wharf.queue", "name": "x"}, None, 501, "FROB"),
        ({"operation": "READ", "type": "wharf.unknown", "name": "x"}, None, 404, "wharf.unknown"),
        ({"operation": "GET-ATTRIBUTES", "entityType": "wharf.nope"}, None, 404, "wharf.nope"),
        ({"operation": "READ", "type": 12, "name": "x"}, None, 400, "'type' must be a string"),
        ({"operation": "READ", "type": "wharf.queue", "name": 5}, None, 400, "'name' must be a string"),
        ({"operation": "GET-TYPES", "entityType": 3}, None, 400, "'entityType' must be a string"),
        # A floating-point number where text goes is refused, not read as
        # its decimal text (a queue "1.5" used to be read, or dead-lettered to).
        ({"operation": "READ", "type": "wharf.queue", "name": 1.5}, None, 400, "'name' must be a string"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"deadLetterAddress": 1.5}, 400,
         "'deadLetterAddress' must be a queue name"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "y"}, {"overflow": 2.0}, 400, "overflow"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "x"}, {"maxDepth": 3.0}, 400, "maxDepth"),
        # A setting of a type no setting has is refused, not dropped (it used
        # to be answered 201 with the default, as if it had not been sent).
        ({"operation": "CREATE", "type": "wharf.queue", "name": "typed"}, {"maxDepth": [5]}, 400,
         "'maxDepth' is a list"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "typed"}, {"maxDepth": b"\x05"}, 400,
         "'maxDepth' is a binary"),
        ({"operation": "UPDATE", "type": "wharf.queue", "name": "typed"}, {"maxDepth": {"a": 1}}, 400,
         "'maxDepth' is a map"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "typed"}, {1: 5}, 400, "key of the body's map is a long"),
        ({"operation": "CREATE", "type": "wharf.queue", "name": "typed"}, {"maxDepth": ulong(2 ** 64 - 1)}, 400,
         "larger than 9223372036854775807"),
        ({"operation": "QUERY", "entityType": "wharf.queue", "offset": ulong(2 ** 63)}, None, 400,
         "larger than 9223372036854775807"),
        ({"operation": "QUERY", "entityType": "wharf.queue"}, [1, 2, 3], 400, "not a map"),
    ]
    out = []
    for i in range(7):  # each case several times, with noise in extra properties
        for props, body, status, words in cases:
            p = dict(props)
            p["noise-%d" % i] = i
            out.append((p, body, status, words))
    return out


def test_a_hundred_malformed_requests_each_get_the_right_status_and_a_reason(mgmt):
    cases = malformed_requests()
    assert len(cases) >= 100
    for props, body, status, words in cases:
        r = mgmt.request(props, body)
        got = (r.properties["statusCode"], r.properties["statusDescription"])
        assert got[0] == status, (props, body, got)
        assert words in got[1], (props, body, got)
    assert mgmt.call("GET-TYPES")[0] == 200  # still answering


def test_the_link_listing_follows_links_as_they_come_and_go(wharfd, mgmt):
    # Each connection keeps its links' entries up to date one link at a
    # time (not rebuilt on every change): attach, detach and a detach the
    # broker does itself all show.
    import time
    from proton.utils import BlockingConnection

    def listed():
        return sorted(l["address"] for l in mgmt.query("link", ["address"]) if l["address"].startswith("comings-"))

    def wait_listed(want):
        deadline = time.monotonic() + 10
        while listed() != want and time.monotonic() < deadline:
            time.sleep(0.05)  # poll interval; the deadline bounds the wait
        assert listed() == want

    c = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        links = [c.create_receiver("comings-%d" % i, credit=1) for i in range(3)]
        snd = c.create_sender("comings-s")
        assert listed() == ["comings-0", "comings-1", "comings-2", "comings-s"]
        links[1].close()
        wait_listed(["comings-0", "comings-2", "comings-s"])
        status, _, _ = mgmt.call("DELETE", type="wharf.queue", name="comings-0")
        assert status == 204  # the broker detaches its consumer
        with pytest.raises(LinkDetached) as err:
            links[0].receive(timeout=10)
        assert "was deleted" in str(err.value)
        wait_listed(["comings-2", "comings-s"])
        snd.close()
        wait_listed(["comings-2"])
    finally:
        c.close()
    wait_listed([])


def test_connections_and_links_are_listed_and_a_connection_can_be_closed(wharfd, mgmt):
    from proton.utils import BlockingConnection, ConnectionClosed
    victim = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        victim.create_receiver("victims-queue", credit=1)
        links = mgmt.query("link", ["connection", "address", "direction", "relayed"])
        theirs = [l for l in links if l["address"] == "victims-queue"]
        assert len(theirs) == 1 and theirs[0]["direction"] == "out" and theirs[0]["relayed"] is False
        conns = {c["name"]: c for c in mgmt.query("wharf.connection")}
        mine = [conns[theirs[0]["connection"]]]
        assert mine[0]["links"] == 1 and mine[0]["remote"].startswith("127.0.0.1:")
        assert mine[0]["container"] == victim.container.container_id
        status, _, _ = mgmt.call("DELETE", type="wharf.connection", name=mine[0]["name"], reason="test")
        assert status == 204
        with pytest.raises(ConnectionClosed) as err:
            victim.wait(lambda: False, timeout=10, msg="waiting for the close")
        assert "amqp:connection:forced" in str(err.value) and "closed by management: test" in str(err.value)
        status, desc, _ = mgmt.call("DELETE", type="wharf.connection", name="connection-999999")
        assert status == 404 and "connection-999999" in desc
    finally:
        try:
            victim.close()
        except Exception:
            pass


def test_purge_and_delete_remove_stored_messages_for_good(make_wharfd):
    node = make_wharfd()
    fill_durable = [("kept", 3), ("purged", 4), ("deleted", 5)]
    from proton.utils import BlockingConnection
    c = BlockingConnection(node.url, timeout=10, sasl_enabled=False)
    try:
        for q, n in fill_durable:
            s = c.create_sender(q)
            for i in range(n):
                s.send(Message(body="%s-%d" % (q, i), durable=True))
    finally:
        c.close()
    m = Mgmt(node.url)
    try:
        status, _, body = m.call("PURGE", type="queue", name="purged")
        assert status == 200 and body["purged"] == 4
        assert m.call("DELETE", type="wharf.queue", name="deleted")[0] == 204
        status, desc, _ = m.call("PURGE", type="queue", name="deleted")
        assert status == 404 and "deleted" in desc
    finally:
        m.close()
    data = node.data_dir
    assert node.stop() == 0
    again = make_wharfd(data_dir=data)
    m = Mgmt(again.url)
    try:
        depths = {r["name"]: r["depth"] for r in m.query("wharf.queue", ["name", "depth"])}
    finally:
        m.close()
    assert depths.get("kept") == 3
    assert depths.get("purged", 0) == 0
    assert "deleted" not in depths


def test_create_and_update_a_queue_on_a_single_node(wharfd, mgmt):
    status, desc, body = mgmt.call("CREATE", type="wharf.queue", name="made",
                                   body={"maxDepth": 2, "overflow": "reject"})
    assert status == 201, desc
    assert body["maxDepth"] == 2 and body["overflow"] == "reject" and body["durable"] is True
    status, desc, _ = mgmt.call("CREATE", type="wharf.queue", name="made")
    assert status == 403 and "exists" in desc
    status, _, body = mgmt.call("READ", type="wharf.queue", name="made")
    assert status == 200 and body["depth"] == 0 and body["maxDepth"] == 2
    fill(wharfd, "made", 2)
    with pytest.raises(SendException) as err:
        fill(wharfd, "made", 1)  # full: the reject policy refuses the third
    assert err.value.state == Delivery.REJECTED
    status, desc, body = mgmt.call("UPDATE", type="wharf.queue", name="made",
                                   body={"maxDepth": 3, "deadLetterAddress": ""})
    assert status == 200 and body["maxDepth"] == 3 and body["deadLetterAddress"] == "", desc
    fill(wharfd, "made", 1)  # room for one more now
    assert mgmt.call("READ", type="wharf.queue", name="made")[2]["depth"] == 3


def test_a_connection_name_with_anything_after_its_number_names_no_connection(wharfd, mgmt):
    from proton.utils import BlockingConnection
    bystander = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        bystander.create_receiver("bystanders-queue", credit=1)
        links = mgmt.query("link", ["connection", "address"])
        name = next(l["connection"] for l in links if l["address"] == "bystanders-queue")
        number = name[len("connection-"):]
        for wrong in (name + "xyz", name + " ", name + "-not-this-one", "connection-0" + number,
                      "connection-+" + number, "connection- " + number):
            status, desc, _ = mgmt.call("DELETE", type="wharf.connection", name=wrong)
            assert status == 404 and wrong in desc, (wrong, status, desc)
        assert name in [c["name"] for c in mgmt.query("wharf.connection", ["name"])]
        # The connection is still open and usable.
        bystander.create_sender("bystanders-queue").send(Message(body="still here"))
    finally:
        bystander.close()


def outcome_of(mgmt, msg):
    """Sends msg on the management link; the (state, condition) it got."""
    dlv = mgmt.sender.link.send(msg)
    mgmt.conn.wait(lambda: dlv.remote_state != 0, timeout=10, msg="waiting for the outcome")
    cond = dlv.remote.condition
    return dlv.remote_state, cond and (cond.name, cond.description)


def test_a_request_whose_reply_could_not_be_delivered_is_refused_before_it_runs(wharfd, mgmt):
    fill(wharfd, "qb", 1)
    msg = Message(properties={"operation": "DELETE", "type": "wharf.queue", "name": "qb"}, reply_to="$nosuch")
    state, cond = outcome_of(mgmt, msg)
    assert state == Delivery.REJECTED and cond[0] == "amqp:invalid-field" and "'$nosuch'" in cond[1], (state, cond)
    status, _, body = mgmt.call("READ", type="wharf.queue", name="qb")
    assert status == 200 and body["depth"] == 1  # not deleted
    # Another connection's temporary queue on this node is a reply-to like any other.
    other = Mgmt(wharfd.url)
    try:
        msg = Message(id="to-other", properties={"operation": "GET-MGMT-NODES"}, reply_to=other.reply_to)
        assert outcome_of(mgmt, msg)[0] == Delivery.ACCEPTED
        reply = other.replies.receive(timeout=10)
        assert reply.correlation_id == "to-other" and reply.properties["statusCode"] == 200
    finally:
        other.close()


def send_patched(mgmt, msg, placeholder, raw):
    """Sends msg's encoding with `placeholder` replaced by the bytes `raw`, as
    long (Proton-Python sends no NUL or non-UTF-8 string); the delivery."""
    data = msg.encode()
    assert data.count(placeholder) == 1
    link = mgmt.sender.link
    dlv = link.delivery("patched-%d" % id(msg))
    link.send(data.replace(placeholder, raw))
    link.advance()
    return dlv


def test_a_reply_to_no_queue_can_have_is_refused_before_the_request_runs(wharfd, mgmt):
    # A control character, a NUL (Proton's C string would cut the name
    # there and answer another queue) and bytes that are not UTF-8: each is
    # refused saying why, and the DELETE does not run. They used to be
    # accepted, run, and their answers lost without a word.
    fill(wharfd, "victim", 1)
    delete = {"operation": "DELETE", "type": "wharf.queue", "name": "victim"}
    for raw, why in ((b"r\x01q", "control character"), (b"replyq\x00junk", "control character"),
                     (b"r\xff\xfeq", "not UTF-8")):
        placeholder = b"~" * len(raw)  # as long, so that every size in the encoding holds
        dlv = send_patched(mgmt, Message(properties=delete, reply_to=placeholder.decode()), placeholder, raw)
        mgmt.conn.wait(lambda: dlv.remote_state != 0, timeout=10, msg="waiting for the outcome")
        cond = dlv.remote.condition
        assert dlv.remote_state == Delivery.REJECTED and cond.name == "amqp:invalid-field", (raw, cond)
        assert "reply-to" in cond.description and why in cond.description, cond
    assert mgmt.call("READ", type="wharf.queue", name="victim")[0] == 200  # not deleted
    # A long one is quoted in part: the rejection's frame (a disposition
    # cannot be split) stays within the client's max-frame-size, where
    # quoting it whole closed the client's connection with a framing error.
    raw = b"\x01" * 60000
    placeholder = b"~" * len(raw)
    dlv = send_patched(mgmt, Message(properties=delete, reply_to=placeholder.decode()), placeholder, raw)
    mgmt.conn.wait(lambda: dlv.remote_state != 0, timeout=10, msg="waiting for the outcome")
    cond = dlv.remote.condition
    assert dlv.remote_state == Delivery.REJECTED and cond.name == "amqp:invalid-field", cond
    assert len(cond.description) <= 1024 + 3 and "..." in cond.description, len(cond.description)
    assert mgmt.call("READ", type="wharf.queue", name="victim")[0] == 200  # the connection is up


def test_a_name_that_is_not_utf8_is_answered_in_utf8(wharfd, mgmt):
    # A READ of a name that is not UTF-8, whose 404 names it: the
    # description escapes the bytes, so the client can decode the answer.
    req = Message(id="bad-utf8", reply_to=mgmt.reply_to,
                  properties={"operation": "READ", "type": "wharf.queue", "name": "bad@@q"})
    send_patched(mgmt, req, b"bad@@q", b"bad\xff\xfeq")
    reply = mgmt.replies.receive(timeout=10)  # decodes: the description is UTF-8
    mgmt.replies.accept()
    assert reply.correlation_id == "bad-utf8"
    assert reply.properties["statusCode"] == 404, reply.properties
    assert "bad\\xff\\xfeq" in reply.properties["statusDescription"], reply.properties


def test_an_id_of_a_type_amqp_does_not_allow_is_refused_before_the_request_runs(wharfd, mgmt):
    # A symbol message-id (AMQP allows ulong, uuid, binary and string; the
    # test turns a string's constructor into a symbol's): Proton's decoder
    # drops it, so the answer would carry no correlation-id. The DELETE used
    # to run and be answered so; now it is refused with a 400 that says
    # why, and does not run.
    fill(wharfd, "kept", 1)
    delete = {"operation": "DELETE", "type": "wharf.queue", "name": "kept"}
    for ids, field in (({"id": "sym-id"}, "message-id"), ({"correlation_id": "sym-id"}, "correlation-id")):
        dlv = send_patched(mgmt, Message(reply_to=mgmt.reply_to, properties=delete, **ids),
                           b"\xa1\x06sym-id", b"\xa3\x06sym-id")
        mgmt.conn.wait(lambda: dlv.remote_state != 0, timeout=10, msg="waiting for the outcome")
        assert dlv.remote_state == Delivery.ACCEPTED, dlv.remote_state  # taken, and answered
        reply = mgmt.replies.receive(timeout=10)
        mgmt.replies.accept()
        assert reply.properties["statusCode"] == 400, reply.properties
        assert field + " is of type symbol" in reply.properties["statusDescription"], reply.properties
    assert mgmt.call("READ", type="wharf.queue", name="kept")[0] == 200  # not deleted
    # A ulong message-id is allowed, and comes back as the correlation-id.
    mgmt.sender.send(Message(id=7, reply_to=mgmt.reply_to, properties={"operation": "GET-MGMT-NODES",
                                                                      "type": "org.amqp.management"}))
    reply = mgmt.replies.receive(timeout=10)
    mgmt.replies.accept()
    assert reply.correlation_id == 7 and reply.properties["statusCode"] == 200, reply


def test_an_empty_transfer_is_rejected_and_the_node_goes_on(mgmt):
    # No bytes at all: not a message. It used to abort wharfd (Proton's
    # decoder asserts on an empty buffer).
    link = mgmt.sender.link
    dlv = link.delivery("empty")
    link.send(b"")
    link.advance()
    mgmt.conn.wait(lambda: dlv.remote_state != 0, timeout=10, msg="waiting for the outcome")
    assert dlv.remote_state == Delivery.REJECTED
    assert dlv.remote.condition.name == "amqp:decode-error", dlv.remote.condition
    assert "empty" in dlv.remote.condition.description
    assert mgmt.call("GET-TYPES")[0] == 200  # still answering


def test_management_through_the_anonymous_relay_says_where_requests_go(wharfd):
    from proton.utils import BlockingConnection
    c = BlockingConnection(wharfd.url, timeout=10, sasl_enabled=False)
    try:
        s = c.create_sender(None)
        dlv = s.link.send(Message(address="$management", reply_to="r", properties={"operation": "GET-TYPES"}))
        c.wait(lambda: dlv.remote_state != 0, timeout=10, msg="waiting for the outcome")
        assert dlv.remote_state == Delivery.REJECTED
        cond = dlv.remote.condition
        assert cond.name == "amqp:not-found" and "link attached to it" in cond.description, cond
    finally:
        c.close()


def test_without_auto_create_a_reply_to_an_unknown_queue_is_refused(make_wharfd):
    from proton.utils import BlockingConnection
    node = make_wharfd(config_text='auto-create-queues = false\n[[queue]]\nname = "answers"\n'
                                   '[[queue]]\nname = "qc"\n')
    m = Mgmt(node.url)
    try:
        msg = Message(properties={"operation": "DELETE", "type": "wharf.queue", "name": "qc"}, reply_to="unknown-q")
        state, cond = outcome_of(m, msg)
        assert state == Delivery.REJECTED and cond[0] == "amqp:invalid-field", (state, cond)
        assert "'unknown-q'" in cond[1] and "auto-create-queues" in cond[1], cond
        assert m.call("READ", type="wharf.queue", name="qc")[0] == 200  # not deleted
        # A queue that exists takes the answer.
        msg = Message(id="into-answers", properties={"operation": "DELETE", "type": "wharf.queue", "name": "qc"},
                      reply_to="answers")
        assert outcome_of(m, msg)[0] == Delivery.ACCEPTED
        c = BlockingConnection(node.url, timeout=10, sasl_enabled=False)
        try:
            reply = c.create_receiver("answers").receive(timeout=10)
            assert reply.correlation_id == "into-answers" and reply.properties["statusCode"] == 204
        finally:
            c.close()
    finally:
        m.close()


def test_create_refuses_an_argument_that_is_not_a_setting(mgmt):
    status, desc, _ = mgmt.call("CREATE", type="wharf.queue", name="qa", body={"maxDepht": 5})
    assert status == 400 and "'maxDepht' is not a setting CREATE can set" in desc and "maxDepth" in desc, desc
    assert mgmt.call("READ", type="wharf.queue", name="qa")[0] == 404  # not made
    # Application properties beyond the request's own are a client's noise, not arguments.
    status, desc, body = mgmt.call("CREATE", type="wharf.queue", name="qa", body={"maxDepth": 5}, colour="blue")
    assert status == 201 and body["maxDepth"] == 5, desc
