//! `tlsperf observe report` as text: per UTC day, one row per series (windows meeting
//! the objective, the error budget burnt, P99.9), the budget in words, the worst
//! windows, and the day's anomaly events.

use crate::observe::audit::{AuditReport, Budget, SeriesDay};
use crate::observe::baseline::AnomalyEvent;
use crate::observe::window::SeriesKey;

use super::{BAD, BOLD, GOOD, render, right_align, styled, table};

/// `x` with at most two decimals, trailing zeros dropped.
fn short(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn ms(ns: u64) -> String {
    format!("{} ms", short(ns as f64 / 1e6))
}

fn pct(share: f64) -> String {
    format!("{}%", short(share * 100.0))
}

/// `HH:MM:SS` (UTC) of an instant in ns since the Unix epoch.
pub fn clock(ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
    humantime::format_rfc3339_seconds(t).to_string()[11..19].to_string()
}

/// `wire server nginx port 443`, `probes server nginx` ([`SeriesKey::name`]).
pub fn series_name(k: &SeriesKey) -> String {
    k.name()
}

/// The budget in words: `burnt 50% of the 1% budget (0.5% of the windows missed):
/// within`.
pub fn budget_words(b: &Budget) -> String {
    let of = match b.burnt_of_allowed {
        Some(r) => format!("burnt {} of the {} budget", pct(r), pct(b.allowed_share)),
        None => format!("burnt more than the {} budget", pct(b.allowed_share)),
    };
    format!(
        "{of} ({} of the windows missed): {}",
        pct(b.burnt_share),
        if b.within { "within" } else { "exhausted" }
    )
}

/// An anomaly event on one line.
pub fn event_line(e: &AnomalyEvent) -> String {
    let moved = match (&e.moved, e.share) {
        (Some(p), Some(share)) => format!(", moved: {p} ({} of the rise)", pct(share)),
        (Some(p), None) => format!(", moved: {p}"),
        _ => String::new(),
    };
    format!(
        "{} {:<5} {} {} {} {} (baseline {}){moved}",
        clock(e.at_ns),
        e.state,
        series_name(&e.series),
        e.quantile,
        e.phase,
        ms(e.now_ns),
        ms(e.baseline_ns)
    )
}

fn p999(s: &SeriesDay) -> String {
    s.p999_ns
        .map_or("-".into(), |ns| ms(ns).trim_end_matches(" ms").to_string())
}

/// The whole audit.
pub fn audit_report(r: &AuditReport) -> String {
    let o = r.objective;
    let mut s = styled(
        BOLD,
        &format!(
            "Objective: {} of the headline ≤ {} per window (wire: first_app_byte, probes: \
             total); budget: {} of the windows may miss it",
            o.name(),
            ms(o.max_ns),
            pct(r.budget)
        ),
    );
    s += &format!(
        "\n{} window{} of a series from {} file{}{}\n",
        r.windows_read,
        if r.windows_read == 1 { "" } else { "s" },
        r.files.len(),
        if r.files.len() == 1 { "" } else { "s" },
        if r.duplicates > 0 {
            format!(
                " ({} duplicate{} left out)",
                r.duplicates,
                if r.duplicates == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        }
    );
    let mut footnote = false;
    for day in &r.days {
        s += &format!("\n{}\n", styled(BOLD, &format!("{} (UTC)", day.date)));
        if !day.series.is_empty() {
            let mut t = table(&[
                "series",
                "handshakes",
                "windows",
                "met",
                "met %",
                "burnt",
                "budget",
                "P99.9 ms",
                "max p99 ms",
            ]);
            for x in &day.series {
                // Plain: a table's widths would count a style's escape codes.
                let verdict = if x.budget.within {
                    "within"
                } else {
                    "exhausted"
                };
                footnote |= x.p999_ns.is_none() && x.windows > 0;
                t.add_row(vec![
                    series_name(&x.series),
                    x.handshakes.to_string(),
                    x.windows.to_string(),
                    x.met.to_string(),
                    pct(x.met_share),
                    pct(x.budget.burnt_share),
                    verdict.to_string(),
                    p999(x),
                    short(x.max_window_p99_ns as f64 / 1e6),
                ]);
            }
            right_align(&mut t, &[1, 2, 3, 4, 5, 7, 8]);
            s += &render(&t);
            s.push('\n');
        }
        for x in day.series.iter().filter(|x| x.windows > 0) {
            let style = if x.budget.within { GOOD } else { BAD };
            s += &format!(
                "  {}: {}\n",
                series_name(&x.series),
                styled(style, &budget_words(&x.budget))
            );
            let worst: Vec<String> = x
                .worst
                .iter()
                .map(|w| format!("{} {}", clock(w.start_ns), ms(w.value_ns)))
                .collect();
            s += &format!("    worst windows ({}): {}\n", o.name(), worst.join(", "));
        }
        if day.anomalies.is_empty() {
            s += "  no anomaly event\n";
        } else {
            s += "  anomaly events:\n";
            for e in &day.anomalies {
                s += &format!("    {}\n", event_line(e));
            }
        }
    }
    if footnote {
        s += "\nP99.9 -: a window without its headline histogram (a stream written before \
              windows carried one); max p99 is the largest window p99, not a P99.9.\n";
    }
    s
}
