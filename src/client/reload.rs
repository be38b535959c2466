//! The verifier of a client that loads its roots for every handshake: the slow client
//! `tlsperf observe` looks for. Each call to `verify_server_cert` — made when the
//! server's certificate has arrived, before the client can send its Finished — loads
//! the root store from its source (a fresh read and decode of the file or of the
//! system store, never a shared copy), builds a verifier over it and verifies with
//! that; so the load falls inside the client's think time on the wire, as it does for a
//! client whose TLS library looks its roots up during verification.
//!
//! Handshake signatures need no roots: they are checked by a verifier over the roots
//! loaded once when the configuration was built (which also finds a bad roots file
//! before the first connection).

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::roots::Roots;
use crate::tls::Provider;
use crate::trust::{TrustError, TrustStore};
use crate::verify::IndexedVerifier;

/// How often a client loads its roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootsLoad {
    /// Once per process, shared by every connection.
    #[default]
    Once,
    /// Again for every handshake, inside certificate verification.
    PerHandshake,
}

/// Loads `roots` now, from its source (`None` for [`Roots::Insecure`]).
pub fn load_fresh(roots: &Roots) -> Result<Option<TrustStore>, TrustError> {
    Ok(Some(match roots {
        Roots::Insecure => return Ok(None),
        Roots::System => TrustStore::system()?,
        Roots::Webpki => TrustStore::from_webpki_roots(),
        Roots::File(path) => TrustStore::from_pem_file(path)?,
    }))
}

/// A verifier that loads its roots on every certificate verification.
pub struct ReloadingVerifier {
    roots: Roots,
    provider: Provider,
    /// Over the roots loaded when the configuration was built: handshake signatures.
    signatures: Arc<IndexedVerifier>,
}

impl ReloadingVerifier {
    /// Verifies against `roots`, loaded again for every certificate; `first` is the store
    /// loaded when the configuration was built.
    pub fn new(roots: Roots, provider: Provider, first: &TrustStore) -> ReloadingVerifier {
        ReloadingVerifier {
            roots,
            provider,
            signatures: Arc::new(IndexedVerifier::new(first, provider)),
        }
    }
}

impl fmt::Debug for ReloadingVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingVerifier")
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl ServerCertVerifier for ReloadingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let store = load_fresh(&self.roots)
            .map_err(|e| {
                rustls::Error::General(format!(
                    "loading the roots for this handshake failed: {}",
                    crate::error::sentence(&e)
                ))
            })?
            .ok_or_else(|| rustls::Error::General("no roots to load".into()))?;
        IndexedVerifier::new(&store, self.provider).verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    crate::tls::handshake_signature_checks!(delegate: |v| v.signatures);

    fn requires_raw_public_keys(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        None
    }
}
