#!/usr/bin/env bash
# Soak of `tlsperf observe --probes` as a node agent (issue 54, "Overhead over time"):
# probes and wire together for MINUTES (default 30) on TLS processes that come and go,
# Prometheus scraping it every 5 s, at a bounded load; then, in the same run, the uprobe
# floor of bench/probes.sh as the anchor of its CPU per handshake.
#
# - A private copy of the system's libssl.so.3 ($work/lib, a file of its own) that every
#   TLS process of the soak loads (LD_LIBRARY_PATH), so that `observe --exe` of that copy
#   probes exactly them and no other process on a shared machine.
# - nginx (master + 1 worker) on 127.0.0.1:PORT, an access-log line per request; reloaded
#   (SIGHUP: new workers) every RELOAD_S (60) s and stopped and started again (SIGQUIT,
#   then a new master: a new pid) every RESTART_S (300) s.
# - `openssl s_server -www` on PORT+1, killed and started again every SSERVER_S (120) s.
# - `tlsperf load https://localhost:PORT/ --new-conn --resume off --rate RATE` (default
#   100/s, 2 connections; rustls, not probed), and two loops of short-lived curl
#   processes (probed as clients), one against nginx and one against s_server, each
#   about 4/s; every curl's HTTP status kept.
# - `tlsperf observe --interface lo --port PORT --port PORT+1 --probes --exe
#   $work/lib/libssl.so.3 --metrics 127.0.0.1:PORT+2 --window 1m --windows FILE --out
#   FILE`, its RSS (VmRSS) and CPU (utime+stime, /proc/PID/stat) sampled every 10 s
#   with the load average.
# - Prometheus (the Debian package) scraping that /metrics every 5 s with
#   deploy/prometheus's rules, its storage in $work.
# At the end (traffic stopped, 3 s to drain): observe's /metrics scraped directly (the
# counters by process, role and result), observe stopped with SIGINT (its --out
# document: the probes' counts begun/emitted/received/lost/dropped), Prometheus asked
# how many scrapes it made and missed. Then bench/probes.sh FLOOR_ROUNDS FLOOR_N (A: no
# probes, B: `observe --probes`, F: bpftrace's empty programs on the same points: the
# uprobe floor) on its own nginx, the soak's processes gone.
#
# Prints: handshakes per view against the ground truth (nginx's access log; the curls
# that got a 200 from s_server; the curls that got an answer), the probes' counts, RSS
# at 5 minutes and at the end (growth after warm-up: the issue's target ≤ 5%), observe's
# CPU per handshake (its CPU ÷ the ground-truth connections; each connection is captured
# once and probed once or twice), and that against the floor's cost per handshake
# (F − A) in the same run, with the load average throughout.
#
# Usage: bench/observe-soak.sh [MINUTES]   (default 30); TLSPERF=PATH (default
# target/release/tlsperf), RATE=R, PORT=P (default 23443: P, P+1, P+2, P+3 are used),
# RELOAD_S, RESTART_S, SSERVER_S, FLOOR_ROUNDS (default 6; 0: no floor), FLOOR_N
# (default 2000), KEEP=DIR (copies the samples, documents and logs there).
# Needs root, nginx, openssl, curl, prometheus, python3 (bpftrace for the floor).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
bin="${TLSPERF:-target/release/tlsperf}"
bin="$(realpath "$bin" 2>/dev/null || echo "$bin")"
[ -x "$bin" ] || { echo "no $bin: cargo build --release first (or TLSPERF=PATH)" >&2; exit 1; }
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$nginx_bin" ] || { echo "missing nginx (apt-get install nginx-light)" >&2; exit 1; }
for t in openssl curl prometheus python3; do
  command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run as root (the probes need eBPF)" >&2; exit 1; }
libssl=/lib/x86_64-linux-gnu/libssl.so.3
[ -f "$libssl" ] || libssl="$(ldconfig -p | awk '/libssl\.so\.3 / {print $NF; exit}')"
[ -f "$libssl" ] || { echo "no libssl.so.3 found" >&2; exit 1; }
rate="${RATE:-100}"
port="${PORT:-23443}"
sport=$((port + 1))
mport=$((port + 2))
pport=$((port + 3))
reload_s="${RELOAD_S:-60}"
restart_s="${RESTART_S:-300}"
sserver_s="${SSERVER_S:-120}"
floor_rounds="${FLOOR_ROUNDS:-6}"
floor_n="${FLOOR_N:-2000}"

work="$(mktemp -d)"
chmod 755 "$work"
pids=()
obs=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -z "$obs" ] || kill -INT "$obs" 2>/dev/null || true
  if [ -s "$work/nginx/nginx.pid" ]; then kill "$(cat "$work/nginx/nginx.pid")" 2>/dev/null || true; fi
  if [ -s "$work/sserver.pid" ]; then kill "$(cat "$work/sserver.pid")" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$work/lib" "$work/nginx"
cp "$libssl" "$work/lib/libssl.so.3"
export LD_LIBRARY_PATH="$work/lib"
"$bin" pki init "$work/pki" --san localhost --san 127.0.0.1 -q
chmod -R a+rX "$work/pki"
cat > "$work/nginx/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/nginx/nginx.pid; error_log $work/nginx/error.log;
events { worker_connections 4096; }
http {
  log_format hs '\$msec \$remote_port \$ssl_protocol \$ssl_session_reused \$status';
  access_log $work/nginx/access.log hs;
  client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi; uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
  server { listen 127.0.0.1:$port ssl backlog=4096;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $work/pki/server-chain.pem; ssl_certificate_key $work/pki/server.key;
    location / { return 200 "ok\n"; } } }
NGINX
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
nginx_start() {
  "$nginx_bin" -c "$work/nginx/nginx.conf" -p "$work/nginx" &
  for _ in $(seq 100); do
    [ -s "$work/nginx/nginx.pid" ] && listening "$port" && return 0
    sleep 0.1
  done
  echo "nginx did not start:" >&2; cat "$work/nginx/error.log" >&2; exit 1
}
nginx_stop() {
  local m
  m="$(cat "$work/nginx/nginx.pid")"
  kill -QUIT "$m"
  for _ in $(seq 100); do kill -0 "$m" 2>/dev/null || break; sleep 0.1; done
  wait "$m" 2>/dev/null || true
}
sserver_start() {
  openssl s_server -www -quiet -accept "127.0.0.1:$sport" -cert "$work/pki/server.pem" -cert_chain "$work/pki/intermediate.pem" \
    -key "$work/pki/server.key" </dev/null >/dev/null 2>&1 &
  echo $! > "$work/sserver.pid"
  for _ in $(seq 100); do listening "$sport" && return 0; sleep 0.05; done
  echo "openssl s_server did not start" >&2; exit 1
}
nginx_start
sserver_start

"$bin" observe --interface lo --port "$port" --port "$sport" --probes --exe "$work/lib/libssl.so.3" \
  --metrics "127.0.0.1:$mport" --window 1m --windows "$work/w.jsonl" --json --out "$work/o.json" \
  -d "$((minutes + 10))m" > /dev/null 2> "$work/observe.err" &
obs=$!
# With --interface it says "capturing on" once the probes are attached and the capture
# runs.
for _ in $(seq 600); do
  grep -q "capturing on " "$work/observe.err" && break
  kill -0 "$obs" 2>/dev/null || break
  sleep 0.1
done
grep -q "capturing on " "$work/observe.err" || { echo "observe did not start:" >&2; cat "$work/observe.err" >&2; exit 1; }

cat > "$work/prometheus.yml" <<PROM
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: ['$PWD/deploy/prometheus/tlsperf.rules.yml']
scrape_configs:
  - job_name: tlsperf
    static_configs: [{targets: ['127.0.0.1:$mport']}]
PROM
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$pport" > /dev/null 2> "$work/prometheus.err" &
prom=$!
pids+=("$prom")
for _ in $(seq 100); do curl -sf "127.0.0.1:$pport/-/ready" > /dev/null && break; sleep 0.2; done

start=$SECONDS
end=$((start + minutes * 60))
started_at="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
# The load: new connections at a fixed rate for the soak's length.
"$bin" load "https://localhost:$port/" --new-conn --resume off -c 2 --rate "$rate" -d "${minutes}m" \
  --cacert "$work/pki/root.pem" -q --out "$work/load.json" > /dev/null 2> "$work/load.err" &
load=$!
pids+=("$load")
# Short-lived clients, probed: each curl's status on a line (000: no answer).
curls() {
  local url=$1 out=$2
  while [ $SECONDS -lt $end ]; do
    code="$(timeout 5 curl -s -o /dev/null -w '%{http_code}' --cacert "$work/pki/root.pem" "$url" || true)"
    echo "${code:-000}" >> "$out"
    sleep 0.25
  done
}
curls "https://localhost:$port/" "$work/curl-nginx" &
pids+=("$!")
curls "https://localhost:$sport/" "$work/curl-sserver" &
pids+=("$!")
# The churn.
(
  t=0
  while [ $SECONDS -lt $((end - 5)) ]; do
    sleep 1
    t=$((t + 1))
    if [ $((t % restart_s)) = 0 ]; then
      nginx_stop; nginx_start; echo "$((SECONDS - start)) restart nginx $(cat "$work/nginx/nginx.pid")"
    elif [ $((t % reload_s)) = 0 ]; then
      kill -HUP "$(cat "$work/nginx/nginx.pid")"; echo "$((SECONDS - start)) reload nginx"
    fi
    if [ $((t % sserver_s)) = 0 ]; then
      old="$(cat "$work/sserver.pid")"; kill "$old"
      for _ in $(seq 50); do kill -0 "$old" 2>/dev/null || break; sleep 0.1; done
      wait "$old" 2>/dev/null || true
      sserver_start; echo "$((SECONDS - start)) restart s_server $(cat "$work/sserver.pid")"
    fi
  done
) > "$work/churn" 2>&1 &
churn=$!
pids+=("$churn")
: > "$work/samples"
tck=$(getconf CLK_TCK)
while [ $SECONDS -lt $end ]; do
  echo "$((SECONDS - start)) $(awk '/VmRSS/{print $2}' "/proc/$obs/status") $(sed 's/.*) //' "/proc/$obs/stat" | awk '{print $12 + $13}') $(cut -d' ' -f1 /proc/loadavg)" >> "$work/samples"
  sleep 10
done
wait "$load" || true
wait "$churn" 2>/dev/null || true
for p in "${pids[@]}"; do [ "$p" = "$prom" ] || kill "$p" 2>/dev/null || true; done
sleep 3
echo "$((SECONDS - start)) $(awk '/VmRSS/{print $2}' "/proc/$obs/status") $(sed 's/.*) //' "/proc/$obs/stat" | awk '{print $12 + $13}') $(cut -d' ' -f1 /proc/loadavg)" >> "$work/samples"
curl -s "127.0.0.1:$mport/metrics" > "$work/metrics.txt"
sleep 6  # one more scrape
q() { curl -s -G "127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1"; }
{
  echo "attempted $(q "count_over_time(up{job=\"tlsperf\"}[$((minutes + 5))m])")"
  echo "succeeded $(q "sum_over_time(up{job=\"tlsperf\"}[$((minutes + 5))m])")"
  echo "duration $(q "max_over_time(scrape_duration_seconds{job=\"tlsperf\"}[$((minutes + 5))m])")"
  echo "lost $(q 'sum(tlsperf_observe_probe_lost_events_total)')"
  echo "rules $(curl -s "127.0.0.1:$pport/api/v1/rules")"
} > "$work/prometheus.answers"
kill -INT "$obs"
wait "$obs" || true
obs=""
kill "$prom" 2>/dev/null || true
wait "$prom" 2>/dev/null || true
[ -s "$work/nginx/nginx.pid" ] && nginx_stop
kill "$(cat "$work/sserver.pid")" 2>/dev/null || true
rm -f "$work/sserver.pid"
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"
unset LD_LIBRARY_PATH
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp "$work"/{samples,o.json,w.jsonl,observe.err,metrics.txt,prometheus.answers,churn,load.json,curl-nginx,curl-sserver} "$KEEP/" 2>/dev/null || true
  cp "$work/nginx/access.log" "$KEEP/" || true
fi

floor=""
if [ "$floor_rounds" -gt 0 ]; then
  BIN="$bin" PORT="$((port + 4))" bench/probes.sh "$floor_rounds" "$floor_n" > "$work/floor.md" 2>&1 || true
  [ -z "${KEEP:-}" ] || cp "$work/floor.md" "$KEEP/"
  floor="$work/floor.md"
fi

echo "# observe --probes soak"
echo
echo "- $started_at, $minutes min; machine: $(nproc) cores, $(uname -r); load average at the start $load_start, at the end $load_end"
echo "- binary: $bin ($("$bin" --version)); $("$nginx_bin" -v 2>&1); $(openssl version); curl $(curl --version | awk 'NR==1 {print $2}'); $(prometheus --version 2>&1 | head -1)"
echo "- load: tlsperf load --new-conn --resume off -c 2 --rate $rate; curl loops against nginx and s_server (every 0.25 s each); nginx reloaded every $reload_s s, restarted every $restart_s s; s_server restarted every $sserver_s s; Prometheus scraping every 5 s"
echo
python3 - "$work" "$tck" "$floor" <<'EOF'
import json, re, statistics, sys
work, tck, floor = sys.argv[1], int(sys.argv[2]), sys.argv[3]
samples = [l.split() for l in open(f"{work}/samples") if l.strip()]
samples = [(int(t), int(r), int(c), float(la)) for t, r, c, la in samples]
log = [l.split() for l in open(f"{work}/nginx/access.log")]
nginx_truth = sum(1 for l in log if l[4] == "200")
def statuses(name):
    s = [l.strip() for l in open(f"{work}/{name}")]
    return sum(1 for x in s if x == "200"), sum(1 for x in s if x != "200")
curl_nginx_ok, curl_nginx_bad = statuses("curl-nginx")
curl_ss_ok, curl_ss_bad = statuses("curl-sserver")
load = json.load(open(f"{work}/load.json"))
# observe's own counters at the end, by label set.
m = {}
for line in open(f"{work}/metrics.txt"):
    if line.startswith("#") or not line.strip():
        continue
    name, value = line.rsplit(" ", 1)
    m[name] = float(value)
def total(prefix, **labels):
    s = 0
    for k, v in m.items():
        if not k.startswith(prefix + "{") and k != prefix:
            continue
        if all(f'{l}="{x}"' in k for l, x in labels.items()):
            s += v
    return int(s)
doc = json.load(open(f"{work}/o.json"))
c = doc["probes"]["counts"]
wire_fail = {k: total("tlsperf_observe_handshake_failures_total", reason=k) for k in ["alert", "reset", "closed", "incomplete"]}
churn = [l.split()[1:3] for l in open(f"{work}/churn")]
print(f"churn: {sum(1 for x in churn if x == ['reload', 'nginx'])} nginx reloads, "
      f"{sum(1 for x in churn if x == ['restart', 'nginx'])} nginx restarts (new master pid), "
      f"{sum(1 for x in churn if x == ['restart', 's_server'])} s_server restarts; "
      f"{curl_nginx_ok + curl_nginx_bad + curl_ss_ok + curl_ss_bad} curl processes; "
      f"load: {load['requests']['completed']} completed, {load['requests']['failed']} failed")
print()
print("| handshakes | ground truth | probes (server) | probes (client) | wire |")
print("|---|---:|---:|---:|---:|")
print(f"| nginx | {nginx_truth} (access log, status 200) | "
      f"{total('tlsperf_observe_probe_handshakes_total', process='nginx', role='server', result='ok')} | – | "
      f"{total('tlsperf_observe_handshakes_total', process='nginx')} |")
print(f"| openssl s_server | {curl_ss_ok} (curls answered 200) | "
      f"{total('tlsperf_observe_probe_handshakes_total', process='openssl', role='server', result='ok')} | – | "
      f"{total('tlsperf_observe_handshakes_total', process='openssl')} |")
print(f"| curl (clients) | {curl_nginx_ok + curl_ss_ok} (curls answered 200) | – | "
      f"{total('tlsperf_observe_probe_handshakes_total', process='curl', role='client', result='ok')} | – |")
not_ok = [f"{k.split('{', 1)[1][:-1]} {int(v)}" for k, v in m.items()
          if k.startswith("tlsperf_observe_probe_handshakes_total{") and 'result="ok"' not in k and v]
print()
print(f"probes' counts: begun {c['started']}, records emitted {c['emitted']}, received {c['received']}, "
      f"lost (ring buffer full) {c['lost']}, dropped by tlsperf {c['dropped']}, table full {c['table_full']}, "
      f"before attach {c.get('before_attach', 0)}, in progress at the end {c.get('in_progress_at_end', 0)}; "
      f"lost_events_total {total('tlsperf_observe_probe_lost_events_total')}; "
      f"not ok: {'; '.join(not_ok) or 'none'}")
expected = nginx_truth + curl_ss_ok + curl_nginx_ok + curl_ss_ok
ok = total("tlsperf_observe_probe_handshakes_total", result="ok")
print(f"probed handshakes: ground truth {expected} (nginx's log + s_server's answered curls, servers; "
      f"every answered curl, clients), begun {c['started']}, reported ok {ok} "
      f"({ok - expected:+d} against the ground truth)")
print(f"wire: failures {wire_fail}; kernel drops {total('tlsperf_observe_kernel_drops_total')}")
ans = {}
for line in open(f"{work}/prometheus.answers"):
    k, v = line.split(" ", 1)
    ans[k] = json.loads(v)
def one(k):
    r = ans[k]["data"]["result"]
    return float(r[0]["value"][1]) if r else None
health = [r["health"] for g in ans["rules"]["data"]["groups"] for r in g["rules"]]
print(f"Prometheus: {one('succeeded'):.0f} of {one('attempted'):.0f} scrapes succeeded, the longest "
      f"{1000 * one('duration'):.1f} ms; lost events it holds {one('lost')}; {health.count('ok')} of {len(health)} rules healthy")
print()
at5 = next((s for s in samples if s[0] >= 300), samples[0])
last = samples[-1]
print("observe RSS every 5 minutes: " + ", ".join(f"{s[0]} s {s[1] / 1024:.1f} MiB" for s in samples if s[0] % 300 < 10))
print(f"observe RSS: {at5[1] / 1024:.1f} MiB at {at5[0]} s, {last[1] / 1024:.1f} MiB at the end ({last[0]} s): "
      f"growth after the first 5 minutes {100 * (last[1] - at5[1]) / at5[1]:+.1f}% (target ≤ 5%); max {max(s[1] for s in samples) / 1024:.1f} MiB")
truth = nginx_truth + curl_ss_ok
cpu = last[2] / tck
us = 1e6 * cpu / max(truth, 1)
print(f"observe CPU: {cpu:.1f} s for {truth} connections (nginx's log + s_server's answered curls): {us:.1f} µs per handshake")
las = [s[3] for s in samples]
print(f"load average (1 min) during the soak: median {statistics.median(las):.2f}, min {min(las):.2f}, max {max(las):.2f}")
if floor:
    text = open(floor).read()
    row = re.search(r"\| median worker CPU µs per handshake \| ([\d.]+|-) \| ([\d.]+|-) \| ([\d.]+|-) \| ([\d.]+|-) \|", text)
    la = re.findall(r"load average[^:]*: ([\d. ]+)", text)
    if row and row.group(4) != "-":
        a, b, f = float(row.group(1)), float(row.group(2)), float(row.group(4))
        print()
        print(f"floor (bench/probes.sh after the soak, same binary; load average {' → '.join(x.strip() for x in la)}): nginx worker CPU per "
              f"full TLS 1.3 handshake without probes (A) {a:.1f} µs, with observe --probes (B) {b:.1f} µs, with bpftrace's empty "
              f"programs on the same points (F) {f:.1f} µs: the uprobes' own cost F − A = {f - a:.1f} µs, the probes' B − A = {b - a:.1f} µs")
        if f - a > 0:
            print(f"observe's own CPU per handshake in the soak ÷ the uprobe floor (F − A): {us / (f - a):.2f}; "
                  f"(its CPU + the probed process's B − A) ÷ (F − A): {(us + b - a) / (f - a):.2f}")
        else:
            print("the floor F − A is not above 0 in this run: no ratio (the rounds' noise exceeds it)")
    else:
        print()
        print("floor: bench/probes.sh gave no F figure (bpftrace missing?):")
        print(text[-2000:])
EOF
