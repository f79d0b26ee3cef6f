#!/usr/bin/env bash
# Installs what is missing, builds Wharf (Release) and starts a local cluster
# in the foreground: by default 3 nodes on 127.0.0.1:5672, 5673 and 5674,
# with the wlm plugin (placement, relay proxy, moves) on one SQLite metadata
# file, and AMQP management on every node. Prints `wharfctl status`, then
# waits; Ctrl-C stops every node cleanly.
#
#   scripts/run.sh                     3 nodes from port 5672
#   scripts/run.sh --nodes 1           one node, no plugins
#   scripts/run.sh --nodes 5 --port 6000
#   scripts/run.sh --data-dir DIR      where the nodes keep their data
#                                      (default ./wharf-data; kept across runs)
#   scripts/run.sh -- ARGS...          passes ARGS to every wharfd
#                                      (e.g. -- --log-level debug)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=3
base=5672
data="${WHARF_DATA_DIR:-$root/wharf-data}"
extra=()
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
    --port) base=${2:?--port needs a number}; shift 2 ;;
    --data-dir) data=${2:?--data-dir needs a directory}; shift 2 ;;
    -h|--help) usage ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$nodes" =~ ^[1-9][0-9]?$ ]] || { echo "run.sh: --nodes must be 1..99, not '$nodes'" >&2; exit 2; }
[[ "$base" =~ ^[0-9]{1,5}$ ]] && base=$((10#$base)) && [ "$base" -ge 1 ] && [ $((base + nodes - 1)) -le 65535 ] ||
  { echo "run.sh: --port must leave room for $nodes ports below 65536, not '$base'" >&2; exit 2; }

"$root/scripts/deps.sh" build
cmake -S "$root" -B "$root/build-release" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF >/dev/null
cmake --build "$root/build-release" -j"$(nproc)" --target wharfd wharf-plugin-wlm wharfctl wharf-bench >/dev/null
bin="$root/build-release/bin"

mkdir -p "$data"
for i in $(seq "$nodes"); do
  port=$((base + i - 1))
  if (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "run.sh: port $port is taken on 127.0.0.1 (choose another with --port)" >&2
    exit 1
  fi
done
config="$data/cluster.toml"
if [ "$nodes" -gt 1 ]; then
  cat > "$config" <<TOML
# Written by scripts/run.sh: every node of the local cluster reads it.
plugins = ["wlm"]
metadata = "sqlite:$data/metadata.db"
[plugin.wlm]
placement = "least-loaded"
TOML
else
  echo "# Written by scripts/run.sh: a single node, no plugins." > "$config"
fi

pids=()
stop_all() {
  trap - INT TERM
  echo >&2
  echo "stopping ${#pids[@]} node(s)..." >&2
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  # A node that has not stopped within 15 s is killed (its log says why).
  for _ in $(seq 150); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then echo "run.sh: node pid $p did not stop; killing it" >&2; kill -KILL "$p" 2>/dev/null || true; fi
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  echo "stopped (data kept in $data)" >&2
  exit $rc
}
trap stop_all INT TERM

for i in $(seq "$nodes"); do
  port=$((base + i - 1))
  "$bin/wharfd" --node-id "n$i" --listen "127.0.0.1:$port" --data-dir "$data/n$i" --config "$config" \
    "${extra[@]}" > "$data/n$i.log" 2>&1 &
  pids+=($!)
done
# Ready when every node answers management (or one has exited: say why).
up=0
for _ in $(seq 100); do
  up=0
  for i in $(seq "$nodes"); do
    if ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
      echo "run.sh: node n$i exited; its log ($data/n$i.log) ends:" >&2
      tail -5 "$data/n$i.log" >&2
      stop_all
    fi
    "$bin/wharfctl" -b "127.0.0.1:$((base + i - 1))" --timeout 1 types > /dev/null 2>&1 && up=$((up + 1))
  done
  [ "$up" -eq "$nodes" ] && break
  sleep 0.1
done
if [ "$up" -ne "$nodes" ]; then
  echo "run.sh: only $up of $nodes node(s) answered management within 10 s; they keep starting (logs in $data)" >&2
fi
"$bin/wharfctl" -b "127.0.0.1:$base" status || true
cat >&2 <<MSG

$nodes node(s) on 127.0.0.1 ports $base-$((base + nodes - 1)); logs and data in $data. Ctrl-C stops them.
Connect any AMQP 1.0 client to any node (no SASL or SASL ANONYMOUS); a queue
lives on one node and every other node relays to it. For example:
  /usr/bin/python3 -c 'from proton.utils import BlockingConnection as B; from proton import Message as M
c=B("127.0.0.1:$base"); c.create_sender("q").send(M(body="hi")); print(c.create_receiver("q").receive().body); c.close()'
  $bin/wharfctl -b 127.0.0.1:$base status
  $bin/wharf-bench pair --url 127.0.0.1:$base --count 100000
MSG
exited=""
wait -n -p exited "${pids[@]}" || true
for i in $(seq "$nodes"); do
  if [ "${pids[$((i - 1))]}" = "$exited" ]; then
    echo "run.sh: node n$i exited by itself; its log ($data/n$i.log) ends:" >&2
    tail -5 "$data/n$i.log" >&2
  fi
done
echo "run.sh: stopping the others" >&2
stop_all
