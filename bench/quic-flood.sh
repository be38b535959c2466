#!/usr/bin/env bash
# serve --quic under a flood of Initials from spoofed addresses (issue 59's "Hostile"
# target): do well-behaved clients keep their p99? Two servers, the same certificate
# (generated ECDSA P-256), each single-threaded: one with the default address validation
# (Retry once --quic-retry-above, 128, handshakes from unvalidated addresses are under
# way) and one with --quic-retry-above 10000000 (Retry never engages: every spoofed
# Initial costs a handshake). Per round and server: N sequential `handshake --http3`
# connections (full handshakes, --resume off) without a flood, then the same while
# examples/quic_flood.rs sends RATE Initials a second from ADDRESSES loopback addresses
# that never answer. Reported: the well-behaved connections' handshake (`tls`) and
# `total` p50/p99, the Retry packets the server sent, the server's CPU
# over the round (/proc/PID/task/*/schedstat) and the load average beside each figure.
#
# Usage: [ROUNDS=3] [N=300] [RATE=2000] [ADDRESSES=500] [PROFILE=release] bench/quic-flood.sh
# Prints a markdown report on stdout. Everything runs on 127.0.0.0/8; the flood is
# bounded (RATE × its duration datagrams) and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"
n="${N:-300}"
rate="${RATE:-2000}"
addresses="${ADDRESSES:-500}"
profile="${PROFILE:-release}"
if [ "$profile" = release ]; then
  cargo build --release --locked --quiet --bin tlsperf --example quic_flood
else
  cargo build --locked --quiet --bin tlsperf --example quic_flood
fi
bin="target/$profile/tlsperf"
flood="target/$profile/examples/quic_flood"
ulimit -n 4096
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_serve() { # name, extra args…; sets port_NAME, pid_NAME, metrics_NAME
  local name=$1; shift
  local port metrics
  port="$(free_port)"
  metrics="$(free_port)"
  "$bin" serve --listen "127.0.0.1:$port" --metrics "127.0.0.1:$metrics" --threads 1 --quic \
    --gen-cert ecdsa-p256 --write-ca "$work/ca-$name.pem" --duration 3h -q "$@" > /dev/null &
  pids+=("$!")
  printf -v "pid_$name" '%s' "$!"
  printf -v "port_$name" '%s' "$port"
  printf -v "metrics_$name" '%s' "$metrics"
}
start_serve auto
start_serve never --quic-retry-above 10000000
sleep 1

# utime + stime of the whole process, exited threads included (tokio's blocking pool
# comes and goes, and /proc/PID/task/*/schedstat would lose them), in ms.
tck="$(getconf CLK_TCK)"
cpu_ms() { awk -v t="$tck" '{print int(($14 + $15) * 1000 / t)}' /proc/"$1"/stat; }
load() { cut -d' ' -f1 /proc/loadavg; }
retries() { curl -s "http://127.0.0.1:$1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("quic_retry",{}).get("retries",0))'; }

# N full handshakes over HTTP/3; prints "tls_p50 tls_p99 total_p50 total_p99 failed" (ms).
clients() {
  local port=$1 name=$2
  "$bin" handshake --http3 "https://localhost:$port/" -n "$n" --resume off \
    --cacert "$work/ca-$name.pem" --timeout 5s --json 2> /dev/null | python3 -c "
import json, sys
w = json.load(sys.stdin)['warm']
ms = lambda p, q: w['phases'][p][q] / 1e6
print('%.2f %.2f %.2f %.2f %d' % (ms('tls', 'p50_ns'), ms('tls', 'p99_ns'), ms('total', 'p50_ns'), ms('total', 'p99_ns'), sum(w['errors'].values())))"
}

# Warm-up: the first handshakes pay for one-time set-up on both sides.
N_SAVED=$n; n=20; clients "$port_auto" auto > /dev/null; clients "$port_never" never > /dev/null; n=$N_SAVED

echo "# serve --quic under a flood of Initials from spoofed addresses"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- tlsperf: $bin ($("$bin" --version)), two servers: serve --threads 1 --quic (default: Retry above 128 unvalidated handshakes) and the same with --quic-retry-above 10000000"
echo "- clients: handshake --http3 -n $n --resume off (sequential full handshakes); flood: $rate Initials/s from $addresses addresses in 127.1.0.0/16, never answered"
echo
echo "| round | server | flood | tls p50 ms | tls p99 ms | total p50 ms | total p99 ms | failed | server CPU ms | Retry sent | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$rounds"); do
  for name in auto never; do
    port_var="port_$name"; pid_var="pid_$name"; metrics_var="metrics_$name"
    port="${!port_var}"; pid="${!pid_var}"; metrics="${!metrics_var}"
    for with in no yes; do
      before_cpu="$(cpu_ms "$pid")"
      before_retry="$(retries "$metrics")"
      if [ "$with" = yes ]; then
        # Long enough to cover the clients (they slow down under the flood).
        coproc FLOOD { exec "$flood" "127.0.0.1:$port" "$rate" 20 "$addresses"; }
        flood_pid=$FLOOD_PID
        read -r _ <&"${FLOOD[0]}"   # "sending": the Initials are made
        sleep 1
        read -r tp50 tp99 p50 p99 failed < <(clients "$port" "$name")
        kill "$flood_pid" 2>/dev/null || true
        wait "$flood_pid" 2>/dev/null || true
      else
        read -r tp50 tp99 p50 p99 failed < <(clients "$port" "$name")
      fi
      after_cpu="$(cpu_ms "$pid")"
      after_retry="$(retries "$metrics")"
      echo "| $r | $name | $with | $tp50 | $tp99 | $p50 | $p99 | $failed | $((after_cpu - before_cpu)) | $((after_retry - before_retry)) | $(load) |"
      # The flood's handshakes time out (10 s) before the next measurement.
      [ "$with" = yes ] && sleep 11
    done
  done
done
