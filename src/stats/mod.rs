//! The statistics core: every number tlsperf reports goes through here.
//!
//! - [`histogram`]: HDR latency histograms (exact merge, lossless JSON serialization).
//! - [`summary`]: n, mean, median, standard deviation, extremes of a sample; medians of
//!   numbers and durations; a least-squares slope.
//! - [`iqr`]: Tukey's 1.5×IQR outlier filter, quartiles as numpy computes them.
//! - [`welch`]: Welch's two-sample t-test with the Welch–Satterthwaite degrees of freedom.
//! - [`paired`]: Student's paired t-test (matched pairs' differences against zero).
//! - [`mod@holm`]: Holm's adjustment of a family of p-values.
//! - [`samples`]: sample files (one number a line) as the user writes them.
//! - [`slo`]: a latency and errors objective (`p99=30ms,errors=0.1%`), parsed and judged
//!   on a histogram (`capacity`'s steps, `observe report`'s windows); [`numbers`]: how
//!   its messages (and capacity's) write a number.
//! - [`mod@compare`]: is B different from A — summaries, filter, test and a verdict.
//! - [`rows`]: the one comparison engine of results: rows matched by identity, each
//!   compared through [`compare`](compare()).

pub mod compare;
pub mod histogram;
pub mod holm;
pub mod iqr;
pub mod numbers;
pub mod paired;
pub mod rows;
pub mod samples;
pub mod slo;
pub mod summary;
pub mod welch;

pub use compare::{CompareOptions, Comparison, Direction, compare};
pub use histogram::{HistogramError, LatencyHistogram, Quantiles};
pub use holm::holm;
pub use iqr::{IqrFilter, quantile_linear};
pub use paired::{PairedTest, paired_t_test};
pub use samples::{SampleError, Samples};
pub use summary::{Summary, least_squares_slope, median, median_duration};
pub use welch::{WelchTest, min_detectable_difference, welch_t_test};

use crate::error::{Classify, ErrorClass};

/// A statistic that cannot be computed from the data given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StatsError {
    /// Too few samples.
    #[error("{what} needs at least {needed} samples, got {got}")]
    TooFew {
        /// The statistic or sample set.
        what: String,
        /// The minimum.
        needed: usize,
        /// What there was.
        got: usize,
    },
    /// Both samples have zero variance, so the t statistic is undefined.
    #[error(
        "both samples have zero variance: Welch's t-test is undefined (A's mean {mean_a}, B's mean {mean_b})"
    )]
    ZeroVariance {
        /// Mean of A.
        mean_a: f64,
        /// Mean of B.
        mean_b: f64,
    },
    /// A parameter is out of range.
    #[error("invalid {name}: {reason}")]
    BadParam {
        /// The parameter.
        name: &'static str,
        /// Why.
        reason: String,
    },
}

impl Classify for StatsError {
    fn class(&self) -> ErrorClass {
        ErrorClass::Input
    }
}

/// Serializes a [`std::time::Duration`] as fractional milliseconds.
pub fn serde_duration_ms<S: serde::Serializer>(
    d: &std::time::Duration,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}
