//! `tlsperf serve --stack actix`: actix-web 4 serving the same `/` and `/health` bodies as
//! the hyper stack, with the very rustls `ServerConfig` that
//! [`crate::server::config::build`] produced for the other stacks (cloned out of its
//! `Arc`, because actix takes it by value) through actix's rustls 0.23 acceptor
//! (`HttpServer::listen_rustls_0_23`).
//!
//! actix runs its own accept thread and `--threads` single-threaded workers; the
//! connection limit is actix's, per worker (`--max-connections` ÷ workers, rounded up),
//! and so is the handshake timeout. Our accept loop is not involved, so what it measures
//! (handshake latency by kind, handshake failures, open and unfinished connections) is
//! not available for this stack: the summary counts the requests served (an atomic
//! counter in the handlers) and names the fields it cannot fill. Flags that need our
//! accept loop (`--metrics`, `--early-data`) are refused by the CLI.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use actix_web::http::{StatusCode, header};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde::Serialize;
use tokio::sync::watch;

use super::http::{Bodies, Verb};
use super::{Rotation, ServeError, Stack};

/// What an actix server cannot report (our accept loop measures these for the others).
pub const NOT_AVAILABLE: [&str; 4] = [
    "handshakes",
    "failures",
    "open_connections",
    "unfinished_connections",
];

/// What to serve with actix-web.
pub struct ActixOptions {
    /// TLS listener address.
    pub listen: SocketAddr,
    /// Listeners on the same address (`SO_REUSEPORT` when more than one).
    pub reuseport: usize,
    /// The TLS configuration (the one the other stacks use).
    pub tls: Arc<rustls::ServerConfig>,
    /// actix workers (one single-threaded runtime each).
    pub workers: usize,
    /// Connections served at once in all, split evenly between the workers.
    pub max_connections: usize,
    /// Longest time from TCP accept to handshake complete.
    pub handshake_timeout: Duration,
    /// Longest time a client may take to send a request's headers (actix's client
    /// request timeout).
    pub header_timeout: Duration,
    /// Longest time an idle keep-alive connection is kept (actix's keep-alive timeout:
    /// between requests only).
    pub idle_timeout: Duration,
    /// Time in-flight connections get to finish at shutdown (whole seconds, rounded up).
    pub shutdown_timeout: Duration,
    /// Bytes of the `/` response body.
    pub body_size: usize,
    /// How slow a request body may be: a slower one is answered 408 and, on HTTP/1.1,
    /// its connection closed (an actix handler cannot close an HTTP/2 connection: only
    /// the stream ends), uncounted (no failure counts with this stack).
    pub upload: super::http::UploadLimits,
    /// Ticket-key rotation done by this instance.
    pub rotation: Option<Rotation>,
    /// Key-share pools, for their statistics.
    pub kx_pools: Option<Arc<crate::tls::kx_pool::KxPools>>,
}

/// What the actix server did, as far as it can tell.
#[derive(Debug, Clone, Serialize)]
pub struct ActixSummary {
    /// Always [`Stack::Actix`].
    pub stack: Stack,
    /// Seconds it ran.
    pub seconds: f64,
    /// Requests answered by the handlers.
    pub requests: u64,
    /// Bytes of request bodies read (`POST /` uploads).
    pub request_body_bytes: u64,
    /// Summary fields of the other stacks this one cannot measure ([`NOT_AVAILABLE`]).
    pub not_available: Vec<&'static str>,
    /// Key-share pool use (with `--kx-pool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kx_pool: Option<crate::tls::kx_pool::PoolStats>,
}

/// The actix server, bound.
pub struct ActixServer {
    listeners: Vec<std::net::TcpListener>,
    opts: ActixOptions,
}

struct AppState {
    bodies: Bodies,
    upload: super::http::UploadLimits,
    requests: AtomicU64,
    request_body_bytes: AtomicU64,
}

impl ActixServer {
    /// Binds the listeners (all of them or none).
    pub fn bind(opts: ActixOptions) -> Result<ActixServer, ServeError> {
        super::warm_rng(&opts.tls);
        let listeners = super::bind_std(opts.listen, opts.reuseport.max(1))?;
        Ok(ActixServer { listeners, opts })
    }

    /// The TLS listener's address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listeners.first().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` completes (it is polled on actix's tokio runtime, so tokio
    /// timers and signals work in it), then stops gracefully and returns the summary.
    /// Blocks the calling thread; call it outside any async runtime.
    pub fn run(
        self,
        shutdown: impl Future<Output = ()> + 'static,
    ) -> std::io::Result<ActixSummary> {
        let started = Instant::now();
        let state = web::Data::new(AppState {
            bodies: Bodies::new(self.opts.body_size),
            upload: self.opts.upload,
            requests: AtomicU64::new(0),
            request_body_bytes: AtomicU64::new(0),
        });
        let workers = self.opts.workers.max(1);
        let per_worker = self.opts.max_connections.max(1).div_ceil(workers);
        let shutdown_secs = self
            .opts
            .shutdown_timeout
            .as_secs()
            .saturating_add(u64::from(self.opts.shutdown_timeout.subsec_nanos() > 0));
        // The same configuration, by value. actix puts "h2" and "http/1.1" in front of
        // the ALPN list it is given; ours is exactly that list, so it is left to actix
        // rather than offered twice.
        let mut tls = rustls::ServerConfig::clone(&self.opts.tls);
        tls.alpn_protocols.clear();
        let app_state = state.clone();
        let rotation = self.opts.rotation;
        let handshake_timeout = self.opts.handshake_timeout;
        let header_timeout = self.opts.header_timeout;
        let idle_timeout = self.opts.idle_timeout;
        let listeners = self.listeners;
        actix_web::rt::System::new().block_on(async move {
            let mut server = HttpServer::new(move || {
                App::new()
                    .app_data(app_state.clone())
                    .service(web::resource("/").to(answer))
                    .service(web::resource("/health").to(answer))
                    .default_service(web::to(answer))
            })
            .workers(workers)
            .max_connections(per_worker)
            .tls_handshake_timeout(handshake_timeout)
            .client_request_timeout(header_timeout)
            .keep_alive(actix_web::http::KeepAlive::Timeout(idle_timeout))
            .shutdown_timeout(shutdown_secs)
            .disable_signals();
            for l in listeners {
                server = server.listen_rustls_0_23(l, tls.clone())?;
            }
            let server = server.run();
            let handle = server.handle();
            let (stop_tx, stop_rx) = watch::channel(false);
            if let Some(rot) = rotation {
                actix_web::rt::spawn(super::rotate_loop(rot, stop_rx));
            }
            actix_web::rt::spawn(async move {
                shutdown.await;
                let _ = stop_tx.send(true);
                handle.stop(true).await;
            });
            server.await
        })?;
        Ok(ActixSummary {
            stack: Stack::Actix,
            seconds: started.elapsed().as_secs_f64(),
            requests: state.requests.load(Ordering::Relaxed),
            request_body_bytes: state.request_body_bytes.load(Ordering::Relaxed),
            not_available: NOT_AVAILABLE.to_vec(),
            kx_pool: self.opts.kx_pools.as_ref().map(|p| p.stats()),
        })
    }
}

/// Every route's handler: the same status and body as the hyper stack for the path; an
/// upload (`POST /`) is read to its end and counted first, within the same
/// [`super::http::UploadLimits`] (a slower one: 408, and `Connection: close`).
async fn answer(
    req: HttpRequest,
    mut payload: web::Payload,
    state: web::Data<AppState>,
) -> HttpResponse {
    use futures_core::Stream;
    state.requests.fetch_add(1, Ordering::Relaxed);
    let verb = Verb::of(req.method().as_str());
    let (status, body) = state.bodies.answer(verb, req.path());
    if verb == Verb::Post && status == 200 {
        let mut clock = super::http::UploadClock::start(state.upload);
        loop {
            let next = std::future::poll_fn(|cx| std::pin::Pin::new(&mut payload).poll_next(cx));
            match tokio::time::timeout_at(clock.window_end(), next).await {
                Ok(Some(Ok(chunk))) => {
                    state
                        .request_body_bytes
                        .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    clock.bytes(chunk.len() as u64);
                }
                // The end of the body, or the client gone.
                Ok(_) => break,
                Err(_) => {}
            }
            if !clock.on_time() {
                return HttpResponse::RequestTimeout()
                    .force_close()
                    .insert_header((header::CONTENT_TYPE, "application/json"))
                    .body(super::http::REQUEST_TIMEOUT);
            }
        }
    }
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .body(body)
}
