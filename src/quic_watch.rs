//! What a QUIC connection's TLS handshake did, read from the handshake itself.
//!
//! quinn keeps its rustls connection private: it tells whether 0-RTT was accepted (client
//! side only) and gives the peer's certificates, but not whether the handshake resumed a
//! session, nor the group or the cipher suite. In QUIC, though, the TLS handshake messages
//! travel as plaintext CRYPTO data between the TLS stack and the transport (packet
//! protection is QUIC's). [`WatchedServerConfig`] wraps quinn's rustls configuration and
//! every session it starts: each call is passed through unchanged, and the handshake
//! messages the server writes (ServerHello, EncryptedExtensions, Certificate, …) are read
//! on the way out with `observe`'s message readers (the ones that read captures), into a
//! [`Watch`] shared with the code that accepted the connection.
//!
//! [`WatchedClientConfig`] does the same for a client (`handshake --http3`), reading what
//! the server's messages said as rustls reads them, and when: the client's timeline
//! ([`ClientMoments`]).
//!
//! Nothing is decided by the wrappers: they only read what rustls wrote or read.

use std::any::Any;
use std::sync::{Arc, Mutex};

use quinn::crypto::{self, rustls::HandshakeData};
use quinn::{ConnectionId, Side};
use quinn_proto::TransportError;
use quinn_proto::transport_parameters::TransportParameters;

use crate::observe::tls::{self as wire, HandshakeBuf};

/// What the handshake messages one side wrote said about the handshake.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The ServerHello (the last one: after a HelloRetryRequest, the real one).
    pub server_hello: Option<wire::ServerHello>,
    /// A HelloRetryRequest was sent.
    pub hrr: bool,
    /// EncryptedExtensions carried early_data: the server accepted 0-RTT.
    pub early_data_accepted: bool,
    /// A 0-RTT packet was received and decrypted (a client may be allowed 0-RTT and send
    /// nothing in it).
    pub early_data_received: bool,
    /// The server sent a CertificateRequest.
    pub certificate_requested: bool,
    /// (Client side) the client wrote its Finished: the server's flight is over.
    pub client_finished: bool,
    /// Handshake messages that could not be reassembled (a declared length beyond the
    /// reader's limit): what was seen before stays, nothing after it is read.
    pub unreadable: bool,
}

impl Seen {
    /// A resumed handshake: the ServerHello accepted the client's pre-shared key.
    pub fn resumed(&self) -> bool {
        self.server_hello.as_ref().is_some_and(|h| h.psk)
    }

    /// The kind as `tlsperf serve`'s /stats names it: `full`, `full-hrr`, `resumed` or
    /// `0rtt` (resumed, 0-RTT accepted, and 0-RTT data received, as the TCP side counts
    /// it).
    pub fn kind(&self) -> &'static str {
        let early = self.early_data_accepted && self.early_data_received;
        match (self.resumed(), early, self.hrr) {
            (true, true, _) => "0rtt",
            (true, false, _) => "resumed",
            (false, _, true) => "full-hrr",
            (false, _, false) => "full",
        }
    }

    /// Reads one handshake message.
    fn message(&mut self, kind: u8, body: &[u8]) {
        match kind {
            wire::msg::SERVER_HELLO => {
                if let Some(h) = wire::server_hello(body) {
                    self.hrr |= h.hrr;
                    self.server_hello = Some(h);
                }
            }
            ENCRYPTED_EXTENSIONS => self.early_data_accepted |= has_early_data(body),
            CERTIFICATE_REQUEST => self.certificate_requested = true,
            _ => {}
        }
    }
}

/// EncryptedExtensions.
const ENCRYPTED_EXTENSIONS: u8 = 8;
/// The pre_shared_key extension.
const PRE_SHARED_KEY: u16 = 41;

/// Whether a ClientHello body has the extension `wanted`.
fn hello_extension(body: &[u8], wanted: u16) -> bool {
    // version (2), random (32), session id, cipher suites, compression methods.
    let mut at = 34;
    let Some(&sid) = body.get(at) else {
        return false;
    };
    at += 1 + usize::from(sid);
    let Some(cs) = body.get(at..at + 2) else {
        return false;
    };
    at += 2 + usize::from(u16::from_be_bytes([cs[0], cs[1]]));
    let Some(&comp) = body.get(at) else {
        return false;
    };
    at += 1 + usize::from(comp) + 2; // and the extensions block's length
    let mut rest = body.get(at..).unwrap_or(&[]);
    while let Some(h) = rest.get(..4) {
        if u16::from_be_bytes([h[0], h[1]]) == wanted {
            return true;
        }
        let n = 4 + usize::from(u16::from_be_bytes([h[2], h[3]]));
        rest = rest.get(n..).unwrap_or(&[]);
    }
    false
}
/// CertificateRequest.
const CERTIFICATE_REQUEST: u8 = 13;
/// The early_data extension.
const EARLY_DATA: u16 = 42;

/// Whether an EncryptedExtensions body (a 2-byte length, then extensions) has the
/// early_data extension.
fn has_early_data(body: &[u8]) -> bool {
    let Some(len) = body.get(..2) else {
        return false;
    };
    let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
    let mut rest = body.get(2..2 + len).unwrap_or(&[]);
    while let Some(h) = rest.get(..4) {
        if u16::from_be_bytes([h[0], h[1]]) == EARLY_DATA {
            return true;
        }
        let n = 4 + usize::from(u16::from_be_bytes([h[2], h[3]]));
        rest = rest.get(n..).unwrap_or(&[]);
    }
    false
}

/// When a client's handshake steps happened, and what it sent and read (`handshake
/// --http3`).
#[derive(Debug, Clone, Default)]
pub struct ClientMoments {
    /// The first ClientHello handed to quinn, which sends it in the first Initial packet
    /// at once (after a HelloRetryRequest, still the first one).
    pub hello_written: Option<std::time::Instant>,
    /// Size of the first ClientHello message.
    pub hello_len: usize,
    /// The ClientHello offered a pre-shared key (a session to resume).
    pub psk_offered: bool,
    /// The (last) ServerHello read by rustls: the server's Initial packet received and
    /// decrypted.
    pub server_hello: Option<std::time::Instant>,
    /// The server's Certificate message read (none when resumed).
    pub certificate: Option<std::time::Instant>,
    /// Bytes of TLS handshake messages the server sent from its (last) ServerHello until
    /// the client next wrote (its Finished): the server's flight.
    pub server_flight_bytes: usize,
    /// NewSessionTicket messages read (sessions to resume with).
    pub tickets: usize,
    /// Initial packet keys quinn asked the session for: once at the start, once more
    /// after each Retry (the server's new connection ID gives new Initial keys).
    pub initial_keys: usize,
}

/// Runs around each call in which rustls reads the server's handshake messages (and
/// verifies its certificate, synchronously): given the call, it runs it once. A client
/// sets up its verifier's per-connection record there.
pub type ReadHook = Arc<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

/// One connection's handshake as it goes: shared by its session (which writes) and by
/// whoever holds the connection (which reads, through [`watch_of`]).
#[derive(Debug, Default)]
pub struct Watch {
    seen: Mutex<(Seen, HandshakeBuf)>,
    client: Mutex<ClientMoments>,
}

impl Watch {
    /// What was seen so far.
    pub fn seen(&self) -> Seen {
        self.seen.lock().map(|s| s.0.clone()).unwrap_or_default()
    }

    /// A client's moments so far.
    pub fn client(&self) -> ClientMoments {
        self.client.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// A client wrote handshake bytes: the first are its ClientHello.
    fn client_wrote(&self, bytes: &[u8]) {
        let Ok(mut g) = self.seen.lock() else {
            return;
        };
        let Ok(mut c) = self.client.lock() else {
            return;
        };
        // Written after the server's flight: the client's Finished.
        if c.server_hello.is_some() {
            g.0.client_finished = true;
        }
        if c.hello_written.is_none() {
            c.hello_written = Some(std::time::Instant::now());
            if let Some(h) = bytes.get(..4).filter(|h| h[0] == wire::msg::CLIENT_HELLO) {
                let len = (usize::from(h[1]) << 16) | (usize::from(h[2]) << 8) | usize::from(h[3]);
                c.hello_len = 4 + len;
                c.psk_offered = bytes
                    .get(4..4 + len)
                    .is_some_and(|body| hello_extension(body, PRE_SHARED_KEY));
            }
        }
    }

    /// A client read handshake bytes from the server: its messages, timed on arrival at
    /// rustls.
    fn client_read(&self, bytes: &[u8]) {
        let now = std::time::Instant::now();
        let Ok(mut g) = self.seen.lock() else {
            return;
        };
        let Ok(mut c) = self.client.lock() else {
            return;
        };
        let (seen, buf) = &mut *g;
        if seen.unreadable {
            return;
        }
        let mut flight = 0;
        let r = buf.feed(bytes, |kind, body| {
            match kind {
                wire::msg::SERVER_HELLO => {
                    c.server_hello = Some(now);
                    flight = 0;
                    c.server_flight_bytes = 0;
                }
                wire::msg::CERTIFICATE => c.certificate = Some(now),
                wire::msg::NEW_SESSION_TICKET => c.tickets += 1,
                _ => {}
            }
            flight += 4 + body.len();
            seen.message(kind, body);
            true
        });
        // Only the flight answering the ClientHello: nothing after the client's Finished
        // (NewSessionTicket comes later, in 1-RTT).
        if c.server_hello.is_some() && !seen.client_finished {
            c.server_flight_bytes += flight;
        }
        if r.is_err() {
            seen.unreadable = true;
        }
    }

    /// A 0-RTT packet was decrypted.
    fn early_packet(&self) {
        if let Ok(mut g) = self.seen.lock() {
            g.0.early_data_received = true;
        }
    }

    /// Reads handshake bytes the watched side wrote (a stream: a message may continue in
    /// the next call).
    fn wrote(&self, bytes: &[u8]) {
        let Ok(mut g) = self.seen.lock() else {
            return;
        };
        let (seen, buf) = &mut *g;
        if seen.unreadable {
            return;
        }
        if buf
            .feed(bytes, |kind, body| {
                seen.message(kind, body);
                true
            })
            .is_err()
        {
            seen.unreadable = true;
        }
    }
}

/// What a watched session's `handshake_data` returns: quinn's own (ALPN, SNI), and the
/// watch.
pub struct WatchedData {
    /// quinn's handshake data.
    pub quinn: Option<HandshakeData>,
    /// The handshake as seen so far.
    pub watch: Arc<Watch>,
}

/// The watch of a connection made through a [`WatchedServerConfig`] (`None` for another
/// connection, or before its ClientHello was read).
pub fn watch_of(conn: &quinn::Connection) -> Option<Arc<Watch>> {
    let data = conn.handshake_data()?;
    data.downcast::<WatchedData>().ok().map(|d| d.watch)
}

/// The ALPN protocol quinn negotiated on a connection made through a watched
/// configuration.
pub fn alpn_of(conn: &quinn::Connection) -> Option<Vec<u8>> {
    let data = conn.handshake_data()?;
    let data = data.downcast::<WatchedData>().ok()?;
    data.quinn.and_then(|q| q.protocol)
}

/// quinn's rustls client configuration, each session it starts watched; the watch of the
/// last session started is kept for [`WatchedClientConfig::take_watch`] (quinn starts
/// the session inside `Endpoint::connect`).
pub struct WatchedClientConfig {
    inner: Arc<quinn::crypto::rustls::QuicClientConfig>,
    last: Mutex<Option<Arc<Watch>>>,
    hook: Option<ReadHook>,
}

impl WatchedClientConfig {
    /// Wraps `inner`; `hook` runs around every read of the server's messages.
    pub fn new(
        inner: Arc<quinn::crypto::rustls::QuicClientConfig>,
        hook: Option<ReadHook>,
    ) -> Self {
        WatchedClientConfig {
            inner,
            last: Mutex::new(None),
            hook,
        }
    }

    /// The watch of the session started last (right after `connect`: its own).
    pub fn take_watch(&self) -> Option<Arc<Watch>> {
        self.last.lock().ok().and_then(|mut l| l.take())
    }
}

impl crypto::ClientConfig for WatchedClientConfig {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, quinn::ConnectError> {
        let inner = Arc::clone(&self.inner).start_session(version, server_name, params)?;
        let watch = Arc::new(Watch::default());
        if let Ok(mut l) = self.last.lock() {
            *l = Some(Arc::clone(&watch));
        }
        Ok(Box::new(WatchedSession {
            inner,
            watch,
            side: Side::Client,
            hook: self.hook.clone(),
        }))
    }
}

/// quinn's rustls server configuration, each session it starts watched.
pub struct WatchedServerConfig {
    inner: Arc<quinn::crypto::rustls::QuicServerConfig>,
}

impl WatchedServerConfig {
    /// Wraps `inner`.
    pub fn new(inner: quinn::crypto::rustls::QuicServerConfig) -> Self {
        WatchedServerConfig {
            inner: Arc::new(inner),
        }
    }
}

impl crypto::ServerConfig for WatchedServerConfig {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<crypto::Keys, crypto::UnsupportedVersion> {
        self.inner.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn crypto::Session> {
        Box::new(WatchedSession {
            inner: Arc::clone(&self.inner).start_session(version, params),
            watch: Arc::new(Watch::default()),
            side: Side::Server,
            hook: None,
        })
    }
}

/// A session whose written handshake messages are read into its [`Watch`].
struct WatchedSession {
    inner: Box<dyn crypto::Session>,
    watch: Arc<Watch>,
    side: Side,
    hook: Option<ReadHook>,
}

impl crypto::Session for WatchedSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> crypto::Keys {
        if self.side == Side::Client
            && let Ok(mut c) = self.watch.client.lock()
        {
            c.initial_keys += 1;
        }
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let quinn = self.inner.handshake_data()?;
        Some(Box::new(WatchedData {
            quinn: quinn.downcast::<HandshakeData>().ok().map(|d| *d),
            watch: Arc::clone(&self.watch),
        }))
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn crypto::PacketKey>)> {
        let (header, packet) = self.inner.early_crypto()?;
        Some((
            header,
            Box::new(EarlyKey {
                inner: packet,
                watch: Arc::clone(&self.watch),
            }),
        ))
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        if self.side == Side::Server {
            return self.inner.read_handshake(buf);
        }
        self.watch.client_read(buf);
        let Some(hook) = self.hook.clone() else {
            return self.inner.read_handshake(buf);
        };
        let mut r = Ok(false);
        hook(&mut || r = self.inner.read_handshake(buf));
        r
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<crypto::Keys> {
        let before = buf.len();
        let keys = self.inner.write_handshake(buf);
        if let Some(new) = buf.get(before..).filter(|b| !b.is_empty()) {
            match self.side {
                Side::Server => self.watch.wrote(new),
                Side::Client => self.watch.client_wrote(new),
            }
        }
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<crypto::KeyPair<Box<dyn crypto::PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), crypto::ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// A session's 0-RTT packet key: tells the watch when a 0-RTT packet decrypts.
struct EarlyKey {
    inner: Box<dyn crypto::PacketKey>,
    watch: Arc<Watch>,
}

impl crypto::PacketKey for EarlyKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        self.inner.encrypt(packet, buf, header_len);
    }

    fn decrypt(
        &self,
        packet: u64,
        header: &[u8],
        payload: &mut bytes::BytesMut,
    ) -> Result<(), crypto::CryptoError> {
        let r = self.inner.decrypt(packet, header, payload);
        if r.is_ok() {
            self.watch.early_packet();
        }
        r
    }

    fn tag_len(&self) -> usize {
        self.inner.tag_len()
    }

    fn confidentiality_limit(&self) -> u64 {
        self.inner.confidentiality_limit()
    }

    fn integrity_limit(&self) -> u64 {
        self.inner.integrity_limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind, 0];
        m.extend_from_slice(&(body.len() as u16).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// A TLS 1.3 ServerHello body: AES-128-GCM, x25519, with a pre_shared_key or not.
    fn server_hello(psk: bool, random: [u8; 32]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend_from_slice(&random);
        b.push(0); // empty session id
        b.extend_from_slice(&[0x13, 0x01, 0]);
        let mut ext = Vec::new();
        ext.extend_from_slice(&[0, 43, 0, 2, 3, 4]); // supported_versions: TLS 1.3
        ext.extend_from_slice(&[0, 51, 0, 36, 0, 0x1d, 0, 32]); // key_share: x25519
        ext.extend_from_slice(&[9; 32]);
        if psk {
            ext.extend_from_slice(&[0, 41, 0, 2, 0, 0]); // pre_shared_key: identity 0
        }
        b.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        b.extend_from_slice(&ext);
        b
    }

    fn encrypted_extensions(early: bool) -> Vec<u8> {
        let mut ext = vec![0, 16, 0, 5, 0, 3, 2, b'h', b'3']; // ALPN h3
        if early {
            ext.extend_from_slice(&[0, 42, 0, 0]);
        }
        let mut b = (ext.len() as u16).to_be_bytes().to_vec();
        b.extend_from_slice(&ext);
        b
    }

    fn seen(stream: &[u8], cut: usize) -> Seen {
        let w = Watch::default();
        w.wrote(&stream[..cut]);
        w.early_packet();
        w.wrote(&stream[cut..]);
        w.seen()
    }

    #[test]
    fn the_kind_comes_from_the_server_hello_and_encrypted_extensions() {
        let full = [
            message(2, &server_hello(false, [1; 32])),
            message(8, &encrypted_extensions(false)),
            message(11, &[0, 0, 0, 0]),
        ]
        .concat();
        let resumed = [
            message(2, &server_hello(true, [1; 32])),
            message(8, &encrypted_extensions(false)),
        ]
        .concat();
        let early = [
            message(2, &server_hello(true, [1; 32])),
            message(8, &encrypted_extensions(true)),
        ]
        .concat();
        let hrr = [
            message(2, &server_hello(false, wire::HRR_RANDOM)),
            message(2, &server_hello(false, [1; 32])),
            message(8, &encrypted_extensions(false)),
        ]
        .concat();
        // Whole, and split anywhere (a message continued in the next write).
        for (stream, kind) in [
            (full, "full"),
            (resumed, "resumed"),
            (early, "0rtt"),
            (hrr, "full-hrr"),
        ] {
            for cut in 0..stream.len() {
                let s = seen(&stream, cut);
                assert_eq!(s.kind(), kind, "cut at {cut}");
                let h = s.server_hello.unwrap();
                assert_eq!((h.version, h.suite, h.group), (0x0304, 0x1301, Some(0x1d)));
            }
        }
    }

    #[test]
    fn a_client_times_the_server_messages_and_counts_its_flight() {
        let mut hello = vec![3, 3];
        hello.extend_from_slice(&[7; 32]);
        hello.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
        let ext = [0u8, 0, 0, 0, 0, 41, 0, 3, 1, 2, 3];
        hello.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        hello.extend_from_slice(&ext);
        let w = Watch::default();
        w.client_wrote(&message(1, &hello));
        let c = w.client();
        assert!(c.hello_written.is_some() && c.psk_offered);
        assert_eq!(c.hello_len, 4 + hello.len());
        let sh = message(2, &server_hello(false, [1; 32]));
        let rest = [
            message(8, &encrypted_extensions(false)),
            message(11, &[0, 0, 0, 0]),
            message(20, &[0; 32]),
        ]
        .concat();
        w.client_read(&sh);
        w.client_read(&rest);
        let c = w.client();
        assert!(c.server_hello.is_some() && c.certificate.is_some());
        assert!(c.server_hello <= c.certificate);
        assert_eq!(c.server_flight_bytes, sh.len() + rest.len());
        // The client's Finished ends the flight; a ticket later is counted apart.
        w.client_wrote(&message(20, &[0; 32]));
        w.client_read(&message(4, &[0; 20]));
        let c = w.client();
        assert_eq!(c.server_flight_bytes, sh.len() + rest.len());
        assert_eq!(c.tickets, 1);
        assert_eq!(w.seen().kind(), "full");
        // A ClientHello without a pre-shared key: its extensions block holds one empty
        // server_name extension.
        let mut plain = hello[..hello.len() - ext.len() - 2].to_vec();
        plain.extend_from_slice(&[0, 4, 0, 0, 0, 0]);
        let w = Watch::default();
        w.client_wrote(&message(1, &plain));
        assert!(!w.client().psk_offered);
        assert_eq!(w.client().hello_len, 4 + plain.len());
    }

    #[test]
    fn a_certificate_request_is_seen_and_garbage_stops_the_reading() {
        let s = seen(&message(13, &[0, 0, 0]), 1);
        assert!(s.certificate_requested);
        let mut huge = vec![2, 0xff, 0xff, 0xff];
        huge.extend_from_slice(&[0; 10]);
        let s = seen(&huge, 3);
        assert!(s.unreadable);
        assert_eq!(s.kind(), "full");
        assert!(!has_early_data(&[0, 9, 0, 42]));
        // 0-RTT allowed but none received: resumed.
        let w = Watch::default();
        w.wrote(&message(2, &server_hello(true, [1; 32])));
        w.wrote(&message(8, &encrypted_extensions(true)));
        assert_eq!(w.seen().kind(), "resumed");
        w.early_packet();
        assert_eq!(w.seen().kind(), "0rtt");
        assert!(!has_early_data(&[]));
    }
}
