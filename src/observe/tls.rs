//! TLS message extraction from one direction's reassembled byte stream: record framing
//! (5-byte headers checked for sanity, so a stream that is not TLS is told apart at once),
//! handshake messages reassembled across records, and the two messages whose contents
//! matter read with `tls-parser`: the ClientHello (SNI, early data, PSK modes, session
//! ticket; and what it offers — the ALPN protocols, the supported groups, a pre-shared
//! key — read in place, without allocating for the common cases: [`Offer`]) and the
//! ServerHello (version, suite, group, PSK accepted, HelloRetryRequest by its fixed
//! random).

use std::borrow::Cow;

use tls_parser::{
    TlsExtension, parse_tls_client_hello_extension, parse_tls_handshake_client_hello,
    parse_tls_handshake_server_hello, parse_tls_server_hello_extension,
};

/// Record content types.
pub mod content {
    /// change_cipher_spec.
    pub const CCS: u8 = 20;
    /// alert.
    pub const ALERT: u8 = 21;
    /// handshake.
    pub const HANDSHAKE: u8 = 22;
    /// application_data (and every TLS 1.3 encrypted record).
    pub const APP_DATA: u8 = 23;
}

/// Handshake message types.
pub mod msg {
    /// ClientHello.
    pub const CLIENT_HELLO: u8 = 1;
    /// ServerHello (and HelloRetryRequest).
    pub const SERVER_HELLO: u8 = 2;
    /// NewSessionTicket.
    pub const NEW_SESSION_TICKET: u8 = 4;
    /// Certificate.
    pub const CERTIFICATE: u8 = 11;
    /// ServerKeyExchange.
    pub const SERVER_KEY_EXCHANGE: u8 = 12;
    /// ServerHelloDone.
    pub const SERVER_HELLO_DONE: u8 = 14;
}

/// The largest record body accepted: 2^14 plus the 2048 bytes of expansion TLS 1.2
/// allows a ciphertext.
pub const MAX_RECORD_BODY: usize = (1 << 14) + 2048;

/// The largest handshake message reassembled (a certificate chain of 64 KiB).
pub const MAX_HANDSHAKE_MESSAGE: usize = 1 << 16;

/// The random of a HelloRetryRequest (RFC 8446 §4.1.3).
pub const HRR_RANDOM: [u8; 32] = [
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
];

/// TLS 1.2's version number.
pub const TLS12: u16 = 0x0303;
/// TLS 1.3's version number.
pub const TLS13: u16 = 0x0304;

/// What framing found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A whole record: its content type, body length; the record takes `5 + len` bytes.
    Record {
        /// Content type.
        content_type: u8,
        /// Body length.
        len: usize,
    },
    /// Not enough bytes yet.
    NeedMore,
    /// Not a TLS record header.
    Garbage,
}

/// Frames the record at the start of `buf`.
pub fn frame(buf: &[u8]) -> Frame {
    let Some(h) = buf.get(..5) else {
        // A bad first byte is garbage even before the header is complete.
        return match buf.first() {
            Some(t) if !(20..=24).contains(t) => Frame::Garbage,
            _ => Frame::NeedMore,
        };
    };
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    if !(20..=24).contains(&h[0]) || h[1] != 3 || h[2] > 4 || len > MAX_RECORD_BODY {
        return Frame::Garbage;
    }
    if buf.len() < 5 + len {
        return Frame::NeedMore;
    }
    Frame::Record {
        content_type: h[0],
        len,
    }
}

/// A handshake message longer than [`MAX_HANDSHAKE_MESSAGE`] (its declared length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong(pub usize);

/// Handshake messages reassembled from the bodies of plaintext handshake records.
#[derive(Debug, Default)]
pub struct HandshakeBuf {
    buf: Vec<u8>,
}

impl HandshakeBuf {
    /// Takes a handshake record's body: calls `f(type, body)` for each message it
    /// completes, in order, until `f` returns false; keeps the part of a message that
    /// continues in the next record. Messages whole inside the body are read from it in
    /// place (copied only when one began in an earlier record). An error when a
    /// message's declared length is beyond [`MAX_HANDSHAKE_MESSAGE`].
    pub fn feed(
        &mut self,
        body: &[u8],
        mut f: impl FnMut(u8, &[u8]) -> bool,
    ) -> Result<(), TooLong> {
        if self.buf.is_empty() {
            let used = messages(body, &mut f)?;
            self.buf.extend_from_slice(&body[used..]);
        } else {
            self.buf.extend_from_slice(body);
            let used = messages(&self.buf, &mut f)?;
            self.buf.drain(..used);
        }
        Ok(())
    }

    /// True when a message is partly held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The whole messages at the start of `buf` to `f` (see [`HandshakeBuf::feed`]); the
/// bytes they took.
fn messages(buf: &[u8], f: &mut impl FnMut(u8, &[u8]) -> bool) -> Result<usize, TooLong> {
    let mut used = 0;
    while let Some(h) = buf.get(used..used + 4) {
        let len = (usize::from(h[1]) << 16) | (usize::from(h[2]) << 8) | usize::from(h[3]);
        if len > MAX_HANDSHAKE_MESSAGE {
            return Err(TooLong(len));
        }
        let Some(body) = buf.get(used + 4..used + 4 + len) else {
            break;
        };
        let t = h[0];
        used += 4 + len;
        if !f(t, body) {
            break;
        }
    }
    Ok(used)
}

/// What a ClientHello offers, of what the analysis uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// server_name (host name), if sent and valid UTF-8.
    pub sni: Option<String>,
    /// An early_data extension (0-RTT offered).
    pub early_data: bool,
    /// A psk_key_exchange_modes extension (TLS 1.3: the client takes session tickets;
    /// servers send none without it).
    pub psk_modes: bool,
    /// A non-empty session_ticket extension (TLS 1.2 ticket resumption offered).
    pub ticket: bool,
    /// What it offers: ALPN, groups, a pre-shared key.
    pub offer: Offer,
}

/// The most supported_groups of a ClientHello kept (GREASE values left out); more are
/// counted in [`Offer::groups_beyond`]. OpenSSL 3 offers 10 by default, browsers 4 to 8.
pub const MAX_OFFERED_GROUPS: usize = 12;

/// What a ClientHello offers the server: its first ALPN protocol, its supported groups,
/// whether it offers a pre-shared key (a resumption). Held without a heap allocation
/// but for an ALPN protocol other than the usual ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offer {
    /// The first protocol of its application_layer_protocol_negotiation extension (the
    /// one it prefers): `h2`, `http/1.1`, `h3`… (not valid UTF-8: lossily); `None`
    /// without the extension.
    pub alpn: Option<Cow<'static, str>>,
    /// Its supported_groups, in its order (GREASE values left out): the first
    /// `groups_len` of them.
    groups: [u16; MAX_OFFERED_GROUPS],
    groups_len: u8,
    /// Groups beyond [`MAX_OFFERED_GROUPS`], not kept.
    pub groups_beyond: u16,
    /// A pre_shared_key extension: it offers to resume a session (TLS 1.3).
    pub psk: bool,
}

impl Offer {
    /// The supported groups offered, in the ClientHello's order (at most
    /// [`MAX_OFFERED_GROUPS`]).
    pub fn groups(&self) -> &[u16] {
        &self.groups[..usize::from(self.groups_len)]
    }

    /// The ALPN extension's body: its first protocol.
    fn read_alpn(&mut self, data: &[u8]) {
        // ProtocolNameList: a 2-byte length, then 1-byte-length names.
        let Some(&len) = data.get(2) else { return };
        let Some(name) = data.get(3..3 + usize::from(len)) else {
            return;
        };
        self.alpn = Some(alpn_label(name));
    }

    /// The supported_groups extension's body.
    fn read_groups(&mut self, data: &[u8]) {
        // NamedGroupList: a 2-byte length, then 2-byte groups.
        let Some(list) = data
            .get(..2)
            .and_then(|l| data.get(2..2 + usize::from(u16::from_be_bytes([l[0], l[1]]))))
        else {
            return;
        };
        for g in list.chunks_exact(2) {
            let g = u16::from_be_bytes([g[0], g[1]]);
            if is_grease(g) {
                continue;
            }
            if usize::from(self.groups_len) < MAX_OFFERED_GROUPS {
                self.groups[usize::from(self.groups_len)] = g;
                self.groups_len += 1;
            } else {
                self.groups_beyond = self.groups_beyond.saturating_add(1);
            }
        }
    }
}

/// A GREASE value (RFC 8701): `0x?a?a` with both bytes equal.
fn is_grease(v: u16) -> bool {
    let [a, b] = v.to_be_bytes();
    a == b && a & 0x0f == 0x0a
}

/// An ALPN protocol's name, allocating only for one other than the usual ones.
pub fn alpn_label(name: &[u8]) -> Cow<'static, str> {
    match name {
        b"h2" => "h2".into(),
        b"http/1.1" => "http/1.1".into(),
        b"h3" => "h3".into(),
        b"http/1.0" => "http/1.0".into(),
        b"acme-tls/1" => "acme-tls/1".into(),
        b"dot" => "dot".into(),
        b"doq" => "doq".into(),
        other => String::from_utf8_lossy(other).into_owned().into(),
    }
}

/// What a ServerHello (or HelloRetryRequest) says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerHello {
    /// A HelloRetryRequest (its random is [`HRR_RANDOM`]).
    pub hrr: bool,
    /// The negotiated version (supported_versions, else the legacy version).
    pub version: u16,
    /// The cipher suite.
    pub suite: u16,
    /// The key-exchange group (TLS 1.3 key_share; for a HelloRetryRequest, the group
    /// asked for).
    pub group: Option<u16>,
    /// pre_shared_key present: the server accepted the client's PSK (TLS 1.3 resumption).
    pub psk: bool,
}

/// The ClientHello extensions read with `tls-parser`: server_name, session_ticket,
/// early_data, psk_key_exchange_modes (the others are skipped by their length: each one
/// parsed is work and often an allocation, per connection).
const CLIENT_EXTENSIONS: [u16; 4] = [0, 35, 42, 45];

/// The ClientHello extensions read in place (`tls-parser` would collect their lists into
/// vectors): supported_groups, ALPN, pre_shared_key.
mod offered {
    /// supported_groups.
    pub const GROUPS: u16 = 10;
    /// application_layer_protocol_negotiation.
    pub const ALPN: u16 = 16;
    /// pre_shared_key.
    pub const PSK: u16 = 41;
}
/// The ServerHello extensions read: pre_shared_key, supported_versions, key_share.
const SERVER_EXTENSIONS: [u16; 3] = [41, 43, 51];

/// The extensions of the types in `wanted` in a hello's extensions block, each read
/// with `parse` (`tls-parser`'s), in order; the others are skipped by their length
/// without being read. Like `tls-parser`'s list parsers, stops at the first one that
/// is cut short or does not parse.
fn extensions<'a>(
    block: &'a [u8],
    wanted: &'a [u16],
    parse: fn(&'a [u8]) -> tls_parser::IResult<&'a [u8], TlsExtension<'a>>,
) -> impl Iterator<Item = TlsExtension<'a>> {
    let mut raw = raw_extensions(block);
    std::iter::from_fn(move || {
        loop {
            let (t, whole) = raw.next()?;
            if wanted.contains(&t) {
                return parse(whole).ok().map(|(_, e)| e);
            }
        }
    })
}

/// Each extension of a hello's extensions block: its type and its whole bytes (the
/// 4-byte header included); stops at one cut short.
fn raw_extensions(mut block: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let h = block.get(..4)?;
        let t = u16::from_be_bytes([h[0], h[1]]);
        let len = 4 + usize::from(u16::from_be_bytes([h[2], h[3]]));
        let whole = block.get(..len)?;
        block = &block[len..];
        Some((t, whole))
    })
}

/// Reads a ClientHello's body; `None` when it does not parse.
pub fn client_hello(body: &[u8]) -> Option<ClientHello> {
    let (_, ch) = parse_tls_handshake_client_hello(body).ok()?;
    let mut out = ClientHello::default();
    let Some(ext) = ch.ext else {
        return Some(out);
    };
    // One pass: the offer's extensions read in place, the others wanted by
    // `tls-parser` (stopping, as its list parsers do, at one that does not parse).
    for (t, whole) in raw_extensions(ext) {
        let data = &whole[4..];
        match t {
            offered::GROUPS => out.offer.read_groups(data),
            offered::ALPN => out.offer.read_alpn(data),
            offered::PSK => out.offer.psk = true,
            t if CLIENT_EXTENSIONS.contains(&t) => {
                let Ok((_, e)) = parse_tls_client_hello_extension(whole) else {
                    break;
                };
                match e {
                    TlsExtension::SNI(names) => {
                        out.sni = names
                            .iter()
                            .find(|(t, _)| t.0 == 0)
                            .and_then(|(_, n)| std::str::from_utf8(n).ok())
                            .map(str::to_string);
                    }
                    TlsExtension::EarlyData(_) => out.early_data = true,
                    TlsExtension::PskExchangeModes(_) => out.psk_modes = true,
                    TlsExtension::SessionTicket(t) => out.ticket = !t.is_empty(),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// Reads a ServerHello's body; `None` when it does not parse.
pub fn server_hello(body: &[u8]) -> Option<ServerHello> {
    let (_, sh) = parse_tls_handshake_server_hello(body).ok()?;
    let mut out = ServerHello {
        hrr: sh.random == HRR_RANDOM,
        version: sh.version.0,
        suite: sh.cipher.0,
        ..ServerHello::default()
    };
    let Some(ext) = sh.ext else {
        return Some(out);
    };
    for e in extensions(ext, &SERVER_EXTENSIONS, parse_tls_server_hello_extension) {
        match e {
            TlsExtension::SupportedVersions(vs) => {
                if let Some(v) = vs.first() {
                    out.version = v.0;
                }
            }
            // ServerHello: group, length, key; HelloRetryRequest: the group alone.
            TlsExtension::KeyShare(ks) | TlsExtension::KeyShareOld(ks) => {
                out.group = ks.get(..2).map(|g| u16::from_be_bytes([g[0], g[1]]));
            }
            TlsExtension::PreSharedKey(_) => out.psk = true,
            _ => {}
        }
    }
    Some(out)
}

/// The named curve of an ECDHE ServerKeyExchange (TLS 1.2); `None` for another kind.
pub fn server_key_exchange_group(body: &[u8]) -> Option<u16> {
    // ECParameters: curve_type 3 (named_curve), then the group.
    match body {
        [3, a, b, ..] => Some(u16::from_be_bytes([*a, *b])),
        _ => None,
    }
}

/// A version's name as nginx and openssl print it.
pub fn version_name(v: u16) -> String {
    version_label(v).into_owned()
}

/// [`version_name`], allocating only for a version without a name.
pub fn version_label(v: u16) -> Cow<'static, str> {
    match v {
        0x0300 => "SSLv3".into(),
        0x0301 => "TLSv1".into(),
        0x0302 => "TLSv1.1".into(),
        TLS12 => "TLSv1.2".into(),
        TLS13 => "TLSv1.3".into(),
        other => format!("0x{other:04x}").into(),
    }
}

/// A named group's name (the IANA registry's, as openssl prints them).
pub fn group_name(g: u16) -> String {
    group_label(g).into_owned()
}

/// [`group_name`], allocating only for a group without a name.
pub fn group_label(g: u16) -> Cow<'static, str> {
    match g {
        0x0017 => "secp256r1".into(),
        0x0018 => "secp384r1".into(),
        0x0019 => "secp521r1".into(),
        0x001d => "x25519".into(),
        0x001e => "x448".into(),
        0x0100 => "ffdhe2048".into(),
        0x0101 => "ffdhe3072".into(),
        0x0102 => "ffdhe4096".into(),
        0x0103 => "ffdhe6144".into(),
        0x0104 => "ffdhe8192".into(),
        0x11eb => "SecP256r1MLKEM768".into(),
        0x11ec => "X25519MLKEM768".into(),
        0x11ed => "SecP384r1MLKEM1024".into(),
        0x6399 => "X25519Kyber768Draft00".into(),
        other => format!("0x{other:04x}").into(),
    }
}

/// An alert description's name (RFC 8446 §6).
pub fn alert_name(d: u8) -> String {
    match d {
        0 => "close_notify".into(),
        10 => "unexpected_message".into(),
        20 => "bad_record_mac".into(),
        22 => "record_overflow".into(),
        40 => "handshake_failure".into(),
        42 => "bad_certificate".into(),
        43 => "unsupported_certificate".into(),
        44 => "certificate_revoked".into(),
        45 => "certificate_expired".into(),
        46 => "certificate_unknown".into(),
        47 => "illegal_parameter".into(),
        48 => "unknown_ca".into(),
        49 => "access_denied".into(),
        50 => "decode_error".into(),
        51 => "decrypt_error".into(),
        70 => "protocol_version".into(),
        71 => "insufficient_security".into(),
        80 => "internal_error".into(),
        86 => "inappropriate_fallback".into(),
        90 => "user_canceled".into(),
        109 => "missing_extension".into(),
        110 => "unsupported_extension".into(),
        112 => "unrecognized_name".into(),
        113 => "bad_certificate_status_response".into(),
        115 => "unknown_psk_identity".into(),
        116 => "certificate_required".into(),
        120 => "no_application_protocol".into(),
        other => format!("alert {other}"),
    }
}

/// A ClientHello body with `exts` (type, body) as its extensions (tests here and in the
/// modules that read what a ClientHello offers).
#[cfg(test)]
pub(crate) fn hello_with(exts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = vec![3, 3];
    b.extend([7; 32]);
    b.push(0);
    b.extend([0, 2, 0x13, 0x01, 1, 0]);
    let mut block = Vec::new();
    for (t, body) in exts {
        block.extend(t.to_be_bytes());
        block.extend((body.len() as u16).to_be_bytes());
        block.extend(*body);
    }
    b.extend((block.len() as u16).to_be_bytes());
    b.extend(block);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_records_and_refuses_what_is_not_tls() {
        assert_eq!(
            frame(&[22, 3, 1, 0, 2, 9, 9]),
            Frame::Record {
                content_type: 22,
                len: 2
            }
        );
        assert_eq!(frame(&[22, 3, 1, 0, 3, 9, 9]), Frame::NeedMore);
        assert_eq!(frame(&[22, 3]), Frame::NeedMore);
        assert_eq!(frame(b"GET / HTTP/1.1\r\n"), Frame::Garbage);
        assert_eq!(frame(b"G"), Frame::Garbage);
        assert_eq!(frame(&[23, 3, 3, 0xff, 0xff]), Frame::Garbage);
        assert_eq!(frame(&[23, 2, 3, 0, 1, 0]), Frame::Garbage);
    }

    #[test]
    fn handshake_messages_span_records() {
        let mut hs = HandshakeBuf::default();
        let mut seen: Vec<(u8, Vec<u8>)> = Vec::new();
        let mut feed = |hs: &mut HandshakeBuf, body: &[u8]| {
            hs.feed(body, |t, b| {
                seen.push((t, b.to_vec()));
                true
            })
        };
        assert_eq!(feed(&mut hs, &[1, 0, 0, 3, 7]), Ok(()));
        assert!(!hs.is_empty());
        assert_eq!(feed(&mut hs, &[8, 9, 14, 0]), Ok(()));
        assert_eq!(feed(&mut hs, &[0, 0]), Ok(()));
        assert!(hs.is_empty());
        // Two whole messages in one body, read in place.
        assert_eq!(feed(&mut hs, &[2, 0, 0, 1, 5, 4, 0, 0, 0]), Ok(()));
        assert!(hs.is_empty());
        assert_eq!(feed(&mut hs, &[11, 0xff, 0, 0]), Err(TooLong(0xff_0000)));
        assert_eq!(
            seen,
            vec![(1, vec![7, 8, 9]), (14, vec![]), (2, vec![5]), (4, vec![])]
        );
        // `f` returning false stops at that message.
        let mut hs = HandshakeBuf::default();
        let mut n = 0;
        assert_eq!(
            hs.feed(&[2, 0, 0, 0, 4, 0, 0, 0], |_, _| {
                n += 1;
                false
            }),
            Ok(())
        );
        assert_eq!(n, 1);
    }

    use super::hello_with;

    #[test]
    fn reads_the_alpn_groups_and_psk_a_client_hello_offers() {
        // ALPN h2, http/1.1; groups GREASE, x25519, X25519MLKEM768, secp256r1; a PSK.
        let alpn = [
            0, 12, 2, b'h', b'2', 8, b'h', b't', b't', b'p', b'/', b'1', b'.', b'1',
        ];
        let groups = [0, 8, 0x3a, 0x3a, 0, 0x1d, 0x11, 0xec, 0, 0x17];
        let ch = client_hello(&hello_with(&[(16, &alpn), (10, &groups), (41, &[0; 8])])).unwrap();
        assert_eq!(ch.offer.alpn.as_deref(), Some("h2"));
        assert!(
            matches!(ch.offer.alpn, Some(Cow::Borrowed(_))),
            "no allocation"
        );
        assert_eq!(ch.offer.groups(), [0x1d, 0x11ec, 0x17]);
        assert_eq!(ch.offer.groups_beyond, 0);
        assert!(ch.offer.psk);
        // None of them; an unusual protocol; more groups than are kept.
        let none = client_hello(&hello_with(&[])).unwrap();
        assert_eq!(none.offer, Offer::default());
        let many: Vec<u8> = [0, 40]
            .into_iter()
            .chain((1..=20u16).flat_map(u16::to_be_bytes))
            .collect();
        let ch = client_hello(&hello_with(&[
            (16, &[0, 4, 3, b'x', b'm', b'p']),
            (10, &many),
        ]))
        .unwrap();
        assert_eq!(ch.offer.alpn.as_deref(), Some("xmp"));
        assert_eq!(ch.offer.groups().len(), MAX_OFFERED_GROUPS);
        assert_eq!(ch.offer.groups()[0], 1);
        assert_eq!(ch.offer.groups_beyond, 20 - MAX_OFFERED_GROUPS as u16);
        assert!(!ch.offer.psk);
        // Cut short: what is there is not read past its end.
        let ch = client_hello(&hello_with(&[(16, &[0, 9, 8, b'h']), (10, &[0, 9, 0])])).unwrap();
        assert_eq!(ch.offer.alpn, None);
        assert!(ch.offer.groups().is_empty());
    }

    #[test]
    fn random_bodies_never_panic() {
        let mut rng = crate::observe::xorshift::XorShift::new(0x2545_f491_4f6c_dd1d);
        for len in 0..400 {
            let bytes: Vec<u8> = rng.bytes(len);
            let _ = client_hello(&bytes);
            let _ = server_hello(&bytes);
            let _ = frame(&bytes);
            let mut hs = HandshakeBuf::default();
            let _ = hs.feed(&bytes, |_, _| true);
            let _ = hs.feed(&bytes, |_, _| true);
        }
    }
}
