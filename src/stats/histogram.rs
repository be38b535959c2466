//! HDR latency histograms: durations recorded in nanoseconds with 3 significant digits
//! (hdrhistogram crate), exact merge across threads, processes and machines, and lossless
//! JSON serialization as base64 of the HdrHistogram V2 encoding — the same bytes other
//! HdrHistogram implementations (Java, Go, C) read.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use serde::{Deserialize, Serialize};

use crate::error::{Classify, ErrorClass};

/// Significant decimal digits kept by every tlsperf histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A failure of a histogram operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistogramError {
    /// A value could not be recorded.
    #[error("cannot record {0} ns in the histogram")]
    Record(u64),
    /// Two histograms could not be merged.
    #[error("cannot merge histograms: {0}")]
    Merge(String),
    /// A serialized histogram could not be read.
    #[error("invalid serialized histogram: {0}")]
    Decode(String),
}

impl Classify for HistogramError {
    fn class(&self) -> ErrorClass {
        match self {
            HistogramError::Decode(_) => ErrorClass::Input,
            _ => ErrorClass::Runtime,
        }
    }
}

/// A histogram of durations, in nanoseconds, that resizes itself to any value.
#[derive(Clone, PartialEq)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // Invariant: 3 significant digits is within hdrhistogram's accepted 0..=5.
        let inner = Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid");
        LatencyHistogram { inner }
    }

    /// Records one duration.
    pub fn record(&mut self, d: Duration) -> Result<(), HistogramError> {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Records one value in nanoseconds.
    pub fn record_ns(&mut self, ns: u64) -> Result<(), HistogramError> {
        self.inner
            .record(ns)
            .map_err(|_| HistogramError::Record(ns))
    }

    /// Adds every value of `other` to this histogram (exact).
    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), HistogramError> {
        self.inner
            .add(&other.inner)
            .map_err(|e| HistogramError::Merge(format!("{e:?}")))
    }

    /// Number of recorded values.
    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// The value at quantile `q` (0 ≤ q ≤ 1), as a duration.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.inner.value_at_quantile(q))
    }

    /// Counts in `bins` equal-width bins from `lo_ns` to `hi_ns` (values above `hi_ns`
    /// land in the last bin, below `lo_ns` in the first): `(bin start ns, count)`.
    pub fn bins(&self, lo_ns: u64, hi_ns: u64, bins: usize) -> Vec<(u64, u64)> {
        let bins = bins.max(1);
        let width = (hi_ns.saturating_sub(lo_ns) / bins as u64).max(1);
        let mut out: Vec<(u64, u64)> = (0..bins).map(|i| (lo_ns + i as u64 * width, 0)).collect();
        for v in self.inner.iter_recorded() {
            let x = self.inner.median_equivalent(v.value_iterated_to());
            let i = ((x.saturating_sub(lo_ns)) / width).min(bins as u64 - 1) as usize;
            out[i].1 += v.count_at_value();
        }
        out
    }

    /// The usual percentiles and extremes.
    pub fn quantiles(&self) -> Quantiles {
        let h = &self.inner;
        let empty = h.is_empty();
        let at = |q: f64| if empty { 0 } else { h.value_at_quantile(q) };
        Quantiles {
            count: h.len(),
            min_ns: if empty { 0 } else { h.min() },
            mean_ns: if empty { 0.0 } else { h.mean() },
            p50_ns: at(0.5),
            p90_ns: at(0.9),
            p95_ns: at(0.95),
            p99_ns: at(0.99),
            p999_ns: at(0.999),
            max_ns: if empty { 0 } else { h.max() },
        }
    }

    /// The HdrHistogram V2 encoding, base64 (standard alphabet, padded).
    pub fn to_base64(&self) -> Result<String, HistogramError> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&self.inner, &mut bytes)
            .map_err(|e| HistogramError::Merge(format!("serialization failed: {e:?}")))?;
        Ok(B64.encode(bytes))
    }

    /// Reads a histogram written by [`LatencyHistogram::to_base64`] (or any V2 or
    /// V2+deflate encoder).
    pub fn from_base64(s: &str) -> Result<Self, HistogramError> {
        let bytes = B64
            .decode(s.trim())
            .map_err(|e| HistogramError::Decode(format!("not base64: {e}")))?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| {
                HistogramError::Decode(format!("not an HdrHistogram V2 encoding: {e:?}"))
            })?;
        // Re-home the values in an auto-resizing histogram with our precision, so that
        // merging with locally recorded histograms always works.
        let mut h = LatencyHistogram::new();
        h.inner
            .add(&decoded)
            .map_err(|e| HistogramError::Decode(format!("{e:?}")))?;
        Ok(h)
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("quantiles", &self.quantiles())
            .finish()
    }
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let encoded = self.to_base64().map_err(serde::ser::Error::custom)?;
        s.serialize_str(&encoded)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LatencyHistogram::from_base64(&s).map_err(serde::de::Error::custom)
    }
}

/// Percentiles of a histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Number of values.
    pub count: u64,
    /// Smallest value.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 95th percentile.
    pub p95_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest value.
    pub max_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(range: std::ops::Range<u64>) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for v in range {
            h.record_ns(v * 1000).unwrap();
        }
        h
    }

    #[test]
    fn quantiles_within_precision() {
        let h = filled(1..10_001);
        let q = h.quantiles();
        assert_eq!(q.count, 10_000);
        let close = |got: u64, want: u64| (got as f64 / want as f64 - 1.0).abs() < 1e-3;
        assert!(close(q.p50_ns, 5_000_000), "{q:?}");
        assert!(close(q.p99_ns, 9_900_000), "{q:?}");
        assert!(close(q.p999_ns, 9_990_000), "{q:?}");
        assert!(close(q.max_ns, 10_000_000), "{q:?}");
        assert!(close(q.min_ns, 1000), "{q:?}");
    }

    #[test]
    fn merge_is_exact() {
        let mut a = filled(1..5001);
        let b = filled(5001..10_001);
        a.merge(&b).unwrap();
        assert_eq!(a, filled(1..10_001));
    }

    #[test]
    fn json_round_trip_is_lossless() {
        let mut h = filled(1..2000);
        h.record(Duration::from_secs(3600)).unwrap();
        let json = serde_json::to_string(&h).unwrap();
        let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.quantiles(), h.quantiles());
    }

    #[test]
    fn merge_after_round_trip_equals_merge_before() {
        let a = filled(1..3000);
        let b = filled(100..900);
        let mut direct = a.clone();
        direct.merge(&b).unwrap();
        let mut via_json = LatencyHistogram::from_base64(&a.to_base64().unwrap()).unwrap();
        via_json
            .merge(&LatencyHistogram::from_base64(&b.to_base64().unwrap()).unwrap())
            .unwrap();
        assert_eq!(direct, via_json);
    }

    #[test]
    fn bad_encodings_are_input_errors() {
        for s in ["!!!", "AAAA", ""] {
            let err = LatencyHistogram::from_base64(s).unwrap_err();
            assert_eq!(err.class(), ErrorClass::Input, "{s}: {err}");
        }
    }

    #[test]
    fn empty_quantiles_are_zero() {
        let q = LatencyHistogram::new().quantiles();
        assert_eq!((q.count, q.p99_ns, q.max_ns), (0, 0, 0));
    }
}
