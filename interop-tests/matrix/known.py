"""What each client library cannot do or cannot tell apart, found by reading
its source and by these runs. A difference between what was sent and what
was received passes only when one of these explains it; anything else is
Wharf's fault and fails the run."""


def _typed(v, kind):
    return isinstance(v, dict) and v.get("type") == kind


def _same_value(a, b):
    return isinstance(a, dict) and isinstance(b, dict) and a.get("value") == b.get("value")


# (client, role, test(field, sent, got) -> bool, why). role: "send" or "receive".
LIMITS = [
    ("python", "receive",
     lambda f, s, g: f in ("properties.message_id", "properties.correlation_id") and _typed(s, "ulong")
     and _typed(g, "long") and _same_value(s, g),
     "Python Proton 0.37 hands a ulong message-id or correlation-id back as a plain int, which reads as a long."),
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
