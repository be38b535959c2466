#!/usr/bin/env bash
# `tlsperf observe` of QUIC on the wire against tshark (issue 59): agreement and speed on
# one capture of mixed QUIC handshakes made by two different clients.
#   1. `tlsperf serve --quic --early-data 16384` (resumption on, as by default) and a
#      second one with `--quic-retry`, on 127.0.0.1; `tcpdump -i lo` of UDP on both ports;
#   2. ngtcp2's example client (`gtlsclient`) NGTCP2 times against the first, in turn a
#      full handshake, a resumed one (`--disable-early-data`) and a 0-RTT one (its session
#      and transport parameter files); aioquic's (tests/quic/h3_get.py) AIOQUIC
#      connections one after the other (the first full, then 0-RTT); ngtcp2's RETRIED
#      times against the Retry server (full, after a Retry);
#   3. agreement: tests/quic.rs `observe_of_quic_agrees_with_tshark` on this capture
#      (`TLSPERF_QUIC_CAPTURE=FILE:PORT`, each port): per kind, observe's counts equal
#      tshark's and each phase's p50 and p90 are within 1% of those of tshark's
#      dissection timed by the same definitions;
#   4. speed: the capture's datagrams of the first port replicated COPIES times into one
#      file (python3: each copy's timestamps shifted 61 s past the previous copy's end,
#      beyond observe's idle timeout, and its client ports remapped), then ROUNDS rounds,
#      alternating (tshark first), of tshark dissecting that file (`-d udp.port==P,quic
#      -Y quic`: its own Initial decryption; the fields the test reads) and `tlsperf
#      observe --pcap FILE --json` (release build), each on core 0 under GNU time:
#      handshakes per CPU second (user + system, start-up and reading included) of each,
#      and the ratio.
# Loopback only; every client run bounded (`timeout`, the clients' own timeouts);
# everything made goes in a temporary directory, removed on exit (QUIC_PCAP=FILE keeps the
# capture there, with its ports in FILE.ports; a later run given the same QUIC_PCAP reuses
# both and skips steps 1-2).
#
# Usage: bench/observe-quic.sh [NGTCP2] [AIOQUIC] [RETRIED] [ROUNDS] [COPIES]
#        (default 300 240 30 5 20)
# Needs tcpdump, tshark, gtlsclient (ngtcp2-client), python3 with aioquic, taskset,
# GNU time (/usr/bin/time); root (tcpdump on lo).
set -euo pipefail
cd "$(dirname "$0")/.."
ngtcp2="${1:-300}"
aioquic="${2:-240}"
retried="${3:-30}"
rounds="${4:-5}"
copies="${5:-20}"
for t in tcpdump tshark gtlsclient python3 taskset /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }
done
python3 -c "import aioquic" 2>/dev/null || { echo "missing aioquic (python3 -m pip install aioquic)" >&2; exit 1; }
cargo build --release --locked --quiet --bin tlsperf
bin="$PWD/target/release/tlsperf"
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# A server writing its listening line to $1 (started here, not in a command substitution's
# subshell, so that its pid is in `pids` and the cleanup stops it).
start_serve() {
  local out="$1"; shift
  "$bin" serve --listen 127.0.0.1:0 --cert "$work/pki/server-chain.pem" --key "$work/pki/server.key" \
    --quic --json --duration 3600s "$@" > "$out" 2> "$out.err" &
  pids+=($!)
  until grep -q '"addr"' "$out" 2>/dev/null; do sleep 0.1; done
}
# Its port, from that line.
port_of() { sed -n 's/.*"addr":"127.0.0.1:\([0-9]*\)".*/\1/p' "$1" | head -1; }
"$bin" pki init "$work/pki" --key-type ecdsa-p256 -q
cap="${QUIC_PCAP:-$work/quic.pcap}"
if [ -s "$cap" ] && [ -s "$cap.ports" ]; then
  read -r port rport < "$cap.ports"
  echo "reusing $cap (ports $port and $rport)"
else
start_serve "$work/serve.json" --early-data 16384
start_serve "$work/retry.json" --quic-retry
port=$(port_of "$work/serve.json")
rport=$(port_of "$work/retry.json")
tcpdump -i lo -B 65536 --immediate-mode -U -n -w "$cap" "udp and (port $port or port $rport)" 2> "$work/tcpdump.err" &
tcpdump_pid=$!
pids+=($tcpdump_pid)
until grep -q "listening on" "$work/tcpdump.err"; do sleep 0.1; done

get() {
  local p="$1"; shift
  timeout 30 gtlsclient --exit-on-all-streams-close --handshake-timeout=5s --timeout=5s --no-quic-dump \
    "$@" 127.0.0.1 "$p" "https://localhost:$p/" > /dev/null 2>&1
}
files=(--session-file "$work/ngtcp2.session" --tp-file "$work/ngtcp2.tp")
for ((i = 0; i < ngtcp2; i++)); do
  case $((i % 3)) in
    0) if [ "$i" = 0 ]; then get "$port" "${files[@]}"; else get "$port"; fi ;;
    1) get "$port" "${files[@]}" --disable-early-data ;;
    2) get "$port" "${files[@]}" ;;
  esac
done
timeout 600 python3 tests/quic/h3_get.py 127.0.0.1 "$port" "$work/pki/root.pem" \
  --connections "$aioquic" --zero-rtt > /dev/null
for ((i = 0; i < retried; i++)); do get "$rport"; done
last=-1
while size=$(stat -c %s "$cap") && [ "$size" != "$last" ]; do last=$size; sleep 0.5; done
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
if grep -q "[1-9][0-9]* packets dropped by kernel" "$work/tcpdump.err"; then
  echo "tcpdump dropped packets: the capture is incomplete" >&2; cat "$work/tcpdump.err" >&2; exit 1
fi
echo "$port $rport" > "$cap.ports"
fi
echo "capture: $(stat -c %s "$cap") bytes; ports $port (resumption, 0-RTT) and $rport (Retry)"

echo "== agreement with tshark (tests/quic.rs observe_of_quic_agrees_with_tshark)"
for p in "$port" "$rport"; do
  TLSPERF_QUIC_CAPTURE="$cap:$p" cargo test --locked --quiet --test quic observe_of_quic_agrees_with_tshark \
    -- --nocapture 2>&1 | grep -E "^port |test result|panicked|assert" || true
done
"$bin" observe --pcap "$cap" --port "$port" --json > "$work/a.json"
"$bin" observe --pcap "$cap" --port "$rport" --json > "$work/b.json"
python3 - "$work/a.json" "$work/b.json" <<'PY'
import json, sys
for f in sys.argv[1:]:
    q = json.load(open(f))["quic"]
    h = q["handshakes"]
    counts = ", ".join("%s %d" % (k, v["count"]) for k, v in h.items())
    print("observe: %s; retry %d; packets %s" % (counts, h["all"].get("retry", 0), q["packets"]["quic"]))
PY

python3 - "$cap" "$work/big.pcap" "$copies" "$port" <<'PY'
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
    f = bytearray(data[off + 16:off + 16 + incl])
    off += 16 + incl
    # IPv4 UDP to or from the port only.
    if len(f) < 42 or f[12:14] != b"\x08\x00" or f[23] != 17:
        continue
    u = 14 + (f[14] & 0xF) * 4
    sp, dp = struct.unpack(">HH", f[u:u + 4])
    if port not in (sp, dp):
        continue
    frames.append((sec * per_sec + frac, orig, f, u, sp == port))
shift = frames[-1][0] - frames[0][0] + 61 * per_sec
with open(dst, "wb") as out:
    out.write(data[:24])
    for c in range(copies):
        for t, orig, f, u, from_server in frames:
            g = bytearray(f)
            at = u + 2 if from_server else u
            client = struct.unpack(">H", g[at:at + 2])[0]
            mapped = 1024 + (client - 1024 + c * 997) % 64000
            struct.pack_into(">H", g, at, mapped if mapped != port else mapped + 1)
            struct.pack_into(">H", g, u + 6, 0)  # no UDP checksum (IPv4)
            t2 = t + c * shift
            out.write(struct.pack("<IIII", t2 // per_sec, t2 % per_sec, len(g), orig))
            out.write(g)
PY
big="$work/big.pcap"
echo "== speed: tshark and observe on $copies copies of the first port's datagrams ($(stat -c %s "$big") bytes), core 0, $rounds rounds (tshark first)"
cpu() { awk '{print $1 + $2}' "$1"; }
for ((r = 1; r <= rounds; r++)); do
  /usr/bin/time -f "%U %S" -o "$work/t.time" taskset -c 0 tshark -r "$big" -n -d "udp.port==$port,quic" -Y quic \
    -T fields -e frame.time_epoch -e udp.srcport -e udp.dstport -e quic.header_form \
    -e quic.long.packet_type -e tls.handshake.type -e tls.handshake.extension.type > /dev/null
  /usr/bin/time -f "%U %S" -o "$work/o.time" taskset -c 0 "$bin" observe --pcap "$big" --port "$port" --json > "$work/o.json"
  n=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['quic']['handshakes']['all']['count'])" "$work/o.json")
  t=$(cpu "$work/t.time"); o=$(cpu "$work/o.time")
  python3 - "$n" "$t" "$o" "$r" <<'PY'
import sys
n, t, o, r = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rate = lambda s: n / s if s > 0 else float("inf")
print(f"round {r}: {n} handshakes; tshark {t:.2f} CPU s ({rate(t):,.0f}/s), observe {o:.3f} CPU s ({rate(o):,.0f}/s), observe/tshark {t / o if o > 0 else float('inf'):.1f}x")
PY
done
uptime
