#!/usr/bin/env bash
# Builds Wharf (Release) and starts one node on 127.0.0.1:5672, in the
# foreground. Extra arguments go to wharfd, e.g.:
#   scripts/run.sh --listen 127.0.0.1:5673 --node-id n2
#   scripts/run.sh --config my.toml
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh" build
cmake -S "$root" -B "$root/build-release" -DCMAKE_BUILD_TYPE=Release -DWHARF_TESTS=OFF >/dev/null
cmake --build "$root/build-release" -j"$(nproc)" --target wharfd wharf-bench >/dev/null

args=("$@")
has_listen=0
for a in "${args[@]}"; do
  case "$a" in --listen|--listen=*|--config|--config=*) has_listen=1 ;; esac
done
[ $has_listen -eq 1 ] || args+=(--listen 127.0.0.1:5672)

cat >&2 <<MSG
Starting wharfd (Ctrl-C stops it). Connect any AMQP 1.0 client to the address
it prints, no SASL or SASL ANONYMOUS, e.g. with Python Proton:
  /usr/bin/python3 -c 'from proton.utils import BlockingConnection as B; from proton import Message as M
c=B("127.0.0.1:5672"); c.create_sender("q").send(M(body="hi")); print(c.create_receiver("q").receive().body); c.close()'
or load it with: $root/build-release/bin/wharf-bench pair --url 127.0.0.1:5672 --count 100000
MSG
exec "$root/build-release/bin/wharfd" --data-dir "${WHARF_DATA_DIR:-$root/wharf-data}" "${args[@]}"
