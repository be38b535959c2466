//! [`IndexedVerifier`]: a rustls `ServerCertVerifier` that hands rustls-webpki only the
//! candidate anchors from an [`AnchorIndex`], so its cost does not grow with the store.
//! Path building, signatures, validity, EKU and name checks are rustls's and webpki's own
//! (`verify_server_cert_signed_by_trust_anchor`, `verify_server_name`): same verdicts,
//! same errors as `WebPkiServerVerifier` over the whole store. webpki's own budgets (100
//! signature checks, 200,000 path-building calls) bound the work on hostile chains.
//!
//! [`IndexedVerifier::verify_detailed`] adds what a person wants to see: the path found,
//! the time per phase and the number of signature checks (by wrapping the signature
//! algorithms with counters).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::server::ParsedCertificate;
use rustls_pki_types::{
    AlgorithmIdentifier, CertificateDer, InvalidSignature, ServerName,
    SignatureVerificationAlgorithm, UnixTime,
};
use serde::Serialize;

use super::index::AnchorIndex;
use crate::tls::Provider;
use crate::trust::TrustStore;

/// A server certificate verifier with an indexed issuer lookup.
pub struct IndexedVerifier {
    index: Arc<AnchorIndex>,
    algs: WebPkiSupportedAlgorithms,
}

impl fmt::Debug for IndexedVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexedVerifier")
            .field("anchors", &self.index.len())
            .finish()
    }
}

impl IndexedVerifier {
    /// Indexes `store` and uses `provider`'s signature algorithms.
    pub fn new(store: &TrustStore, provider: Provider) -> Self {
        Self::with_index(Arc::new(AnchorIndex::new(store)), provider)
    }

    /// Shares an existing index (many verifiers, one index).
    pub fn with_index(index: Arc<AnchorIndex>, provider: Provider) -> Self {
        IndexedVerifier {
            index,
            algs: provider.crypto_provider().signature_verification_algorithms,
        }
    }

    /// The index.
    pub fn index(&self) -> &Arc<AnchorIndex> {
        &self.index
    }

    /// Verifies like [`ServerCertVerifier::verify_server_cert`] and reports the path, the
    /// phases and the signature checks.
    pub fn verify_detailed(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> VerifyReport {
        let started = Instant::now();
        let counters = Counters::default();
        let wrapped = counting(self.algs.all, &counters);
        let algs = as_dyn(&wrapped);

        let t = Instant::now();
        let candidates = self.index.candidates_detailed(end_entity, intermediates);
        let lookup = t.elapsed();

        let mut report = VerifyReport {
            valid: false,
            reason: None,
            reason_code: None,
            budget_exhausted: false,
            path: Vec::new(),
            anchors_in_store: self.index.len(),
            candidate_anchors: candidates.roots.roots.len(),
            candidates_by_key_id: candidates.by_key_id,
            signature_checks: 0,
            lookup_ns: duration_ns(lookup),
            signatures_ns: 0,
            policy_ns: 0,
            name_ns: 0,
            total_ns: 0,
        };
        let t = Instant::now();
        let path_result = webpki::EndEntityCert::try_from(end_entity).and_then(|ee| {
            let anchors = &candidates.roots.roots;
            let path = ee
                .verify_for_usage(
                    &algs,
                    anchors,
                    intermediates,
                    now,
                    webpki::KeyUsage::server_auth(),
                    None,
                    None,
                )
                .inspect_err(|e| {
                    report.budget_exhausted = matches!(
                        e,
                        webpki::Error::MaximumSignatureChecksExceeded
                            | webpki::Error::MaximumPathBuildCallsExceeded
                            | webpki::Error::MaximumNameConstraintComparisonsExceeded
                    );
                })?;
            report
                .path
                .push(subject_cn_of_der(path.end_entity().der().as_ref()));
            for c in path.intermediate_certificates() {
                report.path.push(subject_cn_of_der(c.der().as_ref()));
            }
            report.path.push(format!(
                "{} (trust anchor)",
                subject_cn_of_name(path.anchor().subject.as_ref())
            ));
            Ok(ee)
        });
        let building = t.elapsed();
        report.signature_checks = counters.count.load(Ordering::Relaxed);
        report.signatures_ns = counters.nanos.load(Ordering::Relaxed);
        report.policy_ns = duration_ns(building).saturating_sub(report.signatures_ns);
        match path_result {
            Ok(ee) => {
                let t = Instant::now();
                match ee.verify_is_valid_for_subject_name(server_name) {
                    Ok(()) => report.valid = true,
                    Err(e) => report.set_reason(&e, server_name),
                }
                report.name_ns = duration_ns(t.elapsed());
            }
            Err(e) => report.set_reason(&e, server_name),
        }
        report.total_ns = duration_ns(started.elapsed());
        report
    }
}

impl ServerCertVerifier for IndexedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        let candidates = self.index.candidates(end_entity, intermediates);
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &candidates.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        verify_server_name(&cert, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    crate::tls::handshake_signature_checks!(algorithms: |v| &v.algs);
}

/// What one detailed verification found and cost.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyReport {
    /// The chain is valid for the name at the time.
    pub valid: bool,
    /// Why not, in plain words (dates, names).
    pub reason: Option<String>,
    /// Why not, as a stable code (`cert_expired`, `name_mismatch`, `unknown_issuer`…;
    /// [`super::reason::describe`]).
    pub reason_code: Option<&'static str>,
    /// webpki gave up on its work budget (pathological chain).
    pub budget_exhausted: bool,
    /// Subjects from the leaf up to the trust anchor (when valid or when only the name failed).
    pub path: Vec<String>,
    /// Anchors in the store.
    pub anchors_in_store: usize,
    /// Anchors handed to webpki.
    pub candidate_anchors: usize,
    /// Candidates whose key identifier matches an authority key identifier of the chain.
    pub candidates_by_key_id: usize,
    /// Signature verifications done.
    pub signature_checks: u32,
    /// Anchor lookup in the index.
    pub lookup_ns: u64,
    /// Inside signature verifications.
    pub signatures_ns: u64,
    /// Path building and policy (validity, EKU, constraints) outside signatures.
    pub policy_ns: u64,
    /// Server name check.
    pub name_ns: u64,
    /// Everything.
    pub total_ns: u64,
}

impl VerifyReport {
    fn set_reason(&mut self, e: &webpki::Error, name: &ServerName<'_>) {
        let r = super::reason::describe(e, &name.to_str());
        self.reason = Some(r.message);
        self.reason_code = Some(r.code);
    }
}

#[derive(Default)]
struct Counters {
    count: AtomicU32,
    nanos: AtomicU64,
}

/// A signature algorithm that counts and times its verifications.
struct Counting<'a> {
    inner: &'static dyn SignatureVerificationAlgorithm,
    counters: &'a Counters,
}

impl fmt::Debug for Counting<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({:?})", self.inner)
    }
}

impl SignatureVerificationAlgorithm for Counting<'_> {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        let t = Instant::now();
        let r = self.inner.verify_signature(public_key, message, signature);
        self.counters
            .nanos
            .fetch_add(duration_ns(t.elapsed()), Ordering::Relaxed);
        self.counters.count.fetch_add(1, Ordering::Relaxed);
        r
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        self.inner.public_key_alg_id()
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.inner.signature_alg_id()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

/// Counts the signature checks of one verification with rustls's own path validation over
/// `roots` (used to report the default verifier's work).
pub fn count_signature_checks(
    provider: Provider,
    roots: &rustls::RootCertStore,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    now: UnixTime,
) -> u32 {
    let counters = Counters::default();
    let wrapped = counting(
        provider
            .crypto_provider()
            .signature_verification_algorithms
            .all,
        &counters,
    );
    let refs = as_dyn(&wrapped);
    if let Ok(cert) = ParsedCertificate::try_from(end_entity) {
        let _ = verify_server_cert_signed_by_trust_anchor(&cert, roots, intermediates, now, &refs);
    }
    counters.count.load(Ordering::Relaxed)
}

/// `algs`, each wrapped to count and time its verifications into `counters`.
fn counting<'c>(
    algs: &[&'static dyn SignatureVerificationAlgorithm],
    counters: &'c Counters,
) -> Vec<Counting<'c>> {
    algs.iter()
        .map(|&inner| Counting { inner, counters })
        .collect()
}

fn as_dyn<'a>(wrapped: &'a [Counting<'_>]) -> Vec<&'a dyn SignatureVerificationAlgorithm> {
    wrapped
        .iter()
        .map(|w| w as &dyn SignatureVerificationAlgorithm)
        .collect()
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn subject_cn_of_der(der: &[u8]) -> String {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, c)| crate::trust::analyze::common_name(c.subject()))
        .unwrap_or_else(|_| "(unparsable)".into())
}

fn subject_cn_of_name(value: &[u8]) -> String {
    use x509_parser::prelude::FromDer;
    let mut der = vec![0x30];
    let len = value.len();
    if len < 0x80 {
        der.push(len as u8);
    } else if len < 0x100 {
        der.extend_from_slice(&[0x81, len as u8]);
    } else {
        der.extend_from_slice(&[0x82, (len >> 8) as u8, len as u8]);
    }
    der.extend_from_slice(value);
    x509_parser::x509::X509Name::from_der(&der)
        .map(|(_, n)| crate::trust::analyze::common_name(&n))
        .unwrap_or_else(|_| "(unparsable name)".into())
}
