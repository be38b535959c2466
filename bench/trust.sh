#!/usr/bin/env bash
# Trust-store load benchmark (issue: trust-store lab). Everything side by side, one run:
#   1. cold loads, each loader first in its own fresh process, alternating A B C …:
#      tlsperf's system store, rustls_native_certs::load_native_certs(), and "read one
#      bundle with rustls-pki-types into a RootCertStore";
#   2. warm loads (median of repeats in one process) from `tlsperf trust load`;
#   3. OpenSSL's load of the same bundle (Python ssl.create_default_context()), cold
#      (fresh process) and warm (repeats in one process);
#   4. file-opening and stat syscalls per load (strace -f -c), when strace is installed;
#   5. load time against bundle size, 10 … 10,000 CAs from `tlsperf pki bundle`.
# Prints a markdown report on stdout. Only reads local files; no network.
#
# Usage: bench/trust.sh [ROUNDS]   (default 30 fresh processes per cold loader)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-30}"
cargo build --release --locked --quiet --bin tlsperf --example cold_load
bin=target/release/tlsperf
cold=target/release/examples/cold_load
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

bundle=$("$bin" trust probe --json | python3 -c 'import json,sys; p=json.load(sys.stdin); i=p["chosen_file"]; print(p["entries"][i]["resolved"] if i is not None else "")')
if [ -z "$bundle" ]; then echo "no system CA bundle found; nothing to measure" >&2; exit 1; fi

median() { sort -n "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }
iqr() { sort -n "$1" | awk '{a[NR]=$1} END {q1=a[int((NR-1)*0.25)+1]; q3=a[int((NR-1)*0.75)+1]; printf "%.0f–%.0f", q1, q3}'; }

echo "# Trust-store load benchmark"
echo
echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); machine: $(nproc) cores, $(uname -r)"
echo "- bundle: $bundle ($(stat -c %s "$bundle") bytes, $(grep -c 'BEGIN CERTIFICATE' "$bundle") certificates)"
echo "- SSL_CERT_FILE=${SSL_CERT_FILE:-unset} SSL_CERT_DIR=${SSL_CERT_DIR:-unset}"
echo

# 1. Cold, alternating, fresh processes.
for w in tlsperf native pki-types; do : > "$work/cold-$w"; done
for _ in $(seq "$rounds"); do
  for w in tlsperf native pki-types; do
    "$cold" "$w" "$bundle" | awk '{print $1}' >> "$work/cold-$w"
  done
done
py_cold="$work/cold-openssl"; : > "$py_cold"
for _ in $(seq "$rounds"); do
  python3 -c 'import ssl,time; t=time.perf_counter(); ssl.create_default_context(); print("%.1f" % ((time.perf_counter()-t)*1e6))' >> "$py_cold"
done
py_warm=$(python3 -c '
import ssl, time, statistics
runs = []
for _ in range(50):
    t = time.perf_counter(); ssl.create_default_context(); runs.append((time.perf_counter() - t) * 1e6)
print("%.1f" % statistics.median(runs))')

# 2. Warm, one process.
"$bin" trust load --system --iterations 200 --json > "$work/warm.json"
read -r ours_warm native_warm pki_warm anchors native_certs <<<"$(python3 -c '
import json,sys
v = json.load(open(sys.argv[1]))
b = {x["name"].split(" ")[0]: x for x in v["baselines"]}
native = v["baselines"][0]; pki = v["baselines"][1]
print("%.1f %.1f %.1f %d %d" % (v["warm"]["total_ms"]*1e3, native["warm_ms"]*1e3, pki["warm_ms"]*1e3, v["stats"]["anchors"], native["certs"]))' "$work/warm.json")"

ours_cold=$(median "$work/cold-tlsperf"); native_cold=$(median "$work/cold-native"); pki_cold=$(median "$work/cold-pki-types"); ossl_cold=$(median "$py_cold")
ratio() { python3 -c "import sys; print('%.3f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2"; }

echo "## System store load, one run (µs; cold = median of $rounds fresh processes, each loader first in its process, IQR beside it; warm = median of repeats in one process)"
echo
echo "| loader | cold µs | cold IQR | warm µs | certificates | tlsperf ÷ it, cold | tlsperf ÷ it, warm |"
echo "|---|---:|---:|---:|---:|---:|---:|"
echo "| tlsperf \`TrustStore::system()\` | $ours_cold | $(iqr "$work/cold-tlsperf") | $ours_warm | $anchors anchors | 1 | 1 |"
echo "| \`rustls_native_certs::load_native_certs()\` | $native_cold | $(iqr "$work/cold-native") | $native_warm | $native_certs | $(ratio "$ours_cold" "$native_cold") | $(ratio "$ours_warm" "$native_warm") |"
echo "| read bundle + rustls-pki-types PEM + \`RootCertStore\` | $pki_cold | $(iqr "$work/cold-pki-types") | $pki_warm | – | $(ratio "$ours_cold" "$pki_cold") | $(ratio "$ours_warm" "$pki_warm") |"
echo "| OpenSSL 3 via Python \`ssl.create_default_context()\` | $ossl_cold | $(iqr "$py_cold") | $py_warm | – | $(ratio "$ours_cold" "$ossl_cold") | $(ratio "$ours_warm" "$py_warm") |"
echo
echo "Shared store once loaded (\`TrustStore::system_shared()\`): $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["shared_warm_ns"])' "$work/warm.json") ns per access, no I/O."
echo

# 4. Syscalls.
if command -v strace >/dev/null; then
  count() { strace -f -c -e trace=openat,open,statx,stat,newfstatat,lstat "$@" 2>&1 >/dev/null | awk '$NF ~ /^(openat|open|statx|stat|newfstatat|lstat)$/ {printf "%s=%s ", $NF, $4}'; }
  echo "## Syscalls of one cold load (strace -c; the process's own start-up included in both)"
  echo
  echo "| loader | calls |"
  echo "|---|---|"
  echo "| tlsperf | $(count "$cold" tlsperf "$bundle") |"
  echo "| rustls-native-certs | $(count "$cold" native "$bundle") |"
  echo "| baseline: process start, no load | $(count "$cold" none "$bundle" || true) |"
  echo
else
  echo "(strace not installed: syscall counts skipped)"
  echo
fi

# 5. Bundle size scaling.
echo "## Load time against bundle size (synthetic ECDSA P-256 CAs, 10% cross-signed twins; warm medians, µs)"
echo
echo "| CAs | bytes | tlsperf (anchors) | rustls-pki-types + RootCertStore | ratio |"
echo "|---:|---:|---:|---:|---:|"
for n in 10 100 1000 10000; do
  "$bin" pki bundle --count "$n" --cross-signed $((n / 10)) --out "$work/b$n.pem" --force -q
  "$bin" trust load --bundle "$work/b$n.pem" --iterations 30 --json > "$work/s$n.json"
  python3 -c '
import json,sys,os
v = json.load(open(sys.argv[1])); n = sys.argv[2]; size = os.path.getsize(sys.argv[3])
ours = v["warm"]["total_ms"]*1e3; base = v["baselines"][0]["warm_ms"]*1e3
print("| %s | %d | %.1f | %.1f | %.3f |" % (n, size, ours, base, ours/base))' "$work/s$n.json" "$n" "$work/b$n.pem"
done
