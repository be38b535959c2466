# Sourced by bench/capacity.sh and bench/capacity-pairs.sh (not run on its own): the
# binary (`BIN`, or a release build made here) as `bin`; a work directory `work`
# removed at exit (kept, and its path printed on stderr, with KEEP=1) with the processes
# listed in `pids`; and the command prefixes `srv`
# and `gen` that pin the server to the last CPU and the generator to the first (with two
# or more CPUs and taskset, unless PIN=0) and run both at nice NICE when it is set (e.g.
# NICE=-10, as root: on a machine shared with builds their CPU time then hardly depends
# on the builds'), described in `pinning`; `server_cpu` is the server's CPU when pinned,
# else empty.
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked --quiet --bin tlsperf
  BIN="$PWD/target/release/tlsperf"
fi
bin="$BIN"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
srv=()
gen=()
if [ -n "${NICE:-}" ]; then
  srv=(nice -n "$NICE")
  gen=(nice -n "$NICE")
fi
ncpu=$(nproc)
pinning="not pinned"
server_cpu=""
if [ "${PIN:-1}" = 1 ] && [ "$ncpu" -ge 2 ] && command -v taskset > /dev/null; then
  srv+=(taskset -c "$((ncpu - 1))")
  gen+=(taskset -c 0)
  server_cpu=$((ncpu - 1))
  pinning="server on CPU $server_cpu, generator on CPU 0 (taskset)"
fi
if [ -n "${NICE:-}" ]; then pinning="$pinning; both at nice $NICE"; fi
