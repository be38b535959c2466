#!/usr/bin/env bash
# The lab's verdicts over N runs of `tlsperf lab --quick` (issue: numbers a skeptic
# accepts, part 4): how often mutual TLS and RSA-2048 come out significantly costlier in
# server CPU per handshake, how often stateless tickets are listed as a win in "What to
# change", and how many A/A control comparisons came out "significant" (the false-positive
# rate actually seen), with each run's wall time and host load. Run it on a quiet machine:
# anything else running is noise the rounds meet.
#
# Usage: bench/lab-tally.sh [RUNS]   (default 10). Prints a markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
cargo build --release --locked --quiet --bin tlsperf
bin="$PWD/target/release/tlsperf"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "| run | started (UTC) | load avg | wall s | mTLS server CPU | RSA-2048 server CPU | tickets listed | A/A significant |"
echo "|---|---|---|---|---|---|---|---|"
for i in $(seq 1 "$runs"); do
  started=$(date -u +%H:%M:%S)
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$bin" lab --quick --out "$work/run-$i" -q
  python3 - "$work/run-$i/results.json" "$i" "$started" "$load" <<'PY'
import json, sys
path, run, started, load = sys.argv[1:]
r = json.load(open(path))
cells = {(g["group"], c["name"]): c for g in r["groups"] for c in g["cells"]}
def cpu(group, cell):
    v = cells[(group, cell)]["vs_baseline"].get("server_cpu_us_per_handshake")
    if v is None:
        return "not compared"
    mark = "**costlier**" if v["significant"] and (v["relative_change"] or 0) > 0 else "missed"
    mde = "" if v.get("mde") is None else f", MDE ±{v['mde']*100:.0f}%"
    return f"{mark} {v['relative_change']*100:+.0f}% p={v['p']:.1g}{mde}"
tickets = [x for x in r["recommendations"] if x["group"] == "resumption" and x["to"] == "tickets"]
listed = "**yes** (" + ", ".join(x["metric"] for x in tickets) + ")" if tickets else "no"
aa = r["aa_control"]
print(f"| {run} | {started} | {load} | {r['duration_s']:.1f} | {cpu('mtls', 'on')} | "
      f"{cpu('certificate', 'rsa-2048')} | {listed} | {aa['significant']}/{aa['compared']} |")
PY
done
