//! Choices shared by the server and client configurations: the provider narrowed to the
//! key-exchange groups and cipher suites asked for, protocol versions, certificate chains
//! and keys read from PEM files, and the error for a bad choice.

use std::path::{Path, PathBuf};

use rustls::SupportedProtocolVersion;
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::Provider;
pub use super::provider::{find_kx_group, group_label, group_name};
use crate::error::{Classify, ErrorClass, io_input_class};

/// A failure building a TLS configuration (server or client) from the user's choices.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
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
    /// A flag's value is malformed or cannot be used.
    #[error("{flag} {value}: {reason}")]
    BadValue {
        /// The flag.
        flag: &'static str,
        /// The value as given (quoted when it is not a path).
        value: String,
        /// Why.
        reason: String,
    },
    /// rustls refused the combination (the source says why).
    #[error("{what}")]
    Rustls {
        /// What was being built.
        what: String,
        /// rustls's error.
        #[source]
        source: rustls::Error,
    },
}

impl Classify for ConfigError {
    fn class(&self) -> ErrorClass {
        match self {
            ConfigError::Read { source, .. } => io_input_class(source),
            _ => ErrorClass::Input,
        }
    }
}

/// rustls's refusal of the versions, suites and groups chosen, in words where rustls's own
/// text reads like a bug ("unexpected error: no usable cipher suites configured").
pub fn versions_error(source: rustls::Error) -> ConfigError {
    match &source {
        rustls::Error::General(m) if m.contains("no usable cipher suites") => {
            ConfigError::BadChoice {
                flag: "--ciphers",
                reason: "none of the cipher suites given is for a TLS version allowed by --tls \
                     (TLS 1.3 suites start with TLS13_, TLS 1.2 ones with TLS_ECDHE_)"
                    .into(),
            }
        }
        rustls::Error::General(m) if m.contains("key exchange groups were present") => {
            ConfigError::BadChoice {
                flag: "--groups",
                reason: "a cipher suite given needs a kind of key exchange (ECDHE or FFDHE) \
                         that no group given provides"
                    .into(),
            }
        }
        _ => ConfigError::Rustls {
            what: "--tls/--groups/--ciphers".into(),
            source,
        },
    }
}

/// A TLS protocol version: on the command line and in JSON `1.2` or `1.3`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum TlsVersion {
    /// TLS 1.2.
    #[value(name = "1.2")]
    #[serde(rename = "1.2")]
    V1_2,
    /// TLS 1.3.
    #[value(name = "1.3")]
    #[serde(rename = "1.3")]
    V1_3,
}

impl TlsVersion {
    /// Both, newest first.
    pub const ALL: [TlsVersion; 2] = [TlsVersion::V1_3, TlsVersion::V1_2];

    /// `1.2` or `1.3`.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::V1_2 => "1.2",
            TlsVersion::V1_3 => "1.3",
        }
    }

    /// rustls's protocol version.
    pub fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            TlsVersion::V1_2 => &rustls::version::TLS12,
            TlsVersion::V1_3 => &rustls::version::TLS13,
        }
    }
}

impl std::fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS {}", self.name())
    }
}

/// The rustls protocol versions for `versions` (empty: rustls's defaults, 1.2 and 1.3).
pub fn protocol_versions(versions: &[TlsVersion]) -> Vec<&'static SupportedProtocolVersion> {
    if versions.is_empty() {
        return rustls::DEFAULT_VERSIONS.to_vec();
    }
    versions.iter().map(|v| v.rustls()).collect()
}

/// `choice`'s provider with only the `groups` and `ciphers` named (each empty: the
/// provider's defaults, in its order); unknown names are an error listing what exists.
pub fn customized_provider(
    choice: Provider,
    groups: &[String],
    ciphers: &[String],
) -> Result<CryptoProvider, ConfigError> {
    let mut provider = (*choice.crypto_provider()).clone();
    if !groups.is_empty() {
        provider.kx_groups = groups
            .iter()
            .map(|want| {
                find_kx_group(&provider.kx_groups, want).ok_or_else(|| ConfigError::BadChoice {
                    flag: "--groups",
                    reason: format!(
                        "unknown group '{want}' for {} (available: {})",
                        choice,
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
    if !ciphers.is_empty() {
        provider.cipher_suites = ciphers
            .iter()
            .map(|want| {
                provider
                    .cipher_suites
                    .iter()
                    .find(|s| format!("{:?}", s.suite()).eq_ignore_ascii_case(want))
                    .copied()
                    .ok_or_else(|| ConfigError::BadChoice {
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
    Ok(provider)
}

/// Reads a certificate chain and its private key, and checks that the key is the leaf's
/// (the error names both files).
pub fn read_key_pair(
    chain_path: &Path,
    key_path: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), ConfigError> {
    let chain = read_chain(chain_path)?;
    let key = read_key(key_path)?;
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    match rustls::sign::CertifiedKey::from_der(chain.clone(), key.clone_key(), &provider) {
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err(ConfigError::BadFile {
                path: key_path.to_path_buf(),
                reason: format!(
                    "not the private key of the certificate in {} (their public keys differ)",
                    chain_path.display()
                ),
            })
        }
        // Unsupported key types and the like: said when the server is configured.
        _ => Ok((chain, key)),
    }
}

/// Reads a PEM certificate chain (leaf first).
pub fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let text = crate::files::read_input(path, crate::files::InputKind::Pem).map_err(|source| {
        ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<_, _>>()
        .map_err(|e| ConfigError::BadFile {
            path: path.to_path_buf(),
            reason: format!("not a PEM certificate chain: {e}"),
        })?;
    if certs.is_empty() {
        return Err(ConfigError::BadFile {
            path: path.to_path_buf(),
            reason: "no certificate in the file".into(),
        });
    }
    Ok(certs)
}

/// Reads a PEM private key (PKCS#8, PKCS#1 or SEC1).
pub fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, ConfigError> {
    let text = crate::files::read_input(path, crate::files::InputKind::Pem).map_err(|source| {
        ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    if memchr::memmem::find(&text, b"ENCRYPTED").is_some() {
        return Err(ConfigError::BadFile {
            path: path.to_path_buf(),
            reason: "encrypted private keys are not supported (decrypt it first: openssl pkey -in KEY -out PLAIN)".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&text).map_err(|e| ConfigError::BadFile {
        path: path.to_path_buf(),
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound
                if memchr::memmem::find(&text, b"BEGIN CERTIFICATE").is_some() =>
            {
                "it holds a certificate, not a private key (give the key file)".into()
            }
            rustls_pki_types::pem::Error::NoItemsFound => {
                "no private key in the file (a PEM PRIVATE KEY block)".into()
            }
            other => format!("no usable private key: {other}"),
        },
    })?;
    warn_if_shared(path);
    Ok(key)
}

/// Warns when a private key file can be read by its group or by others (tlsperf writes
/// its keys 0600). A warning, not a refusal: the key is the user's, and servers such as
/// nginx read such files too.
fn warn_if_shared(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "{}: this private key can be read by other users (mode {mode:04o}); \
                     chmod 600 it",
                    path.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}
