"""Typed JSON (see ../CONTRACT.md) to and from Python Proton values and
messages. Python Proton marks every AMQP type with a class of its own
(ulong, int32, symbol, ...), so nothing needs guessing: a plain int is a
long, a float a double, bytes binary, str a string."""
import uuid

from proton import (Array, Data, Message, UNDESCRIBED, byte, char, decimal32, decimal64, decimal128, float32,
                    int32, short, symbol, timestamp, ubyte, uint, ulong, ushort)

_ints = {"ubyte": ubyte, "ushort": ushort, "uint": uint, "byte": byte, "short": short, "int": int32}
_wide = {"ulong": ulong, "long": int, "timestamp": timestamp}
_array_codes = {"null": Data.NULL, "boolean": Data.BOOL, "ubyte": Data.UBYTE, "ushort": Data.USHORT,
                "uint": Data.UINT, "ulong": Data.ULONG, "byte": Data.BYTE, "short": Data.SHORT, "int": Data.INT,
                "long": Data.LONG, "float": Data.FLOAT, "double": Data.DOUBLE, "decimal32": Data.DECIMAL32,
                "decimal64": Data.DECIMAL64, "decimal128": Data.DECIMAL128, "char": Data.CHAR,
                "timestamp": Data.TIMESTAMP, "uuid": Data.UUID, "binary": Data.BINARY, "string": Data.STRING,
                "symbol": Data.SYMBOL, "list": Data.LIST, "map": Data.MAP}
_array_names = {v: k for k, v in _array_codes.items()}


def from_typed(t):
    kind, v = t["type"], t["value"]
    return _bare(kind, v)


def _bare(kind, v):
    if kind == "null":
        return None
    if kind == "boolean":
        return bool(v)
    if kind in _ints:
        return _ints[kind](v)
    if kind in _wide:
        return _wide[kind](int(v))
    if kind == "float":
        return float32(v)
    if kind == "double":
        return float(v)
    if kind == "decimal32":
        return decimal32(int.from_bytes(bytes.fromhex(v), "big"))
    if kind == "decimal64":
        return decimal64(int.from_bytes(bytes.fromhex(v), "big"))
    if kind == "decimal128":
        return decimal128(bytes.fromhex(v))
    if kind == "char":
        return char(v)
    if kind == "uuid":
        return uuid.UUID(v)
    if kind == "binary":
        return bytes.fromhex(v)
    if kind == "string":
        return str(v)
    if kind == "symbol":
        return symbol(v)
    if kind == "list":
        return [from_typed(x) for x in v]
    if kind == "map":
        return {from_typed(k): from_typed(x) for k, x in v}
    if kind == "array":
        return Array(UNDESCRIBED, _array_codes[v["element"]], *[_bare(v["element"], x) for x in v["values"]])
    raise ValueError("unknown type " + kind)


def to_typed(x):
    kind, v = _describe(x)
    return {"type": kind, "value": v}


def _describe(x):
    # Subclasses before their bases: bool and the int classes are ints.
    if x is None:
        return "null", None
    if isinstance(x, bool):
        return "boolean", x
    for name, cls in (("ubyte", ubyte), ("ushort", ushort), ("uint", uint), ("byte", byte), ("short", short),
                      ("int", int32)):
        if isinstance(x, cls):
            return name, int(x)
    if isinstance(x, decimal32):
        return "decimal32", int(x).to_bytes(4, "big").hex()
    if isinstance(x, decimal64):
        return "decimal64", int(x).to_bytes(8, "big").hex()
    if isinstance(x, ulong):
        return "ulong", str(int(x))
    if isinstance(x, timestamp):
        return "timestamp", str(int(x))
    if isinstance(x, int):
        return "long", str(x)
    if isinstance(x, float32):
        return "float", float(x)
    if isinstance(x, float):
        return "double", x
    if isinstance(x, decimal128):
        return "decimal128", bytes(x).hex()
    if isinstance(x, uuid.UUID):
        return "uuid", str(x)
    if isinstance(x, (bytes, bytearray, memoryview)):
        return "binary", bytes(x).hex()
    if isinstance(x, char):
        return "char", str(x)
    if isinstance(x, symbol):
        return "symbol", str(x)
    if isinstance(x, str):
        return "string", x
    if isinstance(x, Array):
        element = _array_names.get(x.type, "unknown(%s)" % x.type)
        return "array", {"element": element, "values": [_describe(e)[1] for e in x.elements]}
    if isinstance(x, (list, tuple)):
        return "list", [to_typed(e) for e in x]
    if isinstance(x, dict):
        return "map", [[to_typed(k), to_typed(v)] for k, v in x.items()]
    raise ValueError("no typed form for %r (%s)" % (x, type(x).__name__))


_ms = ("absolute_expiry_time", "creation_time")


def to_message(spec):
    """A proton.Message from a message in typed JSON."""
    m = Message()
    h = spec.get("header", {})
    if "durable" in h:
        m.durable = h["durable"]
    if "priority" in h:
        m.priority = h["priority"]
    if "ttl" in h:
        m.ttl = h["ttl"] / 1000.0
    if "first_acquirer" in h:
        m.first_acquirer = h["first_acquirer"]
    if "delivery_count" in h:
        m.delivery_count = h["delivery_count"]
    p = spec.get("properties", {})
    if "message_id" in p:
        m.id = from_typed(p["message_id"])
    if "user_id" in p:
        m.user_id = bytes.fromhex(p["user_id"])
    for field, attr in (("to", "address"), ("subject", "subject"), ("reply_to", "reply_to"),
                        ("content_type", "content_type"), ("content_encoding", "content_encoding"),
                        ("group_id", "group_id"), ("reply_to_group_id", "reply_to_group_id")):
        if field in p:
            setattr(m, attr, p[field])
    if "correlation_id" in p:
        m.correlation_id = from_typed(p["correlation_id"])
    if "absolute_expiry_time" in p:
        m.expiry_time = int(p["absolute_expiry_time"]) / 1000.0
    if "creation_time" in p:
        m.creation_time = int(p["creation_time"]) / 1000.0
    if "group_sequence" in p:
        m.group_sequence = p["group_sequence"]
    if "application_properties" in spec:
        m.properties = {k: from_typed(v) for k, v in spec["application_properties"].items()}
    body = spec.get("body")
    if body is not None:
        if "value" in body:
            m.body = from_typed(body["value"])
        elif "data" in body:
            m.body = bytes.fromhex(body["data"])
            m.inferred = True
        elif "sequence" in body:
            seqs = body["sequence"]
            if len(seqs) != 1:
                raise NotImplementedError("Python Proton sends one amqp-sequence section, not %d" % len(seqs))
            m.body = [from_typed(x) for x in seqs[0]]
            m.inferred = True
    return m


def from_message(m, delivery_count=None):
    """Typed JSON of a received proton.Message. Python Proton cannot tell an
    absent header field from its default, so defaults are printed too."""
    out = {"header": {"durable": bool(m.durable), "priority": int(m.priority), "first_acquirer": bool(m.first_acquirer),
                      "delivery_count": int(m.delivery_count)}}
    if m.ttl:
        out["header"]["ttl"] = int(round(m.ttl * 1000))
    p = {}
    if m.id is not None:
        p["message_id"] = to_typed(m.id)
    if m.user_id:
        p["user_id"] = bytes(m.user_id).hex()
    for field, attr in (("to", "address"), ("subject", "subject"), ("reply_to", "reply_to"),
                        ("content_type", "content_type"), ("content_encoding", "content_encoding"),
                        ("group_id", "group_id"), ("reply_to_group_id", "reply_to_group_id")):
        v = getattr(m, attr)
        # (Python Proton hands an unset content-type or -encoding back as
        # symbol(None), which prints as "None".)
        if v is not None and not (field.startswith("content_") and str(v) == "None"):
            p[field] = str(v)
    if m.correlation_id is not None:
        p["correlation_id"] = to_typed(m.correlation_id)
    if m.expiry_time:
        p["absolute_expiry_time"] = str(int(round(m.expiry_time * 1000)))
    if m.creation_time:
        p["creation_time"] = str(int(round(m.creation_time * 1000)))
    if m.group_sequence:
        p["group_sequence"] = int(m.group_sequence)
    if p:
        out["properties"] = p
    if m.properties:
        out["application_properties"] = {str(k): to_typed(v) for k, v in m.properties.items()}
    if m.inferred and isinstance(m.body, (bytes, bytearray, memoryview)):
        out["body"] = {"data": bytes(m.body).hex()}
    elif m.inferred and isinstance(m.body, list):
        out["body"] = {"sequence": [[to_typed(x) for x in m.body]]}
    elif m.body is not None or not m.inferred:
        out["body"] = {"value": to_typed(m.body)}
    return out
