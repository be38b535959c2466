//! The trust store handed to TLS clients: certificates and their trust anchors, built once
//! and shared ([`SharedStore`]: the first caller loads, concurrent first callers wait for
//! that one load, later callers get the same `Arc` with no I/O at all). Building a store
//! from files is [`super::load`](mod@super::load)'s.

use std::sync::{Arc, OnceLock};

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls_pki_types::{CertificateDer, TrustAnchor};

use super::TrustError;
use crate::tls::Provider;

/// A set of trust anchors, with the certificates they came from when known.
#[derive(Debug, Clone)]
pub struct TrustStore {
    certs: Vec<CertificateDer<'static>>,
    roots: Arc<RootCertStore>,
    origin: String,
}

impl TrustStore {
    /// Builds a store from unique certificates and their anchors (same order, same length,
    /// or no certificates at all for anchor-only sources).
    pub(crate) fn new(
        certs: Vec<CertificateDer<'static>>,
        anchors: Vec<TrustAnchor<'static>>,
        origin: String,
    ) -> Self {
        TrustStore {
            certs,
            roots: Arc::new(RootCertStore { roots: anchors }),
            origin,
        }
    }

    /// Mozilla's roots as compiled into the `webpki-roots` crate (anchors only: no
    /// certificates, so no analysis or trimming).
    pub fn from_webpki_roots() -> TrustStore {
        TrustStore::new(
            Vec::new(),
            webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            "webpki-roots".into(),
        )
    }

    /// Number of trust anchors.
    pub fn len(&self) -> usize {
        self.roots.roots.len()
    }

    /// True when there is no anchor.
    pub fn is_empty(&self) -> bool {
        self.roots.roots.is_empty()
    }

    /// The unique certificates, in load order (empty for anchor-only sources).
    pub fn certs(&self) -> &[CertificateDer<'static>] {
        &self.certs
    }

    /// The trust anchors.
    pub fn anchors(&self) -> &[TrustAnchor<'static>] {
        &self.roots.roots
    }

    /// Where the store came from, for humans.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The anchors as a rustls root store (shared, not copied).
    pub fn root_cert_store(&self) -> Arc<RootCertStore> {
        Arc::clone(&self.roots)
    }

    /// rustls's standard server certificate verifier over this store, with `provider`'s
    /// signature algorithms.
    pub fn verifier(&self, provider: Provider) -> Result<Arc<WebPkiServerVerifier>, TrustError> {
        WebPkiServerVerifier::builder_with_provider(
            self.root_cert_store(),
            provider.crypto_provider(),
        )
        .build()
        .map_err(|e| TrustError::Verifier(e.to_string()))
    }
}

/// A lazily loaded, shared store: the first caller runs the loader while concurrent
/// callers wait; the result (store or error) is kept, so the loader never runs twice.
pub struct SharedStore {
    cell: OnceLock<Result<Arc<TrustStore>, TrustError>>,
}

impl SharedStore {
    /// An empty cell (usable in a `static`).
    pub const fn new() -> Self {
        SharedStore {
            cell: OnceLock::new(),
        }
    }

    /// The store, loading it with `loader` if this is the first call.
    pub fn get_or_load(
        &self,
        loader: impl FnOnce() -> Result<TrustStore, TrustError>,
    ) -> Result<Arc<TrustStore>, TrustError> {
        self.cell.get_or_init(|| loader().map(Arc::new)).clone()
    }

    /// The store if it was loaded already (never loads).
    pub fn get(&self) -> Option<Result<Arc<TrustStore>, TrustError>> {
        self.cell.get().cloned()
    }
}

impl Default for SharedStore {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn shared_store_loads_once_under_contention() {
        let shared = SharedStore::new();
        let loads = AtomicUsize::new(0);
        let barrier = Barrier::new(8);
        let stores: Vec<Arc<TrustStore>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        shared
                            .get_or_load(|| {
                                loads.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_millis(50));
                                Ok(TrustStore::from_webpki_roots())
                            })
                            .unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert!(stores.iter().all(|s| Arc::ptr_eq(s, &stores[0])));
        // Later calls never run the loader.
        let again = shared.get_or_load(|| panic!("loaded twice")).unwrap();
        assert!(Arc::ptr_eq(&again, &stores[0]));
    }

    #[test]
    fn errors_are_kept_too() {
        let shared = SharedStore::new();
        let loads = AtomicUsize::new(0);
        for _ in 0..3 {
            let r = shared.get_or_load(|| {
                loads.fetch_add(1, Ordering::SeqCst);
                Err(TrustError::NoSystemStore { probed: vec![] })
            });
            assert!(r.is_err());
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn webpki_roots_store() {
        let s = TrustStore::from_webpki_roots();
        assert!(s.len() > 100);
        assert!(s.certs().is_empty());
        s.verifier(Provider::AwsLcRs).unwrap();
    }
}
