//! `tlsperf observe --otlp ENDPOINT`: the metrics of [`super::metrics`] pushed to an
//! OpenTelemetry collector over OTLP/HTTP (protobuf), with the `opentelemetry` SDK and
//! `opentelemetry-otlp`'s exporter.
//!
//! The same instruments as the Prometheus exposition, recorded at the same points with
//! the same bounded label values ([`super::metrics::ObserveMetrics`] computes them once
//! and records to both), named so that a collector's Prometheus exporter gives back the
//! Prometheus names (`tlsperf.observe.handshake.phase`, unit `s` →
//! `tlsperf_observe_handshake_phase_seconds`); the attributes carry OpenTelemetry's
//! semantic-convention names where one exists ([`attributes`] is the mapping):
//!
//! | Prometheus label | OTLP attribute |
//! | --- | --- |
//! | `version` (`TLSv1.3`) | `tls.protocol.name` (`tls`) and `tls.protocol.version` (`1.3`) |
//! | `group` | `tls.curve` |
//! | `reason` (wire failures) | `error.type` |
//! | `result` (probes) | `error.type`, absent when the handshake succeeded |
//! | `process` | `process.executable.name` |
//! | `port` (anomaly) | `server.port` |
//! | `transport` (`tcp`, `quic`) | `network.transport` |
//! | `role`, `kind`, `phase`, `view`, `quantile` | `tlsperf.role`, `tlsperf.handshake.kind`, `tlsperf.phase`, `tlsperf.view`, `tlsperf.quantile` |
//!
//! Every `--otlp-interval` the periodic reader collects the cumulative sums and
//! histograms and exports them once: a failed export is not queued or retried beyond
//! the exporter's bounded retries within one timeout, since the next export carries the
//! totals so far. [`OtlpExport::health`] says when exports start failing and when they
//! work again; [`OtlpExport::finish`] exports what is left (at the end of the run or
//! Ctrl-C) and shuts the exporter down.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, MeterProvider as _};
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};

use crate::error::{Classify, ErrorClass};

/// The default time between two exports.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// The most one export may take, retries included (the final export at shutdown is
/// waited for 5 s by the SDK: it must answer before then).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(4);

/// Where and how often to export.
#[derive(Debug, Clone)]
pub struct OtlpSetup {
    /// The collector: `http://HOST:PORT` or `https://HOST:PORT`, optionally with a
    /// path; without one, `/v1/metrics` (OTLP/HTTP's path for metrics) is appended.
    pub endpoint: String,
    /// Time between two exports.
    pub interval: Duration,
}

/// Why the export could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The endpoint is not an OTLP/HTTP URL.
    #[error("--otlp {endpoint}: {why}")]
    Endpoint {
        /// As given.
        endpoint: String,
        /// What is wrong with it.
        why: String,
    },
    /// The exporter, its HTTP client or its thread could not be made.
    #[error("--otlp: {0}")]
    Start(String),
}

impl Classify for OtlpError {
    fn class(&self) -> ErrorClass {
        match self {
            OtlpError::Endpoint { .. } => ErrorClass::Input,
            OtlpError::Start(_) => ErrorClass::Runtime,
        }
    }
}

/// The URL exports are sent to: `endpoint` checked, `/v1/metrics` appended when it has
/// no path.
pub fn metrics_url(endpoint: &str) -> Result<http::Uri, OtlpError> {
    let bad = |why: String| OtlpError::Endpoint {
        endpoint: endpoint.to_string(),
        why,
    };
    let uri: http::Uri = endpoint.parse().map_err(|e| {
        bad(format!(
            "not a URL ({e}); give the collector as http://HOST:PORT or https://HOST:PORT"
        ))
    })?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => {
            return Err(bad(format!(
                "the scheme {other}: is not OTLP/HTTP; give http:// or https://"
            )));
        }
        None => {
            return Err(bad(
                "no scheme; give the collector as http://HOST:PORT (OTLP/HTTP, usually port \
                 4318) or https://HOST:PORT"
                    .into(),
            ));
        }
    }
    let Some(authority) = uri.authority() else {
        return Err(bad("no host".into()));
    };
    if authority.host().is_empty() {
        return Err(bad("no host".into()));
    }
    if authority.as_str().contains('@') {
        return Err(bad(
            "credentials in the URL would be sent and logged as they are; give them in \
             OTEL_EXPORTER_OTLP_HEADERS instead"
                .into(),
        ));
    }
    if uri.query().is_some() {
        return Err(bad("a query is not part of an OTLP endpoint".into()));
    }
    if matches!(uri.path(), "" | "/") {
        let with = format!(
            "{}://{authority}/v1/metrics",
            uri.scheme_str().unwrap_or("http")
        );
        return with.parse().map_err(|e| bad(format!("{e}")));
    }
    Ok(uri)
}

/// Attribute names: OpenTelemetry's semantic conventions where they have one, else in
/// the `tlsperf.` namespace.
pub mod attributes {
    /// The protocol's name, lower case (`tls`, `ssl`).
    pub const TLS_PROTOCOL_NAME: &str = "tls.protocol.name";
    /// The protocol's version, its numeric part (`1.2`, `1.3`, `3` for SSLv3).
    pub const TLS_PROTOCOL_VERSION: &str = "tls.protocol.version";
    /// The key-exchange group (`x25519`, `X25519MLKEM768`, `none` for a TLS 1.2
    /// resumption).
    pub const TLS_CURVE: &str = "tls.curve";
    /// Why a handshake failed.
    pub const ERROR_TYPE: &str = "error.type";
    /// The process's name (`comm`).
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    /// The server's port.
    pub const SERVER_PORT: &str = "server.port";
    /// The wire's transport: `tcp` or `quic`.
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    /// `server` or `client`.
    pub const ROLE: &str = "tlsperf.role";
    /// `full`, `full-hrr`, `resumed`, `0rtt`.
    pub const HANDSHAKE_KIND: &str = "tlsperf.handshake.kind";
    /// The phase's name, as the result document calls it.
    pub const PHASE: &str = "tlsperf.phase";
    /// `wire` or `probes`.
    pub const VIEW: &str = "tlsperf.view";
    /// The quantile judged (`p50`, `p90`).
    pub const QUANTILE: &str = "tlsperf.quantile";
    /// The container of the process, from its cgroup path.
    pub const CONTAINER_ID: &str = "container.id";
    /// The Kubernetes pod of the process, from its cgroup path.
    pub const K8S_POD_UID: &str = "k8s.pod.uid";
}

/// A process's (container id, pod UID) label values, empty when unknown.
pub(super) type Workload<'a> = (&'a str, &'a str);

/// Whose handshake: `tlsperf.role`, `process.executable.name`, and `container.id` and
/// `k8s.pod.uid` when known (as the Prometheus labels `container_id` and `pod_uid`, left
/// out when empty).
fn who(role: &str, process: &str, (container, pod): Workload<'_>) -> Vec<KeyValue> {
    let mut attrs = vec![
        KeyValue::new(attributes::ROLE, role.to_string()),
        KeyValue::new(attributes::PROCESS_EXECUTABLE_NAME, process.to_string()),
    ];
    if !container.is_empty() {
        attrs.push(KeyValue::new(
            attributes::CONTAINER_ID,
            container.to_string(),
        ));
    }
    if !pod.is_empty() {
        attrs.push(KeyValue::new(attributes::K8S_POD_UID, pod.to_string()));
    }
    attrs
}

/// `tls.protocol.name` and `tls.protocol.version` of a version label (`TLSv1.3` → `tls`,
/// `1.3`); a version without a name (`0x7f1c`, `(other)`) keeps its label as the
/// version.
fn protocol(version: &str) -> (Option<&'static str>, &str) {
    if let Some(v) = version.strip_prefix("TLSv") {
        (Some("tls"), v)
    } else if let Some(v) = version.strip_prefix("SSLv") {
        (Some("ssl"), v)
    } else {
        (None, version)
    }
}

/// The instruments, recorded by [`super::metrics::ObserveMetrics`] with its label
/// values.
#[derive(Debug, Clone)]
pub struct Instruments {
    handshakes: Counter<u64>,
    phases: Histogram<f64>,
    failures: Counter<u64>,
    drops: Counter<u64>,
    filtered: Counter<u64>,
    probe_handshakes: Counter<u64>,
    probe_phases: Histogram<f64>,
    probe_lost: Counter<u64>,
    anomalies: Gauge<i64>,
}

impl Instruments {
    fn new(meter: &Meter, buckets: &[f64]) -> Instruments {
        let counter = |name: &'static str, unit: &'static str, about: &'static str| {
            meter
                .u64_counter(name)
                .with_unit(unit)
                .with_description(about)
                .build()
        };
        let histogram = |name: &'static str, about: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(about)
                .with_boundaries(buckets.to_vec())
                .build()
        };
        Instruments {
            handshakes: counter(
                "tlsperf.observe.handshakes",
                "{handshake}",
                "Completed TLS handshakes seen on the wire",
            ),
            phases: histogram(
                "tlsperf.observe.handshake.phase",
                "Handshake phases seen on the wire",
            ),
            failures: counter(
                "tlsperf.observe.handshake.failures",
                "{handshake}",
                "TLS handshakes begun and not completed, by error.type",
            ),
            drops: counter(
                "tlsperf.observe.kernel.drops",
                "{frame}",
                "Frames the kernel dropped before tlsperf read them",
            ),
            filtered: counter(
                "tlsperf.observe.kernel.filtered_segments",
                "{segment}",
                "Segments of connections whose analysis was over, dropped by the eBPF \
                 capture filter in the kernel",
            ),
            probe_handshakes: counter(
                "tlsperf.observe.probe.handshakes",
                "{handshake}",
                "Handshakes seen inside processes by --probes",
            ),
            probe_phases: histogram(
                "tlsperf.observe.probe.phase",
                "Completed handshakes' phases inside the process",
            ),
            probe_lost: counter(
                "tlsperf.observe.probe.lost_events",
                "{event}",
                "Probe records lost (ring buffer full) or dropped by tlsperf",
            ),
            anomalies: meter
                .i64_gauge("tlsperf.observe.anomaly")
                .with_description(
                    "1 while a series' window quantile is above its baseline (--window)",
                )
                .build(),
        }
    }

    /// One completed handshake on the wire.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn handshake(
        &self,
        role: &str,
        process: &str,
        kind: &str,
        version: &str,
        group: &str,
        workload: Workload<'_>,
        transport: &'static str,
    ) {
        use attributes::*;
        let (name, version) = protocol(version);
        let mut attrs = who(role, process, workload);
        attrs.extend([
            KeyValue::new(HANDSHAKE_KIND, kind.to_string()),
            KeyValue::new(TLS_PROTOCOL_VERSION, version.to_string()),
            KeyValue::new(TLS_CURVE, group.to_string()),
            KeyValue::new(NETWORK_TRANSPORT, transport),
        ]);
        if let Some(name) = name {
            attrs.push(KeyValue::new(TLS_PROTOCOL_NAME, name));
        }
        self.handshakes.add(1, &attrs);
    }

    /// One phase of a handshake on the wire, in seconds.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn phase(
        &self,
        role: &str,
        process: &str,
        kind: &str,
        phase: &str,
        workload: Workload<'_>,
        transport: &'static str,
        s: f64,
    ) {
        use attributes::*;
        let mut attrs = who(role, process, workload);
        attrs.extend([
            KeyValue::new(HANDSHAKE_KIND, kind.to_string()),
            KeyValue::new(PHASE, phase.to_string()),
            KeyValue::new(NETWORK_TRANSPORT, transport),
        ]);
        self.phases.record(s, &attrs);
    }

    /// `n` more handshakes begun and not completed on the wire over `transport` (0: the
    /// series exists).
    pub(super) fn failures(&self, reason: &str, transport: &'static str, n: u64) {
        self.failures.add(
            n,
            &[
                KeyValue::new(attributes::ERROR_TYPE, reason.to_string()),
                KeyValue::new(attributes::NETWORK_TRANSPORT, transport),
            ],
        );
    }

    /// `n` more frames dropped by the kernel.
    pub(super) fn kernel_drops(&self, n: u64) {
        self.drops.add(n, &[]);
    }

    /// `n` more segments dropped by the eBPF filter.
    pub(super) fn kernel_filtered(&self, n: u64) {
        self.filtered.add(n, &[]);
    }

    /// One probed handshake (`result` `ok` carries no `error.type`).
    pub(super) fn probe(&self, process: &str, role: &str, result: &str, workload: Workload<'_>) {
        let mut attrs = who(role, process, workload);
        if result != "ok" {
            attrs.push(KeyValue::new(attributes::ERROR_TYPE, result.to_string()));
        }
        self.probe_handshakes.add(1, &attrs);
    }

    /// One phase of a probed handshake, in seconds.
    pub(super) fn probe_phase(
        &self,
        role: &str,
        process: &str,
        phase: &str,
        workload: Workload<'_>,
        s: f64,
    ) {
        let mut attrs = who(role, process, workload);
        attrs.push(KeyValue::new(attributes::PHASE, phase.to_string()));
        self.probe_phases.record(s, &attrs);
    }

    /// `n` more probe records lost.
    pub(super) fn probe_lost(&self, n: u64) {
        self.probe_lost.add(n, &[]);
    }

    /// An anomaly of `series` at `quantile` began (1) or ended (0); port 0 (the probes'
    /// series) is left out.
    pub(super) fn anomaly(&self, series: &super::window::SeriesKey, quantile: &str, on: bool) {
        use attributes::*;
        let mut attrs = vec![
            KeyValue::new(VIEW, series.view.clone()),
            KeyValue::new(ROLE, series.role.clone()),
            KeyValue::new(PROCESS_EXECUTABLE_NAME, series.process.clone()),
            KeyValue::new(QUANTILE, quantile.to_string()),
            KeyValue::new(NETWORK_TRANSPORT, series.transport.name()),
        ];
        if series.port != 0 {
            attrs.push(KeyValue::new(SERVER_PORT, i64::from(series.port)));
        }
        self.anomalies.record(i64::from(on), &attrs);
    }
}

/// What the exports did since the last look.
#[derive(Debug, Default)]
struct Exports {
    /// The last export failed, with this error.
    failing: Option<String>,
    /// Exports that failed in a row (the last ones, or those before the last success).
    failed: u64,
    /// The current run of failures is said ([`OtlpExport::health`]).
    said: bool,
    /// Why the HTTP client's last request failed, in words (the exporter keeps only
    /// "network error").
    cause: Option<String>,
}

/// A change in the exports' health, for the run to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Exports fail (the first of a run of failures).
    Failing(String),
    /// Exports work again after this many failures.
    Recovered(u64),
}

/// The OTLP exporter, wrapped to keep each export's outcome for [`OtlpExport::health`].
#[derive(Debug)]
struct Watched {
    inner: opentelemetry_otlp::MetricExporter,
    exports: Arc<Mutex<Exports>>,
}

impl PushMetricExporter for Watched {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        let mut e = crate::sync::lock(&self.exports);
        let cause = e.cause.take();
        match &result {
            Ok(()) => e.failing = None,
            Err(why) => {
                if e.failing.is_none() {
                    // A new run of failures.
                    e.failed = 0;
                    e.said = false;
                }
                e.failed += 1;
                // The client's own words when it failed (the exporter says "network
                // error"), else the exporter's (an HTTP status and the collector's body).
                e.failing = Some(cause.unwrap_or_else(|| why.to_string()));
            }
        }
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// hyper's client over rustls (`opentelemetry-http`'s [`opentelemetry_http::hyper`]
/// client with hyper-rustls's connector), run on the export's own Tokio runtime: the
/// SDK's periodic reader calls it from a thread of its own, outside any runtime.
#[derive(Debug)]
struct OnRuntime {
    client: opentelemetry_http::hyper::HyperClient<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    >,
    runtime: tokio::runtime::Handle,
    exports: Arc<Mutex<Exports>>,
}

impl HttpClient for OnRuntime {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        let client = self.client.clone();
        let exports = Arc::clone(&self.exports);
        let sent = self
            .runtime
            .spawn(async move { client.send_bytes(request).await });
        Box::pin(async move {
            let result = sent.await.map_err(|e| Box::new(e) as HttpError)?;
            if let Err(e) = &result {
                crate::sync::lock(&exports).cause = Some(failure_words(e.as_ref()));
            }
            result
        })
    }
}

/// Why a request to the collector failed, in words: rustls's refusal of its certificate
/// said for what it means here (its own text is an enum's name), else the error's chain.
fn failure_words(e: &(dyn std::error::Error + 'static)) -> String {
    use rustls::CertificateError as C;
    if let Some(rustls::Error::InvalidCertificate(cert)) = find_rustls(e) {
        let why = match cert {
            C::UnknownIssuer => "no trusted root issued its chain (give the collector's CA \
                                 in SSL_CERT_FILE, or its chain lacks an intermediate)"
                .to_string(),
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "it is not issued for the endpoint's host name".to_string()
            }
            C::Expired | C::ExpiredContext { .. } => "it has expired".to_string(),
            other => rustls::Error::InvalidCertificate(other.clone()).to_string(),
        };
        return format!("the collector's certificate is refused: {why}");
    }
    crate::error::sentence(e)
}

/// rustls's error in `e`'s chain, looking inside I/O errors too (whose `source` skips
/// the error they wrap).
fn find_rustls<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    let wrapped = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
        .map(|inner| inner as &(dyn std::error::Error + 'static));
    wrapped
        .and_then(find_rustls)
        .or_else(|| e.source().and_then(find_rustls))
}

/// The export running: the meter provider with its periodic reader, the HTTP client's
/// runtime on a thread of its own.
#[derive(Debug)]
pub struct OtlpExport {
    provider: SdkMeterProvider,
    exports: Arc<Mutex<Exports>>,
    /// The URL exports go to.
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OtlpExport {
    /// Checks the endpoint, builds the exporter and starts exporting every
    /// `setup.interval`; the instruments to record to. Nothing is sent before the first
    /// interval has passed.
    pub fn start(
        setup: &OtlpSetup,
        buckets: &[f64],
    ) -> Result<(OtlpExport, Instruments), OtlpError> {
        let url = metrics_url(&setup.endpoint)?;
        let start =
            |what: &str, e: &dyn std::fmt::Display| OtlpError::Start(format!("{what}: {e}"));
        let connector = connector(&url, &setup.endpoint)?;
        // Driven by its thread's block_on, which runs the requests spawned onto it.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| start("its runtime", &e))?;
        let handle = runtime.handle().clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        // The runtime lives on a thread of its own, and is dropped there: the pipeline
        // may run inside the caller's runtime, where dropping one is refused.
        let thread = std::thread::Builder::new()
            .name("observe-otlp".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = rx.await;
                });
            })
            .map_err(|e| start("its thread", &e))?;
        let timeout = EXPORT_TIMEOUT.min(setup.interval);
        let exports = Arc::new(Mutex::new(Exports::default()));
        let client = OnRuntime {
            client: opentelemetry_http::hyper::HyperClient::new(connector, timeout, None),
            runtime: handle,
            exports: Arc::clone(&exports),
        };
        let built = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_endpoint(url.to_string())
            .with_protocol(Protocol::HttpBinary)
            .with_timeout(timeout)
            .with_temporality(Temporality::Cumulative)
            .build();
        let exporter = match built {
            Ok(e) => e,
            Err(e) => {
                let _ = tx.send(());
                let _ = thread.join();
                return Err(start("the exporter", &e));
            }
        };
        let reader = PeriodicReader::builder(Watched {
            inner: exporter,
            exports: Arc::clone(&exports),
        })
        .with_interval(setup.interval)
        .build();
        // OTEL_RESOURCE_ATTRIBUTES is read here (the node, the pod: what tells agents
        // apart at the collector); OTEL_SERVICE_NAME, when set, names the service.
        let service = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "tlsperf-observe".into());
        let provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        let instruments = Instruments::new(&provider.meter("tlsperf.observe"), buckets);
        let export = OtlpExport {
            provider,
            exports,
            url: url.to_string(),
            stop: Some(tx),
            thread: Some(thread),
        };
        Ok((export, instruments))
    }

    /// What changed in the exports since the last call, if anything.
    pub fn health(&self) -> Option<Health> {
        let mut e = crate::sync::lock(&self.exports);
        match (&e.failing, e.said) {
            (Some(why), false) => {
                let why = why.clone();
                e.said = true;
                Some(Health::Failing(why))
            }
            (None, true) => {
                e.said = false;
                Some(Health::Recovered(e.failed))
            }
            _ => None,
        }
    }

    /// Exports what was recorded since the last export and stops; a sentence when that
    /// last export failed.
    pub fn finish(mut self) -> Result<(), String> {
        let shut = self.provider.shutdown();
        let failing = crate::sync::lock(&self.exports).failing.take();
        self.stop_runtime();
        match (failing, shut) {
            (Some(why), _) => Err(format!(
                "--otlp {}: the last export, at the end of the run, failed: what was counted \
                 since the last export that arrived is not at the collector ({why})",
                self.url
            )),
            (None, Err(why)) => Err(format!("--otlp {}: {why}", self.url)),
            (None, Ok(())) => Ok(()),
        }
    }

    fn stop_runtime(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for OtlpExport {
    fn drop(&mut self) {
        self.stop_runtime();
    }
}

/// The HTTP connector: plain HTTP, or HTTPS over rustls verifying the collector against
/// the system's trust store (SSL_CERT_FILE honoured), HTTP/1.1.
fn connector(
    url: &http::Uri,
    endpoint: &str,
) -> Result<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    OtlpError,
> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    if url.scheme_str() == Some("https") {
        crate::trust::discover::check_ssl_cert_file().map_err(|e| OtlpError::Endpoint {
            endpoint: endpoint.to_string(),
            why: format!("SSL_CERT_FILE: {e}"),
        })?;
        let loaded = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(loaded.certs);
        if roots.is_empty() {
            return Err(OtlpError::Endpoint {
                endpoint: endpoint.to_string(),
                why: "https, and no trusted root certificate in the system's store (or \
                      SSL_CERT_FILE) to verify the collector with"
                    .into(),
            });
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OtlpError::Start(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_without_a_path_gets_the_metrics_path() {
        let u = metrics_url("http://127.0.0.1:4318").unwrap();
        assert_eq!(u.to_string(), "http://127.0.0.1:4318/v1/metrics");
        let u = metrics_url("https://collector.example/").unwrap();
        assert_eq!(u.to_string(), "https://collector.example/v1/metrics");
        let u = metrics_url("http://[::1]:4318/otlp/v1/metrics").unwrap();
        assert_eq!(u.to_string(), "http://[::1]:4318/otlp/v1/metrics");
    }

    #[test]
    fn a_bad_endpoint_says_why_in_words() {
        for (given, says) in [
            ("127.0.0.1:4318", "no scheme"),
            ("grpc://127.0.0.1:4317", "not OTLP/HTTP"),
            ("http://", "not a URL"),
            ("http://user:pw@host:4318", "OTEL_EXPORTER_OTLP_HEADERS"),
            ("not a url", "not a URL"),
        ] {
            let e = metrics_url(given).unwrap_err();
            assert_eq!(e.class(), ErrorClass::Input);
            let text = e.to_string();
            assert!(text.starts_with(&format!("--otlp {given}: ")), "{text}");
            assert!(text.contains(says), "{given}: {text}");
        }
    }

    use crate::observe::baseline::AnomalyEvent;
    use crate::observe::metrics::{ObserveMetrics, phase_buckets};
    use crate::observe::window::SeriesKey;
    use crate::probes::event::{HandshakeResult, Library, ProbeRecord, Role};
    use opentelemetry::Value;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use std::collections::BTreeMap;

    /// A data point as the test reads it: instrument, attributes as text, value (a
    /// histogram's count).
    type Point = (String, BTreeMap<String, String>, f64);

    /// An exporter keeping what it is given (the periodic reader's last export, at
    /// shutdown).
    #[derive(Debug, Clone, Default)]
    struct Keep(Arc<Mutex<Vec<Point>>>);

    impl PushMetricExporter for Keep {
        async fn export(&self, rm: &ResourceMetrics) -> OTelSdkResult {
            let mut kept = crate::sync::lock(&self.0);
            kept.clear();
            for m in rm.scope_metrics().flat_map(|s| s.metrics()) {
                let name = m.name().to_string();
                let mut keep = |a: &mut dyn Iterator<Item = &KeyValue>, v: f64| {
                    let attrs = a
                        .map(|kv| {
                            let v = match &kv.value {
                                Value::I64(i) => i.to_string(),
                                other => other.as_str().into_owned(),
                            };
                            (kv.key.to_string(), v)
                        })
                        .collect();
                    kept.push((name.clone(), attrs, v));
                };
                match m.data() {
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        for p in s.data_points() {
                            keep(&mut p.attributes(), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::I64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            keep(&mut p.attributes(), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        assert_eq!(m.unit(), "s");
                        for p in h.data_points() {
                            assert_eq!(p.bounds().collect::<Vec<_>>(), phase_buckets());
                            keep(&mut p.attributes(), p.count() as f64);
                        }
                    }
                    _ => panic!("{name}: an instrument of another kind"),
                }
            }
            Ok(())
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
        fn temporality(&self) -> Temporality {
            Temporality::Cumulative
        }
    }

    fn record(comm: &str, result: HandshakeResult) -> ProbeRecord {
        ProbeRecord {
            pid: 7,
            tid: 7,
            comm: comm.into(),
            role: Role::Server,
            library: Library::OpenSsl,
            result,
            fd: 3,
            local: None,
            peer: None,
            established_ns: Some(1_000),
            socket_ns: None,
            first_call_ns: 2_000,
            end_ns: 3_000_000,
            work_ns: 1_500_000,
            workload: None,
            on_cpu_ns: None,
            parts: [None; crate::probes::event::PARTS.len()],
            trust_before_ns: None,
            signature_len: None,
            signature_kind: None,
            group: None,
            waiting_ns: 1_000_000,
            calls: 2,
            whole: true,
            split: true,
        }
    }

    fn anomaly(view: &str, port: u16) -> AnomalyEvent {
        AnomalyEvent {
            cpu_pressure: None,
            cpu_pressure_before: None,
            kind: "anomaly".into(),
            state: "start".into(),
            series: SeriesKey {
                view: view.into(),
                role: "server".into(),
                process: "nginx".into(),
                port,
                group: None,
                transport: Default::default(),
            },
            quantile: "p90".into(),
            phase: "tls".into(),
            baseline_ns: 1,
            threshold_ns: 2,
            now_ns: 3,
            since_ns: 0,
            at_ns: 0,
            moved: None,
            share: None,
            phases: Vec::new(),
        }
    }

    /// The points of `name`, sorted by their attributes.
    fn points(kept: &[Point], name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let mut p: Vec<_> = kept
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, a, v)| (a.clone(), *v))
            .collect();
        p.sort_by(|a, b| a.0.cmp(&b.0));
        p
    }

    #[test]
    fn the_probes_and_anomalies_carry_the_conventions_attribute_names() {
        let keep = Keep::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(
                PeriodicReader::builder(keep.clone())
                    .with_interval(Duration::from_secs(3600))
                    .build(),
            )
            .build();
        let instruments = Instruments::new(&provider.meter("test"), &phase_buckets());
        let m = ObserveMetrics::exporting(instruments);
        m.probe(&record("nginx", HandshakeResult::Ok));
        m.probe(&record("nginx", HandshakeResult::Abandoned));
        m.anomaly(&anomaly("wire", 8443));
        m.anomaly(&anomaly("probes", 0));
        // The last export, at shutdown.
        provider.shutdown().unwrap();
        let rm = crate::sync::lock(&keep.0).clone();

        let handshakes = points(&rm, "tlsperf.observe.probe.handshakes");
        let expected = |error: Option<&str>| {
            let mut a = BTreeMap::from([
                ("process.executable.name".to_string(), "nginx".to_string()),
                ("tlsperf.role".to_string(), "server".to_string()),
            ]);
            if let Some(e) = error {
                a.insert("error.type".into(), e.into());
            }
            (a, 1.0)
        };
        let mut want = vec![expected(None), expected(Some("abandoned"))];
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(handshakes, want);
        // Only the completed handshake has phases.
        let work: Vec<_> = points(&rm, "tlsperf.observe.probe.phase")
            .into_iter()
            .filter(|(a, _)| a["tlsperf.phase"] == "work")
            .collect();
        assert_eq!(work.len(), 1, "{work:?}");
        assert_eq!(work[0].1, 1.0);
        assert_eq!(work[0].0["process.executable.name"], "nginx");

        let anomalies = points(&rm, "tlsperf.observe.anomaly");
        assert_eq!(anomalies.len(), 2, "{anomalies:?}");
        let view = |v: &str| {
            anomalies
                .iter()
                .find(|(a, _)| a["tlsperf.view"] == v)
                .unwrap()
        };
        let (probes, wire) = (view("probes"), view("wire"));
        assert_eq!(wire.0["tlsperf.view"], "wire");
        assert_eq!(wire.0["server.port"], "8443");
        assert_eq!(wire.0["tlsperf.quantile"], "p90");
        assert_eq!(wire.1, 1.0);
        assert_eq!(probes.0["tlsperf.view"], "probes");
        assert!(!probes.0.contains_key("server.port"), "{probes:?}");
    }

    #[test]
    fn versions_split_into_the_protocol_name_and_its_number() {
        assert_eq!(protocol("TLSv1.3"), (Some("tls"), "1.3"));
        assert_eq!(protocol("TLSv1"), (Some("tls"), "1"));
        assert_eq!(protocol("SSLv3"), (Some("ssl"), "3"));
        assert_eq!(protocol("0x7f1c"), (None, "0x7f1c"));
    }
}
