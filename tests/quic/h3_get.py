"""An HTTP/3 GET with aioquic that verifies the server's chain: tests/quic.rs's second
client of `tlsperf serve --quic` (ngtcp2's example client does not verify certificates).

    python3 h3_get.py HOST PORT CAFILE [--connections N] [--zero-rtt]
                      [--socket bound|connected]

Makes N connections one after the other (the later ones resuming with the last session
ticket the server sent; with --zero-rtt, the request goes in 0-RTT), each `GET /` with
SNI `localhost`, and prints one JSON line per connection: status, body length, whether
the handshake resumed and whether the server accepted early data. Exits 1 with the
reason on stderr when a connection fails (a chain that does not verify included).

--socket says how each connection's UDP socket gets its port: `bound` (the default,
aioquic's own: `bind()` to port 0) or `connected` (`connect()` without `bind()`, then
`getsockname()`, as Chromium's QUIC sockets do: the kernel binds it in `connect()`).
Each line says the socket's local address and this process's pid.
"""

import argparse
import asyncio
import contextlib
import json
import os
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import HandshakeCompleted


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.status = None
        self.alt_svc = None
        self.body = b""
        self.resumed = None
        self.early = None
        self.done = asyncio.Event()
        # aioquic's own wait_connected() misses a handshake that completed while nothing
        # waited for it (the 0-RTT case): this one does not.
        self.connected = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.resumed = event.session_resumed
            self.early = event.early_data_accepted
            self.connected.set()
        for e in self.h3.handle_event(event):
            if isinstance(e, HeadersReceived):
                for k, v in e.headers:
                    if k == b":status":
                        self.status = int(v)
                if e.stream_ended:
                    self.done.set()
            elif isinstance(e, DataReceived):
                self.body += e.data
                if e.stream_ended:
                    self.done.set()

    def request(self, method, authority, end_stream):
        """Sends `method /`'s headers on a new stream; returns the stream."""
        sid = self._quic.get_next_available_stream_id()
        self.h3.send_headers(
            sid,
            [
                (b":method", method),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", b"/"),
            ],
            end_stream=end_stream,
        )
        self.transmit()
        return sid

    def get(self, authority):
        self.request(b"GET", authority, True)

    async def trickle(self, authority, seconds):
        """POST / with a body sent a byte every 0.3 s, for at most `seconds` or until the
        server answers: a slow upload."""
        sid = self.request(b"POST", authority, False)
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while not self.done.is_set() and loop.time() < end:
            try:
                self.h3.send_data(sid, b"x", end_stream=False)
                self.transmit()
            except Exception:
                # The server refused the rest of the body (STOP_SENDING).
                pass
            try:
                await asyncio.wait_for(self.done.wait(), 0.3)
            except asyncio.TimeoutError:
                pass


def local(sock):
    """`sock`'s local address, `host:port` (`[host]:port` for IPv6)."""
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@contextlib.asynccontextmanager
async def unbound(args, configuration, session_ticket_handler, wait_connected):
    """aioquic's `connect()` over a socket the kernel binds in `connect()` (asyncio's
    transport then asks for its address)."""
    loop = asyncio.get_running_loop()
    connection = QuicConnection(
        configuration=configuration, session_ticket_handler=session_ticket_handler
    )
    addr = (args.host, args.port)
    transport, protocol = await loop.create_datagram_endpoint(
        lambda: Client(connection), remote_addr=addr
    )
    try:
        protocol.connect(addr, transmit=wait_connected)
        if wait_connected:
            await protocol.wait_connected()
        yield protocol
    finally:
        protocol.close()
        await protocol.wait_closed()
        transport.close()


async def one(args, ticket):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    config.load_verify_locations(args.cafile)
    config.session_ticket = ticket
    tickets = []
    wait = not (args.zero_rtt and ticket is not None)
    if args.socket == "bound":
        opened = connect(
            args.host,
            args.port,
            configuration=config,
            create_protocol=Client,
            session_ticket_handler=tickets.append,
            wait_connected=wait,
        )
    else:
        opened = unbound(args, config, tickets.append, wait)
    async with opened as client:
        if args.trickle:
            started = asyncio.get_running_loop().time()
            await client.trickle(f"localhost:{args.port}", args.trickle)
            if not client.done.is_set():
                print(json.dumps({"status": None, "answered_after_s": None}), flush=True)
                return ticket
            took = asyncio.get_running_loop().time() - started
            print(json.dumps({"status": client.status, "answered_after_s": took}), flush=True)
            return ticket
        client.get(f"localhost:{args.port}")
        await asyncio.wait_for(client.done.wait(), 10)
        await asyncio.wait_for(client.connected.wait(), 10)
        # The server's tickets come right after its handshake; give them a moment.
        for _ in range(50):
            if tickets:
                break
            await asyncio.sleep(0.02)
        print(
            json.dumps(
                {
                    "status": client.status,
                    "body_len": len(client.body),
                    "resumed": client.resumed,
                    "early_data_accepted": client.early,
                    "local": local(client._transport.get_extra_info("socket")),
                    "pid": os.getpid(),
                }
            ),
            flush=True,
        )
    return tickets[-1] if tickets else ticket


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("cafile")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--zero-rtt", action="store_true")
    p.add_argument("--socket", choices=["bound", "connected"], default="bound")
    p.add_argument(
        "--trickle",
        type=float,
        default=0,
        help="POST a body a byte every 0.3 s for at most this many seconds instead of a GET",
    )
    args = p.parse_args()
    ticket = None
    for _ in range(args.connections):
        ticket = await asyncio.wait_for(one(args, ticket), 20)


try:
    asyncio.run(main())
except Exception as e:  # the reason, in one line, for the test's message
    print(f"h3_get: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
