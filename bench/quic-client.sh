#!/usr/bin/env bash
# load --http3 against ngtcp2's example client (issue 59's "Fast" target for the
# generator; Debian's h2load has no HTTP/3): the client side's CPU per full QUIC
# handshake, both clients making the same handshakes against the same server
# (`serve --quic --threads 1`, the test PKI's ECDSA P-256 chain, x25519), rounds
# alternating in one run.
#
# - tlsperf: one process per round, `load --http3 -n N -c 1 --threads 1 --new-conn
#   --resume off --groups x25519 --cacert root.pem`: each request a new QUIC connection
#   from a UDP socket of its own, a full handshake and one `GET /` (15-byte body); the
#   chain verified in full once, then accepted from the verdict cache (the handshake
#   signature checked every time).
# - ngtcp2: `gtlsclient --groups x25519`, one process per connection (it makes one
#   connection per run), the same handshake and `GET /`; it does not verify the chain
#   (GnuTLS checks the handshake signature).
#
# - tlsperf over TCP, a second anchor: the same `load` without --http3 against the same
#   server's TCP listener (TLS 1.3, a full handshake and one `GET /` per connection).
#
# Each side's CPU is its processes' user + system time (getrusage of the waited-for
# children, µs) over the round, divided by the handshakes that completed: tlsperf's
# includes its start once per round, gtlsclient's its start on every connection — what a
# generator made of it costs. tlsperf's own figure for the run alone
# (`generator.cpu_us_per_handshake`) is shown beside it, and gtlsclient's start alone is
# measured in each round: 20 processes against a port where nothing answers (its start,
# one Initial, a 20 ms handshake timeout, its exit). As root with bpftrace, gtlsclient's
# CPU within its connection is measured too (its thread's run time, the scheduler's
# sum_exec_runtime, from its first send to its last send or receive: no start, no exit):
# the figure to hold against tlsperf's in-run CPU per handshake. The server runs on the last CPU and
# the clients on CPU 0 (bench/capacity-setup.sh; PIN=0 leaves them be). The load average
# is printed with every round (the machine may be shared).
#
# Usage: [ROUNDS=6] [N=200] [BIN=path/to/tlsperf] bench/quic-client.sh (without BIN, a
# release build made here). Prints a markdown report on stdout. Needs gtlsclient and
# gtlsserver (Debian: ngtcp2-client, ngtcp2-server). Set-up shared with
# bench/quic-server.sh: bench/capacity-setup.sh, bench/quic-setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-6}"
n="${N:-200}"
source bench/capacity-setup.sh
source bench/quic-setup.sh
port="$(free_port)"
"${srv[@]}" "$bin" serve --listen "127.0.0.1:$port" --threads 1 --quic --groups x25519 \
  --cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" --duration 3h -q > /dev/null &
pids+=($!)
sleep 1
url="https://localhost:$port/"
# Nothing listens here: gtlsclient's start alone.
closed="$(free_port)"
# gtlsclient's CPU within its connection (root and bpftrace): per process, the run time
# of its thread (single-threaded) at its first send and at its last send or receive;
# their difference summed (ns) and the processes counted, printed every 200 ms.
inconn_bt='
tracepoint:syscalls:sys_enter_sendmsg,tracepoint:syscalls:sys_enter_sendto,tracepoint:syscalls:sys_enter_sendmmsg
/comm == "gtlsclient" && @t0[pid] == 0/ { @t0[pid] = curtask->se.sum_exec_runtime; }
tracepoint:syscalls:sys_exit_sendmsg,tracepoint:syscalls:sys_exit_sendto,tracepoint:syscalls:sys_exit_sendmmsg,
tracepoint:syscalls:sys_exit_recvmsg,tracepoint:syscalls:sys_exit_recvfrom,tracepoint:syscalls:sys_exit_recvmmsg
/comm == "gtlsclient" && @t0[pid] != 0/ { @last[pid] = curtask->se.sum_exec_runtime; }
tracepoint:sched:sched_process_exit
/comm == "gtlsclient" && @t0[pid] != 0/ { @inconn = sum(@last[pid] - @t0[pid]); @n = count(); delete(@t0[pid]); delete(@last[pid]); }
interval:ms:200 { print(@inconn); print(@n); }
'
have_bt=0
if [ "$(id -u)" = 0 ] && command -v bpftrace > /dev/null; then
  mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2> /dev/null || true
  have_bt=1
fi

# Runs COMMAND… REPEAT times one after the other; prints "ok cpu_µs": how many exited 0,
# and the user + system CPU of all of them.
children_cpu='
import resource, subprocess, sys
repeat, cmd = int(sys.argv[1]), sys.argv[2:]
ok = sum(
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    for _ in range(repeat)
)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(ok, round((r.ru_utime + r.ru_stime) * 1e6))
'
field() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# One round of N handshakes; prints "handshakes cpu_µs in-run-or-start_µs": tlsperf's
# in-run CPU per handshake, or gtlsclient's start alone (per process).
round() {
  local ok us http3=()
  case "$1" in
    tlsperf | tcp)
      [ "$1" = tlsperf ] && http3=(--http3)
      read -r ok us < <("${gen[@]}" python3 -c "$children_cpu" 1 "$bin" load "${http3[@]}" "$url" \
        -n "$n" -c 1 --threads 1 --new-conn --resume off --groups x25519 \
        --cacert "$work/pki/root.pem" -q --out "$work/r.json" --force)
      [ "$ok" = 1 ] || { echo "tlsperf load failed" >&2; exit 1; }
      echo "$(field "$work/r.json" 'd["handshakes"]["total"]') $us $(field "$work/r.json" 'round(d["generator"]["cpu_us_per_handshake"])')"
      ;;
    ngtcp2)
      local bt="" inconn="-"
      if [ "$have_bt" = 1 ]; then
        bpftrace -e "$inconn_bt" > "$work/bt.out" 2>&1 &
        bt=$!
        for _ in $(seq 300); do grep -q '^Attaching' "$work/bt.out" && break; sleep 0.1; done
        sleep 0.5
      fi
      read -r ok us < <("${gen[@]}" python3 -c "$children_cpu" "$n" timeout 10 gtlsclient -q \
        --exit-on-all-streams-close --groups=-GROUP-ALL:+GROUP-X25519 127.0.0.1 "$port" "$url")
      read -r _ start < <("${gen[@]}" python3 -c "$children_cpu" 20 timeout 10 gtlsclient -q \
        --exit-on-all-streams-close --handshake-timeout=20ms --groups=-GROUP-ALL:+GROUP-X25519 \
        127.0.0.1 "$closed" "https://localhost:$closed/")
      if [ -n "$bt" ]; then
        # Its sums are printed every 200 ms: the last print after the last exit is read
        # (bpftrace does not always end on SIGINT here, so it is killed).
        sleep 0.5
        kill -KILL "$bt"
        wait "$bt" 2> /dev/null || true
        inconn="$(awk '/^@inconn:/ {s = $2} /^@n:/ {k = $2} END {if (k > 0) printf "%d", s / k / 1000; else print "-"}' "$work/bt.out")"
      fi
      echo "$ok $us $((start / 20)) $inconn"
      ;;
  esac
}

# Warm-up: the first handshakes pay for one-time set-up on both sides.
N_SAVED=$n; n=20; round tlsperf > /dev/null; round tcp > /dev/null; round ngtcp2 > /dev/null; n=$N_SAVED

echo "# load --http3 against ngtcp2's example client: client CPU per full handshake"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg); $pinning"
echo "- tlsperf: $bin ($("$bin" --version)), load [--http3] --new-conn --resume off -c 1 --threads 1 (QUIC, and TCP as a second anchor); ngtcp2: $(dpkg-query -W -f='${Version}' ngtcp2-client 2>/dev/null || echo '?') gtlsclient (GnuTLS), one process per connection"
echo "- server: serve --quic --threads 1 --groups x25519; $n handshakes per round, rounds alternating"
echo
echo "| round | client | handshakes | client CPU µs | CPU µs / handshake | tlsperf's in-run µs / handshake, or gtlsclient's start alone µs | gtlsclient within its connection µs | load avg after |"
echo "|---|---|---|---|---|---|---|---|"
t_vals=()
g_vals=()
ratios=()
inrun_q=()
inrun_t=()
starts=()
inconns=()
inratios=()
for r in $(seq "$rounds"); do
  for who in tlsperf tcp ngtcp2; do
    read -r ok us extra inconn < <(round "$who")
    inconn="${inconn:--}"
    per=$(( ok > 0 ? us / ok : 0 ))
    case "$who" in
      tlsperf) t_vals+=("$per"); inrun_q+=("$extra") ;;
      tcp) inrun_t+=("$extra") ;;
      ngtcp2) g_vals+=("$per"); starts+=("$extra"); [ "$inconn" != - ] && inconns+=("$inconn") ;;
    esac
    label=$who; [ "$who" = tlsperf ] && label="tlsperf --http3"; [ "$who" = tcp ] && label="tlsperf (TCP)"
    [ "$who" = ngtcp2 ] || inconn=""
    echo "| $r | $label | $ok/$n | $us | $per | $extra | $inconn | $(cut -d' ' -f1-3 /proc/loadavg) |"
  done
  ratios+=("$(awk -v a="${t_vals[-1]}" -v b="${g_vals[-1]}" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
  if [ "${#inconns[@]}" -eq "$r" ]; then
    inratios+=("$(awk -v a="${inrun_q[-1]}" -v b="${inconns[-1]}" 'BEGIN {printf "%.3f", (b > 0 ? a / b : 0)}')")
  fi
done
mt="$(median "${t_vals[@]}")"
mg="$(median "${g_vals[@]}")"
echo
echo "Median client CPU per full handshake: tlsperf load --http3 $mt µs, ngtcp2's gtlsclient $mg µs (ratio of the medians $(awk -v a="$mt" -v b="$mg" 'BEGIN {printf "%.2f", a / b}'))."
echo "Per-round ratios tlsperf/ngtcp2: ${ratios[*]}; median ratio **$(median "${ratios[@]}")**."
echo "gtlsclient's start alone (median): $(median "${starts[@]}") µs per process. tlsperf's in-run CPU per handshake (median): QUIC $(median "${inrun_q[@]}") µs, TCP $(median "${inrun_t[@]}") µs (QUIC/TCP $(awk -v a="$(median "${inrun_q[@]}")" -v b="$(median "${inrun_t[@]}")" 'BEGIN {printf "%.2f", a / b}'))."
if [ "${#inratios[@]}" -gt 0 ]; then
  echo "Within the connection (no process start or exit): gtlsclient $(median "${inconns[@]}") µs (median), tlsperf's in-run $(median "${inrun_q[@]}") µs; per-round ratios tlsperf/gtlsclient: ${inratios[*]}; median ratio **$(median "${inratios[@]}")**."
else
  echo "gtlsclient within its connection: not measured (needs root and bpftrace)."
fi
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
