//! One measured step of a capacity search as its document records it ([`Step`]): why it
//! ran ([`StepKind`]), its counts, its corrected-latency, pacing and from-send HDR
//! histograms, the generator's CPU ([`StepCpu`]) and the server's, and its verdict
//! ([`Verdict`]); the search's rules ([`Rules`]); and what a step's figures say of the
//! server (the share of its CPUs it used, whether it was starved, its cost per request
//! near a capacity). How a step is judged: [`super::judge`].

use serde::{Deserialize, Serialize};

use crate::load::result::Dist;

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
    ///
    /// [`Slo::samples_needed`]: super::slo::Slo::samples_needed
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

    /// True when the server was starved during the step: its threads waited for a CPU
    /// at least [`crate::load::result::STARVED_WAIT_SHARE`] of the time they wanted one
    /// (another process held its CPUs: the generator, if they share them, or a
    /// neighbour).
    pub fn server_starved(&self) -> bool {
        self.server_waiting_share()
            .is_some_and(|s| s >= crate::load::result::STARVED_WAIT_SHARE)
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
}
