#!/usr/bin/env bash
# serve --quic against ngtcp2's example server (issue 59's "Fast" target): server CPU per
# QUIC handshake, same certificate (the test PKI's ECDSA P-256 chain), same group
# (x25519), same client (ngtcp2's gtlsclient, one process per connection: a handshake
# and one GET / of a 15-byte body), rounds alternating between the servers in one run,
# each round starting with the next server. Each server's CPU is the time its threads
# ran, summed over /proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat's clock ticks
# are 10 ms, too coarse), across a round, divided by the connections that completed;
# every server is single-threaded (serve --threads 1) and quiet (no per-packet logging:
# gtlsserver -q). The servers run on the last CPU and the clients on CPU 0
# (bench/capacity-setup.sh; PIN=0 leaves them be; NICE=-10 runs both at that nice
# level). The load average is printed with every round (the machine may be shared); the
# ratio to ngtcp2's server is taken per round, within minutes of each other.
#
# MODE (default full):
# - full: every connection a full handshake.
# - resumed: every connection resumes the session of the one before it to the same
#   server (gtlsclient --session-file, --tp-file, --disable-early-data; tickets are
#   single-use with serve's default stateful resumption, so each connection uses the
#   ticket the previous one received). A first full connection per server, before the
#   rounds, starts the chain.
# - 0rtt: as resumed, with the request sent in 0-RTT (serve --early-data 16384; ngtcp2's
#   server accepts early data by default).
# serve's own count of its handshakes by kind (its /stats) is printed at the end, so a
# chain that broke (a full handshake where a resumed one was meant) shows.
#
# Other servers in the same rotation, for same-run comparisons:
# - BASE=path/to/another/tlsperf: its serve --quic, with the same flags ("quic-base").
# - FLOOR=path/to/quic_server_floor (examples/quic_server_floor.rs, a bare quinn + h3
#   server; `cargo build --release --example quic_server_floor`), once per
#   ';'-separated set of its knobs in FLOOR_VARIANTS (default: one, with none).
#
# Usage: [ROUNDS=6] [N=200] [MODE=full] [BIN=path/to/tlsperf] [BASE=…] [FLOOR=…
# [FLOOR_VARIANTS='…;…']] bench/quic-server.sh (without BIN, a release build made
# here). Prints a markdown report on stdout. Needs gtlsclient and gtlsserver (Debian:
# ngtcp2-client, ngtcp2-server). Set-up shared with bench/quic-client.sh:
# bench/capacity-setup.sh, bench/quic-setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-6}"
n="${N:-200}"
mode="${MODE:-full}"
case "$mode" in
  full | resumed | 0rtt) ;;
  *) echo "MODE must be full, resumed or 0rtt, not $mode" >&2; exit 2 ;;
esac
source bench/capacity-setup.sh
source bench/quic-setup.sh
free_tcp_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

early=()
if [ "$mode" = 0rtt ]; then early=(--early-data 16384); fi
names=()
declare -A port_of pid_of
# serve --quic of tlsperf binary BIN as NAME, its metrics on a port of their own.
start_serve() {
  local name=$1 exe=$2 port mport
  port="$(free_port)"
  mport="$(free_tcp_port)"
  "${srv[@]}" "$exe" serve --listen "127.0.0.1:$port" --threads 1 --quic --groups x25519 "${early[@]}" \
    --cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" --duration 3h \
    --metrics "127.0.0.1:$mport" -q > /dev/null &
  pid_of[$name]=$!
  pids+=($!)
  port_of[$name]=$port
  port_of[$name-metrics]=$mport
  names+=("$name")
}
start_serve quic "$bin"
if [ -n "${BASE:-}" ]; then start_serve quic-base "$BASE"; fi
port="$(free_port)"
"${srv[@]}" "$ngtcp2_server" -q --groups=-GROUP-ALL:+GROUP-X25519 -d "$work/htdocs" 127.0.0.1 "$port" \
  "$work/pki/server.key" "$work/pki/server-chain.pem" > /dev/null 2>&1 &
pid_of[ngtcp2]=$!
pids+=($!)
port_of[ngtcp2]=$port
names+=(ngtcp2)
declare -A knobs_of
if [ -n "${FLOOR:-}" ]; then
  IFS=';' read -r -a variants <<< "${FLOOR_VARIANTS:-}"
  [ "${#variants[@]}" -gt 0 ] || variants=("")
  i=0
  for v in "${variants[@]}"; do
    i=$((i + 1))
    name="floor$i"
    port="$(free_port)"
    # shellcheck disable=SC2086 # the knobs are words
    "${srv[@]}" "$FLOOR" "127.0.0.1:$port" "$work/pki/server-chain.pem" "$work/pki/server.key" $v &
    pid_of[$name]=$!
    pids+=($!)
    port_of[$name]=$port
    knobs_of[$name]="${v:-(quinn's and h3's defaults)}"
    names+=("$name")
  done
fi
sleep 1

client_args=(-q --exit-on-all-streams-close --groups=-GROUP-ALL:+GROUP-X25519)
case "$mode" in
  resumed) resume_args=(--disable-early-data) ;;
  *) resume_args=() ;;
esac
# One connection to NAME's port; in the resumed modes with NAME's session and transport
# parameters (written back by the client: the next connection resumes this one's).
connect() {
  local name=$1 port=${port_of[$1]} extra=()
  if [ "$mode" != full ]; then
    extra=(--session-file "$work/$name.session" --tp-file "$work/$name.tp" "${resume_args[@]}")
  fi
  "${gen[@]}" timeout 10 gtlsclient "${client_args[@]}" "${extra[@]}" \
    127.0.0.1 "$port" "https://localhost:$port/" > /dev/null 2>&1
}
# One round: N sequential connections to NAME; prints "ok cpu_µs".
round() {
  local name=$1 ok=0 before after
  before="$(cpu_ns "${pid_of[$name]}")"
  for _ in $(seq "$n"); do
    if connect "$name"; then ok=$((ok + 1)); fi
  done
  after="$(cpu_ns "${pid_of[$name]}")"
  echo "$ok $(( (after - before) / 1000 ))"
}

# Warm-up: the first handshakes pay for one-time set-up on every side. In the resumed
# modes, the session files start here: in resumed mode a full handshake first, from a
# client with early data off as the rest.
N_SAVED=$n; n=20
for name in "${names[@]}"; do round "$name" > /dev/null; done
n=$N_SAVED

echo "# serve --quic against ngtcp2's example server: CPU per $mode handshake"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- quic: $bin ($("$bin" --version)), serve --threads 1 --quic --groups x25519 ${early[*]}"
if [ -n "${BASE:-}" ]; then echo "- quic-base: $BASE ($("$BASE" --version)), the same flags"; fi
echo "- ngtcp2: $(dpkg-query -W -f='${Version}' ngtcp2-server 2>/dev/null || echo '?') gtlsserver -q (GnuTLS)"
for name in "${names[@]}"; do
  if [ -n "${knobs_of[$name]:-}" ]; then echo "- $name: $FLOOR ${knobs_of[$name]}"; fi
done
echo "- client: gtlsclient, one process per connection ($mode handshake + GET /), $n per round, rounds alternating; $pinning"
echo
echo "| round | server | connections ok | server CPU µs | CPU µs / handshake | ÷ ngtcp2 same round | load avg after |"
echo "|---|---|---|---|---|---|---|"
declare -A vals ratios
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
for r in $(seq "$rounds"); do
  declare -A per=() line=()
  # Each round starts with the next server: none always follows the same one.
  k=${#names[@]}
  order=()
  for i in $(seq 0 $((k - 1))); do order+=("${names[$(( (i + r - 1) % k ))]}"); done
  for name in "${order[@]}"; do
    read -r ok us < <(round "$name")
    per[$name]=$(( ok > 0 ? us / ok : 0 ))
    line[$name]="| $r | $name | $ok/$n | $us | ${per[$name]}"
    line[$name-load]="$(cut -d' ' -f1-3 /proc/loadavg)"
  done
  for name in "${names[@]}"; do
    q="$(ratio "${per[$name]}" "${per[ngtcp2]}")"
    vals[$name]="${vals[$name]:-} ${per[$name]}"
    ratios[$name]="${ratios[$name]:-} $q"
    echo "${line[$name]} | $q | ${line[$name-load]} |"
  done
done
echo
echo "| server | median CPU µs / $mode handshake | median ÷ ngtcp2's median | per-round ratios: median (range) |"
echo "|---|---|---|---|"
# shellcheck disable=SC2086 # the values are words
mn="$(median ${vals[ngtcp2]})"
for name in "${names[@]}"; do
  # shellcheck disable=SC2086
  m="$(median ${vals[$name]})"
  # shellcheck disable=SC2086 # the values are words
  rs="$(printf '%s\n' ${ratios[$name]} | sort -n)"
  # shellcheck disable=SC2086
  echo "| $name | $m | $(ratio "$m" "$mn") | $(median ${ratios[$name]}) ($(echo "$rs" | head -1)–$(echo "$rs" | tail -1)) |"
done
echo
for name in quic quic-base; do
  if [ -z "${port_of[$name-metrics]:-}" ]; then continue; fi
  kinds="$(python3 - "${port_of[$name-metrics]}" <<'EOF'
import json, sys, urllib.request
d = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/stats", timeout=10))
q = d.get("quic_handshakes") or {}
print(", ".join(f"{k} {v['count']}" for k, v in sorted(q.items()) if k != "all") or "none")
EOF
)"
  echo "$name counted its QUIC handshakes (warm-up included): $kinds."
done
if [ "$mode" != full ]; then
  # One more connection per server, its client verbose: the CRYPTO bytes of the server's
  # Handshake flight (a full handshake's carry the certificate chain, ~1,240 bytes with
  # this PKI; a resumed one's ~190) and whether 0-RTT packets went out.
  for name in "${names[@]}"; do
    port=${port_of[$name]}
    extra=(--session-file "$work/$name.session" --tp-file "$work/$name.tp" "${resume_args[@]}")
    log="$(timeout 10 gtlsclient --exit-on-all-streams-close --groups=-GROUP-ALL:+GROUP-X25519 \
      "${extra[@]}" 127.0.0.1 "$port" "https://localhost:$port/" 2>&1 || true)"
    flight="$(echo "$log" | grep ' frm rx .* Handshake CRYPTO' | sed 's/.* len=//' | awk '{s += $1} END {print s + 0}')"
    zero="$(echo "$log" | grep -c ' pkt tx .*type=0RTT' || true)"
    echo "$name, one more connection: the server's Handshake CRYPTO bytes $flight; 0-RTT packets sent $zero."
  done
fi
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
