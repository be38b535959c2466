//! A rustls `ServerConfig` from explicit choices: every knob `tlsperf serve` exposes, with
//! rustls's own defaults when a choice is left out. The crypto provider is passed in, never
//! installed process-wide.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{
    ClientHello, NoServerSessionStorage, ProducesTickets, ResolvesServerCert,
    ServerSessionMemoryCache, WebPkiClientVerifier,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, DnsName, PrivateKeyDer};

use crate::files;
use crate::pki::ocsp::check_staple;
use crate::pki::{KeyType, PkiError, PkiOptions, TestPki};

use crate::tls::Provider;
use crate::tls::choices::{self, ConfigError, TlsVersion};
use crate::trust::TrustStore;

/// A certificate chain (leaf first) and its private key.
pub type KeyPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The key pair of a server started without a certificate: a fresh test PKI (root →
/// intermediate → leaf for `localhost`, `key` keys throughout), with the root's PEM for
/// clients to trust.
pub fn generated_key_pair(key: KeyType) -> Result<(KeyPair, String), PkiError> {
    let pki = TestPki::generate(&PkiOptions {
        ca_key: key,
        leaf_key: key,
        ..Default::default()
    })?;
    Ok((
        (pki.server_chain(), pki.server.private_key_der()),
        pki.root.pem.clone(),
    ))
}

/// `--sni NAME=CERT,KEY`: a DNS name and the key pair read from the two files.
pub fn sni_entry(spec: &str) -> Result<(String, KeyPair), ConfigError> {
    let bad = |reason: String| ConfigError::BadValue {
        flag: "--sni",
        value: format!("'{spec}'"),
        reason,
    };
    let expected = || bad("expected NAME=CERT,KEY".into());
    let (name, files) = spec.split_once('=').ok_or_else(expected)?;
    let (cert, key) = files.split_once(',').ok_or_else(expected)?;
    DnsName::try_from(name).map_err(|_| bad(format!("'{name}' is not a DNS name")))?;
    let pair = choices::read_key_pair(Path::new(cert), Path::new(key))?;
    Ok((name.to_string(), pair))
}

/// `--ocsp FILE`: a DER OCSP response, read and checked against `chain` (stapling a
/// response clients cannot use breaks every client that asks for one).
pub fn read_staple(path: &Path, chain: &[CertificateDer<'static>]) -> Result<Vec<u8>, ConfigError> {
    let der =
        files::read_input(path, files::InputKind::Ocsp).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    check_staple(&der, chain, std::time::SystemTime::now()).map_err(|e| ConfigError::BadValue {
        flag: "--ocsp",
        value: path.display().to_string(),
        reason: format!("cannot staple it: {e}"),
    })?;
    Ok(der)
}

/// How sessions resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Resumption {
    /// No resumption at all.
    Off,
    /// Server-side session cache (rustls's default): session ids (TLS 1.2) and stateful
    /// tickets (TLS 1.3).
    #[default]
    Stateful,
    /// Stateless tickets.
    Tickets,
}

/// Client certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClientAuth {
    /// Not asked for.
    #[default]
    Off,
    /// Asked for, verified when sent, not required.
    Optional,
    /// Required and verified.
    Required,
}

/// Everything the server configuration is built from.
pub struct ServerTlsOptions {
    /// Crypto provider.
    pub provider: Provider,
    /// Protocol versions (empty: rustls's default, 1.2 and 1.3).
    pub versions: Vec<TlsVersion>,
    /// Key-exchange groups by name (empty: the provider's defaults, in its order).
    pub groups: Vec<String>,
    /// Cipher suites by name (empty: the provider's defaults).
    pub ciphers: Vec<String>,
    /// Choose the cipher suite by the server's order (`ciphers`, else the provider's),
    /// not the client's.
    pub server_cipher_order: bool,
    /// Resumption mode.
    pub resumption: Resumption,
    /// Entries of the stateful session cache.
    pub session_cache: usize,
    /// TLS 1.3 tickets sent after each full handshake.
    pub tickets_per_handshake: usize,
    /// Ticket keys shared across instances (`None`: the provider's own rotating ticketer).
    pub ticketer: Option<Arc<dyn ProducesTickets>>,
    /// Maximum 0-RTT bytes accepted (0: off).
    pub early_data: u32,
    /// The default certificate chain and key.
    pub cert: (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
    /// A DER OCSP response to staple with the default certificate.
    pub ocsp: Option<Vec<u8>>,
    /// Certificates chosen by SNI name.
    pub sni: Vec<(String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    /// Refuse handshakes whose SNI name has no `sni` certificate (instead of serving the
    /// default certificate); clients without SNI still get the default one.
    pub sni_strict: bool,
    /// Client certificates.
    pub client_auth: ClientAuth,
    /// Roots for client certificates.
    pub client_ca: Option<TrustStore>,
    /// ALPN protocols offered, in preference order.
    pub alpn: Vec<Vec<u8>>,
    /// Pre-generated key shares per Diffie-Hellman group (0: none).
    pub kx_pool: usize,
}

impl fmt::Debug for ServerTlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTlsOptions")
            .field("provider", &self.provider)
            .field("versions", &self.versions)
            .field("groups", &self.groups)
            .field("ciphers", &self.ciphers)
            .field("server_cipher_order", &self.server_cipher_order)
            .field("resumption", &self.resumption)
            .field("client_auth", &self.client_auth)
            .finish_non_exhaustive()
    }
}

/// A built configuration and, with `kx_pool`, the key-share pools behind it.
pub struct BuiltConfig {
    /// The rustls configuration.
    pub config: Arc<ServerConfig>,
    /// Key-share pools (statistics), when asked for.
    pub kx_pools: Option<Arc<crate::tls::kx_pool::KxPools>>,
}

/// Builds the configuration.
pub fn build(opts: &ServerTlsOptions) -> Result<BuiltConfig, ConfigError> {
    let mut provider = choices::customized_provider(opts.provider, &opts.groups, &opts.ciphers)?;
    let kx_pools = (opts.kx_pool > 0)
        .then(|| Arc::new(crate::tls::kx_pool::install(&mut provider, opts.kx_pool)));
    let provider = Arc::new(provider);
    let versions = choices::protocol_versions(&opts.versions);
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(choices::versions_error)?;
    let builder = match opts.client_auth {
        ClientAuth::Off => builder.with_no_client_auth(),
        mode => {
            let store = opts
                .client_ca
                .as_ref()
                .ok_or_else(|| ConfigError::BadChoice {
                    flag: "--client-auth",
                    reason: "needs --client-ca FILE (the roots client certificates must chain to)"
                        .into(),
                })?;
            let mut v = WebPkiClientVerifier::builder_with_provider(
                store.root_cert_store(),
                Arc::clone(&provider),
            );
            if mode == ClientAuth::Optional {
                v = v.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(v.build().map_err(|e| ConfigError::BadChoice {
                flag: "--client-ca",
                reason: e.to_string(),
            })?)
        }
    };
    let mut default = certified_key(
        &provider,
        opts.cert.0.clone(),
        opts.cert.1.clone_key(),
        "the certificate",
    )?;
    default.ocsp = opts.ocsp.clone();
    let mut by_name = HashMap::new();
    for (name, chain, key) in &opts.sni {
        by_name.insert(
            name.to_ascii_lowercase(),
            Arc::new(certified_key(
                &provider,
                chain.clone(),
                key.clone_key(),
                &format!("--sni {name}"),
            )?),
        );
    }
    let mut config = builder.with_cert_resolver(Arc::new(SniResolver {
        default: Arc::new(default),
        by_name,
        strict: opts.sni_strict,
    }));
    config.alpn_protocols = opts.alpn.clone();
    config.ignore_client_order = opts.server_cipher_order;
    match opts.resumption {
        Resumption::Off => {
            config.session_storage = Arc::new(NoServerSessionStorage {});
            config.send_tls13_tickets = 0;
        }
        Resumption::Stateful => {
            config.session_storage = ServerSessionMemoryCache::new(opts.session_cache.max(1));
            config.send_tls13_tickets = opts.tickets_per_handshake;
        }
        Resumption::Tickets => {
            config.session_storage = Arc::new(NoServerSessionStorage {});
            config.ticketer = match &opts.ticketer {
                Some(t) => Arc::clone(t),
                None => provider_ticketer(opts.provider)?,
            };
            config.send_tls13_tickets = opts.tickets_per_handshake;
        }
    }
    config.max_early_data_size = opts.early_data;
    // A request that came as 0-RTT data is answered right behind the server's Finished
    // (as nginx does), not one round trip later after the client's Finished. HTTP is
    // client-speaks-first, so nothing else is ever sent that early.
    config.send_half_rtt_data = opts.early_data > 0;
    Ok(BuiltConfig {
        config: Arc::new(config),
        kx_pools,
    })
}

fn provider_ticketer(p: Provider) -> Result<Arc<dyn ProducesTickets>, ConfigError> {
    let r = match p {
        Provider::AwsLcRs => rustls::crypto::aws_lc_rs::Ticketer::new(),
        Provider::Ring => rustls::crypto::ring::Ticketer::new(),
    };
    r.map_err(|source| ConfigError::Rustls {
        what: "ticketer".into(),
        source,
    })
}

fn certified_key(
    provider: &CryptoProvider,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    what: &str,
) -> Result<CertifiedKey, ConfigError> {
    CertifiedKey::from_der(chain, key, provider).map_err(|source| ConfigError::Rustls {
        what: format!("{what} and its key do not match or are unusable"),
        source,
    })
}

/// Picks the certificate by SNI name; the default one otherwise (or none, when strict and
/// the client named a host without a certificate).
#[derive(Debug)]
struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
    strict: bool,
}

/// The message rustls gives when the resolver finds no certificate.
pub const NO_CERTIFICATE_RESOLVED: &str = "no server certificate chain resolved";

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match hello.server_name() {
            Some(name) => match self.by_name.get(&name.to_ascii_lowercase()) {
                Some(k) => Some(Arc::clone(k)),
                None if self.strict => None,
                None => Some(Arc::clone(&self.default)),
            },
            None => Some(Arc::clone(&self.default)),
        }
    }
}
