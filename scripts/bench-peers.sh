#!/usr/bin/env bash
# Wharf against its peers, side by side, in one run (issue #9): wharfd, a
# 3-node cluster reached through a node that relays, the Proton C++ example
# broker, RabbitMQ 3.10 (a private instance) and the ceiling (wharf-bench
# straight to wharf-bench), driven by the same wharf-bench on 127.0.0.1,
# alternating in rounds. Writes docs/benchmarks-peers.md.
#
#   scripts/bench-peers.sh                      3 rounds, every scenario
#   scripts/bench-peers.sh --quick              smoke run: fewer scenarios, smaller counts
#   scripts/bench-peers.sh --rounds N           rounds (default 3; figures are medians)
#   scripts/bench-peers.sh --only wharfd,rabbitmq   targets, of: wharfd,relay,example,rabbitmq,ceiling
#   scripts/bench-peers.sh --duration S         seconds per timed run (default 1.5)
#   scripts/bench-peers.sh --rss-counts A,B     queued messages for RSS (default 200000,1000000)
#   scripts/bench-peers.sh --queue-counts ...   queues in use (default 1,10,100,1000,10000)
#   scripts/bench-peers.sh --connections N      the many-connections scenario (default 1000)
#   scripts/bench-peers.sh --fill-wall S        most seconds of sending per RSS fill step (default 30)
#   scripts/bench-peers.sh --out FILE           write the report elsewhere
# Every broker it starts is stopped at the end, on failure and on Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
command="scripts/bench-peers.sh${*:+ $*}"
"$root/scripts/deps.sh" peers
build="$root/build-release"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target wharfd wharf-plugin-wlm wharf-bench >/dev/null
examples=/usr/share/proton/examples/cpp
if [ ! -x "$build/example-broker" ] || [ "$examples/broker.cpp" -nt "$build/example-broker" ]; then
  g++ -O2 -std=c++17 -I"$examples" "$examples/broker.cpp" -lqpid-proton-cpp -lpthread \
    -o "$build/example-broker"
fi
exec /usr/bin/python3 "$root/scripts/bench_peers.py" --bin "$build/bin" --example "$build/example-broker" \
  --command "$command" "$@"
