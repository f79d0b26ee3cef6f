#!/usr/bin/env bash
# Many client connections through the relay: `wharf-bench send --connections
# N` (one sending link each, all to one queue) directly at the owner (n2) and
# relayed through n1 (wlm rules pin every queue to n2), for each N in COUNTS.
# Prints setup_s (until the client saw its last link attached) and
# steady_per_s (the rate once all were attached).
# B=DIR picks the binaries (default build-release/bin); COUNTS (default
# "100 300 1000"); DURATION seconds of sending per run (default 10).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$root/build-release/bin}
COUNTS=${COUNTS:-100 300 1000}
DURATION=${DURATION:-10}
D=$(mktemp -d)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
p1=$(port)
p2=$(port)
cat > $D/c.toml <<T
plugins = ["wlm"]
metadata = "sqlite:$D/meta.db"
[plugin.wlm]
rules = ["* -> node:n2"]
T
$B/wharfd --node-id n2 --listen 127.0.0.1:$p2 --data-dir $D/d2 --config $D/c.toml --log-level warn > /dev/null 2>&1 &
P2=$!
$B/wharfd --node-id n1 --listen 127.0.0.1:$p1 --data-dir $D/d1 --config $D/c.toml --log-level warn > /dev/null 2>&1 &
P1=$!
trap 'kill $P1 $P2; wait; rm -rf $D' EXIT
# Ready once a message goes through n1 to n2 (polled, 20 s at most).
for i in $(seq 100); do
  $B/wharf-bench pair --url 127.0.0.1:$p1 --address warmup --count 10 --timeout 2 --quiet > /dev/null 2>&1 && break
  sleep 0.2
done
for n in $COUNTS; do
  for where in direct relayed; do
    port=$p2; [ $where = relayed ] && port=$p1
    $B/wharf-bench send --url 127.0.0.1:$port --address conns-$where-$n --connections $n --duration $DURATION \
        --timeout 30 --json --quiet 2>/dev/null |
      python3 -c 'import json,sys;d=json.loads(sys.stdin.read().strip().splitlines()[-1])
print("N=%s %s setup_s=%.2f steady_per_s=%s %s" % (sys.argv[1], sys.argv[2], d.get("setup_s") or 0,
      d.get("steady_per_s"), d.get("error") or ""))' $n $where || echo "N=$n $where failed"
  done
done
