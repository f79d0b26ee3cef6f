#!/usr/bin/env bash
# Installs the Debian packages Wharf needs that are missing. Usage:
#   scripts/deps.sh build   — to build and run wharfd
#   scripts/deps.sh test    — also what the tests need
#   scripts/deps.sh bench   — also what the benchmarks need
#   scripts/deps.sh peers   — also the peers of scripts/bench-peers.sh (RabbitMQ);
#                             the rabbitmq-server system service is left stopped
set -euo pipefail

build_pkgs=(cmake g++ make pkg-config
  libqpid-proton-cpp12-dev libqpid-proton11-dev   # AMQP 1.0 engine, proactor, C++ client API
  libtomlplusplus-dev                             # config file parser
  libcli11-dev                                    # command-line flags
  libspdlog-dev libfmt-dev                        # logging
  zlib1g-dev                                      # CRC-32 of journal records
  libsqlite3-dev                                  # the cluster metadata store (wlm)
  nlohmann-json3-dev                              # JSON text (wharfctl, wharf-bench, the C++ interop agent, etcd)
  libboost-dev                                    # Boost.Beast (header-only): HTTP to etcd's JSON gateway
  libjemalloc-dev)                                # wharfd's malloc: flatter cost at many queues (docs/benchmarks.md)
test_pkgs=(googletest libgtest-dev libgmock-dev   # unit and component tests
  python3-qpid-proton python3-pytest              # interop tests with Python Proton
  etcd-server)                                    # /usr/bin/etcd: the etcd metadata store's tests
bench_pkgs=(libqpid-proton11-dev-examples         # the Proton example broker, our baseline
  libbenchmark-dev librocksdb-dev libsqlite3-dev liblmdb-dev) # tools/store-bench: storage engines compared

peers_pkgs=(rabbitmq-server)                      # RabbitMQ 3.10 (AMQP 1.0 plugin): a peer in bench-peers.sh

want=("${build_pkgs[@]}")
case "${1:-build}" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  bench) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  peers) want+=("${test_pkgs[@]}" "${bench_pkgs[@]}" "${peers_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench|peers" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_install() {
  [ $updated -eq 1 ] || { $SUDO apt-get update -q >/dev/null; updated=1; }
  $SUDO apt-get install -y -q --no-install-recommends "$@" >/dev/null
}
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  # Debian starts rabbitmq-server's system service on install; the benchmark
  # runs a private instance instead. A policy-rc.d that says 101 keeps
  # invoke-rc.d from starting it (unless the machine already has one).
  policy=""
  if [[ " ${missing[*]} " == *" rabbitmq-server "* ]] && [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
  fi
  rc=0
  apt_install "${missing[@]}" || rc=$?
  [ -z "$policy" ] || $SUDO rm -f "$policy"
  [ $rc -eq 0 ] || exit $rc
fi
if [ "${1:-build}" = peers ] && [ -d /run/systemd/system ] &&
   systemctl is-active --quiet rabbitmq-server 2>/dev/null; then
  echo "stopping and disabling the rabbitmq-server system service (bench-peers.sh runs its own)" >&2
  $SUDO systemctl disable --now rabbitmq-server >/dev/null 2>&1 || true
fi

# The JavaScript interop agents (rhea, amqp10) come from the npm registry,
# pinned by interop-tests/agents/js/package-lock.json. Node.js and npm from
# Debian unless the machine has them already (another Node.js install would
# conflict with Debian's npm package).
if [ "${1:-build}" != build ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "installing: nodejs npm" >&2
    apt_install nodejs npm
  fi
  js="$(cd "$(dirname "$0")/.." && pwd)/interop-tests/agents/js"
  if [ ! -f "$js/node_modules/.package-lock.json" ] || [ "$js/package-lock.json" -nt "$js/node_modules/.package-lock.json" ]; then
    echo "installing the JavaScript interop agents' packages (npm ci)" >&2
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
fi
