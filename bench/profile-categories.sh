#!/usr/bin/env bash
# Where a server's CPU goes during full TLS handshakes, by category: kernel, crypto
# (aws-lc), allocation, memcpy/memset, rustls, hyper/http, tokio/mio, tlsperf itself,
# other. Samples `perf record -e cpu-clock` (hardware counters are often unavailable in
# VMs) on the server process during `h2load --h1 -n N -c 50 -t 1 -H 'Connection: close'`.
#
# Usage: bench/profile-categories.sh PID URL [N=3000]   (needs perf and h2load; as root)
# Prints a markdown table: category, % of the server's samples, µs per connection (the
# share of the server's CPU per connection measured around the same run, from
# /proc/PID/task/*/schedstat).
set -euo pipefail
pid="$1"
url="$2"
n="${3:-3000}"
for t in perf h2load; do command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 1; }; done
[ -d "/proc/$pid" ] || { echo "no process $pid" >&2; exit 2; }
work="$(mktemp -d)"
rec=""
cleanup() { [ -n "$rec" ] && kill -INT "$rec" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }
perf record -q -e cpu-clock -F 4000 -o "$work/perf.data" -p "$pid" >/dev/null 2>&1 &
rec=$!
sleep 0.5
b=$(cpu_ns "$pid")
h2load --h1 -n "$n" -c 50 -t 1 -H 'Connection: close' "$url" > "$work/h2.out" 2>&1
a=$(cpu_ns "$pid")
kill -INT "$rec"; wait "$rec" 2>/dev/null || true; rec=""
grep -q "$n succeeded" "$work/h2.out" || { echo "h2load failed:" >&2; cat "$work/h2.out" >&2; exit 1; }
perf report -i "$work/perf.data" --no-children --sort dso,sym -g none --stdio 2>/dev/null \
  | awk -v us="$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN {print (a - b) / 1000 / n}')" '
  /^#/ || NF < 4 { next }
  {
    pct = $1; sub("%", "", pct); dso = $2; sym = $0; sub(/^[^]]*\] /, "", sym)
    c = "other"
    if ($3 == "[k]") c = "kernel"
    else if (sym ~ /aws_lc|curve25519|nistz256|sha256|sha512|bignum_|^L|aes_|HMAC|CRYPTO_|jent_|gcm|ghash|EVP_|bn_|ec_|ECDSA|p256/) c = "crypto (aws-lc)"
    else if (sym ~ /^_?mi_|malloc|free|realloc|calloc/) c = "allocation"
    else if (sym ~ /mem(move|cpy|set|cmp)/) c = "memcpy/memset"
    else if (sym ~ /rustls|webpki/) c = "rustls"
    else if (sym ~ /hyper|http::|httparse|h2::/) c = "hyper/http"
    else if (sym ~ /tokio|mio::|epoll|parking_lot|futures/) c = "tokio/mio"
    else if (sym ~ /tlsperf|hdrhistogram|prometheus/) c = "tlsperf (metrics, wrappers)"
    else if (dso ~ /vdso/) c = "vdso (clock)"
    else if (dso ~ /libc/) c = "libc (syscall stubs, other)"
    s[c] += pct; t += pct
  }
  END {
    printf "| category | %% of server samples | µs per connection |\n|---|---:|---:|\n"
    for (c in s) printf "| %s | %.1f | %.1f |\n", c, s[c] * 100 / t, s[c] / t * us
    printf "| **all** | 100 | %.1f |\n", us
  }' | { read -r h1; read -r h2; echo "$h1"; echo "$h2"; sort -t'|' -k3 -rn | grep -v '\*\*all'; echo "| **all** | 100 | $(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN {printf "%.1f", (a - b) / 1000 / n}') |"; }
