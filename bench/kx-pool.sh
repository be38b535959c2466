#!/usr/bin/env bash
# Does `tlsperf serve --kx-pool N` help? Server-side handshake latency (TCP accept to
# handshake complete, from the server's own summary) under a burst of B new TLS 1.3
# connections (h2load --h1 -n B -c B), with and without the pool, alternating, R rounds;
# p50 and p99 of each round compared with `tlsperf compare` (Welch, IQR-filtered).
# Loopback only; bounded by -n. Needs h2load (nghttp2-client).
#
# Usage: bench/kx-pool.sh [ROUNDS] [BURST] [POOL]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-12}"; burst="${2:-200}"; pool="${3:-512}"
command -v h2load >/dev/null || { echo "missing h2load (apt-get install nghttp2-client)" >&2; exit 1; }
cargo build --release --locked --quiet --bin tlsperf
bin=target/release/tlsperf
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
for v in off on; do : > "$work/p50-$v"; : > "$work/p99-$v"; done
for _ in $(seq "$rounds"); do
  for v in off on; do
    n=0; [ "$v" = on ] && n="$pool"
    "$bin" serve --listen 127.0.0.1:18460 --threads 1 --kx-pool "$n" --json --duration 3s > "$work/out" 2>/dev/null &
    sleep 0.7   # the pool fills while the server is idle
    h2load --h1 -n "$burst" -c "$burst" -t 1 https://127.0.0.1:18460/ > /dev/null 2>&1
    wait
    python3 - "$work/out" "$work/p50-$v" "$work/p99-$v" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[1])["handshakes"]["full"]
open(sys.argv[2], "a").write("%.1f\n" % (s["p50_ns"] / 1e3))
open(sys.argv[3], "a").write("%.1f\n" % (s["p99_ns"] / 1e3))
PY
  done
done
echo "# --kx-pool $pool vs none: server handshake latency under bursts of $burst connections, $rounds rounds (µs)"
echo; echo "## p50"; "$bin" compare "$work/p50-off" "$work/p50-on" --color never
echo; echo "## p99"; "$bin" compare "$work/p99-off" "$work/p99-on" --color never
