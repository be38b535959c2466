//! The one way a command gets its tokio runtime, and runs its work on it with SIGINT and
//! SIGTERM handled the one way [`super::signals`] defines.

use std::future::Future;

use tokio::runtime::{Builder, Runtime};

use super::CliError;

/// How many threads a command's runtime has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// A current-thread runtime: no work-stealing scheduler to pay for, no cross-thread
    /// wake-ups (as wrk runs each thread's own event loop).
    One,
    /// A multi-thread runtime with this many workers (`None`: one per CPU). `Some(1)` is
    /// [`Threads::One`].
    Many(Option<usize>),
}

impl Threads {
    /// `None`: one per CPU; `Some(1)`: one thread.
    pub fn from_flag(threads: Option<usize>) -> Threads {
        match threads {
            Some(1) => Threads::One,
            n => Threads::Many(n),
        }
    }
}

/// A runtime with every driver (I/O, time) on; `on_thread_start` runs on each worker
/// thread as it starts (with [`Threads::One`], on this thread, now).
pub fn runtime(threads: Threads, on_thread_start: Option<fn()>) -> Result<Runtime, CliError> {
    let mut b = match threads {
        Threads::One => {
            if let Some(f) = on_thread_start {
                f();
            }
            Builder::new_current_thread()
        }
        Threads::Many(n) => {
            let mut b = Builder::new_multi_thread();
            if let Some(n) = n {
                b.worker_threads(n);
            }
            if let Some(f) = on_thread_start {
                b.on_thread_start(f);
            }
            b
        }
    };
    b.enable_all().build().map_err(|e| {
        CliError::runtime(anyhow::Error::new(e).context("cannot start the async runtime"))
    })
}

/// An `on_thread_start` hook for open-loop load: the threads that send ask for short
/// scheduler slices, so that their timers' wake-ups are not queued behind other
/// processes' slices (where the kernel refuses, nothing changes).
pub fn short_slices() {
    crate::load::request_short_slice();
}

/// Registers SIGINT and SIGTERM now, handled on `rt`'s workers (for work that runs
/// after, on this thread or on `rt`): the first calls `stop` (the run winds down and
/// keeps what it measured), a second exits at once (130) after `cleanup` (removing what
/// the run made: `exit` runs no destructors).
pub fn interruptible(
    rt: &Runtime,
    stop: impl FnOnce() + Send + 'static,
    cleanup: impl FnOnce() + Send + 'static,
) {
    let _inside = rt.enter();
    let first = super::signals::first_then_exit_after(cleanup);
    rt.spawn(async move {
        first.await;
        stop();
    });
}

/// Runs `work` on `rt` with SIGINT and SIGTERM registered before it starts, as
/// [`interruptible`] says.
pub fn block_on_interruptible<T>(
    rt: &Runtime,
    stop: impl FnOnce() + Send + 'static,
    cleanup: impl FnOnce() + Send + 'static,
    work: impl Future<Output = T>,
) -> T {
    interruptible(rt, stop, cleanup);
    rt.block_on(work)
}
