"""A TLS server driven by OpenSSL (Python's ssl module, which calls the system's libssl):
its SNI callback, run by OpenSSL inside SSL_do_handshake, first sleeps or burns CPU for a
set time, so that the probes' on-CPU/blocked split of `work` can be checked against a
known cause. Prints "listening on ADDR:PORT", then serves connections one at a time: the
handshake, then an answer to whatever comes (HTTP or nothing), then close. Exits after
--duration seconds.

    python3 callback_server.py --cert CHAIN --key KEY --sleep-ms 20 | --burn-ms 20
"""

import argparse
import select
import socket
import ssl
import time


def burn(seconds):
    """Runs a CPU-bound loop until this thread has spent `seconds` of CPU time."""
    end = time.thread_time() + seconds
    x = 1
    while time.thread_time() < end:
        for _ in range(1000):
            x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--sleep-ms", type=float, default=0)
    ap.add_argument("--burn-ms", type=float, default=0)
    ap.add_argument("--duration", type=float, default=120)
    a = ap.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)

    def on_sni(sslobj, name, context):
        if a.sleep_ms:
            time.sleep(a.sleep_ms / 1000)
        if a.burn_ms:
            burn(a.burn_ms / 1000)
        return None

    ctx.sni_callback = on_sni
    ln = socket.socket()
    ln.bind(("127.0.0.1", 0))
    ln.listen(64)
    host, port = ln.getsockname()
    print(f"listening on {host}:{port}", flush=True)

    deadline = time.monotonic() + a.duration
    while time.monotonic() < deadline:
        try:
            ready, _, _ = select.select([ln], [], [], 0.5)
        except OSError:
            return
        if not ready:
            continue
        try:
            raw, _ = ln.accept()
        except OSError:
            return
        raw.settimeout(10)
        try:
            with ctx.wrap_socket(raw, server_side=True) as tls:
                try:
                    if tls.recv(4096):
                        tls.sendall(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        )
                except (OSError, ssl.SSLError):
                    pass
        except (OSError, ssl.SSLError):
            raw.close()


if __name__ == "__main__":
    main()
