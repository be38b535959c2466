//! Descriptive statistics: a sample's summary, medians (of numbers and of durations), and
//! the least-squares slope of a set of points.

use std::time::Duration;

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

/// The median of `values` (any order; linear between the middle two for even n); `None`
/// for none.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(quantile_linear(&sorted, 0.5))
}

/// The median of durations (the mean of the middle two for even n, to the nanosecond);
/// zero for none.
pub fn median_duration(d: &[Duration]) -> Duration {
    if d.is_empty() {
        return Duration::ZERO;
    }
    let mut v = d.to_vec();
    v.sort();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

/// Least-squares slope of y over x; 0 with fewer than two points or two distinct x.
pub fn least_squares_slope(pts: &[(f64, f64)]) -> f64 {
    let n = pts.len() as f64;
    if pts.len() < 2 {
        return 0.0;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx == 0.0 { 0.0 } else { sxy / sxx }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        let ms = Duration::from_millis;
        assert_eq!(median_duration(&[ms(3), ms(1), ms(2)]), ms(2));
        assert_eq!(
            median_duration(&[ms(4), ms(1), ms(2), ms(3)]),
            Duration::from_micros(2500)
        );
        assert_eq!(median_duration(&[]), Duration::ZERO);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn slopes() {
        let lin: Vec<(f64, f64)> = [1.0f64, 10.0, 100.0]
            .iter()
            .map(|&x| (x.ln(), (3.0 * x).ln()))
            .collect();
        assert!((least_squares_slope(&lin) - 1.0).abs() < 1e-9);
        let flat: Vec<(f64, f64)> = [1.0f64, 10.0, 100.0]
            .iter()
            .map(|&x| (x.ln(), 5f64.ln()))
            .collect();
        assert!(least_squares_slope(&flat).abs() < 1e-9);
        assert_eq!(least_squares_slope(&[(1.0, 1.0)]), 0.0);
    }

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
