//! The instants at which a connection's bytes crossed the kernel boundary, taken at the
//! system call that moved them: a *send* is stamped right before the `write`/`send`
//! system call that handed the bytes to the kernel (so a preemption of our thread after
//! the call returns — on loopback the peer is often woken onto our CPU by that very
//! write — cannot move the stamp past the peer's reaction); a *receive* is stamped right
//! after the `read`/`recv` system call that returned them (never after an `.await` or a
//! task switch). Every phase boundary of [`super::timeline`] is one of these stamps.
//!
//! The stamps live behind an `Arc` of atomics so that code which no longer owns the
//! stream (hyper's HTTP/2 connection task owns it after the handshake) can still read
//! them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where one connection records its last send and last receive (see the module docs).
#[derive(Debug, Clone)]
pub struct WireStamps(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// The origin of the offsets below.
    base: Instant,
    /// Nanoseconds after `base` + 1 of the last send (0: none yet).
    last_send: AtomicU64,
    /// Nanoseconds after `base` + 1 of the last receive (0: none yet).
    last_recv: AtomicU64,
    /// Sends so far (system calls that accepted at least one byte).
    sends: AtomicU64,
}

impl Default for WireStamps {
    fn default() -> Self {
        Self::new()
    }
}

impl WireStamps {
    /// No crossing yet; offsets count from now.
    pub fn new() -> Self {
        WireStamps(Arc::new(Inner {
            base: Instant::now(),
            last_send: AtomicU64::new(0),
            last_recv: AtomicU64::new(0),
            sends: AtomicU64::new(0),
        }))
    }

    fn encode(&self, at: Instant) -> u64 {
        let ns = at.saturating_duration_since(self.0.base).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1) + 1
    }

    fn decode(&self, v: u64) -> Option<Instant> {
        (v != 0).then(|| self.0.base + Duration::from_nanos(v - 1))
    }

    /// Records a send system call that accepted bytes; `at` was read right before it.
    pub fn sent(&self, at: Instant) {
        self.0.last_send.store(self.encode(at), Ordering::Release);
        self.0.sends.fetch_add(1, Ordering::AcqRel);
    }

    /// Records a receive system call that returned (data or the end of the stream);
    /// `at` was read right after it.
    pub fn received(&self, at: Instant) {
        self.0.last_recv.store(self.encode(at), Ordering::Release);
    }

    /// The instant right before the last send system call.
    pub fn last_send(&self) -> Option<Instant> {
        self.decode(self.0.last_send.load(Ordering::Acquire))
    }

    /// The instant right after the last receive system call.
    pub fn last_receive(&self) -> Option<Instant> {
        self.decode(self.0.last_recv.load(Ordering::Acquire))
    }

    /// Send system calls so far.
    pub fn sends(&self) -> u64 {
        self.0.sends.load(Ordering::Acquire)
    }
}

/// A byte stream that records its [`WireStamps`]. Streams that do not (in-memory pipes in
/// tests) return `None`, and their users fall back to reading the clock themselves.
pub trait Stamped {
    /// This stream's stamps.
    fn wire_stamps(&self) -> Option<&WireStamps>;
}

impl Stamped for tokio::io::DuplexStream {
    fn wire_stamps(&self) -> Option<&WireStamps> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_last_crossing_each_way() {
        let w = WireStamps::new();
        assert_eq!(
            (w.last_send(), w.last_receive(), w.sends()),
            (None, None, 0)
        );
        let a = Instant::now();
        w.sent(a);
        let b = a + Duration::from_micros(7);
        w.sent(b);
        let c = b + Duration::from_micros(3);
        w.received(c);
        assert_eq!(w.last_send(), Some(b));
        assert_eq!(w.last_receive(), Some(c));
        assert_eq!(w.sends(), 2);
        // A clone shares the stamps (hyper's connection task holds the stream).
        let shared = w.clone();
        w.received(c + Duration::from_nanos(1));
        assert_eq!(shared.last_receive(), Some(c + Duration::from_nanos(1)));
    }
}
