//! `tlsperf lab`: the one-command TLS performance lab. It prepares certificates and key
//! files in a work directory, starts `tlsperf serve` instances on loopback ports
//! ([`server`]), and runs the load generator against every configuration of the matrix
//! ([`matrix`]) — a new connection per request, rounds alternating between a group's
//! cells — then compares each cell with its group's baseline ([`result`]). The engine
//! never prints: it reports progress through a callback and returns a [`LabResult`]; the
//! report sinks render it.

pub mod compare;
pub mod matrix;
pub mod pin;
pub mod result;
pub mod server;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;

use rustls::ClientConfig;
use rustls::client::WebPkiServerVerifier;

use crate::client::config::{self as client_config, ClientTlsOptions, Roots};
use crate::client::target::Target;
use crate::client::verifier::TimedVerifier;
use crate::load::{self, ConfigFactory, LoadOptions, LoadResult, Progress};
use crate::pki::ocsp::OCSP_FILE;
use crate::pki::{KeyType, PkiOptions, TestPki};
use crate::stats::LatencyHistogram;
use crate::stats::compare::{CompareOptions, Direction, compare};
use crate::stats::samples::Samples;
use crate::tls::choices::{self, ConfigError};
pub use matrix::{Cell, Group, TicketKeys, Trust};
pub use pin::Pinning;
pub use result::LabResult;
use result::{
    AaTally, CellResult, GroupResult, Machine, MeanSd, Recommendation, RoundMetrics, RunOptions,
    Versus,
};
use server::LabServer;

/// How to run the lab.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// `--full`: longer rounds, more of them, RSA-4096.
    pub full: bool,
    /// Rounds per cell (≥ 3 gives Welch's test something to work with).
    pub rounds: usize,
    /// Load per round.
    pub round_time: Duration,
    /// Unrecorded load each cell gets before its first round (its server's first
    /// connections, allocations and page faults stay out of the rounds).
    pub warmup: Duration,
    /// Connection slots of the load generator.
    pub connections: usize,
    /// Groups to run, in order.
    pub groups: Vec<Group>,
    /// The `tlsperf` executable that runs the servers.
    pub exe: PathBuf,
    /// Where certificates and key files go (a temporary directory).
    pub work_dir: PathBuf,
    /// An external server: only the client-side groups run, against it.
    pub target: Option<External>,
    /// Where the load generator and the servers run ([`pin::pin_client`] before the
    /// runtime starts); the servers are started on `server_cpu`.
    pub pinning: Pinning,
}

/// An external server for `--target`.
#[derive(Debug, Clone)]
pub struct External {
    /// Parsed URL.
    pub target: Target,
    /// Its roots (`--cacert`), else the system store.
    pub cacert: Option<PathBuf>,
}

impl LabOptions {
    /// `--quick` (default) or `--full` settings for `groups`. The drift of a shared
    /// machine between rounds is the main noise, so rounds are many and short: in
    /// quick mode 8 of 0.25 s per configuration (about 80 s for every group and its A/A
    /// control on 2 cores), in full mode 12 of 1 s.
    pub fn preset(full: bool, groups: Vec<Group>, exe: PathBuf, work_dir: PathBuf) -> Self {
        LabOptions {
            full,
            rounds: if full { 12 } else { 8 },
            round_time: if full {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(250)
            },
            warmup: if full {
                Duration::from_millis(500)
            } else {
                Duration::from_millis(100)
            },
            connections: 4,
            groups,
            exe,
            work_dir,
            target: None,
            pinning: pin::not_pinned("not asked for"),
        }
    }
}

/// Why the lab could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// A server could not be started.
    #[error("cannot start {what}")]
    Spawn {
        /// The command.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A server exited before saying where it listens.
    #[error("{what} did not start: {stderr}")]
    ServerStart {
        /// The command.
        what: String,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// Preparing certificates or files failed.
    #[error("preparing the lab in {dir}: {reason}")]
    Prepare {
        /// The work directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// A client configuration could not be built.
    #[error("client configuration for {cell}")]
    Client {
        /// The cell.
        cell: String,
        /// The cause.
        #[source]
        source: ConfigError,
    },
    /// The target could not be reached before the run: nothing was measured.
    #[error("{target}: the request before the run failed, so nothing was measured")]
    Unreachable {
        /// host:port.
        target: String,
        /// Why.
        #[source]
        source: crate::client::ConnectError,
    },
    /// The load generator failed to start a round.
    #[error("load round of {cell}")]
    Load {
        /// The cell.
        cell: String,
        /// The cause.
        #[source]
        source: load::LoadError,
    },
}

impl crate::error::Classify for LabError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Runtime
    }
}

/// Progress of a lab run, for a progress display.
#[derive(Debug, Clone)]
pub enum Event {
    /// Preparing certificates and servers.
    Preparing(String),
    /// A round of a cell is starting: `step` of `steps` in the whole run.
    Round {
        /// The group.
        group: Group,
        /// The cell.
        cell: String,
        /// Round number (1-based).
        round: usize,
        /// Rounds done so far in the whole run.
        step: usize,
        /// Rounds in the whole run.
        steps: usize,
    },
}

/// Stops a lab run from another task (Ctrl-C): the round running is abandoned, the
/// groups already finished are kept.
#[derive(Debug, Default)]
pub struct Control {
    stop: AtomicBool,
    current: Mutex<Option<Arc<Progress>>>,
}

impl Control {
    /// Asks the run to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            p.stop();
        }
    }

    /// True once [`Control::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn round(&self, p: Option<Arc<Progress>>) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }
}

/// Files the servers and clients use, per certificate type.
struct Prepared {
    pkis: BTreeMap<&'static str, PathBuf>,
    ticket_keys: PathBuf,
    bundle: PathBuf,
    bundle_note: String,
}

fn prep_err(dir: &Path, reason: impl std::fmt::Display) -> LabError {
    LabError::Prepare {
        dir: dir.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn prepare(opts: &LabOptions, on_event: &(dyn Fn(Event) + Sync)) -> Result<Prepared, LabError> {
    let dir = &opts.work_dir;
    let mut types = vec![KeyType::EcdsaP256];
    if opts.groups.contains(&Group::Certificate) {
        types.extend([KeyType::Ed25519, KeyType::Rsa2048]);
        if opts.full {
            types.push(KeyType::Rsa4096);
        }
    }
    let mut pkis = BTreeMap::new();
    for t in types {
        on_event(Event::Preparing(format!("{} certificates", t.name())));
        let pki = TestPki::generate(&PkiOptions {
            ca_key: KeyType::EcdsaP256,
            leaf_key: t,
            sans: PkiOptions::default_sans(),
            days: 30,
        })
        .map_err(|e| prep_err(dir, e))?;
        let d = dir.join(t.name());
        let mut extra = Vec::new();
        if t == KeyType::EcdsaP256 && opts.groups.contains(&Group::Ocsp) {
            // What the intermediate's responder would say about the server leaf (the
            // ocsp group's "on" cell staples it), valid for longer than any run.
            extra.push(crate::pki::ExtraFile {
                name: OCSP_FILE,
                contents: crate::pki::ocsp_response(&pki, Duration::from_secs(7 * 24 * 3600))
                    .map_err(|e| prep_err(dir, e))?,
                what: "OCSP response for the server leaf",
            });
        }
        crate::pki::write_pki_with(&pki, &d, true, extra).map_err(|e| prep_err(dir, e))?;
        pkis.insert(t.name(), d);
    }
    let ticket_keys = dir.join("ticket-keys.json");
    crate::tls::tickets::init(&ticket_keys, true).map_err(|e| prep_err(dir, e))?;
    // The trust group's bundle: the system's plus the lab's root, as a client of a
    // private CA would configure it.
    let probe = crate::trust::discover::probe_for_load(
        None,
        &crate::trust::discover::ProbeEnv::from_process(),
    );
    let system = probe
        .chosen_file
        .and_then(|i| probe.entries.get(i))
        .and_then(|e| e.resolved.clone().or_else(|| Some(e.path.clone())));
    let lab_root = crate::files::read_input_to_string(
        &pkis["ecdsa-p256"].join("root.pem"),
        crate::files::InputKind::Pem,
    )
    .map_err(|e| prep_err(dir, e))?;
    let (mut text, bundle_note) = match &system {
        Some(p) => match crate::files::read_input_to_string(p, crate::files::InputKind::Bundle) {
            Ok(t) => (
                t,
                format!("system bundle {} plus the lab's root", p.display()),
            ),
            Err(e) => return Err(prep_err(dir, format!("{}: {e}", p.display()))),
        },
        None => {
            // No system store: a synthetic one of the usual size.
            let b = crate::pki::generate_bundle(&crate::pki::BundleOptions {
                count: 145,
                cross_signed: 0,
                key: KeyType::EcdsaP256,
                key_pool: None,
                days: 30,
            })
            .map_err(|e| prep_err(dir, e))?;
            (
                b.pem,
                "no system bundle found: 145 generated CAs plus the lab's root".to_string(),
            )
        }
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&lab_root);
    let bundle = dir.join("bundle.pem");
    std::fs::write(&bundle, text).map_err(|e| prep_err(dir, e))?;
    Ok(Prepared {
        pkis,
        ticket_keys,
        bundle,
        bundle_note,
    })
}

/// The `tlsperf serve` arguments of a cell.
fn server_args(cell: &Cell, prep: &Prepared) -> Vec<String> {
    let pki = &prep.pkis[cell.cert.name()];
    let mut a: Vec<String> = vec![
        "--cert".into(),
        pki.join("server-chain.pem").display().to_string(),
        "--key".into(),
        pki.join("server.key").display().to_string(),
        "--resumption".into(),
        cell.server_resumption.into(),
        "--provider".into(),
        cell.provider.name().into(),
        "--stack".into(),
        cell.stack.name().into(),
    ];
    if cell.ticket_keys == TicketKeys::Shared {
        a.extend([
            "--ticket-keys".into(),
            prep.ticket_keys.display().to_string(),
        ]);
    }
    if cell.ocsp {
        a.extend(["--ocsp".into(), pki.join(OCSP_FILE).display().to_string()]);
    }
    if cell.mtls {
        a.extend([
            "--client-auth".into(),
            "required".into(),
            "--client-ca".into(),
            pki.join("root.pem").display().to_string(),
        ]);
    }
    a
}

/// A client configuration loaded now the way most Rust programs do it — rustls-native-certs
/// (the `bundle` file, or with `None` the system store through `load_native_certs()`),
/// `RootCertStore`, rustls's WebPKI verifier — wrapped in the timing verifier.
fn reloaded_config(
    bundle: Option<&Path>,
    opts: &ClientTlsOptions,
) -> Result<Arc<ClientConfig>, ConfigError> {
    let provider = Arc::new(choices::customized_provider(
        opts.provider,
        &opts.groups,
        &opts.ciphers,
    )?);
    let loaded = match bundle {
        Some(path) => rustls_native_certs::load_certs_from_paths(Some(path), None),
        None => {
            // rustls-native-certs would block on a FIFO named by SSL_CERT_FILE.
            crate::trust::discover::check_ssl_cert_file().map_err(|e| ConfigError::BadFile {
                path: std::env::var_os("SSL_CERT_FILE").unwrap_or_default().into(),
                reason: e.to_string(),
            })?;
            rustls_native_certs::load_native_certs()
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(loaded.certs);
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .build()
        .map_err(|e| match bundle {
            Some(path) => ConfigError::BadFile {
                path: path.to_path_buf(),
                reason: format!("no usable roots: {e}"),
            },
            None => ConfigError::BadChoice {
                flag: "--roots system",
                reason: format!("no usable roots in the system store: {e}"),
            },
        })?;
    let versions = choices::protocol_versions(&opts.versions);
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|source| ConfigError::Rustls {
            what: "--tls/--groups".into(),
            source,
        })?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(TimedVerifier::new(inner)))
        .with_no_client_auth();
    config.alpn_protocols = opts.alpn.clone();
    config.resumption = client_config::resumption(opts.resume, 1);
    Ok(Arc::new(config))
}

/// The client options of a cell.
fn client_options(
    cell: &Cell,
    prep: Option<&Prepared>,
    external: Option<&External>,
) -> Result<ClientTlsOptions, LabError> {
    let err = |source| LabError::Client {
        cell: format!("{}/{}", cell.group.name(), cell.name),
        source,
    };
    let roots = match (external, prep) {
        (Some(ext), _) => match (&ext.cacert, cell.trust) {
            (Some(p), _) => Roots::File(p.clone()),
            (None, _) => Roots::System,
        },
        (None, Some(prep)) => match cell.trust {
            Trust::Trimmed => Roots::File(prep.pkis[cell.cert.name()].join("root.pem")),
            Trust::SharedBundle | Trust::ReloadPerConnection => Roots::File(prep.bundle.clone()),
        },
        (None, None) => Roots::System,
    };
    let client_cert = match (cell.mtls, prep) {
        (true, Some(prep)) => {
            let pki = &prep.pkis[cell.cert.name()];
            Some((
                choices::read_chain(&pki.join("client-chain.pem")).map_err(err)?,
                choices::read_key(&pki.join("client.key")).map_err(err)?,
            ))
        }
        _ => None,
    };
    Ok(ClientTlsOptions {
        provider: cell.provider,
        versions: cell.version.into_iter().collect(),
        groups: cell.kx.map(|k| vec![k.to_string()]).unwrap_or_default(),
        ciphers: Vec::new(),
        roots,
        resume: cell.resume,
        session_cache: 256,
        early_data: false,
        client_cert,
        alpn: vec![b"http/1.1".to_vec()],
        // Every chain verified, as a rustls client does: the lab compares what
        // verification costs.
        verify_cache: Some(false),
    })
}

/// The cells of a group; against an external server only the client's side varies.
fn runnable(group: Group, full: bool, external: Option<&External>) -> Vec<Cell> {
    let mut cells = matrix::cells(group, full);
    let Some(ext) = external else {
        return cells;
    };
    let roots = if ext.cacert.is_some() {
        "--cacert file"
    } else {
        "system store"
    };
    match group {
        Group::Resumption => {
            // The server's resumption is what it is: the client resumes or not.
            cells.retain(|c| c.name == "off" || c.name == "tickets");
            for c in &mut cells {
                if c.name == "off" {
                    c.label = "client does not resume".into();
                } else {
                    c.name = "resume".into();
                    c.label =
                        "client resumes (tickets or session ids, as the server offers)".into();
                }
            }
        }
        Group::Trust => {
            cells.retain(|c| c.trust != Trust::Trimmed);
            for c in &mut cells {
                c.label = match c.trust {
                    Trust::SharedBundle => format!("{roots} loaded once, shared"),
                    _ => format!("{roots} reloaded for every connection"),
                };
            }
        }
        _ => cells.retain(|c| c.instances == 1 && !c.mtls),
    }
    cells
}

/// A cell ready to run: its servers, client configuration and where to connect.
struct Live {
    cell: Cell,
    servers: Vec<LabServer>,
    addrs: Vec<SocketAddr>,
    config: Arc<ClientConfig>,
    factory: Option<ConfigFactory>,
    rounds: Vec<LoadResult>,
    server_cpu: Vec<Option<f64>>,
}

/// Runs the lab. `on_event` sees progress; `control` can stop it (the groups finished
/// so far are returned, marked interrupted).
pub async fn run(
    opts: &LabOptions,
    on_event: &(dyn Fn(Event) + Sync),
    control: &Control,
) -> Result<LabResult, LabError> {
    let started_wall = time::OffsetDateTime::now_utc();
    let t0 = Instant::now();
    let external = opts.target.as_ref();
    let plan: Vec<(Group, Vec<Cell>)> = opts
        .groups
        .iter()
        .filter(|g| external.is_none() || g.client_side())
        .map(|&g| (g, runnable(g, opts.full, external)))
        .filter(|(_, cells)| cells.len() >= 2)
        .map(|(g, mut cells)| {
            // The A/A control: the baseline again, compared like any other cell.
            let control = cells[0].control_of();
            cells.push(control);
            (g, cells)
        })
        .collect();
    if let (Some(ext), Some((_, cells))) = (external, plan.first()) {
        on_event(Event::Preparing(format!("connecting to {}", ext.target)));
        preflight(ext, &cells[0]).await?;
    }
    let prep = match external {
        Some(_) => None,
        None => Some(prepare(opts, on_event)?),
    };
    let mut notes: Vec<String> = Vec::new();
    if let Some(p) = &prep {
        notes.push(format!("Client trust bundle: {}.", p.bundle_note));
    }
    if external.is_some() {
        let skipped: Vec<&str> = opts
            .groups
            .iter()
            .filter(|g| !g.client_side())
            .map(|g| g.name())
            .collect();
        if !skipped.is_empty() {
            notes.push(format!(
                "Against an external server only client-side groups run; skipped: {}.",
                skipped.join(", ")
            ));
        }
    }
    let steps: usize = plan.iter().map(|(_, c)| c.len() * opts.rounds).sum();
    let mut step = 0;
    let mut groups = Vec::new();
    let mut interrupted = false;
    'groups: for (group, cells) in plan {
        let mut live = Vec::new();
        for cell in cells {
            on_event(Event::Preparing(format!(
                "{} / {}: {}",
                group.name(),
                cell.name,
                if external.is_some() {
                    "preparing the client"
                } else {
                    "starting servers"
                }
            )));
            live.push(start_cell(cell, prep.as_ref(), external, opts)?);
        }
        if !opts.warmup.is_zero() {
            for l in &mut live {
                if control.stopped() {
                    interrupted = true;
                    break 'groups;
                }
                on_event(Event::Preparing(format!(
                    "{} / {}: warming up",
                    group.name(),
                    l.cell.name
                )));
                if !run_round(l, opts, external, control, opts.warmup, false).await? {
                    interrupted = true;
                    break 'groups;
                }
            }
        }
        // Each round runs every cell once, in a new random order: drift of the machine
        // spreads over the cells instead of following their position.
        let mut order: Vec<usize> = (0..live.len()).collect();
        for round in 1..=opts.rounds {
            order.shuffle(&mut rand::rng());
            for &i in &order {
                let l = &mut live[i];
                if control.stopped() {
                    interrupted = true;
                    break 'groups;
                }
                step += 1;
                on_event(Event::Round {
                    group,
                    cell: l.cell.name.clone(),
                    round,
                    step,
                    steps,
                });
                let done = run_round(l, opts, external, control, opts.round_time, true).await?;
                if !done {
                    interrupted = true;
                    break 'groups;
                }
            }
        }
        groups.push(finish_group(group, live));
    }
    let crypto_limits = if external.is_none() && !groups.is_empty() && !control.stopped() {
        on_event(Event::Preparing("crypto limits".into()));
        crypto_limits(&mut groups)
    } else {
        Vec::new()
    };
    let recommendations = recommend(&groups);
    let aa_control = aa_tally(&groups);
    Ok(LabResult {
        schema: <LabResult as crate::doc::Document>::SCHEMA.to_string(),
        started: started_wall
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        duration_s: t0.elapsed().as_secs_f64(),
        machine: machine(opts.pinning.clone()),
        options: RunOptions {
            mode: if opts.full { "full" } else { "quick" }.into(),
            rounds: opts.rounds,
            round_s: opts.round_time.as_secs_f64(),
            warmup_s: opts.warmup.as_secs_f64(),
            connections: opts.connections,
            target: external.map(|e| e.target.to_string()),
        },
        interrupted,
        groups,
        recommendations,
        crypto_limits,
        notes,
        aa_control,
    })
}

/// One request to the external server with the first cell's client configuration,
/// before anything is measured: a server that is down, or whose certificate the lab
/// cannot verify, stops the run here with the reason.
async fn preflight(ext: &External, cell: &Cell) -> Result<(), LabError> {
    let copts = client_options(cell, None, Some(ext))?;
    let built = client_config::build(&copts).map_err(|source| LabError::Client {
        cell: format!("{}/{}", cell.group.name(), cell.name),
        source,
    })?;
    let request = crate::client::http1::get_request(&ext.target.authority, &ext.target.path, true);
    crate::client::exchange::exchange(
        &ext.target,
        built.config,
        &request,
        false,
        Duration::from_secs(5),
    )
    .await
    .map(|_| ())
    .map_err(|source| LabError::Unreachable {
        target: format!("{}:{}", ext.target.host, ext.target.port),
        source,
    })
}

/// How many A/A comparisons came out significant, per metric.
fn aa_tally(groups: &[GroupResult]) -> AaTally {
    let mut t = AaTally {
        alpha: result::ALPHA,
        ..AaTally::default()
    };
    for c in groups.iter().flat_map(|g| &g.cells).filter(|c| c.control) {
        for (metric, v) in &c.vs_baseline {
            let e = t.metrics.entry(metric.clone()).or_default();
            e.compared += 1;
            t.compared += 1;
            if v.significant {
                e.significant += 1;
                t.significant += 1;
            }
        }
    }
    t
}

/// Measures the server-side crypto limit of every configuration run (short
/// measurements: 3 rounds of 50 ms per operation) and fills each cell's
/// `crypto_limit_pct`.
fn crypto_limits(groups: &mut [GroupResult]) -> Vec<result::CryptoLimit> {
    use crate::crypto::handshake::{Kind, TlsVersion as V};
    use crate::crypto::kx::{KxGroup, Side};
    use crate::crypto::limit::{self, LimitOptions};
    use crate::crypto::measure::MeasureOptions;
    use clap::ValueEnum;
    let Ok(measure) = MeasureOptions::new(0.05, 3) else {
        return Vec::new();
    };
    let mut limits: Vec<result::CryptoLimit> = Vec::new();
    for g in groups.iter_mut() {
        for c in &mut g.cells {
            let Ok(cell) = serde_json::from_value::<CellKey>(c.settings.clone()) else {
                continue;
            };
            // The default groups negotiate X25519 with tlsperf serve.
            let Ok(kx) = KxGroup::from_str(cell.kx.as_deref().unwrap_or("x25519"), true) else {
                continue;
            };
            let (Ok(provider), Ok(cert)) = (
                crate::tls::Provider::from_str(&cell.provider, true),
                KeyType::from_str(&cell.cert, true),
            ) else {
                continue;
            };
            let tls = if cell.version.as_deref() == Some("1.2") {
                V::Tls12
            } else {
                V::Tls13
            };
            let tls_name = if tls == V::Tls12 { "1.2" } else { "1.3" };
            let known = limits.iter().position(|l| {
                l.provider == provider.name()
                    && l.cert == cert.name()
                    && l.group == kx.to_string()
                    && l.tls == tls_name
            });
            let idx = match known {
                Some(i) => i,
                None => {
                    let Ok(report) = limit::run(&LimitOptions {
                        provider,
                        cert,
                        group: kx,
                        tls,
                        measure,
                    }) else {
                        continue;
                    };
                    let ns = |kind: Kind| {
                        report
                            .limits
                            .iter()
                            .find(|l| l.kind == kind && l.side == Side::Server)
                            .map_or(0.0, |l| l.crypto_ns)
                    };
                    let full_ns = ns(Kind::Full);
                    limits.push(result::CryptoLimit {
                        provider: provider.name().into(),
                        cert: cert.name().into(),
                        group: kx.to_string(),
                        tls: tls_name.into(),
                        full_ns,
                        resumed_ns: ns(Kind::Resumed),
                        full_per_s: if full_ns > 0.0 { 1e9 / full_ns } else { 0.0 },
                    });
                    limits.len() - 1
                }
            };
            let l = &limits[idx];
            let r = c.summary.get("resumption_rate").map_or(0.0, |m| m.mean);
            let crypto_ns = l.full_ns * (1.0 - r) + l.resumed_ns * r;
            c.crypto_limit_pct = c
                .summary
                .get("server_cpu_us_per_handshake")
                .filter(|m| m.mean > 0.0)
                .map(|m| crypto_ns / (m.mean * 1e3) * 100.0);
        }
    }
    limits
}

/// The settings of a cell the crypto limit depends on (read back from its JSON form).
#[derive(serde::Deserialize)]
struct CellKey {
    provider: String,
    cert: String,
    kx: Option<String>,
    version: Option<String>,
}

fn start_cell(
    cell: Cell,
    prep: Option<&Prepared>,
    external: Option<&External>,
    opts: &LabOptions,
) -> Result<Live, LabError> {
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    if let Some(prep) = prep {
        // Long enough for every round of the run, bounded in any case.
        let bound = Duration::from_secs(600);
        for _ in 0..cell.instances {
            let s = LabServer::start(
                &opts.exe,
                &server_args(&cell, prep),
                bound,
                opts.pinning.server_cpu,
            )?;
            addrs.push(s.addr);
            servers.push(s);
        }
    }
    let copts = client_options(&cell, prep, external)?;
    let built = client_config::build(&copts).map_err(|source| LabError::Client {
        cell: format!("{}/{}", cell.group.name(), cell.name),
        source,
    })?;
    let factory = match (cell.trust, prep, external) {
        (Trust::ReloadPerConnection, Some(prep), _) => {
            let bundle = prep.bundle.clone();
            let copts = Arc::new(copts);
            Some(ConfigFactory(Arc::new(move || {
                reloaded_config(Some(&bundle), &copts)
            })))
        }
        (Trust::ReloadPerConnection, None, Some(ext)) => {
            let cacert = ext.cacert.clone();
            let copts = Arc::new(copts);
            // Without --cacert: the system store through rustls-native-certs, as a client
            // with no roots configured loads it.
            Some(ConfigFactory(Arc::new(move || {
                reloaded_config(cacert.as_deref(), &copts)
            })))
        }
        _ => None,
    };
    Ok(Live {
        cell,
        servers,
        addrs,
        config: built.config,
        factory,
        rounds: Vec::new(),
        server_cpu: Vec::new(),
    })
}

/// One round of a cell, `duration` long, kept when `record` (else a warm-up); `false`
/// when stopped.
async fn run_round(
    l: &mut Live,
    opts: &LabOptions,
    external: Option<&External>,
    control: &Control,
    duration: Duration,
    record: bool,
) -> Result<bool, LabError> {
    let target = match external {
        Some(e) => e.target.clone(),
        None => Target::parse(&format!("https://localhost:{}/", l.addrs[0].port()), None).map_err(
            |e| LabError::Prepare {
                dir: opts.work_dir.clone(),
                reason: e.to_string(),
            },
        )?,
    };
    let load_opts = LoadOptions {
        requests: None,
        duration: Some(duration),
        connections: opts.connections,
        rate: None,
        requests_per_conn: Some(1),
        http2: false,
        timeout: Duration::from_secs(5),
        threads: 1,
        server_pid: l.servers.first().map(LabServer::pid),
        resume: l.cell.resume,
        echo: BTreeMap::new(),
        early_data: false,
        verdicts: None,
        addrs: l.addrs.clone(),
        config_per_connection: l.factory.clone(),
        schedule_offset: Duration::ZERO,
        start_at: None,
    };
    let cpu0: Vec<Option<Duration>> = l
        .servers
        .iter()
        .map(|s| load::usage::proc_cpu_precise(s.pid()).ok())
        .collect();
    let progress = Arc::new(Progress::default());
    control.round(Some(Arc::clone(&progress)));
    let result = load::run(target, Arc::clone(&l.config), load_opts, progress).await;
    control.round(None);
    let result = result.map_err(|source| LabError::Load {
        cell: format!("{}/{}", l.cell.group.name(), l.cell.name),
        source,
    })?;
    if result.interrupted || control.stopped() {
        return Ok(false);
    }
    let cpu: Option<f64> = l
        .servers
        .iter()
        .zip(&cpu0)
        .map(|(s, c0)| {
            let c1 = load::usage::proc_cpu_precise(s.pid()).ok()?;
            Some(c1.saturating_sub((*c0)?).as_secs_f64())
        })
        .sum();
    if record {
        l.server_cpu.push(cpu.filter(|_| !l.servers.is_empty()));
        l.rounds.push(result);
    }
    Ok(true)
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

fn round_metrics(r: &LoadResult, server_cpu_s: Option<f64>) -> RoundMetrics {
    let tls = r.phases.get("tls").map(|d| d.quantiles);
    let tls_ms =
        |f: fn(&crate::stats::Quantiles) -> u64| tls.as_ref().map_or(0.0, |q| ms(f(q) as f64));
    let q = &r.latency.quantiles;
    RoundMetrics {
        completed: r.requests.completed,
        failed: r.requests.failed,
        requests_per_s: r.requests.per_second,
        handshakes_per_s: r.handshakes.per_second,
        resumption_rate: r.handshakes.resumption_rate,
        handshake_p50_ms: tls_ms(|q| q.p50_ns),
        handshake_p95_ms: tls_ms(|q| q.p95_ns),
        handshake_p99_ms: tls_ms(|q| q.p99_ns),
        request_mean_ms: ms(q.mean_ns),
        request_p50_ms: ms(q.p50_ns as f64),
        request_p95_ms: ms(q.p95_ns as f64),
        request_p99_ms: ms(q.p99_ns as f64),
        server_cpu_us_per_handshake: server_cpu_s
            .filter(|_| r.handshakes.total > 0)
            .map(|s| s * 1e6 / r.handshakes.total as f64),
        server_rss_kib: r.server.as_ref().map(|s| s.rss_max_kib),
        client_cpu_us_per_handshake: r.generator.cpu_us_per_handshake,
    }
}

/// The metrics summarized and charted, by name, from a round.
fn metric_values(m: &RoundMetrics) -> Vec<(&'static str, Option<f64>)> {
    vec![
        ("requests_per_s", Some(m.requests_per_s)),
        ("handshakes_per_s", Some(m.handshakes_per_s)),
        ("resumption_rate", Some(m.resumption_rate)),
        ("handshake_p50_ms", Some(m.handshake_p50_ms)),
        ("handshake_p95_ms", Some(m.handshake_p95_ms)),
        ("handshake_p99_ms", Some(m.handshake_p99_ms)),
        ("request_mean_ms", Some(m.request_mean_ms)),
        ("request_p50_ms", Some(m.request_p50_ms)),
        ("request_p95_ms", Some(m.request_p95_ms)),
        ("request_p99_ms", Some(m.request_p99_ms)),
        ("server_cpu_us_per_handshake", m.server_cpu_us_per_handshake),
        ("server_rss_kib", m.server_rss_kib.map(|k| k as f64)),
        ("client_cpu_us_per_handshake", m.client_cpu_us_per_handshake),
    ]
}

fn mean_sd(v: &[f64]) -> MeanSd {
    let n = v.len() as f64;
    if v.is_empty() {
        return MeanSd::default();
    }
    let mean = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    MeanSd { mean, sd }
}

fn merged(
    rounds: &[LoadResult],
    pick: impl Fn(&LoadResult) -> Option<&LatencyHistogram>,
) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for r in rounds {
        if let Some(x) = pick(r) {
            let _ = h.merge(x);
        }
    }
    h
}

fn finish_group(group: Group, live: Vec<Live>) -> GroupResult {
    let baseline = live
        .first()
        .map(|l| l.cell.name.clone())
        .unwrap_or_default();
    let mut cells: Vec<CellResult> = Vec::new();
    // Handshake histograms share bins across the group so that bars compare.
    let all_hs: Vec<LatencyHistogram> = live
        .iter()
        .map(|l| {
            let mut h = merged(&l.rounds, |r| r.handshake_full.as_ref().map(|d| &d.hdr));
            let _ = h.merge(&merged(&l.rounds, |r| {
                r.handshake_resumed.as_ref().map(|d| &d.hdr)
            }));
            h
        })
        .collect();
    let hi = all_hs
        .iter()
        .map(|h| h.quantile(0.99).as_nanos() as u64)
        .max()
        .unwrap_or(1)
        .max(1);
    for (i, l) in live.iter().enumerate() {
        let rounds: Vec<RoundMetrics> = l
            .rounds
            .iter()
            .zip(&l.server_cpu)
            .map(|(r, c)| round_metrics(r, *c))
            .collect();
        let mut summary = BTreeMap::new();
        for (k, _) in metric_values(&RoundMetrics::default()) {
            // Rounds where nothing succeeded have no figures.
            let v: Vec<f64> = rounds
                .iter()
                .filter(|m| m.completed > 0)
                .filter_map(|m| metric_values(m).into_iter().find(|(n, _)| *n == k)?.1)
                .collect();
            if !v.is_empty() {
                summary.insert(k.to_string(), mean_sd(&v));
            }
        }
        let latency = merged(&l.rounds, |r| Some(&r.latency.hdr));
        let request_cdf = if latency.is_empty() {
            Vec::new()
        } else {
            (0..=100)
                .map(|i| {
                    let q = f64::from(i) / 100.0;
                    [ms(latency.quantile(q).as_nanos() as f64), q]
                })
                .collect()
        };
        let hist = |h: LatencyHistogram| -> Vec<[f64; 2]> {
            if h.is_empty() {
                return Vec::new();
            }
            h.bins(0, hi, 30)
                .into_iter()
                .map(|(s, c)| [ms(s as f64), c as f64])
                .collect()
        };
        let mut errors = BTreeMap::new();
        for r in &l.rounds {
            for (k, v) in &r.errors {
                *errors.entry(k.clone()).or_default() += v;
            }
        }
        // A configuration whose requests fail (more than 1% of those attempted) is not
        // compared: its figures would count failures as speed.
        let attempted: u64 = rounds.iter().map(|m| m.completed + m.failed).sum();
        let failed_requests: u64 = rounds.iter().map(|m| m.failed).sum();
        let failure_rate = if attempted > 0 {
            failed_requests as f64 / attempted as f64
        } else {
            1.0
        };
        let failed = failure_rate > result::FAILED_SHARE;
        let mut vs_baseline = BTreeMap::new();
        if i > 0 && !failed && !cells[0].failed {
            let base = &cells[0].rounds;
            for (metric, higher) in result::COMPARED {
                if let Some(v) = versus(base, &rounds, metric, direction(higher)) {
                    vs_baseline.insert(metric.to_string(), v);
                }
            }
        }
        cells.push(CellResult {
            name: l.cell.name.clone(),
            label: l.cell.label.clone(),
            settings: serde_json::to_value(&l.cell).unwrap_or_default(),
            control: l.cell.control,
            failed,
            failure_rate,
            rounds,
            summary,
            vs_baseline,
            request_cdf,
            handshake_full_hist: hist(merged(&l.rounds, |r| {
                r.handshake_full.as_ref().map(|d| &d.hdr)
            })),
            handshake_resumed_hist: hist(merged(&l.rounds, |r| {
                r.handshake_resumed.as_ref().map(|d| &d.hdr)
            })),
            errors,
            crypto_limit_pct: None,
        });
    }
    GroupResult {
        group: group.name().to_string(),
        title: group.title().to_string(),
        baseline,
        cells,
    }
}

fn direction(higher_is_better: bool) -> Direction {
    if higher_is_better {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    }
}

/// `metric` of the rounds where something completed.
fn pick(rounds: &[RoundMetrics], metric: &str) -> Vec<f64> {
    rounds
        .iter()
        .filter(|m| m.completed > 0)
        .filter_map(|m| metric_values(m).into_iter().find(|(n, _)| *n == metric)?.1)
        .collect()
}

/// Welch's test of `metric` over the rounds of the baseline and a cell (all of them: no
/// outlier filter), with its minimum detectable effect.
pub fn versus(
    base: &[RoundMetrics],
    cell: &[RoundMetrics],
    metric: &str,
    direction: Direction,
) -> Option<Versus> {
    let a = Samples {
        source: "baseline".into(),
        values: pick(base, metric),
    };
    let b = Samples {
        source: "cell".into(),
        values: pick(cell, metric),
    };
    let c = compare(
        &a,
        &b,
        &CompareOptions {
            alpha: result::ALPHA,
            // The rounds as measured: with 8 rounds a side, dropping the extreme ones
            // before the t-test understates the spread, and raised the A/A controls'
            // false-positive rate above α on a busy 2-core machine.
            filter: false,
            direction,
        },
    )
    .ok()?;
    let mde = (c.a.summary.mean != 0.0)
        .then(|| {
            crate::stats::min_detectable_difference(
                &c.a.summary,
                &c.b.summary,
                result::ALPHA,
                result::POWER,
            )
        })
        .flatten()
        .map(|d| d / c.a.summary.mean.abs());
    let p = crate::stats::compare::format_p(c.welch.p);
    let detectable = mde.map_or(String::new(), |m| {
        format!(
            "; it would detect a change of ±{:.1}% with 80% power",
            m * 100.0
        )
    });
    let verdict = match (c.significant, c.relative_change) {
        (true, Some(r)) => {
            let better = (r > 0.0) == (direction == Direction::HigherIsBetter);
            format!(
                "significantly {} than the baseline: {:+.1}% (Welch p = {p}){detectable}",
                if better { "better" } else { "worse" },
                r * 100.0
            )
        }
        _ => match mde {
            Some(m) => format!(
                "no significant difference (Welch p = {p}): no difference larger than about ±{:.1}% (80% power, α = 0.05)",
                m * 100.0
            ),
            None => format!("no significant difference (Welch p = {p})"),
        },
    };
    Some(Versus {
        relative_change: c.relative_change,
        p: c.welch.p,
        significant: c.significant,
        mde,
        outliers_dropped: [c.a.outliers_dropped, c.b.outliers_dropped],
        verdict,
    })
}

fn recommend(groups: &[GroupResult]) -> Vec<Recommendation> {
    let metrics = [
        (
            "server_cpu_us_per_handshake",
            Direction::LowerIsBetter,
            "server CPU per handshake",
        ),
        (
            "handshakes_per_s",
            Direction::HigherIsBetter,
            "handshakes/s",
        ),
        (
            "request_mean_ms",
            Direction::LowerIsBetter,
            "mean request latency",
        ),
    ];
    let mut out = Vec::new();
    for g in groups {
        let Some(group) = Group::ALL.into_iter().find(|x| x.name() == g.group) else {
            continue;
        };
        let Some(base) = g.cells.first().filter(|b| !b.failed) else {
            continue;
        };
        // Neither the A/A control nor a failed cell is a change to make.
        let mut pairs: Vec<(&CellResult, &CellResult, BTreeMap<String, Versus>)> = g
            .cells
            .iter()
            .skip(1)
            .filter(|c| !c.control && !c.failed)
            .map(|c| (base, c, c.vs_baseline.clone()))
            .collect();
        for (from, to) in matrix::extra_pairs(group) {
            let find = |n: &str| g.cells.iter().find(|c| c.name == n);
            let (Some(a), Some(b)) = (find(from), find(to)) else {
                continue;
            };
            if a.failed || b.failed {
                continue;
            }
            let vs = metrics
                .iter()
                .filter_map(|(m, d, _)| Some((m.to_string(), versus(&a.rounds, &b.rounds, m, *d)?)))
                .collect();
            pairs.push((a, b, vs));
        }
        for (from, to, vs) in pairs {
            // Each metric's gain (positive: better) when significant.
            let wins: Vec<(&str, &str, f64, f64)> = metrics
                .iter()
                .filter_map(|(m, d, what)| {
                    let v = vs.get(*m)?;
                    let sign = if *d == Direction::HigherIsBetter {
                        1.0
                    } else {
                        -1.0
                    };
                    let gain = v.relative_change? * sign;
                    v.significant.then_some((*m, *what, gain, v.p))
                })
                .collect();
            // Recommend only when something got better and nothing got worse.
            if wins.is_empty() || wins.iter().any(|w| w.2 <= 0.0) {
                continue;
            }
            let say = |w: &(&str, &str, f64, f64)| {
                let dir = if w.0 == "handshakes_per_s" {
                    "up"
                } else {
                    "down"
                };
                format!(
                    "{} {dir} {:.1}% (Welch p = {})",
                    w.1,
                    w.2 * 100.0,
                    crate::stats::compare::format_p(w.3)
                )
            };
            let best = wins
                .iter()
                .copied()
                .max_by(|a, b| a.2.total_cmp(&b.2))
                .unwrap_or(wins[0]);
            let others: Vec<String> = wins.iter().filter(|w| w.0 != best.0).map(say).collect();
            let also = (!others.is_empty()).then(|| others.join(", "));
            let caveat = matrix::caveat(group).map(str::to_string);
            let mut text = format!(
                "{}: {} instead of {} — {}",
                g.title,
                to.label,
                from.label,
                say(&best)
            );
            if let Some(a) = &also {
                text += &format!(", {a}");
            }
            if let Some(c) = &caveat {
                text += &format!(" ({c})");
            }
            out.push(Recommendation {
                group: g.group.clone(),
                from: from.name.clone(),
                to: to.name.clone(),
                metric: best.0.to_string(),
                gain: best.2,
                p: best.3,
                also,
                caveat,
                text,
            });
        }
    }
    out.sort_by(|a, b| b.gain.total_cmp(&a.gain));
    out
}

fn machine(pinning: Pinning) -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    Machine {
        // The CPUs available before pinning (after it, this process sees one).
        cores: if pinning.available.is_empty() {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            pinning.available.len()
        },
        cpu,
        kernel,
        pinning,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(hs: &[f64], ms: &[f64]) -> Vec<RoundMetrics> {
        hs.iter()
            .zip(ms)
            .map(|(&h, &m)| RoundMetrics {
                completed: 100,
                handshakes_per_s: h,
                requests_per_s: h,
                request_mean_ms: m,
                ..RoundMetrics::default()
            })
            .collect()
    }

    fn cell(name: &str, r: Vec<RoundMetrics>, base: Option<&[RoundMetrics]>) -> CellResult {
        let mut vs_baseline = BTreeMap::new();
        if let Some(b) = base {
            for (m, d) in [
                ("handshakes_per_s", Direction::HigherIsBetter),
                ("request_mean_ms", Direction::LowerIsBetter),
            ] {
                vs_baseline.insert(m.to_string(), versus(b, &r, m, d).unwrap());
            }
        }
        CellResult {
            name: name.into(),
            label: format!("label {name}"),
            settings: serde_json::Value::Null,
            control: false,
            failed: false,
            failure_rate: 0.0,
            rounds: r,
            summary: BTreeMap::new(),
            vs_baseline,
            request_cdf: Vec::new(),
            handshake_full_hist: Vec::new(),
            handshake_resumed_hist: Vec::new(),
            errors: BTreeMap::new(),
            crypto_limit_pct: None,
        }
    }

    #[test]
    fn recommends_significant_wins_without_losses_and_the_shared_keys_pair() {
        let base = rounds(&[1000.0, 1010.0, 990.0], &[2.0, 2.02, 1.98]);
        let better = rounds(&[1500.0, 1510.0, 1490.0], &[1.5, 1.52, 1.48]);
        let same = rounds(&[1001.0, 1012.0, 989.0], &[2.01, 2.0, 1.99]);
        // Faster handshakes but slower requests: a trade-off, not a recommendation.
        let mixed = rounds(&[1500.0, 1510.0, 1490.0], &[3.0, 3.02, 2.98]);
        let own = rounds(&[1200.0, 1210.0, 1190.0], &[1.8, 1.82, 1.78]);
        let g = GroupResult {
            group: "resumption".into(),
            title: "Session resumption".into(),
            baseline: "off".into(),
            cells: vec![
                cell("off", base.clone(), None),
                cell("stateful", better.clone(), Some(&base)),
                cell("tickets", same, Some(&base)),
                cell("tickets-2-own-keys", own, Some(&base)),
                cell("tickets-2-shared-keys", mixed, Some(&base)),
            ],
        };
        let recs = recommend(&[g]);
        let pairs: Vec<(&str, &str)> = recs
            .iter()
            .map(|r| (r.from.as_str(), r.to.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [("off", "stateful"), ("off", "tickets-2-own-keys")],
            "{recs:#?}"
        );
        let r = &recs[0];
        assert_eq!(r.metric, "handshakes_per_s");
        assert!((r.gain - 0.5).abs() < 1e-9, "{r:?}");
        assert!(
            r.also
                .as_deref()
                .unwrap()
                .starts_with("mean request latency down 25.0%"),
            "{r:?}"
        );
        assert!(
            r.text.contains("label stateful instead of label off"),
            "{}",
            r.text
        );
        assert!(r.caveat.is_none());

        // The own-keys → shared-keys pair, computed from the rounds.
        let g = GroupResult {
            group: "resumption".into(),
            title: "Session resumption".into(),
            baseline: "off".into(),
            cells: vec![
                cell("off", base.clone(), None),
                cell(
                    "tickets-2-own-keys",
                    rounds(&[1200.0, 1210.0, 1190.0], &[1.8, 1.82, 1.78]),
                    Some(&base),
                ),
                cell("tickets-2-shared-keys", better, Some(&base)),
            ],
        };
        let recs = recommend(&[g]);
        assert!(
            recs.iter()
                .any(|r| r.from == "tickets-2-own-keys" && r.to == "tickets-2-shared-keys"),
            "{recs:#?}"
        );
    }

    fn with_cpu(mut r: Vec<RoundMetrics>, cpu: &[f64]) -> Vec<RoundMetrics> {
        for (m, c) in r.iter_mut().zip(cpu) {
            m.server_cpu_us_per_handshake = Some(*c);
        }
        r
    }

    fn compared(name: &str, r: Vec<RoundMetrics>, base: &[RoundMetrics]) -> CellResult {
        let mut c = cell(name, r, None);
        for (m, higher) in result::COMPARED {
            if let Some(v) = versus(base, &c.rounds, m, direction(higher)) {
                c.vs_baseline.insert(m.to_string(), v);
            }
        }
        c
    }

    #[test]
    fn server_cpu_is_compared_and_recommends_alone_but_controls_and_failed_cells_never() {
        let flat = [1000.0, 1010.0, 990.0, 1005.0];
        let ms = [2.0, 2.02, 1.98, 2.01];
        let base = with_cpu(rounds(&flat, &ms), &[300.0, 310.0, 295.0, 305.0]);
        // Throughput and latency the same (the client is the bottleneck), server CPU half.
        let cheaper = with_cpu(rounds(&flat, &ms), &[150.0, 155.0, 148.0, 152.0]);
        let costlier = with_cpu(rounds(&flat, &ms), &[600.0, 620.0, 590.0, 610.0]);
        let mut control = compared(matrix::CONTROL, cheaper.clone(), &base);
        control.control = true;
        let mut failed = compared("failed", cheaper.clone(), &base);
        failed.failed = true;
        let g = GroupResult {
            group: "certificate".into(),
            title: "Certificate type".into(),
            baseline: "ecdsa-p256".into(),
            cells: vec![
                cell("ecdsa-p256", base.clone(), None),
                compared("cheaper", cheaper, &base),
                compared("costlier", costlier, &base),
                control,
                failed,
            ],
        };
        let v = &g.cells[2].vs_baseline["server_cpu_us_per_handshake"];
        assert!(v.significant && v.relative_change.unwrap() > 0.9, "{v:?}");
        assert!(
            v.verdict.starts_with("significantly worse"),
            "{}",
            v.verdict
        );
        let same = &g.cells[2].vs_baseline["handshakes_per_s"];
        assert!(!same.significant);
        let mde = same.mde.unwrap();
        assert!(mde > 0.0 && mde < 0.05, "{mde}");
        assert!(
            same.verdict.contains("no difference larger than"),
            "{}",
            same.verdict
        );
        let recs = recommend(std::slice::from_ref(&g));
        let to: Vec<&str> = recs.iter().map(|r| r.to.as_str()).collect();
        assert_eq!(to, ["cheaper"], "{recs:#?}");
        assert_eq!(recs[0].metric, "server_cpu_us_per_handshake");
        assert!(
            recs[0].text.contains("server CPU per handshake down 50.0%"),
            "{}",
            recs[0].text
        );
        // The tally counts the control's comparisons only: here one of three significant.
        let t = aa_tally(&[g]);
        assert_eq!((t.compared, t.significant), (3, 1), "{t:?}");
        assert_eq!(t.metrics["server_cpu_us_per_handshake"].significant, 1);
        assert_eq!(t.metrics["handshakes_per_s"].significant, 0);
    }

    #[test]
    fn tls_wins_carry_the_loopback_caveat() {
        let base = rounds(&[1000.0, 1010.0, 990.0], &[2.0, 2.02, 1.98]);
        let better = rounds(&[1500.0, 1510.0, 1490.0], &[1.5, 1.52, 1.48]);
        let g = GroupResult {
            group: "tls".into(),
            title: "TLS version".into(),
            baseline: "1.3".into(),
            cells: vec![
                cell("1.3", base.clone(), None),
                cell("1.2", better, Some(&base)),
            ],
        };
        let recs = recommend(&[g]);
        assert_eq!(recs.len(), 1);
        assert!(recs[0].caveat.as_deref().unwrap().contains("round trip"));
        assert!(recs[0].text.contains("loopback"));
    }
}
