//! A mutex whose holder panicked is still usable: what it guards (counters, logs,
//! histograms) stays consistent between the holder's statements, and a run should keep
//! what it measured rather than stop on a poisoned lock.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking the guard even when a holder panicked.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
