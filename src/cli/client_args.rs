//! Flags shared by the client commands (`handshake`, `load`): TLS choices, roots, client
//! certificate, SNI — turned into a [`ClientTlsOptions`] and a [`Target`].

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::client::config::{ClientTlsOptions, Resume, Roots};
use crate::client::reload::RootsLoad;
use crate::client::target::Target;
use crate::tls::Provider;
use crate::tls::choices::{self, TlsVersion};

/// TLS flags of a client command.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Resumption: off (every handshake full), tickets, or ids (TLS 1.2 session ids).
    #[arg(long, value_enum, default_value_t = Resume::Tickets)]
    pub resume: Resume,
    /// Protocol versions (comma-separated): 1.2, 1.3.
    #[arg(long = "tls", value_enum, value_delimiter = ',')]
    pub versions: Vec<TlsVersion>,
    /// Key-exchange groups, preferred first: x25519, secp256r1, secp384r1, x25519mlkem768.
    #[arg(long, value_delimiter = ',')]
    pub groups: Vec<String>,
    /// Cipher suites (rustls names, e.g. TLS13_AES_128_GCM_SHA256).
    #[arg(long, value_delimiter = ',')]
    pub ciphers: Vec<String>,
    /// Crypto provider.
    #[arg(long, value_enum, default_value_t = Provider::AwsLcRs)]
    pub provider: Provider,
    /// Client certificate chain (PEM, a regular file of at most 16 MiB) for mTLS.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Client private key (PEM, a regular file of at most 16 MiB) for mTLS.
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Trust only the CAs in this PEM file (same as --roots FILE; a regular file of at
    /// most 128 MiB).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["roots", "insecure"])]
    pub cacert: Option<PathBuf>,
    /// Roots: system (the system store, loaded once), webpki (compiled-in Mozilla roots)
    /// or a PEM file (a regular file of at most 128 MiB).
    #[arg(long, default_value = "system")]
    pub roots: String,
    /// When the roots are loaded: once (shared by every connection), or per-handshake
    /// (read and decoded again inside every certificate verification, between the
    /// server's flight and the client's Finished: what a client that loads its CA bundle
    /// for each connection costs; no verdict cache then).
    #[arg(long, value_enum, default_value_t = RootsLoad::Once, conflicts_with = "insecure")]
    pub roots_load: RootsLoad,
    /// Do not verify the server's certificate (handshake signatures are still checked).
    #[arg(long, conflicts_with = "roots")]
    pub insecure: bool,
    /// Server name for SNI and verification (default: the URL's host).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
}

impl ClientArgs {
    /// The target named by `url`.
    pub fn target(&self, url: &str) -> Result<Target, CliError> {
        Ok(Target::parse(url, self.sni.as_deref())?)
    }

    /// The client options, with `alpn` offered.
    pub fn options(
        &self,
        alpn: Vec<Vec<u8>>,
        early_data: bool,
    ) -> Result<ClientTlsOptions, CliError> {
        let roots = if self.insecure {
            Roots::Insecure
        } else if let Some(p) = &self.cacert {
            Roots::File(p.clone())
        } else {
            self.roots.parse().map_err(CliError::input)?
        };
        let client_cert = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some(choices::read_key_pair(c, k)?),
            _ => None,
        };
        Ok(ClientTlsOptions {
            provider: self.provider,
            versions: self.versions.clone(),
            groups: self.groups.clone(),
            ciphers: self.ciphers.clone(),
            roots,
            resume: self.resume,
            session_cache: 256,
            early_data,
            client_cert,
            alpn,
            verify_cache: None,
            roots_load: self.roots_load,
        })
    }

    /// Says on stderr that verification is off.
    pub fn warn_if_insecure(&self, out: &super::Output) {
        if self.insecure {
            out.warn(
                "--insecure: server certificates are NOT verified; any server can impersonate \
                 this one",
            );
        }
    }
}
