//! Is B's capacity really higher than A's? Two capacity results compared on what their
//! steps show: each side's steps are judged again against its objective and its
//! capacity estimated from them ([`super::knee`], the same conclusion `merge` draws),
//! never taken from the document's stated answer alone. B is higher when its 90%
//! credible interval lies wholly above A's, lower in the mirror case, and not
//! distinguishable when the two intervals overlap. The gain comes with the range the
//! two intervals allow.
//!
//! With `--server-pid` on both sides, the server's CPU time per answered request in the
//! passing steps near each capacity is compared too: on a shared machine another tenant
//! can slow the CPU without taking it (no steal, no run-queue wait), and the same server
//! then has a lower capacity. A difference over [`COST_CHANGE`] is named in a note,
//! so that a "higher" or "lower" it explains is not taken for the server's own doing.
//!
//! One comparison, one [`CapacityRow`], given to `tlsperf compare` as the one row of a
//! `tlsperf-compare/1` document ([`rows`]): no Welch test (a search gives one answer
//! per run, not rounds), the verdict is the brackets'.

use serde::Serialize;

use super::conclusion::{Outcome, conclude};
use super::numbers::group;
use super::result::CapacityResult;
use super::step::Step;
use crate::stats::compare::Direction;
use crate::stats::rows::{
    Comparable, Identity, Outcome as RowOutcome, Row, RowComparison, RowSet, RowSide, RowsCompared,
    Section,
};

/// The kind's name in comparison documents.
pub const KIND: &str = "capacity";

const SECTION: Section = Section {
    name: KIND,
    title: "",
};

impl Comparable for CapacityResult {
    const KIND: &'static str = KIND;

    /// One row, the confirmed capacity (a median, no rounds): what `compare` would match
    /// on; [`rows`] gives its verdict.
    fn row_set(&self) -> RowSet {
        RowSet {
            sections: vec![SECTION],
            rows: vec![Row {
                section: KIND,
                identity: identity(self),
                unit: "requests/s".into(),
                direction: Direction::HigherIsBetter,
                rounds: None,
                median: self.capacity_per_s,
                context: None,
            }],
            settings: Vec::new(),
            notes: Vec::new(),
        }
    }
}

fn identity(r: &CapacityResult) -> Identity {
    Identity(vec![("objective", r.slo.to_string())])
}

/// The comparison as the rows of a `tlsperf-compare/1` document: one row, its outcome
/// `higher`, `lower` or `no-difference` by the intervals, `ratio` B ÷ A of the
/// capacities, `relative_change` B ÷ A − 1, no p-value.
pub fn rows(a: &CapacityResult, b: &CapacityResult) -> Result<RowsCompared, CompareError> {
    let row = compare(a, b)?;
    let side = |s: &CapacitySide| RowSide {
        rounds: 0,
        used: None,
        outliers_dropped: None,
        median: Some(s.capacity_per_s),
        raw: None,
        summary: None,
        filter: None,
    };
    let outcome = match row.verdict {
        CapacityVerdict::Higher => RowOutcome::Higher,
        CapacityVerdict::Lower => RowOutcome::Lower,
        CapacityVerdict::NoDifference => RowOutcome::NoDifference,
    };
    let id = identity(a);
    let mut warnings = row.notes.clone();
    if a.target != b.target {
        warnings.push(format!("target differs: A {}, B {}", a.target, b.target));
    }
    Ok(RowsCompared {
        sections: vec![SECTION],
        rows: vec![RowComparison {
            section: KIND,
            label: id.label(),
            identity: id,
            unit: "requests/s".into(),
            direction: Direction::HigherIsBetter,
            a: side(&row.a),
            b: side(&row.b),
            ratio: Some(row.b.capacity_per_s / row.a.capacity_per_s),
            relative_change: Some(row.change),
            p: None,
            welch: None,
            significant: row.verdict != CapacityVerdict::NoDifference,
            outcome,
            verdict: row.message.clone(),
        }],
        only_in_a: Vec::new(),
        only_in_b: Vec::new(),
        warnings,
    })
}

/// The verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityVerdict {
    /// B's interval lies above A's.
    Higher,
    /// A's interval lies above B's.
    Lower,
    /// The intervals overlap: no difference the steps can show.
    NoDifference,
}

/// One side, as its steps show it.
#[derive(Debug, Clone, Serialize)]
pub struct CapacitySide {
    /// The URL.
    pub target: String,
    /// The capacity estimated from its steps (per second).
    pub capacity_per_s: f64,
    /// Its 90% credible interval.
    pub interval_per_s: [f64; 2],
    /// How its steps conclude (`capacity` when the interval is within its resolution).
    pub outcome: Outcome,
    /// The capacity the document states, when it differs from what its steps show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stated_per_s: Option<f64>,
    /// The server's CPU microseconds per answered request, the median of its passing
    /// steps at half the capacity or more (`--server-pid`; [`server_cost_us`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_us_per_request: Option<f64>,
}

/// The relative difference in the server's CPU per request ([`server_cost_us`]) from
/// which a comparison names it.
pub const COST_CHANGE: f64 = 0.10;

/// The server's CPU microseconds per answered request in the judged `steps` near
/// `capacity` ([`super::step::costs_near`]): their median; `None` without
/// `--server-pid` or such steps.
pub fn server_cost_us(steps: &[Step], capacity: f64) -> Option<f64> {
    let costs = super::step::costs_near(steps, capacity);
    let n = costs.len();
    match n {
        0 => None,
        n if n % 2 == 1 => Some(costs[n / 2]),
        n => Some((costs[n / 2 - 1] + costs[n / 2]) / 2.0),
    }
}

/// The comparison, as one row.
#[derive(Debug, Clone, Serialize)]
pub struct CapacityRow {
    /// What is compared: "capacity at `<objective>`".
    pub metric: String,
    /// A.
    pub a: CapacitySide,
    /// B.
    pub b: CapacitySide,
    /// B ÷ A − 1, on the capacities.
    pub change: f64,
    /// The change's range over the intervals: `[B low ÷ A high − 1, B high ÷ A low − 1]`.
    pub change_range: [f64; 2],
    /// The verdict.
    pub verdict: CapacityVerdict,
    /// In plain words.
    pub message: String,
    /// What the reader should know: a side whose stated answer its steps do not show.
    pub notes: Vec<String>,
}

/// Results that cannot be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// One side's steps do not bound a capacity.
    #[error("{side}: its steps bound no capacity to compare ({outcome}: {message})")]
    NoCapacity {
        /// "A" or "B".
        side: &'static str,
        /// How its steps conclude.
        outcome: &'static str,
        /// Their conclusion.
        message: String,
    },
    /// A side no search can have written ([`CapacityResult::validate`]).
    #[error("{side}: not a valid capacity result: {why}")]
    Invalid {
        /// "A" or "B".
        side: &'static str,
        /// What is wrong.
        why: String,
    },
    /// Different objectives.
    #[error(
        "A was searched under {a}, B under {b}: capacities at different objectives do not compare"
    )]
    Objective {
        /// A's objective.
        a: String,
        /// B's.
        b: String,
    },
}

impl crate::error::Classify for CompareError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// One side from its steps, judged again, and a note when the document states another
/// answer than they show.
fn side(
    name: &'static str,
    r: &CapacityResult,
) -> Result<(CapacitySide, Option<String>), CompareError> {
    r.validate()
        .map_err(|why| CompareError::Invalid { side: name, why })?;
    let mut steps = r.steps.clone();
    for s in &mut steps {
        s.judge(&r.slo, &r.rules);
    }
    let c = conclude(&steps, &r.rules, r.outcome);
    let (Some(capacity), Some(interval), false) = (
        c.capacity_per_s,
        c.interval_per_s,
        c.outcome == Outcome::GeneratorBound,
    ) else {
        return Err(CompareError::NoCapacity {
            side: name,
            outcome: c.outcome.name(),
            message: c.message,
        });
    };
    let differs = match r.capacity_per_s {
        Some(stated) => (stated / capacity - 1.0).abs() > 0.005,
        None => false,
    };
    let note = differs.then(|| {
        format!(
            "{name}'s document states a capacity of {}/s; its steps show {}/s ({}–{}/s): \
             compared on its steps",
            group(r.capacity_per_s.unwrap_or_default()),
            group(capacity),
            group(interval[0]),
            group(interval[1])
        )
    });
    Ok((
        CapacitySide {
            target: r.target.clone(),
            capacity_per_s: capacity,
            interval_per_s: interval,
            outcome: c.outcome,
            stated_per_s: r.capacity_per_s.filter(|_| differs),
            server_cpu_us_per_request: server_cost_us(&steps, capacity),
        },
        note,
    ))
}

/// Compares A and B ([module docs](self)).
pub fn compare(a: &CapacityResult, b: &CapacityResult) -> Result<CapacityRow, CompareError> {
    if a.slo != b.slo {
        return Err(CompareError::Objective {
            a: a.slo.to_string(),
            b: b.slo.to_string(),
        });
    }
    let (sa, note_a) = side("A", a)?;
    let (sb, note_b) = side("B", b)?;
    let [a_lo, a_hi] = sa.interval_per_s;
    let [b_lo, b_hi] = sb.interval_per_s;
    let verdict = if b_lo > a_hi {
        CapacityVerdict::Higher
    } else if a_lo > b_hi {
        CapacityVerdict::Lower
    } else {
        CapacityVerdict::NoDifference
    };
    let change = sb.capacity_per_s / sa.capacity_per_s - 1.0;
    let change_range = [b_lo / a_hi - 1.0, b_hi / a_lo - 1.0];
    let pct = |x: f64| format!("{:+.0}%", x * 100.0);
    let span = |lo: f64, hi: f64| format!("{}–{}/s", group(lo), group(hi));
    let message = match verdict {
        CapacityVerdict::Higher | CapacityVerdict::Lower => format!(
            "B's capacity is {}: {} ({}..{}); B's 90% interval {} lies {} A's {}",
            if verdict == CapacityVerdict::Higher {
                "higher"
            } else {
                "lower"
            },
            pct(change),
            pct(change_range[0]),
            pct(change_range[1]),
            span(b_lo, b_hi),
            if verdict == CapacityVerdict::Higher {
                "above"
            } else {
                "below"
            },
            span(a_lo, a_hi)
        ),
        CapacityVerdict::NoDifference => format!(
            "no difference the steps can show: A's capacity lies in {}, B's in {} (90% \
             intervals, overlapping); more steps near the knees (a narrower --resolution) \
             may separate them",
            span(a_lo, a_hi),
            span(b_lo, b_hi)
        ),
    };
    let cost_note = match (sa.server_cpu_us_per_request, sb.server_cpu_us_per_request) {
        (Some(ca), Some(cb)) if (cb / ca - 1.0).abs() > COST_CHANGE => Some(format!(
            "the server's CPU time per answered request differs: A {ca:.0} µs, B {cb:.0} µs \
             ({}), in the passing steps near each capacity. The same work cost B's server \
             {} CPU time: another tenant can slow a shared CPU without taking it (no \
             steal, no run-queue wait), so a change in capacity of about that size may be \
             the machine's, not the server's",
            pct(cb / ca - 1.0),
            if cb > ca { "more" } else { "less" }
        )),
        _ => None,
    };
    Ok(CapacityRow {
        metric: format!("capacity at {}", a.slo),
        a: sa,
        b: sb,
        change,
        change_range,
        verdict,
        message,
        notes: note_a.into_iter().chain(note_b).chain(cost_note).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::result::tests::result_of;
    use crate::capacity::step::tests::knee_steps;

    /// A search whose steps passed at `lo` and failed at `hi`, four times each.
    fn result(lo: f64, hi: f64) -> CapacityResult {
        result_of(knee_steps(lo, hi))
    }

    /// `r` with the server's CPU seconds set so that each step cost `us` per request.
    fn with_server_cost(mut r: CapacityResult, us: f64) -> CapacityResult {
        for s in &mut r.steps {
            s.server_cpu_seconds = Some(s.completed as f64 * us / 1e6);
        }
        r
    }

    /// Two runs whose server took 30% more CPU per request in one: named, with both
    /// figures; 5% apart, or without the figures: nothing said.
    #[test]
    fn a_changed_cost_per_request_is_named() {
        let a = with_server_cost(result(1000.0, 1050.0), 900.0);
        let b = with_server_cost(result(1200.0, 1260.0), 1170.0);
        let row = compare(&a, &b).unwrap();
        assert_eq!(row.a.server_cpu_us_per_request, Some(900.0));
        assert_eq!(row.b.server_cpu_us_per_request, Some(1170.0));
        let note = row
            .notes
            .iter()
            .find(|n| n.contains("CPU time per answered request"))
            .unwrap_or_else(|| panic!("{:?}", row.notes));
        assert!(note.contains("A 900 µs, B 1170 µs (+30%)"), "{note}");
        let near = with_server_cost(result(1200.0, 1260.0), 945.0);
        let row = compare(&a, &near).unwrap();
        assert!(
            row.notes
                .iter()
                .all(|n| !n.contains("per answered request"))
        );
        let row = compare(&result(1000.0, 1050.0), &b).unwrap();
        assert_eq!(row.a.server_cpu_us_per_request, None);
        assert!(
            row.notes
                .iter()
                .all(|n| !n.contains("per answered request"))
        );
    }

    #[test]
    fn higher_only_where_the_intervals_separate() {
        let a = result(1000.0, 1050.0);
        let b = result(1200.0, 1260.0);
        let row = compare(&a, &b).unwrap();
        assert_eq!(row.verdict, CapacityVerdict::Higher, "{}", row.message);
        assert!((row.change - 0.2).abs() < 0.03, "{}", row.change);
        assert!(row.message.contains("lies above A's"), "{}", row.message);
        assert_eq!(compare(&b, &a).unwrap().verdict, CapacityVerdict::Lower);
        let c = result(1030.0, 1080.0);
        assert_eq!(
            compare(&a, &c).unwrap().verdict,
            CapacityVerdict::NoDifference
        );
        // Steps that never failed bound no capacity.
        let mut none = result(1000.0, 1050.0);
        none.steps.retain(|s| s.offered_per_s < 1050.0);
        let c = conclude(&none.steps, &none.rules, Outcome::TimeLimit);
        none.set_conclusion(c);
        let e = compare(&a, &none).unwrap_err();
        assert!(
            e.to_string().starts_with("B: its steps bound no capacity"),
            "{e}"
        );
    }

    /// The document's stated answer is not believed: B claims 5,000/s within a
    /// widened interval, its steps show about 1,000/s, and no difference is found.
    #[test]
    fn judges_the_steps_not_the_stated_answer() {
        let a = result(1000.0, 1050.0);
        let mut b = a.clone();
        b.capacity_per_s = Some(5000.0);
        b.interval_per_s = Some([4900.0, 5100.0]);
        let row = compare(&a, &b).unwrap();
        assert_eq!(
            row.verdict,
            CapacityVerdict::NoDifference,
            "{}",
            row.message
        );
        assert!(
            row.notes[0].starts_with("B's document states a capacity of 5,000/s"),
            "{:?}",
            row.notes
        );
        // A step the document calls a pass, whose latencies broke the objective, is
        // judged a failure again.
        let mut c = result(1000.0, 1050.0);
        for s in &mut c.steps {
            if s.offered_per_s == 1050.0 {
                s.verdict = crate::capacity::step::Verdict::Pass;
            }
        }
        assert_eq!(
            compare(&a, &c).unwrap().verdict,
            CapacityVerdict::NoDifference
        );
    }

    /// A side no search can have written is refused, not turned into "+inf%" or a
    /// 300-digit percentage.
    #[test]
    fn refuses_a_side_no_search_can_have_written() {
        let a = result(1000.0, 1050.0);
        for (edit, says) in [
            (
                (|r: &mut CapacityResult| r.capacity_per_s = Some(0.0)) as fn(&mut CapacityResult),
                "capacity_per_s 0/s is not a rate",
            ),
            (|r| r.capacity_per_s = Some(1e308), "capacity_per_s 1e308/s"),
            (|r| r.capacity_per_s = Some(-500.0), "capacity_per_s -500/s"),
        ] {
            let mut b = a.clone();
            edit(&mut b);
            let e = compare(&a, &b).unwrap_err();
            assert!(
                e.to_string().starts_with("B: not a valid capacity result"),
                "{e}"
            );
            assert!(e.to_string().contains(says), "{e}");
        }
        assert_eq!(group(1e15), "1,000,000,000,000,000");
        assert_eq!(group(-1234.0), "-1,234");
        assert_eq!(group(f64::INFINITY), "inf");
    }
}
