"""What each client library cannot do or cannot tell apart, found by reading
its source and by these runs. A difference between what was sent and what
was received passes only when one of these explains it; anything else is
Wharf's fault and fails the run."""


def _typed(v, kind):
    return isinstance(v, dict) and v.get("type") == kind


def _same_value(a, b):
    return isinstance(a, dict) and isinstance(b, dict) and a.get("value") == b.get("value")


_NUMBERS = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "float", "double"}
_TEXTS = {"string", "symbol", "char", "uuid"}


def _bare(kind, v):
    return {"type": kind, "value": v}


def js_loose(sent, got):
    """True if `got` is `sent` as plain JavaScript values keep it: every
    number a double of the same value, text of any AMQP kind a string, an
    array a list, map keys strings (amqp10's decoding)."""
    if not isinstance(sent, dict) or not isinstance(got, dict):
        return sent == got
    st, gt, sv, gv = sent.get("type"), got.get("type"), sent.get("value"), got.get("value")
    if st in _NUMBERS:
        try:
            return gt in ("double", "long") and float(sv) == float(gv)
        except (TypeError, ValueError):
            return False
    if st in _TEXTS:
        return gt == "string" and sv == gv
    if st == "array":
        items = [_bare(sv["element"], x) for x in sv["values"]]
        return gt == "list" and len(items) == len(gv) and all(js_loose(a, b) for a, b in zip(items, gv))
    if st == "list":
        return gt == "list" and len(sv) == len(gv) and all(js_loose(a, b) for a, b in zip(sv, gv))
    if st == "map":
        if gt != "map" or len(sv) != len(gv):
            return False
        # A JavaScript object: keys are strings, integer-like ones first.
        have = {str(gk.get("value")): gval for gk, gval in gv}
        return len(have) == len(sv) and all(
            str(sk.get("value")) in have and js_loose(sval, have[str(sk.get("value"))]) for sk, sval in sv)
    return sent == got


def _body_loose(sent, got):
    if not isinstance(sent, dict) or not isinstance(got, dict):
        return False
    if "value" in sent and "value" in got:
        return js_loose(sent["value"], got["value"])
    if "sequence" in sent and "sequence" in got:
        return len(sent["sequence"]) == len(got["sequence"]) and all(
            js_loose(_bare("list", a), _bare("list", b)) for a, b in zip(sent["sequence"], got["sequence"]))
    return False


def _amqp10_loses_types(f, s, g):
    if f == "body":
        return _body_loose(s, g)
    return js_loose(s, g)


def _negative_ulong(f, s, g):
    def walk(s, g):
        if isinstance(s, dict) and s.get("type") == "ulong" and int(s["value"]) >= 2 ** 63:
            return isinstance(g, dict) and float(g.get("value")) == float(int(s["value"]) - 2 ** 64)
        return False
    if f == "body":
        return isinstance(s, dict) and isinstance(g, dict) and walk(s.get("value"), g.get("value"))
    return walk(s, g)


def _astral_char(f, s, g):
    def walk(s, g):
        return (isinstance(s, dict) and s.get("type") == "char" and ord(s["value"]) > 0xFFFF
                and isinstance(g, dict) and g.get("value") == chr(ord(s["value"]) & 0xFFFF))
    if f == "body":
        return isinstance(s, dict) and isinstance(g, dict) and walk(s.get("value"), g.get("value"))
    return walk(s, g)


# (client, role, test(field, sent, got) -> bool, why). role: "send" or "receive".
LIMITS = [
    ("python", "receive",
     lambda f, s, g: f in ("properties.message_id", "properties.correlation_id") and _typed(s, "ulong")
     and _typed(g, "long") and _same_value(s, g),
     "Python Proton 0.37 hands a ulong message-id or correlation-id back as a plain int, which reads as a long."),
    ("python", "send", lambda f, s, g: f == "body" and s == {"value": {"type": "null", "value": None}} and g is None,
     "Python Proton 0.37 sends no body section for a null body (it cannot tell null from no body)."),
    ("cpp", "send", lambda f, s, g: f == "body" and s == {"value": {"type": "null", "value": None}} and g is None,
     "Proton C++ 0.37 sends no body section for a null body (an empty proton::value is no body)."),
    ("amqp10", "receive", _amqp10_loses_types,
     "amqp10 3.6.0 decodes to plain JavaScript values: every number is a double, symbols, chars and uuids "
     "are strings, arrays are lists, and maps are JavaScript objects (string keys, integer-like ones first), so the types it reports are those."),
    ("amqp10", "receive", _negative_ulong,
     "amqp10 3.6.0 reads a ulong of 2^63 or more as a signed long (lib/types.js), so 2^64-1 arrives as -1."),
    ("amqp10", "receive", _astral_char,
     "amqp10 3.6.0 keeps only the low 16 bits of a char above U+FFFF."),
    ("amqp10", "receive", lambda f, s, g: f == "redirect-key" and g.get("type") == "string",
     "amqp10 3.6.0 cannot tell a symbol from a string: the redirect info's symbol keys read as strings."),
]


def explain(sender, receiver, field, sent, got):
    """The reason a known limitation gives for this difference, or None."""
    for client, role, test, why in LIMITS:
        if client == (sender if role == "send" else receiver) and test(field, sent, got):
            return "%s (%s)" % (why, client)
    return None


# Things a client cannot do at all, by scenario: the agent says so (exit 3)
# or cannot be asked. Checked against what the agents answer.
CANNOT = {}

# Vector names a client cannot decode at all (its receive would fail on the
# whole queue): they are not sent to it.
CANNOT_RECEIVE = {
    "amqp10": {n: "amqp10 3.6.0 has no decoder for decimal32/64/128 (lib/types.js)"
               for n in ("decimal32", "decimal64", "decimal128")},
}

# Clients whose "modified" outcome cannot carry delivery-failed: the broker
# then does not count a failed delivery (the redelivery's delivery-count
# stays 0), as the spec says.
MODIFY_WITHOUT_FAILED = {
    "cpp": "Proton C++ 0.37's delivery::modify() sends modified without delivery-failed, and its API "
           "cannot set it; so the redelivery's delivery-count stays 0, as the AMQP spec says it should.",
}

# Clients that do not show a detach's info map.
NO_REDIRECT_INFO = {}
