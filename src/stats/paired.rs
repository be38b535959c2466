//! Student's paired t-test: the mean of the differences of matched pairs against zero,
//! as `scipy.stats.ttest_rel(b, a)` computes it, with the confidence interval of that
//! mean. For two samples measured under shared conditions (the same seconds of a busy
//! machine), pairing takes out what both suffered alike.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::StatsError;
use super::summary::Summary;

/// The outcome of a paired t-test of the differences B − A (t has n − 1 degrees of
/// freedom).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedTest {
    /// t = mean difference / (its standard deviation / √n).
    pub t: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// The mean difference (B − A), and its confidence interval.
    pub diff: f64,
    /// The interval: `[low, high]`.
    pub ci: [f64; 2],
}

/// Tests the summary of the differences B − A of matched pairs against zero, with a
/// `confidence` (e.g. 0.95) interval for their mean. Needs two pairs at least, and
/// differences that are not all the same.
///
/// ```
/// use tlsperf::stats::{Summary, paired_t_test};
/// // Pairs (1, 2), (2, 2), (3, 4), (4, 5), (5, 7): t = √10, df = 4, p = 0.03411.
/// let d = Summary::of(&[1.0, 0.0, 1.0, 1.0, 2.0])?;
/// let t = paired_t_test(&d, 0.95)?;
/// assert!((t.t - 3.162278).abs() < 1e-6 && (t.p - 0.034109).abs() < 1e-5);
/// # Ok::<(), tlsperf::stats::StatsError>(())
/// ```
pub fn paired_t_test(differences: &Summary, confidence: f64) -> Result<PairedTest, StatsError> {
    let d = differences;
    if d.n < 2 {
        return Err(StatsError::TooFew {
            what: "a paired t-test".into(),
            needed: 2,
            got: d.n,
        });
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(StatsError::BadParam {
            name: "confidence",
            reason: format!("{confidence} is not strictly between 0 and 1"),
        });
    }
    let se = d.stddev / (d.n as f64).sqrt();
    if se <= 0.0 || !se.is_finite() {
        return Err(StatsError::ZeroVariance {
            mean_a: 0.0,
            mean_b: d.mean,
        });
    }
    let df = (d.n - 1) as f64;
    let dist = StudentsT::new(0.0, 1.0, df).map_err(|e| StatsError::BadParam {
        name: "degrees of freedom",
        reason: format!("{df}: {e}"),
    })?;
    let t = d.mean / se;
    let t_crit = dist.inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    Ok(PairedTest {
        t,
        p: (2.0 * dist.sf(t.abs())).min(1.0),
        diff: d.mean,
        ci: [d.mean - t_crit * se, d.mean + t_crit * se],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scipy_reference_and_errors() {
        // t = √10 with 4 df: p by numerical integration of the density, 0.0341094.
        let d = Summary::of(&[1.0, 0.0, 1.0, 1.0, 2.0]).unwrap();
        let t = paired_t_test(&d, 0.95).unwrap();
        assert!((t.t - 3.162_277_66).abs() < 1e-6, "{t:?}");
        assert!((t.p - 0.034_109_4).abs() < 1e-6, "{t:?}");
        // mean 1 ± t(0.975, 4) = 2.776445 × 0.316228.
        assert!((t.ci[0] - (1.0 - 0.877_989)).abs() < 1e-5, "{t:?}");
        assert!((t.ci[1] - 1.877_989).abs() < 1e-5, "{t:?}");
        let flat = Summary::of(&[1.0, 1.0, 1.0]).unwrap();
        assert!(matches!(
            paired_t_test(&flat, 0.95),
            Err(StatsError::ZeroVariance { .. })
        ));
        let one = Summary::of(&[1.0]).unwrap();
        assert!(matches!(
            paired_t_test(&one, 0.95),
            Err(StatsError::TooFew { got: 1, .. })
        ));
    }
}
