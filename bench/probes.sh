#!/usr/bin/env bash
# What `tlsperf observe --probes` costs nginx: the nginx worker's CPU per full TLS 1.3
# handshake without the probes (A) and with them attached (B), rounds alternating
# A B A B …, and whether the probes saw every handshake.
#
# - nginx: one worker (on CPU 1 with worker_cpu_affinity when there are two or more
#   CPUs), TLS 1.2 and 1.3, a test PKI from `tlsperf pki init`, `return 200`, an access
#   log line per request with $ssl_protocol and $ssl_session_reused.
# - load per round: `tlsperf load --new-conn --resume off --tls 1.3 -n N -c 4 --threads 1
#   --cacert root.pem` (every request a new connection and a full TLS 1.3 handshake), on
#   CPU 0 with taskset when there are two or more CPUs.
# - B rounds: `tlsperf observe --probes --pid MASTER --json --out FILE` (on CPU 0 too, off
#   the worker's CPU) started before the load, once it says "probing"; stopped with
#   SIGINT after it.
# - per round: the worker's utime+stime from /proc/WORKER/stat (clock ticks, getconf
#   CLK_TCK) before and after the load, the handshakes nginx did (access-log lines
#   added); CPU µs per handshake = CPU seconds ÷ handshakes. B rounds: the probes'
#   counts.received and counts.lost beside nginx's count (they must be equal, lost 0).
# - F rounds, when bpftrace is installed: the floor. bpftrace attaches empty programs
#   to the same tracepoints and the same libssl entry and return points as the probes
#   (not SSL_free, whose probe sits 3 bytes in, an offset bpftrace 0.17 refuses): what
#   the kernel's uprobes and tracepoints cost before any of tlsperf's own BPF code runs.
#   Rounds then go A B F A B F …
# - P rounds, when BASE=path/to/another/tlsperf is given: B's rounds with that binary (an
#   earlier build: what a change to the probes costs, B ÷ P, in the same run). Rounds then
#   go A B P (F) A B P (F) …
# - PARTS=1: the cost of `--probe-parts` (issue 55). B runs `observe --probes --probe-parts`;
#   P, unless BASE is given, is the same binary without `--probe-parts` (B ÷ P: what the
#   parts add); and when bpftrace is installed, G rounds are F's floor plus empty uprobes
#   and uretprobes on every libcrypto function the parts probe (target.rs OPENSSL_PARTS):
#   (G − F) ÷ A is what the kernel's uprobes at those points cost nginx before any BPF
#   code runs. Rounds go A B P F G A B P F G …
# - FLOOR=0: no F (or G) rounds, even with bpftrace installed.
# - at the end: median CPU µs per handshake of A, B (and P, F), B ÷ A (target ≤ 1.05),
#   B ÷ P, F ÷ A.
# A warm-up load (200 requests, not counted) runs first. Loopback only; everything made
# goes in a temporary directory, removed on every exit.
#
# Exit status 1 when a B round lost records or its received count is not nginx's count.
#
# Usage: [BIN=path/to/tlsperf] [BASE=path/to/tlsperf] [PORT=P] bench/probes.sh [ROUNDS] [REQUESTS]
#        (default 6 3000; nginx's port P, default a free one)
# Needs nginx (built with OpenSSL as a shared library), python3, taskset; root (eBPF).
# BIN defaults to target/release/tlsperf (build it first: cargo build --release).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-6}"
n="${2:-3000}"
conns=4
bin="${BIN:-$PWD/target/release/tlsperf}"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$bin" ] || { echo "no tlsperf binary at $bin (cargo build --release, or set BIN)" >&2; exit 1; }
base="${BASE:-}"
parts="${PARTS:-0}"
b_flags=()
[ "$parts" = 1 ] && b_flags=(--probe-parts)
[ -z "$base" ] || [ -x "$base" ] || { echo "BASE=$base is not an executable" >&2; exit 1; }
[ -x "$nginx_bin" ] || { echo "missing nginx (apt-get install nginx-light)" >&2; exit 1; }
command -v python3 > /dev/null || { echo "missing python3" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root (the probes need eBPF)" >&2; exit 1; }

work="$(mktemp -d)"
nginx_master=""
observer=""
cleanup() {
  if [ -n "$observer" ]; then kill -INT "$observer" 2>/dev/null || true; fi
  if [ -n "$nginx_master" ]; then kill "$nginx_master" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ncpu=$(nproc)
gen=()
affinity=""
if [ "$ncpu" -ge 2 ] && command -v taskset > /dev/null; then
  gen=(taskset -c 0)
  affinity="worker_cpu_affinity 10;"
  pinning="nginx worker on CPU 1 (worker_cpu_affinity), load and observe on CPU 0 (taskset)"
else
  pinning="not pinned (fewer than 2 CPUs)"
fi

"$bin" pki init "$work/pki" --san localhost --san 127.0.0.1 -q
port=${PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; $affinity daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 16384; }
http {
  log_format hs '\$remote_addr:\$remote_port \$ssl_protocol \$ssl_session_reused \$status';
  access_log $work/nginx/access.log hs;
  server { listen 127.0.0.1:$port ssl backlog=4096;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    location / { return 200 "ok\n"; } } }
NGINX
chmod 755 "$work"
"$nginx_bin" -c "$work/nginx/nginx.conf" -p "$work/nginx" &
nginx_master=$!
worker=""
for _ in $(seq 50); do
  worker="$(pgrep -P "$nginx_master" | head -1 || true)"
  [ -n "$worker" ] && [ -s "$work/nginx/nginx.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  worker=""
  sleep 0.1
done
[ -n "$worker" ] || { echo "nginx did not start:" >&2; cat "$work/nginx/error.log" >&2 || true; exit 1; }
master_pid="$(cat "$work/nginx/nginx.pid")"
url="https://127.0.0.1:$port/"
log="$work/nginx/access.log"
tck=$(getconf CLK_TCK)

# The worker's utime + stime, in clock ticks (fields 14 and 15; the command name in
# parentheses may hold spaces, so count from the last ')').
cpu_ticks() { sed 's/.*) //' "/proc/$worker/stat" | awk '{print $12 + $13}'; }
log_lines() { wc -l < "$log"; }
load() {
  "${gen[@]}" "$bin" load "$url" --new-conn --resume off --tls 1.3 -n "$1" -c "$conns" --threads 1 \
    --cacert "$work/pki/root.pem" --json -q
}

echo "# What \`tlsperf observe --probes\` costs nginx"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $ncpu cores, $(uname -r); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- binary: $bin ($("$bin" --version)); $("$nginx_bin" -v 2>&1) with $(ldd "$nginx_bin" | awk '/libssl/ {print $1}'), one worker (pid $worker)"
echo "- load: tlsperf load --new-conn --resume off --tls 1.3 -n $n -c $conns --threads 1 --cacert root.pem (full TLS 1.3 handshakes); $pinning"
echo "- B: tlsperf observe --probes --pid $master_pid --json --out FILE, attached before the load, SIGINT after it"
[ "$parts" = 1 ] && echo "- PARTS=1: B with --probe-parts; G: F plus empty uprobes and uretprobes on libcrypto's parts functions"
if [ -n "$base" ]; then
  echo "- P: the same with BASE=$base ($("$base" --version))"
elif [ "$parts" = 1 ]; then
  echo "- P: the same binary without --probe-parts"
fi
echo "- worker CPU: utime+stime from /proc/$worker/stat, $tck ticks/s (one tick over $n handshakes = $(python3 -c "print('%.1f' % (1e6 / $tck / $n))") µs per handshake)"
echo

# Warm-up, not counted.
load 200 > /dev/null

echo "| round | probes | handshakes (nginx) | resumed / not TLS 1.3 | load failed | handshakes/s | worker CPU s | CPU µs/handshake | probes received | probes lost | probed work p50 µs |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
: > "$work/results"
bad=0
modes=(A B)
{ [ -n "$base" ] || [ "$parts" = 1 ]; } && modes+=(P)
if [ "${FLOOR:-1}" = 1 ] && command -v bpftrace > /dev/null; then
  modes+=(F)
  [ "$parts" = 1 ] && modes+=(G)
fi
for r in $(seq 1 "$rounds"); do
  mode=${modes[$(((r - 1) % ${#modes[@]}))]}
  probes_bin=$bin
  [ "$mode" = P ] && [ -n "$base" ] && probes_bin=$base
  flags=()
  [ "$mode" = B ] && flags=("${b_flags[@]}")
  if [ "$mode" = F ] || [ "$mode" = G ]; then
    libssl=$(awk '$6 ~ /libssl\.so/ {print $6; exit}' "/proc/$worker/maps")
    libcrypto=$(awk '$6 ~ /libcrypto\.so/ {print $6; exit}' "/proc/$worker/maps")
    {
      for t in sched:sched_process_fork sock:inet_sock_set_state raw_syscalls:sys_enter \
        raw_syscalls:sys_exit; do
        echo "tracepoint:$t {}"
      done
      for f in SSL_set_fd SSL_set_accept_state SSL_set_connect_state; do
        echo "uprobe:$libssl:$f {}"
      done
      for f in SSL_do_handshake SSL_accept SSL_connect SSL_read_early_data SSL_write_early_data; do
        echo "uprobe:$libssl:$f {}"
        echo "uretprobe:$libssl:$f {}"
      done
      if [ "$mode" = G ]; then
        for f in X509_verify_cert EVP_DigestSign EVP_PKEY_generate EVP_PKEY_derive \
          X509_load_cert_crl_file_ex X509_load_cert_file_ex X509_load_cert_crl_file X509_load_cert_file; do
          echo "uprobe:$libcrypto:$f {}"
          echo "uretprobe:$libcrypto:$f {}"
        done
      fi
    } > "$work/floor.bt"
    "${gen[@]}" bpftrace "$work/floor.bt" > "$work/bt.out" 2>&1 &
    observer=$!
    for _ in $(seq 300); do
      grep -q Attaching "$work/bt.out" && break
      kill -0 "$observer" 2>/dev/null || break
      sleep 0.1
    done
    grep -q Attaching "$work/bt.out" || { echo "bpftrace did not start:" >&2; cat "$work/bt.out" >&2; exit 1; }
    sleep 1
  fi
  if [ "$mode" = B ] || [ "$mode" = P ]; then
    rm -f "$work/obs.json"
    "${gen[@]}" "$probes_bin" observe --probes "${flags[@]}" --pid "$master_pid" --json --out "$work/obs.json" \
      > /dev/null 2> "$work/obs.err" &
    observer=$!
    for _ in $(seq 300); do
      grep -q probing "$work/obs.err" && break
      kill -0 "$observer" 2>/dev/null || break
      sleep 0.1
    done
    grep -q probing "$work/obs.err" || { echo "observe --probes did not start:" >&2; cat "$work/obs.err" >&2; exit 1; }
  fi
  lines0=$(log_lines)
  c0=$(cpu_ticks)
  load "$n" > "$work/load.json"
  c1=$(cpu_ticks)
  lines1=$(log_lines)
  received=-
  lost=-
  work_p50=-
  if [ "$mode" = F ] || [ "$mode" = G ]; then
    kill -INT "$observer"
    wait "$observer" || true
    observer=""
  fi
  if [ "$mode" = B ] || [ "$mode" = P ]; then
    kill -INT "$observer"
    wait "$observer" || true
    observer=""
    [ -s "$work/obs.json" ] || { echo "observe --probes wrote no result:" >&2; cat "$work/obs.err" >&2; exit 1; }
    read -r received lost work_p50 < <(python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["probes"]; c = p["counts"]; w = p["by_kind"].get("server all", {}).get("phases", {}).get("work", {}).get("quantiles", {}).get("p50_ns"); print(c["received"], c["lost"], "-" if w is None else round(w / 1000, 1))' "$work/obs.json")
  fi
  hs=$((lines1 - lines0))
  odd=$(tail -n "$hs" "$log" | awk '$2 != "TLSv1.3" || $3 != "." {k++} END {print k + 0}')
  read -r failed rate < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["requests"]["failed"], "%.0f" % d["handshakes"]["per_second"])' "$work/load.json")
  read -r cpu_s us < <(python3 -c 'import sys; t, tck, hs = map(int, sys.argv[1:]); print("%.2f" % (t / tck), "%.1f" % (t / tck * 1e6 / hs if hs else 0))' "$((c1 - c0))" "$tck" "$hs")
  echo "$mode $us $rate" >> "$work/results"
  if { [ "$mode" = B ] || [ "$mode" = P ]; } && { [ "$lost" != 0 ] || [ "$received" != "$hs" ]; }; then bad=1; fi
  case $mode in
    A) label="A (without)" ;;
    B) label="B (with)" ;;
    P) label="P (BASE)"; [ -n "$base" ] || label="P (without the parts)" ;;
    F) label="F (floor)" ;;
    *) label="G (floor + parts' points)" ;;
  esac
  echo "| $r | $label | $hs | $odd | $failed | $rate | $cpu_s | $us | $received | $lost | $work_p50 |"
done

echo
python3 - "$work/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(mode, i):
    v = [float(r[i]) for r in rows if r[0] == mode]
    return statistics.median(v) if v else None
a, b, p, f, g = (med(m, 1) for m in "ABPFG")
ra, rb, rp, rf, rg = (med(m, 2) for m in "ABPFG")
print("| | without probes (A) | with probes (B) | P | floor (F) | floor + parts' points (G) | B ÷ A | B ÷ P | F ÷ A | (B − P) ÷ A | (G − F) ÷ A |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
div = lambda x, y: f"{x / y:.3f}" if x and y else "-"
sub = lambda x, y, z: f"{(x - y) / z:+.3f}" if x and y and z else "-"
fmt = lambda x, f: "-" if x is None else f.format(x)
print(f"| median worker CPU µs per handshake | {fmt(a, '{:.1f}')} | {fmt(b, '{:.1f}')} | {fmt(p, '{:.1f}')} | {fmt(f, '{:.1f}')} | {fmt(g, '{:.1f}')} | {div(b, a)} (target ≤ 1.05) | {div(b, p)} | {div(f, a)} | {sub(b, p, a)} | {sub(g, f, a)} |")
print(f"| median handshakes/s | {fmt(ra, '{:,.0f}')} | {fmt(rb, '{:,.0f}')} | {fmt(rp, '{:,.0f}')} | {fmt(rf, '{:,.0f}')} | {fmt(rg, '{:,.0f}')} | {div(rb, ra)} | {div(rb, rp)} | {div(rf, ra)} | | |")
PY
echo
if [ "$bad" = 0 ]; then
  echo "probes: every B round received exactly nginx's handshakes, none lost"
else
  echo "probes: a B round lost records or received a count other than nginx's (see the table)"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$bad"
