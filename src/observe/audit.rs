//! The audit of window streams (`tlsperf observe report WINDOWS.jsonl… --slo p95=30ms`):
//! the JSON Lines that `observe --windows FILE` writes, from one or more files (several
//! agents, or rotated files), merged by time and judged per day (UTC) and per series
//! against a latency objective on the headline phase (the wire's `first_app_byte`, the
//! probes' `total`). QUIC's series (a window's `quic` part) are judged as series of their
//! own, beside TCP's of the same process and port, never merged with them.
//!
//! A window meets the objective when its value — its percentile of the headline, e.g. its
//! p95 for `p95=30ms` — is within the bound; a window without a headline value (no
//! handshake) is not judged. The error budget burnt is the windows missing the objective
//! ÷ the windows judged, against the allowed share (`--budget`). The day's P99.9 is exact
//! when every judged window carries its headline histogram (the windows' histograms
//! merged); streams written before windows carried one leave it out, and the largest of
//! the windows' p99s is given in any case, under that name. A window of a series seen in
//! two files with the same start and the same contents (a rotated file copied twice) is
//! counted once; different ones (two agents) count each.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::baseline::AnomalyEvent;
use super::window::{SeriesKey, SeriesRecord, WindowRecord, phases_of};
use crate::doc::Input;
use crate::error::{Classify, ErrorClass};
use crate::stats::LatencyHistogram;
use crate::stats::slo::Slo;

/// The schema of an [`AuditReport`].
pub const SCHEMA: &str = "tlsperf-observe-report/1";
/// The worst windows named per day and series.
pub const WORST: usize = 5;
/// The percentiles a window record holds, so the ones an objective may name.
pub const PERCENTILES: [u8; 4] = [50, 90, 95, 99];
const DAY_NS: u64 = 86_400_000_000_000;

/// The objective: the headline's `percentile`th percentile of a window at most `max_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Objective {
    /// 50, 90, 95 or 99.
    pub percentile: u8,
    /// The bound, ns.
    pub max_ns: u64,
}

impl Objective {
    /// The objective of a `--slo` (capacity's syntax): one latency bound, on a percentile
    /// a window holds, without `errors=` (a window is judged on its latency only).
    pub fn from_slo(slo: &Slo) -> Result<Objective, String> {
        if slo.errors_max != 0.0 {
            return Err("errors= does not apply: a window is judged on its latency".into());
        }
        let [bound] = slo.latency.as_slice() else {
            return Err("give one latency bound (e.g. p95=30ms)".into());
        };
        let percentile = PERCENTILES
            .into_iter()
            .find(|p| f64::from(*p) == bound.percentile)
            .ok_or_else(|| {
                format!(
                    "{}: a window holds p50, p90, p95 and p99 only",
                    bound.name()
                )
            })?;
        Ok(Objective {
            percentile,
            max_ns: (bound.max_ms * 1e6).round() as u64,
        })
    }

    /// `p95`.
    pub fn name(&self) -> String {
        format!("p{}", self.percentile)
    }

    /// A window's value: its percentile of the headline, if it has one.
    pub fn value(&self, s: &SeriesRecord) -> Option<u64> {
        let q = s.phases.get(phases_of(&s.key.view)[0])?;
        if q.count == 0 {
            return None;
        }
        Some(match self.percentile {
            50 => q.p50_ns,
            90 => q.p90_ns,
            95 => q.p95_ns,
            _ => q.p99_ns,
        })
    }
}

/// One record of a stream.
#[derive(Debug, Clone)]
pub enum Record {
    /// A closed window.
    Window(Box<WindowRecord>),
    /// An anomaly's start or end.
    Anomaly(Box<AnomalyEvent>),
}

/// Why the streams cannot be audited.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A line that is not a window or anomaly record.
    #[error("{path}:{line}: {why}")]
    Line {
        /// The file.
        path: String,
        /// 1-based.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// A file without a record.
    #[error("{0}: empty: no window or anomaly record (a file `observe --windows FILE` wrote)")]
    Empty(String),
    /// Records, but not one window.
    #[error("no window record in {0}: nothing to judge")]
    NoWindow(String),
}

impl Classify for AuditError {
    fn class(&self) -> ErrorClass {
        ErrorClass::Input
    }
}

/// The records of one stream, in its order; `path` names it in errors.
pub fn parse_stream(path: &str, bytes: &[u8]) -> Result<Vec<Record>, AuditError> {
    let text = String::from_utf8_lossy(bytes);
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = |why: String| AuditError::Line {
            path: path.to_string(),
            line: i + 1,
            why,
        };
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        let kind = value.get("type").and_then(serde_json::Value::as_str);
        let record = match kind {
            Some("window") => Record::Window(
                serde_json::from_value(value)
                    .map_err(|e| at(format!("not a window record: {e}")))?,
            ),
            Some("anomaly") => Record::Anomaly(
                serde_json::from_value(value)
                    .map_err(|e| at(format!("not an anomaly record: {e}")))?,
            ),
            // A comparison of two groups (`--group-by`): not judged against an objective.
            Some("canary") => continue,
            Some(other) => {
                return Err(at(format!(
                    "type \"{other}\": neither a window, an anomaly nor a canary record"
                )));
            }
            None => {
                return Err(at(
                    "no \"type\": neither a window, an anomaly nor a canary record".into(),
                ));
            }
        };
        if let Record::Window(w) = &record
            && w.end_ns < w.start_ns
        {
            return Err(at(format!(
                "a window that ends ({}) before it starts ({})",
                w.end_ns, w.start_ns
            )));
        }
        records.push(record);
    }
    if records.is_empty() {
        return Err(AuditError::Empty(path.to_string()));
    }
    Ok(records)
}

/// One judged window of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowPoint {
    /// The window's start, ns since the Unix epoch.
    pub start_ns: u64,
    /// Handshakes.
    pub handshakes: u64,
    /// Handshakes per second.
    pub per_second: f64,
    /// The headline's p50, ns.
    pub p50_ns: u64,
    /// p90, ns.
    pub p90_ns: u64,
    /// p99, ns.
    pub p99_ns: u64,
    /// The objective's percentile of the headline, ns.
    pub value_ns: u64,
    /// Within the bound.
    pub met: bool,
}

/// The error budget of a day and series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Windows missing the objective ÷ windows judged.
    pub burnt_share: f64,
    /// The allowed share (`--budget`).
    pub allowed_share: f64,
    /// `burnt_share ÷ allowed_share` (1 = all of it; infinite when nothing is allowed and
    /// a window missed, written as null).
    pub burnt_of_allowed: Option<f64>,
    /// `burnt_share ≤ allowed_share`.
    pub within: bool,
}

impl Budget {
    fn of(missed: u64, judged: u64, allowed: f64) -> Budget {
        let burnt = if judged == 0 {
            0.0
        } else {
            missed as f64 / judged as f64
        };
        Budget {
            burnt_share: burnt,
            allowed_share: allowed,
            burnt_of_allowed: if allowed > 0.0 {
                Some(burnt / allowed)
            } else if burnt == 0.0 {
                Some(0.0)
            } else {
                None
            },
            within: burnt <= allowed,
        }
    }
}

/// One series on one day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesDay {
    /// The series.
    pub series: SeriesKey,
    /// The headline phase judged.
    pub phase: String,
    /// Handshakes in the day's windows.
    pub handshakes: u64,
    /// Windows with a headline value.
    pub windows: u64,
    /// Windows without one (no handshake), not judged.
    pub windows_empty: u64,
    /// Windows meeting the objective.
    pub met: u64,
    /// `met ÷ windows`.
    pub met_share: f64,
    /// The error budget.
    pub budget: Budget,
    /// The worst windows (at most [`WORST`]), worst first.
    pub worst: Vec<WindowPoint>,
    /// The headline's P99.9 over the day, from the windows' histograms merged: exact (HDR,
    /// 3 significant digits); null when a window has no histogram.
    pub p999_ns: Option<u64>,
    /// The largest of the windows' p99s (not a P99.9: an upper bound of the day's P99 only).
    pub max_window_p99_ns: u64,
    /// Every judged window, in time order (the chart's points).
    pub points: Vec<WindowPoint>,
}

/// One UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Day {
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Its series, in key order.
    pub series: Vec<SeriesDay>,
    /// Its anomaly events (decided that day), in time order.
    pub anomalies: Vec<AnomalyEvent>,
}

/// The audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The files read, as named.
    pub files: Vec<String>,
    /// The objective.
    pub objective: Objective,
    /// The allowed share of windows missing it.
    pub budget: f64,
    /// Windows read, one per series in each window record, after duplicates.
    pub windows_read: u64,
    /// A series' windows left out as duplicates (the same start and contents as one read).
    pub duplicates: u64,
    /// The days, in order.
    pub days: Vec<Day>,
}

impl crate::doc::Document for AuditReport {
    const SCHEMA: &'static str = SCHEMA;
    const NAME: &'static str = "tlsperf observe report";
}

/// `YYYY-MM-DD` of day number `day` since the epoch.
fn date(day: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(day * 86_400);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

#[derive(Default)]
struct Acc {
    points: Vec<WindowPoint>,
    empty: u64,
    handshakes: u64,
    merged: Option<LatencyHistogram>,
    all_histograms: bool,
}

/// Audits `inputs` (each a stream `observe --windows FILE` wrote) against `objective`,
/// allowing `budget` (a share, 0.01 for 1%) of windows to miss it.
pub fn audit(
    inputs: &[Input],
    objective: Objective,
    budget: f64,
) -> Result<AuditReport, AuditError> {
    let mut windows: Vec<WindowRecord> = Vec::new();
    let mut anomalies: Vec<AnomalyEvent> = Vec::new();
    let names: Vec<String> = inputs
        .iter()
        .map(|i| i.path.display().to_string())
        .collect();
    for (input, name) in inputs.iter().zip(&names) {
        for r in parse_stream(name, &input.bytes)? {
            match r {
                Record::Window(w) => windows.push(*w),
                Record::Anomaly(a) => anomalies.push(*a),
            }
        }
    }
    if windows.is_empty() {
        return Err(AuditError::NoWindow(names.join(", ")));
    }
    // Merged by time; a series' window seen twice the same is counted once.
    windows.sort_by_key(|w| (w.start_ns, w.end_ns));
    let mut seen: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut duplicates = 0;
    let mut windows_read = 0;
    let mut days: BTreeMap<u64, BTreeMap<SeriesKey, Acc>> = BTreeMap::new();
    for w in &windows {
        // QUIC's series (the window's `quic` part) are series of their own: their key's
        // transport keeps them apart from TCP's of the same process and port.
        let quic = w.quic.iter().flat_map(|q| &q.series);
        for s in w.series.iter().chain(quic) {
            // The record's JSON is its identity (its histogram included), kept as a
            // 64-bit hash: a stream's size, not twice it.
            let id = {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                serde_json::to_string(s).unwrap_or_default().hash(&mut h);
                h.finish()
            };
            if !seen.insert((w.start_ns, id)) {
                duplicates += 1;
                continue;
            }
            windows_read += 1;
            let acc = days
                .entry(w.start_ns / DAY_NS)
                .or_default()
                .entry(s.key.clone())
                .or_insert_with(|| Acc {
                    all_histograms: true,
                    ..Acc::default()
                });
            acc.handshakes += s.handshakes;
            let Some(value) = objective.value(s) else {
                acc.empty += 1;
                continue;
            };
            let q = s.phases[phases_of(&s.key.view)[0]];
            acc.points.push(WindowPoint {
                start_ns: w.start_ns,
                handshakes: s.handshakes,
                per_second: s.per_second,
                p50_ns: q.p50_ns,
                p90_ns: q.p90_ns,
                p99_ns: q.p99_ns,
                value_ns: value,
                met: value <= objective.max_ns,
            });
            match &s.headline_histogram {
                Some(h) if acc.all_histograms => {
                    let merged = acc.merged.get_or_insert_with(LatencyHistogram::new);
                    // A histogram that cannot be merged leaves the day without an exact
                    // P99.9 rather than with a wrong one.
                    if merged.merge(h).is_err() {
                        acc.all_histograms = false;
                    }
                }
                _ => acc.all_histograms = false,
            }
        }
    }
    anomalies.sort_by_key(|a| a.at_ns);
    let mut events: BTreeMap<u64, Vec<AnomalyEvent>> = BTreeMap::new();
    for a in anomalies {
        events.entry(a.at_ns / DAY_NS).or_default().push(a);
    }
    let day_numbers: BTreeSet<u64> = days.keys().chain(events.keys()).copied().collect();
    let days = day_numbers
        .into_iter()
        .map(|d| Day {
            date: date(d),
            series: days
                .remove(&d)
                .unwrap_or_default()
                .into_iter()
                .map(|(key, acc)| series_day(key, acc, budget))
                .collect(),
            anomalies: events.remove(&d).unwrap_or_default(),
        })
        .collect();
    Ok(AuditReport {
        schema: SCHEMA.to_string(),
        files: names,
        objective,
        budget,
        windows_read,
        duplicates,
        days,
    })
}

fn series_day(key: SeriesKey, acc: Acc, budget: f64) -> SeriesDay {
    let judged = acc.points.len() as u64;
    let met = acc.points.iter().filter(|p| p.met).count() as u64;
    let mut worst = acc.points.clone();
    worst.sort_by(|a, b| {
        b.value_ns
            .cmp(&a.value_ns)
            .then(a.start_ns.cmp(&b.start_ns))
    });
    worst.truncate(WORST);
    let p999_ns = acc
        .merged
        .filter(|h| acc.all_histograms && !h.is_empty())
        .map(|h| h.quantiles().p999_ns);
    SeriesDay {
        phase: phases_of(&key.view)[0].to_string(),
        series: key,
        handshakes: acc.handshakes,
        windows: judged,
        windows_empty: acc.empty,
        met,
        met_share: if judged == 0 {
            0.0
        } else {
            met as f64 / judged as f64
        },
        budget: Budget::of(judged - met, judged, budget),
        worst,
        p999_ns: if judged == 0 { None } else { p999_ns },
        max_window_p99_ns: acc.points.iter().map(|p| p.p99_ns).max().unwrap_or(0),
        points: acc.points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_objective_names_one_percentile_a_window_holds() {
        let o = Objective::from_slo(&"p95=30ms".parse().unwrap()).unwrap();
        assert_eq!(
            o,
            Objective {
                percentile: 95,
                max_ns: 30_000_000
            }
        );
        for bad in ["p99.9=1s", "p95=30ms,p50=5ms", "p95=30ms,errors=1%"] {
            assert!(Objective::from_slo(&bad.parse().unwrap()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_budget_burnt_is_the_missed_share_against_the_allowed() {
        let b = Budget::of(1, 200, 0.01);
        assert!(b.within);
        assert_eq!(b.burnt_share, 0.005);
        assert_eq!(b.burnt_of_allowed, Some(0.5));
        let b = Budget::of(3, 100, 0.01);
        assert!(!b.within);
        assert_eq!(Budget::of(1, 10, 0.0).burnt_of_allowed, None);
        assert_eq!(Budget::of(0, 10, 0.0).burnt_of_allowed, Some(0.0));
    }

    #[test]
    fn bad_lines_are_named_by_file_and_line() {
        let e = parse_stream("w.jsonl", b"\n{\"type\":\"nope\"}\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "w.jsonl:2: type \"nope\": neither a window, an anomaly nor a canary record"
        );
        // The comparisons `--group-by` writes into the same stream are passed over (a
        // stream of them alone holds nothing to audit).
        let canary = b"{\"type\":\"canary\",\"start_ns\":1}\n";
        let e = parse_stream("w.jsonl", canary).unwrap_err();
        assert!(matches!(e, AuditError::Empty(_)), "{e}");
        let e = parse_stream("w.jsonl", b"garbage").unwrap_err();
        assert!(e.to_string().starts_with("w.jsonl:1: not JSON"), "{e}");
        let e = parse_stream("w.jsonl", b"{\"type\":\"window\"}").unwrap_err();
        assert!(
            e.to_string().starts_with("w.jsonl:1: not a window record"),
            "{e}"
        );
        assert!(matches!(
            parse_stream("w.jsonl", b"\n \n"),
            Err(AuditError::Empty(_))
        ));
    }
}
