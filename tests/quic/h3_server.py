"""An HTTP/3 server with aioquic that logs every handshake: tests/quic.rs's second server
for `tlsperf load --http3` (beside ngtcp2's example server).

    python3 h3_server.py CERT KEY [--retry] [--seconds S]

Listens on 127.0.0.1, on a port of the system's choosing, and prints it first as a JSON
line ({"port": N}); then one JSON line per completed handshake, as aioquic reports it:
{"handshake": {"resumed": …, "early_data_accepted": …}}. Answers every request with 200
and the body {"status":"ok"}. Session tickets are kept in memory (so clients resume, and
may send 0-RTT data, which aioquic's tickets allow); with --retry every new client's
address is validated with a Retry first. Exits after --seconds (default 60).
"""

import argparse
import asyncio
import json
import sys

from aioquic.asyncio import serve
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted, ProtocolNegotiated

BODY = b'{"status":"ok"}'


def say(line):
    print(json.dumps(line), flush=True)


class Server(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = None

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
            self.h3 = H3Connection(self._quic)
        if isinstance(event, HandshakeCompleted):
            say(
                {
                    "handshake": {
                        "resumed": event.session_resumed,
                        "early_data_accepted": event.early_data_accepted,
                    }
                }
            )
        if self.h3 is None:
            return
        for e in self.h3.handle_event(event):
            # The request ends with its headers, or with a (possibly empty) DATA frame or
            # STREAM frame's FIN after them.
            if isinstance(e, (HeadersReceived, DataReceived)) and e.stream_ended:
                self.h3.send_headers(
                    e.stream_id,
                    [
                        (b":status", b"200"),
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(BODY)).encode()),
                    ],
                )
                self.h3.send_data(e.stream_id, BODY, end_stream=True)
                self.transmit()


class Tickets:
    def __init__(self):
        self.tickets = {}

    def add(self, ticket):
        self.tickets[ticket.ticket] = ticket

    def pop(self, label):
        return self.tickets.pop(label, None)


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("cert")
    p.add_argument("key")
    p.add_argument("--retry", action="store_true")
    p.add_argument("--seconds", type=float, default=60.0)
    a = p.parse_args()
    config = QuicConfiguration(alpn_protocols=H3_ALPN, is_client=False)
    config.load_cert_chain(a.cert, a.key)
    tickets = Tickets()
    server = await serve(
        "127.0.0.1",
        0,
        configuration=config,
        create_protocol=Server,
        session_ticket_fetcher=tickets.pop,
        session_ticket_handler=tickets.add,
        retry=a.retry,
    )
    say({"port": server._transport.get_extra_info("sockname")[1]})
    await asyncio.sleep(a.seconds)
    server.close()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
