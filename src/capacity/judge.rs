//! How a step is judged ([`Step::judge`]): pass, fail or invalid against the objective,
//! on the corrected latency and, when a failing step's generator was late, on the
//! latency from each request's actual send instant; a busy or starved generator spoils a
//! failure, unless the server used [`SERVER_SATURATED`] of its CPUs; and each verdict's
//! `why` in words.

use super::slo::Slo;
use super::step::{LATE_START_MAX, Rules, Step, Verdict};

/// The share of its CPUs from which the server counts as saturated during a step
/// ([`Step::server_saturated`]): a failing step whose generator was starved is then the
/// server's failure, not the generator's. A server that busy for a whole step has no
/// room left: the rate is at or past its knee, however late the generator sent. (One of
/// twenty searches on this VM ended generator-bound at 1,318/s with the server at 99% of
/// its CPU: docs/benchmarks/history/2026-12-02-capacity-pairs-ten.md.)
pub const SERVER_SATURATED: f64 = 0.97;

impl Step {
    /// True when the server used at least [`SERVER_SATURATED`] of the CPUs it may use
    /// during the step: it was at its limit, whatever the generator did.
    pub fn server_saturated(&self) -> bool {
        self.server_busy().is_some_and(|b| b >= SERVER_SATURATED)
    }

    /// Recomputes what derives from the counts and histograms, then the verdict:
    ///
    /// - **pass**: the objective holds on the corrected latency (from each request's
    ///   intended send instant; failed and unsent requests slower than any bound),
    ///   whatever the generator did (its delay only adds to that latency);
    /// - **invalid** (the generator was the bottleneck): the objective breaks and either
    ///   the generator's CPU reached [`Rules::generator_cpu_max`] of the CPUs it may use
    ///   ([`StepCpu::cpus`]), or it was starved ([`StepCpu::starved`]: its threads waited
    ///   for a CPU at least a fifth of the time they wanted one, however little CPU they
    ///   used) while the server had room ([`Step::server_saturated`] false), or the
    ///   objective *holds* on the latency from each
    ///   request's actual send instant (the same percentiles, failed and unsent
    ///   requests counted the same way): the server answered in time what it was sent,
    ///   and the failure is the generator's send lateness alone;
    /// - **fail**: the objective breaks on both latencies while the generator's CPU had
    ///   room: the server (or the path to it) was slow on the requests as they were
    ///   actually sent. A generator delayed because the server took the CPU they share
    ///   lands here, as the server saturating, not as the generator; so does a starved
    ///   generator's step whose server used at least [`SERVER_SATURATED`] of its CPUs.
    ///
    /// [`StepCpu::cpus`]: super::step::StepCpu::cpus
    /// [`StepCpu::starved`]: super::step::StepCpu::starved
    pub fn judge(&mut self, slo: &Slo, rules: &Rules) {
        let secs = self.duration_s.max(1e-9);
        self.achieved_per_s = self.completed as f64 / secs;
        self.goodput = crate::load::result::Goodput {
            down_bytes_per_s: self.body_bytes as f64 / secs,
            up_bytes_per_s: self.upload_bytes as f64 / secs,
        };
        self.error_rate = if self.attempted == 0 {
            0.0
        } else {
            self.failed as f64 / self.attempted as f64
        };
        let q = self.latency_corrected.as_ref().map(|d| d.quantiles);
        let ms = |ns: u64| ns as f64 / 1e6;
        self.p50_ms = q.filter(|q| q.count > 0).map(|q| ms(q.p50_ns));
        self.p99_ms = q.filter(|q| q.count > 0).map(|q| ms(q.p99_ns));
        self.p999_ms = q.filter(|q| q.count > 0).map(|q| ms(q.p999_ns));
        self.server_cpu_us_per_request = self
            .server_cpu_seconds
            .filter(|_| self.completed > 0)
            .map(|s| s * 1e6 / self.completed as f64);
        self.enough_samples = self.completed >= rules.samples_needed;
        // Requests due within the step that no slot was free to send before it ended.
        let due = (self.offered_per_s * self.share * self.length_s).floor() as u64;
        self.unsent = due.saturating_sub(self.attempted);
        let verdict = slo.judge(
            self.latency_corrected.as_ref().map(|d| &d.hdr),
            self.attempted,
            self.failed,
            self.unsent,
        );
        if let Some(late) = self.late_start_s.filter(|&l| l > LATE_START_MAX) {
            self.verdict = Verdict::Invalid;
            self.why = format!(
                "skipped: this process reached the step {late:.2} s after its instant in the \
                 shared schedule (it was stopped or starved of CPU), so it sent nothing rather \
                 than send out of step with the other processes"
            );
            return;
        }
        let busy = self.generator.utilization >= rules.generator_cpu_max;
        let starved = self.generator.starved();
        let late = self.late_note(slo);
        (self.verdict, self.why) = match verdict {
            // A late or busy generator only adds to the corrected latency (and sends in
            // bursts): a pass despite it is a pass.
            None => match (busy, late) {
                (true, _) => (
                    Verdict::Pass,
                    format!(
                        "passed although {} (counted against the server)",
                        self.busy_note()
                    ),
                ),
                (false, Some(l)) => (
                    Verdict::Pass,
                    format!("passed although {l} (counted against the server)"),
                ),
                (false, None) => (Verdict::Pass, String::new()),
            },
            // The generator's own CPU was near what it may use: its sends, and its
            // handling of the answers, may have been the slow part.
            Some(_) if busy => (Verdict::Invalid, self.busy_note()),
            // Another process held the generator's CPUs: its sends and reads were late
            // however little CPU it used.
            // Starved, but the server had no room left: its failure.
            Some(why) if starved && self.server_saturated() => (
                Verdict::Fail,
                format!(
                    "{why}; the generator was starved (its threads waited for a CPU {:.0}% \
                     of the time they wanted one), but the server used {:.0}% of its CPUs: \
                     the server was at its limit",
                    self.generator.waiting_share().unwrap_or(0.0) * 100.0,
                    self.server_busy().unwrap_or(0.0) * 100.0
                ),
            ),
            Some(why) if starved => (
                Verdict::Invalid,
                format!("{why}, but {}", self.starved_note()),
            ),
            Some(why) => {
                // The same objective on the latency from each request's actual send
                // instant: the generator's send lateness taken out.
                let from_send = slo.judge(
                    self.latency_from_send.as_ref().map(|d| &d.hdr),
                    self.attempted,
                    self.failed,
                    self.unsent,
                );
                match from_send {
                    Some(server_why) => (
                        Verdict::Fail,
                        if late.is_some() && server_why != why {
                            format!("{why}; from the actual send instants too: {server_why}")
                        } else {
                            why
                        } + &self.server_starved_note(),
                    ),
                    None => (
                        Verdict::Invalid,
                        format!(
                            "the generator fell behind: {why} on the corrected latency, but \
                             the objective held from each request's actual send instant \
                             ({}); {}",
                            self.sent_latency_words(),
                            late.unwrap_or_else(|| "the generator sent late".into())
                        ),
                    ),
                }
            }
        };
    }

    /// "; the server was starved: …" when it was, else nothing.
    fn server_starved_note(&self) -> String {
        if !self.server_starved() {
            return String::new();
        }
        format!(
            "; the server was starved: its threads waited for a CPU {:.0}% of the time they \
             wanted one ({:.2} s on a run queue: another process held its CPUs), so this \
             failure may be its neighbour's, not its capacity",
            self.server_waiting_share().unwrap_or_default() * 100.0,
            self.server_runqueue_wait_s.unwrap_or_default()
        )
    }

    /// "the generator was starved: it waited for a CPU 64% of the time it wanted one".
    fn starved_note(&self) -> String {
        format!(
            "the generator was starved: its threads waited for a CPU {:.0}% of the time they wanted one (other processes held its CPUs)",
            self.generator.waiting_share().unwrap_or_default() * 100.0
        )
    }

    /// "the generator's CPU was busy 93% of the 1 CPU it may use".
    fn busy_note(&self) -> String {
        format!(
            "the generator's CPU was busy {:.0}% of the {} it may use",
            self.generator.utilization * 100.0,
            cpus_name(self.generator.cpus)
        )
    }

    /// The generator's pacing lateness at the objective's highest percentile, when it
    /// was sending late at all (above a millisecond there), in words.
    fn late_note(&self, slo: &Slo) -> Option<String> {
        let d = self
            .pacing_lateness
            .as_ref()
            .filter(|d| !d.hdr.is_empty())?;
        let b = slo.latency.last()?;
        let l = d.hdr.quantile(b.percentile / 100.0);
        // Worth a note from a tenth of the bound (at least 1 ms) up: less hardly moves
        // the percentile.
        let worth = std::time::Duration::from_secs_f64((b.max_ms / 1e4).max(1e-3));
        (l > worth).then(|| {
            format!(
                "the generator sent late: pacing lateness {} {:.2} ms at {:.0}% of its CPU",
                b.name(),
                l.as_secs_f64() * 1e3,
                self.generator.utilization * 100.0
            )
        })
    }

    /// "p99 12.3 ms from the send" for the invalid message.
    fn sent_latency_words(&self) -> String {
        match &self.latency_from_send {
            Some(d) if !d.hdr.is_empty() => format!(
                "p50 {:.1} ms, p99 {:.1} ms",
                d.quantiles.p50_ns as f64 / 1e6,
                d.quantiles.p99_ns as f64 / 1e6
            ),
            _ => "no answer recorded".into(),
        }
    }
}

/// "1 CPU", "2 CPUs", "0.5 CPUs".
fn cpus_name(c: f64) -> String {
    if c <= 0.0 {
        "CPUs".into()
    } else if (c - 1.0).abs() < 1e-9 {
        "1 CPU".into()
    } else if (c - c.round()).abs() < 1e-9 {
        format!("{c:.0} CPUs")
    } else {
        format!("{c:.2} CPUs")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::capacity::step::StepKind;
    use crate::capacity::step::tests::{rules, step};
    use crate::load::result::Dist;
    use crate::stats::LatencyHistogram;

    /// The objective of the generator's tests: p90 within 10 ms.
    pub(crate) fn p90_10ms() -> Slo {
        "p90=10ms".parse().unwrap()
    }

    /// 200 answers of `ms` each.
    fn hist(ms: u64) -> Option<Dist> {
        let mut h = LatencyHistogram::new();
        for _ in 0..200 {
            h.record_ns(ms * 1_000_000).unwrap();
        }
        Some(Dist::of(h))
    }

    /// A step at 310/s whose generator fell behind: 50 ms corrected against a 10 ms
    /// bound, but 5 ms from the actual send (45 ms late); judged.
    pub(crate) fn late_step() -> Step {
        let mut late = step(7, StepKind::Ramp, 310.0, 50, 200);
        late.pacing_lateness = hist(45);
        late.latency_from_send = hist(5);
        late.judge(&p90_10ms(), &rules());
        late
    }

    /// [`late_step`] with the server slow on what it was sent too; judged.
    pub(crate) fn slow_step() -> Step {
        let mut slow = late_step();
        slow.latency_corrected = hist(100);
        slow.latency_from_send = hist(55);
        slow.judge(&p90_10ms(), &rules());
        slow
    }

    /// [`slow_step`] with its generator busy 95% of its CPU; judged.
    pub(crate) fn busy_step() -> Step {
        let mut busy = slow_step();
        busy.generator.utilization = 0.95;
        busy.judge(&p90_10ms(), &rules());
        busy
    }

    #[test]
    fn a_late_generator_spoils_a_step_unless_the_server_was_slow_too() {
        // A late generator spoils the search, whatever else passed.
        let late = late_step();
        assert_eq!(late.verdict, Verdict::Invalid);
        assert!(late.why.contains("fell behind"), "{}", late.why);
        assert!(late.why.contains("pacing lateness p90 45"), "{}", late.why);
        // The same lateness while the server was slow on what it was sent: the server's,
        // even with a late generator (it shares the CPU the server saturates).
        let slow = slow_step();
        assert_eq!(slow.verdict, Verdict::Fail, "{}", slow.why);
        assert!(
            slow.why
                .contains("from the actual send instants too: p90 55.0 ms > 10 ms"),
            "{}",
            slow.why
        );
    }
}
