//! What a run's connection slots share, one [`Shared`] a run: the target and its
//! addresses, the client configuration, the request's bytes, the shards of the tallies,
//! and what bounds the run — a ticket per request within `-n` and `-d`
//! ([`Shared::ticket`]), the stop when every attempt fails alike ([`Shared::failed`]).
//! Its open-loop send schedule is in `schedule.rs`. (Not `share.rs`: several processes
//! sharing one rate.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use rustls::ClientConfig;

use super::options::{LoadGenOptions, body_len};
use super::progress::Progress;
use super::tally::Tally;
use crate::client::ConnectError;
use crate::client::http1::request as http_request;
use crate::client::target::Target;

/// A run whose first attempts all fail alike (a server without HTTP/2, a group it does
/// not offer, a certificate we do not trust) stops after this many more failures than
/// connections, instead of hammering the server with attempts that cannot work.
const FAIL_FAST_AFTER: u64 = 10;

pub(super) struct Shared {
    pub(super) target: Target,
    /// The target's addresses, resolved once before the run.
    pub(super) resolved: Vec<SocketAddr>,
    /// The one of `resolved` that accepted last: new connections try it first (a name
    /// whose first address refuses costs that refusal once, not on every connection).
    pub(super) preferred: AtomicUsize,
    pub(super) config: Arc<ClientConfig>,
    pub(super) opts: LoadGenOptions,
    /// The HTTP/1.1 request, whole (head and body), kept alive or closing.
    pub(super) request_keep: Vec<u8>,
    pub(super) request_close: Vec<u8>,
    /// The HTTP/2 request's body (empty: a GET), shared by every request.
    pub(super) upload: Bytes,
    pub(super) uri: http::Uri,
    /// The HTTP/3 request (`--http3`): the URI, and the upload's body when there is one.
    pub(super) h3_request: crate::client::quic::H3Request,
    issued: AtomicU64,
    /// Open loop: the index of the next instant of the run's one send schedule that no
    /// slot has taken yet.
    pub(super) next_send: AtomicU64,
    /// Connections opened (picks the next of `opts.addrs`).
    pub(super) opened: AtomicU64,
    pub(super) start: Instant,
    pub(super) deadline: Option<Instant>,
    /// Requests due before this instant are the warm-up ([`LoadGenOptions::warmup`]):
    /// sent, left out of every figure.
    pub(super) measured_from: Instant,
    pub(super) progress: Arc<Progress>,
    /// Tallies shared by slots (a few per worker thread): HDR histograms are large, one
    /// set per connection slot would cost megabytes each.
    pub(super) shards: Vec<std::sync::Mutex<Tally>>,
    /// Until a request succeeds: the kind of the failures so far, `Err` once they
    /// differ.
    failing: std::sync::Mutex<Option<Result<&'static str, ()>>>,
    /// Set when the run stopped early because every attempt failed alike.
    pub(super) gave_up: AtomicBool,
}

impl Shared {
    /// Notes a failure; stops the run when every attempt so far failed with the same
    /// kind, and more than `connections + FAIL_FAST_AFTER` of them.
    pub(super) fn failed(&self, kind: &'static str) {
        if self.progress.completed.load(Ordering::Relaxed) > 0 {
            return;
        }
        let mut f = crate::sync::lock(&self.failing);
        *f = match *f {
            None => Some(Ok(kind)),
            Some(Ok(k)) if k == kind => Some(Ok(k)),
            _ => Some(Err(())),
        };
        let alike = matches!(*f, Some(Ok(_)));
        drop(f);
        let failed = self.progress.failed.load(Ordering::Relaxed);
        if alike && failed >= self.opts.connections.max(1) as u64 + FAIL_FAST_AFTER {
            self.gave_up.store(true, Ordering::Relaxed);
            self.progress.stop();
        }
    }
}

impl Shared {
    /// Takes the right to start one more request.
    pub(super) fn ticket(&self) -> bool {
        if self.progress.stopped() || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        match self.opts.requests {
            Some(n) => self.issued.fetch_add(1, Ordering::Relaxed) < n,
            None => {
                self.issued.fetch_add(1, Ordering::Relaxed);
                true
            }
        }
    }
}

impl Shared {
    /// What the slots share for a run starting at `start` whose measured window begins
    /// at `measured_from`: the requests, the schedule's state and the tallies.
    pub(super) fn new(
        target: Target,
        config: Arc<ClientConfig>,
        resolved: Vec<SocketAddr>,
        opts: &LoadGenOptions,
        (start, measured_from): (Instant, Instant),
        progress: &Arc<Progress>,
    ) -> Result<Shared, ConnectError> {
        let uri: http::Uri = format!("https://{}{}", target.authority, target.path)
            .parse()
            .map_err(|e| ConnectError::Http {
                reason: format!("cannot build the request URI: {e}"),
            })?;
        let body_size = body_len(opts);
        let upload = Bytes::from(vec![b'x'; body_size]);
        Ok(Shared {
            h3_request: crate::client::quic::H3Request {
                uri: uri.clone(),
                body: upload.clone(),
            },
            request_keep: http_request(&target.authority, &target.path, false, body_size),
            request_close: http_request(&target.authority, &target.path, true, body_size),
            upload,
            uri,
            // QUIC: the first address this namespace routes (behind --link, IPv4 only).
            preferred: AtomicUsize::new(if opts.http3 {
                crate::client::quic::routable(&resolved)
            } else {
                0
            }),
            resolved,
            config,
            deadline: opts.duration.map(|d| start + d),
            measured_from,
            opts: opts.clone(),
            target,
            issued: AtomicU64::new(0),
            next_send: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            start,
            progress: Arc::clone(progress),
            shards: (0..(opts.threads.max(1) * 2).min(opts.connections.max(1)))
                .map(|_| std::sync::Mutex::new(Tally::new()))
                .collect(),
            failing: std::sync::Mutex::new(None),
            gave_up: AtomicBool::new(false),
        })
    }
}
