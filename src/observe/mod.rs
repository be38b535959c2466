//! `tlsperf observe`: passive handshake analysis of any TLS stack from its packets,
//! without decrypting anything. Per TCP connection, the handshake's timeline (TCP
//! connect, server think, the server's flight, client think, first application byte, the
//! server's first byte after the request),
//! its kind (`full`, `full-hrr`, `resumed`, `0rtt`) and parameters; aggregated into HDR
//! histograms per phase per kind with breakdowns and failures.
//!
//! Modules, in the order a packet goes through them:
//! - [`source`]: capture files (pcap, pcapng) → timestamped frames.
//! - [`live`]: live capture (AF_PACKET ring with a kernel filter) → timestamped frames.
//! - [`ebpf`]: the eBPF kernel filter (ports; segments of connections whose analysis is
//!   over dropped in the kernel).
//! - [`decode`]: a frame → a TCP segment (`etherparse`).
//! - [`flow`]: TCP reassembly and the bounded flow table.
//! - [`tls`]: TLS records and handshake messages (`tls-parser`).
//! - [`timeline`]: one connection's handshake timeline, kind and phases.
//! - [`process`]: local endpoints → processes (live capture).
//! - [`aggregate`]: outcomes → an [`Observation`].
//! - [`metrics`]: outcomes → Prometheus metrics (live capture).
//! - [`connections`]: completed handshakes → JSON Lines (`--connections FILE`).
//! - [`analyzer`]: the pipeline, frame in, observation out.
//! - [`result`]: the result document, its merge and its reader.
//! - [`compare`]: what two observations compare on (`tlsperf compare`).

pub mod aggregate;
pub mod analyzer;
pub mod compare;
pub mod connections;
pub mod decode;
pub mod ebpf;
pub mod flow;
pub mod live;
pub mod metrics;
pub mod process;
pub mod result;
pub mod source;
pub mod timeline;
pub mod tls;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Classify, ErrorClass, io_input_class};
pub use analyzer::Analyzer;
pub use flow::Limits;
pub use result::{Observation, SCHEMA};

/// What to observe and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// TCP ports observed (either end); every port when empty.
    pub ports: Vec<u16>,
    /// Flow-table limits.
    pub limits: Limits,
    /// Every completed handshake written here too, one line each.
    pub connections: Option<Arc<Mutex<connections::ConnectionLog>>>,
}

/// A capture that could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    /// The file could not be opened or read.
    #[error("cannot read capture file {}", .path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a pcap or pcapng file.
    #[error("{} is not a pcap or pcapng capture: {reason}", .path.display())]
    NotACapture {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A link layer tlsperf does not read.
    #[error(
        "{}: link type {linktype} is not supported (Ethernet, Linux cooked v1/v2, raw IP \
         and BSD loopback are; capture with tcpdump -i IF)",
        .path.display()
    )]
    UnsupportedLink {
        /// The file.
        path: PathBuf,
        /// The pcap LINKTYPE value.
        linktype: u32,
    },
    /// A malformed frame record.
    #[error("{}: frame {frame} is malformed: {reason}", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The frame's position (1-based).
        frame: u64,
        /// Why.
        reason: String,
    },
    /// No such network interface.
    #[error("no network interface named '{interface}' (see ip link)")]
    NoInterface {
        /// The name given.
        interface: String,
    },
    /// An interface whose link layer tlsperf does not read.
    #[error(
        "interface {interface} has link type {arphrd} (ARPHRD); tlsperf reads Ethernet, \
         loopback and raw-IP interfaces"
    )]
    UnsupportedInterface {
        /// The interface.
        interface: String,
        /// Its ARPHRD type.
        arphrd: String,
    },
    /// Live capture needs CAP_NET_RAW.
    #[error(
        "capturing on {interface} needs the CAP_NET_RAW capability: run as root, or grant \
         it (setcap cap_net_raw+ep $(command -v tlsperf))"
    )]
    NeedCapNetRaw {
        /// The interface.
        interface: String,
    },
    /// More ports than the kernel filter takes.
    #[error(
        "{count} ports given; at most {} can be observed live",
        live::MAX_PORTS
    )]
    TooManyPorts {
        /// How many were given.
        count: usize,
    },
    /// The capture socket failed.
    #[error("live capture on {interface} failed")]
    Live {
        /// The interface.
        interface: String,
        /// Why.
        source: std::io::Error,
    },
}

impl Classify for ObserveError {
    fn class(&self) -> ErrorClass {
        match self {
            ObserveError::Open { source, .. } => io_input_class(source),
            ObserveError::Live { .. } => ErrorClass::Runtime,
            _ => ErrorClass::Input,
        }
    }
}

/// Analyzes the capture file at `path` (pcap or pcapng). A file cut short in its last
/// frame is read up to there; a warning is logged. One cut short in its first frame is
/// an error: there is nothing to analyze.
pub fn observe_file(path: &Path, opts: &Options) -> Result<Observation, ObserveError> {
    let mut file = source::CaptureFile::open(path)?;
    let mut analyzer = Analyzer::new(
        vec![result::Source {
            kind: "pcap".into(),
            name: path.display().to_string(),
        }],
        opts.ports.clone(),
        opts.limits,
    );
    if let Some(log) = &opts.connections {
        analyzer.log_connections(Arc::clone(log));
    }
    let mut frames: u64 = 0;
    let mut links: Vec<decode::Link> = Vec::new();
    let end = file.for_each(|ns, link, data, wire_len| {
        frames += 1;
        if !links.contains(&link) {
            links.push(link);
        }
        analyzer.frame(ns, link, data, wire_len)
    })?;
    // Cut short before its first whole frame: nothing was read, which is no analysis.
    if end == source::End::Truncated && frames == 0 {
        return Err(ObserveError::Corrupt {
            path: path.to_path_buf(),
            frame: 1,
            reason: "its record runs past the end of the file (the file is cut short or its \
                     length field is damaged)"
                .into(),
        });
    }
    if end == source::End::Truncated {
        tracing::warn!(
            "{}: the capture ends in the middle of a frame; read up to there",
            path.display()
        );
    }
    let o = analyzer.finish();
    // Frames, and not one TCP segment among them: say so rather than print a result of
    // nothing as if there had been nothing to see.
    if o.packets.frames > 0 && o.packets.tcp_segments + o.packets.other_ports == 0 {
        let names: Vec<&str> = links.iter().map(|l| l.name()).collect();
        tracing::warn!(
            "{}: none of its {} frames ({}) held a TCP segment that tlsperf could read",
            path.display(),
            o.packets.frames,
            names.join(", ")
        );
    }
    Ok(o)
}

/// The longest a live capture spends, after its stop, reading the frames captured
/// before it.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// What to observe live and how (the interface and ports are the capture's).
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Limits.
    pub limits: Limits,
    /// Stop after this long (else at `stop`).
    pub duration: Option<Duration>,
    /// Count outcomes in these metrics too.
    pub metrics: Option<Arc<metrics::ObserveMetrics>>,
    /// Every completed handshake written here too, one line each.
    pub connections: Option<Arc<Mutex<connections::ConnectionLog>>>,
}

/// Observes a live capture (opened with [`live::LiveCapture::open`]) until `duration`
/// has passed or `stop` is set, calling `tick`, when given, with the observation so far
/// about once a second (from this thread: a copy of it is made for each call, so pass
/// none when nothing shows it), attributing local endpoints through `processes` when
/// given. The result says `interrupted` when `stop` ended it.
pub fn observe_live(
    mut cap: live::LiveCapture,
    opts: &LiveOptions,
    mut probes: Option<&mut crate::probes::Session>,
    processes: Option<process::Processes>,
    stop: &AtomicBool,
    mut tick: Option<impl FnMut(&Observation)>,
) -> Result<Observation, ObserveError> {
    let link = cap.link();
    let interface = cap.interface().to_string();
    let mut analyzer = Analyzer::new(
        vec![result::Source {
            kind: "live".into(),
            name: interface.clone(),
        }],
        cap.ports().to_vec(),
        opts.limits,
    );
    if let Some(p) = processes {
        analyzer.attribute_processes(p);
    }
    if let Some(m) = &opts.metrics {
        analyzer.export(Arc::clone(m));
    }
    if let Some(log) = &opts.connections {
        analyzer.log_connections(Arc::clone(log));
    }
    if let Some(index) = probes.as_ref().and_then(|p| p.wire_index()) {
        analyzer.join_probes(index);
    }
    if let Some(kernel) = cap.take_kernel_drop() {
        analyzer.drop_in_kernel(Box::new(kernel));
    }
    if let (Some(p), Some(m)) = (probes.as_deref_mut(), &opts.metrics) {
        export_probes(p, m);
    }
    let started = Instant::now();
    let mut last_tick = started;
    let mut interrupted = false;
    loop {
        let frame = cap.next_frame().map_err(|source| ObserveError::Live {
            interface: interface.clone(),
            source,
        })?;
        match frame {
            Some((ns, data, wire_len)) => analyzer.frame(ns, link, data, wire_len),
            None => analyzer.sweep(live::now_ns()),
        }
        let stopping = stop.load(Ordering::Relaxed);
        interrupted |= stopping;
        if stopping || opts.duration.is_some_and(|d| started.elapsed() >= d) {
            // The probes' handshakes in progress end while the capture still reads.
            match probes.as_deref_mut() {
                Some(p) => {
                    if p.drained() {
                        break;
                    }
                    p.drain();
                }
                None => break,
            }
        }
        if last_tick.elapsed() >= live::TICK {
            last_tick = Instant::now();
            analyzer.set_kernel_drops(cap.drops());
            analyzer.set_kernel_filtered(cap.kernel_filtered().0);
            let mut report = None;
            if let Some(p) = probes.as_deref_mut() {
                p.poll(false);
                let r = p.snapshot();
                if let Some(m) = &opts.metrics {
                    m.probe_lost(&r.counts);
                }
                report = Some(r);
            }
            if let Some(tick) = tick.as_mut() {
                let mut snapshot = analyzer.snapshot();
                snapshot.probes = report;
                tick(&snapshot);
            }
        }
    }
    // What the kernel captured before the stop and queued for us is part of the
    // observation (bounded: a few seconds of frames at most).
    let end = Instant::now();
    while end.elapsed() < DRAIN_LIMIT {
        let Some((ns, data, wire_len)) = cap.next_queued() else {
            break;
        };
        analyzer.frame(ns, link, data, wire_len);
    }
    analyzer.set_kernel_drops(cap.drops());
    analyzer.set_kernel_filtered(cap.kernel_filtered().0);
    let mut o = analyzer.finish();
    o.interrupted = interrupted;
    o.kernel_filter = Some(cap.kernel_filter().to_string());
    Ok(o)
}

/// Counts every probed handshake in `metrics` too.
fn export_probes(probes: &mut crate::probes::Session, metrics: &Arc<metrics::ObserveMetrics>) {
    let m = Arc::clone(metrics);
    probes.on_record(crate::probes::Listener(Box::new(move |r| m.probe(r))));
}

/// Observes inside processes only (`--probes` without a capture) until `duration` has
/// passed or `stop` is set, calling `tick` about once a second. The session is the
/// caller's to finish; the observation has no packets.
pub fn observe_probes(
    probes: &mut crate::probes::Session,
    name: String,
    duration: Option<Duration>,
    metrics: Option<Arc<metrics::ObserveMetrics>>,
    stop: &AtomicBool,
    mut tick: impl FnMut(&Observation),
) -> Observation {
    if let Some(m) = &metrics {
        export_probes(probes, m);
    }
    let mut o = Observation::new(
        vec![result::Source {
            kind: "probes".into(),
            name,
        }],
        Vec::new(),
    );
    let started = Instant::now();
    o.started_ns = Some(live::now_ns());
    let mut last_tick = started;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if stop.load(Ordering::Relaxed) {
            o.interrupted = true;
            break;
        }
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if last_tick.elapsed() >= live::TICK {
            last_tick = Instant::now();
            probes.poll(false);
            let report = probes.snapshot();
            if let Some(m) = &metrics {
                m.probe_lost(&report.counts);
            }
            o.probes = Some(report);
            o.duration_s = started.elapsed().as_secs_f64();
            tick(&o);
        }
    }
    o.duration_s = started.elapsed().as_secs_f64();
    o
}
