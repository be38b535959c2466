#!/usr/bin/env bash
# tlsperf capacity (issue 21): how much does session resumption move the capacity of
# nginx (one worker) at an objective? Two searches against the same nginx (session
# cache and tickets on), a new connection per request: the client never resuming
# (`--resume off`: every handshake full) and resuming by ticket (`--resume tickets`),
# in alternating order over ROUNDS pairs; then `tlsperf compare` of each pair (the change
# on what each side's steps show, with its range over the two 90% intervals). To set beside the
# lab's resumption group (`tlsperf lab --only resumption`: handshakes/s of a closed
# loop, tickets against off).
#
# nginx runs on the last CPU and the generator on the first (taskset) when there are two
# or more. WAIT_LOAD=X first waits (at most 15 minutes) for the 1-minute load average to
# fall below X.
#
# Usage: [SLO=p99=30ms] [BIN=path/to/tlsperf] [KEY=rsa-2048] [ROUNDS=1] [WAIT_LOAD=1.5] [NICE=-10]
#        [EXTRA="--max-time 1m"] bench/capacity-resumption.sh
# (EXTRA: more `capacity` options, word-split.)
# Needs nginx. BIN defaults to a release build (built here). Prints markdown on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
slo="${SLO:-p99=30ms}"
key="${KEY:-rsa-2048}"
rounds="${ROUNDS:-1}"
command -v nginx > /dev/null || { echo "missing nginx (apt-get install nginx-light)" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked --quiet --bin tlsperf
  BIN="$PWD/target/release/tlsperf"
fi
bin="$BIN"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
srv=()
gen=()
if [ -n "${NICE:-}" ]; then
  # A higher scheduling priority for server and generator than other processes (e.g.
  # NICE=-10, as root): on a machine shared with builds, their CPU time then hardly
  # depends on the builds'. Recorded in the report.
  srv=(nice -n "$NICE")
  gen=(nice -n "$NICE")
fi
ncpu=$(nproc)
if [ "$ncpu" -ge 2 ] && command -v taskset > /dev/null; then
  srv+=(taskset -c "$((ncpu - 1))")
  gen+=(taskset -c 0)
  pinning="nginx on CPU $((ncpu - 1)), generator on CPU 0 (taskset)"
else
  pinning="not pinned"
fi
[ -n "${NICE:-}" ] && pinning="$pinning; both at nice $NICE"
"$bin" pki init "$work/pki" --key "$key" -q
port=18472
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 16384; }
http { access_log off;
  server { listen 127.0.0.1:$port ssl backlog=4096;
    ssl_protocols TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    ssl_session_cache shared:SSL:10m; ssl_session_tickets on;
    location / { return 200 '{"status":"ok"}'; } } }
NGINX
chmod 755 "$work"
"${srv[@]}" nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" &
pids+=($!)
worker=""
for _ in $(seq 50); do
  worker="$(pgrep -P "${pids[0]}" | head -1 || true)"
  [ -n "$worker" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
[ -n "$worker" ] || { echo "no nginx worker process" >&2; exit 1; }
url="https://localhost:$port/"
if [ -n "${WAIT_LOAD:-}" ]; then
  for _ in $(seq 180); do
    python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) < float('$WAIT_LOAD') else 1)" && break
    sleep 5
  done
fi

echo "# tlsperf capacity: session resumption on vs off against nginx (one worker)"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- binary: $bin ($("$bin" --version)); nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 worker, TLS 1.3, $key certificate, session cache + tickets; $pinning"
echo "- search: tlsperf capacity URL --slo $slo --new-conn --resume off|tickets --server-pid WORKER ${EXTRA:-} (defaults otherwise)"
echo
echo "| round | client | outcome | capacity/s | interval/s | steps | wall s | server CPU µs/req at the answer | load avg after |"
echo "|---:|---|---|---:|---|---:|---:|---:|---|"
search() { # round resume
  local out="$work/r$1-$2.json" code=0 t0 t1
  t0=$(date +%s)
  "${gen[@]}" "$bin" capacity "$url" --cacert "$work/pki/root.pem" --slo "$slo" --new-conn \
    --resume "$2" --server-pid "$worker" --out "$out" -q ${EXTRA:-} || code=$?
  t1=$(date +%s)
  python3 - "$out" "$1" "$2 (exit $code)" "$((t1 - t0))" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cap = d["capacity_per_s"]
iv = d["interval_per_s"]
conf = [s for s in d["steps"] if s["kind"] == "confirm" and s["offered_per_s"] == cap]
us = conf[-1]["server_cpu_us_per_request"] if conf else None
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['outcome']} | {cap if cap is not None else '-'} | "
      f"{'–'.join(str(round(x)) for x in iv) if iv else '-'} | {len(d['steps'])} | {sys.argv[4]} | "
      f"{round(us) if us else '-'} | {sys.argv[5]} |")
PY
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="off tickets"; else order="tickets off"; fi
  for resume in $order; do search "$r" "$resume"; done
done
echo
for r in $(seq "$rounds"); do
  echo "Round $r: \`tlsperf compare off.json tickets.json\`:"
  echo
  echo '```text'
  "$bin" compare "$work/r$r-off.json" "$work/r$r-tickets.json" 2>&1 || true
  echo '```'
done
