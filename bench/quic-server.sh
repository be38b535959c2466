#!/usr/bin/env bash
# serve --quic against ngtcp2's example server (issue 59's "Fast" target): server CPU per
# full QUIC handshake, same certificate (the test PKI's ECDSA P-256 chain), same group
# (x25519), same client (ngtcp2's gtlsclient, one process per connection: a full
# handshake and one GET / of a 15-byte body), rounds alternating between the two servers
# in one run. Each server's CPU is the time its threads ran, summed over
# /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat's clock ticks are 10 ms, too
# coarse), across a round, divided by the connections that completed; both servers are
# single-threaded (serve --threads 1) and quiet (no per-packet logging: gtlsserver -q).
# The load average is printed with every round (the machine may be shared).
#
# Usage: [ROUNDS=6] [N=200] [BIN=path/to/tlsperf] bench/quic-server.sh (without BIN, a
# release build made here). Prints a markdown report on stdout. Needs gtlsclient and
# gtlsserver (Debian: ngtcp2-client, ngtcp2-server). Set-up shared with
# bench/quic-client.sh: bench/capacity-setup.sh, bench/quic-setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-6}"
n="${N:-200}"
source bench/capacity-setup.sh
source bench/quic-setup.sh
port_q="$(free_port)"
port_n="$(free_port)"
"$bin" serve --listen "127.0.0.1:$port_q" --threads 1 --quic --groups x25519 \
  --cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" --duration 3h -q > /dev/null &
pid_q=$!
pids+=("$pid_q")
"$ngtcp2_server" -q --groups=-GROUP-ALL:+GROUP-X25519 -d "$work/htdocs" 127.0.0.1 "$port_n" \
  "$work/pki/server.key" "$work/pki/server-chain.pem" > /dev/null 2>&1 &
pid_n=$!
pids+=("$pid_n")
sleep 1

# One round: N sequential connections to PORT; prints "ok cpu_µs".
round() {
  local port=$1 pid=$2 ok=0 before after
  before="$(cpu_ns "$pid")"
  for _ in $(seq "$n"); do
    if timeout 10 gtlsclient -q --exit-on-all-streams-close --groups=-GROUP-ALL:+GROUP-X25519 \
      127.0.0.1 "$port" "https://localhost:$port/" > /dev/null 2>&1; then
      ok=$((ok + 1))
    fi
  done
  after="$(cpu_ns "$pid")"
  echo "$ok $(( (after - before) / 1000 ))"
}

# Warm-up: the first handshakes pay for one-time set-up on both sides.
N_SAVED=$n; n=20; round "$port_q" "$pid_q" > /dev/null; round "$port_n" "$pid_n" > /dev/null; n=$N_SAVED

echo "# serve --quic against ngtcp2's example server: CPU per full handshake"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- tlsperf: $bin ($("$bin" --version)), serve --threads 1 --quic --groups x25519; ngtcp2: $(dpkg-query -W -f='${Version}' ngtcp2-server 2>/dev/null || echo '?') gtlsserver -q (GnuTLS)"
echo "- client: gtlsclient, one process per connection (full handshake + GET /), $n per round, rounds alternating"
echo
echo "| round | server | connections ok | server CPU µs | CPU µs / handshake | load avg after |"
echo "|---|---|---|---|---|---|"
q_vals=()
n_vals=()
for r in $(seq "$rounds"); do
  for who in quic ngtcp2; do
    if [ "$who" = quic ]; then read -r ok us < <(round "$port_q" "$pid_q"); else read -r ok us < <(round "$port_n" "$pid_n"); fi
    per=$(( ok > 0 ? us / ok : 0 ))
    if [ "$who" = quic ]; then q_vals+=("$per"); else n_vals+=("$per"); fi
    echo "| $r | $who | $ok/$n | $us | $per | $(cut -d' ' -f1-3 /proc/loadavg) |"
  done
done
mq="$(median "${q_vals[@]}")"
mn="$(median "${n_vals[@]}")"
echo
echo "Median CPU per full handshake: serve --quic $mq µs, ngtcp2 $mn µs; ratio serve/ngtcp2 $(awk -v a="$mq" -v b="$mn" 'BEGIN {printf "%.2f", a / b}')."
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
