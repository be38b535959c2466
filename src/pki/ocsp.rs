//! A signed OCSP response for a test PKI's server leaf, for `tlsperf serve --ocsp` to
//! staple: what a CA's responder would return for it (RFC 6960).
//!
//! The response is `successful`, a BasicOCSPResponse with one SingleResponse `good` for
//! the server leaf (CertID with SHA-1 hashes of the issuer's name and key, as responders
//! usually send), thisUpdate now, nextUpdate now + validity, the responder identified by
//! name as the issuing CA (the intermediate), signed by that CA with ECDSA P-256 /
//! SHA-256, or RSA PKCS#1 v1.5 / SHA-256 when the CA's key is RSA. Built with RustCrypto's
//! x509-ocsp.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use p256::ecdsa::{DerSignature, SigningKey};
use p256::pkcs8::DecodePrivateKey;
use x509_cert::Certificate;
use x509_cert::der::{DateTime, Decode, Encode};
use x509_ocsp::builder::OcspResponseBuilder;
use x509_ocsp::{CertId, CertStatus, OcspGeneralizedTime, SingleResponse};

use super::{KeyType, PkiError, TestPki};

/// The usual file name of the response, beside the PKI's files.
pub const OCSP_FILE: &str = "ocsp.der";

/// The longest validity accepted (one year): an OCSP response lives days, not years.
pub const MAX_VALID: Duration = Duration::from_secs(366 * 24 * 3600);

/// A DER OCSPResponse saying the server leaf of `pki` is good from now for `valid`,
/// signed by its issuer (the intermediate, whose key must be ECDSA P-256 or RSA).
pub fn ocsp_response(pki: &TestPki, valid: Duration) -> Result<Vec<u8>, PkiError> {
    let ca_key = pki.intermediate.summary.key;
    if !can_sign(ca_key) {
        return Err(PkiError::BadParam {
            name: "--ca-key-type",
            reason: format!(
                "OCSP responses are signed with ECDSA P-256 or RSA only; the issuing CA's key is {}",
                ca_key.name()
            ),
        });
    }
    if valid.is_zero() || valid > MAX_VALID {
        return Err(PkiError::BadParam {
            name: "OCSP validity",
            reason: format!("{valid:?} is out of range (1 s to 366 days)"),
        });
    }
    let issuer = Certificate::from_der(&pki.intermediate.der)
        .map_err(|e| err("parsing the intermediate certificate", e))?;
    let leaf = Certificate::from_der(&pki.server.der)
        .map_err(|e| err("parsing the server certificate", e))?;
    let ca_der = pki.intermediate.key.serialize_der();

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| err("reading the clock", e))?;
    // GeneralizedTime in OCSP carries whole seconds.
    let now = Duration::from_secs(now.as_secs());
    let at = |t: Duration| {
        DateTime::from_unix_duration(t)
            .map(OcspGeneralizedTime::from)
            .map_err(|e| err("encoding a time", e))
    };
    let this_update = at(now)?;
    let next_update = at(now + Duration::from_secs(valid.as_secs().max(1)))?;

    let cert_id = CertId::from_cert::<sha1::Sha1>(&issuer, &leaf)
        .map_err(|e| err("building the CertID", e))?;
    let single =
        SingleResponse::new(cert_id, CertStatus::good(), this_update).with_next_update(next_update);
    let builder = OcspResponseBuilder::new(issuer.tbs_certificate.subject.clone())
        .with_single_response(single);
    let response = if ca_key == KeyType::EcdsaP256 {
        let mut signer = SigningKey::from_pkcs8_der(&ca_der)
            .map_err(|e| err("loading the intermediate's key", e))?;
        builder.sign::<_, DerSignature>(&mut signer, None, this_update)
    } else {
        let key = rsa::RsaPrivateKey::from_pkcs8_der(&ca_der)
            .map_err(|e| err("loading the intermediate's key", e))?;
        let mut signer = rsa::pkcs1v15::SigningKey::<rsa::sha2::Sha256>::new(key);
        builder.sign::<_, rsa::pkcs1v15::Signature>(&mut signer, None, this_update)
    }
    .map_err(|e| err("signing the response", e))?;
    response
        .to_der()
        .map_err(|e| err("encoding the response", e))
}

/// Whether [`ocsp_response`] can sign with an issuing CA's key of this type.
pub fn can_sign(key: KeyType) -> bool {
    matches!(
        key,
        KeyType::EcdsaP256 | KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096
    )
}

/// Why an OCSP response may not be stapled for a certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct StapleError {
    /// In words: what the response is, or what in it does not fit.
    pub reason: String,
}

fn staple_err(reason: impl Into<String>) -> StapleError {
    StapleError {
        reason: reason.into(),
    }
}

/// How far a response's thisUpdate may lie in the future (clock skew).
const CLOCK_SKEW: Duration = Duration::from_secs(300);

/// Checks that `der` is an OCSP response a client can use for the leaf of `chain` (leaf
/// first; its issuer second, when present) at `now`: a `successful` basic response with a
/// SingleResponse for the leaf's serial number and issuer (the CertID's issuer name hash,
/// and key hash when the issuer certificate is in the chain or the leaf is self-issued,
/// in SHA-1 or SHA-256), status `good`, thisUpdate not after now (5 minutes of clock skew
/// allowed) and nextUpdate, when given, after now. The signature is left to clients.
pub fn check_staple(
    der: &[u8],
    chain: &[rustls_pki_types::CertificateDer<'_>],
    now: SystemTime,
) -> Result<(), StapleError> {
    use x509_cert::der::Encode;
    use x509_ocsp::{BasicOcspResponse, OcspResponse, OcspResponseStatus};

    let leaf_der = chain
        .first()
        .ok_or_else(|| staple_err("there is no certificate to staple it for"))?;
    let leaf = Certificate::from_der(leaf_der)
        .map_err(|e| staple_err(format!("the certificate cannot be parsed: {e}")))?;
    let response = OcspResponse::from_der(der).map_err(|e| {
        let what = if der.starts_with(b"-----BEGIN") {
            "it is PEM text, not a DER OCSP response".to_string()
        } else {
            format!("not a DER OCSP response ({e})")
        };
        staple_err(what)
    })?;
    if response.response_status != OcspResponseStatus::Successful {
        return Err(staple_err(format!(
            "the response status is {:?}, not successful",
            response.response_status
        )));
    }
    let bytes = response
        .response_bytes
        .ok_or_else(|| staple_err("a successful response without response bytes"))?;
    let basic = BasicOcspResponse::from_der(bytes.response.as_bytes())
        .map_err(|e| staple_err(format!("not a basic OCSP response ({e})")))?;

    let issuer_name = leaf
        .tbs_certificate
        .issuer
        .to_der()
        .map_err(|e| staple_err(format!("encoding the issuer name: {e}")))?;
    let self_issued = leaf.tbs_certificate.issuer == leaf.tbs_certificate.subject;
    let issuer_key: Option<Vec<u8>> = match chain.get(1) {
        Some(i) => {
            let i = Certificate::from_der(i)
                .map_err(|e| staple_err(format!("the issuer certificate cannot be parsed: {e}")))?;
            Some(
                i.tbs_certificate
                    .subject_public_key_info
                    .subject_public_key
                    .raw_bytes()
                    .to_vec(),
            )
        }
        None if self_issued => Some(
            leaf.tbs_certificate
                .subject_public_key_info
                .subject_public_key
                .raw_bytes()
                .to_vec(),
        ),
        None => None,
    };
    let digest = |oid: &x509_cert::der::asn1::ObjectIdentifier, data: &[u8]| -> Option<Vec<u8>> {
        let alg = match oid.to_string().as_str() {
            "1.3.14.3.2.26" => &aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY,
            "2.16.840.1.101.3.4.2.1" => &aws_lc_rs::digest::SHA256,
            _ => return None,
        };
        Some(aws_lc_rs::digest::digest(alg, data).as_ref().to_vec())
    };

    let serial = &leaf.tbs_certificate.serial_number;
    let mut for_serial = basic
        .tbs_response_data
        .responses
        .iter()
        .filter(|r| &r.cert_id.serial_number == serial)
        .peekable();
    if for_serial.peek().is_none() {
        return Err(staple_err(format!(
            "it is not for this certificate (serial {serial}); it covers serial {}",
            basic
                .tbs_response_data
                .responses
                .iter()
                .map(|r| r.cert_id.serial_number.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let single = for_serial
        .find(|r| {
            let id = &r.cert_id;
            let oid = &id.hash_algorithm.oid;
            let name_ok =
                digest(oid, &issuer_name).as_deref() == Some(id.issuer_name_hash.as_bytes());
            let key_ok = match &issuer_key {
                Some(k) => digest(oid, k).as_deref() == Some(id.issuer_key_hash.as_bytes()),
                None => true,
            };
            name_ok && key_ok
        })
        .ok_or_else(|| {
            staple_err(format!(
                "it is for serial {serial} of another issuer (the issuer name or key hash differs)"
            ))
        })?;
    match &single.cert_status {
        CertStatus::Good(_) => {}
        CertStatus::Revoked(_) => return Err(staple_err("it says the certificate is revoked")),
        CertStatus::Unknown(_) => {
            return Err(staple_err("it says the certificate's status is unknown"));
        }
    }
    let now = now
        .duration_since(UNIX_EPOCH)
        .map_err(|e| staple_err(format!("reading the clock: {e}")))?;
    let this_update = single.this_update.0.to_unix_duration();
    if this_update > now + CLOCK_SKEW {
        return Err(staple_err(format!(
            "it is not valid yet (thisUpdate {})",
            single.this_update.0.to_date_time()
        )));
    }
    if let Some(next) = &single.next_update
        && next.0.to_unix_duration() <= now
    {
        return Err(staple_err(format!(
            "it has expired (nextUpdate {})",
            next.0.to_date_time()
        )));
    }
    Ok(())
}

fn err(what: &str, e: impl std::fmt::Display) -> PkiError {
    PkiError::Ocsp {
        reason: format!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::PkiOptions;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
    use x509_cert::der::asn1::ObjectIdentifier;
    use x509_ocsp::{BasicOcspResponse, OcspResponse, OcspResponseStatus, ResponderId};

    const ID_PKIX_OCSP_BASIC: &str = "1.3.6.1.5.5.7.48.1.1";
    const ECDSA_WITH_SHA256: &str = "1.2.840.10045.4.3.2";
    const SHA1: &str = "1.3.14.3.2.26";

    fn sha1(data: &[u8]) -> Vec<u8> {
        aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, data)
            .as_ref()
            .to_vec()
    }

    fn basic(der: &[u8]) -> BasicOcspResponse {
        let r = OcspResponse::from_der(der).unwrap();
        assert_eq!(r.response_status, OcspResponseStatus::Successful);
        let bytes = r.response_bytes.expect("response bytes");
        assert_eq!(
            bytes.response_type,
            ObjectIdentifier::new_unwrap(ID_PKIX_OCSP_BASIC)
        );
        BasicOcspResponse::from_der(bytes.response.as_bytes()).unwrap()
    }

    /// The public key of a certificate, as the raw bytes of its SPKI bit string.
    fn public_key(der: &[u8]) -> Vec<u8> {
        let c = Certificate::from_der(der).unwrap();
        c.tbs_certificate
            .subject_public_key_info
            .subject_public_key
            .raw_bytes()
            .to_vec()
    }

    fn verifies(b: &BasicOcspResponse, key: &[u8]) -> bool {
        let tbs = b.tbs_response_data.to_der().unwrap();
        let sig = b.signature.raw_bytes();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, key)
            .verify(&tbs, sig)
            .is_ok()
    }

    #[test]
    fn response_is_good_for_the_leaf_and_signed_by_the_intermediate() {
        let pki = TestPki::generate(&PkiOptions::default()).unwrap();
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let der = ocsp_response(&pki, Duration::from_secs(7 * 24 * 3600)).unwrap();
        let b = basic(&der);
        let data = &b.tbs_response_data;

        // One SingleResponse, good, for the leaf's serial.
        assert_eq!(data.responses.len(), 1);
        let single = &data.responses[0];
        assert!(matches!(single.cert_status, CertStatus::Good(_)));
        let leaf = Certificate::from_der(&pki.server.der).unwrap();
        assert_eq!(
            single.cert_id.serial_number,
            leaf.tbs_certificate.serial_number
        );
        // CertID: SHA-1 of the issuer's name and key, computed here independently.
        let issuer = Certificate::from_der(&pki.intermediate.der).unwrap();
        assert_eq!(
            single.cert_id.hash_algorithm.oid,
            ObjectIdentifier::new_unwrap(SHA1)
        );
        assert_eq!(
            single.cert_id.issuer_name_hash.as_bytes(),
            sha1(&issuer.tbs_certificate.subject.to_der().unwrap())
        );
        assert_eq!(
            single.cert_id.issuer_key_hash.as_bytes(),
            sha1(&public_key(&pki.intermediate.der))
        );
        // Validity: now → now + 7 days.
        let this = single.this_update.0.to_unix_duration().as_secs();
        let next = single.next_update.unwrap().0.to_unix_duration().as_secs();
        assert!(this >= before && this <= before + 5, "{this} vs {before}");
        assert_eq!(next - this, 7 * 24 * 3600);
        // Responder: the intermediate, by name.
        match &data.responder_id {
            ResponderId::ByName(n) => assert_eq!(n, &issuer.tbs_certificate.subject),
            other => panic!("responder {other:?}"),
        }

        // Signed by the intermediate with ECDSA P-256 / SHA-256; not by the root.
        assert_eq!(
            b.signature_algorithm.oid,
            ObjectIdentifier::new_unwrap(ECDSA_WITH_SHA256)
        );
        assert!(verifies(&b, &public_key(&pki.intermediate.der)));
        assert!(!verifies(&b, &public_key(&pki.root.der)));
        // A changed byte of the signed data breaks it.
        let mut tampered = b.clone();
        tampered.tbs_response_data.responses[0].cert_status = CertStatus::unknown();
        assert!(!verifies(&tampered, &public_key(&pki.intermediate.der)));
    }

    #[test]
    fn staple_check_accepts_its_own_and_refuses_others() {
        let pki = TestPki::generate(&PkiOptions::default()).unwrap();
        let other = TestPki::generate(&PkiOptions::default()).unwrap();
        let chain = pki.server_chain();
        let now = SystemTime::now();
        let good = ocsp_response(&pki, Duration::from_secs(3600)).unwrap();
        check_staple(&good, &chain, now).unwrap();
        // Another PKI's response: another serial (or issuer).
        let foreign = ocsp_response(&other, Duration::from_secs(3600)).unwrap();
        let e = check_staple(&foreign, &chain, now).unwrap_err();
        assert!(e.reason.contains("not for this certificate"), "{e}");
        // PEM certificate bytes.
        let e = check_staple(pki.server.pem.as_bytes(), &chain, now).unwrap_err();
        assert!(e.reason.contains("PEM"), "{e}");
        // A non-successful status.
        let e = check_staple(&[0x30, 0x03, 0x0a, 0x01, 0x06], &chain, now).unwrap_err();
        assert!(e.reason.contains("not successful"), "{e}");
        // Expired, and not yet valid.
        let later = now + Duration::from_secs(7200);
        assert!(
            check_staple(&good, &chain, later)
                .unwrap_err()
                .reason
                .contains("expired")
        );
        let earlier = now - Duration::from_secs(3600);
        assert!(
            check_staple(&good, &chain, earlier)
                .unwrap_err()
                .reason
                .contains("not valid yet")
        );
    }

    #[test]
    fn an_rsa_issuer_signs_with_pkcs1_sha256() {
        let pki = TestPki::generate(&PkiOptions {
            ca_key: KeyType::Rsa2048,
            leaf_key: KeyType::Rsa2048,
            ..PkiOptions::default()
        })
        .unwrap();
        let der = ocsp_response(&pki, Duration::from_secs(3600)).unwrap();
        let b = basic(&der);
        assert_eq!(
            b.signature_algorithm.oid,
            ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11") // sha256WithRSAEncryption
        );
        let tbs = b.tbs_response_data.to_der().unwrap();
        UnparsedPublicKey::new(
            &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
            public_key(&pki.intermediate.der),
        )
        .verify(&tbs, b.signature.raw_bytes())
        .unwrap();
    }

    #[test]
    fn refuses_other_ca_keys_and_bad_validity() {
        let pki = TestPki::generate(&PkiOptions {
            ca_key: KeyType::Ed25519,
            ..PkiOptions::default()
        })
        .unwrap();
        let e = ocsp_response(&pki, Duration::from_secs(3600)).unwrap_err();
        assert!(e.to_string().contains("ECDSA P-256"), "{e}");
        let pki = TestPki::generate(&PkiOptions::default()).unwrap();
        assert!(ocsp_response(&pki, Duration::ZERO).is_err());
        assert!(ocsp_response(&pki, MAX_VALID + Duration::from_secs(1)).is_err());
    }
}
