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
#   And against `EVP_DigestSign` called as libssl calls it, timed by its own clock
#   (bench/parts/sign_alone.c, built here with cc against libssl-dev's headers): each
#   key's part in µs, and the ratio.
# - key exchange: nginx with an ECDSA P-256 certificate offering only X25519 against one
#   offering only P-384 (`ssl_ecdh_curve`); the ratio of their `key_exchange` parts' p50
#   (EVP_PKEY_keygen + EVP_PKEY_derive + EVP_PKEY_set1_encoded_public_key) against
#   `openssl speed`'s ecdhx25519 / ecdhp384 (one derivation each; the server also makes a
#   key of the same cost: the ratio is what is compared).
# - trust-store loading: a bundle of 10,000 CAs (`tlsperf pki bundle`, nginx's root
#   appended), in ROUNDS rounds, each one after the other under one probe (--pid of the
#   shell that runs them, libssl and the Go client as --exe):
#   - curl with `--cacert` the bundle, one connection: its handshake's `trust_load` (curl
#     7.88 reads the file inside SSL_connect: X509_load_cert_crl_file_ex) against OpenSSL's
#     own load of the same file timed alone, around the call (Python's ssl module,
#     SSLContext.load_verify_locations: SSL_CTX_load_verify_locations in the same
#     libcrypto, the same loader), whose probed time is also read (the probe against the
#     process's own clock);
#   - the Go client (tests/go/tlsclient -pool-per-conn, one connection): its handshake's
#     `trust_load_before` (AppendCertsFromPEM) against the client's own clock around the
#     same call (-pool-times), and, beside it, `tlsperf trust load --bundle` (warm median
#     of 2: rustls' loader, read + PEM + trust anchors; and with its full X.509 parse).
#   Each library's load is other work (docs/probes.md, "What trust_load holds"): OpenSSL
#   3.0 decodes every certificate into a full X509 and inserts it into the store with a
#   duplicate check that sorts the store's whole object list again after every insert
#   (quadratic); Go parses each certificate fully and hashes it; rustls' loader keeps the
#   subject and key. So each probed load is compared with the same library's load timed
#   by its own clock (target: within 30%, per round); `tlsperf trust load` is printed
#   beside, not a target.
# Every figure is printed with the load average beside it. Loopback only; everything
# made goes in a temporary directory, removed on every exit.
#
# Usage: [BIN=path/to/tlsperf] [ONLY=trust] bench/parts.sh [HANDSHAKES] [ROUNDS]   (default 300 3)
# ONLY=trust runs the trust-store loading alone, ONLY=sign-kex the signature and key exchange alone.
# Needs nginx, openssl, curl, python3, go, cc and libssl-dev;
# root (eBPF). BIN defaults to target/release/tlsperf.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-300}"
rounds="${2:-3}"
only="${ONLY:-}"
case "$only" in "" | trust | sign-kex) ;; *) echo "ONLY is trust, sign-kex or unset, not $only" >&2; exit 2 ;; esac
bin="${BIN:-$PWD/target/release/tlsperf}"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$bin" ] || { echo "no tlsperf binary at $bin (cargo build --release, or set BIN)" >&2; exit 1; }
[ -x "$nginx_bin" ] || { echo "missing nginx (apt-get install nginx-light)" >&2; exit 1; }
for c in openssl curl python3 go; do
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
  "$bin" observe --probes --probe-parts "$@" --json --out "$work/obs.json" > /dev/null 2> "$work/obs.err" &
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
echo "- binary: $bin ($("$bin" --version)); $n full TLS 1.3 handshakes per server, $rounds rounds of trust-store loading"
echo

# ---- signature and key exchange ----
if [ "$only" != trust ]; then
ec=$(nginx_start ec "$work/ec" "ssl_ecdh_curve X25519;")
rsa=$(nginx_start rsa "$work/rsa" "ssl_ecdh_curve X25519;")
p384=$(nginx_start p384 "$work/ec" "ssl_ecdh_curve secp384r1;")
# nginx_start runs in a subshell ($(…)): its masters are added to pids here.
pids+=("$ec" "$rsa" "$p384")
cc -O2 -o "$work/sign_alone" bench/parts/sign_alone.c -lcrypto
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
  echo "ec $("$work/sign_alone" "$work/ec/server.key" 3000)" >> "$work/alone.txt"
  echo "rsa $("$work/sign_alone" "$work/rsa/server.key" 200)" >> "$work/alone.txt"
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
python3 - "$work/speed.txt" "$work/sign.json" "$sig_rsa" "$sig_ec" "$kx_p" "$kx_x" "$la2" "$la3" "$la4" "$work/alone.txt" <<'PY'
import json, statistics, sys
speed, signj = sys.argv[1], sys.argv[2]
sig_rsa, sig_ec, kx_p, kx_x = map(float, sys.argv[3:7])
la2, la3, la4 = sys.argv[7:10]
alone = {"ec": [], "rsa": []}
for line in open(sys.argv[10]):
    k, v = line.split()
    alone[k].append(float(v))
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
ec_us, rsa_us = statistics.median(alone["ec"]), statistics.median(alone["rsa"])
print()
print("Against `EVP_DigestSign` as libssl calls it, timed by its own clock "
      "(bench/parts/sign_alone.c, median of each round's median, same rounds):")
print()
print("| | probed p50 µs | alone µs | probed ÷ alone |")
print("|---|---:|---:|---:|")
print(f"| ECDSA P-256 | {sig_ec * 1e3:.1f} | {ec_us:.1f} | {sig_ec * 1e3 / ec_us:.2f} |")
print(f"| RSA-4096 (PSS) | {sig_rsa * 1e3:.1f} | {rsa_us:.1f} | {sig_rsa * 1e3 / rsa_us:.2f} |")
print(f"| ratio RSA-4096 ÷ ECDSA P-256 | {sig_rsa / sig_ec:.2f} | {rsa_us / ec_us:.2f} | "
      f"{(sig_rsa / sig_ec) / (rsa_us / ec_us):.2f} (within 25%: "
      f"{'met' if abs((sig_rsa / sig_ec) / (rsa_us / ec_us) - 1) <= 0.25 else 'NOT met'}) |")
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
fi

# ---- trust-store loading ----
if [ "$only" = sign-kex ]; then
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
if [ "$only" = trust ]; then
  ec=$(nginx_start ec "$work/ec" "ssl_ecdh_curve X25519;")
  pids+=("$ec")
fi
"$bin" pki bundle --count 10000 --out "$work/bundle.pem" -q
cat "$work/ec/root.pem" >> "$work/bundle.pem"
(cd tests/go && CGO_ENABLED=0 go build -o "$work/" ./tlsclient)
port=$(cat "$work/ec/port")
# OpenSSL's own load, timed around the call in a fresh context (ms on stdout).
cat > "$work/alone.py" <<'PY'
import ssl, sys, time
c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
s = time.perf_counter()
c.load_verify_locations(cafile=sys.argv[1])
print("%.3f" % ((time.perf_counter() - s) * 1e3))
PY
go="$work/go"
# Each round: curl, OpenSSL alone, the Go client, tlsperf trust load; each pid noted.
cat > "$work/rounds.sh" <<SH
i=0; while [ ! -e $go ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i+1)); done
for r in \$(seq $rounds); do
  echo "\$r load \$(cut -d' ' -f1 /proc/loadavg)" >> $work/rounds.txt
  curl -s -o /dev/null --cacert $work/bundle.pem https://localhost:$port/ & p=\$!; wait \$p
  echo "\$r curl \$p" >> $work/rounds.txt
  python3 $work/alone.py $work/bundle.pem > $work/alone.out & p=\$!; wait \$p
  echo "\$r python3 \$p \$(cat $work/alone.out)" >> $work/rounds.txt
  $work/tlsclient -addr 127.0.0.1:$port -n 1 -pool-per-conn $work/bundle.pem -pool-times > /dev/null 2> $work/go.out & p=\$!; wait \$p
  echo "\$r tlsclient \$p \$(cut -d' ' -f2 $work/go.out)" >> $work/rounds.txt
  $bin trust load --bundle $work/bundle.pem --iterations 3 --x509 --json -q > $work/trust-\$r.json
done
SH
sh "$work/rounds.sh" &
shell=$!
observe_start --pid "$shell" --exe "$libssl" --exe "$work/tlsclient"
la5=$(loadavg)
touch "$go"
wait "$shell"
la6=$(loadavg)
observe_stop
python3 - "$work" "$la5" "$la6" <<'PY'
import json, statistics, sys
work, la5, la6 = sys.argv[1:4]
p = json.load(open(f"{work}/obs.json"))["probes"]
rounds = {}
for line in open(f"{work}/rounds.txt"):
    f = line.split()
    rounds.setdefault(int(f[0]), {})[f[1]] = f[2:]
def phase_ms(comm, pid, phase):
    r = p["by_process"].get(f"{comm} (pid {pid}) client")
    if not r or phase not in r["phases"]:
        return None
    q = r["phases"][phase]["quantiles"]
    return q["p50_ns"] / 1e6 if q["count"] == 1 else None
def loads_ms(comm, pid):
    t = p["trust_loads"].get(f"{comm} (pid {pid})")
    return t["total_ns"] / 1e6 if t and t["loads"] == 1 else None
def ratio(a, b):
    return a / b if a is not None and b else None
def fmt(v, d=1):
    return "-" if v is None else f"{v:,.{d}f}"
print("## Trust-store loading, 10,001 certificates (one file)")
print()
print(f"Probed rounds: load average {la5} before, {la6} after (each round's below).")
print()
print("| round (load) | curl's trust_load | OpenSSL alone (its clock; probed) | curl ÷ alone | Go client's trust_load_before | Go's own clock | probed ÷ own | tlsperf trust load warm (+ X.509 parse) | Go ÷ trust load (+ X.509) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
ratios = {"curl": [], "own": [], "tl": [], "tlx": [], "py": []}
for r in sorted(rounds):
    d = rounds[r]
    curl = phase_ms("curl", d["curl"][0], "trust_load") if "curl" in d else None
    py_own = float(d["python3"][1]) if "python3" in d and len(d["python3"]) > 1 else None
    py_probed = loads_ms("python3", d["python3"][0]) if "python3" in d else None
    gop = phase_ms("tlsclient", d["tlsclient"][0], "trust_load_before") if "tlsclient" in d else None
    go_own = float(d["tlsclient"][1]) if "tlsclient" in d and len(d["tlsclient"]) > 1 else None
    t = json.load(open(f"{work}/trust-{r}.json"))["warm"]
    tl, tlx = t["total_ms"], t["total_ms"] + (t.get("x509_ms") or 0)
    rc, rown, rtl, rtlx, rpy = ratio(curl, py_own), ratio(gop, go_own), ratio(gop, tl), ratio(gop, tlx), ratio(py_probed, py_own)
    for k, v in (("curl", rc), ("own", rown), ("tl", rtl), ("tlx", rtlx), ("py", rpy)):
        if v is not None:
            ratios[k].append(v)
    print(f"| {r} ({d['load'][0]}) | {fmt(curl)} | {fmt(py_own)} ({fmt(py_probed)}) | {fmt(rc, 2)} | {fmt(gop)} | {fmt(go_own)} | {fmt(rown, 2)} | {fmt(tl)} ({fmt(tlx)}) | {fmt(rtl, 2)} ({fmt(rtlx, 2)}) |")
print()
def summary(name, v, target=True):
    if not v:
        print(f"- {name}: not measured")
        return
    met = sum(abs(x - 1) <= 0.30 for x in v)
    tail = f"; within 30% in {met} of {len(v)} rounds" if target else " (other work: not a target)"
    print(f"- {name}: median {statistics.median(v):.2f} (range {min(v):.2f}–{max(v):.2f}){tail}")
summary("curl's trust_load ÷ OpenSSL's load alone", ratios["curl"])
summary("the probe's view of OpenSSL's load alone ÷ that process's own clock", ratios["py"])
summary("the Go client's trust_load_before ÷ its own clock around AppendCertsFromPEM", ratios["own"])
summary("the Go client's trust_load_before ÷ tlsperf trust load (warm)", ratios["tl"], False)
summary("the Go client's trust_load_before ÷ tlsperf trust load with the X.509 parse", ratios["tlx"], False)
PY
