//! Welch's two-sample t-test (unequal variances), as `scipy.stats.ttest_ind(a, b,
//! equal_var=False)` computes it, plus the confidence interval of the difference of means.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::StatsError;
use super::summary::Summary;

/// The outcome of Welch's t-test of A against B.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WelchTest {
    /// t = (mean A − mean B) / √(s²A/nA + s²B/nB), scipy's sign convention.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value from Student's t distribution with `df` degrees of freedom.
    pub p: f64,
    /// Mean of B − mean of A.
    pub diff: f64,
    /// Confidence interval of `diff`: lower bound.
    pub ci_low: f64,
    /// Confidence interval of `diff`: upper bound.
    pub ci_high: f64,
    /// Confidence level of the interval (e.g. 0.95).
    pub confidence: f64,
}

/// Runs Welch's test on the summaries of A and B, with a `confidence` (e.g. 0.95)
/// interval for mean B − mean A. Each sample needs at least two values, and at least one
/// of them a non-zero variance.
///
/// ```
/// use tlsperf::stats::{Summary, welch_t_test};
/// let a = Summary::of(&[12.1, 11.8, 12.6, 13.0, 12.2, 11.9, 12.4, 12.8, 12.0, 12.5])?;
/// let b = Summary::of(&[13.4, 13.9, 12.9, 14.2, 13.1, 13.8, 14.0, 13.3])?;
/// let w = welch_t_test(&a, &b, 0.95)?;
/// assert!((w.t - -6.014952).abs() < 1e-6 && (w.df - 13.878281).abs() < 1e-6);
/// assert!(w.p < 0.05);
/// # Ok::<(), tlsperf::stats::StatsError>(())
/// ```
pub fn welch_t_test(a: &Summary, b: &Summary, confidence: f64) -> Result<WelchTest, StatsError> {
    for (name, s) in [("sample A", a), ("sample B", b)] {
        if s.n < 2 {
            return Err(StatsError::TooFew {
                what: format!("Welch's t-test ({name})"),
                needed: 2,
                got: s.n,
            });
        }
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(StatsError::BadParam {
            name: "confidence",
            reason: format!("{confidence} is not strictly between 0 and 1"),
        });
    }
    let va = a.variance() / a.n as f64;
    let vb = b.variance() / b.n as f64;
    let se2 = va + vb;
    if se2 <= 0.0 {
        return Err(StatsError::ZeroVariance {
            mean_a: a.mean,
            mean_b: b.mean,
        });
    }
    let se = se2.sqrt();
    let t = (a.mean - b.mean) / se;
    let df = se2 * se2 / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    if !df.is_finite() || !se.is_finite() {
        return Err(StatsError::BadParam {
            name: "samples",
            reason: "their spread is too large for 64-bit floats (values up to 1e75 can be \
                     compared)"
                .into(),
        });
    }
    let dist = StudentsT::new(0.0, 1.0, df).map_err(|e| StatsError::BadParam {
        name: "degrees of freedom",
        reason: format!("{df}: {e}"),
    })?;
    let p = (2.0 * dist.sf(t.abs())).min(1.0);
    let t_crit = dist.inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    let diff = b.mean - a.mean;
    Ok(WelchTest {
        t,
        df,
        p,
        diff,
        ci_low: diff - t_crit * se,
        ci_high: diff + t_crit * se,
        confidence,
    })
}

/// The smallest difference of means Welch's test of these two samples would detect with
/// probability `power` at two-sided level `alpha`, at the variance observed:
/// (t₁₋α/₂ + t_power) · √(s²A/nA + s²B/nB), with Student's t quantiles at the
/// Welch–Satterthwaite degrees of freedom (the normal approximation for large samples).
/// Absolute, in the samples' unit; `None` when the test is undefined (fewer than two
/// values on a side, no variance at all, or a level outside (0, 1)).
///
/// ```
/// use tlsperf::stats::{Summary, min_detectable_difference};
/// let a = Summary::of(&[100.0, 102.0, 98.0, 101.0, 99.0])?;
/// let d = min_detectable_difference(&a, &a, 0.05, 0.8).unwrap();
/// // se = √(2 · 2.5 / 5) = 1; df = 8: t(0.975) + t(0.8) = 2.306 + 0.889.
/// assert!((d - 3.195).abs() < 0.01, "{d}");
/// # Ok::<(), tlsperf::stats::StatsError>(())
/// ```
pub fn min_detectable_difference(a: &Summary, b: &Summary, alpha: f64, power: f64) -> Option<f64> {
    if a.n < 2 || b.n < 2 || !(alpha > 0.0 && alpha < 1.0) || !(power > 0.0 && power < 1.0) {
        return None;
    }
    let va = a.variance() / a.n as f64;
    let vb = b.variance() / b.n as f64;
    let se2 = va + vb;
    if se2 <= 0.0 || !se2.is_finite() {
        return None;
    }
    let df = se2 * se2 / (va * va / (a.n - 1) as f64 + vb * vb / (b.n - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((dist.inverse_cdf(1.0 - alpha / 2.0) + dist.inverse_cdf(power)) * se2.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [f64; 10] = [12.1, 11.8, 12.6, 13.0, 12.2, 11.9, 12.4, 12.8, 12.0, 12.5];
    const B: [f64; 8] = [13.4, 13.9, 12.9, 14.2, 13.1, 13.8, 14.0, 13.3];

    #[test]
    fn scipy_reference() {
        let a = Summary::of(&A).unwrap();
        let b = Summary::of(&B).unwrap();
        let w = welch_t_test(&a, &b, 0.95).unwrap();
        assert!((w.t - -6.014952).abs() < 1e-6, "t = {}", w.t);
        assert!((w.df - 13.878281).abs() < 1e-6, "df = {}", w.df);
        assert!((w.p - 3.29168e-05).abs() < 1e-6, "p = {}", w.p);
        // Relative check of p to more digits than the absolute tolerance can show.
        assert!((w.p / 3.29168e-05 - 1.0).abs() < 1e-4, "p = {}", w.p);
        assert!(w.ci_low < w.diff && w.diff < w.ci_high && w.ci_low > 0.0);
    }

    #[test]
    fn symmetric() {
        let a = Summary::of(&A).unwrap();
        let b = Summary::of(&B).unwrap();
        let ab = welch_t_test(&a, &b, 0.95).unwrap();
        let ba = welch_t_test(&b, &a, 0.95).unwrap();
        assert!((ab.t + ba.t).abs() < 1e-12);
        assert!((ab.p - ba.p).abs() < 1e-15);
    }

    #[test]
    fn identical_samples_give_p_one() {
        let a = Summary::of(&A).unwrap();
        let w = welch_t_test(&a, &a, 0.95).unwrap();
        assert_eq!(w.t, 0.0);
        assert!((w.p - 1.0).abs() < 1e-12);
    }

    #[test]
    fn detectable_difference_shrinks_with_more_rounds_and_matches_the_formula() {
        let a = Summary::of(&A).unwrap();
        let b = Summary::of(&B).unwrap();
        let d = min_detectable_difference(&a, &b, 0.05, 0.8).unwrap();
        let w = welch_t_test(&a, &b, 0.95).unwrap();
        let se = w.diff / -w.t;
        let t = StudentsT::new(0.0, 1.0, w.df).unwrap();
        let want = (t.inverse_cdf(0.975) + t.inverse_cdf(0.8)) * se;
        assert!((d - want).abs() < 1e-12, "{d} vs {want}");
        // Roughly (1.96 + 0.84) · se for many degrees of freedom.
        assert!(d > 2.8 * se && d < 3.3 * se, "{d} {se}");
        // The observed difference (≈ 1.3) is larger than what the test detects at 80%.
        assert!(w.diff.abs() > d);
        let more: Vec<f64> = A.iter().chain(A.iter()).copied().collect();
        let m = Summary::of(&more).unwrap();
        assert!(
            min_detectable_difference(&m, &m, 0.05, 0.8).unwrap()
                < min_detectable_difference(&a, &a, 0.05, 0.8).unwrap()
        );
        let c = Summary::of(&[2.0, 2.0, 2.0]).unwrap();
        assert!(min_detectable_difference(&c, &c, 0.05, 0.8).is_none());
        assert!(min_detectable_difference(&Summary::of(&[1.0]).unwrap(), &a, 0.05, 0.8).is_none());
    }

    #[test]
    fn errors() {
        let one = Summary::of(&[1.0]).unwrap();
        let a = Summary::of(&A).unwrap();
        assert!(matches!(
            welch_t_test(&one, &a, 0.95),
            Err(StatsError::TooFew { got: 1, .. })
        ));
        let c = Summary::of(&[2.0, 2.0, 2.0]).unwrap();
        assert!(matches!(
            welch_t_test(&c, &c, 0.95),
            Err(StatsError::ZeroVariance { .. })
        ));
        assert!(welch_t_test(&a, &a, 1.0).is_err());
    }
}
