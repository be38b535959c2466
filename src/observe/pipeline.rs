//! The observe pipeline as one engine:
//!
//! ```text
//! sources ──────────────► analysis ─────────────────────────► sinks
//! capture file (pcap)      Analyzer: decode, flow table,       the result document (Observation)
//! live capture (AF_PACKET)   timelines, aggregation            the handshake stream (--handshake-log)
//! probes (eBPF Session) ──► the join (probes::WireIndex,        Prometheus /metrics
//!                            fed each captured handshake)      OTLP export (--otlp)
//! ```
//!
//! A [`Setup`] says what to read and where to write; [`Pipeline::start`] opens and arms
//! everything in the order that loses nothing (probes attached, then the capture opened,
//! then the probes armed, so both see the same connections; the output streams last, so
//! a run that cannot start leaves no file), [`Pipeline::run`] reads until the end of the
//! file, the duration or `stop`, and hands back a [`Finished`]. It never prints: what a
//! person should read goes to the caller's [`Progress`] callback, and the caller owns
//! signals (it sets [`Controls`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::baseline::AnomalyEvent;
use super::canary::CanaryRecord;
use super::connections::ConnectionsStream;
use super::live::{FilterChoice, LiveCapture};
use super::metrics::{MetricsServer, ObserveMetrics, phase_buckets};
use super::otlp::{Health, OtlpError, OtlpExport, OtlpSetup};
use super::process::Processes;
use super::watch::{Watch, WatchError, WatchSetup};
use super::window::WindowRecord;
use super::{Limits, Observation, ObserveError, live, run};
use crate::error::{Classify, ErrorClass};
use crate::files::FileError;
use crate::probes::follow::Event;
use crate::probes::{ProbeError, ProbeOptions, Session};

/// Where the packets come from.
#[derive(Debug, Clone)]
pub enum Capture {
    /// A capture file (pcap or pcapng).
    File(PathBuf),
    /// A live capture on this interface.
    Live {
        /// The interface (e.g. `lo`, `eth0`).
        interface: String,
        /// The classic BPF port filter only, not the eBPF one.
        classic_filter: bool,
    },
    /// No packets: the probes alone ([`Setup::probes`] with pids or executables).
    None,
}

/// What the pipeline reads and where it writes.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The packets.
    pub capture: Capture,
    /// TCP ports observed (either end); every port when empty.
    pub ports: Vec<u16>,
    /// Flow-table and memory limits.
    pub limits: Limits,
    /// Look inside the processes too.
    pub probes: Option<ProbeOptions>,
    /// Stop a live run after this long (else at `stop`).
    pub duration: Option<Duration>,
    /// Serve Prometheus `/metrics` at this address (`IP:PORT` or `HOST:PORT`).
    pub metrics: Option<String>,
    /// Push the same metrics to an OpenTelemetry collector (OTLP/HTTP).
    pub otlp: Option<OtlpSetup>,
    /// Write every completed handshake to this file, one JSON object per line.
    pub connections: Option<PathBuf>,
    /// Windows, baselines and anomalies (a live run).
    pub watch: Option<WatchSetup>,
    /// Call [`Progress::Snapshot`] about once a second with the observation so far (a
    /// copy of its histograms each time: ask only when something shows it).
    pub snapshots: bool,
}

/// What the pipeline has to say while it runs, for the caller to show or not.
#[derive(Debug)]
pub enum Progress<'a> {
    /// Where something is (the metrics' address) or what the probes found.
    Note(String),
    /// What the run is doing ("capturing on lo, TCP and UDP port 443; Ctrl-C to stop").
    Started(String),
    /// Something the result may be poorer for.
    Warning(String),
    /// The observation so far ([`Setup::snapshots`]).
    Snapshot(&'a Observation),
    /// A window closed ([`Setup::watch`]).
    Window(&'a WindowRecord),
    /// An anomaly started or ended.
    Anomaly(&'a AnomalyEvent),
    /// A group compared with the stable one in a closed window (`--group-by`).
    Canary(&'a CanaryRecord),
}

/// How the caller steers a running pipeline (from its signal handlers).
#[derive(Debug, Default)]
pub struct Controls {
    /// Set: the run ends (a live capture drains first), keeping what it saw.
    pub stop: AtomicBool,
    /// Set: the streamed files are opened again (after logrotate moved them away);
    /// cleared when done.
    pub reopen: AtomicBool,
}

/// The end of a run.
#[derive(Debug)]
pub struct Finished {
    /// The result document.
    pub observation: Observation,
    /// The connections file and the number of lines written to it, or why writing it
    /// failed (the run and its result are kept: the caller writes the result first, then
    /// says which outputs failed).
    pub connections: Option<(PathBuf, std::io::Result<u64>)>,
    /// The windows stream.
    pub windows: Option<PathBuf>,
}

/// Why the pipeline could not start or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The capture could not be opened or read.
    #[error(transparent)]
    Observe(#[from] ObserveError),
    /// The probes could not be started.
    #[error(transparent)]
    Probes(#[from] ProbeError),
    /// The metrics address could not be listened on.
    #[error("--metrics {addr}: cannot listen there")]
    MetricsAddress {
        /// The address given.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The metrics server could not start.
    #[error("--metrics")]
    MetricsServer(#[source] std::io::Error),
    /// The OTLP export could not start.
    #[error(transparent)]
    Otlp(#[from] OtlpError),
    /// An output file could not be opened.
    #[error(transparent)]
    File(#[from] FileError),
    /// The windows could not be set up.
    #[error(transparent)]
    Watch(#[from] WatchError),
}

impl Classify for PipelineError {
    fn class(&self) -> ErrorClass {
        match self {
            PipelineError::Observe(e) => e.class(),
            PipelineError::Probes(e) => e.class(),
            PipelineError::File(e) => e.class(),
            PipelineError::Watch(e) => e.class(),
            PipelineError::Otlp(e) => e.class(),
            PipelineError::MetricsAddress { .. } => ErrorClass::Input,
            PipelineError::MetricsServer(_) => ErrorClass::Runtime,
        }
    }
}

/// The pipeline, opened and armed, not yet run.
#[derive(Debug)]
pub struct Pipeline {
    setup: Setup,
    source: Opened,
    metrics: Arc<ObserveMetrics>,
    /// Held for the run: dropping it stops the server.
    server: Option<MetricsServer>,
    /// The OTLP export, finished (its last export sent) at the end of the run.
    otlp: Option<OtlpExport>,
    connections: Option<ConnectionsStream>,
    watch: Option<Watch>,
}

/// The sources, opened.
#[derive(Debug)]
enum Opened {
    File(PathBuf),
    Live(Box<LiveSources>),
    Probes(Box<Session>),
}

/// A live capture, the probes joined to it and the processes its endpoints belong to.
#[derive(Debug)]
struct LiveSources {
    capture: LiveCapture,
    probes: Option<Session>,
    /// Set once the metrics are served, as the run is announced.
    processes: Option<Processes>,
}

impl Pipeline {
    /// Opens the sinks and sources and arms the probes.
    pub fn start(
        setup: Setup,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Pipeline, PipelineError> {
        // The OTLP endpoint and the baselines first: either wrong stops the run before
        // anything is attached or written.
        if let Some(o) = &setup.otlp {
            super::otlp::metrics_url(&o.endpoint)?;
        }
        let mut watch = setup.watch.as_ref().map(Watch::new).transpose()?;
        let source = match &setup.capture {
            Capture::File(path) => Opened::File(path.clone()),
            Capture::Live {
                interface,
                classic_filter,
            } => open_live(&setup, interface, *classic_filter, progress)?,
            Capture::None => {
                let mut session = start_probes(&setup, None, progress)?.ok_or_else(|| {
                    ProbeError::Target(
                        "nothing to observe: no capture, and no process to probe".into(),
                    )
                })?;
                session.arm()?;
                Opened::Probes(Box::new(session))
            }
        };
        let (metrics, server, otlp) = start_metrics(&setup, progress)?;
        let exported = server.is_some() || otlp.is_some();
        // The streams last: a run that cannot start leaves no file behind.
        if let Some(w) = watch.as_mut() {
            w.open(exported.then(|| Arc::clone(&metrics)))?;
        }
        let connections = setup
            .connections
            .as_deref()
            .map(ConnectionsStream::open)
            .transpose()?;
        let mut source = source;
        if let Opened::Live(live) = &mut source {
            // Before the capture is announced: a connection opened after it is attributed.
            let (p, why) = Processes::new();
            if let Some(why) = why {
                progress(Progress::Warning(format!(
                    "processes are attributed from /proc, where a connection shorter than a \
                     second may show as (unknown): the kernel's socket owners could not be \
                     traced: {why}"
                )));
            }
            live.processes = Some(p);
        }
        let mut pipeline = Pipeline {
            setup,
            source,
            metrics,
            server,
            otlp,
            connections,
            watch,
        };
        pipeline.announce(progress);
        Ok(pipeline)
    }

    /// What the run is doing, said once it is ready (processes attributed from then on).
    fn announce(&mut self, progress: &mut dyn FnMut(Progress<'_>)) {
        let until = match self.setup.duration {
            Some(d) => format!("for {}", humantime::format_duration(d)),
            None => "Ctrl-C to stop".to_string(),
        };
        match &self.source {
            Opened::File(_) => {}
            Opened::Live(live) => {
                let ports: Vec<String> = self.setup.ports.iter().map(u16::to_string).collect();
                progress(Progress::Started(format!(
                    "capturing on {}, {}; {until}",
                    live.capture.interface(),
                    // TCP segments, and UDP datagrams for QUIC.
                    if ports.is_empty() {
                        "every TCP and UDP port".to_string()
                    } else {
                        format!("TCP and UDP port {}", ports.join(", "))
                    },
                )));
            }
            Opened::Probes(_) => {
                progress(Progress::Started(format!(
                    "probing {}; {until}",
                    self.probed_name()
                )));
            }
        }
    }

    /// The processes probed without a capture, as the result's source names them.
    fn probed_name(&self) -> String {
        let Some(p) = &self.setup.probes else {
            return String::new();
        };
        let mut names: Vec<String> = p.pids.iter().map(|p| format!("pid {p}")).collect();
        names.extend(p.exes.iter().map(|e| e.display().to_string()));
        names.join(", ")
    }

    /// Runs to the end of the capture file, or (live, probes) until the duration has
    /// passed or `controls.stop` is set; then the probes are finished and the
    /// connections file completed. The observation says `interrupted` when `stop` ended
    /// it.
    pub fn run(
        self,
        controls: &Controls,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<Finished, PipelineError> {
        let name = self.probed_name();
        let Pipeline {
            setup,
            source,
            metrics,
            server,
            otlp,
            connections,
            mut watch,
        } = self;
        let log = connections.as_ref().map(|c| Arc::clone(&c.log));
        let exported = (server.is_some() || otlp.is_some()).then_some(metrics);
        let windows = watch.as_ref().map(|w| Arc::clone(&w.windows));
        let snapshots = setup.snapshots;
        let stop = &controls.stop;
        let mut tick = |o: Option<&Observation>, events: &[Event]| {
            // What the probes followed, or could not, as it happens.
            for e in events {
                progress(if e.warning {
                    Progress::Warning(e.text.clone())
                } else {
                    Progress::Note(e.text.clone())
                });
            }
            if let Some(o) = o.filter(|_| snapshots) {
                progress(Progress::Snapshot(o));
            }
            if let Some(closed) = watch.as_mut().and_then(|w| w.tick(live::now_ns())) {
                progress(Progress::Window(&closed.window));
                for e in &closed.events {
                    progress(Progress::Anomaly(e));
                }
                for c in &closed.canaries {
                    progress(Progress::Canary(c));
                }
            }
            if controls.reopen.swap(false, Ordering::Relaxed) {
                reopen(connections.as_ref(), watch.as_mut(), progress);
            }
            if let Some(o) = &otlp {
                say_health(o, progress);
            }
        };
        let observation = match source {
            Opened::File(path) => run::file(&path, &setup.ports, setup.limits, log)?,
            Opened::Live(sources) => {
                let LiveSources {
                    capture,
                    mut probes,
                    processes,
                } = *sources;
                let live = run::Live {
                    limits: setup.limits,
                    duration: setup.duration,
                    metrics: exported,
                    connections: log,
                    windows,
                };
                let mut o = run::live(
                    capture,
                    &live,
                    probes.as_mut(),
                    processes,
                    stop,
                    snapshots,
                    &mut tick,
                )?;
                if let Some(p) = probes {
                    o.probes = Some(p.finish());
                }
                o
            }
            Opened::Probes(mut session) => {
                let live = run::Live {
                    limits: setup.limits,
                    duration: setup.duration,
                    metrics: exported,
                    connections: None,
                    windows,
                };
                let mut o = run::probes(&mut session, name, &live, stop, snapshots, &mut tick);
                o.probes = Some(session.finish());
                o
            }
        };
        drop(server);
        // After the last window: its anomaly events are in the last export.
        let windows = match watch {
            Some(w) => {
                let path = w.stream_path().map(Path::to_path_buf);
                match w.finish(live::now_ns()) {
                    Ok(last) => {
                        if let Some(last) = &last {
                            progress(Progress::Window(last));
                        }
                    }
                    Err(e) => progress(Progress::Warning(e)),
                }
                path
            }
            None => None,
        };
        if let Some(Err(why)) = otlp.map(OtlpExport::finish) {
            progress(Progress::Warning(why));
        }
        let connections = connections.map(|c| (c.dest.clone(), c.finish()));
        Ok(Finished {
            observation,
            connections,
            windows,
        })
    }
}

/// Opens the streamed files again (SIGHUP, after logrotate).
fn reopen(
    connections: Option<&ConnectionsStream>,
    watch: Option<&mut Watch>,
    progress: &mut dyn FnMut(Progress<'_>),
) {
    if let Some(c) = connections {
        match c.reopen() {
            Ok(()) => progress(Progress::Note(format!("reopened {}", c.dest.display()))),
            Err(e) => progress(Progress::Warning(crate::error::sentence(&e))),
        }
    }
    if let Some(w) = watch {
        match w.reopen() {
            Ok(()) => {
                if let Some(p) = w.stream_path() {
                    progress(Progress::Note(format!("reopened {}", p.display())));
                }
            }
            Err(e) => progress(Progress::Warning(crate::error::sentence(&e))),
        }
    }
}

/// A live capture, and the probes joined to it.
fn open_live(
    setup: &Setup,
    interface: &str,
    classic_filter: bool,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Opened, PipelineError> {
    let choice = if classic_filter {
        FilterChoice::Classic
    } else {
        FilterChoice::Ebpf {
            max_flows: setup.limits.max_flows,
        }
    };
    // The probes first: attaching takes a while (seconds with many libraries), and a
    // capture opened before would go unread meanwhile.
    let mut probes = start_probes(setup, Some(&setup.ports), progress)?;
    let capture = LiveCapture::open(interface, &setup.ports, choice)?;
    // The capture sees every connection from now on: so do the probes.
    if let Some(p) = probes.as_mut() {
        p.arm()?;
    }
    if let Some(why) = capture
        .kernel_filter()
        .strip_prefix("classic (the ports only): ")
    {
        progress(Progress::Warning(format!(
            "every segment on the ports is copied to tlsperf (classic kernel filter): {why}"
        )));
    }
    Ok(Opened::Live(Box::new(LiveSources {
        capture,
        probes,
        processes: None,
    })))
}

/// The probes, when asked for (`join`: the ports of a capture to join them to).
fn start_probes(
    setup: &Setup,
    join: Option<&[u16]>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Option<Session>, PipelineError> {
    let Some(opts) = &setup.probes else {
        return Ok(None);
    };
    let (session, notes) = Session::start(opts, join)?;
    for n in notes {
        progress(Progress::Note(n));
    }
    Ok(Some(session))
}

/// What changed in the OTLP exports, said.
fn say_health(otlp: &OtlpExport, progress: &mut dyn FnMut(Progress<'_>)) {
    match otlp.health() {
        Some(Health::Failing(why)) => progress(Progress::Warning(format!(
            "--otlp {}: an export failed ({why}); the run goes on, counting, and the next \
             export sends the totals so far",
            otlp.url
        ))),
        Some(Health::Recovered(n)) => progress(Progress::Note(format!(
            "--otlp {}: exports work again after {n} failed",
            otlp.url
        ))),
        None => {}
    }
}

/// The metrics, their server when [`Setup::metrics`] asks for one, and their OTLP export
/// when [`Setup::otlp`] does.
#[allow(clippy::type_complexity)]
fn start_metrics(
    setup: &Setup,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<
    (
        Arc<ObserveMetrics>,
        Option<MetricsServer>,
        Option<OtlpExport>,
    ),
    PipelineError,
> {
    // The address first: a run that cannot listen exports nothing.
    let listener = match &setup.metrics {
        Some(addr) => {
            Some(
                metrics_listener(addr).map_err(|source| PipelineError::MetricsAddress {
                    addr: addr.clone(),
                    source,
                })?,
            )
        }
        None => None,
    };
    let (metrics, otlp) = match &setup.otlp {
        Some(o) => {
            let (export, instruments) = OtlpExport::start(o, &phase_buckets())?;
            progress(Progress::Note(format!(
                "otlp: exporting to {} every {}",
                export.url,
                humantime::format_duration(o.interval)
            )));
            (ObserveMetrics::exporting(instruments), Some(export))
        }
        None => (ObserveMetrics::new(), None),
    };
    let metrics = Arc::new(metrics);
    let Some(listener) = listener else {
        return Ok((metrics, None, otlp));
    };
    let local = listener
        .local_addr()
        .map_err(PipelineError::MetricsServer)?;
    let server = MetricsServer::start(listener, Arc::clone(&metrics))
        .map_err(PipelineError::MetricsServer)?;
    progress(Progress::Note(format!("metrics: http://{local}/metrics")));
    Ok((metrics, Some(server), otlp))
}

/// The `--metrics` listener, on the first of `addr`'s addresses that binds, with
/// `SO_REUSEADDR` as servers set it: the connections of an agent that just stopped
/// (scrapes, in their closing states for up to a minute) do not keep the next one, or
/// another server, from listening on the same port.
fn metrics_listener(addr: &str) -> std::io::Result<std::net::TcpListener> {
    use std::net::ToSocketAddrs;
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        let bound = (|| {
            let socket =
                socket2::Socket::new(socket2::Domain::for_address(a), socket2::Type::STREAM, None)?;
            socket.set_reuse_address(true)?;
            socket.bind(&a.into())?;
            socket.listen(128)?;
            Ok::<_, std::io::Error>(std::net::TcpListener::from(socket))
        })();
        match bound {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the name has no address")
    }))
}
