//! Is B's capacity really higher than A's? Two capacity results compared on their
//! confirmation runs: B is higher when B's confirmed rate is at or above a rate A failed
//! at (B met the objective, in a confirmation run, where A did not), lower in the
//! mirror case, and not distinguishable when the two brackets overlap. The gain comes
//! with the range the two brackets allow.
//!
//! One comparison, one [`CapacityRow`], given to `tlsperf compare` as the one row of a
//! `tlsperf-compare/1` document ([`rows`]): no Welch test (a search gives one answer
//! per run, not rounds), the verdict is the brackets'.

use serde::Serialize;

use super::result::{CapacityResult, Outcome, group};
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
/// `higher`, `lower` or `no-difference` by the brackets, `ratio` B ÷ A of the confirmed
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
    let mut warnings = Vec::new();
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
    /// B met the objective at a rate A failed at.
    Higher,
    /// A met the objective at a rate B failed at.
    Lower,
    /// The brackets overlap: no difference at the searches' resolution.
    NoDifference,
}

/// One side: its confirmed capacity and bracket.
#[derive(Debug, Clone, Serialize)]
pub struct CapacitySide {
    /// The URL.
    pub target: String,
    /// Confirmed capacity (per second).
    pub capacity_per_s: f64,
    /// `[highest pass, lowest failure]`.
    pub interval_per_s: [f64; 2],
    /// `[lowest failure, highest pass]` where its steps contradicted each other
    /// ([`crate::capacity::result::disputed`]).
    pub disputed_per_s: Option<[f64; 2]>,
    /// The confirmation run's corrected p99 (ms).
    pub confirmation_p99_ms: Option<f64>,
}

impl CapacitySide {
    /// Where this side's capacity may lie ([`range`]).
    pub fn range_per_s(&self) -> [f64; 2] {
        range(self.interval_per_s, self.disputed_per_s)
    }
}

/// Where a search's capacity may lie: its bracket `[highest pass, lowest failure]`,
/// widened to the band where its steps disagreed (near a knee that decides by chance,
/// another search of the same server may answer anywhere in that band). `compare` and
/// the lab's capacity recommendations both judge on it.
pub fn range(interval: [f64; 2], disputed: Option<[f64; 2]>) -> [f64; 2] {
    let [lo, hi] = interval;
    match disputed {
        Some([d_lo, d_hi]) => [lo.min(d_lo), hi.max(d_hi)],
        None => [lo, hi],
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
    /// B ÷ A − 1, on the confirmed capacities.
    pub change: f64,
    /// The change's range over the brackets: `[B low ÷ A high − 1, B high ÷ A low − 1]`.
    pub change_range: [f64; 2],
    /// The verdict.
    pub verdict: CapacityVerdict,
    /// In plain words.
    pub message: String,
}

/// Results that cannot be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// No confirmed capacity on one side.
    #[error("{side}: no confirmed capacity to compare ({outcome}: {message})")]
    NoCapacity {
        /// "A" or "B".
        side: &'static str,
        /// Its outcome.
        outcome: &'static str,
        /// Its conclusion.
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

fn side(name: &'static str, r: &CapacityResult) -> Result<CapacitySide, CompareError> {
    // What a reader refuses ([`CapacityResult::validate`]) is refused here too, for
    // results built in memory: a ratio needs a capacity above zero within its bracket.
    r.validate()
        .map_err(|why| CompareError::Invalid { side: name, why })?;
    match (r.outcome, r.capacity_per_s, r.interval_per_s) {
        (Outcome::Capacity, Some(c), Some(iv)) => Ok(CapacitySide {
            target: r.target.clone(),
            capacity_per_s: c,
            interval_per_s: iv,
            disputed_per_s: r.disputed_per_s,
            confirmation_p99_ms: r.confirmation().and_then(|s| s.p99_ms),
        }),
        _ => Err(CompareError::NoCapacity {
            side: name,
            outcome: r.outcome.name(),
            message: r.message.clone(),
        }),
    }
}

/// Compares A and B ([module docs](self)).
pub fn compare(a: &CapacityResult, b: &CapacityResult) -> Result<CapacityRow, CompareError> {
    if a.slo != b.slo {
        return Err(CompareError::Objective {
            a: a.slo.to_string(),
            b: b.slo.to_string(),
        });
    }
    let (sa, sb) = (side("A", a)?, side("B", b)?);
    // The brackets, widened where a side's own steps disagreed: a difference inside
    // such a band is one another search of the same server could show.
    let [a_lo, a_hi] = sa.range_per_s();
    let [b_lo, b_hi] = sb.range_per_s();
    let verdict = if b_lo >= a_hi {
        CapacityVerdict::Higher
    } else if a_lo >= b_hi {
        CapacityVerdict::Lower
    } else {
        CapacityVerdict::NoDifference
    };
    let change = sb.capacity_per_s / sa.capacity_per_s - 1.0;
    let change_range = [b_lo / a_hi - 1.0, b_hi / a_lo - 1.0];
    let pct = |x: f64| format!("{:+.0}%", x * 100.0);
    let message = match verdict {
        CapacityVerdict::Higher => format!(
            "B's capacity is higher: {} ({}..{}); B met the objective at {}/s in its \
             confirmation run, where A failed at {}/s",
            pct(change),
            pct(change_range[0]),
            pct(change_range[1]),
            group(sb.capacity_per_s),
            group(sa.interval_per_s[1])
        ),
        CapacityVerdict::Lower => format!(
            "B's capacity is lower: {} ({}..{}); A met the objective at {}/s in its \
             confirmation run, where B failed at {}/s",
            pct(change),
            pct(change_range[0]),
            pct(change_range[1]),
            group(sa.capacity_per_s),
            group(sb.interval_per_s[1])
        ),
        CapacityVerdict::NoDifference => format!(
            "no difference the searches can tell: A lies in {}..{}/s, B in {}..{}/s \
             (overlapping; {})",
            group(a_lo),
            group(a_hi),
            group(b_lo),
            group(b_hi),
            if sa.disputed_per_s.is_some() || sb.disputed_per_s.is_some() {
                "a side whose steps disagreed spans the band where they did: near its knee \
                 a run passed or failed by chance"
            } else {
                "a finer --resolution may separate them"
            }
        ),
    };
    Ok(CapacityRow {
        metric: format!("capacity at {}", a.slo),
        a: sa,
        b: sb,
        change,
        change_range,
        verdict,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(lo: f64, hi: f64) -> CapacityResult {
        let steps = vec![
            crate::capacity::result::tests::step(1, crate::capacity::StepKind::Ramp, hi, 50, 200),
            crate::capacity::result::tests::step(2, crate::capacity::StepKind::Confirm, lo, 2, 200),
            // Both ends confirmed.
            crate::capacity::result::tests::step(
                3,
                crate::capacity::StepKind::Confirm,
                hi,
                50,
                200,
            ),
        ];
        crate::capacity::result::tests::result_of(steps)
    }

    #[test]
    fn higher_only_where_the_other_failed() {
        let a = result(1000.0, 1050.0);
        let b = result(1100.0, 1150.0);
        let row = compare(&a, &b).unwrap();
        assert_eq!(row.verdict, CapacityVerdict::Higher);
        assert!((row.change - 0.1).abs() < 1e-9);
        assert!(row.message.contains("+10%"), "{}", row.message);
        assert_eq!(compare(&b, &a).unwrap().verdict, CapacityVerdict::Lower);
        let c = result(1030.0, 1080.0);
        assert_eq!(
            compare(&a, &c).unwrap().verdict,
            CapacityVerdict::NoDifference
        );
        let mut none = result(1000.0, 1050.0);
        // Its failing end unconfirmed: no answer.
        none.steps.truncate(2);
        let c = crate::capacity::result::conclude(&none.steps, &none.rules, Outcome::TimeLimit);
        none.set_conclusion(c);
        let e = compare(&a, &none).unwrap_err();
        assert!(e.to_string().starts_with("B: no confirmed capacity"), "{e}");
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
            (
                |r| r.capacity_per_s = Some(5000.0),
                "capacity_per_s 5000 is outside its own interval_per_s [1000, 1050]",
            ),
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

    /// Two searches of one server whose knee decides by chance (pair J of
    /// docs/benchmarks.md: 600/s against 725/s): A's short steps passed up to 775/s
    /// although its confirmations failed from 625/s, so B's 725/s lies where A's own
    /// steps disagreed, and no difference is claimed.
    #[test]
    fn no_difference_inside_a_band_where_a_sides_steps_disagreed() {
        use crate::capacity::StepKind::Bisect;
        use crate::capacity::result::tests::step;
        let mut a = result(600.0, 625.0);
        a.steps.insert(0, step(0, Bisect, 775.0, 2, 200));
        let c = crate::capacity::result::conclude(&a.steps, &a.rules, Outcome::TimeLimit);
        a.warnings.clear();
        a.set_conclusion(c);
        assert_eq!(a.capacity_per_s, Some(600.0));
        assert_eq!(a.disputed_per_s, Some([625.0, 775.0]));
        assert!(
            a.warnings
                .iter()
                .any(|w| w.contains("between 625/s and 775/s"))
        );
        let b = result(725.0, 750.0);
        let row = compare(&a, &b).unwrap();
        assert_eq!(
            row.verdict,
            CapacityVerdict::NoDifference,
            "{}",
            row.message
        );
        assert!(
            row.message.contains("A lies in 600..775/s"),
            "{}",
            row.message
        );
        assert!(row.message.contains("steps disagreed"), "{}", row.message);
        // Without the short step's pass above the failures, B is higher.
        let plain = result(600.0, 625.0);
        let row = compare(&plain, &b).unwrap();
        assert_eq!(row.verdict, CapacityVerdict::Higher, "{}", row.message);
        assert!(
            row.message.contains("B met the objective at 725/s"),
            "{}",
            row.message
        );
        assert!(
            row.message.contains("where A failed at 625/s"),
            "{}",
            row.message
        );
    }
}
