//! The rows a floor run records and the statistics its report reads from them.
//!
//! A row is `ROUND KEY VALUE SECOND LOAD`, kept as the text it was written with (a value
//! is rounded where it is measured, and every figure is computed from the rounded text,
//! so that the report's figures can be recomputed from the rows it prints). Two readings
//! of them:
//! - [`Rows::med`], [`Rows::rng`], [`Rows::ratio`]: the table cells. A median of an odd
//!   count is the middle row's own text; of an even count, the mean of the middle two,
//!   written with the cell's decimals; `-` when there is none.
//! - [`Rounds`]: one value per key and round (the last written), for the figures computed
//!   round by round (a round missing a term, or whose term cannot be used, is left out),
//!   then their median, unrounded.

use std::collections::BTreeMap;
use std::fmt;

use tlsperf::stats::summary::median;

/// One measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The round (1, 2, …).
    pub round: u32,
    /// What was measured (`serve`, `plain`, `rf1.3-ids-full`, …).
    pub key: String,
    /// The figure, as written.
    pub value: String,
    /// A second figure (h2load's own CPU, the resumed count), `0` when there is none.
    pub second: String,
    /// The 1-minute load average when the step began.
    pub load: String,
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {}",
            self.round, self.key, self.value, self.second, self.load
        )
    }
}

/// A row's text as a number, as awk reads it: 0 where it is none.
pub fn num(text: &str) -> f64 {
    text.trim().parse().unwrap_or(0.0)
}

/// The median of texts: the middle one's own text for an odd count, the mean of the two
/// middle ones with `decimals` for an even count, `-` for none.
pub fn median_text(values: &[&str], decimals: usize) -> String {
    let mut v: Vec<(f64, &str)> = values.iter().map(|t| (num(t), *t)).collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    match v.len() {
        0 => "-".into(),
        n if n % 2 == 1 => v[n / 2].1.to_string(),
        // The mean of the middle two as awk computes it, the sign of a zero kept (-0.0
        // where both are), which an interpolation from the lower one would lose.
        n => format!("{:.*}", decimals, (v[n / 2 - 1].0 + v[n / 2].0) / 2.0),
    }
}

/// The median of per-round ratios, each written with 3 decimals first.
pub fn median_of_ratios(ratios: impl IntoIterator<Item = f64>) -> String {
    let texts: Vec<String> = ratios.into_iter().map(|r| format!("{r:.3}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    median_text(&refs, 3)
}

/// A float as Python's format writes it (`nan`, `inf` where Rust would write `NaN`).
pub fn py(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{v:.decimals$}")
    }
}

/// Every row of a run, in the order written.
#[derive(Debug, Default, Clone)]
pub struct Rows(pub Vec<Row>);

impl Rows {
    /// Adds a row.
    pub fn push(
        &mut self,
        round: u32,
        key: &str,
        value: impl Into<String>,
        second: impl Into<String>,
        load: &str,
    ) {
        self.0.push(Row {
            round,
            key: key.into(),
            value: value.into(),
            second: second.into(),
            load: load.into(),
        });
    }

    fn texts(&self, key: &str, second: bool) -> Vec<&str> {
        self.0
            .iter()
            .filter(|r| r.key == key)
            .map(|r| if second { &r.second } else { &r.value }.as_str())
            .collect()
    }

    /// The median of KEY's values (`-` for none); an even count's with one decimal.
    pub fn med(&self, key: &str) -> String {
        median_text(&self.texts(key, false), 1)
    }

    /// The median of KEY's second figures.
    pub fn med2(&self, key: &str) -> String {
        median_text(&self.texts(key, true), 1)
    }

    /// KEY's smallest and largest value, `lo–hi`, as written.
    pub fn rng(&self, key: &str) -> String {
        let mut v: Vec<(f64, &str)> = self
            .texts(key, false)
            .into_iter()
            .map(|t| (num(t), t))
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let lo = v.first().map_or("", |p| p.1);
        let hi = v.last().map_or("", |p| p.1);
        format!("{lo}–{hi}")
    }

    /// The load averages of KEY's rows, `a/b/c`.
    pub fn loads(&self, key: &str) -> String {
        self.0
            .iter()
            .filter(|r| r.key == key)
            .map(|r| r.load.as_str())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// KEY's value per round (the last written in a round), as numbers.
    pub fn by_round(&self, key: &str) -> BTreeMap<u32, f64> {
        self.0
            .iter()
            .filter(|r| r.key == key)
            .map(|r| (r.round, num(&r.value)))
            .collect()
    }

    /// The rounds that have a row KEY, in the order first written.
    pub fn rounds_of(&self, key: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for r in self.0.iter().filter(|r| r.key == key) {
            if !out.contains(&r.round) {
                out.push(r.round);
            }
        }
        out
    }

    /// A ÷ B per round (rounds where B > 0), then their median.
    pub fn ratio(&self, a: &str, b: &str) -> String {
        let (x, y) = (self.by_round(a), self.by_round(b));
        median_of_ratios(x.iter().filter_map(|(r, xa)| {
            let yb = y.get(r).copied().unwrap_or(0.0);
            (yb > 0.0).then(|| xa / yb)
        }))
    }
}

/// One value per key and round: the figures computed round by round.
pub struct Rounds {
    values: BTreeMap<String, BTreeMap<u32, f64>>,
    rounds: Vec<u32>,
}

impl Rounds {
    /// The rows' values; the rounds are those of the `serve` rows.
    pub fn of(rows: &Rows) -> Rounds {
        let mut values: BTreeMap<String, BTreeMap<u32, f64>> = BTreeMap::new();
        for r in &rows.0 {
            values
                .entry(r.key.clone())
                .or_default()
                .insert(r.round, num(&r.value));
        }
        Rounds {
            values,
            rounds: rows.rounds_of("serve"),
        }
    }

    /// FIGURE of every round where all of its terms are there (and it is not `None`).
    pub fn each(&self, figure: impl Fn(&dyn Fn(&str) -> Option<f64>) -> Option<f64>) -> Vec<f64> {
        self.rounds
            .iter()
            .filter_map(|r| figure(&|k: &str| self.values.get(k)?.get(r).copied()))
            .collect()
    }

    /// The median of [`Rounds::each`]; NaN when no round has it.
    pub fn median(&self, figure: impl Fn(&dyn Fn(&str) -> Option<f64>) -> Option<f64>) -> f64 {
        median(&self.each(figure)).unwrap_or(f64::NAN)
    }
}

/// A ÷ B, `None` when B is zero (a round without that figure).
pub fn div(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(lines: &[&str]) -> Rows {
        let mut out = Rows::default();
        for l in lines {
            let f: Vec<&str> = l.split(' ').collect();
            out.push(f[0].parse().unwrap(), f[1], f[2], f[3], f[4]);
        }
        out
    }

    #[test]
    fn a_median_keeps_the_middle_text_or_means_the_middle_two() {
        assert_eq!(median_text(&["3.10", "1.0", "2.50"], 1), "2.50");
        assert_eq!(median_text(&["3.0", "1.0", "2.0", "10.0"], 1), "2.5");
        assert_eq!(median_text(&["0.1234", "0.1240"], 3), "0.124");
        assert_eq!(median_text(&["-0.0", "-0.0"], 1), "-0.0");
        assert_eq!(median_text(&[], 1), "-");
        // sorted as numbers, not as text
        assert_eq!(median_text(&["9", "10", "100"], 1), "10");
    }

    #[test]
    fn table_cells() {
        let r = rows(&[
            "1 serve 200.5 900.1 0.50",
            "1 plain 50.0 300.0 0.50",
            "2 serve 210.0 910.0 0.70",
            "2 plain 0 0 0.70",
            "3 serve 190.0 905.0 0.90",
        ]);
        assert_eq!(r.med("serve"), "200.5");
        assert_eq!(r.med2("serve"), "905.0");
        assert_eq!(r.rng("serve"), "190.0–210.0");
        assert_eq!(r.rng("none"), "–");
        assert_eq!(r.loads("serve"), "0.50/0.70/0.90");
        // round 2's plain is 0 and round 3 has none: only round 1's ratio counts
        assert_eq!(r.ratio("serve", "plain"), "4.010");
        assert_eq!(r.ratio("plain", "none"), "-");
        assert_eq!(r.0[0].to_string(), "1 serve 200.5 900.1 0.50");
    }

    #[test]
    fn figures_round_by_round_leave_out_rounds_without_a_term() {
        let r = rows(&[
            "1 serve 200 0 0",
            "1 plain 100 0 0",
            "2 serve 300 0 0",
            "2 plain 100 0 0",
            "3 serve 400 0 0",
            "4 plain 1 0 0",
        ]);
        let rounds = Rounds::of(&r);
        let f = |g: &dyn Fn(&str) -> Option<f64>| div(g("serve")?, g("plain")?);
        assert_eq!(rounds.each(f), vec![2.0, 3.0]);
        assert_eq!(rounds.median(f), 2.5);
        assert!(rounds.median(|g| g("none")).is_nan());
        assert_eq!(div(1.0, 0.0), None);
    }

    #[test]
    fn python_style_numbers() {
        assert_eq!(py(f64::NAN, 3), "nan");
        assert_eq!(py(1.23456, 3), "1.235");
        assert_eq!(py(f64::INFINITY, 1), "inf");
    }
}
