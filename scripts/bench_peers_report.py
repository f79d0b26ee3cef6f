"""Renders docs/benchmarks-peers.md from the medians of scripts/bench_peers.py:
the goals (met / not met), Wharf's ratio to each peer and to the ceiling,
every median, what could not be measured and why, the machine, the date and
the exact command."""
import datetime
import os
import platform
import subprocess

NAMES = {"wharfd": "wharfd", "relay": "wharfd relayed", "example": "example broker",
         "rabbitmq": "RabbitMQ 3.10", "ceiling": "ceiling"}


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = "%.0f GB RAM" % (int(f.readline().split()[1]) / 1024.0 / 1024.0)
    except (OSError, ValueError, IndexError):
        pass
    return "%d cores (nproc), %s, %s, Linux %s" % (os.cpu_count() or 0, model, mem, platform.release())


def commit():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "msgs/s":
        return "{:,.0f}".format(v)
    if unit == "µs/msg":
        return "{:,.2f}".format(v)
    return "{:,.1f}".format(v)


def ratio(a, b):
    return a / b if a is not None and b else None


def fr(r):
    return "n/a" if r is None else "%.2f" % r


def goals(c, m):
    """[(goal, measured text, met: True/False/None)]: None when a figure is missing."""
    g = lambda key, t: m.get(key, {}).get(t)
    out = []
    pc = "produce+consume 100 at-least-once"
    w = g(pc, "wharfd")
    peers = {t: g(pc, t) for t in ("example", "rabbitmq") if g(pc, t)}
    best = max(peers.values()) if peers else None
    r = ratio(w, best)
    out.append(("produce+consume 100 B at-least-once ≥ 3× the best peer",
                "%s× (best peer: %s)" % (fr(r), NAMES[max(peers, key=peers.get)] if peers else "none"),
                None if r is None else r >= 3))
    r = ratio(w, g(pc, "ceiling"))
    out.append(("produce+consume 100 B at-least-once ≥ 0.5× the ceiling", "%s×" % fr(r), None if r is None else r >= 0.5))
    p50 = g("latency p50", "wharfd")
    lat = {t: g("latency p50", t) for t in ("example", "rabbitmq") if g("latency p50", t)}
    ok = None if p50 is None or not lat else all(p50 < v for v in lat.values())
    out.append(("e2e latency p50 lower than every peer's",
                "%s µs vs %s" % (fmt(p50, "µs"), ", ".join("%s %s µs" % (NAMES[t], fmt(v, "µs")) for t, v in lat.items())
                                 or "no peer"), ok))
    r = ratio(g(pc, "relay"), w)
    out.append(("relayed / direct ≥ 0.95 (produce+consume 100 B at-least-once)", fr(r), None if r is None else r >= 0.95))
    relayed, owner = g(pc, "relay"), g("owner pc", "relay")
    r = ratio(relayed, owner)
    out.append(("the same, direct = client at the owner n2 of the same cluster (issue #5)",
                "%s (relayed %s, at the owner %s msgs/s)" % (fr(r), fmt(relayed, "msgs/s"), fmt(owner, "msgs/s")),
                None if r is None else r >= 0.95))
    n = 200000 if 200000 in c["rss_counts"] else c["rss_counts"][0]
    rss = g("rss %d" % n, "wharfd")
    out.append(("RSS holding {:,} × 100 B ≤ 100 MB".format(n), "%s MB" % fmt(rss, "MB"),
                None if rss is None else rss <= 100))
    r = ratio(g("durable produce", "wharfd"), g("produce 100 at-least-once", "wharfd"))
    out.append(("durable produce ≥ 0.5× transient produce (100 B, at-least-once)", "%s×" % fr(r),
                None if r is None else r >= 0.5))
    # Cost is wharfd's own CPU per message. 1/rate is shown beside it: on
    # a machine whose cores the load generator shares, it is wharf-bench's
    # cost as much as the broker's (at 10,000 queues the ceiling, with no
    # broker at all, moves fewer messages than wharfd does).
    ks = c["queue_counts"]
    cpu = {k: g("cpu queues %d" % k, "wharfd") for k in ks}
    qs = {k: g("queues %d" % k, "wharfd") for k in ks}
    have = [k for k in ks if cpu[k]]
    goal = "cost per message flat from {:,} to {:,} queues (≤ 10 % apart)".format(ks[0], ks[-1])
    if len(have) >= 2:
        spread = max(cpu[k] for k in have) / min(cpu[k] for k in have) - 1
        each = lambda d, f: ", ".join("{:,}: {:.2f}".format(k, f(d[k])) if d[k] else "{:,}: n/a".format(k) for k in ks)
        text = "%.0f %% apart (wharfd's CPU µs/msg: %s; 1/rate µs: %s)" % (
            100 * spread, each(cpu, lambda v: v), each(qs, lambda v: 1e6 / v))
        # Met only if every count was measured; not met as soon as the measured ones are too far apart.
        out.append((goal, text, False if spread > 0.10 else (True if len(have) == len(ks) else None)))
    else:
        out.append((goal, "n/a", None))
    return out


def render(c, rows, only, m, errors, unavailable, args, seconds):
    L = []
    w = L.append
    w("# Wharf and its peers, side by side (issue #9)")
    w("")
    w("Generated by `scripts/bench-peers.sh`; rerunning it rewrites this file. Do not edit by hand.")
    w("")
    w("- Command: `%s`" % (args.command or "scripts/bench-peers.sh"))
    w("- Date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    w("- Machine: %s" % machine())
    w("- Commit: %s" % commit())
    w("- Rounds: %d (every figure is the median of the rounds that succeeded); the whole run took %.0f s%s"
      % (args.rounds, seconds, "; **--quick**: fewer scenarios, smaller counts" if args.quick else ""))
    w("- Targets: %s" % ", ".join(NAMES[t] for t in only))
    w("")
    w("## Goals")
    w("")
    w("| goal | measured | |")
    w("|---|---|---|")
    for goal, text, met in goals(c, m):
        w("| %s | %s | %s |" % (goal, text, "n/a" if met is None else "**met**" if met else "**not met**"))
    w("")
    w("## Ratios")
    w("")
    w("Wharf (single wharfd) divided by each peer and by the ceiling, and the")
    w("relayed cluster divided by the single node. For throughput higher is")
    w("better; for latency and RSS (marked ↓) lower is better.")
    w("")
    cols = [("example", "wharfd / example broker"), ("rabbitmq", "wharfd / RabbitMQ"),
            ("ceiling", "wharfd / ceiling")]
    w("| scenario | %s | relayed / direct |" % " | ".join(h for _, h in cols))
    w("|---|%s---:|" % ("---:|" * len(cols)))
    for key, label, unit, higher in rows:
        v = m.get(key, {})
        cells = [fr(ratio(v.get("wharfd"), v.get(t))) for t, _ in cols]
        w("| %s%s | %s | %s |" % (label, "" if higher else " ↓", " | ".join(cells), fr(ratio(v.get("relay"), v.get("wharfd")))))
    w("")
    w("## Figures (medians)")
    w("")
    w("| scenario | unit | %s |" % " | ".join(NAMES[t] for t in only))
    w("|---|---|%s" % ("---:|" * len(only)))
    for key, label, unit, _ in rows:
        v = m.get(key, {})
        w("| %s | %s | %s |" % (label, unit, " | ".join(fmt(v.get(t), unit) for t in only)))
    w("")
    w("## Not measured")
    w("")
    any_missing = False
    for t, why in unavailable.items():
        any_missing = True
        w("- %s: n/a — %s" % (NAMES[t], why))
    for key, label, _, _ in rows:
        for t, why in errors.get(key, {}).items():
            if t in unavailable:
                continue
            if m.get(key, {}).get(t) is None:
                any_missing = True
                w("- %s, %s: n/a — %s" % (label, NAMES[t], why.replace("|", "/")))
            else:
                w("- %s, %s: one round failed (%s); the median is of the others" % (label, NAMES[t], why.replace("|", "/")))
    if not any_missing:
        w("- Nothing else: every target gave every figure (the ceiling has no RSS, durable or broker CPU figures: there is no broker).")
    else:
        w("- The ceiling has no RSS, durable or broker CPU figures: there is no broker.")
    w("")
    w("## How it is measured")
    w("")
    w(METHOD % {"dur": c["duration"], "big": c["big_count"], "lat": c["latency_count"],
                "fill": c["fill_wall"], "conns": c["connections"],
                "cap": "{:,}".format(c["cap"])})
    return "\n".join(L) + "\n"


METHOD = """Everything runs on 127.0.0.1 and shares the machine's cores with the load
generator; read the ratios (taken in the same run) rather than the absolute
figures. Each round starts every target afresh, one after another (the order
rotates from round to round), and drives it with the same `wharf-bench`
(1 connection, 1 link, 1 container thread unless stated; receiver credit
window 1000, at most 1000 unsettled sends per link).

- Targets: **wharfd** — one node, no plugins. **wharfd relayed** — three
  nodes with the wlm plugin on one SQLite metadata file and the rule
  `* -> node:n2`; the client connects to n1, which relays its links to n2
  (the owner). Its RSS is the sum of the three nodes. Right after its
  relayed produce+consume (100 B, at-least-once) the same `pair` runs with
  the client at n2: the second relayed/direct goal (issue #5's direct).
  **example broker** —
  Proton C++ `examples/cpp/broker.cpp` built with `-O2`. **RabbitMQ 3.10** —
  Debian's `rabbitmq-server`, a private node (temporary directory, free
  ports, its own epmd, plugin `rabbitmq_amqp1_0`), address `/queue/NAME`,
  SASL PLAIN guest/guest; its RSS is the sum of its process tree (beam.smp
  and helpers, not epmd). **ceiling** — `wharf-bench send` connected straight
  to `wharf-bench receive --listen`: what the load generator moves with no
  broker between. Its receiver is Proton C++ and decodes every message, so
  it bounds figures that need a wharf-bench receiver (produce+consume,
  drain, latency) more than produce alone, which a broker may take faster.
- produce / drain / produce+consume: `wharf-bench send` for %(dur)s s or
  %(cap)s messages, whichever comes first (64 KB: %(big)s messages), then `receive` of exactly what was accepted
  (at-most-once: until the queue is quiet for 5 s, a wait not in the rate;
  RabbitMQ may hand out nothing for seconds while it takes in a pre-settled
  burst), then `pair` on another
  queue for the same time. At-least-once waits for `accepted`; at-most-once
  sends pre-settled. For the ceiling the three are one figure (the
  receiver's rate).
- e2e latency: `wharf-bench latency --count %(lat)s`, one message in flight,
  send to arrival. Ceiling: `send --in-flight 1`, send to accept (sender →
  receiver → sender: two hops, as sender → broker → receiver).
- accept latency: `wharf-bench send --in-flight 1 --count %(lat)s`, send to
  the broker's `accepted` (a broker that accepts before storing, or before
  a consumer has it, answers sooner). Ceiling: the same figure as e2e.
- durable produce: `send --durable` (header durable = true) for %(dur)s s;
  compared with the 100 B at-least-once produce of the same broker.
- RSS: a fresh broker, 1 s after start (idle), then after sending 100 B
  messages to one queue until it holds each count (at most %(fill)s s of
  sending per step; a broker that could not take them in time is n/a).
- queues in use: `pair` with K link pairs spread over K queues (at most
  1,000 links a connection), for %(dur)s s of sending plus 1 s per 1,000
  links (so that sending outlasts the attach); the rate counts only
  what moved after every link was attached (`steady_per_s` in wharf-bench's
  JSON), so the attach of thousands of links is left out; a run that ended
  before all were attached is n/a. Broker CPU per message: the CPU
  (user + system) of the target's processes (the three nodes of the
  relayed cluster; RabbitMQ's process tree), read every 0.1 s, over the
  same steady part less 0.25 s at each end, divided by the messages the
  steady rate moved in it. The cost-per-message goal is judged on
  wharfd's CPU per message, not on 1/rate: the load generator shares the
  cores, and its own cost grows with links (the ceiling at 10,000 queues
  is below wharfd's rate there).
- connections: `send --connections %(conns)s` (one link each), for %(dur)s s
  plus 5 s per 1,000 connections, counted the same way; a run whose
  links were not all attached 0.5 s before sending stopped is n/a.
"""
