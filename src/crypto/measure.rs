//! The measurement harness every `tlsperf crypto` command uses: run a closure for a given
//! wall-clock time split into rounds, after an untimed warm-up, and summarize the rounds.
//!
//! - Time is wall-clock ([`std::time::Instant`]) for [`measure`] and
//!   [`measure_interleaved`]; [`measure_parts`] sums what its closure charges (the
//!   in-memory handshakes charge their thread's CPU time), rounds still lasting a wall
//!   time.
//! - The warm-up also counts the bytes allocated per operation (when the binary's global
//!   allocator is [`super::alloc::Counting`]), so counting never runs inside a timed round.
//! - Each round gives one ns/op figure; Tukey's 1.5×IQR filter drops outlier rounds, and
//!   the result is the median of the kept rounds with their min, max and quartiles.
//! - Several operations measured together ([`measure_interleaved`]) take their rounds in
//!   turn, so a passing disturbance of the machine spreads over rows instead of spoiling
//!   every round of one.
//! - The clock is read once per batch of operations, the batch sized from the warm-up to
//!   take about a millisecond, so reading it costs nothing measurable.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::CryptoError;
use super::alloc::Counter;
use crate::stats::{IqrFilter, quantile_linear};

/// How long to measure and in how many rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasureOptions {
    time: Duration,
    rounds: u32,
}

impl MeasureOptions {
    /// Longest warm-up, whatever the round length.
    pub const MAX_WARMUP: Duration = Duration::from_millis(200);
    /// Target wall time of one batch between two clock reads.
    pub const BATCH: Duration = Duration::from_millis(1);

    /// The most rounds a row may be split into (each keeps one figure per measured item).
    pub const MAX_ROUNDS: u32 = 10_000;

    /// The longest timed measurement per measured item: a day.
    pub const MAX_TIME: Duration = Duration::from_secs(86_400);

    /// `time` of timed measurement per measured item, split into `rounds` rounds. Both
    /// must be positive (at most [`Self::MAX_TIME`]; at most [`Self::MAX_ROUNDS`] rounds).
    pub fn new(time: Duration, rounds: u32) -> Result<Self, CryptoError> {
        if time.is_zero() || time > Self::MAX_TIME {
            return Err(CryptoError::BadOption {
                name: "--duration",
                reason: format!(
                    "'{}' must be longer than zero and at most 24h",
                    humantime::format_duration(time)
                ),
            });
        }
        if rounds == 0 {
            return Err(CryptoError::BadOption {
                name: "--rounds",
                reason: "at least one round is needed".into(),
            });
        }
        if rounds > Self::MAX_ROUNDS {
            return Err(CryptoError::BadOption {
                name: "--rounds",
                reason: format!("{rounds} is more than the {} allowed", Self::MAX_ROUNDS),
            });
        }
        Ok(MeasureOptions { time, rounds })
    }

    /// The same rounds over twice the time: for a measurement that interleaves two
    /// items and gives each `time` (a day each at most, so not bound by
    /// [`Self::MAX_TIME`], which bounds what a user asks for).
    pub(crate) fn doubled(&self) -> Self {
        MeasureOptions {
            time: self.time * 2,
            rounds: self.rounds,
        }
    }

    /// Timed measurement per measured item.
    pub fn time(&self) -> Duration {
        self.time
    }

    /// Timed seconds per measured item (the `seconds` of a result).
    pub fn seconds(&self) -> f64 {
        self.time.as_secs_f64()
    }

    /// Rounds per measured item.
    pub fn rounds(&self) -> u32 {
        self.rounds
    }

    /// The length of one round.
    pub fn round_time(&self) -> Duration {
        self.time / self.rounds
    }

    /// The warm-up: one round, at most [`Self::MAX_WARMUP`].
    pub fn warmup(&self) -> Duration {
        self.round_time().min(Self::MAX_WARMUP)
    }
}

/// The summary of one measured operation.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Measurement {
    /// Median ns per operation over the kept rounds.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub ns_per_op: f64,
    /// Operations per second at the median (1e9 / `ns_per_op`).
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub ops_per_sec: f64,
    /// Fastest kept round, ns/op.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub min_ns: f64,
    /// Slowest kept round, ns/op.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub max_ns: f64,
    /// First quartile of all rounds, ns/op.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub q1_ns: f64,
    /// Third quartile of all rounds, ns/op.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub q3_ns: f64,
    /// Every round's ns/op, in order.
    #[serde(
        deserialize_with = "crate::doc::at_most_items::<_, _, { crate::stats::rows::MAX_ROUNDS }>"
    )]
    pub rounds_ns: Vec<f64>,
    /// How many rounds Tukey's filter dropped.
    pub outlier_rounds: usize,
    /// Timed operations over all rounds.
    pub ops: u64,
    /// Bytes allocated per operation during the warm-up, when the allocator counts.
    pub bytes_per_op: Option<f64>,
    /// Allocation calls per operation during the warm-up, when the allocator counts.
    pub allocs_per_op: Option<f64>,
}

impl Measurement {
    /// Summarizes rounds given as ns/op figures.
    pub fn from_rounds(rounds_ns: Vec<f64>, ops: u64, alloc: Option<(f64, f64)>) -> Self {
        let filter = IqrFilter::apply(&rounds_ns);
        let mut kept = filter.kept.clone();
        kept.sort_by(f64::total_cmp);
        // Tukey's fences always keep the quartiles, so `kept` is non-empty when any round
        // ran; an empty input gives NaN figures.
        let (median, min, max) = if kept.is_empty() {
            (f64::NAN, f64::NAN, f64::NAN)
        } else {
            (quantile_linear(&kept, 0.5), kept[0], kept[kept.len() - 1])
        };
        Measurement {
            ns_per_op: median,
            ops_per_sec: 1e9 / median,
            min_ns: min,
            max_ns: max,
            q1_ns: filter.q1,
            q3_ns: filter.q3,
            outlier_rounds: filter.outliers.len(),
            rounds_ns,
            ops,
            bytes_per_op: alloc.map(|a| a.0),
            allocs_per_op: alloc.map(|a| a.1),
        }
    }
}

/// Measures `op`: warm-up (counting allocations), then the rounds. The closure's error
/// ends the measurement.
pub fn measure<E>(
    opts: &MeasureOptions,
    op: impl FnMut() -> Result<(), E>,
) -> Result<Measurement, E> {
    let mut ops: [Op<'_, E>; 1] = [Box::new(op)];
    let mut m = measure_interleaved(opts, &mut ops)?;
    Ok(m.remove(0))
}

/// One operation among several measured together by [`measure_interleaved`].
pub type Op<'a, E> = Box<dyn FnMut() -> Result<(), E> + 'a>;

/// Measures several operations with their rounds interleaved: every operation's warm-up,
/// then round 1 of each operation in turn, then round 2 of each, and so on. A disturbance
/// of the machine lasting a second or two (another process, the host) then falls on one
/// round of several operations rather than on every round of one, where the median and
/// Tukey's filter can set it aside. One [`Measurement`] per operation, in order; the
/// first error ends the measurement.
pub fn measure_interleaved<E>(
    opts: &MeasureOptions,
    ops: &mut [Op<'_, E>],
) -> Result<Vec<Measurement>, E> {
    let mut prepared = Vec::with_capacity(ops.len());
    for op in ops.iter_mut() {
        prepared.push(warm_up(opts, op)?);
    }
    let round_time = opts.round_time();
    let mut rounds_ns: Vec<Vec<f64>> = vec![Vec::with_capacity(opts.rounds() as usize); ops.len()];
    let mut total_ops = vec![0u64; ops.len()];
    for _ in 0..opts.rounds() {
        for (i, op) in ops.iter_mut().enumerate() {
            let batch = prepared[i].batch;
            let mut n = 0u64;
            let t0 = Instant::now();
            let elapsed = loop {
                for _ in 0..batch {
                    op()?;
                }
                n += batch;
                let e = t0.elapsed();
                if e >= round_time {
                    break e;
                }
            };
            rounds_ns[i].push(elapsed.as_nanos() as f64 / n as f64);
            total_ops[i] += n;
        }
    }
    Ok(rounds_ns
        .into_iter()
        .zip(total_ops)
        .zip(prepared)
        .map(|((r, n), p)| Measurement::from_rounds(r, n, p.alloc))
        .collect())
}

/// What the warm-up of one operation found.
struct Prepared {
    /// Operations between two clock reads.
    batch: u64,
    /// Bytes and allocation calls per operation, when the allocator counts.
    alloc: Option<(f64, f64)>,
}

/// Runs `op` untimed for the warm-up (at least once), counting allocations, and sizes
/// its batch.
fn warm_up<E>(opts: &MeasureOptions, op: &mut Op<'_, E>) -> Result<Prepared, E> {
    let counter = Counter::start();
    let start = Instant::now();
    let mut warm_ops = 0u64;
    let warm = loop {
        op()?;
        warm_ops += 1;
        let elapsed = start.elapsed();
        if elapsed >= opts.warmup() {
            break elapsed;
        }
    };
    let alloc = counter.map(|c| {
        let a = c.stop();
        (
            a.bytes as f64 / warm_ops as f64,
            a.calls as f64 / warm_ops as f64,
        )
    });
    let per_op = warm.as_secs_f64() / warm_ops as f64;
    let batch = ((MeasureOptions::BATCH.as_secs_f64() / per_op.max(1e-9)) as u64).clamp(1, 1 << 20);
    Ok(Prepared { batch, alloc })
}

/// Measures an operation whose time is charged to `N` parts by the closure itself (the
/// client and server sides of an in-memory handshake): the closure adds the time each
/// part spent to its slot and returns whether the operation counts (an operation of the
/// wrong shape, such as a handshake that should have resumed and did not, is run but not
/// counted). Rounds last `round_time` of wall-clock time; each part's ns/op is its
/// charged time over the counted operations. Bytes per operation (all parts together) are
/// counted during the warm-up and reported in every part's [`Measurement`].
pub fn measure_parts<const N: usize, E>(
    opts: &MeasureOptions,
    mut op: impl FnMut(&mut [Duration; N]) -> Result<bool, E>,
    none_counted: impl Fn() -> E,
) -> Result<[Measurement; N], E> {
    // One round: until `limit` of wall time has passed and one operation counted (at most
    // `MAX_UNCOUNTED` uncounted ones in a row). Returns the charged times, the counted
    // operations and all operations run.
    let mut run_round = |limit: Duration| -> Result<([Duration; N], u64, u64), E> {
        let mut parts = [Duration::ZERO; N];
        let (mut counted, mut run) = (0u64, 0u64);
        let t0 = Instant::now();
        loop {
            if op(&mut parts)? {
                counted += 1;
            }
            run += 1;
            if counted == 0 && run >= MAX_UNCOUNTED {
                return Err(none_counted());
            }
            if counted > 0 && t0.elapsed() >= limit {
                return Ok((parts, counted, run));
            }
        }
    };
    let counter = Counter::start();
    let (_, _, warm_run) = run_round(opts.warmup())?;
    let alloc = counter.map(|c| {
        let a = c.stop();
        (
            a.bytes as f64 / warm_run as f64,
            a.calls as f64 / warm_run as f64,
        )
    });
    let mut per_part: [Vec<f64>; N] = std::array::from_fn(|_| Vec::new());
    let mut total = 0u64;
    for _ in 0..opts.rounds() {
        let (parts, counted, _) = run_round(opts.round_time())?;
        for (rounds, d) in per_part.iter_mut().zip(parts) {
            rounds.push(d.as_nanos() as f64 / counted as f64);
        }
        total += counted;
    }
    Ok(per_part.map(|rounds| Measurement::from_rounds(rounds, total, alloc)))
}

/// Uncounted operations in a row after which [`measure_parts`] gives up.
pub const MAX_UNCOUNTED: u64 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked() {
        let secs = Duration::from_secs;
        assert!(MeasureOptions::new(Duration::ZERO, 3).is_err());
        let err = MeasureOptions::new(secs(86_401), 3)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--duration") && err.contains("24h"), "{err}");
        // `crypto limit` interleaves two kinds, each given the time asked: a day each.
        let longest = MeasureOptions::new(MeasureOptions::MAX_TIME, 3).unwrap();
        let both = longest.doubled();
        assert_eq!(both.time(), MeasureOptions::MAX_TIME * 2);
        assert_eq!(both.rounds(), 3);
        assert!(MeasureOptions::new(secs(1), 0).is_err());
        assert!(MeasureOptions::new(secs(1), MeasureOptions::MAX_ROUNDS).is_ok());
        let err = MeasureOptions::new(Duration::from_millis(1), u32::MAX)
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than the 10000 allowed"), "{err}");
        let o = MeasureOptions::new(secs(1), 4).unwrap();
        assert_eq!(o.round_time(), Duration::from_millis(250));
        assert_eq!(o.warmup(), MeasureOptions::MAX_WARMUP);
    }

    #[test]
    fn outlier_round_is_dropped() {
        let m = Measurement::from_rounds(vec![100.0, 101.0, 99.0, 100.0, 500.0], 10, None);
        assert_eq!(m.outlier_rounds, 1);
        assert_eq!(m.ns_per_op, 100.0);
        assert_eq!((m.min_ns, m.max_ns), (99.0, 101.0));
        assert!((m.ops_per_sec - 1e7).abs() < 1e-6);
    }

    #[test]
    fn measures_a_closure() {
        let opts = MeasureOptions::new(Duration::from_millis(20), 2).unwrap();
        let mut n = 0u64;
        let m = measure(&opts, || {
            n += 1;
            std::hint::black_box(n);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(m.rounds_ns.len(), 2);
        assert!(m.ops > 0 && m.ns_per_op > 0.0);
        assert!(m.bytes_per_op.is_none());
    }

    #[test]
    fn parts_are_charged_separately() {
        let opts = MeasureOptions::new(Duration::from_millis(20), 2).unwrap();
        let mut n = 0u64;
        let [a, b] = measure_parts(
            &opts,
            |parts: &mut [Duration; 2]| {
                n += 1;
                // Every other operation counts; only counted ones charge their time.
                let counted = n.is_multiple_of(2);
                if counted {
                    parts[0] += Duration::from_nanos(100);
                    parts[1] += Duration::from_nanos(300);
                }
                Ok::<bool, ()>(counted)
            },
            || (),
        )
        .unwrap();
        assert_eq!(a.ns_per_op, 100.0);
        assert_eq!(b.ns_per_op, 300.0);
        assert_eq!(a.rounds_ns.len(), 2);
        let never = measure_parts(
            &opts,
            |_: &mut [Duration; 1]| Ok::<bool, &str>(false),
            || "none",
        );
        assert_eq!(never.unwrap_err(), "none");
    }

    #[test]
    fn error_stops_the_run() {
        let opts = MeasureOptions::new(Duration::from_millis(20), 2).unwrap();
        let r = measure(&opts, || Err::<(), _>("broken"));
        assert_eq!(r.unwrap_err(), "broken");
    }
}
