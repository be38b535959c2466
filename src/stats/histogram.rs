//! HDR latency histograms: durations recorded in nanoseconds with 3 significant digits
//! (hdrhistogram crate), exact merge across threads, processes and machines, and lossless
//! JSON serialization as base64 of the HdrHistogram V2 encoding — the same bytes other
//! HdrHistogram implementations (Java, Go, C) read.

use std::borrow::Cow;
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
///
/// Two forms, one behaviour: a histogram being recorded into is held as hdrhistogram's
/// array of counts (fast to record, tens to hundreds of KiB however few its values); one
/// read from a document is held as its V2 encoding (the size of what was read, often
/// a few hundred bytes) and decoded only while a question is answered of it. So a
/// document's histograms take memory in proportion to the document, not to the range
/// of their values: a 0.5 MB document of 2,000 histograms with values near 2^62 ns took
/// 2.9 GB when each was held decoded. [`LatencyHistogram::merge`] keeps the form of the
/// histogram merged into (an empty one takes the other's).
#[derive(Clone)]
pub struct LatencyHistogram {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// The counts, recorded into.
    Counts(Histogram<u64>),
    /// A validated V2 encoding (uncompressed) of a histogram with our precision, and its
    /// number of values.
    Encoded { v2: Box<[u8]>, len: u64 },
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // Invariant: 3 significant digits is within hdrhistogram's accepted 0..=5.
        let inner = Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid");
        LatencyHistogram {
            repr: Repr::Counts(inner),
        }
    }

    /// The counts: borrowed when held so, decoded for the moment otherwise.
    fn counts(&self) -> Cow<'_, Histogram<u64>> {
        match &self.repr {
            Repr::Counts(h) => Cow::Borrowed(h),
            Repr::Encoded { v2, .. } => Cow::Owned(decode_ours(v2)),
        }
    }

    /// The counts, held so from now on.
    fn counts_mut(&mut self) -> &mut Histogram<u64> {
        if let Repr::Encoded { v2, .. } = &self.repr {
            self.repr = Repr::Counts(decode_ours(v2));
        }
        match &mut self.repr {
            Repr::Counts(h) => h,
            Repr::Encoded { .. } => unreachable!("decoded just above"),
        }
    }

    /// Records one duration.
    pub fn record(&mut self, d: Duration) -> Result<(), HistogramError> {
        self.record_ns(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Records one value in nanoseconds.
    pub fn record_ns(&mut self, ns: u64) -> Result<(), HistogramError> {
        let h = self.counts_mut();
        if ns > h.high() && counts_to_cover(ns) > h.distinct_values() {
            grow(h, ns)?;
        }
        h.record(ns).map_err(|_| HistogramError::Record(ns))
    }

    /// [`LatencyHistogram::heap_bytes`] of a new histogram (its first array of counts).
    pub const EMPTY_HEAP_BYTES: usize = 2048 * COUNT_BYTES;

    /// The heap memory it holds, in bytes: its array of counts (exactly as long as its
    /// values need: it grows to the size they need, not by doubling), or its encoding.
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Counts(h) => h.distinct_values() * COUNT_BYTES,
            Repr::Encoded { v2, .. } => v2.len(),
        }
    }

    /// How many bytes [`LatencyHistogram::heap_bytes`] grows by when `ns` is recorded
    /// (0 for a value within its range, the usual case).
    pub fn growth_for(&self, ns: u64) -> usize {
        match &self.repr {
            Repr::Counts(h) if ns <= h.high() => 0,
            Repr::Counts(h) => counts_to_cover(ns)
                .saturating_sub(h.distinct_values())
                .saturating_mul(COUNT_BYTES),
            // Decoded to be recorded into: a whole array of counts.
            Repr::Encoded { .. } => {
                let h = self.counts();
                counts_to_cover(ns.max(h.high()))
                    .saturating_mul(COUNT_BYTES)
                    .saturating_sub(self.heap_bytes())
            }
        }
    }

    /// Adds every value of `other` to this histogram (exact). A histogram read from a
    /// document stays encoded: it is decoded, added to and encoded again.
    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), HistogramError> {
        let add = |h: &mut Histogram<u64>| {
            let other = other.counts();
            if !other.is_empty()
                && other.max() > h.high()
                && counts_to_cover(other.max()) > h.distinct_values()
            {
                grow(h, other.max())?;
            }
            h.add(&*other)
                .map_err(|e| HistogramError::Merge(e.to_string()))
        };
        match &self.repr {
            // Into an empty histogram (a merge's accumulator), a copy: one read from a
            // document stays encoded.
            Repr::Counts(h) if h.is_empty() && matches!(other.repr, Repr::Encoded { .. }) => {
                self.repr = other.repr.clone();
                Ok(())
            }
            Repr::Counts(_) => add(self.counts_mut()),
            Repr::Encoded { v2, .. } => {
                let mut h = decode_ours(v2);
                add(&mut h)?;
                self.repr = encoded(&h)?;
                Ok(())
            }
        }
    }

    /// Held as its encoding from now on (a few hundred bytes to a few KiB, instead of an
    /// array of counts of tens to hundreds of KiB): for a histogram kept long and asked
    /// little of, such as an hour of a series' long baseline. Merging into it keeps it so.
    pub fn compact(&mut self) -> Result<(), HistogramError> {
        if let Repr::Counts(h) = &self.repr {
            self.repr = encoded(h)?;
        }
        Ok(())
    }

    /// Number of recorded values.
    pub fn len(&self) -> u64 {
        match &self.repr {
            Repr::Counts(h) => h.len(),
            Repr::Encoded { len, .. } => *len,
        }
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value at quantile `q` (0 ≤ q ≤ 1), as a duration.
    pub fn quantile(&self, q: f64) -> Duration {
        Duration::from_nanos(self.counts().value_at_quantile(q))
    }

    /// Counts in `bins` equal-width bins from `lo_ns` to `hi_ns` (values above `hi_ns`
    /// land in the last bin, below `lo_ns` in the first): `(bin start ns, count)`.
    pub fn bins(&self, lo_ns: u64, hi_ns: u64, bins: usize) -> Vec<(u64, u64)> {
        let bins = bins.max(1);
        let width = (hi_ns.saturating_sub(lo_ns) / bins as u64).max(1);
        let mut out: Vec<(u64, u64)> = (0..bins).map(|i| (lo_ns + i as u64 * width, 0)).collect();
        let h = self.counts();
        for v in h.iter_recorded() {
            let x = h.median_equivalent(v.value_iterated_to());
            let i = ((x.saturating_sub(lo_ns)) / width).min(bins as u64 - 1) as usize;
            out[i].1 += v.count_at_value();
        }
        out
    }

    /// The summary of the natural logarithms of its values (each value a bucket's
    /// median equivalent, 0 taken as 1 ns), for a test of ratios: the difference of two
    /// such means is the log of the ratio of their geometric means. `None` when empty.
    pub fn log_summary(&self) -> Option<super::Summary> {
        let h = self.counts();
        if h.is_empty() {
            return None;
        }
        let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
        // Welford's update, one bucket (count values at once) at a time.
        for v in h.iter_recorded() {
            let c = v.count_at_value();
            let x = (h.median_equivalent(v.value_iterated_to()).max(1) as f64).ln();
            let total = n + c;
            let delta = x - mean;
            mean += delta * c as f64 / total as f64;
            m2 += delta * delta * n as f64 * c as f64 / total as f64;
            n = total;
        }
        let ln = |ns: u64| (ns.max(1) as f64).ln();
        Some(super::Summary {
            n: usize::try_from(n).unwrap_or(usize::MAX),
            mean,
            median: ln(h.value_at_quantile(0.5)),
            stddev: if n > 1 {
                (m2 / (n - 1) as f64).sqrt()
            } else {
                0.0
            },
            min: ln(h.min()),
            max: ln(h.max()),
        })
    }

    /// The usual percentiles and extremes.
    pub fn quantiles(&self) -> Quantiles {
        let h = self.counts();
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
        match &self.repr {
            Repr::Counts(h) => Ok(B64.encode(v2_bytes(h)?)),
            Repr::Encoded { v2, .. } => Ok(B64.encode(v2)),
        }
    }

    /// Reads a histogram written by [`LatencyHistogram::to_base64`] (or any uncompressed
    /// V2 encoder), after checking what its header declares: a payload it does not hold,
    /// or a range and precision whose counts would take more than [`MAX_DECODED_COUNTS`]
    /// slots, are refused before anything is allocated. It is held encoded (see the
    /// type's documentation).
    pub fn from_base64(s: &str) -> Result<Self, HistogramError> {
        let bytes = B64
            .decode(s.trim())
            .map_err(|e| HistogramError::Decode(format!("not base64: {e}")))?;
        check_v2_header(&bytes)?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| {
                HistogramError::Decode(format!(
                    "not an HdrHistogram V2 encoding: {}",
                    deserialize_words(&e)
                ))
            })?;
        if decoded.sigfig() == SIGNIFICANT_DIGITS && decoded.low() == 1 {
            // Our precision already (every histogram tlsperf writes): the bytes read are
            // the encoding to keep, without what may trail the declared payload.
            let end = 40 + u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
            return Ok(LatencyHistogram {
                repr: Repr::Encoded {
                    len: decoded.len(),
                    v2: bytes[..end].into(),
                },
            });
        }
        // Re-home the values in an auto-resizing histogram with our precision, so that
        // merging with locally recorded histograms always works.
        let mut h = LatencyHistogram::new();
        h.counts_mut()
            .add(&decoded)
            .map_err(|e| HistogramError::Decode(e.to_string()))?;
        drop(decoded);
        let Repr::Counts(counts) = &h.repr else {
            unreachable!("a new histogram holds counts")
        };
        Ok(LatencyHistogram {
            repr: encoded(counts)?,
        })
    }
}

/// The V2 encoding of `h`.
fn v2_bytes(h: &Histogram<u64>) -> Result<Vec<u8>, HistogramError> {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| HistogramError::Merge(format!("serialization failed: {e}")))?;
    Ok(bytes)
}

/// `h` held encoded, once its encoding is seen to decode to as many values (so that
/// [`decode_ours`] never meets one it cannot read).
fn encoded(h: &Histogram<u64>) -> Result<Repr, HistogramError> {
    let v2 = v2_bytes(h)?;
    let back: Result<Histogram<u64>, _> = Deserializer::new().deserialize(&mut v2.as_slice());
    match back {
        Ok(b) if b.len() == h.len() => Ok(Repr::Encoded {
            v2: v2.into_boxed_slice(),
            len: h.len(),
        }),
        _ => Err(HistogramError::Merge(format!(
            "a histogram of {} values does not survive its own encoding",
            h.len()
        ))),
    }
}

/// The bytes of one count.
const COUNT_BYTES: usize = std::mem::size_of::<u64>();

/// The length of the array of counts that covers values up to `high` (hdrhistogram's
/// layout at [`SIGNIFICANT_DIGITS`], lowest value 1: buckets of 2,048 sub-buckets that
/// double until `high` fits, half of each but the first held).
fn counts_to_cover(high: u64) -> usize {
    let sub_bucket_count = (2 * 10u64.pow(u32::from(SIGNIFICANT_DIGITS))).next_power_of_two();
    let mut smallest_untrackable = u128::from(sub_bucket_count);
    let mut buckets = 1usize;
    while smallest_untrackable <= u128::from(high) {
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    (buckets + 1) * (sub_bucket_count as usize / 2)
}

/// Replaces `h` by a histogram with the same values whose counts cover `high` exactly
/// (a new array of that length): hdrhistogram's own resize grows its array as a `Vec`
/// does, to up to twice the length it needs, which no one could account for.
fn grow(h: &mut Histogram<u64>, high: u64) -> Result<(), HistogramError> {
    // The top of the last bucket that covering `high` takes: the bound hdrhistogram's
    // own resize would give it (so the encoding's header is the same).
    let sub_bucket_count = (2 * 10u64.pow(u32::from(SIGNIFICANT_DIGITS))).next_power_of_two();
    let mut top = u128::from(sub_bucket_count);
    while top <= u128::from(high) {
        top <<= 1;
    }
    let top = u64::try_from(top - 1).unwrap_or(u64::MAX).max(2);
    let mut g = Histogram::new_with_bounds(1, top, SIGNIFICANT_DIGITS)
        .map_err(|e| HistogramError::Merge(e.to_string()))?;
    g.auto(true);
    g.add(&*h)
        .map_err(|e| HistogramError::Merge(e.to_string()))?;
    *h = g;
    Ok(())
}

/// Why an encoding could not be decoded, in words (the library's names, such as
/// `EncodedArrayTooLong`, are not).
fn deserialize_words(e: &hdrhistogram::serialization::DeserializeError) -> String {
    use hdrhistogram::serialization::DeserializeError as E;
    match e {
        E::IoError(_) => "it ends before the counts it declares".into(),
        E::InvalidCookie => "it does not begin with an HdrHistogram V2 cookie".into(),
        E::UnsupportedFeature => "it uses a feature this reader does not support".into(),
        E::UnsuitableCounterType => "a count is larger than 2^64 - 1".into(),
        E::InvalidParameters => "its lowest, highest or precision is invalid".into(),
        E::UsizeTypeTooSmall => "it is larger than this machine can address".into(),
        E::EncodedArrayTooLong => "its counts run past the range of values it declares".into(),
    }
}

/// Decodes an encoding this module made (checked when it was read, or written by us).
fn decode_ours(v2: &[u8]) -> Histogram<u64> {
    let mut h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut &v2[..])
        // Invariant: `Repr::Encoded` only holds what `v2_bytes` wrote.
        .expect("a histogram encoded by this module decodes");
    // The decoded one has the bounds it was encoded with; later merges may widen them.
    h.auto(true);
    h
}

/// The most count slots a decoded histogram may need (8 MiB of counts): 3 significant
/// digits over the whole `u64` range need 56,320, 4 digits 835,584.
pub const MAX_DECODED_COUNTS: u64 = 1 << 20;

/// The V2 header: cookie, payload length, normalizing offset, significant digits, lowest
/// discernible value, highest trackable value, integer-to-double ratio (40 bytes).
fn check_v2_header(b: &[u8]) -> Result<(), HistogramError> {
    const V2: u32 = 0x1c84_9303 | 0x10;
    const V2_DEFLATE: u32 = 0x1c84_9304 | 0x10;
    let bad = |why: String| Err(HistogramError::Decode(why));
    let u32_at = |i: usize| {
        b.get(i..i + 4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    let u64_at = |i: usize| {
        b.get(i..i + 8)
            .map(|x| u64::from_be_bytes([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]]))
    };
    let (Some(cookie), Some(payload), Some(digits), Some(low), Some(high)) =
        (u32_at(0), u32_at(4), u32_at(12), u64_at(16), u64_at(24))
    else {
        return bad(format!(
            "a histogram header is 40 bytes; this one has {}",
            b.len()
        ));
    };
    if cookie == V2_DEFLATE {
        return bad(
            "compressed (V2+deflate) histograms are not accepted: their size is \
                    unknown until inflated"
                .into(),
        );
    }
    if cookie != V2 {
        return bad(format!(
            "not an HdrHistogram V2 encoding (cookie {cookie:#x})"
        ));
    }
    let held = b.len() - 40;
    if payload as usize > held {
        return bad(format!(
            "the header declares a {payload}-byte payload; {held} bytes follow it"
        ));
    }
    if digits > 5 || low == 0 || high < low.saturating_mul(2) {
        return bad(format!(
            "impossible range or precision: {digits} significant digits, values {low}..{high}"
        ));
    }
    // hdrhistogram's layout: sub-buckets cover 2·10^digits at unit resolution; buckets
    // double until the highest value fits.
    let sub_bucket_count = (2 * 10u64.pow(digits)).next_power_of_two();
    let unit_magnitude = 63 - low.leading_zeros();
    let mut smallest_untrackable = u128::from(sub_bucket_count) << unit_magnitude;
    let mut buckets = 1u64;
    while smallest_untrackable <= u128::from(high) {
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    let counts = (buckets + 1) * (sub_bucket_count / 2);
    if counts > MAX_DECODED_COUNTS {
        return bad(format!(
            "{digits} significant digits over values {low}..{high} need {counts} counts \
             (at most {MAX_DECODED_COUNTS})"
        ));
    }
    Ok(())
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        *self.counts() == *other.counts()
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

/// A latency distribution: percentiles to read, the histogram to merge.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Dist {
    /// Percentiles (nanoseconds).
    pub quantiles: Quantiles,
    /// The HDR histogram (nanoseconds, 3 significant digits), V2 serialized, base64.
    pub hdr: LatencyHistogram,
}

impl Default for Dist {
    fn default() -> Self {
        Dist::of(LatencyHistogram::new())
    }
}

impl Dist {
    /// From a histogram.
    pub fn of(h: LatencyHistogram) -> Dist {
        Dist {
            quantiles: h.quantiles(),
            hdr: h,
        }
    }

    /// Checks a distribution read from a document: its percentiles are in order, its
    /// mean lies between its smallest and largest value, and it counts the values its
    /// histogram holds (what [`Dist::of`] always writes). `Err` says which does not hold.
    pub fn check(&self) -> Result<(), String> {
        let q = &self.quantiles;
        if q.count != self.hdr.len() {
            return Err(format!(
                "its percentiles count {} values but its histogram holds {}",
                q.count,
                self.hdr.len()
            ));
        }
        if q.count == 0 {
            return Ok(());
        }
        let order = [
            ("min", q.min_ns),
            ("p50", q.p50_ns),
            ("p90", q.p90_ns),
            ("p95", q.p95_ns),
            ("p99", q.p99_ns),
            ("p99.9", q.p999_ns),
            ("max", q.max_ns),
        ];
        if let Some(w) = order.windows(2).find(|w| w[0].1 > w[1].1) {
            return Err(format!(
                "its {} ({} ns) is above its {} ({} ns)",
                w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
        // The mean is a float: allow its rounding at the ends.
        let (lo, hi) = (q.min_ns as f64, q.max_ns as f64);
        if !(q.mean_ns.is_finite()
            && q.mean_ns >= lo * (1.0 - 1e-9)
            && q.mean_ns <= hi * (1.0 + 1e-9))
        {
            return Err(format!(
                "its mean ({} ns) is not between its min ({} ns) and max ({} ns)",
                q.mean_ns, q.min_ns, q.max_ns
            ));
        }
        Ok(())
    }

    /// Adds `other`'s values (exactly: the histograms merge) and re-reads the
    /// percentiles; refuses a total a histogram cannot hold.
    pub fn merge(&mut self, other: &Dist) -> Result<(), HistogramError> {
        // Counts saturate when added; the V2 encoding holds at most i64::MAX of them.
        if self
            .hdr
            .len()
            .checked_add(other.hdr.len())
            .is_none_or(|n| n > i64::MAX as u64)
        {
            return Err(HistogramError::Merge(format!(
                "{} + {} values is more than a histogram can hold",
                self.hdr.len(),
                other.hdr.len()
            )));
        }
        self.hdr.merge(&other.hdr)?;
        self.quantiles = self.hdr.quantiles();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crafted encoding whose counts run past its declared range was refused with the
    /// library's `EncodedArrayTooLong`; now in words.
    #[test]
    fn an_encoding_longer_than_its_range_is_refused_in_words() {
        let payload = vec![0x02u8; 100_000];
        let mut b = Vec::new();
        b.extend_from_slice(&(0x1c84_9303u32 | 0x10).to_be_bytes());
        b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(&1u64.to_be_bytes());
        b.extend_from_slice(&2048u64.to_be_bytes());
        b.extend_from_slice(&1.0f64.to_be_bytes());
        b.extend_from_slice(&payload);
        let err = LatencyHistogram::from_base64(&B64.encode(&b))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("its counts run past the range of values it declares"),
            "{err}"
        );
        assert!(!err.contains("EncodedArrayTooLong"), "{err}");
    }

    /// The log summary of a histogram is the summary of the logs of its values, to the
    /// histogram's precision (3 significant digits: ≈ 0.001 in ln).
    #[test]
    fn log_summary_is_the_summary_of_the_logs() {
        let values: Vec<u64> = (1..=500u64).map(|i| 1_000_000 + i * i * 37).collect();
        let mut h = LatencyHistogram::new();
        for v in &values {
            h.record_ns(*v).unwrap();
        }
        let logs: Vec<f64> = values.iter().map(|v| (*v as f64).ln()).collect();
        let want = crate::stats::Summary::of(&logs).unwrap();
        let got = h.log_summary().unwrap();
        assert_eq!(got.n, 500);
        assert!((got.mean - want.mean).abs() < 1e-3, "{got:?} {want:?}");
        assert!(
            (got.stddev / want.stddev - 1.0).abs() < 0.01,
            "{got:?} {want:?}"
        );
        // The median is the histogram's (a bucket's highest equivalent value).
        assert!((got.median - want.median).abs() < 5e-3, "{got:?} {want:?}");
        assert!(LatencyHistogram::new().log_summary().is_none());
    }

    /// The memory a histogram holds is its values' need, predicted before each value
    /// ([`LatencyHistogram::growth_for`]) and no more after it: hdrhistogram's own
    /// resize left arrays up to twice that long. The values, their percentiles and the
    /// encoding are those of hdrhistogram's own growth.
    #[test]
    fn a_histogram_grows_to_what_its_values_need_as_predicted() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.heap_bytes(), LatencyHistogram::EMPTY_HEAP_BYTES);
        let mut plain: Histogram<u64> = Histogram::new(SIGNIFICANT_DIGITS).unwrap();
        plain.auto(true);
        let mut v = 1u64;
        for i in 0..200u64 {
            v = v.saturating_mul(5) / 4 + i;
            let before = h.heap_bytes();
            let grows = h.growth_for(v);
            h.record_ns(v).unwrap();
            plain.record(v).unwrap();
            assert_eq!(h.heap_bytes(), before + grows, "at {v}");
            assert_eq!(h.heap_bytes(), counts_to_cover(v.max(h.counts().max())) * 8);
        }
        let mut back = plain.clone();
        assert_eq!(*h.counts(), plain);
        assert_eq!(h.counts().high(), plain.high());
        assert_eq!(
            h.to_base64().unwrap(),
            B64.encode(v2_bytes(&plain).unwrap())
        );
        // A merge into a smaller one grows it the same way.
        let mut small = LatencyHistogram::new();
        small.record_ns(10).unwrap();
        small.merge(&h).unwrap();
        back.record(10).unwrap();
        assert_eq!(*small.counts(), back);
        assert_eq!(small.heap_bytes(), h.heap_bytes());
    }

    /// A V2 header with these fields and `payload` bytes after it.
    fn v2(declared: u32, digits: u32, low: u64, high: u64, payload: usize) -> String {
        let mut b = Vec::new();
        b.extend_from_slice(&(0x1c84_9303u32 | 0x10).to_be_bytes());
        b.extend_from_slice(&declared.to_be_bytes());
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&digits.to_be_bytes());
        b.extend_from_slice(&low.to_be_bytes());
        b.extend_from_slice(&high.to_be_bytes());
        b.extend_from_slice(&1f64.to_bits().to_be_bytes());
        b.extend(std::iter::repeat_n(0u8, payload));
        B64.encode(b)
    }

    #[test]
    fn declared_sizes_are_checked_before_allocating() {
        let e = LatencyHistogram::from_base64(&v2(u32::MAX, 3, 1, 1 << 40, 2)).unwrap_err();
        assert!(
            e.to_string().contains("declares a 4294967295-byte payload"),
            "{e}"
        );
        let e = LatencyHistogram::from_base64(&v2(0, 5, 1, u64::MAX, 0)).unwrap_err();
        assert!(e.to_string().contains("need"), "{e}");
        let e = LatencyHistogram::from_base64(&v2(0, 9, 1, 1 << 20, 0)).unwrap_err();
        assert!(e.to_string().contains("impossible"), "{e}");
        // Ours, values up to 2^63 ns: accepted (the whole range at 3 digits).
        let mut h = LatencyHistogram::new();
        h.record_ns(1).unwrap();
        h.record_ns(1 << 63).unwrap();
        let back = LatencyHistogram::from_base64(&h.to_base64().unwrap()).unwrap();
        assert_eq!(back.len(), 2);
        // 4 digits up to 2^64 fit too; 5 digits up to 2^22 as well.
        for (digits, high) in [(4u8, u64::MAX), (5, 1 << 22)] {
            let mut h = Histogram::<u64>::new_with_bounds(1, high, digits).unwrap();
            h.record(1000).unwrap();
            let mut bytes = Vec::new();
            V2Serializer::new().serialize(&h, &mut bytes).unwrap();
            assert!(
                LatencyHistogram::from_base64(&B64.encode(bytes)).is_ok(),
                "{digits} {high}"
            );
        }
    }

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
