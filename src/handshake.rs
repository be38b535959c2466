//! `tlsperf handshake`: N sequential connections to one server, each one handshake and
//! one request, timed phase by phase. The first (cold) connection is reported apart:
//! it pays for everything a process does once (the trust store is loaded before it and
//! reported separately; no session to resume yet).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::client::config::BuiltClient;
use serde::Serialize;

use crate::client::exchange::{Exchange, exchange};
use crate::client::http1::request as http_request;
use crate::client::target::Target;
use crate::client::{ConnectError, EarlyData, Phase};
use crate::link::LinkSpec;
use crate::link::trips::{self, CriticalPath, Flight};
use crate::stats::{LatencyHistogram, Quantiles};
use crate::tls::Negotiated;

/// Shared with the caller while a run lasts: how far it got, and a way to stop it.
#[derive(Debug, Default)]
pub struct Control {
    done: AtomicUsize,
    stop: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Control {
    /// Stops the run: the connection in flight is abandoned at once and the result covers
    /// the connections that completed (`interrupted` set).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Connections finished so far (completed or failed).
    pub fn done(&self) -> usize {
        self.done.load(Ordering::Relaxed)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// What to do.
#[derive(Debug, Clone)]
pub struct HandshakeOptions {
    /// Connections, one after the other.
    pub count: usize,
    /// Send the request as 0-RTT data when the session allows it.
    pub early_data: bool,
    /// Limit for each connection (connect, handshake and response).
    pub timeout: Duration,
    /// Bytes of each request's body: 0 sends `GET`, more a `POST` of that many bytes
    /// (never as early data: the request then waits for the handshake).
    pub body_size: usize,
    /// The emulated link the run goes over (`--link`): the report then counts round
    /// trips.
    pub link: Option<LinkSpec>,
    /// The HTTP statuses that count as a success: any other fails its connection (the
    /// first one's, the run).
    pub ok_status: crate::client::status::OkStatus,
    /// `--http3`: each connection is QUIC with one HTTP/3 `GET` ([`crate::client::quic`]),
    /// over this configuration (the client's, ALPN `h3`).
    pub http3: Option<crate::client::quic::Http3Config>,
}

/// One certificate of the server's chain.
#[derive(Debug, Clone, Serialize)]
pub struct ChainCert {
    /// 0 for the leaf.
    pub depth: usize,
    /// DER size.
    pub bytes: usize,
    /// Subject.
    pub subject: String,
    /// Issuer.
    pub issuer: String,
    /// End of validity (RFC 3339).
    pub not_after: String,
}

/// One connection's phases (milliseconds) and kind.
#[derive(Debug, Clone, Serialize)]
pub struct ConnReport {
    /// full, full-hrr, resumed-ticket, resumed-session-id.
    pub kind: &'static str,
    /// 0-RTT outcome.
    pub early_data: EarlyData,
    /// `--http3`: the server answered the first Initial with a Retry (a round trip, as a
    /// HelloRetryRequest); absent over TCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic_retry: Option<bool>,
    /// HTTP status.
    pub status: u16,
    /// Phase → milliseconds.
    pub phases_ms: BTreeMap<&'static str, f64>,
}

/// Percentiles of each phase over the warm connections.
#[derive(Debug, Clone, Serialize)]
pub struct WarmReport {
    /// Connections.
    pub count: usize,
    /// Connections by kind.
    pub kinds: BTreeMap<&'static str, usize>,
    /// Resumed ÷ count.
    pub resumption_rate: f64,
    /// 0-RTT data accepted / rejected.
    pub early_data_accepted: usize,
    /// 0-RTT data rejected.
    pub early_data_rejected: usize,
    /// `--http3`: connections whose first Initial the server answered with a Retry;
    /// absent over TCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic_retries: Option<usize>,
    /// Phase → percentiles (nanoseconds).
    pub phases: BTreeMap<&'static str, Quantiles>,
    /// Failed connections by kind (the run goes on after a failure; percentiles are over
    /// the connections that completed).
    pub errors: BTreeMap<&'static str, usize>,
    /// Kind → the first message seen.
    pub error_examples: BTreeMap<&'static str, String>,
    /// Why resumption or 0-RTT did not happen when the run asked for it (none resumed, or
    /// none sent early data), from what the server gave the client's session store.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// tlsperf's own wake-up delay (nanoseconds), over the connections whose handshake
    /// reads the kernel stamped: each one's longest time from the arrival of a read's
    /// last byte to the return of tlsperf's read. Receive stamps are the arrivals
    /// ([`HandshakeRun::receive_stamps`]), so this delay is in no phase; it shows how late
    /// the client ran (a busy client machine). `None` when no read was stamped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_wakeup: Option<Quantiles>,
}

/// The result of `tlsperf handshake`.
#[derive(Debug, Clone, Serialize)]
pub struct HandshakeRun {
    /// The URL.
    pub target: String,
    /// `tcp` (TLS over TCP, HTTP/1.1), or `quic` (`--http3`: QUIC, HTTP/3).
    pub transport: &'static str,
    /// Where the roots came from.
    pub roots: String,
    /// Where receive stamps come from: `kernel` (each read dated at the arrival of its
    /// last byte, from the socket's software receive timestamps) or `read` (after the
    /// read returned: the kernel stamped none of the first connection's reads).
    pub receive_stamps: &'static str,
    /// Time to load them (before the first connection).
    pub roots_ms: f64,
    /// First use of the crypto provider in this process (before the first connection).
    pub provider_init_ms: f64,
    /// Negotiated on the first connection.
    pub negotiated: Negotiated,
    /// The server's chain (first connection).
    pub chain: Vec<ChainCert>,
    /// Size of our first ClientHello.
    pub client_hello_bytes: usize,
    /// TLS bytes of the server's first flight on the first connection (see
    /// [`crate::client::conn::Handshake::server_flight_bytes`]).
    pub server_flight_bytes: usize,
    /// Bytes of each request's body (`--body-size`; 0: the requests were GETs).
    pub request_body_bytes: u64,
    /// The emulated link and the round trips it costs (`--link` only).
    pub link: Option<LinkReport>,
    /// The first connection.
    pub cold: ConnReport,
    /// The others (`None` with `-n 1`).
    pub warm: Option<WarmReport>,
    /// Stopped before all connections were made (Ctrl-C): the report covers those that
    /// were.
    pub interrupted: bool,
    /// `--link`: what the link did during the run (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_counters: Option<crate::link::LinkCounters>,
}

/// The link a run went over, in round trips.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// The link (canonical spec).
    pub spec: String,
    /// Its profile, if one was named.
    pub profile: Option<&'static str>,
    /// Its round-trip time.
    pub rtt_ms: f64,
    /// The server's first flight (first connection) against the initial window.
    pub server_flight: Flight,
    /// Round trips to the first response byte of the first connection.
    pub cold: CriticalPath,
    /// The same for the most common kind of warm connection.
    pub warm: Option<CriticalPath>,
    /// Plain warnings (a first flight past the initial window).
    pub warnings: Vec<String>,
}

/// Runs `opts.count` sequential exchanges with `target`, until done or `control` stops
/// it (an error when stopped before the first connection completed: nothing to report).
pub async fn run(
    target: &Target,
    client: &BuiltClient,
    opts: &HandshakeOptions,
    control: &Control,
) -> Result<HandshakeRun, ConnectError> {
    let request = http_request(&target.authority, &target.path, true, opts.body_size);
    // An upload is not replay-safe: never sent as 0-RTT data.
    let early_data = opts.early_data && opts.body_size == 0;
    let mut first: Option<Exchange> = None;
    let mut warm = WarmTally::default();
    let mut interrupted = false;
    let mut attempted = 0;
    for i in 0..opts.count.max(1) {
        // Registered before the check, so that a stop in between still wakes us.
        let stopping = control.notify.notified();
        tokio::pin!(stopping);
        stopping.as_mut().enable();
        if control.stopped() {
            interrupted = true;
            break;
        }
        let one = async {
            match &opts.http3 {
                Some(q) => {
                    let want_ticket = client.sessions.is_some();
                    crate::client::quic::exchange(target, q, early_data, want_ticket, opts.timeout)
                        .await
                        .map(|ex| (ex, None))
                }
                None => {
                    exchange(
                        target,
                        Arc::clone(&client.config),
                        &request,
                        early_data,
                        opts.timeout,
                    )
                    .await
                }
            }
        };
        let outcome = tokio::select! {
            o = one => o,
            () = &mut stopping => {
                interrupted = true;
                break;
            }
        };
        attempted += 1;
        control.done.fetch_add(1, Ordering::Relaxed);
        let outcome = outcome.and_then(|(ex, open)| {
            if opts.ok_status.ok(ex.response.status) {
                Ok((ex, open))
            } else {
                Err(ConnectError::Status {
                    status: ex.response.status,
                    ok: opts.ok_status.to_string(),
                })
            }
        });
        let (ex, open) = match outcome {
            Ok(x) => x,
            // The first connection must work: everything reported comes from it.
            Err(e) if i == 0 => return Err(e),
            Err(e) => {
                warm.failed(e);
                continue;
            }
        };
        if let Some(mut http) = open {
            http.shutdown().await;
        }
        if i == 0 {
            first = Some(ex);
        } else {
            warm.completed(&ex);
        }
    }
    let Some(first) = first else {
        return Err(if interrupted {
            ConnectError::Interrupted
        } else {
            ConnectError::Http {
                reason: "no connection was made".into(),
            }
        });
    };
    let failed: usize = warm.errors.values().sum();
    let warm_count = attempted - 1 - failed;
    let h = &first.handshake;
    let link = opts
        .link
        .as_ref()
        .map(|spec| link_report(spec, h, &warm, warm_count, opts.http3.is_some()));
    Ok(HandshakeRun {
        link_counters: None,
        target: target.to_string(),
        transport: if opts.http3.is_some() { "quic" } else { "tcp" },
        roots: client.roots.clone(),
        receive_stamps: if h.stamps.wakeup.is_some() {
            "kernel"
        } else {
            "read"
        },
        roots_ms: client.roots_time.as_secs_f64() * 1e3,
        provider_init_ms: client.provider_init.as_secs_f64() * 1e3,
        negotiated: Negotiated {
            ocsp_stapled_bytes: (h.ocsp_len > 0).then_some(h.ocsp_len),
            ..h.negotiated.clone()
        },
        chain: h
            .chain
            .iter()
            .enumerate()
            .map(|(depth, der)| chain_cert(depth, der))
            .collect(),
        client_hello_bytes: h.offered.hello_len,
        server_flight_bytes: h.server_flight_bytes,
        request_body_bytes: opts.body_size as u64,
        link,
        cold: ConnReport {
            kind: h.kind.name(),
            early_data: h.early_data,
            quic_retry: opts.http3.is_some().then_some(h.quic_retry),
            status: first.response.status,
            phases_ms: Phase::ALL
                .iter()
                .map(|&p| (p.name(), first.timeline.get(p).as_secs_f64() * 1e3))
                .collect(),
        },
        warm: (warm_count + failed > 0).then(|| {
            let resumed = warm.resumed;
            let mut report = warm.report(warm_count, opts.http3.is_some());
            report.notes = warm_notes(
                client,
                early_data,
                h.negotiated.version == "TLSv1.2",
                resumed,
                &report,
            );
            report
        }),
        interrupted,
    })
}

/// What the warm connections (all but the first) gave, as they come.
#[derive(Default)]
struct WarmTally {
    hists: BTreeMap<Phase, LatencyHistogram>,
    wakeup: LatencyHistogram,
    kinds: BTreeMap<&'static str, usize>,
    accepted: usize,
    rejected: usize,
    resumed: usize,
    quic_retries: usize,
    errors: BTreeMap<&'static str, usize>,
    examples: BTreeMap<&'static str, String>,
}

impl WarmTally {
    /// A connection that completed: its phases, kind and 0-RTT outcome.
    fn completed(&mut self, ex: &Exchange) {
        for p in Phase::ALL {
            // Durations beyond the histogram's range are not possible within the timeout.
            let _ = self.hists.entry(p).or_default().record(ex.timeline.get(p));
        }
        if let Some(w) = ex.handshake.stamps.wakeup {
            let _ = self.wakeup.record(w);
        }
        *self.kinds.entry(ex.handshake.kind.name()).or_default() += 1;
        self.resumed += usize::from(ex.handshake.kind.resumed());
        self.quic_retries += usize::from(ex.handshake.quic_retry);
        match ex.handshake.early_data {
            EarlyData::Accepted => self.accepted += 1,
            EarlyData::Rejected => self.rejected += 1,
            EarlyData::NotSent => {}
        }
    }

    /// A connection that failed: counted by kind, the first message of each kind kept.
    fn failed(&mut self, e: ConnectError) {
        let kind = e.kind();
        *self.errors.entry(kind).or_default() += 1;
        self.examples
            .entry(kind)
            .or_insert_with(|| format!("{:#}", anyhow::Error::new(e)));
    }

    /// The report over `count` completed connections (`quic`: over QUIC).
    fn report(self, count: usize, quic: bool) -> WarmReport {
        WarmReport {
            count,
            kinds: self.kinds,
            resumption_rate: self.resumed as f64 / count.max(1) as f64,
            early_data_accepted: self.accepted,
            early_data_rejected: self.rejected,
            quic_retries: quic.then_some(self.quic_retries),
            phases: self
                .hists
                .iter()
                .map(|(p, h)| (p.name(), h.quantiles()))
                .collect(),
            errors: self.errors,
            error_examples: self.examples,
            client_wakeup: (!self.wakeup.is_empty()).then(|| self.wakeup.quantiles()),
            notes: Vec::new(),
        }
    }
}

/// Why the warm connections resumed none, or sent no early data, when the run asked for
/// it (`early_data`); `tls12`: the version the first connection negotiated; `resumed`:
/// the warm connections that resumed.
fn warm_notes(
    client: &BuiltClient,
    early_data: bool,
    tls12: bool,
    resumed: usize,
    w: &WarmReport,
) -> Vec<String> {
    let Some(store) = &client.sessions else {
        return Vec::new();
    };
    if w.count == 0 {
        return Vec::new();
    }
    let counts = store.counts();
    let mut notes = Vec::new();
    if resumed == 0 {
        let ids = client.resume == crate::client::config::Resume::Ids;
        notes.push(format!(
            "no connection resumed: {}",
            crate::client::sessions::why_not_resumed(counts, tls12, ids, w.count)
        ));
    } else if early_data && !tls12 && w.early_data_accepted + w.early_data_rejected == 0 {
        notes.push(crate::client::sessions::why_no_early_data(counts));
    }
    notes
}

/// The run's link in round trips: the first connection's critical path and that of the
/// most common warm kind, and the server's first flight against the initial window (over
/// QUIC, `quic`: also against the anti-amplification limit).
fn link_report(
    spec: &LinkSpec,
    h: &crate::client::Handshake,
    warm: &WarmTally,
    warm_count: usize,
    quic: bool,
) -> LinkReport {
    let rtt_ms = spec.rtt.as_secs_f64() * 1e3;
    let flight = if quic {
        Flight::quic(h.server_flight_bytes, h.offered.hello_len)
    } else {
        Flight::new(h.server_flight_bytes)
    };
    let path = |kind: &str, early: bool| {
        if quic {
            trips::quic_critical_path(kind, early, &flight, rtt_ms)
        } else {
            trips::critical_path(&h.negotiated.version, kind, early, &flight, rtt_ms)
        }
    };
    let cold = path(h.kind.name(), h.early_data == EarlyData::Accepted);
    // The most common warm kind (ties: the first by name).
    let warm_kind = warm
        .kinds
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(k, _)| *k);
    let warm_path = warm_kind.map(|k| path(k, warm.accepted * 2 > warm_count));
    let chain_bytes = h.chain.iter().map(|c| c.len()).sum();
    LinkReport {
        spec: spec.to_string(),
        profile: spec.profile,
        rtt_ms,
        warnings: trips::flight_warning(&flight, h.chain.len(), chain_bytes, h.ocsp_len)
            .into_iter()
            .collect(),
        server_flight: flight,
        cold,
        warm: warm_path,
    }
}

fn chain_cert(depth: usize, der: &[u8]) -> ChainCert {
    match x509_parser::parse_x509_certificate(der) {
        Ok((_, c)) => ChainCert {
            depth,
            bytes: der.len(),
            subject: c.subject().to_string(),
            issuer: c.issuer().to_string(),
            not_after: c
                .validity()
                .not_after
                .to_datetime()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        },
        Err(e) => ChainCert {
            depth,
            bytes: der.len(),
            subject: format!("(unparsable: {e})"),
            issuer: String::new(),
            not_after: String::new(),
        },
    }
}
