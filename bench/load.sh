#!/usr/bin/env bash
# `tlsperf load` against wrk, h2load and oha, same nginx (1 worker), one run, alternating
# tools round by round (issue: handshake + load generator):
#   1. keep-alive HTTPS requests/s, one client thread, 50 connections, DURATION seconds
#      each (h2load: a request count sized to last about as long);
#      and the nginx worker's CPU per request under each tool (from /proc);
#   2. new-connection handshakes/s: every request on a new connection, full handshakes
#      (h2load --h1 -n 2000 -c 2000 -t 1 vs tlsperf load --new-conn --resume off, same
#      counts), and the client's CPU per handshake (user + system from GNU time): tlsperf
#      with certificate verification on (chain verdicts cached, the default), with every
#      chain verified (--no-verify-cache) and with --insecure (h2load does not verify);
#   3. agreement: mean request latency of one keep-alive connection fetching a 1 MiB
#      body (h2load prints means, no percentiles).
# nginx listens with backlog=4096: with the default 511, 2,000 simultaneous connects
# overflow the listen queue and dropped SYNs are retried after 1 s, whichever tool sends
# them.
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
"$bin" pki init "$work/pki" --key-type ecdsa-p256 -q
port=18453
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 16384; }
http { access_log off;
  server { listen 127.0.0.1:$port ssl backlog=4096;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    ssl_session_cache shared:SSL:10m; ssl_session_tickets on; keepalive_requests 1000000;
    location = /big { alias $work/big.bin; }
    location / { return 200 '{"status":"ok"}'; } } }
NGINX
head -c 1048576 /dev/zero > "$work/big.bin"
# nginx's worker runs as nobody: let it read the body.
chmod 755 "$work"; chmod 644 "$work/big.bin"
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
sleep 0.5
worker="$(pgrep -P "${pids[0]}" | head -1)"
[ -n "$worker" ] || { echo "no nginx worker process" >&2; exit 1; }
url="https://localhost:$port/"
ca="$work/pki/root.pem"
oha_bin="$(command -v oha || true)"

median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
cpu_of() { awk '/^CPU /{print $2+$3}' "$1"; }

hz=$(getconf CLK_TCK)
# CPU ticks (user + system) of the nginx worker.
ticks() { awk '{print $14+$15}' "/proc/$worker/stat"; }
# nginx µs of CPU per request: ticks before, after, requests.
per_req() { python3 -c "import sys,os; a,b,n=map(float,sys.argv[1:]); print('%.2f' % ((b-a)*1e6/os.sysconf('SC_CLK_TCK')/n))" "$1" "$2" "$3"; }

for r in $(seq "$rounds"); do
  # 1. keep-alive
  t0=$(ticks)
  wrk -t1 -c50 -d"${secs}s" "$url" > "$work/wrk-out"
  t1=$(ticks)
  awk '/Requests\/sec/ {print $2}' "$work/wrk-out" >> "$work/ka-wrk"
  n=$(awk '/requests in/ {print $1}' "$work/wrk-out"); per_req "$t0" "$t1" "$n" >> "$work/ngx-wrk"
  t0=$(ticks)
  h2load --h1 -t 1 -c 50 -n $((secs * 60000)) "$url" 2>/dev/null > "$work/h2-out"
  t1=$(ticks)
  awk '/^finished in/ {gsub(",", "", $4); print $4}' "$work/h2-out" >> "$work/ka-h2load"
  per_req "$t0" "$t1" $((secs * 60000)) >> "$work/ngx-h2load"
  if [ -n "$oha_bin" ]; then
    "$oha_bin" --no-tui --insecure -c 50 -z "${secs}s" --output-format json "$url" 2>/dev/null | python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["summary"]["requestsPerSec"])' >> "$work/ka-oha"
  fi
  t0=$(ticks)
  "$bin" load "$url" --cacert "$ca" -c 50 --threads 1 -d "${secs}s" --json -q > "$work/ka-out.json"
  t1=$(ticks)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f" % d["requests"]["per_second"]); print(d["requests"]["completed"], file=open(sys.argv[2], "w"))' "$work/ka-out.json" "$work/ka-n" >> "$work/ka-tlsperf"
  per_req "$t0" "$t1" "$(cat "$work/ka-n")" >> "$work/ngx-tlsperf"
  python3 -c "import sys; a,b,hz,s=map(float,sys.argv[1:]); print('%.0f' % ((b-a)/hz/s*100))" "$t0" "$t1" "$hz" "$secs" >> "$work/ngx-busy"
  # 2. new connections, full handshakes, client CPU
  /usr/bin/time -f "CPU %U %S" -o "$work/t-h2load" h2load --h1 -t 1 -c 2000 -n 2000 "$url" 2>/dev/null | awk '/^finished in/ {gsub(",", "", $4); print $4}' >> "$work/nc-h2load"
  echo "$(cpu_of "$work/t-h2load")" >> "$work/cpu-h2load"
  for mode in cached each insecure; do
    flags=(--cacert "$ca")
    [ "$mode" = each ] && flags=(--cacert "$ca" --no-verify-cache)
    [ "$mode" = insecure ] && flags=(--insecure)
    /usr/bin/time -f "CPU %U %S" -o "$work/t-$mode" "$bin" load "$url" "${flags[@]}" -c 2000 --new-conn --resume off -n 2000 --threads 1 --json -q 2>/dev/null \
      | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f" % d["handshakes"]["per_second"], d["handshakes"]["total"], d["requests"]["failed"])' > "$work/nc-$mode-last"
    read -r hps total failed < "$work/nc-$mode-last"
    echo "$hps" >> "$work/nc-tlsperf-$mode"
    echo "$failed" >> "$work/failed-$mode"
    echo "$(cpu_of "$work/t-$mode")" >> "$work/cpu-$mode"
  done
  # 3. agreement: one keep-alive connection, 1 MiB bodies, mean request time
  h2load --h1 -t 1 -c 1 -n 400 "${url}big" 2>/dev/null | awk '/^time for request:/ {v=$6; if (v ~ /us$/) {sub("us","",v); v=v/1000} else if (v ~ /ms$/) {sub("ms","",v)} else {sub("s","",v); v=v*1000}; print v}' >> "$work/big-h2load"
  "$bin" load "${url}big" --cacert "$ca" -c 1 --threads 1 -n 400 --json -q | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["body_bytes"] == 400 << 20, d["status"]; print("%.3f" % (d["latency"]["quantiles"]["mean_ns"]/1e6))' >> "$work/big-tlsperf"
done

ka_wrk=$(median < "$work/ka-wrk"); ka_h2=$(median < "$work/ka-h2load"); ka_us=$(median < "$work/ka-tlsperf")
ka_oha=$( [ -s "$work/ka-oha" ] && median < "$work/ka-oha" || echo "-")
ngx_wrk=$(median < "$work/ngx-wrk"); ngx_h2=$(median < "$work/ngx-h2load"); ngx_us=$(median < "$work/ngx-tlsperf")
nc_h2=$(median < "$work/nc-h2load"); nc_c=$(median < "$work/nc-tlsperf-cached"); nc_e=$(median < "$work/nc-tlsperf-each"); nc_i=$(median < "$work/nc-tlsperf-insecure")
cpu_h2=$(median < "$work/cpu-h2load"); cpu_c=$(median < "$work/cpu-cached"); cpu_e=$(median < "$work/cpu-each"); cpu_i=$(median < "$work/cpu-insecure")
big_h2=$(median < "$work/big-h2load"); big_us=$(median < "$work/big-tlsperf")
ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print('-' if '-' in (a,b) else '%.2f' % (float(a)/float(b)))" "$1" "$2"; }
per_hs() { python3 -c "import sys; print('%.0f' % (float(sys.argv[1]) * 1e6 / 2000))" "$1"; }

echo "# Load generator benchmark"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 worker (listen backlog 4096), clock ticks ${hz}/s"
echo "- $rounds rounds, tools alternating; medians of rounds (each round's figure beside it)"
echo
echo "## Keep-alive HTTPS requests/s (1 client thread, 50 connections, ${secs} s)"
echo
echo "| tool | req/s (median) | rounds | tlsperf ÷ tool | nginx CPU µs per request (median; rounds) |"
echo "|---|---:|---|---:|---|"
echo "| tlsperf load | $ka_us | $(paste -sd' ' "$work/ka-tlsperf") | 1 | $ngx_us; $(paste -sd' ' "$work/ngx-tlsperf") |"
echo "| wrk | $ka_wrk | $(paste -sd' ' "$work/ka-wrk") | $(ratio "$ka_us" "$ka_wrk") | $ngx_wrk; $(paste -sd' ' "$work/ngx-wrk") |"
echo "| h2load --h1 | $ka_h2 | $(paste -sd' ' "$work/ka-h2load") | $(ratio "$ka_us" "$ka_h2") | $ngx_h2; $(paste -sd' ' "$work/ngx-h2load") |"
echo "| oha | $ka_oha | $( [ -s "$work/ka-oha" ] && paste -sd' ' "$work/ka-oha" || echo "not installed") | $(ratio "$ka_us" "$ka_oha") | – |"
echo
echo "nginx's worker was busy $(median < "$work/ngx-busy")% of a core during the tlsperf runs (rounds: $(paste -sd' ' "$work/ngx-busy")); near 100%, the server is the bottleneck and its CPU per request says what each tool costs it."
echo
echo "## New connections: 2000 requests, each on a new connection, full TLS 1.3 handshakes (1 client thread, -c 2000)"
echo
echo "| tool | handshakes/s (median) | rounds | client CPU s (median) | client CPU µs per handshake | tlsperf ÷ h2load, rate | tlsperf ÷ h2load, CPU/handshake |"
echo "|---|---:|---|---:|---:|---:|---:|"
echo "| h2load --h1 -c 2000 -n 2000 (no verification) | $nc_h2 | $(paste -sd' ' "$work/nc-h2load") | $cpu_h2 | $(per_hs "$cpu_h2") | 1 | 1 |"
echo "| tlsperf load --new-conn --resume off, verification on (default: chain verdicts cached) | $nc_c | $(paste -sd' ' "$work/nc-tlsperf-cached") | $cpu_c | $(per_hs "$cpu_c") | $(ratio "$nc_c" "$nc_h2") | $(ratio "$cpu_c" "$cpu_h2") |"
echo "| same, every chain verified (--no-verify-cache) | $nc_e | $(paste -sd' ' "$work/nc-tlsperf-each") | $cpu_e | $(per_hs "$cpu_e") | $(ratio "$nc_e" "$nc_h2") | $(ratio "$cpu_e" "$cpu_h2") |"
echo "| same with --insecure | $nc_i | $(paste -sd' ' "$work/nc-tlsperf-insecure") | $cpu_i | $(per_hs "$cpu_i") | $(ratio "$nc_i" "$nc_h2") | $(ratio "$cpu_i" "$cpu_h2") |"
echo
echo "Client CPU per round (s): h2load $(paste -sd' ' "$work/cpu-h2load"); tlsperf cached $(paste -sd' ' "$work/cpu-cached"), each $(paste -sd' ' "$work/cpu-each"), insecure $(paste -sd' ' "$work/cpu-insecure")."
echo "Failed requests per round (tlsperf, cached / each / insecure): $(paste -sd' ' "$work/failed-cached") / $(paste -sd' ' "$work/failed-each") / $(paste -sd' ' "$work/failed-insecure")"
echo
echo "## Agreement: mean request latency, one keep-alive connection, 400 × 1 MiB"
echo
echo "| tool | mean ms (median of rounds) | rounds | tlsperf ÷ h2load |"
echo "|---|---:|---|---:|"
echo "| tlsperf load -c 1 | $big_us | $(paste -sd' ' "$work/big-tlsperf") | $(ratio "$big_us" "$big_h2") |"
echo "| h2load --h1 -c 1 | $big_h2 | $(paste -sd' ' "$work/big-h2load") | 1 |"
