//! `tlsperf observe report --html FILE`: the audit of window streams as a self-contained
//! page in the lab's style — per day the series' table (windows meeting the objective,
//! the error budget, P99.9), the worst windows and the anomaly events, and per series
//! two time-series charts over the whole span ([`svg::lines`]): handshakes/s, and the
//! headline's p50/p90/p99 with the objective's bound, the anomalies' starts marked.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::observe::audit::{AuditReport, WindowPoint};
use crate::observe::window::SeriesKey;
use crate::report::svg;
use crate::report::text::{budget_words, clock, event_line, series_name};

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:4px 6px;text-align:right}th:first-child,td:first-child,td:last-child{text-align:left}th{background:#f3f3f3}.worse{color:#a00}.sig{font-weight:bold;color:#006400}.charts{display:flex;flex-wrap:wrap;gap:1em}svg.chart{background:#fff;border:1px solid #eee;width:49%;min-width:420px;height:auto}li{margin:.3em 0}.muted{color:#666}";

const HOUR_NS: f64 = 3.6e12;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The charts of one series: `points` over the whole span, x in hours (minutes for a span under two) since `origin_ns`, the first window judged.
fn series_charts(
    s: &mut String,
    i: usize,
    key: &SeriesKey,
    points: &[WindowPoint],
    r: &AuditReport,
    origin_ns: u64,
) {
    // Hours, or minutes for a span under two hours.
    let last = points.last().map_or(origin_ns, |p| p.start_ns);
    let (unit_ns, unit) = if (last.saturating_sub(origin_ns) as f64) < 2.0 * HOUR_NS {
        (HOUR_NS / 60.0, "minutes")
    } else {
        (HOUR_NS, "hours")
    };
    let x = |ns: u64| ns.saturating_sub(origin_ns) as f64 / unit_ns;
    let name = series_name(key);
    let x_label = format!("{unit} since {}", when(origin_ns));
    let rate = vec![(
        "handshakes/s".to_string(),
        points
            .iter()
            .map(|p| [x(p.start_ns), p.per_second])
            .collect(),
    )];
    let rate_max = points.iter().map(|p| p.per_second).fold(0.0, f64::max) * 1.1;
    s.push_str(&svg::lines(
        &format!("rate-{i}"),
        &format!("{name}: handshakes/s"),
        &x_label,
        "handshakes/s",
        if rate_max > 0.0 { rate_max } else { 1.0 },
        &rate,
    ));
    let line = |f: &dyn Fn(&WindowPoint) -> u64| -> Vec<[f64; 2]> {
        points.iter().map(|p| [x(p.start_ns), ms(f(p))]).collect()
    };
    let bound = ms(r.objective.max_ns);
    let top = points
        .iter()
        .map(|p| ms(p.p99_ns))
        .fold(bound, f64::max)
        .min(bound * 4.0)
        * 1.1;
    let span = points.last().map_or(0.0, |p| x(p.start_ns));
    let mut lines = vec![
        ("p50".to_string(), line(&|p| p.p50_ns)),
        ("p90".to_string(), line(&|p| p.p90_ns)),
        ("p99".to_string(), line(&|p| p.p99_ns)),
        (
            format!("objective {} ≤ {} ms", r.objective.name(), bound),
            vec![[0.0, bound], [span, bound]],
        ),
    ];
    // The anomalies' starts: vertical strokes, joined along the axis.
    let starts: Vec<f64> = r
        .days
        .iter()
        .flat_map(|d| &d.anomalies)
        .filter(|e| e.state == "start" && &e.series == key)
        .map(|e| x(e.since_ns))
        .collect();
    if !starts.is_empty() {
        let mut marks = Vec::new();
        for t in starts {
            marks.extend([[t, 0.0], [t, top], [t, 0.0]]);
        }
        lines.push(("anomaly starts".to_string(), marks));
    }
    s.push_str(&svg::lines(
        &format!("latency-{i}"),
        &format!("{name}: {} per window", phase_of(key)),
        &x_label,
        "ms",
        top,
        &lines,
    ));
}

/// `2026-12-06 19:09:00 UTC`.
fn when(ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .replace('Z', " UTC")
}

fn phase_of(key: &SeriesKey) -> &'static str {
    crate::observe::window::phases_of(&key.view)[0]
}

/// The page.
pub fn html(r: &AuditReport) -> String {
    let e = svg::esc;
    let mut s = super::page_head("tlsperf observe report", STYLE);
    let _ = write!(
        s,
        "<h1>Audit: {} of the headline ≤ {} ms per window</h1>",
        r.objective.name(),
        ms(r.objective.max_ns)
    );
    let _ = write!(
        s,
        "<p class=\"muted\">The headline is the wire's first_app_byte (SYN → the client's first application byte) or the probes' total. A window meets the objective when its {} of the headline is within the bound; windows without a handshake are not judged. Budget: {}% of the windows may miss it. P99.9 is the day's, from the windows' histograms merged (exact to HDR's 3 significant digits; – when a window has none); max p99 is the largest window p99. {} windows of a series from {}.</p>",
        r.objective.name(),
        r.budget * 100.0,
        r.windows_read,
        e(&r.files.join(", "))
    );
    for day in &r.days {
        let _ = write!(s, "<h2>{} (UTC)</h2>", e(&day.date));
        if !day.series.is_empty() {
            s.push_str("<table><tr><th>series</th><th>handshakes</th><th>windows</th><th>met</th><th>met %</th><th>budget</th><th>P99.9 ms</th><th>max p99 ms</th><th>worst windows</th></tr>");
            for x in &day.series {
                let worst: Vec<String> = x
                    .worst
                    .iter()
                    .map(|w| format!("{} {:.1} ms", clock(w.start_ns), ms(w.value_ns)))
                    .collect();
                let _ = write!(
                    s,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}%</td><td class=\"{}\">{}</td><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
                    e(&series_name(&x.series)),
                    x.handshakes,
                    x.windows,
                    x.met,
                    x.met_share * 100.0,
                    if x.budget.within { "sig" } else { "worse" },
                    e(&budget_words(&x.budget)),
                    x.p999_ns.map_or("–".into(), |ns| format!("{:.1}", ms(ns))),
                    ms(x.max_window_p99_ns),
                    e(&worst.join(", "))
                );
            }
            s.push_str("</table>");
        }
        if day.anomalies.is_empty() {
            s.push_str("<p class=\"muted\">No anomaly event.</p>");
        } else {
            s.push_str("<h3>Anomaly events</h3><ul>");
            for ev in &day.anomalies {
                let _ = write!(s, "<li>{}</li>", e(&event_line(ev)));
            }
            s.push_str("</ul>");
        }
    }
    // Each series over the whole span.
    let mut points: BTreeMap<&SeriesKey, Vec<WindowPoint>> = BTreeMap::new();
    for x in r.days.iter().flat_map(|d| &d.series) {
        points
            .entry(&x.series)
            .or_default()
            .extend(x.points.iter().cloned());
    }
    // The charts' x axis: hours since the first window judged.
    let origin_ns = points
        .values()
        .flatten()
        .map(|p| p.start_ns)
        .min()
        .unwrap_or(0);
    s.push_str("<h2>Over time</h2>");
    for (i, (key, pts)) in points.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        s.push_str("<div class=\"charts\">");
        series_charts(&mut s, i, key, pts, r, origin_ns);
        s.push_str("</div>");
    }
    s.push_str("</body></html>\n");
    s
}
