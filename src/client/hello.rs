//! What our own ClientHello offered, read from the bytes the handshake driver writes:
//! whether it carried a TLS 1.2 session ticket, a TLS 1.3 pre-shared key, early data, a
//! session id. rustls says *that* a handshake resumed; these say *how* (by ticket or by
//! session id), which rustls does not expose.

/// What a ClientHello offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offered {
    /// Size of the ClientHello handshake message.
    pub hello_len: usize,
    /// A non-empty legacy session id (TLS 1.2 resumption by id, or TLS 1.3 compatibility).
    pub session_id: bool,
    /// A non-empty TLS 1.2 session ticket (extension 35).
    pub tls12_ticket: bool,
    /// A TLS 1.3 pre-shared key (extension 41): a ticket offered for resumption.
    pub psk: bool,
    /// The early-data extension (42): 0-RTT data sent.
    pub early_data: bool,
}

const EXT_SESSION_TICKET: u16 = 35;
const EXT_PRE_SHARED_KEY: u16 = 41;
const EXT_EARLY_DATA: u16 = 42;

/// Reads the ClientHello at the start of `wire` (TLS records as written to the socket).
/// `None` when the bytes do not start with a complete ClientHello record.
pub fn offered(wire: &[u8]) -> Option<Offered> {
    // Record: type 22 (handshake), version, length.
    let (&typ, rest) = wire.split_first()?;
    if typ != 22 || rest.len() < 4 {
        return None;
    }
    let rec_len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
    let record = rest.get(4..4 + rec_len)?;
    // Handshake: type 1 (client_hello), 24-bit length.
    if record.first() != Some(&1) || record.len() < 4 {
        return None;
    }
    let hs_len =
        (usize::from(record[1]) << 16) | (usize::from(record[2]) << 8) | usize::from(record[3]);
    let body = record.get(4..4 + hs_len)?;
    let mut r = Reader(body);
    r.skip(2 + 32)?; // legacy_version, random
    let sid = r.vec8()?;
    r.vec16()?; // cipher_suites
    r.vec8()?; // compression methods
    let mut out = Offered {
        hello_len: hs_len + 4,
        session_id: !sid.is_empty(),
        ..Offered::default()
    };
    let Some(mut exts) = r.vec16().map(Reader) else {
        return Some(out);
    };
    while !exts.0.is_empty() {
        let typ = exts.u16()?;
        let data = exts.vec16()?;
        match typ {
            EXT_SESSION_TICKET => out.tls12_ticket = !data.is_empty(),
            EXT_PRE_SHARED_KEY => out.psk = true,
            EXT_EARLY_DATA => out.early_data = true,
            _ => {}
        }
    }
    Some(out)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(*self.take(1)?.first()?);
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(sid: &[u8], exts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.push(sid.len() as u8);
        body.extend(sid);
        body.extend([0, 2, 0x13, 0x01, 1, 0]);
        let mut e = Vec::new();
        for (t, d) in exts {
            e.extend(t.to_be_bytes());
            e.extend((d.len() as u16).to_be_bytes());
            e.extend(*d);
        }
        body.extend((e.len() as u16).to_be_bytes());
        body.extend(e);
        let mut hs = vec![1, 0, (body.len() >> 8) as u8, body.len() as u8];
        hs.extend(body);
        let mut rec = vec![22, 3, 1, (hs.len() >> 8) as u8, hs.len() as u8];
        rec.extend(hs);
        rec
    }

    #[test]
    fn reads_what_was_offered() {
        let h = hello(
            &[1; 32],
            &[(0, b"xx"), (35, b"ticket"), (42, b""), (41, b"psk")],
        );
        let o = offered(&h).unwrap();
        assert_eq!(
            o,
            Offered {
                hello_len: h.len() - 5,
                session_id: true,
                tls12_ticket: true,
                psk: true,
                early_data: true,
            }
        );
        let plain = offered(&hello(&[], &[(35, b"")])).unwrap();
        assert!(!plain.session_id && !plain.tls12_ticket && !plain.psk && !plain.early_data);
    }

    #[test]
    fn rejects_what_is_not_a_client_hello() {
        assert_eq!(offered(b""), None);
        assert_eq!(offered(&[23, 3, 3, 0, 1, 0]), None);
        let h = hello(&[], &[]);
        assert_eq!(offered(&h[..h.len() - 1]), None);
    }
}
