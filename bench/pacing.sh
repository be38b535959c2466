#!/usr/bin/env bash
# Open-loop pacing (issue "Numbers a skeptic accepts", part 2): how much of the corrected
# latency is the generator's own lateness. Against an idle `tlsperf serve` on loopback
# (same binary, 1 thread), `tlsperf load --rate R -c 4` for each rate, rounds alternating;
# every figure of a row comes from the same run:
#   gap = latency_corrected p50 − latency p50 (µs): the target is ≤ 50 µs;
#   send lateness p50 / p99 / max (µs): actual send instant − intended one, measured
#   by the generator itself (absent, "-", for builds before it was reported);
#   generator CPU per request (µs): what the pacing costs (the cooperative spin's share).
# BIN=path/to/tlsperf measures another build (e.g. one from before the timerfd pacing)
# against the same server.
# Loopback only. Prints a markdown report on stdout.
#
# Usage: [RATES="50 1000"] [BIN=...] bench/pacing.sh [ROUNDS] [DURATION_S]   (default 3 rounds of 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
secs="${2:-5}"
read -r -a rates <<< "${RATES:-50 1000}"
cargo build --release --locked --quiet --bin tlsperf
server_bin="$PWD/target/release/tlsperf"
bin="${BIN:-$server_bin}"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port=18467
"$server_bin" serve --listen "127.0.0.1:$port" --threads 1 --gen-cert ecdsa-p256 --write-ca "$work/ca.pem" -q > /dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/ca.pem" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
url="https://localhost:$port/"

echo "# Open-loop pacing: corrected − raw latency"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- binary: $bin ($("$bin" --version 2>/dev/null || echo unknown)); server: tlsperf serve, 1 thread, idle apart from this load"
echo "- each row: tlsperf load --rate R -c 4 -d ${secs}s (keep-alive); µs; same-run figures"
echo
echo "| round | rate | completed | raw p50 | corrected p50 | gap (corrected − raw p50) | lateness p50 | lateness p99 | lateness max | generator CPU µs/request | warnings |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for r in $(seq "$rounds"); do
  for rate in "${rates[@]}"; do
    "$bin" load "$url" --cacert "$work/ca.pem" --rate "$rate" -c 4 -d "${secs}s" --json -q > "$work/out.json"
    python3 - "$work/out.json" "$r" "$rate" >> "$work/rows" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
us = lambda ns: "%.1f" % (ns / 1e3)
raw = d["latency"]["quantiles"]["p50_ns"]
cor = d["latency_corrected"]["quantiles"]["p50_ns"]
late = d.get("send_lateness")
lq = late["quantiles"] if late else None
f = lambda k: us(lq[k]) if lq else "-"
warn = "; ".join(w[:60] + "…" for w in d.get("warnings", [])) or "none"
cpu = "%.1f" % (d["generator"]["cpu_seconds"] * 1e6 / max(d["requests"]["completed"], 1))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['requests']['completed']} | {us(raw)} | {us(cor)} | {us(cor - raw)} | {f('p50_ns')} | {f('p99_ns')} | {f('max_ns')} | {cpu} | {warn} |")
PY
    tail -1 "$work/rows"
  done
done
echo
echo "Median gap per rate (µs):"
for rate in "${rates[@]}"; do
  gap=$(awk -F'|' -v r="$rate" '$3+0 == r+0 {print $7+0}' "$work/rows" | sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}')
  echo "- rate $rate: $gap"
done
