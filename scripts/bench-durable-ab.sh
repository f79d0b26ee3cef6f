#!/usr/bin/env bash
# Two wharfd builds side by side on one durable producer: for each round and
# build, a fresh node on a free port and data directory, one
# `wharf-bench send --durable --count COUNT` (100 B, at-least-once), and the
# node's CPU per message (user + system from /proc around the run).
#   A=DIR B=DIR [ROUNDS=6] [COUNT=300000] [RUN="send --durable"] scripts/bench-durable-ab.sh
# DIR holds a wharfd (a build's bin/, or a copy of one). wharf-bench comes
# from build-release. RUN is the wharf-bench command and its options (for
# instance RUN="pair --at-most-once" compares two builds on something else).
# RUN_A / RUN_B give each side its own command (one build, two workloads:
# A=DIR B=DIR with the same DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build-release/bin/wharf-bench
tick=$(getconf CLK_TCK)
for round in $(seq "${ROUNDS:-6}"); do
  for side in A B; do
    dir=${!side}
    D=$(mktemp -d)
    "$dir/wharfd" --listen 127.0.0.1:0 --data-dir "$D/data" --node-id ab --log-level info > "$D/out" 2>&1 &
    P=$!
    url=
    for i in $(seq 100); do  # its listening line names the port the OS gave it
      url=$(grep -oE "127\.0\.0\.1:[0-9]+" "$D/out" | head -1 || true)
      [ -n "$url" ] && break
      sleep 0.1
    done
    c0=$(awk '{print $14+$15}' /proc/$P/stat)
    run_side=RUN_$side
    run=${!run_side:-${RUN:-send --durable}}
    # shellcheck disable=SC2086 # RUN is words
    rate=$("$bench" $run --url "$url" --address d --count "${COUNT:-300000}" --json --quiet |
           python3 -c 'import json,sys;print(int(json.load(sys.stdin)["msgs_per_s"]))')
    c1=$(awk '{print $14+$15}' /proc/$P/stat)
    kill $P; wait $P 2>/dev/null || true; rm -rf "$D"
    echo "round=$round build=$side msgs_per_s=$rate node_cpu_us_per_msg=$(python3 -c "print(round(($c1-$c0)*1e6/$tick/${COUNT:-300000},2))")"
  done
done
