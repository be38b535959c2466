#!/usr/bin/env bash
# `tlsperf observe --interface` against `tcpdump -w /dev/null` on the same traffic, replayed
# as fast as this machine can (issue 35, item 10): frames delivered and dropped by the
# kernel for each, in the same run, and observe's CPU per handshake.
#   1. a capture of N handshakes (full and resumed) replicated COPIES times, made by
#      bench/observe.sh (OBSERVE_PCAP);
#   2. a network namespace made for the run with a veth pair va–vb (MTU 65535: loopback
#      captures hold segments up to 64 KiB); nothing leaves it;
#   3. ROUNDS rounds of: tcpdump on vb while `tcpreplay --topspeed` sends the file out of
#      va, then observe on vb while the same replay runs. tcpreplay reports the rate it
#      reached; tcpdump its "dropped by kernel"; observe its `packets.kernel_drops`, and
#      GNU time its CPU.
# The namespace (and the veth pair in it) is removed on every exit.
#
# Usage: bench/observe-live.sh [N] [COPIES] [ROUNDS]   (default 20000, 5, 3)
# OBSERVE_PCAP=FILE and RATE=R as for bench/observe.sh (a capture kept and reused; the
# load paced, for a busy machine where tcpdump would drop packets making it).
# Needs root, iproute2, tcpdump, tcpreplay, python3, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
copies="${2:-5}"
rounds="${3:-3}"
for t in ip tcpdump tcpreplay python3 /usr/bin/time; do command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }; done
work="$(mktemp -d)"
ns="tlsperf-obs-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
pcap="${OBSERVE_PCAP:-$work/big.pcap}"
OBSERVE_PCAP="$pcap" bench/observe.sh "$n" "$copies" 1 > "$work/make.log"
bin="$PWD/target/release/tlsperf"
frames=$(python3 -c "
import struct,sys
d=open('$pcap','rb').read(); i=24; n=0
while i+16<=len(d):
    incl=struct.unpack('<I',d[i+8:i+12])[0]; i+=16+incl; n+=1
print(n)")
ip netns add "$ns"
ip -n "$ns" link add va type veth peer name vb
for d in va vb; do ip -n "$ns" link set "$d" mtu 65535 up; done
in_ns() { ip netns exec "$ns" "$@"; }
replay() { in_ns tcpreplay -i va --topspeed "$pcap" 2>&1 | grep -Eo "Rated: [0-9.]+ Bps, [0-9.]+ Mbps, [0-9.]+ pps" | head -1; }
echo "capture: $frames frames, $(grep -Eo '[0-9,]+ handshakes' "$work/make.log" | head -1 || true); load average $(cut -d' ' -f1-3 /proc/loadavg)"
# Frames the veth device itself dropped (before any capture sees them): its RX drops.
dev_drops() { ip -n "$ns" -s -j link show vb | python3 -c "import json,sys; print(json.load(sys.stdin)[0]['stats64']['rx']['dropped'])"; }
for r in $(seq "$rounds"); do
  # Started without the helper function: its pid is then tcpdump's (ip netns exec execs).
  ip netns exec "$ns" tcpdump -i vb -w /dev/null -B 65536 -n "tcp port 18463" 2> "$work/td.err" &
  td=$!
  until grep -q "listening on" "$work/td.err"; do sleep 0.1; done
  d0=$(dev_drops); rate=$(replay); sleep 1; dd=$(( $(dev_drops) - d0 ))
  # (SIGTERM: a background job of a script ignores SIGINT.)
  kill -TERM "$td"; wait "$td" || true
  td_rx=$(grep -Eo "^[0-9]+ packets captured" "$work/td.err" | grep -Eo "^[0-9]+")
  td_drop=$(grep -Eo "^[0-9]+ packets dropped by kernel" "$work/td.err" | grep -Eo "^[0-9]+")
  echo "round $r tcpdump: replay $rate; captured $td_rx, dropped $td_drop of $frames; the device dropped $dd"
  ip netns exec "$ns" /usr/bin/time -f "%U %S" -o "$work/time" "$bin" observe --interface vb --port 18463 --json > "$work/obs.json" 2> "$work/obs.err" &
  ob=$!
  until grep -q "capturing on" "$work/obs.err"; do sleep 0.1; done
  d0=$(dev_drops); rate=$(replay); sleep 1; dd=$(( $(dev_drops) - d0 ))
  pkill -INT -f "observe --interface vb --port 18463" || true; wait "$ob" || true
  python3 - "$work/obs.json" "$work/time" "$frames" "$rate" "$r" "$dd" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])); u, s = map(float, open(sys.argv[2]).read().split()[-2:])
hs = v["handshakes"].get("all", {}).get("count", 0)
print(f"round {sys.argv[5]} observe: replay {sys.argv[4]}; frames {v['packets']['frames']}, "
      f"dropped {v['packets']['kernel_drops']} of {sys.argv[3]}; {hs} handshakes; "
      f"CPU {u+s:.2f} s ({(u+s)/max(hs,1)*1e6:.1f} µs per handshake); the device dropped {sys.argv[6]}")
PY
done
