//! Hostile QUIC traffic for `serve --quic` (tests/quic.rs, and `examples/quic_flood.rs`
//! for bench/quic-flood.sh): genuine client Initial packets that are never followed up,
//! as from spoofed addresses that never answer, sent from many loopback source addresses
//! (127.0.0.0/8 is all this machine's: a socket binds any of them); and malformed
//! datagrams — garbage, truncated Initials, Initials whose frames are garbage but whose
//! packet protection is right, so that the server decrypts them and parses the frames.
//!
//! The Initials are made by quinn-proto's client (a real ClientHello, padded to 1,200
//! bytes); the sender never feeds the server's answers back, so no connection goes
//! further than the server's first flight.

#![allow(dead_code)] // each test crate uses part of it

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// QUIC v1.
const V1: u32 = 1;

/// Makes client Initials to one server, each from a new connection (its own connection
/// IDs and key share).
pub struct Initials {
    endpoint: quinn_proto::Endpoint,
    config: quinn_proto::ClientConfig,
    server: SocketAddr,
    made: usize,
}

impl Initials {
    /// Initials for `server` (SNI `localhost`, ALPN h3; the certificate is never looked at:
    /// the handshake goes no further than the server's flight).
    pub fn new(server: SocketAddr) -> Initials {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        Initials {
            endpoint: endpoint(),
            config: quinn_proto::ClientConfig::new(Arc::new(quic)),
            server,
            made: 0,
        }
    }

    /// A new connection's first datagram: its Initial packet with the ClientHello.
    pub fn initial(&mut self) -> Vec<u8> {
        // The endpoint remembers every connection it made: a fresh one now and then.
        self.made += 1;
        if self.made.is_multiple_of(256) {
            self.endpoint = endpoint();
        }
        let now = Instant::now();
        let (_, mut conn) = self
            .endpoint
            .connect(now, self.config.clone(), self.server, "localhost")
            .unwrap();
        let mut buf = Vec::new();
        let t = conn.poll_transmit(now, 1, &mut buf).unwrap();
        buf.truncate(t.size);
        buf
    }
}

fn endpoint() -> quinn_proto::Endpoint {
    quinn_proto::Endpoint::new(
        Arc::new(quinn_proto::EndpointConfig::default()),
        None,
        false,
        None,
    )
}

/// The `i`-th of the loopback source addresses 127.`base`.x.y (`i` < 65,024; never
/// 127.0.0.1: `base` ≥ 1).
pub fn source(base: u8, i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, base, (i / 254) as u8, (i % 254 + 1) as u8)
}

/// A UDP socket on source address `ip` (any port), its reads bounded by `timeout`.
pub fn socket_on(ip: Ipv4Addr, timeout: Duration) -> UdpSocket {
    let s = UdpSocket::bind((ip, 0)).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    s
}

/// What a QUIC datagram from the server is, by its first packet's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reply {
    /// A long-header Initial (the server's flight begins).
    Initial,
    /// A Handshake packet first.
    Handshake,
    /// A Retry.
    Retry,
    /// Version negotiation.
    VersionNegotiation,
    /// Anything else (a short header: stateless reset…).
    Other,
}

/// The type of the datagram `d`'s first packet.
pub fn reply_kind(d: &[u8]) -> Reply {
    let Some(&first) = d.first() else {
        return Reply::Other;
    };
    if first & 0x80 == 0 || d.len() < 5 {
        return Reply::Other;
    }
    if d[1..5] == [0, 0, 0, 0] {
        return Reply::VersionNegotiation;
    }
    match (first >> 4) & 0x3 {
        0 => Reply::Initial,
        2 => Reply::Handshake,
        3 => Reply::Retry,
        _ => Reply::Other,
    }
}

/// Reads what reaches `socket` until nothing has come for `quiet` or `limit` has passed:
/// each datagram's size and kind.
pub fn drain(socket: &UdpSocket, quiet: Duration, limit: Duration) -> Vec<(usize, Reply)> {
    socket.set_read_timeout(Some(quiet)).unwrap();
    let until = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65_536];
    while Instant::now() < until {
        match socket.recv(&mut buf) {
            Ok(n) => got.push((n, reply_kind(&buf[..n]))),
            Err(_) => break,
        }
    }
    got
}

/// A QUIC variable-length integer.
fn varint(v: u64, out: &mut Vec<u8>) {
    match v {
        0..=63 => out.push(v as u8),
        64..=16_383 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        16_384..=1_073_741_823 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// A client Initial packet to a server that never saw `dcid`, whose protected payload is
/// `frames` (padded with PADDING frames to a 1,200-byte datagram): the packet protection
/// is right (the Initial keys come from `dcid`, as RFC 9001 §5.2 says), so the server
/// decrypts it and its frame parser meets whatever `frames` holds.
pub fn initial_with_frames(dcid: &[u8], frames: &[u8]) -> Vec<u8> {
    let suite = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .unwrap();
    let keys = rustls::quic::Keys::initial(
        rustls::quic::Version::V1,
        suite,
        suite.quic.unwrap(),
        dcid,
        rustls::Side::Client,
    );
    let scid = [0x5a; 8];
    let pn: u32 = 0;
    let pn_len = 4;
    let mut header = vec![0xc0 | (pn_len as u8 - 1)];
    header.extend_from_slice(&V1.to_be_bytes());
    header.push(dcid.len() as u8);
    header.extend_from_slice(dcid);
    header.push(scid.len() as u8);
    header.extend_from_slice(&scid);
    varint(0, &mut header); // no token
    // Padded so that the datagram is 1,200 bytes: header + 2-byte length + pn + payload +
    // tag.
    let tag_len = 16;
    let payload_len = frames.len().max(1200 - header.len() - 2 - pn_len - tag_len);
    let mut payload = frames.to_vec();
    payload.resize(payload_len, 0); // PADDING
    varint((pn_len + payload_len + tag_len) as u64, &mut header);
    let pn_offset = header.len();
    header.extend_from_slice(&pn.to_be_bytes());
    let tag = keys
        .local
        .packet
        .encrypt_in_place(u64::from(pn), &header, &mut payload)
        .unwrap();
    let mut packet = header;
    packet.extend_from_slice(&payload);
    packet.extend_from_slice(tag.as_ref());
    let sample_at = pn_offset + 4;
    let sample: Vec<u8> = packet[sample_at..sample_at + 16].to_vec();
    let (head, rest) = packet.split_at_mut(pn_offset);
    keys.local
        .header
        .encrypt_in_place(&sample, &mut head[0], &mut rest[..pn_len])
        .unwrap();
    packet
}

/// Frames no client Initial may carry, or that are malformed, each a payload for
/// [`initial_with_frames`]: a CRYPTO frame at the largest offset, CRYPTO data far beyond
/// what the server buffers, a frame type that does not exist, a STREAM frame (not allowed
/// in Initial packets), an ACK of packets never sent with a huge range count, a CRYPTO
/// frame whose length runs past the packet, a NEW_TOKEN from a client, and random bytes.
pub fn garbage_frames(seed: u64) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let mut f = Vec::new();
    f.push(0x06);
    varint((1 << 62) - 1, &mut f);
    varint(4, &mut f);
    f.extend_from_slice(b"\x16\x03\x01\x00");
    out.push(("CRYPTO at offset 2^62-1", f));
    let mut f = vec![0x06];
    varint(10_000_000, &mut f);
    varint(500, &mut f);
    f.extend(std::iter::repeat_n(0xab, 500));
    out.push(("CRYPTO 10 MB ahead", f));
    let mut f = Vec::new();
    varint(0x3f_0000, &mut f);
    f.extend_from_slice(&[1, 2, 3, 4]);
    out.push(("unknown frame type", f));
    let mut f = vec![0x0f];
    varint(0, &mut f);
    varint(0, &mut f);
    varint(5, &mut f);
    f.extend_from_slice(b"hello");
    out.push(("STREAM in an Initial", f));
    let mut f = vec![0x02];
    varint((1 << 62) - 1, &mut f); // largest acknowledged
    varint(0, &mut f); // delay
    varint(1_000_000, &mut f); // range count
    varint(0, &mut f);
    out.push(("ACK of packets never sent", f));
    let mut f = vec![0x06];
    varint(0, &mut f);
    varint(60_000, &mut f); // longer than the packet
    f.extend_from_slice(b"\x01\x00");
    out.push(("CRYPTO longer than its packet", f));
    let mut f = vec![0x07];
    varint(8, &mut f);
    f.extend_from_slice(&[7; 8]);
    out.push(("NEW_TOKEN from a client", f));
    let mut x = seed | 1;
    let random: Vec<u8> = (0..1100)
        .map(|_| {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    out.push(("random frames", random));
    out
}

/// Malformed datagrams from `initial` (a genuine Initial): cut at several lengths, its
/// protected payload or its header's length field altered, a long header of a version no
/// one speaks (short and full-sized), one byte, an empty datagram's nearest kin (a zero
/// byte), and the largest UDP datagram of random bytes.
pub fn malformed(initial: &[u8], seed: u64) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (what, len) in [
        ("Initial cut to 1 byte", 1),
        ("Initial cut to 6 bytes", 6),
        ("Initial cut to 20 bytes", 20),
        ("Initial cut after its header", 60),
        ("Initial cut in half", initial.len() / 2),
        ("Initial less its last byte", initial.len() - 1),
    ] {
        out.push((what, initial[..len.min(initial.len())].to_vec()));
    }
    let mut flipped = initial.to_vec();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    flipped[last - 40] ^= 0x55;
    out.push(("Initial with its payload altered", flipped));
    let mut long = initial.to_vec();
    // The Length field (after the token length) claims the largest value.
    let at = 6 + long[5] as usize + 1 + long[6 + long[5] as usize] as usize + 1;
    if at + 2 <= long.len() {
        long[at] = 0xbf;
        long[at + 1] = 0xff;
    }
    out.push(("Initial whose Length runs past the datagram", long));
    let mut vn = initial.to_vec();
    vn[1..5].copy_from_slice(&0x1a2a_3a4a_u32.to_be_bytes());
    out.push(("full-sized packet of an unknown version", vn.clone()));
    out.push(("short packet of an unknown version", vn[..100].to_vec()));
    out.push(("a zero byte", vec![0]));
    let mut x = seed | 1;
    let big: Vec<u8> = (0..65_507)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    out.push(("65,507 random bytes", big.clone()));
    let mut short = big[..1200].to_vec();
    short[0] = 0x40; // a short header for a connection the server does not know
    out.push(("short header, unknown connection", short));
    out
}

/// Sends `datagrams` to `server`, `per_ms` a millisecond at most (sent back to back,
/// most would overflow the server's socket buffer and never reach it), the `i`-th from
/// source address [`source`]`(base, i)` (a socket bound there, closed at once: a spoofed
/// address that never answers).
pub fn send_spoofed(server: SocketAddr, base: u8, datagrams: &[Vec<u8>], per_ms: usize) {
    let start = Instant::now();
    for (i, d) in datagrams.iter().enumerate() {
        let due = start + Duration::from_millis((i / per_ms.max(1)) as u64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let s = UdpSocket::bind((source(base, i), 0)).unwrap();
        s.send_to(d, server).unwrap();
    }
}
