//! Synthetic trust bundles for scaling experiments: N self-signed CA certificates, K of
//! them with a cross-signed twin (same subject and key, issued by another CA of the
//! bundle), as PEM.
//!
//! Key reuse: keys are the expensive part (RSA generation takes tens of milliseconds), and
//! a trust bundle's anchors are only ever used for their subject and public key, so the
//! bundle draws keys round-robin from a pool of distinct keys (1,024 for ECDSA and
//! Ed25519, 8 for RSA by default). Every CA still gets its own subject, serial number and
//! subject key identifier (SHA-256 of subject and key, truncated to 20 bytes), so an index
//! by subject or by key identifier sees N distinct anchors; a twin shares its CA's subject,
//! key and key identifier, exactly like a real cross-signed root.

use std::thread;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyIdMethod,
    KeyPair, KeyUsagePurpose, PublicKeyData,
};
use serde::Serialize;
use time::OffsetDateTime;

use super::chain::random_serial;
use super::{KeyType, PkiError};

/// The largest bundle [`generate_bundle`] makes.
pub const MAX_BUNDLE: usize = 1_000_000;

/// What bundle to generate.
#[derive(Debug, Clone)]
pub struct BundleOptions {
    /// Number of distinct CAs (N).
    pub count: usize,
    /// How many of them also get a cross-signed twin (K ≤ N).
    pub cross_signed: usize,
    /// Key type of every CA.
    pub key: KeyType,
    /// Number of distinct keys to draw from; `None` picks the default for the key type.
    pub key_pool: Option<usize>,
    /// Validity in days from now.
    pub days: u32,
}

impl BundleOptions {
    /// The key pool size used when none is given.
    pub fn default_key_pool(key: KeyType) -> usize {
        if key.is_rsa() { 8 } else { 1024 }
    }
}

/// A generated bundle.
#[derive(Debug, Clone, Serialize)]
pub struct Bundle {
    /// The certificates, PEM, one block after another (each twin right after its CA).
    #[serde(skip)]
    pub pem: String,
    /// Distinct CAs.
    pub cas: usize,
    /// Cross-signed twins.
    pub twins: usize,
    /// Certificates in the bundle (`cas + twins`).
    pub certificates: usize,
    /// Key type.
    pub key: KeyType,
    /// Distinct keys generated and shared round-robin by the CAs.
    pub distinct_keys: usize,
    /// Wall time spent.
    #[serde(
        serialize_with = "crate::stats::serde_duration_ms",
        rename = "elapsed_ms"
    )]
    pub elapsed: Duration,
}

/// Generates a bundle, using every core.
pub fn generate_bundle(opts: &BundleOptions) -> Result<Bundle, PkiError> {
    let started = Instant::now();
    let n = opts.count;
    if n == 0 || n > MAX_BUNDLE {
        return Err(PkiError::BadParam {
            name: "--count",
            reason: format!("{n} is out of range 1..={MAX_BUNDLE}"),
        });
    }
    if opts.cross_signed > n {
        return Err(PkiError::BadParam {
            name: "--cross-signed",
            reason: format!("{} twins asked for but only {n} CAs", opts.cross_signed),
        });
    }
    if opts.cross_signed > 0 && n < 2 {
        return Err(PkiError::BadParam {
            name: "--cross-signed",
            reason: "cross-signing needs at least 2 CAs (a twin is issued by another CA)".into(),
        });
    }
    if opts.days == 0 || opts.days > super::chain::MAX_DAYS {
        return Err(PkiError::BadParam {
            name: "--days",
            reason: format!(
                "{} is out of range 1..={}",
                opts.days,
                super::chain::MAX_DAYS
            ),
        });
    }
    let pool_size = opts
        .key_pool
        .unwrap_or_else(|| BundleOptions::default_key_pool(opts.key))
        .min(n);
    if pool_size == 0 {
        return Err(PkiError::BadParam {
            name: "--key-pool",
            reason: "must be at least 1".into(),
        });
    }

    let threads = thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(n);
    let keys = parallel_chunks(pool_size, threads, |range| {
        range.map(|_| opts.key.generate()).collect()
    })?;

    let now = OffsetDateTime::now_utc();
    let validity = Validity {
        not_before: now - time::Duration::hours(1),
        not_after: now + time::Duration::days(i64::from(opts.days)),
    };
    let pems = parallel_chunks(n, threads, |range| {
        let mut out = Vec::with_capacity(range.len() * 2);
        for i in range {
            let key = &keys[i % pool_size];
            let params = ca_params(i, key, &validity);
            let cert = params.self_signed(key).map_err(|source| PkiError::Sign {
                what: format!("synthetic CA #{i}"),
                source,
            })?;
            out.push(cert.pem());
            if i < opts.cross_signed {
                let j = (i + 1) % n;
                let issuer_key = &keys[j % pool_size];
                let issuer = Issuer::new(ca_params(j, issuer_key, &validity), issuer_key);
                let mut twin = ca_params(i, key, &validity);
                twin.use_authority_key_identifier_extension = true;
                let cert = twin
                    .signed_by(key, &issuer)
                    .map_err(|source| PkiError::Sign {
                        what: format!("cross-signed twin of synthetic CA #{i}"),
                        source,
                    })?;
                out.push(cert.pem());
            }
        }
        Ok(out)
    })?;

    let mut pem = String::with_capacity(pems.iter().map(String::len).sum());
    for p in &pems {
        pem.push_str(p);
    }
    Ok(Bundle {
        pem,
        cas: n,
        twins: opts.cross_signed,
        certificates: pems.len(),
        key: opts.key,
        distinct_keys: pool_size,
        elapsed: started.elapsed(),
    })
}

struct Validity {
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

fn ca_params(i: usize, key: &KeyPair, validity: &Validity) -> CertificateParams {
    let cn = format!("tlsperf Synthetic CA {i:06}");
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "tlsperf synthetic bundle");
    dn.push(DnType::CommonName, cn.as_str());
    params.distinguished_name = dn;
    params.not_before = validity.not_before;
    params.not_after = validity.not_after;
    params.serial_number = Some(random_serial());
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let mut material = cn.into_bytes();
    material.extend_from_slice(&key.subject_public_key_info());
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &material);
    params.key_identifier_method = KeyIdMethod::PreSpecified(digest.as_ref()[..20].to_vec());
    params
}

/// Runs `work` over `0..len` split into `threads` contiguous chunks and concatenates the
/// results in order; the first error wins.
fn parallel_chunks<T, F>(len: usize, threads: usize, work: F) -> Result<Vec<T>, PkiError>
where
    T: Send,
    F: Fn(std::ops::Range<usize>) -> Result<Vec<T>, PkiError> + Sync,
{
    let threads = threads.max(1);
    let chunk = len.div_ceil(threads);
    let results: Vec<Result<Vec<T>, PkiError>> = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start = (t * chunk).min(len);
                let end = ((t + 1) * chunk).min(len);
                let work = &work;
                s.spawn(move || work(start..end))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let mut all = Vec::with_capacity(len);
    for r in results {
        all.extend(r?);
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    fn opts(count: usize, cross_signed: usize) -> BundleOptions {
        BundleOptions {
            count,
            cross_signed,
            key: KeyType::EcdsaP256,
            key_pool: Some(4),
            days: 30,
        }
    }

    #[test]
    fn counts_and_twins() {
        let b = generate_bundle(&opts(10, 3)).unwrap();
        assert_eq!(
            (b.cas, b.twins, b.certificates, b.distinct_keys),
            (10, 3, 13, 4)
        );
        let ders: Vec<_> = CertificateDer::pem_slice_iter(b.pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ders.len(), 13);
        let parsed: Vec<_> = ders
            .iter()
            .map(|d| x509_parser::parse_x509_certificate(d).unwrap().1)
            .collect();
        // CA #0 then its twin: same subject and key, different issuer.
        assert_eq!(parsed[0].subject(), parsed[1].subject());
        assert_eq!(parsed[0].public_key().raw, parsed[1].public_key().raw);
        assert_ne!(parsed[1].issuer(), parsed[1].subject());
        assert_eq!(
            parsed[1].issuer().to_string(),
            parsed[2].subject().to_string()
        );
        // Every CA is self-signed and a CA.
        for p in [&parsed[0], &parsed[2], &parsed[12]] {
            assert_eq!(p.issuer(), p.subject());
            assert!(p.is_ca());
        }
        // Distinct subject key identifiers for distinct CAs, shared by a twin.
        let ski = |c: &x509_parser::certificate::X509Certificate<'_>| {
            c.extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(k) => {
                        Some(k.0.to_vec())
                    }
                    _ => None,
                })
                .unwrap()
        };
        assert_eq!(ski(&parsed[0]), ski(&parsed[1]));
        let mut skis: Vec<_> = parsed.iter().map(ski).collect();
        skis.sort();
        skis.dedup();
        assert_eq!(skis.len(), 10);
    }

    #[test]
    fn rejects_bad_counts() {
        for (n, k) in [(0, 0), (3, 4), (1, 1)] {
            let err = generate_bundle(&opts(n, k)).unwrap_err();
            assert_eq!(
                crate::error::Classify::class(&err),
                crate::ErrorClass::Input
            );
        }
    }
}
