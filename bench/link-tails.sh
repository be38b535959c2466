#!/usr/bin/env bash
# `--link` tails at a short RTT (issue 36): connect p99 within +5% of the RTT at rtt=20ms
# on a quiet machine. `tlsperf handshake -n N --resume off --link rtt=RTT` against an idle
# `tlsperf serve` on loopback, RUNS times, each with the load average before and after and
# the link's own lateness (p50 / p99 / max of each direction: how late the delay line
# wrote its packets, so that a tail can be told as the line's or the machine's); then UDP
# round trips through a fresh link (`examples/link_accuracy rtt`). Needs root and
# /dev/net/tun. Prints a markdown report.
#
# Usage: bench/link-tails.sh [RTT_MS [N [RUNS]]]   (defaults: 20 300 3)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ] || [ ! -e /dev/net/tun ]; then
  echo "bench/link-tails.sh needs root and /dev/net/tun" >&2
  exit 2
fi
rtt="${1:-20}"
n="${2:-300}"
runs="${3:-3}"
cargo build --release --locked --quiet --bin tlsperf --example link_accuracy
bin="$PWD/target/release/tlsperf"
acc="$PWD/target/release/examples/link_accuracy"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
# The machine's CPU ticks: total and stolen by the hypervisor (/proc/stat).
ticks() { awk '/^cpu /{t=0; for(i=2;i<=NF;i++) t+=$i; print t, $9}' /proc/stat; }
echo "# \`--link\` tails at rtt=${rtt}ms"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average $(load)"
echo "- binary: $bin ($("$bin" --version)); release build"
echo
port=18493
"$bin" serve --listen "127.0.0.1:$port" --gen-cert ecdsa-p256 --write-ca "$work/ca.pem" -q > /dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/ca.pem" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
echo "## \`tlsperf handshake -n $n --resume off --link rtt=${rtt}ms\` (TLS 1.3, ECDSA P-256; warm connections)"
echo
echo "| run | load average before → after | steal | connect p50 ms | p99 ms | max ms | p99 − RTT | within +5% | TLS p99 − RTT ms | client wake-up p99 µs | line lateness up p50 / p99 / max µs | down p50 / p99 / max µs |"
echo "|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|---|"
for i in $(seq "$runs"); do
  before="$(load)"
  t0="$(ticks)"
  "$bin" handshake "https://localhost:$port/" --cacert "$work/ca.pem" --resume off -n "$n" \
    --link "rtt=${rtt}ms" --json > "$work/h.json"
  after="$(load)"
  t1="$(ticks)"
  python3 - "$work/h.json" "$rtt" "$i" "$before" "$after" "$t0" "$t1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rtt = float(sys.argv[2])
(a0, s0), (a1, s1) = [map(int, x.split()) for x in sys.argv[6:8]]
steal = "%.1f%%" % ((s1 - s0) * 100 / max(a1 - a0, 1))
w = d["warm"]; p = w["phases"]; c = p["connect"]; t = p["tls"]
ms = lambda ns: ns / 1e6
p99 = ms(c["p99_ns"])
lc = d["link_counters"]
lat = lambda x: "%.0f / %.0f / %.0f" % (x["late_p50_us"], x["late_p99_us"], x["late_max_us"])
wake = w.get("client_wakeup") or {}
print("| %s | %s → %s | %s | %.3f | %.3f | %.3f | %+.2f%% | %s | %+.3f | %s | %s | %s |" % (
    sys.argv[3], sys.argv[4], sys.argv[5], steal, ms(c["p50_ns"]), p99, ms(c["max_ns"]),
    (p99 / rtt - 1) * 100, "yes" if p99 <= rtt * 1.05 else "NO", ms(t["p99_ns"]) - rtt,
    "%.0f" % (wake["p99_ns"] / 1e3) if wake else "-", lat(lc["up"]), lat(lc["down"])))
PY
done
echo
echo "## UDP round trips through a fresh link (\`link_accuracy rtt $rtt\`, 100-byte probes, one at a time)"
echo
before="$(load)"
"$acc" rtt "$rtt" | sed 's/^/    /'
echo
echo "load average before → after: $before → $(load)"
