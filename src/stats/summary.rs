//! Descriptive statistics of one sample.

use serde::Serialize;

use super::StatsError;
use super::iqr::quantile_linear;

/// n, mean, median, sample standard deviation (n − 1) and extremes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (linear interpolation between the middle two for even n).
    pub median: f64,
    /// Sample standard deviation (Bessel-corrected); 0 for n = 1.
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summarizes `values` (any order). Fails on an empty slice.
    pub fn of(values: &[f64]) -> Result<Summary, StatsError> {
        if values.is_empty() {
            return Err(StatsError::TooFew {
                what: "a summary".into(),
                needed: 1,
                got: 0,
            });
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        Ok(Summary {
            n,
            mean,
            median: quantile_linear(&sorted, 0.5),
            stddev: variance(&sorted, mean).sqrt(),
            min: sorted[0],
            max: sorted[n - 1],
        })
    }

    /// Sample variance (stddev²).
    pub fn variance(&self) -> f64 {
        self.stddev * self.stddev
    }
}

/// Bessel-corrected sample variance around `mean`; 0 for fewer than two values.
pub fn variance(values: &[f64], mean: f64) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.n, 4);
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.median, 2.5);
        assert!((s.stddev - 1.2909944487358056).abs() < 1e-12);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert!(Summary::of(&[]).is_err());
        assert_eq!(Summary::of(&[7.0]).unwrap().stddev, 0.0);
    }
}
