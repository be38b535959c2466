//! Verifiers that skip checks, under a name that says so (as rustls's `client::danger`):
//! the verifier behind `--insecure` (and behind fetching a server's chain to judge it
//! later) accepts any server certificate and name, and still checks that the handshake
//! was signed by the key in the certificate presented.

use std::sync::Arc;

use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

/// `--insecure`: accepts any server certificate and name, but still checks that the
/// handshake was signed by the key in the certificate presented.
#[derive(Debug)]
pub struct InsecureVerifier {
    provider: Arc<CryptoProvider>,
}

impl InsecureVerifier {
    /// Checks handshake signatures with `provider`'s algorithms.
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        InsecureVerifier { provider }
    }
}

impl ServerCertVerifier for InsecureVerifier {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    crate::tls::handshake_signature_checks!(algorithms: |v| &v.provider.signature_verification_algorithms);
}
