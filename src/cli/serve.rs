//! `tlsperf serve`: flags → [`crate::server::config`] + [`crate::server`] → a running
//! server, a "listening" line, and a summary at shutdown (SIGINT, SIGTERM or --duration).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::runtime::{Threads, runtime};
use super::{CliError, Output};
use crate::files::{self, FileMode};
use crate::pki::KeyType;
use crate::report::text;
use crate::server::actix_stack::{ActixOptions, ActixServer};
use crate::server::config::{self as server_config, ClientAuth, Resumption, ServerTlsOptions};
use crate::server::quic::{QuicOptions, RetryPolicy, quic_tls};
use crate::server::{Rotation, ServeOptions, Server, Stack};
use crate::tls::Provider;
use crate::tls::choices::{self, TlsVersion};
use crate::tls::tickets::{self, TicketKeyRing};
use crate::trust::TrustStore;

/// Arguments of `tlsperf serve`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf serve --gen-cert ecdsa-p256 --write-ca ca.pem",
    "tlsperf serve --cert pki/server-chain.pem --key pki/server.key --metrics 127.0.0.1:9090",
]))]
pub struct ServeArgs {
    /// Address to listen on: IP:PORT or HOST:PORT (a host name listens on its first IPv4
    /// address, else its first address; port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8443", value_parser = parse_addr)]
    listen: SocketAddr,
    /// Bytes of the `GET /` response body (a JSON document of exactly that size; at most
    /// 67108864, 64 MiB, built once at start). A `POST /` (an upload, `load --body-size`)
    /// is read to its end, counted, and answered with the same body.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=MAX_BODY_SIZE))]
    body_size: u64,
    /// Certificate chain (PEM, leaf first; a regular file of at most 16 MiB).
    #[arg(
        long,
        value_name = "FILE",
        requires = "key",
        conflicts_with = "gen_cert"
    )]
    cert: Option<PathBuf>,
    /// Private key of --cert (PEM, a regular file of at most 16 MiB).
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// Generate an in-memory test PKI with this key type (the default when no --cert).
    #[arg(long, value_enum, value_name = "TYPE")]
    gen_cert: Option<KeyType>,
    /// Write the generated root CA here so that clients can trust it (once the listeners
    /// are bound: a start that fails leaves the file as it was).
    #[arg(long, value_name = "FILE")]
    write_ca: Option<PathBuf>,
    /// Crypto provider.
    #[arg(long, value_enum, default_value_t = Provider::AwsLcRs)]
    provider: Provider,
    /// Protocol versions (default: rustls's, 1.2 and 1.3).
    #[arg(
        long = "tls",
        value_enum,
        value_delimiter = ',',
        value_name = "VERSIONS"
    )]
    versions: Vec<TlsVersion>,
    /// Key-exchange groups in preference order, e.g. x25519,secp256r1,secp384r1,x25519mlkem768.
    #[arg(long, value_delimiter = ',', value_name = "GROUPS")]
    groups: Vec<String>,
    /// Cipher suites by rustls name, e.g. TLS13_AES_128_GCM_SHA256.
    #[arg(long, value_delimiter = ',', value_name = "SUITES")]
    ciphers: Vec<String>,
    /// Pick the cipher suite in the server's order (--ciphers, else the provider's: AES-256
    /// before AES-128) instead of the client's, as nginx's `ssl_prefer_server_ciphers on`.
    #[arg(long)]
    server_cipher_order: bool,
    /// Session resumption.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = Resumption::Stateful)]
    resumption: Resumption,
    /// Entries of the stateful session cache (1 to 1000000; about 100 bytes each are
    /// reserved at start).
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    session_cache: u64,
    /// TLS 1.3 tickets sent after each full handshake (0 to 16; each costs an encryption
    /// and about 200 bytes on the wire).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=16))]
    tickets_per_handshake: u64,
    /// Ticket key ring shared with other instances (needs --resumption tickets; see
    /// `tlsperf tickets`; a regular file of at most 64 KiB, mode 0600: readable by its
    /// owner only).
    #[arg(long, value_name = "FILE")]
    ticket_keys: Option<PathBuf>,
    /// Use a --ticket-keys file that its group or others can read (refused otherwise: it
    /// must be mode 0600), with a warning.
    #[arg(long, requires = "ticket_keys")]
    allow_insecure_key_file: bool,
    /// Rotate the --ticket-keys file this often (e.g. 1h; from 1s to 365d); one instance
    /// should do it.
    #[arg(long, value_name = "DURATION", value_parser = parse_rotate_every, requires = "ticket_keys")]
    rotate_every: Option<Duration>,
    /// Accept up to this many bytes of 0-RTT early data (rustls accepts it only with
    /// stateful resumption).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    early_data: u32,
    /// Staple this DER OCSP response (a regular file of at most 1 MiB). It must be a
    /// successful response for the leaf of --cert (serial and issuer), `good`, and current
    /// (thisUpdate at most 5 minutes ahead, nextUpdate not passed).
    #[arg(long, value_name = "FILE")]
    ocsp: Option<PathBuf>,
    /// Client certificates.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ClientAuth::Off)]
    client_auth: ClientAuth,
    /// Roots for client certificates (PEM bundle of at most 128 MiB, or directory).
    #[arg(long, value_name = "FILE")]
    client_ca: Option<PathBuf>,
    /// A certificate for one SNI name: NAME=CERT,KEY (repeatable; PEM files of at most 16
    /// MiB).
    #[arg(long, value_name = "NAME=CERT,KEY")]
    sni: Vec<String>,
    /// Refuse clients naming a host without an --sni certificate (default: serve the main
    /// certificate); counted as the failure `no-matching-sni`.
    #[arg(long, requires = "sni")]
    sni_strict: bool,
    /// Longest time from TCP accept to handshake complete (from 1ms to 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, default_value = "10s")]
    handshake_timeout: Duration,
    /// Longest time an HTTP/1.1 client may take to send the headers of a request, the
    /// first one counted from the handshake's end (from 1ms to 1h); slower clients are
    /// disconnected.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, default_value = "10s")]
    header_timeout: Duration,
    /// A request body (an upload) is read in windows of this long, from its request's
    /// head, and each must bring --body-min-rate × this many bytes (at least one) or the
    /// body's end; a slower upload is answered 408 and its connection closed (HTTP/2: at
    /// once, with its other streams; HTTP/3: the stream alone, its body refused), counted
    /// as body-timeout (from 1ms to 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, default_value = "10s")]
    body_timeout: Duration,
    /// The least rate, in bytes/s, a request body must keep over each --body-timeout
    /// window (0: one byte a window). A client trickling its body a byte at a time is cut
    /// within two windows; any upload at this rate or faster goes through however long.
    #[arg(long, value_name = "BYTES", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(0..=1 << 40))]
    body_min_rate: u64,
    /// Close a connection that has moved no byte, in either direction, for this long (from
    /// 1ms to 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout, default_value = "60s")]
    idle_timeout: Duration,
    /// Connections served at once; at the limit a new client that has sent its first
    /// bytes (its ClientHello) takes the place of the connection idle the longest (for at
    /// least 1 s), which is closed; else the new one is closed at accept, as is one that
    /// has sent nothing yet (itself idle: accepted after the kernel waited a second).
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000_000))]
    max_connections: usize,
    /// Runtime worker threads (default: one per core; at most 1024).
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    threads: Option<usize>,
    /// Listeners on the address, with SO_REUSEPORT when more than one.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    reuseport: u64,
    /// Serve Prometheus /metrics and a JSON /stats here (IP:PORT or HOST:PORT, as --listen).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    metrics: Option<SocketAddr>,
    /// Time in-flight requests get at shutdown.
    #[arg(long, value_name = "DURATION", value_parser = super::duration::parse, default_value = "5s")]
    shutdown_timeout: Duration,
    /// Keep up to N pre-generated key shares per Diffie-Hellman group (each used once).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    kx_pool: u64,
    /// HTTP server stack on top of the same rustls configuration: hyper (hyper-util),
    /// axum (an axum Router on the same accept loop) or actix (actix-web; no --metrics,
    /// no --early-data, and no handshake statistics in the summary).
    #[arg(long, value_enum, default_value_t = Stack::Hyper)]
    stack: Stack,
    /// Also serve HTTP/3 over QUIC on UDP, on the same port as --listen (quinn and h3 on
    /// the same rustls configuration: certificate, groups, resumption, --early-data,
    /// --client-auth; TLS 1.3 only, ALPN h3). TCP answers then carry `Alt-Svc:
    /// h3=":PORT"`. Not with --stack actix.
    #[arg(long, alias = "http3")]
    quic: bool,
    /// With --quic: answer every client whose address is not validated yet with a Retry
    /// (QUIC address validation: the client must echo the server's token, one more round
    /// trip). Without it, Retry engages on its own: see --quic-retry-above.
    #[arg(long, requires = "quic")]
    quic_retry: bool,
    /// With --quic: once N handshakes from client addresses not validated yet are under
    /// way (a flood of Initials from spoofed addresses holds each until
    /// --handshake-timeout), answer further unvalidated clients with a Retry; clients
    /// that come back with the token are not counted. Counted in /stats (`quic_retry`)
    /// and /metrics (`tlsperf_quic_retries_total`).
    #[arg(long, value_name = "N", requires = "quic", conflicts_with = "quic_retry", default_value_t = crate::server::quic::DEFAULT_RETRY_ABOVE as u64, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    quic_retry_above: u64,
    /// Stop by itself after this long, e.g. 60s (default: run until SIGINT or SIGTERM).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    duration: Option<Duration>,
}

/// The largest `--body-size`: 64 MiB.
const MAX_BODY_SIZE: u64 = 64 << 20;

/// `--rotate-every`: a duration from 1 s (a key ring rewritten at most once a second) to
/// 365 days (every duration flag's limit, [`super::duration::MAX`]; a timer tokio can hold).
fn parse_rotate_every(s: &str) -> Result<Duration, String> {
    let d = super::duration::parse(s)?;
    if d < Duration::from_secs(1) {
        return Err("must be at least 1s (the key ring is rewritten at every rotation)".into());
    }
    Ok(d)
}

/// `--listen` and `--metrics`: an IP:PORT, or a HOST:PORT resolved to its first IPv4
/// address (else its first address), as clients looking up `localhost` find one of them.
fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err("expected HOST:PORT or IP:PORT".into());
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("'{port}' is not a port number (0 to 65535)"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!(
            "no host before ':{port}': write e.g. 127.0.0.1:{port}, 0.0.0.0:{port} (every \
             IPv4 address) or [::]:{port}"
        ));
    }
    let addrs: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("cannot resolve '{host}': {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("'{host}' has no address"))
}

/// `--header-timeout` and `--idle-timeout`: from 1 ms to 1 h.
fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = super::duration::parse(s)?;
    if d < Duration::from_millis(1) || d > Duration::from_secs(3600) {
        return Err("must be from 1ms to 1h".into());
    }
    Ok(d)
}

/// A JSON line of `serve --json` other than the first: every line has an `event`.
#[derive(Serialize)]
struct Event<'a, T: Serialize> {
    event: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

#[derive(Serialize)]
struct Listening {
    event: &'static str,
    addr: SocketAddr,
    url: String,
    metrics: Option<SocketAddr>,
    /// The UDP address of HTTP/3 (`--quic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    quic: Option<SocketAddr>,
    provider: Provider,
    resumption: String,
    stack: Stack,
}

/// Flags the actix stack cannot honour: they need our accept loop.
fn check_stack(a: &ServeArgs) -> Result<(), CliError> {
    if a.stack != Stack::Actix {
        return Ok(());
    }
    if a.quic {
        return Err(CliError::input(
            "--quic is not available with --stack actix: HTTP/3 is served beside tlsperf's own accept loop (--stack hyper or axum)",
        ));
    }
    if a.metrics.is_some() {
        return Err(CliError::input(
            "--metrics is not available with --stack actix: the metrics come from tlsperf's own accept loop, which actix-web replaces",
        ));
    }
    if a.early_data > 0 {
        return Err(CliError::input(
            "--early-data is not available with --stack actix: actix-web's TLS acceptor does not read 0-RTT data out of rustls, so accepted early requests would be lost",
        ));
    }
    Ok(())
}

/// Runs `tlsperf serve`.
pub fn exec(a: ServeArgs, out: &Output) -> Result<(), CliError> {
    check_stack(&a)?;
    if a.metrics.is_some_and(|m| m == a.listen && m.port() != 0) {
        return Err(CliError::input(format!(
            "--metrics {} is the --listen address: give the metrics another port",
            a.listen
        )));
    }
    let (tls, ca_pem) = tls_options(&a)?;
    if a.early_data > 0 && a.resumption == Resumption::Tickets {
        out.warn(
            "--early-data with --resumption tickets: rustls accepts 0-RTT only with stateful \
             resumption, so clients' early data will be rejected",
        );
    }
    let ring = match (&a.ticket_keys, a.resumption) {
        (Some(path), Resumption::Tickets) => {
            match tickets::check_private(path) {
                Err(e @ tickets::TicketError::Insecure { .. }) if a.allow_insecure_key_file => {
                    out.warn(format!(
                        "{e}; using it anyway because of --allow-insecure-key-file"
                    ));
                }
                Err(e @ tickets::TicketError::Insecure { .. }) => return Err(e.into()),
                // Unreadable: TicketKeyRing::open says why.
                _ => {}
            }
            Some(TicketKeyRing::open(
                path,
                a.rotate_every.unwrap_or(Duration::from_secs(6 * 3600)),
            )?)
        }
        (Some(_), _) => return Err(CliError::input("--ticket-keys needs --resumption tickets")),
        (None, _) => None,
    };
    let mut tls = tls;
    tls.ticketer = ring
        .clone()
        .map(|r| r as std::sync::Arc<dyn rustls::server::ProducesTickets>);
    let built = server_config::build(&tls)?;
    let quic = if a.quic {
        let early = a.early_data > 0;
        Some(QuicOptions {
            tls: std::sync::Arc::new(quic_tls(&built.config, early)?),
            provider: a.provider,
            retry: if a.quic_retry {
                RetryPolicy::Always
            } else {
                RetryPolicy::Above(usize::try_from(a.quic_retry_above).unwrap_or(usize::MAX))
            },
            half_rtt: early && a.client_auth == ClientAuth::Off,
        })
    } else {
        None
    };
    let rotation = match (&a.ticket_keys, a.rotate_every, &ring) {
        (Some(path), Some(every), Some(ring)) => Some(Rotation {
            path: path.clone(),
            every,
            ring: ring.clone(),
        }),
        _ => None,
    };
    // Bound, so this server is the one its clients will reach: only now is --write-ca
    // replaced (a server already running on the address keeps its clients' CA file).
    let listening = |addr: SocketAddr,
                     metrics: Option<SocketAddr>,
                     quic: Option<SocketAddr>|
     -> Result<(), CliError> {
        if let (Some(path), Some(pem)) = (&a.write_ca, &ca_pem) {
            files::write_atomic(path, pem.as_bytes(), FileMode::Public, true)?;
        }
        let listening = Listening {
            event: "listening",
            addr,
            url: format!("https://{addr}/"),
            metrics,
            quic,
            provider: a.provider,
            resumption: format!("{:?}", a.resumption).to_lowercase(),
            stack: a.stack,
        };
        if out.json() {
            out.json_line(&listening)
        } else {
            out.text(&text::serve_listening(
                &listening.url,
                listening.metrics,
                listening.quic,
            ))
        }
    };
    if a.stack == Stack::Actix {
        let server = ActixServer::bind(ActixOptions {
            listen: a.listen,
            reuseport: usize::try_from(a.reuseport).unwrap_or(1),
            tls: built.config,
            workers: a.threads.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            }),
            max_connections: a.max_connections,
            handshake_timeout: a.handshake_timeout,
            header_timeout: a.header_timeout,
            idle_timeout: a.idle_timeout,
            shutdown_timeout: a.shutdown_timeout,
            body_size: a.body_size as usize,
            upload: crate::server::http::UploadLimits {
                timeout: a.body_timeout,
                min_rate: a.body_min_rate,
            },
            rotation,
            kx_pools: built.kx_pools,
        })?;
        listening(server.local_addr().unwrap_or(a.listen), None, None)?;
        let summary = server
            .run(async move { shutdown(a.duration).await })
            .map_err(|e| {
                CliError::runtime(anyhow::Error::new(e).context("the actix-web server failed"))
            })?;
        return if out.json() {
            out.json_line(&Event {
                event: "summary",
                body: &summary,
            })
        } else {
            out.text(&text::serve_summary_actix(&summary))
        };
    }
    let runtime = runtime(Threads::from_flag(a.threads), None)?;
    runtime.block_on(async {
        // Registered before the server starts, so no signal is lost to the default action.
        let shutdown = shutdown(a.duration);
        let server = Server::bind(ServeOptions {
            listen: a.listen,
            reuseport: usize::try_from(a.reuseport).unwrap_or(1),
            tls: built.config,
            kx_pools: built.kx_pools,
            handshake_timeout: a.handshake_timeout,
            header_timeout: a.header_timeout,
            idle_timeout: a.idle_timeout,
            upload: crate::server::http::UploadLimits {
                timeout: a.body_timeout,
                min_rate: a.body_min_rate,
            },
            max_connections: a.max_connections,
            body_size: a.body_size as usize,
            metrics_listen: a.metrics,
            shutdown_timeout: a.shutdown_timeout,
            rotation,
            stack: a.stack,
            quic,
        })?;
        listening(
            server.local_addr().unwrap_or(a.listen),
            server.metrics_addr(),
            server.quic_addr(),
        )?;
        let summary = server.run(shutdown).await;
        if out.json() {
            out.json_line(&Event {
                event: "summary",
                body: &summary,
            })
        } else {
            out.text(&text::serve_summary(&summary))
        }
    })
}

/// Resolves at the first SIGINT or SIGTERM (registered now: call inside the runtime that
/// polls it), or after `duration`; a second signal exits at once (130).
fn shutdown(duration: Option<Duration>) -> impl Future<Output = ()> {
    let signal = super::signals::first_then_exit();
    async move {
        let timer = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = signal => {}
            () = timer => {}
        }
    }
}

/// The TLS options, and with --gen-cert the generated root CA (PEM) for --write-ca, which
/// is written only once the listeners are bound.
fn tls_options(a: &ServeArgs) -> Result<(ServerTlsOptions, Option<String>), CliError> {
    let mut ca_pem = None;
    if a.write_ca.is_some() && a.cert.is_some() {
        return Err(CliError::input(
            "--write-ca goes with --gen-cert (with --cert you have the CA already)",
        ));
    }
    let cert = match (&a.cert, &a.key) {
        (Some(c), Some(k)) => choices::read_key_pair(c, k)?,
        _ => {
            if let Some(path) = &a.write_ca {
                // Refused now if it cannot be written; written after binding.
                files::check_writable(path)?;
            }
            let (pair, root_pem) =
                server_config::generated_key_pair(a.gen_cert.unwrap_or(KeyType::EcdsaP256))?;
            ca_pem = a.write_ca.as_ref().map(|_| root_pem);
            pair
        }
    };
    let ocsp = match &a.ocsp {
        Some(p) => Some(server_config::read_staple(p, &cert.0)?),
        None => None,
    };
    let sni = a
        .sni
        .iter()
        .map(|spec| server_config::sni_entry(spec).map(|(name, (chain, key))| (name, chain, key)))
        .collect::<Result<Vec<_>, _>>()?;
    let client_ca = match &a.client_ca {
        Some(p) if p.is_dir() => Some(TrustStore::from_dir(p)?),
        Some(p) => Some(TrustStore::from_pem_file(p)?),
        None => None,
    };
    if a.client_auth == ClientAuth::Off && client_ca.is_some() {
        return Err(CliError::input(
            "--client-ca needs --client-auth optional or required",
        ));
    }
    let tls = ServerTlsOptions {
        provider: a.provider,
        versions: a.versions.clone(),
        groups: a.groups.clone(),
        ciphers: a.ciphers.clone(),
        server_cipher_order: a.server_cipher_order,
        resumption: a.resumption,
        session_cache: a.session_cache as usize,
        tickets_per_handshake: a.tickets_per_handshake as usize,
        ticketer: None,
        early_data: a.early_data,
        cert,
        ocsp,
        sni,
        sni_strict: a.sni_strict,
        client_auth: a.client_auth,
        client_ca,
        // http/1.0 too, as nginx does: `curl --http1.0` offers only that.
        alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec(), b"http/1.0".to_vec()],
        kx_pool: usize::try_from(a.kx_pool).unwrap_or(usize::MAX),
    };
    Ok((tls, ca_pem))
}
