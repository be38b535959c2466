#!/usr/bin/env bash
# `tlsperf crypto handshake` against rustls's own `rustls-bench` (issue 7), alternating
# A B A B: for each round and each row, rustls-bench first, then tlsperf. Both on one
# thread, aws-lc-rs, buffered API, time charged per side as rustls-bench does.
#
# rustls-bench is not part of this project: build it from rustls's public source beside
# the project and point RUSTLS_BENCH at the binary, e.g.
#   git clone https://github.com/rustls/rustls /work/rustls-src   # tag v/0.23.43
#   cd /work/rustls-src && cargo build --release -p rustls-bench --features aws-lc-rs
#   RUSTLS_BENCH=/work/rustls-src/target/release/rustls-bench bench/crypto-vs-rustls-bench.sh 3
#
# Groups: rustls-bench uses aws-lc-rs's default provider with rustls's default features
# (`prefer-post-quantum`), so TLS 1.3 negotiates X25519MLKEM768 (its client also sends
# the X25519 component as a second share, at no extra key generation) and TLS 1.2
# negotiates X25519. tlsperf is given the same group with --group.
#
# Output: one tab-separated line per measurement:
#   round  row  tool  client-hs/s  server-hs/s  [what tlsperf negotiated]
#
# Usage: bench/crypto-vs-rustls-bench.sh [ROUNDS] [TLSPERF_SECONDS] [BENCH_MULTIPLIER]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
secs="${2:-2}"
mult="${3:-8}"
rb="${RUSTLS_BENCH:?set RUSTLS_BENCH to a rustls-bench binary built with --features aws-lc-rs}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --locked --quiet --bin tlsperf
bin="$target/release/tlsperf"

# row name | rustls-bench arguments | tlsperf crypto handshake arguments
rows=(
  "tls13-ecdsa-p256-full|--key-type ecdsa-p256 handshake TLS13_AES_128_GCM_SHA256|--cert ecdsa-p256 --tls 1.3 --kind full --group x25519mlkem768"
  "tls13-ed25519-full|--key-type ed25519 handshake TLS13_AES_128_GCM_SHA256|--cert ed25519 --tls 1.3 --kind full --group x25519mlkem768"
  "tls13-rsa2048-full|--key-type rsa2048 handshake TLS13_AES_128_GCM_SHA256|--cert rsa-2048 --tls 1.3 --kind full --group x25519mlkem768"
  "tls13-ecdsa-p256-ticket|--key-type ecdsa-p256 handshake-ticket TLS13_AES_128_GCM_SHA256|--cert ecdsa-p256 --tls 1.3 --kind resumed --group x25519mlkem768"
  "tls12-ecdsa-p256-full|--key-type ecdsa-p256 handshake TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256|--cert ecdsa-p256 --tls 1.2 --kind full --group x25519"
)

summary='
import json, sys
row = json.load(sys.stdin)["rows"][0]
n = row["negotiated"]
c, s = row["client"]["ops_per_sec"], row["server"]["ops_per_sec"]
what = " ".join([n["version"], n["cipher_suite"], str(n["group"])])
print("%s\t%s\ttlsperf\t%.2f\t%.2f\t%s" % (sys.argv[1], sys.argv[2], c, s, what))
'

echo "# machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
for r in $(seq 1 "$rounds"); do
  for row in "${rows[@]}"; do
    IFS='|' read -r name rbargs ourargs <<<"$row"
    # rustls-bench does 512 full or 4096 resumed handshakes times the multiplier.
    m="$mult"
    case "$rbargs" in *handshake-ticket*) m=$(( (mult + 3) / 4 ));; esac
    # shellcheck disable=SC2086
    out="$(BENCH_MULTIPLIER="$m" "$rb" --provider aws-lc-rs --api buffered $rbargs)"
    c="$(awk -F'\t' '$5 == "client" { print $8 }' <<<"$out")"
    s="$(awk -F'\t' '$5 == "server" { print $8 }' <<<"$out")"
    printf '%s\t%s\trustls-bench\t%s\t%s\n' "$r" "$name" "$c" "$s"
    # shellcheck disable=SC2086
    "$bin" --json crypto handshake --provider aws-lc-rs $ourargs --duration "${secs}s" --rounds 5 |
      python3 -c "$summary" "$r" "$name"
  done
done
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
