#!/usr/bin/env bash
# Two wharfd builds side by side on the one-in-flight latency path, direct and
# relayed. For each build, a two-node cluster (wlm rule `* -> node:n2`; n1
# relays). Per round, build and place, alternating: `wharf-bench latency
# --count COUNT` at n2 (direct) and at n1 (relayed); then the medians. If
# strace is installed, it also counts each node's system calls per message
# over one more run of each (strace slows the run; its latencies are not used).
#   A=DIR B=DIR [ROUNDS=6] [COUNT=10000] scripts/bench-latency-ab.sh
# DIR holds a wharfd (a build's bin/, or a copy of one); plugins come from
# build-release/lib, wharf-bench from build-release/bin.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build-release/bin/wharf-bench
count=${COUNT:-10000}
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
declare -A relay owner relay_pid owner_pid
for side in A B; do
  dir=${!side}
  D=$(mktemp -d)
  relay[$side]=$(free_port)
  owner[$side]=$(free_port)
  printf 'plugins = ["wlm"]\nmetadata = "sqlite:%s/meta.db"\n[plugin.wlm]\nrules = ["* -> node:n2"]\n' "$D" > "$D/c.toml"
  for n in n2 n1; do
    port=${owner[$side]}; [ $n = n1 ] && port=${relay[$side]}
    "$dir/wharfd" --node-id $n --listen 127.0.0.1:$port --data-dir "$D/$n" --config "$D/c.toml" \
      --plugin-dir "$root/build-release/lib" --log-level warn > "$D/$n.log" 2>&1 &
    pids+=($!)
    if [ $n = n1 ]; then relay_pid[$side]=$!; else owner_pid[$side]=$!; fi
  done
done
trap 'kill ${pids[@]} 2>/dev/null; wait' EXIT
for side in A B; do  # both nodes listening
  for port in ${relay[$side]} ${owner[$side]}; do
    for i in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  done
done
url() { if [ "$2" = relayed ]; then echo 127.0.0.1:${relay[$1]}; else echo 127.0.0.1:${owner[$1]}; fi; }
for side in A B; do  # the relay's peer connections and the queues' placement, before measuring
  "$bench" latency --url "$(url $side relayed)" --address warm --count 500 --quiet > /dev/null
done
out=$(mktemp)
for round in $(seq "${ROUNDS:-6}"); do
  for side in A B; do
    for where in direct relayed; do
      "$bench" latency --url "$(url $side $where)" --address lat-$where-$round --count "$count" --json --quiet |
        python3 -c 'import json,sys;L=json.load(sys.stdin)["latency"];print("'"$side $where"'", L["p50_us"], L["p99_us"])' |
        tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    side, where, p50, p99 = line.split()
    runs.setdefault((side, where), []).append((float(p50), float(p99)))
for side in "AB":
    m = {w: statistics.median(p for p, _ in runs[(side, w)]) for w in ("direct", "relayed")}
    p99 = {w: statistics.median(q for _, q in runs[(side, w)]) for w in ("direct", "relayed")}
    print("%s: p50 direct %.1f µs, relayed %.1f µs (added %+.1f); p99 direct %.1f, relayed %.1f"
          % (side, m["direct"], m["relayed"], m["relayed"] - m["direct"], p99["direct"], p99["relayed"]))
PY
command -v strace > /dev/null || exit 0
n=2000
per_msg() { awk -v N=$n 'NR>2 && $(NF) !~ /total/ && ($4 ~ /^[0-9]+$/) && $4/N >= 0.05 {printf " %s=%.2f", $NF, $4/N}' "$1"; }
for side in A B; do
  for where in direct relayed; do
    traced=(${owner_pid[$side]}); [ $where = relayed ] && traced+=(${relay_pid[$side]})
    tracers=()
    for p in "${traced[@]}"; do strace -f -c -p $p -o "$out.$p" 2>/dev/null & tracers+=($!); done
    sleep 0.5  # strace attached
    "$bench" latency --url "$(url $side $where)" --address sys-$where --count $n --quiet > /dev/null
    kill -INT "${tracers[@]}"; wait "${tracers[@]}" 2>/dev/null || true
    line="$side $where syscalls per message: owner$(per_msg "$out.${owner_pid[$side]}")"
    [ $where = relayed ] && line="$line; relay$(per_msg "$out.${relay_pid[$side]}")"
    echo "$line"
  done
done
