//! The result of a load run: counts, rates, HDR histograms (serialized exactly, so results
//! from several machines merge without loss), per-interval and per-connection samples
//! (for Welch comparisons), the generator's and the server's CPU. Schema in docs/json.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::doc::Document;
use crate::stats::Direction;
use crate::stats::rows::{Comparable, Identity, Row, RowSet, Section};
use crate::stats::{HistogramError, Quantiles};

pub use crate::stats::histogram::Dist;

/// Requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Requests {
    /// Requests started.
    pub attempted: u64,
    /// Requests answered with a status that counts as a success (`--ok-status`, by
    /// default 100–399).
    pub completed: u64,
    /// Requests that failed: no response, or a status that is not a success (counted in
    /// `errors` as `http-4xx`/`http-5xx`, and in `status`).
    pub failed: u64,
    /// Completed per second of the run.
    pub per_second: f64,
    /// Open loop with `-d`: requests due before the run's end that were never sent (every
    /// connection slot was still waiting for an answer). They are not in
    /// `latency_corrected`, which covers the requests sent.
    #[serde(default)]
    pub unsent: u64,
}

/// The share of the time the generator wanted a CPU that it spent waiting for one, from
/// which it is called starved: another process on its CPUs delayed its sends and reads.
pub const STARVED_WAIT_SHARE: f64 = 0.2;

/// Of the time threads wanted a CPU (ran, `cpu_s`, or waited on a run queue, `wait_s`),
/// the share they waited: near 0 on CPUs of their own, high when another process takes
/// them (whatever their own CPU use says). `None` without the wait.
pub fn waiting_share(wait_s: Option<f64>, cpu_s: f64) -> Option<f64> {
    let w = wait_s?;
    let wanted = w + cpu_s;
    (wanted > 0.0).then(|| w / wanted)
}

impl GeneratorCpu {
    /// Of the time the generator's threads wanted a CPU, the share they waited
    /// ([`waiting_share`]).
    pub fn waiting_share(&self) -> Option<f64> {
        waiting_share(self.runqueue_wait_s, self.cpu_seconds)
    }

    /// CPU seconds of work: `cpu_seconds` without the pacer's spin ([`Self::pacing_spin_s`]).
    pub fn work_seconds(&self) -> f64 {
        (self.cpu_seconds - self.pacing_spin_s.unwrap_or(0.0)).max(0.0)
    }

    /// The CPUs the generator could use: the least of its threads, the CPUs its affinity
    /// allows and its cgroup quota.
    pub fn cpus(&self) -> f64 {
        let mut cpus = self.threads.max(1) as f64;
        if let Some(n) = self.cpus_allowed.filter(|n| *n > 0) {
            cpus = cpus.min(n as f64);
        }
        if let Some(l) = self.cpu_limit {
            cpus = cpus.min(l);
        }
        cpus
    }
}

/// Handshakes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Handshakes {
    /// Completed handshakes.
    pub total: u64,
    /// By kind: full, full-hrr, resumed-ticket, resumed-session-id.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_PHASES>")]
    pub kinds: BTreeMap<String, u64>,
    /// Resumed ÷ total.
    pub resumption_rate: f64,
    /// Completed handshakes per second of the run.
    pub per_second: f64,
    /// Server certificate chains verified in full.
    #[serde(default)]
    pub chains_verified: u64,
    /// Chains accepted from the verdict cache (same chain and name as one verified
    /// before; the handshake signature is still checked every time).
    #[serde(default)]
    pub chains_from_cache: u64,
    /// With `--early-data`, new connections' first requests by what became of them:
    /// "accepted" (answered from 0-RTT data), "rejected" (sent again after the
    /// handshake), "not-sent" (no session allowing early data: a full handshake, or the
    /// server's tickets allow none).
    #[serde(default)]
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_PHASES>")]
    pub early_data: BTreeMap<String, u64>,
    /// Over QUIC (`--http3`), what the transport added to the handshakes: `retry`, the
    /// handshakes whose first Initial the server answered with a Retry (address
    /// validation: one more round trip, as after a HelloRetryRequest);
    /// `version-negotiation`, the attempts the server answered with a Version
    /// Negotiation packet without our version (failed: also in `errors` as
    /// `quic-version-negotiation`). Absent when none happened.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::doc::at_most::<_, _, MAX_PHASES>"
    )]
    pub quic: BTreeMap<String, u64>,
}

/// The generator's own CPU use.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GeneratorCpu {
    /// Worker threads.
    pub threads: usize,
    /// User + system CPU seconds of the whole process (every thread, the `--server-pid`
    /// sampler's included).
    pub cpu_seconds: f64,
    /// CPU seconds ÷ (wall seconds × the CPUs it could use: the least of its threads,
    /// the CPUs its affinity allows, `cpus_allowed`, and its cgroup CPU quota,
    /// `cpu_limit`).
    pub utilization: f64,
    /// The CPUs the process's affinity allowed (`taskset`, `Cpus_allowed_list`): more
    /// threads than these cannot run at once. `None` where it cannot be read (and in
    /// older files). Merged: added.
    #[serde(default)]
    pub cpus_allowed: Option<u64>,
    /// The CPUs the process's cgroup quota allowed, when a quota was set (a container's
    /// CPU limit): the generator saturates there, whatever its threads.
    #[serde(default)]
    pub cpu_limit: Option<f64>,
    /// CPU microseconds per completed request (`None`: none completed).
    #[serde(default)]
    pub cpu_us_per_request: Option<f64>,
    /// CPU microseconds per handshake, only when every request opened its own
    /// connection (at least as many handshakes as completed requests); `None` otherwise,
    /// where the CPU is not the handshakes' alone.
    pub cpu_us_per_handshake: Option<f64>,
    /// True when the generator was busy ≥ 90% of its threads' time: it may be the
    /// bottleneck.
    pub saturated: bool,
    /// Of `cpu_seconds`, the CPU the open loop's pacer spent spinning for the last
    /// microseconds before send instants (its looks at the clock × one look's cost,
    /// measured at start): waiting, not work. `utilization` and `saturated` leave it
    /// out. Absent in a closed loop, where it cannot be measured, and in older files;
    /// merged: added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_spin_s: Option<f64>,
    /// Seconds the process's threads spent during the run ready to run but waiting for
    /// a CPU another task held (`/proc/self/task/*/schedstat`; merged: added). `None`
    /// where the kernel keeps no such figure (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue_wait_s: Option<f64>,
}

/// The server's CPU and memory, sampled from /proc with `--server-pid`: the process and
/// every process below it (workers, helpers), found by their parent pids.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerUsage {
    /// The process named by `--server-pid` (the root of the tree).
    pub pid: u32,
    /// Processes counted: the root and its descendants seen at the start, at the end or
    /// in between (sampled every 100 ms).
    #[serde(default)]
    pub processes: u32,
    /// CPU seconds (user + system) the tree used during the run.
    pub cpu_seconds: f64,
    /// CPU microseconds per completed request (`None`: none completed).
    pub cpu_us_per_request: Option<f64>,
    /// CPU microseconds per handshake, only when every request opened its own
    /// connection (as [`GeneratorCpu::cpu_us_per_handshake`]).
    pub cpu_us_per_handshake: Option<f64>,
    /// Largest resident memory of the tree seen (KiB, summed over its processes).
    pub rss_max_kib: u64,
    /// Resident memory of the tree at the end (KiB, summed over its processes).
    pub rss_end_kib: u64,
    /// Seconds the tree's threads waited on a run queue during the run: ready to run
    /// while another task held their CPU (`/proc/PID/task/*/schedstat`). A server that
    /// another tenant starves uses little CPU and waits much. `None` where the kernel
    /// keeps no such figure (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue_wait_s: Option<f64>,
}

/// Per-connection sample, for comparisons.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnSample {
    /// Requests completed on this connection slot.
    pub requests: u64,
    /// Their mean latency (ms).
    pub mean_latency_ms: f64,
}

/// Bytes of bodies per second of the run (`duration_s`), all connections together: what
/// the run moved for the application, handshakes, headers and waits counted in the time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// Response bodies received (`body_bytes` ÷ `duration_s`).
    pub down_bytes_per_s: f64,
    /// Request bodies sent (`upload_bytes` ÷ `duration_s`).
    pub up_bytes_per_s: f64,
}

/// Everything a load run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadResult {
    /// `tlsperf-load/1` ([`Document::SCHEMA`]).
    pub schema: String,
    /// The URL.
    pub target: String,
    /// `tcp` (TLS over TCP: HTTP/1.1 or HTTP/2), `quic` (`--http3`: HTTP/3 over QUIC),
    /// or `mixed` (a merge of both, with `--allow-mixed`). Older files: `tcp`.
    #[serde(default = "tcp")]
    pub transport: String,
    /// Start (RFC 3339).
    pub started: String,
    /// Wall seconds from the run's start to the later of the last response and the end
    /// of its schedule (`--duration`; an open-loop `-n N` run's N send intervals), or of
    /// its stop when it was stopped before that end.
    pub duration_s: f64,
    /// How many runs were merged into this one (1 for a single run).
    pub machines: u32,
    /// The run was stopped early (Ctrl-C, SIGTERM): the counts are those of the part
    /// that ran.
    pub interrupted: bool,
    /// The run stopped by itself because its first attempts all failed with the same kind
    /// of error (a setup that cannot work): see `errors`.
    #[serde(default)]
    pub gave_up: bool,
    /// The options, as given.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_OPTIONS>")]
    pub options: BTreeMap<String, serde_json::Value>,
    /// Requests.
    pub requests: Requests,
    /// Handshakes.
    pub handshakes: Handshakes,
    /// Request latency: from sending the request to the end of the response (and the
    /// connection set-up when the request needed a new connection).
    pub latency: Dist,
    /// With `--rate`: latency from when the request *should* have been sent
    /// (coordinated-omission corrected).
    pub latency_corrected: Option<Dist>,
    /// With `--rate`: the generator's own send lateness, actual send instant − intended
    /// one, for every request sent (so `latency_corrected` − `latency` request by
    /// request).
    #[serde(default)]
    pub send_lateness: Option<Dist>,
    /// With `--rate`: the generator's own pacing delay, actual send instant − the later
    /// of the intended one and the moment the connection slot was free to wait for it
    /// (so without the wait for a slot still busy with its previous request, which is
    /// the server's slowness, not the generator's). What `capacity` checks to tell a
    /// generator that cannot keep up.
    #[serde(default)]
    pub pacing_lateness: Option<Dist>,
    /// tlsperf's own wake-up delay: for each response whose last read the kernel stamped,
    /// the time from the arrival of that read's last byte to the return of the read.
    /// Receives are dated at their arrival, so this delay is in no latency or phase; it
    /// shows how late the generator ran. `None` when the kernel stamped no read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_wakeup: Option<Dist>,
    /// TLS handshake time of full handshakes.
    pub handshake_full: Option<Dist>,
    /// TLS handshake time of resumed handshakes.
    pub handshake_resumed: Option<Dist>,
    /// Phase → distribution (connection phases over new connections, request phases
    /// over requests). Read back, at most [`MAX_PHASES`] entries: each holds a histogram.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_PHASES>")]
    pub phases: BTreeMap<String, Dist>,
    /// HTTP status → count.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_STATUSES>")]
    pub status: BTreeMap<String, u64>,
    /// Error kind → count.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_ERROR_KINDS>")]
    pub errors: BTreeMap<String, u64>,
    /// Error kind → count, of the requests due in the warm-up (in no other figure): what
    /// a run that gave up there failed on. Absent when none failed.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::doc::at_most::<_, _, MAX_ERROR_KINDS>"
    )]
    pub warmup_errors: BTreeMap<String, u64>,
    /// Error kind → the first message seen (the warm-up's included).
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_ERROR_KINDS>")]
    pub error_examples: BTreeMap<String, String>,
    /// Response body bytes received.
    pub body_bytes: u64,
    /// Request body bytes sent: `--body-size` bytes for each completed request (0 for
    /// GETs).
    #[serde(default)]
    pub upload_bytes: u64,
    /// The bodies' goodput over the run, both ways (derived: recomputed after a merge).
    #[serde(default)]
    pub goodput: Goodput,
    /// Width of the intervals of `interval_requests` (ms).
    pub interval_ms: u64,
    /// Requests completed in each interval.
    pub interval_requests: Vec<u64>,
    /// Per-connection samples.
    pub connections: Vec<ConnSample>,
    /// The generator's CPU.
    pub generator: GeneratorCpu,
    /// The server's CPU and memory (`--server-pid`).
    pub server: Option<ServerUsage>,
    /// What makes figures of this result doubtful, in plain words (derived from the
    /// figures; recomputed after a merge).
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most_items::<_, _, MAX_OPTIONS>"
    )]
    pub warnings: Vec<String>,
    /// `--link`: what the link did during the run (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_counters: Option<crate::link::LinkCounters>,
}

/// The transport of results written before QUIC.
fn tcp() -> String {
    "tcp".into()
}

/// The most options a load result may record (tlsperf writes about 20).
pub const MAX_OPTIONS: usize = 128;
/// The most HTTP statuses a load result may count: every three-digit code.
pub const MAX_STATUSES: usize = 1000;
/// The most kinds of error a load result may count (tlsperf has about 20).
pub const MAX_ERROR_KINDS: usize = 256;

/// The most phases a load result may hold (tlsperf writes 12): each decoded histogram
/// takes memory, so a document cannot declare thousands.
pub const MAX_PHASES: usize = 32;

impl Document for LoadResult {
    const SCHEMA: &'static str = "tlsperf-load/1";
    const NAME: &'static str = "tlsperf load result";

    fn validate(&self) -> Result<(), String> {
        possible(self)
    }
}

/// The most rounds the throughput row of a comparison holds: longer runs have their
/// intervals taken in consecutive groups (each group's requests/s one round).
pub const MAX_INTERVAL_ROUNDS: usize = 10_000;

/// Two load results compare on two rows: the mean latency of each connection that
/// completed a request (lower is better) and the requests/s of each interval (higher is
/// better; the partial first and last intervals left out when more than four remain;
/// beyond [`MAX_INTERVAL_ROUNDS`] intervals, consecutive ones grouped into wider ones).
/// Their target and the options that [`merge`] requires equal are the settings.
impl Comparable for LoadResult {
    const KIND: &'static str = "load";

    fn row_set(&self) -> RowSet {
        const SECTION: &str = "load";
        let per_s = 1000.0 / self.interval_ms.max(1) as f64;
        let n = self.interval_requests.len();
        let inner = if n > 4 {
            &self.interval_requests[1..n - 1]
        } else {
            &self.interval_requests[..]
        };
        let group = inner.len().div_ceil(MAX_INTERVAL_ROUNDS).max(1);
        let width_ms = self.interval_ms.saturating_mul(group as u64);
        let per_s = per_s / group as f64;
        let throughput: Vec<f64> = inner
            .chunks(group)
            .filter(|c| c.len() == group)
            .map(|c| c.iter().map(|&r| r as f64).sum::<f64>() * per_s)
            .collect();
        let row = |metric: &str, unit: String, direction, rounds| Row {
            section: SECTION,
            identity: Identity(vec![("metric", metric.to_string())]),
            unit,
            direction,
            rounds: Some(rounds),
            median: None,
            context: None,
        };
        let mut settings = vec![
            ("target".to_string(), self.target.clone()),
            ("transport".to_string(), self.transport.clone()),
            ("interval_ms".to_string(), self.interval_ms.to_string()),
        ];
        settings.extend(
            self.options
                .iter()
                .filter(|(k, _)| !COMPARE_MAY_DIFFER.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.to_string())),
        );
        let mut rows = vec![
            row(
                "mean latency per connection",
                "ms".into(),
                Direction::LowerIsBetter,
                self.connections
                    .iter()
                    .filter(|c| c.requests > 0)
                    .map(|c| c.mean_latency_ms)
                    .collect(),
            ),
            row(
                "throughput per interval",
                format!("requests/s per {width_ms} ms interval"),
                Direction::HigherIsBetter,
                throughput,
            ),
        ];
        // The bodies' goodput, each way the run moved bodies (older files: none): one
        // figure per run, so compared by its value alone, without a test.
        for (metric, bytes_per_s) in [
            (
                "goodput down (response bodies)",
                self.goodput.down_bytes_per_s,
            ),
            ("goodput up (request bodies)", self.goodput.up_bytes_per_s),
        ] {
            if bytes_per_s > 0.0 {
                rows.push(Row {
                    rounds: None,
                    median: Some(bytes_per_s),
                    ..row(
                        metric,
                        "bytes/s".into(),
                        Direction::HigherIsBetter,
                        Vec::new(),
                    )
                });
            }
        }
        RowSet {
            sections: vec![Section {
                name: SECTION,
                title: "",
            }],
            rows,
            settings,
            notes: Vec::new(),
        }
    }
}

/// Results that cannot be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// Another schema.
    #[error(
        "result {index} has schema '{found}', expected '{}'",
        LoadResult::SCHEMA
    )]
    Schema {
        /// 1-based position.
        index: usize,
        /// Its schema.
        found: String,
    },
    /// Different interval widths.
    #[error("result {index} has {found} ms intervals, the first has {expected} ms")]
    Interval {
        /// 1-based position.
        index: usize,
        /// Its width.
        found: u64,
        /// The first one's.
        expected: u64,
    },
    /// Histograms did not merge.
    #[error(transparent)]
    Histogram(#[from] HistogramError),
    /// A document no run can have written (a negative or absurd duration, more requests
    /// completed than attempted…).
    #[error("result {index} is impossible: {why}")]
    Impossible {
        /// 1-based position.
        index: usize,
        /// What is wrong.
        why: String,
    },
    /// A count would overflow.
    #[error("the merged {what} would exceed {} (result {index})", u64::MAX)]
    Overflow {
        /// The count.
        what: String,
        /// 1-based position of the result that overflowed it.
        index: usize,
    },
    /// Runs made with different settings: their sum would mean nothing.
    #[error(
        "result {index} was made with other settings than result 1 ({}); merging them would \
         mix different measurements (--allow-mixed merges them anyway)",
        .differences.join("; ")
    )]
    Mixed {
        /// 1-based position.
        index: usize,
        /// `name: first vs this`, one per setting that differs.
        differences: Vec<String>,
    },
}

/// Settings that may differ between the runs of one merged measurement: how each
/// machine's share was sized and bounded.
pub const MAY_DIFFER: [&str; 7] = [
    "requests",
    "duration_s",
    "connections",
    "rate",
    "rate_share",
    "threads",
    "timeout_s",
];

/// Settings whose difference `compare` does not warn of: how long each run was. The
/// offered load (rate, connections, threads, a share of the rate) changes what latency
/// and throughput mean, so a difference there is told beside the verdicts.
pub const COMPARE_MAY_DIFFER: [&str; 3] = ["requests", "duration_s", "timeout_s"];

/// The longest run a result may claim: one year.
const MAX_DURATION_S: f64 = 366.0 * 86_400.0;

/// Refuses what no run can have written.
fn check_possible(index: usize, r: &LoadResult) -> Result<(), MergeError> {
    possible(r).map_err(|why| MergeError::Impossible { index, why })
}

/// What no run can have written, in words: times out of range, counts that disagree,
/// distributions that do not hold what they say.
fn possible(r: &LoadResult) -> Result<(), String> {
    let bad = |why: String| Err(why);
    if !(r.duration_s.is_finite() && (0.0..=MAX_DURATION_S).contains(&r.duration_s)) {
        return bad(format!(
            "duration_s {:e} is not within 0 s ..= 1 year",
            r.duration_s
        ));
    }
    if r.machines == 0 {
        return bad("machines is 0".into());
    }
    if let Some(l) = &r.link_counters {
        l.check().or_else(bad)?;
    }
    if r.interval_ms == 0 {
        return bad("interval_ms is 0".into());
    }
    let q = &r.requests;
    if q.completed.checked_add(q.failed) != Some(q.attempted) {
        return bad(format!(
            "requests: {} completed + {} failed is not the {} attempted",
            q.completed, q.failed, q.attempted
        ));
    }
    let cpu = r.generator.cpu_seconds;
    if !(cpu.is_finite() && cpu >= 0.0) {
        return bad(format!("generator.cpu_seconds {cpu} is not a time"));
    }
    if let Some(w) = r.generator.runqueue_wait_s
        && !(w.is_finite() && w >= 0.0)
    {
        return bad(format!("generator.runqueue_wait_s {w} is not a time"));
    }
    if let Some(w) = r.server.as_ref().and_then(|s| s.runqueue_wait_s)
        && !(w.is_finite() && w >= 0.0)
    {
        return bad(format!("server.runqueue_wait_s {w} is not a time"));
    }
    if let Some(s) = &r.server
        && !(s.cpu_seconds.is_finite() && s.cpu_seconds >= 0.0)
    {
        return bad(format!(
            "server.cpu_seconds {} is not a time",
            s.cpu_seconds
        ));
    }
    if let Some(l) = r.generator.cpu_limit
        && !(l.is_finite() && l > 0.0)
    {
        return bad(format!("generator.cpu_limit {l} is not a number of CPUs"));
    }
    let h = &r.handshakes;
    if h.quic.get("retry").is_some_and(|n| *n > h.total) {
        return bad(format!(
            "handshakes.quic.retry is more than the {} handshakes",
            h.total
        ));
    }
    for (what, map) in [("kinds", &h.kinds), ("early_data", &h.early_data)] {
        let sum = map.values().try_fold(0u64, |a, b| a.checked_add(*b));
        if sum.is_none_or(|n| n > h.total) {
            return bad(format!(
                "handshakes.{what} add up to more than the {} handshakes",
                h.total
            ));
        }
    }
    // Intervals are counted from the run's start by each response's time, which is
    // never after the run's end (with a margin for the two clocks' rounding).
    let most = (r.duration_s * 1010.0 / r.interval_ms as f64).floor() + 2.0;
    if r.interval_requests.len() as f64 > most {
        return bad(format!(
            "interval_requests holds {} intervals of {} ms, more than a {} s run has",
            r.interval_requests.len(),
            r.interval_ms,
            r.duration_s
        ));
    }
    let completed = q.completed;
    // Every answered request has a status, a failed one too (a status that is not a
    // success): at most every attempt.
    let statuses = r.status.values().try_fold(0u64, |a, b| a.checked_add(*b));
    if statuses.is_none_or(|n| n > q.attempted) {
        return bad(format!(
            "status adds up to more requests than the {} attempted",
            q.attempted
        ));
    }
    let sums = [
        (
            "interval_requests",
            r.interval_requests
                .iter()
                .try_fold(0u64, |a, b| a.checked_add(*b)),
        ),
        (
            "connections",
            r.connections
                .iter()
                .try_fold(0u64, |a, c| a.checked_add(c.requests)),
        ),
    ];
    for (what, sum) in sums {
        if sum.is_none_or(|n| n > completed) {
            return bad(format!(
                "{what} add up to more requests than the {completed} completed"
            ));
        }
    }
    if let Some((i, c)) = r
        .connections
        .iter()
        .enumerate()
        .find(|(_, c)| !(c.mean_latency_ms.is_finite() && c.mean_latency_ms >= 0.0))
    {
        return bad(format!(
            "connections[{i}]: mean_latency_ms {} is not a latency",
            c.mean_latency_ms
        ));
    }
    let dists = [
        ("latency", Some(&r.latency)),
        ("latency_corrected", r.latency_corrected.as_ref()),
        ("send_lateness", r.send_lateness.as_ref()),
        ("pacing_lateness", r.pacing_lateness.as_ref()),
        ("client_wakeup", r.client_wakeup.as_ref()),
        ("handshake_full", r.handshake_full.as_ref()),
        ("handshake_resumed", r.handshake_resumed.as_ref()),
    ];
    let phases = r.phases.iter().map(|(k, d)| (k.as_str(), Some(d)));
    for (what, d) in dists.into_iter().chain(phases) {
        if let Some(d) = d {
            d.check().or_else(|why| bad(format!("{what}: {why}")))?;
        }
    }
    if r.latency.quantiles.count > completed {
        return bad(format!(
            "latency holds {} requests, more than the {completed} completed",
            r.latency.quantiles.count
        ));
    }
    Ok(())
}

/// The settings of `r` that differ from `first`'s (besides [`MAY_DIFFER`]), and the
/// target.
fn differences(first: &LoadResult, r: &LoadResult) -> Vec<String> {
    let mut out = Vec::new();
    if first.target != r.target {
        out.push(format!("target: {} vs {}", first.target, r.target));
    }
    if first.transport != r.transport {
        out.push(format!("transport: {} vs {}", first.transport, r.transport));
    }
    let keys: std::collections::BTreeSet<&String> =
        first.options.keys().chain(r.options.keys()).collect();
    for k in keys {
        if MAY_DIFFER.contains(&k.as_str()) {
            continue;
        }
        let (a, b) = (first.options.get(k), r.options.get(k));
        if a != b {
            let show = |v: Option<&serde_json::Value>| v.map_or("(none)".into(), |v| v.to_string());
            out.push(format!("{k}: {} vs {}", show(a), show(b)));
        }
    }
    out
}

/// `*a += b`, or the overflow named.
fn add(a: &mut u64, b: u64, what: &str, index: usize) -> Result<(), MergeError> {
    *a = a.checked_add(b).ok_or_else(|| MergeError::Overflow {
        what: what.to_string(),
        index,
    })?;
    Ok(())
}

impl crate::error::Classify for MergeError {
    fn class(&self) -> crate::error::ErrorClass {
        match self {
            MergeError::Histogram(e) => e.class(),
            _ => crate::error::ErrorClass::Input,
        }
    }
}

fn merge_opt(a: &mut Option<Dist>, b: &Option<Dist>) -> Result<(), HistogramError> {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => x.merge(y)?,
        (None, Some(y)) => *a = Some(y.clone()),
        _ => {}
    }
    Ok(())
}

fn add_counts(
    a: &mut BTreeMap<String, u64>,
    b: &BTreeMap<String, u64>,
    what: &str,
    index: usize,
) -> Result<(), MergeError> {
    for (k, v) in b {
        add(
            a.entry(k.clone()).or_default(),
            *v,
            &format!("{what} {k}"),
            index,
        )?;
    }
    Ok(())
}

/// Combines results of runs made at the same time from several machines against one
/// server: counts add up, histograms merge exactly, the duration is the longest run's,
/// rates are totals over it, interval samples add up position by position (the runs are
/// taken to have started together), CPU seconds add up; server usage is kept only when
/// a single result has it (the one server's CPU then counts against all the merged
/// requests and handshakes, which it served); warnings are recomputed. Impossible
/// documents, counts that would overflow and (unless `allow_mixed`) runs made with
/// different settings ([`MAY_DIFFER`] aside) are refused.
pub fn merge(results: &[LoadResult], allow_mixed: bool) -> Result<LoadResult, MergeError> {
    let (first, rest) = results.split_first().ok_or(MergeError::Empty)?;
    for (i, r) in results.iter().enumerate() {
        check_mergeable(first, i + 1, r, allow_mixed)?;
    }
    let mut m = first.clone();
    for (i, r) in rest.iter().enumerate() {
        let index = i + 2;
        add_run(&mut m, r, index)?;
        add_requests_and_handshakes(&mut m, r, index)?;
        merge_histograms(&mut m, r, index)?;
        add_outcomes(&mut m, r, index)?;
        add_generator(&mut m.generator, &r.generator, index)?;
        m.link_counters = match (m.link_counters.take(), &r.link_counters) {
            (Some(mut a), Some(b)) => {
                a.merge(b);
                Some(a)
            }
            (a, b) => a.or_else(|| b.clone()),
        };
        m.server = match (m.server.take(), &r.server) {
            (Some(s), None) => Some(s),
            (None, Some(s)) => Some(s.clone()),
            _ => None,
        };
    }
    m.finish_rates();
    Ok(m)
}

/// Whether `r` (the `index`th, from 1) can merge with `first`: possible, of this schema
/// and interval, and (unless `allow_mixed`) made with the same settings.
fn check_mergeable(
    first: &LoadResult,
    index: usize,
    r: &LoadResult,
    allow_mixed: bool,
) -> Result<(), MergeError> {
    check_possible(index, r)?;
    let differ = differences(first, r);
    if !allow_mixed && !differ.is_empty() {
        return Err(MergeError::Mixed {
            index,
            differences: differ,
        });
    }
    if r.schema != LoadResult::SCHEMA {
        return Err(MergeError::Schema {
            index,
            found: r.schema.clone(),
        });
    }
    if r.interval_ms != first.interval_ms {
        return Err(MergeError::Interval {
            index,
            found: r.interval_ms,
            expected: first.interval_ms,
        });
    }
    Ok(())
}

/// The run's extent: the longest duration, the machines, the earliest start, either
/// run's interruption.
fn add_run(m: &mut LoadResult, r: &LoadResult, index: usize) -> Result<(), MergeError> {
    m.duration_s = m.duration_s.max(r.duration_s);
    m.machines = m
        .machines
        .checked_add(r.machines)
        .ok_or(MergeError::Overflow {
            what: "machines".into(),
            index,
        })?;
    m.interrupted |= r.interrupted;
    m.gave_up |= r.gave_up;
    m.started = m.started.clone().min(r.started.clone());
    Ok(())
}

/// The request and handshake counts, added up.
fn add_requests_and_handshakes(
    m: &mut LoadResult,
    r: &LoadResult,
    index: usize,
) -> Result<(), MergeError> {
    add(
        &mut m.requests.attempted,
        r.requests.attempted,
        "requests attempted",
        index,
    )?;
    add(
        &mut m.requests.completed,
        r.requests.completed,
        "requests completed",
        index,
    )?;
    add(
        &mut m.requests.unsent,
        r.requests.unsent,
        "requests unsent",
        index,
    )?;
    add(
        &mut m.requests.failed,
        r.requests.failed,
        "requests failed",
        index,
    )?;
    add(
        &mut m.handshakes.total,
        r.handshakes.total,
        "handshakes",
        index,
    )?;
    add_counts(
        &mut m.handshakes.kinds,
        &r.handshakes.kinds,
        "handshakes",
        index,
    )?;
    add(
        &mut m.handshakes.chains_verified,
        r.handshakes.chains_verified,
        "chains verified",
        index,
    )?;
    add(
        &mut m.handshakes.chains_from_cache,
        r.handshakes.chains_from_cache,
        "chains from cache",
        index,
    )?;
    add_counts(
        &mut m.handshakes.early_data,
        &r.handshakes.early_data,
        "0-RTT",
        index,
    )?;
    add_counts(&mut m.handshakes.quic, &r.handshakes.quic, "QUIC", index)?;
    if m.transport != r.transport {
        m.transport = "mixed".into();
    }
    Ok(())
}

/// Every histogram (latencies, lateness, wake-up, handshakes, phases), merged exactly.
fn merge_histograms(m: &mut LoadResult, r: &LoadResult, index: usize) -> Result<(), MergeError> {
    let hist = |e: HistogramError| MergeError::Overflow {
        what: format!("histograms ({e})"),
        index,
    };
    m.latency.merge(&r.latency).map_err(hist)?;
    merge_opt(&mut m.latency_corrected, &r.latency_corrected).map_err(hist)?;
    merge_opt(&mut m.send_lateness, &r.send_lateness).map_err(hist)?;
    merge_opt(&mut m.pacing_lateness, &r.pacing_lateness).map_err(hist)?;
    merge_opt(&mut m.client_wakeup, &r.client_wakeup).map_err(hist)?;
    merge_opt(&mut m.handshake_full, &r.handshake_full).map_err(hist)?;
    merge_opt(&mut m.handshake_resumed, &r.handshake_resumed).map_err(hist)?;
    for (k, d) in &r.phases {
        match m.phases.get_mut(k) {
            Some(x) => x.merge(d).map_err(hist)?,
            None => {
                m.phases.insert(k.clone(), d.clone());
            }
        }
    }
    Ok(())
}

/// Statuses, errors (with the first example of each), bytes, the requests of each
/// interval, and the connections' samples.
fn add_outcomes(m: &mut LoadResult, r: &LoadResult, index: usize) -> Result<(), MergeError> {
    add_counts(&mut m.status, &r.status, "status", index)?;
    add_counts(&mut m.errors, &r.errors, "errors", index)?;
    add_counts(
        &mut m.warmup_errors,
        &r.warmup_errors,
        "warm-up errors",
        index,
    )?;
    for (k, v) in &r.error_examples {
        m.error_examples
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
    add(&mut m.body_bytes, r.body_bytes, "body bytes", index)?;
    add(&mut m.upload_bytes, r.upload_bytes, "upload bytes", index)?;
    if m.interval_requests.len() < r.interval_requests.len() {
        m.interval_requests.resize(r.interval_requests.len(), 0);
    }
    for (a, b) in m.interval_requests.iter_mut().zip(&r.interval_requests) {
        add(a, *b, "requests of an interval", index)?;
    }
    m.connections.extend(r.connections.iter().cloned());
    Ok(())
}

/// The generators' threads, CPUs and CPU seconds added up (a figure one of them lacks
/// is lacking), saturated when either was.
fn add_generator(m: &mut GeneratorCpu, r: &GeneratorCpu, index: usize) -> Result<(), MergeError> {
    m.threads = m
        .threads
        .checked_add(r.threads)
        .ok_or_else(|| MergeError::Overflow {
            what: "generator threads".into(),
            index,
        })?;
    m.cpus_allowed = match (m.cpus_allowed, r.cpus_allowed) {
        (Some(a), Some(b)) => Some(a.checked_add(b).ok_or_else(|| MergeError::Overflow {
            what: "CPUs allowed".into(),
            index,
        })?),
        _ => None,
    };
    m.cpu_seconds += r.cpu_seconds;
    m.pacing_spin_s = match (m.pacing_spin_s, r.pacing_spin_s) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    };
    m.runqueue_wait_s = match (m.runqueue_wait_s, r.runqueue_wait_s) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    m.saturated |= r.saturated;
    m.cpu_limit = match (m.cpu_limit, r.cpu_limit) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    Ok(())
}

/// The send lateness p99 above which a result is flagged, as a fraction of the request
/// latency p50.
pub const LATENESS_WARN_FRACTION: f64 = 0.1;

/// A warning when the generator's send lateness p99 exceeds [`LATENESS_WARN_FRACTION`]
/// of the request latency p50 (the corrected latency then holds a good part of the
/// generator's own delay). Its cause is told by the pacing lateness (`pacing`): when that
/// is at most half the send lateness, most of the delay was the sends waiting for their
/// connection slots, still busy with slow answers (the server's slowness, which the
/// corrected latency should hold), not the generator being busy.
pub fn lateness_warning(
    lateness: &Quantiles,
    latency: &Quantiles,
    pacing: Option<&Quantiles>,
) -> Option<String> {
    let bound = LATENESS_WARN_FRACTION * latency.p50_ns as f64;
    if !(lateness.count > 0 && latency.count > 0 && lateness.p99_ns as f64 > bound) {
        return None;
    }
    let cause = match pacing {
        Some(p) if p.count > 0 && p.p99_ns.saturating_mul(2) <= lateness.p99_ns => format!(
            "; the generator's own pacing p99 was {:.1} µs, so most of it was the sends \
             waiting for their connection slots, still busy with slow answers: the corrected \
             latency rightly holds that wait (more connections, -c, would send on time)",
            p.p99_ns as f64 / 1e3
        ),
        _ => ", so the corrected latency holds the generator's own delay (a busy machine, or \
              too few threads for the rate)"
            .into(),
    };
    Some(format!(
        "the generator sent requests late: send lateness p99 {:.1} µs is more than {:.0}% of \
         the request latency p50 ({:.1} µs){cause}",
        lateness.p99_ns as f64 / 1e3,
        LATENESS_WARN_FRACTION * 100.0,
        latency.p50_ns as f64 / 1e3
    ))
}

/// CPU microseconds per unit, `None` without units.
fn per(cpu_s: f64, n: u64) -> Option<f64> {
    (n > 0).then(|| cpu_s * 1e6 / n as f64)
}

impl LoadResult {
    /// Recomputes what derives from the counts, the duration and the distributions:
    /// rates, CPU per request and per handshake, warnings.
    pub fn finish_rates(&mut self) {
        let secs = self.duration_s.max(1e-9);
        self.requests.per_second = self.requests.completed as f64 / secs;
        self.handshakes.per_second = self.handshakes.total as f64 / secs;
        self.goodput = Goodput {
            down_bytes_per_s: self.body_bytes as f64 / secs,
            up_bytes_per_s: self.upload_bytes as f64 / secs,
        };
        let resumed: u64 = self
            .handshakes
            .kinds
            .iter()
            .filter(|(k, _)| k.starts_with("resumed"))
            .map(|(_, v)| v)
            .sum();
        self.handshakes.resumption_rate = if self.handshakes.total == 0 {
            0.0
        } else {
            resumed as f64 / self.handshakes.total as f64
        };
        // Per handshake only when every request opened its own connection: otherwise
        // the CPU of many requests would be charged to a few handshakes.
        let (completed, hs) = (self.requests.completed, self.handshakes.total);
        let hs_per_request = hs >= completed;
        let g = &mut self.generator;
        g.utilization = g.work_seconds() / (secs * g.cpus());
        g.cpu_us_per_request = per(g.cpu_seconds, completed);
        g.cpu_us_per_handshake = per(g.cpu_seconds, hs).filter(|_| hs_per_request);
        if let Some(s) = &mut self.server {
            s.cpu_us_per_request = per(s.cpu_seconds, completed);
            s.cpu_us_per_handshake = per(s.cpu_seconds, hs).filter(|_| hs_per_request);
        }
        self.warnings = self.derived_warnings();
    }

    /// A warning when requests due were never sent: the corrected latency covers the sent
    /// ones only, so over all the requests due it was higher. Counting the unsent as slower
    /// than any answer (as `capacity` judges a step), the p50 and p99 of all due requests.
    fn unsent_warning(&self) -> Option<String> {
        let q = &self.requests;
        if q.unsent == 0 {
            return None;
        }
        let due = q.attempted + q.unsent;
        let of_all = |p: f64| -> String {
            let within = p * due as f64 / q.completed.max(1) as f64;
            match &self.latency_corrected {
                Some(d) if q.completed > 0 && within <= 1.0 => {
                    format!("{:.1} ms", d.hdr.quantile(within).as_secs_f64() * 1e3)
                }
                _ => "beyond the run".into(),
            }
        };
        Some(format!(
            "{} of the {due} requests due were never sent (every connection slot was waiting \
             for an answer): the corrected latency covers the {} sent; over all {due} due, \
             counting the unsent as slower than any answer: p50 {}, p99 {} (more \
             connections, -c, send them)",
            q.unsent,
            q.attempted,
            of_all(0.5),
            of_all(0.99)
        ))
    }

    fn derived_warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(msg) = self.unsent_warning() {
            w.push(msg);
        }
        if let Some(l) = &self.send_lateness
            && let Some(msg) = lateness_warning(
                &l.quantiles,
                &self.latency.quantiles,
                self.pacing_lateness.as_ref().map(|p| &p.quantiles),
            )
        {
            w.push(msg);
        }
        if let Some(s) = &self.server
            && s.cpu_seconds <= 0.0
            && self.requests.completed > 0
        {
            w.push(format!(
                "--server-pid {}: its {} process{} used no CPU during the run: is it the server (or its parent)?",
                s.pid,
                s.processes,
                if s.processes == 1 { "" } else { "es" }
            ));
        }
        if let Some(share) = self.generator.waiting_share()
            && share >= STARVED_WAIT_SHARE
            && self.duration_s >= 0.5
        {
            w.push(format!(
                "the generator was starved: its threads waited for a CPU {:.0}% of the time they wanted one ({:.2} s on a run queue: other processes held its CPUs, the server too if it runs on them), so its sends were late and its figures doubtful (give it CPUs of its own, taskset)",
                share * 100.0,
                self.generator.runqueue_wait_s.unwrap_or_default()
            ));
        }
        if let Some(l) = &self.link_counters {
            w.extend(l.warnings());
        }
        w
    }

    /// Adds what the link did (`--link`) and its warnings.
    pub fn set_link_counters(&mut self, counters: crate::link::LinkCounters) {
        self.link_counters = Some(counters);
        self.warnings = self.derived_warnings();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencyHistogram;

    fn quantiles(ns: &[u64]) -> Quantiles {
        let mut h = LatencyHistogram::new();
        for &v in ns {
            h.record_ns(v).unwrap();
        }
        h.quantiles()
    }

    #[test]
    fn a_document_cannot_declare_thousands_of_phases() {
        #[derive(Deserialize)]
        struct P {
            #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_PHASES>")]
            phases: BTreeMap<String, Dist>,
        }
        let mut h = LatencyHistogram::new();
        h.record_ns(1 << 40).unwrap();
        let dist = serde_json::to_value(Dist::of(h)).unwrap();
        let doc = |n: usize| {
            let phases: serde_json::Map<String, serde_json::Value> =
                (0..n).map(|i| (format!("p{i}"), dist.clone())).collect();
            serde_json::json!({ "phases": phases })
        };
        assert_eq!(
            serde_json::from_value::<P>(doc(MAX_PHASES))
                .unwrap()
                .phases
                .len(),
            MAX_PHASES
        );
        let e = serde_json::from_value::<P>(doc(MAX_PHASES + 1))
            .err()
            .unwrap();
        assert!(e.to_string().contains("more than 32 entries"), "{e}");
    }

    /// A run's document with nothing measured, over `transport`.
    fn empty_run(transport: &str) -> LoadResult {
        let empty = serde_json::to_value(Dist::of(LatencyHistogram::new())).unwrap();
        serde_json::from_value(serde_json::json!({
            "schema": LoadResult::SCHEMA, "target": "https://localhost:1/",
            "transport": transport, "started": "", "duration_s": 1.0, "machines": 1,
            "interrupted": false, "options": {"http": "1.1"},
            "requests": {"attempted": 0, "completed": 0, "failed": 0, "per_second": 0.0},
            "handshakes": {"total": 0, "kinds": {}, "resumption_rate": 0.0, "per_second": 0.0},
            "latency": empty, "phases": {}, "status": {}, "errors": {},
            "error_examples": {}, "body_bytes": 0, "interval_ms": 250,
            "interval_requests": [], "connections": [],
            "generator": {"threads": 1, "cpu_seconds": 0.0, "utilization": 0.0,
                "cpu_us_per_handshake": null, "saturated": false},
        }))
        .unwrap()
    }

    #[test]
    fn runs_over_tcp_and_quic_merge_only_when_told_and_then_say_so() {
        let (tcp, quic) = (empty_run("tcp"), empty_run("quic"));
        let e = merge(&[tcp.clone(), quic.clone()], false).err().unwrap();
        assert!(e.to_string().contains("transport: tcp vs quic"), "{e}");
        assert_eq!(
            merge(&[quic.clone(), quic.clone()], false)
                .unwrap()
                .transport,
            "quic"
        );
        assert_eq!(
            merge(&[tcp.clone(), quic], true).unwrap().transport,
            "mixed"
        );
        // Files older than the field are TCP runs.
        let mut old = serde_json::to_value(&tcp).unwrap();
        old.as_object_mut().unwrap().remove("transport");
        let old: LoadResult = serde_json::from_value(old).unwrap();
        assert_eq!(old.transport, "tcp");
        // Compare names the transport among the settings.
        let settings = Comparable::row_set(&tcp).settings;
        assert!(
            settings.contains(&("transport".into(), "tcp".into())),
            "{settings:?}"
        );
    }

    #[test]
    fn lateness_warns_above_a_tenth_of_the_latency_median() {
        let latency = quantiles(&[100_000; 100]);
        // p99 of the lateness against 10% of 100 µs.
        assert!(lateness_warning(&quantiles(&[5_000; 100]), &latency, None).is_none());
        assert!(lateness_warning(&quantiles(&[9_990; 100]), &latency, None).is_none());
        let mut late = vec![1_000; 98];
        late.extend([20_000, 20_000]);
        let w = lateness_warning(&quantiles(&late), &latency, None).unwrap();
        assert!(w.contains("p99 20.0 µs"), "{w}");
        assert!(w.contains("latency p50 (100.0 µs)"), "{w}");
        assert!(w.contains("a busy machine"), "{w}");
        // The pacing itself late too: the generator's delay.
        let w = lateness_warning(&quantiles(&late), &latency, Some(&quantiles(&late))).unwrap();
        assert!(w.contains("a busy machine"), "{w}");
        // Paced on time: the slots waited for answers.
        let on_time = quantiles(&[1_000; 100]);
        let w = lateness_warning(&quantiles(&late), &latency, Some(&on_time)).unwrap();
        assert!(
            w.contains("pacing p99 was 1.0 µs") && w.contains("slots"),
            "{w}"
        );
        assert!(!w.contains("a busy machine"), "{w}");
        // Nothing measured: nothing to warn of.
        assert!(lateness_warning(&quantiles(&[]), &latency, None).is_none());
        assert!(lateness_warning(&quantiles(&[50_000]), &quantiles(&[]), None).is_none());
    }
}
