//! The engine behind `tlsperf capacity`: the highest request rate a server sustains
//! within a latency objective ([`Slo`]), found by open-loop steps of the load engine
//! ([`crate::load::run`] at a fixed `--rate`).
//!
//! The capacity is a probability ([`knee`]): the highest rate whose steps meet the
//! objective with probability 0.9, estimated (with a 90% credible interval) from every
//! valid step's pass or fail on a logistic curve in log rate. The search: a geometric
//! ramp from the start rate (×factor a step) until a step breaks the objective (down by
//! the same factor when the first step already does); then steps placed by the
//! sequential design ([`knee::next_rate`]: where the next step is expected to narrow the
//! estimate most), repeated short steps near the knee, until the interval is within the
//! resolution ([`Outcome::Capacity`]) or the time or step limit ends the search (the
//! estimate and its wider interval are still reported). With `--plan`, every step's
//! rate is fixed in advance instead, so that generator processes that cannot see each
//! other's measurements (`--rate-share`) run the same steps at the same instants; the
//! capacity is then estimated from the (merged) steps the same way.
//!
//! Each step is sized for [`Slo::samples_needed`] answers (10 expected above the
//! objective's highest percentile), at least `step_min` and at most `step_max` long,
//! with enough connection slots that a server within the objective never leaves the
//! generator waiting for a free slot (twice the rate × the largest latency bound).
//! The objective is checked on the corrected latency (from each request's intended send
//! instant), failed requests (and requests due but never sent) counting as slower than
//! any bound. A failing step is invalid when the generator was the bottleneck — its CPU
//! near what it may use, its threads starved of CPU by other processes (run-queue wait
//! from `/proc/self/task/*/schedstat`), or the objective holding on the latency from each request's
//! actual send instant (the failure is then the generator's send lateness alone; see
//! [`Step::judge`]). A step invalid only by the generator's lateness, its CPU to spare,
//! is run once more at the same rate ([`conclusion::retry`]). A step whose generator
//! saturated (its CPU at the limit) above a passing step sets a ceiling, 0.8 of its rate
//! ([`conclusion::generator_ceiling`]), and the search goes on below it; a step invalid at or
//! above a rate that already failed validly decides nothing
//! ([`conclusion::goes_on_past_invalid`]). Otherwise, or when the re-run is invalid too, the
//! search stops there and says the generator, not the server, saturated or fell behind
//! (so too when the server passes at the ceiling). (A step that passes despite a late generator is a pass: the delay only
//! adds to the corrected latency.) After a failed step, before the next one, the search
//! waits until the server answers one request within the tightest bound again (at most
//! [`SETTLE_MAX`], and only as long as the next step can still end within `max_time`),
//! so that no step inherits the previous one's backlog.
//!
//! Bounded by `max_time` (a step that would end past it, counting the request timeout
//! its last answers may take, is not started; the cooldown and the settling after a
//! failed step are cut at it), a step count
//! and the highest rate; stops early, keeping what was measured, on [`Progress::stop`].
//! The engine never prints: it reports each step through [`Progress`]'s channel.

pub mod compare;
pub mod conclusion;
pub mod judge;
pub mod knee;
pub mod merge;
pub mod result;
pub mod step;
// The objective and how its numbers are written live in `stats` (observe's audit judges
// windows against the same objective); their capacity paths stay.
pub use crate::stats::{numbers, slo};
pub mod validate;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use crate::client::target::Target;
use crate::load::{self, LoadError, LoadGenOptions};
pub use conclusion::Outcome;
use conclusion::{bracket, conclude};
pub use result::{CapacityResult, SCHEMA};
pub use slo::Slo;
use step::{LATE_START_MAX, StepCpu};
pub use step::{Rules, Step, StepKind, Verdict};

/// A failing step is invalid when the generator's CPU use reaches this fraction of the
/// CPUs it may use (as `load` flags a saturated generator).
pub const GENERATOR_CPU_MAX: f64 = 0.9;

/// What to search.
#[derive(Debug, Clone)]
pub struct CapacityOptions {
    /// The objective.
    pub slo: Slo,
    /// The search's rules (rates are totals over all generator processes).
    pub rules: Rules,
    /// Stop starting steps that would end after this long.
    pub max_time: Duration,
    /// At most this many steps.
    pub max_steps: u32,
    /// Connection slots per step; `None`: sized from the rate ([`slots_for`]).
    pub connections: Option<usize>,
    /// Pause between steps (the server closes the last step's connections).
    pub cooldown: Duration,
    /// `(i, n)`: this process sends the i-th of n equal shares of each step's rate.
    pub share: Option<(u32, u32)>,
    /// `--plan`: run these rates (all processes together, per second) in this order
    /// instead of searching; with `share` or `aligned_from`, each step at a fixed instant.
    pub plan: Option<Vec<f64>>,
    /// Steps start at fixed instants from this one (processes started together with
    /// `--start-at` stay in step): each step's planned start is the previous one's plus
    /// its length, the request timeout and the cooldown. `None`: each step starts
    /// after the previous one's end and the cooldown.
    pub aligned_from: Option<Instant>,
    /// Everything else of each step (target-independent load options: timeout, threads,
    /// new connections, `--server-pid`…); `rate`, `duration`, `connections`, `requests`
    /// and `schedule_offset` are set per step.
    pub load: LoadGenOptions,
}

/// Connection slots for `rate` under `slo`: twice the rate × the largest latency bound
/// (the requests in flight at once when every one takes the bound), at least 4, at most
/// 10,000.
pub fn slots_for(rate: f64, slo: &Slo) -> usize {
    let largest = slo
        .latency
        .iter()
        .map(|b| b.max_ms / 1e3)
        .fold(0.0, f64::max);
    ((rate * largest * 2.0).ceil() as usize).clamp(4, 10_000)
}

/// The connection slots of one process's step at `own_rate`: `-c`, or [`slots_for`].
fn slots(opts: &CapacityOptions, own_rate: f64) -> usize {
    opts.connections
        .unwrap_or_else(|| slots_for(own_rate, &opts.slo))
}

/// A step's warm-up: [`Rules::warmup_s`], at most 10 s. (The slots a step uses open
/// their connections as they take their first send instants: at a rate within the
/// objective, far fewer than the slots sized for the worst case, in a fraction of the
/// warm-up.)
pub fn warmup(opts: &CapacityOptions) -> Duration {
    Duration::from_secs_f64(opts.rules.warmup_s.clamp(0.0, 10.0))
}

/// The least time a step can take: its warm-up, the shortest step and `timeout` for its
/// last answers. A `max_time` below it runs no step.
pub fn shortest_step(rules: &Rules, timeout: Duration) -> Duration {
    Duration::from_secs_f64(rules.warmup_s.clamp(0.0, 10.0) + rules.step_min_s) + timeout
}

/// Requests one process expects in the measured window of a step at `rate` (all
/// processes together) when it sends `share` of it: rate × share × the step's length.
/// Below one, the step may send none and show nothing about the server.
pub fn requests_per_step(rate: f64, share: f64, rules: &Rules) -> f64 {
    rate * share * step_length(rate, rules).as_secs_f64()
}

/// A step's length for `rate`: 1.1 × the time [`Rules::samples_needed`] answers take at
/// that rate, within `step_min_s ..= step_max_s`.
pub fn step_length(rate: f64, rules: &Rules) -> Duration {
    // A tenth more than the samples' time: a step's last requests may not have answered
    // when it ends.
    let secs = (1.1 * rules.samples_needed as f64 / rate.max(1e-9))
        .clamp(rules.step_min_s, rules.step_max_s.max(rules.step_min_s));
    Duration::from_secs_f64(secs)
}

/// What the search reports while it runs.
#[derive(Debug, Clone)]
pub enum Event {
    /// A step starts.
    Started {
        /// 1-based index.
        index: u32,
        /// Why.
        kind: StepKind,
        /// Offered rate (all processes).
        offered_per_s: f64,
        /// Its length.
        length: Duration,
        /// How long until it starts: its instant in the shared schedule (`--start-at`,
        /// `--rate-share`) is this far off, else zero.
        starts_in: Duration,
    },
    /// A step ended (boxed: a step holds histograms).
    Done(Box<Step>),
}

/// Live state: the stop switch, the running step's counters, and the event channel.
#[derive(Debug, Default)]
pub struct Progress {
    stopped: std::sync::atomic::AtomicBool,
    current: Mutex<Option<Arc<load::Progress>>>,
    events: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Event>>>,
}

impl Progress {
    /// A progress whose events go to the returned receiver.
    pub fn with_events() -> (Arc<Progress>, tokio::sync::mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let p = Progress {
            events: Mutex::new(Some(tx)),
            ..Progress::default()
        };
        (Arc::new(p), rx)
    }

    /// Stops the search: the running step stops at once (its measurements so far are
    /// kept but not judged), no other step starts.
    pub fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(p) = lock(&self.current).as_ref() {
            p.stop();
        }
    }

    /// True once [`Progress::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The running step's live counters (requests answered, failed).
    pub fn step(&self) -> Option<Arc<load::Progress>> {
        lock(&self.current).clone()
    }

    fn send(&self, e: Event) {
        if let Some(tx) = lock(&self.events).as_ref() {
            // A closed receiver only means nobody watches.
            let _ = tx.send(e);
        }
    }

    /// Closes the event channel (the receiver then ends).
    fn close(&self) {
        lock(&self.events).take();
    }
}

use crate::sync::lock;

/// A search that could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CapacityError {
    /// A step could not start.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Every request of a step failed the same way at once (a setup that cannot work:
    /// wrong roots, no server): not a capacity.
    #[error(
        "step {index} at {rate}/s: every request failed ({why}); the server is not answering with a success"
    )]
    NoAnswer {
        /// 1-based step.
        index: u32,
        /// Its rate.
        rate: String,
        /// The most frequent failure, with an example.
        why: String,
    },
}

impl crate::error::Classify for CapacityError {
    fn class(&self) -> crate::error::ErrorClass {
        match self {
            CapacityError::Load(e) => e.class(),
            CapacityError::NoAnswer { .. } => crate::error::ErrorClass::Runtime,
        }
    }
}

/// Rates shown and run are rounded: to whole requests per second from 10/s up.
fn round_rate(r: f64) -> f64 {
    if r >= 10.0 {
        r.round()
    } else {
        (r * 100.0).round() / 100.0
    }
}

/// The next step, or how the search ends: the ramp until a valid step passed and one
/// failed, then where the sequential design puts it, until the capacity's interval is
/// within the resolution.
fn next_step(steps: &[Step], rules: &Rules) -> Result<(f64, StepKind), Outcome> {
    // Above the generator's ceiling, if it saturated somewhere, no step is judged.
    let ceiling = conclusion::generator_ceiling(steps, rules)
        .map(round_rate)
        .filter(|&c| c < rules.max_rate);
    let rules = &Rules {
        max_rate: ceiling.unwrap_or(rules.max_rate),
        ..rules.clone()
    };
    match bracket(steps) {
        (None, None) => Ok((round_rate(rules.start_rate), StepKind::Ramp)),
        (Some(l), None) if l >= rules.max_rate && ceiling.is_some() => Err(Outcome::GeneratorBound),
        (Some(l), None) if l >= rules.max_rate => Err(Outcome::AboveMaxRate),
        (Some(l), None) => Ok((
            round_rate((l * rules.factor).min(rules.max_rate)),
            StepKind::Ramp,
        )),
        (None, Some(h)) if h <= rules.min_rate => Err(Outcome::BelowMinRate),
        (None, Some(h)) => Ok((
            round_rate((h / rules.factor).max(rules.min_rate)),
            StepKind::Ramp,
        )),
        (Some(_), Some(_)) => {
            let trials = conclusion::trials(steps);
            match knee::estimate(&trials) {
                Some(k) if k.width() <= rules.resolution => Err(Outcome::Capacity),
                _ => knee::next_rate(&trials, rules.min_rate, rules.max_rate)
                    .map(|r| (round_rate(r), StepKind::Probe))
                    .ok_or(Outcome::TimeLimit),
            }
        }
    }
}

/// Runs the search. The caller owns the runtime (threads) and the display.
pub async fn run(
    target: Target,
    config: Arc<ClientConfig>,
    opts: CapacityOptions,
    progress: Arc<Progress>,
) -> Result<CapacityResult, CapacityError> {
    let began = Instant::now();
    // The whole run ends by then: steps, the cooldowns and the settling after a failure.
    let deadline = began + opts.max_time;
    let started_wall = time::OffsetDateTime::now_utc();
    let mut steps: Vec<Step> = Vec::new();
    // Steps at fixed instants: from --start-at, and for a plan shared by processes
    // (--rate-share) from now without it. A plan run alone starts each step when the
    // one before has ended, as a search does.
    let mut planned = opts
        .aligned_from
        .or_else(|| (opts.plan.is_some() && opts.share.is_some()).then(Instant::now));
    let mut plan = opts.plan.as_deref().map(<[f64]>::iter);
    let share = opts.share.map_or(1.0, |(_, n)| 1.0 / f64::from(n));
    let mut no_answer = None;
    let end = loop {
        if progress.stopped() {
            break Outcome::Interrupted;
        }
        if steps.len() as u32 >= opts.max_steps {
            break Outcome::TimeLimit;
        }
        let next = match plan.as_mut() {
            Some(rates) => rates
                .next()
                .map(|&r| (r, StepKind::Plan))
                .ok_or(Outcome::TimeLimit),
            None => next_step(&steps, &opts.rules),
        };
        let (rate, kind) = match next {
            Ok(next) => next,
            Err(outcome) => break outcome,
        };
        let length = step_length(rate, &opts.rules);
        let warm = warmup(&opts);
        // A step's last requests may wait the request timeout for their answers.
        let needs = warm + length + opts.load.timeout;
        // After a failed step, the server recovers before the next one (not after the
        // last: no step would inherit its backlog), for as long as the step can still
        // start in time.
        if planned.is_none()
            && steps.last().is_some_and(|s| s.verdict == Verdict::Fail)
            && let Some(latest) = deadline.checked_sub(needs)
        {
            settle(&target, &config, &opts, &progress, latest).await;
            if progress.stopped() {
                break Outcome::Interrupted;
            }
        }
        let start_at = planned.unwrap_or_else(Instant::now);
        if start_at + needs > deadline {
            break Outcome::TimeLimit;
        }
        let index = steps.len() as u32 + 1;
        progress.send(Event::Started {
            index,
            kind,
            offered_per_s: rate,
            length,
            starts_in: start_at.saturating_duration_since(Instant::now()),
        });
        // A process that reaches a step of the shared schedule too late (stopped,
        // starved) skips it, so that its next steps still run with the others'.
        let late = planned.map(|t| Instant::now().saturating_duration_since(t));
        let plan_of_step = StepPlan {
            index,
            kind,
            rate,
            share,
            length,
            planned: planned.zip(late),
        };
        let step = if let Some(late) = late.filter(|l| l.as_secs_f64() > LATE_START_MAX) {
            let mut s = skipped_step(&plan_of_step, late);
            s.judge(&opts.slo, &opts.rules);
            Ok(Some(s))
        } else {
            run_step(&target, &config, &opts, &progress, plan_of_step).await
        };
        let step = match step {
            Ok(step) => step,
            // The server is not answering: the result (the steps before, and why) is
            // still printed and written, with its own outcome.
            Err(e @ CapacityError::NoAnswer { .. }) => {
                no_answer = Some(e.to_string());
                break Outcome::NoAnswer;
            }
            Err(e) => return Err(e),
        };
        let Some(step) = step else {
            break Outcome::Interrupted;
        };
        progress.send(Event::Done(Box::new(step.clone())));
        steps.push(step);
        // A plan runs to its end whatever a step showed: the other processes do.
        if plan.is_none() && ends_on_invalid(&steps, &opts.rules) {
            break Outcome::GeneratorBound;
        }
        planned = planned.map(|t| t + warm + length + opts.load.timeout + opts.cooldown);
        if planned.is_none() {
            let cooled = deadline.min(Instant::now() + opts.cooldown);
            tokio::select! {
                () = tokio::time::sleep_until(cooled.into()) => {}
                () = wait_stopped(&progress) => {}
            }
        }
    };
    progress.close();
    Ok(finish(&target, &opts, steps, end, no_answer, started_wall))
}

/// True when the search stops after its last step as generator-bound: that step was
/// invalid, is not run again ([`conclusion::retry`]: once, when only the generator's
/// lateness spoiled it) and the search cannot go on past it
/// ([`conclusion::goes_on_past_invalid`]). A rate invalid twice always stops it.
fn ends_on_invalid(steps: &[Step], rules: &Rules) -> bool {
    steps.last().is_some_and(|s| s.verdict == Verdict::Invalid)
        && !conclusion::retry(steps, rules)
        && !conclusion::goes_on_past_invalid(steps, rules)
}

/// The result of a search that ended on `end` (`no_answer`: why the server stopped
/// answering), concluded from its steps, with its warnings.
fn finish(
    target: &Target,
    opts: &CapacityOptions,
    steps: Vec<Step>,
    end: Outcome,
    no_answer: Option<String>,
    started_wall: time::OffsetDateTime,
) -> CapacityResult {
    let mut c = conclude(&steps, &opts.rules, end);
    if let Some(why) = no_answer {
        // Whatever the steps before suggested, the search ended on a server that does
        // not answer.
        c.outcome = Outcome::NoAnswer;
        c.capacity_per_s = None;
        c.message = why;
    }
    let mut result = CapacityResult {
        schema: SCHEMA.into(),
        target: target.to_string(),
        started: steps
            .first()
            .map(|s| s.started.clone())
            .unwrap_or_else(|| crate::when::format_rfc3339(started_wall)),
        slo: opts.slo.clone(),
        rules: opts.rules.clone(),
        options: opts.load.echo.clone(),
        rate_share: opts.share.map(|(i, n)| format!("{i}/{n}")),
        machines: 1,
        outcome: c.outcome,
        capacity_per_s: None,
        interval_per_s: None,
        best_pass_per_s: None,
        generator_bound_at_per_s: None,
        disputed_per_s: None,
        knee_spread: None,
        message: String::new(),
        steps,
        warnings: Vec::new(),
        link_counters: None,
    };
    result.set_conclusion(c);
    let warnings = warnings(
        &result.steps,
        result.capacity_per_s.or(result.best_pass_per_s),
        opts,
    );
    result.warnings.extend(warnings);
    if let Some(plan) = &opts.plan
        && end == Outcome::TimeLimit
        && result.steps.len() < plan.len()
    {
        result.warnings.push(format!(
            "--max-time or --max-steps ended the plan after {} of its {} steps",
            result.steps.len(),
            plan.len()
        ));
    }
    result
}

/// What the steps' figures and the machine say about the result's reliability: steps
/// short of samples or skipped, CPUs shared with the server, a starved server, a server
/// whose CPU slowed (near `capacity`), steal.
fn warnings(steps: &[Step], capacity: Option<f64>, opts: &CapacityOptions) -> Vec<String> {
    let mut warnings = Vec::new();
    if steps.iter().any(|s| !s.enough_samples) {
        warnings.push(format!(
            "some steps had fewer than the {} answers the rule asks for (a low rate capped by \
             --step-max): their percentiles rest on fewer samples",
            opts.rules.samples_needed
        ));
    }
    warnings.extend(skipped_warning(steps));
    warnings.extend(shared_cpus_warning(opts.load.server_pid));
    warnings.extend(server_starved_warning(
        steps,
        opts.load.server_pid.is_some(),
    ));
    warnings.extend(server_cost_warning(steps, capacity));
    warnings.extend(steal_warning(
        steps,
        if opts.load.server_pid.is_some() {
            "the server's CPUs"
        } else {
            "this machine's CPUs"
        },
    ));
    warnings
}

/// After a failed step and before the next, until the server answers one request
/// (closed loop, one connection) within the tightest bound again, at most
/// [`SETTLE_MAX`] and never past `deadline` (the latest start that lets the next step end
/// within the run's `max_time`: each probe's timeout is cut to it): an overloaded
/// server may still be working through connections queued during the step (the
/// generator gave up on them, the server does not know yet), and the next step must not
/// inherit that backlog. (With `--start-at`, steps keep their planned instants instead,
/// each a request timeout and the cooldown after the previous step's planned end.)
async fn settle(
    target: &Target,
    config: &Arc<ClientConfig>,
    opts: &CapacityOptions,
    progress: &Progress,
    deadline: Instant,
) {
    let until = deadline.min(Instant::now() + SETTLE_MAX);
    while !progress.stopped() {
        // A probe shorter than this could not tell an answer from a timeout.
        let left = until.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(10) {
            return;
        }
        let mut probe = opts.load.clone();
        probe.timeout = probe.timeout.min(left);
        probe.rate = None;
        probe.requests = Some(1);
        probe.duration = None;
        probe.connections = 1;
        probe.server_pid = None;
        probe.echo = BTreeMap::new();
        let p = Arc::new(load::Progress::default());
        *lock(&progress.current) = Some(Arc::clone(&p));
        let r = load::run(target.clone(), Arc::clone(config), probe, p).await;
        lock(&progress.current).take();
        if let Ok(r) = r
            && r.requests.completed == 1
            && r.latency.hdr.quantile(1.0) <= opts.slo.tightest()
        {
            return;
        }
        tokio::time::sleep_until(
            until
                .min(Instant::now() + Duration::from_millis(200))
                .into(),
        )
        .await;
    }
}

/// The longest wait for a server to recover after a failed step.
pub const SETTLE_MAX: Duration = Duration::from_secs(10);

async fn wait_stopped(progress: &Progress) {
    while !progress.stopped() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The generator's CPU during a step, against the CPUs it may use: the least of its
/// worker threads, the CPUs its affinity allows and its cgroup quota.
fn generator_cpu(r: &load::LoadResult) -> StepCpu {
    let g = &r.generator;
    let cpus = g.cpus();
    StepCpu {
        threads: g.threads,
        cpu_seconds: g.cpu_seconds,
        // Work, not the pacer's spin before send instants.
        utilization: g.work_seconds() / (r.duration_s.max(1e-9) * cpus),
        cpus,
        runqueue_wait_s: g.runqueue_wait_s,
        apart_from_server: None,
    }
}

/// Whether the generator's CPUs and the server's (`--server-pid`) are apart (their
/// affinities share no CPU): then whatever kept the generator waiting for a CPU was not
/// the server. `None` without `--server-pid` or where an affinity cannot be read.
fn cpus_apart(server_pid: Option<u32>) -> Option<bool> {
    let own = load::usage::cpus_allowed(None)?;
    let server = load::usage::cpus_allowed(Some(server_pid?))?;
    Some(!own.iter().any(|c| server.contains(c)))
}

/// A warning when the generator and the server (`--server-pid`) may run on the same
/// CPUs: a server saturating them delays the generator's sends (such a step is still
/// judged on the latency from the actual sends, [`Step::judge`]), and on a small
/// machine the search's reach is then what the two leave each other.
fn shared_cpus_warning(server_pid: Option<u32>) -> Option<String> {
    let own = load::usage::cpus_allowed(None)?;
    let server = load::usage::cpus_allowed(Some(server_pid?))?;
    let shared: Vec<String> = own
        .iter()
        .filter(|c| server.contains(c))
        .map(usize::to_string)
        .collect();
    (!shared.is_empty()).then(|| {
        format!(
            "the generator and the server may run on the same CPUs ({}): pin them apart \
             (e.g. taskset -c 0 for the server, taskset -c 1 for tlsperf) so that neither \
             delays the other",
            shared.join(",")
        )
    })
}

/// A warning when the server was starved in failing steps (its threads waited for a CPU
/// another process held), which then say more about its neighbours than its capacity;
/// without `--server-pid`, that this cannot be checked, when a capacity was found.
fn server_starved_warning(steps: &[Step], server_pid: bool) -> Option<String> {
    if !server_pid {
        let found = steps.iter().any(|s| s.verdict == step::Verdict::Fail);
        return found.then(|| {
            "whether another process starved the server in the failing steps cannot be \
             checked without --server-pid (its threads' run-queue wait)"
                .to_string()
        });
    }
    let starved: Vec<String> = steps
        .iter()
        .filter(|s| s.verdict == step::Verdict::Fail && s.server_starved())
        .map(|s| format!("{} ({}/s)", s.index, numbers::group(s.offered_per_s)))
        .collect();
    (!starved.is_empty()).then(|| {
        format!(
            "the server was starved in failing step{} {}: its threads waited for a CPU at \
             least {:.0}% of the time they wanted one (another process on its CPUs), so the \
             capacity found is this machine's now, not the server's alone",
            if starved.len() == 1 { "" } else { "s" },
            starved.join(", "),
            crate::load::result::STARVED_WAIT_SHARE * 100.0
        )
    })
}

/// How far the server's CPU time per answered request may vary across the passing
/// steps near the capacity (90th percentile ÷ 10th − 1) before a search says so.
pub const COST_DRIFT: f64 = 0.15;

/// A warning when the server's CPU time per answered request (`--server-pid`) varied
/// more than [`COST_DRIFT`] across the passing steps at half of `capacity` or more (at
/// least four): the same work took the CPU longer in some steps than in others, which
/// on a shared machine is another tenant slowing the CPU without taking it (no steal, no
/// run-queue wait shows it). The knee moved during the search, and its interval is
/// wider for it. On this VM the figure drifted from 885 to 1,250 µs within one
/// 3-minute search (docs/benchmarks/history/2026-12-02-capacity-pairs-ten.md).
fn server_cost_warning(steps: &[Step], capacity: Option<f64>) -> Option<String> {
    let costs = step::costs_near(steps, capacity?);
    if costs.len() < 4 {
        return None;
    }
    // Nearest rank.
    let at = |q: f64| costs[((q * costs.len() as f64).ceil() as usize).clamp(1, costs.len()) - 1];
    let (p10, p90) = (at(0.1), at(0.9));
    (p90 / p10 - 1.0 > COST_DRIFT).then(|| {
        format!(
            "the server's CPU time per answered request varied from {p10:.0} to {p90:.0} µs \
             (10th to 90th percentile of {} passing steps near the capacity): the same work \
             took its CPU {:.0}% longer in some steps, which on a shared machine is another \
             tenant slowing the CPU without taking it (no steal, no run-queue wait shows \
             it). The capacity moved during the search, and the interval is wider for it",
            costs.len(),
            (p90 / p10 - 1.0) * 100.0
        )
    })
}

/// A step's steal from this share of the watched CPUs' time up is worth a warning.
pub const STEAL_WARN: f64 = 0.02;

/// A warning when the hypervisor took a noticeable share of the watched CPUs (`whose`:
/// the server's with `--server-pid`, else the machine's) during a step: a server whose
/// CPU is stolen stalls, and near the knee a few stalls break a p99 objective, so the
/// answer then moves with the other guests' load.
fn steal_warning(steps: &[Step], whose: &str) -> Option<String> {
    let worst = steps
        .iter()
        .filter(|s| s.steal.is_some_and(|x| x >= STEAL_WARN))
        .max_by(|a, b| a.steal.unwrap_or(0.0).total_cmp(&b.steal.unwrap_or(0.0)))?;
    let n = steps
        .iter()
        .filter(|s| s.steal.is_some_and(|x| x >= STEAL_WARN))
        .count();
    Some(format!(
        "the hypervisor took {:.1}% of {whose} during step {} ({}/s) and at least \
         {:.0}% in {n} of {} steps (steal in /proc/stat): a server whose CPU is stolen \
         stalls, and near the knee a few stalls break the objective; on a virtual machine \
         the capacity then moves with the other guests' load, so compare searches run \
         with little steal",
        worst.steal.unwrap_or(0.0) * 100.0,
        worst.index,
        numbers::group(worst.offered_per_s),
        STEAL_WARN * 100.0,
        steps.len()
    ))
}

/// One step at `rate` (total; this process sends `share` of it); `None` when stopped
/// meanwhile.
#[allow(clippy::too_many_arguments)]
async fn run_step(
    target: &Target,
    config: &Arc<ClientConfig>,
    opts: &CapacityOptions,
    progress: &Progress,
    plan: StepPlan,
) -> Result<Option<Step>, CapacityError> {
    let StepPlan {
        index,
        kind,
        rate,
        share,
        length,
        planned,
    } = plan;
    let own_rate = rate * share;
    let connections = slots(opts, own_rate);
    let warm = warmup(opts);
    // Process i of n starts (i − 1)/rate after the first: their sends interleave.
    let offset = opts.share.map_or(Duration::ZERO, |(i, _)| {
        Duration::from_secs_f64(f64::from(i - 1) / rate.max(1e-9))
    });
    let mut load_opts = opts.load.clone();
    load_opts.rate = Some(own_rate);
    load_opts.duration = Some(warm + length);
    load_opts.warmup = warm;
    load_opts.requests = None;
    load_opts.connections = connections;
    load_opts.schedule_offset = offset;
    // The step's schedule is anchored at its planned instant itself (not at the moment
    // this process woke for it), so that processes sharing a rate interleave exactly.
    load_opts.start_at = planned.map(|(t, _)| t);
    load_opts.echo = BTreeMap::new();
    let step_progress = Arc::new(load::Progress::default());
    *lock(&progress.current) = Some(Arc::clone(&step_progress));
    if progress.stopped() {
        return Ok(None);
    }
    // The hypervisor's steal on the server's CPUs (the whole machine without
    // --server-pid) over the step.
    let watched = opts
        .load
        .server_pid
        .and_then(|pid| load::usage::cpus_allowed(Some(pid)));
    let stolen = load::usage::cpu_ticks(watched.as_deref());
    let r = load::run(
        target.clone(),
        Arc::clone(config),
        load_opts,
        Arc::clone(&step_progress),
    )
    .await;
    lock(&progress.current).take();
    let r = r?;
    if r.interrupted {
        return Ok(None);
    }
    // Nothing answered, and every failure says the server cannot be used at any rate
    // (refused, not TLS, not trusted): no capacity to find, whether or not the run gave
    // up by itself.
    let unusable = r.requests.completed == 0
        && r.requests.failed > 0
        && r.errors.keys().all(|k| UNUSABLE.contains(&k.as_str()));
    if r.gave_up || unusable {
        return Err(CapacityError::NoAnswer {
            index,
            rate: numbers::group(rate),
            why: r.most_frequent_error().unwrap_or_default(),
        });
    }
    let mut step = Step {
        index,
        kind,
        started: r.started.clone(),
        offered_per_s: rate,
        share,
        machines: 1,
        length_s: length.as_secs_f64(),
        warmup_s: warm.as_secs_f64(),
        duration_s: r.duration_s,
        connections: connections as u64,
        attempted: r.requests.attempted,
        unsent: 0,
        completed: r.requests.completed,
        failed: r.requests.failed,
        achieved_per_s: 0.0,
        error_rate: 0.0,
        p50_ms: None,
        p99_ms: None,
        p999_ms: None,
        latency_corrected: r.latency_corrected.clone(),
        pacing_lateness: r.pacing_lateness.clone(),
        latency_from_send: (!r.latency.hdr.is_empty()).then(|| r.latency.clone()),
        body_bytes: r.body_bytes,
        upload_bytes: r.upload_bytes,
        goodput: Default::default(),
        generator: StepCpu {
            apart_from_server: cpus_apart(opts.load.server_pid),
            ..generator_cpu(&r)
        },

        server_cpu_seconds: r.server.as_ref().map(|s| s.cpu_seconds),
        server_runqueue_wait_s: r.server.as_ref().and_then(|s| s.runqueue_wait_s),
        server_cpu_us_per_request: None,
        server_cpus: opts
            .load
            .server_pid
            .and_then(|pid| load::usage::cpus_allowed(Some(pid)))
            .map(|c| c.len() as f64),
        steal: stolen
            .zip(load::usage::cpu_ticks(watched.as_deref()))
            .and_then(|(before, after)| after.steal_since(&before)),
        late_start_s: planned.map(|(_, late)| late.as_secs_f64()),
        verdict: Verdict::Fail,
        why: String::new(),
        enough_samples: false,
    };
    step.judge(&opts.slo, &opts.rules);
    if step.verdict != Verdict::Pass
        && let Some(e) = r.most_frequent_error()
    {
        step.why = format!("{}; most failures: {e}", step.why);
    }
    Ok(Some(step))
}

/// The warning for the steps this process skipped because it reached them late (it
/// fell behind the shared schedule), when it did.
fn skipped_warning(steps: &[Step]) -> Option<String> {
    let skipped: Vec<String> = steps
        .iter()
        .filter(|s| s.skipped())
        .map(|s| {
            format!(
                "{} ({:.2} s late)",
                s.index,
                s.late_start_s.unwrap_or_default()
            )
        })
        .collect();
    (!skipped.is_empty()).then(|| {
        format!(
            "this process fell behind the shared schedule (it was stopped or starved of CPU) \
             and skipped step{} {} rather than send out of step with the other processes: \
             those steps are invalid",
            if skipped.len() == 1 { "" } else { "s" },
            skipped.join(", ")
        )
    })
}

/// What one step runs.
struct StepPlan {
    /// 1-based.
    index: u32,
    kind: StepKind,
    /// Offered rate, all processes.
    rate: f64,
    /// This process's share of it.
    share: f64,
    length: Duration,
    /// With a shared schedule: the step's instant, and how late this process reached it.
    planned: Option<(Instant, Duration)>,
}

/// The step a process skipped because it reached the step's instant `late` (more than
/// [`LATE_START_MAX`]): nothing sent, judged invalid ([`Step::judge`]).
fn skipped_step(plan: &StepPlan, late: Duration) -> Step {
    Step {
        index: plan.index,
        kind: plan.kind,
        started: crate::when::format_rfc3339(time::OffsetDateTime::now_utc()),
        offered_per_s: plan.rate,
        share: plan.share,
        machines: 1,
        length_s: plan.length.as_secs_f64(),
        warmup_s: 0.0,
        duration_s: 0.0,
        connections: 0,
        attempted: 0,
        unsent: 0,
        completed: 0,
        failed: 0,
        achieved_per_s: 0.0,
        error_rate: 0.0,
        p50_ms: None,
        p99_ms: None,
        p999_ms: None,
        latency_corrected: None,
        pacing_lateness: None,
        latency_from_send: None,
        generator: StepCpu::default(),
        server_cpu_seconds: None,
        server_runqueue_wait_s: None,
        server_cpu_us_per_request: None,
        server_cpus: None,
        steal: None,
        body_bytes: 0,
        upload_bytes: 0,
        goodput: Default::default(),
        late_start_s: Some(late.as_secs_f64()),
        verdict: Verdict::Invalid,
        why: String::new(),
        enough_samples: false,
    }
}

/// Failure kinds that no rate explains: the server refuses, does not speak TLS, or is not
/// trusted ([`crate::client::ConnectError::kind`]).
const UNUSABLE: [&str; 6] = [
    "dns",
    "connect-refused",
    "tls-not-tls",
    "tls-certificate",
    "tls-alert-received",
    "tls",
];

#[cfg(test)]
mod tests {
    use super::step::tests::{rules, step};
    use super::*;

    /// The ramp until a pass and a failure; then steps the design places between and
    /// around them until the interval is within the resolution.
    #[test]
    fn the_search_ramps_then_probes_the_knee() {
        let mut r = rules();
        r.resolution = 0.2;
        let mut steps = Vec::new();
        assert_eq!(next_step(&steps, &r), Ok((100.0, StepKind::Ramp)));
        steps.push(step(1, StepKind::Ramp, 100.0, 2, 200));
        assert_eq!(next_step(&steps, &r), Ok((200.0, StepKind::Ramp)));
        steps.push(step(2, StepKind::Ramp, 200.0, 2, 200));
        assert_eq!(next_step(&steps, &r), Ok((400.0, StepKind::Ramp)));
        steps.push(step(3, StepKind::Ramp, 400.0, 50, 200));
        // A server whose knee is at 300/s (sharp): every step below passes, every step
        // above fails.
        let mut ended = None;
        for i in 4..40 {
            match next_step(&steps, &r) {
                Ok((rate, kind)) => {
                    assert_eq!(kind, StepKind::Probe);
                    assert!(rate > 200.0 && rate < 400.0, "step {i} at {rate}");
                    let ms = if rate <= 300.0 { 2 } else { 50 };
                    steps.push(step(i, kind, rate, ms, 200));
                }
                Err(o) => {
                    ended = Some((o, i));
                    break;
                }
            }
        }
        let (outcome, at) = ended.expect("the search ends");
        assert_eq!(outcome, Outcome::Capacity);
        assert!(at <= 15, "{at} steps");
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::Capacity);
        let [lo, hi] = c.interval_per_s.unwrap();
        assert!(
            lo < 300.0 * 1.01 && hi > 300.0 * 0.95 && hi / lo - 1.0 <= 0.2,
            "{lo}..{hi}"
        );
        // The first step fails: down by the factor, to the lowest rate.
        let down = vec![step(1, StepKind::Ramp, 100.0, 50, 200)];
        assert_eq!(next_step(&down, &r), Ok((50.0, StepKind::Ramp)));
        let floor = vec![step(1, StepKind::Ramp, 1.0, 50, 200)];
        assert_eq!(next_step(&floor, &r), Err(Outcome::BelowMinRate));
        let top = vec![step(1, StepKind::Ramp, 10_000.0, 2, 200)];
        assert_eq!(next_step(&top, &r), Err(Outcome::AboveMaxRate));
    }

    /// A generator that saturates on a doubling of the ramp, above the server's knee: the
    /// search goes on below its ceiling (0.8 of that rate) and reports the server's
    /// capacity; only a server passing at the ceiling leaves it generator-bound.
    #[test]
    fn a_generator_saturated_above_the_knee_searches_below_its_ceiling() {
        let r = rules();
        let mut steps: Vec<Step> = [100.0, 200.0, 400.0, 800.0, 1600.0]
            .iter()
            .enumerate()
            .map(|(i, &rate)| step(i as u32 + 1, StepKind::Ramp, rate, 2, 200))
            .collect();
        let mut saturated = step(6, StepKind::Ramp, 3200.0, 50, 200);
        saturated.verdict = Verdict::Invalid;
        saturated.generator.utilization = 0.98;
        steps.push(saturated);
        assert!(!conclusion::retry(&steps, &r));
        assert!(conclusion::goes_on_past_invalid(&steps, &r));
        assert_eq!(next_step(&steps, &r), Ok((2560.0, StepKind::Ramp)));
        // The server passes at the ceiling too: nothing left this generator can judge.
        let mut passing = steps.clone();
        passing.push(step(7, StepKind::Ramp, 2560.0, 2, 200));
        assert_eq!(next_step(&passing, &r), Err(Outcome::GeneratorBound));
        // So too at a ceiling that is not a whole rate (0.8 × 2,048 = 1,638.4; steps run at
        // whole rates): the step at 1,638/s is at the ceiling, not one below it to ramp
        // from again (a search on this VM ran 23 steps at 1,638/s before this).
        let mut odd = steps[..5].to_vec();
        let mut s = step(6, StepKind::Ramp, 2048.0, 50, 200);
        s.verdict = Verdict::Invalid;
        s.generator.utilization = 0.95;
        odd.push(s);
        assert_eq!(next_step(&odd, &r), Ok((1638.0, StepKind::Ramp)));
        odd.push(step(7, StepKind::Ramp, 1638.0, 2, 200));
        assert_eq!(next_step(&odd, &r), Err(Outcome::GeneratorBound));
        assert_eq!(
            conclude(&passing, &r, Outcome::GeneratorBound).outcome,
            Outcome::GeneratorBound
        );
        // It fails there: probes between 1,600/s and 2,560/s, never above the ceiling,
        // and a capacity, the saturated step deciding nothing above a valid failure.
        steps.push(step(7, StepKind::Ramp, 2560.0, 50, 200));
        for i in 8..40 {
            match next_step(&steps, &r) {
                Ok((rate, kind)) => {
                    assert!(rate <= 2560.0, "step {i} at {rate}");
                    let ms = if rate <= 2000.0 { 2 } else { 50 };
                    steps.push(step(i, kind, rate, ms, 200));
                }
                Err(o) => {
                    assert_eq!(o, Outcome::Capacity);
                    break;
                }
            }
        }
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::Capacity);
        let cap = c.capacity_per_s.unwrap();
        assert!(cap > 1600.0 && cap < 2560.0, "{cap}");
        // Without the ceiling rule (the step invalid by starvation, the generator's CPU
        // to spare) the search stops as before.
        let mut starved = steps[..5].to_vec();
        let mut s = step(6, StepKind::Ramp, 3200.0, 50, 200);
        s.verdict = Verdict::Invalid;
        s.generator.utilization = 0.3;
        starved.push(s.clone());
        starved.push(s);
        assert!(!conclusion::goes_on_past_invalid(&starved, &r));
    }

    /// A generator starved of CPU at the rate the knee's design asks for, at or above a
    /// rate the server failed validly (steps that disagree near the knee): that step is
    /// run once more, and invalid twice the search stops as generator-bound (exit 3)
    /// instead of being asked for that rate again and again until its time limit (a
    /// search on a busy machine ran 582/s twelve times, "the generator was starved", and
    /// ended with exit 4).
    #[test]
    fn a_rate_invalid_twice_ends_the_search_as_generator_bound() {
        let r = rules();
        // Passes at 500 and 600/s around a failure at 450/s: the steps disagree near
        // the knee, and the design asks for a rate above that failure (588/s).
        let mut steps = vec![
            step(1, StepKind::Ramp, 100.0, 2, 200),
            step(2, StepKind::Ramp, 200.0, 2, 200),
            step(3, StepKind::Ramp, 400.0, 2, 200),
            step(4, StepKind::Ramp, 800.0, 50, 200),
            step(5, StepKind::Probe, 450.0, 50, 200),
            step(6, StepKind::Probe, 600.0, 2, 200),
            step(7, StepKind::Probe, 500.0, 2, 200),
            step(8, StepKind::Probe, 700.0, 50, 200),
        ];
        let (rate, kind) = next_step(&steps, &r).unwrap();
        assert!(rate >= 450.0, "the design asks for {rate}/s");
        let starved = |index: u32| {
            let mut s = step(index, kind, rate, 50, 200);
            s.generator.apart_from_server = Some(true);
            s.generator.runqueue_wait_s = Some(0.5);
            s.judge(&"p90=10ms".parse().unwrap(), &r);
            assert_eq!(s.verdict, Verdict::Invalid, "{}", s.why);
            s
        };
        steps.push(starved(9));
        // Invalid steps are no trials: the design asks for the same rate again.
        assert_eq!(next_step(&steps, &r), Ok((rate, kind)));
        assert!(!ends_on_invalid(&steps, &r));
        steps.push(starved(10));
        assert!(ends_on_invalid(&steps, &r));
        let c = conclude(&steps, &r, Outcome::GeneratorBound);
        assert_eq!(c.outcome, Outcome::GeneratorBound, "{}", c.message);
        assert_eq!(c.generator_bound_at_per_s, Some(rate));
        assert!(c.message.contains("was starved of CPU"), "{}", c.message);
        // Once invalid at a rate, then a valid step elsewhere, then invalid there again:
        // twice too (not re-run a second time).
        let mut apart = steps[..9].to_vec();
        apart.push(step(10, StepKind::Probe, 500.0, 2, 200));
        apart.push(starved(11));
        assert!(!conclusion::retry(&apart, &r));
        assert!(ends_on_invalid(&apart, &r));
        // A plan's steps invalid twice above a valid failure still decide nothing.
        let mut plan: Vec<Step> = steps.clone();
        for s in &mut plan {
            s.kind = StepKind::Plan;
        }
        assert_ne!(
            conclude(&plan, &r, Outcome::TimeLimit).outcome,
            Outcome::GeneratorBound
        );
    }

    /// Passing steps near the capacity whose server cost 885 to 1,250 µs per request
    /// (as in one search on this VM): named; within 5%, or below half the capacity, or
    /// failing: nothing said.
    #[test]
    fn a_drifting_cost_per_request_is_warned_about() {
        let with_cost = |i: u32, rate: f64, us: f64| {
            let mut s = step(i, StepKind::Probe, rate, 2, 200);
            s.server_cpu_us_per_request = Some(us);
            s
        };
        let costs = [885.0, 1212.0, 1250.0, 961.0, 994.0, 1008.0];
        let steps: Vec<Step> = costs
            .iter()
            .enumerate()
            .map(|(i, &us)| with_cost(i as u32 + 1, 780.0, us))
            .collect();
        let w = server_cost_warning(&steps, Some(760.0)).unwrap();
        assert!(w.starts_with("the server's CPU time per answered request varied from 885 to 1250 µs (10th to 90th percentile of 6 passing steps"), "{w}");
        assert_eq!(server_cost_warning(&steps, None), None);
        // Below half the capacity: not near it.
        assert_eq!(server_cost_warning(&steps, Some(2000.0)), None);
        let steady: Vec<Step> = [880.0, 890.0, 900.0, 912.0, 905.0]
            .iter()
            .enumerate()
            .map(|(i, &us)| with_cost(i as u32 + 1, 780.0, us))
            .collect();
        assert_eq!(server_cost_warning(&steady, Some(760.0)), None);
        let mut failing = steps.clone();
        for s in &mut failing[..3] {
            s.verdict = Verdict::Fail;
        }
        assert_eq!(server_cost_warning(&failing, Some(760.0)), None);
    }

    #[test]
    fn stolen_cpu_is_warned_about() {
        let mut steps = vec![
            step(1, StepKind::Ramp, 100.0, 2, 200),
            step(2, StepKind::Ramp, 200.0, 2, 200),
        ];
        let whose = "the server's CPUs";
        assert_eq!(steal_warning(&steps, whose), None);
        steps[0].steal = Some(0.019);
        assert_eq!(steal_warning(&steps, whose), None);
        steps[1].steal = Some(0.121);
        let w = steal_warning(&steps, whose).unwrap();
        assert!(
            w.starts_with("the hypervisor took 12.1% of the server's CPUs during step 2 (200/s)"),
            "{w}"
        );
        assert!(w.contains("in 1 of 2 steps"), "{w}");
    }

    #[test]
    fn steps_are_sized_for_the_samples() {
        let r = rules();
        assert_eq!(step_length(50.0, &r), Duration::from_millis(2200));
        assert_eq!(step_length(1000.0, &r), Duration::from_secs(1));
        assert_eq!(step_length(1.0, &r), Duration::from_secs(10));
        let slo: Slo = "p99=30ms".parse().unwrap();
        assert_eq!(slots_for(1000.0, &slo), 60);
        assert_eq!(slots_for(1.0, &slo), 4);
    }
}
