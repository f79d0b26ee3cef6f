"""The interop agents (../agents/CONTRACT.md): how to run each, and how to
compare what one sent with what another received."""
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
AGENTS = os.path.join(os.path.dirname(HERE), "agents")
JS = os.path.join(AGENTS, "js")
CPP_AGENT = os.environ.get("WHARF_CPP_AGENT", "")

CLIENTS = {
    "python": ["/usr/bin/python3", os.path.join(AGENTS, "python", "agent.py")],
    "rhea": ["node", os.path.join(JS, "rhea_agent.js")],
    "amqp10": ["node", os.path.join(JS, "amqp10_agent.js")],
    "cpp": [CPP_AGENT],
}


def missing(client):
    """Why `client`'s agent cannot run here, or None."""
    cmd = CLIENTS[client]
    if client == "cpp":
        return None if CPP_AGENT and os.path.exists(CPP_AGENT) else "set WHARF_CPP_AGENT (built with the tests)"
    if cmd[0] == "node" and not os.path.isdir(os.path.join(JS, "node_modules")):
        return "run `npm ci` in interop-tests/agents/js (scripts/test.sh does)"
    return None if os.path.exists(cmd[-1]) else "no agent at " + cmd[-1]


class Result:
    def __init__(self, rc, doc, stderr):
        self.rc, self.doc, self.stderr = rc, doc, stderr

    @property
    def unsupported(self):
        return self.doc.get("unsupported") if self.rc == 3 and isinstance(self.doc, dict) else None

    def __repr__(self):
        return "exit %d: %s %s" % (self.rc, json.dumps(self.doc)[:400], self.stderr[-400:])


def run(client, command, url, timeout=60, **opts):
    """Runs one agent command; options are --key value (True: a bare flag)."""
    cmd = list(CLIENTS[client]) + [command, "--url", url]
    for k, v in opts.items():
        if v is None or v is False:
            continue
        cmd.append("--" + k.replace("_", "-"))
        if v is not True:
            cmd.append(str(v))
    cmd += ["--timeout", str(timeout - 5)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        doc = {"error": "not JSON: " + p.stdout[:300]}
    return Result(p.returncode, doc, p.stderr)


def send(client, url, queue, messages, **opts):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(messages, f)
    try:
        return run(client, "send", url, queue=queue, file=f.name, **opts)
    finally:
        os.unlink(f.name)


def request(client, url, queue, message, **opts):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([message], f)
    try:
        return run(client, "request", url, queue=queue, file=f.name, **opts)
    finally:
        os.unlink(f.name)


# What an absent header field means (AMQP 1.0, 3.2.1): a client that leaves
# out a field at its default value has sent that value.
HEADER_DEFAULTS = {"durable": False, "priority": 4, "first_acquirer": False, "delivery_count": 0}


def differences(sent, got):
    """(field, sent, got) for every field of `sent` that `got` does not
    carry exactly; header fields the broker sets are not compared."""
    out = []
    for section in ("header", "properties", "application_properties"):
        want, have = sent.get(section, {}), dict(got.get(section) or {})
        if section == "header":
            for k, v in HEADER_DEFAULTS.items():
                have.setdefault(k, v)
        for k, v in want.items():
            if have.get(k) != v:
                out.append(("%s.%s" % (section, k), v, have.get(k)))
    if "body" in sent and sent["body"] != got.get("body"):
        out.append(("body", sent["body"], got.get("body")))
    return out
