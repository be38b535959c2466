//! A cache of certificate-chain verdicts, for clients that open many connections to the
//! same servers (the load generator), as browsers keep one (Chromium's `CertVerifier`
//! caches results per chain and host name).
//!
//! Only the *chain* verdict is cached: a chain the inner verifier accepted — compared
//! byte for byte: end-entity certificate, intermediates, server name and stapled OCSP
//! response — is accepted again without rebuilding the path, until the earliest
//! `notAfter` in the chain or [`MAX_AGE`], whichever comes first. Rejections are never
//! cached. The handshake signature (TLS 1.3 CertificateVerify, TLS 1.2
//! ServerKeyExchange), which proves the server holds the certificate's key, is checked by
//! the inner verifier on every handshake.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// The longest a verdict is reused.
pub const MAX_AGE: Duration = Duration::from_secs(300);

/// Distinct chains remembered; past this the cache starts over (a load run meets a
/// handful).
const CAPACITY: usize = 1024;

/// Counts of chain verifications.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerdictCounts {
    /// Chains verified by the inner verifier (cache misses).
    pub verified: u64,
    /// Chains accepted from the cache.
    pub cached: u64,
}

/// Wraps a verifier, counts its chain verifications and (when enabled) reuses its
/// verdicts (see the module docs).
pub struct VerdictCache {
    inner: Arc<dyn ServerCertVerifier>,
    enabled: bool,
    /// Exact key bytes → expiry (seconds since the Unix epoch).
    entries: Mutex<HashMap<Vec<u8>, u64>>,
    verified: AtomicU64,
    cached: AtomicU64,
}

impl VerdictCache {
    /// Caches the chain verdicts of `inner` when `enabled`; only counts them otherwise.
    pub fn new(inner: Arc<dyn ServerCertVerifier>, enabled: bool) -> Self {
        VerdictCache {
            inner,
            enabled,
            entries: Mutex::new(HashMap::new()),
            verified: AtomicU64::new(0),
            cached: AtomicU64::new(0),
        }
    }

    /// How many chains were verified and how many accepted from the cache so far.
    pub fn counts(&self) -> VerdictCounts {
        VerdictCounts {
            verified: self.verified.load(Ordering::Relaxed),
            cached: self.cached.load(Ordering::Relaxed),
        }
    }
}

/// Length-prefixed concatenation: no two different inputs give the same key.
fn key(
    end_entity: &[u8],
    intermediates: &[CertificateDer<'_>],
    server_name: &ServerName<'_>,
    ocsp: &[u8],
) -> Vec<u8> {
    let name = server_name.to_str();
    let parts = [end_entity, name.as_bytes(), ocsp]
        .into_iter()
        .chain(intermediates.iter().map(|c| c.as_ref()));
    let mut k = Vec::with_capacity(
        end_entity.len() + ocsp.len() + intermediates.iter().map(|c| c.len()).sum::<usize>() + 64,
    );
    for p in parts {
        k.extend_from_slice(&(p.len() as u64).to_le_bytes());
        k.extend_from_slice(p);
    }
    k
}

/// The earliest `notAfter` of the chain (seconds since the epoch); `None` when a
/// certificate does not parse (then the verdict is not cached).
fn earliest_not_after(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> Option<u64> {
    std::iter::once(end_entity)
        .chain(intermediates)
        .map(|c| {
            let (_, cert) = x509_parser::parse_x509_certificate(c.as_ref()).ok()?;
            u64::try_from(cert.validity().not_after.timestamp()).ok()
        })
        .try_fold(u64::MAX, |min, t| Some(min.min(t?)))
}

impl fmt::Debug for VerdictCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerdictCache")
            .field("inner", &self.inner)
            .field("counts", &self.counts())
            .finish()
    }
}

impl ServerCertVerifier for VerdictCache {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.enabled {
            let verdict = self.inner.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            )?;
            self.verified.fetch_add(1, Ordering::Relaxed);
            return Ok(verdict);
        }
        let k = key(end_entity, intermediates, server_name, ocsp_response);
        let now_s = now.as_secs();
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if entries.get(&k).is_some_and(|&expiry| now_s < expiry) {
                self.cached.fetch_add(1, Ordering::Relaxed);
                return Ok(ServerCertVerified::assertion());
            }
        }
        let verdict = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        self.verified.fetch_add(1, Ordering::Relaxed);
        if let Some(not_after) = earliest_not_after(end_entity, intermediates) {
            let expiry = not_after.min(now_s.saturating_add(MAX_AGE.as_secs()));
            let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if entries.len() >= CAPACITY {
                entries.clear();
            }
            entries.insert(k, expiry);
        }
        Ok(verdict)
    }

    crate::tls::handshake_signature_checks!(delegate: |v| v.inner);

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::HandshakeSignatureValid;
    use rustls::{DigitallySignedStruct, SignatureScheme};
    use std::sync::atomic::AtomicUsize;

    /// Accepts chains whose end-entity certificate is not `b"bad"`, counting calls.
    #[derive(Debug, Default)]
    struct Counting {
        calls: AtomicUsize,
    }

    impl ServerCertVerifier for Counting {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            if end_entity.as_ref() == b"bad" {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::UnknownIssuer,
                ))
            } else {
                Ok(ServerCertVerified::assertion())
            }
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            vec![]
        }
    }

    /// A self-signed certificate for a.test that expires `valid` from now.
    fn leaf(valid: time::Duration) -> CertificateDer<'static> {
        let mut p = rcgen::CertificateParams::new(vec!["a.test".into()]).unwrap();
        p.not_after = time::OffsetDateTime::now_utc() + valid;
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().clone()
    }

    fn name(s: &str) -> ServerName<'static> {
        ServerName::try_from(s.to_string()).unwrap()
    }

    #[test]
    fn accepted_chains_are_reused_exactly_and_rejections_never() {
        let inner = Arc::new(Counting::default());
        let cache = VerdictCache::new(inner.clone(), true);
        let cert = leaf(time::Duration::days(30));
        let now = UnixTime::now();
        for _ in 0..3 {
            cache
                .verify_server_cert(&cert, &[], &name("a.test"), &[], now)
                .unwrap();
        }
        assert_eq!(inner.calls.load(Ordering::Relaxed), 1);
        assert_eq!(
            cache.counts(),
            VerdictCounts {
                verified: 1,
                cached: 2
            }
        );
        // Another name, another OCSP response, another intermediate: verified again.
        cache
            .verify_server_cert(&cert, &[], &name("b.test"), &[], now)
            .unwrap();
        cache
            .verify_server_cert(&cert, &[], &name("a.test"), &[1, 2], now)
            .unwrap();
        cache
            .verify_server_cert(
                &cert,
                &[leaf(time::Duration::days(30))],
                &name("a.test"),
                &[],
                now,
            )
            .unwrap();
        assert_eq!(inner.calls.load(Ordering::Relaxed), 4);
        // Rejections go to the inner verifier every time.
        let bad = CertificateDer::from(b"bad".to_vec());
        for _ in 0..2 {
            assert!(
                cache
                    .verify_server_cert(&bad, &[], &name("a.test"), &[], now)
                    .is_err()
            );
        }
        assert_eq!(inner.calls.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn verdicts_expire_with_the_chain_and_after_max_age() {
        let inner = Arc::new(Counting::default());
        let cache = VerdictCache::new(inner.clone(), true);
        let cert = leaf(time::Duration::days(1));
        let now = UnixTime::now();
        cache
            .verify_server_cert(&cert, &[], &name("a.test"), &[], now)
            .unwrap();
        let later =
            UnixTime::since_unix_epoch(Duration::from_secs(now.as_secs() + MAX_AGE.as_secs() + 1));
        cache
            .verify_server_cert(&cert, &[], &name("a.test"), &[], later)
            .unwrap();
        assert_eq!(inner.calls.load(Ordering::Relaxed), 2);
        // A certificate that expires within MAX_AGE: the verdict lasts until then only.
        let short = leaf(time::Duration::seconds(10));
        cache
            .verify_server_cert(&short, &[], &name("a.test"), &[], now)
            .unwrap();
        let after_expiry = UnixTime::since_unix_epoch(Duration::from_secs(now.as_secs() + 11));
        cache
            .verify_server_cert(&short, &[], &name("a.test"), &[], after_expiry)
            .unwrap();
        assert_eq!(inner.calls.load(Ordering::Relaxed), 4);
    }
}
