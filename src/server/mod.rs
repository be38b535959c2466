//! `tlsperf serve`: a reference HTTPS server (tokio + tokio-rustls + hyper, HTTP/1.1 and
//! HTTP/2 by ALPN) whose TLS configuration comes from [`crate::server::config`], with
//! handshake metrics, a connection limit, a handshake timeout, several `SO_REUSEPORT`
//! listeners, shared rotating ticket keys and graceful shutdown.
//!
//! Idle and slow clients cannot hold the server: hyper gets a timer and a header-read
//! timeout, a request body must keep a minimum rate ([`http::UploadLimits`]), a
//! connection that moves no byte for the idle timeout is closed, and at the connection
//! limit (or when accept runs out of descriptors) the connection idle the longest is shed
//! to make room — at the limit, for a new client that has sent its first bytes only
//! ([`has_spoken`]). Accept errors are logged at most once a second.
//!
//! The HTTP layer on top is chosen by [`Stack`]: hyper's own service ([`http::serve`]),
//! an axum router ([`axum_stack`]) on the same accept loop, or actix-web with its own
//! accept loop and the same rustls `ServerConfig` ([`actix_stack`]).
//!
//! With [`ServeOptions::quic`], HTTP/3 over QUIC is served on UDP on the same port
//! ([`quic`]), and the TCP answers carry `Alt-Svc: h3=":PORT"`.
//!
//! The engine never prints: [`Server::bind`] reports the bound addresses and
//! [`Server::run`] returns a [`ServeSummary`] when the shutdown future completes.

pub mod actix_stack;
pub mod axum_stack;
pub mod config;
pub mod http;
pub mod last_response;
pub mod metrics;
pub mod quic;
pub mod tls_stream;

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::error::{Classify, ErrorClass};
use crate::tls::tickets::{self, TicketKeyRing};
use metrics::{HandshakeLabels, Metrics, StatsSnapshot};

/// A failure starting the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The QUIC endpoint could not be bound (`--quic`: UDP on the TCP listener's port).
    #[error("cannot listen on UDP {addr} for --quic")]
    BindUdp {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Classify for ServeError {
    fn class(&self) -> ErrorClass {
        match self {
            ServeError::Bind { source, .. } | ServeError::BindUdp { source, .. } => {
                match source.kind() {
                    std::io::ErrorKind::AddrInUse
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::PermissionDenied => ErrorClass::Input,
                    _ => ErrorClass::Runtime,
                }
            }
        }
    }
}

/// The HTTP server stack on top of the TLS configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    /// tokio-rustls accept loop + hyper-util (HTTP/1.1 and HTTP/2) with a hyper
    /// `service_fn`.
    #[default]
    Hyper,
    /// The same accept loop and hyper-util connections, requests answered by an axum
    /// `Router`.
    Axum,
    /// actix-web 4 (`HttpServer` with its rustls 0.23 acceptor, its own workers).
    Actix,
}

impl Stack {
    /// Its name (`--stack`, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Stack::Hyper => "hyper",
            Stack::Axum => "axum",
            Stack::Actix => "actix",
        }
    }
}

/// Rotating the shared ticket keys from this instance.
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The key ring file.
    pub path: PathBuf,
    /// How often (at least once a second is enforced: shorter periods rotate every second).
    pub every: Duration,
    /// The ring this instance uses (reloaded right after each rotation).
    pub ring: Arc<TicketKeyRing>,
}

/// What to serve.
pub struct ServeOptions {
    /// TLS listener address.
    pub listen: SocketAddr,
    /// Listeners on the same address (`SO_REUSEPORT` when more than one).
    pub reuseport: usize,
    /// The TLS configuration.
    pub tls: Arc<rustls::ServerConfig>,
    /// Longest time from TCP accept to handshake complete.
    pub handshake_timeout: Duration,
    /// Longest time an HTTP/1.1 client may take to send a request's headers.
    pub header_timeout: Duration,
    /// A connection that moves no byte (in either direction) for this long is closed.
    pub idle_timeout: Duration,
    /// How slow a request body may be ([`http::UploadLimits`]).
    pub upload: http::UploadLimits,
    /// Connections served at once; at the limit a new connection that has sent its first
    /// bytes takes the place of the connection idle the longest (for at least a second),
    /// which is shed; else (no such connection, or a new one that has sent nothing
    /// itself) the new one is closed at accept.
    pub max_connections: usize,
    /// Bytes of the `/` response body.
    pub body_size: usize,
    /// Prometheus `/metrics` and `/stats` listener.
    pub metrics_listen: Option<SocketAddr>,
    /// Time in-flight connections get to finish at shutdown.
    pub shutdown_timeout: Duration,
    /// Ticket-key rotation done by this instance.
    pub rotation: Option<Rotation>,
    /// Key-share pools, for their statistics.
    pub kx_pools: Option<Arc<crate::tls::kx_pool::KxPools>>,
    /// What answers the requests: [`Stack::Hyper`] or [`Stack::Axum`] ([`Stack::Actix`]
    /// runs through [`actix_stack`] instead and is served like hyper here).
    pub stack: Stack,
    /// HTTP/3 over QUIC on UDP, on the TLS listener's port.
    pub quic: Option<quic::QuicOptions>,
}

/// The server, bound and ready.
pub struct Server {
    listeners: Vec<TcpListener>,
    quic: Option<quinn::Endpoint>,
    metrics_listener: Option<TcpListener>,
    opts: ServeOptions,
    metrics: Arc<Metrics>,
}

/// What the server did.
#[derive(Debug, Clone, Serialize)]
pub struct ServeSummary {
    /// The HTTP stack.
    pub stack: Stack,
    /// Seconds it ran.
    pub seconds: f64,
    /// Handshakes, requests, failures.
    #[serde(flatten)]
    pub stats: StatsSnapshot,
    /// Connections still open when the shutdown deadline passed.
    pub unfinished_connections: usize,
    /// Key-share pool use (with `--kx-pool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kx_pool: Option<crate::tls::kx_pool::PoolStats>,
}

/// Draws once from the configuration's random source before the first connection.
///
/// aws-lc seeds its process-wide DRBG lazily from CPU jitter entropy (`jent_*`): tens of
/// milliseconds of CPU spent inside whichever handshake first asks for randomness, which
/// profiles then charge to the connections. After that seed it reseeds only every 2^24
/// draws, so one draw here moves the whole cost to startup and changes nothing else.
pub(crate) fn warm_rng(tls: &rustls::ServerConfig) {
    let mut seed = [0u8; 32];
    if tls.crypto_provider().secure_random.fill(&mut seed).is_err() {
        // The first handshake will ask again and fail with rustls's own error.
        tracing::warn!("the random source failed at startup");
    }
}

fn listener(addr: SocketAddr, reuseport: bool) -> std::io::Result<TcpListener> {
    TcpListener::from_std(std_listener(addr, reuseport)?)
}

/// A non-blocking listening socket (backlog 4096), `SO_REUSEPORT` when asked, with
/// `TCP_NODELAY` (Linux copies it to every socket `accept` returns, which saves a
/// `setsockopt` per connection) and `TCP_DEFER_ACCEPT` (see [`defer_accept`]).
fn std_listener(addr: SocketAddr, reuseport: bool) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if reuseport {
        socket.set_reuse_port(true)?;
    }
    socket.set_tcp_nodelay(true)?;
    defer_accept(&socket, 1)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

/// `TCP_DEFER_ACCEPT`: `accept` returns a connection once its first bytes (the
/// ClientHello) have arrived, or after about `secs` seconds (a client that sends nothing
/// is then accepted and meets the handshake timeout). The server is not woken for a
/// connection it cannot read from yet: per connection, one `recvfrom` that would fail
/// with `EAGAIN`, and often a wake-up, fewer (nginx's `listen … deferred`).
fn defer_accept(socket: &socket2::Socket, secs: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket, and a c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Binds `k` listeners on `listen` (`SO_REUSEPORT` when more than one), all or none.
fn bind_std(listen: SocketAddr, k: usize) -> Result<Vec<std::net::TcpListener>, ServeError> {
    let bind_err = |addr, source| ServeError::Bind { addr, source };
    let first = std_listener(listen, k > 1).map_err(|e| bind_err(listen, e))?;
    let addr = first.local_addr().map_err(|e| bind_err(listen, e))?;
    let mut listeners = vec![first];
    for _ in 1..k {
        listeners.push(std_listener(addr, true).map_err(|e| bind_err(addr, e))?);
    }
    Ok(listeners)
}

impl Server {
    /// Binds the listeners (all of them or none). Call inside a tokio runtime.
    pub fn bind(opts: ServeOptions) -> Result<Server, ServeError> {
        warm_rng(&opts.tls);
        let k = opts.reuseport.max(1);
        let bind_err = |addr, source| ServeError::Bind { addr, source };
        let first = listener(opts.listen, k > 1).map_err(|e| bind_err(opts.listen, e))?;
        let addr = first.local_addr().map_err(|e| bind_err(opts.listen, e))?;
        let mut listeners = vec![first];
        for _ in 1..k {
            listeners.push(listener(addr, true).map_err(|e| bind_err(addr, e))?);
        }
        let metrics_listener = match opts.metrics_listen {
            Some(m) => Some(listener(m, false).map_err(|e| bind_err(m, e))?),
            None => None,
        };
        let metrics = Arc::new(Metrics::new());
        let quic = match &opts.quic {
            Some(q) => {
                metrics.quic_retry_policy(q.retry.to_string());
                Some(
                    quic::bind(addr, q, opts.idle_timeout, Arc::clone(&metrics))
                        .map_err(|source| ServeError::BindUdp { addr, source })?,
                )
            }
            None => None,
        };
        Ok(Server {
            listeners,
            quic,
            metrics_listener,
            opts,
            metrics,
        })
    }

    /// The TLS listener's address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// The QUIC endpoint's address (`--quic`).
    pub fn quic_addr(&self) -> Option<SocketAddr> {
        self.quic.as_ref().and_then(|e| e.local_addr().ok())
    }

    /// The metrics listener's address.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The live metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Serves until `shutdown` completes, then stops accepting, gives in-flight
    /// connections `shutdown_timeout` to finish, and returns the summary.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> ServeSummary {
        let started = Instant::now();
        let graceful = Arc::new(GracefulShutdown::new());
        let (stop_tx, stop_rx) = watch::channel(false);
        let limit = Arc::new(Semaphore::new(self.opts.max_connections.max(1)));
        // The header timeout is set per connection (`serve_http`): what is left of it
        // once the request's first bytes have arrived.
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new());
        builder.http2().timer(TokioTimer::new());
        let mut bodies = http::Bodies::new(self.opts.body_size);
        if let Some(port) = self.quic_addr().map(|a| a.port()) {
            bodies = bodies.with_alt_svc(port);
        }
        let ctx = Arc::new(Ctx {
            tls: Arc::clone(&self.opts.tls),
            metrics: Arc::clone(&self.metrics),
            bodies: bodies.clone(),
            handshake_timeout: self.opts.handshake_timeout,
            header_timeout: self.opts.header_timeout,
            idle_timeout: self.opts.idle_timeout,
            upload: self.opts.upload,
            conns: Registry::new(),
            capture_hello: self.opts.tls.session_storage.can_cache()
                || self.opts.tls.ticketer.enabled(),
            builder,
            axum: (self.opts.stack == Stack::Axum).then(|| {
                axum_stack::router(bodies.clone(), Arc::clone(&self.metrics), self.opts.upload)
            }),
        });
        let mut tasks = Vec::new();
        for l in self.listeners {
            tasks.push(tokio::spawn(accept_loop(
                l,
                Arc::clone(&ctx),
                Arc::clone(&limit),
                Arc::clone(&graceful),
                stop_rx.clone(),
            )));
        }
        if let Some(l) = self.metrics_listener {
            tasks.push(tokio::spawn(metrics_loop(
                l,
                Arc::clone(&self.metrics),
                Arc::clone(&graceful),
                stop_rx.clone(),
            )));
        }
        if let Some(rot) = self.opts.rotation.clone() {
            tasks.push(tokio::spawn(rotate_loop(rot, stop_rx.clone())));
        }
        if let (Some(endpoint), Some(q)) = (&self.quic, &self.opts.quic) {
            let qctx = Arc::new(quic::QuicCtx {
                metrics: Arc::clone(&self.metrics),
                bodies,
                handshake_timeout: self.opts.handshake_timeout,
                upload: self.opts.upload,
                retry: q.retry,
                half_rtt: q.half_rtt,
                unvalidated: Arc::default(),
            });
            tasks.push(tokio::spawn(quic::accept_loop(
                endpoint.clone(),
                qctx,
                Arc::clone(&limit),
                stop_rx.clone(),
            )));
        }
        shutdown.await;
        let _ = stop_tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        // The accept loops have ended, so this is the last reference. QUIC connections
        // got a GOAWAY at the stop and have the same time to finish.
        let deadline = tokio::time::Instant::now() + self.opts.shutdown_timeout;
        let tcp_done = match Arc::try_unwrap(graceful) {
            Ok(g) => tokio::time::timeout_at(deadline, g.shutdown())
                .await
                .is_ok(),
            Err(_) => false,
        };
        let quic_done = match &self.quic {
            Some(endpoint) => {
                let idle = tokio::time::timeout_at(deadline, endpoint.wait_idle())
                    .await
                    .is_ok();
                endpoint.close(0u32.into(), b"server shutting down");
                idle
            }
            None => true,
        };
        let unfinished = if tcp_done && quic_done {
            0
        } else {
            self.metrics.snapshot().open_connections.max(0) as usize
        };
        ServeSummary {
            stack: self.opts.stack,
            seconds: started.elapsed().as_secs_f64(),
            stats: self.metrics.snapshot(),
            unfinished_connections: unfinished,
            kx_pool: self.opts.kx_pools.as_ref().map(|p| p.stats()),
        }
    }
}

struct Ctx {
    tls: Arc<rustls::ServerConfig>,
    metrics: Arc<Metrics>,
    bodies: http::Bodies,
    handshake_timeout: Duration,
    header_timeout: Duration,
    idle_timeout: Duration,
    upload: http::UploadLimits,
    conns: Registry,
    /// Keep the ClientHello to tell a TLS 1.2 ticket from a session id: only when the
    /// configuration can resume at all (a session cache or a ticketer).
    capture_hello: bool,
    /// hyper-util's auto-detecting builder (no ALPN), timers set, cloned per connection.
    builder: auto::Builder<TokioExecutor>,
    /// The axum router with `--stack axum`.
    axum: Option<axum::Router>,
}

/// One open connection, as the accept loop sees it.
struct ConnState {
    /// Milliseconds since the registry's epoch of the last byte read or written.
    last_active: AtomicU64,
    /// Asked to close (shed, or an HTTP/2 upload too slow); never picked twice.
    shed: AtomicBool,
    /// Wakes the connection's task to close it.
    close: tokio::sync::Notify,
}

/// The open connections, for shedding the one idle the longest.
struct Registry {
    epoch: Instant,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
}

/// A connection idle for less than this is never shed.
const MIN_IDLE_TO_SHED: Duration = Duration::from_secs(1);

impl Registry {
    fn new() -> Self {
        Registry {
            epoch: Instant::now(),
            next_id: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn register(&self) -> (u64, Arc<ConnState>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnState {
            last_active: AtomicU64::new(self.now_ms()),
            shed: AtomicBool::new(false),
            close: tokio::sync::Notify::new(),
        });
        if let Ok(mut m) = self.conns.lock() {
            m.insert(id, Arc::clone(&state));
        }
        (id, state)
    }

    fn remove(&self, id: u64) {
        if let Ok(mut m) = self.conns.lock() {
            m.remove(&id);
        }
    }

    /// Asks the connection idle the longest (at least [`MIN_IDLE_TO_SHED`]) to close;
    /// false when there is none.
    fn shed_oldest_idle(&self) -> bool {
        let now = self.now_ms();
        let min = MIN_IDLE_TO_SHED.as_millis() as u64;
        let Ok(m) = self.conns.lock() else {
            return false;
        };
        let oldest = m
            .values()
            .filter(|c| !c.shed.load(Ordering::Relaxed))
            .map(|c| (c.last_active.load(Ordering::Relaxed), c))
            .filter(|(t, _)| now.saturating_sub(*t) >= min)
            .min_by_key(|(t, _)| *t);
        match oldest {
            Some((_, c)) => {
                c.shed.store(true, Ordering::Relaxed);
                c.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Records the time of every byte read or written on a connection, and keeps the first
/// bytes the client sends (its ClientHello) until the handshake is done.
struct Tracked<T> {
    inner: T,
    state: Arc<ConnState>,
    epoch: Instant,
    /// The first [`HELLO_CAPTURE`] bytes read, while capturing.
    hello: Option<Vec<u8>>,
    /// Set once the response being sent is the connection's last: the connection is
    /// dropped (closed, which sends the FIN) right after its shutdown.
    last: last_response::LastFlag,
}

/// Bytes of the client's first flight kept to read its ClientHello (one with a
/// post-quantum key share is about 1.8 KB).
const HELLO_CAPTURE: usize = 8192;

/// Whether the ClientHello at the start of `records` (TLS records as the client sent
/// them) offers a TLS 1.2 session ticket: a non-empty `session_ticket` extension. `None`
/// when it cannot be read. Framed, reassembled and parsed by `observe`'s wire reader (the
/// one that reads captures), so the house has one ClientHello reader.
fn offers_session_ticket(records: &[u8]) -> Option<bool> {
    use crate::observe::tls::{self as wire, Frame, HandshakeBuf};
    let mut rest = records;
    let mut messages = HandshakeBuf::default();
    // The first handshake message, once whole: Some(ticket offered), or None when it is
    // not a ClientHello that parses.
    let mut first: Option<Option<bool>> = None;
    while first.is_none() {
        let Frame::Record {
            content_type: wire::content::HANDSHAKE,
            len,
        } = wire::frame(rest)
        else {
            return None; // cut short, not TLS, or not a handshake record
        };
        messages
            .feed(&rest[5..5 + len], |kind, body| {
                first = Some(
                    (kind == wire::msg::CLIENT_HELLO)
                        .then(|| wire::client_hello(body).map(|hello| hello.ticket))
                        .flatten(),
                );
                false
            })
            .ok()?;
        rest = &rest[5 + len..];
    }
    first.flatten()
}

impl<T> Tracked<T> {
    fn touch(&self) {
        self.state
            .last_active
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
            let this = &mut *self;
            if let Some(h) = &mut this.hello {
                let new = &buf.filled()[before..];
                let room = HELLO_CAPTURE.saturating_sub(h.len());
                h.extend_from_slice(&new[..new.len().min(room)]);
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.last.is_set() {
            // After the last response (and the close_notify, written just before) hyper
            // ends the connection and the drop closes the socket, which sends the FIN: a
            // `shutdown(SHUT_WR)` first would be one more system call, and it fails when
            // the client has already reset the connection.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Logs accept failures at most once a second, counting the ones left out.
struct AcceptErrorLog {
    last: Option<Instant>,
    suppressed: u64,
}

impl AcceptErrorLog {
    fn log(&mut self, e: &std::io::Error) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            self.suppressed += 1;
            return;
        }
        if self.suppressed > 0 {
            tracing::warn!(
                "accept failed: {e} ({} more accept failures in the last second)",
                self.suppressed
            );
        } else {
            tracing::warn!("accept failed: {e}");
        }
        self.last = Some(now);
        self.suppressed = 0;
    }
}

async fn accept_loop(
    listener: TcpListener,
    ctx: Arc<Ctx>,
    limit: Arc<Semaphore>,
    graceful: Arc<GracefulShutdown>,
    mut stop: watch::Receiver<bool>,
) {
    let mut errors = AcceptErrorLog {
        last: None,
        suppressed: 0,
    };
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => match Arc::clone(&limit).try_acquire_owned() {
                    Ok(permit) => {
                        tokio::spawn(connection(tcp, Arc::clone(&ctx), graceful.watcher(), permit));
                    }
                    // At the limit, only a client that has spoken takes an idle one's place.
                    Err(_) if !has_spoken(&tcp) => {
                        ctx.metrics.rejected();
                        drop(tcp);
                    }
                    Err(_) if ctx.conns.shed_oldest_idle() => {
                        // The shed connection gives its permit back as it closes.
                        ctx.metrics.failure("shed-idle");
                        let ctx = Arc::clone(&ctx);
                        let limit = Arc::clone(&limit);
                        let watcher = graceful.watcher();
                        tokio::spawn(async move {
                            let wait = tokio::time::timeout(Duration::from_secs(1), limit.acquire_owned());
                            match wait.await {
                                Ok(Ok(permit)) => connection(tcp, ctx, watcher, permit).await,
                                _ => {
                                    ctx.metrics.rejected();
                                    drop(tcp);
                                }
                            }
                        });
                    }
                    Err(_) => {
                        ctx.metrics.rejected();
                        drop(tcp);
                    }
                },
                Err(e) => {
                    // Out of descriptors and the like: free one by shedding the connection
                    // idle the longest, back off instead of spinning, log once a second.
                    if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
                        && ctx.conns.shed_oldest_idle()
                    {
                        ctx.metrics.failure("shed-idle");
                    }
                    errors.log(&e);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// Whether the client of a connection just accepted has sent its first bytes (its
/// ClientHello): one non-blocking `MSG_PEEK`, asked only at the connection limit.
///
/// With `TCP_DEFER_ACCEPT` ([`defer_accept`]) a connection comes out of `accept` with its
/// first bytes, or without them once the kernel has waited about a second: one that has
/// sent nothing is itself idle, for as long as the connections it would displace may
/// be. Letting it shed one of them gave an idle flood that reconnects whatever is closed
/// (2 flooding connections per place) an endless chain of evictions — each reconnection
/// shedding another flooding connection, ahead of the real clients in the queue for the
/// freed places — and every real client waited past its second and was reset.
fn has_spoken(tcp: &TcpStream) -> bool {
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    // Ok(0): the client has closed already; an error: nothing to read (WouldBlock).
    matches!(socket2::SockRef::from(tcp).peek(&mut byte), Ok(n) if n > 0)
}

/// Waits until `state`'s connection has moved no byte for `idle` (true), or it is asked to
/// close (false).
async fn idle_or_shed(state: &ConnState, epoch: Instant, idle: Duration) -> bool {
    loop {
        let last = Duration::from_millis(state.last_active.load(Ordering::Relaxed));
        let deadline = tokio::time::Instant::from_std(epoch + last + idle);
        tokio::select! {
            _ = state.close.notified() => return false,
            _ = tokio::time::sleep_until(deadline) => {
                let now = epoch.elapsed();
                let last = Duration::from_millis(state.last_active.load(Ordering::Relaxed));
                if now.saturating_sub(last) >= idle {
                    return true;
                }
            }
        }
    }
}

/// Removes a connection from the registry however it ends.
struct Registered<'a>(&'a Registry, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}

/// Decrements the open-connection gauge however the connection ends.
struct OpenGuard(Arc<Metrics>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open_delta(-1);
    }
}

async fn connection(
    tcp: TcpStream,
    ctx: Arc<Ctx>,
    watcher: hyper_util::server::graceful::Watcher,
    _permit: OwnedSemaphorePermit,
) {
    let started = Instant::now();
    ctx.metrics.open_delta(1);
    let _guard = OpenGuard(Arc::clone(&ctx.metrics));
    // TCP_NODELAY came from the listener.
    let (id, state) = ctx.conns.register();
    let _registered = Registered(&ctx.conns, id);
    let last = last_response::LastFlag::default();
    let tcp = Tracked {
        inner: tcp,
        state: Arc::clone(&state),
        epoch: ctx.conns.epoch,
        hello: ctx.capture_hello.then(Vec::new),
        last: last.clone(),
    };
    // Until the handshake completes, or a 0-RTT request has arrived (see `tls_stream`).
    let handshake = tokio::time::timeout(
        ctx.handshake_timeout,
        tls_stream::ServerTls::accept(tcp, Arc::clone(&ctx.tls)),
    );
    let handshake = tokio::select! {
        r = handshake => r,
        _ = state.close.notified() => return,
    };
    let mut tls = match handshake {
        Err(_) => {
            ctx.metrics.failure("timeout");
            return;
        }
        Ok(Err(e)) => {
            ctx.metrics.failure(failure_reason(&e));
            tracing::debug!("handshake failed: {e}");
            return;
        }
        Ok(Ok(tls)) => tls,
    };
    // Accept (the ClientHello has arrived, see `defer_accept`) to handshake complete; for
    // a 0-RTT handshake, to the early data's arrival with the server's flight written (the
    // client's Finished comes a round trip later).
    let took = started.elapsed();
    let hello = tls.get_mut().0.hello.take();
    let early = tls.had_early_data();
    if early {
        tracing::debug!("0-RTT data accepted: answered before the client's Finished");
    }
    record_handshake(&ctx.metrics, tls.get_ref().1, hello.as_deref(), early, took);
    let closer = http::Closer(Arc::clone(&state));
    let served = serve_requests(&ctx, tls, last, watcher, closer);
    // Dropping the connection closes it: when it has been idle too long, or when it is shed.
    // Idle first: a connection silent since its handshake meets the idle timeout no later
    // than the header timeout (its last byte came before the handshake's end), and when
    // both fire in the same timer tick it is counted as idle, every time.
    let result = tokio::select! {
        biased;
        idle = idle_or_shed(&state, ctx.conns.epoch, ctx.idle_timeout) => {
            // A shed connection was counted when the accept loop shed it (a connection
            // closed for a slow upload, by the service).
            if idle {
                ctx.metrics.failure("idle-timeout");
            }
            return;
        }
        r = served => r,
    };
    if let Err(e) = result {
        if e.header_timeout {
            ctx.metrics.failure("header-timeout");
        }
        tracing::debug!("connection ended: {}", e.text);
    }
}

/// Counts a completed handshake in the metrics with its labels (kind, version, group,
/// suite, client authentication, resumption) and the time it `took`; `hello`: the
/// ClientHello, when captured (it tells a TLS 1.2 resumption by ticket from one by
/// session id).
fn record_handshake(
    metrics: &Metrics,
    conn: &rustls::ServerConnection,
    hello: Option<&[u8]>,
    early: bool,
    took: Duration,
) {
    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let tls12 = conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_2);
    // rustls resumes TLS 1.2 by ticket whenever the client offers one (it then never
    // looks the session id up), else by session id; TLS 1.3 always by a PSK.
    let resumption = match (resumed, tls12) {
        (false, _) => "none",
        (true, false) => "ticket",
        (true, true) => match hello.and_then(offers_session_ticket) {
            Some(true) => "ticket",
            Some(false) => "session-id",
            None => "unknown",
        },
    };
    let kind = match conn.handshake_kind() {
        Some(rustls::HandshakeKind::Resumed) if early => "0rtt",
        Some(rustls::HandshakeKind::Resumed) => "resumed",
        Some(rustls::HandshakeKind::FullWithHelloRetryRequest) => "full-hrr",
        _ => "full",
    };
    metrics.handshake(
        HandshakeLabels {
            transport: "tcp".into(),
            kind: kind.into(),
            version: conn
                .protocol_version()
                .map(crate::tls::version_label)
                .unwrap_or_default(),
            group: conn
                .negotiated_key_exchange_group()
                .map(|g| crate::tls::choices::group_label(g.name()))
                .unwrap_or(Cow::Borrowed("none")),
            suite: conn
                .negotiated_cipher_suite()
                .map(|s| match s.suite().as_str() {
                    Some(name) => Cow::Borrowed(name),
                    None => Cow::Owned(format!("{:?}", s.suite())),
                })
                .unwrap_or_default(),
            client_auth: if conn.peer_certificates().is_some() {
                "yes"
            } else {
                "no"
            }
            .into(),
            resumption: resumption.into(),
        },
        took,
    );
}

/// Serves HTTP on a connection whose handshake is done, as ALPN decided (without ALPN,
/// hyper looks at the first bytes), until it ends.
async fn serve_requests(
    ctx: &Ctx,
    mut tls: Box<tls_stream::ServerTls<Tracked<TcpStream>>>,
    last: last_response::LastFlag,
    watcher: hyper_util::server::graceful::Watcher,
    closer: http::Closer,
) -> Result<(), HttpEnd> {
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    // HTTP/1 starts with the request's first bytes: until then an idle connection
    // holds no HTTP state (hyper allocates 16 KiB of buffers as it starts, and its
    // connection future, ~8 KiB, is boxed below instead of sitting in every
    // connection's task). The header timeout runs from the handshake's end, as it
    // would in hyper. HTTP/2 starts at once: its server preface goes first.
    let mut header_timeout = ctx.header_timeout;
    if alpn.as_deref() != Some(b"h2") {
        let waiting = Instant::now();
        match tokio::time::timeout(header_timeout, tls.fill()).await {
            Err(_) => {
                return Err(HttpEnd {
                    text: "no request within the header timeout".into(),
                    header_timeout: true,
                });
            }
            Ok(Err(e)) => return Err(HttpEnd::other(e)),
            Ok(Ok(())) => {}
        }
        header_timeout = header_timeout
            .saturating_sub(waiting.elapsed())
            .max(Duration::from_millis(1));
    }
    let io = TokioIo::new(last_response::LastResponse::new(tls, last.clone()));
    match &ctx.axum {
        Some(router) => {
            // The router's upload handler closes the connection through the request's
            // `Closer` extension.
            let router = router.clone();
            let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(closer.clone());
                let mut router = router.clone();
                async move {
                    type Req = hyper::Request<hyper::body::Incoming>;
                    std::future::poll_fn(|cx| {
                        tower_service::Service::<Req>::poll_ready(&mut router, cx)
                    })
                    .await?;
                    tower_service::Service::<Req>::call(&mut router, req).await
                }
            });
            Box::pin(serve_http(
                io,
                alpn.as_deref(),
                svc,
                &ctx.builder,
                header_timeout,
                watcher,
            ))
            .await
        }
        None => {
            let metrics = Arc::clone(&ctx.metrics);
            let bodies = ctx.bodies.clone();
            let upload = ctx.upload;
            let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                last.mark_if_closing(&req);
                http::serve(
                    req,
                    bodies.clone(),
                    Arc::clone(&metrics),
                    upload,
                    closer.clone(),
                )
            });
            Box::pin(serve_http(
                io,
                alpn.as_deref(),
                svc,
                &ctx.builder,
                header_timeout,
                watcher,
            ))
            .await
        }
    }
}

/// Why serving HTTP on a connection ended in error.
struct HttpEnd {
    /// The error in words (logged at debug level).
    text: String,
    /// Closed at `--header-timeout`: no complete request head in time (counted).
    header_timeout: bool,
}

impl HttpEnd {
    /// Any other error.
    fn other(e: impl std::fmt::Display) -> HttpEnd {
        HttpEnd {
            text: e.to_string(),
            header_timeout: false,
        }
    }

    /// A hyper connection's error: hyper's header read timeout is a header timeout.
    fn hyper(e: &hyper::Error) -> HttpEnd {
        HttpEnd {
            text: e.to_string(),
            header_timeout: e.is_timeout(),
        }
    }
}

/// Serves HTTP on a TLS connection: HTTP/2 or HTTP/1.1 as ALPN chose, else hyper-util's
/// auto-detection, under the graceful-shutdown watcher.
async fn serve_http<I, S, B>(
    io: TokioIo<I>,
    alpn: Option<&[u8]>,
    svc: S,
    builder: &auto::Builder<TokioExecutor>,
    header_timeout: Duration,
    watcher: hyper_util::server::graceful::Watcher,
) -> Result<(), HttpEnd>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<B>,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match alpn {
        Some(b"h2") => {
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .serve_connection(io, svc);
            watcher.watch(conn).await.map_err(HttpEnd::other)
        }
        Some(b"http/1.1" | b"http/1.0") => {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(io, svc);
            watcher.watch(conn).await.map_err(|e| HttpEnd::hyper(&e))
        }
        _ => {
            let mut builder = builder.clone();
            builder.http1().header_read_timeout(header_timeout);
            watcher
                .watch(builder.serve_connection(io, svc).into_owned())
                .await
                .map_err(|e| match e.downcast_ref::<hyper::Error>() {
                    Some(h) => HttpEnd::hyper(h),
                    None => HttpEnd::other(e),
                })
        }
    }
}

/// The failure label for a handshake error.
fn failure_reason(e: &std::io::Error) -> &'static str {
    if let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        return match tls {
            rustls::Error::AlertReceived(_) => "alert-received",
            rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                "bad-client-certificate"
            }
            rustls::Error::PeerIncompatible(_) => "incompatible-client",
            rustls::Error::General(m) if m == crate::server::config::NO_CERTIFICATE_RESOLVED => {
                "no-matching-sni"
            }
            rustls::Error::InvalidMessage(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. }
            | rustls::Error::PeerMisbehaved(_) => "protocol-error",
            _ => "tls-error",
        };
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::ConnectionAborted
        | std::io::ErrorKind::BrokenPipe => "closed-during-handshake",
        _ => "io-error",
    }
}

async fn metrics_loop(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    graceful: Arc<GracefulShutdown>,
    mut stop: watch::Receiver<bool>,
) {
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let m = Arc::clone(&metrics);
                let svc = service_fn(move |req| http::serve_metrics(req, Arc::clone(&m)));
                let conn = builder.serve_connection(TokioIo::new(tcp), svc).into_owned();
                tokio::spawn(graceful.watcher().watch(conn));
            }
        }
    }
}

pub(crate) async fn rotate_loop(rot: Rotation, mut stop: watch::Receiver<bool>) {
    // A zero period would panic the runtime thread (tokio's interval refuses it) and a tiny
    // one rewrite the key ring thousands of times a second: at most once a second.
    let mut tick = tokio::time::interval(rot.every.max(Duration::from_secs(1)));
    tick.tick().await; // the first tick is immediate
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {
                let path = rot.path.clone();
                match tokio::task::spawn_blocking(move || tickets::rotate(&path)).await {
                    Ok(Ok(info)) => {
                        let _ = rot.ring.reload_if_changed();
                        tracing::info!(keys = info.keys.len(), "ticket keys rotated");
                    }
                    Ok(Err(e)) => tracing::warn!("ticket key rotation failed: {e}"),
                    Err(e) => tracing::warn!("ticket key rotation task failed: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::offers_session_ticket;

    /// A ClientHello handshake message with `exts` (type, body) as its extensions, or
    /// with no extensions block at all when `exts` is `None`.
    fn client_hello(exts: Option<&[(u16, &[u8])]>) -> Vec<u8> {
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]); // random
        body.extend_from_slice(&[4, 1, 2, 3, 4]); // session id
        body.extend_from_slice(&[0, 2, 0xc0, 0x2b]); // one cipher suite
        body.extend_from_slice(&[1, 0]); // null compression
        if let Some(exts) = exts {
            let mut block = Vec::new();
            for (kind, data) in exts {
                block.extend_from_slice(&kind.to_be_bytes());
                block.extend_from_slice(&(data.len() as u16).to_be_bytes());
                block.extend_from_slice(data);
            }
            body.extend_from_slice(&(block.len() as u16).to_be_bytes());
            body.extend_from_slice(&block);
        }
        let mut msg = vec![1, 0];
        msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
        msg.extend_from_slice(&body);
        msg
    }

    /// `msg` in handshake records of at most `max` bytes each.
    fn records(msg: &[u8], max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in msg.chunks(max) {
            out.extend_from_slice(&[22, 3, 1]);
            out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    #[test]
    fn a_ticket_is_offered_only_by_a_non_empty_session_ticket_extension() {
        let sni: (u16, &[u8]) = (0, b"\x00\x00");
        let ticket: (u16, &[u8]) = (35, &[9; 40]);
        let empty_ticket: (u16, &[u8]) = (35, &[]);
        let hello = client_hello(Some(&[sni, ticket]));
        assert_eq!(offers_session_ticket(&records(&hello, 16384)), Some(true));
        let hello = client_hello(Some(&[sni, empty_ticket]));
        assert_eq!(offers_session_ticket(&records(&hello, 16384)), Some(false));
        let hello = client_hello(Some(&[sni]));
        assert_eq!(offers_session_ticket(&records(&hello, 16384)), Some(false));
        let hello = client_hello(None);
        assert_eq!(offers_session_ticket(&records(&hello, 16384)), Some(false));
    }

    #[test]
    fn a_client_hello_split_across_records_is_read_whole() {
        let hello = client_hello(Some(&[(0, b"\x00\x00"), (35, &[9; 40])]));
        for max in [1, 7, 50, 100] {
            assert_eq!(
                offers_session_ticket(&records(&hello, max)),
                Some(true),
                "{max}"
            );
        }
    }

    #[test]
    fn what_cannot_be_read_is_none() {
        let hello = client_hello(Some(&[(35, &[9; 40])]));
        let whole = records(&hello, 16384);
        // Cut short anywhere: inside the record header, the message, an extension.
        for cut in [0, 3, 5, 9, 50, whole.len() - 1] {
            assert_eq!(offers_session_ticket(&whole[..cut]), None, "cut at {cut}");
        }
        // Not a handshake record; not a ClientHello.
        let mut alert = whole.clone();
        alert[0] = 21;
        assert_eq!(offers_session_ticket(&alert), None);
        let mut server_hello = whole.clone();
        server_hello[5] = 2;
        assert_eq!(offers_session_ticket(&server_hello), None);
    }
}
