#!/usr/bin/env bash
# `tlsperf observe --window` as an agent that runs for weeks (issue 53, "Bounded"): its
# resident memory and CPU over a long run at a high handshake rate with many distinct SNIs
# and short-lived client processes.
#   - `tlsperf serve` on 127.0.0.1 (a throwaway PKI; any SNI is answered);
#   - `tlsperf observe --interface lo --port P --window 10s --windows FILE` (and with
#     PROBES=1 `--probes --pid SERVE_PID`);
#   - a `tlsperf load --new-conn` as fast as it goes (RATE=R to pace it) for the run, and
#     beside it a loop of short-lived `openssl s_client` processes, each with a new SNI
#     (h1.test … h10000.test, round and round);
#   - every 10 s observe's RSS (/proc/PID/status VmRSS) and CPU (utime + stime);
#   - each line of the windows file as it appears (a reader polling it every 50 ms).
# Prints the RSS at 5 minutes, every 5 minutes after, and at the end (growth after the
# first 5 minutes, the issue's target: at most 5%), observe's CPU per handshake (its CPU
# ÷ the handshakes its windows counted), and how long after its window's end each window
# record appeared (the target: within 2 s). Every process it starts is stopped on every
# exit.
# Usage: bench/observe-agent.sh [MINUTES]   (default 30); TLSPERF=PATH (default
# target/release/tlsperf), PORT=P (default 18473); KEEP=DIR copies the samples, the windows and observe's
# result there. Needs root, openssl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-30}"
bin="${TLSPERF:-target/release/tlsperf}"
[ -x "$bin" ] || { echo "no $bin: cargo build --release first (or TLSPERF=PATH)" >&2; exit 1; }
for t in openssl python3; do command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }; done
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
port="${PORT:-18473}"
"$bin" pki init "$work/pki" -q
"$bin" serve --listen "127.0.0.1:$port" --cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" -q >/dev/null 2>"$work/serve.err" &
serve=$!
pids+=("$serve")
sleep 1
extra=()
[ "${PROBES:-0}" = 1 ] && extra=(--probes --pid "$serve")
"$bin" observe --interface lo --port "$port" --window 10s --windows "$work/w.jsonl" \
  "${extra[@]}" --out "$work/o.json" -q 2>"$work/observe.err" &
obs=$!
pids+=("$obs")
# The instant each window line appears, against its window's end.
python3 - "$work/w.jsonl" "$work/lag" <<'EOF2' &
import json, os, sys, time
path, out = sys.argv[1], open(sys.argv[2], "w", buffering=1)
while not os.path.exists(path):
    time.sleep(0.05)
f, buf = open(path), ""
while True:
    chunk = f.read()
    if not chunk:
        time.sleep(0.05)
        continue
    buf += chunk
    *lines, buf = buf.split("\n")
    now = time.time_ns()
    for l in lines:
        v = json.loads(l)
        if v.get("type") == "window":
            out.write(f"{v['end_ns']} {(now - v['end_ns']) / 1e9:.3f}\n")
EOF2
pids+=("$!")
sleep 3
rate=()
[ -n "${RATE:-}" ] && rate=(--rate "$RATE")
"$bin" load "https://127.0.0.1:$port/" --new-conn --resume off -c 2 "${rate[@]}" \
  -d "${minutes}m" --sni localhost --cacert "$work/pki/root.pem" -q --out "$work/load.json" \
  >/dev/null 2>"$work/load.err" &
load=$!
pids+=("$load")
(
  i=0
  end=$((SECONDS + minutes * 60))
  while [ $SECONDS -lt $end ]; do
    i=$(( i % 10000 + 1 ))
    timeout 5 openssl s_client -connect "127.0.0.1:$port" -servername "h$i.test" \
      </dev/null >/dev/null 2>&1 || true
  done
) &
pids+=("$!")
start=$SECONDS
: > "$work/samples"
while kill -0 "$load" 2>/dev/null; do
  echo "$((SECONDS - start)) $(awk '/VmRSS/{print $2}' "/proc/$obs/status") $(awk '{print $14 + $15}' "/proc/$obs/stat")" >> "$work/samples"
  sleep 10
done
kill -INT "$obs"
wait "$obs" || true
sleep 0.5
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP" && cp "$work/samples" "$work/w.jsonl" "$work/lag" "$work/o.json" "$work/observe.err" "$KEEP/" || true
fi
python3 - "$work/samples" "$work/w.jsonl" "$(getconf CLK_TCK)" "$work/lag" <<'EOF'
import json, sys
samples = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
tck = int(sys.argv[3])
at5 = next((s for s in samples if s[0] >= 300), samples[0])
last = samples[-1]
print("observe RSS every 5 minutes: " + ", ".join(
    f"{s[0]} s {s[1]/1024:.1f} MiB" for s in samples if s[0] % 300 < 10))
# The last window (closed by Ctrl-C, not by the clock) left out.
lags = sorted(float(l.split()[1]) for l in open(sys.argv[4]).readlines()[:-1] if l.strip())
if lags:
    print(f"window record after its window's end: median {lags[len(lags)//2]:.2f} s, "
          f"p90 {lags[int(len(lags)*0.9)]:.2f} s, max {lags[-1]:.2f} s ({len(lags)} windows)")
hs = 0
snis = set()
for l in open(sys.argv[2]):
    v = json.loads(l)
    if v["type"] == "window":
        for s in v["series"]:
            if s["view"] == "wire":
                hs += s["handshakes"]
                snis.update(s["sni"])
print(f"observe RSS: {at5[1]/1024:.1f} MiB at {at5[0]} s, {last[1]/1024:.1f} MiB at {last[0]} s "
      f"(growth after the first 5 minutes {100*(last[1]-at5[1])/at5[1]:+.1f}%; max "
      f"{max(s[1] for s in samples)/1024:.1f} MiB)")
cpu = last[2] / tck
print(f"observe CPU: {cpu:.1f} s for {hs} handshakes in its windows: "
      f"{1e6*cpu/max(hs,1):.1f} µs per handshake")
EOF
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
