#!/usr/bin/env bash
# How far `tlsperf serve` is from the floor of a TLS connection, and what resumption and the
# load generator cost, all in ONE run with the servers alternating round by round (issue 20).
#
# Per round (loopback; every load bounded by -n or -D; load average recorded with each round):
#   plain   nginx, plain HTTP/1.1, one worker: server CPU per connection (the kernel + HTTP
#           floor of a connection) — h2load --h1 -n N -c 50 -t 1 -H 'Connection: close'
#           (in serve's slices, below);
#   nginx   nginx + OpenSSL, full TLS 1.3 (ssl_session_tickets off, ssl_session_cache off),
#           same h2load; `$ssl_session_reused` is logged and must be "." for every request;
#   serve   `tlsperf serve --threads 1 --resumption off --groups x25519`, same h2load; its
#           /stats must count N more full handshakes and no resumed one;
#   base    the same for a baseline binary (BASE=path, e.g. main's), when given;
#   crypto  `tlsperf crypto limit --json`: the public-key crypto and hashing of one full
#           TLS 1.3 server handshake measured inside real handshakes (`limits[full,server]
#           .crypto_ns`, each call timed on the thread's CPU clock, so a busy machine
#           inflates it about as much as it inflates the servers' CPU figures). TLS 1.3's
#           is taken in serve's slices (below, --duration 250ms each, their mean): this VM's
#           CPUs run the same code at one speed for some seconds and up to 1.4× slower for
#           the next (`crypto limit` alone: 86, 88 and 114 µs in three runs a minute apart),
#           so a term measured minutes away from serve's run moves the ratio by as much.
#           TLS 1.2's, for the resumption floor, is its own step.
#           floor = plain + crypto; the target is serve ≤ 1.4 × floor;
#   client  generator CPU per full handshake, same server (serve): h2load's (rusage of the
#           h2load process, one whole run of N right before tlsperf load's) vs
#           `tlsperf load --new-conn --resume off --no-verify-cache` (its own
#           generator.cpu_us_per_handshake: the process's CPU during the run, every chain
#           verified — the run must say chains_verified = N, chains_from_cache = 0),
#           held with --ciphers to the TLS 1.3 suite h2load negotiated with serve in the
#           warm-up (rustls's default would be AES-256-GCM-SHA384: more work than h2load's);
#   resume  server CPU per connection, full vs resumed, same client (tlsperf load --new-conn
#           -c 8 -n 4N, held to the AES-128-GCM-SHA256 suite `crypto limit` measures), against `serve --resumption stateful` (TLS 1.2 session ids, TLS 1.3
#           stateful tickets) and `serve --resumption tickets` (TLS 1.2 and 1.3 tickets).
#           The first handshake of a connection slot is full, so the resumed cost is
#           (CPU − full × cost of a full one) ÷ resumed, both counts from the server's own
#           /stats, which must match the client's. Each run's floor is taken right after
#           it, at its own handshakes/s and 8 connections at once (floor_at): tlsperf load
#           -c 8 drives serve 3–10× faster than h2load does, and a floor taken at h2load's
#           pace (as until 2026-12-01) is no floor for it. The resumed run's floor is taken
#           with a busy and with a sleeping flight client: tlsperf load is CPU-bound in the
#           full runs but waits on the server part of the time in the resumed ones (its CPU
#           use is printed), and waking it is charged to the server's writes. The same
#           runs against nginx + OpenSSL (TLS 1.2 and 1.3, a session cache or tickets),
#           counted by nginx's own `$ssl_session_reused` log, are a reference beside
#           serve's: what a mature server's resumption costs, and its resumed ÷ full.
#           Each floor is also taken with rustls's whole in-memory server handshake
#           (`crypto limit`'s measured_ns) in the crypto's place: the floor of a server
#           built on rustls. And each resumed handshake is held against its own floor, as
#           the full one is: a resumed ÷ full held against the floor's resumed ÷ full
#           bounds nothing (a server slow at full handshakes beats it);
#   keep    keep-alive requests/s: h2load --h1 -c 50 -t 1 -D K/4 s --warm-up-time 300ms
#           (serve, and base if given), in 4 slices per round with serve and base taking turns,
#           so that both span the same seconds (this VM's keep-alive rate jumps between two
#           levels, ~40k and ~60k/s, from second to second, and whole back-to-back runs put
#           the two binaries on different levels: per-round ratios of 0.79–1.07 in one run).
#           h2load counts only the requests of the measured seconds, after every connection's
#           handshake (done in the warm-up); a server's figure is the mean of its slices;
#   flights what the kernel must cost for a TLS connection's flights, without crypto, at the
#           rate h2load drives serve (its warm-up's requests/s): examples/flight_floor
#           replays the bytes of real rustls connections (TLS 1.3 and 1.2, full and
#           resumed, the request and response inside) between a bare one-thread epoll
#           server and a paced client (-c 50) that never sleeps (`busy`: it polls without
#           blocking, as h2load, busy with its own crypto, does; a sleeping client would
#           make the server pay for waking it, which h2load never does; the row "sleeping
#           client" shows by how much). Its plain-HTTP shape is measured too, and so
#           is nginx's plain HTTP with that client and pace, so the bare server can be held
#           against nginx. serve's own run and every flight run are interleaved, in 4
#           slices of N/4 connections each, so that all are measured across the same
#           seconds. The floor at serve's pace = nginx plain at that pace + (TLS
#           flights − plain flights on the bare server) + crypto; the same for each
#           resumption ratio, with `crypto limit`'s resumed server crypto (TLS 1.2 too).
# First, on the fresh servers: resident memory per idle TLS connection, 5,000 held open.
# Last, issue 20's targets, each held to its limit with a verdict, beside where a server built
# on rustls would stand if it spent nothing beyond rustls's handshake and the flights' kernel
# cost at the same pace: a cost target that this floor misses no rustls server can meet in the
# run, and a resumed ÷ full one only a server that spends more over its floor on full
# handshakes than on resumed ones.
#
# With two CPUs or more, every server runs on CPU 1 and every client on CPU 0 (taskset), as
# h2load and serve end up anyway (h2load keeps its CPU busy): the floor's servers meet
# their clients in the same places serve meets h2load. FLOOR_PIN=0 leaves placement to
# the scheduler.
#
# Server CPU is the sum of /proc/PID/task/*/schedstat (ns on CPU, user + kernel) around the
# run; generator CPU is the client process's own. Nothing of the client is charged to the
# server and the other way round. On a loaded machine CPU time per connection is inflated
# less than wall time but still is (cache, frequency, scheduler): read the ratios, which are
# taken round by round in the same conditions, and the load average printed with them.
#
# Needs nginx (nginx-light) and h2load (nghttp2-client). Usage:
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
# Each resumption run (tlsperf load -c 8, 3–10× faster than h2load against serve) and its
# floor runs: 4N connections, so that they last about as long as the other runs.
rn=$((4 * n))
case "$k" in
  [1-9] | [1-9][0-9]) ;;
  *) echo "K=$k: the third argument is the keep-alive seconds per server and round, 1 to 99 (it was a request count before 2026-12-01)" >&2; exit 2 ;;
esac
for t in nginx h2load python3 curl; do
  command -v "$t" >/dev/null || { echo "missing $t (apt-get install nginx-light nghttp2-client python3 curl)" >&2; exit 1; }
done
cargo build --release --locked --quiet --bin tlsperf --example hold_connections --example flight_floor
srv=(); cli=()
if [ "${FLOOR_PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then srv=(taskset -c 1); cli=(taskset -c 0); fi
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
"$bin" pki init "$work/pki" --key ecdsa-p256 -q
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
declare -A ff_port ff_pid
p=19486
for sh in "${shapes[@]}"; do
  "$ff" record "$work/$sh.fl" "$sh" > "$work/$sh.sizes"
  "${srv[@]}" "$ff" server "127.0.0.1:$p" "$work/$sh.fl" 3600 &
  pids+=($!); ff_pid[$sh]=$!; ff_port[$sh]=$p
  p=$((p + 1))
done

tls=(--cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" --threads 1 -q)
"${srv[@]}" "$bin" serve --listen 127.0.0.1:19482 --metrics 127.0.0.1:19492 --resumption off --groups x25519 "${tls[@]}" > /dev/null &
pids+=($!); serve_pid=$!
"${srv[@]}" "$bin" serve --listen 127.0.0.1:19483 --metrics 127.0.0.1:19493 --resumption stateful --groups x25519 "${tls[@]}" > /dev/null &
pids+=($!); stateful_pid=$!
"${srv[@]}" "$bin" serve --listen 127.0.0.1:19484 --metrics 127.0.0.1:19494 --resumption tickets --groups x25519 "${tls[@]}" > /dev/null &
pids+=($!); tickets_pid=$!
if [ -n "$base" ]; then
  "${srv[@]}" "$base" serve --listen 127.0.0.1:19485 --metrics 127.0.0.1:19495 --resumption off --groups x25519 "${tls[@]}" > /dev/null &
  pids+=($!); base_pid=$!
fi
for _ in $(seq 50); do
  ok=1
  for p in 19478 19479 19480 19481 19482 19483 19484 ${base:+19485} 19486 19487 19488 19489 19490; do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || ok=0; done
  [ "$ok" = 1 ] && break
  sleep 0.2
done
[ "$ok" = 1 ] || { echo "a server did not start" >&2; exit 1; }
nginx_pid=$(pgrep -P "$nginx_master" | head -1)

# CPU nanoseconds of every thread of a process.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }
load1() { cut -d' ' -f1 /proc/loadavg; }
# The hypervisor's share (steal, /proc/stat) of all CPUs' time since the ticks given.
cpu_ticks() { awk '/^cpu / {t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9}' /proc/stat; }
steal_since() { # total steal (from cpu_ticks)
  cpu_ticks | awk -v t0="$1" -v s0="$2" '{ d = $1 - t0; printf "%.1f\n", (d > 0 ? ($2 - s0) * 100 / d : 0) }'
}
stat_field() { # port kind -> count of that handshake kind in serve's /stats
  curl -s "http://127.0.0.1:$1/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['handshakes'].get('$2', {}).get('count', 0))"
}
json_get() { python3 -c "import json,sys; d=json.load(open('$1')); print(eval('d' + sys.argv[1]))" "$2"; }
fail() { echo "CHECK FAILED: $*" >&2; exit 1; }
# The server's crypto of one handshake of KIND (full or resumed) in a `crypto limit --json`
# file, µs, printed with FORMAT; with FIELD measured_ns, the server's whole in-memory
# handshake instead (rustls's own work, its crypto included; no sockets, no HTTP).
limit_server_us() { # file kind format [field, default crypto_ns]
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(sys.argv[3] % ([x for x in d['limits'] if x['kind'] == sys.argv[2] and x['side'] == 'server'][0][sys.argv[4]] / 1000))" "$1" "$2" "$3" "${4:-crypto_ns}"
}
# Of that, the server's ticket crypto (opening the ticket offered, sealing the new ones), µs:
# crypto limit resumes by ticket, and a server resuming by session id (TLS 1.2) or by
# stateful ticket (TLS 1.3) looks its session up instead, so its floor leaves this out.
limit_tickets_us() { # file kind format
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); h = [x for x in d['in_handshake'] if x['kind'] == sys.argv[2] and x['side'] == 'server'][0]; print(sys.argv[3] % (sum(c['ns'] for c in h['categories'] if c['category'] == 'tickets') / 1000))" "$1" "$2" "$3"
}

# One h2load run, one connection per request: prints "server_us_per_conn h2load_us_per_conn".
h2conn() { # pid url [connections, default N]
  local b a out m="${3:-$n}"
  b=$(cpu_ns "$1")
  out=$( { TIMEFORMAT='%3U %3S'; time "${cli[@]}" h2load --h1 -n "$m" -c 50 -t 1 -H 'Connection: close' "$2" >"$work/h2.out" 2>&1; } 2>&1 )
  a=$(cpu_ns "$1")
  local ok
  ok=$(awk '/^requests:/ {print $8}' "$work/h2.out")
  [ "$ok" = "$m" ] || fail "h2load $2: $ok of $m requests succeeded"
  awk -v b="$b" -v a="$a" -v n="$m" -v c="$out" -v d="${3:+3}" 'BEGIN { split(c, x, " "); f = "%." (d ? d : 1) "f"; printf f " " f "\n", (a - b) / 1000 / n, (x[1] + x[2]) * 1e6 / n }'
}

# One paced run of the flight client: prints "server_us_per_conn".
ffconn() { # pid port shape [sleeping|busy] [connections, default N] [at once, default 50] [rate, default serve's pace]
  local b a out mode=busy m="${5:-$n}"
  [ "${4:-}" = sleeping ] && mode=""
  b=$(cpu_ns "$1")
  out=$("${cli[@]}" "$ff" client "127.0.0.1:$2" "$work/$3.fl" "$m" "${6:-50}" "${7:-$pace}" $mode) || fail "flight client, $3 on port $2: $out"
  a=$(cpu_ns "$1")
  awk -v b="$b" -v a="$a" -v n="$m" 'BEGIN { printf "%.3f\n", (a - b) / 1000 / n }'
}

# The full and resumed handshakes a server has counted, "full resumed": a serve's /stats
# (COUNTER = its metrics port) or an nginx access log of $ssl_session_reused (COUNTER =
# log:FILE; one line per request, "r" when the session was reused, "." when not).
server_counts() { # counter
  case "$1" in
    log:*) awk '$1 == "r" {r++} $1 == "." {f++} END {printf "%d %d\n", f, r}' "${1#log:}" ;;
    *) echo "$(stat_field "$1" full) $(stat_field "$1" resumed)" ;;
  esac
}

# Server CPU per connection of one tlsperf load run against a server that counts its
# handshakes (server_counts); checks that the server counted what the client did. Prints
# "us_per_conn full resumed handshakes_per_s client_busy_%" (the last: tlsperf load's own
# CPU use of its one thread over the run).
resume_run() { # pid port counter tls resume client-kind-of-a-resumed-handshake
  local b a f0 r0 f1 r1 cf cr
  read -r f0 r0 <<< "$(server_counts "$3")"
  b=$(cpu_ns "$1")
  # The suite `crypto limit` measures (its crypto is the floor's term), not rustls's
  # default order (AES-256-GCM-SHA384 first): SHA-384 runs on SHA-512's block function,
  # which aws-lc runs without hardware help on this AMD CPU, and it is paid more often in a
  # resumption (binder, resumption secrets, tickets) than in a full handshake.
  local suite=TLS13_AES_128_GCM_SHA256
  [ "$4" = 1.2 ] && suite=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
  "${cli[@]}" "$bin" load "https://127.0.0.1:$2/" --new-conn -n "$rn" -c 8 --http1 --tls "$4" --resume "$5" \
    --ciphers "$suite" --cacert "$work/pki/root.pem" --json -q > "$work/resume.json" 2> "$work/resume.err" \
    || fail "tlsperf load against port $2 (tls $4, resume $5): $(tail -3 "$work/resume.err")"
  # Its warning that the generator may be the bottleneck is expected here (its CPU use is
  # printed in the report), and is kept out of the report.
  [ "$(json_get "$work/resume.json" "['options']['ciphers']")" = "['$suite']" ] || fail "port $2 tls $4: not held to $suite"
  a=$(cpu_ns "$1")
  cf=$(json_get "$work/resume.json" "['handshakes']['kinds'].get('full', 0)")
  cr=$(json_get "$work/resume.json" "['handshakes']['kinds'].get('$6', 0)")
  # nginx writes a request's log line after its response: give the last ones a moment.
  for _ in $(seq 20); do
    read -r f1 r1 <<< "$(server_counts "$3")"
    [ $((f1 - f0)) = "$cf" ] && [ $((r1 - r0)) = "$cr" ] && break
    sleep 0.1
  done
  [ $((f1 - f0)) = "$cf" ] && [ $((r1 - r0)) = "$cr" ] \
    || fail "port $2 tls $4 resume $5: server counted $((f1 - f0)) full + $((r1 - r0)) resumed, client $cf + $cr"
  [ $((cf + cr)) = "$rn" ] || fail "port $2: $((cf + cr)) of $rn handshakes"
  [ "$5" != off ] || [ "$cr" = 0 ] || fail "port $2: $cr resumed with --resume off"
  awk -v b="$b" -v a="$a" -v n="$rn" -v f="$cf" -v r="$cr" -v p="$(json_get "$work/resume.json" "['handshakes']['per_second']")" \
    -v u="$(json_get "$work/resume.json" "['generator']['utilization']")" \
    'BEGIN { printf "%.1f %d %d %d %.0f\n", (a - b) / 1000 / n, f, r, p, u * 100 }'
}

# One resume_run against a server, as rows: KEY (µs per handshake of the run's kind; for a
# resumed run, its CPU less its full handshakes at FULL_US each), ${PREFIX}pace$v-$kind-$SIDE
# (handshakes/s) and ${PREFIX}busy$v-$kind-$SIDE (tlsperf load's CPU use). Sets run_us and
# run_pace for the caller (the resumed run's cost needs the full one's; floors, the pace).
resume_rows() { # prefix key pid port counter version kind full|res [client-kind full_us]
  local out cpu cf cr=0 busy
  if [ "$8" = full ]; then
    out=$(resume_run "$3" "$4" "$5" "$6" off resumed); read -r run_us _ _ run_pace busy <<< "$out"
  else
    out=$(resume_run "$3" "$4" "$5" "$6" "$7" "$9"); read -r cpu cf cr run_pace busy <<< "$out"
    run_us=$(awk -v c="$cpu" -v f="$cf" -v r="$cr" -v u="${10}" -v n="$rn" 'BEGIN {printf "%.1f", (c * n - f * u) / r}')
  fi
  echo "$r $2 $run_us $cr $l" >> "$work/rows"
  echo "$r ${1}pace$6-$7-$8 $run_pace 0 $l" >> "$work/rows"
  echo "$r ${1}busy$6-$7-$8 $busy 0 $l" >> "$work/rows"
}

# The kernel and HTTP floor of a connection with SHAPE's flights at the pace and concurrency
# of a resumption run (tlsperf load -c 8 drives serve much faster than h2load -c 50 does, and
# the pace moves a connection's cost: a floor taken at another pace is no floor for it):
# nginx plain at that pace + what SHAPE's flights cost the bare server over plain ones. The
# flight client is busy (never sleeps) or sleeping: tlsperf load is busy when its crypto keeps
# it so (full handshakes), and sleeps part of the time when the server is the slower side
# (resumed ones; it then has to be woken, and on loopback the server's write pays for the
# wake-up). µs per connection, no crypto.
floor_at() { # shape handshakes_per_s busy|sleeping
  local p fp fs
  p=$(ffconn "$nginx_pid" 19480 plain "$3" "$rn" 8 "$2")
  fp=$(ffconn "${ff_pid[plain]}" "${ff_port[plain]}" plain "$3" "$rn" 8 "$2")
  fs=$(ffconn "${ff_pid[$1]}" "${ff_port[$1]}" "$1" "$3" "$rn" 8 "$2")
  awk -v p="$p" -v a="$fp" -v s="$fs" 'BEGIN { printf "%.1f", p + s - a }'
}

# Memory per idle connection, 5,000 held open, on the fresh servers (after their first
# handshakes the allocator reuses what earlier runs freed, and the figure means nothing).
held_kib() { # pid port
  local r0 r1
  r0=$(awk '/VmRSS/ {print $2}' "/proc/$1/status")
  : > "$work/hold"
  "${cli[@]}" target/release/examples/hold_connections "127.0.0.1:$2" 5000 4 > "$work/hold" &
  local hp=$!
  while [ ! -s "$work/hold" ] && kill -0 "$hp" 2>/dev/null; do sleep 0.2; done
  sleep 0.5
  r1=$(awk '/VmRSS/ {print $2}' "/proc/$1/status")
  wait "$hp"
  awk -v a="$r0" -v b="$r1" -v n="$(cut -d' ' -f1 "$work/hold")" 'BEGIN { printf "%d %.1f", n, (b - a) / n }'
}
mem_serve=$(held_kib "$serve_pid" 19482)
mem_base=""
if [ -n "$base" ]; then mem_base=$(held_kib "$base_pid" 19485); fi

# Warm-up: every server has done a few hundred handshakes before the first measured one.
for u in http://127.0.0.1:19480/ https://127.0.0.1:19481/ https://127.0.0.1:19482/ ${base:+https://127.0.0.1:19485/}; do
  "${cli[@]}" h2load --h1 -n 300 -c 50 -t 1 -H 'Connection: close' "$u" > "$work/warm.out" 2>&1
  # The cipher suite h2load negotiates with serve: tlsperf load is held to the same one
  # (rustls's default order prefers AES-256-GCM-SHA384, OpenSSL's h2load gets
  # AES-128-GCM-SHA256 here), so that the two generators do the same work.
  if [ "$u" = https://127.0.0.1:19482/ ]; then
    h2_cipher=$(awk '/^Cipher:/ {print $2}' "$work/warm.out")
    # The connection rate h2load drives serve at: the flight floor is measured at it.
    pace=$(awk '/^finished in/ {gsub(",","",$4); print int($4)}' "$work/warm.out")
  fi
done
[ "${pace:-0}" -gt 0 ] || fail "no connection rate from h2load's warm-up against serve"
for sh in "${shapes[@]}"; do "${cli[@]}" "$ff" client "127.0.0.1:${ff_port[$sh]}" "$work/$sh.fl" 300 50 0 > /dev/null || fail "flight warm-up $sh"; done
"${cli[@]}" "$ff" client 127.0.0.1:19480 "$work/plain.fl" 300 50 0 > /dev/null || fail "flight warm-up against nginx plain"
case "${h2_cipher:-}" in
  TLS_AES_128_GCM_SHA256 | TLS_AES_256_GCM_SHA384 | TLS_CHACHA20_POLY1305_SHA256) load_cipher="TLS13_${h2_cipher#TLS_}" ;;
  *) fail "h2load negotiated '${h2_cipher:-nothing}' with serve: not a TLS 1.3 suite this bench knows" ;;
esac
full_before=$(stat_field 19492 full)
res_before=$(stat_field 19492 resumed)
: > "$work/rows"; : > "$work/steal"
for r in $(seq "$rounds"); do
  # Alternate the order round by round.
  order=(nginx serve-flights ${base:+base} crypto client resume keep)
  if [ $((r % 2)) = 0 ]; then order=(keep resume client crypto ${base:+base} serve-flights nginx); fi
  for what in "${order[@]}"; do
    l=$(load1)
    read -r t0 s0 <<< "$(cpu_ticks)"
    case "$what" in
      nginx) out=$(h2conn "$nginx_pid" https://127.0.0.1:19481/); echo "$r nginx $out $l" >> "$work/rows" ;;
      base) out=$(h2conn "$base_pid" https://127.0.0.1:19485/); echo "$r base $out $l" >> "$work/rows" ;;
      crypto)
        "${srv[@]}" "$bin" crypto limit --json --tls 1.2 --group x25519 --cert ecdsa-p256 > "$work/limit12.json"
        for kind in full resumed; do
          c=$(limit_server_us "$work/limit12.json" "$kind" %.1f)
          echo "$r crypto1.2${kind:0:1} $c 0 $l" >> "$work/rows"
          c=$(limit_server_us "$work/limit12.json" "$kind" %.1f measured_ns)
          echo "$r hs1.2${kind:0:1} $c 0 $l" >> "$work/rows"
          echo "$r tk1.2${kind:0:1} $(limit_tickets_us "$work/limit12.json" "$kind" %.1f) 0 $l" >> "$work/rows"
        done ;;
      serve-flights)
        # serve and every term of its floors (nginx plain under h2load, the flight shapes,
        # TLS 1.3's crypto) interleaved in 4 slices of the round's N connections each, so
        # that all of them are measured across the same seconds: steal, and what else
        # disturbs a VM, comes and goes within seconds.
        declare -A tot=()
        add() { tot[$1]=$(awk -v t="${tot[$1]:-0}" -v x="$2" -v m="$3" 'BEGIN { printf "%.3f", t + x * m }'); }
        for slice in 1 2 3 4; do
          sm=$((n / 4)); [ "$slice" = 4 ] && sm=$((n - 3 * (n / 4)))
          read -r sx sy <<< "$(h2conn "$serve_pid" https://127.0.0.1:19482/ "$sm")"
          add serve "$sx" "$sm"; add serve-h2 "$sy" "$sm"
          read -r px py <<< "$(h2conn "$nginx_pid" http://127.0.0.1:19480/ "$sm")"
          add plain "$px" "$sm"; add plain-h2 "$py" "$sm"
          "${srv[@]}" "$bin" crypto limit --json --tls 1.3 --group x25519 --cert ecdsa-p256 --duration 250ms > "$work/limit.json"
          for kind in full resumed; do
            add "crypto-$kind" "$(limit_server_us "$work/limit.json" "$kind" %.3f)" 1
            add "hs-$kind" "$(limit_server_us "$work/limit.json" "$kind" %.3f measured_ns)" 1
            add "tk-$kind" "$(limit_tickets_us "$work/limit.json" "$kind" %.3f)" 1
          done
          add pplain "$(ffconn "$nginx_pid" 19480 plain busy "$sm")" "$sm"
          add pplain-sleep "$(ffconn "$nginx_pid" 19480 plain sleeping "$sm")" "$sm"
          for sh in "${shapes[@]}"; do
            add "f-$sh" "$(ffconn "${ff_pid[$sh]}" "${ff_port[$sh]}" "$sh" busy "$sm")" "$sm"
          done
        done
        per() { awk -v t="${tot[$1]}" -v n="$n" 'BEGIN { printf "%.1f", t / n }'; }
        echo "$r serve $(per serve) $(per serve-h2) $l" >> "$work/rows"
        echo "$r plain $(per plain) $(per plain-h2) $l" >> "$work/rows"
        echo "$r crypto $(awk -v t="${tot[crypto-full]}" 'BEGIN { printf "%.1f", t / 4 }') 0 $l" >> "$work/rows"
        echo "$r crypto1.3r $(awk -v t="${tot[crypto-resumed]}" 'BEGIN { printf "%.1f", t / 4 }') 0 $l" >> "$work/rows"
        echo "$r hs $(awk -v t="${tot[hs-full]}" 'BEGIN { printf "%.1f", t / 4 }') 0 $l" >> "$work/rows"
        echo "$r hs1.3r $(awk -v t="${tot[hs-resumed]}" 'BEGIN { printf "%.1f", t / 4 }') 0 $l" >> "$work/rows"
        echo "$r tk1.3f $(awk -v t="${tot[tk-full]}" 'BEGIN { printf "%.1f", t / 4 }') 0 $l" >> "$work/rows"
        echo "$r tk1.3r $(awk -v t="${tot[tk-resumed]}" 'BEGIN { printf "%.1f", t / 4 }') 0 $l" >> "$work/rows"
        for key in pplain pplain-sleep $(printf 'f-%s ' "${shapes[@]}"); do
          echo "$r $key $(per "$key") 0 $l" >> "$work/rows"
        done ;;
      client)
        # h2load's own CPU in one whole run (one process start-up, as tlsperf load's),
        # right before tlsperf load's, against the same server.
        read -r _ hy <<< "$(h2conn "$serve_pid" https://127.0.0.1:19482/)"
        echo "$r h2client $hy 0 $l" >> "$work/rows"
        f0=$(stat_field 19492 full)
        "${cli[@]}" "$bin" load https://127.0.0.1:19482/ --new-conn --resume off --no-verify-cache -n "$n" -c 50 --http1 \
          --ciphers "$load_cipher" --cacert "$work/pki/root.pem" --json -q > "$work/load.json"
        [ "$(json_get "$work/load.json" "['options']['ciphers']")" = "['$load_cipher']" ] || fail "tlsperf load: not held to $load_cipher"
        f1=$(stat_field 19492 full)
        [ "$(json_get "$work/load.json" "['handshakes']['kinds'].get('full', 0)")" = "$n" ] || fail "tlsperf load: not $n full handshakes"
        [ "$(json_get "$work/load.json" "['handshakes']['chains_verified']")" = "$n" ] || fail "tlsperf load: not $n chains verified"
        [ "$(json_get "$work/load.json" "['handshakes']['chains_from_cache']")" = 0 ] || fail "tlsperf load: chains from cache"
        [ $((f1 - f0)) = "$n" ] || fail "serve counted $((f1 - f0)) full handshakes for tlsperf load's $n"
        out=$(printf '%.1f' "$(json_get "$work/load.json" "['generator']['cpu_us_per_handshake']")")
        echo "$r load $out 0 $l" >> "$work/rows" ;;
      resume)
        for v in 1.3 1.2; do
          # TLS 1.2 resumes by session id against the stateful server; TLS 1.3 always by ticket.
          idkind=resumed-session-id; [ "$v" = 1.3 ] && idkind=resumed-ticket
          # Each run is followed by its floor's kernel and HTTP terms at the run's own pace:
          # with a busy client after a full run, with a busy and with a sleeping one after a
          # resumed run. The run's pace and tlsperf load's CPU use are rows of their own.
          for kind in ids tickets; do
            pid=$stateful_pid; port=19483; mport=19493; label=stateful; ck=$idkind
            [ "$kind" = tickets ] && { pid=$tickets_pid; port=19484; mport=19494; label=tickets; ck=resumed-ticket; }
            resume_rows "" "full$v-$label" "$pid" "$port" "$mport" "$v" "$kind" full
            echo "$r rf$v-$kind-full $(floor_at "tls$v-full" "$run_pace" busy) 0 $l" >> "$work/rows"
            resume_rows "" "res$v-$kind" "$pid" "$port" "$mport" "$v" "$kind" res "$ck" "$run_us"
            echo "$r rf$v-$kind-res $(floor_at "tls$v-resumed" "$run_pace" busy) 0 $l" >> "$work/rows"
            echo "$r rf$v-$kind-res-sleep $(floor_at "tls$v-resumed" "$run_pace" sleeping) 0 $l" >> "$work/rows"
            # nginx + OpenSSL, the same two runs, counted by nginx's own $ssl_session_reused:
            # what a mature server's resumption costs beside serve's (a reference, not a floor).
            nport=19478; [ "$kind" = tickets ] && nport=19479
            resume_rows n "nfull$v-$kind" "$nginx_pid" "$nport" "log:$work/nginx/$kind.log" "$v" "$kind" full
            resume_rows n "nres$v-$kind" "$nginx_pid" "$nport" "log:$work/nginx/$kind.log" "$v" "$kind" res "$ck" "$run_us"
          done
        done ;;
      keep)
        # 4 slices of K/4 s each per server, serve and base taking turns (the first of each
        # pair alternating), so that both are measured across the same seconds.
        declare -A kt=()
        for slice in 1 2 3 4; do
          keep_order=(serve ${base:+base})
          if [ $(((r + slice) % 2)) = 0 ] && [ -n "$base" ]; then keep_order=(base serve); fi
          for s in "${keep_order[@]}"; do
            p=19482; [ "$s" = base ] && p=19485
            "${cli[@]}" h2load --h1 -c 50 -t 1 -D "$(awk -v k="$k" 'BEGIN {printf "%dms", k * 250}')" --warm-up-time 300ms \
              "https://127.0.0.1:$p/" > "$work/keep.out" 2>&1
            grep -q " succeeded, 0 failed, 0 errored, 0 timeout" "$work/keep.out" || fail "keep-alive run against $s failed: $(tail -3 "$work/keep.out")"
            rps=$(awk '/^finished in/ {gsub(",","",$4); print $4}' "$work/keep.out")
            kt[$s]=$(awk -v t="${kt[$s]:-0}" -v x="$rps" 'BEGIN {printf "%.2f", t + x / 4}')
          done
        done
        for s in serve ${base:+base}; do echo "$r keep-$s ${kt[$s]} 0 $l" >> "$work/rows"; done ;;
    esac
    echo "$r $what $(steal_since "$t0" "$s0")" >> "$work/steal"
  done
done

# Every handshake h2load and tlsperf load made against the full-only serve was full.
full_after=$(stat_field 19492 full)
res_after=$(stat_field 19492 resumed)
[ $((res_after - res_before)) = 0 ] || fail "serve --resumption off counted $((res_after - res_before)) resumed handshakes"
# h2load -n N twice (serve's run, in slices, and the client comparison's), tlsperf load -n N
# and the 50 connections of each of the 4 keep-alive slices, every round.
expected=$((rounds * (3 * n + 4 * 50)))
[ $((full_after - full_before)) = "$expected" ] || fail "serve counted $((full_after - full_before)) full handshakes, expected $expected"

# nginx's own word: no request on the TLS server came over a reused session.
kill -QUIT "$nginx_master"; wait "$nginx_master" 2>/dev/null || true
reused=$(grep -c '^r$' "$work/nginx/reused.log" || true)
total=$(wc -l < "$work/nginx/reused.log")
[ "$reused" = 0 ] || fail "nginx resumed $reused of $total sessions"
[ "$total" = $((rounds * n + 300)) ] || fail "nginx logged $total requests, expected $((rounds * n + 300))"

# The median of the numbers on stdin, one per line ("-" when there are none); an even count's
# is the mean of the middle two, printed with FORMAT.
median() { # format
  sort -n | awk -v fmt="$1\n" '{a[NR]=$1} END {if (!NR) print "-"; else if (NR%2) print a[(NR+1)/2]; else printf fmt, (a[NR/2]+a[NR/2+1])/2}'
}
med() { awk -v k="$1" -v f="${2:-3}" '$2 == k {print $f}' "$work/rows" | median %.1f; }
rng() { awk -v k="$1" -v f="${2:-3}" '$2 == k {print $f}' "$work/rows" | sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%s–%s", lo, hi}'; }
loads() { awk -v k="$1" '$2 == k {print $NF}' "$work/rows" | paste -sd/ -; }
# Per-round ratio a/b (b's field f) then its median.
ratio() { # a b [scale-of-b-from-another-key]
  awk -v a="$1" -v b="$2" '$2 == a {x[$1] = $3} $2 == b {y[$1] = $3} END {for (r in x) if (y[r] > 0) printf "%.3f\n", x[r] / y[r]}' "$work/rows" | median %.3f
}
floor_ratio() { # serve ÷ (plain + crypto), per round
  awk '$2 == "plain" {p[$1] = $3} $2 == "crypto" {c[$1] = $3} $2 == "'"$1"'" {s[$1] = $3} END {for (r in s) printf "%.3f\n", s[r] / (p[r] + c[r])}' "$work/rows" | median %.3f
}

placement="servers on CPU 1, clients on CPU 0"; [ ${#srv[@]} = 0 ] && placement="placement left to the scheduler"
echo "# floor benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $placement, $rounds rounds alternating, N=$n)"
echo
echo "Load average (1 min) at each measurement, round by round, is given with each row."
echo
echo "| what | server CPU µs per connection (median) | range | h2load CPU µs per connection | load avg |"
echo "|---|---:|---|---:|---|"
echo "| nginx plain HTTP (kernel + HTTP floor) | $(med plain) | $(rng plain) | $(med plain 4) | $(loads plain) |"
echo "| server crypto of a full TLS 1.3 handshake (crypto limit, in-handshake) | $(med crypto) | $(rng crypto) | | $(loads crypto) |"
echo "| nginx + OpenSSL full TLS 1.3 | $(med nginx) | $(rng nginx) | $(med nginx 4) | $(loads nginx) |"
echo "| tlsperf serve --resumption off, full TLS 1.3 | $(med serve) | $(rng serve) | $(med serve 4) | $(loads serve) |"
[ -n "$base" ] && echo "| baseline ($base) serve, full TLS 1.3 | $(med base) | $(rng base) | $(med base 4) | $(loads base) |"
echo
echo "- crypto limit times each crypto call on the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID), as the servers' figures are CPU time"
echo "- floor = plain + crypto: $(awk -v p="$(med plain)" -v c="$(med crypto)" 'BEGIN {printf "%.1f", p + c}') µs; serve ÷ floor (per round, median): **$(floor_ratio serve)** (target ≤ 1.4)"
[ -n "$base" ] && echo "- baseline ÷ floor: $(floor_ratio base); serve ÷ baseline: $(ratio serve base)"
echo "- serve ÷ nginx full TLS 1.3: $(ratio serve nginx)"
echo
echo "## The floor at serve's pace: a TLS connection's flights without crypto (examples/flight_floor)"
echo
echo "Every row: server CPU µs per connection, $n connections started at $pace/s (h2load's rate against serve in the warm-up), at most 50 at once, by the flight client, which never sleeps (busy) but in the row \"sleeping client\" (not part of any floor)."
echo
echo "| server | flights (bytes: C client, S server) | median | range |"
echo "|---|---|---:|---|"
echo "| nginx plain HTTP | $(cut -d' ' -f2- "$work/plain.sizes") (response: nginx's own) | $(med pplain) | $(rng pplain) |"
echo "| nginx plain HTTP, sleeping client | the same | $(med pplain-sleep) | $(rng pplain-sleep) |"
for sh in "${shapes[@]}"; do
  echo "| bare epoll server, $sh | $(cut -d' ' -f2- "$work/$sh.sizes") | $(med "f-$sh") | $(rng "f-$sh") |"
done
echo
python3 - "$work/rows" "$work/figures" <<'PY'
import statistics, sys
rows = {}
# The figures the targets section reads (key value), written as they are printed.
figures = open(sys.argv[2], "a")
def fig(key, value):
    figures.write(f"{key} {value:.3f}\n")
    return value
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault(f[1], {})[f[0]] = float(f[2])
def each_round(fn):
    out = []
    for r in rows.get("serve", {}):
        try:
            out.append(fn(lambda k: rows[k][r]))
        except (KeyError, ZeroDivisionError, ValueError):
            pass
    return out
def per_round(fn):
    out = each_round(fn)
    return statistics.median(out) if out else float("nan")
# Kernel and HTTP of a connection with a shape's flights, at serve's pace: nginx's plain
# connection there, plus what the shape's flights cost the bare server over plain ones.
# It is a difference of measurements: a round where it comes out ≤ 0 (noise, e.g. steal in
# one of them) has no floor, and is left out (the targets section lists such rounds).
def kern(g, sh):
    k = g("pplain") + g("f-" + sh) - g("f-plain")
    if k <= 0:
        raise ValueError(sh)
    return k
f13 = lambda g: kern(g, "tls1.3-full") + g("crypto")
print(f"- floor at serve's pace, full TLS 1.3 = nginx plain at that pace + (TLS 1.3 flights − plain flights) + crypto: "
      f"{per_round(f13):.1f} µs; serve ÷ it (per round, median): **{fig('serve/pace', per_round(lambda g: g('serve') / f13(g))):.3f}** (target ≤ 1.4)")
# The same with rustls's whole in-memory server handshake (crypto limit's measured_ns: its
# parsing, state machine and buffers as well as its crypto) in the crypto's place: what a
# server built on rustls cannot go below; what serve spends above it is HTTP (hyper), the
# runtime (tokio), the socket I/O glue and serve's own code.
h13 = lambda g: kern(g, "tls1.3-full") + g("hs")
print(f"- the same with rustls's handshake in the crypto's place (crypto limit's in-memory server handshake, "
      f"{per_round(lambda g: g('hs')):.1f} µs, of which crypto {per_round(lambda g: g('crypto')):.1f}): "
      f"{per_round(h13):.1f} µs; serve ÷ it (per round, median): {per_round(lambda g: g('serve') / h13(g)):.3f}")
fig("rustls/pace", per_round(lambda g: h13(g) / f13(g)))
print(f"- the bare server ÷ nginx, plain flights, same client and pace: {per_round(lambda g: g('f-plain') / g('pplain')):.3f}"
      " (the floor keeps nginx's plain connection as its base and adds only what the TLS flights cost the bare server over plain ones)")
# The issue's own floor (nginx plain under h2load, at h2load's much higher plain rate, +
# crypto) leaves out two costs no server at serve's rate avoids: the pace, and the TLS
# flights. Held against it, the floor at serve's pace shows how much of the 1.4 budget
# these two take before serve spends anything of its own.
literal = lambda g: g("plain") + g("crypto")
print(f"- the issue's floor (nginx plain under h2load at its own rate + crypto): {per_round(literal):.1f} µs; "
      f"what it leaves out, per round, median: the pace (nginx plain at serve's pace − under h2load) "
      f"{per_round(lambda g: g('pplain') - g('plain')):+.1f} µs, the TLS 1.3 flights over plain ones on the bare server "
      f"{per_round(lambda g: g('f-tls1.3-full') - g('f-plain')):+.1f} µs")
print(f"- **the floor at serve's pace ÷ the issue's floor: {per_round(lambda g: f13(g) / literal(g)):.3f}** "
      f"(per round: {', '.join(f'{x:.3f}' for x in each_round(lambda g: f13(g) / literal(g)))}); "
      "a server at serve's pace that spent nothing beyond the bare server's flights and the crypto would stand there against "
      f"the issue's floor; serve ÷ the issue's floor: {fig('serve/literal', per_round(lambda g: g('serve') / literal(g))):.3f}")
fig("rustls/literal", per_round(lambda g: h13(g) / literal(g)))
print("- the resumption floors are taken at the resumption runs' own pace: see the resumption table")
PY
echo "- full handshakes checked: serve /stats counted $((full_after - full_before)) full and $((res_after - res_before)) resumed for the $expected connections of h2load, tlsperf load and the keep-alive runs; nginx logged \$ssl_session_reused = r for $reused of $total requests"
echo
echo "## Generator CPU per full handshake (against tlsperf serve --resumption off)"
echo
echo "| generator | CPU µs per handshake (median) | range |"
echo "|---|---:|---|"
echo "| h2load --h1 -c 50 -t 1 (verifies nothing; negotiated $h2_cipher) | $(med h2client) | $(rng h2client) |"
echo "| tlsperf load --new-conn --resume off --no-verify-cache -c 50 --ciphers $load_cipher (every chain verified) | $(med load) | $(rng load) |"
echo
gen=$(awk '$2 == "h2client" {h[$1] = $3} $2 == "load" {t[$1] = $3} END {for (r in t) printf "%.3f\n", t[r] / h[r]}' "$work/rows" | median %.3f)
echo "generator $gen" >> "$work/figures"
echo "- tlsperf load ÷ h2load (per round, median): **$gen** (target ≤ 0.5)"
echo
echo "## Resumption: server CPU µs per connection, same client (tlsperf load --new-conn -c 8 -n $rn, AES-128-GCM-SHA256)"
echo
# The floor's resumed ÷ full for one server and version, per round, then the median: each
# side is its run's kernel and HTTP floor at that run's pace (floor_at) + `crypto limit`'s
# server crypto for the kind (TLS 1.3's from serve's slices, TLS 1.2's from the crypto step).
# With TERMS hs, rustls's whole in-memory server handshake (crypto limit's measured_ns)
# takes the crypto's place: the floor of a server built on rustls, which must at least run
# rustls's handshake, before any HTTP, runtime or code of its own. Both sides of an ids
# (session cache) ratio leave out crypto limit's ticket crypto (limit_tickets_us).
floor_terms() { # version ids|tickets crypto|hs -> "full resumed ticket-full ticket-resumed" row keys
  local cf=crypto cr=crypto1.3r tf=tk1.3f tr=tk1.3r
  [ "$1" = 1.2 ] && { cf=crypto1.2f; cr=crypto1.2r; tf=tk1.2f; tr=tk1.2r; }
  [ "$3" = hs ] && { cf=hs${cf#crypto}; cr=hs${cr#crypto}; }
  [ "$2" = tickets ] && { tf=none; tr=none; }
  echo "$cf $cr $tf $tr"
}
floor_res() { # version ids|tickets -sleep|"" crypto|hs
  local cf cr tf tr
  read -r cf cr tf tr <<< "$(floor_terms "$1" "$2" "$4")"
  awk -v f="rf$1-$2-full" -v s="rf$1-$2-res$3" -v cf="$cf" -v cr="$cr" -v tf="$tf" -v tr="$tr" \
    '$2 == f {a[$1] = $3} $2 == s {b[$1] = $3} $2 == cf {x[$1] = $3} $2 == cr {y[$1] = $3}
     $2 == tf {u[$1] = $3} $2 == tr {v[$1] = $3}
     END {for (r in a) if (r in b && r in x && r in y && a[r] > 0 && b[r] > 0) printf "%.3f\n", (b[r] + y[r] - v[r]) / (a[r] + x[r] - u[r])}' "$work/rows" \
    | median %.3f
}
# serve's resumed handshake ÷ its own floor at the run's pace (busy client), per round, then
# the median: the full handshake's standard (≤ 1.4 × its floor) held to the resumed one. A
# ratio of ratios (resumed ÷ full against the floor's) bounds nothing by itself: a server
# whose full handshakes cost more over their floor than its resumed ones (nginx's do, by far)
# comes out below the floor's resumed ÷ full.
res_over_floor() { # version ids|tickets crypto|hs
  local cr tr
  read -r _ cr _ tr <<< "$(floor_terms "$1" "$2" "$3")"
  awk -v s="res$1-$2" -v k="rf$1-$2-res" -v cr="$cr" -v tr="$tr" \
    '$2 == s {a[$1] = $3} $2 == k {b[$1] = $3} $2 == cr {y[$1] = $3} $2 == tr {v[$1] = $3}
     END {for (r in a) if (r in b && r in y && b[r] > 0) printf "%.3f\n", a[r] / (b[r] + y[r] - v[r])}' "$work/rows" \
    | median %.3f
}
echo "| server | version | full | resumed | resumed ÷ full (per round, median) | the floor's resumed ÷ full at the same paces: busy / sleeping client in the resumed run | the same with rustls's handshake in the crypto's place: busy / sleeping | resumed ÷ its own floor (busy client): kernel + crypto / with rustls's handshake | handshakes/s: full run, resumed run | tlsperf load's CPU use: full run, resumed run (%) | resumed per run |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for v in 1.3 1.2; do
  for kind in ids tickets; do
    label=stateful; name="stateful ($([ "$v" = 1.2 ] && echo session ids || echo stateful tickets))"
    [ "$kind" = tickets ] && { label=tickets; name=tickets; }
    rr=$(ratio "res$v-$kind" "full$v-$label"); rhs=$(floor_res "$v" "$kind" "" hs); rof=$(res_over_floor "$v" "$kind" hs)
    printf 'res%s-%s %s\nrustls-res%s-%s %s\nown-res%s-%s %s\n' "$v" "$kind" "$rr" "$v" "$kind" "$rhs" "$v" "$kind" "$rof" >> "$work/figures"
    echo "| serve --resumption $name | $v | $(med "full$v-$label") | $(med "res$v-$kind") | $rr | $(floor_res "$v" "$kind" "" crypto) / $(floor_res "$v" "$kind" -sleep crypto) | $rhs / $(floor_res "$v" "$kind" -sleep hs) | $(res_over_floor "$v" "$kind" crypto) / $rof | $(med "pace$v-$kind-full"), $(med "pace$v-$kind-res") | $(med "busy$v-$kind-full"), $(med "busy$v-$kind-res") | $(med "res$v-$kind" 4) |"
    nname="session cache ($([ "$v" = 1.2 ] && echo session ids || echo stateful tickets))"; [ "$kind" = tickets ] && nname=tickets
    echo "| nginx + OpenSSL, $nname | $v | $(med "nfull$v-$kind") | $(med "nres$v-$kind") | $(ratio "nres$v-$kind" "nfull$v-$kind") | (a reference, not a floor) | | | $(med "npace$v-$kind-full"), $(med "npace$v-$kind-res") | $(med "nbusy$v-$kind-full"), $(med "nbusy$v-$kind-res") | $(med "nres$v-$kind" 4) |"
  done
done
echo
echo "- serve ÷ nginx, same version, kind and client (per round, median): resumed TLS 1.3 $(ratio res1.3-ids nres1.3-ids) (stateful) / $(ratio res1.3-tickets nres1.3-tickets) (tickets), TLS 1.2 $(ratio res1.2-ids nres1.2-ids) (session ids) / $(ratio res1.2-tickets nres1.2-tickets) (tickets); full TLS 1.3 $(ratio full1.3-stateful nfull1.3-ids) / $(ratio full1.3-tickets nfull1.3-tickets), TLS 1.2 $(ratio full1.2-stateful nfull1.2-ids) / $(ratio full1.2-tickets nfull1.2-tickets). nginx's own \$ssl_session_reused counted every run's full and resumed handshakes as tlsperf load did"
echo "- the floor of each run: nginx plain HTTP + (the shape's flights − plain flights on the bare server), all three at that run's handshakes/s with at most 8 connections at once (the flight client busy after a full run, busy / sleeping after a resumed one), + \`crypto limit\`'s server crypto for a full or a resumed handshake; median kernel and HTTP floor (no crypto) per connection, µs: TLS 1.3 full $(med rf1.3-ids-full) / resumed $(med rf1.3-ids-res), TLS 1.2 full $(med rf1.2-ids-full) / resumed by session id $(med rf1.2-ids-res) / by ticket $(med rf1.2-tickets-res); server crypto (crypto limit), µs: TLS 1.3 full $(med crypto) / resumed $(med crypto1.3r), TLS 1.2 full $(med crypto1.2f) / resumed $(med crypto1.2r); rustls's whole in-memory server handshake (crypto limit's measured_ns, its crypto included; resumed by ticket), µs: TLS 1.3 full $(med hs) / resumed $(med hs1.3r), TLS 1.2 full $(med hs1.2f) / resumed $(med hs1.2r); of these, ticket crypto (left out of the session-cache floors), µs: TLS 1.3 full $(med tk1.3f) / resumed $(med tk1.3r), TLS 1.2 full $(med tk1.2f) / resumed $(med tk1.2r)"
echo
echo "## Keep-alive and memory"
echo
echo "| server | keep-alive req/s (h2load --h1 -c 50, 4 slices of $(awk -v k="$k" 'BEGIN {print k / 4}') s per round, median) | range | RSS KiB per idle TLS connection (5,000 held) |"
echo "|---|---:|---|---:|"
echo "| serve | $(med keep-serve) | $(rng keep-serve) | ${mem_serve#* } |"
if [ -n "$base" ]; then
  echo "| baseline | $(med keep-base) | $(rng keep-base) | ${mem_base#* } |"
  echo
  keep=$(ratio keep-serve keep-base)
  echo "- serve ÷ baseline keep-alive req/s (per round, median): $keep (must stay ≥ 0.95)"
fi
echo
echo "## Issue 20's targets in this run"
echo
# Each target held to its limit. Beside it, where a server built on rustls would stand if it
# spent nothing beyond rustls's own handshake and the kernel's cost of the same flights at the
# same pace (the floors with rustls's handshake in the crypto's place, above). A cost target
# that this column misses cannot be met in this run by any server built on rustls; a resumed
# ÷ full target that it misses, only by one whose full handshakes cost more over their floor
# than its resumed ones (a ratio is lowered by a dearer full handshake as well as by a
# cheaper resumed one).
fig_of() { awk -v k="$1" '$1 == k {v = $2} END {print v}' "$work/figures"; }
target_row() { # what <=|>= limit value [rustls-floor]
  local met
  met=$(awk -v v="$4" -v op="$2" -v l="$3" 'BEGIN {
    if (v !~ /^[0-9.]+$/) print "no figure"
    else if ((op == "<=" && v + 0 <= l + 0) || (op == ">=" && v + 0 >= l + 0)) print "**yes**"
    else print "no" }')
  echo "| $1 | $([ "$2" = "<=" ] && echo ≤ || echo ≥) $3 | $4 | ${5:-—} | $met |"
}
echo "| target | limit | this run | a server built on rustls, at its floor | met |"
echo "|---|---:|---:|---:|---|"
target_row "server CPU per full TLS 1.3 handshake ÷ the issue's floor (nginx plain under h2load at its own rate + crypto)" "<=" 1.4 "$(fig_of serve/literal)" "$(fig_of rustls/literal)"
target_row "the same ÷ the floor at serve's pace (nginx plain at serve's pace + the TLS 1.3 flights + crypto)" "<=" 1.4 "$(fig_of serve/pace)" "$(fig_of rustls/pace)"
target_row "TLS 1.3 resumed ÷ full, stateful tickets" "<=" 0.8 "$(fig_of res1.3-ids)" "$(fig_of rustls-res1.3-ids)"
target_row "TLS 1.3 resumed ÷ full, tickets" "<=" 0.8 "$(fig_of res1.3-tickets)" "$(fig_of rustls-res1.3-tickets)"
target_row "TLS 1.2 resumed ÷ full, session ids" "<=" 0.35 "$(fig_of res1.2-ids)" "$(fig_of rustls-res1.2-ids)"
target_row "TLS 1.2 resumed ÷ full, tickets" "<=" 0.35 "$(fig_of res1.2-tickets)" "$(fig_of rustls-res1.2-tickets)"
target_row "resumed ÷ its own floor with rustls's handshake, the largest of the four kinds above (proposed in their place)" "<=" 1.4 \
  "$(awk '$1 ~ /^own-res/ && $2 ~ /^[0-9.]+$/ {if ($2 > m) m = $2} END {if (m) printf "%.3f", m}' "$work/figures")" 1.000
target_row "tlsperf load ÷ h2load, client CPU per full handshake (every chain verified)" "<=" 0.5 "$gen"
[ -n "$base" ] && target_row "keep-alive requests/s, serve ÷ baseline" ">=" 0.95 "$keep"
target_row "resident memory per idle TLS connection, KiB" "<=" 12 "${mem_serve#* }"
echo
echo "- each ratio is the median of its per-round ratios (the tables above); memory is one measurement, on the fresh server"
# A floor's kernel part is a difference of measurements (nginx plain + the shape's flights −
# plain flights): where noise drives it to ≤ 0, that round has no floor and its ratios are
# left out of the medians above.
no_floor=$(awk '$2 == "pplain" {p[$1] = $3} $2 == "f-plain" {a[$1] = $3} $2 == "f-tls1.3-full" {s[$1] = $3}
  $2 ~ /^rf/ && $3 <= 0 {printf "%s%s in round %s (%s µs)", sep, $2, $1, $3; sep = "; "}
  END {for (r in p) if (p[r] + s[r] - a[r] <= 0) {printf "%sthe full TLS 1.3 floor at serve'"'"'s pace in round %s (%.1f µs)", sep, r, p[r] + s[r] - a[r]; sep = "; "}}' "$work/rows")
echo "- floors whose kernel part came out ≤ 0 (no floor: their rounds are left out of the ratios that use them): ${no_floor:-none}"
echo "- every handshake this run calls full was full, and every one it calls resumed was resumed, by the servers' own counts (serve's /stats, nginx's \$ssl_session_reused): the run stops with an error otherwise"
echo "- a ratio of resumed ÷ full below the rustls floor's own is no gain: it comes from full handshakes that cost more over their floor than the resumed ones (see the resumption table's \"resumed ÷ its own floor\")"
echo
echo "## Steal: the hypervisor's share of both CPUs during each measurement (%, /proc/stat)"
echo
echo "A round with much steal was measured on a CPU shared with other guests: its figures,"
echo "and the ratios taken in it, are the least trustworthy of the run."
echo
echo "| round | $(awk '$1 == 1 {print $2}' "$work/steal" | paste -sd'|' - | sed 's/|/ | /g') |"
echo "|---|$(awk '$1 == 1 {printf "---:|"}' "$work/steal")"
for r in $(seq "$rounds"); do
  echo "| $r | $(for w in $(awk '$1 == 1 {print $2}' "$work/steal"); do awk -v r="$r" -v w="$w" '$1 == r && $2 == w {print $3}' "$work/steal"; done | paste -sd'|' - | sed 's/|/ | /g') |"
done
echo
echo "<details><summary>rows (round, what, value, second value, load average)</summary>"
echo
echo '```'
cat "$work/rows"
echo '```'
echo "</details>"
