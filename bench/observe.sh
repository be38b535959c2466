#!/usr/bin/env bash
# `tlsperf observe --pcap` throughput: handshakes analyzed per second from a capture file
# on one core, against the target of 250,000 per CPU second at the median (issue 35;
# 200,000/s was issue 19's).
#   1. a capture: `tcpdump -i lo` of `tlsperf load --new-conn --resume tickets -n N`
#      against `tlsperf serve` (TLS 1.3, full and resumed handshakes, one request each);
#   2. that capture replicated COPIES times into one file (python3: each copy's
#      timestamps shifted past the previous copy's end, client ports remapped), so that a
#      run lasts long enough to time;
#   3. ROUNDS runs of `taskset -c 0 tlsperf observe --pcap big.pcap --json`, timed by GNU
#      time: wall time of the whole process (reading the file included), user + system
#      CPU. handshakes/s = handshakes found ÷ wall time, and ÷ CPU time (less sensitive
#      to other load on the machine); median and best of the rounds.
# Loopback only; everything made goes in a temporary directory, removed on exit.
#
# Usage: bench/observe.sh [N] [COPIES] [ROUNDS]   (default 20000, 10, 5)
# With RATE=R: the load runs at R requests/s (open loop) rather than as fast as it can, for
# a busy machine where tcpdump would drop packets otherwise.
# With OBSERVE_PCAP=FILE: the capture of steps 1-2 is kept there (made when FILE does not
# exist, else reused as it is: N and COPIES are then the ones it was made with), e.g.
# to profile `tlsperf observe --pcap FILE --port 18463` on the same file.
# With TSHARK_FRAMES=N: before the rounds, tshark (the issue's anchor) dissects the first N
# frames of the same file on the same core; its handshakes (ServerHellos) per CPU second.
# With ANCHOR_BIN=PATH (another tlsperf binary, e.g. the previous commit's release
# build): each round runs it too, on the same file, alternating with this one (anchor
# first), and the last lines give its figures and this build's ÷ the anchor's.
# Needs tcpdump, taskset, python3, GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
copies="${2:-10}"
rounds="${3:-5}"
for t in tcpdump taskset python3 /usr/bin/time; do command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }; done
cargo build --release --locked --quiet --bin tlsperf
bin="$PWD/target/release/tlsperf"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

port=18463
if [ -n "${OBSERVE_PCAP:-}" ] && [ -s "$OBSERVE_PCAP" ]; then
  big="$OBSERVE_PCAP"
else
big="$work/big.pcap"
"$bin" serve --listen "127.0.0.1:$port" --gen-cert ecdsa-p256 --write-ca "$work/ca.pem" --resumption tickets -q > /dev/null &
pids+=($!)
sleep 1
tcpdump -i lo -B 65536 --immediate-mode -U -n -w "$work/one.pcap" "tcp port $port" 2> "$work/tcpdump.err" &
tcpdump_pid=$!
pids+=($tcpdump_pid)
until grep -q "listening on" "$work/tcpdump.err"; do sleep 0.1; done
"$bin" load "https://localhost:$port/" --new-conn --resume tickets -n "$n" -c 8 --cacert "$work/ca.pem" -q ${RATE:+--rate "$RATE"} > /dev/null
# tcpdump may lag behind on a busy machine: stop it once its file has stopped growing.
last=-1
while size=$(stat -c %s "$work/one.pcap") && [ "$size" != "$last" ]; do last=$size; sleep 0.5; done
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
if grep -q "[1-9][0-9]* packets dropped by kernel" "$work/tcpdump.err"; then
  echo "tcpdump dropped packets: the capture is incomplete" >&2; cat "$work/tcpdump.err" >&2; exit 1
fi

python3 - "$work/one.pcap" "$work/big.pcap" "$copies" "$port" <<'PY'
import struct, sys
src, dst, copies, port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = open(src, "rb").read()
magic = struct.unpack("<I", data[:4])[0]
assert magic in (0xA1B2C3D4, 0xA1B23C4D), "little-endian pcap expected"
per_sec = 1_000_000 if magic == 0xA1B2C3D4 else 1_000_000_000
assert struct.unpack("<I", data[20:24])[0] == 1, "Ethernet expected"
frames, off = [], 24
while off + 16 <= len(data):
    sec, frac, incl, orig = struct.unpack("<IIII", data[off:off + 16])
    frames.append((sec * per_sec + frac, orig, bytearray(data[off + 16:off + 16 + incl])))
    off += 16 + incl
span = frames[-1][0] - frames[0][0] + per_sec
others = [p for p in range(1024, 65536) if p != port]
index = {p: i for i, p in enumerate(others)}
with open(dst, "wb") as out:
    out.write(data[:24])
    for k in range(copies):
        for ts, orig, frame in frames:
            f = bytearray(frame)
            if k and len(f) >= 38 and f[12:14] == b"\x08\x00":
                ihl = (f[14] & 0x0F) * 4
                t = 14 + ihl
                sp, dp = struct.unpack(">HH", f[t:t + 4])
                # The client's port, moved so that each copy's connections are new ones:
                # a bijection of the ports other than the server's (a client port moved
                # onto the server's would make a connection whose two ends have the
                # same address and port, that no analyzer can tell apart).
                if sp != port:
                    sp = others[(index[sp] + k * 4099) % len(others)]
                if dp != port:
                    dp = others[(index[dp] + k * 4099) % len(others)]
                f[t:t + 4] = struct.pack(">HH", sp, dp)
            t2 = ts + k * span
            out.write(struct.pack("<IIII", t2 // per_sec, t2 % per_sec, len(f), orig))
            out.write(f)
PY
kill "${pids[0]}" 2>/dev/null || true
if [ -n "${OBSERVE_PCAP:-}" ]; then cp "$big" "$OBSERVE_PCAP"; fi
fi

size_mb=$(du -m "$big" | cut -f1)
: > "$work/runs"
: > "$work/anchor"
# One timed run of binary $1 appended to file $2: handshakes, wall, user, system.
run() {
  /usr/bin/time -f "%e %U %S" -o "$work/time" taskset -c 0 "$1" observe --pcap "$big" --port "$port" --json > "$work/out.json"
  hs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["handshakes"]["all"]["count"])' "$work/out.json")
  read -r wall user sys < "$work/time"
  echo "$hs $wall $user $sys" >> "$2"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${TSHARK_FRAMES:-}" ]; then
  # The issue's anchor, in the same run: tshark dissecting the first TSHARK_FRAMES frames
  # of the same file on the same core, its handshakes counted as the ServerHellos it
  # finds; per CPU second of its process (GNU time, user + system).
  /usr/bin/time -f "%e %U %S" -o "$work/ttime" taskset -c 0 tshark -r "$big" -c "$TSHARK_FRAMES" \
    -d "tcp.port==$port,tls" -Y "tls.handshake.type == 2" -T fields -e frame.number > "$work/tshark.out" 2> /dev/null
  read -r twall tuser tsys < "$work/ttime"
  ths=$(wc -l < "$work/tshark.out")
  echo "tshark (anchor): $ths handshakes in the first $TSHARK_FRAMES frames, $twall s wall, $(python3 -c "print(f'{$tuser + $tsys:.2f}')") CPU s: $(python3 -c "print(f'{$ths / ($tuser + $tsys):,.0f}')") handshakes per CPU second"
fi
for _ in $(seq "$rounds"); do
  [ -n "${ANCHOR_BIN:-}" ] && run "$ANCHOR_BIN" "$work/anchor"
  run "$bin" "$work/runs"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
frames=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packets"]["frames"])' "$work/out.json")
python3 - "$work/runs" "$n" "$copies" "$frames" "$size_mb" "$work/anchor" "${ANCHOR_BIN:-}" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
anchor = [list(map(float, l.split())) for l in open(sys.argv[6])]
n, copies, frames, mb = sys.argv[2:6]
def per_cpu(rows):
    return sorted(r[0] / (r[2] + r[3]) for r in rows if r[2] + r[3] > 0)
print(f"| capture | {int(rows[0][0]):,} handshakes ({n} × {copies} copies), {int(frames):,} frames, {mb} MB |")
print("|---|---|")
for name, rs in (("this build", rows), (f"anchor ({sys.argv[7]})", anchor)):
    if not rs:
        continue
    rates = sorted(r[0] / r[1] for r in rs)
    cpu = [r[2] + r[3] for r in rs]
    print(f"| {name}: handshakes found | {', '.join(f'{int(r[0]):,}' for r in rs)} |")
    print(f"| {name}: wall per run (s) | {', '.join(f'{r[1]:.2f}' for r in rs)} |")
    print(f"| {name}: CPU per run (user+sys, s) | {', '.join(f'{c:.2f}' for c in cpu)} |")
    print(f"| {name}: handshakes/s, median (best) | {statistics.median(rates):,.0f} ({rates[-1]:,.0f}) |")
    pc = per_cpu(rs)
    if pc:
        print(f"| {name}: handshakes per CPU second, median (best) | {statistics.median(pc):,.0f} ({pc[-1]:,.0f}) |")
if anchor and per_cpu(rows) and per_cpu(anchor):
    print(f"| this build ÷ anchor, per CPU second at the median | "
          f"{statistics.median(per_cpu(rows)) / statistics.median(per_cpu(anchor)):.2f} |")
print(f"| target | 250,000 handshakes per CPU second at the median |")
PY
