//! Several generator processes as one: `--rate-share i/n` (this process sends the i-th
//! of n equal shares of the offered rate) and `--start-at TIME` (every process starts
//! at one wall-clock instant). Their results merge into one (`tlsperf merge`).

use std::time::{Duration, Instant};

use time::OffsetDateTime;

/// `i/n`: the i-th of n equal shares (1 ≤ i ≤ n).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateShare {
    /// This process's share, 1-based.
    pub i: u32,
    /// Shares in all.
    pub n: u32,
}

impl std::str::FromStr for RateShare {
    type Err = String;

    fn from_str(s: &str) -> Result<RateShare, String> {
        let bad =
            |why: &str| format!("'{s}': {why} (write i/n, e.g. 1/4 for the first of 4 processes)");
        let (i, n) = s.trim().split_once('/').ok_or_else(|| bad("no '/'"))?;
        let i: u32 = i
            .trim()
            .parse()
            .map_err(|_| bad("i is not a whole number"))?;
        let n: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("n is not a whole number"))?;
        if n == 0 || n > 10_000 {
            return Err(bad("n must be within 1..=10000"));
        }
        if i == 0 || i > n {
            return Err(bad("i must be within 1..=n"));
        }
        Ok(RateShare { i, n })
    }
}

impl std::fmt::Display for RateShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.i, self.n)
    }
}

impl RateShare {
    /// This process's part of a total `rate`.
    pub fn of(&self, rate: f64) -> f64 {
        rate / f64::from(self.n)
    }

    /// How long after the common start this process's send schedule begins, so that the
    /// n processes' sends interleave evenly at a total `rate`: (i − 1) ÷ rate.
    pub fn offset(&self, rate: f64) -> Duration {
        Duration::from_secs_f64(f64::from(self.i - 1) / rate.max(1e-9))
    }
}

/// The furthest ahead `--start-at` may be: it lines up processes started together.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(24 * 3600);

/// A `--start-at` that cannot be waited for: already past, or more than
/// [`MAX_START_AHEAD`] ahead.
#[derive(Debug, Clone, thiserror::Error)]
#[error("--start-at {at}: {why} (now: {now})")]
pub struct PastStart {
    /// The time asked for (RFC 3339).
    pub at: String,
    /// The time now (RFC 3339).
    pub now: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl crate::error::Classify for PastStart {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// The monotonic instant matching wall-clock time `at` (read from the clock once, now);
/// a time already past, or more than [`MAX_START_AHEAD`] ahead, is refused.
pub fn start_instant(at: OffsetDateTime) -> Result<Instant, PastStart> {
    let now_wall = OffsetDateTime::now_utc();
    let now = Instant::now();
    let ahead = at - now_wall;
    let refuse = |why| PastStart {
        at: crate::when::format_rfc3339(at),
        now: crate::when::format_rfc3339(now_wall),
        why,
    };
    if !ahead.is_positive() {
        return Err(refuse(
            "that time is already past; give a time in the future",
        ));
    }
    match Duration::try_from(ahead) {
        Ok(d) if d <= MAX_START_AHEAD => Ok(now + d),
        _ => Err(refuse(
            "that is more than 24 hours ahead; --start-at lines up processes started together",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        let s: RateShare = "2/4".parse().unwrap();
        assert_eq!(s.of(1000.0), 250.0);
        assert_eq!(s.offset(1000.0), Duration::from_millis(1));
        assert_eq!(s.to_string(), "2/4");
        for bad in ["0/2", "3/2", "1", "a/2", "1/0"] {
            assert!(bad.parse::<RateShare>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_past_start_is_refused() {
        let past = OffsetDateTime::now_utc() - time::Duration::seconds(1);
        let e = start_instant(past).unwrap_err();
        assert!(e.to_string().contains("already past"), "{e}");
        let far = OffsetDateTime::now_utc() + time::Duration::days(2);
        let e = start_instant(far).unwrap_err();
        assert!(e.to_string().contains("more than 24 hours ahead"), "{e}");
        let soon = OffsetDateTime::now_utc() + time::Duration::seconds(2);
        let t = start_instant(soon).unwrap();
        let d = t - Instant::now();
        assert!(
            d > Duration::from_millis(1500) && d <= Duration::from_secs(2),
            "{d:?}"
        );
    }
}
