//! The document of a capacity search (`tlsperf-capacity/1`): the objective, the rules a
//! step is judged by, every step measured (with its corrected-latency and pacing HDR
//! histograms, so that steps of several generator processes merge exactly), and the
//! conclusion drawn from the steps ([`conclude`]: the same function for one run and for
//! merged runs). Schema in docs/json.md.

use serde::{Deserialize, Serialize};

use super::knee::{self, Trial};
use super::numbers::{figure, group};
use super::slo::Slo;
use crate::load::result::Dist;
use crate::stats::HistogramError;

/// Schema name and version written in every capacity result.
pub const SCHEMA: &str = "tlsperf-capacity/1";

/// Why a step was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// Geometric ramp (up until the objective breaks; down when the first step fails).
    Ramp,
    /// A step placed by the sequential design near the knee ([`super::knee::next_rate`]).
    Probe,
    /// A step of a fixed `--plan` (every process runs the same rates at the same
    /// instants).
    Plan,
    /// Bisection between the highest pass and the lowest failure (documents written
    /// before the probability estimate).
    Bisect,
    /// A longer confirmation run (documents written before the probability estimate).
    Confirm,
}

impl StepKind {
    /// `ramp`, `bisect`, `confirm` (as in the document).
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Ramp => "ramp",
            StepKind::Probe => "probe",
            StepKind::Plan => "plan",
            StepKind::Bisect => "bisect",
            StepKind::Confirm => "confirm",
        }
    }
}

/// What a step showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The server met the objective at this rate.
    Pass,
    /// It did not.
    Fail,
    /// The generator could not keep up (late sends or a busy CPU): the step says
    /// nothing about the server.
    Invalid,
}

impl Verdict {
    /// `pass`, `fail`, `invalid`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Invalid => "invalid",
        }
    }
}

/// The rules of the search, recorded in the document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    /// Completed requests a step is sized for ([`Slo::samples_needed`]).
    pub samples_needed: u64,
    /// Shortest step (seconds).
    pub step_min_s: f64,
    /// Longest step (seconds): a step at a low rate may have fewer samples than needed.
    pub step_max_s: f64,
    /// A failing step is invalid when the generator's CPU use reaches this fraction of
    /// the CPUs it may use ([`StepCpu::cpus`]). (The other invalid case, a failure that
    /// disappears once the generator's send lateness is taken out, has no parameter:
    /// [`Step::judge`].)
    pub generator_cpu_max: f64,
    /// The search stops when the capacity's 90% credible interval is this narrow (its
    /// high end ÷ its low end − 1).
    pub resolution: f64,
    /// First rate of the ramp (per second, all generator processes together).
    pub start_rate: f64,
    /// Ramp factor between steps.
    pub factor: f64,
    /// Highest rate tried.
    pub max_rate: f64,
    /// Lowest rate tried (the ramp down stops there).
    pub min_rate: f64,
    /// Each step's warm-up (seconds, at least; [`Step::warmup_s`]): requests due in it
    /// open the connection slots and gather their resumption state, and count in no
    /// figure. 0 in documents written before it existed.
    #[serde(default)]
    pub warmup_s: f64,
}

/// The generator's CPU during a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepCpu {
    /// Worker threads (summed over merged processes).
    pub threads: usize,
    /// CPU seconds (user + system) of the whole process (summed).
    pub cpu_seconds: f64,
    /// CPU seconds ÷ (wall seconds × [`StepCpu::cpus`]); after a merge, the highest of
    /// the processes'.
    pub utilization: f64,
    /// The CPUs the process may use: the least of its worker threads, the CPUs its
    /// affinity allows (`taskset`) and its cgroup CPU quota (the largest of merged
    /// processes'; 0 in documents written before it was recorded).
    #[serde(default)]
    pub cpus: f64,
    /// Seconds its threads waited for a CPU another task held
    /// ([`crate::load::result::GeneratorCpu::runqueue_wait_s`]; summed; absent where
    /// the kernel keeps no such figure and in older documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue_wait_s: Option<f64>,
    /// True when the generator's CPUs and the server's (`--server-pid`) share none
    /// (`taskset`), so that the server cannot be what kept the generator waiting; `None`
    /// without `--server-pid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apart_from_server: Option<bool>,
}

impl StepCpu {
    /// Of the time the generator wanted a CPU, the share it waited for one (`None`
    /// without the figure).
    pub fn waiting_share(&self) -> Option<f64> {
        crate::load::result::waiting_share(self.runqueue_wait_s, self.cpu_seconds)
    }

    /// True when the generator was starved by a third process: it waited for a CPU at
    /// least [`crate::load::result::STARVED_WAIT_SHARE`] of the time it wanted one, on
    /// CPUs the server does not use ([`StepCpu::apart_from_server`]). A generator that
    /// waits for a CPU it shares with a saturating server is the server saturating, and
    /// without `--server-pid` the two cannot be told apart: not starved then.
    pub fn starved(&self) -> bool {
        self.apart_from_server == Some(true)
            && self
                .waiting_share()
                .is_some_and(|s| s >= crate::load::result::STARVED_WAIT_SHARE)
    }
}

/// The server's CPU microseconds per answered request (`--server-pid`) in the judged
/// `steps` that passed at half of `capacity` or more (busy enough for its per-request
/// cost to show, not overloaded), in increasing order.
pub fn costs_near(steps: &[Step], capacity: f64) -> Vec<f64> {
    let mut costs: Vec<f64> = steps
        .iter()
        .filter(|s| s.verdict == Verdict::Pass && s.offered_per_s >= capacity / 2.0)
        .filter_map(|s| s.server_cpu_us_per_request)
        .filter(|c| c.is_finite() && *c > 0.0)
        .collect();
    costs.sort_by(f64::total_cmp);
    costs
}

/// The share of its CPUs from which the server counts as saturated during a step
/// ([`Step::server_saturated`]): a failing step whose generator was starved is then the
/// server's failure, not the generator's. A server that busy for a whole step has no
/// room left: the rate is at or past its knee, however late the generator sent. (One of
/// twenty searches on this VM ended generator-bound at 1,318/s with the server at 99% of
/// its CPU: docs/benchmarks/history/2026-12-02-capacity-pairs-ten.md.)
pub const SERVER_SATURATED: f64 = 0.97;

/// With a shared schedule, a process that reaches a step's instant later than this
/// (seconds) skips the step: its sends would not interleave with the other processes'.
pub const LATE_START_MAX: f64 = 0.1;

/// One measured step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// 1-based position in the search.
    pub index: u32,
    /// Why it ran.
    pub kind: StepKind,
    /// When its first request was due (RFC 3339).
    pub started: String,
    /// Offered rate (requests per second, all generator processes together).
    pub offered_per_s: f64,
    /// The share of the offered rate this document's processes sent (1 for one
    /// process; 1/n for one of n `--rate-share` processes; summed by merge).
    pub share: f64,
    /// Processes whose measurements this step holds.
    pub machines: u32,
    /// The planned length (seconds): requests were due within it, after the warm-up.
    pub length_s: f64,
    /// The warm-up before it (seconds): the step sent at its rate for this long first,
    /// opening its connection slots and their resumption state, and left those requests
    /// out of every figure ([`Rules::warmup_s`]). 0 in documents written before it
    /// existed.
    #[serde(default)]
    pub warmup_s: f64,
    /// Wall seconds from the step's start to the later of its end and its last response
    /// (the load result's `duration_s`; the longest of merged processes').
    pub duration_s: f64,
    /// Connection slots (per process).
    pub connections: u64,
    /// Requests started.
    pub attempted: u64,
    /// Requests due within the step that were never sent (every connection slot of the
    /// process was still waiting for an answer when the step ended): counted as slower
    /// than any bound.
    #[serde(default)]
    pub unsent: u64,
    /// Requests answered.
    pub completed: u64,
    /// Requests failed (no answer, or a timeout).
    pub failed: u64,
    /// Requests answered per second.
    pub achieved_per_s: f64,
    /// Failed ÷ started.
    pub error_rate: f64,
    /// Corrected latency percentiles (ms): from the intended send instant to the end of
    /// the response.
    pub p50_ms: Option<f64>,
    /// 99th percentile (ms).
    pub p99_ms: Option<f64>,
    /// 99.9th percentile (ms).
    pub p999_ms: Option<f64>,
    /// Corrected latency of the answered requests (the HDR histogram the percentiles
    /// come from).
    pub latency_corrected: Option<Dist>,
    /// The generator's pacing lateness ([`crate::load::LoadResult::pacing_lateness`]).
    pub pacing_lateness: Option<Dist>,
    /// Latency of the answered requests from each one's *actual* send instant (as
    /// `tlsperf load`'s `latency`): the corrected latency without the generator's send
    /// lateness, what [`Step::judge`] holds the server to when a failing step's generator
    /// was late.
    #[serde(default)]
    pub latency_from_send: Option<Dist>,
    /// Response body bytes received during the step.
    #[serde(default)]
    pub body_bytes: u64,
    /// Request body bytes sent during the step: `--body-size` bytes for each answered
    /// request (0 for GETs and in older files).
    #[serde(default)]
    pub upload_bytes: u64,
    /// The bodies' goodput over the step, both ways (`body_bytes` and `upload_bytes` ÷
    /// `duration_s`; derived, recomputed after a merge).
    #[serde(default)]
    pub goodput: crate::load::result::Goodput,
    /// The generator's CPU.
    pub generator: StepCpu,
    /// The server's CPU seconds during the step (`--server-pid`).
    pub server_cpu_seconds: Option<f64>,
    /// Seconds the server's threads waited for a CPU during the step (`--server-pid`;
    /// [`crate::load::result::ServerUsage::runqueue_wait_s`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_runqueue_wait_s: Option<f64>,
    /// The server's CPU microseconds per answered request (`--server-pid`).
    pub server_cpu_us_per_request: Option<f64>,
    /// The CPUs the server may use (`--server-pid`: its affinity, `Cpus_allowed_list`);
    /// `None` without it and in older documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<f64>,
    /// The share of the watched CPUs' time that the hypervisor gave to other guests
    /// during the step (`steal` in `/proc/stat`): the CPUs the server may use with
    /// `--server-pid`, else the whole machine; after a merge, the highest of the
    /// processes'. A server whose CPU is stolen stalls, and its tail shows it. `None`
    /// where it cannot be read.
    #[serde(default)]
    pub steal: Option<f64>,
    /// With a shared schedule (`--plan`, `--start-at`): how late this process reached the
    /// step's instant (seconds; the latest of merged processes'). A step reached more
    /// than [`LATE_START_MAX`] late was skipped (no request sent) and is invalid: the
    /// process fell behind the schedule the others kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_start_s: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why (the first bound broken, or why the step is invalid); empty for a pass.
    pub why: String,
    /// False when the step had fewer answered requests than the rule asks for (a low
    /// rate capped by the longest step).
    pub enough_samples: bool,
}

impl Step {
    /// Of the time the server's threads wanted a CPU during the step, the share they
    /// waited for one (`--server-pid`; `None` without the figures).
    pub fn server_waiting_share(&self) -> Option<f64> {
        crate::load::result::waiting_share(self.server_runqueue_wait_s, self.server_cpu_seconds?)
    }

    /// True when the step was skipped: this process reached it more than
    /// [`LATE_START_MAX`] after its instant in the shared schedule.
    pub fn skipped(&self) -> bool {
        self.late_start_s.is_some_and(|l| l > LATE_START_MAX)
    }

    /// The share of the CPUs the server may use that it used during the step
    /// (`server_cpu_seconds` ÷ (`duration_s` × `server_cpus`); `--server-pid`).
    pub fn server_busy(&self) -> Option<f64> {
        let cpus = self.server_cpus.filter(|c| *c > 0.0)?;
        Some(self.server_cpu_seconds? / (self.duration_s.max(1e-9) * cpus))
    }

    /// True when the server used at least [`SERVER_SATURATED`] of the CPUs it may use
    /// during the step: it was at its limit, whatever the generator did.
    pub fn server_saturated(&self) -> bool {
        self.server_busy().is_some_and(|b| b >= SERVER_SATURATED)
    }

    /// True when the server was starved during the step: its threads waited for a CPU
    /// at least [`crate::load::result::STARVED_WAIT_SHARE`] of the time they wanted one
    /// (another process held its CPUs: the generator, if they share them, or a
    /// neighbour).
    pub fn server_starved(&self) -> bool {
        self.server_waiting_share()
            .is_some_and(|s| s >= crate::load::result::STARVED_WAIT_SHARE)
    }

    /// Recomputes what derives from the counts and histograms, then the verdict:
    ///
    /// - **pass**: the objective holds on the corrected latency (from each request's
    ///   intended send instant; failed and unsent requests slower than any bound),
    ///   whatever the generator did (its delay only adds to that latency);
    /// - **invalid** (the generator was the bottleneck): the objective breaks and either
    ///   the generator's CPU reached [`Rules::generator_cpu_max`] of the CPUs it may use
    ///   ([`StepCpu::cpus`]), or it was starved ([`StepCpu::starved`]: its threads waited
    ///   for a CPU at least a fifth of the time they wanted one, however little CPU they
    ///   used) while the server had room ([`Step::server_saturated`] false), or the
    ///   objective *holds* on the latency from each
    ///   request's actual send instant (the same percentiles, failed and unsent
    ///   requests counted the same way): the server answered in time what it was sent,
    ///   and the failure is the generator's send lateness alone;
    /// - **fail**: the objective breaks on both latencies while the generator's CPU had
    ///   room: the server (or the path to it) was slow on the requests as they were
    ///   actually sent. A generator delayed because the server took the CPU they share
    ///   lands here, as the server saturating, not as the generator; so does a starved
    ///   generator's step whose server used at least [`SERVER_SATURATED`] of its CPUs.
    pub fn judge(&mut self, slo: &Slo, rules: &Rules) {
        let secs = self.duration_s.max(1e-9);
        self.achieved_per_s = self.completed as f64 / secs;
        self.goodput = crate::load::result::Goodput {
            down_bytes_per_s: self.body_bytes as f64 / secs,
            up_bytes_per_s: self.upload_bytes as f64 / secs,
        };
        self.error_rate = if self.attempted == 0 {
            0.0
        } else {
            self.failed as f64 / self.attempted as f64
        };
        let q = self.latency_corrected.as_ref().map(|d| d.quantiles);
        let ms = |ns: u64| ns as f64 / 1e6;
        self.p50_ms = q.filter(|q| q.count > 0).map(|q| ms(q.p50_ns));
        self.p99_ms = q.filter(|q| q.count > 0).map(|q| ms(q.p99_ns));
        self.p999_ms = q.filter(|q| q.count > 0).map(|q| ms(q.p999_ns));
        self.server_cpu_us_per_request = self
            .server_cpu_seconds
            .filter(|_| self.completed > 0)
            .map(|s| s * 1e6 / self.completed as f64);
        self.enough_samples = self.completed >= rules.samples_needed;
        // Requests due within the step that no slot was free to send before it ended.
        let due = (self.offered_per_s * self.share * self.length_s).floor() as u64;
        self.unsent = due.saturating_sub(self.attempted);
        let verdict = slo.judge(
            self.latency_corrected.as_ref().map(|d| &d.hdr),
            self.attempted,
            self.failed,
            self.unsent,
        );
        if let Some(late) = self.late_start_s.filter(|&l| l > LATE_START_MAX) {
            self.verdict = Verdict::Invalid;
            self.why = format!(
                "skipped: this process reached the step {late:.2} s after its instant in the \
                 shared schedule (it was stopped or starved of CPU), so it sent nothing rather \
                 than send out of step with the other processes"
            );
            return;
        }
        let busy = self.generator.utilization >= rules.generator_cpu_max;
        let starved = self.generator.starved();
        let late = self.late_note(slo);
        (self.verdict, self.why) = match verdict {
            // A late or busy generator only adds to the corrected latency (and sends in
            // bursts): a pass despite it is a pass.
            None => match (busy, late) {
                (true, _) => (
                    Verdict::Pass,
                    format!(
                        "passed although {} (counted against the server)",
                        self.busy_note()
                    ),
                ),
                (false, Some(l)) => (
                    Verdict::Pass,
                    format!("passed although {l} (counted against the server)"),
                ),
                (false, None) => (Verdict::Pass, String::new()),
            },
            // The generator's own CPU was near what it may use: its sends, and its
            // handling of the answers, may have been the slow part.
            Some(_) if busy => (Verdict::Invalid, self.busy_note()),
            // Another process held the generator's CPUs: its sends and reads were late
            // however little CPU it used.
            // Starved, but the server had no room left: its failure.
            Some(why) if starved && self.server_saturated() => (
                Verdict::Fail,
                format!(
                    "{why}; the generator was starved (its threads waited for a CPU {:.0}% \
                     of the time they wanted one), but the server used {:.0}% of its CPUs: \
                     the server was at its limit",
                    self.generator.waiting_share().unwrap_or(0.0) * 100.0,
                    self.server_busy().unwrap_or(0.0) * 100.0
                ),
            ),
            Some(why) if starved => (
                Verdict::Invalid,
                format!("{why}, but {}", self.starved_note()),
            ),
            Some(why) => {
                // The same objective on the latency from each request's actual send
                // instant: the generator's send lateness taken out.
                let from_send = slo.judge(
                    self.latency_from_send.as_ref().map(|d| &d.hdr),
                    self.attempted,
                    self.failed,
                    self.unsent,
                );
                match from_send {
                    Some(server_why) => (
                        Verdict::Fail,
                        if late.is_some() && server_why != why {
                            format!("{why}; from the actual send instants too: {server_why}")
                        } else {
                            why
                        } + &self.server_starved_note(),
                    ),
                    None => (
                        Verdict::Invalid,
                        format!(
                            "the generator fell behind: {why} on the corrected latency, but \
                             the objective held from each request's actual send instant \
                             ({}); {}",
                            self.sent_latency_words(),
                            late.unwrap_or_else(|| "the generator sent late".into())
                        ),
                    ),
                }
            }
        };
    }

    /// "; the server was starved: …" when it was, else nothing.
    fn server_starved_note(&self) -> String {
        if !self.server_starved() {
            return String::new();
        }
        format!(
            "; the server was starved: its threads waited for a CPU {:.0}% of the time they \
             wanted one ({:.2} s on a run queue: another process held its CPUs), so this \
             failure may be its neighbour's, not its capacity",
            self.server_waiting_share().unwrap_or_default() * 100.0,
            self.server_runqueue_wait_s.unwrap_or_default()
        )
    }

    /// "the generator was starved: it waited for a CPU 64% of the time it wanted one".
    fn starved_note(&self) -> String {
        format!(
            "the generator was starved: its threads waited for a CPU {:.0}% of the time they wanted one (other processes held its CPUs)",
            self.generator.waiting_share().unwrap_or_default() * 100.0
        )
    }

    /// "the generator's CPU was busy 93% of the 1 CPU it may use".
    fn busy_note(&self) -> String {
        format!(
            "the generator's CPU was busy {:.0}% of the {} it may use",
            self.generator.utilization * 100.0,
            cpus_name(self.generator.cpus)
        )
    }

    /// The generator's pacing lateness at the objective's highest percentile, when it
    /// was sending late at all (above a millisecond there), in words.
    fn late_note(&self, slo: &Slo) -> Option<String> {
        let d = self
            .pacing_lateness
            .as_ref()
            .filter(|d| !d.hdr.is_empty())?;
        let b = slo.latency.last()?;
        let l = d.hdr.quantile(b.percentile / 100.0);
        // Worth a note from a tenth of the bound (at least 1 ms) up: less hardly moves
        // the percentile.
        let worth = std::time::Duration::from_secs_f64((b.max_ms / 1e4).max(1e-3));
        (l > worth).then(|| {
            format!(
                "the generator sent late: pacing lateness {} {:.2} ms at {:.0}% of its CPU",
                b.name(),
                l.as_secs_f64() * 1e3,
                self.generator.utilization * 100.0
            )
        })
    }

    /// "p99 12.3 ms from the send" for the invalid message.
    fn sent_latency_words(&self) -> String {
        match &self.latency_from_send {
            Some(d) if !d.hdr.is_empty() => format!(
                "p50 {:.1} ms, p99 {:.1} ms",
                d.quantiles.p50_ns as f64 / 1e6,
                d.quantiles.p99_ns as f64 / 1e6
            ),
            _ => "no answer recorded".into(),
        }
    }
}

/// "1 CPU", "2 CPUs", "0.5 CPUs".
fn cpus_name(c: f64) -> String {
    if c <= 0.0 {
        "CPUs".into()
    } else if (c - 1.0).abs() < 1e-9 {
        "1 CPU".into()
    } else if (c - c.round()).abs() < 1e-9 {
        format!("{c:.0} CPUs")
    } else {
        format!("{c:.2} CPUs")
    }
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A capacity estimated with an interval within the resolution ([`knee`]).
    Capacity,
    /// The generator could not keep up before the server broke the objective: no
    /// server capacity is reported.
    GeneratorBound,
    /// The server met the objective at the highest rate tried.
    AboveMaxRate,
    /// The server broke the objective at the lowest rate tried.
    BelowMinRate,
    /// `--max-time`, the step limit or the end of a `--plan` came before an answer
    /// within the resolution.
    TimeLimit,
    /// Stopped by the user (Ctrl-C, SIGTERM).
    Interrupted,
    /// Every request of a step failed in a way no rate explains (refused, not TLS, not
    /// trusted): the server is not answering, so there is no capacity to find.
    NoAnswer,
}

impl Outcome {
    /// The outcome's name in the document.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Capacity => "capacity",
            Outcome::GeneratorBound => "generator-bound",
            Outcome::AboveMaxRate => "above-max-rate",
            Outcome::BelowMinRate => "below-min-rate",
            Outcome::TimeLimit => "time-limit",
            Outcome::Interrupted => "interrupted",
            Outcome::NoAnswer => "no-answer",
        }
    }
}

/// What the steps say ([`conclude`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conclusion {
    /// How the search ended.
    pub outcome: Outcome,
    /// The capacity: the rate at which a step meets the objective with probability 0.9,
    /// the posterior median ([`knee`]), whenever the steps bound it (a pass and a
    /// failure); the outcome is [`Outcome::Capacity`] when its interval is within the
    /// resolution.
    pub capacity_per_s: Option<f64>,
    /// Its 90% credible interval (per second), whenever the steps bound it (a pass and
    /// a failure), also when it is still wider than the resolution.
    pub interval_per_s: Option<[f64; 2]>,
    /// The highest rate that met the objective.
    pub best_pass_per_s: Option<f64>,
    /// With [`Outcome::GeneratorBound`]: the rate at which the generator could not keep
    /// up.
    pub generator_bound_at_per_s: Option<f64>,
    /// `[lowest failure, highest pass]` when the steps contradict each other ([`disputed`]).
    pub disputed_per_s: Option<[f64; 2]>,
    /// How gradual the knee is ([`knee::Knee::spread`]), whenever the steps bound it.
    pub knee_spread: Option<f64>,
    /// The conclusion in plain words.
    pub message: String,
}

/// Where the steps contradict each other: `[lowest failure, highest pass]` when some
/// step passed at a rate above one that failed (every valid step counts, the shorter
/// ones a confirmation overruled too). A server's latency rises with the rate, so such a
/// pair means that near its knee a run passes or fails by chance (a few stalls in a run
/// decide it), and another search may answer anywhere in that band.
pub fn disputed(steps: &[Step]) -> Option<[f64; 2]> {
    let lowest_fail = steps
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.offered_per_s)
        .min_by(f64::total_cmp)?;
    let highest_pass = steps
        .iter()
        .filter(|s| s.verdict == Verdict::Pass)
        .map(|s| s.offered_per_s)
        .max_by(f64::total_cmp)?;
    (highest_pass > lowest_fail).then_some([lowest_fail, highest_pass])
}

/// The warning for a [`disputed`] band, in plain words.
pub fn disputed_warning(band: [f64; 2]) -> String {
    format!(
        "the steps disagreed between {}/s and {}/s: some passed at a rate above one that \
         failed, so near this server's knee a step passes or fails by chance (the \
         capacity's interval is estimated with that scatter)",
        group(band[0]),
        group(band[1])
    )
}

/// The highest rate that met the objective and the lowest that did not, over the valid
/// steps (invalid ones say nothing about the server). Near a knee that decides by chance
/// the first may lie above the second ([`disputed`]).
pub fn bracket(steps: &[Step]) -> (Option<f64>, Option<f64>) {
    let rates = |v: Verdict| {
        steps
            .iter()
            .filter(move |s| s.verdict == v)
            .map(|s| s.offered_per_s)
    };
    (
        rates(Verdict::Pass).max_by(f64::total_cmp),
        rates(Verdict::Fail).min_by(f64::total_cmp),
    )
}

/// The valid steps as the knee's observations ([`knee::estimate`]).
pub fn trials(steps: &[Step]) -> Vec<Trial> {
    steps
        .iter()
        .filter(|s| s.verdict != Verdict::Invalid)
        .map(|s| Trial {
            rate: s.offered_per_s,
            passed: s.verdict == Verdict::Pass,
        })
        .collect()
}

/// A step's offered rate as a set key: equal rates (`==`, 0 and −0 alike) give equal
/// keys.
fn rate_key(s: &Step) -> u64 {
    (s.offered_per_s + 0.0).to_bits()
}

/// The first invalid step that no later valid step at the same rate replaced, leaving
/// out those at or above the lowest rate that failed validly (the server broke the
/// objective below them: they decide nothing): a step the generator spoiled only by
/// falling behind (not by spending its CPU) is run once more ([`retry`]), and a valid
/// re-run decides that rate instead.
fn undecided_invalid(steps: &[Step]) -> Option<&Step> {
    // From the last step back: the rates a valid step ran at so far are those of valid
    // steps after the one looked at. The earliest such step found last is the first.
    let mut valid_later = std::collections::HashSet::new();
    let mut first = None;
    let lowest_fail = bracket(steps).1;
    for s in steps.iter().rev() {
        if s.skipped() {
            // A step skipped to keep a shared schedule says nothing of the generator's
            // capacity (its warning says why).
            continue;
        }
        if s.verdict == Verdict::Invalid && lowest_fail.is_some_and(|h| s.offered_per_s >= h) {
            // The server already broke the objective, validly, at a rate no higher: a
            // step the generator could not judge up there decides nothing.
            continue;
        }
        if s.verdict == Verdict::Invalid {
            if !valid_later.contains(&rate_key(s)) {
                first = Some(s);
            }
        } else {
            valid_later.insert(rate_key(s));
        }
    }
    first
}

/// Of the lowest rate at which the generator saturated, the fraction the search still
/// runs steps at ([`generator_ceiling`]).
pub const GENERATOR_CEILING: f64 = 0.8;

/// The highest rate this generator can judge: [`GENERATOR_CEILING`] of the lowest rate of
/// a step made invalid by the generator's CPU reaching [`Rules::generator_cpu_max`]
/// (none such: no ceiling). Below it the search goes on, so that a server whose knee lies
/// between its last pass and the rate that saturated the generator still gets its
/// capacity.
pub fn generator_ceiling(steps: &[Step], rules: &Rules) -> Option<f64> {
    steps
        .iter()
        .filter(|s| {
            s.verdict == Verdict::Invalid
                && !s.skipped()
                && s.generator.utilization >= rules.generator_cpu_max
        })
        .map(|s| s.offered_per_s * GENERATOR_CEILING)
        .min_by(f64::total_cmp)
}

/// Whether the search goes on past its last step, an invalid one: that step's rate is at
/// or above a valid failure (it decides nothing), or the generator saturated there with
/// a passing step below its ceiling ([`generator_ceiling`]) left to search from.
pub fn goes_on_past_invalid(steps: &[Step], rules: &Rules) -> bool {
    let Some(last) = steps.last() else {
        return false;
    };
    let (pass, fail) = bracket(steps);
    if fail.is_some_and(|h| last.offered_per_s >= h) {
        return true;
    }
    last.generator.utilization >= rules.generator_cpu_max
        && generator_ceiling(steps, rules)
            .zip(pass)
            .is_some_and(|(ceiling, p)| p < ceiling)
}

/// Whether the search runs the last step again rather than stop as generator-bound: it
/// was invalid only because the generator fell behind (one scheduling stall on a
/// shared machine does that) with its CPU to spare, and it is not itself a re-run.
pub fn retry(steps: &[Step], rules: &Rules) -> bool {
    let Some((last, before)) = steps.split_last() else {
        return false;
    };
    last.verdict == Verdict::Invalid
        && last.generator.utilization < rules.generator_cpu_max
        && !before
            .last()
            .is_some_and(|p| p.verdict == Verdict::Invalid && p.offered_per_s == last.offered_per_s)
}

/// Reads the conclusion off the steps ([`knee`]: the capacity is the rate a step passes
/// with probability 0.9, estimated from every valid step). `unfinished` is how the
/// search ended when the steps alone do not conclude it (time limit, interrupt, a plan
/// run to its end).
pub fn conclude(steps: &[Step], rules: &Rules, unfinished: Outcome) -> Conclusion {
    let (lo, hi) = bracket(steps);
    let rate = |r: f64| format!("{}/s", group(r));
    let estimate = knee::estimate(&trials(steps));
    let mut c = Conclusion {
        outcome: unfinished,
        capacity_per_s: None,
        interval_per_s: estimate.map(|k| k.interval),
        best_pass_per_s: lo,
        generator_bound_at_per_s: None,
        disputed_per_s: disputed(steps),
        knee_spread: estimate.map(|k| k.spread),
        message: String::new(),
    };
    if let Some(bad) = undecided_invalid(steps) {
        c.outcome = Outcome::GeneratorBound;
        c.generator_bound_at_per_s = Some(bad.offered_per_s);
        let busy = bad.generator.utilization >= rules.generator_cpu_max;
        let starved = !busy && bad.generator.starved();
        c.message = format!(
            "the generator, not the server, {} at {} ({}): no server capacity is \
             reported{}; run more generator processes or machines (--rate-share i/n, \
             --plan, --start-at) and merge their results{}",
            if busy {
                "saturated"
            } else if starved {
                "was starved of CPU"
            } else {
                "fell behind"
            },
            rate(bad.offered_per_s),
            bad.why,
            lo.filter(|&l| l < bad.offered_per_s)
                .map_or(String::new(), |l| format!(
                    " (the server met the objective up to {} at least)",
                    rate(l)
                )),
            if busy {
                ""
            } else {
                ", or run it on a machine where other processes do not delay it"
            }
        );
        return c;
    }
    c.capacity_per_s = estimate.map(|k| k.capacity);
    let valid = steps
        .iter()
        .filter(|s| s.verdict != Verdict::Invalid)
        .count();
    let interval = |k: &knee::Knee| {
        format!(
            "{:.0}% credible interval {}–{}",
            knee::INTERVAL * 100.0,
            rate(k.interval[0]),
            rate(k.interval[1])
        )
    };
    match (lo, hi, estimate) {
        (Some(l), None, _) if l >= rules.max_rate => {
            c.outcome = Outcome::AboveMaxRate;
            c.message = format!(
                "the server met the objective at the highest rate tried, {}: its capacity is \
                 higher (raise --max-rate)",
                rate(l)
            );
        }
        (None, Some(h), _) if h <= rules.min_rate => {
            c.outcome = Outcome::BelowMinRate;
            c.message = format!(
                "the server broke the objective even at the lowest rate tried, {}",
                rate(h)
            );
        }
        (_, _, Some(k)) if k.width() <= rules.resolution => {
            c.outcome = Outcome::Capacity;
            c.message = format!(
                "capacity {}: the rate at which a step meets the objective with probability \
                 {:.0}% ({}, from {valid} steps)",
                rate(k.capacity),
                knee::PASS_PROBABILITY * 100.0,
                interval(&k)
            );
        }
        _ => {
            c.message = match (unfinished, lo, hi, estimate) {
                (Outcome::Interrupted, ..) => "interrupted before the search ended".to_string(),
                (_, _, _, Some(k)) => format!(
                    "the steps run leave the capacity at about {} with a {}, wider than \
                     --resolution {:.0}%: a longer search (--max-time, --max-steps) or more \
                     steps near it would narrow it{}",
                    rate(k.capacity),
                    interval(&k),
                    rules.resolution * 100.0,
                    gradual(&k, valid, rules.resolution)
                ),
                (_, Some(l), None, None) => format!(
                    "the search ended before the objective broke (--max-time or --max-steps): \
                     the capacity is at least {}",
                    rate(l)
                ),
                (_, None, Some(h), None) => format!(
                    "the search ended before a step met the objective (--max-time or \
                     --max-steps): the capacity is below {}",
                    rate(h)
                ),
                _ => "the search ended before any step concluded (--max-time or --max-steps)"
                    .to_string(),
            };
        }
    }
    c
}

/// The knee's gradualness as a clause of the message when it explains a wide interval
/// (a spread of [`GRADUAL`] or more), else nothing: its spread; and, when even a knee as
/// gradual as the spread's 5th percentile needs more than the `valid` steps the search
/// ran for an interval within `resolution` whatever the design ([`knee::floor_steps`]),
/// that count.
fn gradual(k: &knee::Knee, valid: usize, resolution: f64) -> String {
    if k.spread < GRADUAL {
        return String::new();
    }
    let needed = knee::floor_steps(k.spread_low, resolution);
    let floor = if needed > valid {
        format!(
            "; the spread is ×{:.2} or more with 95% probability, and on such a knee an \
             interval within {:.0}% takes at least {needed} steps whatever the design, by the \
             Cramér–Rao bound: this search ran {valid}",
            k.spread_low,
            resolution * 100.0
        )
    } else {
        String::new()
    };
    format!(
        " (the knee is gradual: a step's chance to meet the objective falls from 90% to 10% \
         over ×{:.2} of rate, so its 90% point takes many steps to pin down{floor})",
        k.spread
    )
}

/// A knee spread ([`knee::Knee::spread`]) from which the message names the knee as
/// gradual: its 90%-to-10% band then spans 15% of rate or more.
pub const GRADUAL: f64 = 1.15;

/// Everything a capacity search found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// The URL.
    pub target: String,
    /// When the first step was due (RFC 3339).
    pub started: String,
    /// The objective.
    pub slo: Slo,
    /// The search's rules.
    pub rules: Rules,
    /// The options, as given.
    pub options: std::collections::BTreeMap<String, serde_json::Value>,
    /// With `--rate-share i/n`: this process's share (`i/n`); after a merge, the shares
    /// merged, comma-separated.
    pub rate_share: Option<String>,
    /// Processes merged into this document (1 for a single run).
    pub machines: u32,
    /// How the search ended.
    pub outcome: Outcome,
    /// The capacity (per second): the rate at which a step meets the objective with
    /// probability 0.9 ([`knee`]), whenever the steps bound it; outcome `capacity` when
    /// its interval is within the resolution. (Documents written before the probability
    /// estimate: the confirmed highest pass, only with outcome `capacity`.)
    pub capacity_per_s: Option<f64>,
    /// The capacity's 90% credible interval (per second), whenever the steps bound it.
    /// (Documents written before the probability estimate: `[highest pass, lowest
    /// failure]`; `compare` and `merge` recompute it from the steps.)
    pub interval_per_s: Option<[f64; 2]>,
    /// The highest rate that met the objective.
    pub best_pass_per_s: Option<f64>,
    /// With outcome `generator-bound`: the rate at which the generator could not keep
    /// up.
    pub generator_bound_at_per_s: Option<f64>,
    /// `[lowest failure, highest pass]` when some step passed at a rate above one that
    /// failed ([`disputed`]); absent when the steps agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disputed_per_s: Option<[f64; 2]>,
    /// How gradual the knee is, whenever the steps bound it: the factor of rate (≥ 1)
    /// over which a step's chance to meet the objective falls from 90% to 10%, at the
    /// posterior median of the curve's slope ([`knee::Knee::spread`]). Absent from
    /// documents written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knee_spread: Option<f64>,
    /// The conclusion in plain words.
    pub message: String,
    /// Every step, in the order run. Read back, at most [`MAX_STEPS`].
    #[serde(deserialize_with = "bounded_steps")]
    pub steps: Vec<Step>,
    /// What makes figures of this result doubtful, in plain words.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// `--link`: what the link did during the run (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_counters: Option<crate::link::LinkCounters>,
}

/// The largest knee spread a document may state: the model's gradual end (s = 0.2)
/// spreads over ×2.61; a little room above it.
pub const MAX_SPREAD: f64 = 3.0;

/// The most steps a capacity result may hold: twice the most a search runs
/// (`capacity --max-steps` is at most 1,000, and a merge keeps only the steps its
/// results share). Each step holds three histograms, so a document cannot declare
/// tens of thousands.
pub const MAX_STEPS: usize = 2_000;

/// The highest rate (requests per second) a capacity search may try, and a capacity
/// document may name: the open-loop ceiling of `load --rate` ([`crate::load::MAX_RATE`]).
pub const MAX_RATE_PER_S: f64 = crate::load::MAX_RATE;

/// Reads `steps`, refusing more than [`MAX_STEPS`] before decoding the next one.
fn bounded_steps<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Step>, D::Error> {
    struct Bounded;
    impl<'de> serde::de::Visitor<'de> for Bounded {
        type Value = Vec<Step>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_STEPS} steps")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            loop {
                if out.len() == MAX_STEPS {
                    // One more is one too many; the end of the list is fine.
                    return match seq.next_element::<serde::de::IgnoredAny>()? {
                        None => Ok(out),
                        Some(_) => Err(serde::de::Error::custom(format!(
                            "more than {MAX_STEPS} steps (a search runs at most 1,000)"
                        ))),
                    };
                }
                match seq.next_element::<Step>()? {
                    Some(step) => out.push(step),
                    None => return Ok(out),
                }
            }
        }
    }
    d.deserialize_seq(Bounded)
}

/// `Err(what)` unless `x` is a finite number within `lo ..= hi`.
fn within(x: f64, lo: f64, hi: f64, what: impl FnOnce() -> String) -> Result<(), String> {
    if x.is_finite() && (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(what())
    }
}

/// `Err` unless `r` is a rate a search can have tried: 0 ..= [`MAX_RATE_PER_S`] (0 only
/// where `positive` is false: a tiny start rate rounds to 0/s, a step that can only
/// fail).
fn check_rate(name: &str, r: f64, positive: bool) -> Result<(), String> {
    let ok = r.is_finite() && r <= MAX_RATE_PER_S && if positive { r > 0.0 } else { r >= 0.0 };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name} {}/s is not a rate a search can have tried ({} 1,000,000,000/s)",
            figure(r),
            if positive {
                "above 0/s, at most"
            } else {
                "0/s ..="
            }
        ))
    }
}

/// `Err` unless `secs` is a duration: finite, not negative (above zero with
/// `positive`), and within what a duration holds.
fn check_secs(name: &str, secs: f64, positive: bool) -> Result<(), String> {
    let ok = if positive { secs > 0.0 } else { secs >= 0.0 }
        && std::time::Duration::try_from_secs_f64(secs).is_ok();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name} {} s is not a duration ({})",
            figure(secs),
            if positive {
                "above zero"
            } else {
                "zero or more"
            }
        ))
    }
}

impl Rules {
    /// Checks the rules against what `capacity`'s flags accept: rates above zero and at
    /// most [`MAX_RATE_PER_S`] (lowest ≤ start ≤ highest), a factor above 1 and at most
    /// 10, a resolution and a CPU limit within (0, 1), step lengths above zero (the
    /// shortest not above the longest), a step sized for at least one answer.
    pub fn validate(&self) -> Result<(), String> {
        check_rate("start_rate", self.start_rate, true)?;
        check_rate("max_rate", self.max_rate, true)?;
        check_rate("min_rate", self.min_rate, true)?;
        if !(self.min_rate <= self.start_rate && self.start_rate <= self.max_rate) {
            return Err(format!(
                "the rates are out of order: min_rate {} ≤ start_rate {} ≤ max_rate {} \
                 does not hold",
                figure(self.min_rate),
                figure(self.start_rate),
                figure(self.max_rate)
            ));
        }
        if !(self.factor.is_finite() && self.factor > 1.0 && self.factor <= 10.0) {
            return Err(format!(
                "factor {}: must be above 1 and at most 10",
                figure(self.factor)
            ));
        }
        if !(self.resolution.is_finite() && self.resolution > 0.0 && self.resolution < 1.0) {
            return Err(format!(
                "resolution {}: must be between 0 and 1",
                figure(self.resolution)
            ));
        }
        let cpu = self.generator_cpu_max;
        if !(cpu.is_finite() && cpu > 0.0 && cpu <= 1.0) {
            return Err(format!(
                "generator_cpu_max {}: must be above 0 and at most 1",
                figure(cpu)
            ));
        }
        check_secs("step_min_s", self.step_min_s, true)?;
        check_secs("step_max_s", self.step_max_s, true)?;
        check_secs("warmup_s", self.warmup_s, false)?;
        if self.step_min_s > self.step_max_s {
            return Err(format!(
                "step_min_s {} is longer than step_max_s {}",
                figure(self.step_min_s),
                figure(self.step_max_s)
            ));
        }
        if self.samples_needed == 0 {
            return Err("samples_needed is 0 (a step is sized for at least one answer)".into());
        }
        Ok(())
    }
}

impl Step {
    /// Checks what one process (or `machines` merged processes, of at most `machines`
    /// in the document) can have measured: a rate within [`check_rate`]'s range, a
    /// share above zero and at most one per process, durations that are durations,
    /// completed + failed = attempted, shares and CPU figures that are not negative.
    pub fn validate(&self, machines: u32) -> Result<(), String> {
        check_rate("offered_per_s", self.offered_per_s, false)?;
        if self.machines == 0 || self.machines > machines {
            return Err(format!(
                "machines {} is not within 1 ..= the document's {machines}",
                self.machines
            ));
        }
        within(
            self.share,
            f64::MIN_POSITIVE,
            f64::from(self.machines),
            || {
                format!(
                    "share {} of the offered rate is not within 0 ..= 1 a process (machines {})",
                    self.share, self.machines
                )
            },
        )?;
        check_secs("length_s", self.length_s, true)?;
        check_secs("duration_s", self.duration_s, false)?;
        if !(1..=100_000).contains(&self.connections) {
            return Err(format!(
                "connections {} is not within 1 ..= 100,000",
                self.connections
            ));
        }
        if self.completed.checked_add(self.failed) != Some(self.attempted) {
            return Err(format!(
                "{} completed + {} failed is not the {} attempted",
                self.completed, self.failed, self.attempted
            ));
        }
        let not_negative = |name: &str, x: f64| {
            within(x, 0.0, f64::MAX, || {
                format!("{name} {} is not a figure ≥ 0", figure(x))
            })
        };
        not_negative("achieved_per_s", self.achieved_per_s)?;
        within(self.error_rate, 0.0, 1.0, || {
            format!(
                "error_rate {} is not within 0 ..= 1",
                figure(self.error_rate)
            )
        })?;
        for (name, v) in [
            ("p50_ms", self.p50_ms),
            ("p99_ms", self.p99_ms),
            ("p999_ms", self.p999_ms),
            ("server_cpu_us_per_request", self.server_cpu_us_per_request),
        ] {
            if let Some(v) = v {
                not_negative(name, v)?;
            }
        }
        if let Some(w) = self.server_runqueue_wait_s {
            check_secs("server_runqueue_wait_s", w, false)?;
        }
        if let Some(c) = self.server_cpu_seconds {
            check_secs("server_cpu_seconds", c, false)?;
        }
        if let Some(l) = self.late_start_s {
            check_secs("late_start_s", l, false)?;
        }
        check_secs("warmup_s", self.warmup_s, false)?;
        if let Some(c) = self.server_cpus {
            within(c, 1.0, 65_536.0, || {
                format!("server_cpus {} is not within 1 ..= 65536", figure(c))
            })?;
        }
        if let Some(st) = self.steal {
            within(st, 0.0, 1.0, || {
                format!("steal {} is not within 0 ..= 1", figure(st))
            })?;
        }
        let g = &self.generator;
        check_secs("generator.cpu_seconds", g.cpu_seconds, false)?;
        not_negative("generator.utilization", g.utilization)?;
        not_negative("generator.cpus", g.cpus)?;
        if let Some(w) = g.runqueue_wait_s {
            check_secs("generator.runqueue_wait_s", w, false)?;
        }
        Ok(())
    }
}

impl CapacityResult {
    /// Checks a result read from a document against what a search (or a merge of
    /// searches) can have written: the objective ([`Slo::validate`]), the rules
    /// ([`Rules::validate`]), each step ([`Step::validate`]), the shares
    /// (`i/n` as `--rate-share` takes it, each once, no more than the processes), and a
    /// conclusion that fits its outcome: a capacity only with outcome `capacity`, above
    /// zero and within its interval `[highest pass, lowest failure]`, which rises. `Err`
    /// is a plain sentence naming the field.
    pub fn validate(&self) -> Result<(), String> {
        self.slo.validate().map_err(|e| format!("slo: {e}"))?;
        self.rules.validate().map_err(|e| format!("rules: {e}"))?;
        if self.machines == 0 {
            return Err("machines is 0 (at least 1)".into());
        }
        if let Some(l) = &self.link_counters {
            l.check()?;
        }
        if let Some(shares) = &self.rate_share {
            let mut seen = std::collections::HashSet::new();
            for (n, part) in shares.split(',').enumerate() {
                if n as u64 >= u64::from(self.machines) {
                    return Err(format!(
                        "rate_share lists more shares than the {} processes merged",
                        self.machines
                    ));
                }
                let share: crate::load::share::RateShare =
                    part.parse().map_err(|e| format!("rate_share {e}"))?;
                if !seen.insert((share.i, share.n)) {
                    return Err(format!("rate_share lists {share} twice"));
                }
            }
        }
        let rate = |name: &str, r: Option<f64>| r.map_or(Ok(()), |r| check_rate(name, r, true));
        rate("capacity_per_s", self.capacity_per_s)?;
        rate("best_pass_per_s", self.best_pass_per_s)?;
        if let Some(r) = self.generator_bound_at_per_s {
            check_rate("generator_bound_at_per_s", r, false)?;
        }
        if let Some([lo, hi]) = self.interval_per_s {
            check_rate("interval_per_s", lo, true)?;
            check_rate("interval_per_s", hi, true)?;
            if lo >= hi {
                return Err(format!(
                    "interval_per_s [{}, {}]: the highest pass is not below the lowest \
                     failure",
                    figure(lo),
                    figure(hi)
                ));
            }
        }
        if let Some([lo, hi]) = self.disputed_per_s {
            check_rate("disputed_per_s", lo, false)?;
            check_rate("disputed_per_s", hi, true)?;
            if lo >= hi {
                return Err(format!(
                    "disputed_per_s [{}, {}]: the highest pass is not above the lowest \
                     failure",
                    figure(lo),
                    figure(hi)
                ));
            }
        }
        if let Some(x) = self.knee_spread
            && !(x.is_finite() && (1.0..=MAX_SPREAD).contains(&x))
        {
            return Err(format!(
                "knee_spread {}: not a factor between 1 and {MAX_SPREAD}",
                figure(x)
            ));
        }
        match (self.outcome, self.capacity_per_s, self.interval_per_s) {
            (
                Outcome::Capacity | Outcome::TimeLimit | Outcome::Interrupted,
                Some(c),
                Some([lo, hi]),
            ) => {
                if !(lo..=hi).contains(&c) {
                    return Err(format!(
                        "capacity_per_s {} is outside its own interval_per_s [{}, {}]",
                        figure(c),
                        figure(lo),
                        figure(hi)
                    ));
                }
            }
            (Outcome::Capacity, None, _) => {
                return Err("outcome capacity without a capacity_per_s".into());
            }
            (Outcome::Capacity, Some(_), None) => {
                return Err("outcome capacity without an interval_per_s".into());
            }
            (Outcome::TimeLimit | Outcome::Interrupted, Some(_), None) => {
                return Err("a capacity_per_s without its interval_per_s".into());
            }
            (other, Some(_), _) => {
                return Err(format!(
                    "capacity_per_s is given but the outcome is {}",
                    other.name()
                ));
            }
            (_, None, _) => {}
        }
        for (i, s) in self.steps.iter().enumerate() {
            s.validate(self.machines)
                .map_err(|e| format!("step {} of {}: {e}", i + 1, self.steps.len()))?;
        }
        Ok(())
    }

    /// Sets the conclusion fields from `c`.
    pub fn set_conclusion(&mut self, c: Conclusion) {
        self.outcome = c.outcome;
        self.capacity_per_s = c.capacity_per_s;
        self.interval_per_s = c.interval_per_s;
        self.best_pass_per_s = c.best_pass_per_s;
        self.generator_bound_at_per_s = c.generator_bound_at_per_s;
        self.disputed_per_s = c.disputed_per_s;
        self.knee_spread = c.knee_spread;
        self.message = c.message;
        if let Some(band) = self.disputed_per_s {
            self.warnings.push(disputed_warning(band));
        }
    }

    /// A copy of everything but the steps (left empty): for a merge that copies only
    /// the steps it keeps.
    fn clone_without_steps(&self) -> CapacityResult {
        CapacityResult {
            schema: self.schema.clone(),
            target: self.target.clone(),
            started: self.started.clone(),
            slo: self.slo.clone(),
            rules: self.rules.clone(),
            options: self.options.clone(),
            rate_share: self.rate_share.clone(),
            machines: self.machines,
            outcome: self.outcome,
            capacity_per_s: self.capacity_per_s,
            interval_per_s: self.interval_per_s,
            best_pass_per_s: self.best_pass_per_s,
            generator_bound_at_per_s: self.generator_bound_at_per_s,
            disputed_per_s: self.disputed_per_s,
            knee_spread: self.knee_spread,
            message: self.message.clone(),
            steps: Vec::new(),
            warnings: self.warnings.clone(),
            link_counters: self.link_counters.clone(),
        }
    }
}

/// Capacity results that cannot be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// Made with other settings than the first.
    #[error(
        "capacity result {index} was made with other settings than result 1 ({what}): the \
         processes of one search share the URL, --slo and search options"
    )]
    Mixed {
        /// 1-based position.
        index: usize,
        /// What differs.
        what: String,
    },
    /// Two results of the same process share.
    #[error(
        "capacity results {first} and {index} are both share {share}: each process of a \
         shared search has its own --rate-share i/n"
    )]
    SameShare {
        /// 1-based position of the first.
        first: usize,
        /// 1-based position of the second.
        index: usize,
        /// The share.
        share: String,
    },
    /// No step in common.
    #[error("the searches diverged from their first step: nothing to merge step by step")]
    NoCommonStep,
    /// Histograms did not merge.
    #[error(transparent)]
    Histogram(#[from] HistogramError),
    /// A sum that a count cannot hold: refused rather than wrapped.
    #[error("the merged {what} would be more than a count holds (adding result {index})")]
    Overflow {
        /// The count.
        what: String,
        /// 1-based position of the result that overflowed it.
        index: usize,
    },
}

impl MergeError {
    /// The 1-based position of the result the error is about, when it is about one.
    pub fn index(&self) -> Option<usize> {
        match self {
            MergeError::Mixed { index, .. }
            | MergeError::SameShare { index, .. }
            | MergeError::Overflow { index, .. } => Some(*index),
            _ => None,
        }
    }
}

impl crate::error::Classify for MergeError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// Merges `b` into `a` ([`Dist::merge`]: a total a histogram cannot hold is refused).
fn merge_dist(a: &mut Option<Dist>, b: &Option<Dist>) -> Result<(), HistogramError> {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y)?,
        (None, Some(y)) => *a = Some(y.clone()),
        _ => {}
    }
    Ok(())
}

/// Combines the results of the processes of one shared search (`--rate-share i/n`,
/// started together with `--start-at`) step by step: counts add up, histograms merge
/// exactly, CPU seconds add up, each step is judged again on the merged figures and the
/// conclusion drawn again. Each process decided its next step on its own measurements;
/// where their searches diverged (a step at another rate), only the steps before are
/// merged, and a warning says so. Results of another URL, objective or search rules,
/// or two of the same share, are refused, as is a sum a count cannot hold (it is never
/// wrapped). Time and memory are linear in the results (the results are expected
/// valid: [`CapacityResult::validate`], as every reader checks).
pub fn merge(results: &[CapacityResult]) -> Result<CapacityResult, MergeError> {
    let (first, rest) = results.split_first().ok_or(MergeError::Empty)?;
    let shares = shares(first, results)?;
    let common = common_steps(first, rest);
    if common == 0 {
        return Err(MergeError::NoCommonStep);
    }
    let longest = results.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    let mut m = CapacityResult {
        steps: first.steps[..common].to_vec(),
        ..first.clone_without_steps()
    };
    for (i, r) in rest.iter().enumerate() {
        let index = i + 2;
        m.machines = m
            .machines
            .checked_add(r.machines)
            .ok_or_else(|| overflow("machines", index))?;
        m.link_counters = match (m.link_counters.take(), &r.link_counters) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            (a, b) => a.or_else(|| b.clone()),
        };
        if r.started < m.started {
            m.started.clone_from(&r.started);
        }
        for (a, b) in m.steps.iter_mut().zip(&r.steps) {
            add_step(a, b, index)?;
        }
    }
    m.rate_share = (!shares.is_empty()).then(|| shares.join(","));
    let share_sum: f64 = m.steps.first().map_or(1.0, |s| s.share);
    m.warnings.clear();
    if (share_sum - 1.0).abs() > 1e-6 {
        m.warnings.push(format!(
            "the merged processes sent {:.0}% of the offered rate (shares {}): a share is \
             missing",
            share_sum * 100.0,
            m.rate_share.as_deref().unwrap_or("none")
        ));
    }
    if common < longest {
        m.warnings.push(format!(
            "the processes' searches diverged after step {common} (each decided on its own \
             measurements): only steps 1–{common} are merged"
        ));
    }
    for s in &mut m.steps {
        s.judge(&m.slo, &m.rules);
    }
    let unfinished = results
        .iter()
        .map(|r| r.outcome)
        .find(|o| matches!(o, Outcome::Interrupted | Outcome::TimeLimit))
        .unwrap_or(Outcome::TimeLimit);
    let c = conclude(&m.steps, &m.rules, unfinished);
    m.set_conclusion(c);
    Ok(m)
}

/// The `--rate-share` parts of the results, in order, once all are known to be of one
/// search (URL, objective, rules) and no part is taken twice.
fn shares(first: &CapacityResult, results: &[CapacityResult]) -> Result<Vec<String>, MergeError> {
    let mut shares: Vec<String> = Vec::new();
    let mut owner: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, r) in results.iter().enumerate() {
        let what = if r.target != first.target {
            Some(format!("target {} vs {}", r.target, first.target))
        } else if r.slo != first.slo {
            Some(format!("--slo {} vs {}", r.slo, first.slo))
        } else if r.rules != first.rules {
            Some("search rules (--start-rate, --max-rate, --step-min…)".into())
        } else {
            None
        };
        if let Some(what) = what {
            return Err(MergeError::Mixed { index: i + 1, what });
        }
        if let Some(s) = &r.rate_share {
            for part in s.split(',') {
                if let Some(f) = owner.get(part) {
                    return Err(MergeError::SameShare {
                        first: *f,
                        index: i + 1,
                        share: part.to_string(),
                    });
                }
                owner.insert(part.to_string(), i + 1);
                shares.push(part.to_string());
            }
        }
    }
    Ok(shares)
}

/// How many first steps every search took alike (same kind, same offered rate).
fn common_steps(first: &CapacityResult, rest: &[CapacityResult]) -> usize {
    let mut common = first.steps.len();
    for r in rest {
        common = common.min(
            first
                .steps
                .iter()
                .zip(&r.steps)
                .take_while(|(a, b)| a.kind == b.kind && a.offered_per_s == b.offered_per_s)
                .count(),
        );
    }
    common
}

/// A count of the `index`th result (from 1) that the merged one cannot hold.
fn overflow(what: &str, index: usize) -> MergeError {
    MergeError::Overflow {
        what: what.to_string(),
        index,
    }
}

/// Adds step `b` of the `index`th result (from 1) to the merged step `a`: shares,
/// counts and CPU seconds add up, histograms merge, the longest duration and the worst
/// delays are kept, a server's figures only when one process sampled them.
fn add_step(a: &mut Step, b: &Step, index: usize) -> Result<(), MergeError> {
    let over = |what: &str| overflow(what, index);
    a.share += b.share;
    a.machines = a
        .machines
        .checked_add(b.machines)
        .ok_or_else(|| over("machines of a step"))?;
    if b.started < a.started {
        a.started.clone_from(&b.started);
    }
    a.duration_s = a.duration_s.max(b.duration_s);
    a.connections = a.connections.max(b.connections);
    a.attempted = a
        .attempted
        .checked_add(b.attempted)
        .ok_or_else(|| over("requests attempted"))?;
    a.completed = a
        .completed
        .checked_add(b.completed)
        .ok_or_else(|| over("requests completed"))?;
    a.failed = a
        .failed
        .checked_add(b.failed)
        .ok_or_else(|| over("requests failed"))?;
    a.body_bytes = a
        .body_bytes
        .checked_add(b.body_bytes)
        .ok_or_else(|| over("body bytes"))?;
    a.upload_bytes = a
        .upload_bytes
        .checked_add(b.upload_bytes)
        .ok_or_else(|| over("upload bytes"))?;
    merge_dist(&mut a.latency_corrected, &b.latency_corrected)?;
    merge_dist(&mut a.pacing_lateness, &b.pacing_lateness)?;
    merge_dist(&mut a.latency_from_send, &b.latency_from_send)?;
    a.generator.threads = a
        .generator
        .threads
        .checked_add(b.generator.threads)
        .ok_or_else(|| over("generator threads"))?;
    a.generator.cpus = a.generator.cpus.max(b.generator.cpus);
    a.generator.cpu_seconds += b.generator.cpu_seconds;
    if !a.generator.cpu_seconds.is_finite() {
        return Err(over("generator CPU seconds"));
    }
    a.generator.utilization = a.generator.utilization.max(b.generator.utilization);
    a.generator.runqueue_wait_s = match (a.generator.runqueue_wait_s, b.generator.runqueue_wait_s) {
        (Some(x), Some(y)) => Some(x + y),
        _ => None,
    };
    a.late_start_s = match (a.late_start_s, b.late_start_s) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    a.steal = match (a.steal, b.steal) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    // One server's CPU: kept when a single process sampled it.
    a.server_cpu_seconds = match (a.server_cpu_seconds, b.server_cpu_seconds) {
        (Some(x), None) | (None, Some(x)) => Some(x),
        _ => None,
    };
    a.server_runqueue_wait_s = match (a.server_runqueue_wait_s, b.server_runqueue_wait_s) {
        (Some(x), None) | (None, Some(x)) => Some(x),
        _ => None,
    };
    a.server_cpus = match (a.server_cpus, b.server_cpus) {
        (Some(x), None) | (None, Some(x)) => Some(x),
        _ => None,
    };
    Ok(())
}

impl crate::doc::Document for CapacityResult {
    const SCHEMA: &'static str = SCHEMA;
    const NAME: &'static str = "tlsperf capacity result";

    /// [`CapacityResult::validate`].
    fn validate(&self) -> Result<(), String> {
        CapacityResult::validate(self)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::LatencyHistogram;

    pub(crate) fn rules() -> Rules {
        Rules {
            samples_needed: 100,
            step_min_s: 1.0,
            step_max_s: 10.0,
            generator_cpu_max: 0.9,
            resolution: 0.2,
            start_rate: 100.0,
            factor: 2.0,
            max_rate: 10_000.0,
            min_rate: 1.0,
            warmup_s: 0.0,
        }
    }

    /// A result of `steps` (objective p90=10ms, [`rules`]), concluded as a search that
    /// ended on its time limit would be.
    pub(crate) fn result_of(steps: Vec<Step>) -> CapacityResult {
        let rules = rules();
        let c = conclude(&steps, &rules, Outcome::TimeLimit);
        let mut r = CapacityResult {
            schema: crate::capacity::SCHEMA.into(),
            target: "https://x/".into(),
            started: String::new(),
            slo: "p90=10ms".parse().unwrap(),
            rules,
            options: Default::default(),
            rate_share: None,
            machines: 1,
            outcome: Outcome::TimeLimit,
            capacity_per_s: None,
            interval_per_s: None,
            best_pass_per_s: None,
            generator_bound_at_per_s: None,
            disputed_per_s: None,
            knee_spread: None,
            message: String::new(),
            steps,
            warnings: vec![],
            link_counters: None,
        };
        r.set_conclusion(c);
        r
    }

    /// A search's steps at a sharp knee: a ramp step at `lo` ÷ 2, then steps passing
    /// at and up to 20% below `lo` and failing at and up to 20% above `hi`, twice each.
    pub(crate) fn knee_steps(lo: f64, hi: f64) -> Vec<Step> {
        let mut steps = vec![step(1, StepKind::Ramp, lo / 2.0, 2, 200)];
        for _ in 0..2 {
            for f in [0.8, 0.9, 0.95, 1.0] {
                let i = steps.len() as u32 + 1;
                steps.push(step(i, StepKind::Probe, lo * f, 2, 200));
                steps.push(step(i + 1, StepKind::Probe, hi / f, 50, 200));
            }
        }
        steps
    }

    /// A step at `rate` with `n` answers of `ms` each, judged against p90=10ms.
    pub(crate) fn step(index: u32, kind: StepKind, rate: f64, ms: u64, n: u64) -> Step {
        let mut h = LatencyHistogram::new();
        let mut late = LatencyHistogram::new();
        for _ in 0..n {
            h.record_ns(ms * 1_000_000).unwrap();
            late.record_ns(10_000).unwrap();
        }
        let mut s = Step {
            index,
            kind,
            started: "2026-01-01T00:00:00Z".into(),
            offered_per_s: rate,
            share: 1.0,
            machines: 1,
            length_s: n as f64 / rate,
            warmup_s: 0.0,
            duration_s: n as f64 / rate,
            connections: 4,
            attempted: n,
            unsent: 0,
            completed: n,
            failed: 0,
            achieved_per_s: 0.0,
            error_rate: 0.0,
            p50_ms: None,
            p99_ms: None,
            p999_ms: None,
            latency_corrected: Some(Dist::of(h.clone())),
            pacing_lateness: Some(Dist::of(late)),
            latency_from_send: Some(Dist::of(h)),
            body_bytes: 0,
            upload_bytes: 0,
            goodput: Default::default(),
            generator: StepCpu {
                threads: 1,
                cpu_seconds: 0.1,
                utilization: 0.1,
                cpus: 1.0,
                runqueue_wait_s: None,
                apart_from_server: None,
            },
            server_cpu_seconds: None,
            server_runqueue_wait_s: None,
            server_cpus: None,
            server_cpu_us_per_request: None,
            steal: None,
            late_start_s: None,
            verdict: Verdict::Pass,
            why: String::new(),
            enough_samples: true,
        };
        s.judge(&"p90=10ms".parse().unwrap(), &rules());
        s
    }

    /// A search whose steps pass and fail by chance over a wide band (the rates and
    /// verdicts of a recorded search against `tlsperf serve`, 2026-12-02, pair 1-1)
    /// ends wide and names the knee as gradual, with its spread; a sharp knee's message
    /// does not.
    #[test]
    fn a_wide_interval_from_a_gradual_knee_says_so() {
        let r = rules();
        let recorded: [(f64, bool); 30] = [
            (100.0, true),
            (200.0, true),
            (400.0, true),
            (800.0, true),
            (1600.0, false),
            (1130.0, true),
            (1318.0, false),
            (1137.0, false),
            (1043.0, true),
            (1039.0, true),
            (1048.0, true),
            (1123.0, true),
            (1125.0, true),
            (1231.0, false),
            (1108.0, true),
            (1121.0, true),
            (1118.0, false),
            (1072.0, true),
            (1096.0, true),
            (1117.0, false),
            (1055.0, false),
            (1019.0, true),
            (1025.0, true),
            (1030.0, true),
            (1024.0, true),
            (1032.0, false),
            (997.0, true),
            (1001.0, true),
            (1008.0, true),
            (1012.0, false),
        ];
        // Probes in order: a pass at p90 2 ms, a failure at 50 ms (against 10 ms).
        let probes = |verdicts: &mut dyn Iterator<Item = (f64, bool)>| -> Vec<Step> {
            verdicts
                .enumerate()
                .map(|(i, (rate, pass))| {
                    step(
                        i as u32 + 1,
                        StepKind::Probe,
                        rate,
                        if pass { 2 } else { 50 },
                        200,
                    )
                })
                .collect()
        };
        let steps = probes(&mut recorded.iter().copied());
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::TimeLimit, "{}", c.message);
        let spread = c.knee_spread.unwrap();
        assert!(spread > 1.2, "{spread}");
        assert!(c.message.contains("the knee is gradual"), "{}", c.message);
        assert!(
            c.message.contains(&format!("over ×{spread:.2} of rate")),
            "{}",
            c.message
        );
        // Even at the spread's 5th percentile (×1.18), this knee would let an interval
        // within 20% come from fewer than the 30 steps run: no floor is named.
        let low = knee::estimate(&trials(&steps)).unwrap().spread_low;
        assert!(knee::floor_steps(low, 0.2) <= 30, "{low}");
        assert!(!c.message.contains("Cramér–Rao"), "{}", c.message);
        // Passes thinning out from 400/s to 1,600/s, four steps at each rate: a knee
        // gradual enough, even at the 5th percentile of its spread, that an interval
        // within 20% takes more steps than were run, whatever the design.
        let verdicts = [
            (400.0, "PPPP"),
            (500.0, "PPPF"),
            (600.0, "PPFP"),
            (700.0, "PFPP"),
            (800.0, "PFPF"),
            (1000.0, "FPFP"),
            (1200.0, "FPFF"),
            (1400.0, "FFPF"),
            (1600.0, "FFFF"),
        ];
        let wide = probes(
            &mut [(100.0, "P"), (200.0, "P"), (300.0, "P")]
                .iter()
                .chain(&verdicts)
                .flat_map(|&(rate, vs)| vs.chars().map(move |v| (rate, v == 'P'))),
        );
        let c = conclude(&wide, &r, Outcome::TimeLimit);
        let k = knee::estimate(&trials(&wide)).unwrap();
        let floor = format!(
            "the spread is ×{:.2} or more with 95% probability, and on such a knee an \
             interval within 20% takes at least {} steps whatever the design, by the \
             Cramér–Rao bound: this search ran 39",
            k.spread_low,
            knee::floor_steps(k.spread_low, 0.2)
        );
        assert!(knee::floor_steps(k.spread_low, 0.2) > 39, "{k:?}");
        assert!(c.message.contains(&floor), "{}", c.message);
        // Sharp: passes up to 600/s, failures from 650/s.
        let sharp: Vec<Step> = [100.0, 200.0, 400.0, 800.0, 600.0, 700.0, 650.0, 620.0]
            .iter()
            .enumerate()
            .map(|(i, &rate)| {
                let ms = if rate <= 620.0 { 2 } else { 50 };
                step(i as u32 + 1, StepKind::Probe, rate, ms, 200)
            })
            .collect();
        let c = conclude(&sharp, &r, Outcome::TimeLimit);
        assert!(c.knee_spread.unwrap() < GRADUAL, "{:?}", c.knee_spread);
        assert!(!c.message.contains("gradual"), "{}", c.message);
    }

    /// Steps that rise with the rate dispute nothing; a pass above a failure (a short
    /// step overruled by a confirmation included) marks the band between them, and the
    /// result says so among its warnings.
    #[test]
    fn steps_that_contradict_each_other_mark_a_disputed_band() {
        let r = rules();
        let steady = vec![
            step(1, StepKind::Ramp, 100.0, 2, 200),
            step(2, StepKind::Ramp, 200.0, 2, 200),
            step(3, StepKind::Ramp, 400.0, 50, 200),
            step(4, StepKind::Bisect, 300.0, 2, 200),
            step(5, StepKind::Confirm, 300.0, 2, 2000),
            step(6, StepKind::Confirm, 400.0, 50, 2000),
        ];
        assert_eq!(disputed(&steady), None);
        assert_eq!(
            conclude(&steady, &r, Outcome::TimeLimit).disputed_per_s,
            None
        );
        // A 4-s step passed at 350/s, its confirmation failed, and 325/s failed too:
        // passes at 350 (short) and 300 sit around failures at 325 and 350.
        let mut noisy = steady[..4].to_vec();
        noisy.push(step(5, StepKind::Bisect, 350.0, 2, 200));
        noisy.push(step(6, StepKind::Confirm, 350.0, 50, 2000));
        noisy.push(step(7, StepKind::Bisect, 325.0, 50, 200));
        noisy.push(step(8, StepKind::Confirm, 300.0, 2, 2000));
        assert_eq!(disputed(&noisy), Some([325.0, 350.0]));
        let c = conclude(&noisy, &r, Outcome::TimeLimit);
        assert_eq!(c.disputed_per_s, Some([325.0, 350.0]));
        let w = disputed_warning([1_250.0, 1_500.0]);
        assert!(w.contains("between 1,250/s and 1,500/s"), "{w}");
        assert!(w.contains("passes or fails by chance"), "{w}");
        // An invalid step is no verdict on the server.
        let mut invalid = steady.clone();
        let mut late = step(7, StepKind::Bisect, 450.0, 50, 200);
        late.verdict = Verdict::Invalid;
        invalid.push(late);
        assert_eq!(disputed(&invalid), None);
    }

    /// A merged pair of shares (1/2, 2/2) of one search: valid, concluded.
    fn halves() -> (CapacityResult, CapacityResult) {
        let mut a = result_of(knee_steps(100.0, 105.0));
        for s in &mut a.steps {
            s.share = 0.5;
        }
        let mut b = a.clone();
        a.rate_share = Some("1/2".into());
        b.rate_share = Some("2/2".into());
        (a, b)
    }

    #[test]
    fn a_valid_result_validates_and_merges() {
        let (a, b) = halves();
        assert_eq!(a.outcome, Outcome::Capacity, "{}", a.message);
        assert_eq!(a.validate(), Ok(()));
        let a_capacity = a.capacity_per_s;
        let m = merge(&[a, b]).unwrap();
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.machines, 2);
        assert_eq!(m.rate_share.as_deref(), Some("1/2,2/2"));
        assert_eq!(m.steps[0].attempted, 400);
        assert_eq!(m.steps[0].share, 1.0);
        // The same steps, merged: the same estimate.
        assert_eq!(m.capacity_per_s, a_capacity);
    }

    /// Every rule of [`CapacityResult::validate`], each on a copy of a valid result.
    #[test]
    fn validation_refuses_what_no_search_can_have_written() {
        let (a, _) = halves();
        type Edit = fn(&mut CapacityResult);
        let cases: Vec<(Edit, &str)> = vec![
            (|r| r.machines = 0, "machines is 0"),
            (
                |r| r.steps[1].completed = 500,
                "step 2 of 17: 500 completed + 0 failed is not the 200 attempted",
            ),
            (|r| r.steps[1].failed = u64::MAX, "is not the 200 attempted"),
            (
                |r| r.steps[0].share = -6.5,
                "step 1 of 17: share -6.5 of the offered rate",
            ),
            (|r| r.steps[0].share = 0.0, "share 0 of the offered rate"),
            (|r| r.steps[0].share = 2.0, "share 2 of the offered rate"),
            (
                |r| r.steps[0].machines = 2,
                "machines 2 is not within 1 ..= the document's 1",
            ),
            (
                |r| r.steps[0].duration_s = -3.0,
                "duration_s -3 s is not a duration",
            ),
            (
                |r| r.steps[0].length_s = 0.0,
                "length_s 0 s is not a duration (above zero)",
            ),
            (|r| r.steps[0].length_s = 1e300, "length_s"),
            (
                |r| r.steps[0].offered_per_s = -500.0,
                "offered_per_s -500/s is not a rate",
            ),
            (
                |r| r.steps[0].offered_per_s = 1e308,
                "offered_per_s 1e308/s",
            ),
            (|r| r.steps[0].connections = 0, "connections 0"),
            (|r| r.steps[0].error_rate = 2.0, "error_rate 2"),
            (|r| r.steps[0].p99_ms = Some(-1.0), "p99_ms -1"),
            (|r| r.steps[0].steal = Some(1.5), "steal 1.5"),
            (
                |r| r.steps[0].server_cpu_seconds = Some(-1.0),
                "server_cpu_seconds -1 s",
            ),
            (
                |r| r.steps[0].generator.cpu_seconds = -1.0,
                "generator.cpu_seconds -1 s",
            ),
            (
                |r| r.steps[0].generator.utilization = f64::NAN,
                "generator.utilization NaN",
            ),
            (
                |r| r.rules.factor = 0.0,
                "rules: factor 0: must be above 1 and at most 10",
            ),
            (|r| r.rules.factor = 11.0, "factor 11"),
            (|r| r.rules.resolution = 1.0, "resolution 1"),
            (|r| r.rules.start_rate = -1.0, "rules: start_rate -1/s"),
            (|r| r.rules.max_rate = 1e12, "max_rate 1000000000000/s"),
            (|r| r.rules.min_rate = 500.0, "the rates are out of order"),
            (
                |r| r.rules.step_min_s = 20.0,
                "step_min_s 20 is longer than step_max_s 10",
            ),
            (|r| r.rules.step_max_s = -1.0, "step_max_s -1 s"),
            (|r| r.rules.generator_cpu_max = 0.0, "generator_cpu_max 0"),
            (|r| r.rules.samples_needed = 0, "samples_needed is 0"),
            (
                |r| r.slo.latency[0].percentile = 250.0,
                "slo: percentile 250",
            ),
            (
                |r| r.slo.latency[0].max_ms = -30.0,
                "slo: p90 ≤ -30 ms: a bound must be above zero",
            ),
            (|r| r.slo.errors_max = -1.0, "slo: errors"),
            (
                |r| r.capacity_per_s = Some(0.0),
                "capacity_per_s 0/s is not a rate",
            ),
            (|r| r.capacity_per_s = Some(-500.0), "capacity_per_s -500/s"),
            (|r| r.capacity_per_s = Some(1e308), "capacity_per_s 1e308/s"),
            (
                |r| r.capacity_per_s = Some(500.0),
                "capacity_per_s 500 is outside its own interval_per_s",
            ),
            (
                |r| r.capacity_per_s = None,
                "outcome capacity without a capacity_per_s",
            ),
            (
                |r| r.interval_per_s = None,
                "outcome capacity without an interval_per_s",
            ),
            (
                |r| r.interval_per_s = Some([200.0, 100.0]),
                "interval_per_s [200, 100]",
            ),
            (
                |r| r.outcome = Outcome::GeneratorBound,
                "capacity_per_s is given but the outcome is generator-bound",
            ),
            (
                |r| r.disputed_per_s = Some([300.0, 300.0]),
                "disputed_per_s [300, 300]",
            ),
            (
                |r| r.knee_spread = Some(0.5),
                "knee_spread 0.5: not a factor between 1 and 3",
            ),
            (
                |r| r.knee_spread = Some(f64::NAN),
                "knee_spread NaN: not a factor",
            ),
            (
                |r| r.best_pass_per_s = Some(f64::INFINITY),
                "best_pass_per_s inf/s",
            ),
            (
                |r| r.generator_bound_at_per_s = Some(-1.0),
                "generator_bound_at_per_s -1/s",
            ),
            (
                |r| r.rate_share = Some("1/2,2/2".into()),
                "more shares than the 1 processes",
            ),
            (
                |r| r.rate_share = Some("3/2".into()),
                "rate_share '3/2': i must be within 1..=n",
            ),
            (|r| r.rate_share = Some("x".into()), "rate_share 'x'"),
            (
                |r| {
                    r.machines = 2;
                    r.rate_share = Some("1/2,1/2".into())
                },
                "rate_share lists 1/2 twice",
            ),
        ];
        for (edit, says) in cases {
            let mut r = a.clone();
            edit(&mut r);
            let e = r.validate().unwrap_err();
            assert!(e.contains(says), "want {says:?} in: {e}");
            assert!(!e.contains("Some(") && !e.contains("{ "), "Debug text: {e}");
        }
    }

    /// Counts that would wrap are refused, never wrapped (u64::MAX + u64::MAX was
    /// 18446744073709551614; 2 × u32::MAX machines 4294967294).
    #[test]
    fn merge_refuses_sums_a_count_cannot_hold() {
        let (a, b) = halves();
        let big = |r: &CapacityResult, f: fn(&mut Step)| {
            let mut r = r.clone();
            r.steps.iter_mut().for_each(f);
            r
        };
        let max = |s: &mut Step| {
            s.attempted = u64::MAX;
            s.completed = u64::MAX;
        };
        let e = merge(&[big(&a, max), big(&b, max)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the merged requests attempted would be more than a count holds (adding result 2)"
        );
        assert_eq!(
            crate::error::Classify::class(&e),
            crate::error::ErrorClass::Input
        );
        let many = |r: &CapacityResult| {
            let mut r = big(r, |s| s.machines = u32::MAX);
            r.machines = u32::MAX;
            r
        };
        let e = merge(&[many(&a), many(&b)]).unwrap_err();
        assert!(
            e.to_string().contains("merged machines would be more"),
            "{e}"
        );
        let threads = |s: &mut Step| s.generator.threads = usize::MAX;
        let e = merge(&[big(&a, threads), big(&b, threads)]).unwrap_err();
        assert!(e.to_string().contains("generator threads"), "{e}");
        let cpu = |s: &mut Step| s.generator.cpu_seconds = f64::MAX;
        let e = merge(&[big(&a, cpu), big(&b, cpu)]).unwrap_err();
        assert!(e.to_string().contains("generator CPU seconds"), "{e}");
    }

    /// The linear [`undecided_invalid`] agrees with its definition (every step against
    /// every other), on steps that repeat rates and leave some invalid.
    #[test]
    fn the_linear_conclusion_agrees_with_its_definition() {
        let kinds = [StepKind::Ramp, StepKind::Bisect, StepKind::Confirm];
        let verdicts = [Verdict::Pass, Verdict::Fail, Verdict::Invalid];
        let template = step(1, StepKind::Ramp, 100.0, 2, 20);
        for seed in 0..200u64 {
            let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            let mut next = |n: u64| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % n
            };
            let steps: Vec<Step> = (0..12)
                .map(|i| {
                    let mut s = template.clone();
                    s.index = i + 1;
                    s.offered_per_s = 100.0 * (1 + next(6)) as f64;
                    s.kind = kinds[next(3) as usize];
                    s.verdict = verdicts[next(3) as usize];
                    s
                })
                .collect();
            let lowest_fail = steps
                .iter()
                .filter(|s| s.verdict == Verdict::Fail)
                .map(|s| s.offered_per_s)
                .min_by(f64::total_cmp);
            let want = steps.iter().enumerate().find_map(|(i, s)| {
                let replaced = steps[i + 1..]
                    .iter()
                    .any(|t| t.offered_per_s == s.offered_per_s && t.verdict != Verdict::Invalid);
                let above_a_failure = lowest_fail.is_some_and(|h| s.offered_per_s >= h);
                (s.verdict == Verdict::Invalid && !replaced && !above_a_failure).then_some(s.index)
            });
            assert_eq!(
                undecided_invalid(&steps).map(|s| s.index),
                want,
                "seed {seed}"
            );
        }
    }

    /// A document cannot declare more than [`MAX_STEPS`] steps: refused while reading,
    /// before the next one is built.
    #[test]
    fn a_document_cannot_declare_thousands_of_steps() {
        let (a, _) = halves();
        let mut doc = serde_json::to_value(&a).unwrap();
        let one = doc["steps"][0].clone();
        doc["steps"] = serde_json::Value::Array(vec![one.clone(); MAX_STEPS]);
        let r: CapacityResult = serde_json::from_value(doc.clone()).unwrap();
        assert_eq!(r.steps.len(), MAX_STEPS);
        doc["steps"] = serde_json::Value::Array(vec![one; MAX_STEPS + 1]);
        let e = serde_json::from_value::<CapacityResult>(doc).err().unwrap();
        assert!(e.to_string().contains("more than 2000 steps"), "{e}");
    }

    /// Ramp steps at 100 and 200/s (pass) and 400/s (fail), a bisection at 300/s
    /// (pass).
    fn bracketing_steps() -> Vec<Step> {
        vec![
            step(1, StepKind::Ramp, 100.0, 2, 200),
            step(2, StepKind::Ramp, 200.0, 2, 200),
            step(3, StepKind::Ramp, 400.0, 50, 200),
            step(4, StepKind::Bisect, 300.0, 2, 200),
        ]
    }

    /// [`bracketing_steps`], then six probes each at 300/s (pass) and 320/s (fail).
    fn narrowed_steps() -> Vec<Step> {
        let mut steps = bracketing_steps();
        for i in 0..6 {
            steps.push(step(5 + 2 * i, StepKind::Probe, 300.0, 2, 200));
            steps.push(step(6 + 2 * i, StepKind::Probe, 320.0, 50, 200));
        }
        steps
    }

    /// The objective of the generator's tests: p90 within 10 ms.
    fn p90_10ms() -> Slo {
        "p90=10ms".parse().unwrap()
    }

    /// 200 answers of `ms` each.
    fn hist(ms: u64) -> Option<Dist> {
        let mut h = LatencyHistogram::new();
        for _ in 0..200 {
            h.record_ns(ms * 1_000_000).unwrap();
        }
        Some(Dist::of(h))
    }

    /// A step at 310/s whose generator fell behind: 50 ms corrected against a 10 ms
    /// bound, but 5 ms from the actual send (45 ms late); judged.
    fn late_step() -> Step {
        let mut late = step(7, StepKind::Ramp, 310.0, 50, 200);
        late.pacing_lateness = hist(45);
        late.latency_from_send = hist(5);
        late.judge(&p90_10ms(), &rules());
        late
    }

    /// [`late_step`] with the server slow on what it was sent too; judged.
    fn slow_step() -> Step {
        let mut slow = late_step();
        slow.latency_corrected = hist(100);
        slow.latency_from_send = hist(55);
        slow.judge(&p90_10ms(), &rules());
        slow
    }

    /// [`slow_step`] with its generator busy 95% of its CPU; judged.
    fn busy_step() -> Step {
        let mut busy = slow_step();
        busy.generator.utilization = 0.95;
        busy.judge(&p90_10ms(), &rules());
        busy
    }

    /// [`narrowed_steps`], then [`late_step`].
    fn steps_ending_late() -> Vec<Step> {
        let mut steps = narrowed_steps();
        steps.push(late_step());
        steps
    }

    #[test]
    fn concludes_from_the_steps() {
        let r = rules();
        let steps = bracketing_steps();
        assert_eq!(steps[2].verdict, Verdict::Fail);
        assert_eq!(bracket(&steps), (Some(300.0), Some(400.0)));
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        // Four steps leave the capacity wide: estimated, not concluded.
        assert_eq!(c.outcome, Outcome::TimeLimit);
        let [lo, hi] = c.interval_per_s.unwrap();
        assert!(lo < 300.0 && hi > 300.0, "{lo}..{hi}");
        assert!(
            c.message.contains("wider than --resolution 20%"),
            "{}",
            c.message
        );
        // Repeated steps at 300/s (pass) and 320/s (fail) narrow it.
        let c = conclude(&narrowed_steps(), &r, Outcome::TimeLimit);
        let cap = c.capacity_per_s.unwrap();
        let [lo, hi] = c.interval_per_s.unwrap();
        assert!(
            lo <= cap && cap <= hi && lo > 270.0 && hi <= 320.0,
            "{lo} {cap} {hi}"
        );
        assert!(c.message.contains("probability 90%"), "{}", c.message);
    }

    #[test]
    fn a_late_generator_spoils_a_step_unless_the_server_was_slow_too() {
        // A late generator spoils the search, whatever else passed.
        let late = late_step();
        assert_eq!(late.verdict, Verdict::Invalid);
        assert!(late.why.contains("fell behind"), "{}", late.why);
        assert!(late.why.contains("pacing lateness p90 45"), "{}", late.why);
        // The same lateness while the server was slow on what it was sent: the server's,
        // even with a late generator (it shares the CPU the server saturates).
        let slow = slow_step();
        assert_eq!(slow.verdict, Verdict::Fail, "{}", slow.why);
        assert!(
            slow.why
                .contains("from the actual send instants too: p90 55.0 ms > 10 ms"),
            "{}",
            slow.why
        );
    }

    #[test]
    fn a_busy_or_starved_generator_spoils_a_failure_not_a_pass() {
        let (slo, r) = (p90_10ms(), rules());
        // A busy generator spoils a failure whatever the latencies say…
        let busy = busy_step();
        assert_eq!(busy.verdict, Verdict::Invalid);
        assert!(busy.why.contains("busy 95% of the 1 CPU"), "{}", busy.why);
        // A starved generator (little CPU used, much of its wanted time on a run queue:
        // another process on its CPUs) spoils a failure too, as the generator's…
        let mut starved = slow_step();
        starved.generator.cpu_seconds = 0.1;
        starved.generator.runqueue_wait_s = Some(0.3);
        // On CPUs it may share with the server, the wait may be the server's: a failure.
        for apart in [None, Some(false)] {
            starved.generator.apart_from_server = apart;
            starved.judge(&slo, &r);
            assert_eq!(starved.verdict, Verdict::Fail, "{apart:?}: {}", starved.why);
        }
        starved.generator.apart_from_server = Some(true);
        starved.judge(&slo, &r);
        assert_eq!(starved.verdict, Verdict::Invalid, "{}", starved.why);
        assert!(
            starved
                .why
                .contains("starved: its threads waited for a CPU 75%"),
            "{}",
            starved.why
        );
        let c = conclude(&[starved.clone()], &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::GeneratorBound);
        assert!(
            c.message.contains("was starved of CPU at 310/s"),
            "{}",
            c.message
        );
        // …unless the server had no room left (97% of its CPUs and more): its failure.
        // (Search 4-1 of the ten pairs: the generator waited 26% of its time at 1,318/s,
        // the server used 99% of its one CPU.)
        for (busy, verdict) in [
            (0.99, Verdict::Fail),
            (0.97, Verdict::Fail),
            (0.9, Verdict::Invalid),
        ] {
            let mut s = starved.clone();
            s.server_cpus = Some(1.0);
            s.server_cpu_seconds = Some(busy * s.duration_s);
            s.judge(&slo, &r);
            assert_eq!(s.verdict, verdict, "{busy}: {}", s.why);
            if verdict == Verdict::Fail {
                assert!(
                    s.why.contains("the generator was starved (its threads waited for a CPU 75% of the time they wanted one), but the server used"),
                    "{}",
                    s.why
                );
            }
            // Without the server's CPUs, it cannot be told: the generator's.
            s.server_cpus = None;
            s.judge(&slo, &r);
            assert_eq!(s.verdict, Verdict::Invalid);
        }
        // …and a little waiting does not.
        starved.generator.runqueue_wait_s = Some(0.01);
        starved.judge(&slo, &r);
        assert_eq!(starved.verdict, Verdict::Fail, "{}", starved.why);
        assert!(
            !starved.why.contains("server was starved"),
            "{}",
            starved.why
        );
        // A failure whose server waited for its CPUs says so (still a failure: the
        // capacity on this machine, now).
        starved.server_cpu_seconds = Some(0.2);
        starved.server_runqueue_wait_s = Some(0.6);
        starved.judge(&slo, &r);
        assert_eq!(starved.verdict, Verdict::Fail, "{}", starved.why);
        assert!(
            starved
                .why
                .contains("the server was starved: its threads waited for a CPU 75%"),
            "{}",
            starved.why
        );
        // …but not a pass.
        let mut fine = step(8, StepKind::Ramp, 100.0, 2, 200);
        fine.generator.utilization = 0.95;
        fine.judge(&slo, &r);
        assert_eq!(fine.verdict, Verdict::Pass);
        assert!(fine.why.contains("passed although"), "{}", fine.why);
    }

    #[test]
    fn a_generator_that_fell_behind_is_retried_once() {
        let (slo, r) = (p90_10ms(), rules());
        let steps = steps_ending_late();
        let c = conclude(&steps, &r, Outcome::TimeLimit);
        assert_eq!(c.outcome, Outcome::GeneratorBound);
        assert_eq!(c.capacity_per_s, None);
        assert!(
            c.message.contains("not the server, fell behind at 310/s"),
            "{}",
            c.message
        );
        // Fallen behind with CPU to spare: the search runs that step once more…
        assert!(retry(&steps, &r));
        // …and a valid re-run at that rate decides it instead.
        let mut again = step(9, StepKind::Ramp, 310.0, 50, 200);
        again.judge(&slo, &r);
        assert_eq!(again.verdict, Verdict::Fail);
        let mut retried = steps.clone();
        retried.push(again);
        assert!(!retry(&retried, &r));
        let c = conclude(&retried, &r, Outcome::TimeLimit);
        assert_ne!(c.outcome, Outcome::GeneratorBound, "{}", c.message);
        assert!(c.interval_per_s.is_some());
        // Invalid twice at one rate: generator-bound, no third try.
        let mut twice = steps.clone();
        twice.push(late_step());
        assert!(!retry(&twice, &r));
        assert_eq!(
            conclude(&twice, &r, Outcome::TimeLimit).outcome,
            Outcome::GeneratorBound
        );
        // A busy generator is not retried.
        let mut spent = steps[..steps.len() - 1].to_vec();
        spent.push(busy_step());
        assert!(!retry(&spent, &r));
        // Invalid at or above a rate that already failed validly: it decides nothing.
        let mut above = steps[..steps.len() - 1].to_vec();
        let mut high = late_step();
        high.offered_per_s = 800.0;
        above.push(high);
        assert!(goes_on_past_invalid(&above, &r));
        assert_ne!(
            conclude(&above, &r, Outcome::TimeLimit).outcome,
            Outcome::GeneratorBound
        );
    }
}
