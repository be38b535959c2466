//! What is in a bundle: duplicates, cross-signed or reissued twins, validity at a given
//! time, weak keys and signatures, non-CA certificates, key types — from a full X.509
//! parse (x509-parser) of every certificate.

use std::collections::{BTreeMap, HashMap};

use ::time::OffsetDateTime;
use serde::Serialize;
use x509_parser::prelude::*;
use x509_parser::public_key::PublicKey;

use super::load::{FileProblem, Loaded};
use crate::pki::sha256_hex;
use crate::when::format_rfc3339;

/// Something worth knowing about one certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flag {
    /// Present more than once, byte for byte.
    Duplicate,
    /// Same subject and key as another, different certificate (cross-signed or reissued).
    Twin,
    /// Past its notAfter at the analysis time.
    Expired,
    /// Before its notBefore at the analysis time.
    NotYetValid,
    /// RSA key under 2048 bits.
    WeakKey,
    /// Signed with SHA-1.
    Sha1,
    /// Signed with MD5 (or MD2).
    Md5,
    /// Not a CA (no basicConstraints cA=TRUE).
    NotCa,
    /// Issued by someone else (issuer ≠ subject).
    NotSelfSigned,
    /// x509-parser could not parse it (webpki accepted it as an anchor).
    Unparsable,
}

impl Flag {
    /// Short text for listings.
    pub fn label(self) -> &'static str {
        match self {
            Flag::Duplicate => "dup",
            Flag::Twin => "twin",
            Flag::Expired => "expired",
            Flag::NotYetValid => "not-yet-valid",
            Flag::WeakKey => "weak-key",
            Flag::Sha1 => "sha1",
            Flag::Md5 => "md5",
            Flag::NotCa => "not-ca",
            Flag::NotSelfSigned => "not-self-signed",
            Flag::Unparsable => "unparsable",
        }
    }
}

/// One certificate of the analysis.
#[derive(Debug, Clone, Serialize)]
pub struct CertInfo {
    /// Subject common name (or the whole subject when there is none).
    pub subject_cn: String,
    /// SHA-256 of the DER, lowercase hex.
    pub sha256: String,
    /// notAfter, RFC 3339.
    pub not_after: String,
    /// Key type, e.g. `RSA-2048`, `EC P-256`, `Ed25519`.
    pub key: String,
    /// Signature algorithm.
    pub signature: String,
    /// Times found in the source.
    pub occurrences: u32,
    /// Flags.
    pub flags: Vec<Flag>,
}

/// The analysis of a source.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// The source, for humans.
    pub source: String,
    /// The time validity was judged at, RFC 3339.
    pub at: String,
    /// Certificates found, duplicates included.
    pub count: usize,
    /// Distinct certificates.
    pub unique: usize,
    /// Extra copies of certificates already present.
    pub exact_duplicates: usize,
    /// Distinct certificates sharing subject and key with another (cross-signed or reissued).
    pub twins: usize,
    /// Groups of twins.
    pub twin_groups: usize,
    /// Expired at `at`.
    pub expired: usize,
    /// Not yet valid at `at`.
    pub not_yet_valid: usize,
    /// RSA keys under 2048 bits.
    pub weak_keys: usize,
    /// SHA-1 signatures.
    pub sha1_signatures: usize,
    /// MD5 or MD2 signatures.
    pub md5_signatures: usize,
    /// Not CA certificates.
    pub not_ca: usize,
    /// Self-signed (issuer = subject).
    pub self_signed: usize,
    /// Issued by another CA.
    pub not_self_signed: usize,
    /// Key type → count.
    pub key_types: BTreeMap<String, usize>,
    /// Bytes of DER of the distinct certificates.
    pub der_bytes: usize,
    /// Bytes of the files read.
    pub file_bytes: u64,
    /// One row per distinct certificate (with `--list`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificates: Option<Vec<CertInfo>>,
    /// Problems met while loading.
    pub problems: Vec<FileProblem>,
}

/// Analyzes a loaded source at time `at`; `list` keeps one row per certificate.
pub fn analyze(loaded: &Loaded, at: OffsetDateTime, list: bool) -> Analysis {
    let certs = loaded.store.certs();
    let mut infos = Vec::with_capacity(certs.len());
    let mut identity: HashMap<(Vec<u8>, Vec<u8>), Vec<usize>> = HashMap::new();
    let now = at.unix_timestamp();
    for (i, der) in certs.iter().enumerate() {
        let occurrences = loaded.occurrences.get(i).copied().unwrap_or(1);
        let mut flags = Vec::new();
        if occurrences > 1 {
            flags.push(Flag::Duplicate);
        }
        let info = match X509Certificate::from_der(der) {
            Ok((_, cert)) => {
                identity
                    .entry((
                        cert.subject().as_raw().to_vec(),
                        cert.public_key().raw.to_vec(),
                    ))
                    .or_default()
                    .push(i);
                let validity = cert.validity();
                if validity.not_after.timestamp() < now {
                    flags.push(Flag::Expired);
                }
                if validity.not_before.timestamp() > now {
                    flags.push(Flag::NotYetValid);
                }
                let (key, weak) = key_type(&cert);
                if weak {
                    flags.push(Flag::WeakKey);
                }
                let signature = signature_name(&cert.signature_algorithm.algorithm.to_id_string());
                if signature.contains("SHA-1") {
                    flags.push(Flag::Sha1);
                }
                if signature.contains("MD5") || signature.contains("MD2") {
                    flags.push(Flag::Md5);
                }
                let is_ca = cert
                    .basic_constraints()
                    .ok()
                    .flatten()
                    .is_some_and(|bc| bc.value.ca);
                if !is_ca {
                    flags.push(Flag::NotCa);
                }
                if cert.subject().as_raw() != cert.issuer().as_raw() {
                    flags.push(Flag::NotSelfSigned);
                }
                CertInfo {
                    subject_cn: common_name(cert.subject()),
                    sha256: sha256_hex(der),
                    not_after: format_rfc3339(validity.not_after.to_datetime()),
                    key,
                    signature,
                    occurrences,
                    flags,
                }
            }
            Err(e) => {
                flags.push(Flag::Unparsable);
                CertInfo {
                    subject_cn: format!("(unparsable: {e})"),
                    sha256: sha256_hex(der),
                    not_after: String::new(),
                    key: "unknown".into(),
                    signature: "unknown".into(),
                    occurrences,
                    flags,
                }
            }
        };
        infos.push(info);
    }
    let mut twin_groups = 0;
    for members in identity.values().filter(|m| m.len() > 1) {
        twin_groups += 1;
        for &i in members {
            infos[i].flags.push(Flag::Twin);
            infos[i].flags.sort();
        }
    }
    let has = |f: Flag| infos.iter().filter(|c| c.flags.contains(&f)).count();
    let mut key_types = BTreeMap::new();
    for c in &infos {
        *key_types.entry(c.key.clone()).or_insert(0) += 1;
    }
    let decoded = loaded.stats.certs_decoded;
    Analysis {
        source: loaded.store.origin().to_string(),
        at: format_rfc3339(at),
        count: decoded,
        unique: certs.len(),
        exact_duplicates: loaded.stats.duplicate_certs,
        twins: has(Flag::Twin),
        twin_groups,
        expired: has(Flag::Expired),
        not_yet_valid: has(Flag::NotYetValid),
        weak_keys: has(Flag::WeakKey),
        sha1_signatures: has(Flag::Sha1),
        md5_signatures: has(Flag::Md5),
        not_ca: has(Flag::NotCa),
        self_signed: certs.len() - has(Flag::NotSelfSigned) - has(Flag::Unparsable),
        not_self_signed: has(Flag::NotSelfSigned),
        key_types,
        der_bytes: certs.iter().map(|c| c.len()).sum(),
        file_bytes: loaded.stats.bytes_read,
        certificates: list.then_some(infos),
        problems: loaded.stats.problems.clone(),
    }
}

/// The subject's common name, or the whole subject when it has none.
pub fn common_name(name: &X509Name<'_>) -> String {
    name.iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok().map(str::to_string))
        .unwrap_or_else(|| name.to_string())
}

fn key_type(cert: &X509Certificate<'_>) -> (String, bool) {
    let spki = cert.public_key();
    match spki.parsed() {
        Ok(PublicKey::RSA(rsa)) => {
            let bits = rsa.key_size();
            (format!("RSA-{bits}"), bits < 2048)
        }
        Ok(PublicKey::EC(_)) => {
            let curve = spki
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.as_oid().ok())
                .map(|oid| match oid.to_id_string().as_str() {
                    "1.2.840.10045.3.1.7" => "P-256".to_string(),
                    "1.3.132.0.34" => "P-384".to_string(),
                    "1.3.132.0.35" => "P-521".to_string(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| "unknown curve".into());
            (format!("EC {curve}"), false)
        }
        Ok(PublicKey::DSA(_)) => ("DSA".into(), true),
        _ => match spki.algorithm.algorithm.to_id_string().as_str() {
            "1.3.101.112" => ("Ed25519".into(), false),
            "1.3.101.113" => ("Ed448".into(), false),
            other => (other.to_string(), false),
        },
    }
}

fn signature_name(oid: &str) -> String {
    match oid {
        "1.2.840.113549.1.1.2" => "RSA MD2",
        "1.2.840.113549.1.1.4" => "RSA MD5",
        "1.2.840.113549.1.1.5" => "RSA SHA-1",
        "1.2.840.113549.1.1.10" => "RSA-PSS",
        "1.2.840.113549.1.1.11" => "RSA SHA-256",
        "1.2.840.113549.1.1.12" => "RSA SHA-384",
        "1.2.840.113549.1.1.13" => "RSA SHA-512",
        "1.2.840.10045.4.1" => "ECDSA SHA-1",
        "1.2.840.10045.4.3.2" => "ECDSA SHA-256",
        "1.2.840.10045.4.3.3" => "ECDSA SHA-384",
        "1.2.840.10045.4.3.4" => "ECDSA SHA-512",
        "1.3.101.112" => "Ed25519",
        "1.3.101.113" => "Ed448",
        "1.2.840.10040.4.3" => "DSA SHA-1",
        other => return other.to_string(),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{BundleOptions, KeyType, PkiOptions, TestPki, generate_bundle};
    use crate::trust::{Source, load};

    #[test]
    fn counts_duplicates_twins_validity_and_non_cas() {
        let pki = TestPki::generate(&PkiOptions {
            ca_key: KeyType::Rsa2048,
            leaf_key: KeyType::Ed25519,
            ..Default::default()
        })
        .unwrap();
        let bundle = generate_bundle(&BundleOptions {
            count: 4,
            cross_signed: 2,
            key: KeyType::EcdsaP384,
            key_pool: Some(2),
            days: 10,
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.pem");
        std::fs::write(
            &path,
            format!(
                "{}{}{}{}",
                bundle.pem, pki.root.pem, pki.root.pem, pki.server.pem
            ),
        )
        .unwrap();
        let loaded = load(
            &Source::Bundle(path),
            &crate::trust::StoreLoadOptions::CERTS,
        )
        .unwrap();
        let a = analyze(&loaded, OffsetDateTime::now_utc(), true);
        assert_eq!(a.count, 9);
        assert_eq!(a.unique, 8);
        assert_eq!(a.exact_duplicates, 1);
        assert_eq!((a.twins, a.twin_groups), (4, 2));
        assert_eq!(a.not_ca, 1);
        assert_eq!(a.not_self_signed, 3); // two twins and the server leaf
        assert_eq!(a.expired, 0);
        assert_eq!(a.key_types["EC P-384"], 6);
        assert_eq!(a.key_types["RSA-2048"], 1);
        assert_eq!(a.key_types["Ed25519"], 1);
        let later = analyze(
            &loaded,
            OffsetDateTime::now_utc() + ::time::Duration::days(400),
            false,
        );
        assert_eq!(later.expired, 8);
        assert!(later.certificates.is_none());
        let earlier = analyze(
            &loaded,
            OffsetDateTime::now_utc() - ::time::Duration::days(1),
            false,
        );
        assert_eq!(earlier.not_yet_valid, 8);
        let list = a.certificates.unwrap();
        let root = list
            .iter()
            .find(|c| c.flags.contains(&Flag::Duplicate))
            .unwrap();
        assert_eq!(root.occurrences, 2);
        assert_eq!(root.signature, "RSA SHA-256");
    }
}
