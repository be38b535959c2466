//! The server's own measurements: Prometheus metrics (prometheus-client) and HDR
//! histograms of handshake latency for the `/stats` snapshot and the shutdown summary.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde::Serialize;

use crate::stats::{LatencyHistogram, Quantiles};

/// Labels of a completed handshake (borrowed names where they are fixed: no allocation
/// per handshake).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandshakeLabels {
    /// `full`, `resumed`, `full-hrr` or `0rtt`.
    pub kind: Cow<'static, str>,
    /// `TLSv1.2` or `TLSv1.3`, as every text and document names them.
    pub version: Cow<'static, str>,
    /// Key-exchange group; `none` for a TLS 1.2 resumption, which exchanges no key.
    pub group: Cow<'static, str>,
    /// Cipher suite.
    pub suite: Cow<'static, str>,
    /// `yes` when the client presented a certificate.
    pub client_auth: Cow<'static, str>,
    /// How a resumed handshake found its session: `ticket` (a TLS 1.2 session ticket or a
    /// TLS 1.3 pre-shared key), `session-id` (a TLS 1.2 session id looked up in the
    /// server's cache), `unknown` (the ClientHello could not be read); `none` when not
    /// resumed.
    pub resumption: Cow<'static, str>,
    /// `tcp`, or `quic` for a `serve --quic` connection (last, so the labels before it
    /// read as they did before QUIC).
    pub transport: Cow<'static, str>,
}

/// Every `reason` of the failures counter; each is exported from the start (at 0).
pub const FAILURE_REASONS: &[&str] = &[
    "timeout",
    "alert-received",
    "bad-client-certificate",
    "incompatible-client",
    "no-matching-sni",
    "protocol-error",
    "tls-error",
    "closed-during-handshake",
    "io-error",
    "max-connections",
    "idle-timeout",
    "header-timeout",
    "body-timeout",
    "shed-idle",
];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    reason: String,
}

fn handshake_histogram() -> Histogram {
    // 50 µs … ~1.6 s.
    Histogram::new(exponential_buckets(0.00005, 2.0, 16))
}

/// Records `took` under `kind` and under `all`.
fn record_by_kind(hdr: &Mutex<BTreeMap<String, LatencyHistogram>>, kind: &str, took: Duration) {
    if let Ok(mut h) = hdr.lock() {
        // Looked up before inserting: the key is allocated once per kind, not per
        // handshake.
        for key in [kind, "all"] {
            match h.get_mut(key) {
                Some(hist) => {
                    let _ = hist.record(took);
                }
                None => {
                    let _ = h.entry(key.to_string()).or_default().record(took);
                }
            }
        }
    }
}

/// All server metrics.
pub struct Metrics {
    registry: Registry,
    handshakes: Family<HandshakeLabels, Histogram, fn() -> Histogram>,
    failures: Family<FailureLabels, Counter>,
    open: Gauge,
    requests: Counter,
    rejected: Counter,
    quic_retries: Counter,
    quic_unvalidated: Gauge,
    /// `serve --quic`'s Retry policy, in words (`None` without QUIC: no `quic_retry` in
    /// `/stats`).
    quic_retry_policy: Mutex<Option<String>>,
    quic_retries_total: AtomicU64,
    quic_unvalidated_now: AtomicI64,
    quic_version_negotiations: Counter,
    quic_version_negotiations_total: AtomicU64,
    hdr: Mutex<BTreeMap<String, LatencyHistogram>>,
    /// The QUIC handshakes alone, by kind and `all`.
    quic_hdr: Mutex<BTreeMap<String, LatencyHistogram>>,
    open_now: AtomicI64,
    requests_total: AtomicU64,
    request_body_bytes: AtomicU64,
    failures_by_reason: Mutex<BTreeMap<String, u64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tlsperf");
        let handshakes: Family<HandshakeLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(handshake_histogram);
        let failures = Family::<FailureLabels, Counter>::default();
        // A series exists before its first failure: rates and alerts see 0, not nothing.
        for reason in FAILURE_REASONS {
            let _ = failures.get_or_create(&FailureLabels {
                reason: (*reason).to_string(),
            });
        }
        let open = Gauge::default();
        let requests = Counter::default();
        let rejected = Counter::default();
        let quic_retries = Counter::default();
        let quic_unvalidated = Gauge::default();
        let quic_version_negotiations = Counter::default();
        registry.register(
            "handshake_duration_seconds",
            "TLS handshake time from TCP accept (once the ClientHello has arrived), or from a QUIC \
             connection's first Initial packet, to handshake complete",
            handshakes.clone(),
        );
        registry.register(
            "handshake_failures",
            "Failed TLS handshakes, and connections the server closed, by reason \
             (max-connections, idle-timeout, header-timeout, body-timeout, shed-idle)",
            failures.clone(),
        );
        registry.register("open_connections", "Connections open now", open.clone());
        registry.register("requests", "HTTP requests served", requests.clone());
        registry.register(
            "rejected_connections",
            "Connections closed at once because --max-connections was reached",
            rejected.clone(),
        );
        registry.register(
            "quic_retries",
            "Retry packets serve --quic sent to validate a client's address: to every \
             unvalidated client with --quic-retry, else once --quic-retry-above handshakes \
             from unvalidated addresses were under way",
            quic_retries.clone(),
        );
        registry.register(
            "quic_unvalidated_handshakes",
            "QUIC handshakes under way from client addresses not validated yet",
            quic_unvalidated.clone(),
        );
        registry.register(
            "quic_version_negotiations",
            "Version Negotiation packets serve --quic sent: answers to Initials (of 1,200 \
             bytes or more) of a QUIC version it does not speak",
            quic_version_negotiations.clone(),
        );
        Metrics {
            registry,
            handshakes,
            failures,
            open,
            requests,
            rejected,
            quic_retries,
            quic_unvalidated,
            quic_retry_policy: Mutex::new(None),
            quic_retries_total: AtomicU64::new(0),
            quic_unvalidated_now: AtomicI64::new(0),
            quic_version_negotiations,
            quic_version_negotiations_total: AtomicU64::new(0),
            hdr: Mutex::new(BTreeMap::new()),
            quic_hdr: Mutex::new(BTreeMap::new()),
            open_now: AtomicI64::new(0),
            requests_total: AtomicU64::new(0),
            request_body_bytes: AtomicU64::new(0),
            failures_by_reason: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records a completed handshake.
    pub fn handshake(&self, labels: HandshakeLabels, took: Duration) {
        self.handshakes
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        record_by_kind(&self.hdr, &labels.kind, took);
        if labels.transport == "quic" {
            record_by_kind(&self.quic_hdr, &labels.kind, took);
        }
    }

    /// Records a failed handshake.
    pub fn failure(&self, reason: &str) {
        self.failures
            .get_or_create(&FailureLabels {
                reason: reason.to_string(),
            })
            .inc();
        if let Ok(mut f) = self.failures_by_reason.lock() {
            *f.entry(reason.to_string()).or_default() += 1;
        }
    }

    /// A connection opened (+1) or closed (−1).
    pub fn open_delta(&self, d: i64) {
        self.open.inc_by(d);
        self.open_now.fetch_add(d, Ordering::Relaxed);
    }

    /// One request served.
    pub fn request(&self) {
        self.requests.inc();
        self.requests_total.fetch_add(1, Ordering::Relaxed);
    }

    /// `n` more bytes of request bodies (uploads) read.
    pub fn request_body(&self, n: u64) {
        self.request_body_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// One connection refused at the limit.
    pub fn rejected(&self) {
        self.rejected.inc();
        self.failure("max-connections");
    }

    /// `serve --quic` runs with this Retry policy (in words: `always`, `above N
    /// unvalidated handshakes`): `/stats` gains `quic_retry`.
    pub fn quic_retry_policy(&self, policy: String) {
        if let Ok(mut p) = self.quic_retry_policy.lock() {
            *p = Some(policy);
        }
    }

    /// One Retry sent.
    pub fn quic_retry(&self) {
        self.quic_retries.inc();
        self.quic_retries_total.fetch_add(1, Ordering::Relaxed);
    }

    /// One Version Negotiation packet sent.
    pub fn quic_version_negotiation(&self) {
        self.quic_version_negotiations.inc();
        self.quic_version_negotiations_total
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A QUIC handshake from an unvalidated address began (+1) or ended (−1).
    pub fn quic_unvalidated_delta(&self, d: i64) {
        self.quic_unvalidated.inc_by(d);
        self.quic_unvalidated_now.fetch_add(d, Ordering::Relaxed);
    }

    /// Prometheus text exposition.
    pub fn prometheus_text(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// A snapshot: handshake counts and percentiles by kind, requests, failures.
    pub fn snapshot(&self) -> StatsSnapshot {
        let by_kind = |hdr: &Mutex<BTreeMap<String, LatencyHistogram>>| {
            hdr.lock()
                .map(|h| h.iter().map(|(k, v)| (k.clone(), v.quantiles())).collect())
                .unwrap_or_default()
        };
        StatsSnapshot {
            handshakes: by_kind(&self.hdr),
            quic_handshakes: by_kind(&self.quic_hdr),
            requests: self.requests_total.load(Ordering::Relaxed),
            request_body_bytes: self.request_body_bytes.load(Ordering::Relaxed),
            open_connections: self.open_now.load(Ordering::Relaxed),
            quic_retry: self
                .quic_retry_policy
                .lock()
                .ok()
                .and_then(|p| p.clone())
                .map(|policy| QuicRetryStats {
                    policy,
                    retries: self.quic_retries_total.load(Ordering::Relaxed),
                    unvalidated_handshakes: self.quic_unvalidated_now.load(Ordering::Relaxed),
                    version_negotiations: self
                        .quic_version_negotiations_total
                        .load(Ordering::Relaxed),
                }),
            failures: self
                .failures_by_reason
                .lock()
                .map(|f| f.clone())
                .unwrap_or_default(),
        }
    }
}

/// What `/stats` returns and the shutdown summary prints.
#[derive(Debug, Clone, Serialize)]
pub struct StatsSnapshot {
    /// Handshake latency by kind (`all`, `full`, `resumed`, …), nanoseconds: every
    /// handshake, TCP and QUIC.
    pub handshakes: BTreeMap<String, Quantiles>,
    /// The QUIC handshakes alone (`serve --quic`), by kind as `handshakes`; absent when
    /// there was none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub quic_handshakes: BTreeMap<String, Quantiles>,
    /// Requests served.
    pub requests: u64,
    /// Bytes of request bodies read (`POST /` uploads).
    pub request_body_bytes: u64,
    /// Connections open now.
    pub open_connections: i64,
    /// `serve --quic`'s address validation and version negotiation (absent without
    /// `--quic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic_retry: Option<QuicRetryStats>,
    /// Failed handshakes (and refused connections) by reason.
    pub failures: BTreeMap<String, u64>,
}

/// `serve --quic`'s address validation, and its version negotiation, so far.
#[derive(Debug, Clone, Serialize)]
pub struct QuicRetryStats {
    /// When an unvalidated client gets a Retry: `always` (`--quic-retry`) or `above N
    /// unvalidated handshakes` (`--quic-retry-above N`, the default).
    pub policy: String,
    /// Retry packets sent.
    pub retries: u64,
    /// Handshakes under way now from addresses not validated yet.
    pub unvalidated_handshakes: i64,
    /// Version Negotiation packets sent: Initials of a version serve does not speak,
    /// answered with the versions it does (counted like a HelloRetryRequest: the client
    /// pays a round trip, or fails when it shares no version).
    pub version_negotiations: u64,
}
