//! QUIC packets on the wire (RFC 8999, 9000, 9001; version 2, RFC 9369): one UDP
//! datagram's packets, their long or short headers read, and Initial packets opened.
//!
//! A datagram may hold several packets (coalesced: an Initial, then a Handshake, then a
//! short-header one). Long headers carry their version, their connection IDs and (but a
//! Retry's and a Version Negotiation's) their length, so the packets of a datagram are
//! cut apart here; a short header has no length and takes the rest of the datagram, and
//! its destination connection ID's length is only known to the connection (see
//! [`super::quic_flow`]).
//!
//! Initial packets are protected with keys every observer can derive: from the
//! destination connection ID of the client's first Initial (after a Retry, of the
//! client's Initial that answers it) and the version's salt. [`InitialKeys`] derives them
//! with rustls's QUIC API (`rustls::quic::Keys::initial`, over the aws-lc-rs provider's
//! TLS_AES_128_GCM_SHA256, as RFC 9001 §5.2 prescribes), removes the header protection
//! and opens the payload; [`initial_frames`] reads the frames an Initial may carry
//! (CRYPTO, ACK, PING, PADDING, CONNECTION_CLOSE). Handshake, 0-RTT and 1-RTT packets
//! are not opened (their keys come from the TLS handshake): their type and time are
//! what the analysis uses.

use rustls::Side;
use rustls::quic::{Keys, Version as KeyVersion};

/// QUIC version 1 (RFC 9000).
pub const V1: u32 = 1;
/// QUIC version 2 (RFC 9369).
pub const V2: u32 = 0x6b33_43cf;

/// The longest connection ID of versions 1 and 2.
pub const MAX_CID: usize = 20;

/// What a packet is, by its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// A long-header Initial packet.
    Initial,
    /// A long-header 0-RTT packet (a client's early data).
    ZeroRtt,
    /// A long-header Handshake packet.
    Handshake,
    /// A Retry (address validation: the client must send its Initial again with the
    /// token and the new connection ID).
    Retry,
    /// A Version Negotiation packet (version 0).
    VersionNegotiation,
    /// A short-header (1-RTT) packet.
    Short,
}

/// One packet of a datagram.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// What it is.
    pub ty: Type,
    /// Its version (long headers; 0 for a short header, as for Version Negotiation).
    pub version: u32,
    /// Its destination connection ID (empty for a short header: its length is the
    /// connection's).
    pub dcid: &'a [u8],
    /// Its source connection ID (long headers).
    pub scid: &'a [u8],
    /// The packet's bytes, its header included (a short header's: the rest of the
    /// datagram).
    pub bytes: &'a [u8],
    /// Where the (protected) packet number begins in `bytes` (Initial, 0-RTT, Handshake).
    pub pn_offset: usize,
}

/// What was found at the start of (the rest of) a datagram.
#[derive(Debug, Clone, Copy)]
pub enum Parsed<'a> {
    /// A packet, and the bytes after it.
    Packet(Packet<'a>, &'a [u8]),
    /// A long header of a version tlsperf does not read (its number).
    OtherVersion(u32),
    /// Not a QUIC packet (or one cut short).
    Garbage,
}

/// A variable-length integer (RFC 9000 §16) at the start of `b`: its value and length.
pub fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for x in &bytes[1..] {
        v = (v << 8) | u64::from(*x);
    }
    Some((v, len))
}

/// A varint read from `b` at `*at`, `*at` moved past it.
fn take_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let (v, n) = varint(b.get(*at..)?)?;
    *at += n;
    Some(v)
}

/// `n` bytes of `b` at `*at`, `*at` moved past them.
fn take<'a>(b: &'a [u8], at: &mut usize, n: u64) -> Option<&'a [u8]> {
    let n = usize::try_from(n).ok()?;
    let s = b.get(*at..at.checked_add(n)?)?;
    *at += n;
    Some(s)
}

/// The type of a long header's type bits in `version`.
fn long_type(version: u32, bits: u8) -> Option<Type> {
    const V1_TYPES: [Type; 4] = [Type::Initial, Type::ZeroRtt, Type::Handshake, Type::Retry];
    const V2_TYPES: [Type; 4] = [Type::Retry, Type::Initial, Type::ZeroRtt, Type::Handshake];
    match version {
        V1 => Some(V1_TYPES[usize::from(bits & 3)]),
        V2 => Some(V2_TYPES[usize::from(bits & 3)]),
        _ => None,
    }
}

/// The packet at the start of `d` (the rest of a datagram).
pub fn parse(d: &[u8]) -> Parsed<'_> {
    parse_packet(d).unwrap_or(Parsed::Garbage)
}

fn parse_packet(d: &[u8]) -> Option<Parsed<'_>> {
    let first = *d.first()?;
    if first & 0x80 == 0 {
        // A short header: at least a packet number and a sample's worth of bytes after
        // its first byte. Its fixed bit (0x40) is not checked: peers that agreed to
        // grease it (RFC 9287, quinn does) send it clear.
        if d.len() < 1 + 4 + 16 {
            return None;
        }
        return Some(Parsed::Packet(
            Packet {
                ty: Type::Short,
                version: 0,
                dcid: &[],
                scid: &[],
                bytes: d,
                pn_offset: 0,
            },
            &[],
        ));
    }
    let version = u32::from_be_bytes(d.get(1..5)?.try_into().ok()?);
    let mut at = 5;
    let dcid_len = *d.get(at)?;
    at += 1;
    let dcid = take(d, &mut at, u64::from(dcid_len))?;
    let scid_len = *d.get(at)?;
    at += 1;
    let scid = take(d, &mut at, u64::from(scid_len))?;
    if version == 0 {
        // Version Negotiation: the versions the server supports fill the datagram.
        return Some(Parsed::Packet(
            Packet {
                ty: Type::VersionNegotiation,
                version,
                dcid,
                scid,
                bytes: d,
                pn_offset: 0,
            },
            &[],
        ));
    }
    let Some(ty) = long_type(version, first >> 4) else {
        return Some(Parsed::OtherVersion(version));
    };
    // The fixed bit is not checked (greased: RFC 9287).
    if dcid.len() > MAX_CID || scid.len() > MAX_CID {
        return None;
    }
    if ty == Type::Retry {
        // A token and a 16-byte integrity tag fill the datagram.
        if d.len() < at + 16 {
            return None;
        }
        return Some(Parsed::Packet(
            Packet {
                ty,
                version,
                dcid,
                scid,
                bytes: d,
                pn_offset: 0,
            },
            &[],
        ));
    }
    if ty == Type::Initial {
        let token_len = take_varint(d, &mut at)?;
        take(d, &mut at, token_len)?;
    }
    let len = take_varint(d, &mut at)?;
    let pn_offset = at;
    // A packet number (1 to 4 bytes) and a header protection sample after 4 bytes.
    if len < 4 + 16 {
        return None;
    }
    take(d, &mut at, len)?;
    Some(Parsed::Packet(
        Packet {
            ty,
            version,
            dcid,
            scid,
            bytes: &d[..at],
            pn_offset,
        },
        &d[at..],
    ))
}

/// The full packet number of a `bits`-bit truncated one, the largest so far of its
/// packet number space being `largest` (RFC 9000 §A.3).
pub fn decode_pn(largest: Option<u64>, truncated: u64, bits: u32) -> u64 {
    let expected = largest.map_or(0, |l| l.saturating_add(1));
    let win = 1u64 << bits;
    let hwin = win / 2;
    let mask = win - 1;
    let candidate = (expected & !mask) | truncated;
    if candidate.saturating_add(hwin) <= expected && candidate < (1u64 << 62) - win {
        candidate + win
    } else if candidate > expected.saturating_add(hwin) && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// The Initial keys of one connection ID: both directions', as an observer needs them.
pub struct InitialKeys {
    /// `remote`: the client's packets; `local`: the server's.
    keys: Keys,
    /// The destination connection ID they were derived from.
    dcid: Vec<u8>,
}

impl std::fmt::Debug for InitialKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InitialKeys").finish_non_exhaustive()
    }
}

impl InitialKeys {
    /// The Initial keys of `version` derived from the client's destination connection
    /// ID `dcid`; `None` for a version without them here.
    pub fn new(version: u32, dcid: &[u8]) -> Option<InitialKeys> {
        let v = match version {
            V1 => KeyVersion::V1,
            V2 => KeyVersion::V2,
            _ => return None,
        };
        let suite = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()?
            .quic_suite()?;
        Some(InitialKeys {
            // As the server sees them: `remote` opens the client's packets.
            keys: suite.keys(dcid, Side::Server, v),
            dcid: dcid.to_vec(),
        })
    }

    /// The connection ID they were derived from.
    pub fn dcid(&self) -> &[u8] {
        &self.dcid
    }

    /// Opens Initial packet `p`, sent by the client when `from_client`, into `buf`: its
    /// packet number (the largest of its space so far being `largest`) and its payload;
    /// `None` when it does not open (other keys, damaged, cut short).
    pub fn open<'b>(
        &self,
        from_client: bool,
        p: &Packet<'_>,
        largest: Option<u64>,
        buf: &'b mut Vec<u8>,
    ) -> Option<(u64, &'b [u8])> {
        let dir = if from_client {
            &self.keys.remote
        } else {
            &self.keys.local
        };
        let pn_at = p.pn_offset;
        let sample = p
            .bytes
            .get(pn_at + 4..pn_at + 4 + dir.header.sample_len())?;
        buf.clear();
        buf.extend_from_slice(p.bytes);
        let (first, rest) = buf.split_first_mut()?;
        let pn = rest.get_mut(pn_at - 1..pn_at + 3)?;
        dir.header.decrypt_in_place(sample, first, pn).ok()?;
        let pn_len = usize::from(buf[0] & 3) + 1;
        let truncated = buf[pn_at..pn_at + pn_len]
            .iter()
            .fold(0u64, |a, b| (a << 8) | u64::from(*b));
        let number = decode_pn(largest, truncated, 8 * pn_len as u32);
        let (header, payload) = buf.split_at_mut(pn_at + pn_len);
        let plain = dir.packet.decrypt_in_place(number, header, payload).ok()?;
        Some((number, plain))
    }
}

/// A frame of an Initial packet that the analysis reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// CRYPTO: TLS handshake bytes at `offset` of the Initial space's stream.
    Crypto {
        /// Offset in the stream.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// CONNECTION_CLOSE: its error code; a TLS alert when `code` is 0x100 + alert.
    Close {
        /// The error code.
        code: u64,
    },
}

/// An Initial payload with a frame an Initial may not carry, or one cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// Calls `f` for each CRYPTO and CONNECTION_CLOSE frame of an opened Initial payload, in
/// order; PADDING, PING and ACK are skipped. [`Malformed`] at a frame an Initial may not
/// carry, or one cut short (the frames before it were given).
pub fn initial_frames<'a>(
    payload: &'a [u8],
    mut f: impl FnMut(Frame<'a>),
) -> Result<(), Malformed> {
    let mut at = 0;
    let p = payload;
    while at < p.len() {
        let t = take_varint(p, &mut at).ok_or(Malformed)?;
        match t {
            // PADDING, PING.
            0x00 | 0x01 => {}
            // ACK (0x03: with ECN counts).
            0x02 | 0x03 => {
                let _largest = take_varint(p, &mut at).ok_or(Malformed)?;
                let _delay = take_varint(p, &mut at).ok_or(Malformed)?;
                let ranges = take_varint(p, &mut at).ok_or(Malformed)?;
                let _first = take_varint(p, &mut at).ok_or(Malformed)?;
                // Each range is two varints of at least a byte: no more than there are
                // bytes left.
                if ranges > p.len() as u64 {
                    return Err(Malformed);
                }
                for _ in 0..ranges * 2 {
                    take_varint(p, &mut at).ok_or(Malformed)?;
                }
                if t == 0x03 {
                    for _ in 0..3 {
                        take_varint(p, &mut at).ok_or(Malformed)?;
                    }
                }
            }
            0x06 => {
                let offset = take_varint(p, &mut at).ok_or(Malformed)?;
                let len = take_varint(p, &mut at).ok_or(Malformed)?;
                let data = take(p, &mut at, len).ok_or(Malformed)?;
                f(Frame::Crypto { offset, data });
            }
            0x1c | 0x1d => {
                let code = take_varint(p, &mut at).ok_or(Malformed)?;
                if t == 0x1c {
                    take_varint(p, &mut at).ok_or(Malformed)?;
                }
                let reason = take_varint(p, &mut at).ok_or(Malformed)?;
                take(p, &mut at, reason).ok_or(Malformed)?;
                f(Frame::Close { code });
            }
            _ => return Err(Malformed),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9001 Appendix A: the client's Initial keys of connection ID 0x8394c8f03e515708
    /// open the client Initial of A.2 (its first bytes, re-protected here), and the
    /// sample server Initial of A.3.
    #[test]
    fn rfc9001_sample_packets_open() {
        let dcid = [0x83, 0x94, 0xc8, 0xf0, 0x3e, 0x51, 0x57, 0x08];
        let keys = InitialKeys::new(V1, &dcid).unwrap();
        // A.3: the server's Initial (ServerHello and an ACK).
        let server = hex(concat!(
            "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a",
            "5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3",
            "dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84",
            "022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4",
            "2158407dd074ee"
        ));
        let Parsed::Packet(p, rest) = parse(&server) else {
            panic!("not parsed")
        };
        assert!(rest.is_empty());
        assert_eq!(p.ty, Type::Initial);
        assert_eq!(p.scid, hex("f067a5502a4262b5"));
        let mut buf = Vec::new();
        let (pn, plain) = keys.open(false, &p, None, &mut buf).unwrap();
        assert_eq!(pn, 1);
        let mut crypto = Vec::new();
        initial_frames(plain, |f| {
            if let Frame::Crypto { offset, data } = f {
                crypto.push((offset, data.to_vec()));
            }
        })
        .unwrap();
        assert_eq!(crypto.len(), 1);
        assert_eq!(crypto[0].0, 0);
        // A ServerHello.
        assert_eq!(crypto[0].1[0], 2);
        // The client's keys do not open the server's packet.
        assert!(keys.open(true, &p, None, &mut buf).is_none());
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Version 2 (RFC 9369): its own Initial type bits, salt and labels.
    #[test]
    fn a_version_2_initial_opens_with_version_2_keys_only() {
        let dcid = [7; 8];
        let packet = seal::initial_of(
            V2,
            true,
            &dcid,
            &dcid,
            &[1; 8],
            3,
            &seal::crypto(0, b"hello"),
        );
        let Parsed::Packet(p, _) = parse(&packet) else {
            panic!("not parsed")
        };
        assert_eq!((p.ty, p.version), (Type::Initial, V2));
        let mut buf = Vec::new();
        let (pn, plain) = InitialKeys::new(V2, &dcid)
            .unwrap()
            .open(true, &p, None, &mut buf)
            .unwrap();
        assert_eq!(pn, 3);
        let mut got = Vec::new();
        initial_frames(plain, |f| got.push(format!("{f:?}"))).unwrap();
        assert_eq!(
            got,
            vec![format!(
                "{:?}",
                Frame::Crypto {
                    offset: 0,
                    data: b"hello"
                }
            )]
        );
        // Version 1's keys do not open it; a version 1 packet's type bits read as v1's.
        assert!(
            InitialKeys::new(V1, &dcid)
                .unwrap()
                .open(true, &p, None, &mut buf)
                .is_none()
        );
        let v1 = seal::initial(true, &dcid, &dcid, &[1; 8], 3, &[1]);
        let Parsed::Packet(p1, _) = parse(&v1) else {
            panic!("not parsed")
        };
        assert_eq!((p1.ty, p1.version), (Type::Initial, V1));
        // Version Negotiation, and a version neither 1 nor 2.
        let vn = seal::version_negotiation(&[1; 8], &dcid);
        let Parsed::Packet(vn, _) = parse(&vn) else {
            panic!("not parsed")
        };
        assert_eq!(vn.ty, Type::VersionNegotiation);
        let mut other = v1.clone();
        other[1..5].copy_from_slice(&0xff00_001du32.to_be_bytes());
        assert!(matches!(parse(&other), Parsed::OtherVersion(0xff00_001d)));
    }

    #[test]
    fn packet_numbers_are_decoded_as_rfc9000_a3_says() {
        assert_eq!(decode_pn(Some(0xa82f30ea), 0x9b32, 16), 0xa82f9b32);
        assert_eq!(decode_pn(None, 0, 8), 0);
        assert_eq!(decode_pn(Some(255), 1, 8), 257);
    }

    #[test]
    fn garbage_and_cut_packets_are_never_a_panic() {
        let mut rng = crate::observe::xorshift::XorShift::new(0x2545_f491_4f6c_dd1d);
        let keys = InitialKeys::new(V1, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut buf = Vec::new();
        for len in 0..1400 {
            let mut bytes: Vec<u8> = rng.bytes(len);
            // Half of them with an Initial's first bytes, to get past the first checks.
            if len > 8 && len % 2 == 0 {
                bytes[0] = 0xc0 | (bytes[0] & 0x0f);
                bytes[1..5].copy_from_slice(&V1.to_be_bytes());
                bytes[5] %= 21;
            }
            let mut rest: &[u8] = &bytes;
            while let Parsed::Packet(p, r) = parse(rest) {
                if p.ty == Type::Initial {
                    let _ = keys.open(true, &p, None, &mut buf);
                    let _ = keys.open(false, &p, Some(u64::MAX >> 2), &mut buf);
                }
                rest = r;
            }
            let _ = initial_frames(&bytes, |_| {});
            let _ = varint(&bytes);
        }
    }
}

/// QUIC packets made for tests: Initial packets protected as a client or server would,
/// and the other types with their headers only (the analysis does not open them).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod seal {
    use super::*;

    /// `v` as a 4-byte varint.
    fn varint4(v: u64) -> [u8; 4] {
        (0x8000_0000 | v as u32).to_be_bytes()
    }

    /// A CRYPTO frame of `data` at `offset`.
    pub fn crypto(offset: u64, data: &[u8]) -> Vec<u8> {
        let mut f = vec![0x06];
        f.extend(varint4(offset));
        f.extend(varint4(data.len() as u64));
        f.extend(data);
        f
    }

    /// A version 1 Initial packet from the client (padded to 1200 bytes) or the server,
    /// its header's connection IDs `dcid` and `scid`, number `pn`, payload `frames`,
    /// protected with the Initial keys of `key_dcid`.
    pub fn initial(
        from_client: bool,
        key_dcid: &[u8],
        dcid: &[u8],
        scid: &[u8],
        pn: u32,
        frames: &[u8],
    ) -> Vec<u8> {
        initial_of(V1, from_client, key_dcid, dcid, scid, pn, frames)
    }

    /// [`initial`] of QUIC `version` (1 or 2).
    pub fn initial_of(
        version: u32,
        from_client: bool,
        key_dcid: &[u8],
        dcid: &[u8],
        scid: &[u8],
        pn: u32,
        frames: &[u8],
    ) -> Vec<u8> {
        let (key_version, bits) = if version == V2 {
            (KeyVersion::V2, 1u8)
        } else {
            (KeyVersion::V1, 0u8)
        };
        let side = if from_client {
            Side::Client
        } else {
            Side::Server
        };
        let keys = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()
            .unwrap()
            .quic_suite()
            .unwrap()
            .keys(key_dcid, side, key_version);
        let mut h = vec![0xc3 | (bits << 4)];
        h.extend(version.to_be_bytes());
        h.push(dcid.len() as u8);
        h.extend(dcid);
        h.push(scid.len() as u8);
        h.extend(scid);
        h.push(0);
        let mut payload = frames.to_vec();
        if from_client {
            let room = 1200usize.saturating_sub(h.len() + 4 + 4 + 16);
            if payload.len() < room {
                payload.resize(room, 0);
            }
        }
        h.extend(varint4((4 + payload.len() + 16) as u64));
        let pn_at = h.len();
        h.extend(pn.to_be_bytes());
        let tag = keys
            .local
            .packet
            .encrypt_in_place(u64::from(pn), &h, &mut payload)
            .unwrap();
        let mut out = h;
        out.extend(payload);
        out.extend(tag.as_ref());
        let sample = out[pn_at + 4..pn_at + 20].to_vec();
        let (first, rest) = out.split_first_mut().unwrap();
        keys.local
            .header
            .encrypt_in_place(&sample, first, &mut rest[pn_at - 1..pn_at + 3])
            .unwrap();
        out
    }

    /// A version 1 long-header packet of type bits `bits` (1: 0-RTT, 2: Handshake) with
    /// 40 bytes of (unreadable) payload.
    pub fn opaque(bits: u8, dcid: &[u8], scid: &[u8]) -> Vec<u8> {
        let mut p = vec![0xc0 | (bits << 4) | 3];
        p.extend(V1.to_be_bytes());
        p.push(dcid.len() as u8);
        p.extend(dcid);
        p.push(scid.len() as u8);
        p.extend(scid);
        p.extend(varint4(40));
        p.extend([0x5a; 40]);
        p
    }

    /// A short-header packet to `dcid`.
    pub fn short(dcid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x43];
        p.extend(dcid);
        p.extend([0xa5; 40]);
        p
    }

    /// A Version Negotiation packet to `dcid` (offering version 1).
    pub fn version_negotiation(dcid: &[u8], scid: &[u8]) -> Vec<u8> {
        let mut p = vec![0x80];
        p.extend(0u32.to_be_bytes());
        p.push(dcid.len() as u8);
        p.extend(dcid);
        p.push(scid.len() as u8);
        p.extend(scid);
        p.extend(V1.to_be_bytes());
        p
    }

    /// A version 1 Retry to `dcid` giving the new connection ID `scid`.
    pub fn retry(dcid: &[u8], scid: &[u8]) -> Vec<u8> {
        let mut p = vec![0xf0];
        p.extend(V1.to_be_bytes());
        p.push(dcid.len() as u8);
        p.extend(dcid);
        p.push(scid.len() as u8);
        p.extend(scid);
        p.extend([0x77; 24]);
        p.extend([0x11; 16]);
        p
    }
}
