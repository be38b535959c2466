//! Just enough DER, shared by the trust and verify modules: the length of a SEQUENCE, and a
//! certificate's issuer and subject names (as webpki stores them: the Name's content
//! octets) and authority/subject key identifiers. A few
//! hundred nanoseconds per certificate, no allocation; malformed names give `None` and
//! the certificate is left to webpki to judge. Key identifiers are hints only: one that
//! cannot be read is `None`, and the names are still returned (webpki ignores both
//! non-critical extensions, so a certificate with a malformed one may still be valid).

/// Names and key identifiers of one certificate, borrowed from its DER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertNames<'a> {
    /// Issuer Name, content octets (without the outer SEQUENCE header).
    pub issuer: &'a [u8],
    /// Subject Name, content octets.
    pub subject: &'a [u8],
    /// Authority key identifier (keyIdentifier field), if present.
    pub authority_key_id: Option<&'a [u8]>,
    /// Subject key identifier, if present.
    pub subject_key_id: Option<&'a [u8]>,
}

/// Splits one TLV off `input`: (tag, value, rest).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *input.first()?;
    let first = *input.get(1)?;
    let (len, header) = match first {
        0..=0x7f => (usize::from(first), 2),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let bytes = input.get(2..2 + n)?;
            (
                bytes
                    .iter()
                    .fold(0usize, |acc, &b| (acc << 8) | usize::from(b)),
                2 + n,
            )
        }
        _ => return None,
    };
    let end = header.checked_add(len)?;
    let value = input.get(header..end)?;
    Some((tag, value, &input[end..]))
}

fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    match tlv(input)? {
        (t, v, rest) if t == tag => Some((v, rest)),
        _ => None,
    }
}

const SEQUENCE: u8 = 0x30;
const OID_AKI: &[u8] = &[0x55, 0x1d, 0x23];
const OID_SKI: &[u8] = &[0x55, 0x1d, 0x0e];

/// Total length (header + content) of the DER SEQUENCE at the start of `der`, if `der`
/// holds it completely.
pub fn sequence_len(der: &[u8]) -> Option<usize> {
    match tlv(der)? {
        (SEQUENCE, _, rest) => Some(der.len() - rest.len()),
        _ => None,
    }
}

/// Reads the names and key identifiers of a certificate.
pub fn cert_names(der: &[u8]) -> Option<CertNames<'_>> {
    let (cert, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(cert, SEQUENCE)?;
    let mut p = tbs;
    if p.first() == Some(&0xa0) {
        p = tlv(p)?.2; // version
    }
    p = expect(p, 0x02)?.1; // serial
    p = expect(p, SEQUENCE)?.1; // signature algorithm
    let (issuer, rest) = expect(p, SEQUENCE)?;
    p = expect(rest, SEQUENCE)?.1; // validity
    let (subject, rest) = expect(p, SEQUENCE)?;
    let p = expect(rest, SEQUENCE)?.1; // subject public key info
    let (authority_key_id, subject_key_id) = key_ids(p);
    Some(CertNames {
        issuer,
        subject,
        authority_key_id,
        subject_key_id,
    })
}

/// The authority and subject key identifiers among the fields after the subject public
/// key info. Each is read on its own: a malformed extension block, or an identifier that
/// does not have the expected form (webpki ignores both non-critical extensions), leaves
/// that identifier `None` and never hides the names.
fn key_ids(mut p: &[u8]) -> (Option<&[u8]>, Option<&[u8]>) {
    let mut aki = None;
    let mut ski = None;
    while let Some((tag, value, rest)) = tlv(p) {
        p = rest;
        if tag != 0xa3 {
            continue;
        }
        let Some((mut exts, _)) = expect(value, SEQUENCE) else {
            break;
        };
        while let Some((ext, rest)) = expect(exts, SEQUENCE) {
            exts = rest;
            let Some((oid, mut e)) = expect(ext, 0x06) else {
                continue;
            };
            if e.first() == Some(&0x01) {
                match tlv(e) {
                    Some((_, _, rest)) => e = rest, // critical
                    None => continue,
                }
            }
            let Some((octets, _)) = expect(e, 0x04) else {
                continue;
            };
            if oid == OID_AKI {
                if let Some((seq, _)) = expect(octets, SEQUENCE)
                    && let Some((0x80, key_id, _)) = tlv(seq)
                {
                    aki = Some(key_id);
                }
            } else if oid == OID_SKI
                && let Some((key_id, _)) = expect(octets, 0x04)
            {
                ski = Some(key_id);
            }
        }
    }
    (aki, ski)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{PkiOptions, TestPki};
    use x509_parser::prelude::*;

    #[test]
    fn agrees_with_x509_parser() {
        let pki = TestPki::generate(&PkiOptions::default()).unwrap();
        for der in [
            &pki.root.der,
            &pki.intermediate.der,
            &pki.server.der,
            &pki.client.der,
        ] {
            let n = cert_names(der).unwrap();
            let (_, x) = X509Certificate::from_der(der).unwrap();
            let strip = |raw: &[u8]| expect(raw, SEQUENCE).unwrap().0.to_vec();
            assert_eq!(n.issuer, strip(x.issuer().as_raw()).as_slice());
            assert_eq!(n.subject, strip(x.subject().as_raw()).as_slice());
            let ski = x
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    ParsedExtension::SubjectKeyIdentifier(k) => Some(k.0.to_vec()),
                    _ => None,
                });
            assert_eq!(n.subject_key_id.map(<[u8]>::to_vec), ski);
            let aki = x
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    ParsedExtension::AuthorityKeyIdentifier(a) => {
                        a.key_identifier.as_ref().map(|k| k.0.to_vec())
                    }
                    _ => None,
                });
            assert_eq!(n.authority_key_id.map(<[u8]>::to_vec), aki);
        }
        // The intermediate's AKI is the root's SKI.
        let root = cert_names(&pki.root.der).unwrap();
        let int = cert_names(&pki.intermediate.der).unwrap();
        assert_eq!(int.authority_key_id, root.subject_key_id);
        assert_eq!(int.issuer, root.subject);
    }

    #[test]
    fn malformed_key_identifiers_keep_the_names() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["a.example".into()]).unwrap();
        p.custom_extensions = vec![
            rcgen::CustomExtension::from_oid_content(&[2, 5, 29, 14], vec![0x02, 0x01, 0x05]),
            rcgen::CustomExtension::from_oid_content(&[2, 5, 29, 35], vec![0x04, 0x01, 0x07]),
        ];
        let cert = p.self_signed(&key).unwrap();
        let n = cert_names(cert.der()).expect("names despite malformed key identifiers");
        assert_eq!(n.issuer, n.subject);
        assert!(!n.subject.is_empty());
        assert_eq!(n.subject_key_id, None);
        assert_eq!(n.authority_key_id, None);
    }

    #[test]
    fn garbage_is_none() {
        assert!(cert_names(b"").is_none());
        assert!(cert_names(&[0x30, 0x03, 0x30, 0x01]).is_none());
        assert!(cert_names(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_none());
        assert!(cert_names(&[0x02, 0x00]).is_none());
    }
}
