# Sourced by bench/quic-server.sh and bench/quic-client.sh (not run on its own), after
# bench/capacity-setup.sh (which gives `bin`, `work`, `pids` and their cleanup): checks
# that ngtcp2's example client and server are installed (`ngtcp2_server`: the server's
# path), makes the test PKI (`$work/pki`, ECDSA P-256) and a document root holding serve's
# body (`$work/htdocs`), and defines `free_port` (a free UDP port on 127.0.0.1), `cpu_ns
# PID` (the CPU time PID's threads ran, nanoseconds, summed over
# /proc/PID/task/*/schedstat: /proc/PID/stat's clock ticks are 10 ms, too coarse) and
# `median VALUES…`.
ngtcp2_server="$(command -v gtlsserver || echo /usr/sbin/gtlsserver)"
[ -x "$ngtcp2_server" ] && command -v gtlsclient >/dev/null \
  || { echo "needs gtlsclient and gtlsserver (ngtcp2-client, ngtcp2-server)" >&2; exit 2; }
"$bin" pki init "$work/pki" --key-type ecdsa-p256 -q
mkdir "$work/htdocs"
printf '{"status":"ok"}' > "$work/htdocs/index.html"

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s}'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
