#!/usr/bin/env bash
# How far `tlsperf serve` is from the floor of a TLS connection, and what resumption and the
# load generator cost, all in ONE run with the servers alternating round by round (issue 20).
# What each row measures, and how: examples/floor_bench/main.rs, which does the measuring
# (this script builds, starts the servers, calls it and stops them on every exit path);
# how to read the report: docs/benchmarks.md.
#
# Servers: nginx (one worker: plain HTTP, full-only TLS 1.3, and TLS 1.2 + 1.3 with a session
# cache and with tickets, each TLS server logging $ssl_session_reused), one bare epoll server
# per recorded flight shape (examples/flight_floor), `tlsperf serve --threads 1` with
# --resumption off, stateful and tickets, and BASE's serve when given. With two CPUs or more,
# every server runs on CPU 1 and every client on CPU 0 (taskset), as h2load and serve end up
# anyway (h2load keeps its CPU busy); FLOOR_PIN=0 leaves placement to the scheduler.
#
# Needs nginx (nginx-light), h2load (nghttp2-client) and curl. Usage:
#   [BASE=path/to/other/tlsperf] bench/floor.sh [ROUNDS=3] [N=3000] [K=4]
# (K: keep-alive seconds per server and round; until 2026-12-01 it was a request count.)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
n="${2:-3000}"
k="${3:-4}"
case "$rounds" in
  [1-9] | [1-9][0-9]) ;;
  *) echo "ROUNDS=$rounds: the first argument is the number of rounds, 1 to 99" >&2; exit 2 ;;
esac
# h2load runs N/4 connections per slice, 50 at once.
if ! [[ "$n" =~ ^[1-9][0-9]{2,6}$ ]] || [ "$n" -lt 200 ]; then
  echo "N=$n: the second argument is the connections per run, 200 to 9999999" >&2; exit 2
fi
case "$k" in
  [1-9] | [1-9][0-9]) ;;
  *) echo "K=$k: the third argument is the keep-alive seconds per server and round, 1 to 99 (it was a request count before 2026-12-01)" >&2; exit 2 ;;
esac
for t in nginx h2load curl; do
  command -v "$t" >/dev/null || { echo "missing $t (apt-get install nginx-light nghttp2-client curl)" >&2; exit 1; }
done
cargo build --release --locked --quiet --bin tlsperf --example hold_connections --example flight_floor --example floor_bench
srv=(); pin=()
if [ "${FLOOR_PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then srv=(taskset -c 1); pin=(--pin); fi
bin="$PWD/target/release/tlsperf"
base="${BASE:-}"
if [ -n "$base" ] && [ ! -x "$base" ]; then echo "BASE=$base is not an executable" >&2; exit 2; fi
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$bin" pki init "$work/pki" --key-type ecdsa-p256 -q
ulimit -n 65536 2>/dev/null || true

# nginx, one worker: plain HTTP on 19480, full-only TLS 1.3 on 19481; for the resumption
# reference, TLS 1.2 and 1.3 with a session cache (TLS 1.2 session ids, TLS 1.3 stateful
# tickets) on 19478 and with tickets (no cache) on 19479, each logging $ssl_session_reused.
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 16384; }
http {
  access_log off; keepalive_requests 1000000;
  log_format reused '\$ssl_session_reused';
  ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
  ssl_ecdh_curve X25519;
  server { listen 127.0.0.1:19480;
    location / { return 200 '{"status":"ok"}'; } }
  server { listen 127.0.0.1:19481 ssl;
    ssl_protocols TLSv1.3;
    ssl_session_tickets off; ssl_session_cache off;
    access_log $work/nginx/reused.log reused;
    location / { return 200 '{"status":"ok"}'; } }
  server { listen 127.0.0.1:19478 ssl;
    ssl_protocols TLSv1.2 TLSv1.3; ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256;
    ssl_session_tickets off; ssl_session_cache shared:ids:32m;
    access_log $work/nginx/ids.log reused;
    location / { return 200 '{"status":"ok"}'; } }
  server { listen 127.0.0.1:19479 ssl;
    ssl_protocols TLSv1.2 TLSv1.3; ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256;
    ssl_session_tickets on; ssl_session_cache off;
    access_log $work/nginx/tickets.log reused;
    location / { return 200 '{"status":"ok"}'; } } }
NGINX
"${srv[@]}" nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_master=$!
pids+=("$nginx_master")

# The bare servers that replay recorded flights (examples/flight_floor), one per shape.
ff=target/release/examples/flight_floor
shapes=(plain tls1.3-full tls1.3-resumed tls1.2-full tls1.2-resumed)
peers=()
p=19486
for sh in "${shapes[@]}"; do
  "$ff" record "$work/$sh.fl" "$sh" > "$work/$sh.sizes"
  "${srv[@]}" "$ff" server "127.0.0.1:$p" "$work/$sh.fl" 3600 &
  pids+=($!); peers+=(--peer "flight-$sh=$!:$p")
  p=$((p + 1))
done

tls=(--cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" --threads 1 -q)
serve() { # name binary port resumption
  "${srv[@]}" "$2" serve --listen "127.0.0.1:$3" --metrics "127.0.0.1:$(($3 + 10))" --resumption "$4" --groups x25519 "${tls[@]}" > /dev/null &
  pids+=($!); peers+=(--peer "$1=$!:$3:$(($3 + 10))")
}
serve serve "$bin" 19482 off
serve stateful "$bin" 19483 stateful
serve tickets "$bin" 19484 tickets
if [ -n "$base" ]; then serve base "$base" 19485 off; fi
for _ in $(seq 50); do
  ok=1
  for p in 19478 19479 19480 19481 19482 19483 19484 ${base:+19485} 19486 19487 19488 19489 19490; do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || ok=0; done
  [ "$ok" = 1 ] && break
  sleep 0.2
done
[ "$ok" = 1 ] || { echo "a server did not start" >&2; exit 1; }
nginx_pid=$(pgrep -P "$nginx_master" | head -1)
for x in plain=19480 full=19481 ids=19478 tickets=19479; do peers+=(--peer "nginx-${x%=*}=$nginx_pid:${x#*=}"); done

target/release/examples/floor_bench --work "$work" --bin "$bin" ${base:+--base "$base"} \
  --rounds "$rounds" -n "$n" -k "$k" "${pin[@]}" --nginx-master "$nginx_master" "${peers[@]}"
