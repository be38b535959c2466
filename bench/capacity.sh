#!/usr/bin/env bash
# tlsperf capacity (issue 21) against `tlsperf serve --threads 1 --resumption off` on
# loopback: two searches in a row (do they agree within 10%?), then `load --rate` at
# 0.8× and 1.5× the first answer for 10 s each (does the objective hold at 0.8× and
# break at 1.5×?), and each search's wall time (target: ≤ 2 minutes). Every figure comes
# from the runs printed; the machine's load average is recorded with them (on a machine
# shared with builds, a p99 objective's tail is partly the machine's: the searches may
# then end generator-bound, which is reported, not hidden).
#
# With two or more CPUs the server runs on the last one and the generator (capacity and
# load) on the first (taskset), so that neither takes the other's CPU; PIN=0 leaves
# them unpinned. WAIT_LOAD=X first waits (at most 15 minutes) for the 1-minute load
# average to fall below X.
#
# Usage: [SLO=p99=30ms] [BIN=path/to/tlsperf] [CERT=ecdsa-p256] [PIN=1] [WAIT_LOAD=1.5] [NICE=-10] [KEEP=1]
#        bench/capacity.sh
# BIN defaults to a release build (built here). Prints a markdown report on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
slo="${SLO:-p99=30ms}"
cert="${CERT:-ecdsa-p256}"
# shellcheck source=bench/capacity-setup.sh
. bench/capacity-setup.sh
port=18471
stat_cpu=cpu${server_cpu}
# "steal total" jiffies of the server's CPU (the machine's when not pinned), from /proc/stat.
steal_ticks() { awk -v c="$stat_cpu" '$1 == c {print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
if [ -n "${WAIT_LOAD:-}" ]; then
  for _ in $(seq 180); do
    python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) < float('$WAIT_LOAD') else 1)" && break
    sleep 5
  done
fi
"${srv[@]}" "$bin" serve --listen "127.0.0.1:$port" --threads 1 --resumption off --gen-cert "$cert" \
  --write-ca "$work/ca.pem" --duration 1h -q > /dev/null &
spid=$!
pids+=("$spid")
for _ in $(seq 50); do [ -s "$work/ca.pem" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
url="https://localhost:$port/"

echo "# tlsperf capacity: agreement of two searches, and load at 0.8× / 1.5×"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- binary: $bin ($("$bin" --version)); server: tlsperf serve --threads 1 --resumption off --gen-cert $cert (same binary)"
echo "- search: tlsperf capacity URL --slo $slo --new-conn --server-pid (defaults otherwise: start 100/s, ×2, a 90% interval within 20%); $pinning"
echo
echo "| run | outcome | capacity/s | interval/s | steps | wall s | load avg after |"
echo "|---:|---|---:|---|---:|---:|---|"
caps=()
for run in 1 2; do
  t0=$(date +%s)
  code=0
  "${gen[@]}" "$bin" capacity "$url" --cacert "$work/ca.pem" --slo "$slo" --new-conn --server-pid "$spid" \
    --out "$work/cap$run.json" -q || code=$?
  t1=$(date +%s)
  row=$(python3 - "$work/cap$run.json" "$run" "$((t1 - t0))" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
iv = d["interval_per_s"]
cap = d["capacity_per_s"]
print(f"| {sys.argv[2]} | {d['outcome']} | {cap if cap is not None else '-'} | {iv if iv else '-'} | {len(d['steps'])} | {sys.argv[3]} | {sys.argv[4]} |")
PY
)
  echo "$row"
  caps+=("$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['capacity_per_s']; print(c if c is not None else '')" "$work/cap$run.json")")
  echo "  (exit $code: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['message'])" "$work/cap$run.json"); wall $((t1 - t0)) s, target ≤ 120 s: $([ $((t1 - t0)) -le 120 ] && echo met || echo 'NOT met'))"
  echo "  (disputed band: $(python3 -c "import json,sys; b=json.load(open(sys.argv[1])).get('disputed_per_s'); print(f'{b[0]:g}–{b[1]:g}/s' if b else 'none, the steps agree')" "$work/cap$run.json"))"
  # The run's steps, so that a disagreement can be traced to the steps that decided it.
  python3 - "$work/cap$run.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = lambda x, p="%.1f": p % x if x is not None else "-"
steps = "; ".join(
    f"{s['index']} {s['kind']} {s['offered_per_s']:g}/s {s['verdict']} p99 {f(s['p99_ms'])} ms"
    + (f" srv {f(s['server_cpu_us_per_request'], '%.0f')} µs" if s.get("server_cpu_us_per_request") else "")
    + (f" steal {100 * s['steal']:.1f}%" if s.get("steal") is not None else "")
    for s in d["steps"])
print(f"  steps: {steps}")
PY
done
echo
if [ -n "${caps[0]}" ] && [ -n "${caps[1]}" ]; then
  python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'Agreement: run 2 ÷ run 1 = {b/a:.3f} ({abs(b/a-1)*100:.1f}% apart; target ≤ 10%: ' + ('met' if abs(b/a-1) <= 0.10 else 'NOT met') + ')')" "${caps[0]}" "${caps[1]}"
  echo
  echo "| load --rate | × answer | completed | errors | corrected p50 ms | p99 ms | p99.9 ms | pacing p99 ms | steal on the server's CPU | objective ($slo) | percentile ÷ bound | expected |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"
  for k in 0.8 1.5; do
    rate=$(python3 -c "print(round(float('${caps[0]}') * $k))")
    # Slots as capacity sizes them: 2 × rate × the first bound.
    c=$(python3 -c "import math,re; b=re.match(r'p[0-9.]+=([0-9.]+)(ms|s)', '$slo'.split(',')[0]); v=float(b.group(1))/(1000 if b.group(2)=='ms' else 1); print(max(4, math.ceil($rate * 2 * v)))")
    s0=$(steal_ticks)
    "${gen[@]}" "$bin" load "$url" --cacert "$work/ca.pem" --new-conn --rate "$rate" -c "$c" -d 10s --json -q > "$work/load.json" || true
    s1=$(steal_ticks)
    python3 - "$work/load.json" "$rate" "$k" "$slo" "$s0" "$s1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
q = d["latency_corrected"]["quantiles"]
ms = lambda ns: "%.1f" % (ns / 1e6)
pl = d.get("pacing_lateness")
slo = sys.argv[4]
pct, bound = slo.split(",")[0].split("=")
bound_ms = float(bound[:-2]) if bound.endswith("ms") else float(bound[:-1]) * 1e3
key = {"p50": "p50_ns", "p90": "p90_ns", "p99": "p99_ns", "p99.9": "p999_ns"}[pct]
held = q[key] / 1e6 <= bound_ms and d["requests"]["failed"] == 0
want = "held" if float(sys.argv[3]) < 1 else "broken"
s0, s1 = [list(map(int, a.split())) for a in sys.argv[5:7]]
steal = f"{100 * (s1[0] - s0[0]) / max(1, s1[1] - s0[1]):.1f}%"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {d['requests']['completed']} | {d['requests']['failed']} | {ms(q['p50_ns'])} | {ms(q['p99_ns'])} | {ms(q['p999_ns'])} | {ms(pl['quantiles']['p99_ns']) if pl else '-'} | {steal} | {'held' if held else 'broken'} | {q[key] / 1e6 / bound_ms:.2f} | {want}: {'met' if ('held' if held else 'broken') == want else 'NOT met'} |")
PY
  done
else
  echo "No capacity estimated in both runs: no agreement or 0.8×/1.5× check to report."
fi
