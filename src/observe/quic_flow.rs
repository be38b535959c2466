//! QUIC connections on the wire: the UDP datagrams of the observed ports → connections
//! (followed by their connection IDs and addresses) → each one's handshake timeline,
//! kind and phases, as [`Outcome`]s like the TCP ones of [`super::flow`].
//!
//! A connection is tracked from its client's first Initial packet: one whose destination
//! connection ID is new and that opens with the Initial keys of that ID as the client's
//! (RFC 9001 §5.2; a server's Initial does not: its keys are those of the client's ID).
//! Its packets are found again by their destination connection ID — the client's first
//! one, the server's chosen one (the source connection ID of its first Initial), a
//! Retry's new one, the client's own (for packets to the client) — and, for a zero-length
//! ID, by the connection's addresses. Short headers carry no ID length: the lengths the
//! table has seen are tried. A client that sends a new Initial with another ID from the
//! same address starts a new connection.
//!
//! The Initial packets of both sides are opened ([`super::quic`]); their CRYPTO frames
//! are put back in order per side (retransmissions trimmed, frames that arrive early
//! held, at most [`MAX_CRYPTO_AHEAD`] bytes) and read as TLS handshake messages with the
//! TCP side's parsing ([`super::tls`]): the ClientHello (SNI, early data offered), the
//! ServerHello (group, suite, pre-shared key accepted) or a HelloRetryRequest.
//! Handshake, 0-RTT and 1-RTT packets are not opened: their type and time are used.
//!
//! Where each timestamp is taken (the capture time of the datagram that carried the
//! packet named; one datagram may carry several packets):
//! - start: the client's first Initial (as TCP's SYN).
//! - ClientHello: the datagram that completed it (the last of its CRYPTO bytes to come
//!   in order). After a HelloRetryRequest or a Retry, the client's next ClientHello is
//!   the one the server answered (`server_think` starts there; `tls` at the first).
//! - ServerHello: the server's datagram that completed it.
//! - end of the server's flight: the server's last datagram carrying an Initial or a
//!   Handshake packet before the client's first Handshake packet.
//! - client Finished: the client's first datagram carrying a Handshake packet (its
//!   Finished is in its first Handshake packet unless that packet only acknowledges
//!   part of a server flight the anti-amplification limit split: it cannot be opened to
//!   tell).
//! - first application byte: the client's first short-header (1-RTT) packet at or after
//!   its Finished, or with 0-RTT its first 0-RTT packet.
//! - the server's first 1-RTT packet after the client's Finished: in QUIC the server
//!   confirms the handshake (HANDSHAKE_DONE) in one, or answers the request in it.
//!
//! Kinds: `resumed` when the ServerHello accepted the client's pre-shared key; `0rtt`
//! when, besides, the ClientHello offered early data and the client sent 0-RTT packets (a
//! server that refused them says so in its EncryptedExtensions, which cannot be read:
//! such a handshake counts as `0rtt` too); `full-hrr` after a HelloRetryRequest; `full`.
//! A Retry is counted with the handshake that follows it (its `retry`), as a
//! HelloRetryRequest is.
//!
//! A connection's outcome is given as soon as its timeline is complete (the server's
//! first 1-RTT packet after the client's Finished, and the client's first application
//! packet) or when it closed in an Initial packet (a CONNECTION_CLOSE, often a TLS
//! alert); otherwise when it is evicted (idle for the flow table's idle timeout, capture
//! time) or the capture ends. The table holds at most the flow table's cap of
//! connections; beyond it new ones are counted, not tracked.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use super::flow::{Counters, Limits};
use super::quic::{self, Frame, InitialKeys, Packet, Parsed, Type};
use super::result::QuicPackets;
use super::timeline::{
    self, Failure, Handshake, HandshakeKind, Outcome, Phases, ServerHelloSeen, Transport,
};
use super::tls::{self, ClientHello, HandshakeBuf, ServerHello, msg};

/// The most CRYPTO bytes held out of order per side of a connection; beyond it the
/// connection cannot be followed.
pub const MAX_CRYPTO_AHEAD: usize = 64 * 1024;

/// How often (capture time) idle connections are looked for.
const SWEEP_NS: u64 = 1_000_000_000;

/// One side's CRYPTO stream of the Initial packet number space, put back in order.
#[derive(Debug, Default)]
struct Crypto {
    /// The next offset expected.
    next: u64,
    /// Bytes that came ahead of `next`, by offset.
    ahead: BTreeMap<u64, Vec<u8>>,
    /// Their length.
    held: usize,
}

impl Crypto {
    /// Takes `data` at `offset`; `f` gets each run of bytes that continues the stream in
    /// order. `Err` when more than [`MAX_CRYPTO_AHEAD`] would be held.
    fn push(&mut self, offset: u64, data: &[u8], f: &mut impl FnMut(&[u8])) -> Result<(), ()> {
        let end = offset.saturating_add(data.len() as u64);
        if end <= self.next {
            return Ok(());
        }
        if offset > self.next {
            let held = self.ahead.get(&offset).map_or(0, Vec::len);
            if data.len() > held {
                if self.held + data.len() - held > MAX_CRYPTO_AHEAD {
                    return Err(());
                }
                self.held += data.len() - held;
                self.ahead.insert(offset, data.to_vec());
            }
            return Ok(());
        }
        // Within the buffer: `next - offset` < `data.len()`.
        f(&data[(self.next - offset) as usize..]);
        self.next = end;
        while let Some(entry) = self.ahead.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (at, d) = entry.remove_entry();
            self.held -= d.len();
            let end = at + d.len() as u64;
            if end > self.next {
                f(&d[(self.next - at) as usize..]);
                self.next = end;
            }
        }
        Ok(())
    }
}

/// Which side sent a packet.
const CLIENT: usize = 0;
const SERVER: usize = 1;

/// One QUIC connection.
#[derive(Debug)]
struct Conn {
    client: SocketAddr,
    server: SocketAddr,
    /// The Initial keys (of the client's first destination ID; after a Retry, of the ID
    /// it gave); dropped once the outcome is given.
    keys: Option<InitialKeys>,
    /// The connection IDs registered for it in the table.
    cids: Vec<Vec<u8>>,
    crypto: [Crypto; 2],
    hs: [HandshakeBuf; 2],
    /// The largest Initial packet number of each side.
    largest_pn: [Option<u64>; 2],
    last_ns: u64,
    start_ns: u64,
    hello: Option<ClientHello>,
    first_hello_ns: Option<u64>,
    hello_ns: Option<u64>,
    early_offered: bool,
    hrr: bool,
    /// A Retry came; `retry_pending` until the client's next Initial derives new keys.
    retry: bool,
    retry_pending: bool,
    server_hello: Option<ServerHello>,
    sh_ns: Option<u64>,
    flight_end_ns: Option<u64>,
    flight_bytes: u64,
    finished_ns: Option<u64>,
    zero_rtt_ns: Option<u64>,
    client_short_ns: Option<u64>,
    server_short_ns: Option<u64>,
    /// A CONNECTION_CLOSE in an Initial: its reason.
    close: Option<String>,
    unparsed: bool,
    /// Its outcome was given: later packets are only counted.
    over: bool,
}

impl Conn {
    fn new(client: SocketAddr, server: SocketAddr, keys: InitialKeys, ns: u64) -> Conn {
        Conn {
            client,
            server,
            keys: Some(keys),
            cids: Vec::new(),
            crypto: Default::default(),
            hs: Default::default(),
            largest_pn: [None; 2],
            last_ns: ns,
            start_ns: ns,
            hello: None,
            first_hello_ns: None,
            hello_ns: None,
            early_offered: false,
            hrr: false,
            retry: false,
            retry_pending: false,
            server_hello: None,
            sh_ns: None,
            flight_end_ns: None,
            flight_bytes: 0,
            finished_ns: None,
            zero_rtt_ns: None,
            client_short_ns: None,
            server_short_ns: None,
            close: None,
            unparsed: false,
            over: false,
        }
    }

    /// Everything the outcome needs is in, or nothing more can be.
    fn done(&self) -> bool {
        self.unparsed
            || self.close.is_some()
            || (self.finished_ns.is_some()
                && self.server_short_ns.is_some()
                && (self.client_short_ns.is_some() || self.zero_rtt_ns.is_some()))
    }

    /// An opened Initial packet's payload from `side`, at `ns`.
    fn initial_payload(&mut self, side: usize, ns: u64, plain: &[u8]) {
        let mut crypto = std::mem::take(&mut self.crypto[side]);
        let mut hs = std::mem::take(&mut self.hs[side]);
        let mut too_much = false;
        let framed = quic::initial_frames(plain, |f| match f {
            Frame::Crypto { offset, data } => {
                let pushed = crypto.push(offset, data, &mut |bytes| {
                    if self.unparsed {
                        return;
                    }
                    let fed = hs.feed(bytes, |t, body| {
                        self.message(side, t, body, ns);
                        !self.unparsed
                    });
                    if fed.is_err() {
                        self.unparsed = true;
                    }
                });
                too_much |= pushed.is_err();
            }
            Frame::Close { code } => {
                if self.close.is_none() && self.finished_ns.is_none() {
                    self.close = Some(close_reason(code));
                }
            }
        });
        self.crypto[side] = crypto;
        self.hs[side] = hs;
        if too_much || framed.is_err() {
            self.unparsed = true;
        }
    }

    /// One handshake message of `side`'s CRYPTO stream, completed at `ns`.
    fn message(&mut self, side: usize, t: u8, body: &[u8], ns: u64) {
        match (side, t) {
            (CLIENT, msg::CLIENT_HELLO) => {
                let Some(ch) = tls::client_hello(body) else {
                    self.unparsed = true;
                    return;
                };
                self.early_offered = ch.early_data;
                if self.hello.is_none() {
                    self.hello = Some(ch);
                    self.first_hello_ns = Some(ns);
                } else if !(self.hrr || self.retry) || self.sh_ns.is_some() {
                    // A second ClientHello with neither a HelloRetryRequest nor a Retry
                    // before it: not followed.
                    self.unparsed = true;
                    return;
                }
                self.hello_ns = Some(ns);
            }
            (SERVER, msg::SERVER_HELLO) => {
                match timeline::server_hello(body, self.hello.is_some(), self.sh_ns.is_some()) {
                    ServerHelloSeen::NotFollowed => self.unparsed = true,
                    ServerHelloSeen::RetryRequest => self.hrr = true,
                    ServerHelloSeen::Hello(sh) => {
                        self.sh_ns = Some(ns);
                        self.server_hello = Some(sh);
                    }
                }
            }
            _ => {}
        }
    }

    /// What became of it (once).
    fn outcome(&mut self) -> Outcome {
        self.over = true;
        self.keys = None;
        self.crypto = Default::default();
        self.hs = Default::default();
        if self.unparsed {
            return Outcome::Unparsed;
        }
        let failed = |close: &Option<String>| {
            Outcome::Failed(match close {
                Some(reason) => Failure::Alert(reason.clone()),
                None => Failure::Incomplete,
            })
        };
        let Some(hello) = self.hello.take() else {
            return failed(&self.close);
        };
        let (Some(sh), Some(finished)) = (self.server_hello.take(), self.finished_ns) else {
            return failed(&self.close);
        };
        let resumed = sh.psk;
        let zero_rtt = resumed && self.early_offered && self.zero_rtt_ns.is_some();
        let kind = match (resumed, zero_rtt, self.hrr) {
            (true, true, _) => HandshakeKind::ZeroRtt,
            (true, false, _) => HandshakeKind::Resumed,
            (false, _, true) => HandshakeKind::FullHrr,
            (false, _, false) => HandshakeKind::Full,
        };
        let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let phases = Phases {
            connect: None,
            server_think: span(self.hello_ns, self.sh_ns),
            server_flight: span(self.sh_ns, self.flight_end_ns),
            client_think: span(self.flight_end_ns, Some(finished)),
            tls: span(self.first_hello_ns, Some(finished)),
            first_app_byte: span(
                Some(self.start_ns),
                if zero_rtt {
                    self.zero_rtt_ns
                } else {
                    self.client_short_ns
                },
            ),
            server_first_byte: span(Some(finished), self.server_short_ns),
        };
        Outcome::Handshake(Box::new(Handshake {
            kind,
            resumption: resumed.then_some("psk"),
            version: sh.version,
            group: sh.group,
            suite: sh.suite,
            sni: hello.sni,
            offer: hello.offer,
            client: self.client,
            server: self.server,
            phases,
            server_flight_bytes: self.flight_bytes,
            start_ns: Some(self.start_ns),
            hrr: self.hrr,
            retry: self.retry,
            transport: Transport::Quic,
            client_process: None,
            server_process: None,
        }))
    }
}

/// A CONNECTION_CLOSE's error code in words: a TLS alert's name (codes 0x100 to 0x1ff),
/// else `quic error 0x…`.
fn close_reason(code: u64) -> String {
    match code {
        0x100..=0x1ff => tls::alert_name((code - 0x100) as u8),
        other => format!("quic error 0x{other:x}"),
    }
}

/// The QUIC connections of a capture.
#[derive(Debug)]
pub struct QuicTable {
    limits: Limits,
    conns: HashMap<u64, Conn>,
    by_cid: HashMap<Vec<u8>, u64>,
    /// (client, server) → connection.
    by_addr: HashMap<(SocketAddr, SocketAddr), u64>,
    /// The lengths of the non-empty connection IDs registered (tried on short headers).
    cid_lens: Vec<usize>,
    next_id: u64,
    counters: Counters,
    packets: QuicPackets,
    /// Where Initial packets are opened.
    buf: Vec<u8>,
    last_sweep: u64,
}

impl QuicTable {
    /// An empty table within `limits` (its cap and idle timeout).
    pub fn new(limits: Limits) -> QuicTable {
        QuicTable {
            limits,
            conns: HashMap::new(),
            by_cid: HashMap::new(),
            by_addr: HashMap::new(),
            cid_lens: Vec::new(),
            next_id: 0,
            counters: Counters::default(),
            packets: QuicPackets::default(),
            buf: Vec::with_capacity(1500),
            last_sweep: 0,
        }
    }

    /// What the table counted of connections.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// What it counted of datagrams and packets.
    pub fn packets(&self) -> QuicPackets {
        self.packets
    }

    /// A datagram on another port.
    pub fn other_port(&mut self) {
        self.packets.other_ports += 1;
    }

    /// One UDP datagram from `src` to `dst` captured at `ns`, the capture's clock (which
    /// a stray timestamp does not move: [`super::flow::Clock`]) being at `now`; `emit`
    /// gets the outcomes of the connections it (or the passing of time) ended.
    #[allow(clippy::too_many_arguments)]
    pub fn datagram(
        &mut self,
        ns: u64,
        now: u64,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        emit: &mut impl FnMut(Outcome),
    ) {
        self.packets.datagrams += 1;
        if now.saturating_sub(self.last_sweep) >= SWEEP_NS {
            self.last_sweep = now;
            self.sweep(now, emit);
        }
        let first = match quic::parse(payload) {
            Parsed::Packet(p, _) => p,
            Parsed::OtherVersion(_) => {
                self.packets.other_version += 1;
                return;
            }
            Parsed::Garbage => {
                self.packets.not_quic += 1;
                return;
            }
        };
        let Some((id, from_client)) = self.find(ns, now, src, dst, &first, emit) else {
            self.packets.unknown_connection += 1;
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        c.last_ns = now;
        let side = if from_client { CLIENT } else { SERVER };
        let mut rest = payload;
        let mut long = false;
        let mut new_cids: Vec<Vec<u8>> = Vec::new();
        while let Parsed::Packet(p, r) = quic::parse(rest) {
            rest = r;
            let counts = &mut self.packets;
            match p.ty {
                Type::Initial => {
                    counts.initial += 1;
                    long = true;
                    if c.over {
                        continue;
                    }
                    if from_client && c.retry_pending {
                        // The client's Initial after a Retry: keys of the ID it gave.
                        c.keys = InitialKeys::new(p.version, p.dcid);
                        c.retry_pending = false;
                    }
                    if !from_client && !p.scid.is_empty() && !c.cids.iter().any(|x| x == p.scid) {
                        // The server's chosen connection ID.
                        new_cids.push(p.scid.to_vec());
                    }
                    let Some(keys) = &c.keys else { continue };
                    match keys.open(from_client, &p, c.largest_pn[side], &mut self.buf) {
                        Some((pn, plain)) => {
                            c.largest_pn[side] = Some(c.largest_pn[side].map_or(pn, |l| l.max(pn)));
                            c.initial_payload(side, ns, plain);
                        }
                        None => counts.undecryptable += 1,
                    }
                }
                Type::Handshake => {
                    counts.handshake += 1;
                    long = true;
                    if from_client && c.sh_ns.is_some() {
                        c.finished_ns.get_or_insert(ns);
                    }
                }
                Type::ZeroRtt => {
                    counts.zero_rtt += 1;
                    if from_client {
                        c.zero_rtt_ns.get_or_insert(ns);
                    }
                }
                Type::Retry => {
                    counts.retry += 1;
                    if !from_client && !c.over && c.sh_ns.is_none() {
                        c.retry = true;
                        c.retry_pending = true;
                        // The client sends its ClientHello again from the start.
                        c.crypto = Default::default();
                        c.hs = Default::default();
                        c.largest_pn[SERVER] = None;
                        if !p.scid.is_empty() {
                            new_cids.push(p.scid.to_vec());
                        }
                    }
                }
                Type::VersionNegotiation => counts.version_negotiation += 1,
                Type::Short => {
                    counts.short += 1;
                    if c.finished_ns.is_some() {
                        if from_client {
                            c.client_short_ns.get_or_insert(ns);
                        } else {
                            c.server_short_ns.get_or_insert(ns);
                        }
                    }
                }
            }
        }
        if !from_client && long && c.sh_ns.is_some() && c.finished_ns.is_none() {
            c.flight_end_ns = Some(ns);
            c.flight_bytes += payload.len() as u64;
        }
        let finished = !c.over && c.done();
        if finished {
            emit(c.outcome());
        }
        for cid in new_cids {
            self.register(id, cid);
        }
    }

    /// Registers `cid` as one of connection `id`'s.
    fn register(&mut self, id: u64, cid: Vec<u8>) {
        if cid.is_empty() {
            return;
        }
        if !self.cid_lens.contains(&cid.len()) {
            self.cid_lens.push(cid.len());
        }
        if let Some(c) = self.conns.get_mut(&id) {
            c.cids.push(cid.clone());
        }
        self.by_cid.insert(cid, id);
    }

    /// The connection of a datagram whose first packet is `p`, and whether the client
    /// sent it; a new one for a client's first Initial.
    #[allow(clippy::too_many_arguments)]
    fn find(
        &mut self,
        ns: u64,
        now: u64,
        src: SocketAddr,
        dst: SocketAddr,
        p: &Packet<'_>,
        emit: &mut impl FnMut(Outcome),
    ) -> Option<(u64, bool)> {
        let by_cid = match p.ty {
            Type::Short => self.cid_lens.iter().find_map(|len| {
                let cid = p.bytes.get(1..1 + len)?;
                self.by_cid.get(cid).copied()
            }),
            _ if p.dcid.is_empty() => None,
            _ => self.by_cid.get(p.dcid).copied(),
        };
        let known = by_cid.or_else(|| {
            self.by_addr
                .get(&(src, dst))
                .or_else(|| self.by_addr.get(&(dst, src)))
                .copied()
        });
        if let Some(id) = known
            && let Some(c) = self.conns.get(&id)
        {
            let from_client = src == c.client || dst == c.server;
            // The same client address with a new destination ID in an Initial: a new
            // connection, when it opens as one.
            let new = by_cid.is_none()
                && p.ty == Type::Initial
                && from_client
                && !c.retry_pending
                && !c.cids.iter().any(|x| x == p.dcid);
            if !new {
                return Some((id, from_client));
            }
        }
        if p.ty != Type::Initial {
            return None;
        }
        let keys = InitialKeys::new(p.version, p.dcid)?;
        keys.open(true, p, None, &mut self.buf)?;
        if self.conns.len() >= self.limits.max_flows {
            self.counters.over_cap += 1;
            return None;
        }
        // A connection from the same client address ends where the new one begins.
        if let Some(old) = self.by_addr.get(&(src, dst)).copied() {
            self.remove(old, emit);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.counters.tracked += 1;
        let mut c = Conn::new(src, dst, keys, ns);
        c.last_ns = now;
        self.conns.insert(id, c);
        self.by_addr.insert((src, dst), id);
        self.register(id, p.dcid.to_vec());
        self.register(id, p.scid.to_vec());
        Some((id, true))
    }

    /// Removes connection `id`, giving its outcome when not given yet.
    fn remove(&mut self, id: u64, emit: &mut impl FnMut(Outcome)) -> bool {
        let Some(mut c) = self.conns.remove(&id) else {
            return false;
        };
        for cid in &c.cids {
            if self.by_cid.get(cid) == Some(&id) {
                self.by_cid.remove(cid);
            }
        }
        if self.by_addr.get(&(c.client, c.server)) == Some(&id) {
            self.by_addr.remove(&(c.client, c.server));
        }
        if c.over {
            return false;
        }
        emit(c.outcome());
        true
    }

    /// Evicts the connections idle for the idle timeout as of `now`.
    pub fn sweep(&mut self, now: u64, emit: &mut impl FnMut(Outcome)) {
        let idle: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| now.saturating_sub(c.last_ns) > self.limits.idle_ns)
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            if self.remove(id, emit) {
                self.counters.evicted_idle += 1;
            }
        }
    }

    /// Ends every connection (the capture's end).
    pub fn finish(&mut self, emit: &mut impl FnMut(Outcome)) {
        let mut ids: Vec<u64> = self.conns.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            self.remove(id, emit);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::observe::quic::seal;

    const C: &str = "10.0.0.1:40000";
    const S: &str = "10.0.0.2:443";
    /// The client's first destination ID, its own ID, the server's chosen one.
    const ODCID: &[u8] = &[1, 2, 3, 4, 5, 6, 7, 8];
    const CCID: &[u8] = &[9; 8];
    const SCID: &[u8] = &[0x5c; 8];

    fn ext(t: u16, body: &[u8]) -> Vec<u8> {
        let mut e = t.to_be_bytes().to_vec();
        e.extend((body.len() as u16).to_be_bytes());
        e.extend(body);
        e
    }

    fn message(t: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![t];
        m.extend(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend(body);
        m
    }

    /// A ClientHello for `localhost` (x25519), offering early data when `early`, with
    /// `pad` bytes of padding extension (a large one spans Initial packets).
    fn client_hello(early: bool, pad: usize) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([7; 32]);
        b.push(0);
        b.extend([0, 2, 0x13, 0x01, 1, 0]);
        let name = b"localhost";
        let mut sni = ((name.len() + 3) as u16).to_be_bytes().to_vec();
        sni.push(0);
        sni.extend((name.len() as u16).to_be_bytes());
        sni.extend(name);
        let mut exts = ext(0, &sni);
        exts.extend(ext(43, &[2, 3, 4]));
        let mut ks = vec![0, 36, 0, 0x1d, 0, 32];
        ks.extend([9; 32]);
        exts.extend(ext(51, &ks));
        if early {
            exts.extend(ext(42, &[]));
        }
        if pad > 0 {
            exts.extend(ext(21, &vec![0; pad]));
        }
        b.extend((exts.len() as u16).to_be_bytes());
        b.extend(exts);
        message(1, &b)
    }

    /// A ServerHello choosing x25519, accepting the client's PSK when `psk`.
    fn server_hello(psk: bool) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([5; 32]);
        b.push(0);
        b.extend([0x13, 0x01, 0]);
        let mut exts = ext(43, &[3, 4]);
        let mut ks = vec![0, 0x1d, 0, 32];
        ks.extend([8; 32]);
        exts.extend(ext(51, &ks));
        if psk {
            exts.extend(ext(41, &[0, 0]));
        }
        b.extend((exts.len() as u16).to_be_bytes());
        b.extend(exts);
        message(2, &b)
    }

    /// Datagrams (µs, from the client, payload) through a table; the outcomes.
    fn run(datagrams: &[(u64, bool, Vec<u8>)]) -> (Vec<Outcome>, QuicTable) {
        let (c, s) = (C.parse().unwrap(), S.parse().unwrap());
        let mut t = QuicTable::new(Limits::default());
        let mut out = Vec::new();
        for (us, from_client, d) in datagrams {
            let (src, dst) = if *from_client { (c, s) } else { (s, c) };
            t.datagram(us * 1_000, us * 1_000, src, dst, d, &mut |o| out.push(o));
        }
        t.finish(&mut |o| out.push(o));
        (out, t)
    }

    fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
        parts.concat()
    }

    /// A whole handshake: the client's Initial at 0, `early` 0-RTT at 1 µs, the server's
    /// flight at 100 and 110, the client's Finished and request at 200, the server's
    /// 1-RTT at 300.
    fn handshake(
        key_dcid: &[u8],
        first: Vec<(u64, bool, Vec<u8>)>,
        psk: bool,
        early: bool,
    ) -> Vec<(u64, bool, Vec<u8>)> {
        let mut d = first;
        if early {
            d.push((1, true, seal::opaque(1, ODCID, CCID)));
        }
        d.push((
            100,
            false,
            cat(&[
                seal::initial(
                    false,
                    key_dcid,
                    CCID,
                    SCID,
                    0,
                    &seal::crypto(0, &server_hello(psk)),
                ),
                seal::opaque(2, CCID, SCID),
            ]),
        ));
        d.push((110, false, seal::opaque(2, CCID, SCID)));
        d.push((
            200,
            true,
            cat(&[
                seal::initial(true, key_dcid, SCID, CCID, 1, &[1]),
                seal::opaque(2, SCID, CCID),
                seal::short(SCID),
            ]),
        ));
        d.push((300, false, seal::short(CCID)));
        d
    }

    fn hello(early: bool) -> Vec<(u64, bool, Vec<u8>)> {
        vec![(
            0,
            true,
            seal::initial(
                true,
                ODCID,
                ODCID,
                CCID,
                0,
                &seal::crypto(0, &client_hello(early, 0)),
            ),
        )]
    }

    fn one(out: &[Outcome]) -> &Handshake {
        assert_eq!(out.len(), 1, "{out:?}");
        match &out[0] {
            Outcome::Handshake(h) => h,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_full_handshake_is_timed_from_its_packets() {
        let mut d = hello(false);
        // A Version Negotiation first (counted; the client goes on in version 1).
        d.push((0, false, seal::version_negotiation(CCID, ODCID)));
        d.extend(handshake(ODCID, Vec::new(), false, false));
        let (out, t) = run(&d);
        assert_eq!(t.packets().version_negotiation, 1);
        let h = one(&out);
        assert_eq!(h.kind, HandshakeKind::Full);
        assert_eq!(h.sni.as_deref(), Some("localhost"));
        assert_eq!((h.group, h.suite, h.version), (Some(0x1d), 0x1301, 0x0304));
        let p = h.phases;
        assert_eq!(p.connect, None);
        assert_eq!(p.server_think, Some(100_000));
        assert_eq!(p.server_flight, Some(10_000));
        assert_eq!(p.client_think, Some(90_000));
        assert_eq!(p.tls, Some(200_000));
        assert_eq!(p.first_app_byte, Some(200_000));
        assert_eq!(p.server_first_byte, Some(100_000));
        let k = t.packets();
        assert_eq!(
            (k.initial, k.handshake, k.short, k.undecryptable),
            (3, 3, 2, 0)
        );
        assert_eq!(t.counters().tracked, 1);
    }

    #[test]
    fn a_resumption_with_0rtt_packets_is_0rtt() {
        let (out, _) = run(&handshake(ODCID, hello(true), true, true));
        let h = one(&out);
        assert_eq!(h.kind, HandshakeKind::ZeroRtt);
        assert_eq!(h.resumption, Some("psk"));
        assert_eq!(h.phases.first_app_byte, Some(1_000));
        // Resumed without early data sent: resumed.
        let (out, _) = run(&handshake(ODCID, hello(true), true, false));
        assert_eq!(one(&out).kind, HandshakeKind::Resumed);
    }

    #[test]
    fn a_client_hello_over_two_initials_in_reverse_order_is_read() {
        let ch = client_hello(false, 1500);
        let (a, b) = ch.split_at(1000);
        let first = vec![
            (
                0,
                true,
                seal::initial(true, ODCID, ODCID, CCID, 1, &seal::crypto(1000, b)),
            ),
            (
                5,
                true,
                seal::initial(true, ODCID, ODCID, CCID, 0, &seal::crypto(0, a)),
            ),
        ];
        let (out, _) = run(&handshake(ODCID, first, false, false));
        let h = one(&out);
        assert_eq!(h.kind, HandshakeKind::Full);
        // The ClientHello was complete at 5 µs, the connection began at 0.
        assert_eq!(h.phases.server_think, Some(95_000));
        assert_eq!(h.phases.first_app_byte, Some(200_000));
    }

    #[test]
    fn a_retry_is_followed_to_the_new_connection_id() {
        let new = &[0xee; 8];
        let first = vec![
            (
                0,
                true,
                seal::initial(
                    true,
                    ODCID,
                    ODCID,
                    CCID,
                    0,
                    &seal::crypto(0, &client_hello(false, 0)),
                ),
            ),
            (50, false, seal::retry(CCID, new)),
            (
                60,
                true,
                seal::initial(
                    true,
                    new,
                    new,
                    CCID,
                    1,
                    &seal::crypto(0, &client_hello(false, 0)),
                ),
            ),
        ];
        let (out, t) = run(&handshake(new, first, false, false));
        let h = one(&out);
        assert!(h.retry);
        assert_eq!(h.kind, HandshakeKind::Full);
        // From the ClientHello the server answered; `tls` from the first.
        assert_eq!(h.phases.server_think, Some(40_000));
        assert_eq!(h.phases.tls, Some(200_000));
        assert_eq!(t.packets().retry, 1);
        assert_eq!(t.packets().undecryptable, 0);
    }

    #[test]
    fn a_closed_handshake_fails_with_its_alert_and_an_unanswered_one_is_incomplete() {
        let mut d = hello(false);
        // CONNECTION_CLOSE with the TLS alert handshake_failure (0x100 + 40).
        let close = [0x1c, 0x41, 0x28, 0x06, 0x00];
        d.push((
            100,
            false,
            seal::initial(false, ODCID, CCID, SCID, 0, &close),
        ));
        let (out, _) = run(&d);
        assert_eq!(
            out,
            vec![Outcome::Failed(Failure::Alert("handshake_failure".into()))]
        );
        let (out, _) = run(&hello(false));
        assert_eq!(out, vec![Outcome::Failed(Failure::Incomplete)]);
    }

    #[test]
    fn what_is_not_a_new_client_initial_starts_no_connection() {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let mut t = QuicTable::new(Limits::default());
        let mut out = Vec::new();
        // A server's Initial alone, a short header, DNS-like bytes, another version.
        let server = seal::initial(
            false,
            ODCID,
            CCID,
            SCID,
            0,
            &seal::crypto(0, &server_hello(false)),
        );
        t.datagram(1, 1, s, c, &server, &mut |o| out.push(o));
        t.datagram(2, 2, c, s, &seal::short(SCID), &mut |o| out.push(o));
        t.datagram(3, 3, c, s, &[0x12, 0x34, 1, 0, 0, 1], &mut |o| out.push(o));
        let mut other = seal::opaque(0, ODCID, CCID);
        other[1..5].copy_from_slice(&0xff00_001du32.to_be_bytes());
        t.datagram(4, 4, c, s, &other, &mut |o| out.push(o));
        t.finish(&mut |o| out.push(o));
        assert!(out.is_empty(), "{out:?}");
        let k = t.packets();
        assert_eq!(
            (k.unknown_connection, k.not_quic, k.other_version),
            (2, 1, 1)
        );
        assert_eq!(t.counters().tracked, 0);
    }

    #[test]
    fn a_new_destination_id_from_the_same_address_is_a_new_connection() {
        let mut d = handshake(ODCID, hello(false), false, false);
        let other = &[0x42; 8];
        d.push((
            1_000,
            true,
            seal::initial(
                true,
                other,
                other,
                CCID,
                0,
                &seal::crypto(0, &client_hello(false, 0)),
            ),
        ));
        let (out, t) = run(&d);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(matches!(out[0], Outcome::Handshake(_)));
        assert_eq!(out[1], Outcome::Failed(Failure::Incomplete));
        assert_eq!(t.counters().tracked, 2);
    }

    /// Garbage and cut packets, alone or after a real Initial, on a table: never a panic.
    #[test]
    fn random_and_cut_datagrams_are_never_a_panic() {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let mut t = QuicTable::new(Limits::default());
        let real = seal::initial(
            true,
            ODCID,
            ODCID,
            CCID,
            0,
            &seal::crypto(0, &client_hello(false, 0)),
        );
        let mut rng = crate::observe::xorshift::XorShift::new(0x9e37_79b9_7f4a_7c15);
        let mut out = Vec::new();
        for len in 0..1300 {
            let mut bytes: Vec<u8> = rng.bytes(len);
            if len % 3 == 0 {
                let keep = len.min(real.len());
                bytes[..keep].copy_from_slice(&real[..keep]);
            }
            let (a, b) = if len % 2 == 0 { (c, s) } else { (s, c) };
            t.datagram(len as u64, len as u64, a, b, &bytes, &mut |o| out.push(o));
            t.datagram(
                len as u64,
                len as u64,
                a,
                b,
                &real[..len.min(real.len())],
                &mut |o| out.push(o),
            );
        }
        t.finish(&mut |o| out.push(o));
    }
}
