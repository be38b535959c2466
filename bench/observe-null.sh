#!/usr/bin/env bash
# observe --window's false alarms (issue 53, "No false alarms"): a steady load with nothing
# changed, for MINUTES, and the anomaly events the agent raised at its default margins.
#   - the tests' Go server (tests/go/tlsserver, no delay) on 127.0.0.1:PORT;
#   - `tlsperf load --new-conn --resume off --rate RATE` against it for the whole run;
#   - `tlsperf observe --interface lo --port PORT --probes --pid SERVER --window 10s
#     --windows FILE` beside it, every setting at its default.
# Prints the anomaly events (there should be none), the windows judged, the load average
# over the run (every 10 s), and how long after its window's end each window record
# appeared (median, p90, max; read by polling the file every 50 ms). Replay the windows
# file at other settings with `cargo run --example rejudge -- FILE` (KEEP=DIR keeps it).
# Usage: bench/observe-null.sh [MINUTES=30]; TLSPERF=PATH (default target/release/tlsperf),
# PORT (default 18493), RATE (default 40). Needs root, go, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
[[ "$minutes" =~ ^[1-9][0-9]{0,3}$ ]] || { echo "MINUTES=$minutes: 1 to 9999" >&2; exit 2; }
bin="${TLSPERF:-target/release/tlsperf}"
[ -x "$bin" ] || { echo "no $bin: cargo build --release first (or TLSPERF=PATH)" >&2; exit 1; }
for t in go python3; do command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }; done
port="${PORT:-18493}"
rate="${RATE:-40}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$work"/windows.jsonl "$work"/appeared "$work"/observe.err "$work"/load.txt "$KEEP"/ 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
(cd tests/go && go build -o "$work/tlsserver" ./tlsserver)
"$bin" pki init "$work/pki" -q
secs=$((minutes * 60))
"$work/tlsserver" -addr "127.0.0.1:$port" -cert "$work/pki/server-chain.pem" -key "$work/pki/server.key" \
  -duration "$((secs + 120))s" > "$work/server.out" 2> "$work/server.err" &
server=$!
pids+=("$server")
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" 2>/dev/null && break; sleep 0.1; done
# The reader: when each window line appeared (the wall clock, s).
python3 - "$work/windows.jsonl" "$work/appeared" "$secs" <<'PY' &
import json, os, sys, time
path, out, secs = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen, end = 0, time.time() + secs + 30
with open(out, "w") as o:
    while time.time() < end:
        try:
            lines = open(path).read().split("\n")[:-1]
        except FileNotFoundError:
            lines = []
        for line in lines[seen:]:
            o.write(f"{time.time():.3f} {line}\n"); o.flush()
        seen = len(lines)
        time.sleep(0.05)
PY
pids+=($!)
"$bin" observe --interface lo --port "$port" --probes --pid "$server" --window 10s \
  --windows "$work/windows.jsonl" -d "$((secs + 15))s" > /dev/null 2> "$work/observe.err" &
observer=$!
pids+=("$observer")
for _ in $(seq 300); do grep -q "probing\|capturing" "$work/observe.err" 2>/dev/null && break; sleep 0.1; done
(while true; do cut -d' ' -f1 /proc/loadavg >> "$work/load.txt"; sleep 10; done) &
pids+=($!)
"$bin" load "https://localhost:$port/" --cacert "$work/pki/root.pem" --new-conn --resume off \
  --rate "$rate" -d "${secs}s" -q --out "$work/load.json" > /dev/null 2> "$work/load.err" || true
sleep 14
python3 - "$work/appeared" "$work/load.txt" <<'PY'
import json, sys
lags, events, judged, windows = [], [], 0, 0
for line in open(sys.argv[1]):
    t, rec = line.split(" ", 1)
    r = json.loads(rec)
    if r.get("type") == "window":
        windows += 1
        lags.append(float(t) - r["end_ns"] / 1e9)
    elif r.get("type") == "anomaly":
        events.append("%s %s %s %s: %.1f ms (baseline %.1f ms), moved %s, CPU pressure %s (before %s)" % (
            r["state"], r["series"]["view"], r["quantile"], r["phase"], r["now_ns"] / 1e6,
            r["baseline_ns"] / 1e6, r.get("moved"), r.get("cpu_pressure"), r.get("cpu_pressure_before")))
loads = sorted(float(x) for x in open(sys.argv[2]))
def q(v, p): return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")
lags.sort()
print(f"windows: {windows}; anomaly events (starts and ends): {len(events)}")
for e in events: print("  " + e)
print(f"window record lag after the window's end: median {q(lags, .5):.2f} s, p90 {q(lags, .9):.2f} s, max {lags[-1] if lags else float('nan'):.2f} s ({len(lags)} windows)")
print(f"load average (1 min, every 10 s): median {q(loads, .5):.2f}, max {loads[-1] if loads else float('nan'):.2f}")
PY
