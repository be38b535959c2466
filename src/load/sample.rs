//! CPU and starvation while a run lasts: the generator's own CPU, run-queue wait and
//! pacer spin over the measured window ([`generator_usage`]), and the server's process
//! tree, sampled on a thread of its own ([`ServerSampler`]) and read at the end
//! ([`server_usage`]: CPU, memory, run-queue wait); after a warm-up, both taken again
//! where the measured window begins ([`figures_at_window`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::pace;
use super::result::ServerUsage;
use super::usage;

/// The generator's own figures since the measured window's start (`mark`: its CPU,
/// run-queue wait and pacer looks then): the pacer's spin (s), CPU, run-queue wait (s);
/// nothing when stopped before the start.
pub(super) fn generator_usage(
    mark: (Duration, Option<Duration>, u64),
    spin_cost: Option<Duration>,
    stopped_before_start: bool,
) -> (Option<f64>, Duration, Option<f64>) {
    let (cpu0, wait0, spins0) = mark;
    // The pacer's spin, estimated (open loop only: `spin_cost` is measured only for
    // one): its looks at the clock × one look's cost.
    let pacing_spin = spin_cost
        .filter(|_| !stopped_before_start)
        .map(|c| c.as_secs_f64() * pace::spin_looks().saturating_sub(spins0) as f64);
    let cpu = if stopped_before_start {
        Duration::ZERO
    } else {
        usage::self_cpu().saturating_sub(cpu0)
    };
    let runqueue_wait = match (stopped_before_start, wait0, usage::self_runqueue_wait()) {
        (false, Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64()),
        _ => None,
    };
    (pacing_spin, cpu, runqueue_wait)
}

/// The server's process tree, sampled every 100 ms while the run lasts (CPU of processes
/// that exit, memory), looking for new processes once a second (a walk over /proc reads
/// every process on the machine), on a thread of its own: a walk takes a millisecond or
/// more, which would delay the I/O of a runtime worker's connections.
pub(super) struct ServerSampler {
    /// The largest resident memory sampled, KiB.
    rss_max: Arc<AtomicU64>,
    /// Dropped to stop the thread.
    stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerSampler {
    /// Starts sampling `tree` (nothing to sample without one).
    pub(super) fn start(tree: Option<&Arc<std::sync::Mutex<usage::TreeCpu>>>) -> ServerSampler {
        let rss_max = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = tree.and_then(|tree| {
            let (tree, rss_max) = (Arc::clone(tree), Arc::clone(&rss_max));
            std::thread::Builder::new()
                .name("server-sampler".into())
                .spawn(move || {
                    let mut n = 0u32;
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                        stopped.recv_timeout(Duration::from_millis(100))
                    {
                        n += 1;
                        let kib = lock(&tree).sample(n.is_multiple_of(10));
                        rss_max.fetch_max(kib, Ordering::Relaxed);
                    }
                })
                .ok()
        });
        ServerSampler {
            rss_max,
            stop,
            thread,
        }
    }

    /// Stops the thread (within one sample) and gives the largest resident memory seen,
    /// KiB.
    pub(super) async fn stop(self) -> u64 {
        drop(self.stop);
        if let Some(t) = self.thread {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        self.rss_max.load(Ordering::Relaxed)
    }
}

/// Where the measured window begins after a warm-up: the generator's CPU, run-queue wait
/// and pacer looks, and the server tree's first sample, taken again (the walk on a
/// blocking thread, off the workers that carry connections).
pub(super) fn figures_at_window(
    measured_from: Instant,
    tree: Option<Arc<std::sync::Mutex<usage::TreeCpu>>>,
    pid: Option<u32>,
) -> tokio::task::JoinHandle<(Duration, Option<Duration>, u64)> {
    tokio::spawn(async move {
        tokio::time::sleep_until(measured_from.into()).await;
        if let (Some(tree), Some(pid)) = (tree, pid) {
            let fresh = tokio::task::spawn_blocking(move || usage::TreeCpu::start(pid)).await;
            if let Ok(Ok(t)) = fresh {
                *lock(&tree) = t;
            }
        }
        (
            usage::self_cpu(),
            usage::self_runqueue_wait(),
            pace::spin_looks(),
        )
    })
}

/// The server's figures at the run's end: its tree's CPU and memory (`rss_max`: the
/// largest the sampler saw, KiB).
pub(super) fn server_usage(
    pid: u32,
    tree: &std::sync::Mutex<usage::TreeCpu>,
    rss_max: u64,
) -> ServerUsage {
    let mut tree = lock(tree);
    let rss_end = tree.sample(true);
    ServerUsage {
        pid,
        processes: tree.processes(),
        cpu_seconds: tree.cpu().as_secs_f64(),
        // Per request and per handshake: finish_rates.
        cpu_us_per_request: None,
        cpu_us_per_handshake: None,
        rss_max_kib: rss_max.max(rss_end),
        rss_end_kib: rss_end,
        runqueue_wait_s: tree.runqueue_wait().map(|d| d.as_secs_f64()),
    }
}

use crate::sync::lock;
