#!/usr/bin/env bash
# Builds Wharf (Release) and the Proton C++ example broker, then measures both
# side by side with wharf-bench, alternating, and prints a Markdown report.
#   scripts/bench.sh [--rounds N] [--count N] [--only wharf]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh" bench
build="$root/build-release"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target wharfd wharf-bench >/dev/null
examples=/usr/share/proton/examples/cpp
if [ ! -x "$build/example-broker" ] || [ "$examples/broker.cpp" -nt "$build/example-broker" ]; then
  g++ -O2 -std=c++17 -I"$examples" "$examples/broker.cpp" -lqpid-proton-cpp -lpthread \
    -o "$build/example-broker"
fi
exec /usr/bin/python3 "$root/scripts/bench.py" --bin "$build/bin" --example "$build/example-broker" "$@"
