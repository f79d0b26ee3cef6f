#!/usr/bin/env bash
# Relayed (client at n1, queue owned by n2) vs direct (client at n2) vs
# redirected (client at n1, which answers amqp:link:redirect for redir-*
# queues; wharf-bench follows it to n2), in one run, alternating: wharf-bench
# send, receive and pair (200k x 100 B, at-least-once) and latency (one
# message in flight).
# B=DIR picks the binaries (default build-release/bin); FRONT_ARGS adds flags
# to the relaying node (e.g. FRONT_ARGS="--threads 2"), NODE_ARGS to both;
# PAIR_ARGS adds options to the pair runs (e.g. PAIR_ARGS=--at-most-once).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$root/build-release/bin}  # build it first: scripts/run.sh builds build-release
D=$(mktemp -d)
p1=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
p2=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
cat > $D/c.toml <<T
plugins = ["wlm"]
metadata = "sqlite:$D/meta.db"
[plugin.wlm]
rules = ["* -> node:n2"]
mode-rules = ["redir-* -> redirect"]
T
$B/wharfd --node-id n2 --listen 127.0.0.1:$p2 --data-dir $D/d2 --config $D/c.toml ${NODE_ARGS:-} --log-level warn > /dev/null 2>&1 &
P2=$!
$B/wharfd --node-id n1 --listen 127.0.0.1:$p1 --data-dir $D/d1 --config $D/c.toml ${NODE_ARGS:-} ${FRONT_ARGS:-} --log-level warn > /dev/null 2>&1 &
P1=$!
trap 'kill $P1 $P2; wait' EXIT
for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$p1) 2>/dev/null && (echo > /dev/tcp/127.0.0.1/$p2) 2>/dev/null && break; sleep 0.1; done
sleep 0.5
# One line per round and place: send rate, receive rate (separate phases, as
# Dispatch Router's link-routing figures were taken), pair rate, latency.
# CPU seconds (user + system) a node has used so far, in clock ticks.
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
rate() { python3 -c 'import json,sys;d=json.load(sys.stdin);print(int(d["'$1'"]))'; }
for round in 1 2 3; do
  for where in direct relayed redirected; do
    port=$p2; [ $where != direct ] && port=$p1
    q=bench-$where-$round; [ $where = redirected ] && q=redir-$round
    t1=$(ticks $P1); t2=$(ticks $P2)
    s=$($B/wharf-bench send --url 127.0.0.1:$port --address $q --count 200000 --json --quiet | rate sent_per_s)
    # Each node's CPU per message of the send run, in µs.
    scpu=$(python3 -c "tk=$(getconf CLK_TCK); print('n1=%.1f n2=%.1f' % (($(ticks $P1)-$t1)*1e6/tk/200000, ($(ticks $P2)-$t2)*1e6/tk/200000))")
    r=$($B/wharf-bench receive --url 127.0.0.1:$port --address $q --count 200000 --json --quiet | rate received_per_s)
    t1=$(ticks $P1); t2=$(ticks $P2)
    # The pair run's rate, wharf-bench's own CPU per message (µs) and the
    # share of both cores left idle while it ran (/proc/stat): a run bound by
    # CPU leaves little idle; one bound by waiting between the stages, much.
    # shellcheck disable=SC2086 # PAIR_ARGS is words
    read -r p bcpu idle < <(python3 - $B/wharf-bench pair --url 127.0.0.1:$port --address $q-pair \
                             --count 200000 --json --quiet ${PAIR_ARGS:-} <<'PY'
import json, resource, subprocess, sys
def stat():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return v[3] + v[4], sum(v)  # idle + iowait, all
i0, a0 = stat()
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True).stdout
i1, a1 = stat()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int(json.loads(out)["received_per_s"]), "%.1f" % ((ru.ru_utime + ru.ru_stime) * 1e6 / 200000),
      "%.0f" % (100.0 * (i1 - i0) / max(1, a1 - a0)))
PY
)
    # Each node's CPU per message of the pair run, in µs (the relay's share vs the owner's).
    cpu=$(python3 -c "tk=$(getconf CLK_TCK); print('n1=%.1f n2=%.1f bench=$bcpu idle_pct=$idle' % (($(ticks $P1)-$t1)*1e6/tk/200000, ($(ticks $P2)-$t2)*1e6/tk/200000))")
    l=$($B/wharf-bench latency --url 127.0.0.1:$port --address $q-lat --count 5000 --json --quiet |
        python3 -c 'import json,sys;L=json.load(sys.stdin)["latency"];print("p50_us=%s p99_us=%s" % (L["p50_us"], L["p99_us"]))')
    echo "$round $where send_per_s=$s send_cpu_us_per_msg $scpu receive_per_s=$r pair_per_s=$p pair_cpu_us_per_msg $cpu latency $l"
  done
done
