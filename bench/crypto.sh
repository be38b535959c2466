#!/usr/bin/env bash
# `tlsperf crypto sign` / `crypto kx` (aws-lc-rs rows) against `openssl speed`, same
# session, openssl first then tlsperf, ROUNDS times (issue 7). Prints a markdown table
# per round on stdout: our figure, openssl's, the ratio.
#
# What is compared:
# - ECDSA P-256, Ed25519, RSA-2048 (PKCS#1 v1.5, SHA-256) sign and verify: openssl
#   speed signs a 20-byte digest (ECDSA, RSA) or a short message (Ed25519); tlsperf signs
#   a 130-byte message and hashes it; its verify parses the public key on every call.
# - X25519: openssl's "ecdh op" is one derivation; tlsperf's kx rows are rustls's
#   client (key generation + derivation) and server (start_and_complete) operations.
# - Both in wall-clock time: `openssl speed` divides by user CPU time unless given
#   -elapsed, which hides every moment it was not scheduled (on a busy machine its rates
#   stay high while wall-clock rates drop; openssl #2274).
#
# Usage: bench/crypto.sh [ROUNDS] [SECONDS]   (default 1 round, 1 s per item)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-1}"
secs="${2:-1}"
command -v openssl >/dev/null || { echo "missing openssl (apt-get install openssl)" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release --locked --quiet --bin tlsperf
bin="$target/release/tlsperf"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(openssl version)"
for r in $(seq 1 "$rounds"); do
  openssl speed -elapsed -seconds "$secs" ecdsap256 ed25519 rsa2048 ecdhx25519 > "$work/openssl.txt" 2>/dev/null
  "$bin" --json crypto sign --provider aws-lc-rs --alg ecdsa-p256,ed25519,rsa-2048-pkcs1 \
    --duration "${secs}s" --rounds 5 > "$work/sign.json"
  "$bin" --json crypto kx --provider aws-lc-rs --groups x25519 \
    --duration "${secs}s" --rounds 5 > "$work/kx.json"
  echo
  echo "round $r (load average after it: $(cut -d' ' -f1 /proc/loadavg))"
  python3 - "$work" <<'PY'
import json, re, sys
w = sys.argv[1]
text = open(f"{w}/openssl.txt").read()
o = {}
m = re.search(r"ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", text)
o["ecdsa-p256"] = (float(m.group(1)), float(m.group(2)))
m = re.search(r"EdDSA \(Ed25519\)\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", text)
o["ed25519"] = (float(m.group(1)), float(m.group(2)))
m = re.search(r"rsa 2048 bits\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", text)
o["rsa-2048-pkcs1"] = (float(m.group(1)), float(m.group(2)))
m = re.search(r"ecdh \(X25519\)\s+\S+s\s+([\d.]+)", text)
x25519 = float(m.group(1))
sign = json.load(open(f"{w}/sign.json"))
kx = json.load(open(f"{w}/kx.json"))
print()
print("| operation | tlsperf aws-lc-rs ops/s (min–max of rounds) | openssl speed ops/s | ratio |")
print("|---|---|---|---|")
for alg in ["ecdsa-p256", "ed25519", "rsa-2048-pkcs1"]:
    for i, op in enumerate(["sign", "verify"]):
        row = next(r for r in sign["rows"] if r["alg"] == alg and r["op"] == op)
        ours = row["ops_per_sec"]
        lo, hi = 1e9 / row["max_ns"], 1e9 / row["min_ns"]
        theirs = o[alg][i]
        print(f"| {alg} {op} | {ours:,.0f} ({lo:,.0f}–{hi:,.0f}) | {theirs:,.0f} | {ours / theirs:.2f} |")
for side in ["client", "server"]:
    row = next(r for r in kx["rows"] if r["side"] == side)
    ours = row["ops_per_sec"]
    lo, hi = 1e9 / row["max_ns"], 1e9 / row["min_ns"]
    print(f"| x25519 kx {side} (keygen + derive) | {ours:,.0f} ({lo:,.0f}–{hi:,.0f}) | {x25519:,.0f} (derive only) | {ours / x25519:.2f} |")
PY
done
