#!/usr/bin/env bash
# The headline CPU figures of two builds of tlsperf in ONE run, alternating round by round:
# BASE_REV (a commit) against the working tree. What each figure measures, and how:
# examples/compare_builds.rs; how to read the report: docs/benchmarks.md ("Comparing two builds").
# Run it before closing an issue that touches a hot path, and say its result in the note.
#
# Needs nginx (nginx-light), h2load (nghttp2-client), tcpdump and taskset; root for the
# probes' figure (skipped when BASE has no `observe --probes`). Usage:
#   bench/compare-builds.sh BASE_REV [ROUNDS=5] [N=2000]
# BASE_REV's release build is kept in target/compare-builds/<commit>/ for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bench/compare-builds.sh BASE_REV [ROUNDS=5] [N=2000]" >&2; exit 2; }
rounds="${2:-5}"
n="${3:-2000}"
sha=$(git rev-parse --verify --quiet "$1^{commit}") || { echo "BASE_REV=$1: not a commit of this repository" >&2; exit 2; }
[[ "$rounds" =~ ^[2-9]$|^[1-9][0-9]$ ]] || { echo "ROUNDS=$rounds: 2 to 99 rounds" >&2; exit 2; }
[[ "$n" =~ ^[1-9][0-9]{2,5}$ ]] || { echo "N=$n: 100 to 999999 handshakes per run" >&2; exit 2; }
for t in nginx h2load tcpdump taskset; do
  command -v "$t" >/dev/null || { echo "missing $t (apt-get install nginx-light nghttp2-client tcpdump util-linux)" >&2; exit 1; }
done
base_dir="$PWD/target/compare-builds/$sha"
base="$base_dir/target/release/tlsperf"
if [ ! -x "$base" ]; then
  rm -rf "$base_dir/src" && mkdir -p "$base_dir/src"
  git archive "$sha" | tar -x -C "$base_dir/src"
  echo "building $sha (release) in $base_dir" >&2
  CARGO_TARGET_DIR="$base_dir/target" cargo build --release --locked --quiet --bin tlsperf \
    --manifest-path "$base_dir/src/Cargo.toml"
fi
cargo build --release --locked --quiet --bin tlsperf --example compare_builds --example rustls_floor --example rustls_client_floor
pin=()
[ "$(nproc)" -ge 2 ] && pin=(--pin)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
target/release/examples/compare_builds --base "$base" --new "$PWD/target/release/tlsperf" \
  --floor "$PWD/target/release/examples/rustls_floor" \
  --client-floor "$PWD/target/release/examples/rustls_client_floor" --work "$work" --rounds "$rounds" -n "$n" "${pin[@]}"
