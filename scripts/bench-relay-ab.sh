#!/usr/bin/env bash
# Two builds side by side on the relay: scripts/bench-relay.sh (three rounds
# of direct, relayed and redirected send, receive, pair and latency) run
# RUNS times for each build, alternating A, B, A, B, ...; then, per build,
# the medians over every round of relayed/direct (send, receive, pair), of
# the relayed e2e p50 minus direct, and of the relayed and direct rates.
# Between runs each ratio moves by more than most changes do: judge a
# change by these medians over many rounds, never by one run.
#   A=DIR B=DIR [RUNS=4] scripts/bench-relay-ab.sh
# DIR holds wharfd and wharf-bench with ../lib/wharf-plugin-wlm.so beside
# it (a build's bin/, or a copy of bin/ and lib/). The raw lines go to
# LOG (default: a temporary file, named at the end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
: "${A:?A=DIR, the bin/ of the first build}" "${B:?B=DIR, the bin/ of the second build}"
log=${LOG:-$(mktemp)}
: > "$log"
for run in $(seq "${RUNS:-4}"); do
  for side in A B; do
    echo "=== build=$side run=$run $(date +%T)" | tee -a "$log"
    B=${!side} "$root/scripts/bench-relay.sh" >> "$log" 2>&1
  done
done
python3 - "$log" <<'PY'
import re, statistics as st, sys
rows, side, run = {}, None, None
for line in open(sys.argv[1]):
    m = re.match(r"=== build=(\S+) run=(\d+)", line)
    if m:
        side, run = m.group(1), m.group(2)
        continue
    f = line.split()
    if len(f) < 3 or f[1] not in ("direct", "relayed"):
        continue
    kv = dict(x.split("=", 1) for x in f[2:] if "=" in x and not x.startswith(("n1=", "n2=", "bench=", "idle")))
    rows.setdefault((side, run, f[0]), {})[f[1]] = kv
keys = ("send_per_s", "receive_per_s", "pair_per_s")
out = {}
for (side, run, rnd), v in sorted(rows.items()):
    if "direct" not in v or "relayed" not in v:
        continue
    d, r = v["direct"], v["relayed"]
    o = out.setdefault(side, {"ratio": [], "lat": [], "rel": [], "dir": []})
    o["ratio"].append([float(r[k]) / float(d[k]) for k in keys])
    o["lat"].append(float(r["p50_us"]) - float(d["p50_us"]))
    o["rel"].append([int(r[k]) for k in keys])
    o["dir"].append([int(d[k]) for k in keys])
for side in sorted(out):
    o = out[side]
    med = lambda rows, i: st.median(x[i] for x in rows)
    print("build=%s rounds=%d relayed/direct send=%.2f receive=%.2f pair=%.2f e2e_p50_excess_us=%+.0f" % (
        side, len(o["lat"]), med(o["ratio"], 0), med(o["ratio"], 1), med(o["ratio"], 2), st.median(o["lat"])))
    print("build=%s msgs/s relayed send=%d receive=%d pair=%d; direct send=%d receive=%d pair=%d" % (
        side, med(o["rel"], 0), med(o["rel"], 1), med(o["rel"], 2), med(o["dir"], 0), med(o["dir"], 1), med(o["dir"], 2)))
PY
echo "raw lines: $log"
