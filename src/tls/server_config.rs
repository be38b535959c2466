//! A rustls `ServerConfig` from explicit choices: every knob `tlsperf serve` exposes, with
//! rustls's own defaults when a choice is left out. The crypto provider is passed in, never
//! installed process-wide.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{
    ClientHello, NoServerSessionStorage, ProducesTickets, ResolvesServerCert,
    ServerSessionMemoryCache, WebPkiClientVerifier,
};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::Provider;
use crate::error::{Classify, ErrorClass, io_input_class};
use crate::trust::TrustStore;

/// A failure building the server configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerConfigError {
    /// A certificate or key file could not be read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A certificate or key file holds nothing usable.
    #[error("{}: {reason}", .path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A flag value is not supported by the provider.
    #[error("{flag}: {reason}")]
    BadChoice {
        /// The flag.
        flag: &'static str,
        /// Why.
        reason: String,
    },
    /// rustls refused the combination.
    #[error("{what}: {source}")]
    Rustls {
        /// What was being built.
        what: String,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
}

impl Classify for ServerConfigError {
    fn class(&self) -> ErrorClass {
        match self {
            ServerConfigError::Read { source, .. } => io_input_class(source),
            _ => ErrorClass::Input,
        }
    }
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

/// TLS protocol versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TlsVersion {
    /// TLS 1.2.
    #[value(name = "1.2")]
    V1_2,
    /// TLS 1.3.
    #[value(name = "1.3")]
    V1_3,
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
    pub kx_pools: Option<Arc<super::kx_pool::KxPools>>,
}

/// Builds the configuration.
pub fn build(opts: &ServerTlsOptions) -> Result<BuiltConfig, ServerConfigError> {
    let mut provider = (*opts.provider.crypto_provider()).clone();
    if !opts.groups.is_empty() {
        provider.kx_groups = opts
            .groups
            .iter()
            .map(|want| {
                provider
                    .kx_groups
                    .iter()
                    .find(|g| group_name(g.name()).eq_ignore_ascii_case(want))
                    .copied()
                    .ok_or_else(|| ServerConfigError::BadChoice {
                        flag: "--groups",
                        reason: format!(
                            "unknown group '{want}' for {} (available: {})",
                            opts.provider,
                            provider
                                .kx_groups
                                .iter()
                                .map(|g| group_name(g.name()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })
            })
            .collect::<Result<_, _>>()?;
    }
    if !opts.ciphers.is_empty() {
        provider.cipher_suites = opts
            .ciphers
            .iter()
            .map(|want| {
                provider
                    .cipher_suites
                    .iter()
                    .find(|s| format!("{:?}", s.suite()).eq_ignore_ascii_case(want))
                    .copied()
                    .ok_or_else(|| ServerConfigError::BadChoice {
                        flag: "--ciphers",
                        reason: format!(
                            "unknown cipher suite '{want}' (available: {})",
                            provider
                                .cipher_suites
                                .iter()
                                .map(|s| format!("{:?}", s.suite()))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    })
            })
            .collect::<Result<_, _>>()?;
    }
    let kx_pools =
        (opts.kx_pool > 0).then(|| Arc::new(super::kx_pool::install(&mut provider, opts.kx_pool)));
    let provider = Arc::new(provider);
    let versions: Vec<&'static SupportedProtocolVersion> = if opts.versions.is_empty() {
        rustls::DEFAULT_VERSIONS.to_vec()
    } else {
        opts.versions
            .iter()
            .map(|v| match v {
                TlsVersion::V1_2 => &rustls::version::TLS12,
                TlsVersion::V1_3 => &rustls::version::TLS13,
            })
            .collect()
    };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|source| ServerConfigError::Rustls {
            what: "--tls/--groups/--ciphers".into(),
            source,
        })?;
    let builder = match opts.client_auth {
        ClientAuth::Off => builder.with_no_client_auth(),
        mode => {
            let store = opts
                .client_ca
                .as_ref()
                .ok_or_else(|| ServerConfigError::BadChoice {
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
            builder.with_client_cert_verifier(v.build().map_err(|e| {
                ServerConfigError::BadChoice {
                    flag: "--client-ca",
                    reason: e.to_string(),
                }
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
    Ok(BuiltConfig {
        config: Arc::new(config),
        kx_pools,
    })
}

fn provider_ticketer(p: Provider) -> Result<Arc<dyn ProducesTickets>, ServerConfigError> {
    let r = match p {
        Provider::AwsLcRs => rustls::crypto::aws_lc_rs::Ticketer::new(),
        Provider::Ring => rustls::crypto::ring::Ticketer::new(),
    };
    r.map_err(|source| ServerConfigError::Rustls {
        what: "ticketer".into(),
        source,
    })
}

fn certified_key(
    provider: &CryptoProvider,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    what: &str,
) -> Result<CertifiedKey, ServerConfigError> {
    CertifiedKey::from_der(chain, key, provider).map_err(|source| ServerConfigError::Rustls {
        what: format!("{what} and its key do not match or are unusable"),
        source,
    })
}

/// The name rustls gives a group, lowercased as on our command line (`x25519`,
/// `secp256r1`, `secp384r1`, `x25519mlkem768`).
pub fn group_name(g: rustls::NamedGroup) -> String {
    format!("{g:?}").to_ascii_lowercase()
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

/// Reads a PEM certificate chain (leaf first).
pub fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, ServerConfigError> {
    let text = std::fs::read(path).map_err(|source| ServerConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<_, _>>()
        .map_err(|e| ServerConfigError::BadFile {
            path: path.to_path_buf(),
            reason: format!("not a PEM certificate chain: {e}"),
        })?;
    if certs.is_empty() {
        return Err(ServerConfigError::BadFile {
            path: path.to_path_buf(),
            reason: "no certificate in the file".into(),
        });
    }
    Ok(certs)
}

/// Reads a PEM private key (PKCS#8, PKCS#1 or SEC1).
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServerConfigError> {
    let text = std::fs::read(path).map_err(|source| ServerConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if memchr::memmem::find(&text, b"ENCRYPTED").is_some() {
        return Err(ServerConfigError::BadFile {
            path: path.to_path_buf(),
            reason: "encrypted private keys are not supported (decrypt it first: openssl pkey -in KEY -out PLAIN)".into(),
        });
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| ServerConfigError::BadFile {
        path: path.to_path_buf(),
        reason: format!("no usable private key: {e}"),
    })
}
