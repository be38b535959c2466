//! `lab --slo`: each configuration's capacity at a latency objective — a
//! [`crate::capacity`] search (new connection per request) against the cell's own
//! servers after its rounds, bounded in time — and the "What to change" lines it
//! supports ("+38% new connections/s at p99 ≤ 30 ms").

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::live::Live;
use super::matrix::Group;
use super::result::{CellCapacity, CellResult, GroupResult, Recommendation};
use super::{Control, External, LabError, LabOptions};
use crate::capacity::{self, CapacityOptions, Outcome, Rules, Slo};
use crate::client::target::Target;
use crate::load::LoadGenOptions;

/// The shortest step of the lab's capacity search (its measured window).
pub const STEP_MIN: Duration = Duration::from_secs(1);

/// The search's rules in the lab: `tlsperf capacity`'s defaults, with steps of at most
/// 10 s and warm-ups of at least 0.5 s (the search is bounded by `--slo-time`).
fn rules(slo: &Slo) -> Rules {
    Rules {
        samples_needed: slo.samples_needed(),
        step_min_s: STEP_MIN.as_secs_f64(),
        step_max_s: 10.0,
        generator_cpu_max: capacity::GENERATOR_CPU_MAX,
        resolution: 0.2,
        start_rate: 100.0,
        factor: 2.0,
        max_rate: 100_000.0,
        min_rate: 1.0,
        warmup_s: 0.5,
    }
}

/// The request timeout of the lab's search: 10× the objective's largest latency bound,
/// within 1 s..10 s.
fn request_timeout(slo: &Slo) -> Duration {
    let largest = slo
        .latency
        .iter()
        .map(|b| b.max())
        .max()
        .unwrap_or(Duration::from_secs(1));
    (largest * 10).clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// The least time the lab's search at `slo` needs for one step (warm-up, [`STEP_MIN`]
/// and the request timeout for its last answers): `--slo-time` may not be shorter.
pub fn shortest_search(slo: &Slo) -> Duration {
    capacity::shortest_step(&rules(slo), request_timeout(slo))
}

/// Searches the capacity of a running cell at `slo`, for at most `max_time`; `None`
/// when stopped.
pub(super) async fn search(
    l: &Live,
    opts: &LabOptions,
    slo: &Slo,
    max_time: Duration,
    external: Option<&External>,
    control: &Control,
) -> Result<Option<CellCapacity>, LabError> {
    let cell = format!("{}/{}", l.cell.group.name(), l.cell.name);
    let target = match external {
        Some(e) => e.target.clone(),
        None => Target::parse(&format!("https://localhost:{}/", l.addrs[0].port()), None).map_err(
            |e| LabError::Prepare {
                dir: opts.work_dir.clone(),
                reason: e.to_string(),
            },
        )?,
    };
    let copts = CapacityOptions {
        slo: slo.clone(),
        rules: rules(slo),
        max_time,
        max_steps: 40,
        connections: None,
        cooldown: Duration::from_millis(500),
        share: None,
        plan: None,
        aligned_from: None,
        load: LoadGenOptions {
            requests: None,
            duration: None,
            connections: 1,
            rate: None,
            requests_per_conn: Some(1),
            http2: false,
            http3: false,
            body_size: opts.body_size,
            timeout: request_timeout(slo),
            threads: 1,
            server_pid: None,
            ok_status: Default::default(),
            resume: l.cell.resume,
            echo: BTreeMap::new(),
            early_data: false,
            verdicts: None,
            addrs: l.addrs.clone(),
            config_per_connection: l.factory.clone(),
            schedule_offset: Duration::ZERO,
            warmup: Duration::ZERO,
            start_at: None,
        },
    };
    let progress = Arc::new(capacity::Progress::default());
    let stopper = Arc::clone(&progress);
    // The lab's stop switch reaches the search; the watcher never ends by itself.
    let watch = async move {
        while !control.stopped() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stopper.stop();
        std::future::pending::<()>().await;
    };
    let run = capacity::run(target, Arc::clone(&l.config), copts, progress);
    let r = tokio::select! {
        r = run => r,
        () = watch => unreachable!("the watcher never ends"),
    };
    let r = r.map_err(|e| LabError::Capacity {
        cell: cell.clone(),
        reason: e.to_string(),
    })?;
    if r.outcome == Outcome::Interrupted {
        return Ok(None);
    }
    // A cell's own server that does not answer stops the lab, as before `capacity` kept
    // such a result.
    if r.outcome == Outcome::NoAnswer {
        return Err(LabError::Capacity {
            cell,
            reason: r.message,
        });
    }
    Ok(Some(CellCapacity {
        outcome: r.outcome,
        capacity_per_s: r.capacity_per_s,
        interval_per_s: r.interval_per_s,
        disputed_per_s: r.disputed_per_s,
        steps: r.steps.len(),
        message: r.message,
    }))
}

/// "What to change" from the capacities: a configuration whose capacity's interval lies
/// wholly above its group's baseline's (as `tlsperf compare` decides for two capacity
/// results); the gain is the ratio of the two capacities. `at_link`: the lab ran over `--link` (the
/// group caveats that only loopback needs are left out).
pub(super) fn recommend(groups: &[GroupResult], slo: &Slo, at_link: bool) -> Vec<Recommendation> {
    let bound = slo
        .latency
        .iter()
        .map(|b| format!("{} ≤ {} ms", b.name(), b.max_ms))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = Vec::new();
    for g in groups {
        let Some(base) = g.cells.first().filter(|b| !b.failed) else {
            continue;
        };
        let Some((a, [_, a_top])) = base
            .capacity
            .as_ref()
            .and_then(|c| c.capacity_per_s.zip(c.interval_per_s))
        else {
            continue;
        };
        for c in g.cells.iter().skip(1).filter(|c| !c.control && !c.failed) {
            let Some((b, [b_bottom, _])) = c
                .capacity
                .as_ref()
                .and_then(|x| x.capacity_per_s.zip(x.interval_per_s))
            else {
                continue;
            };
            if b_bottom <= a_top || b <= a {
                continue;
            }
            let gain = b / a - 1.0;
            let caveat = Group::ALL
                .into_iter()
                .find(|x| x.name() == g.group)
                .and_then(|x| super::matrix::caveat(x, at_link))
                .map(str::to_string);
            let mut text = format!(
                "{}: {} instead of {} — {:+.0}% new connections/s at {bound} (capacity {}/s \
                 against {}/s)",
                g.title,
                c.label,
                base.label,
                gain * 100.0,
                capacity::numbers::group(b),
                capacity::numbers::group(a)
            );
            if let Some(cv) = &caveat {
                text += &format!(" ({cv})");
            }
            out.push(Recommendation {
                group: g.group.clone(),
                from: base.name.clone(),
                to: c.name.clone(),
                metric: "capacity_per_s".into(),
                gain,
                p: None,
                p_adjusted: None,
                also: None,
                caveat,
                text,
                first_byte_saved_ms: None,
            });
        }
    }
    out
}

/// A cell's capacity in a table: `575/s (575–600)`, with the band where its steps
/// disagreed when they did (`575/s (575–600; steps disagreed 600–650)`), or how its
/// search ended.
pub fn cell_text(c: &CellResult) -> String {
    let Some(cap) = &c.capacity else {
        return "–".into();
    };
    let g = capacity::numbers::group;
    match (cap.capacity_per_s, cap.interval_per_s) {
        (Some(v), Some([lo, hi])) => match cap.disputed_per_s {
            Some([d_lo, d_hi]) => format!(
                "{}/s ({}–{}; steps disagreed {}–{})",
                g(v),
                g(lo),
                g(hi),
                g(d_lo),
                g(d_hi)
            ),
            None => format!("{}/s ({}–{})", g(v), g(lo), g(hi)),
        },
        (Some(v), None) => format!("{}/s", g(v)),
        (None, Some([lo, hi])) => format!("{} ({}–{})", cap.outcome.name(), g(lo), g(hi)),
        (None, None) => cap.outcome.name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(name: &str, cap: Option<(Option<f64>, [f64; 2])>) -> CellResult {
        CellResult {
            name: name.into(),
            label: format!("label {name}"),
            settings: serde_json::Value::Null,
            control: false,
            failed: false,
            failure_rate: 0.0,
            rounds: Vec::new(),
            summary: BTreeMap::new(),
            vs_baseline: BTreeMap::new(),
            request_cdf: Vec::new(),
            handshake_full_hist: Vec::new(),
            handshake_resumed_hist: Vec::new(),
            errors: BTreeMap::new(),
            crypto_limit_pct: None,
            capacity: cap.map(|(v, iv)| CellCapacity {
                outcome: if v.is_some() {
                    Outcome::Capacity
                } else {
                    Outcome::TimeLimit
                },
                capacity_per_s: v,
                interval_per_s: Some(iv),
                disputed_per_s: None,
                steps: 9,
                message: "m".into(),
            }),
        }
    }

    #[test]
    fn recommends_a_capacity_above_the_baselines_bracket() {
        let slo: Slo = "p99=30ms".parse().unwrap();
        let g = GroupResult {
            group: "resumption".into(),
            title: "Session resumption".into(),
            baseline: "off".into(),
            warnings: Vec::new(),
            cells: vec![
                cell("off", Some((Some(580.0), [580.0, 600.0]))),
                // Above 600/s, where the baseline failed: +38%.
                cell("tickets", Some((Some(800.0), [800.0, 840.0]))),
                // Within the baseline's bracket: no decision.
                cell("stateful", Some((Some(590.0), [590.0, 620.0]))),
                // No capacity estimated.
                cell("tickets-2-own-keys", Some((None, [700.0, 760.0]))),
                cell("tickets-2-shared-keys", None),
            ],
        };
        let recs = recommend(&[g], &slo, false);
        assert_eq!(recs.len(), 1, "{recs:?}");
        assert_eq!(recs[0].to, "tickets");
        assert!((recs[0].gain - (800.0 / 580.0 - 1.0)).abs() < 1e-9);
        assert!(
            recs[0]
                .text
                .contains("+38% new connections/s at p99 ≤ 30 ms (capacity 800/s against 580/s)"),
            "{}",
            recs[0].text
        );
        assert_eq!(recs[0].p, None);
        assert_eq!(
            cell_text(&cell("x", Some((Some(800.0), [800.0, 840.0])))),
            "800/s (800–840)"
        );
        assert_eq!(
            cell_text(&cell("x", Some((None, [700.0, 760.0])))),
            "time-limit (700–760)"
        );
        assert_eq!(cell_text(&cell("x", None)), "–");
    }

    /// A cell whose steps disagreed shows the band (its interval already reflects the
    /// scatter that made them disagree).
    #[test]
    fn a_band_where_the_steps_disagreed_is_shown() {
        let mut shown = cell("off", Some((Some(580.0), [560.0, 640.0])));
        if let Some(c) = shown.capacity.as_mut() {
            c.disputed_per_s = Some([600.0, 620.0]);
        }
        assert_eq!(
            cell_text(&shown),
            "580/s (560–640; steps disagreed 600–620)"
        );
    }
}
