//! One comparison engine for every kind of result: a result says what its rows are (a
//! [`RowSet`]: each row's identity, its rounds or samples, its unit and which direction
//! is better, the settings of the run) and [`compare_rows`] does the rest for two of them:
//!
//! - rows are matched by section and identity, never by position (duplicates pair in
//!   order); rows found in one result only are listed apart;
//! - each matched row: Tukey's 1.5×IQR filter on each side (unless turned off) and
//!   Welch's t-test through [`super::compare()`]; a side with fewer than two rounds is a
//!   row that says so, not an error, and so is a side with a median but no rounds;
//! - settings that differ, rows whose context differs (what a handshake negotiated) and
//!   each result's own notes become warnings.

use serde::{Serialize, Serializer};

use super::StatsError;
use super::compare::{CompareOptions, Direction, compare};
use super::iqr::IqrFilter;
use super::samples::Samples;
use super::summary::Summary;
use super::welch::WelchTest;

/// What identifies a row: named fields, in display order (serialized as a JSON object).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Identity(pub Vec<(&'static str, String)>);

impl Identity {
    /// The values joined by spaces, e.g. `ed25519 aws-lc-rs sign`.
    pub fn label(&self) -> String {
        self.0
            .iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Serialize for Identity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Something about a row that should be the same in both results for its figures to
/// compare well (e.g. what a handshake negotiated); a warning when it differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// What the warning names, e.g. `aws-lc-rs 1.3 ecdsa-p256 full`.
    pub subject: String,
    /// What it is, e.g. `negotiated`.
    pub what: &'static str,
    /// Its value.
    pub value: String,
}

/// One row of a result, ready to match.
#[derive(Debug, Clone)]
pub struct Row {
    /// The part of the result it comes from (a [`Section`]'s name).
    pub section: &'static str,
    /// What identifies it within its section.
    pub identity: Identity,
    /// The unit of its rounds, e.g. `ns/op`, `ms`, `handshakes/s`.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// Its rounds (or samples); `None` when the result holds only a median.
    pub rounds: Option<Vec<f64>>,
    /// The median the result reports, used when there are no rounds to take it from.
    pub median: Option<f64>,
    /// What should match between A and B, if anything.
    pub context: Option<Context>,
}

/// A part of a result's rows, with the heading its table gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Section {
    /// Its name, as in `rows[].section`.
    pub name: &'static str,
    /// Its heading (empty: none).
    pub title: &'static str,
}

/// Everything of one result that a comparison needs.
#[derive(Debug, Clone, Default)]
pub struct RowSet {
    /// The sections, in display order.
    pub sections: Vec<Section>,
    /// The rows, in the result's order.
    pub rows: Vec<Row>,
    /// Settings that should be equal for the figures to compare well, by name.
    pub settings: Vec<(String, String)>,
    /// Anything else about this result a reader of the comparison should know, as the
    /// end of a sentence whose subject is the result (`has no rounds of …`).
    pub notes: Vec<String>,
}

/// The most rounds one row of a document may bring to a comparison.
pub const MAX_ROUNDS: usize = 1_000_000;

impl RowSet {
    /// Checks the figures of a document's rows: every round and median is a finite
    /// measurement, not negative (every document kind's rows are times, rates or sizes),
    /// and no row brings more than [`MAX_ROUNDS`] rounds.
    /// `Err` names the first row that is not.
    pub fn check(&self) -> Result<(), String> {
        for r in &self.rows {
            let n = r.rounds.as_ref().map_or(0, Vec::len);
            if n > MAX_ROUNDS {
                return Err(format!(
                    "{}: {n} rounds, more than the {MAX_ROUNDS} a comparison takes",
                    r.identity.label()
                ));
            }
            let bad = r
                .rounds
                .iter()
                .flatten()
                .chain(r.median.iter())
                .find(|v| !(v.is_finite() && **v >= 0.0));
            if let Some(v) = bad {
                let label = r.identity.label();
                let what = if label.is_empty() {
                    r.section.to_string()
                } else {
                    label
                };
                return Err(format!("{what}: {v} {} is not a measurement", r.unit));
            }
        }
        Ok(())
    }
}

/// A result whose rows can be compared: the one thing a document kind implements to
/// join `tlsperf compare`.
pub trait Comparable {
    /// The kind's short name in comparison documents: `load`, `lab`, `sign`…
    const KIND: &'static str;

    /// Its rows, sections, settings and notes.
    fn row_set(&self) -> RowSet;
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowOptions {
    /// Significance level, strictly between 0 and 1.
    pub alpha: f64,
    /// Tukey's 1.5×IQR filter on each side's rounds before the test.
    pub filter: bool,
}

impl Default for RowOptions {
    fn default() -> Self {
        RowOptions {
            alpha: 0.05,
            filter: true,
        }
    }
}

/// How a row came out, B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Lower is better and B is significantly lower (takes less time).
    Faster,
    /// Lower is better and B is significantly higher.
    Slower,
    /// Higher is better and B is significantly higher.
    Higher,
    /// Higher is better and B is significantly lower.
    Lower,
    /// p ≥ alpha.
    NoDifference,
    /// A side has fewer than two rounds (Welch needs two per side).
    TooFewRounds,
    /// A side has a median but no rounds.
    MediansOnly,
    /// The test cannot be computed (both sides constant).
    Untestable,
}

impl Outcome {
    /// Whether B came out significantly better (`Some(true)`), worse (`Some(false)`), or
    /// neither.
    pub fn better(self) -> Option<bool> {
        match self {
            Outcome::Faster | Outcome::Higher => Some(true),
            Outcome::Slower | Outcome::Lower => Some(false),
            _ => None,
        }
    }

    /// Whether a test was made (significant or not).
    pub fn tested(self) -> bool {
        self.better().is_some() || self == Outcome::NoDifference
    }
}

/// One side of a compared row.
#[derive(Debug, Clone, Serialize)]
pub struct RowSide {
    /// Rounds in the result (0 when it holds only a median).
    pub rounds: usize,
    /// Rounds the test used (after the filter); null when there was no test.
    pub used: Option<usize>,
    /// Rounds the filter dropped; null when there was no test or the filter was off.
    pub outliers_dropped: Option<usize>,
    /// Median: of the rounds the test used, else of the rounds the filter keeps (all of
    /// them with the filter off), else the result's own median; null when there is none.
    pub median: Option<f64>,
    /// Summary of all the rounds; null when there are none.
    pub raw: Option<Summary>,
    /// Summary of the rounds the test used; null when there was no test.
    pub summary: Option<Summary>,
    /// The filter's quartiles, fences and dropped rounds; null without a test or filter.
    pub filter: Option<IqrFilter>,
}

/// One row matched in both results.
#[derive(Debug, Clone, Serialize)]
pub struct RowComparison {
    /// The section it comes from.
    pub section: &'static str,
    /// The identity's values joined by spaces.
    pub label: String,
    /// What identifies it.
    pub identity: Identity,
    /// The unit of its rounds (A's).
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// Baseline.
    pub a: RowSide,
    /// Candidate.
    pub b: RowSide,
    /// How many times better B is than A by their medians: B ÷ A where higher is
    /// better, A ÷ B where lower is (for ns/op: B's ops/s ÷ A's); above 1, B is better;
    /// null without both medians.
    pub ratio: Option<f64>,
    /// (mean B − mean A) / |mean A| of the rounds tested; null without a test or when
    /// mean A is 0.
    pub relative_change: Option<f64>,
    /// Welch's two-sided p-value; null without a test.
    pub p: Option<f64>,
    /// Welch's test on the rounds (`diff` is mean B − mean A); null without one.
    pub welch: Option<WelchTest>,
    /// Whether p < alpha.
    pub significant: bool,
    /// How the row came out.
    pub outcome: Outcome,
    /// One human sentence.
    pub verdict: String,
}

/// A row present in one result only.
#[derive(Debug, Clone, Serialize)]
pub struct Unmatched {
    /// The section it comes from.
    pub section: &'static str,
    /// The identity's values joined by spaces.
    pub label: String,
    /// What identifies it.
    pub identity: Identity,
}

/// Two row sets compared, B against A.
#[derive(Debug, Clone, Serialize)]
pub struct RowsCompared {
    /// The sections of both, A's first, in display order.
    pub sections: Vec<Section>,
    /// Rows in both, in A's order.
    pub rows: Vec<RowComparison>,
    /// Rows only A has.
    pub only_in_a: Vec<Unmatched>,
    /// Rows only B has.
    pub only_in_b: Vec<Unmatched>,
    /// Settings and contexts that differ, and each result's notes.
    pub warnings: Vec<String>,
}

impl RowsCompared {
    /// How many rows came out `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.rows.iter().filter(|r| r.outcome == outcome).count()
    }
}

/// Checks a significance level: strictly between 0 and 1.
pub fn check_alpha(alpha: f64) -> Result<(), StatsError> {
    if alpha > 0.0 && alpha < 1.0 {
        Ok(())
    } else {
        Err(StatsError::BadParam {
            name: "--alpha",
            reason: format!("{alpha} is not strictly between 0 and 1"),
        })
    }
}

/// Compares the rows of B against those of A. Fails only on an `alpha` out of range: a
/// row that cannot be tested says why in its verdict.
pub fn compare_rows(a: &RowSet, b: &RowSet, opts: &RowOptions) -> Result<RowsCompared, StatsError> {
    check_alpha(opts.alpha)?;
    let (pairs, only_a, only_b) = match_rows(&a.rows, &b.rows);
    let mut sections = a.sections.clone();
    for s in &b.sections {
        if !sections.iter().any(|x| x.name == s.name) {
            sections.push(*s);
        }
    }
    let mut warnings = setting_warnings(&a.settings, &b.settings);
    for &(i, j) in &pairs {
        if let (Some(ca), Some(cb)) = (&a.rows[i].context, &b.rows[j].context) {
            let w = format!(
                "{}: {} {} in A but {} in B",
                ca.subject, ca.what, ca.value, cb.value
            );
            if ca.value != cb.value && !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    for (name, set) in [("A", a), ("B", b)] {
        warnings.extend(set.notes.iter().map(|n| format!("{name} {n}")));
    }
    let unmatched = |rows: &[Row], idx: Vec<usize>| {
        idx.into_iter()
            .map(|i| Unmatched {
                section: rows[i].section,
                label: rows[i].identity.label(),
                identity: rows[i].identity.clone(),
            })
            .collect()
    };
    Ok(RowsCompared {
        sections,
        rows: pairs
            .into_iter()
            .map(|(i, j)| compare_row(&a.rows[i], &b.rows[j], opts))
            .collect(),
        only_in_a: unmatched(&a.rows, only_a),
        only_in_b: unmatched(&b.rows, only_b),
        warnings,
    })
}

/// Pairs every row of A with the first unpaired row of B of the same section and
/// identity. Returns the pairs (in A's order) and the indices left over in A and in B.
fn match_rows(a: &[Row], b: &[Row]) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
    let mut used = vec![false; b.len()];
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for (i, ra) in a.iter().enumerate() {
        let found = b
            .iter()
            .enumerate()
            .position(|(j, rb)| !used[j] && rb.section == ra.section && rb.identity == ra.identity);
        match found {
            Some(j) => {
                used[j] = true;
                pairs.push((i, j));
            }
            None => only_a.push(i),
        }
    }
    let only_b = (0..b.len()).filter(|&j| !used[j]).collect();
    (pairs, only_a, only_b)
}

fn setting_warnings(a: &[(String, String)], b: &[(String, String)]) -> Vec<String> {
    a.iter()
        .filter_map(|(name, va)| {
            let vb = b.iter().find(|(n, _)| n == name).map(|(_, v)| v)?;
            (va != vb).then(|| format!("{name} differs: A {va}, B {vb}"))
        })
        .collect()
}

/// A side before any test: its rounds' summary and median (filtered as the test would).
fn side_of(row: &Row, filter: bool) -> RowSide {
    let rounds = row.rounds.as_deref().unwrap_or(&[]);
    let median = |v: &[f64]| Summary::of(v).ok().map(|s| s.median);
    RowSide {
        rounds: rounds.len(),
        used: None,
        outliers_dropped: None,
        median: if rounds.is_empty() {
            row.median
        } else if filter {
            median(&IqrFilter::apply(rounds).kept)
        } else {
            median(rounds)
        },
        raw: Summary::of(rounds).ok(),
        summary: None,
        filter: None,
    }
}

fn ratio(direction: Direction, a: &RowSide, b: &RowSide) -> Option<f64> {
    let (a, b) = (a.median?, b.median?);
    let r = match direction {
        Direction::LowerIsBetter => a / b,
        Direction::HigherIsBetter => b / a,
    };
    (r.is_finite() && r > 0.0).then_some(r)
}

fn compare_row(a: &Row, b: &Row, opts: &RowOptions) -> RowComparison {
    let label = a.identity.label();
    let mut side_a = side_of(a, opts.filter);
    let mut side_b = side_of(b, opts.filter);
    let row = |side_a: RowSide,
               side_b: RowSide,
               test: Option<(WelchTest, Option<f64>)>,
               outcome: Outcome,
               verdict: String| RowComparison {
        section: a.section,
        label: label.clone(),
        identity: a.identity.clone(),
        unit: a.unit.clone(),
        direction: a.direction,
        ratio: ratio(a.direction, &side_a, &side_b),
        a: side_a,
        b: side_b,
        relative_change: test.and_then(|t| t.1),
        p: test.map(|t| t.0.p),
        welch: test.map(|t| t.0),
        significant: outcome.better().is_some(),
        outcome,
        verdict,
    };
    let (Some(ra), Some(rb)) = (&a.rounds, &b.rounds) else {
        let which = match (&a.rounds, &b.rounds) {
            (None, None) => "A and B have",
            (None, _) => "A has",
            _ => "B has",
        };
        let verdict = format!("medians only: {which} no rounds to test");
        return row(side_a, side_b, None, Outcome::MediansOnly, verdict);
    };
    let too_few = |na: usize, nb: usize| {
        format!("too few rounds to test (A {na}, B {nb}; Welch needs 2 per side)")
    };
    if ra.len() < 2 || rb.len() < 2 {
        let verdict = too_few(ra.len(), rb.len());
        return row(side_a, side_b, None, Outcome::TooFewRounds, verdict);
    }
    let samples = |name: &str, v: &[f64]| Samples {
        source: format!("{name} {label}"),
        values: v.to_vec(),
    };
    let copts = CompareOptions {
        alpha: opts.alpha,
        filter: opts.filter,
        direction: a.direction,
    };
    match compare(&samples("A", ra), &samples("B", rb), &copts) {
        Ok(c) => {
            for (side, s) in [(&mut side_a, &c.a), (&mut side_b, &c.b)] {
                side.used = Some(s.summary.n);
                side.outliers_dropped = s.filter.as_ref().map(|_| s.outliers_dropped);
                side.median = Some(s.summary.median);
                side.summary = Some(s.summary);
                side.filter = s.filter.clone();
            }
            let outcome = match (c.significant, a.direction, c.welch.diff < 0.0) {
                (false, _, _) => Outcome::NoDifference,
                (true, Direction::LowerIsBetter, true) => Outcome::Faster,
                (true, Direction::LowerIsBetter, false) => Outcome::Slower,
                (true, Direction::HigherIsBetter, true) => Outcome::Lower,
                (true, Direction::HigherIsBetter, false) => Outcome::Higher,
            };
            let test = Some((c.welch, c.relative_change));
            row(side_a, side_b, test, outcome, c.verdict)
        }
        Err(StatsError::TooFew { .. }) => {
            let verdict = too_few(ra.len(), rb.len());
            row(side_a, side_b, None, Outcome::TooFewRounds, verdict)
        }
        Err(e) => row(
            side_a,
            side_b,
            None,
            Outcome::Untestable,
            format!("cannot test: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOW: [f64; 5] = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
    const FAST: [f64; 5] = [500.0, 505.0, 495.0, 502.0, 498.0];

    fn row(name: &str, rounds: &[f64]) -> Row {
        Row {
            section: "rows",
            identity: Identity(vec![("name", name.into())]),
            unit: "ns/op".into(),
            direction: Direction::LowerIsBetter,
            rounds: Some(rounds.to_vec()),
            median: None,
            context: None,
        }
    }

    fn set(rows: Vec<Row>) -> RowSet {
        RowSet {
            sections: vec![Section {
                name: "rows",
                title: "",
            }],
            rows,
            ..Default::default()
        }
    }

    #[test]
    fn rows_match_by_identity_not_position() {
        let a = set(vec![row("x", &SLOW), row("y", &FAST), row("z", &SLOW)]);
        let b = set(vec![row("y", &FAST), row("w", &SLOW), row("x", &FAST)]);
        let c = compare_rows(&a, &b, &RowOptions::default()).unwrap();
        let got: Vec<_> = c
            .rows
            .iter()
            .map(|r| (r.label.as_str(), r.outcome))
            .collect();
        assert_eq!(got, [("x", Outcome::Faster), ("y", Outcome::NoDifference)]);
        assert!((c.rows[0].ratio.unwrap() - 2.0).abs() < 0.05);
        assert_eq!(c.only_in_a[0].label, "z");
        assert_eq!(c.only_in_b[0].identity.get("name"), Some("w"));
        let v = serde_json::to_value(&c.rows[0]).unwrap();
        assert_eq!(v["identity"]["name"], "x");
        assert_eq!(v["outcome"], "faster");
    }

    #[test]
    fn higher_is_better_rows_say_higher_and_lower() {
        let mut a = row("rate", &FAST);
        a.direction = Direction::HigherIsBetter;
        let mut b = row("rate", &SLOW);
        b.direction = Direction::HigherIsBetter;
        let c = compare_rows(
            &set(vec![a.clone()]),
            &set(vec![b.clone()]),
            &RowOptions::default(),
        )
        .unwrap();
        assert_eq!(c.rows[0].outcome, Outcome::Higher);
        assert!(c.rows[0].ratio.unwrap() > 1.9);
        let c = compare_rows(&set(vec![b]), &set(vec![a]), &RowOptions::default()).unwrap();
        assert_eq!(c.rows[0].outcome, Outcome::Lower);
    }

    #[test]
    fn rows_that_cannot_be_tested_say_why() {
        let a = set(vec![row("one", &[1000.0]), row("flat", &[7.0, 7.0, 7.0])]);
        let mut only_median = row("one", &[]);
        only_median.rounds = None;
        only_median.median = Some(500.0);
        let b = set(vec![only_median, row("flat", &[7.0, 7.0, 7.0])]);
        let c = compare_rows(&a, &a, &RowOptions::default()).unwrap();
        assert_eq!(c.rows[0].outcome, Outcome::TooFewRounds);
        assert_eq!(c.rows[0].a.median, Some(1000.0));
        assert_eq!(c.rows[1].outcome, Outcome::Untestable);
        assert!(c.rows[1].verdict.contains("zero variance"));
        let c = compare_rows(&a, &b, &RowOptions::default()).unwrap();
        assert_eq!(c.rows[0].outcome, Outcome::MediansOnly);
        assert_eq!(c.rows[0].ratio, Some(2.0));
        let bad = RowOptions {
            alpha: 1.0,
            filter: true,
        };
        assert!(compare_rows(&a, &b, &bad).is_err());
    }

    #[test]
    fn settings_contexts_and_notes_become_warnings() {
        let with = |seconds: &str, value: &str| {
            let ctx = |side: &str| {
                let mut r = row(side, &SLOW);
                r.context = Some(Context {
                    subject: "hs".into(),
                    what: "negotiated",
                    value: value.into(),
                });
                r
            };
            let mut s = set(vec![ctx("client"), ctx("server")]);
            s.settings = vec![("seconds".into(), seconds.into())];
            s
        };
        let mut b = with("0.2", "TLS 1.2");
        b.notes.push("has no rounds".into());
        let c = compare_rows(&with("1", "TLS 1.3"), &b, &RowOptions::default()).unwrap();
        assert_eq!(
            c.warnings,
            [
                "seconds differs: A 1, B 0.2",
                "hs: negotiated TLS 1.3 in A but TLS 1.2 in B",
                "B has no rounds"
            ]
        );
    }

    #[test]
    fn the_filter_is_reported_per_side() {
        let with_outlier = [100.0, 102.0, 98.0, 101.0, 99.0, 100.0, 500.0];
        let plain = [100.0, 102.0, 98.0, 101.0, 99.0];
        let (a, b) = (
            set(vec![row("x", &with_outlier)]),
            set(vec![row("x", &plain)]),
        );
        let c = compare_rows(&a, &b, &RowOptions::default()).unwrap();
        let side = &c.rows[0].a;
        assert_eq!(
            (side.rounds, side.used, side.outliers_dropped),
            (7, Some(6), Some(1))
        );
        assert_eq!(side.median, Some(100.0));
        assert_eq!(side.filter.as_ref().unwrap().outliers, [500.0]);
        let off = RowOptions {
            filter: false,
            ..Default::default()
        };
        let c = compare_rows(&a, &b, &off).unwrap();
        assert_eq!(
            (c.rows[0].a.used, c.rows[0].a.outliers_dropped),
            (Some(7), None)
        );
    }
}
