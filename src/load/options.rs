//! What a load run is asked to do: [`LoadGenOptions`] (with [`ConfigFactory`], a client
//! configuration built for every new connection), the highest rate any run may ask for
//! ([`MAX_RATE`]), and the body size each request gets from them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use crate::client::verdict_cache::VerdictCache;

/// The highest open-loop rate (`load --rate`, `capacity --max-rate`), in requests per
/// second, all generator processes together: ten million, beyond what any set of
/// generators sends, and low enough that every count derived from it (instants due over
/// the longest `-d`, 365 days) fits in 64 bits.
pub const MAX_RATE: f64 = 10_000_000.0;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadGenOptions {
    /// Stop after this many requests (started).
    pub requests: Option<u64>,
    /// Stop starting requests after this long.
    pub duration: Option<Duration>,
    /// Connection slots.
    pub connections: usize,
    /// Total requests per second (open loop); `None`: closed loop.
    pub rate: Option<f64>,
    /// Requests per connection before it is closed (`Some(1)`: a new connection per
    /// request); `None`: keep connections as long as the server does.
    pub requests_per_conn: Option<u64>,
    /// HTTP/2 instead of HTTP/1.1.
    pub http2: bool,
    /// HTTP/3 over QUIC instead (`--http3`): every connection a QUIC one from a UDP
    /// socket of its own, made with the slot's client configuration (ALPN `h3`; TLS 1.3
    /// only), its first request sent with the handshake.
    pub http3: bool,
    /// Bytes of the body of each request: 0 sends `GET`, more a `POST` of that many
    /// bytes (an upload; at most [`crate::client::http1::MAX_BODY`]).
    pub body_size: u64,
    /// Limit per request (including a new connection's set-up).
    pub timeout: Duration,
    /// The HTTP statuses that count as a success; any other fails its request (counted
    /// under `http-4xx`/`http-5xx`, its latency left out; the connection is kept).
    pub ok_status: crate::client::status::OkStatus,
    /// Worker threads of the runtime the run is on (reported).
    pub threads: usize,
    /// Sample this process's CPU and memory.
    pub server_pid: Option<u32>,
    /// Resumption mode: each connection slot gets its own session cache.
    pub resume: crate::client::config::Resume,
    /// The options as the user gave them (copied into the result).
    pub echo: BTreeMap<String, serde_json::Value>,
    /// Send each new connection's first request as 0-RTT data when the session allows it
    /// (HTTP/1.1 or HTTP/3, GET only; the client configuration must enable early data).
    pub early_data: bool,
    /// The client configuration's verdict cache, when it has one (its counts are
    /// reported).
    pub verdicts: Option<Arc<VerdictCache>>,
    /// Instances of the server behind one name: new connections go to them in turn
    /// (a client pool behind a load balancer). Empty: the target's own address.
    pub addrs: Vec<SocketAddr>,
    /// Builds a fresh client configuration for every new connection (a client that
    /// loads its roots each time); its cost counts in the request's latency. `None`:
    /// each slot keeps one configuration.
    pub config_per_connection: Option<ConfigFactory>,
    /// Open loop: the whole send schedule starts this much after the run's start. With
    /// `--rate-share i/n`, process i starts (i − 1) ÷ rate after the first, so that the
    /// n processes' sends interleave evenly instead of arriving in bursts of n.
    pub schedule_offset: Duration,
    /// Open loop with `-d`: requests due in the first `warmup` of the run are sent (they
    /// open the connection slots and gather their resumption state) but left out of
    /// every figure, which covers the run after it (its CPU and the server's too); the
    /// duration includes it. Zero: everything counts.
    pub warmup: Duration,
    /// Start at this instant (`--start-at`: several processes start together): the
    /// target is resolved and the server's CPU sampling started before, then the run
    /// waits, and its send schedule is anchored at this instant, not at its wake-up;
    /// `None`: at once.
    pub start_at: Option<Instant>,
}

/// Builds a client configuration (see [`LoadGenOptions::config_per_connection`]).
#[derive(Clone)]
pub struct ConfigFactory(
    pub Arc<dyn Fn() -> Result<Arc<ClientConfig>, crate::tls::choices::ConfigError> + Send + Sync>,
);

impl std::fmt::Debug for ConfigFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfigFactory")
    }
}

/// Each request's body size, within the upload limit.
pub(super) fn body_len(opts: &LoadGenOptions) -> usize {
    usize::try_from(opts.body_size.min(crate::client::http1::MAX_BODY)).unwrap_or(usize::MAX)
}
