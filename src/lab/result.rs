//! The lab's result: every cell's rounds, their means and spreads, each cell against its
//! group's baseline (Welch's t-test on the rounds as measured), the distributions the
//! charts draw, and the changes that won significantly. Schema in docs/json.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::capacity::Outcome;

/// Share of a cell's attempted requests that may fail before the cell counts as failed
/// (kept out of every comparison and recommendation).
pub const FAILED_SHARE: f64 = 0.01;

/// Significance level of every comparison.
pub const ALPHA: f64 = 0.05;

/// Power at which a comparison's minimum detectable effect is stated.
pub const POWER: f64 = 0.8;

/// The metrics every cell is compared on with its baseline: name, higher is better.
pub const COMPARED: [(&str, bool); 4] = [
    ("server_cpu_us_per_handshake", false),
    ("handshakes_per_s", true),
    ("request_mean_ms", false),
    // Measured at a link only.
    ("first_byte_mean_ms", false),
];

/// Version 2 added server CPU per handshake to the compared metrics, each comparison's
/// minimum detectable effect, the A/A control cell of every group and its tally, failed
/// cells and the CPU pinning. Version 1 documents read with the new fields' defaults (no
/// A/A cells, nothing failed, no pinning recorded).
impl crate::doc::Document for LabResult {
    const SCHEMA: &'static str = "tlsperf-lab/2";
    const READS: &'static [&'static str] = &["tlsperf-lab/1"];
    const NAME: &'static str = "tlsperf lab result";

    fn validate(&self) -> Result<(), String> {
        match &self.link_counters {
            Some(l) => l.check(),
            None => Ok(()),
        }
    }
}

/// Everything one lab run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabResult {
    /// `tlsperf-lab/2` ([`crate::doc::Document::SCHEMA`]).
    pub schema: String,
    /// Start (RFC 3339).
    pub started: String,
    /// Wall seconds the run took.
    pub duration_s: f64,
    /// The machine.
    pub machine: Machine,
    /// How it ran.
    pub options: RunOptions,
    /// Stopped early (Ctrl-C): only finished cells are here.
    pub interrupted: bool,
    /// The groups, in order.
    pub groups: Vec<GroupResult>,
    /// Changes that gave a significant win on this machine, largest first.
    pub recommendations: Vec<Recommendation>,
    /// Changes that won but weaken security (an older TLS version, a weaker key…), or at
    /// a link took time off the first byte but cost something else (QUIC's server CPU):
    /// never recommended, listed with what they give up or cost and the round trips they
    /// add.
    #[serde(default)]
    pub trade_offs: Vec<Recommendation>,
    /// The server-side crypto limits of the configurations run (`tlsperf crypto limit`,
    /// measured in this run; empty with `--target`).
    pub crypto_limits: Vec<CryptoLimit>,
    /// What this run left out, and why.
    pub notes: Vec<String>,
    /// The A/A controls: how many of their comparisons came out significant, per metric.
    #[serde(default)]
    pub aa_control: AaTally,
    /// `--slo`: the objective each configuration's capacity was searched at
    /// (`groups[].cells[].capacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<crate::capacity::Slo>,
    /// `--link`: what the link did during the run (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_counters: Option<crate::link::LinkCounters>,
}

impl LabResult {
    /// The groups whose baseline failed (no comparison in them means anything).
    pub fn failed_baselines(&self) -> Vec<&GroupResult> {
        self.groups
            .iter()
            .filter(|g| g.cells.first().is_some_and(|c| c.failed))
            .collect()
    }
}

/// The A/A controls of a run: each group's baseline run a second time as its own cell
/// and compared with the baseline like any other cell. Every significant result among
/// them is a false positive, so their share is the false-positive rate this run
/// actually showed (α when the test's assumptions hold).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AaTally {
    /// Significance level of the comparisons.
    pub alpha: f64,
    /// A/A comparisons made, all metrics together.
    pub compared: usize,
    /// How many came out significant.
    pub significant: usize,
    /// The same per metric.
    pub metrics: BTreeMap<String, AaCount>,
}

/// A/A comparisons of one metric.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct AaCount {
    /// Comparisons made.
    pub compared: usize,
    /// How many came out significant.
    pub significant: usize,
}

/// The machine the lab ran on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    /// Logical CPUs available to the lab process when it started (before pinning).
    pub cores: usize,
    /// CPU model (from /proc/cpuinfo).
    pub cpu: String,
    /// Kernel release.
    pub kernel: String,
    /// Which CPUs the load generator and the servers ran on.
    #[serde(default)]
    pub pinning: super::pin::Pinning,
}

/// How the lab ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOptions {
    /// `quick` or `full`.
    pub mode: String,
    /// Rounds per cell.
    pub rounds: usize,
    /// Seconds of load per round.
    pub round_s: f64,
    /// Seconds of unrecorded load each cell gets before its first round.
    #[serde(default)]
    pub warmup_s: f64,
    /// Connection slots of the load generator (one client thread; each request on a new
    /// connection).
    pub connections: usize,
    /// External server (`--target`), when not the lab's own.
    pub target: Option<String>,
    /// The emulated link the client ran over (`--link`): a profile's name and its
    /// settings, or the settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The link's round-trip time (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rtt_ms: Option<f64>,
    /// `--null`: every configuration was its group's baseline again (a check of the
    /// lab's error rate: nothing should be recommended).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub null: bool,
    /// `--body-size`: bytes of each request's body, sent as a POST (absent: GETs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_size: Option<u64>,
}

/// One group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupResult {
    /// Short name.
    pub group: String,
    /// Title.
    pub title: String,
    /// Name of the baseline cell (the first).
    pub baseline: String,
    /// The cells, baseline first.
    pub cells: Vec<CellResult>,
    /// What makes this group's figures doubtful, in plain words: rounds in which the load
    /// generator or the servers were starved of CPU by other processes
    /// ([`RoundMetrics::generator_waiting_share`], [`RoundMetrics::server_waiting_share`]).
    /// Empty when nothing disturbed it (and in documents written before it existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Figures of one round (one load run).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoundMetrics {
    /// Requests answered.
    pub completed: u64,
    /// Requests failed.
    pub failed: u64,
    /// Requests per second.
    pub requests_per_s: f64,
    /// Handshakes per second.
    pub handshakes_per_s: f64,
    /// Resumed ÷ handshakes.
    pub resumption_rate: f64,
    /// TLS handshake time percentiles and mean (ms).
    pub handshake_p50_ms: f64,
    /// 95th percentile.
    pub handshake_p95_ms: f64,
    /// 99th percentile.
    pub handshake_p99_ms: f64,
    /// Request latency (connection set-up included: a new connection per request).
    pub request_mean_ms: f64,
    /// 50th percentile.
    pub request_p50_ms: f64,
    /// 95th percentile.
    pub request_p95_ms: f64,
    /// 99th percentile.
    pub request_p99_ms: f64,
    /// Server CPU µs per handshake (all instances).
    pub server_cpu_us_per_handshake: Option<f64>,
    /// Largest server resident memory seen (KiB, the first instance).
    pub server_rss_kib: Option<u64>,
    /// Load generator CPU µs per handshake.
    pub client_cpu_us_per_handshake: Option<f64>,
    /// At a link: mean time from the start of a request's connection (TCP connect) to
    /// the first byte of its response (ms), the sum of the connect, TLS, request and
    /// first-byte phases' means (each request opens its own connection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_mean_ms: Option<f64>,
    /// With `--body-size`: request body bytes sent per second of the round (the load
    /// result's `goodput.up_bytes_per_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_bytes_per_s: Option<f64>,
    /// Of the time the load generator's threads wanted a CPU in the round, the share they
    /// waited for one on a run queue (`/proc/self/task/*/schedstat`; as `load`'s
    /// starvation warning): from [`crate::load::result::STARVED_WAIT_SHARE`] up, other
    /// processes starved it. Absent where the kernel keeps no such figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_waiting_share: Option<f64>,
    /// The same for the configuration's first server process (absent with `--target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_waiting_share: Option<f64>,
}

/// Mean and standard deviation over rounds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct MeanSd {
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 with one round).
    pub sd: f64,
}

/// One metric of a cell against the baseline's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Versus {
    /// (cell − baseline) ÷ baseline, of the filtered means.
    pub relative_change: Option<f64>,
    /// Welch's two-sided p-value.
    pub p: f64,
    /// p < 0.05.
    pub significant: bool,
    /// Minimum detectable effect: the smallest change (relative to the baseline's mean)
    /// this comparison would find significant with 80% power at α = 0.05, at the
    /// variance observed. A "no significant difference" means no difference larger than
    /// about this. `None` when undefined (no variance, or a zero baseline).
    #[serde(default)]
    pub mde: Option<f64>,
    /// Rounds an outlier filter dropped (baseline, cell): always 0 since version 2, whose
    /// comparisons use every round.
    pub outliers_dropped: [usize; 2],
    /// One sentence.
    pub verdict: String,
}

/// One configuration's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    /// Short name.
    pub name: String,
    /// What it is.
    pub label: String,
    /// Its settings (server and client).
    pub settings: serde_json::Value,
    /// The group's A/A control: the baseline configuration run again as its own cell.
    #[serde(default)]
    pub control: bool,
    /// More than 1% of its attempted requests failed: not compared, never recommended.
    #[serde(default)]
    pub failed: bool,
    /// Failed ÷ attempted requests over all rounds.
    #[serde(default)]
    pub failure_rate: f64,
    /// Every round.
    #[serde(
        deserialize_with = "crate::doc::at_most_items::<_, _, { crate::stats::rows::MAX_ROUNDS }>"
    )]
    pub rounds: Vec<RoundMetrics>,
    /// Mean and spread of each metric over the rounds, by metric name.
    pub summary: BTreeMap<String, MeanSd>,
    /// Against the group's baseline (absent for the baseline itself and for failed
    /// cells): `server_cpu_us_per_handshake` (lower is better; absent with `--target`),
    /// `handshakes_per_s` (higher is better) and `request_mean_ms` (lower is better).
    pub vs_baseline: BTreeMap<String, Versus>,
    /// Request latency CDF over all rounds: `[ms, fraction ≤ ms]` points.
    pub request_cdf: Vec<[f64; 2]>,
    /// Full handshake time histogram over all rounds: `[bin start ms, count]`.
    pub handshake_full_hist: Vec<[f64; 2]>,
    /// Resumed handshake time histogram: `[bin start ms, count]`.
    pub handshake_resumed_hist: Vec<[f64; 2]>,
    /// Failures by kind over all rounds.
    pub errors: BTreeMap<String, u64>,
    /// How close the server came to its crypto limit: the crypto (timed inside in-memory
    /// handshakes: key exchange, signature, hashing, key schedule, AEAD, tickets) of its handshakes (full and resumed in the measured mix) ÷ the server CPU it spent
    /// per handshake, in percent. Equivalently, its handshakes per CPU-second as a share
    /// of what the crypto alone would allow. Absent with `--target`.
    pub crypto_limit_pct: Option<f64>,
    /// With `--slo`: the configuration's capacity at that objective.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CellCapacity>,
}

/// One configuration's capacity at the lab's objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellCapacity {
    /// How the search ended (`capacity`, `generator-bound`, `time-limit`…, as
    /// `tlsperf capacity`'s `outcome`).
    pub outcome: Outcome,
    /// The capacity (new connections/s: the rate a step meets the objective at with
    /// probability 0.9), whenever the search's steps bound it.
    pub capacity_per_s: Option<f64>,
    /// Its 90% credible interval (per second).
    pub interval_per_s: Option<[f64; 2]>,
    /// `[lowest failure, highest pass]` where the search's steps disagreed (as
    /// `tlsperf capacity`'s `disputed_per_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disputed_per_s: Option<[f64; 2]>,
    /// Steps measured.
    pub steps: usize,
    /// The search's conclusion in words.
    pub message: String,
}

/// The crypto a server handshake does, for one configuration (`tlsperf crypto limit`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CryptoLimit {
    /// Crypto provider.
    pub provider: String,
    /// Certificate key type.
    pub cert: String,
    /// Key-exchange group.
    pub group: String,
    /// Protocol version.
    pub tls: String,
    /// Crypto of one full server handshake, timed inside in-memory handshakes (ns).
    pub full_ns: f64,
    /// Crypto of one resumed server handshake (ns): the same without the signature (and,
    /// in TLS 1.2, without the key exchange).
    pub resumed_ns: f64,
    /// Full handshakes/s one core cannot exceed (1e9 ÷ `full_ns`).
    pub full_per_s: f64,
}

/// A configuration change that won.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recommendation {
    /// The group.
    pub group: String,
    /// From (the baseline) …
    pub from: String,
    /// … to.
    pub to: String,
    /// Which metric.
    pub metric: String,
    /// Relative gain (positive: better).
    pub gain: f64,
    /// Welch's p; absent for a capacity recommendation (`metric` `capacity_per_s`:
    /// decided by brackets that do not overlap, not by a test).
    pub p: Option<f64>,
    /// `p` adjusted by Holm's method over every comparison the run's recommendations
    /// are drawn from (the one that decided: below 0.05); absent where `p` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_adjusted: Option<f64>,
    /// The other metric's change when also significant and better (same sign as
    /// `gain`), e.g. latency down as handshakes/s go up.
    pub also: Option<String>,
    /// What the measurement does not say (e.g. loopback hides round trips).
    pub caveat: Option<String>,
    /// One sentence.
    pub text: String,
    /// At a link: milliseconds the change takes off the mean time to first byte (when
    /// that improved significantly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_saved_ms: Option<f64>,
}
