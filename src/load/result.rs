//! The result of a load run: counts, rates, HDR histograms (serialized exactly, so results
//! from several machines merge without loss), per-interval and per-connection samples
//! (for Welch comparisons), the generator's and the server's CPU. Schema in docs/json.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::stats::{HistogramError, LatencyHistogram, Quantiles};

/// Schema name and version written in every result.
pub const SCHEMA: &str = "tlsperf-load/1";

/// A latency distribution: percentiles to read, the histogram to merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Dist {
    /// Percentiles (nanoseconds).
    pub quantiles: Quantiles,
    /// The HDR histogram (nanoseconds, 3 significant digits), V2 serialized, base64.
    pub hdr: LatencyHistogram,
}

impl Dist {
    /// From a histogram.
    pub fn of(h: LatencyHistogram) -> Dist {
        Dist {
            quantiles: h.quantiles(),
            hdr: h,
        }
    }

    fn merge(&mut self, other: &Dist) -> Result<(), HistogramError> {
        self.hdr.merge(&other.hdr)?;
        self.quantiles = self.hdr.quantiles();
        Ok(())
    }
}

/// Requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Requests {
    /// Requests started.
    pub attempted: u64,
    /// Requests answered (any HTTP status).
    pub completed: u64,
    /// Requests that failed (no response).
    pub failed: u64,
    /// Completed per second of the run.
    pub per_second: f64,
}

/// Handshakes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Handshakes {
    /// Completed handshakes.
    pub total: u64,
    /// By kind: full, full-hrr, resumed-ticket, resumed-session-id.
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
    pub early_data: BTreeMap<String, u64>,
}

/// The generator's own CPU use.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct GeneratorCpu {
    /// Worker threads.
    pub threads: usize,
    /// User + system CPU seconds.
    pub cpu_seconds: f64,
    /// CPU seconds ÷ (wall seconds × threads).
    pub utilization: f64,
    /// CPU microseconds per handshake (all of the generator's CPU divided by handshakes).
    pub cpu_us_per_handshake: Option<f64>,
    /// True when the generator was busy ≥ 90% of its threads' time: it may be the
    /// bottleneck.
    pub saturated: bool,
}

/// The server's CPU and memory, sampled from /proc with `--server-pid`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerUsage {
    /// The process.
    pub pid: u32,
    /// CPU seconds (user + system) during the run.
    pub cpu_seconds: f64,
    /// CPU microseconds per completed request.
    pub cpu_us_per_request: Option<f64>,
    /// CPU microseconds per handshake.
    pub cpu_us_per_handshake: Option<f64>,
    /// Largest resident memory seen (KiB).
    pub rss_max_kib: u64,
    /// Resident memory at the end (KiB).
    pub rss_end_kib: u64,
}

/// Per-connection sample, for comparisons.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnSample {
    /// Requests completed on this connection slot.
    pub requests: u64,
    /// Their mean latency (ms).
    pub mean_latency_ms: f64,
}

/// Everything a load run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadResult {
    /// [`SCHEMA`].
    pub schema: String,
    /// The URL.
    pub target: String,
    /// Start (RFC 3339).
    pub started: String,
    /// Wall seconds from the first request to the last response.
    pub duration_s: f64,
    /// How many runs were merged into this one (1 for a single run).
    pub machines: u32,
    /// The run was stopped early (Ctrl-C): the counts are those of the part that ran.
    pub interrupted: bool,
    /// The options, as given.
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
    /// TLS handshake time of full handshakes.
    pub handshake_full: Option<Dist>,
    /// TLS handshake time of resumed handshakes.
    pub handshake_resumed: Option<Dist>,
    /// Phase → distribution (connection phases over new connections, request phases
    /// over requests).
    pub phases: BTreeMap<String, Dist>,
    /// HTTP status → count.
    pub status: BTreeMap<String, u64>,
    /// Error kind → count.
    pub errors: BTreeMap<String, u64>,
    /// Error kind → the first message seen.
    pub error_examples: BTreeMap<String, String>,
    /// Body bytes received.
    pub body_bytes: u64,
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
}

/// Results that cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// Another schema.
    #[error("result {index} has schema '{found}', expected '{SCHEMA}'")]
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

fn add_counts(a: &mut BTreeMap<String, u64>, b: &BTreeMap<String, u64>) {
    for (k, v) in b {
        *a.entry(k.clone()).or_default() += v;
    }
}

/// Combines results of runs made at the same time from several machines against one
/// server: counts add up, histograms merge exactly, the duration is the longest run's,
/// rates are totals over it, interval samples add up position by position (the runs are
/// taken to have started together), CPU seconds add up; server usage is kept only when
/// a single result has it.
pub fn merge(results: &[LoadResult]) -> Result<LoadResult, MergeError> {
    let (first, rest) = results.split_first().ok_or(MergeError::Empty)?;
    for (i, r) in results.iter().enumerate() {
        if r.schema != SCHEMA {
            return Err(MergeError::Schema {
                index: i + 1,
                found: r.schema.clone(),
            });
        }
        if r.interval_ms != first.interval_ms {
            return Err(MergeError::Interval {
                index: i + 1,
                found: r.interval_ms,
                expected: first.interval_ms,
            });
        }
    }
    let mut m = first.clone();
    for r in rest {
        m.duration_s = m.duration_s.max(r.duration_s);
        m.machines += r.machines;
        m.interrupted |= r.interrupted;
        m.started = m.started.clone().min(r.started.clone());
        m.requests.attempted += r.requests.attempted;
        m.requests.completed += r.requests.completed;
        m.requests.failed += r.requests.failed;
        m.handshakes.total += r.handshakes.total;
        add_counts(&mut m.handshakes.kinds, &r.handshakes.kinds);
        m.handshakes.chains_verified += r.handshakes.chains_verified;
        m.handshakes.chains_from_cache += r.handshakes.chains_from_cache;
        add_counts(&mut m.handshakes.early_data, &r.handshakes.early_data);
        m.latency.merge(&r.latency)?;
        merge_opt(&mut m.latency_corrected, &r.latency_corrected)?;
        merge_opt(&mut m.handshake_full, &r.handshake_full)?;
        merge_opt(&mut m.handshake_resumed, &r.handshake_resumed)?;
        for (k, d) in &r.phases {
            match m.phases.get_mut(k) {
                Some(x) => x.merge(d)?,
                None => {
                    m.phases.insert(k.clone(), d.clone());
                }
            }
        }
        add_counts(&mut m.status, &r.status);
        add_counts(&mut m.errors, &r.errors);
        for (k, v) in &r.error_examples {
            m.error_examples
                .entry(k.clone())
                .or_insert_with(|| v.clone());
        }
        m.body_bytes += r.body_bytes;
        if m.interval_requests.len() < r.interval_requests.len() {
            m.interval_requests.resize(r.interval_requests.len(), 0);
        }
        for (a, b) in m.interval_requests.iter_mut().zip(&r.interval_requests) {
            *a += b;
        }
        m.connections.extend(r.connections.iter().cloned());
        m.generator.threads += r.generator.threads;
        m.generator.cpu_seconds += r.generator.cpu_seconds;
        m.generator.saturated |= r.generator.saturated;
        m.server = match (m.server.take(), &r.server) {
            (Some(s), None) => Some(s),
            (None, Some(s)) => Some(s.clone()),
            _ => None,
        };
    }
    m.finish_rates();
    Ok(m)
}

impl LoadResult {
    /// Recomputes the derived rates from the counts and the duration.
    pub fn finish_rates(&mut self) {
        let secs = self.duration_s.max(1e-9);
        self.requests.per_second = self.requests.completed as f64 / secs;
        self.handshakes.per_second = self.handshakes.total as f64 / secs;
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
        let g = &mut self.generator;
        g.utilization = g.cpu_seconds / (secs * g.threads.max(1) as f64);
        g.cpu_us_per_handshake =
            (self.handshakes.total > 0).then(|| g.cpu_seconds * 1e6 / self.handshakes.total as f64);
    }
}

/// A result file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// I/O.
    #[error("cannot read {}", .path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Not a load result.
    #[error("{}:{line}:{column}: not a tlsperf load result: {reason}", .path.display())]
    Json {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Why.
        reason: String,
    },
    /// Another schema.
    #[error("{}: schema '{found}', expected '{SCHEMA}'", .path.display())]
    Schema {
        /// The file.
        path: std::path::PathBuf,
        /// Its schema.
        found: String,
    },
}

impl crate::error::Classify for ReadError {
    fn class(&self) -> crate::error::ErrorClass {
        match self {
            ReadError::Io { source, .. } => crate::error::io_input_class(source),
            _ => crate::error::ErrorClass::Input,
        }
    }
}

/// True when `text` looks like a JSON document rather than a sample file.
pub fn looks_like_json(text: &[u8]) -> bool {
    text.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Reads a result written by `tlsperf load --out` (or `merge`).
pub fn read(path: &std::path::Path) -> Result<LoadResult, ReadError> {
    let text =
        crate::files::read_input(path, crate::files::InputKind::Results).map_err(|source| {
            ReadError::Io {
                path: path.to_path_buf(),
                source,
            }
        })?;
    parse(path, &text)
}

/// Parses a result; errors name `path`, line and column.
pub fn parse(path: &std::path::Path, text: &[u8]) -> Result<LoadResult, ReadError> {
    let value: serde_json::Value = serde_json::from_slice(text).map_err(|e| json_err(path, &e))?;
    let schema = value.get("schema").and_then(|s| s.as_str()).unwrap_or("");
    if schema != SCHEMA {
        return Err(ReadError::Schema {
            path: path.to_path_buf(),
            found: schema.to_string(),
        });
    }
    serde_json::from_slice(text).map_err(|e| json_err(path, &e))
}

fn json_err(path: &std::path::Path, e: &serde_json::Error) -> ReadError {
    ReadError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    }
}
