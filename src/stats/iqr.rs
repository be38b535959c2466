//! Tukey's outlier filter: values outside [Q1 − 1.5·IQR, Q3 + 1.5·IQR] are dropped.
//! Quartiles use linear interpolation between order statistics, numpy's default
//! (`numpy.percentile(..., method="linear")`).

use serde::Serialize;

/// The `q`-quantile (0 ≤ q ≤ 1) of an ascending, non-empty slice, by linear interpolation
/// at position (n − 1)·q.
pub fn quantile_linear(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let pos = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// The result of Tukey's filter on one sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IqrFilter {
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// Lower fence, Q1 − 1.5·IQR.
    pub lower_fence: f64,
    /// Upper fence, Q3 + 1.5·IQR.
    pub upper_fence: f64,
    /// Values kept, in input order.
    #[serde(skip)]
    pub kept: Vec<f64>,
    /// Values dropped as outliers, in input order.
    pub outliers: Vec<f64>,
}

impl IqrFilter {
    /// Fence multiplier (Tukey's 1.5).
    pub const K: f64 = 1.5;

    /// Applies the filter. An empty input gives an empty result with NaN quartiles.
    ///
    /// ```
    /// let f = tlsperf::stats::IqrFilter::apply(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0]);
    /// assert_eq!((f.q1, f.q3), (3.25, 7.75));
    /// assert_eq!(f.outliers, vec![100.0]);
    /// ```
    pub fn apply(values: &[f64]) -> IqrFilter {
        if values.is_empty() {
            return IqrFilter {
                q1: f64::NAN,
                q3: f64::NAN,
                lower_fence: f64::NAN,
                upper_fence: f64::NAN,
                kept: Vec::new(),
                outliers: Vec::new(),
            };
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let q1 = quantile_linear(&sorted, 0.25);
        let q3 = quantile_linear(&sorted, 0.75);
        let iqr = q3 - q1;
        let lower_fence = q1 - Self::K * iqr;
        let upper_fence = q3 + Self::K * iqr;
        let (kept, outliers) = values
            .iter()
            .partition(|&&x| x >= lower_fence && x <= upper_fence);
        IqrFilter {
            q1,
            q3,
            lower_fence,
            upper_fence,
            kept,
            outliers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0];
        let f = IqrFilter::apply(&x);
        assert!((f.q1 - 3.25).abs() < 1e-12);
        assert!((f.q3 - 7.75).abs() < 1e-12);
        assert!((f.lower_fence - -3.5).abs() < 1e-12);
        assert!((f.upper_fence - 14.5).abs() < 1e-12);
        assert_eq!(f.outliers, vec![100.0]);
        assert_eq!(f.kept, x[..9].to_vec());
    }

    #[test]
    fn quantiles_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_linear(&s, 0.0), 1.0);
        assert_eq!(quantile_linear(&s, 1.0), 4.0);
        assert_eq!(quantile_linear(&s, 0.5), 2.5);
        assert!((quantile_linear(&s, 0.9) - 3.7).abs() < 1e-12);
        assert_eq!(quantile_linear(&[5.0], 0.3), 5.0);
    }

    #[test]
    fn constant_sample_keeps_all() {
        let f = IqrFilter::apply(&[2.0; 5]);
        assert_eq!(f.kept.len(), 5);
        assert!(f.outliers.is_empty());
    }
}
