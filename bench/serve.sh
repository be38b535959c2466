#!/usr/bin/env bash
# `tlsperf serve` against nginx (1 worker) and a Go net/http TLS server, same certificate
# (ECDSA P-256), same client, one run, servers alternating round by round:
#   - server CPU per full TLS 1.3 handshake: utime+stime from /proc/PID/stat around
#     `h2load --h1 -n N -c N -t 1` (one connection per request);
#   - new connections per second (h2load's own figure; its client is the bottleneck);
#   - keep-alive requests per second: `h2load --h1 -n 200000 -c 50 -t 1`;
#   - server CPU per resumed handshake, TLS 1.3 and 1.2, against a full one with the same
#     client (`openssl s_time -new` vs `-reuse`);
#   - resident memory per idle TLS connection with 10,000 open (examples/hold_connections).
# Each server gets one core's worth of threads (nginx: 1 worker, Go: GOMAXPROCS=1,
# tlsperf: --threads 1). Loopback only; every run is bounded by -n.
#
# Needs nginx, h2load (nghttp2-client) and go (golang-go): `apt-get install nginx-light
# nghttp2-client golang-go`. Usage: bench/serve.sh [ROUNDS] [HANDSHAKES]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
n="${2:-2000}"
for t in nginx h2load go; do command -v "$t" >/dev/null || { echo "missing $t (apt-get install nginx-light nghttp2-client golang-go)" >&2; exit 1; }; done
cargo build --release --locked --quiet --bin tlsperf --example hold_connections
bin="$PWD/target/release/tlsperf"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
"$bin" pki init "$work/pki" --key-type ecdsa-p256 -q

# nginx, one worker.
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 16384; }
http { access_log off;
  server { listen 127.0.0.1:18443 ssl http2;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    ssl_session_cache shared:SSL:10m; ssl_session_tickets on; keepalive_requests 1000000;
    location / { return 200 '{"status":"ok"}'; } } }
NGINX
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_master=$!
pids+=($nginx_master)

# Go net/http.
mkdir -p "$work/go"
cat > "$work/go/main.go" <<'GO'
package main

import (
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}`))
	})
	srv := &http.Server{Addr: "127.0.0.1:18444"}
	if err := srv.ListenAndServeTLS(os.Args[1], os.Args[2]); err != nil {
		panic(err)
	}
}
GO
(cd "$work/go" && GO111MODULE=off go build -o server main.go)
GOMAXPROCS=1 "$work/go/server" "$work/pki/server-chain.pem" "$work/pki/server.key" &
pids+=($!)

# tlsperf serve.
"$bin" serve --listen 127.0.0.1:18445 --threads 1 --cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" -q > "$work/tlsperf.out" &
pids+=($!)
sleep 1
nginx_pid=$(pgrep -P "$nginx_master" | head -1)
go_pid=$(pgrep -f "$work/go/server" | head -1)
tlsperf_pid=$(pgrep -f "serve --listen 127.0.0.1:18445" | head -1)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

declare -A port=([nginx]=18443 [go]=18444 [tlsperf]=18445)
declare -A pid=([nginx]=$nginx_pid [go]=$go_pid [tlsperf]=$tlsperf_pid)
for s in nginx go tlsperf; do : > "$work/cpu-$s"; : > "$work/cps-$s"; : > "$work/rps-$s"; done

for _ in $(seq "$rounds"); do
  for s in nginx go tlsperf; do
    before=$(cpu_ticks "${pid[$s]}")
    out=$(h2load --h1 -n "$n" -c "$n" -t 1 "https://127.0.0.1:${port[$s]}/" 2>&1)
    after=$(cpu_ticks "${pid[$s]}")
    ok=$(echo "$out" | awk '/^requests:/ {print $8}')
    echo "$out" | awk '/^finished in/ {gsub(",","",$4); print $4}' >> "$work/cps-$s"
    awk -v b="$before" -v a="$after" -v t="$tck" -v n="$ok" 'BEGIN { printf "%.1f\n", (a - b) / t / n * 1e6 }' >> "$work/cpu-$s"
    h2load --h1 -n 200000 -c 50 -t 1 "https://127.0.0.1:${port[$s]}/" 2>&1 | awk '/^finished in/ {gsub(",","",$4); print $4}' >> "$work/rps-$s"
  done
done

# Resumption: server CPU per connection, full vs resumed, same client (openssl s_time).
: > "$work/resume.md"
for s in nginx tlsperf; do
  for v in tls1_3 tls1_2; do
    for mode in new reuse; do
      before=$(cpu_ticks "${pid[$s]}")
      conns=$(openssl s_time -connect "127.0.0.1:${port[$s]}" "-$mode" "-$v" -time 3 -www / 2>/dev/null | awk '/connections in .* real/ {print $1; exit}')
      after=$(cpu_ticks "${pid[$s]}")
      awk -v s="$s" -v v="$v" -v m="$mode" -v b="$before" -v a="$after" -v t="$tck" -v n="$conns" \
        'BEGIN { printf "%s %s %s %d %.1f\n", s, v, m, n, (a - b) / t / n * 1e6 }' >> "$work/resume.md"
    done
  done
done

# Memory per idle TLS connection, 10,000 open.
ulimit -n 65536 2>/dev/null || true
held_rss() {
  local p=$1 port=$2 r0 r1
  r0=$(awk '/VmRSS/ {print $2}' "/proc/$p/status")
  : > "$work/hold"
  target/release/examples/hold_connections "127.0.0.1:$port" 10000 6 > "$work/hold" &
  local hp=$!
  while [ ! -s "$work/hold" ]; do sleep 0.3; done
  sleep 1
  r1=$(awk '/VmRSS/ {print $2}' "/proc/$p/status")
  wait "$hp"
  awk -v a="$r0" -v b="$r1" -v n="$(cut -d' ' -f1 "$work/hold")" 'BEGIN { printf "%d %.1f", n, (b - a) * 1024 / n / 1024 }'
}
rss_tlsperf=$(held_rss "$tlsperf_pid" 18445)
rss_nginx=$(held_rss "$nginx_pid" 18443)

median() { sort -n "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
range() { sort -n "$1" | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s–%s", lo, hi}'; }
echo "# serve benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $rounds rounds, servers alternating)"
echo
echo "| server | CPU µs per full TLS 1.3 handshake (h2load --h1 -n $n -c $n) | range | new conn/s (h2load) | keep-alive req/s (h2load -c 50) | range |"
echo "|---|---:|---|---:|---:|---|"
for s in nginx go tlsperf; do
  echo "| $s | $(median "$work/cpu-$s") | $(range "$work/cpu-$s") | $(median "$work/cps-$s") | $(median "$work/rps-$s") | $(range "$work/rps-$s") |"
done
t=$(median "$work/cpu-tlsperf"); ng=$(median "$work/cpu-nginx"); g=$(median "$work/cpu-go")
echo
echo "tlsperf ÷ nginx CPU per handshake: $(awk -v a="$t" -v b="$ng" 'BEGIN {printf "%.3f", a/b}'); tlsperf ÷ Go: $(awk -v a="$t" -v b="$g" 'BEGIN {printf "%.3f", a/b}')"
tr=$(median "$work/rps-tlsperf"); nr=$(median "$work/rps-nginx")
echo "tlsperf ÷ nginx keep-alive req/s: $(awk -v a="$tr" -v b="$nr" 'BEGIN {printf "%.3f", a/b}')"
echo
echo "## Resumption (openssl s_time -new vs -reuse, 3 s each; server CPU µs per connection)"
echo
echo "| server | version | full µs | resumed µs | resumed ÷ full | full conns | resumed conns |"
echo "|---|---|---:|---:|---:|---:|---:|"
for s in nginx tlsperf; do
  for v in tls1_3 tls1_2; do
    full=$(awk -v s="$s" -v v="$v" '$1==s && $2==v && $3=="new" {print $5}' "$work/resume.md")
    res=$(awk -v s="$s" -v v="$v" '$1==s && $2==v && $3=="reuse" {print $5}' "$work/resume.md")
    fn=$(awk -v s="$s" -v v="$v" '$1==s && $2==v && $3=="new" {print $4}' "$work/resume.md")
    rn=$(awk -v s="$s" -v v="$v" '$1==s && $2==v && $3=="reuse" {print $4}' "$work/resume.md")
    echo "| $s | $v | $full | $res | $(awk -v a="$res" -v b="$full" 'BEGIN {printf "%.2f", a/b}') | $fn | $rn |"
  done
done
echo
echo "## Resident memory per idle TLS connection (10,000 held open)"
echo
echo "| server | connections held | KiB per connection |"
echo "|---|---:|---:|"
echo "| tlsperf | ${rss_tlsperf% *} | ${rss_tlsperf#* } |"
echo "| nginx | ${rss_nginx% *} | ${rss_nginx#* } |"
