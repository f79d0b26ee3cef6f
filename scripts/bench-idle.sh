#!/usr/bin/env bash
# What a node costs while nothing happens: for each K in COUNTS, a wharfd
# with the WLM plugin (SQLite metadata, a one-node cluster) and a plain
# wharfd, each given K queues by `wharf-bench pair` for two seconds; then
# their CPU over IDLE seconds (default 10) with no client at all, and the
# WLM node's against the plain one's in the same round. ROUNDS (default 2)
# alternate the two. B=DIR picks the binaries (default build-release/bin).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$root/build-release/bin}
idle=${IDLE:-10}
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
# one_node K with_wlm -> CPU milliseconds over the idle window
one_node() {
  local K=$1 wlm=$2 D port W conns t0 t1
  D=$(mktemp -d)
  port=$(free_port)
  if [ "$wlm" = 1 ]; then
    printf 'plugins = ["wlm"]\nmetadata = "sqlite:%s/meta.db"\n' "$D" > $D/c.toml
  else
    : > $D/c.toml
  fi
  $B/wharfd --node-id idle --listen 127.0.0.1:$port --data-dir $D/data --config $D/c.toml --log-level warn \
    > $D/log 2>&1 &
  W=$!
  for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  conns=$(( (K + 999) / 1000 ))
  $B/wharf-bench pair --url 127.0.0.1:$port --connections $conns --links $(( K / conns )) --queues $K \
    --duration 2 --json --quiet --timeout 60 > /dev/null
  t0=$(awk '{print $14+$15}' /proc/$W/stat)
  sleep "$idle"
  t1=$(awk '{print $14+$15}' /proc/$W/stat)
  kill $W; wait $W 2>/dev/null || true
  rm -rf "$D"
  echo $(( (t1 - t0) * 1000 / $(getconf CLK_TCK) ))
}
for K in ${COUNTS:-1 10000}; do
  for r in $(seq ${ROUNDS:-2}); do
    w=$(one_node $K 1); p=$(one_node $K 0)
    python3 -c "print('K=$K round $r: idle CPU over ${idle} s: with the WLM plugin %d ms (%.1f %% of a core), plain %d ms (%.1f %%)' % ($w, $w/10/$idle, $p, $p/10/$idle))"
  done
done
