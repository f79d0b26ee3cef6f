#!/usr/bin/env bash
# Installs the Debian packages Wharf needs that are missing. Usage:
#   scripts/deps.sh build   — to build and run wharfd
#   scripts/deps.sh test    — also what the tests need
#   scripts/deps.sh bench   — also what the benchmarks need
set -euo pipefail

build_pkgs=(cmake g++ make pkg-config
  libqpid-proton-cpp12-dev libqpid-proton11-dev   # AMQP 1.0 engine, proactor, C++ client API
  libtomlplusplus-dev                             # config file parser
  libcli11-dev                                    # command-line flags
  libspdlog-dev libfmt-dev                        # logging
  zlib1g-dev                                      # CRC-32 of journal records
  libsqlite3-dev)                                 # the cluster metadata store (wlm)
test_pkgs=(googletest libgtest-dev libgmock-dev   # unit and component tests
  python3-qpid-proton python3-pytest)             # interop tests with Python Proton
bench_pkgs=(libqpid-proton11-dev-examples         # the Proton example broker, our baseline
  libbenchmark-dev librocksdb-dev libsqlite3-dev liblmdb-dev) # tools/store-bench: storage engines compared

want=("${build_pkgs[@]}")
case "${1:-build}" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
