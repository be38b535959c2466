#!/usr/bin/env bash
# `tlsperf serve` against nginx (1 worker) and a Go net/http TLS server, same certificate
# (ECDSA P-256), same client, one run, servers alternating round by round:
#   - server CPU per full TLS 1.3 handshake: utime+stime from /proc/PID/stat around
#     `h2load --h1 -n N -c N -t 1` (one connection per request);
#   - new connections per second (h2load's own figure; its client is the bottleneck);
#   - keep-alive requests per second: `h2load --h1 -n 200000 -c 50 -t 1`.
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
cargo build --release --locked --quiet --bin tlsperf
bin="$PWD/target/release/tlsperf"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
"$bin" pki init "$work/pki" --key ecdsa-p256 -q

# nginx, one worker.
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 8192; }
http { access_log off;
  server { listen 127.0.0.1:18443 ssl http2;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    ssl_session_cache shared:SSL:10m; ssl_session_tickets on; keepalive_requests 1000000;
    location / { return 200 '{"status":"ok"}'; } } }
NGINX
nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)

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
nginx_pid=$(pgrep -f "nginx: worker process" | head -1)
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
