//! `tlsperf observe --metrics ADDR`: the observation as Prometheus metrics
//! (prometheus-client), for running next to a production gateway: handshakes by kind,
//! phase histograms by kind and phase, failures by reason, the kernel's drop counter,
//! and with `--probes` the processes' handshakes and phases and the records lost;
//! served at `/metrics` by a small hyper server on its own thread.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
use super::timeline::Outcome;
use crate::probes::event::{HandshakeResult, ProbeRecord};
use crate::probes::report::ProbeCounts;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    kind: String,
    phase: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabels {
    /// The process's name (not its pid: short-lived clients would make a series each).
    comm: String,
    role: String,
    result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbePhaseLabels {
    role: String,
    phase: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnomalyLabels {
    view: String,
    role: String,
    process: String,
    port: String,
    quantile: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

fn phase_histogram() -> Histogram {
    // 10 µs … ~5 s.
    Histogram::new(exponential_buckets(0.00001, 2.0, 20))
}

/// The metrics of one observation.
pub struct ObserveMetrics {
    registry: Registry,
    handshakes: Family<KindLabels, Counter>,
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
        let mut registry = Registry::with_prefix("tlsperf_observe");
        let handshakes = Family::<KindLabels, Counter>::default();
        let phases: Family<PhaseLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(phase_histogram);
        let failures = Family::<ReasonLabels, Counter>::default();
        // Series exist from the start: rates see 0, not nothing.
        for kind in ["full", "full-hrr", "resumed", "0rtt"] {
            let _ = handshakes.get_or_create(&KindLabels { kind: kind.into() });
        }
        for reason in ["alert", "reset", "closed", "incomplete"] {
            let _ = failures.get_or_create(&ReasonLabels {
                reason: reason.into(),
            });
        }
        let drops = Counter::default();
        registry.register(
            "handshakes",
            "Completed TLS handshakes seen on the wire, by kind",
            handshakes.clone(),
        );
        registry.register(
            "handshake_phase_seconds",
            "Handshake phases seen on the wire (connect, server_think, server_flight, \
             client_think, tls, first_app_byte, server_first_byte), by kind",
            phases.clone(),
        );
        registry.register(
            "handshake_failures",
            "TLS handshakes begun and not completed, by reason",
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
            "Handshakes seen inside processes by --probes, by process name, role and result",
            probe_handshakes.clone(),
        );
        registry.register(
            "probe_phase_seconds",
            "Completed handshakes' phases inside the process (accept_queue, \
             until_first_call, work, waiting_for_peer, span), by role",
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
        ObserveMetrics {
            registry,
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
        }
    }

    /// An anomaly began (1) or ended (0).
    pub fn anomaly(&self, e: &AnomalyEvent) {
        let labels = AnomalyLabels {
            view: e.series.view.clone(),
            role: e.series.role.clone(),
            process: e.series.process.clone(),
            port: e.series.port.to_string(),
            quantile: e.quantile.clone(),
        };
        self.anomalies
            .get_or_create(&labels)
            .set(i64::from(e.state == "start"));
    }

    /// Counts one connection's outcome.
    pub fn outcome(&self, o: &Outcome) {
        match o {
            Outcome::Handshake(h) => {
                let kind = h.kind.name();
                self.handshakes
                    .get_or_create(&KindLabels { kind: kind.into() })
                    .inc();
                for (phase, v) in h.phases.named() {
                    if let Some(ns) = v {
                        self.phases
                            .get_or_create(&PhaseLabels {
                                kind: kind.into(),
                                phase: phase.into(),
                            })
                            .observe(ns as f64 / 1e9);
                    }
                }
            }
            Outcome::Failed(f) => {
                let reason = f.reason();
                self.failures
                    .get_or_create(&ReasonLabels {
                        reason: reason.into(),
                    })
                    .inc();
            }
            _ => {}
        }
    }

    /// Counts one probed handshake (`--probes`).
    pub fn probe(&self, r: &ProbeRecord) {
        let role = r.role.name();
        self.probe_handshakes
            .get_or_create(&ProbeLabels {
                comm: r.comm.clone(),
                role: role.into(),
                result: r.result.name().into(),
            })
            .inc();
        if r.result != HandshakeResult::Ok {
            return;
        }
        for (phase, v) in [
            ("accept_queue", r.accept_queue_ns()),
            ("until_first_call", r.until_first_call_ns()),
            ("work", r.work()),
            ("waiting_for_peer", r.waiting()),
            ("span", Some(r.span_ns())),
        ] {
            if let Some(ns) = v {
                self.probe_phases
                    .get_or_create(&ProbePhaseLabels {
                        role: role.into(),
                        phase: phase.into(),
                    })
                    .observe(ns as f64 / 1e9);
            }
        }
    }

    /// The probes' lost and dropped records, cumulative.
    pub fn probe_lost(&self, c: &ProbeCounts) {
        let total = c.lost.saturating_add(c.dropped);
        let before = self.probe_lost_seen.swap(total, Ordering::Relaxed);
        self.probe_lost.inc_by(total.saturating_sub(before));
    }

    /// The kernel's drop counter, cumulative.
    pub fn kernel_drops(&self, total: u64) {
        let before = self.drops_seen.swap(total, Ordering::Relaxed);
        self.drops.inc_by(total.saturating_sub(before));
    }

    /// The eBPF filter's dropped segments, cumulative.
    pub fn kernel_filtered(&self, total: u64) {
        let before = self.filtered_seen.swap(total, Ordering::Relaxed);
        self.filtered.inc_by(total.saturating_sub(before));
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
