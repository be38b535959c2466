//! The checks of a capacity document read back ([`CapacityResult::validate`], which every
//! reader runs through [`crate::doc::Document`]): the objective, the rules, each step,
//! the shares, and a conclusion that fits its outcome, against what a search (or a merge
//! of searches) can have written.

use super::conclusion::Outcome;
use super::numbers::figure;
use super::result::{CapacityResult, SCHEMA};
use super::step::{Rules, Step};

/// The largest knee spread a document may state: the model's gradual end (s = 0.2)
/// spreads over ×2.61; a little room above it.
pub const MAX_SPREAD: f64 = 3.0;

/// The highest rate (requests per second) a capacity search may try, and a capacity
/// document may name: the open-loop ceiling of `load --rate` ([`crate::load::MAX_RATE`]).
pub const MAX_RATE_PER_S: f64 = crate::load::MAX_RATE;

/// `Err(what)` unless `x` is a finite number within `lo ..= hi`.
fn within(x: f64, lo: f64, hi: f64, what: impl FnOnce() -> String) -> Result<(), String> {
    if x.is_finite() && (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(what())
    }
}

/// `Err` unless `r` is a rate a search can have tried: 0 ..= [`MAX_RATE_PER_S`] (0 only
/// where `positive` is false: a tiny start rate rounds to 0/s, a step that can only
/// fail).
fn check_rate(name: &str, r: f64, positive: bool) -> Result<(), String> {
    let ok = r.is_finite() && r <= MAX_RATE_PER_S && if positive { r > 0.0 } else { r >= 0.0 };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name} {}/s is not a rate a search can have tried ({} 1,000,000,000/s)",
            figure(r),
            if positive {
                "above 0/s, at most"
            } else {
                "0/s ..="
            }
        ))
    }
}

/// `Err` unless `secs` is a duration: finite, not negative (above zero with
/// `positive`), and within what a duration holds.
fn check_secs(name: &str, secs: f64, positive: bool) -> Result<(), String> {
    let ok = if positive { secs > 0.0 } else { secs >= 0.0 }
        && std::time::Duration::try_from_secs_f64(secs).is_ok();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name} {} s is not a duration ({})",
            figure(secs),
            if positive {
                "above zero"
            } else {
                "zero or more"
            }
        ))
    }
}

impl Rules {
    /// Checks the rules against what `capacity`'s flags accept: rates above zero and at
    /// most [`MAX_RATE_PER_S`] (lowest ≤ start ≤ highest), a factor above 1 and at most
    /// 10, a resolution and a CPU limit within (0, 1), step lengths above zero (the
    /// shortest not above the longest), a step sized for at least one answer.
    pub fn validate(&self) -> Result<(), String> {
        check_rate("start_rate", self.start_rate, true)?;
        check_rate("max_rate", self.max_rate, true)?;
        check_rate("min_rate", self.min_rate, true)?;
        if !(self.min_rate <= self.start_rate && self.start_rate <= self.max_rate) {
            return Err(format!(
                "the rates are out of order: min_rate {} ≤ start_rate {} ≤ max_rate {} \
                 does not hold",
                figure(self.min_rate),
                figure(self.start_rate),
                figure(self.max_rate)
            ));
        }
        if !(self.factor.is_finite() && self.factor > 1.0 && self.factor <= 10.0) {
            return Err(format!(
                "factor {}: must be above 1 and at most 10",
                figure(self.factor)
            ));
        }
        if !(self.resolution.is_finite() && self.resolution > 0.0 && self.resolution < 1.0) {
            return Err(format!(
                "resolution {}: must be between 0 and 1",
                figure(self.resolution)
            ));
        }
        let cpu = self.generator_cpu_max;
        if !(cpu.is_finite() && cpu > 0.0 && cpu <= 1.0) {
            return Err(format!(
                "generator_cpu_max {}: must be above 0 and at most 1",
                figure(cpu)
            ));
        }
        check_secs("step_min_s", self.step_min_s, true)?;
        check_secs("step_max_s", self.step_max_s, true)?;
        check_secs("warmup_s", self.warmup_s, false)?;
        if self.step_min_s > self.step_max_s {
            return Err(format!(
                "step_min_s {} is longer than step_max_s {}",
                figure(self.step_min_s),
                figure(self.step_max_s)
            ));
        }
        if self.samples_needed == 0 {
            return Err("samples_needed is 0 (a step is sized for at least one answer)".into());
        }
        Ok(())
    }
}

impl Step {
    /// Checks what one process (or `machines` merged processes, of at most `machines`
    /// in the document) can have measured: a rate within [`check_rate`]'s range, a
    /// share above zero and at most one per process, durations that are durations,
    /// completed + failed = attempted, shares and CPU figures that are not negative.
    pub fn validate(&self, machines: u32) -> Result<(), String> {
        check_rate("offered_per_s", self.offered_per_s, false)?;
        if self.machines == 0 || self.machines > machines {
            return Err(format!(
                "machines {} is not within 1 ..= the document's {machines}",
                self.machines
            ));
        }
        within(
            self.share,
            f64::MIN_POSITIVE,
            f64::from(self.machines),
            || {
                format!(
                    "share {} of the offered rate is not within 0 ..= 1 a process (machines {})",
                    self.share, self.machines
                )
            },
        )?;
        check_secs("length_s", self.length_s, true)?;
        check_secs("duration_s", self.duration_s, false)?;
        if !(1..=100_000).contains(&self.connections) {
            return Err(format!(
                "connections {} is not within 1 ..= 100,000",
                self.connections
            ));
        }
        if self.completed.checked_add(self.failed) != Some(self.attempted) {
            return Err(format!(
                "{} completed + {} failed is not the {} attempted",
                self.completed, self.failed, self.attempted
            ));
        }
        let not_negative = |name: &str, x: f64| {
            within(x, 0.0, f64::MAX, || {
                format!("{name} {} is not a figure ≥ 0", figure(x))
            })
        };
        not_negative("achieved_per_s", self.achieved_per_s)?;
        within(self.error_rate, 0.0, 1.0, || {
            format!(
                "error_rate {} is not within 0 ..= 1",
                figure(self.error_rate)
            )
        })?;
        for (name, v) in [
            ("p50_ms", self.p50_ms),
            ("p99_ms", self.p99_ms),
            ("p999_ms", self.p999_ms),
            ("server_cpu_us_per_request", self.server_cpu_us_per_request),
        ] {
            if let Some(v) = v {
                not_negative(name, v)?;
            }
        }
        if let Some(w) = self.server_runqueue_wait_s {
            check_secs("server_runqueue_wait_s", w, false)?;
        }
        if let Some(c) = self.server_cpu_seconds {
            check_secs("server_cpu_seconds", c, false)?;
        }
        if let Some(l) = self.late_start_s {
            check_secs("late_start_s", l, false)?;
        }
        check_secs("warmup_s", self.warmup_s, false)?;
        if let Some(c) = self.server_cpus {
            within(c, 1.0, 65_536.0, || {
                format!("server_cpus {} is not within 1 ..= 65536", figure(c))
            })?;
        }
        if let Some(st) = self.steal {
            within(st, 0.0, 1.0, || {
                format!("steal {} is not within 0 ..= 1", figure(st))
            })?;
        }
        let g = &self.generator;
        check_secs("generator.cpu_seconds", g.cpu_seconds, false)?;
        not_negative("generator.utilization", g.utilization)?;
        not_negative("generator.cpus", g.cpus)?;
        if let Some(w) = g.runqueue_wait_s {
            check_secs("generator.runqueue_wait_s", w, false)?;
        }
        Ok(())
    }
}

impl CapacityResult {
    /// Checks a result read from a document against what a search (or a merge of
    /// searches) can have written: the objective ([`Slo::validate`]), the rules
    /// ([`Rules::validate`]), each step ([`Step::validate`]), the shares
    /// (`i/n` as `--rate-share` takes it, each once, no more than the processes), and a
    /// conclusion that fits its outcome: a capacity only with outcome `capacity`, above
    /// zero and within its interval `[highest pass, lowest failure]`, which rises. `Err`
    /// is a plain sentence naming the field.
    ///
    /// [`Slo::validate`]: super::slo::Slo::validate
    pub fn validate(&self) -> Result<(), String> {
        self.slo.validate().map_err(|e| format!("slo: {e}"))?;
        self.rules.validate().map_err(|e| format!("rules: {e}"))?;
        if self.machines == 0 {
            return Err("machines is 0 (at least 1)".into());
        }
        if let Some(l) = &self.link_counters {
            l.check()?;
        }
        if let Some(shares) = &self.rate_share {
            let mut seen = std::collections::HashSet::new();
            for (n, part) in shares.split(',').enumerate() {
                if n as u64 >= u64::from(self.machines) {
                    return Err(format!(
                        "rate_share lists more shares than the {} processes merged",
                        self.machines
                    ));
                }
                let share: crate::load::share::RateShare =
                    part.parse().map_err(|e| format!("rate_share {e}"))?;
                if !seen.insert((share.i, share.n)) {
                    return Err(format!("rate_share lists {share} twice"));
                }
            }
        }
        let rate = |name: &str, r: Option<f64>| r.map_or(Ok(()), |r| check_rate(name, r, true));
        rate("capacity_per_s", self.capacity_per_s)?;
        rate("best_pass_per_s", self.best_pass_per_s)?;
        if let Some(r) = self.generator_bound_at_per_s {
            check_rate("generator_bound_at_per_s", r, false)?;
        }
        if let Some([lo, hi]) = self.interval_per_s {
            check_rate("interval_per_s", lo, true)?;
            check_rate("interval_per_s", hi, true)?;
            if lo >= hi {
                return Err(format!(
                    "interval_per_s [{}, {}]: the highest pass is not below the lowest \
                     failure",
                    figure(lo),
                    figure(hi)
                ));
            }
        }
        if let Some([lo, hi]) = self.disputed_per_s {
            check_rate("disputed_per_s", lo, false)?;
            check_rate("disputed_per_s", hi, true)?;
            if lo >= hi {
                return Err(format!(
                    "disputed_per_s [{}, {}]: the highest pass is not above the lowest \
                     failure",
                    figure(lo),
                    figure(hi)
                ));
            }
        }
        if let Some(x) = self.knee_spread
            && !(x.is_finite() && (1.0..=MAX_SPREAD).contains(&x))
        {
            return Err(format!(
                "knee_spread {}: not a factor between 1 and {MAX_SPREAD}",
                figure(x)
            ));
        }
        match (self.outcome, self.capacity_per_s, self.interval_per_s) {
            (
                Outcome::Capacity | Outcome::TimeLimit | Outcome::Interrupted,
                Some(c),
                Some([lo, hi]),
            ) => {
                if !(lo..=hi).contains(&c) {
                    return Err(format!(
                        "capacity_per_s {} is outside its own interval_per_s [{}, {}]",
                        figure(c),
                        figure(lo),
                        figure(hi)
                    ));
                }
            }
            (Outcome::Capacity, None, _) => {
                return Err("outcome capacity without a capacity_per_s".into());
            }
            (Outcome::Capacity, Some(_), None) => {
                return Err("outcome capacity without an interval_per_s".into());
            }
            (Outcome::TimeLimit | Outcome::Interrupted, Some(_), None) => {
                return Err("a capacity_per_s without its interval_per_s".into());
            }
            (other, Some(_), _) => {
                return Err(format!(
                    "capacity_per_s is given but the outcome is {}",
                    other.name()
                ));
            }
            (_, None, _) => {}
        }
        for (i, s) in self.steps.iter().enumerate() {
            s.validate(self.machines)
                .map_err(|e| format!("step {} of {}: {e}", i + 1, self.steps.len()))?;
        }
        Ok(())
    }
}

impl crate::doc::Document for CapacityResult {
    const SCHEMA: &'static str = SCHEMA;
    const NAME: &'static str = "tlsperf capacity result";

    /// [`CapacityResult::validate`].
    fn validate(&self) -> Result<(), String> {
        CapacityResult::validate(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::result::tests::halves;

    /// Every rule of [`CapacityResult::validate`], each on a copy of a valid result.
    #[test]
    fn validation_refuses_what_no_search_can_have_written() {
        let (a, _) = halves();
        type Edit = fn(&mut CapacityResult);
        let cases: Vec<(Edit, &str)> = vec![
            (|r| r.machines = 0, "machines is 0"),
            (
                |r| r.steps[1].completed = 500,
                "step 2 of 17: 500 completed + 0 failed is not the 200 attempted",
            ),
            (|r| r.steps[1].failed = u64::MAX, "is not the 200 attempted"),
            (
                |r| r.steps[0].share = -6.5,
                "step 1 of 17: share -6.5 of the offered rate",
            ),
            (|r| r.steps[0].share = 0.0, "share 0 of the offered rate"),
            (|r| r.steps[0].share = 2.0, "share 2 of the offered rate"),
            (
                |r| r.steps[0].machines = 2,
                "machines 2 is not within 1 ..= the document's 1",
            ),
            (
                |r| r.steps[0].duration_s = -3.0,
                "duration_s -3 s is not a duration",
            ),
            (
                |r| r.steps[0].length_s = 0.0,
                "length_s 0 s is not a duration (above zero)",
            ),
            (|r| r.steps[0].length_s = 1e300, "length_s"),
            (
                |r| r.steps[0].offered_per_s = -500.0,
                "offered_per_s -500/s is not a rate",
            ),
            (
                |r| r.steps[0].offered_per_s = 1e308,
                "offered_per_s 1e308/s",
            ),
            (|r| r.steps[0].connections = 0, "connections 0"),
            (|r| r.steps[0].error_rate = 2.0, "error_rate 2"),
            (|r| r.steps[0].p99_ms = Some(-1.0), "p99_ms -1"),
            (|r| r.steps[0].steal = Some(1.5), "steal 1.5"),
            (
                |r| r.steps[0].server_cpu_seconds = Some(-1.0),
                "server_cpu_seconds -1 s",
            ),
            (
                |r| r.steps[0].generator.cpu_seconds = -1.0,
                "generator.cpu_seconds -1 s",
            ),
            (
                |r| r.steps[0].generator.utilization = f64::NAN,
                "generator.utilization NaN",
            ),
            (
                |r| r.rules.factor = 0.0,
                "rules: factor 0: must be above 1 and at most 10",
            ),
            (|r| r.rules.factor = 11.0, "factor 11"),
            (|r| r.rules.resolution = 1.0, "resolution 1"),
            (|r| r.rules.start_rate = -1.0, "rules: start_rate -1/s"),
            (|r| r.rules.max_rate = 1e12, "max_rate 1000000000000/s"),
            (|r| r.rules.min_rate = 500.0, "the rates are out of order"),
            (
                |r| r.rules.step_min_s = 20.0,
                "step_min_s 20 is longer than step_max_s 10",
            ),
            (|r| r.rules.step_max_s = -1.0, "step_max_s -1 s"),
            (|r| r.rules.generator_cpu_max = 0.0, "generator_cpu_max 0"),
            (|r| r.rules.samples_needed = 0, "samples_needed is 0"),
            (
                |r| r.slo.latency[0].percentile = 250.0,
                "slo: percentile 250",
            ),
            (
                |r| r.slo.latency[0].max_ms = -30.0,
                "slo: p90 ≤ -30 ms: a bound must be above zero",
            ),
            (|r| r.slo.errors_max = -1.0, "slo: errors"),
            (
                |r| r.capacity_per_s = Some(0.0),
                "capacity_per_s 0/s is not a rate",
            ),
            (|r| r.capacity_per_s = Some(-500.0), "capacity_per_s -500/s"),
            (|r| r.capacity_per_s = Some(1e308), "capacity_per_s 1e308/s"),
            (
                |r| r.capacity_per_s = Some(500.0),
                "capacity_per_s 500 is outside its own interval_per_s",
            ),
            (
                |r| r.capacity_per_s = None,
                "outcome capacity without a capacity_per_s",
            ),
            (
                |r| r.interval_per_s = None,
                "outcome capacity without an interval_per_s",
            ),
            (
                |r| r.interval_per_s = Some([200.0, 100.0]),
                "interval_per_s [200, 100]",
            ),
            (
                |r| r.outcome = Outcome::GeneratorBound,
                "capacity_per_s is given but the outcome is generator-bound",
            ),
            (
                |r| r.disputed_per_s = Some([300.0, 300.0]),
                "disputed_per_s [300, 300]",
            ),
            (
                |r| r.knee_spread = Some(0.5),
                "knee_spread 0.5: not a factor between 1 and 3",
            ),
            (
                |r| r.knee_spread = Some(f64::NAN),
                "knee_spread NaN: not a factor",
            ),
            (
                |r| r.best_pass_per_s = Some(f64::INFINITY),
                "best_pass_per_s inf/s",
            ),
            (
                |r| r.generator_bound_at_per_s = Some(-1.0),
                "generator_bound_at_per_s -1/s",
            ),
            (
                |r| r.rate_share = Some("1/2,2/2".into()),
                "more shares than the 1 processes",
            ),
            (
                |r| r.rate_share = Some("3/2".into()),
                "rate_share '3/2': i must be within 1..=n",
            ),
            (|r| r.rate_share = Some("x".into()), "rate_share 'x'"),
            (
                |r| {
                    r.machines = 2;
                    r.rate_share = Some("1/2,1/2".into())
                },
                "rate_share lists 1/2 twice",
            ),
        ];
        for (edit, says) in cases {
            let mut r = a.clone();
            edit(&mut r);
            let e = r.validate().unwrap_err();
            assert!(e.contains(says), "want {says:?} in: {e}");
            assert!(!e.contains("Some(") && !e.contains("{ "), "Debug text: {e}");
        }
    }
}
