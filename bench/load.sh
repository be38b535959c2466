#!/usr/bin/env bash
# `tlsperf load` against wrk, h2load and oha, same nginx (1 worker), one run, alternating
# tools round by round (issue: handshake + load generator):
#   1. keep-alive HTTPS requests/s, one client thread, 50 connections, DURATION seconds
#      each (h2load: a request count sized to last about as long);
#   2. new-connection handshakes/s: every request on a new connection, full handshakes
#      (h2load --h1 -n 2000 -c 2000 -t 1 vs tlsperf load --new-conn --resume off, same
#      counts), and the client's CPU per handshake (user + system from GNU time): tlsperf
#      with certificate verification on and with --insecure (h2load does not verify).
# Loopback only. Prints a markdown report on stdout.
#
# Usage: bench/load.sh [ROUNDS] [DURATION_S]   (default 3 rounds of 5 s)
# Needs nginx (nginx-light), h2load (nghttp2-client), wrk; oha is used when on PATH
# (`cargo install oha`).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
secs="${2:-5}"
for t in nginx h2load wrk; do command -v "$t" >/dev/null || { echo "missing $t (apt-get install nginx-light nghttp2-client wrk)" >&2; exit 1; }; done
cargo build --release --locked --quiet --bin tlsperf
bin="$PWD/target/release/tlsperf"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
"$bin" pki init "$work/pki" --key ecdsa-p256 -q
port=18453
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 16384; }
http { access_log off;
  server { listen 127.0.0.1:$port ssl;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    ssl_session_cache shared:SSL:10m; ssl_session_tickets on; keepalive_requests 1000000;
    location / { return 200 '{"status":"ok"}'; } } }
NGINX
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
sleep 0.5
url="https://localhost:$port/"
ca="$work/pki/root.pem"
oha_bin="$(command -v oha || true)"

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
cpu_of() { awk '/^CPU /{print $2+$3}' "$1"; }

for r in $(seq "$rounds"); do
  # 1. keep-alive
  wrk -t1 -c50 -d"${secs}s" "$url" | awk '/Requests\/sec/ {print $2}' >> "$work/ka-wrk"
  h2load --h1 -t 1 -c 50 -n $((secs * 60000)) "$url" 2>/dev/null > "$work/h2-out"
  awk '/^finished in/ {gsub(",", "", $4); print $4}' "$work/h2-out" >> "$work/ka-h2load"
  # Mean request time (h2load prints min, max, mean, sd; no percentiles).
  awk '/^time for request:/ {v=$6; if (v ~ /us$/) {sub("us","",v); v=v/1000} else if (v ~ /ms$/) {sub("ms","",v)} else {sub("s","",v); v=v*1000}; print v}' "$work/h2-out" >> "$work/mean-h2load"
  if [ -n "$oha_bin" ]; then
    "$oha_bin" --no-tui --insecure -c 50 -z "${secs}s" --output-format json "$url" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requestsPerSec"])' >> "$work/ka-oha"
  fi
  "$bin" load "$url" --cacert "$ca" -c 50 --threads 1 -d "${secs}s" --json -q > "$work/ka-out.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f" % d["requests"]["per_second"]); print(d["latency"]["quantiles"]["mean_ns"]/1e6, file=open(sys.argv[2], "a"))' "$work/ka-out.json" "$work/mean-tlsperf" >> "$work/ka-tlsperf"
  # 2. new connections, full handshakes, client CPU
  /usr/bin/time -f "CPU %U %S" -o "$work/t-h2load" h2load --h1 -t 1 -c 2000 -n 2000 "$url" 2>/dev/null | awk '/^finished in/ {gsub(",", "", $4); print $4}' >> "$work/nc-h2load"
  echo "$(cpu_of "$work/t-h2load")" >> "$work/cpu-h2load"
  for mode in verify insecure verify-c64; do
    flags=(--cacert "$ca" -c 2000)
    [ "$mode" = insecure ] && flags=(--insecure -c 2000)
    [ "$mode" = verify-c64 ] && flags=(--cacert "$ca" -c 64)
    /usr/bin/time -f "CPU %U %S" -o "$work/t-$mode" "$bin" load "$url" "${flags[@]}" --new-conn --resume off -n 2000 --threads 1 --json -q 2>/dev/null \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % d["handshakes"]["per_second"], d["handshakes"]["total"], d["requests"]["failed"])' > "$work/nc-$mode-last"
    read -r hps total failed < "$work/nc-$mode-last"
    echo "$hps" >> "$work/nc-tlsperf-$mode"
    echo "$failed" >> "$work/failed-$mode"
    echo "$(cpu_of "$work/t-$mode")" >> "$work/cpu-$mode"
  done
done

ka_wrk=$(median < "$work/ka-wrk"); ka_h2=$(median < "$work/ka-h2load"); ka_us=$(median < "$work/ka-tlsperf")
ka_oha=$( [ -s "$work/ka-oha" ] && median < "$work/ka-oha" || echo "-")
nc_h2=$(median < "$work/nc-h2load"); nc_v=$(median < "$work/nc-tlsperf-verify"); nc_i=$(median < "$work/nc-tlsperf-insecure"); nc_64=$(median < "$work/nc-tlsperf-verify-c64")
cpu_h2=$(median < "$work/cpu-h2load"); cpu_v=$(median < "$work/cpu-verify"); cpu_i=$(median < "$work/cpu-insecure"); cpu_64=$(median < "$work/cpu-verify-c64")
ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print('-' if '-' in (a,b) else '%.2f' % (float(a)/float(b)))" "$1" "$2"; }
per_hs() { python3 -c "import sys; print('%.0f' % (float(sys.argv[1]) * 1e6 / 2000))" "$1"; }

echo "# Load generator benchmark"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 worker"
echo "- $rounds rounds, tools alternating; medians of rounds (each round's figure beside it)"
echo
echo "## Keep-alive HTTPS requests/s (1 client thread, 50 connections, ${secs} s)"
echo
echo "| tool | req/s (median) | rounds | tlsperf ÷ tool |"
echo "|---|---:|---|---:|"
echo "| tlsperf load | $ka_us | $(paste -sd' ' "$work/ka-tlsperf") | 1 |"
echo "| wrk | $ka_wrk | $(paste -sd' ' "$work/ka-wrk") | $(ratio "$ka_us" "$ka_wrk") |"
echo "| h2load --h1 | $ka_h2 | $(paste -sd' ' "$work/ka-h2load") | $(ratio "$ka_us" "$ka_h2") |"
echo "| oha | $ka_oha | $( [ -s "$work/ka-oha" ] && paste -sd' ' "$work/ka-oha" || echo "not installed") | $(ratio "$ka_us" "$ka_oha") |"
echo
echo "Mean request latency at 50 connections (ms, median of rounds): tlsperf $(median < "$work/mean-tlsperf"), h2load $(median < "$work/mean-h2load") (ratio $(ratio "$(median < "$work/mean-tlsperf")" "$(median < "$work/mean-h2load")"); h2load reports min/max/mean/sd only, so means are compared)."
echo
echo "## New connections: 2000 requests, each on a new connection, full TLS 1.3 handshakes (1 client thread)"
echo
echo "| tool | handshakes/s (median) | rounds | client CPU s (median) | client CPU µs per handshake | tlsperf ÷ h2load, rate | tlsperf ÷ h2load, CPU/handshake |"
echo "|---|---:|---|---:|---:|---:|---:|"
echo "| h2load --h1 -c 2000 -n 2000 (no verification) | $nc_h2 | $(paste -sd' ' "$work/nc-h2load") | $cpu_h2 | $(per_hs "$cpu_h2") | 1 | 1 |"
echo "| tlsperf load --new-conn --resume off, verification on | $nc_v | $(paste -sd' ' "$work/nc-tlsperf-verify") | $cpu_v | $(per_hs "$cpu_v") | $(ratio "$nc_v" "$nc_h2") | $(ratio "$cpu_v" "$cpu_h2") |"
echo "| same with --insecure | $nc_i | $(paste -sd' ' "$work/nc-tlsperf-insecure") | $cpu_i | $(per_hs "$cpu_i") | $(ratio "$nc_i" "$nc_h2") | $(ratio "$cpu_i" "$cpu_h2") |"
echo "| tlsperf, verification on, -c 64 (2000 simultaneous connects overflow nginx's listen backlog: SYNs retried after 1 s) | $nc_64 | $(paste -sd' ' "$work/nc-tlsperf-verify-c64") | $cpu_64 | $(per_hs "$cpu_64") | $(ratio "$nc_64" "$nc_h2") | $(ratio "$cpu_64" "$cpu_h2") |"
echo
echo "Failed requests per round (tlsperf, verify / insecure / -c 64): $(paste -sd' ' "$work/failed-verify") / $(paste -sd' ' "$work/failed-insecure") / $(paste -sd' ' "$work/failed-verify-c64")"
