#!/usr/bin/env python3
"""Wharf against its peers in one run (issue #9): wharfd, a relaying 3-node
cluster, the Proton C++ example broker, RabbitMQ 3.10 and the ceiling (no
broker), all driven by the same wharf-bench on 127.0.0.1. Each round runs
every target one after another (the order rotates between rounds, so each
sees the same machine noise); every figure is the median of the rounds.
Writes docs/benchmarks-peers.md (bench_peers_report.py). Started by
scripts/bench-peers.sh, which installs and builds what it needs."""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

import bench
import bench_peers_report as report
from bench_peers_targets import BROKERS, LIVE, Listener, Unavailable, stop_all

TARGETS = ["wharfd", "relay", "example", "rabbitmq", "ceiling"]


def config(a):
    """Scenario sizes: full, or --quick for a smoke run; options override."""
    q = a.quick
    c = {
        "duration": a.duration or (0.5 if q else 1.5),
        "sizes": [100, 65536] if q else [100, 1024, 65536],
        "big_count": 200 if q else 2000,          # 64 KB runs are bounded by count, not time
        "cap": 50000 if q else 150000,            # most messages of a timed run (bounds the drains)
        "latency_count": 500 if q else 3000,
        "rss_counts": a.rss_counts or ([20000, 100000] if q else [200000, 1000000]),
        "fill_wall": a.fill_wall or (20 if q else 30),  # most seconds of sending to fill a queue for RSS
        "queue_counts": a.queue_counts or ([1, 100, 1000] if q else [1, 10, 100, 1000, 10000]),
        "connections": a.connections or (100 if q else 1000),
    }
    c["deliveries"] = ["at-least-once", "at-most-once"]
    return c


def size_name(s):
    return "64 KB" if s == 65536 else "1 KB" if s == 1024 else "%d B" % s


def rows(c):
    """(key, label, unit, higher_is_better) of every figure, in table order."""
    out = []
    for s in c["sizes"]:
        for d in c["deliveries"]:
            for kind in ("produce", "drain", "produce+consume"):
                out.append(("%s %d %s" % (kind, s, d), "%s %s, %s" % (kind, size_name(s), d), "msgs/s", True))
    out += [("latency p50", "e2e latency p50, one in flight", "µs", False),
            ("latency p99", "e2e latency p99, one in flight", "µs", False),
            ("accept p50", "accept latency p50, one in flight", "µs", False),
            ("accept p99", "accept latency p99, one in flight", "µs", False),
            ("durable produce", "durable produce 100 B, at-least-once", "msgs/s", True),
            ("rss idle", "RSS idle", "MB", False)]
    out += [("rss %d" % n, "RSS holding {:,} × 100 B".format(n), "MB", False) for n in c["rss_counts"]]
    out += [("queues %d" % k, "produce+consume with {:,} queue(s) in use".format(k), "msgs/s", True)
            for k in c["queue_counts"]]
    out += [("cpu queues %d" % k, "broker CPU per message with {:,} queue(s) in use".format(k), "µs/msg", False)
            for k in c["queue_counts"]]
    out.append(("connections", "produce over {:,} connections, one link each".format(c["connections"]),
                "msgs/s", True))
    return out


class Round:
    """Collects the figures of one target in one round into res[key][target]
    (a list over rounds); a failed attempt records its error per key."""

    def __init__(self, res, errors, target):
        self.res, self.errors, self.target = res, errors, target

    def attempt(self, keys, fn):
        """fn() returns {key: value} for `keys`; on failure every key gets the error."""
        try:
            got = fn()
        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError, TypeError) as e:
            text = str(e).strip().splitlines()
            for k in keys:
                self.errors.setdefault(k, {})[self.target] = text[-1][:200] if text else type(e).__name__
            return None
        for k, v in got.items():
            if isinstance(v, str):  # a figure that could not be taken: why
                self.errors.setdefault(k, {})[self.target] = v
            else:
                self.res.setdefault(k, {}).setdefault(self.target, []).append(v)
        return got


# At-most-once `receive` (no count) and `pair` end once nothing has arrived
# for this long. A broker may still be taking in a pre-settled burst when the
# receiver attaches (RabbitMQ 3.10: up to its 98,304 credits, a few seconds),
# and hand out nothing, not even a credit top-up, until it has: 0.5 s (receive)
# or wharf-bench's default 1 s (pair) ended runs before the messages came, and
# counted them lost. The quiet tail is not in the rate (it ends at the last message).
AMO_QUIET = ["--drain-idle", "5"]


def steady_rate(r, sending_s=None, least=0.5):
    """Messages per second from the moment every link was attached (wharf-bench's
    steady_per_s). With `sending_s` (the run's --duration): n/a unless sending
    went on for at least `least` s after every link was attached; otherwise
    steady_per_s counts next to nothing over the wait for the last settlements
    (RabbitMQ, 1,000 connections: 0)."""
    if r.get("steady_per_s") is None:
        raise RuntimeError("the run ended before every link was attached (setup %.1f s)" % r.get("setup_s", 0))
    if sending_s is not None and r.get("setup_s", 0) > sending_s - least:
        raise RuntimeError("sending stopped at %.1f s, before every link was attached (setup %.1f s)"
                           % (sending_s, r.get("setup_s", 0)))
    return r["steady_per_s"]


class CpuSampler:
    """A broker target's CPU seconds (all its processes), read every 0.1 s
    while a run goes on, so that the CPU of the run's steady part alone
    (after every link attached, before the last messages drain) can be
    taken: at 10,000 queues the attach of 20,000 links is a CPU cost of its
    own, not a message's."""

    def __init__(self, target):
        self.target, self.samples = target, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.done.set()
        self.thread.join()

    def _run(self):
        while True:
            self.samples.append((time.monotonic(), self.target.cpu_s()))
            if self.done.wait(0.1):
                self.samples.append((time.monotonic(), self.target.cpu_s()))
                return

    def _at(self, when):
        """CPU seconds at `when`, linear between the samples around it."""
        before = [s for s in self.samples if s[0] <= when]
        after = [s for s in self.samples if s[0] >= when]
        if not before or not after:
            return None
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (when - t0) / (t1 - t0)

    def per_message(self, started, r, margin=0.25):
        """The target's CPU µs per message over wharf-bench run `r`'s steady
        part (from `setup_s` to `elapsed_s` after `started`, less `margin`
        s at each end), at its steady rate; or why there is none."""
        a, b = started + r.get("setup_s", 0) + margin, started + r.get("elapsed_s", 0) - margin
        rate = r.get("steady_per_s")
        if not rate or b - a < 0.5:
            return "the steady part was too short to read the broker's CPU"
        ca, cb = self._at(a), self._at(b)
        if ca is None or cb is None:
            return "no CPU samples around the steady part"
        return (cb - ca) * 1e6 / (rate * (b - a))


def sending_s(c, links, per_thousand=1):
    """Seconds of sending for a run with this many links: the timed part, plus
    `per_thousand` s per 1,000 links so that sending outlasts their attach
    (its rate is counted only after every link attached)."""
    return c["duration"] + per_thousand * ((links + 999) // 1000)


def long_enough(c, links, per_thousand=1):
    return ["--duration", str(sending_s(c, links, per_thousand))]


def links_for(k):
    """--connections and --links for k link pairs: at most 1,000 links a connection."""
    conns = max(1, (k + 999) // 1000)
    return ["--connections", str(conns), "--links", str(k // conns), "--queues", str(k)]


def delivery_flags(s, d):
    return ["--size", str(s)] + (["--at-most-once"] if d == "at-most-once" else [])


def broker_round(args, c, t, rnd, out):
    """Every scenario but RSS against one running broker target."""
    def run(mode, addr, *flags, timeout=10, wall=300, url=t.url):
        return bench.bench(args, mode, url, "--address", "%s%s-r%d" % (t.prefix, addr, rnd), *t.auth,
                           *flags, timeout=timeout, wall=wall)
    dur = ["--duration", str(c["duration"])]
    for s in c["sizes"]:
        bounded = ["--count", str(c["big_count"])] if s >= 65536 else dur + ["--count", str(c["cap"])]
        for d in c["deliveries"]:
            flags = delivery_flags(s, d)
            q = "t%d%s" % (s, d[5])
            p, dr = "produce %d %s" % (s, d), "drain %d %s" % (s, d)

            def produce_drain():
                sent = run("send", q, *flags, *bounded)
                # At-least-once: take exactly what was accepted; at-most-once: until empty.
                take = AMO_QUIET if d == "at-most-once" else ["--count", str(sent["accepted"])]
                try:
                    got = run("receive", q, *flags, *take)["msgs_per_s"]
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    got = str(e).strip()[-200:] or "failed"
                return {p: sent["msgs_per_s"], dr: got}
            out.attempt([p, dr], produce_drain)
            pc = "produce+consume %d %s" % (s, d)
            quiet = AMO_QUIET if d == "at-most-once" else []
            out.attempt([pc], lambda: {pc: run("pair", q + "p", *flags, *bounded, *quiet)["msgs_per_s"]})
            if s == 100 and d == "at-least-once" and getattr(t, "owner_url", None):
                # Issue #5's direct: the same cluster, the client at the owner.
                out.attempt(["owner pc"], lambda: {"owner pc": run(
                    "pair", "owner", *flags, *bounded, url=t.owner_url)["msgs_per_s"]})

    def latency():
        lat = run("latency", "lat", "--count", str(c["latency_count"]))["latency"]
        return {"latency p50": lat["p50_us"], "latency p99": lat["p99_us"]}
    out.attempt(["latency p50", "latency p99"], latency)

    def accept():
        lat = run("send", "acc", "--in-flight", "1", "--count", str(c["latency_count"]))["latency"]
        return {"accept p50": lat["p50_us"], "accept p99": lat["p99_us"]}
    out.attempt(["accept p50", "accept p99"], accept)
    out.attempt(["durable produce"],
                lambda: {"durable produce": run("send", "dur", "--durable", *dur)["msgs_per_s"]})
    for k in c["queue_counts"]:
        key, cpu_key = "queues %d" % k, "cpu queues %d" % k

        def queues():
            started = time.monotonic()
            with CpuSampler(t) as cpu:
                r = run("pair", "q%d" % k, *links_for(k), *long_enough(c, 2 * k), timeout=30, wall=90)
            return {key: steady_rate(r, sending_s(c, 2 * k)), cpu_key: cpu.per_message(started, r)}
        out.attempt([key, cpu_key], queues)
    n = c["connections"]
    out.attempt(["connections"], lambda: {"connections": steady_rate(
        run("send", "conns", "--connections", str(n), *long_enough(c, n, 5), timeout=30, wall=90),
        sending_s(c, n, 5))})


def rss_round(args, c, t, rnd, out):
    """RSS of a freshly started broker target: idle, then holding each count
    of 100 B messages (filled with at-least-once sends on one queue)."""
    def settle():
        time.sleep(1)  # let the broker finish what the last send left it (RSS is not a condition to poll)
        return t.rss_kb() / 1024.0
    out.attempt(["rss idle"], lambda: {"rss idle": settle()})
    held = 0
    for n in c["rss_counts"]:
        key = "rss %d" % n

        def fill():
            nonlocal held
            r = bench.bench(args, "send", t.url, "--address", "%srss-r%d" % (t.prefix, rnd), *t.auth,
                            "--count", str(n - held), "--duration", str(c["fill_wall"]), timeout=10,
                            wall=c["fill_wall"] + 60)
            held += r["accepted"]
            if held < n:
                return {key: "held only {:,} after {} s of sending".format(held, c["fill_wall"])}
            return {key: settle()}
        if out.attempt([key], fill) is None or held < n:
            for rest in c["rss_counts"][c["rss_counts"].index(n) + 1:]:
                out.errors.setdefault("rss %d" % rest, {})[t.name] = "not filled (the smaller fill fell short)"
            break


def ceiling_round(args, c, rnd, out):
    """The same scenarios with no broker: wharf-bench send straight to a
    listening wharf-bench receiver. Produce, drain and produce+consume are one
    figure there (what the receiver took per second)."""
    def through(send_flags, listen_flags, wall=300):
        lis = Listener(args, *listen_flags, timeout=30)
        try:
            bench.bench(args, "send", lis.url, *send_flags, timeout=10, wall=wall)
        except (RuntimeError, subprocess.TimeoutExpired):
            lis.stop()
            raise
        return lis.result(wall=60)
    dur = ["--duration", str(c["duration"])]
    for s in c["sizes"]:
        bounded = ["--count", str(c["big_count"])] if s >= 65536 else dur + ["--count", str(c["cap"])]
        for d in c["deliveries"]:
            flags = delivery_flags(s, d)
            keys = ["%s %d %s" % (kind, s, d) for kind in ("produce", "drain", "produce+consume")]
            amo = ["--at-most-once"] if d == "at-most-once" else []
            out.attempt(keys, lambda: dict.fromkeys(keys, through(flags + bounded, amo)["msgs_per_s"]))

    def latency():
        # One in flight; the send-to-accept time: sender -> receiver -> sender,
        # two hops as sender -> broker -> receiver.
        lis = Listener(args)
        lat = bench.bench(args, "send", lis.url, "--in-flight", "1", "--count", str(c["latency_count"]),
                          timeout=10, wall=120)["latency"]
        lis.result(wall=30)
        return {"latency p50": lat["p50_us"], "latency p99": lat["p99_us"],
                "accept p50": lat["p50_us"], "accept p99": lat["p99_us"]}  # one figure, as for throughput
    out.attempt(["latency p50", "latency p99", "accept p50", "accept p99"], latency)
    for k in c["queue_counts"]:
        key = "queues %d" % k
        lf = links_for(k)[:4]  # the listener takes --connections x --links links
        out.attempt([key], lambda: {key: steady_rate(through(links_for(k) + long_enough(c, 2 * k), lf, wall=90))})
    n = str(c["connections"])
    out.attempt(["connections"], lambda: {"connections": steady_rate(
        through(["--connections", n] + long_enough(c, int(n), 5), ["--connections", n], wall=90))})


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer scenarios and smaller counts (a smoke run)")
    ap.add_argument("--only", default=",".join(TARGETS), help="targets, of: " + ",".join(TARGETS))
    ap.add_argument("--duration", type=float, help="seconds per timed run (default 1.5, quick 0.5)")
    ap.add_argument("--rss-counts", type=lambda v: [int(x) for x in v.split(",")],
                    help="queued 100 B messages at which RSS is read (default 200000,1000000)")
    ap.add_argument("--queue-counts", type=lambda v: [int(x) for x in v.split(",")],
                    help="queues in use (default 1,10,100,1000,10000)")
    ap.add_argument("--fill-wall", type=int, help="most seconds of sending per RSS fill step (default 30)")
    ap.add_argument("--connections", type=int, help="connections of the connections scenario (default 1000)")
    ap.add_argument("--out", help="the Markdown file to write (default docs/benchmarks-peers.md)")
    ap.add_argument("--command", default="", help="the command line, for the report")
    args = ap.parse_args()
    only = [x for x in args.only.split(",") if x]
    bad = [x for x in only if x not in TARGETS]
    if bad or args.rounds < 1:
        ap.error("unknown target(s) %s; choose from %s" % (",".join(bad), ",".join(TARGETS)) if bad
                 else "--rounds must be at least 1")
    c = config(args)
    res, errors, unavailable = {}, {}, {}
    started = time.time()

    def on_signal(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        for rnd in range(args.rounds):
            order = only[rnd % len(only):] + only[:rnd % len(only)]  # rotate: no target always first
            for name in order:
                if name in unavailable:
                    continue
                t0 = time.time()
                out = Round(res, errors, name)
                if name == "ceiling":
                    ceiling_round(args, c, rnd, out)
                else:
                    for phase in (broker_round, rss_round):
                        try:
                            t = BROKERS[name](args)
                        except Unavailable as e:
                            unavailable[name] = str(e)
                            break
                        try:
                            phase(args, c, t, rnd, out)
                        finally:
                            t.stop()
                print("bench-peers: round %d/%d %s %s (%.0f s)" % (rnd + 1, args.rounds, name,
                      "n/a: " + unavailable[name] if name in unavailable else "done", time.time() - t0),
                      file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("bench-peers: interrupted; stopping everything (no report written)", file=sys.stderr)
        return 130
    finally:
        stop_all()
    medians = {k: {t: statistics.median(v) for t, v in per.items() if v} for k, per in res.items()}
    path = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "benchmarks-peers.md")
    text = report.render(c, rows(c), only, medians, errors, unavailable, args, time.time() - started)
    with open(path, "w") as f:  # after render(): it asks git whether the tree is clean
        f.write(text)
    print("bench-peers: wrote %s" % os.path.normpath(path), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
