"""What scripts/bench_peers.py measures: wharfd (one node), a 3-node Wharf
cluster reached through a node that does not own the queue (relay), the
Proton C++ example broker, a private RabbitMQ 3.10 instance, and the
ceiling (a wharf-bench sender straight to a listening wharf-bench receiver).

A broker target has `url`, `prefix` (what goes before a queue name in an
address), `auth` (extra wharf-bench flags), `rss_kb()`, `cpu_s()` (CPU
seconds its processes have used) and `stop()`;
stop() is idempotent. Every target that was started and not stopped is in
LIVE, so that stop_all() can end them on Ctrl-C or failure. Starting one
that cannot run raises Unavailable(reason)."""
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

import bench  # scripts/bench.py: Broker (wharfd, example broker), bench(), free_port()

LIVE = []

RABBITMQ_BIN = "/usr/lib/rabbitmq/bin"


class Unavailable(Exception):
    """A target that cannot run on this machine; the text says why."""


def stop_all():
    while LIVE:
        t = LIVE.pop()
        try:
            t.stop()
        except Exception as e:  # keep stopping the others
            print("bench-peers: stopping %s: %s" % (getattr(t, "name", t), e))


def _children():
    kids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(pid))
    return kids


def _tree(pid):
    """`pid` and all its descendants."""
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def rss_tree_kb(pid):
    """VmRSS of `pid` and all its descendants, in kB."""
    total = 0
    for p in _tree(pid):
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_tree_s(pids):
    """CPU seconds (user + system) used so far by `pids` and all their descendants."""
    ticks = 0
    for pid in pids:
        for p in _tree(pid):
            try:
                with open("/proc/%d/stat" % p) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
            except (OSError, IndexError, ValueError):
                pass
    return ticks / os.sysconf("SC_CLK_TCK")


def _stop_proc(proc, grace=30):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Target:
    name = ""
    prefix = ""
    auth = ()
    url = ""

    def _live(self):
        LIVE.append(self)

    def _gone(self):
        if self in LIVE:
            LIVE.remove(self)


class Wharfd(Target):
    """One wharfd, no plugins (bench.Broker)."""
    name = "wharfd"
    kind, what = "wharfd", "wharfd"

    def __init__(self, args):
        try:
            self.b = bench.Broker(self.kind, args)
        except (OSError, RuntimeError) as e:
            raise Unavailable("%s did not start: %s" % (self.what, e))
        self._live()
        self.url = self.b.url

    def rss_kb(self):
        return self.b.rss_kb()

    def cpu_s(self):
        return cpu_tree_s([self.b.proc.pid])

    def stop(self):
        self._gone()
        if self.b is None:
            return
        self.b.stop()
        log = getattr(self.b, "log", None)  # wharfd's log file (the example broker has none)
        if log is not None:
            os.unlink(log.name)
        self.b = None


class Example(Wharfd):
    """The Proton C++ example broker (bench.Broker)."""
    name = "example"
    kind, what = "example", "the example broker"

    def __init__(self, args):
        if not os.access(args.example, os.X_OK):
            raise Unavailable("no example broker at %s" % args.example)
        super().__init__(args)


class Relay(Target):
    """Three wharfd with the wlm plugin on one SQLite metadata file; the rule
    `* -> node:n2` puts every queue on n2, and clients connect to n1, which
    relays their links to n2 (as scripts/bench-relay.sh does)."""
    name = "relay"

    def __init__(self, args):
        self.dir = tempfile.mkdtemp(prefix="wharf-peers-cluster-")
        self.procs = []
        self._live()
        with open(os.path.join(self.dir, "c.toml"), "w") as f:
            f.write('plugins = ["wlm"]\nmetadata = "sqlite:%s/meta.db"\n[plugin.wlm]\nrules = ["* -> node:n2"]\n'
                    % self.dir)
        ports = {n: bench.free_port() for n in ("n2", "n1", "n3")}
        for node, port in ports.items():
            log = open(os.path.join(self.dir, node + ".log"), "w")
            self.procs.append(subprocess.Popen(
                [os.path.join(args.bin, "wharfd"), "--node-id", node, "--listen", "127.0.0.1:%d" % port,
                 "--data-dir", os.path.join(self.dir, node), "--config", os.path.join(self.dir, "c.toml"),
                 "--log-level", "warn"], stdout=subprocess.DEVNULL, stderr=log))
            log.close()
        self.url = "127.0.0.1:%d" % ports["n1"]
        self.owner_url = "127.0.0.1:%d" % ports["n2"]  # direct, in the same cluster
        # Ready once a message goes through n1 to the queue's owner n2.
        deadline = time.monotonic() + 30
        why = "no answer"
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                why = "a node exited"
                break
            try:
                bench.bench(args, "pair", self.url, "--count", "10", "--address", "warmup", timeout=3, wall=10)
                return
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                why = str(e).strip().splitlines()[-1] if str(e).strip() else "failed"
                time.sleep(0.2)  # polling the cluster with a deadline
        tail = self._log_tail()
        self.stop()
        raise Unavailable("the 3-node cluster did not relay within 30 s (%s)%s" % (why, tail))

    def _log_tail(self):
        for node in ("n1", "n2", "n3"):
            try:
                with open(os.path.join(self.dir, node + ".log")) as f:
                    lines = f.read().strip().splitlines()
                if lines:
                    return "; %s: %s" % (node, lines[-1][-200:])
            except OSError:
                pass
        return ""

    def rss_kb(self):
        return sum(rss_tree_kb(p.pid) for p in self.procs if p.poll() is None)

    def cpu_s(self):
        return cpu_tree_s([p.pid for p in self.procs if p.poll() is None])

    def stop(self):
        self._gone()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            _stop_proc(p)
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)


class RabbitMQ(Target):
    """A private RabbitMQ node (rabbitmq_amqp1_0 plugin) in a temporary
    directory, on free ports (AMQP, distribution, its own epmd), as the
    user running the script; SASL PLAIN guest/guest (allowed on loopback).
    The system service is not used."""
    name = "rabbitmq"
    prefix = "/queue/"
    auth = ("--user", "guest", "--password", "guest")

    def __init__(self, args):
        server = os.path.join(RABBITMQ_BIN, "rabbitmq-server")
        if not os.access(server, os.X_OK):
            raise Unavailable("rabbitmq-server is not installed (scripts/deps.sh peers installs it)")
        self.dir = tempfile.mkdtemp(prefix="wharf-peers-rabbitmq-")
        self.proc = None
        self.epmd_port = bench.free_port()
        port, dist = bench.free_port(), bench.free_port()
        d = self.dir
        with open(os.path.join(d, "enabled_plugins"), "w") as f:
            f.write("[rabbitmq_amqp1_0].\n")
        with open(os.path.join(d, "rabbitmq.conf"), "w") as f:
            f.write("loopback_users.guest = true\n")
        open(os.path.join(d, "rabbitmq-env.conf"), "w").close()
        self.env = dict(os.environ, HOME=d, RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
                        RABBITMQ_NODE_PORT=str(port), RABBITMQ_DIST_PORT=str(dist),
                        ERL_EPMD_PORT=str(self.epmd_port), RABBITMQ_NODENAME="wharfpeers%d@localhost" % port,
                        RABBITMQ_MNESIA_BASE=os.path.join(d, "mnesia"), RABBITMQ_LOG_BASE=os.path.join(d, "log"),
                        RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(d, "enabled_plugins"),
                        RABBITMQ_CONFIG_FILE=os.path.join(d, "rabbitmq"),
                        RABBITMQ_ADVANCED_CONFIG_FILE=os.path.join(d, "advanced.config"),
                        RABBITMQ_CONF_ENV_FILE=os.path.join(d, "rabbitmq-env.conf"),
                        RABBITMQ_PID_FILE=os.path.join(d, "pid"))
        self._live()
        with open(os.path.join(d, "server.out"), "w") as out:
            # Its own session: Ctrl-C reaches the script, which stops it in order.
            self.proc = subprocess.Popen([server], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            rc = subprocess.run([os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "wait", "--timeout", "60",
                                 self.env["RABBITMQ_PID_FILE"]], env=self.env, capture_output=True,
                                text=True, timeout=90)
            ok, why = rc.returncode == 0, (rc.stderr or rc.stdout).strip()[-300:]
        except subprocess.TimeoutExpired:
            ok, why = False, "rabbitmqctl wait timed out"
        if not ok:
            self.stop()
            raise Unavailable("RabbitMQ did not start: %s" % why)
        self.url = "127.0.0.1:%d" % port

    def rss_kb(self):
        return rss_tree_kb(self.proc.pid) if self.proc and self.proc.poll() is None else 0

    def cpu_s(self):
        return cpu_tree_s([self.proc.pid]) if self.proc and self.proc.poll() is None else 0.0

    def stop(self):
        self._gone()
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    subprocess.run([os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "stop", self.env["RABBITMQ_PID_FILE"]],
                                   env=self.env, capture_output=True, timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                _stop_proc(self.proc, grace=10)
            self.proc = None
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        try:
            subprocess.run([epmd, "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Listener(Target):
    """`wharf-bench receive --listen 127.0.0.1:0`: the receiving half of the
    ceiling. result() waits for it to end and returns its JSON."""
    name = "ceiling listener"

    def __init__(self, args, *flags, timeout=10):
        cmd = [os.path.join(args.bin, "wharf-bench"), "receive", "--listen", "127.0.0.1:0", "--json", "--quiet",
               "--timeout", str(timeout)] + list(flags)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._live()
        buf, deadline = b"", time.monotonic() + 10
        while time.monotonic() < deadline and b"\n" not in buf:
            r, _, _ = select.select([self.proc.stderr], [], [], 0.1)
            if r:
                c = os.read(self.proc.stderr.fileno(), 256)
                if not c:
                    break
                buf += c
        line = buf.split(b"\n")[0].decode(errors="replace")
        if "listening on port " not in line:
            self.stop()
            raise RuntimeError("wharf-bench --listen did not start: %s" % line)
        self.url = "127.0.0.1:%s" % line.rsplit(" ", 1)[1]

    def result(self, wall):
        import json
        try:
            out, err = self.proc.communicate(timeout=wall)
        finally:
            self.stop()
        try:
            res = json.loads(out.decode().strip().splitlines()[-1])
        except (IndexError, ValueError):
            raise RuntimeError("wharf-bench --listen failed: %s" % err.decode(errors="replace")[-300:])
        if not res.get("ok"):
            raise RuntimeError("wharf-bench --listen: %s" % res.get("error"))
        return res

    def stop(self):
        self._gone()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


BROKERS = {"wharfd": Wharfd, "relay": Relay, "example": Example, "rabbitmq": RabbitMQ}
