"""A local Wharf cluster for tests: N wharfd nodes with the wlm plugin and
one metadata store, plus the wharf-wlm command beside wharfd. The store is a
SQLite file, or etcd when WHARF_METADATA=etcd (one shared 3-member etcd
cluster per test process, a key prefix per Cluster) or when a test passes
its own EtcdCluster."""
import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid

from proton.utils import BlockingConnection, LinkDetached

from etcd_cluster import shared_etcd
from wharfd_process import WHARFD, Wharfd

WHARF_WLM = os.path.join(os.path.dirname(WHARFD), "wharf-wlm") if WHARFD else ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """wlm: extra [plugin.wlm] keys, e.g. {"lease-ttl": 1, "reassign-after": 2}.
    etcd: an EtcdCluster to use (else WHARF_METADATA=etcd picks the shared one).
    ids: the nodes' ids (default n1, n2, ...; then n is ignored).
    node_broker: node id -> top-level config lines for that node only (after
    `broker`), e.g. {"n2": "max-message-size = 2000"}."""

    def __init__(self, n=3, wlm=None, broker="", etcd=None, ids=None, node_broker=None):
        self.dir = tempfile.mkdtemp(prefix="wharf-cluster-")
        if etcd is None and os.environ.get("WHARF_METADATA") == "etcd":
            etcd = shared_etcd()
        self.etcd = etcd
        self.prefix = "/wharf-%s/" % uuid.uuid4().hex[:12]
        # The nodes' metadata setting: sqlite:PATH or etcd://HOSTS/PREFIX.
        self.metadata = etcd.spec(self.prefix) if etcd else "sqlite:" + os.path.join(self.dir, "meta.db")
        self.wlm = dict(wlm or {})
        self.broker = broker  # top-level config lines for every node
        self.node_broker = dict(node_broker or {})
        self.nodes = [self._start(i) for i in (ids or ["n%d" % i for i in range(1, n + 1)])]

    def _config(self, node_id):
        text = "plugins = [\"wlm\"]\nmetadata = \"%s\"\n%s\n%s\n[plugin.wlm]\n" % (
            self.metadata, self.broker, self.node_broker.get(node_id, ""))
        for k, v in self.wlm.items():
            text += "%s = %s\n" % (k, v)
        return text

    def _start(self, node_id, data_dir=None):
        # A free port may be taken by another process before the node binds
        # it: the start then fails, and another port is tried.
        for attempt in range(5):
            try:
                return Wharfd(config_text=self._config(node_id), node_id=node_id, data_dir=data_dir,
                              listen="127.0.0.1:%d" % free_port())
            except RuntimeError as e:
                if "cannot listen" not in str(e) or attempt == 4:
                    raise

    @property
    def by_port(self):
        return {n.port: n for n in self.nodes}

    def node(self, node_id):
        return next(n for n in self.nodes if n.node_id == node_id)

    def members(self):
        """Node ids with a live membership record, from `wharf-wlm status`."""
        out = self.wlm_command("status")
        assert out.returncode == 0, out.stderr
        ids, section = set(), None
        for line in out.stdout.splitlines():
            if not line.startswith("  "):
                section = line.strip()
            elif section == "nodes:" and "(drain requested)" not in line:
                ids.add(line.split()[0])
        return ids

    def restart(self, node):
        """Starts `node` again on its data directory (after kill or stop)."""
        again = self._start(node.node_id, data_dir=node.data_dir)
        self.nodes[self.nodes.index(node)] = again
        return again

    def wlm_command(self, *args):
        return subprocess.run([WHARF_WLM, "--metadata", self.metadata] + list(args),
                              capture_output=True, text=True, timeout=60)

    def owners(self):
        """queue -> (owner node id, moving-to or None), from `wharf-wlm status`."""
        out = self.wlm_command("status")
        assert out.returncode == 0, out.stderr
        owners, section = {}, None
        for line in out.stdout.splitlines():
            if not line.startswith("  "):
                section = line.strip()
                continue
            if section == "queues:":
                parts = line.split()
                moving = parts[parts.index("moving") + 2] if "moving" in parts else None
                owners[parts[0]] = (parts[1], moving)
        return owners

    def wait_for(self, cond, timeout=30, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = cond()
            if got:
                return got
            time.sleep(0.05)  # poll interval; the condition itself is checked with a deadline
        raise AssertionError("timed out waiting for " + what)

    def stop(self):
        """SIGTERM to every node still running; each must exit cleanly (0),
        and so must every node that exited before, unless a test killed it
        (a node that crashed, or that a sanitizer stopped, fails the test)."""
        codes = {}
        for n in self.nodes:
            if getattr(n, "killed", False):
                continue
            if n.proc.poll() is None:
                os.kill(n.pid, signal.SIGCONT)
            codes[n.node_id] = n.stop()
        bad = {k: v for k, v in codes.items() if v != 0}
        assert not bad, "nodes exited badly: %s" % bad


def connect(node, timeout=10):
    return BlockingConnection(node.url, timeout=timeout, sasl_enabled=False)


def attach(node, queue):
    """'local' if `node` serves `queue`, else the redirect's info (or the error)."""
    conn = connect(node)
    try:
        r = conn.create_receiver(queue)
        r.close()
        return "local"
    except LinkDetached as e:
        cond = e.link.remote_condition
        return {"condition": cond.name, "description": cond.description,
                "info": dict(cond.info) if cond.info else {}}
    finally:
        conn.close()


def owned_by(cluster, node, prefix, count=1):
    """Names of `count` queues (prefix-0, prefix-1, ...) whose owner is `node`."""
    found, i = [], 0
    while len(found) < count and i < 200:
        name = "%s-%d" % (prefix, i)
        if attach(node, name) == "local":
            found.append(name)
        i += 1
    assert len(found) == count, "no queue placed on " + node.node_id
    return found
