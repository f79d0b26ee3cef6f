#!/usr/bin/env python3
"""Runs wharf-bench against wharfd and the Proton example broker, alternating
rounds so that both see the same machine noise, and prints medians and the
wharfd/example ratio as Markdown. Every broker runs on a port the OS picked
and is stopped after each scenario."""
import argparse
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, kind, args, threads=None, data_dir=None):
        self.kind = kind
        if kind == "wharfd":
            self.owned = data_dir is None
            self.tmp = data_dir or tempfile.mkdtemp(prefix="wharf-bench-")
            self.log = tempfile.NamedTemporaryFile(prefix="wharfd-log-", delete=False)
            cmd = [os.path.join(args.bin, "wharfd"), "--listen", "127.0.0.1:0",
                   "--log-level", "info", "--data-dir", self.tmp, "--node-id", "bench"]
            if threads:
                cmd += ["--threads", str(threads)]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log)
            self.port = self._port_from_stdout()
        else:
            self.port = free_port()
            self.proc = subprocess.Popen([args.example, "-a", "127.0.0.1:%d" % self.port],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self._wait_connectable()
        self.url = "127.0.0.1:%d" % self.port

    def _port_from_stdout(self):
        deadline = time.monotonic() + 10
        buf = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if r:
                c = os.read(self.proc.stdout.fileno(), 256)
                if not c:
                    break
                buf += c
                if b" listening on " in buf and buf.endswith(b"\n"):
                    return int(buf.split(b"\n")[0].rsplit(b":", 1)[1])
        raise RuntimeError("wharfd did not start")

    def _wait_connectable(self):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)  # polling a port with a deadline
        raise RuntimeError("example broker did not start")

    def log_text(self):
        with open(self.log.name) as f:
            return f.read()

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.kind == "wharfd" and self.owned:
            shutil.rmtree(self.tmp, ignore_errors=True)


def bench(args, mode, url, *extra, timeout=30, wall=600):
    """Runs wharf-bench; gives up after `timeout` s without progress (its own
    --timeout) or `wall` s in all."""
    cmd = [os.path.join(args.bin, "wharf-bench"), mode, "--url", url, "--json", "--quiet",
           "--timeout", str(timeout)] + list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=wall)
    try:
        res = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise RuntimeError("wharf-bench %s failed: %s" % (mode, out.stderr))
    if not res.get("ok"):
        raise RuntimeError("wharf-bench %s: %s" % (mode, res.get("error")))
    return res


def scenarios(args):
    n = str(args.count)
    return {
        "produce (msgs/s)": lambda b: bench(args, "send", b.url, "--count", n, "--address", "p")["msgs_per_s"],
        "drain (msgs/s)": lambda b: (bench(args, "send", b.url, "--count", n, "--address", "d"),
                                     bench(args, "receive", b.url, "--count", n, "--address", "d"))[1]["msgs_per_s"],
        "produce+consume (msgs/s)": lambda b: bench(args, "pair", b.url, "--count", n, "--address", "pc")["msgs_per_s"],
        "4 producers + 4 consumers (msgs/s)": lambda b: bench(
            args, "pair", b.url, "--count", n, "--connections", "4", "--address", "pc4", "--threads", "2")["msgs_per_s"],
        "latency p50 (us)": lambda b: bench(args, "latency", b.url, "--count", "3000", "--address", "l")["latency"]["p50_us"],
        "latency p99 (us)": lambda b: bench(args, "latency", b.url, "--count", "3000", "--address", "l")["latency"]["p99_us"],
        "RSS holding 200k x 100 B (MB)": lambda b: (bench(args, "send", b.url, "--count", "200000", "--address", "rss"),
                                                   b.rss_kb() / 1024.0)[1],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=200000)
    ap.add_argument("--threads-only", action="store_true", help="only compare wharfd --threads 1 vs 2")
    ap.add_argument("--store-only", action="store_true", help="only the durable-store figures")
    args = ap.parse_args()
    if args.store_only:
        store_figures(args)
        return

    results = {}
    if not args.threads_only:
        sc = scenarios(args)
        for r in range(args.rounds):
            for kind in ("wharfd", "example"):
                for name, fn in sc.items():
                    b = Broker(kind, args)
                    try:
                        results.setdefault(name, {}).setdefault(kind, []).append(fn(b))
                    finally:
                        b.stop()
                print("round %d %s done" % (r + 1, kind), file=sys.stderr)
        print("| scenario | wharfd | example broker | wharfd / example |")
        print("|---|---:|---:|---:|")
        for name, per in results.items():
            w = statistics.median(per["wharfd"])
            e = statistics.median(per["example"])
            print("| %s | %.1f | %.1f | %.2f |" % (name, w, e, w / e if e else float("nan")))

    # Threads: wharfd on 1 and 2 workers, alternating, the same loads.
    loads = {
        "produce+consume (msgs/s)": lambda b: bench(
            args, "pair", b.url, "--count", str(args.count), "--address", "t1")["msgs_per_s"],
        "4 producers + 4 consumers (msgs/s)": lambda b: bench(
            args, "pair", b.url, "--count", str(args.count), "--connections", "4", "--address", "t4",
            "--threads", "2")["msgs_per_s"],
        "latency p50 (us)": lambda b: bench(
            args, "latency", b.url, "--count", "5000", "--address", "tl")["latency"]["p50_us"],
    }
    thr = {}
    for r in range(args.rounds):
        for t in (1, 2):
            b = Broker("wharfd", args, threads=t)
            try:
                for name, fn in loads.items():
                    thr.setdefault(name, {}).setdefault(t, []).append(fn(b))
            finally:
                b.stop()
    print()
    print("| wharfd --threads, median of %d | 1 | 2 | 2 / 1 |" % args.rounds)
    print("|---|---:|---:|---:|")
    for name, per in thr.items():
        one, two = statistics.median(per[1]), statistics.median(per[2])
        print("| %s | %.1f | %.1f | %.2f |" % (name, one, two, two / one))


def store_figures(args):
    """Durable vs transient (4 producers, 100 B, at-least-once), alternating
    on one wharfd per run; then the time to recover 1,000,000 stored messages."""
    n = str(args.count)
    runs = {"transient": [], "durable": []}
    for r in range(args.rounds):
        for kind in ("transient", "durable"):
            b = Broker("wharfd", args)
            try:
                extra = ["--durable"] if kind == "durable" else []
                res = bench(args, "send", b.url, "--count", n, "--connections", "4",
                            "--address", "s", "--threads", "2", *extra)
                runs[kind].append(res["msgs_per_s"])
            finally:
                b.stop()
    t = statistics.median(runs["transient"])
    d = statistics.median(runs["durable"])
    print("| 4 producers, 100 B, at-least-once | msgs/s |")
    print("|---|---:|")
    print("| transient (non-durable messages) | %.0f |" % t)
    print("| durable (stored and synced before accepted) | %.0f |" % d)
    print("| durable / transient | **%.2f** |" % (d / t))

    data = tempfile.mkdtemp(prefix="wharf-recovery-")
    b = Broker("wharfd", args, data_dir=data)
    try:
        bench(args, "send", b.url, "--count", "1000000", "--connections", "4", "--address", "r",
              "--threads", "2", "--durable")
    finally:
        b.stop()
    times = []
    for r in range(args.rounds):
        b = Broker("wharfd", args, data_dir=data)
        b.stop()
        for line in b.log_text().splitlines():
            if "recovered 1000000 messages" in line:
                times.append(float(line.rsplit(" in ", 1)[1].split()[0]))
    print()
    print("| recovery of 1,000,000 stored 100 B messages | seconds |")
    print("|---|---:|")
    print("| median of %d restarts (from the node's own log line) | %.2f |"
          % (len(times), statistics.median(times) if times else float("nan")))
    shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
