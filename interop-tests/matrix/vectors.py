"""The test vectors: every AMQP primitive and composite type, as typed JSON
(../agents/CONTRACT.md), and the messages built from them."""

L = "x" * 300  # past 255 bytes: the 32-bit-length encodings


def t(kind, value):
    return {"type": kind, "value": value}


VALUES = [
    ("null", t("null", None)),
    ("true", t("boolean", True)),
    ("false", t("boolean", False)),
    ("ubyte", t("ubyte", 255)),
    ("ushort", t("ushort", 65535)),
    ("uint-0", t("uint", 0)),
    ("uint-small", t("uint", 200)),
    ("uint-max", t("uint", 4294967295)),
    ("ulong-0", t("ulong", "0")),
    ("ulong-small", t("ulong", "255")),
    ("ulong-max", t("ulong", "18446744073709551615")),
    ("byte", t("byte", -128)),
    ("short", t("short", -32768)),
    ("int-small", t("int", -100)),
    ("int-min", t("int", -2147483648)),
    ("long-small", t("long", "42")),
    ("long-min", t("long", "-9223372036854775808")),
    ("float", t("float", 3.25)),
    ("double", t("double", 3.141592653589793)),
    ("double-big", t("double", 1e300)),
    ("decimal32", t("decimal32", "22400001")),
    ("decimal64", t("decimal64", "2238000000000001")),
    ("decimal128", t("decimal128", "22080000000000000000000000000001")),
    ("char-ascii", t("char", "A")),
    ("char-bmp", t("char", "\u20ac")),
    ("char-astral", t("char", "\U0001d11e")),
    ("timestamp", t("timestamp", "1700000000123")),
    ("uuid", t("uuid", "123e4567-e89b-12d3-a456-426614174000")),
    ("binary-empty", t("binary", "")),
    ("binary", t("binary", "00ff10")),
    ("binary-long", t("binary", "ab" * 300)),
    ("string-empty", t("string", "")),
    ("string", t("string", "h\u00e9llo w\u00f6rld \u2713")),
    ("string-long", t("string", L)),
    ("symbol", t("symbol", "sym")),
    ("symbol-long", t("symbol", "s" * 300)),
    ("list-empty", t("list", [])),
    ("list", t("list", [t("int", 1), t("string", "a"), t("null", None), t("list", [t("boolean", True)])])),
    ("list-long", t("list", [t("long", str(i)) for i in range(300)])),
    ("map-empty", t("map", [])),
    ("map", t("map", [[t("string", "k"), t("int", 1)], [t("symbol", "s"), t("list", [t("double", 0.5)])],
                      [t("ulong", "7"), t("map", [[t("string", "in"), t("binary", "01")]])]])),
    ("array-int", t("array", {"element": "int", "values": [1, 2, 3]})),
    ("array-string", t("array", {"element": "string", "values": ["a", "b"]})),
    ("array-symbol", t("array", {"element": "symbol", "values": ["x", "y"]})),
    ("array-long", t("array", {"element": "long", "values": ["1", "-2"]})),
]

SIMPLE = {"list", "map", "array"}  # application properties take simple types only (AMQP 1.0, 3.2.5)


def type_messages():
    """One message per value: the value as the amqp-value body and, where
    allowed, as application property 'v'; the name as subject."""
    out = []
    for name, v in VALUES:
        m = {"properties": {"subject": name, "message_id": t("string", name)}, "body": {"value": v}}
        if v["type"] not in SIMPLE:
            m["application_properties"] = {"v": v}
        out.append(m)
    out.append({"properties": {"subject": "data-body", "message_id": t("string", "data-body")},
                "body": {"data": "00010203fffe"}})
    out.append({"properties": {"subject": "sequence-body", "message_id": t("string", "sequence-body")},
                "body": {"sequence": [[t("int", 1), t("string", "two"), t("list", [])]]}})
    return out


def property_messages():
    """Every header and properties field, with message ids of each type."""
    ids = [t("ulong", "123456789"), t("uuid", "0f8fad5b-d9cb-469f-a165-70867728950e"),
           t("binary", "cafe"), t("string", "id-string")]
    out = []
    for i, mid in enumerate(ids):
        out.append({
            "header": {"durable": True, "priority": 7, "ttl": 3600000, "first_acquirer": False},
            "properties": {"message_id": mid, "user_id": "75736572", "to": "props", "subject": "subject-%d" % i,
                           "reply_to": "reply-here", "correlation_id": ids[(i + 1) % len(ids)],
                           "content_type": "text/plain", "content_encoding": "identity",
                           "absolute_expiry_time": "4102444800000", "creation_time": "1700000000000",
                           "group_id": "group", "group_sequence": 7 + i, "reply_to_group_id": "reply-group"},
            "application_properties": {"n": t("int", i)},
            "body": {"value": t("string", "props-%d" % i)},
        })
    return out


def pattern_hex(n):
    """n bytes that are not all alike (a cut or shifted body shows), as hex."""
    return (bytes(range(251)) * (n // 251 + 1))[:n].hex()
