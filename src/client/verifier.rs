//! Server-certificate verification, timed: a wrapper around any rustls
//! [`ServerCertVerifier`] that records, for the handshake being driven on the current
//! thread, when the certificate arrived at the verifier, how long verification took and
//! whether the server stapled an OCSP response. (The `--insecure` verifier is
//! [`crate::tls::danger::InsecureVerifier`].)
//!
//! The record lives in a thread-local slot: rustls calls the verifier synchronously from
//! `process_new_packets`, which our handshake driver calls on the current thread, so
//! the driver installs the connection's record before each call and takes it back after.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::SignatureScheme;
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// What the verifier saw during one handshake.
#[derive(Debug, Clone, Default)]
pub struct VerifyRecord {
    /// When `verify_server_cert` was entered: the server's certificate had arrived.
    pub cert_at: Option<Instant>,
    /// Time spent verifying the chain and the handshake signature (synchronous CPU work).
    pub cpu: Duration,
    /// Size of the stapled OCSP response (0: none).
    pub ocsp_len: usize,
    /// The signature scheme of the handshake signature (TLS 1.3 CertificateVerify or the
    /// TLS 1.2 ServerKeyExchange).
    pub scheme: Option<SignatureScheme>,
}

thread_local! {
    static RECORD: RefCell<Option<VerifyRecord>> = const { RefCell::new(None) };
}

/// Makes `rec` the record the verifier writes to on this thread, for the duration of one
/// synchronous `process_new_packets` call (a task may move between threads at awaits).
pub(crate) fn install(rec: VerifyRecord) {
    RECORD.with(|r| *r.borrow_mut() = Some(rec));
}

/// Takes back the record [`install`]ed on this thread.
pub(crate) fn take() -> VerifyRecord {
    RECORD.with(|r| r.borrow_mut().take().unwrap_or_default())
}

fn record(f: impl FnOnce(&mut VerifyRecord)) {
    RECORD.with(|r| {
        if let Some(rec) = r.borrow_mut().as_mut() {
            f(rec);
        }
    });
}

/// Runs a handshake-signature check and records its time and scheme.
fn timed_signature<T>(scheme: SignatureScheme, check: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let result = check();
    let spent = t.elapsed();
    record(|r| {
        r.cpu += spent;
        r.scheme = Some(scheme);
    });
    result
}

/// Wraps a verifier and records timings into the current thread's handshake record.
pub struct TimedVerifier {
    inner: Arc<dyn ServerCertVerifier>,
}

impl TimedVerifier {
    /// Times `inner`.
    pub fn new(inner: Arc<dyn ServerCertVerifier>) -> Self {
        TimedVerifier { inner }
    }
}

impl fmt::Debug for TimedVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedVerifier")
            .field("inner", &self.inner)
            .finish()
    }
}

impl ServerCertVerifier for TimedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let t = Instant::now();
        let result = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        let spent = t.elapsed();
        record(|r| {
            r.cert_at.get_or_insert(t);
            r.cpu += spent;
            r.ocsp_len = ocsp_response.len();
        });
        result
    }

    crate::tls::handshake_signature_checks!(delegate: |v| v.inner, around: timed_signature);

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}
