//! The open loop's one send schedule, shared by every slot: an instant every 1 ÷ rate from
//! the run's start (after its `--rate-share` offset), each taken by the first slot free
//! to send it, and the instants due that no slot sent; and the run's time line at its
//! end: when its own schedule ends, and the window its rates are over.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::options::LoadGenOptions;
use super::shared::Shared;

impl Shared {
    /// Open loop: the k-th instant of the one send schedule, the start (after the
    /// `--rate-share` offset) + k ÷ rate; `None` past any clock.
    fn send_instant(&self, k: u64, rate: f64) -> Option<Instant> {
        let after = Duration::try_from_secs_f64(k as f64 / rate).ok()?;
        self.start
            .checked_add(self.opts.schedule_offset)?
            .checked_add(after)
    }

    /// Open loop: takes the next send instant of the schedule that no slot has taken;
    /// `None` past any clock or at the run's deadline.
    pub(super) fn take_send_instant(&self, rate: f64) -> Option<Instant> {
        let k = self.next_send.fetch_add(1, Ordering::Relaxed);
        let t = self.send_instant(k, rate)?;
        if self.deadline.is_some_and(|d| t >= d) {
            return None;
        }
        Some(t)
    }

    /// Open loop with `-d`: the send instants due before the run's end (its deadline,
    /// or its stop when earlier) that no slot took, every one still waiting for an
    /// answer. None in a `-n` run (it sends its N in the end) or one that gave up.
    pub(super) fn unsent(&self) -> u64 {
        let Some(rate) = self.opts.rate.filter(|r| *r > 0.0) else {
            return 0;
        };
        if self.opts.requests.is_some() || self.gave_up.load(Ordering::Relaxed) {
            return 0;
        }
        let Some(end) = earlier(self.deadline, self.progress.stopped_at()) else {
            return 0;
        };
        let first = self.start + self.opts.schedule_offset;
        if end <= first {
            return 0;
        }
        // A slot that took one of the instants due sent it: it stops only at an instant
        // at or after the end.
        due_before(end - first, rate).saturating_sub(self.next_send.load(Ordering::Relaxed))
    }
}

/// How many send instants k ≥ 0 of a schedule at `rate` per second fall before `span`
/// from its start (k ÷ rate < span), saturating at `u64::MAX` instead of wrapping or
/// turning a non-finite product into a count.
fn due_before(span: Duration, rate: f64) -> u64 {
    let due = (span.as_secs_f64() * rate - 1e-9).ceil();
    if due.is_nan() || due <= 0.0 {
        0
    } else if due >= u64::MAX as f64 {
        u64::MAX
    } else {
        due as u64
    }
}

/// When the run's own schedule ends. A run that its count (`-n N`) ended: for an open
/// loop, one send interval after its last send (N intervals from the schedule's start,
/// and no later than `-d`'s end), for a closed loop `None` (it ends with its last
/// answer), so that `-n 5 -d 10s` done in 0.2 s reports 0.2 s, not 10 s. Otherwise the
/// end of `--duration`, or, for an open-loop `-n N` run stopped early, the end its count
/// would have had.
pub(super) fn scheduled_end(
    start: Instant,
    opts: &LoadGenOptions,
    count_done: bool,
) -> Option<Instant> {
    let by_duration = opts.duration.and_then(|d| start.checked_add(d));
    let by_count = match (opts.rate, opts.requests) {
        (Some(r), Some(n)) if r > 0.0 => Duration::try_from_secs_f64(n as f64 / r)
            .ok()
            .and_then(|d| start.checked_add(opts.schedule_offset)?.checked_add(d)),
        _ => None,
    };
    if count_done {
        return match (by_count, by_duration) {
            (Some(c), Some(d)) => Some(c.min(d)),
            (c, _) => c,
        };
    }
    by_duration.or(by_count)
}

/// The earlier of two instants, either of which may be missing.
fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The time the rates are over: from the start to the later of the last completion and
/// the end of the run's schedule, or of the stop when the run was stopped before that
/// end. An open-loop run that kept its schedule thus reports the rate it was asked for
/// (not completions ÷ the time to the last one, which is higher), and a stopped run
/// counts the time up to its stop, even when nothing completed near it.
pub(super) fn window(
    start: Instant,
    last_done: Option<Instant>,
    scheduled_end: Option<Instant>,
    stopped_at: Option<Instant>,
) -> Duration {
    last_done
        .max(earlier(scheduled_end, stopped_at))
        .unwrap_or(start)
        .saturating_duration_since(start)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_window_ends_at_the_schedule_or_the_stop_not_at_the_last_response() {
        let t0 = Instant::now();
        let at = |ms: u64| Some(t0 + Duration::from_millis(ms));
        let ms = |d: Duration| d.as_millis();
        // Open loop at 2/s for 2 s: the last send at 1.5 s answered at 1.51 s; 4 ÷ 2 s.
        assert_eq!(ms(window(t0, at(1510), at(2000), None)), 2000);
        // Closed loop: the last response after the deadline ends the window.
        assert_eq!(ms(window(t0, at(2040), at(2000), None)), 2040);
        // Stopped at 3 s in a 10 s run whose one response came at 2 ms.
        assert_eq!(ms(window(t0, at(2), at(10_000), at(3000))), 3000);
        // Stopped during the tail after the schedule: the schedule's end.
        assert_eq!(ms(window(t0, at(1990), at(2000), at(2500))), 2000);
        // A closed-loop -n run: its last response; stopped: the stop.
        assert_eq!(ms(window(t0, at(700), None, None)), 700);
        assert_eq!(ms(window(t0, None, None, at(300))), 300);
        assert_eq!(ms(window(t0, None, None, None)), 0);
    }

    fn opts(requests: Option<u64>, duration_ms: Option<u64>, rate: Option<f64>) -> LoadGenOptions {
        LoadGenOptions {
            requests,
            duration: duration_ms.map(Duration::from_millis),
            connections: 1,
            rate,
            requests_per_conn: None,
            http2: false,
            http3: false,
            body_size: 0,
            timeout: Duration::from_secs(1),
            threads: 1,
            server_pid: None,
            ok_status: Default::default(),
            resume: crate::client::config::Resume::Off,
            echo: BTreeMap::new(),
            early_data: false,
            verdicts: None,
            addrs: Vec::new(),
            config_per_connection: None,
            schedule_offset: Duration::ZERO,
            warmup: Duration::ZERO,
            start_at: None,
        }
    }

    /// `-n 5 -d 10s` done in 0.2 s reported 10.00 s: a run its count ended ends with
    /// its count's schedule (open loop) or its last answer (closed loop).
    #[test]
    fn a_run_ended_by_its_count_does_not_report_its_duration_limit() {
        let t0 = Instant::now();
        let ms = |e: Option<Instant>| e.map(|e| (e - t0).as_millis());
        let closed = opts(Some(5), Some(10_000), None);
        assert_eq!(ms(scheduled_end(t0, &closed, true)), None);
        assert_eq!(ms(scheduled_end(t0, &closed, false)), Some(10_000));
        let open = opts(Some(5), Some(10_000), Some(10.0));
        assert_eq!(ms(scheduled_end(t0, &open, true)), Some(500));
        assert_eq!(ms(scheduled_end(t0, &open, false)), Some(10_000));
        // The count's schedule reaches past -d: -d's end.
        let open = opts(Some(50), Some(1_000), Some(10.0));
        assert_eq!(ms(scheduled_end(t0, &open, true)), Some(1_000));
        assert_eq!(
            ms(scheduled_end(t0, &opts(None, Some(2_000), None), false)),
            Some(2_000)
        );
    }

    /// `--rate 1e300 -d 1s` printed "18446744073709472110 due but never sent".
    #[test]
    fn instants_due_saturate() {
        assert_eq!(due_before(Duration::from_secs(2), 10.0), 20);
        assert_eq!(due_before(Duration::from_millis(1500), 2.0), 3);
        assert_eq!(due_before(Duration::ZERO, 10.0), 0);
        assert_eq!(due_before(Duration::from_secs(1), 1e300), u64::MAX);
        assert_eq!(due_before(Duration::from_secs(1), f64::INFINITY), u64::MAX);
        assert_eq!(due_before(Duration::from_secs(1), f64::NAN), 0);
    }
}
