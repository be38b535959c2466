//! A rustls `ClientConfig` from explicit choices — roots, protocol versions, groups,
//! cipher suites, resumption mode, 0-RTT, client certificate — with the server-certificate
//! verifier wrapped in [`TimedVerifier`]. The crypto provider is passed in, never
//! installed process-wide.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::{ClientSessionStore, Resumption, Tls12Resumption};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::reload::{ReloadingVerifier, RootsLoad};
use super::roots::Roots;
use super::verdict_cache::VerdictCache;
use super::verifier::TimedVerifier;
use crate::tls::Provider;
use crate::tls::choices::{self, ConfigError, TlsVersion};
use crate::tls::danger::InsecureVerifier;
use crate::trust::TrustStore;
use crate::verify::IndexedVerifier;

/// How the client resumes sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resume {
    /// Never: every handshake is full.
    Off,
    /// Tickets (TLS 1.3 always; TLS 1.2 when the server issues them, else session ids).
    #[default]
    Tickets,
    /// TLS 1.2 session ids only (TLS 1.3 has only tickets, so it resumes by ticket).
    Ids,
}

/// Everything the client configuration is built from.
#[derive(Debug)]
pub struct ClientTlsOptions {
    /// Crypto provider.
    pub provider: Provider,
    /// Protocol versions (empty: rustls's defaults).
    pub versions: Vec<TlsVersion>,
    /// Key-exchange groups by name, preferred first (empty: the provider's defaults).
    pub groups: Vec<String>,
    /// Cipher suites by name (empty: the provider's defaults).
    pub ciphers: Vec<String>,
    /// Where roots come from.
    pub roots: Roots,
    /// Resumption.
    pub resume: Resume,
    /// Sessions remembered (per client configuration).
    pub session_cache: usize,
    /// Send 0-RTT data when a session allows it.
    pub early_data: bool,
    /// A client certificate chain and key (mTLS).
    pub client_cert: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    /// ALPN protocols offered, preferred first.
    pub alpn: Vec<Vec<u8>>,
    /// Count chain verifications ([`VerdictCache`]); with `Some(true)` also reuse the
    /// verdicts of chains verified before (the handshake signature is checked every
    /// time). `None`: neither.
    pub verify_cache: Option<bool>,
    /// Load the roots once (shared by every connection) or again in every handshake's
    /// certificate verification ([`ReloadingVerifier`]; no verdict cache then).
    pub roots_load: RootsLoad,
}

impl Default for ClientTlsOptions {
    fn default() -> Self {
        ClientTlsOptions {
            provider: Provider::default(),
            versions: Vec::new(),
            groups: Vec::new(),
            ciphers: Vec::new(),
            roots: Roots::System,
            resume: Resume::Tickets,
            session_cache: 256,
            early_data: false,
            client_cert: None,
            alpn: Vec::new(),
            verify_cache: None,
            roots_load: RootsLoad::Once,
        }
    }
}

/// A built client configuration and what building it cost.
#[derive(Debug, Clone)]
pub struct BuiltClient {
    /// The configuration.
    pub config: Arc<ClientConfig>,
    /// Where the roots came from, e.g. "system store (143 anchors)".
    pub roots: String,
    /// Time to get the roots (loading the store the first time).
    pub roots_time: Duration,
    /// The verdict cache or counter, when asked for (its counts).
    pub verdicts: Option<Arc<VerdictCache>>,
    /// Time of the crypto provider's first use in this process (aws-lc-rs seeds its
    /// random generator then: tens of milliseconds here), paid here rather than inside
    /// the first handshake, and reported apart.
    pub provider_init: Duration,
    /// The session store, counting what servers give to resume with (`None` with
    /// `--resume off`).
    pub sessions: Option<Arc<super::sessions::WatchedSessions>>,
    /// How the configuration resumes.
    pub resume: Resume,
}

/// Builds the configuration.
pub fn build(opts: &ClientTlsOptions) -> Result<BuiltClient, ConfigError> {
    // Before the first connection, so that its first segments are stamped too.
    super::wire::keep_kernel_stamping();
    let provider = Arc::new(choices::customized_provider(
        opts.provider,
        &opts.groups,
        &opts.ciphers,
    )?);
    let t = Instant::now();
    // Invariant-free: a random fill only fails when the OS has no randomness, and then
    // the handshake fails with rustls's own error.
    let _ = provider.secure_random.fill(&mut [0u8; 32]);
    let provider_init = t.elapsed();
    let t = Instant::now();
    let (inner, roots): (Arc<dyn ServerCertVerifier>, String) = match load_roots(&opts.roots)? {
        None => (
            Arc::new(InsecureVerifier::new(Arc::clone(&provider))),
            "none (--insecure: server certificates are NOT verified)".into(),
        ),
        Some(store) if opts.roots_load == RootsLoad::PerHandshake => {
            let label = format!(
                "{} ({} anchors), loaded again in every handshake",
                store.origin(),
                store.len()
            );
            let v = ReloadingVerifier::new(opts.roots.clone(), opts.provider, &store);
            (Arc::new(v), label)
        }
        Some(store) => {
            let label = format!("{} ({} anchors)", store.origin(), store.len());
            (Arc::new(IndexedVerifier::new(&store, opts.provider)), label)
        }
    };
    let roots_time = t.elapsed();
    // A client that loads its roots in every handshake keeps no verdicts either.
    let verdicts = opts
        .verify_cache
        .filter(|_| opts.roots != Roots::Insecure && opts.roots_load == RootsLoad::Once)
        .map(|enabled| Arc::new(VerdictCache::new(Arc::clone(&inner), enabled)));
    let inner: Arc<dyn ServerCertVerifier> = match &verdicts {
        Some(cache) => Arc::clone(cache) as Arc<dyn ServerCertVerifier>,
        None => inner,
    };
    let versions = choices::protocol_versions(&opts.versions);
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(choices::versions_error)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(TimedVerifier::new(inner)));
    let mut config = match &opts.client_cert {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain.clone(), key.clone_key())
            .map_err(|source| ConfigError::Rustls {
                what: "--cert/--key".into(),
                source,
            })?,
        None => builder.with_no_client_auth(),
    };
    let sessions = (opts.resume != Resume::Off)
        .then(|| super::sessions::WatchedSessions::new(opts.session_cache));
    config.resumption = match &sessions {
        Some(store) => Resumption::store(Arc::clone(store) as Arc<dyn ClientSessionStore>)
            .tls12_resumption(match opts.resume {
                Resume::Ids => Tls12Resumption::SessionIdOnly,
                _ => Tls12Resumption::SessionIdOrTickets,
            }),
        None => Resumption::disabled(),
    };
    config.enable_early_data = opts.early_data;
    config.alpn_protocols = opts.alpn.clone();
    Ok(BuiltClient {
        config: Arc::new(config),
        roots,
        roots_time,
        verdicts,
        provider_init,
        sessions,
        resume: opts.resume,
    })
}

/// A fresh session cache of `entries` for `mode` (rustls keeps at most 8 TLS 1.3 tickets
/// per server in one cache: a load generator gives each connection slot its own, as
/// separate clients would have).
pub fn resumption(mode: Resume, entries: usize) -> Resumption {
    match mode {
        Resume::Off => Resumption::disabled(),
        Resume::Tickets => Resumption::in_memory_sessions(entries.max(1))
            .tls12_resumption(Tls12Resumption::SessionIdOrTickets),
        Resume::Ids => Resumption::in_memory_sessions(entries.max(1))
            .tls12_resumption(Tls12Resumption::SessionIdOnly),
    }
}

/// The store behind `roots` (`None` for [`Roots::Insecure`]).
fn load_roots(roots: &Roots) -> Result<Option<Arc<TrustStore>>, ConfigError> {
    Ok(Some(match roots {
        Roots::Insecure => return Ok(None),
        Roots::System => TrustStore::system_shared().map_err(|e| ConfigError::BadChoice {
            flag: "--roots system",
            reason: e.to_string(),
        })?,
        Roots::Webpki => Arc::new(TrustStore::from_webpki_roots()),
        Roots::File(path) => {
            Arc::new(
                TrustStore::from_pem_file(path).map_err(|e| ConfigError::BadFile {
                    path: path.clone(),
                    reason: format!("not usable as roots: {}", crate::error::sentence(&e)),
                })?,
            )
        }
    }))
}
