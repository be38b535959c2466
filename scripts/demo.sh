#!/usr/bin/env bash
# The main job, until `tlsperf lab` exists: build tlsperf, write a test PKI for two key
# types, check it with openssl, then measure something real on this machine — how long
# `tlsperf pki init` takes with ECDSA P-256 versus RSA-2048 keys — and let
# `tlsperf compare` say whether the difference is significant (Welch's t-test).
#
# Then the handshake timeline and the load generator against `tlsperf serve` on
# loopback, with resumption off and with tickets, compared with Welch's t-test.
#
# Usage: scripts/demo.sh [OUT_DIR]   (default: ./tlsperf-demo; runs take ~40 s)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-tlsperf-demo}"
rounds="${ROUNDS:-12}"

cargo build --release --locked --quiet
bin="$PWD/target/release/tlsperf"
mkdir -p "$out"

echo "== test PKIs in $out/"
"$bin" pki init "$out/pki-ecdsa" --key ecdsa-p256 --force
"$bin" pki init "$out/pki-rsa" --key rsa-2048 --force -q
if command -v openssl >/dev/null; then
  for d in pki-ecdsa pki-rsa; do
    (cd "$out/$d" && openssl verify -CAfile root.pem -untrusted intermediate.pem server.pem client.pem) \
      | sed "s|^|$d: |"
  done
else
  echo "openssl not installed: skipping openssl verify"
fi

echo
echo "== synthetic trust bundle (10,000 CAs, 500 cross-signed twins)"
"$bin" pki bundle --count 10000 --cross-signed 500 --out "$out/bundle-10k.pem" --force

echo
echo "== timing 'tlsperf pki init' ($rounds rounds each, alternating), in ms"
: > "$out/ecdsa-p256.ms"
: > "$out/rsa-2048.ms"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for i in $(seq "$rounds"); do
  for key in ecdsa-p256 rsa-2048; do
    start=$(date +%s%N)
    "$bin" pki init "$tmp/$key-$i" --key "$key" -q
    end=$(date +%s%N)
    echo "scale=3; ($end - $start) / 1000000" | bc >> "$out/$key.ms" 2>/dev/null \
      || awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", (e - s) / 1e6 }' >> "$out/$key.ms"
  done
done

echo
"$bin" compare "$out/ecdsa-p256.ms" "$out/rsa-2048.ms"
"$bin" compare "$out/ecdsa-p256.ms" "$out/rsa-2048.ms" --json > "$out/compare.json"
echo
echo "== handshakes and load against 'tlsperf serve' on loopback: resumption off vs tickets"
"$bin" serve --listen 127.0.0.1:0 --gen-cert ecdsa-p256 --write-ca "$out/serve-ca.pem" \
  --resumption tickets --json > "$out/serve.jsonl" 2> "$out/serve.log" &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$out/serve.jsonl" ] && break; sleep 0.1; done
addr=$(head -1 "$out/serve.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["addr"])')
url="https://localhost:${addr##*:}/"
"$bin" handshake "$url" --cacert "$out/serve-ca.pem" -n 20
for mode in off tickets; do
  echo
  echo "-- load: 3 s, a new connection per request, --resume $mode"
  "$bin" load "$url" --cacert "$out/serve-ca.pem" --new-conn --resume "$mode" -d 3s -c 20 \
    --server-pid "$serve_pid" --out "$out/load-$mode.json" --force
done
echo
"$bin" compare "$out/load-off.json" "$out/load-tickets.json"
echo
echo "samples, PKIs, load results and compare.json are in $out/"
