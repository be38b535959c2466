//! A connection slot ([`slot_loop`]): one request after the other until the run ends —
//! open loop: each at the next instant of the schedule, waited for on the slot's own
//! `pace::Pacer` — each within the run's timeout; every measured request recorded in the
//! slot's shard of the tallies, and its connection kept, closed or dropped after it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::pace;
use super::request::{Open, StepCell, close, linger, request};
use super::result::ConnSample;
use super::shared::Shared;
use super::tally::{INTERVAL, Obs, Tally};
use crate::client::ConnectError;

/// One connection slot: requests one after the other until the run ends (open loop: each
/// at the next send instant of the schedule), on a connection kept as the options and
/// the server say; the slot's count and mean latency.
pub(super) async fn slot_loop(slot: usize, shared: Arc<Shared>) -> ConnSample {
    let shard = &shared.shards[slot % shared.shards.len()];
    // Its own session cache, as a separate client would have.
    let mut own = (*shared.config).clone();
    own.resumption = crate::client::config::resumption(shared.opts.resume, 4);
    let config = Arc::new(own);
    // Over QUIC: quinn's configuration on the slot's own (its session cache shared).
    let quic = shared
        .opts
        .http3
        .then(|| crate::client::quic::quic_client_config(&config).map(Arc::new));
    let want_ticket = shared.opts.resume != crate::client::config::Resume::Off;
    let mut obs = Obs {
        phases: Vec::with_capacity(12),
        ..Obs::default()
    };
    let (mut completed, mut latency_sum) = (0u64, Duration::ZERO);
    let mut open: Option<Open> = None;
    let mut on_conn = 0u64;
    // The slot's connection began with 0-RTT data the server accepted: its tickets come
    // after its answers.
    let mut early_on_conn = false;
    // Open loop: one schedule for every slot, an instant every 1 ÷ rate. A slot free to
    // send takes the next instant no slot has taken, so a slow answer delays only the
    // request its slot waits for, never the instants after it: free slots send those.
    let rate = shared.opts.rate.map(|r| r.max(1e-9));
    // Open loop: the slot's own timer, precise to microseconds.
    let mut pacer = rate.map(|_| pace::Pacer::new());
    // When the slot was free to wait for its next send instant.
    let mut ready = shared.start;
    while shared.ticket() {
        let planned = match rate {
            Some(r) => match shared.take_send_instant(r) {
                Some(t) => Some(t),
                None => break,
            },
            None => None,
        };
        if let Some(t) = planned {
            ready = Instant::now();
            if let Some(p) = pacer.as_mut() {
                tokio::select! {
                    () = p.wait_until(t) => {}
                    () = shared.progress.stopping() => break,
                }
            }
        }
        // The actual send instant: nothing but the choice of the address (and, in `lab`,
        // a fresh client configuration) lies between it and the connect or write call.
        let sent = Instant::now();
        let last_on_conn = shared
            .opts
            .requests_per_conn
            .is_some_and(|k| on_conn + 1 >= k);
        obs.clear();
        let step = StepCell::default();
        let outcome = tokio::select! {
            o = tokio::time::timeout(
                shared.opts.timeout,
                request(&shared, &config, quic.as_ref(), &mut open, last_on_conn, &mut obs, &step),
            ) => o.unwrap_or_else(|_| {
                Err(ConnectError::Timeout {
                    during: step.get().during(),
                    after: shared.opts.timeout,
                })
            }),
            // Stopped: the request in flight is abandoned, not counted.
            () = shared.progress.stopping() => {
                open = None;
                break;
            }
        };
        let times = Times {
            planned,
            ready,
            sent,
            done: Instant::now(),
        };
        // Due within the warm-up: it opened the connection (and its resumption
        // state) for the measured window; it counts in no figure.
        let warming = planned.is_some_and(|p| p < shared.measured_from);
        let next = if warming {
            match outcome {
                Ok(keep) => Ok(after(keep, last_on_conn)),
                Err(e) => {
                    crate::sync::lock(shard).warm_error(&e);
                    Err((e.kind(), None))
                }
            }
        } else {
            record(&shared, shard, &obs, outcome, &times, last_on_conn)
        };
        let next_on_conn = match next {
            Ok(after) if warming => Some(after),
            Ok(after) => {
                shared.progress.completed.fetch_add(1, Ordering::Relaxed);
                completed += 1;
                latency_sum += times.done - times.sent;
                Some(after)
            }
            Err((kind, after)) => {
                shared.progress.failed.fetch_add(1, Ordering::Relaxed);
                shared.failed(kind);
                after
            }
        };
        on_conn += 1;
        early_on_conn |= obs.early == Some("accepted");
        if !matches!(next_on_conn, Some(After::Keep)) {
            finish_connection(&mut open, next_on_conn, want_ticket, early_on_conn).await;
            on_conn = 0;
            early_on_conn = false;
        }
    }
    close(open.take(), want_ticket).await;
    ConnSample {
        requests: completed,
        mean_latency_ms: if completed == 0 {
            0.0
        } else {
            latency_sum.as_secs_f64() * 1e3 / completed as f64
        },
    }
}

/// Ends the slot's connection after a request: closed (close_notify first; over QUIC,
/// with `want_ticket`, once the session ticket has come) when done with it, dropped when
/// the server closes it (over TCP, with `want_ticket` after 0-RTT data was accepted on
/// it, `early`, once the tickets that follow the answer are read) or its state is
/// unknown (never reused).
async fn finish_connection(
    open: &mut Option<Open>,
    next: Option<After>,
    want_ticket: bool,
    early: bool,
) {
    match next {
        Some(After::Close) => close(open.take(), want_ticket).await,
        Some(After::Keep) => {}
        Some(After::Drop) => linger(open.take(), want_ticket, early).await,
        None => *open = None,
    }
}

/// The instants of one request.
struct Times {
    /// Open loop: its send instant in the schedule.
    planned: Option<Instant>,
    /// When its slot was free to wait for that instant.
    ready: Instant,
    /// When it was sent.
    sent: Instant,
    /// When its answer (or failure) was complete.
    done: Instant,
}

/// What to do with the connection after a request: drop it when the server closes it,
/// close it after the last request `--requests-per-conn` allows, else keep it.
fn after(keep: bool, last_on_conn: bool) -> After {
    if !keep {
        After::Drop
    } else if last_on_conn {
        After::Close
    } else {
        After::Keep
    }
}

/// Records one measured request in the slot's shard of the tallies, under its lock (no
/// await): what to do with the connection, or `Err` (the failure's kind, and what to do
/// with the connection when its state is known).
fn record(
    shared: &Shared,
    shard: &std::sync::Mutex<Tally>,
    obs: &Obs,
    outcome: Result<bool, ConnectError>,
    t: &Times,
    last_on_conn: bool,
) -> Result<After, (&'static str, Option<After>)> {
    let mut tally = crate::sync::lock(shard);
    tally.apply(obs);
    tally.last_done = tally.last_done.max(Some(t.done));
    if let Some(p) = t.planned {
        // `wait_until` never returns before `p`.
        let _ = tally.lateness.record(t.sent.saturating_duration_since(p));
        let _ = tally
            .pacing
            .record(t.sent.saturating_duration_since(p.max(t.ready)));
    }
    match outcome {
        // Answered with a status that is not a success: a failed request on a
        // connection that still works.
        Ok(keep) if obs.status.is_some_and(|s| !shared.opts.ok_status.ok(s)) => {
            let e = ConnectError::Status {
                status: obs.status.unwrap_or_default(),
                ok: shared.opts.ok_status.to_string(),
            };
            tally.error(&e);
            Err((e.kind(), Some(after(keep, last_on_conn))))
        }
        Ok(keep) => {
            tally.completed += 1;
            let _ = tally.latency.record(t.done - t.sent);
            if let Some(p) = t.planned {
                let _ = tally.corrected.record(t.done.saturating_duration_since(p));
            }
            let i = (t
                .done
                .saturating_duration_since(shared.measured_from)
                .as_millis()
                / INTERVAL.as_millis()) as usize;
            if tally.intervals.len() <= i {
                tally.intervals.resize(i + 1, 0);
            }
            tally.intervals[i] += 1;
            Ok(after(keep, last_on_conn))
        }
        Err(e) => {
            tally.error(&e);
            Err((e.kind(), None))
        }
    }
}

/// What happens to a connection after a successful request.
enum After {
    /// Send the next request on it.
    Keep,
    /// We are done with it: close_notify, then close.
    Close,
    /// The server said it closes the connection (`Connection: close`): close the socket
    /// without writing to it (a close_notify would meet a closed socket and a reset).
    Drop,
}
