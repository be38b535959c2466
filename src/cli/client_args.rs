//! Flags shared by the client commands (`handshake`, `load`, `capacity`): TLS choices,
//! roots, client certificate, SNI — turned into a [`ClientTlsOptions`] and a [`Target`];
//! and what the two load generators (`load`, `capacity`) resolve alike from their own
//! flags ([`ClientArgs::generator`], [`worker_threads`], [`requests_per_conn`]).

use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::client::config::{self, BuiltClient, ClientTlsOptions, Resume};
use crate::client::reload::RootsLoad;
use crate::client::roots::Roots;
use crate::client::target::Target;
use crate::tls::Provider;
use crate::tls::choices::{self, TlsVersion};

/// TLS flags of a client command.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Resumption: off (every handshake full), tickets, or ids (TLS 1.2 session ids).
    #[arg(long, value_enum, value_name = "MODE", default_value_t = Resume::Tickets)]
    pub resume: Resume,
    /// Protocol versions (comma-separated): 1.2, 1.3.
    #[arg(long = "tls", value_enum, value_delimiter = ',')]
    pub versions: Vec<TlsVersion>,
    /// Key-exchange groups, preferred first: x25519, secp256r1, secp384r1, x25519mlkem768.
    #[arg(long, value_delimiter = ',')]
    pub groups: Vec<String>,
    /// Cipher suites (rustls names, e.g. TLS13_AES_128_GCM_SHA256).
    #[arg(long, value_delimiter = ',', value_name = "SUITES")]
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
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value_t = RootsLoad::Once,
        conflicts_with = "insecure"
    )]
    pub roots_load: RootsLoad,
    /// Do not verify the server's certificate (handshake signatures are still checked).
    #[arg(long, conflicts_with = "roots")]
    pub insecure: bool,
    /// Server name for SNI and verification (default: the URL's host).
    #[arg(long, value_name = "NAME")]
    pub sni: Option<String>,
    /// HTTP statuses that count as a success, comma-separated: 200, 200-299 or 2xx. Any
    /// other answer fails its request (counted as http-4xx or http-5xx, its latency left
    /// out): a server refusing the client or shedding load with fast 503s never passes
    /// for a fast one.
    #[arg(long, value_name = "STATUSES", default_value = "100-399")]
    pub ok_status: crate::client::status::OkStatus,
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
        // 0-RTT data rides on a resumed TLS 1.3 session: asked for where it cannot be
        // sent, it is refused rather than silently never sent.
        if early_data && self.resume == Resume::Off {
            return Err(CliError::input(
                "--early-data needs a session to resume: drop --resume off",
            ));
        }
        if early_data && !self.versions.is_empty() && !self.versions.contains(&TlsVersion::V1_3) {
            return Err(CliError::input(
                "--early-data needs TLS 1.3 (TLS 1.2 has no 0-RTT data): drop --tls 1.2",
            ));
        }
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

    /// Refuses, with `--http3`, what QUIC cannot carry: TLS 1.2 (`--tls 1.2`, `--resume
    /// ids`).
    pub fn check_http3(&self) -> Result<(), CliError> {
        if self.resume == Resume::Ids {
            return Err(CliError::input(
                "--resume ids is TLS 1.2's; --http3 is QUIC, TLS 1.3 only: use --resume tickets or off",
            ));
        }
        if self.versions.contains(&TlsVersion::V1_2) {
            return Err(CliError::input(
                "--http3 is QUIC, which carries TLS 1.3 only: drop 1.2 from --tls",
            ));
        }
        Ok(())
    }

    /// The target, options and built client of a load generator (`load`, `capacity`):
    /// HTTP/1.1, h2 or h3 offered by ALPN (with h3, the configuration checked for QUIC),
    /// the verify cache on unless `no_verify_cache`, and the warning when verification is
    /// off.
    pub fn generator(
        &self,
        url: &str,
        http: Http,
        early_data: bool,
        no_verify_cache: bool,
        out: &super::Output,
    ) -> Result<(Target, ClientTlsOptions, BuiltClient), CliError> {
        let target = self.target(url)?;
        let alpn = match http {
            Http::V1 => b"http/1.1".to_vec(),
            Http::V2 => b"h2".to_vec(),
            Http::V3 => b"h3".to_vec(),
        };
        let mut opts = self.options(vec![alpn], early_data)?;
        opts.verify_cache = Some(!no_verify_cache);
        self.warn_if_insecure(out);
        let built = config::build(&opts)?;
        if http == Http::V3 {
            crate::client::quic::quic_client_config(&built.config)
                .map_err(|e| CliError::input(format!("--http3: {e}: check --tls and --ciphers")))?;
        }
        Ok((target, opts, built))
    }
}

/// The HTTP version a load generator speaks: `--http1` (the default), `--http2` or
/// `--http3` (over QUIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Http {
    /// HTTP/1.1 over TLS over TCP.
    V1,
    /// HTTP/2 over TLS over TCP.
    V2,
    /// HTTP/3 over QUIC.
    V3,
}

impl Http {
    /// From the flags (clap keeps them exclusive).
    pub fn from_flags(http2: bool, http3: bool) -> Http {
        match (http2, http3) {
            (_, true) => Http::V3,
            (true, false) => Http::V2,
            (false, false) => Http::V1,
        }
    }

    /// As results record it (`options.http`): `1.1`, `2` or `3`.
    pub fn name(self) -> &'static str {
        match self {
            Http::V1 => "1.1",
            Http::V2 => "2",
            Http::V3 => "3",
        }
    }
}

/// How a load generator's client was set up, as its result's `options` record it (the
/// same keys in `load` and `capacity`): HTTP version, resumption, TLS versions, groups,
/// provider, roots, the verify cache, worker threads and requests per connection.
pub fn generator_settings(
    client: &ClientArgs,
    opts: &ClientTlsOptions,
    built: &BuiltClient,
    http: Http,
    no_verify_cache: bool,
    threads: usize,
    per_conn: Option<u64>,
) -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    let versions: Vec<&str> = client.versions.iter().map(|v| v.name()).collect();
    let mut settings = vec![
        ("requests_per_conn", json!(per_conn)),
        ("http", json!(http.name())),
        ("resume", json!(opts.resume)),
        ("tls", json!(versions)),
        ("groups", json!(opts.groups)),
        ("ciphers", json!(opts.ciphers)),
        ("provider", json!(opts.provider.name())),
        ("roots", json!(built.roots)),
        (
            "verify_cache",
            json!(!no_verify_cache && !client.insecure && client.roots_load == RootsLoad::Once),
        ),
        ("threads", json!(threads)),
    ];
    // Recorded when not the default, so that results of earlier versions (which counted
    // every status as a success) still merge with those of the default.
    if client.ok_status != crate::client::status::OkStatus::default() {
        settings.push(("ok_status", json!(client.ok_status.to_string())));
    }
    settings
}

/// The settings a generator's result records (its `options`): `settings` from
/// [`generator_settings`] and the command's own, then the link, and the body size of
/// uploads only (the documents of GET runs stay as they were).
pub fn settings_document(
    mut settings: Vec<(&'static str, serde_json::Value)>,
    link: Option<&crate::link::LinkSpec>,
    body_size: u64,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    use serde_json::json;
    settings.push(("link", json!(link.map(|l| l.to_string()))));
    if body_size > 0 {
        settings.push(("body_size", json!(body_size)));
    }
    settings
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// `--threads`, else one worker thread per CPU.
pub fn worker_threads(threads: Option<u64>) -> usize {
    threads
        .map(|t| t as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Requests per connection: 1 with `--new-conn`, else `--requests-per-conn` (`None`: keep
/// each connection while the server does).
pub fn requests_per_conn(new_conn: bool, requests_per_conn: Option<u64>) -> Option<u64> {
    if new_conn { Some(1) } else { requests_per_conn }
}
