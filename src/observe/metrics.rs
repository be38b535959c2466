//! `tlsperf observe --metrics ADDR`: the observation as Prometheus metrics
//! (prometheus-client), for running next to a production gateway, served at `/metrics`
//! by a small hyper server on its own thread. Times in seconds, counters `_total`:
//!
//! - `tlsperf_observe_handshakes_total{role,process,kind,version,group,container_id,pod_uid,transport}`
//!   and `tlsperf_observe_handshake_phase_seconds{role,process,kind,phase,container_id,pod_uid,transport}`
//!   (histogram) from the wire, attributed like `--window`'s series: role `server`,
//!   process the server's `comm` or `(remote)`, its container and pod from its cgroup
//!   path (empty when unknown or none), transport `tcp` or `quic` (their phases are not
//!   the same: never sum the histograms over both);
//! - `tlsperf_observe_handshake_failures_total{reason,transport}` (the wire's failures
//!   carry no process), `tlsperf_observe_kernel_drops_total`,
//!   `tlsperf_observe_kernel_filtered_segments_total`;
//! - with `--probes`:
//!   `tlsperf_observe_probe_handshakes_total{process,role,result,container_id,pod_uid}`,
//!   `tlsperf_observe_probe_phase_seconds{role,process,phase,container_id,pod_uid}`
//!   (histogram; the container and pod from the process's cgroup path, empty when it
//!   names none),
//!   `tlsperf_observe_probe_lost_events_total`;
//! - with `--window`: `tlsperf_observe_anomaly{view,role,process,port,quantile,transport}`
//!   (gauge), `tlsperf_observe_baseline_24h_seconds{view,role,process,port,group,quantile,
//!   transport}` (gauge: each series' long baseline, the series of the last window, QUIC's
//!   apart from TCP's).
//!
//! Label values are bounded: the first [`MAX_PROCESSES`] process names, container ids
//! and pod UIDs and
//! [`MAX_GROUPS`] groups and versions keep their own series, later ones become
//! `(other)`; SNIs and addresses are never labels.
//!
//! With `--otlp` the same values are recorded to [`super::otlp`]'s instruments too.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::baseline::AnomalyEvent;
use super::group::pid_of;
use super::otlp::Instruments;
use super::timeline::{Outcome, Transport};
use super::tls::{group_label, version_label};
use super::window::{OTHER, WindowRecord};
use crate::probes::event::{HandshakeResult, ProbeRecord};
use crate::probes::report::{PROBE_PHASES, ProbeCounts, phase_values};
use crate::probes::workload::{Cache, Workload};

/// The wire's failure reasons, each with a series from the start (rates see 0, not
/// nothing).
const FAILURE_REASONS: [&str; 4] = ["alert", "reset", "closed", "incomplete"];

/// Distinct process names with series of their own; later ones are `(other)`.
pub const MAX_PROCESSES: usize = 32;
/// Distinct key-exchange groups (and protocol versions) with series of their own.
pub const MAX_GROUPS: usize = 16;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandshakeLabels {
    role: String,
    process: String,
    kind: String,
    version: String,
    group: String,
    container_id: String,
    pod_uid: String,
    /// `tcp` or `quic`.
    transport: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    role: String,
    process: String,
    kind: String,
    phase: String,
    container_id: String,
    pod_uid: String,
    /// `tcp` or `quic`.
    transport: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabels {
    /// The process's name (`comm`, not its pid: short-lived clients would make a
    /// series each).
    process: String,
    role: String,
    result: String,
    /// The process's container id (its cgroup path's), empty when none.
    container_id: String,
    /// The process's Kubernetes pod UID (its cgroup path's), empty when none.
    pod_uid: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbePhaseLabels {
    role: String,
    process: String,
    phase: String,
    container_id: String,
    pod_uid: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnomalyLabels {
    view: String,
    role: String,
    process: String,
    port: String,
    quantile: String,
    /// `tcp` or `quic`.
    transport: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LongLabels {
    view: String,
    role: String,
    process: String,
    port: String,
    group: String,
    quantile: String,
    /// `tcp` or `quic`.
    transport: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
    /// `tcp` or `quic`.
    transport: &'static str,
}

/// The phases' bucket bounds, in seconds: 10 µs … ~5 s, doubling (the same for
/// Prometheus and OTLP).
pub fn phase_buckets() -> Vec<f64> {
    exponential_buckets(0.00001, 2.0, 20).collect()
}

fn phase_histogram() -> Histogram {
    Histogram::new(phase_buckets())
}

/// A label's values, bounded: the first `max` distinct values are kept, later ones
/// are [`OTHER`].
#[derive(Debug)]
struct Bounded {
    max: usize,
    seen: Mutex<HashSet<String>>,
}

impl Bounded {
    fn new(max: usize) -> Bounded {
        Bounded {
            max,
            seen: Mutex::new(HashSet::new()),
        }
    }

    fn label(&self, value: &str) -> String {
        let mut seen = match self.seen.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if seen.contains(value) {
            return value.to_string();
        }
        if seen.len() >= self.max {
            return OTHER.to_string();
        }
        seen.insert(value.to_string());
        value.to_string()
    }
}

/// `comm` from "comm (pid N)".
fn comm(process: &str) -> &str {
    process.split(" (pid ").next().unwrap_or(process)
}

/// The metrics of one observation.
pub struct ObserveMetrics {
    registry: Registry,
    handshakes: Family<HandshakeLabels, Counter>,
    phases: Family<PhaseLabels, Histogram, fn() -> Histogram>,
    failures: Family<ReasonLabels, Counter>,
    drops: Counter,
    drops_seen: AtomicU64,
    filtered: Counter,
    filtered_seen: AtomicU64,
    probe_handshakes: Family<ProbeLabels, Counter>,
    probe_phases: Family<ProbePhaseLabels, Histogram, fn() -> Histogram>,
    probe_lost: Counter,
    probe_lost_seen: AtomicU64,
    anomalies: Family<AnomalyLabels, Gauge>,
    long: Family<LongLabels, Gauge<f64, AtomicU64>>,
    /// The long baselines' series set at the last window (the others are removed).
    long_set: Mutex<HashSet<LongLabels>>,
    processes: Bounded,
    groups: Bounded,
    versions: Bounded,
    /// `--otlp`: recorded there too.
    otlp: Option<Instruments>,
    containers: Bounded,
    pods: Bounded,
    /// The wire's server processes' workloads (a file read per pid, kept a while).
    workloads: Mutex<Cache>,
}

impl std::fmt::Debug for ObserveMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ObserveMetrics")
    }
}

impl Default for ObserveMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ObserveMetrics {
    /// A fresh registry (prefix `tlsperf_observe`).
    pub fn new() -> ObserveMetrics {
        ObserveMetrics::with_workloads(Cache::default())
    }

    /// A fresh registry whose server processes' workloads come from `workloads`.
    fn with_workloads(workloads: Cache) -> ObserveMetrics {
        let mut registry = Registry::with_prefix("tlsperf_observe");
        let handshakes = Family::<HandshakeLabels, Counter>::default();
        let phases: Family<PhaseLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(phase_histogram);
        let failures = Family::<ReasonLabels, Counter>::default();
        // Series exist from the start: rates see 0, not nothing (the handshakes' series
        // need a process, version and group: they appear with the first handshake).
        for transport in Transport::ALL {
            for reason in FAILURE_REASONS {
                let _ = failures.get_or_create(&ReasonLabels {
                    reason: reason.into(),
                    transport: transport.name(),
                });
            }
        }
        let drops = Counter::default();
        registry.register(
            "handshakes",
            "Completed TLS handshakes seen on the wire, by role, process (the server's \
             comm, or (remote)), kind, version, key-exchange group and transport (tcp, quic)",
            handshakes.clone(),
        );
        registry.register(
            "handshake_phase_seconds",
            "Handshake phases seen on the wire (connect, server_think, server_flight, \
             client_think, tls, first_app_byte, server_first_byte), by role, process, \
             kind and transport (tcp, quic: not to be summed over both)",
            phases.clone(),
        );
        registry.register(
            "handshake_failures",
            "TLS handshakes begun and not completed, by reason and transport",
            failures.clone(),
        );
        registry.register(
            "kernel_drops",
            "Frames the kernel dropped before tlsperf read them",
            drops.clone(),
        );
        let filtered = Counter::default();
        registry.register(
            "kernel_filtered_segments",
            "Segments of connections whose analysis was over, dropped by the eBPF capture \
             filter in the kernel",
            filtered.clone(),
        );
        let probe_handshakes = Family::<ProbeLabels, Counter>::default();
        let probe_phases: Family<ProbePhaseLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(phase_histogram);
        let probe_lost = Counter::default();
        registry.register(
            "probe_handshakes",
            "Handshakes seen inside processes by --probes, by process (comm), role and result",
            probe_handshakes.clone(),
        );
        registry.register(
            "probe_phase_seconds",
            "Completed handshakes' phases inside the process (accept_queue, \
             until_first_call, work and of it on_cpu and blocked, its parts callback, \
             verification, signature, key_exchange and trust_load and the rest, \
             trust_load_before, waiting_for_peer, span), by \
             role and process (comm)",
            probe_phases.clone(),
        );
        registry.register(
            "probe_lost_events",
            "Probe records lost (ring buffer full) or dropped by tlsperf",
            probe_lost.clone(),
        );
        let anomalies = Family::<AnomalyLabels, Gauge>::default();
        registry.register(
            "anomaly",
            "1 while a series' window quantile is above its baseline (--window), by \
             series and quantile",
            anomalies.clone(),
        );
        let long = Family::<LongLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "baseline_24h_seconds",
            "A series' headline phase (the wire's first_app_byte, the probes' total) over \
             its last 24 hours of windows (--window), by series and quantile (0.5, 0.9, \
             0.95, 0.99, 0.999); the series of the last window",
            long.clone(),
        );
        ObserveMetrics {
            registry,
            long,
            long_set: Mutex::new(HashSet::new()),
            handshakes,
            phases,
            failures,
            drops,
            drops_seen: AtomicU64::new(0),
            filtered,
            filtered_seen: AtomicU64::new(0),
            probe_handshakes,
            probe_phases,
            probe_lost,
            probe_lost_seen: AtomicU64::new(0),
            anomalies,
            processes: Bounded::new(MAX_PROCESSES),
            groups: Bounded::new(MAX_GROUPS),
            versions: Bounded::new(MAX_GROUPS),
            containers: Bounded::new(MAX_PROCESSES),
            pods: Bounded::new(MAX_PROCESSES),
            workloads: Mutex::new(workloads),
            otlp: None,
        }
    }

    /// A fresh registry whose values are recorded to `otlp` too.
    pub fn exporting(otlp: Instruments) -> ObserveMetrics {
        for transport in Transport::ALL {
            for reason in FAILURE_REASONS {
                otlp.failures(reason, transport.name(), 0);
            }
        }
        ObserveMetrics {
            otlp: Some(otlp),
            ..ObserveMetrics::new()
        }
    }

    /// The long baselines of a closed window's series: set, and those of series not in
    /// it removed.
    pub fn long_baselines(&self, w: &WindowRecord) {
        let mut set = HashSet::new();
        let quic = w.quic.iter().flat_map(|q| q.series.iter());
        for s in w.series.iter().chain(quic) {
            let Some(l) = &s.long_baseline else {
                continue;
            };
            for (q, ns) in [
                ("0.5", l.p50_ns),
                ("0.9", l.p90_ns),
                ("0.95", l.p95_ns),
                ("0.99", l.p99_ns),
                ("0.999", l.p999_ns),
            ] {
                let labels = LongLabels {
                    view: s.key.view.clone(),
                    role: s.key.role.clone(),
                    process: s.key.process.clone(),
                    port: s.key.port.to_string(),
                    group: s.key.group.clone().unwrap_or_else(|| "none".into()),
                    quantile: q.into(),
                    transport: s.key.transport.name().into(),
                };
                self.long.get_or_create(&labels).set(ns as f64 / 1e9);
                set.insert(labels);
            }
        }
        let mut before = crate::sync::lock(&self.long_set);
        for gone in before.difference(&set) {
            self.long.remove(gone);
        }
        *before = set;
    }

    /// An anomaly began (1) or ended (0).
    pub fn anomaly(&self, e: &AnomalyEvent) {
        let labels = AnomalyLabels {
            view: e.series.view.clone(),
            role: e.series.role.clone(),
            process: e.series.process.clone(),
            port: e.series.port.to_string(),
            quantile: e.quantile.clone(),
            transport: e.series.transport.name().into(),
        };
        let on = e.state == "start";
        if let Some(o) = &self.otlp {
            o.anomaly(&e.series, &e.quantile, on);
        }
        self.anomalies.get_or_create(&labels).set(i64::from(on));
    }

    /// The `container_id` and `pod_uid` labels of a workload (empty when unknown).
    fn workload_labels(&self, w: Option<&Workload>) -> (String, String) {
        let known = |b: &Bounded, v: Option<&String>| v.map_or(String::new(), |v| b.label(v));
        (
            known(&self.containers, w.and_then(|w| w.container_id.as_ref())),
            known(&self.pods, w.and_then(|w| w.pod_uid.as_ref())),
        )
    }

    /// Counts one outcome of a connection over `transport`.
    pub fn outcome(&self, o: &Outcome, transport: Transport) {
        let transport = transport.name();
        match o {
            Outcome::Handshake(h) => {
                let kind = h.kind.name();
                let process = self
                    .processes
                    .label(h.server_process.as_deref().map_or("(remote)", comm));
                let group = h.group.map_or("none".into(), group_label);
                let workload = h
                    .server_process
                    .as_deref()
                    .and_then(pid_of)
                    .and_then(|pid| crate::sync::lock(&self.workloads).of(pid));
                let (container_id, pod_uid) = self.workload_labels(workload.as_deref());
                let labels = HandshakeLabels {
                    role: "server".into(),
                    process: process.clone(),
                    kind: kind.into(),
                    version: self.versions.label(&version_label(h.version)),
                    group: self.groups.label(&group),
                    container_id: container_id.clone(),
                    pod_uid: pod_uid.clone(),
                    transport,
                };
                if let Some(o) = &self.otlp {
                    o.handshake(
                        &labels.role,
                        &labels.process,
                        &labels.kind,
                        &labels.version,
                        &labels.group,
                        (&container_id, &pod_uid),
                        transport,
                    );
                }
                self.handshakes.get_or_create(&labels).inc();
                for (phase, v) in h.phases.named() {
                    if let Some(ns) = v {
                        let s = ns as f64 / 1e9;
                        if let Some(o) = &self.otlp {
                            o.phase(
                                "server",
                                &process,
                                kind,
                                phase,
                                (&container_id, &pod_uid),
                                transport,
                                s,
                            );
                        }
                        self.phases
                            .get_or_create(&PhaseLabels {
                                role: "server".into(),
                                process: process.clone(),
                                kind: kind.into(),
                                phase: phase.into(),
                                container_id: container_id.clone(),
                                pod_uid: pod_uid.clone(),
                                transport,
                            })
                            .observe(s);
                    }
                }
            }
            Outcome::Failed(f) => {
                let reason = f.reason();
                if let Some(o) = &self.otlp {
                    o.failures(reason, transport, 1);
                }
                self.failures
                    .get_or_create(&ReasonLabels {
                        reason: reason.into(),
                        transport,
                    })
                    .inc();
            }
            _ => {}
        }
    }

    /// Counts one probed handshake (`--probes`).
    pub fn probe(&self, r: &ProbeRecord) {
        let role = r.role.name();
        let process = self.processes.label(&r.comm);
        let (container_id, pod_uid) = self.workload_labels(r.workload.as_deref());
        if let Some(o) = &self.otlp {
            o.probe(&process, role, r.result.name(), (&container_id, &pod_uid));
        }
        self.probe_handshakes
            .get_or_create(&ProbeLabels {
                process: process.clone(),
                role: role.into(),
                result: r.result.name().into(),
                container_id: container_id.clone(),
                pod_uid: pod_uid.clone(),
            })
            .inc();
        if r.result != HandshakeResult::Ok {
            return;
        }
        for ((phase, _), v) in PROBE_PHASES.into_iter().zip(phase_values(r)) {
            if let Some(ns) = v {
                let s = ns as f64 / 1e9;
                if let Some(o) = &self.otlp {
                    o.probe_phase(role, &process, phase, (&container_id, &pod_uid), s);
                }
                self.probe_phases
                    .get_or_create(&ProbePhaseLabels {
                        role: role.into(),
                        process: process.clone(),
                        phase: phase.into(),
                        container_id: container_id.clone(),
                        pod_uid: pod_uid.clone(),
                    })
                    .observe(s);
            }
        }
    }

    /// The probes' lost and dropped records, cumulative.
    pub fn probe_lost(&self, c: &ProbeCounts) {
        let total = c.lost.saturating_add(c.dropped);
        let before = self.probe_lost_seen.swap(total, Ordering::Relaxed);
        let n = total.saturating_sub(before);
        if let Some(o) = &self.otlp {
            o.probe_lost(n);
        }
        self.probe_lost.inc_by(n);
    }

    /// The kernel's drop counter, cumulative.
    pub fn kernel_drops(&self, total: u64) {
        let before = self.drops_seen.swap(total, Ordering::Relaxed);
        let n = total.saturating_sub(before);
        if let Some(o) = &self.otlp {
            o.kernel_drops(n);
        }
        self.drops.inc_by(n);
    }

    /// The eBPF filter's dropped segments, cumulative.
    pub fn kernel_filtered(&self, total: u64) {
        let before = self.filtered_seen.swap(total, Ordering::Relaxed);
        let n = total.saturating_sub(before);
        if let Some(o) = &self.otlp {
            o.kernel_filtered(n);
        }
        self.filtered.inc_by(n);
    }

    /// Prometheus text exposition.
    pub fn prometheus_text(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The `/metrics` listener; stops when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `metrics` at `/metrics` on `listener` from a thread of its own.
    pub fn start(
        listener: std::net::TcpListener,
        metrics: Arc<ObserveMetrics>,
    ) -> std::io::Result<MetricsServer> {
        listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("observe-metrics".into())
            .spawn(move || {
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let builder = auto::Builder::new(TokioExecutor::new());
                    loop {
                        tokio::select! {
                            _ = &mut rx => break,
                            accepted = listener.accept() => {
                                let Ok((tcp, _)) = accepted else { continue };
                                let m = Arc::clone(&metrics);
                                let svc = hyper::service::service_fn(move |req| {
                                    respond(req, Arc::clone(&m))
                                });
                                let conn = builder
                                    .serve_connection(TokioIo::new(tcp), svc)
                                    .into_owned();
                                tokio::spawn(conn);
                            }
                        }
                    }
                });
            })?;
        Ok(MetricsServer {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn respond(
    req: Request<hyper::body::Incoming>,
    metrics: Arc<ObserveMetrics>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/metrics" {
        let mut r = Response::new(Full::new(Bytes::from(metrics.prometheus_text())));
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
        );
        return Ok(r);
    }
    let mut r = Response::new(Full::new(Bytes::from_static(b"not found: try /metrics\n")));
    *r.status_mut() = StatusCode::NOT_FOUND;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::timeline::{Failure, Handshake, HandshakeKind, Phases};

    /// A TLS 1.2 resumption served by `server` (no group), server think `think_us`.
    fn resumed(server: Option<&str>, think_us: u64) -> Outcome {
        let phases = Phases {
            server_think: Some(think_us * 1000),
            ..Phases::default()
        };
        Outcome::Handshake(Box::new(Handshake {
            kind: HandshakeKind::Resumed,
            resumption: Some("ticket"),
            version: 0x0303,
            group: None,
            suite: 0xc02f,
            sni: Some("secret.example".into()),
            offer: Default::default(),
            client: "10.0.0.9:51000".parse().unwrap(),
            server: "10.0.0.1:8443".parse().unwrap(),
            phases,
            server_flight_bytes: 200,
            start_ns: None,
            hrr: false,
            retry: false,
            transport: crate::observe::timeline::Transport::Tcp,
            client_process: Some("curl (pid 9)".into()),
            server_process: server.map(str::to_string),
        }))
    }

    fn lines<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn handshakes_are_labelled_by_role_process_kind_version_and_group_in_seconds() {
        // haproxy's cgroup names a pod's container.
        let proc = tempfile::tempdir().unwrap();
        std::fs::create_dir(proc.path().join("12")).unwrap();
        let cgroup = format!(
            "0::/kubepods/burstable/pod0b7c4e2a-91d3-4f6e-8a5b-3c2d1e0f9a8b/{}\n",
            "ab".repeat(32)
        );
        std::fs::write(proc.path().join("12/cgroup"), cgroup).unwrap();
        let m = ObserveMetrics::with_workloads(Cache::with_proc(proc.path().into()));
        m.outcome(&resumed(Some("haproxy (pid 12)"), 1500), Transport::Tcp);
        m.outcome(&resumed(None, 300), Transport::Tcp);
        m.outcome(&Outcome::Failed(Failure::Reset), Transport::Tcp);
        let text = m.prometheus_text();
        let mut handshakes = lines(&text, "tlsperf_observe_handshakes_total{");
        handshakes.sort_unstable();
        assert_eq!(
            handshakes,
            [
                r#"tlsperf_observe_handshakes_total{role="server",process="(remote)",kind="resumed",version="TLSv1.2",group="none",container_id="",pod_uid="",transport="tcp"} 1"#,
                r#"tlsperf_observe_handshakes_total{role="server",process="haproxy",kind="resumed",version="TLSv1.2",group="none",container_id="abababababababababababababababababababababababababababababababab",pod_uid="0b7c4e2a-91d3-4f6e-8a5b-3c2d1e0f9a8b",transport="tcp"} 1"#,
            ],
            "{text}"
        );
        // 1.5 ms is in the bucket of 2.56 ms and not in that of 1.28 ms: seconds.
        assert!(
            text.contains(r#"tlsperf_observe_handshake_phase_seconds_bucket{le="0.00256",role="server",process="haproxy",kind="resumed",phase="server_think",container_id="abababababababababababababababababababababababababababababababab",pod_uid="0b7c4e2a-91d3-4f6e-8a5b-3c2d1e0f9a8b",transport="tcp"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"tlsperf_observe_handshake_phase_seconds_bucket{le="0.00128",role="server",process="haproxy",kind="resumed",phase="server_think",container_id="abababababababababababababababababababababababababababababababab",pod_uid="0b7c4e2a-91d3-4f6e-8a5b-3c2d1e0f9a8b",transport="tcp"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"tlsperf_observe_handshake_failures_total{reason="reset",transport="tcp"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"tlsperf_observe_handshake_failures_total{reason="alert",transport="tcp"} 0"#
            ),
            "{text}"
        );
        // Neither the SNI nor an address is a label.
        assert!(!text.contains("secret.example"), "{text}");
        assert!(!text.contains("10.0.0."), "{text}");
        assert!(text.contains("# TYPE tlsperf_observe_handshake_phase_seconds histogram"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// QUIC's handshakes, phases and failures are series of their own beside TCP's, never
    /// in the same histogram.
    #[test]
    fn quic_outcomes_are_counted_apart_from_tcp_ones() {
        let proc = tempfile::tempdir().unwrap();
        let m = ObserveMetrics::with_workloads(Cache::with_proc(proc.path().into()));
        m.outcome(&resumed(Some("gw (pid 5)"), 1500), Transport::Tcp);
        for _ in 0..3 {
            m.outcome(&resumed(Some("gw (pid 5)"), 300), Transport::Quic);
        }
        m.outcome(&Outcome::Failed(Failure::Incomplete), Transport::Quic);
        let text = m.prometheus_text();
        let count = |series: &str| {
            lines(&text, series)
                .iter()
                .map(|l| l.rsplit(' ').next().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let who = r#"role="server",process="gw",kind="resumed""#;
        let tail = r#"container_id="",pod_uid="""#;
        assert_eq!(
            count(&format!(
                r#"tlsperf_observe_handshakes_total{{{who},version="TLSv1.2",group="none",{tail},transport="quic"}}"#
            )),
            ["3"],
            "{text}"
        );
        assert_eq!(
            count(&format!(
                r#"tlsperf_observe_handshakes_total{{{who},version="TLSv1.2",group="none",{tail},transport="tcp"}}"#
            )),
            ["1"],
            "{text}"
        );
        // Each transport's server_think histogram holds its own values only: QUIC's 300 µs
        // are all under 320 µs, TCP's 1.5 ms is not.
        let bucket = |transport: &str| {
            count(&format!(
                r#"tlsperf_observe_handshake_phase_seconds_bucket{{le="0.00032",{who},phase="server_think",{tail},transport="{transport}"}}"#
            ))
        };
        assert_eq!(bucket("quic"), ["3"], "{text}");
        assert_eq!(bucket("tcp"), ["0"], "{text}");
        assert!(
            text.contains(r#"tlsperf_observe_handshake_failures_total{reason="incomplete",transport="quic"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"tlsperf_observe_handshake_failures_total{reason="incomplete",transport="tcp"} 0"#
            ),
            "{text}"
        );
    }

    #[test]
    fn process_names_beyond_the_bound_are_other() {
        // No process files: no container, no pod.
        let proc = tempfile::tempdir().unwrap();
        let m = ObserveMetrics::with_workloads(Cache::with_proc(proc.path().into()));
        for i in 0..MAX_PROCESSES + 5 {
            m.outcome(
                &resumed(Some(&format!("worker{i} (pid {i})")), 10),
                Transport::Tcp,
            );
        }
        m.outcome(&resumed(Some("worker0 (pid 77)"), 10), Transport::Tcp);
        let text = m.prometheus_text();
        let series = lines(&text, "tlsperf_observe_handshakes_total{");
        assert_eq!(series.len(), MAX_PROCESSES + 1, "{text}");
        assert!(
            text.contains(r#"process="(other)",kind="resumed",version="TLSv1.2",group="none",container_id="",pod_uid="",transport="tcp"} 5"#),
            "{text}"
        );
        assert!(
            text.contains(r#"process="worker0",kind="resumed",version="TLSv1.2",group="none",container_id="",pod_uid="",transport="tcp"} 2"#),
            "{text}"
        );
    }

    #[test]
    fn the_long_baselines_are_gauges_of_the_last_windows_series() {
        let window = |process: &str| -> WindowRecord {
            let series = serde_json::json!({
                "view": "probes", "role": "server", "process": process, "port": 0,
                "handshakes": 1, "per_second": 1.0, "peak_per_second": 1, "failures": {},
                "resumed_share": null, "kinds": {}, "versions": {}, "groups": {}, "sni": {},
                "phases": {}, "baseline": null,
                "long_baseline": {"phase": "total", "hours": 3, "windows": 180,
                    "handshakes": 7200, "p50_ns": 1_500_000, "p90_ns": 2_000_000,
                    "p95_ns": 2_500_000, "p99_ns": 4_000_000, "p999_ns": 12_500_000}
            });
            serde_json::from_value(serde_json::json!({
                "type": "window", "start_ns": 0, "end_ns": 1, "seconds": 1.0,
                "wire_failures": {}, "late": 0, "series": [series]
            }))
            .unwrap()
        };
        let m = ObserveMetrics::new();
        m.long_baselines(&window("gw"));
        let text = m.prometheus_text();
        let gauges = lines(&text, "tlsperf_observe_baseline_24h_seconds{");
        assert_eq!(gauges.len(), 5, "{text}");
        assert!(
            text.contains(r#"tlsperf_observe_baseline_24h_seconds{view="probes",role="server",process="gw",port="0",group="none",quantile="0.999",transport="tcp"} 0.0125"#),
            "{text}"
        );
        // A series no longer in the windows goes.
        m.long_baselines(&window("gw2"));
        let text = m.prometheus_text();
        let gauges = lines(&text, "tlsperf_observe_baseline_24h_seconds{");
        assert_eq!(gauges.len(), 5, "{text}");
        assert!(
            gauges.iter().all(|g| g.contains(r#"process="gw2""#)),
            "{text}"
        );
    }
}
