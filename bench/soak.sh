#!/usr/bin/env bash
# Soak: `tlsperf serve` with --max-connections and --handshake-timeout holds IDLE (10,000)
# idle TLS connections plus SLOW (1,000) slowloris connections (TCP open, 5 bytes of a
# ClientHello record, then silence) while `tlsperf load` runs; compared with the same load
# run before, on the quiet server:
#   - load success (target 100%) and p99 latency (target ≤ 2× the baseline's);
#   - the server's resident memory before, while holding, and after (bounded);
#   - slowloris connections closed by the server's handshake timeout;
#   - open connections back to 0 once the clients are gone.
# Loopback only; raises its own descriptor limit; every phase bounded in time.
#
# Usage: bench/soak.sh [IDLE] [SLOW] [LOAD_SECONDS]   (default 10000 1000 5)
set -euo pipefail
cd "$(dirname "$0")/.."
idle="${1:-10000}"
slow="${2:-1000}"
secs="${3:-5}"
need=$((idle + slow + 200))
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt "$need" ]; then
  echo "descriptor limit $(ulimit -n) is below the $need this run needs" >&2
  exit 1
fi
cargo build --release --locked --quiet --bin tlsperf --example hold_connections
bin="$PWD/target/release/tlsperf"
hold="$PWD/target/release/examples/hold_connections"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

port=18471
mport=18472
"$bin" serve --listen "127.0.0.1:$port" --metrics "127.0.0.1:$mport" --gen-cert ecdsa-p256 \
  --write-ca "$work/ca.pem" --max-connections $((idle + slow + 500)) --handshake-timeout 3s \
  --idle-timeout 1h --duration 300s -q > "$work/serve.out" 2>&1 &
server=$!
pids+=($server)
for _ in $(seq 50); do [ -s "$work/ca.pem" ] && curl -s "http://127.0.0.1:$mport/stats" > /dev/null && break; sleep 0.1; done
url="https://localhost:$port/"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$server/status"; }
open_conns() { curl -s "http://127.0.0.1:$mport/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["open_connections"])'; }
load() { "$bin" load "$url" --cacert "$work/ca.pem" -d "${secs}s" -c 8 --requests-per-conn 20 --threads 1 --json -q 2>/dev/null; }
summ() { python3 -c 'import json,sys; d=json.load(sys.stdin); r=d["requests"]; print(r["completed"], r["failed"], "%.3f" % (d["latency"]["quantiles"]["p99_ns"]/1e6), "%.0f" % r["per_second"])'; }

rss0=$(rss)
read -r base_ok base_failed base_p99 base_rps < <(load | summ)

# Hold the idle and slowloris connections for the load's duration plus margin.
hold_s=$((secs + 15))
"$hold" "127.0.0.1:$port" "$idle" "$hold_s" "$slow" > "$work/hold.out" &
holder=$!
pids+=($holder)
for _ in $(seq 600); do [ -s "$work/hold.out" ] && break; sleep 0.1; done
read -r held open_s < "$work/hold.out"
sleep 1
rss_held=$(rss)
open_held=$(open_conns)
read -r soak_ok soak_failed soak_p99 soak_rps < <(load | summ)
rss_max=$(rss)
wait "$holder" || true
slow_line=$(grep '^slowloris' "$work/hold.out" || echo "slowloris 0 0")
read -r _ slow_opened slow_closed <<< "$slow_line"
# The clients are gone: connections drain.
for _ in $(seq 100); do [ "$(open_conns)" = 0 ] && break; sleep 0.1; done
open_after=$(open_conns)
rss_after=$(rss)

ratio=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$soak_p99" "$base_p99")
succ=$(python3 -c "import sys; ok,f=map(int,sys.argv[1:]); print('%.3f' % (100.0*ok/max(ok+f,1)))" "$soak_ok" "$soak_failed")
echo "# Soak"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); descriptor limit $(ulimit -n)"
echo "- tlsperf serve: --max-connections $((idle + slow + 500)) --handshake-timeout 3s; load: -c 8 --requests-per-conn 20, ${secs} s, 1 thread"
echo
echo "| | value |"
echo "|---|---:|"
echo "| idle TLS connections held | $held of $idle (opened in ${open_s} s) |"
echo "| open connections at the server while holding | $open_held |"
echo "| slowloris connections opened / closed by the server | $slow_opened / $slow_closed |"
echo "| load before: completed, failed, p99 ms, req/s | $base_ok, $base_failed, $base_p99, $base_rps |"
echo "| load while holding: completed, failed, p99 ms, req/s | $soak_ok, $soak_failed, $soak_p99, $soak_rps |"
echo "| success while holding (target 100%) | ${succ}% |"
echo "| p99 while holding ÷ before (target ≤ 2) | $ratio |"
echo "| server RSS KiB: before, holding, end of load, after | $rss0, $rss_held, $rss_max, $rss_after |"
echo "| open connections after the clients left (target 0) | $open_after |"
