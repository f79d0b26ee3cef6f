#!/usr/bin/env bash
# Builds Wharf and runs every test: unit, component and interop tests in a
# warnings-as-errors build, then the unit and component tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/scripts/deps.sh" test

echo "== build (warnings as errors) =="
cmake -S "$root" -B "$root/build-test" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWHARF_WERROR=ON >/dev/null
cmake --build "$root/build-test" -j"$jobs"
echo "== tests =="
ctest --test-dir "$root/build-test" --output-on-failure -j"$jobs" --timeout 300

if [ "${WHARF_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== build (ASan + UBSan) =="
  cmake -S "$root" -B "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug -DWHARF_WERROR=ON -DWHARF_SANITIZE=ON >/dev/null
  cmake --build "$root/build-asan" -j"$jobs"
  echo "== tests under sanitizers (unit, component) =="
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j"$jobs" -L 'unit|component' --timeout 600
fi
echo "all tests passed"
