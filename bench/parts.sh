#!/usr/bin/env bash
# Do the parts of work that `tlsperf observe --probes` reports stand in the ratios the
# same operations have when measured alone, in the same run?
#
# The loads and openssl speed alternate, three rounds, under one probe (see below).
# - signature: nginx with an RSA-4096 certificate against nginx with an ECDSA P-256 one
#   (`tlsperf pki init --leaf-key …`), full TLS 1.3 handshakes from `tlsperf load
#   --new-conn --resume off --tls 1.3`; the ratio of their `signature` parts' p50 (the
#   time inside EVP_DigestSign) against the ratio of `openssl speed`'s signing time for
#   the same key types (rsa4096, ecdsap256: the same OpenSSL 3 libcrypto as nginx's) and
#   against `tlsperf crypto sign`'s (aws-lc-rs, RSA-PSS as TLS 1.3 signs). Target: within 25% of openssl speed's.
# - key exchange: nginx with an ECDSA P-256 certificate offering only X25519 against one
#   offering only P-384 (`ssl_ecdh_curve`); the ratio of their `key_exchange` parts' p50
#   (EVP_PKEY_keygen + EVP_PKEY_derive + EVP_PKEY_set1_encoded_public_key) against
#   `openssl speed`'s ecdhx25519 / ecdhp384 (one derivation each; the server also makes a
#   key of the same cost: the ratio is what is compared).
# - trust-store loading: curl with `--cacert` a bundle of 10,000 CAs (`tlsperf pki
#   bundle`, nginx's root appended), one connection per curl, probed with --exe libssl;
#   each client's `trust_load` + `trust_load_before` (the time inside
#   X509_load_cert_crl_file_ex: curl 7.88 loads inside SSL_connect), their median, against `tlsperf trust load --bundle` (warm, with and without --x509:
#   rustls' loader, and a full X.509 parse of each certificate, which OpenSSL does) and
#   against OpenSSL's own load of the file timed alone (Python's ssl module,
#   load_verify_locations: the same libcrypto). Target: within 30%.
# Every figure is printed with the load average beside it. Loopback only; everything
# made goes in a temporary directory, removed on every exit.
#
# Usage: [BIN=path/to/tlsperf] bench/parts.sh [HANDSHAKES] [CURLS]   (default 300 3)
# Needs nginx, openssl, curl, python3; root (eBPF). BIN defaults to target/release/tlsperf.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-300}"
curls="${2:-3}"
bin="${BIN:-$PWD/target/release/tlsperf}"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$bin" ] || { echo "no tlsperf binary at $bin (cargo build --release, or set BIN)" >&2; exit 1; }
[ -x "$nginx_bin" ] || { echo "missing nginx (apt-get install nginx-light)" >&2; exit 1; }
for c in openssl curl python3; do
  command -v $c > /dev/null || { echo "missing $c" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "run as root (the probes need eBPF)" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
observer=""
cleanup() {
  if [ -n "$observer" ]; then kill -INT "$observer" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
chmod 755 "$work"
libssl=/lib/x86_64-linux-gnu/libssl.so.3
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# nginx NAME KEY-DIR EXTRA: one worker, no session resumption; prints its master's pid.
nginx_start() {
  local name=$1 pki=$2 extra=$3 port
  port=$(free_port)
  mkdir -p "$work/$name"
  cat > "$work/$name/nginx.conf" <<NGINX
worker_processes 1; daemon off; pid $work/$name/nginx.pid; error_log $work/$name/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  server { listen 127.0.0.1:$port ssl;
    ssl_protocols TLSv1.3; ssl_session_tickets off; ssl_session_cache off;
    ssl_certificate $pki/server-chain.pem; ssl_certificate_key $pki/server.key;
    $extra
    location / { return 200 "ok\n"; } } }
NGINX
  "$nginx_bin" -c "$work/$name/nginx.conf" -p "$work/$name" > /dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do
    [ -s "$work/$name/nginx.pid" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  echo "$port" > "$work/$name/port"
  # The worker, whose row the handshakes are in.
  for _ in $(seq 50); do
    pgrep -P "$(cat "$work/$name/nginx.pid")" > "$work/$name/worker" && break
    sleep 0.1
  done
  cat "$work/$name/nginx.pid"
}
worker() { head -1 "$work/$1/worker"; }

observe_start() {
  rm -f "$work/obs.json"
  "$bin" observe --probes "$@" --json --out "$work/obs.json" > /dev/null 2> "$work/obs.err" &
  observer=$!
  for _ in $(seq 300); do
    grep -q probing "$work/obs.err" && return 0
    kill -0 "$observer" 2>/dev/null || break
    sleep 0.1
  done
  echo "observe --probes did not start:" >&2
  cat "$work/obs.err" >&2
  exit 1
}

observe_stop() {
  kill -INT "$observer"
  wait "$observer" || true
  observer=""
}

# The p50 (ms) of PHASE in the by_process row of process PID (or ROW given whole), and its count.
p50() {
  python3 - "$work/obs.json" "$1" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["probes"]
who, phase = sys.argv[2], sys.argv[3]
rows = [r for k, r in p["by_process"].items() if f"(pid {who})" in k or k == who]
q = rows[0]["phases"][phase]["quantiles"]
print("%.4f %d" % (q["p50_ns"] / 1e6, q["count"]))
PY
}

load() {
  "$bin" load "https://localhost:$1/" --new-conn --resume off --tls 1.3 -n "$((n / 3))" -c 2 \
    --threads 1 --cacert "$2" -q > /dev/null
}

"$bin" pki init "$work/ec" -q
"$bin" pki init "$work/rsa" --leaf-key rsa-4096 -q

echo "# The parts of work against the same operations alone"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r); $(openssl version); $("$nginx_bin" -v 2>&1)"
echo "- binary: $bin ($("$bin" --version)); $n full TLS 1.3 handshakes per server, $curls curls"
echo

# ---- signature and key exchange ----
ec=$(nginx_start ec "$work/ec" "ssl_ecdh_curve X25519;")
rsa=$(nginx_start rsa "$work/rsa" "ssl_ecdh_curve X25519;")
p384=$(nginx_start p384 "$work/ec" "ssl_ecdh_curve secp384r1;")
observe_start --pid "$ec" --pid "$rsa" --pid "$p384"
la0=$(loadavg)
# Three rounds, each a third of every server's handshakes and a second of openssl speed
# per operation, so that both see the same machine (a shared one's load drifts).
: > "$work/speed.txt"
for _ in 1 2 3; do
  load "$(cat "$work/ec/port")" "$work/ec/root.pem"
  load "$(cat "$work/rsa/port")" "$work/rsa/root.pem"
  load "$(cat "$work/p384/port")" "$work/ec/root.pem"
  openssl speed -seconds 1 -mr rsa4096 ecdsap256 ecdhx25519 ecdhp384 2> /dev/null >> "$work/speed.txt"
done
la1=$(loadavg)
observe_stop
read -r sig_ec n_ec < <(p50 "$(worker ec)" signature)
read -r sig_rsa n_rsa < <(p50 "$(worker rsa)" signature)
read -r kx_x n_x < <(p50 "$(worker ec)" key_exchange)
read -r kx_p n_p < <(p50 "$(worker p384)" key_exchange)
echo "## Probed (load average $la0 before, $la1 after)"
echo
echo "| server | handshakes with the part | part | p50 ms |"
echo "|---|---:|---|---:|"
echo "| nginx ECDSA P-256, X25519 | $n_ec | signature | $sig_ec |"
echo "| nginx RSA-4096, X25519 | $n_rsa | signature | $sig_rsa |"
echo "| nginx ECDSA P-256, X25519 | $n_x | key_exchange | $kx_x |"
echo "| nginx ECDSA P-256, P-384 | $n_p | key_exchange | $kx_p |"
echo

la2=$la0
la3=$la1
"$bin" crypto sign --provider aws-lc-rs --alg rsa-4096-pss,ecdsa-p256 -d 1s --json -q > "$work/sign.json" 2> /dev/null || true
la4=$(loadavg)
python3 - "$work/speed.txt" "$work/sign.json" "$sig_rsa" "$sig_ec" "$kx_p" "$kx_x" "$la2" "$la3" "$la4" <<'PY'
import json, sys
speed, signj = sys.argv[1], sys.argv[2]
sig_rsa, sig_ec, kx_p, kx_x = map(float, sys.argv[3:7])
la2, la3, la4 = sys.argv[7:10]
# openssl speed -mr: "+F2:N:bits:signs_per_s:verifies_per_s" (RSA), "+F4:…" (ECDSA, the
# same), "+F5:N:bits:ops_per_s:s_per_op" (ECDH): a time ratio is the inverse rates' ratio.
def mean(v):
    return sum(v) / len(v) if v else None
rates = {"rsa": [], "ec": [], "x": [], "p": []}
for line in open(speed):
    f = line.strip().split(":")
    if f[0] == "+F2" and f[2] == "4096":
        rates["rsa"].append(float(f[3]))
    if f[0] == "+F4" and f[2] == "256":
        rates["ec"].append(float(f[3]))
    if f[0] == "+F5" and f[2] == "253":
        rates["x"].append(float(f[3]))
    if f[0] == "+F5" and f[2] == "384":
        rates["p"].append(float(f[3]))
rsa, ec, x, p = (mean(rates[k]) for k in ("rsa", "ec", "x", "p"))
print(f"## Alone (openssl speed -seconds 1 per operation, three times between the loads: "
      f"load average {la2} before, {la3} after)")
print()
print("| ratio | probed (p50s) | openssl speed | probed ÷ speed | target |")
print("|---|---:|---:|---:|---|")
def row(name, probed, alone, target):
    if alone is None:
        print(f"| {name} | {probed:.2f} | (not measured) | | |")
        return
    r = probed / alone
    ok = "met" if abs(r - 1) <= target else "NOT met"
    print(f"| {name} | {probed:.2f} | {alone:.2f} | {r:.2f} | within {target:.0%}: {ok} |")
row("signature RSA-4096 ÷ ECDSA P-256", sig_rsa / sig_ec, ec / rsa if rsa and ec else None, 0.25)
row("key exchange P-384 ÷ X25519", kx_p / kx_x, x / p if p and x else None, 0.25)
try:
    d = json.load(open(signj))
    rows = {r["alg"]: r for r in d.get("rows", []) if r.get("op") == "sign"}
    s = lambda a: rows[a]["ns_per_op"]
    print()
    print(f"tlsperf crypto sign (aws-lc-rs; load average {la4} after): RSA-4096 (PSS) ÷ ECDSA "
          f"P-256 signing = {s('rsa-4096-pss') / s('ecdsa-p256'):.2f}")
except Exception as e:
    print()
    print(f"tlsperf crypto sign: not read ({e})")
print()
PY

# ---- trust-store loading ----
"$bin" pki bundle --count 10000 --out "$work/bundle.pem" -q
cat "$work/ec/root.pem" >> "$work/bundle.pem"
go="$work/go"
script="i=0; while [ ! -e $go ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done;
for i in \$(seq $curls); do curl -s -o /dev/null --cacert $work/bundle.pem https://localhost:$(cat "$work/ec/port")/; done"
sh -c "$script" &
shell=$!
observe_start --pid "$shell" --exe "$libssl"
la5=$(loadavg)
touch "$go"
wait "$shell"
la6=$(loadavg)
observe_stop
read -r trust_p50 trust_n < <(python3 - "$work/obs.json" <<'PY'
import json, statistics, sys
p = json.load(open(sys.argv[1]))["probes"]
# A curl's one handshake: its load inside the handshake call (curl 7.88) or before it.
v = [sum(r["phases"][ph]["quantiles"]["p50_ns"] for ph in ("trust_load", "trust_load_before")) / 1e6
     for k, r in p["by_process"].items() if k.startswith("curl (pid ")]
print("%.2f %d" % (statistics.median(v), len(v)))
PY
)
"$bin" trust load --bundle "$work/bundle.pem" --x509 --json -q > "$work/trust.json"
la7=$(loadavg)
# OpenSSL's own load of the same file, alone: Python's ssl module calls the same libcrypto
# (SSLContext.load_verify_locations → SSL_CTX_load_verify_locations), timed around the
# call, median of 3 (each in a fresh context).
alone=$(python3 - "$work/bundle.pem" <<'PY'
import ssl, statistics, sys, time
t = []
for _ in range(3):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    s = time.perf_counter()
    c.load_verify_locations(cafile=sys.argv[1])
    t.append((time.perf_counter() - s) * 1e3)
print("%.2f" % statistics.median(t))
PY
)
la8=$(loadavg)
python3 - "$work/trust.json" "$trust_p50" "$trust_n" "$la5" "$la6" "$la7" "$alone" "$la8" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
probed, n = float(sys.argv[2]), sys.argv[3]
la5, la6, la7 = sys.argv[4:7]
alone, la8 = float(sys.argv[7]), sys.argv[8]
warm = d["warm"]
total = warm["total_ms"]
x509 = warm.get("x509_ms") or 0
print(f"## Trust-store loading, 10,001 certificates")
print()
print(f"- curl --cacert, probed: median of {n} curls' trust_load + trust_load_before = {probed:.2f} ms "
      f"(load average {la5} before, {la6} after)")
print(f"- tlsperf trust load --bundle --x509 (warm; load average {la7} after): total {total:.2f} ms, "
      f"with the full X.509 parse {total + x509:.2f} ms")
print(f"- OpenSSL's own load alone (python3 ssl load_verify_locations, same libcrypto, median of 3; "
      f"load average {la8} after): {alone:.2f} ms")
for name, ref in [("tlsperf trust load total", total), ("tlsperf trust load total + X.509 parse", total + x509),
                  ("OpenSSL's load alone", alone)]:
    r = probed / ref
    ok = "met" if abs(r - 1) <= 0.30 else "NOT met"
    print(f"- probed ÷ {name}: {r:.2f} (target within 30%: {ok})")
PY
