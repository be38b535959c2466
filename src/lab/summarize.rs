//! From rounds to a group's result: per-round metrics, means and spreads, merged
//! histograms, Welch's test of each cell against its baseline with its MDE, and the A/A
//! tally.

use std::collections::BTreeMap;

use super::matrix::Cell;
use super::matrix::Group;
use super::result;
use super::result::{AaTally, CellResult, GroupResult, MeanSd, RoundMetrics, Versus};
use crate::load::LoadResult;
use crate::load::result::STARVED_WAIT_SHARE;
use crate::stats::LatencyHistogram;
use crate::stats::compare::{CompareOptions, Direction, compare};
use crate::stats::samples::Samples;

/// How many A/A comparisons came out significant, per metric.
pub(super) fn aa_tally(groups: &[GroupResult]) -> AaTally {
    let mut t = AaTally {
        alpha: result::ALPHA,
        ..AaTally::default()
    };
    for c in groups.iter().flat_map(|g| &g.cells).filter(|c| c.control) {
        for (metric, v) in &c.vs_baseline {
            let e = t.metrics.entry(metric.clone()).or_default();
            e.compared += 1;
            t.compared += 1;
            if v.significant {
                e.significant += 1;
                t.significant += 1;
            }
        }
    }
    t
}

fn ms(ns: f64) -> f64 {
    ns / 1e6
}

/// The phases from a connection's start to its response's first byte.
const TO_FIRST_BYTE: [&str; 4] = ["connect", "tls", "request", "first_byte"];

/// A round's metrics; `at_link`: measured over an emulated link (time to first byte).
pub(super) fn round_metrics(
    r: &LoadResult,
    server_cpu_s: Option<f64>,
    at_link: bool,
) -> RoundMetrics {
    let tls = r.phases.get("tls").map(|d| d.quantiles);
    let tls_ms =
        |f: fn(&crate::stats::Quantiles) -> u64| tls.as_ref().map_or(0.0, |q| ms(f(q) as f64));
    let q = &r.latency.quantiles;
    RoundMetrics {
        completed: r.requests.completed,
        failed: r.requests.failed,
        requests_per_s: r.requests.per_second,
        handshakes_per_s: r.handshakes.per_second,
        resumption_rate: r.handshakes.resumption_rate,
        handshake_p50_ms: tls_ms(|q| q.p50_ns),
        handshake_p95_ms: tls_ms(|q| q.p95_ns),
        handshake_p99_ms: tls_ms(|q| q.p99_ns),
        request_mean_ms: ms(q.mean_ns),
        request_p50_ms: ms(q.p50_ns as f64),
        request_p95_ms: ms(q.p95_ns as f64),
        request_p99_ms: ms(q.p99_ns as f64),
        server_cpu_us_per_handshake: server_cpu_s
            .filter(|_| r.handshakes.total > 0)
            .map(|s| s * 1e6 / r.handshakes.total as f64),
        server_rss_kib: r.server.as_ref().map(|s| s.rss_max_kib),
        client_cpu_us_per_handshake: r.generator.cpu_us_per_handshake,
        // Means add up (medians would not): each request has every phase once.
        first_byte_mean_ms: TO_FIRST_BYTE
            .iter()
            .map(|p| r.phases.get(*p).map(|d| ms(d.quantiles.mean_ns)))
            .sum::<Option<f64>>()
            .filter(|_| at_link && r.requests.completed > 0),
        upload_bytes_per_s: (r.upload_bytes > 0).then_some(r.goodput.up_bytes_per_s),
        generator_waiting_share: r.generator.waiting_share(),
        server_waiting_share: r
            .server
            .as_ref()
            .and_then(|s| crate::load::result::waiting_share(s.runqueue_wait_s, s.cpu_seconds)),
    }
}

/// The group's warnings: rounds in which the load generator or the servers were starved
/// of CPU (they waited on a run queue [`STARVED_WAIT_SHARE`] or more of the time they
/// wanted a CPU), as `load` and `capacity` judge a run. A starved generator sends late
/// and spends more CPU per handshake; a starved server answers late: either spreads the
/// rounds and hides differences ("nothing beat its baseline"), or makes one.
pub(super) fn disturbance(cells: &[CellResult]) -> Vec<String> {
    let rounds: Vec<&RoundMetrics> = cells.iter().flat_map(|c| &c.rounds).collect();
    let mut warnings = Vec::new();
    for (who, share, fix) in [
        (
            "the load generator",
            (|m: &RoundMetrics| m.generator_waiting_share) as fn(&RoundMetrics) -> Option<f64>,
            "its sends were late and its CPU per handshake inflated",
        ),
        (
            "the servers",
            |m: &RoundMetrics| m.server_waiting_share,
            "their answers were late and their CPU per handshake doubtful",
        ),
    ] {
        let starved: Vec<f64> = rounds
            .iter()
            .filter_map(|m| share(m))
            .filter(|s| *s >= STARVED_WAIT_SHARE)
            .collect();
        if starved.is_empty() {
            continue;
        }
        let worst = starved.iter().copied().fold(0.0, f64::max);
        warnings.push(format!(
            "{who} {} starved of CPU in {} of {} rounds (waiting for a CPU up to {:.0}% of \
             the time {} wanted one; a round counts from {:.0}%): other processes held the \
             CPUs, so {fix}, and this group's comparisons are doubtful (a difference may be \
             hidden or made); rerun it on a quieter machine",
            if who == "the servers" { "were" } else { "was" },
            starved.len(),
            rounds.len(),
            worst * 100.0,
            if who == "the servers" { "they" } else { "it" },
            STARVED_WAIT_SHARE * 100.0
        ));
    }
    warnings
}

/// The metrics summarized and charted, by name, from a round.
pub(super) fn metric_values(m: &RoundMetrics) -> Vec<(&'static str, Option<f64>)> {
    vec![
        ("requests_per_s", Some(m.requests_per_s)),
        ("handshakes_per_s", Some(m.handshakes_per_s)),
        ("resumption_rate", Some(m.resumption_rate)),
        ("handshake_p50_ms", Some(m.handshake_p50_ms)),
        ("handshake_p95_ms", Some(m.handshake_p95_ms)),
        ("handshake_p99_ms", Some(m.handshake_p99_ms)),
        ("request_mean_ms", Some(m.request_mean_ms)),
        ("request_p50_ms", Some(m.request_p50_ms)),
        ("request_p95_ms", Some(m.request_p95_ms)),
        ("request_p99_ms", Some(m.request_p99_ms)),
        ("server_cpu_us_per_handshake", m.server_cpu_us_per_handshake),
        ("server_rss_kib", m.server_rss_kib.map(|k| k as f64)),
        ("client_cpu_us_per_handshake", m.client_cpu_us_per_handshake),
        ("first_byte_mean_ms", m.first_byte_mean_ms),
        ("upload_bytes_per_s", m.upload_bytes_per_s),
    ]
}

/// Mean and sample standard deviation ([`crate::stats::Summary`]); zeros when no round
/// had the metric.
fn mean_sd(v: &[f64]) -> MeanSd {
    crate::stats::Summary::of(v).map_or_else(
        |_| MeanSd::default(),
        |s| MeanSd {
            mean: s.mean,
            sd: s.stddev,
        },
    )
}

fn merged(
    rounds: &[LoadResult],
    pick: impl Fn(&LoadResult) -> Option<&LatencyHistogram>,
) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for r in rounds {
        if let Some(x) = pick(r) {
            let _ = h.merge(x);
        }
    }
    h
}

/// What a cell's rounds left behind, to summarize.
pub(super) struct CellRounds {
    /// The cell.
    pub(super) cell: Cell,
    /// Its recorded rounds.
    pub(super) rounds: Vec<LoadResult>,
    /// Its servers' CPU per handshake in each round, when measured.
    pub(super) server_cpu: Vec<Option<f64>>,
}

pub(super) fn finish_group(group: Group, live: Vec<CellRounds>, at_link: bool) -> GroupResult {
    let baseline = live
        .first()
        .map(|l| l.cell.name.clone())
        .unwrap_or_default();
    let mut cells: Vec<CellResult> = Vec::new();
    // Handshake histograms share bins across the group so that bars compare.
    let all_hs: Vec<LatencyHistogram> = live
        .iter()
        .map(|l| {
            let mut h = merged(&l.rounds, |r| r.handshake_full.as_ref().map(|d| &d.hdr));
            let _ = h.merge(&merged(&l.rounds, |r| {
                r.handshake_resumed.as_ref().map(|d| &d.hdr)
            }));
            h
        })
        .collect();
    let hi = all_hs
        .iter()
        .map(|h| h.quantile(0.99).as_nanos() as u64)
        .max()
        .unwrap_or(1)
        .max(1);
    for (i, l) in live.iter().enumerate() {
        let rounds: Vec<RoundMetrics> = l
            .rounds
            .iter()
            .zip(&l.server_cpu)
            .map(|(r, c)| round_metrics(r, *c, at_link))
            .collect();
        let mut summary = BTreeMap::new();
        for (k, _) in metric_values(&RoundMetrics::default()) {
            // Rounds where nothing succeeded have no figures.
            let v: Vec<f64> = rounds
                .iter()
                .filter(|m| m.completed > 0)
                .filter_map(|m| metric_values(m).into_iter().find(|(n, _)| *n == k)?.1)
                .collect();
            if !v.is_empty() {
                summary.insert(k.to_string(), mean_sd(&v));
            }
        }
        let latency = merged(&l.rounds, |r| Some(&r.latency.hdr));
        let request_cdf = if latency.is_empty() {
            Vec::new()
        } else {
            (0..=100)
                .map(|i| {
                    let q = f64::from(i) / 100.0;
                    [ms(latency.quantile(q).as_nanos() as f64), q]
                })
                .collect()
        };
        let hist = |h: LatencyHistogram| -> Vec<[f64; 2]> {
            if h.is_empty() {
                return Vec::new();
            }
            h.bins(0, hi, 30)
                .into_iter()
                .map(|(s, c)| [ms(s as f64), c as f64])
                .collect()
        };
        let mut errors = BTreeMap::new();
        for r in &l.rounds {
            for (k, v) in &r.errors {
                *errors.entry(k.clone()).or_default() += v;
            }
        }
        // A configuration whose requests fail (more than 1% of those attempted) is not
        // compared: its figures would count failures as speed.
        let attempted: u64 = rounds.iter().map(|m| m.completed + m.failed).sum();
        let failed_requests: u64 = rounds.iter().map(|m| m.failed).sum();
        let failure_rate = if attempted > 0 {
            failed_requests as f64 / attempted as f64
        } else {
            1.0
        };
        let failed = failure_rate > result::FAILED_SHARE;
        let mut vs_baseline = BTreeMap::new();
        if i > 0 && !failed && !cells[0].failed {
            let base = &cells[0].rounds;
            for (metric, higher) in result::COMPARED {
                if let Some(v) = versus(base, &rounds, metric, direction(higher)) {
                    vs_baseline.insert(metric.to_string(), v);
                }
            }
        }
        cells.push(CellResult {
            name: l.cell.name.clone(),
            label: l.cell.label.clone(),
            settings: serde_json::to_value(&l.cell).unwrap_or_default(),
            control: l.cell.control,
            failed,
            failure_rate,
            rounds,
            summary,
            vs_baseline,
            request_cdf,
            handshake_full_hist: hist(merged(&l.rounds, |r| {
                r.handshake_full.as_ref().map(|d| &d.hdr)
            })),
            handshake_resumed_hist: hist(merged(&l.rounds, |r| {
                r.handshake_resumed.as_ref().map(|d| &d.hdr)
            })),
            errors,
            crypto_limit_pct: None,
            capacity: None,
        });
    }
    GroupResult {
        group: group.name().to_string(),
        title: group.title().to_string(),
        baseline,
        warnings: disturbance(&cells),
        cells,
    }
}

pub(super) fn direction(higher_is_better: bool) -> Direction {
    if higher_is_better {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    }
}

/// `metric` of the rounds where something completed.
pub(super) fn pick(rounds: &[RoundMetrics], metric: &str) -> Vec<f64> {
    rounds
        .iter()
        .filter(|m| m.completed > 0)
        .filter_map(|m| metric_values(m).into_iter().find(|(n, _)| *n == metric)?.1)
        .collect()
}

/// Welch's test of `metric` over the rounds of the baseline and a cell (all of them: no
/// outlier filter), with its minimum detectable effect.
pub fn versus(
    base: &[RoundMetrics],
    cell: &[RoundMetrics],
    metric: &str,
    direction: Direction,
) -> Option<Versus> {
    let a = Samples {
        source: "baseline".into(),
        values: pick(base, metric),
    };
    let b = Samples {
        source: "cell".into(),
        values: pick(cell, metric),
    };
    let c = compare(
        &a,
        &b,
        &CompareOptions {
            alpha: result::ALPHA,
            // The rounds as measured: with 8 rounds a side, dropping the extreme ones
            // before the t-test understates the spread, and raised the A/A controls'
            // false-positive rate above α on a busy 2-core machine.
            filter: false,
            direction,
        },
    )
    .ok()?;
    let mde = (c.a.summary.mean != 0.0)
        .then(|| {
            crate::stats::min_detectable_difference(
                &c.a.summary,
                &c.b.summary,
                result::ALPHA,
                result::POWER,
            )
        })
        .flatten()
        .map(|d| d / c.a.summary.mean.abs());
    let p = crate::stats::compare::format_p(c.welch.p);
    let detectable = mde.map_or(String::new(), |m| {
        format!(
            "; it would detect a change of ±{:.1}% with 80% power",
            m * 100.0
        )
    });
    let verdict = match (c.significant, c.relative_change) {
        (true, Some(r)) => {
            let better = (r > 0.0) == (direction == Direction::HigherIsBetter);
            format!(
                "significantly {} than the baseline: {:+.1}% (Welch p = {p}){detectable}",
                if better { "better" } else { "worse" },
                r * 100.0
            )
        }
        _ => match mde {
            Some(m) => format!(
                "no significant difference (Welch p = {p}): no difference larger than about ±{:.1}% (80% power, α = 0.05)",
                m * 100.0
            ),
            None => format!("no significant difference (Welch p = {p})"),
        },
    };
    Some(Versus {
        relative_change: c.relative_change,
        p: c.welch.p,
        significant: c.significant,
        mde,
        outliers_dropped: [c.a.outliers_dropped, c.b.outliers_dropped],
        verdict,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(rounds: Vec<RoundMetrics>) -> CellResult {
        CellResult {
            name: "c".into(),
            label: "c".into(),
            settings: serde_json::Value::Null,
            control: false,
            failed: false,
            failure_rate: 0.0,
            rounds,
            summary: BTreeMap::new(),
            vs_baseline: BTreeMap::new(),
            request_cdf: Vec::new(),
            handshake_full_hist: Vec::new(),
            handshake_resumed_hist: Vec::new(),
            errors: BTreeMap::new(),
            crypto_limit_pct: None,
            capacity: None,
        }
    }

    fn round(generator: f64, server: Option<f64>) -> RoundMetrics {
        RoundMetrics {
            completed: 100,
            generator_waiting_share: Some(generator),
            server_waiting_share: server,
            ..RoundMetrics::default()
        }
    }

    /// A run whose load generator waited for a CPU most of the time in some rounds (a
    /// lab beside a build: client CPU per handshake 30× its usual figure) is warned
    /// about per group, with the count of such rounds and the worst share; a quiet one
    /// is not.
    #[test]
    fn starved_rounds_are_warned_about_per_group() {
        let quiet = vec![
            cell(vec![round(0.02, Some(0.01)), round(0.05, None)]),
            cell(vec![round(0.1, Some(0.19)), round(0.0, Some(0.0))]),
        ];
        assert!(disturbance(&quiet).is_empty());
        let busy = vec![
            cell(vec![round(0.64, Some(0.01)), round(0.05, Some(0.3))]),
            cell(vec![round(0.2, Some(0.0)), round(0.0, Some(0.0))]),
        ];
        let w = disturbance(&busy);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with(
                "the load generator was starved of CPU in 2 of 4 rounds (waiting for a CPU up to 64% of the time it wanted one; a round counts from 20%)"
            ),
            "{}",
            w[0]
        );
        assert!(
            w[1].starts_with("the servers were starved of CPU in 1 of 4 rounds (waiting for a CPU up to 30% of the time they wanted one"),
            "{}",
            w[1]
        );
    }
}
