//! A capacity search for people: the compact terminal table of steps with the
//! conclusion, one progress line per step, and a self-contained HTML page with the knee
//! chart (offered rate against corrected p50/p99 and the error rate, as SVG).

use std::fmt::Write as _;

use comfy_table::{CellAlignment, Table, presets};

use crate::capacity::numbers::group;
use crate::capacity::{CapacityResult, Outcome, Step};
use crate::compare::CompareDocument;
use crate::report::svg;
use crate::stats::slo::Slo;

fn ms(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    })
}

fn pct(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else {
        format!("{:.2}%", x * 100.0)
    }
}

/// The latency percentiles a step is shown with: p50, p95, p99 and p99.9, and every one
/// the objective names, in increasing order.
fn percentiles(slo: &Slo) -> Vec<f64> {
    let mut v = vec![50.0, 95.0, 99.0, 99.9];
    for b in &slo.latency {
        if !v.contains(&b.percentile) {
            v.push(b.percentile);
        }
    }
    v.sort_by(f64::total_cmp);
    v
}

/// A step's corrected latency at percentile `p` (ms), over its answered requests.
fn latency_at(s: &Step, p: f64) -> Option<f64> {
    s.latency_corrected
        .as_ref()
        .filter(|d| d.quantiles.count > 0)
        .map(|d| d.hdr.quantile(p / 100.0).as_secs_f64() * 1e3)
}

/// The column of the server's CPU, shown when a step measured it (`--server-pid`).
const SERVER_CPU: &str = "server CPU µs/req";

/// The column of the uploads' goodput, shown when a step sent request bodies
/// (`--body-size`).
const UPLOAD: &str = "upload MB/s";

/// The columns of the step table, in order, with the percentiles `pcts`.
fn columns(pcts: &[f64]) -> Vec<String> {
    let mut c: Vec<String> = ["step", "kind", "offered/s", "achieved/s"]
        .map(String::from)
        .into();
    c.extend(pcts.iter().map(|p| format!("p{p} ms")));
    c.extend(
        [
            "errors",
            SERVER_CPU,
            "gen CPU",
            "pacing p99 ms",
            UPLOAD,
            "verdict",
            "why",
        ]
        .map(String::from),
    );
    c
}

/// The step's row of the table, a cell for each of [`columns`].
fn cells(s: &Step, pcts: &[f64]) -> Vec<String> {
    let late = s
        .pacing_lateness
        .as_ref()
        .filter(|d| d.quantiles.count > 0)
        .map(|d| d.quantiles.p99_ns as f64 / 1e6);
    let mut row = vec![
        s.index.to_string(),
        s.kind.name().to_string(),
        group(s.offered_per_s),
        group(s.achieved_per_s),
    ];
    row.extend(pcts.iter().map(|&p| ms(latency_at(s, p))));
    row.extend([
        pct(s.error_rate),
        s.server_cpu_us_per_request
            .map_or("-".into(), |v| format!("{v:.0}")),
        format!("{:.0}%", s.generator.utilization * 100.0),
        late.map_or("-".into(), |v| format!("{v:.2}")),
        format!("{:.2}", s.goodput.up_bytes_per_s / 1e6),
        s.verdict.name().to_string(),
        s.why.clone(),
    ]);
    row
}

/// One line per finished step, for the progress display: its latency at p50, p95, p99
/// and each percentile of the objective `slo`.
pub fn step_line(s: &Step, slo: &Slo) -> String {
    let mut pcts: Vec<f64> = percentiles(slo)
        .into_iter()
        .filter(|&p| p != 99.9 || slo.latency.iter().any(|b| b.percentile == p))
        .collect();
    pcts.dedup();
    let latency: Vec<String> = pcts
        .iter()
        .map(|&p| format!("p{p} {} ms", ms(latency_at(s, p))))
        .collect();
    format!(
        "step {} ({}) {}/s: achieved {}/s, {}, errors {}, generator CPU {:.0}%{} → {}{}",
        s.index,
        s.kind.name(),
        group(s.offered_per_s),
        group(s.achieved_per_s),
        latency.join(", "),
        pct(s.error_rate),
        s.generator.utilization * 100.0,
        if s.upload_bytes > 0 {
            format!(", upload {:.2} MB/s", s.goodput.up_bytes_per_s / 1e6)
        } else {
            String::new()
        },
        s.verdict.name(),
        if s.why.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.why)
        }
    )
}

/// The terminal summary: the objective, the table of steps, the conclusion.
pub fn text(r: &CapacityResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "capacity of {} at {}", r.target, r.slo);
    let _ = writeln!(
        s,
        "rule: each step sized for {} answers (10 above the highest percentile), {}–{} s; a \
         failing step is invalid when the generator was busy ({:.0}% of the CPUs it may use) \
         or the objective held from each request's actual send instant (the failure was the \
         generator's lateness); the capacity is the rate at which a step meets the objective \
         with probability 90%, estimated from every valid step{}",
        group(r.rules.samples_needed as f64),
        r.rules.step_min_s,
        r.rules.step_max_s,
        r.rules.generator_cpu_max * 100.0,
        r.rate_share.as_ref().map_or(String::new(), |sh| format!(
            "; shares {sh} of the offered rate ({} process{})",
            r.machines,
            if r.machines == 1 { "" } else { "es" }
        ))
    );
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    let server = r.steps.iter().any(|s| s.server_cpu_seconds.is_some());
    let upload = r.steps.iter().any(|s| s.upload_bytes > 0);
    let pcts = percentiles(&r.slo);
    let names = columns(&pcts);
    let keep: Vec<usize> = (0..names.len())
        .filter(|&i| server || names[i] != SERVER_CPU)
        .filter(|&i| upload || names[i] != UPLOAD)
        .collect();
    t.set_header(keep.iter().map(|&i| names[i].clone()));
    for step in &r.steps {
        let c = cells(step, &pcts);
        t.add_row(keep.iter().map(|&i| c[i].clone()));
    }
    for (n, col) in t.column_iter_mut().enumerate() {
        if (2..keep.len() - 2).contains(&n) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    for l in t.lines() {
        let _ = writeln!(s, "{}", l.trim_end());
    }
    // A capacity's message names it already ("capacity 750/s: the rate at which…").
    match r.outcome {
        Outcome::Capacity => {
            let _ = writeln!(s, "{}", r.message);
        }
        other => {
            let _ = writeln!(s, "{}: {}", other.name(), r.message);
        }
    }
    if let Some(c) = &r.link_counters {
        s += &c.text();
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// A comparison of two capacity results (a `tlsperf-compare/1` document of kind
/// `capacity`): the capacities, the change and the intervals' verdict.
pub fn comparison(c: &CompareDocument) -> String {
    let mut s = format!(
        "capacity results compared, B against A, on what their steps show (each side's \
         capacity estimated again from its steps; B is higher only where its 90% interval \
         lies wholly above A's)\nA: {}\nB: {}\n",
        c.a.path, c.b.path
    );
    for r in &c.compared.rows {
        let cap = |side: &crate::stats::rows::RowSide| {
            side.median
                .map_or("-".into(), |m| format!("{}/s", group(m)))
        };
        s += &format!(
            "{}: A {}, B {} ({})\n{}\n",
            r.label,
            cap(&r.a),
            cap(&r.b),
            r.relative_change
                .map_or("-".into(), |x| format!("{:+.1}%", x * 100.0)),
            r.verdict
        );
    }
    for w in &c.compared.warnings {
        s += &format!("warning: {w}\n");
    }
    s
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:4px 6px;text-align:right}td:last-child,th:last-child{text-align:left}th{background:#f3f3f3}.fail{color:#a00}.invalid{color:#a60}svg.chart{background:#fff;border:1px solid #eee;width:49%;min-width:420px;height:auto}.muted{color:#666}";

/// Per offered rate, the last step measured there, in rate order: the knee chart's
/// points.
fn by_rate(r: &CapacityResult) -> Vec<&Step> {
    let mut v: Vec<&Step> = Vec::new();
    for s in &r.steps {
        v.retain(|x| x.offered_per_s != s.offered_per_s);
        v.push(s);
    }
    v.sort_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s));
    v
}

/// The knee charts: corrected p50 and p99 against the offered rate (with the
/// objective's bounds; the y axis ends at 3× the largest bound, steps above it drawn at
/// the top; the band where the steps disagreed, when they did, as a box), and the error
/// rate.
pub fn knee_charts(r: &CapacityResult) -> String {
    let pts = by_rate(r);
    let line = |f: &dyn Fn(&Step) -> Option<f64>| -> Vec<[f64; 2]> {
        pts.iter()
            .filter_map(|s| f(s).map(|y| [s.offered_per_s, y]))
            .collect()
    };
    let x_max = pts.last().map_or(1.0, |s| s.offered_per_s);
    let largest = r.slo.latency.iter().map(|b| b.max_ms).fold(0.0, f64::max);
    let mut series = vec![
        ("p50 (corrected)".to_string(), line(&|s| s.p50_ms)),
        ("p99 (corrected)".to_string(), line(&|s| s.p99_ms)),
    ];
    for b in &r.slo.latency {
        series.push((
            format!("objective {} ≤ {} ms", b.name(), b.max_ms),
            vec![[0.0, b.max_ms], [x_max, b.max_ms]],
        ));
    }
    // Where the steps disagreed: a box over that band of rates, the chart's full height.
    if let Some([lo, hi]) = r.disputed_per_s {
        let top = largest * 3.0;
        series.push((
            format!(
                "steps disagreed {}–{}/s",
                crate::capacity::numbers::group(lo),
                crate::capacity::numbers::group(hi)
            ),
            vec![[lo, 0.0], [lo, top], [hi, top], [hi, 0.0], [lo, 0.0]],
        ));
    }
    let mut out = svg::lines(
        "knee-latency",
        "Latency against offered rate",
        "offered requests/s",
        "ms",
        largest * 3.0,
        &series,
    );
    let errors = vec![(
        "errors %".to_string(),
        line(&|s| Some(s.error_rate * 100.0)),
    )];
    let e_max = pts
        .iter()
        .map(|s| s.error_rate * 100.0)
        .fold(r.slo.errors_max * 200.0, f64::max)
        .max(1.0);
    out.push_str(&svg::lines(
        "knee-errors",
        "Error rate against offered rate",
        "offered requests/s",
        "% failed",
        e_max,
        &errors,
    ));
    out
}

/// The HTML page: conclusion, knee charts, step table. Self-contained, no scripts.
pub fn html(r: &CapacityResult) -> String {
    let e = svg::esc;
    let mut s = super::page_head("tlsperf capacity", STYLE);
    let _ = write!(
        s,
        "<h1>Capacity of {} at {}</h1>",
        e(&r.target),
        e(&r.slo.to_string())
    );
    let _ = write!(
        s,
        "<p class=\"outcome\" data-outcome=\"{}\"><strong>{}</strong></p>",
        r.outcome.name(),
        e(&r.message)
    );
    for w in &r.warnings {
        let _ = write!(s, "<p class=\"invalid\">warning: {}</p>", e(w));
    }
    let _ = write!(
        s,
        "<p class=\"muted\">Started {}. Latency is corrected (from each request's intended send instant); failed requests count as slower than any bound. Each step was sized for {} answers, {}–{} s long; a failing step is invalid when the generator was busy ({:.0}% of the CPUs it may use) or when the objective held on the latency from each request's actual send instant (the failure was then the generator's send lateness alone).</p>",
        e(&r.started),
        r.rules.samples_needed,
        r.rules.step_min_s,
        r.rules.step_max_s,
        r.rules.generator_cpu_max * 100.0,
    );
    s.push_str(&knee_charts(r));
    s.push_str("<table class=\"steps\"><thead><tr>");
    // The uploads' column only when a step sent request bodies.
    let upload = r.steps.iter().any(|s| s.upload_bytes > 0);
    let pcts = percentiles(&r.slo);
    let names = columns(&pcts);
    let keep = |i: &usize| upload || names[*i] != UPLOAD;
    for c in (0..names.len()).filter(keep).map(|i| &names[i]) {
        let _ = write!(s, "<th>{}</th>", e(c));
    }
    s.push_str("</tr></thead><tbody>");
    for step in &r.steps {
        let _ = write!(s, "<tr class=\"{}\">", step.verdict.name());
        let c = cells(step, &pcts);
        for i in (0..c.len()).filter(keep) {
            let _ = write!(s, "<td>{}</td>", e(&c[i]));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::StepKind::{Bisect, Confirm, Ramp};
    use crate::capacity::result::tests::result_of;
    use crate::capacity::step::tests::{knee_steps, step};

    /// The percentiles a user's objective names are printed wherever it is judged, and
    /// p95 among the defaults: `--slo p95=…` judged on p95 and showed p50/p99/p99.9.
    #[test]
    fn the_objectives_percentiles_are_shown() {
        let mut r = result_of(knee_steps(300.0, 315.0));
        r.slo = "p97=30ms".parse().unwrap();
        let t = text(&r);
        let header = t.lines().find(|l| l.contains("offered/s")).unwrap();
        let names: Vec<&str> = header
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let at = |c: &str| names.iter().position(|n| *n == c).unwrap_or(usize::MAX);
        assert!(
            at("p50 ms") < at("p95 ms") && at("p95 ms") < at("p97 ms"),
            "{header}"
        );
        assert!(
            at("p97 ms") < at("p99 ms") && at("p99 ms") < at("p99.9 ms"),
            "{header}"
        );
        let line = step_line(&r.steps[0], &r.slo);
        assert!(line.contains(", p95 ") && line.contains(", p97 "), "{line}");
        let page = html(&r);
        assert!(page.contains("<th>p97 ms</th>"), "{page}");
    }

    /// The last line says how the search ended, once: "capacity 300/s: the rate…",
    /// not "capacity: capacity 300/s"; other outcomes are named before their message.
    #[test]
    fn the_text_names_the_outcome_once() {
        let found = result_of(knee_steps(300.0, 315.0));
        assert_eq!(found.outcome, Outcome::Capacity, "{}", found.message);
        let t = text(&found);
        assert!(t.contains("\ncapacity 29"), "{t}");
        assert!(t.contains("probability 90% (90% credible interval"), "{t}");
        assert!(!t.contains("capacity: capacity"), "{t}");
        let open = result_of(vec![step(1, Ramp, 100.0, 2, 200)]);
        assert!(
            text(&open).contains("\ntime-limit: the search ended"),
            "{}",
            text(&open)
        );
    }

    /// The knee chart draws the band where the steps disagreed as a box, and only then
    /// (documents of the bisecting search too).
    #[test]
    fn the_knee_chart_boxes_a_disputed_band() {
        // A 2-ms (passing) bisection step at 375/s above a failed confirmation at 350/s.
        let steps = vec![
            step(1, Ramp, 100.0, 2, 200),
            step(2, Ramp, 400.0, 50, 200),
            step(3, Bisect, 300.0, 2, 200),
            step(4, Bisect, 375.0, 2, 200),
            step(5, Confirm, 350.0, 50, 2000),
            step(6, Confirm, 300.0, 2, 2000),
        ];
        let r = result_of;
        let noisy = r(steps.clone());
        assert_eq!(noisy.disputed_per_s, Some([350.0, 375.0]));
        assert!(knee_charts(&noisy).contains("steps disagreed 350–375/s"));
        let mut steady = steps;
        steady.remove(3);
        let steady = r(steady);
        assert_eq!(steady.disputed_per_s, None);
        assert!(!knee_charts(&steady).contains("steps disagreed"));
    }
}
