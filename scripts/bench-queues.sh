#!/usr/bin/env bash
# K queues in use on one wharfd: `wharf-bench pair` with K link pairs over K
# queues (at most 1,000 links a connection, as scripts/bench-peers.sh runs
# it), for each K in COUNTS. Prints the steady rate (msgs/s once every link
# was attached), the attach time, the received messages' e2e p50, and
# wharfd's peak RSS (VmHWM).
# B=DIR picks the binaries (default build-release/bin); COUNTS (default
# "1 100 1000 10000"); DURATION seconds (default 3; 12 for K >= 10,000);
# WHARFD_ARGS adds flags to wharfd (e.g. "--producer-credit-budget 0").
# WINDOW=1 reads wharfd's CPU from second 2 to second DURATION-1 only (the
# steady part, without the attach and the drain at the end) and divides it by
# the steady rate times those seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$root/build-release/bin}
for K in ${COUNTS:-1 100 1000 10000}; do
  D=$(mktemp -d)
  $B/wharfd --listen 127.0.0.1:0 --data-dir $D --node-id bench --log-level warn ${WHARFD_ARGS:-} > $D/out 2>&1 &
  W=$!
  url=
  for i in $(seq 100); do  # its listening line names the port the OS gave it
    url=$(grep -oE "127\.0\.0\.1:[0-9]+" $D/out | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  conns=$(( (K + 999) / 1000 ))
  dur=${DURATION:-3}; [ -z "${DURATION:-}" ] && [ $K -ge 10000 ] && dur=12
  ticks() { awk '{print $14+$15}' /proc/$W/stat; }
  cpu0=$(ticks)
  $B/wharf-bench pair --url $url --connections $conns --links $(( K / conns )) --queues $K \
        --duration $dur --json --quiet --timeout 60 > $D/bench.json &
  P=$!
  if [ -n "${WINDOW:-}" ]; then
    sleep 2; cpu0=$(ticks); sleep $(( dur - 3 )); cpu=$(( $(ticks) - cpu0 ))
  fi
  wait $P
  hwm=$(awk '/VmHWM/{print $2}' /proc/$W/status)
  [ -n "${WINDOW:-}" ] || cpu=$(( $(ticks) - cpu0 ))  # clock ticks over the whole run
  kill $W; wait $W 2>/dev/null || true
  python3 -c "import json;d=json.load(open('$D/bench.json'));msgs=(($dur-3)*d['steady_per_s']) if '${WINDOW:-}' else d['received'];print('K=$K steady_per_s=%d setup_s=%.2f e2e_p50_ms=%.1f wharfd_peak_rss_MB=%d wharfd_us_per_msg=%.2f bench_us_per_msg=%.2f' % (d['steady_per_s'], d['setup_s'], d['latency']['p50_us']/1000, $hwm/1024, $cpu*1e6/$(getconf CLK_TCK)/msgs, d['cpu_s']*1e6/d['received']))"
  rm -rf $D
done
