//! The handshake timeline of one TCP connection, built from its TLS records as they come
//! off the reassembled streams: when each step was seen on the wire, what the hellos
//! said, and — once the connection ends — the handshake's kind and phases, or why it
//! failed.
//!
//! Where each timestamp is taken (capture timestamps, nanoseconds). A byte's time is that
//! of the segment that made it readable in its reassembled stream: the segment carrying
//! it when segments come in order; for bytes captured ahead of a gap (out of order, or
//! before a lost segment's retransmission), the segment that filled the gap.
//! - `syn`, `syn_ack`, `ack`: the segments themselves (the client's first ACK of the
//!   SYN-ACK ends TCP connect).
//! - ClientHello: the segment that completed it, i.e. its last byte's time (the server
//!   cannot start before).
//! - ServerHello: the segment delivering its first byte.
//! - end of the server's flight: the segment completing the server's last record before
//!   the client's reply (TLS 1.2: ServerHelloDone, or the server's Finished when resumed;
//!   TLS 1.3: the server's Finished).
//! - client Finished: the segment delivering the first byte of the client's reply record:
//!   TLS 1.3 its first encrypted record after the server's flight; with early data
//!   offered, the first one acknowledging the first encrypted record of the server's
//!   flight. Early data is written with the ClientHello, before any of that flight can
//!   reach the client, so it is not taken for the reply; the reply may cross records
//!   the server sent after its flight's first (half-RTT data: an answer to the early
//!   request, sent before the client's Finished), so acknowledging every server byte
//!   seen is not asked. TLS 1.2: its ChangeCipherSpec.
//! - first application byte: the client's first application-data record after its
//!   Finished (its request), or with accepted 0-RTT its first early-data record. Early
//!   data counts as accepted (kind `0rtt`) only when the server resumed, the ClientHello
//!   it answered offered early data (after a HelloRetryRequest, the second one, which
//!   may not: RFC 8446 §4.2.10), and the client's first record after the server's flight
//!   is shorter than a lone Finished: its EndOfEarlyData, which a client sends only when
//!   the server took its early data. Refused early data was discarded by the server; the
//!   client sends its request again after its Finished, and that is what is timed.
//! - the request: the segment that completed the client's first application-data record
//!   after its Finished (as the ClientHello for `server_think`: the server cannot answer
//!   before). Not taken with 0-RTT: the early data is the request, and the server may
//!   answer it inside its own flight (half-RTT data), where its records cannot be told
//!   from the handshake's.
//! - the server's first byte: the segment delivering the first byte of the server's
//!   first application-data record after the request (as the ServerHello for
//!   `server_think`), its NewSessionTickets left out. In TLS 1.3 a ticket is an
//!   encrypted record like any other, sent after the client's Finished, so often after
//!   the request is on the wire and before the answer. A server that sends its tickets
//!   in its first flight (Go, when it asks no client certificate) sends none after the
//!   client's Finished: when its flight holds encrypted records after one of a lone
//!   Finished's length (53 bytes of body; 69 with SHA-384), the first record after the
//!   request is the answer. Otherwise, when the client offered
//!   psk_key_exchange_modes (without it servers send no tickets), the server's first
//!   application-data record after the client's Finished is taken to be a ticket, and so
//!   is each following record of exactly its length (OpenSSL sends each ticket in a
//!   record of its own, rustls all in one); the first record of another length is the
//!   answer. A server that sends no ticket although the client took them has its first
//!   answer record skipped (its second one, if any, is timed).

use std::net::SocketAddr;

use super::tls::{self, ClientHello, HandshakeBuf, ServerHello, content, msg};

/// Which end of the connection sent something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// The end that sent the SYN.
    Client,
    /// The other end.
    Server,
}

impl Endpoint {
    fn index(self) -> usize {
        match self {
            Endpoint::Client => 0,
            Endpoint::Server => 1,
        }
    }
}

/// One TLS record as seen on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Who sent it.
    pub side: Endpoint,
    /// Content type.
    pub content_type: u8,
    /// Its body.
    pub body: &'a [u8],
    /// Capture time of the segment that delivered its first byte (made it readable in
    /// the reassembled stream: see the module's documentation).
    pub first_ns: u64,
    /// Capture time of the segment that delivered its last byte (completed it).
    pub last_ns: u64,
    /// Part of its body was not captured (a frame cut by the snap length): zeros there.
    pub cut: bool,
    /// Its stream offset (of its header's first byte; 0 is the byte after the SYN).
    pub offset: u64,
    /// How much of the other side's stream the segment carrying its first byte
    /// acknowledged (a stream offset; 0 without an ACK).
    pub peer_acked: u64,
}

/// The kinds of handshake, named as in `tlsperf serve`'s /stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HandshakeKind {
    /// A full handshake.
    Full,
    /// A full handshake after a HelloRetryRequest (one more round trip).
    FullHrr,
    /// A resumed session (TLS 1.3 PSK, TLS 1.2 session id or ticket).
    Resumed,
    /// A TLS 1.3 resumption whose client sent early data.
    ZeroRtt,
}

impl HandshakeKind {
    /// Every kind, in report order.
    pub const ALL: [HandshakeKind; 4] = [
        HandshakeKind::Full,
        HandshakeKind::FullHrr,
        HandshakeKind::Resumed,
        HandshakeKind::ZeroRtt,
    ];

    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeKind::Full => "full",
            HandshakeKind::FullHrr => "full-hrr",
            HandshakeKind::Resumed => "resumed",
            HandshakeKind::ZeroRtt => "0rtt",
        }
    }
}

/// The transport that carried a handshake: TLS over TCP, or QUIC (TLS inside QUIC's own
/// packets, over UDP). Their phases are not the same (QUIC has no `connect`, and its
/// handshake saves a round trip), so their distributions are kept apart everywhere.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// TLS records in a TCP stream.
    #[default]
    Tcp,
    /// QUIC over UDP.
    Quic,
}

impl Transport {
    /// Both, in report order.
    pub const ALL: [Transport; 2] = [Transport::Tcp, Transport::Quic];

    /// `tcp` or `quic`, as the metrics, windows and the handshake log call it.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Quic => "quic",
        }
    }

    /// Whether it is TCP (what a series key leaves out: the keys written before QUIC
    /// was observed were all TCP's).
    pub fn is_tcp(&self) -> bool {
        *self == Transport::Tcp
    }
}

/// The phases of one handshake (nanoseconds); `None` when a boundary was not captured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Phases {
    /// SYN → the client's ACK of the SYN-ACK.
    pub connect: Option<u64>,
    /// ClientHello → ServerHello (after a HelloRetryRequest, from the second ClientHello).
    pub server_think: Option<u64>,
    /// ServerHello → the end of the server's flight.
    pub server_flight: Option<u64>,
    /// End of the server's flight → the client's Finished.
    pub client_think: Option<u64>,
    /// First ClientHello → the client's Finished.
    pub tls: Option<u64>,
    /// SYN (or the first ClientHello when the SYN was not captured) → the client's first
    /// application-data byte.
    pub first_app_byte: Option<u64>,
    /// The client's first application-data record after its Finished complete → the
    /// server's first application-data byte after it, tickets left out (time to first
    /// byte; not with 0-RTT).
    pub server_first_byte: Option<u64>,
}

impl Phases {
    /// The names of the phases, in [`Phases::named`]'s order.
    pub const NAMES: [&'static str; 7] = [
        "connect",
        "server_think",
        "server_flight",
        "client_think",
        "tls",
        "first_app_byte",
        "server_first_byte",
    ];

    /// Each phase with its name (as the JSON and the metrics call it).
    pub fn named(&self) -> [(&'static str, Option<u64>); 7] {
        let n = Self::NAMES;
        [
            (n[0], self.connect),
            (n[1], self.server_think),
            (n[2], self.server_flight),
            (n[3], self.client_think),
            (n[4], self.tls),
            (n[5], self.first_app_byte),
            (n[6], self.server_first_byte),
        ]
    }
}

/// A completed handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    /// Its kind.
    pub kind: HandshakeKind,
    /// How a resumed session was found: `psk` (TLS 1.3), `ticket` or `session-id`
    /// (TLS 1.2); `None` when not resumed.
    pub resumption: Option<&'static str>,
    /// Negotiated version.
    pub version: u16,
    /// Key-exchange group (`None`: a TLS 1.2 resumption or a non-ECDHE exchange).
    pub group: Option<u16>,
    /// Cipher suite.
    pub suite: u16,
    /// The ClientHello's SNI.
    pub sni: Option<String>,
    /// What the (first) ClientHello offered: ALPN, groups, a pre-shared key.
    pub offer: tls::Offer,
    /// Client address.
    pub client: SocketAddr,
    /// Server address.
    pub server: SocketAddr,
    /// Phases.
    pub phases: Phases,
    /// Bytes of the server's flight (record headers included, ServerHello to its end).
    pub server_flight_bytes: u64,
    /// When the connection began: its SYN's capture time (the first ClientHello's when
    /// the SYN was not captured), ns since the Unix epoch.
    pub start_ns: Option<u64>,
    /// A HelloRetryRequest came first: kind `full-hrr`, or a resumption after one (kind
    /// `resumed` or `0rtt`, as `tlsperf serve`'s /stats counts it, which takes rustls's
    /// kind).
    pub hrr: bool,
    /// QUIC: a Retry came first (address validation; counted with the handshake, as a
    /// HelloRetryRequest is). Always false over TCP.
    pub retry: bool,
    /// The transport that carried it.
    pub transport: Transport,
    /// The local process at the client end, "comm (pid N)" (live capture only).
    pub client_process: Option<String>,
    /// The local process at the server end (live capture only).
    pub server_process: Option<String>,
}

/// Why a connection has no completed handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// An alert was seen before the handshake completed (its description, or
    /// `encrypted`).
    Alert(String),
    /// Reset before the handshake completed.
    Reset,
    /// Closed (FIN) before the handshake completed.
    Closed,
    /// Still incomplete when the capture ended or the flow was evicted.
    Incomplete,
}

impl Failure {
    /// `alert`, `reset`, `closed` or `incomplete`.
    pub fn reason(&self) -> &'static str {
        match self {
            Failure::Alert(_) => "alert",
            Failure::Reset => "reset",
            Failure::Closed => "closed",
            Failure::Incomplete => "incomplete",
        }
    }
}

/// What became of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A handshake completed.
    Handshake(Box<Handshake>),
    /// A TLS handshake began (a ClientHello) and did not complete.
    Failed(Failure),
    /// The client's first bytes were not TLS.
    NotTls,
    /// TLS that could not be followed (a malformed record or hello, a gap), or payload
    /// that never became readable.
    Unparsed,
    /// No payload segment at all (a bare TCP connection, a refused SYN).
    Empty,
}

/// The timeline of one connection.
#[derive(Debug)]
pub struct Timeline {
    client: SocketAddr,
    server: SocketAddr,
    /// SYN capture time.
    pub syn_ns: Option<u64>,
    ack_ns: Option<u64>,
    hs: [HandshakeBuf; 2],
    encrypted: [bool; 2],
    hello: Option<ClientHello>,
    first_hello_ns: Option<u64>,
    hello_ns: Option<u64>,
    hrr: bool,
    server_hello: Option<ServerHello>,
    sh_ns: Option<u64>,
    ske_group: Option<u16>,
    abbreviated: bool,
    client_replied: bool,
    flight_bytes: u64,
    flight_end_ns: Option<u64>,
    finished_ns: Option<u64>,
    /// The ClientHello the server answered (the second one after a HelloRetryRequest)
    /// offered early data.
    early_offered: bool,
    /// The client's first early-data record (application data before the ServerHello).
    early_ns: Option<u64>,
    /// The server took the early data: it resumed, the ClientHello it answered offered
    /// early data, and the client's first record after the server's flight is an
    /// EndOfEarlyData, not its Finished (see the module's documentation).
    early_accepted: bool,
    /// The client's first application-data record after its Finished.
    first_app_ns: Option<u64>,
    /// The client's first application-data record after its Finished was complete.
    request_ns: Option<u64>,
    /// TLS 1.3: the length of the server's records taken as NewSessionTickets (its first
    /// application-data record after the client's Finished), and whether they are over.
    ticket_len: Option<usize>,
    tickets_over: bool,
    /// TLS 1.3: the server's encrypted records in its flight after the last one of a lone
    /// Finished's length (`None` before one): more than none means it sent its tickets
    /// in its first flight (Go), so none follows the client's Finished.
    after_server_finished: Option<u32>,
    /// TLS 1.3: the server's stream offset just after the first encrypted record of its
    /// flight, and after its flight's last record: with early data offered, a client
    /// record acknowledging the first (without one, the second) was sent after the
    /// server's flight reached the client, so it is its reply, not early data.
    encrypted_end: Option<u64>,
    flight_end: u64,
    /// The server's first application-data byte after the request.
    response_ns: Option<u64>,
    alert: Option<String>,
    reset: bool,
    closed: bool,
    not_tls: bool,
    unparsed: bool,
    any_payload: bool,
}

impl Timeline {
    /// A connection from `client` to `server`.
    pub fn new(client: SocketAddr, server: SocketAddr) -> Timeline {
        Timeline {
            client,
            server,
            syn_ns: None,
            ack_ns: None,
            hs: [HandshakeBuf::default(), HandshakeBuf::default()],
            encrypted: [false; 2],
            hello: None,
            first_hello_ns: None,
            hello_ns: None,
            hrr: false,
            server_hello: None,
            sh_ns: None,
            ske_group: None,
            abbreviated: false,
            client_replied: false,
            flight_bytes: 0,
            flight_end_ns: None,
            finished_ns: None,
            early_offered: false,
            early_ns: None,
            early_accepted: false,
            first_app_ns: None,
            request_ns: None,
            ticket_len: None,
            tickets_over: false,
            after_server_finished: None,
            encrypted_end: None,
            flight_end: 0,
            response_ns: None,
            alert: None,
            reset: false,
            closed: false,
            not_tls: false,
            unparsed: false,
            any_payload: false,
        }
    }

    /// The client's SYN.
    pub fn syn(&mut self, ns: u64) {
        self.syn_ns.get_or_insert(ns);
    }

    /// The client's first ACK after the SYN (ends TCP connect).
    pub fn handshake_ack(&mut self, ns: u64) {
        if self.syn_ns.is_some() {
            self.ack_ns.get_or_insert(ns);
        }
    }

    /// A RST from either side.
    pub fn reset(&mut self) {
        self.reset = true;
    }

    /// A FIN from either side.
    pub fn fin(&mut self) {
        self.closed = true;
    }

    /// Payload that is not TLS from the start: the connection is not followed.
    pub fn not_tls(&mut self) {
        self.any_payload = true;
        if self.hello.is_none() {
            self.not_tls = true;
        } else {
            self.unparsed = true;
        }
    }

    /// A segment with payload (readable yet or not).
    pub fn payload(&mut self) {
        self.any_payload = true;
    }

    /// TLS that cannot be followed any more (a gap, a malformed record).
    pub fn unparsed(&mut self) {
        self.unparsed = true;
    }

    /// True once nothing more needs to be read from either stream (see
    /// [`Timeline::done_with`]).
    pub fn done(&self) -> bool {
        self.done_with(Endpoint::Client) && self.done_with(Endpoint::Server)
    }

    /// True once nothing more needs to be read from `side`'s stream: the client's once
    /// its Finished and its first application record after it (the request; with 0-RTT,
    /// its early data) are in, the server's once its first application byte after that
    /// request is (with 0-RTT, once the client's Finished is); either when the
    /// connection cannot be followed.
    pub fn done_with(&self, side: Endpoint) -> bool {
        if self.not_tls || self.unparsed {
            return true;
        }
        let finished = self.finished_ns.is_some();
        match side {
            Endpoint::Client => {
                finished
                    && (self.early_accepted || self.first_app_ns.is_some())
                    && (self.early_accepted || self.request_ns.is_some())
            }
            Endpoint::Server => finished && (self.early_accepted || self.response_ns.is_some()),
        }
    }

    /// One record.
    pub fn record(&mut self, r: &Record<'_>) {
        self.any_payload = true;
        if self.unparsed || self.not_tls {
            return;
        }
        match (r.side, r.content_type) {
            (_, content::HANDSHAKE) if !self.encrypted[r.side.index()] => {
                if r.cut {
                    // A plaintext handshake message not captured in full: its contents
                    // cannot be read.
                    self.unparsed = true;
                    return;
                }
                let mut hs = std::mem::take(&mut self.hs[r.side.index()]);
                let fed = hs.feed(r.body, |t, body| {
                    self.message(r, t, body);
                    !self.unparsed
                });
                self.hs[r.side.index()] = hs;
                if fed.is_err() {
                    self.unparsed = true;
                }
                if self.unparsed {
                    return;
                }
                self.after_record(r);
            }
            (_, content::ALERT) => {
                let name = if self.encrypted[r.side.index()] {
                    "encrypted".to_string()
                } else if r.cut {
                    "cut short by the snap length".to_string()
                } else {
                    match r.body {
                        [_, desc, ..] => tls::alert_name(*desc),
                        _ => "malformed".to_string(),
                    }
                };
                if self.alert.is_none() && self.finished_ns.is_none() {
                    self.alert = Some(name);
                }
                self.after_record(r);
            }
            (_, content::CCS) => {
                let tls12 = self
                    .server_hello
                    .as_ref()
                    .is_some_and(|s| s.version != tls::TLS13);
                if tls12 {
                    self.encrypted[r.side.index()] = true;
                    if r.side == Endpoint::Server && !self.client_replied {
                        // The server changes ciphers before the client said anything
                        // after its ServerHello: the abbreviated (resumed) handshake.
                        self.abbreviated = true;
                    }
                    if r.side == Endpoint::Client && self.sh_ns.is_some() {
                        self.client_replied = true;
                        self.finished_ns.get_or_insert(r.first_ns);
                    }
                }
                // TLS 1.3's middlebox-compatibility CCS carries nothing.
                if r.side == Endpoint::Server && self.sh_ns.is_some() && !self.client_replied {
                    self.flight(r);
                }
            }
            _ => self.after_record(r),
        }
    }

    /// Bookkeeping common to every record but the CCS: the server's flight, the client's
    /// reply, early and application data.
    fn after_record(&mut self, r: &Record<'_>) {
        let Some(sh) = &self.server_hello else {
            // Before the ServerHello: a client's application data is early data.
            if r.side == Endpoint::Client && r.content_type == content::APP_DATA {
                if self.hello.as_ref().is_some_and(|h| h.early_data) {
                    self.early_ns.get_or_insert(r.first_ns);
                } else {
                    self.unparsed = true;
                }
            }
            return;
        };
        let tls13 = sh.version == tls::TLS13;
        match r.side {
            Endpoint::Server => {
                if !self.client_replied {
                    self.flight(r);
                } else if r.content_type == content::APP_DATA && self.finished_ns.is_some() {
                    self.server_app_record(r, tls13);
                }
            }
            Endpoint::Client => {
                if self.finished_ns.is_some() {
                    if r.content_type == content::APP_DATA && !self.early_accepted {
                        self.first_app_ns.get_or_insert(r.first_ns);
                        self.request_ns.get_or_insert(r.last_ns);
                    }
                    return;
                }
                if tls13 {
                    let early = self.hello.as_ref().is_some_and(|h| h.early_data);
                    let read_flight = r.peer_acked >= self.encrypted_end.unwrap_or(self.flight_end);
                    if r.content_type == content::APP_DATA && (!early || read_flight) {
                        self.client_replied = true;
                        self.finished_ns = Some(r.first_ns);
                        self.early_accepted = self.early_offered
                            && sh.psk
                            && r.body.len() < finished_record_len(sh.suite);
                    }
                } else {
                    // TLS 1.2: the client's reply flight begins (ClientKeyExchange…); its
                    // Finished time is its ChangeCipherSpec's.
                    self.client_replied = true;
                }
            }
        }
    }

    /// A server application-data record after the client's Finished: a TLS 1.3 ticket,
    /// or the server's first byte after the request (see the module's documentation).
    fn server_app_record(&mut self, r: &Record<'_>, tls13: bool) {
        let tickets_in_flight = self.after_server_finished.is_some_and(|n| n > 0);
        let takes_tickets =
            tls13 && !tickets_in_flight && self.hello.as_ref().is_some_and(|h| h.psk_modes);
        if takes_tickets && !self.tickets_over {
            match self.ticket_len {
                None => {
                    self.ticket_len = Some(r.body.len());
                    return;
                }
                Some(len) if len == r.body.len() => return,
                Some(_) => self.tickets_over = true,
            }
        }
        if self.request_ns.is_some() {
            self.response_ns.get_or_insert(r.first_ns);
        }
    }

    fn flight(&mut self, r: &Record<'_>) {
        self.flight_bytes += 5 + r.body.len() as u64;
        let end = r.offset + 5 + r.body.len() as u64;
        self.flight_end = end;
        if let Some(sh) = &self.server_hello
            && sh.version == tls::TLS13
            && r.content_type == content::APP_DATA
        {
            self.encrypted_end.get_or_insert(end);
            if r.body.len() == finished_record_len(sh.suite) {
                self.after_server_finished = Some(0);
            } else if let Some(n) = &mut self.after_server_finished {
                *n += 1;
            }
        }
        self.flight_end_ns = Some(r.last_ns);
    }

    fn message(&mut self, r: &Record<'_>, t: u8, body: &[u8]) {
        match (r.side, t) {
            (Endpoint::Client, msg::CLIENT_HELLO) => {
                let Some(ch) = tls::client_hello(body) else {
                    self.unparsed = true;
                    return;
                };
                self.early_offered = ch.early_data;
                if self.hello.is_none() {
                    self.hello = Some(ch);
                    self.first_hello_ns = Some(r.last_ns);
                } else if !self.hrr || self.sh_ns.is_some() {
                    // A second ClientHello without a HelloRetryRequest: renegotiation
                    // or garbage; not followed.
                    self.unparsed = true;
                    return;
                }
                self.hello_ns = Some(r.last_ns);
            }
            (Endpoint::Server, msg::SERVER_HELLO) => {
                match server_hello(body, self.hello.is_some(), self.sh_ns.is_some()) {
                    ServerHelloSeen::NotFollowed => self.unparsed = true,
                    ServerHelloSeen::RetryRequest => self.hrr = true,
                    ServerHelloSeen::Hello(sh) => {
                        self.sh_ns = Some(r.first_ns);
                        self.server_hello = Some(sh);
                    }
                }
            }
            (Endpoint::Server, msg::SERVER_KEY_EXCHANGE) => {
                self.ske_group = tls::server_key_exchange_group(body);
            }
            (
                Endpoint::Server,
                msg::CERTIFICATE | msg::SERVER_HELLO_DONE | msg::NEW_SESSION_TICKET,
            ) => {}
            _ => {}
        }
    }

    /// What became of the connection (called once, when it ends or is evicted).
    pub fn outcome(self) -> Outcome {
        if self.not_tls {
            return Outcome::NotTls;
        }
        if self.unparsed {
            return Outcome::Unparsed;
        }
        let Some(hello) = self.hello else {
            return if self.any_payload {
                Outcome::Unparsed
            } else {
                Outcome::Empty
            };
        };
        let (Some(sh), Some(finished)) = (self.server_hello, self.finished_ns) else {
            let f = if let Some(a) = self.alert {
                Failure::Alert(a)
            } else if self.reset {
                Failure::Reset
            } else if self.closed {
                Failure::Closed
            } else {
                Failure::Incomplete
            };
            return Outcome::Failed(f);
        };
        let tls13 = sh.version == tls::TLS13;
        let (resumed, resumption) = if tls13 {
            (sh.psk, sh.psk.then_some("psk"))
        } else if self.abbreviated {
            (
                true,
                Some(if hello.ticket { "ticket" } else { "session-id" }),
            )
        } else {
            (false, None)
        };
        let zero_rtt = resumed && self.early_accepted;
        let kind = match (resumed, zero_rtt, self.hrr) {
            (true, true, _) => HandshakeKind::ZeroRtt,
            (true, false, _) => HandshakeKind::Resumed,
            (false, _, true) => HandshakeKind::FullHrr,
            (false, _, false) => HandshakeKind::Full,
        };
        let group = if tls13 {
            sh.group
        } else if resumed {
            None
        } else {
            self.ske_group
        };
        let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let start = self.syn_ns.or(self.first_hello_ns);
        let phases = Phases {
            connect: span(self.syn_ns, self.ack_ns),
            server_think: span(self.hello_ns, self.sh_ns),
            server_flight: span(self.sh_ns, self.flight_end_ns),
            client_think: span(self.flight_end_ns, Some(finished)),
            tls: span(self.first_hello_ns, Some(finished)),
            first_app_byte: span(
                start,
                if zero_rtt {
                    self.early_ns.or(self.first_app_ns)
                } else {
                    self.first_app_ns
                },
            ),
            server_first_byte: span(self.request_ns, self.response_ns),
        };
        Outcome::Handshake(Box::new(Handshake {
            kind,
            resumption,
            version: sh.version,
            group,
            suite: sh.suite,
            sni: hello.sni,
            offer: hello.offer,
            client: self.client,
            server: self.server,
            phases,
            server_flight_bytes: self.flight_bytes,
            start_ns: start,
            hrr: self.hrr,
            retry: false,
            transport: Transport::Tcp,
            client_process: None,
            server_process: None,
        }))
    }
}

/// What a ServerHello message's body is to a connection, over TCP or QUIC.
#[derive(Debug)]
pub enum ServerHelloSeen {
    /// The connection cannot be followed: the message does not parse, or comes before
    /// any ClientHello or after the ServerHello.
    NotFollowed,
    /// A HelloRetryRequest: the client sends its ClientHello again.
    RetryRequest,
    /// The ServerHello.
    Hello(ServerHello),
}

/// Reads a ServerHello's `body` on a connection that has seen a ClientHello
/// (`hello_seen`) and its ServerHello already (`sh_seen`).
pub fn server_hello(body: &[u8], hello_seen: bool, sh_seen: bool) -> ServerHelloSeen {
    match tls::server_hello(body) {
        Some(_) if !hello_seen || sh_seen => ServerHelloSeen::NotFollowed,
        Some(sh) if sh.hrr => ServerHelloSeen::RetryRequest,
        Some(sh) => ServerHelloSeen::Hello(sh),
        None => ServerHelloSeen::NotFollowed,
    }
}

/// The body length of a TLS 1.3 record holding one Finished message alone (its 4-byte
/// header, the suite hash's verify data, the inner content type and the AEAD tag,
/// unpadded): 53 bytes for the SHA-256 suites, 69 for TLS_AES_256_GCM_SHA384, 45 for
/// TLS_AES_128_CCM_8_SHA256. A client's EndOfEarlyData record (a 4-byte message) is
/// shorter.
fn finished_record_len(suite: u16) -> usize {
    let (hash, tag) = match suite {
        0x1302 => (48, 16),
        0x1305 => (32, 8),
        _ => (32, 16),
    };
    4 + hash + 1 + tag
}
