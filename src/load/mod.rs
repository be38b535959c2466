//! The load generator behind `tlsperf load`: C connection slots, each sending one request
//! at a time — as fast as answers come (closed loop) or at a fixed rate (`--rate`, open
//! loop, with latency measured both from the actual send and from when the request
//! should have been sent, as wrk2 does) — opening a new connection per request, every K
//! requests or only when needed. Every connection's handshake is timed phase by phase and
//! classified (full or resumed); every failure is counted by kind and never retried.
//! Bounded by a request count and/or a duration, and by a per-request timeout; stops
//! early, keeping what was measured, when [`Progress::stop`] is called (Ctrl-C).
//!
//! The engine never prints: it returns a [`LoadResult`] and updates a [`Progress`].

mod assemble;
mod options;
mod pace;
mod progress;
mod request;
pub mod result;
mod sample;
mod schedule;
pub mod share;
mod shared;
mod slot;
mod tally;
pub mod usage;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use crate::client::conn;
use crate::client::target::Target;
use crate::client::{ConnectError, Phase};

use assemble::{RunFigures, load_result};
pub use options::{ConfigFactory, LoadGenOptions, MAX_RATE};
pub use pace::request_short_slice;
pub use progress::Progress;
use result::ConnSample;
pub use result::LoadResult;
use sample::{ServerSampler, figures_at_window, generator_usage, server_usage};
use schedule::{scheduled_end, window};
use shared::Shared;
use slot::slot_loop;
pub use tally::INTERVAL;
use tally::{Tally, merge_tally};

/// A run that could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Neither a count nor a duration.
    #[error("give a request count (-n) or a duration (-d): a load run must be bounded")]
    Unbounded,
    /// The target does not resolve.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The server process cannot be sampled.
    #[error(transparent)]
    Proc(#[from] usage::ProcError),
}

/// What a finished run says about itself, beyond its figures.
impl LoadResult {
    /// A warning when the load generator was busy enough to be the bottleneck (runs of
    /// half a second or more: shorter ones are all start-up), naming the cgroup quota when
    /// it is what limits the generator.
    pub fn saturation_warning(&self) -> Option<String> {
        (self.generator.saturated && self.duration_s >= 0.5).then(|| {
            let g = &self.generator;
            let of = match (g.cpu_limit, g.cpus_allowed) {
                (Some(l), _) if l <= g.cpus() => format!("the {l:.2} CPUs its cgroup quota allows"),
                (_, Some(n)) if (n as f64) < g.threads as f64 => {
                    format!("the {n} CPUs its affinity allows")
                }
                _ => format!("its {} threads", g.threads),
            };
            format!(
                "the load generator used {:.0}% of {of}: it may be the bottleneck (add \
                 --threads or machines)",
                self.generator.utilization * 100.0,
            )
        })
    }

    /// The most frequent failure kind, its count and its first message (`connect-refused
    /// ×10, e.g. cannot connect to …`); `None` when nothing failed.
    /// Without measured failures, the warm-up's (`… in the warm-up`): a run that gave up
    /// there failed on those alone.
    pub fn most_frequent_error(&self) -> Option<String> {
        let (errors, when) = if self.errors.is_empty() {
            (&self.warmup_errors, " in the warm-up")
        } else {
            (&self.errors, "")
        };
        errors.iter().max_by_key(|(_, n)| **n).map(|(kind, n)| {
            format!(
                "{kind} ×{n}{when}, e.g. {}",
                self.error_examples.get(kind).map_or("", String::as_str)
            )
        })
    }

    /// Why the run is a failure when every request failed: the most frequent kind with
    /// its first message, and whether the run gave up.
    pub fn all_failed(&self) -> Option<String> {
        if self.requests.completed > 0 || self.requests.failed == 0 {
            return None;
        }
        let why = self
            .most_frequent_error()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        Some(format!(
            "all {} requests to {} failed{why}{}",
            self.requests.failed,
            self.target,
            if self.gave_up {
                " (stopped there: every attempt failed the same way, so more would only load \
                 the server)"
            } else {
                ""
            }
        ))
    }
}

impl crate::error::Classify for LoadError {
    fn class(&self) -> crate::error::ErrorClass {
        match self {
            LoadError::Unbounded | LoadError::Proc(_) => crate::error::ErrorClass::Input,
            LoadError::Connect(_) => crate::error::ErrorClass::Runtime,
        }
    }
}

/// Runs the load. The caller owns the runtime (threads) and the progress display.
pub async fn run(
    target: Target,
    config: Arc<ClientConfig>,
    opts: LoadGenOptions,
    progress: Arc<Progress>,
) -> Result<LoadResult, LoadError> {
    let (resolved, dns, spin_cost) = before_start(&target, &opts).await?;
    if let Some(t) = opts.start_at {
        wait_for_start(t, &progress).await;
    }
    // Stopped while waiting for --start-at: nothing runs, and the generator's figures
    // (CPU, utilization) cover no time at all rather than its wind-down over 1 µs.
    let stopped_before_start = progress.stopped();
    // The server's process tree: its first sample.
    let server_tree = match opts.server_pid {
        Some(pid) => Some(Arc::new(std::sync::Mutex::new(usage::TreeCpu::start(pid)?))),
        None => None,
    };
    let started_wall = time::OffsetDateTime::now_utc();
    let cpu0 = usage::self_cpu();
    let wait0 = usage::self_runqueue_wait();
    let spins0 = pace::spin_looks();
    // The schedule is anchored at --start-at itself, whenever this process woke: every
    // process sharing a rate computes the same send instants, so their sends interleave
    // exactly (a process that woke late sends what fell due at once, and its pacing
    // lateness says by how much).
    let start = opts
        .start_at
        .filter(|_| !stopped_before_start)
        .unwrap_or_else(Instant::now);
    // The measured window begins after the warm-up (open loop with -d only).
    let warmup = match (opts.rate, opts.duration) {
        (Some(_), Some(d)) => opts.warmup.min(d),
        _ => Duration::ZERO,
    };
    let measured_from = start + warmup;
    let target_name = target.to_string();
    let shared = Arc::new(Shared::new(
        target,
        config,
        resolved,
        &opts,
        (start, measured_from),
        &progress,
    )?);
    let sampler = ServerSampler::start(server_tree.as_ref());
    let at_window = (!warmup.is_zero())
        .then(|| figures_at_window(measured_from, server_tree.clone(), opts.server_pid));
    let (connections, gave_up, count_done) = run_slots(&shared, &opts, &progress).await;
    let unsent = shared.unsent();
    let tallies: Vec<Tally> = Arc::try_unwrap(shared)
        .map(|s| s.shards)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.into_inner().ok())
        .collect();
    let rss_max = sampler.stop().await;
    // The generator's figures from the measured window's start, when it began.
    let (cpu0, wait0, spins0) = match at_window {
        // The window began (its figures are being taken, or were): wait for them.
        Some(h) if Instant::now() >= measured_from => h.await.unwrap_or((cpu0, wait0, spins0)),
        Some(h) => {
            h.abort();
            (cpu0, wait0, spins0)
        }
        None => (cpu0, wait0, spins0),
    };
    let (pacing_spin, cpu, runqueue_wait) =
        generator_usage((cpu0, wait0, spins0), spin_cost, stopped_before_start);
    let last_done = tallies.iter().filter_map(|t| t.last_done).max();
    let wall = window(
        measured_from,
        last_done,
        scheduled_end(start, &opts, count_done),
        progress.stopped_at(),
    )
    .max(Duration::from_micros(1));
    let mut total = Tally::new();
    for t in &tallies {
        merge_tally(&mut total, t);
    }
    let _ = total.phases.entry(Phase::Dns).or_default().record(dns);
    let server = match (opts.server_pid, server_tree) {
        (Some(pid), Some(tree)) => Some(server_usage(pid, &tree, rss_max)),
        _ => None,
    };
    let figures = RunFigures {
        target: target_name,
        started: started_wall + warmup,
        wall,
        interrupted: progress.stopped() && !gave_up,
        gave_up,
        unsent,
        connections,
        cpu,
        pacing_spin,
        runqueue_wait,
        server,
    };
    Ok(load_result(total, figures, &opts))
}

/// Before the run: the checks, the target's addresses and how long resolving them took,
/// and (open loop) one spin look's cost.
async fn before_start(
    target: &Target,
    opts: &LoadGenOptions,
) -> Result<(Vec<SocketAddr>, Duration, Option<Duration>), LoadError> {
    if opts.requests.is_none() && opts.duration.is_none() {
        return Err(LoadError::Unbounded);
    }
    if let Some(pid) = opts.server_pid {
        // A pid that cannot be sampled is refused before any wait.
        usage::TreeCpu::start(pid)?;
    }
    let t_dns = Instant::now();
    let resolved = conn::resolve(&target.host, target.port).await?;
    let dns = t_dns.elapsed();
    // One spin look's cost, measured once per process (before any wait or clock).
    let spin_cost = match opts.rate {
        Some(_) => tokio::task::spawn_blocking(pace::spin_look_cost)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    Ok((resolved, dns, spin_cost))
}

/// Runs every connection slot to its end: the slots' samples, whether the run gave up
/// (every attempt failed alike), whether its `-n` count was reached.
async fn run_slots(
    shared: &Arc<Shared>,
    opts: &LoadGenOptions,
    progress: &Progress,
) -> (Vec<ConnSample>, bool, bool) {
    let slots: Vec<_> = (0..opts.connections.max(1))
        .map(|slot| tokio::spawn(slot_loop(slot, Arc::clone(shared))))
        .collect();
    let mut connections = Vec::with_capacity(slots.len());
    for s in slots {
        if let Ok(c) = s.await {
            connections.push(c);
        }
    }
    let gave_up = shared.gave_up.load(Ordering::Relaxed);
    let attempted = shared.progress.completed.load(Ordering::Relaxed)
        + shared.progress.failed.load(Ordering::Relaxed);
    let count_done = opts.requests.is_some_and(|n| attempted >= n);
    // An open-loop `-d` run whose slots found no send instant left before the deadline
    // (a --rate-share whose next send falls after it) still lasts until the deadline:
    // the duration it reports is the time it really took, and the n processes of one
    // --rate-share run cover one window.
    if let (Some(_), Some(deadline)) = (opts.rate, shared.deadline)
        && !gave_up
        && !count_done
    {
        tokio::select! {
            () = tokio::time::sleep_until(deadline.into()) => {}
            () = progress.stopping() => {}
        }
    }
    (connections, gave_up, count_done)
}

/// Waits for `--start-at` (or a stop), on a timerfd, not tokio's millisecond timer:
/// processes started together wake within microseconds of the instant, not up to a tick
/// after it.
async fn wait_for_start(at: Instant, progress: &Progress) {
    let mut pacer = pace::Pacer::new();
    tokio::select! {
        () = pacer.wait_until(at) => {}
        () = progress.stopping() => {}
    }
}
