//! Is B really different from A? Summaries of both samples, Tukey's IQR filter on each,
//! Welch's t-test, the confidence interval of the difference, and a one-line verdict.

use serde::Serialize;

use super::StatsError;
use super::iqr::IqrFilter;
use super::samples::Samples;
use super::summary::Summary;
use super::welch::{WelchTest, welch_t_test};

/// Which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Samples are costs (durations): lower is better; verdicts say slower/faster.
    #[default]
    LowerIsBetter,
    /// Samples are rates (requests/s): higher is better; verdicts say higher/lower.
    HigherIsBetter,
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Significance level; the confidence interval is at 1 − alpha.
    pub alpha: f64,
    /// Drop IQR outliers from each sample before testing.
    pub filter: bool,
    /// Which way is better.
    pub direction: Direction,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            alpha: 0.05,
            filter: true,
            direction: Direction::LowerIsBetter,
        }
    }
}

/// One side of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct SideSummary {
    /// Where the samples came from.
    pub source: String,
    /// Summary of all samples as read.
    pub raw: Summary,
    /// Summary of the samples the test used (after the filter, if any).
    pub summary: Summary,
    /// The IQR filter's fences and dropped values (absent with the filter off).
    pub filter: Option<IqrFilter>,
    /// How many samples the filter dropped.
    pub outliers_dropped: usize,
}

/// The result of comparing B against A.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Baseline.
    pub a: SideSummary,
    /// Candidate.
    pub b: SideSummary,
    /// Significance level.
    pub alpha: f64,
    /// Which way is better.
    pub direction: Direction,
    /// Welch's test on the (filtered) samples.
    pub welch: WelchTest,
    /// (mean B − mean A) / mean A; absent when mean A is 0.
    pub relative_change: Option<f64>,
    /// p < alpha.
    pub significant: bool,
    /// One human sentence.
    pub verdict: String,
}

/// Compares two samples.
pub fn compare(a: &Samples, b: &Samples, opts: &CompareOptions) -> Result<Comparison, StatsError> {
    if !(opts.alpha > 0.0 && opts.alpha < 1.0) {
        return Err(StatsError::BadParam {
            name: "--alpha",
            reason: format!("{} is not strictly between 0 and 1", opts.alpha),
        });
    }
    let side_a = side(a, opts.filter, "A")?;
    let side_b = side(b, opts.filter, "B")?;
    let welch = welch_t_test(&side_a.summary, &side_b.summary, 1.0 - opts.alpha)?;
    let relative_change =
        (side_a.summary.mean != 0.0).then(|| welch.diff / side_a.summary.mean.abs());
    let significant = welch.p < opts.alpha;
    let verdict = verdict(&welch, relative_change, significant, opts);
    Ok(Comparison {
        a: side_a,
        b: side_b,
        alpha: opts.alpha,
        direction: opts.direction,
        welch,
        relative_change,
        significant,
        verdict,
    })
}

fn side(s: &Samples, filter: bool, name: &str) -> Result<SideSummary, StatsError> {
    let too_few = |got| StatsError::TooFew {
        what: format!("sample {name} ({})", s.source),
        needed: 2,
        got,
    };
    if s.values.len() < 2 {
        return Err(too_few(s.values.len()));
    }
    let raw = Summary::of(&s.values)?;
    let (summary, filter, dropped) = if filter {
        let f = IqrFilter::apply(&s.values);
        if f.kept.len() < 2 {
            return Err(too_few(f.kept.len()));
        }
        let dropped = f.outliers.len();
        (Summary::of(&f.kept)?, Some(f), dropped)
    } else {
        (raw, None, 0)
    };
    Ok(SideSummary {
        source: s.source.clone(),
        raw,
        summary,
        filter,
        outliers_dropped: dropped,
    })
}

fn verdict(w: &WelchTest, rel: Option<f64>, significant: bool, opts: &CompareOptions) -> String {
    let p = format_p(w.p);
    if !significant {
        return format!("no significant difference (p={p}, α={})", opts.alpha);
    }
    let word = match (opts.direction, w.diff > 0.0) {
        (Direction::LowerIsBetter, true) => "slower",
        (Direction::LowerIsBetter, false) => "faster",
        (Direction::HigherIsBetter, true) => "higher (better)",
        (Direction::HigherIsBetter, false) => "lower (worse)",
    };
    let amount = match rel {
        Some(r) => format!("{:.1}%", r.abs() * 100.0),
        None => format!("{:.4} (absolute; A's mean is 0)", w.diff.abs()),
    };
    format!(
        "B is {amount} {word} than A (p={p}, significant at α={})",
        opts.alpha
    )
}

/// Formats a p-value the way papers and scipy users read it: `0.75`, `0.012`, `3.3e-05`.
pub fn format_p(p: f64) -> String {
    if p >= 0.001 {
        let s = format!("{p:.3}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() { "0".into() } else { s.into() }
    } else if p == 0.0 {
        "0".into()
    } else {
        let exp = p.log10().floor() as i32;
        let mut mantissa = p / 10f64.powi(exp);
        let mut exp = exp;
        if format!("{mantissa:.1}") == "10.0" {
            mantissa = 1.0;
            exp += 1;
        }
        format!(
            "{mantissa:.1}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn samples(v: &[f64]) -> Samples {
        Samples {
            source: "x".into(),
            values: v.to_vec(),
        }
    }

    const A: [f64; 10] = [12.1, 11.8, 12.6, 13.0, 12.2, 11.9, 12.4, 12.8, 12.0, 12.5];
    const B: [f64; 8] = [13.4, 13.9, 12.9, 14.2, 13.1, 13.8, 14.0, 13.3];

    #[test]
    fn slower_verdict() {
        let c = compare(&samples(&A), &samples(&B), &CompareOptions::default()).unwrap();
        assert!(c.significant);
        assert_eq!(
            c.verdict,
            "B is 10.1% slower than A (p=3.3e-05, significant at α=0.05)"
        );
        let c = compare(
            &samples(&A),
            &samples(&B),
            &CompareOptions {
                direction: Direction::HigherIsBetter,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            c.verdict.starts_with("B is 10.1% higher (better) than A"),
            "{}",
            c.verdict
        );
    }

    #[test]
    fn not_significant() {
        let b: Vec<f64> = A.iter().rev().map(|x| x + 0.01).collect();
        let c = compare(&samples(&A), &samples(&b), &CompareOptions::default()).unwrap();
        assert!(!c.significant);
        assert!(
            c.verdict.starts_with("no significant difference (p=0.9"),
            "{}",
            c.verdict
        );
    }

    #[test]
    fn filter_drops_outliers() {
        let mut a = A.to_vec();
        a.push(100.0);
        let c = compare(&samples(&a), &samples(&B), &CompareOptions::default()).unwrap();
        assert_eq!(c.a.outliers_dropped, 1);
        assert_eq!(c.a.summary.n, 10);
        let c = compare(
            &samples(&a),
            &samples(&B),
            &CompareOptions {
                filter: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(c.a.outliers_dropped, 0);
        assert_eq!(c.a.summary.n, 11);
    }

    #[test]
    fn errors() {
        let one = Samples::parse(Path::new("one.txt"), "5\n").unwrap();
        let err = compare(&one, &samples(&B), &CompareOptions::default()).unwrap_err();
        assert!(err.to_string().contains("one.txt"), "{err}");
        let bad_alpha = CompareOptions {
            alpha: 1.5,
            ..Default::default()
        };
        assert!(compare(&samples(&A), &samples(&B), &bad_alpha).is_err());
    }

    #[test]
    fn p_formatting() {
        assert_eq!(format_p(3.29168e-05), "3.3e-05");
        assert_eq!(format_p(0.75), "0.75");
        assert_eq!(format_p(0.0123), "0.012");
        assert_eq!(format_p(1.0), "1");
        assert_eq!(format_p(9.96e-5), "1.0e-04");
    }
}
