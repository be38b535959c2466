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

mod options;
mod pace;
mod progress;
pub mod result;
mod schedule;
pub mod share;
mod shared;
mod tally;
pub mod usage;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;

use crate::client::conn::{self, EarlyData, Stamps};
use crate::client::http1::Http1;
use crate::client::target::Target;
use crate::client::wire::WireStamps;
use crate::client::{ConnectError, Phase, TlsStream};
use crate::stats::LatencyHistogram;
pub use result::LoadResult;
use result::{ConnSample, Dist, GeneratorCpu, Goodput, Handshakes, Requests, ServerUsage};

use options::body_len;
pub use options::{ConfigFactory, LoadGenOptions, MAX_RATE};
pub use pace::request_short_slice;
pub use progress::Progress;
use schedule::{scheduled_end, window};
use shared::Shared;
pub use tally::INTERVAL;
use tally::{Obs, Tally, merge_tally};

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
    pub fn most_frequent_error(&self) -> Option<String> {
        self.errors
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(kind, n)| {
                format!(
                    "{kind} ×{n}, e.g. {}",
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

enum Open {
    H1(Box<Http1<TlsStream>>),
    /// hyper's connection task owns the stream: its stamps are read through the handle.
    H2(
        hyper::client::conn::http2::SendRequest<Full<Bytes>>,
        WireStamps,
    ),
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

/// The generator's own figures since the measured window's start (`mark`: its CPU,
/// run-queue wait and pacer looks then): the pacer's spin (s), CPU, run-queue wait (s);
/// nothing when stopped before the start.
fn generator_usage(
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

/// What a run measured besides its tallies, on its way into a [`LoadResult`].
struct RunFigures {
    /// The target, as the result names it.
    target: String,
    /// When the measured window began (wall clock).
    started: time::OffsetDateTime,
    /// The measured window's length.
    wall: Duration,
    interrupted: bool,
    gave_up: bool,
    /// Open loop: sends the schedule had due that never went out.
    unsent: u64,
    connections: Vec<ConnSample>,
    /// The generator's CPU time over the window.
    cpu: Duration,
    /// The pacer's estimated spin, seconds.
    pacing_spin: Option<f64>,
    /// The generator threads' run-queue wait, seconds.
    runqueue_wait: Option<f64>,
    server: Option<ServerUsage>,
}

/// The result of a run: its tallies merged into `total`, and its other figures.
fn load_result(total: Tally, run: RunFigures, opts: &LoadGenOptions) -> LoadResult {
    let handshakes: u64 = total.kinds.values().sum();
    let counts = opts
        .verdicts
        .as_ref()
        .map(|v| v.counts())
        .unwrap_or_default();
    let dist = |h: &LatencyHistogram| (!h.is_empty()).then(|| Dist::of(h.clone()));
    let mut result = LoadResult {
        link_counters: None,
        schema: <LoadResult as crate::doc::Document>::SCHEMA.into(),
        target: run.target,
        started: run
            .started
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        duration_s: run.wall.as_secs_f64(),
        machines: 1,
        interrupted: run.interrupted,
        gave_up: run.gave_up,
        options: opts.echo.clone(),
        requests: Requests {
            attempted: total.completed + total.failed,
            completed: total.completed,
            failed: total.failed,
            per_second: 0.0,
            unsent: run.unsent,
        },
        handshakes: Handshakes {
            total: handshakes,
            kinds: total
                .kinds
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            resumption_rate: 0.0,
            per_second: 0.0,
            chains_verified: counts.verified,
            chains_from_cache: counts.cached,
            early_data: total
                .early
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        },
        latency: Dist::of(total.latency.clone()),
        latency_corrected: opts.rate.and_then(|_| dist(&total.corrected)),
        send_lateness: opts.rate.and_then(|_| dist(&total.lateness)),
        pacing_lateness: opts.rate.and_then(|_| dist(&total.pacing)),
        client_wakeup: dist(&total.wakeup),
        handshake_full: dist(&total.hs_full),
        handshake_resumed: dist(&total.hs_resumed),
        phases: total
            .phases
            .iter()
            .map(|(p, h)| (p.name().to_string(), Dist::of(h.clone())))
            .collect(),
        status: total
            .status
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        errors: total
            .errors
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        error_examples: total
            .examples
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        body_bytes: total.body_bytes,
        upload_bytes: total.completed.saturating_mul(body_len(opts) as u64),
        goodput: Goodput::default(),
        interval_ms: INTERVAL.as_millis() as u64,
        interval_requests: total.intervals.clone(),
        connections: run.connections,
        generator: GeneratorCpu {
            threads: opts.threads,
            cpu_seconds: run.cpu.as_secs_f64(),
            utilization: 0.0,
            cpus_allowed: usage::cpus_allowed(None).map(|c| c.len() as u64),
            cpu_limit: usage::cgroup_cpu_limit(),
            cpu_us_per_request: None,
            cpu_us_per_handshake: None,
            saturated: false,
            pacing_spin_s: run.pacing_spin.map(|s| s.min(run.cpu.as_secs_f64())),
            runqueue_wait_s: run.runqueue_wait,
        },
        server: run.server,
        warnings: Vec::new(),
    };
    result.finish_rates();
    result.generator.saturated = result.generator.utilization >= 0.9;
    result
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

/// The server's process tree, sampled every 100 ms while the run lasts (CPU of processes
/// that exit, memory), looking for new processes once a second (a walk over /proc reads
/// every process on the machine), on a thread of its own: a walk takes a millisecond or
/// more, which would delay the I/O of a runtime worker's connections.
struct ServerSampler {
    /// The largest resident memory sampled, KiB.
    rss_max: Arc<AtomicU64>,
    /// Dropped to stop the thread.
    stop: std::sync::mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerSampler {
    /// Starts sampling `tree` (nothing to sample without one).
    fn start(tree: Option<&Arc<std::sync::Mutex<usage::TreeCpu>>>) -> ServerSampler {
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
    async fn stop(self) -> u64 {
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
fn figures_at_window(
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
fn server_usage(pid: u32, tree: &std::sync::Mutex<usage::TreeCpu>, rss_max: u64) -> ServerUsage {
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

/// Locks, whether or not another holder panicked (the data stay usable).
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One connection slot: requests one after the other until the run ends (open loop: each
/// at the next send instant of the schedule), on a connection kept as the options and
/// the server say; the slot's count and mean latency.
async fn slot_loop(slot: usize, shared: Arc<Shared>) -> ConnSample {
    let shard = &shared.shards[slot % shared.shards.len()];
    // Its own session cache, as a separate client would have.
    let mut own = (*shared.config).clone();
    own.resumption = crate::client::config::resumption(shared.opts.resume, 4);
    let config = Arc::new(own);
    let mut obs = Obs {
        phases: Vec::with_capacity(12),
        ..Obs::default()
    };
    let (mut completed, mut latency_sum) = (0u64, Duration::ZERO);
    let mut open: Option<Open> = None;
    let mut on_conn = 0u64;
    // Open loop: one schedule for every slot, an instant every 1 ÷ rate. A slot free to
    // send takes the next instant no slot has taken, so a slow answer delays only the
    // request its slot waits for, never the instants after it: free slots send those.
    let rate = shared.opts.rate.map(|r| r.max(1e-9));
    // Open loop: the slot's own timer, precise to microseconds.
    let mut pacer = rate.map(|_| pace::Pacer::new());
    // When the slot was free to wait for its next send instant.
    let mut ready = shared.start;
    while shared.ticket() {
        let planned = match rate {
            Some(r) => match shared.take_send_instant(r) {
                Some(t) => Some(t),
                None => break,
            },
            None => None,
        };
        if let Some(t) = planned {
            ready = Instant::now();
            if let Some(p) = pacer.as_mut() {
                tokio::select! {
                    () = p.wait_until(t) => {}
                    () = shared.progress.stopping() => break,
                }
            }
        }
        // The actual send instant: nothing but the choice of the address (and, in `lab`,
        // a fresh client configuration) lies between it and the connect or write call.
        let sent = Instant::now();
        let last_on_conn = shared
            .opts
            .requests_per_conn
            .is_some_and(|k| on_conn + 1 >= k);
        obs.clear();
        let step = StepCell::default();
        let outcome = tokio::select! {
            o = tokio::time::timeout(
                shared.opts.timeout,
                request(&shared, &config, &mut open, last_on_conn, &mut obs, &step),
            ) => o.unwrap_or_else(|_| {
                Err(ConnectError::Timeout {
                    during: step.get().during(),
                    after: shared.opts.timeout,
                })
            }),
            // Stopped: the request in flight is abandoned, not counted.
            () = shared.progress.stopping() => {
                open = None;
                break;
            }
        };
        let times = Times {
            planned,
            ready,
            sent,
            done: Instant::now(),
        };
        // Due within the warm-up: it opened the connection (and its resumption
        // state) for the measured window; it counts in no figure.
        let warming = planned.is_some_and(|p| p < shared.measured_from);
        let next = if warming {
            match outcome {
                Ok(keep) => Ok(after(keep, last_on_conn)),
                Err(e) => Err((e.kind(), None)),
            }
        } else {
            record(&shared, shard, &obs, outcome, &times, last_on_conn)
        };
        let next_on_conn = match next {
            Ok(after) if warming => Some(after),
            Ok(after) => {
                shared.progress.completed.fetch_add(1, Ordering::Relaxed);
                completed += 1;
                latency_sum += times.done - times.sent;
                Some(after)
            }
            Err((kind, after)) => {
                shared.progress.failed.fetch_add(1, Ordering::Relaxed);
                shared.failed(kind);
                after
            }
        };
        on_conn += 1;
        if !matches!(next_on_conn, Some(After::Keep)) {
            finish_connection(&mut open, next_on_conn).await;
            on_conn = 0;
        }
    }
    close(open.take()).await;
    ConnSample {
        requests: completed,
        mean_latency_ms: if completed == 0 {
            0.0
        } else {
            latency_sum.as_secs_f64() * 1e3 / completed as f64
        },
    }
}

/// Ends the slot's connection after a request: closed (close_notify first) when done
/// with it, dropped when the server closes it or its state is unknown (never reused).
async fn finish_connection(open: &mut Option<Open>, next: Option<After>) {
    match next {
        Some(After::Close) => close(open.take()).await,
        Some(After::Keep) => {}
        Some(After::Drop) | None => *open = None,
    }
}

/// The instants of one request.
struct Times {
    /// Open loop: its send instant in the schedule.
    planned: Option<Instant>,
    /// When its slot was free to wait for that instant.
    ready: Instant,
    /// When it was sent.
    sent: Instant,
    /// When its answer (or failure) was complete.
    done: Instant,
}

/// What to do with the connection after a request: drop it when the server closes it,
/// close it after the last request `--requests-per-conn` allows, else keep it.
fn after(keep: bool, last_on_conn: bool) -> After {
    if !keep {
        After::Drop
    } else if last_on_conn {
        After::Close
    } else {
        After::Keep
    }
}

/// Records one measured request in the slot's shard of the tallies, under its lock (no
/// await): what to do with the connection, or `Err` (the failure's kind, and what to do
/// with the connection when its state is known).
fn record(
    shared: &Shared,
    shard: &std::sync::Mutex<Tally>,
    obs: &Obs,
    outcome: Result<bool, ConnectError>,
    t: &Times,
    last_on_conn: bool,
) -> Result<After, (&'static str, Option<After>)> {
    let mut tally = match shard.lock() {
        Ok(t) => t,
        Err(poisoned) => poisoned.into_inner(),
    };
    tally.apply(obs);
    tally.last_done = tally.last_done.max(Some(t.done));
    if let Some(p) = t.planned {
        // `wait_until` never returns before `p`.
        let _ = tally.lateness.record(t.sent.saturating_duration_since(p));
        let _ = tally
            .pacing
            .record(t.sent.saturating_duration_since(p.max(t.ready)));
    }
    match outcome {
        // Answered with a status that is not a success: a failed request on a
        // connection that still works.
        Ok(keep) if obs.status.is_some_and(|s| !shared.opts.ok_status.ok(s)) => {
            let e = ConnectError::Status {
                status: obs.status.unwrap_or_default(),
                ok: shared.opts.ok_status.to_string(),
            };
            tally.error(&e);
            Err((e.kind(), Some(after(keep, last_on_conn))))
        }
        Ok(keep) => {
            tally.completed += 1;
            let _ = tally.latency.record(t.done - t.sent);
            if let Some(p) = t.planned {
                let _ = tally.corrected.record(t.done.saturating_duration_since(p));
            }
            let i = (t
                .done
                .saturating_duration_since(shared.measured_from)
                .as_millis()
                / INTERVAL.as_millis()) as usize;
            if tally.intervals.len() <= i {
                tally.intervals.resize(i + 1, 0);
            }
            tally.intervals[i] += 1;
            Ok(after(keep, last_on_conn))
        }
        Err(e) => {
            tally.error(&e);
            Err((e.kind(), None))
        }
    }
}

/// Where a request is, for a timeout's message.
#[derive(Debug, Clone, Copy)]
#[repr(u8)]
enum Step {
    Connecting,
    Handshaking,
    Sending,
    Waiting,
}

/// A request's current [`Step`], shareable across the await points of a `Send` future.
#[derive(Default)]
struct StepCell(std::sync::atomic::AtomicU8);

impl StepCell {
    fn set(&self, s: Step) {
        self.0.store(s as u8, Ordering::Relaxed);
    }

    fn get(&self) -> Step {
        match self.0.load(Ordering::Relaxed) {
            0 => Step::Connecting,
            1 => Step::Handshaking,
            2 => Step::Sending,
            _ => Step::Waiting,
        }
    }
}

impl Step {
    fn during(self) -> &'static str {
        match self {
            Step::Connecting => "connecting (TCP)",
            Step::Handshaking => "in the TLS handshake (no complete answer from the server)",
            Step::Sending => "writing the request",
            Step::Waiting => "waiting for the HTTP response",
        }
    }
}

/// What happens to a connection after a successful request.
enum After {
    /// Send the next request on it.
    Keep,
    /// We are done with it: close_notify, then close.
    Close,
    /// The server said it closes the connection (`Connection: close`): close the socket
    /// without writing to it (a close_notify would meet a closed socket and a reset).
    Drop,
}

async fn close(open: Option<Open>) {
    if let Some(Open::H1(mut h)) = open {
        h.shutdown().await;
    }
}

/// One request on the slot's connection (opened first when needed). `Ok(keep)`: the
/// server keeps the connection open.
async fn request(
    shared: &Shared,
    config: &Arc<ClientConfig>,
    open: &mut Option<Open>,
    last_on_conn: bool,
    tally: &mut Obs,
    step: &StepCell,
) -> Result<bool, ConnectError> {
    let req = if last_on_conn {
        &shared.request_close
    } else {
        &shared.request_keep
    };
    // Set when the request went out as 0-RTT data and the server accepted it: when the
    // handshake completed.
    let mut sent_early = None;
    // When a connection was opened for this request: the handshake's last crossing,
    // where the request phase starts.
    let mut opened_at = None;
    if open.is_none() {
        // A GET only: an upload is not replay-safe, so it never goes as early data.
        let early = (shared.opts.early_data && !shared.opts.http2 && shared.upload.is_empty())
            .then_some(req.as_slice());
        let (o, early_data, done) = connect(shared, config, tally, early, step).await?;
        match early_data {
            EarlyData::Accepted => {
                tally.early = Some("accepted");
                sent_early = Some(done);
            }
            EarlyData::Rejected => tally.early = Some("rejected"),
            // No session, or the server's ticket allows no early data.
            EarlyData::NotSent if early.is_some() => tally.early = Some("not-sent"),
            EarlyData::NotSent => {}
        }
        opened_at = Some(done);
        *open = Some(o);
    }
    match open.as_mut() {
        Some(Open::H1(h)) => {
            let t = opened_at.unwrap_or_else(Instant::now);
            step.set(Step::Sending);
            let sent = match sent_early {
                Some(done) => done,
                None => h.send(req).await?,
            };
            step.set(Step::Waiting);
            let resp = h.read_response().await?;
            tally.phase(Phase::Request, sent.saturating_duration_since(t));
            tally.phase(
                Phase::FirstByte,
                resp.first_byte.saturating_duration_since(sent),
            );
            tally.phase(
                Phase::Body,
                resp.done.saturating_duration_since(resp.first_byte),
            );
            tally.status = Some(resp.status);
            tally.body_bytes = resp.body_bytes;
            tally.wakeup = resp.wakeup;
            Ok(resp.keep_alive)
        }
        Some(Open::H2(send, wire)) => {
            // A GET, or a POST of the upload (an empty `Full` ends the stream with the
            // headers, as `Empty` does).
            let req = match shared.upload.is_empty() {
                true => http::Request::get(shared.uri.clone()),
                false => http::Request::post(shared.uri.clone())
                    .header(http::header::CONTENT_TYPE, "application/octet-stream"),
            }
            .body(Full::new(shared.upload.clone()))
            .map_err(|e| ConnectError::Http {
                reason: e.to_string(),
            })?;
            let t = opened_at.unwrap_or_else(Instant::now);
            step.set(Step::Waiting);
            let resp = send
                .send_request(req)
                .await
                .map_err(|e| ConnectError::Http {
                    reason: format!("HTTP/2 request failed: {e}"),
                })?;
            // hyper's connection task read the response head: the last receive before
            // it handed the response over (never later than that hand-over).
            let first = wire.last_receive().unwrap_or_else(Instant::now).max(t);
            let status = resp.status().as_u16();
            // Streamed and counted, never held: a body may be larger than memory.
            let mut body = resp.into_body();
            let mut body_bytes = 0u64;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| ConnectError::Http {
                    reason: format!("HTTP/2 body: {e}"),
                })?;
                if let Some(data) = frame.data_ref() {
                    body_bytes += data.len() as u64;
                }
            }
            let done = wire.last_receive().unwrap_or_else(Instant::now).max(first);
            tally.phase(Phase::FirstByte, first - t);
            tally.phase(Phase::Body, done - first);
            tally.status = Some(status);
            tally.body_bytes = body_bytes;
            tally.wakeup = wire.last_receive_delay();
            Ok(true)
        }
        None => Err(ConnectError::ClosedMidHandshake),
    }
}

/// Opens a connection (TCP, TLS, and HTTP/2's preface when asked for), sending `early`
/// as 0-RTT data when the session allows it; returns what became of it and when the
/// handshake completed.
async fn connect(
    shared: &Shared,
    config: &Arc<ClientConfig>,
    tally: &mut Obs,
    early: Option<&[u8]>,
    step: &StepCell,
) -> Result<(Open, EarlyData, Instant), ConnectError> {
    let fresh;
    let config = match &shared.opts.config_per_connection {
        Some(factory) => {
            fresh = (factory.0)().map_err(|source| ConnectError::Config { source })?;
            &fresh
        }
        None => config,
    };
    let t0 = Instant::now();
    step.set(Step::Connecting);
    let tcp = if shared.opts.addrs.is_empty() {
        let first = shared.preferred.load(Ordering::Relaxed);
        let (tcp, i) = conn::tcp_connect_any(&shared.resolved, first).await?;
        if i != first {
            shared.preferred.store(i, Ordering::Relaxed);
        }
        tcp
    } else {
        let i = shared.opened.fetch_add(1, Ordering::Relaxed) as usize;
        conn::tcp_connect(shared.opts.addrs[i % shared.opts.addrs.len()]).await?
    };
    let stamps = Stamps {
        connected: t0.elapsed(),
        ..Stamps::default()
    };
    step.set(Step::Handshaking);
    let (stream, hs) = conn::handshake(
        tcp,
        shared.target.server_name.clone(),
        Arc::clone(config),
        early,
        t0,
        stamps,
    )
    .await?;
    let done = t0 + hs.stamps.handshake_done;
    let timeline = crate::client::Timeline {
        conn: hs.stamps,
        verify: hs.verify,
        ..Default::default()
    };
    for p in [
        Phase::Connect,
        Phase::ClientHello,
        Phase::ServerHello,
        Phase::Certificate,
        Phase::HandshakeFinish,
        Phase::Verify,
        Phase::Tls,
    ] {
        tally.phase(p, timeline.get(p));
    }
    tally.handshake = Some((hs.kind.name(), hs.kind.resumed(), timeline.get(Phase::Tls)));
    if shared.opts.http2 {
        let wire = stream.wire();
        if hs.negotiated.alpn.as_deref() != Some("h2") {
            return Err(ConnectError::Http {
                reason: "the server did not agree to HTTP/2 (ALPN h2)".into(),
            });
        }
        let (send, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .map_err(|e| ConnectError::Http {
                    reason: format!("HTTP/2 handshake: {e}"),
                })?;
        tokio::spawn(connection);
        Ok((Open::H2(send, wire), hs.early_data, done))
    } else {
        Ok((Open::H1(Box::new(Http1::new(stream))), hs.early_data, done))
    }
}
