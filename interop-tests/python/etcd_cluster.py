"""A real etcd cluster for tests: N etcd processes (/usr/bin/etcd, or
$WHARF_ETCD) on free 127.0.0.1 ports in a temporary directory, with short
heartbeat and election timeouts. Nothing sleeps to wait: every wait polls
with a deadline. stop() ends every member."""
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ETCD = os.environ.get("WHARF_ETCD", "/usr/bin/etcd")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _b64(text):
    return base64.b64encode(text.encode()).decode()


class EtcdCluster:
    def __init__(self, n=3):
        if not os.access(ETCD, os.X_OK):
            raise RuntimeError("%s is not there: install etcd-server (scripts/deps.sh test)" % ETCD)
        self.dir = tempfile.mkdtemp(prefix="wharf-etcd-")
        self.members = [{"name": "m%d" % (i + 1), "client": _free_port(), "peer": _free_port(), "proc": None}
                        for i in range(n)]
        for i in range(n):
            self.start(i)
        self.wait_healthy()

    @property
    def endpoints(self):
        return ",".join("127.0.0.1:%d" % m["client"] for m in self.members)

    def spec(self, prefix="/wharf/"):
        return "etcd://%s%s" % (self.endpoints, prefix)

    def start(self, i):
        m = self.members[i]
        if m["proc"] is not None and m["proc"].poll() is None:
            return
        initial = ",".join("%s=http://127.0.0.1:%d" % (o["name"], o["peer"]) for o in self.members)
        client, peer = "http://127.0.0.1:%d" % m["client"], "http://127.0.0.1:%d" % m["peer"]
        out = open(os.path.join(self.dir, m["name"] + ".out"), "ab")
        m["proc"] = subprocess.Popen(
            [ETCD, "--name", m["name"], "--data-dir", os.path.join(self.dir, m["name"]),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", initial, "--initial-cluster-state", "new",
             "--initial-cluster-token", "wharf-test", "--heartbeat-interval", "50",
             "--election-timeout", "500", "--logger", "zap",
             "--log-outputs", os.path.join(self.dir, m["name"] + ".log")],
            stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        out.close()

    def kill(self, i):
        """SIGKILL to member i; its data stays for start(i)."""
        p = self.members[i]["proc"]
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(timeout=10)

    def stop_all(self):
        for m in self.members:
            p = m["proc"]
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for m in self.members:
            p = m["proc"]
            if p is not None:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)

    def start_all(self):
        for i in range(len(self.members)):
            self.start(i)

    def stop(self):
        self.stop_all()
        shutil.rmtree(self.dir, ignore_errors=True)

    def running(self):
        return [i for i, m in enumerate(self.members) if m["proc"] is not None and m["proc"].poll() is None]

    def call(self, i, path, body, timeout=2):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.members[i]["client"], path),
                                     data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode())

    def leader(self):
        """Index of the current leader, or None."""
        for i in self.running():
            try:
                st = self.call(i, "/v3/maintenance/status", {})
            except (OSError, urllib.error.URLError, ValueError):
                continue
            if st.get("leader") and st.get("leader") == st.get("header", {}).get("member_id"):
                return i
        return None

    def healthy(self):
        """True if every running member answers a linearizable read (needs a leader)."""
        for i in self.running():
            try:
                r = self.call(i, "/v3/kv/range", {"key": _b64("\0")}, timeout=1)
            except (OSError, urllib.error.URLError, ValueError):
                return False
            if "header" not in r:
                return False
        return bool(self.running())

    def wait_healthy(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.healthy():
                return
            time.sleep(0.05)  # poll interval, under the deadline
        raise AssertionError("etcd cluster in %s did not become healthy" % self.dir)

    def list(self, prefix):
        """key -> value (strings) of every key under prefix (full etcd keys)."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        for i in self.running():
            try:
                r = self.call(i, "/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(end)})
            except (OSError, urllib.error.URLError, ValueError):
                continue
            return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
                    for kv in r.get("kvs", [])}
        raise AssertionError("no etcd member answered")


_shared = None


def shared_etcd():
    """One 3-member cluster for every Cluster of this test process that does
    not bring its own (each Cluster uses a prefix of its own); stopped at exit."""
    global _shared
    if _shared is None:
        import atexit
        _shared = EtcdCluster(3)
        atexit.register(_shared.stop)
    return _shared
