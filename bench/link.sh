#!/usr/bin/env bash
# `--link` accuracy (issue 18): the emulated link measured through it with the kernel's own
# sockets (examples/link_accuracy.rs, which says where each timestamp is taken), and the
# TCP connect and TLS handshake times `tlsperf handshake --link` reports against an idle
# `tlsperf serve` on loopback. Needs root and /dev/net/tun. Prints a markdown report.
#
# Usage: bench/link.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ] || [ ! -e /dev/net/tun ]; then
  echo "bench/link.sh needs root and /dev/net/tun" >&2
  exit 2
fi
cargo build --release --locked --quiet --bin tlsperf --example link_accuracy
bin="$PWD/target/release/tlsperf"
acc="$PWD/target/release/examples/link_accuracy"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

echo "# \`--link\` accuracy"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- binary: $bin ($("$bin" --version)); release build"
echo
cat > "$work/fmt.py" <<'PY'
import sys
section = sys.argv[1]
for line in sys.stdin:
    head, *kv = line.split()
    d = dict(x.split("=", 1) for x in kv)
    conf = head.split("=", 1)[1] if "=" in head else head
    if section == "rtt":
        want = None if conf == "base" else float(conf.rstrip("ms"))
        if want:
            err = "%+.2f%% (%+.3f ms)" % ((float(d["p50_ms"]) / want - 1) * 100, float(d["p50_ms"]) - want)
        else:
            err = "-"
        name = "plain loopback (no link)" if conf == "base" else conf
        cells = [name, d["n"], d["min_ms"], d["p50_ms"], d["mean_ms"], d["p99_ms"], d["max_ms"], d["sd_ms"], err,
                 d.get("line_late_mean_us", "-"), d.get("line_late_max_us", "-")]
    elif section == "loss":
        if "dir" not in d:
            print("<!-- echoes: %s lost %s%%, expected %s%% -->" % (conf, d["echoes_lost_pct"], d["expected_pct"]))
            continue
        lo, hi = d["ci95_pct"].split("..")
        cells = [conf, d["dir"], d["packets"], d["lost"], d["rate_pct"] + "%", lo + "% .. " + hi + "%",
                 "yes" if d["inside"] == "true" else "NO"]
    elif section == "goodput":
        cells = [conf + " rtt=" + d["rtt_ms"] + "ms", d["plain_mbit"], d["link_mbit"], d["ratio"], d["of_rate"],
                 d["cpu_us_per_packet"], d["sleeps_per_packet"], d["floor_cpu_us_per_packet"],
                 d["floor_sleeps_per_packet"], d["line_minus_floor_us"], d["line_over_floor"],
                 d["queue_drops"], d["device_drops"],
                 d["late_p50_us"] + " / " + d["late_p99_us"] + " / " + d["late_max_us"]]
    elif section == "rate":
        cells = [conf, d["bytes"], d["ip_mbit"] + " Mbit/s", d["error_pct"] + "%", d["goodput_mbit"] + " Mbit/s", d["overflow"]]
    else:
        print("- sent %s, delivered %s: %s packets/s on the wall clock; the upstream delay-line thread used %s s of CPU: **%s packets per CPU-second** (one core)"
              % (d["sent"], d["delivered"], d["wall_pps"], d["line_cpu_s"], d["pps_per_core"]))
        continue
    print("| " + " | ".join(cells) + " |")
PY
echo "## Round trip (UDP ping-pong through the link, 100-byte probes)"
echo
echo "| configured | probes | min ms | p50 ms | mean ms | p99 ms | max ms | sd ms | p50 error | delay line late, mean µs | max µs |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
"$acc" rtt 0 5 10 20 50 100 200 300 | python3 "$work/fmt.py" rtt
echo
echo "## Loss (20,000 probes at rtt=1ms; the link's own count per direction)"
echo
echo "| configured | direction | packets | lost | rate | binomial 95% interval | inside |"
echo "|---:|---|---:|---:|---:|---:|---|"
"$acc" loss 1 2 5 | python3 "$work/fmt.py" loss
echo
echo "## Rate (TCP bulk transfer server → client at rtt=20ms, ~3 s; IP bytes delivered from 25% to 100% of the body)"
echo
echo "| configured | bytes | measured IP rate | error | TCP goodput | queue drops |"
echo "|---:|---:|---:|---:|---:|---:|"
"$acc" rate 1 8 50 200 | python3 "$work/fmt.py" rate
echo
echo "## Goodput (CUBIC bulk transfer server → client, ~3 s: plain loopback paced at the rate with SO_MAX_PACING_RATE, then through a bare forwarder between the same devices (the floor, paced likewise), then through the link, same run; goodput over the last 75% of the body; CPU and sleeps of both line threads per packet both ways)"
echo
echo "| link | plain Mbit/s | link Mbit/s | link ÷ plain | link ÷ rate | line CPU µs/packet | line sleeps/packet | floor CPU µs/packet | floor sleeps/packet | line − floor µs | line ÷ floor | queue drops | device drops | line lateness p50 / p99 / max µs (down) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in 200 1000; do "$acc" goodput "$r" 10 | python3 "$work/fmt.py" goodput; done
echo
echo "## Saturation (rtt=0, no rate; 64-byte UDP packets client → host from one thread, 2 s)"
echo
"$acc" saturate | python3 "$work/fmt.py" saturate
echo
echo "## What \`tlsperf handshake --link\` reports (tlsperf serve on 127.0.0.1, ECDSA P-256, --resume off, 21 handshakes; warm p50)"
echo
port=18491
"$bin" serve --listen "127.0.0.1:$port" --gen-cert ecdsa-p256 --write-ca "$work/ca.pem" -q > /dev/null &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/ca.pem" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
echo "| link | TLS | connect p50 ms | connect error | handshake (tls) p50 ms | round trips | handshake − round trips ms |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for rtt in 0 5 60 150 300; do
  for tls in 1.3 1.2; do
    "$bin" handshake "https://localhost:$port/" --cacert "$work/ca.pem" --resume off --tls "$tls" -n 21 --link "rtt=${rtt}ms" --json > "$work/h.json"
    python3 - "$work/h.json" "$rtt" "$tls" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rtt = float(sys.argv[2]); tls = sys.argv[3]
p = d["warm"]["phases"]
c = p["connect"]["p50_ns"] / 1e6; h = p["tls"]["p50_ns"] / 1e6
trips = 1 if tls == "1.3" else 2
err = "%+.3f ms" % (c - rtt)
print(f"| rtt={int(rtt)}ms | {tls} | {c:.3f} | {err} | {h:.3f} | {trips} | {h - trips * rtt:.3f} |")
PY
  done
done
