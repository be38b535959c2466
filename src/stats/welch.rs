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
