//! Bytes allocated per operation: a counting wrapper around the binary's global allocator.
//!
//! The library never chooses an allocator. The binary wraps its own in [`Counting`]:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: tlsperf::crypto::alloc::Counting<mimalloc::MiMalloc> =
//!     tlsperf::crypto::alloc::Counting::new(mimalloc::MiMalloc);
//! ```
//!
//! Counting is off until a measurement turns it on ([`Counter::start`]), so the server and
//! the load generator pay one relaxed load of a shared flag per allocation, no atomic
//! write. While it is on, every thread's allocations count (the crypto benchmarks run on
//! one thread).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);
static BYTES: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);

/// A global allocator that counts bytes and calls (allocations and growing reallocations)
/// while counting is on, then defers to `A`.
#[derive(Debug)]
pub struct Counting<A>(A);

impl<A> Counting<A> {
    /// Wraps `inner`.
    pub const fn new(inner: A) -> Self {
        Counting(inner)
    }
}

#[inline]
fn record(bytes: usize) {
    if ENABLED.load(Ordering::Relaxed) {
        BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the wrapped allocator; the counters only
// observe sizes.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A reallocation counts the bytes it adds (a shrink counts as a call of 0 bytes).
        record(new_size.saturating_sub(layout.size()));
        // SAFETY: same contract as our caller's.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// What was allocated while a [`Counter`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allocated {
    /// Bytes requested.
    pub bytes: u64,
    /// Allocation calls.
    pub calls: u64,
}

/// One counting window. Only one should be open at a time (the counters are global).
#[derive(Debug)]
pub struct Counter {
    bytes0: u64,
    calls0: u64,
}

impl Counter {
    /// Turns counting on and remembers where the counters stand. Returns `None` when the
    /// running binary does not use [`Counting`] as its global allocator.
    pub fn start() -> Option<Counter> {
        if !installed() {
            return None;
        }
        ENABLED.store(true, Ordering::SeqCst);
        Some(Counter {
            bytes0: BYTES.load(Ordering::SeqCst),
            calls0: CALLS.load(Ordering::SeqCst),
        })
    }

    /// Turns counting off and returns what was allocated since [`Counter::start`].
    pub fn stop(self) -> Allocated {
        ENABLED.store(false, Ordering::SeqCst);
        Allocated {
            bytes: BYTES.load(Ordering::SeqCst) - self.bytes0,
            calls: CALLS.load(Ordering::SeqCst) - self.calls0,
        }
    }
}

/// True when the global allocator is a [`Counting`] one: a probe allocation is made with
/// counting on and the counter must move.
pub fn installed() -> bool {
    let was = ENABLED.swap(true, Ordering::SeqCst);
    let before = CALLS.load(Ordering::SeqCst);
    let probe = std::hint::black_box(Box::new(std::hint::black_box(0u64)));
    drop(probe);
    let moved = CALLS.load(Ordering::SeqCst) != before;
    ENABLED.store(was, Ordering::SeqCst);
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_installed_in_unit_tests() {
        // The test harness uses the system allocator, not Counting.
        assert!(!installed());
        assert!(Counter::start().is_none());
    }
}
