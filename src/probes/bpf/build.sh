#!/usr/bin/env bash
# Rebuilds probes.bpf.o from probes.bpf.c, owners.bpf.o from owners.bpf.c and capture.bpf.o
# from capture.bpf.c: the objects tlsperf embeds (src/probes/loader.rs, src/probes/owners.rs,
# src/observe/ebpf.rs; probes.bpf.c and owners.bpf.c include common.h, what they share),
# committed so that building tlsperf needs no BPF compiler. Needs clang and libbpf's headers
# (Debian: clang, libbpf-dev, linux-libc-dev). The output depends only on the source and the
# clang version, which is recorded in probes.bpf.clang; `build.sh --check` rebuilds into a
# temporary file and fails if it differs from the committed object (skipped, with a line
# saying so, when the installed clang is another version than the one recorded).
set -euo pipefail
cd "$(dirname "$0")"
check=0
[ "${1:-}" = "--check" ] && check=1
command -v clang >/dev/null || { echo "build.sh: clang is not installed (apt-get install clang libbpf-dev)" >&2; exit 2; }
version=$(clang --version | head -1)
if [ $check = 1 ] && [ "$version" != "$(cat probes.bpf.clang)" ]; then
  echo "build.sh --check: skipped: installed '$version', objects built with '$(cat probes.bpf.clang)'"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for name in probes owners capture; do
  out=$tmp/$name.bpf.o
  # -g: BTF for the maps; -fdebug-prefix-map keeps the build directory out of the object.
  clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu \
    -fdebug-prefix-map="$PWD"=. -c $name.bpf.c -o "$out"
  # DWARF line info is not needed at run time (BTF is); strip it so the object is small.
  llvm-strip -g "$out" 2>/dev/null || true
  if [ $check = 1 ]; then
    if cmp -s "$out" $name.bpf.o; then
      echo "build.sh --check: $name.bpf.o matches its source"
    else
      echo "build.sh --check: $name.bpf.o differs from what $name.bpf.c builds; run src/probes/bpf/build.sh and commit" >&2
      status=1
    fi
  else
    mv "$out" $name.bpf.o
    echo "wrote $(pwd)/$name.bpf.o ($(stat -c %s $name.bpf.o) bytes)"
  fi
done
[ $check = 1 ] || echo "$version" > probes.bpf.clang
exit $status
