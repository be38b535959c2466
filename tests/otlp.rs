//! `observe --otlp`: a live `observe` exporting to an OTLP/HTTP receiver written here
//! (hyper, decoded with `opentelemetry-proto`'s messages), against `tlsperf serve` and
//! `tlsperf handshake` on loopback. The exported handshake count and a phase histogram's
//! count and sum agree with observe's own document for the same handshakes; the
//! attributes carry the semantic conventions' names; Ctrl-C sends the last export; a
//! collector that is down is a warning and the run goes on; a bad endpoint is exit 2.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Histogram, Metric, metric};
use prost::Message;
use serde_json::Value;

use common::watch::{observe, observe_env};
use common::{Serve, root, tlsperf};

/// What is not checked without root.
const LIVE: &str = "live capture needs CAP_NET_RAW; not exporting from a live observe";

/// An OTLP/HTTP receiver on 127.0.0.1: every export request decoded and kept.
struct Collector {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Collector {
    /// Over plain HTTP.
    fn start(listener: std::net::TcpListener) -> Collector {
        Collector::serve(listener, None)
    }

    /// Over HTTPS with the certificate of `pki` (`tlsperf pki init`: localhost and
    /// 127.0.0.1).
    fn start_tls(listener: std::net::TcpListener, pki: &std::path::Path) -> Collector {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain = CertificateDer::pem_file_iter(pki.join("server-chain.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(pki.join("server.key")).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        Collector::serve(
            listener,
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))),
        )
    }

    fn serve(listener: std::net::TcpListener, tls: Option<tokio_rustls::TlsAcceptor>) -> Collector {
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let kept = Arc::clone(&got);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut rx => break,
                        accepted = listener.accept() => {
                            let Ok((tcp, _)) = accepted else { continue };
                            let kept = Arc::clone(&kept);
                            let svc = hyper::service::service_fn(move |req| {
                                receive(req, Arc::clone(&kept))
                            });
                            let http = hyper::server::conn::http1::Builder::new();
                            match tls.clone() {
                                None => {
                                    tokio::spawn(http.serve_connection(TokioIo::new(tcp), svc));
                                }
                                Some(tls) => {
                                    tokio::spawn(async move {
                                        // A client that refuses the certificate: no request.
                                        let Ok(tls) = tls.accept(tcp).await else { return };
                                        let _ = http.serve_connection(TokioIo::new(tls), svc).await;
                                    });
                                }
                            }
                        }
                    }
                }
            });
        });
        Collector {
            addr,
            got,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    fn requests(&self) -> Vec<ExportMetricsServiceRequest> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (20 s at most) until the last export counts `n` handshakes.
    fn wait_for_handshakes(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.requests().last().map(handshakes) != Some(n) {
            assert!(Instant::now() < deadline, "{:?}", self.requests().last());
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.thread.take().unwrap().join();
    }
}

/// One export: POST /v1/metrics, protobuf.
async fn receive(
    req: Request<hyper::body::Incoming>,
    kept: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let right = req.method() == hyper::Method::POST
        && req.uri().path() == "/v1/metrics"
        && req
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|v| v == "application/x-protobuf");
    if !right {
        let mut r = Response::new(Full::new(Bytes::from_static(b"not OTLP/HTTP protobuf")));
        *r.status_mut() = StatusCode::BAD_REQUEST;
        return Ok(r);
    }
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let decoded = ExportMetricsServiceRequest::decode(body).unwrap();
    kept.lock().unwrap().push(decoded);
    let mut r = Response::new(Full::new(Bytes::from(
        ExportMetricsServiceResponse::default().encode_to_vec(),
    )));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-protobuf"),
    );
    Ok(r)
}

/// The metric `name` in an export.
fn metric<'a>(req: &'a ExportMetricsServiceRequest, name: &str) -> &'a Metric {
    req.resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("no {name} in the export"))
}

/// An attribute list as a map of strings (integers written out).
fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v: &AnyValue| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => s.clone(),
                Some(any_value::Value::IntValue(i)) => i.to_string(),
                other => panic!("{}: {other:?}", kv.key),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

/// A counter's points: (attributes, value), cumulative and monotonic.
fn counter(m: &Metric) -> Vec<(BTreeMap<String, String>, u64)> {
    let Some(metric::Data::Sum(sum)) = &m.data else {
        panic!("{} is not a sum: {:?}", m.name, m.data)
    };
    assert!(sum.is_monotonic, "{}", m.name);
    // AGGREGATION_TEMPORALITY_CUMULATIVE.
    assert_eq!(sum.aggregation_temporality, 2, "{}", m.name);
    sum.data_points
        .iter()
        .map(|p| {
            let v = match p.value {
                Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(
                    i,
                )) => u64::try_from(i).unwrap(),
                other => panic!("{}: {other:?}", m.name),
            };
            (attrs(&p.attributes), v)
        })
        .collect()
}

/// A histogram's data: in seconds, cumulative, on the Prometheus buckets.
fn histogram(m: &Metric) -> &Histogram {
    assert_eq!(m.unit, "s", "{}", m.name);
    let Some(metric::Data::Histogram(h)) = &m.data else {
        panic!("{} is not a histogram: {:?}", m.name, m.data)
    };
    assert_eq!(h.aggregation_temporality, 2, "{}", m.name);
    let bounds: Vec<f64> = (0..20).map(|i| 0.00001 * 2f64.powi(i)).collect();
    for p in &h.data_points {
        assert_eq!(p.explicit_bounds, bounds);
        assert_eq!(p.bucket_counts.iter().sum::<u64>(), p.count);
    }
    h
}

/// The points of `phase` in `h` hold as many values as observe's distribution `dist`
/// (`{quantiles, hdr}`, nanoseconds), and their sum is its count × mean within 1% (its
/// mean is its HDR histogram's, 3 significant digits).
fn same_distribution(h: &Histogram, phase: &str, dist: &Value) {
    let points: Vec<_> = h
        .data_points
        .iter()
        .filter(|p| attrs(&p.attributes)["tlsperf.phase"] == phase)
        .collect();
    let count: u64 = points.iter().map(|p| p.count).sum();
    let sum: f64 = points.iter().map(|p| p.sum.unwrap()).sum();
    let own = &dist["quantiles"];
    assert_eq!(count, own["count"].as_u64().unwrap(), "{phase}: {own}");
    let own_sum = own["mean_ns"].as_f64().unwrap() * count as f64 / 1e9;
    eprintln!("{phase}: exported sum {sum} s over {count}, observe's {own_sum} s");
    assert!(
        (sum - own_sum).abs() <= own_sum * 0.01 + 1e-9,
        "{phase}: exported sum {sum} s, observe's {own_sum} s"
    );
}

/// The handshakes counted in an export.
fn handshakes(req: &ExportMetricsServiceRequest) -> u64 {
    counter(metric(req, "tlsperf.observe.handshakes"))
        .iter()
        .map(|(_, v)| v)
        .sum()
}

/// The next stderr line of observe containing `what` (within `limit`).
fn said(lines: &Receiver<String>, what: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(l) => seen.push_str(&l),
            Err(_) => panic!("observe did not say {what:?}; it said: {seen}"),
        }
    }
}

#[test]
fn the_last_export_at_ctrl_c_agrees_with_observes_own_document() {
    if !root(LIVE) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let serve = Serve::ecdsa_writing_ca(&ca, &[]);
    let collector = Collector::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let out = dir.path().join("seen.json");
    let endpoint = format!("http://{}", collector.addr);
    // An hour between exports: what the collector gets is the export at Ctrl-C.
    let (child, _lines) = observe(&[
        "--interface",
        "lo",
        "--port",
        &serve.port.to_string(),
        "--otlp",
        &endpoint,
        "--otlp-interval",
        "1h",
        "--out",
        out.to_str().unwrap(),
    ]);
    serve.handshakes(&ca, 20);
    // The last handshake's closing segments captured before the stop.
    std::thread::sleep(Duration::from_millis(500));
    assert!(collector.requests().is_empty(), "exported before the hour");
    let done = common::interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(done.status.code(), Some(130), "{done:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let all = &doc["handshakes"]["all"];
    assert_eq!(all["count"], 20, "{all}");

    let requests = collector.requests();
    assert_eq!(requests.len(), 1, "one export, at Ctrl-C");
    let req = &requests[0];
    // The resource names the agent.
    let resource = attrs(
        &req.resource_metrics[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes,
    );
    assert_eq!(resource["service.name"], "tlsperf-observe", "{resource:?}");

    // The handshakes: the same count, the semantic conventions' attribute names.
    assert_eq!(handshakes(req), 20);
    for (a, _) in counter(metric(req, "tlsperf.observe.handshakes")) {
        let keys: BTreeSet<&str> = a.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "network.transport",
                "process.executable.name",
                "tls.curve",
                "tls.protocol.name",
                "tls.protocol.version",
                "tlsperf.handshake.kind",
                "tlsperf.role",
            ]),
            "{a:?}"
        );
        // TLS over TCP (QUIC's are `quic`).
        assert_eq!(a["network.transport"], "tcp", "{a:?}");
        assert_eq!(a["tls.protocol.name"], "tls");
        assert_eq!(a["tls.protocol.version"], "1.3", "{a:?}");
        assert_eq!(a["tlsperf.role"], "server");
        // tlsperf serve is this host's: its comm.
        assert_eq!(a["process.executable.name"], "tlsperf", "{a:?}");
    }
    // Failures by error.type, each from zero.
    let failures = counter(metric(req, "tlsperf.observe.handshake.failures"));
    let types: BTreeSet<&str> = failures
        .iter()
        .map(|(a, _)| a["error.type"].as_str())
        .collect();
    assert_eq!(
        types,
        BTreeSet::from(["alert", "closed", "incomplete", "reset"])
    );
    // Each reason once per transport.
    let transports: BTreeSet<(&str, &str)> = failures
        .iter()
        .map(|(a, _)| (a["error.type"].as_str(), a["network.transport"].as_str()))
        .collect();
    assert_eq!(transports.len(), 8, "{failures:?}");
    assert!(failures.iter().all(|(_, v)| *v == 0), "{failures:?}");

    // The tls phase's histogram: in seconds, the Prometheus buckets, count and sum as
    // observe's own distribution of the same handshakes.
    let h = histogram(metric(req, "tlsperf.observe.handshake.phase"));
    same_distribution(h, "tls", &all["phases"]["tls"]);
}

#[test]
fn a_collector_that_is_down_is_a_warning_and_gets_the_totals_once_up() {
    if !root(LIVE) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let serve = Serve::ecdsa_writing_ca(&ca, &[]);
    // A port with nothing listening on it (yet).
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (mut child, lines) = observe(&[
        "--interface",
        "lo",
        "--port",
        &serve.port.to_string(),
        "--otlp",
        &format!("http://{addr}"),
        "--otlp-interval",
        "1s",
    ]);
    serve.handshakes(&ca, 5);
    let warning = said(&lines, "an export failed", Duration::from_secs(30));
    assert!(
        warning.starts_with(&format!("warning: --otlp http://{addr}/v1/metrics: ")),
        "{warning}"
    );
    assert!(warning.contains("the run goes on"), "{warning}");
    // Said once for a run of failures, and the run goes on.
    std::thread::sleep(Duration::from_secs(3));
    assert!(child.try_wait().unwrap().is_none(), "observe stopped");
    let collector = Collector::start(std::net::TcpListener::bind(addr).unwrap());
    let back = said(&lines, "exports work again", Duration::from_secs(30));
    assert!(back.contains("failed"), "{back}");
    // The handshakes made while it was down are in the totals.
    collector.wait_for_handshakes(5);
    let done = common::interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(done.status.code(), Some(130), "{done:?}");
    let rest: String = lines.try_iter().collect();
    assert!(!rest.contains("panicked"), "{rest}");
    assert!(!rest.contains("an export failed"), "{rest}");
}

#[test]
fn a_bad_endpoint_is_refused_before_anything_starts() {
    for (endpoint, says) in [
        ("127.0.0.1:4318", "--otlp 127.0.0.1:4318: no scheme"),
        ("grpc://127.0.0.1:4317", "is not OTLP/HTTP"),
        ("http://", "not a URL"),
    ] {
        let run = tlsperf([
            "observe",
            "--interface",
            "lo",
            "--otlp",
            endpoint,
            "-d",
            "1s",
        ]);
        assert_eq!(run.code, 2, "{endpoint}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{endpoint}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    let run = tlsperf([
        "observe",
        "--pcap",
        "x.pcap",
        "--otlp",
        "http://127.0.0.1:4318",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--otlp is for live capture"),
        "{}",
        run.stderr
    );
    let run = tlsperf(["observe", "--interface", "lo", "--otlp-interval", "5s"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn https_verifies_the_collector_against_the_trusted_roots() {
    if !root(LIVE) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let serve = Serve::ecdsa_writing_ca(&ca, &[]);
    let pki = dir.path().join("pki");
    let run = tlsperf(["pki", "init", pki.to_str().unwrap(), "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let collector = Collector::start_tls(std::net::TcpListener::bind("127.0.0.1:0").unwrap(), &pki);
    let endpoint = format!("https://localhost:{}", collector.addr.port());
    let args = [
        "--interface",
        "lo",
        "--port",
        &serve.port.to_string(),
        "--otlp",
        &endpoint,
        "--otlp-interval",
        "1s",
    ];
    // The test PKI's root is not among the system's: refused, in words, and the run
    // goes on.
    let root_pem = pki.join("root.pem");
    let elsewhere = dir.path().join("other-root.pem");
    std::fs::copy(&ca, &elsewhere).unwrap();
    let (child, lines) = observe_env(&args, &[("SSL_CERT_FILE", elsewhere.to_str().unwrap())]);
    let warning = said(&lines, "an export failed", Duration::from_secs(30));
    eprintln!("{warning}");
    assert!(
        warning
            .contains("the collector's certificate is refused: no trusted root issued its chain"),
        "{warning}"
    );
    assert!(!warning.contains("UnknownIssuer"), "{warning}");
    let done = common::interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(done.status.code(), Some(130), "{done:?}");
    assert!(collector.requests().is_empty());
    // Trusted through SSL_CERT_FILE: the exports arrive, with the handshakes.
    let (child, _lines) = observe_env(&args, &[("SSL_CERT_FILE", root_pem.to_str().unwrap())]);
    serve.handshakes(&ca, 3);
    collector.wait_for_handshakes(3);
    let done = common::interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(done.status.code(), Some(130), "{done:?}");
}

#[test]
fn the_probes_phases_are_exported_as_observe_counts_them() {
    if !root("the probes need root (BPF); not exporting probed handshakes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((server, pki)) = common::go::server_and_pki(dir.path()) else {
        return;
    };
    let (mut srv, addr) = common::go::server(&server, &pki, &[]);
    let port = addr.rsplit(':').next().unwrap().to_string();
    let collector = Collector::start(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let out = dir.path().join("seen.json");
    let (child, _lines) = observe(&[
        "--interface",
        "lo",
        "--port",
        &port,
        "--probes",
        "--pid",
        &srv.id().to_string(),
        "--otlp",
        &format!("http://{}", collector.addr),
        "--otlp-interval",
        "1h",
        "--out",
        out.to_str().unwrap(),
    ]);
    common::handshakes(&format!("https://{addr}/"), &pki.join("root.pem"), 10);
    std::thread::sleep(Duration::from_millis(500));
    let done = common::interrupt_and_wait(child, Duration::from_secs(30));
    let _ = srv.kill();
    let _ = srv.wait();
    assert_eq!(done.status.code(), Some(130), "{done:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let row = &doc["probes"]["by_kind"]["server all"];
    assert_eq!(row["handshakes"], 10, "{row}");

    let requests = collector.requests();
    assert_eq!(requests.len(), 1, "one export, at Ctrl-C");
    let req = &requests[0];
    let probed = counter(metric(req, "tlsperf.observe.probe.handshakes"));
    let ok: u64 = probed
        .iter()
        .filter(|(a, _)| a["tlsperf.role"] == "server" && !a.contains_key("error.type"))
        .map(|(a, v)| {
            assert_eq!(a["process.executable.name"], "tlsserver", "{a:?}");
            v
        })
        .sum();
    assert_eq!(ok, 10, "{probed:?}");
    // Every phase observe's document has for the server (the only side probed).
    let h = histogram(metric(req, "tlsperf.observe.probe.phase"));
    let phases = row["phases"].as_object().unwrap();
    assert!(phases.contains_key("work"), "{row}");
    for (phase, dist) in phases {
        same_distribution(h, phase, dist);
    }
}
