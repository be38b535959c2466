//! `tlsperf serve --quic`: HTTP/3 over QUIC on UDP, on the same address and port as the
//! TCP listener, answering the same routes with the same bodies ([`super::http::Bodies`])
//! and counting its handshakes in the same [`Metrics`] (labelled `transport="quic"`).
//!
//! QUIC is quinn's, over the TCP side's rustls `ServerConfig` ([`quic_tls`]: the same
//! provider, certificates, groups, session cache or ticketer, client authentication), and
//! HTTP/3 is the `h3` crate's. What each handshake did (full, resumed, 0-RTT, group, suite)
//! is read from the handshake messages rustls wrote ([`crate::quic_watch`]): quinn
//! does not expose its rustls connection.
//!
//! A handshake's time runs from the connection's first Initial packet reaching quinn's
//! endpoint (its `Incoming`) to the handshake complete at the server (the client's
//! Finished verified), for every kind: with 0-RTT the requests are answered before that
//! (0.5-RTT), but the time still ends at the client's Finished.
//!
//! Address validation ([`RetryPolicy`]): an Initial from an address not validated yet is
//! answered with a Retry (stateless: no connection, no handshake, a packet smaller than
//! the Initial) with `--quic-retry`, or by default once [`DEFAULT_RETRY_ABOVE`] handshakes
//! from unvalidated addresses are under way, as a flood of Initials from spoofed
//! addresses makes them: each of those would otherwise cost a handshake's CPU and state
//! until its timeout. A client that comes back with the token is validated and never
//! counted. Until validation quinn holds each connection to 3× the bytes its address
//! sent (RFC 9000 §8).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::http::{Bodies, REQUEST_TIMEOUT, UploadClock, UploadLimits, Verb};
use super::metrics::{HandshakeLabels, Metrics};
use crate::quic_watch::{self, WatchedServerConfig};
use crate::tls::Provider;
use crate::tls::choices::ConfigError;

/// The ALPN protocol of HTTP/3.
pub const H3_ALPN: &[u8] = b"h3";

/// What `--quic` serves with.
#[derive(Clone)]
pub struct QuicOptions {
    /// The QUIC TLS configuration ([`quic_tls`]).
    pub tls: Arc<rustls::ServerConfig>,
    /// Its provider (for QUIC's Initial packet protection, AES-128-GCM by the QUIC spec).
    pub provider: Provider,
    /// When to answer an Initial from an unvalidated address with a Retry.
    pub retry: RetryPolicy,
    /// Answer 0-RTT requests before the handshake completes (early data is on, and no
    /// client certificate is asked for).
    pub half_rtt: bool,
}

/// The default of `--quic-retry-above`: handshakes from unvalidated addresses under way
/// at which the next unvalidated client gets a Retry. A handshake lasts one or two round
/// trips, so only a burst of more than this many new clients within a round trip, or a
/// flood of Initials from addresses that never answer (each held until the handshake
/// timeout), reaches it; it bounds what such a flood costs to this many handshakes per
/// handshake timeout.
pub const DEFAULT_RETRY_ABOVE: usize = 128;

/// When `serve --quic` answers an Initial from an address not validated yet with a Retry
/// (the client then comes back with the server's token, one round trip later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Every such Initial (`--quic-retry`).
    Always,
    /// Once this many handshakes from unvalidated addresses are under way
    /// (`--quic-retry-above`, [`DEFAULT_RETRY_ABOVE`] by default), as quic-go's
    /// `MaxUnvalidatedHandshakes` does.
    Above(usize),
}

impl std::fmt::Display for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RetryPolicy::Always => f.write_str("always"),
            RetryPolicy::Above(n) => write!(f, "above {n} unvalidated handshakes"),
        }
    }
}

/// The QUIC side's rustls configuration, made from the TCP side's: the same certificates,
/// groups, suites, session storage, ticketer and client verifier (shared, not copied: a
/// session cache or ticket key ring serves both), ALPN `h3` alone, and early data at
/// QUIC's only allowed sizes: 0 (off) or 2^32-1 (on; QUIC bounds it by flow control).
///
/// An input error when the configuration cannot carry QUIC: TLS 1.3 left out by `--tls`,
/// or no TLS 1.3 cipher suite in `--ciphers`.
pub fn quic_tls(
    tcp: &rustls::ServerConfig,
    early_data: bool,
) -> Result<rustls::ServerConfig, ConfigError> {
    let mut config = tcp.clone();
    config.alpn_protocols = vec![H3_ALPN.to_vec()];
    config.max_early_data_size = if early_data { u32::MAX } else { 0 };
    config.send_half_rtt_data = false;
    // What quinn would otherwise find out with a panic in its first connection.
    rustls::quic::ServerConnection::new(
        Arc::new(config.clone()),
        rustls::quic::Version::V1,
        Vec::new(),
    )
    .map_err(|_| ConfigError::BadChoice {
        flag: "--quic",
        reason: "QUIC carries TLS 1.3 only, and no TLS 1.3 cipher suite is enabled: check \
                 --tls and --ciphers"
            .into(),
    })?;
    Ok(config)
}

/// The Initial packets' cipher suite (QUIC v1 fixes it: AES-128-GCM), from `provider`,
/// whether or not `--ciphers` allows it for the handshake itself.
fn initial_suite(provider: Provider) -> Option<rustls::quic::Suite> {
    let suite = match provider {
        Provider::AwsLcRs => rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256,
        Provider::Ring => rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256,
    };
    suite.tls13().and_then(|s| s.quic_suite())
}

/// The UDP endpoint on `addr` (the TCP listener's bound address), serving `opts`; idle
/// connections close after `idle_timeout`; the Version Negotiation packets quinn's
/// endpoint sends are counted in `metrics` ([`CountingSocket`]). Call inside a tokio
/// runtime.
pub fn bind(
    addr: SocketAddr,
    opts: &QuicOptions,
    idle_timeout: Duration,
    metrics: Arc<Metrics>,
) -> std::io::Result<quinn::Endpoint> {
    let other = |m: String| std::io::Error::other(m);
    let initial = initial_suite(opts.provider).ok_or_else(|| {
        other("the provider has no AES-128-GCM for QUIC's Initial packets".into())
    })?;
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::with_initial(Arc::clone(&opts.tls), initial)
            .map_err(|e| other(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(WatchedServerConfig::new(crypto)));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(idle_timeout).ok());
    config.transport_config(Arc::new(transport));
    let socket = std::net::UdpSocket::bind(addr)?;
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let socket = Arc::new(CountingSocket {
        inner: runtime.wrap_udp_socket(socket)?,
        metrics,
    });
    quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        Some(config),
        socket,
        runtime,
    )
}

/// Whether a datagram serve sends is a Version Negotiation packet: a long header
/// (first bit set) whose version field is 0 (RFC 9000 §17.2.1). Nothing else serve
/// sends has version 0, and quinn sends a Version Negotiation alone in its datagram.
fn is_version_negotiation(datagram: &[u8]) -> bool {
    datagram.len() >= 5 && datagram[0] & 0x80 != 0 && datagram[1..5] == [0, 0, 0, 0]
}

/// The server's UDP socket as quinn set it up, counting the Version Negotiation packets
/// that leave through it: quinn's endpoint answers an Initial of an unknown version by
/// itself (when the datagram has at least 1,200 bytes, RFC 9000 §5.2.2) and tells nobody,
/// so the count is taken where the packet is sent. A look at five bytes of each datagram
/// sent; everything else is the socket's own.
struct CountingSocket {
    inner: Arc<dyn quinn::AsyncUdpSocket>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for CountingSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingSocket")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl quinn::AsyncUdpSocket for CountingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn quinn::UdpPoller>> {
        Arc::clone(&self.inner).create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit) -> std::io::Result<()> {
        self.inner.try_send(transmit)?;
        if is_version_negotiation(transmit.contents) {
            self.metrics.quic_version_negotiation();
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut std::task::Context,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> Poll<std::io::Result<usize>> {
        self.inner.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// What every QUIC connection task shares.
pub(crate) struct QuicCtx {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) bodies: Bodies,
    pub(crate) handshake_timeout: Duration,
    /// How slow a request body may be, as over TCP.
    pub(crate) upload: UploadLimits,
    pub(crate) retry: RetryPolicy,
    pub(crate) half_rtt: bool,
    /// Handshakes under way from addresses not validated yet.
    pub(crate) unvalidated: Arc<AtomicUsize>,
}

/// One handshake from an unvalidated address, counted in [`QuicCtx::unvalidated`] (and
/// the metrics' gauge) until it ends, however it ends.
struct Unvalidated {
    count: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
}

impl Unvalidated {
    fn start(ctx: &QuicCtx) -> Unvalidated {
        ctx.unvalidated.fetch_add(1, Ordering::Relaxed);
        ctx.metrics.quic_unvalidated_delta(1);
        Unvalidated {
            count: Arc::clone(&ctx.unvalidated),
            metrics: Arc::clone(&ctx.metrics),
        }
    }
}

impl Drop for Unvalidated {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.metrics.quic_unvalidated_delta(-1);
    }
}

/// Decrements the open-connection gauge however the connection ends.
struct OpenGuard(Arc<Metrics>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open_delta(-1);
    }
}

/// Whether an Initial from an address not validated yet gets a Retry under `policy`, with
/// `under_way` handshakes from unvalidated addresses in progress.
fn wants_retry(policy: RetryPolicy, under_way: usize) -> bool {
    match policy {
        RetryPolicy::Always => true,
        RetryPolicy::Above(n) => under_way >= n,
    }
}

/// Accepts QUIC connections until `stop`; at the connection limit a new one is refused
/// (counted as `max-connections`). A client whose address is not validated yet gets a
/// Retry ([`RetryPolicy`]: always with `--quic-retry`, else once enough handshakes from
/// unvalidated addresses are under way) and comes back with its token.
pub(crate) async fn accept_loop(
    endpoint: quinn::Endpoint,
    ctx: Arc<QuicCtx>,
    limit: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                let validated = incoming.remote_address_validated();
                if !validated
                    && incoming.may_retry()
                    && wants_retry(ctx.retry, ctx.unvalidated.load(Ordering::Relaxed))
                {
                    // Refused only when the client already came back with a token.
                    if incoming.retry().is_ok() {
                        ctx.metrics.quic_retry();
                    }
                    continue;
                }
                match Arc::clone(&limit).try_acquire_owned() {
                    Ok(permit) => {
                        // Counted here, before the next Incoming is looked at.
                        let unvalidated = (!validated).then(|| Unvalidated::start(&ctx));
                        tokio::spawn(connection(
                            incoming,
                            Arc::clone(&ctx),
                            stop.clone(),
                            permit,
                            unvalidated,
                        ));
                    }
                    Err(_) => {
                        ctx.metrics.rejected();
                        incoming.refuse();
                    }
                }
            }
        }
    }
}

/// The failure label of a connection that ended before its handshake completed.
fn failure_reason(e: &quinn::ConnectionError) -> &'static str {
    use quinn::ConnectionError as E;
    match e {
        E::TimedOut => "timeout",
        E::TransportError(t) => match u64::from(t.code) {
            // CRYPTO_ERROR: 0x0100 + the TLS alert.
            0x0100..=0x01ff => match (u64::from(t.code) - 0x100) as u8 {
                // bad_certificate … certificate_unknown, unknown_ca, certificate_required.
                42..=46 | 48 | 116 => "bad-client-certificate",
                // handshake_failure, protocol_version, insufficient_security,
                // no_application_protocol.
                40 | 70 | 71 | 120 => "incompatible-client",
                112 => "no-matching-sni",
                _ => "tls-error",
            },
            _ => "protocol-error",
        },
        E::ConnectionClosed(c) if u64::from(c.error_code) >= 0x0100 => "alert-received",
        E::ConnectionClosed(_) | E::ApplicationClosed(_) | E::Reset => "closed-during-handshake",
        E::VersionMismatch => "incompatible-client",
        E::LocallyClosed | E::CidsExhausted => "io-error",
    }
}

/// One QUIC connection: its handshake (timed and counted), then HTTP/3 until it ends.
///
/// HTTP/3's control and QPACK streams are opened as soon as the connection is accepted,
/// before quinn's connection driver first runs, so that they leave in the server's first
/// flight, at 0.5-RTT (as ngtcp2's server sends them), instead of in a datagram of their
/// own after the handshake, which the client must also acknowledge: a server's SETTINGS
/// need no client authentication. Requests are read only once the handshake is complete,
/// unless 0.5-RTT answers are on (`half_rtt`).
async fn connection(
    incoming: quinn::Incoming,
    ctx: Arc<QuicCtx>,
    stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
    unvalidated: Option<Unvalidated>,
) {
    // The first Initial reached the endpoint: the clock starts as the TCP side's does at
    // accept, once the ClientHello has arrived.
    let started = Instant::now();
    ctx.metrics.open_delta(1);
    let _guard = OpenGuard(Arc::clone(&ctx.metrics));
    let connecting = match incoming.accept() {
        Ok(c) => c,
        Err(e) => {
            ctx.metrics.failure(failure_reason(&e));
            return;
        }
    };
    // A server's 0.5-RTT connection always exists (quinn's `into_0rtt` never refuses a
    // server); `done` resolves once the handshake is complete or has failed.
    let Ok((conn, done)) = connecting.into_0rtt() else {
        return;
    };
    let mut setup = Box::pin(h3::server::Connection::<_, Bytes>::new(
        h3_quinn::Connection::new(conn.clone()),
    ));
    // Polled once here, before this task yields: the streams are queued before the
    // driver's first transmission. It finishes later if it must wait (for stream credit).
    let setup = match std::future::poll_fn(|cx| Poll::Ready(setup.as_mut().poll(cx))).await {
        Poll::Ready(r) => H3Setup::Done(Box::new(r)),
        Poll::Pending => H3Setup::Waiting(setup),
    };
    if ctx.half_rtt {
        // Requests that came as 0-RTT are answered right behind the server's flight.
        let serving = tokio::spawn(serve_h3(setup, Arc::clone(&ctx), stop));
        handshake(&ctx, &conn, started, done, unvalidated).await;
        let _ = serving.await;
    } else if handshake(&ctx, &conn, started, done, unvalidated).await {
        serve_h3(setup, ctx, stop).await;
    }
}

/// Waits for `conn`'s handshake (at most the handshake timeout) and counts it, completed
/// or failed; `unvalidated` ends with it. Whether it completed.
async fn handshake(
    ctx: &QuicCtx,
    conn: &quinn::Connection,
    started: Instant,
    done: quinn::ZeroRttAccepted,
    unvalidated: Option<Unvalidated>,
) -> bool {
    let outcome = tokio::time::timeout(ctx.handshake_timeout, done).await;
    drop(unvalidated);
    // A client may close the moment its answer has come (answered at 0.5-RTT, or by
    // another worker before this task ran again): the handshake completed all the same if
    // the server sent HANDSHAKE_DONE, which it does only once it has.
    let completed = conn.stats().frame_tx.handshake_done > 0;
    match (outcome, conn.close_reason()) {
        (Err(_), _) => {
            ctx.metrics.failure("timeout");
            conn.close(0u32.into(), b"handshake timeout");
            false
        }
        (Ok(_), Some(e)) if !completed => {
            ctx.metrics.failure(failure_reason(&e));
            tracing::debug!("QUIC handshake failed: {e}");
            false
        }
        (Ok(_), _) => {
            record(&ctx.metrics, conn, started.elapsed());
            true
        }
    }
}

/// An HTTP/3 server connection over quinn.
type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;

/// HTTP/3's set-up on a connection ([`h3::server::Connection::new`]: its control and
/// QPACK streams opened, SETTINGS written), done or still under way.
enum H3Setup<F> {
    Done(Box<Result<H3Conn, h3::error::ConnectionError>>),
    Waiting(Pin<Box<F>>),
}

impl<F: Future<Output = Result<H3Conn, h3::error::ConnectionError>>> H3Setup<F> {
    async fn finish(self) -> Result<H3Conn, h3::error::ConnectionError> {
        match self {
            H3Setup::Done(r) => *r,
            H3Setup::Waiting(f) => f.await,
        }
    }
}

/// Counts a completed QUIC handshake with the same labels as the TCP side's.
fn record(metrics: &Metrics, conn: &quinn::Connection, took: Duration) {
    let seen = quic_watch::watch_of(conn)
        .map(|w| w.seen())
        .unwrap_or_default();
    let hello = seen.server_hello.clone().unwrap_or_default();
    let suite = rustls::CipherSuite::from(hello.suite);
    metrics.handshake(
        HandshakeLabels {
            transport: "quic".into(),
            kind: seen.kind().into(),
            version: crate::observe::tls::version_label(hello.version),
            group: hello
                .group
                .map(crate::observe::tls::group_label)
                .unwrap_or("none".into()),
            suite: match suite.as_str() {
                Some(name) => name.into(),
                None => format!("{suite:?}").into(),
            },
            client_auth: if conn.peer_identity().is_some() {
                "yes"
            } else {
                "no"
            }
            .into(),
            resumption: if seen.resumed() { "ticket" } else { "none" }.into(),
        },
        took,
    );
}

/// Serves HTTP/3 requests on the connection `setup` sets up, until it closes; at `stop`, a
/// GOAWAY lets the requests under way finish and refuses new ones.
async fn serve_h3<F>(setup: H3Setup<F>, ctx: Arc<QuicCtx>, mut stop: watch::Receiver<bool>)
where
    F: Future<Output = Result<H3Conn, h3::error::ConnectionError>>,
{
    let mut h3 = match setup.finish().await {
        Ok(h3) => h3,
        Err(e) => {
            tracing::debug!("HTTP/3 connection setup failed: {e}");
            return;
        }
    };
    let mut stopping = *stop.borrow();
    if stopping {
        let _ = h3.shutdown(0).await;
    }
    loop {
        tokio::select! {
            _ = stop.changed(), if !stopping => {
                stopping = true;
                let _ = h3.shutdown(0).await;
            }
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    let ctx = Arc::clone(&ctx);
                    run_then_spawn(async move {
                        match resolver.resolve_request().await {
                            Ok((req, stream)) => {
                                if let Err(e) = answer(req, stream, &ctx).await {
                                    tracing::debug!("HTTP/3 request failed: {e}");
                                }
                            }
                            Err(e) => tracing::debug!("HTTP/3 request unreadable: {e}"),
                        }
                    })
                    .await;
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!("HTTP/3 connection ended: {e}");
                    break;
                }
            }
        }
    }
}

/// Runs `task` here until it first has to wait, then in a task of its own (if it is not
/// done by then). A request whose answer is ready at once (a `GET`: its headers and end
/// came in one packet, the body is in memory) is written before quinn's connection driver
/// runs again, so it leaves in the same datagram as whatever this connection's task wrote
/// just before (h3's grease stream, an acknowledgement) instead of in one of its own after
/// a task switch; a request that waits (an upload) goes on concurrently with the others as
/// before.
async fn run_then_spawn(task: impl Future<Output = ()> + Send + 'static) {
    let mut task = Box::pin(task);
    if std::future::poll_fn(|cx| Poll::Ready(task.as_mut().poll(cx)))
        .await
        .is_pending()
    {
        // Its first poll there registers the new task's waker.
        tokio::spawn(task);
    }
}

/// Answers one request as the TCP side does ([`Bodies::answer`]); a `POST /` body is read
/// to its end and counted first, within the upload limits.
async fn answer<S>(
    req: ::http::Request<()>,
    mut stream: h3::server::RequestStream<S, Bytes>,
    ctx: &QuicCtx,
) -> Result<(), h3::error::StreamError>
where
    S: h3::quic::BidiStream<Bytes>,
{
    ctx.metrics.request();
    let verb = Verb::of(req.method().as_str());
    let (mut status, mut body) = ctx.bodies.answer(verb, req.uri().path());
    let (mut cut, mut read_all) = (false, false);
    if verb == Verb::Post && status == 200 {
        // Within the same limits as over TCP: a slower upload is answered 408 and the
        // rest of its body refused (STOP_SENDING, once the answer is sent), counted as
        // body-timeout.
        let mut clock = UploadClock::start(ctx.upload);
        loop {
            // recv_data polls the stream: cancelled by the timeout, it loses nothing.
            match tokio::time::timeout_at(clock.window_end(), stream.recv_data()).await {
                Ok(Ok(Some(chunk))) => {
                    let n = chunk.remaining() as u64;
                    ctx.metrics.request_body(n);
                    clock.bytes(n);
                }
                Ok(Ok(None)) => {
                    read_all = true;
                    break;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {}
            }
            if !clock.on_time() {
                ctx.metrics.failure("body-timeout");
                (status, body) = (408, Bytes::from_static(REQUEST_TIMEOUT));
                cut = true;
                break;
            }
        }
    }
    let resp = ::http::Response::builder()
        .status(status)
        .header(::http::header::CONTENT_TYPE, "application/json")
        .header(::http::header::CONTENT_LENGTH, body.len())
        .body(())
        .unwrap_or_default();
    stream.send_response(resp).await?;
    if req.method() != ::http::Method::HEAD {
        stream.send_data(body).await?;
    }
    if cut {
        stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
    }
    stream.finish().await?;
    if !read_all && !cut {
        // The request's body, if any, was not read: the client may stop sending it
        // (RFC 9114 §4.1, with H3_NO_ERROR; quinn would say 0, no HTTP/3 code). Nothing
        // goes out when the end of the request has already come.
        stream.stop_sending(h3::error::Code::H3_NO_ERROR);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_engages_at_the_threshold_or_always() {
        assert!(wants_retry(RetryPolicy::Always, 0));
        assert!(!wants_retry(RetryPolicy::Above(128), 127));
        assert!(wants_retry(RetryPolicy::Above(128), 128));
        assert_eq!(
            RetryPolicy::Above(128).to_string(),
            "above 128 unvalidated handshakes"
        );
    }

    #[test]
    fn a_configuration_without_tls13_is_refused_in_words() {
        let (chain, key) =
            crate::server::config::generated_key_pair(crate::pki::KeyType::EcdsaP256)
                .unwrap()
                .0;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls12 = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key.clone_key())
            .unwrap();
        let e = quic_tls(&tls12, false).unwrap_err().to_string();
        assert!(e.contains("--quic") && e.contains("TLS 1.3"), "{e}");
        let both = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let q = quic_tls(&both, true).unwrap();
        assert_eq!(q.alpn_protocols, vec![b"h3".to_vec()]);
        assert_eq!(q.max_early_data_size, u32::MAX);
        assert_eq!(quic_tls(&both, false).unwrap().max_early_data_size, 0);
    }
}
