//! A run's live counters, for a progress display, and its stop switch (Ctrl-C):
//! [`Progress`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Live counters, for a progress display, and the stop switch.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests answered.
    pub completed: AtomicU64,
    /// Requests failed.
    pub failed: AtomicU64,
    stop: AtomicBool,
    /// When [`Progress::stop`] was first called.
    stopped_at: std::sync::OnceLock<Instant>,
    notify: tokio::sync::Notify,
}

impl Progress {
    /// Asks the run to stop at once: no new requests start, slots waiting for their send
    /// instant stop waiting, and requests in flight are abandoned (neither completed nor
    /// failed); the result covers what finished before.
    pub fn stop(&self) {
        self.stopped_at.get_or_init(Instant::now);
        self.stop.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// True once [`Progress::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// When [`Progress::stop`] was first called.
    pub fn stopped_at(&self) -> Option<Instant> {
        self.stopped_at.get().copied()
    }

    /// Resolves once [`Progress::stop`] was called (at once if it was already).
    pub(super) async fn stopping(&self) {
        let notified = self.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.stopped() {
            return;
        }
        notified.await;
    }
}
