//! The service-level objective a capacity search holds a server to: latency percentiles
//! (`p99=30ms`, `p99.9=100ms`…) on the corrected latency, and at most a share of failed
//! requests (`errors=0.1%`), as the user writes them (`--slo p99=30ms,errors=0.1%`) and
//! as a step is judged against them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::numbers::figure;
use crate::stats::LatencyHistogram;

/// One latency bound: the `percentile`th percentile at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyBound {
    /// The percentile, in (0, 100), e.g. 99 or 99.9.
    pub percentile: f64,
    /// The bound (milliseconds).
    pub max_ms: f64,
}

impl LatencyBound {
    /// The bound as a duration.
    pub fn max(&self) -> Duration {
        Duration::from_secs_f64(self.max_ms / 1e3)
    }

    /// `p99`, `p99.9`.
    pub fn name(&self) -> String {
        format!("p{}", self.percentile)
    }
}

/// The objective: every latency bound holds and the failed share is within `errors_max`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Latency bounds (at least one), on the latency from the intended send instant.
    pub latency: Vec<LatencyBound>,
    /// Largest share of requests that may fail (0.001 for 0.1%); 0 when not given: any
    /// failure fails the step.
    pub errors_max: f64,
}

/// An `--slo` that cannot be read. Its text is clap's to name ("invalid value 'p99' for
/// '--slo <OBJECTIVE>'"), so the message is the reason alone.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} (write e.g. p99=30ms or p99=30ms,p50=5ms,errors=0.1%)")]
pub struct SloError {
    /// What the user gave.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

impl crate::error::Classify for SloError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

impl std::str::FromStr for Slo {
    type Err = SloError;

    fn from_str(text: &str) -> Result<Slo, SloError> {
        let err = |reason: String| SloError {
            text: text.to_string(),
            reason,
        };
        let mut latency: Vec<LatencyBound> = Vec::new();
        let mut errors_max = None;
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| err(format!("'{part}' has no '='")))?;
            let (key, value) = (key.trim(), value.trim());
            if key == "errors" {
                if errors_max.is_some() {
                    return Err(err("errors is given twice".into()));
                }
                let share = crate::ratio::parse(value).map_err(|e| err(format!("errors: {e}")))?;
                if share >= 1.0 {
                    return Err(err(format!("errors={value}: must be within 0% ..< 100%")));
                }
                errors_max = Some(share);
                continue;
            }
            let pct: f64 = key
                .strip_prefix('p')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| {
                    err(format!(
                        "'{key}' is neither a percentile (p50, p99, p99.9…) nor errors"
                    ))
                })?;
            if !(pct > 0.0 && pct < 100.0) {
                return Err(err(format!("{key}: a percentile is between p0 and p100")));
            }
            if latency.iter().any(|b| b.percentile == pct) {
                return Err(err(format!("{key} is given twice")));
            }
            let max = crate::duration::parse(value).map_err(|e| err(format!("{key}: {e}")))?;
            if max.is_zero() {
                return Err(err(format!("{key}={value}: a bound must be above zero")));
            }
            latency.push(LatencyBound {
                percentile: pct,
                max_ms: max.as_secs_f64() * 1e3,
            });
        }
        if latency.is_empty() {
            return Err(err("no latency percentile (e.g. p99=30ms)".into()));
        }
        latency.sort_by(|a, b| a.percentile.total_cmp(&b.percentile));
        Ok(Slo {
            latency,
            errors_max: errors_max.unwrap_or(0.0),
        })
    }
}

impl std::fmt::Display for Slo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .latency
            .iter()
            .map(|b| format!("{} ≤ {} ms", b.name(), trim(b.max_ms)))
            .collect();
        parts.push(format!("errors ≤ {}%", trim(self.errors_max * 100.0)));
        f.write_str(&parts.join(", "))
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Slo {
    /// Checks an objective read from a document against what `--slo` accepts: at least
    /// one latency bound, percentiles strictly between 0 and 100 in increasing order
    /// (each once), bounds above zero that a duration holds, and a failed share within
    /// 0 ..< 1. `Err` is a plain sentence naming the bound.
    pub fn validate(&self) -> Result<(), String> {
        if self.latency.is_empty() {
            return Err("no latency percentile (e.g. p99=30ms)".into());
        }
        let mut previous: Option<f64> = None;
        for b in &self.latency {
            let p = b.percentile;
            if !(p.is_finite() && p > 0.0 && p < 100.0) {
                return Err(format!(
                    "percentile {}: a percentile is between p0 and p100",
                    figure(p)
                ));
            }
            if previous.is_some_and(|q| q >= p) {
                return Err(format!(
                    "p{p}: the percentiles are not in increasing order, each once"
                ));
            }
            previous = Some(p);
            let ms = b.max_ms;
            if !(ms.is_finite() && ms > 0.0) {
                return Err(format!(
                    "p{p} ≤ {} ms: a bound must be above zero",
                    figure(ms)
                ));
            }
            if Duration::try_from_secs_f64(ms / 1e3).is_err() {
                return Err(format!("p{p} ≤ {ms:e} ms: longer than any duration"));
            }
        }
        let e = self.errors_max;
        if !(e.is_finite() && (0.0..1.0).contains(&e)) {
            return Err(format!(
                "errors ≤ {}%: must be within 0% ..< 100%",
                figure(e * 100.0)
            ));
        }
        Ok(())
    }

    /// The highest percentile of the objective (as a fraction, 0.99 for p99).
    pub fn top_quantile(&self) -> f64 {
        self.latency
            .iter()
            .map(|b| b.percentile / 100.0)
            .fold(0.0, f64::max)
    }

    /// The smallest latency bound.
    pub fn tightest(&self) -> Duration {
        self.latency
            .iter()
            .map(LatencyBound::max)
            .min()
            .unwrap_or(Duration::ZERO)
    }

    /// Samples a step needs for its highest percentile to rest on
    /// [`TAIL_SAMPLES`] values above it: `TAIL_SAMPLES ÷ (1 − q)` (p99: 1,000; p99.9:
    /// 10,000; p50: 20).
    pub fn samples_needed(&self) -> u64 {
        // Less a hair: 10 ÷ (1 − 0.999) is 10,000.000000001 in floating point.
        (TAIL_SAMPLES as f64 / (1.0 - self.top_quantile()) - 1e-6).ceil() as u64
    }

    /// Judges one step: `None` when it meets the objective, else why not. Failed requests,
    /// and the `unsent` ones (due before the step ended but never sent: every connection
    /// slot was still waiting for an answer), count as slower than any bound: a
    /// percentile holds when at least that share of *all* requests due completed within
    /// the bound. The error share is failed ÷ sent.
    pub fn judge(
        &self,
        corrected: Option<&LatencyHistogram>,
        attempted: u64,
        failed: u64,
        unsent: u64,
    ) -> Option<String> {
        if attempted == 0 {
            return Some("no request was sent".into());
        }
        let error_rate = failed as f64 / attempted as f64;
        if error_rate > self.errors_max {
            return Some(format!(
                "errors {}% > {}%",
                trim(error_rate * 100.0),
                trim(self.errors_max * 100.0)
            ));
        }
        let completed = attempted - failed;
        let due = attempted + unsent;
        for b in &self.latency {
            let q = b.percentile / 100.0;
            // The share of completed requests the percentile of all requests falls at.
            let within = q * due as f64 / completed.max(1) as f64;
            let value = match corrected {
                Some(h) if !h.is_empty() && within <= 1.0 => h.quantile(within),
                _ => {
                    return Some(format!(
                        "{}: too many requests failed or were never sent",
                        b.name()
                    ));
                }
            };
            if value > b.max() {
                return Some(format!(
                    "{} {:.1} ms > {} ms",
                    b.name(),
                    value.as_secs_f64() * 1e3,
                    trim(b.max_ms)
                ));
            }
        }
        None
    }
}

/// Values a step must expect above its highest percentile: the rule behind
/// [`Slo::samples_needed`].
pub const TAIL_SAMPLES: u64 = 10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let s: Slo = "p99=30ms, errors=0.1%,p50=5ms".parse().unwrap();
        assert_eq!(s.latency.len(), 2);
        assert_eq!(s.latency[0].percentile, 50.0);
        assert_eq!(s.latency[1].max_ms, 30.0);
        assert!((s.errors_max - 0.001).abs() < 1e-12);
        assert_eq!(s.to_string(), "p50 ≤ 5 ms, p99 ≤ 30 ms, errors ≤ 0.1%");
        assert_eq!(s.samples_needed(), 1000);
        let s: Slo = "p99.9=1s".parse().unwrap();
        assert_eq!(s.errors_max, 0.0);
        assert_eq!(s.samples_needed(), 10_000);
        for bad in [
            "",
            "errors=1%",
            "p99",
            "p99=30",
            "p100=1ms",
            "q99=1ms",
            "p99=1ms,p99=2ms",
            "p99=0ms",
            "p99=1ms,errors=1",
            "p99=1ms,errors=100%",
        ] {
            let e = bad.parse::<Slo>().unwrap_err();
            assert_eq!(e.text, bad);
            // clap names the flag and the value; the message does not repeat them.
            assert!(!e.to_string().starts_with("--slo"), "{e}");
        }
    }

    /// What `--slo` refuses, a document's objective may not hold either.
    #[test]
    fn validates_what_the_flag_validates() {
        for good in ["p99=30ms", "p50=5ms,p99.9=1s,errors=0.1%"] {
            let s: Slo = good.parse().unwrap();
            assert_eq!(s.validate(), Ok(()), "{good}");
        }
        let base: Slo = "p50=5ms,p99=30ms".parse().unwrap();
        let with = |f: &dyn Fn(&mut Slo)| {
            let mut s = base.clone();
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert!(with(&|s| s.latency.clear()).contains("no latency percentile"));
        let e = with(&|s| s.latency[1].percentile = 250.0);
        assert!(e.contains("between p0 and p100"), "{e}");
        let e = with(&|s| s.latency[1].max_ms = -30.0);
        assert!(
            e.contains("p99 ≤ -30 ms: a bound must be above zero"),
            "{e}"
        );
        assert!(with(&|s| s.latency[1].max_ms = 0.0).contains("above zero"));
        assert!(with(&|s| s.latency[1].max_ms = 1e300).contains("longer than any"));
        let e = with(&|s| s.latency[1].percentile = 50.0);
        assert!(e.contains("increasing order"), "{e}");
        assert!(with(&|s| s.latency.reverse()).contains("increasing order"));
        assert!(with(&|s| s.errors_max = -0.5).contains("within 0%"));
        assert!(with(&|s| s.errors_max = 1.0).contains("within 0%"));
    }

    #[test]
    fn judges_failures_as_slower_than_any_bound() {
        let s: Slo = "p90=10ms,errors=20%".parse().unwrap();
        let mut h = LatencyHistogram::new();
        for _ in 0..90 {
            h.record(Duration::from_millis(5)).unwrap();
        }
        // 90 fast of 100: p90 holds.
        assert_eq!(s.judge(Some(&h), 90, 0, 0), None);
        // 90 fast of 100 sent, 10 failed: p90 of all still within.
        assert_eq!(s.judge(Some(&h), 100, 10, 0), None);
        // 90 fast of 110 sent: fewer than 90% within the bound.
        let why = s.judge(Some(&h), 110, 20, 0).unwrap();
        assert!(why.contains("too many requests failed"), "{why}");
        let strict: Slo = "p90=10ms".parse().unwrap();
        assert!(strict.judge(Some(&h), 91, 1, 0).unwrap().contains("errors"));
        // 90 fast of 100 sent and 10 more due: as if they had failed.
        assert!(s.judge(Some(&h), 90, 0, 10).is_none());
        assert!(s.judge(Some(&h), 90, 0, 11).is_some());
        for _ in 0..20 {
            h.record(Duration::from_millis(50)).unwrap();
        }
        assert!(
            s.judge(Some(&h), 110, 0, 0)
                .unwrap()
                .contains("p90 50.0 ms > 10 ms")
        );
        assert!(s.judge(None, 0, 0, 0).is_some());
    }
}
