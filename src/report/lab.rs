//! The lab's report: `report.md` (tables) and `index.html` (the same tables, inline SVG
//! charts, the "what to change" list), both rendered from a [`LabResult`] alone so that
//! every number comes from the run. Table cells carry `data-metric` and `data-value`
//! attributes holding the exact figure from `results.json`.

use std::fmt::Write as _;

use super::svg::{self, esc};
use crate::lab::result::{COMPARED, CellResult, GroupResult, LabResult, MeanSd};

/// Columns of the tables: metric name, heading, decimals.
const COLUMNS: [(&str, &str, usize); 14] = [
    ("first_byte_mean_ms", "first byte ms", 1),
    ("requests_per_s", "req/s", 0),
    ("handshakes_per_s", "handshakes/s", 0),
    ("resumption_rate", "resumed", 3),
    ("handshake_p50_ms", "handshake p50 ms", 3),
    ("handshake_p95_ms", "handshake p95 ms", 3),
    ("handshake_p99_ms", "handshake p99 ms", 3),
    ("request_p50_ms", "request p50 ms", 3),
    ("request_p95_ms", "request p95 ms", 3),
    ("request_p99_ms", "request p99 ms", 3),
    ("server_cpu_us_per_handshake", "server CPU µs/handshake", 0),
    ("server_rss_kib", "server RSS KiB", 0),
    ("client_cpu_us_per_handshake", "client CPU µs/handshake", 0),
    ("upload_bytes_per_s", "upload bytes/s", 0),
];

fn figure(m: &MeanSd, decimals: usize) -> String {
    if m.sd > 0.0 {
        format!("{:.*} ± {:.*}", decimals, m.mean, decimals, m.sd)
    } else {
        format!("{:.*}", decimals, m.mean)
    }
}

/// Heading of each compared metric's column.
fn versus_heading(metric: &str) -> &'static str {
    match metric {
        "server_cpu_us_per_handshake" => "server CPU/handshake vs baseline",
        "handshakes_per_s" => "handshakes/s vs baseline",
        "first_byte_mean_ms" => "time to first byte vs baseline",
        _ => "request mean vs baseline",
    }
}

fn versus_text(g: &GroupResult, c: &CellResult, metric: &str) -> String {
    let baseline = c.name == g.baseline;
    match c.vs_baseline.get(metric) {
        None if baseline && c.failed => "baseline: failed".into(),
        None if baseline => "baseline".into(),
        None if c.failed => "not compared: failed".into(),
        None if g.cells.first().is_some_and(|b| b.failed) => {
            "not compared: the baseline failed".into()
        }
        None => "–".into(),
        Some(v) => {
            let higher = COMPARED.iter().any(|(m, h)| *m == metric && *h);
            let verdict = match v.relative_change {
                Some(r) if v.significant && (r > 0.0) == higher => "significantly better *",
                Some(_) if v.significant => "significantly worse *",
                _ => "no significant difference",
            };
            format!(
                "{}: {verdict} (p = {}{})",
                v.relative_change
                    .map(|r| format!("{:+.1}%", r * 100.0))
                    .unwrap_or_else(|| "–".into()),
                crate::stats::compare::format_p(v.p),
                v.mde
                    .map(|m| format!(", MDE ±{:.1}%", m * 100.0))
                    .unwrap_or_default(),
            )
        }
    }
}

/// One line per cell with failed requests, failed cells marked.
fn failure_lines(r: &LabResult) -> Vec<String> {
    r.groups
        .iter()
        .flat_map(|g| g.cells.iter().map(move |c| (g, c)))
        .filter(|(_, c)| !c.errors.is_empty() || c.failed)
        .map(|(g, c)| {
            let failed = if c.failed {
                " — failed, not compared"
            } else {
                ""
            };
            format!("{}{failed}", failure_text(g, c))
        })
        .collect()
}

/// "GROUP/CELL: F of A requests failed (kind n, …)".
pub fn failure_text(g: &GroupResult, c: &CellResult) -> String {
    let failed: u64 = c.rounds.iter().map(|r| r.failed).sum();
    let attempted: u64 = c.rounds.iter().map(|r| r.failed + r.completed).sum();
    let kinds: Vec<String> = c.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!(
        "{}/{}: {failed} of {attempted} requests failed{}",
        g.group,
        c.name,
        if kinds.is_empty() {
            String::new()
        } else {
            format!(" ({})", kinds.join(", "))
        }
    )
}

/// The A/A tally in one sentence.
fn aa_text(r: &LabResult) -> String {
    let t = &r.aa_control;
    if t.compared == 0 {
        return "A/A controls: no A/A comparison was made in this run.".into();
    }
    let per: Vec<String> = COMPARED
        .iter()
        .filter_map(|(m, _)| {
            let c = t.metrics.get(*m)?;
            Some(format!(
                "{} {} of {}",
                metric_words(m),
                c.significant,
                c.compared
            ))
        })
        .collect();
    format!(
        "A/A controls (each group's baseline run again as its own cell and compared like any other): {} of {} comparisons came out significant at α = {} ({:.1}%; {}). Each is a false positive: this is the false-positive rate this run showed.",
        t.significant,
        t.compared,
        t.alpha,
        t.significant as f64 * 100.0 / t.compared as f64,
        per.join(", ")
    )
}

fn metric_words(m: &str) -> &'static str {
    match m {
        "server_cpu_us_per_handshake" => "server CPU per handshake",
        "handshakes_per_s" => "handshakes/s",
        "first_byte_mean_ms" => "time to first byte",
        _ => "mean request latency",
    }
}

/// The compared metrics some cell of `g` has figures for (server CPU with --target,
/// time to first byte without --link have none).
fn compared_in(g: &GroupResult) -> Vec<(&'static str, bool)> {
    COMPARED
        .into_iter()
        .filter(|(m, _)| g.cells.iter().any(|c| c.summary.contains_key(*m)))
        .collect()
}

/// The table columns some cell of `g` has figures for.
fn columns_in(g: &GroupResult) -> Vec<(&'static str, &'static str, usize)> {
    COLUMNS
        .into_iter()
        .filter(|(m, _, _)| g.cells.iter().any(|c| c.summary.contains_key(*m)))
        .collect()
}

fn header_lines(r: &LabResult) -> Vec<String> {
    let o = &r.options;
    let mut v = vec![
        format!(
            "Run {} ({:.0} s), {} mode: {} rounds of {:.2} s per configuration after {:.2} s of unrecorded warm-up, every configuration of a group once per round in a new random order; load generator: 1 thread, {} connections, a new connection per request.",
            r.started, r.duration_s, o.mode, o.rounds, o.round_s, o.warmup_s, o.connections
        ),
        format!(
            "Machine: {} cores, {}, Linux {}.",
            r.machine.cores, r.machine.cpu, r.machine.kernel
        ),
        format!("CPU pinning: {}.", r.machine.pinning.note),
        if o.null {
            "Null lab (`--null`): every configuration is its group's baseline again, so every comparison compares the same thing; anything under \"What to change\" is a false discovery.".into()
        } else {
            String::new()
        },
        match &r.slo {
            Some(slo) => format!(
                "Capacity (`--slo`): after its rounds, each configuration's highest rate of new connections/s within {slo}, found by a `tlsperf capacity` search against its own servers (steps chosen by a Bayesian sequential design until the 90% credible interval is within 20%; the generator checked at every step) — the capacity (the rate a step meets the objective at with probability 0.9), with its 90% interval in brackets, or how the search ended."
            ),
            None => String::new(),
        },
        match (&o.target, &o.link) {
            (Some(t), _) => format!("Server: {t} (external)."),
            (None, None) => "Servers: `tlsperf serve` instances on loopback, one worker thread each, ECDSA P-256 certificates unless the group says otherwise.".into(),
            (None, Some(_)) => "Servers: `tlsperf serve` instances on this machine, on the far side of the link, one worker thread each, ECDSA P-256 certificates unless the group says otherwise.".into(),
        },
    ];
    if let Some(l) = &o.link {
        v.push(format!(
            "Link: {l}. The load generator runs in a network namespace of its own, joined to the servers through an emulated path on real kernel TCP (TUN devices and a userspace delay line); time to first byte: from the start of the TCP connect to the response's first byte."
        ));
    }
    v.retain(|l| !l.is_empty());
    v
}

/// `report.md`.
pub fn markdown(r: &LabResult) -> String {
    let mut s = String::from("# tlsperf lab report\n\n");
    for l in header_lines(r) {
        let _ = writeln!(s, "{l}  ");
    }
    if r.interrupted {
        s.push_str("\n**Interrupted**: only the groups that finished are shown.\n");
    }
    s.push_str("\n## What to change\n\n");
    if r.recommendations.is_empty() {
        s.push_str("No configuration beat its group's baseline significantly (Welch p < 0.05 after Holm's adjustment over every comparison of the run) in this run.\n");
    }
    for rec in &r.recommendations {
        let _ = writeln!(s, "- {}", rec.text);
    }
    if r.groups.iter().any(|g| !g.warnings.is_empty()) {
        s.push_str("\n## Disturbed groups\n\n");
        for g in &r.groups {
            for w in &g.warnings {
                let _ = writeln!(s, "- **{}**: {w}", g.group);
            }
        }
    }
    if !r.trade_offs.is_empty() {
        s.push_str("\n## Trade-offs (faster, but weaker or costlier: not recommended)\n\n");
        for rec in &r.trade_offs {
            let _ = writeln!(s, "- {}", rec.text);
        }
    }
    s.push_str("\n## How far to trust the verdicts\n\n");
    let _ = writeln!(s, "{}", aa_text(r));
    s.push_str("\nEvery comparison states its MDE: the smallest change it would find significant with 80% power at α = 0.05, at the variance observed; \"no significant difference\" means no difference larger than about that.\n");
    let failures = failure_lines(r);
    if !failures.is_empty() {
        s.push_str("\n## Failed requests\n\n");
        for f in failures {
            let _ = writeln!(s, "- {f}");
        }
    }
    for g in &r.groups {
        let _ = writeln!(s, "\n## {} (baseline: {})\n", g.title, g.baseline);
        for w in &g.warnings {
            let _ = writeln!(s, "**Disturbed**: {w}\n");
        }
        let (columns, compared) = (columns_in(g), compared_in(g));
        let mut head = vec!["configuration".to_string()];
        let capacities = g.cells.iter().any(|c| c.capacity.is_some());
        if capacities {
            head.push("capacity at the SLO".into());
        }
        head.extend(columns.iter().map(|c| c.1.to_string()));
        head.push("% of crypto limit".into());
        head.extend(compared.iter().map(|(m, _)| versus_heading(m).to_string()));
        let _ = writeln!(s, "| {} |", head.join(" | "));
        let _ = writeln!(
            s,
            "|{}",
            std::iter::once("---|")
                .chain(std::iter::repeat_n("---:|", head.len() - 1))
                .collect::<String>()
        );
        for c in &g.cells {
            let mut row = vec![format!("{} ({})", c.name, c.label)];
            if capacities {
                row.push(crate::lab::capacity::cell_text(c));
            }
            for &(metric, _, d) in &columns {
                row.push(c.summary.get(metric).map_or("–".into(), |m| figure(m, d)));
            }
            row.push(pct(c.crypto_limit_pct));
            for &(m, _) in &compared {
                row.push(versus_text(g, c, m));
            }
            let _ = writeln!(s, "| {} |", row.join(" | "));
        }
        errors_md(&mut s, g);
    }
    limits_md(&mut s, r);
    s.push_str("\nFigures are means ± standard deviation over rounds; \"vs baseline\": the change of the mean, Welch's p and the MDE (80% power, α = 0.05); `*`: significant at p < 0.05 (Welch's t-test on every round, no outlier filter). Server CPU per handshake: the server process's user + system CPU in the round ÷ the handshakes completed in it. A cell whose requests failed (more than 1% of those attempted) is marked failed and never compared.\n");
    if !r.notes.is_empty() {
        s.push_str("\n## Notes\n\n");
        for n in &r.notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

fn pct(p: Option<f64>) -> String {
    p.map_or("–".into(), |p| format!("{p:.0}%"))
}

fn limits_md(s: &mut String, r: &LabResult) {
    if r.crypto_limits.is_empty() {
        return;
    }
    s.push_str("\n## Crypto limit of this machine (server side, per core)\n\n");
    s.push_str("The crypto a server handshake does (key exchange, handshake signature, hashing, key schedule, record protection, tickets; timed inside in-memory handshakes by `tlsperf crypto limit`), measured in this run. \"% of crypto limit\" in the tables: that crypto ÷ the server CPU actually spent per handshake.\n\n");
    s.push_str("| provider | certificate | group | TLS | full handshake crypto µs | resumed µs | full handshakes/s per core, at most |\n|---|---|---|---|---:|---:|---:|\n");
    for l in &r.crypto_limits {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.0} |",
            l.provider,
            l.cert,
            l.group,
            l.tls,
            l.full_ns / 1e3,
            l.resumed_ns / 1e3,
            l.full_per_s
        );
    }
}

fn errors_md(s: &mut String, g: &GroupResult) {
    for c in &g.cells {
        if !c.errors.is_empty() || c.failed {
            let _ = writeln!(
                s,
                "\nFailures in {}{}",
                failure_text(g, c),
                if c.failed {
                    " — failed (more than 1%): not compared"
                } else {
                    ""
                }
            );
        }
    }
}

const STYLE: &str = "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:4px 6px;text-align:right}th:first-child,td:first-child{text-align:left}th{background:#f3f3f3}.sig{font-weight:bold;color:#006400}.worse{color:#a00}.scroll{overflow-x:auto}.charts{display:flex;flex-wrap:wrap;gap:1em}svg.chart{background:#fff;border:1px solid #eee;width:49%;min-width:420px;height:auto}td .muted{font-size:11px;display:block}li{margin:.3em 0}.muted{color:#666}";

/// One `<li>` per recommendation (or trade-off), its group and cell as data attributes.
fn html_items(s: &mut String, recs: &[crate::lab::result::Recommendation]) {
    for rec in recs {
        let _ = write!(
            s,
            "<li data-group=\"{}\" data-to=\"{}\">{}</li>",
            esc(&rec.group),
            esc(&rec.to),
            esc(&rec.text)
        );
    }
}

/// `index.html`: self-contained, no scripts, readable offline.
pub fn html(r: &LabResult) -> String {
    let mut s = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>tlsperf lab report</title>",
    );
    let _ = write!(
        s,
        "<style>{STYLE}</style></head><body><h1>tlsperf lab report</h1>"
    );
    for l in header_lines(r) {
        let _ = write!(s, "<p class=\"muted\">{}</p>", esc(&l.replace('`', "")));
    }
    if r.interrupted {
        s.push_str("<p><strong>Interrupted</strong>: only the groups that finished are shown.</p>");
    }
    s.push_str("<h2 id=\"what-to-change\">What to change</h2><ul class=\"recommendations\">");
    if r.recommendations.is_empty() {
        s.push_str("<li>No configuration beat its group's baseline significantly (Welch p &lt; 0.05 after Holm's adjustment over every comparison of the run) in this run.</li>");
    }
    html_items(&mut s, &r.recommendations);
    s.push_str("</ul>");
    if r.groups.iter().any(|g| !g.warnings.is_empty()) {
        s.push_str("<h2 id=\"disturbed\">Disturbed groups</h2><ul class=\"disturbed\">");
        for g in &r.groups {
            for w in &g.warnings {
                let _ = write!(s, "<li><strong>{}</strong>: {}</li>", esc(&g.group), esc(w));
            }
        }
        s.push_str("</ul>");
    }
    if !r.trade_offs.is_empty() {
        s.push_str(
            "<h2 id=\"trade-offs\">Trade-offs (faster, but weaker or costlier: not recommended)</h2>\
             <ul class=\"trade-offs\">",
        );
        html_items(&mut s, &r.trade_offs);
        s.push_str("</ul>");
    }
    let _ = write!(
        s,
        "<h2 id=\"trust\">How far to trust the verdicts</h2><p class=\"aa\" data-compared=\"{}\" data-significant=\"{}\">{}</p><p class=\"muted\">Every comparison states its MDE: the smallest change it would find significant with 80% power at α = 0.05, at the variance observed; “no significant difference” means no difference larger than about that.</p>",
        r.aa_control.compared,
        r.aa_control.significant,
        esc(&aa_text(r))
    );
    for g in &r.groups {
        group_html(&mut s, g);
    }
    if !r.crypto_limits.is_empty() {
        s.push_str("<h2 id=\"crypto-limit\">Crypto limit of this machine (server side, per core)</h2><p class=\"muted\">The crypto a server handshake does (key exchange, handshake signature, hashing, key schedule, record protection, tickets; timed inside in-memory handshakes by tlsperf crypto limit), measured in this run. “% of crypto limit” in the tables: that crypto ÷ the server CPU actually spent per handshake.</p><table class=\"limits\"><thead><tr><th>provider</th><th>certificate</th><th>group</th><th>TLS</th><th>full handshake crypto µs</th><th>resumed µs</th><th>full handshakes/s per core, at most</th></tr></thead><tbody>");
        for l in &r.crypto_limits {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td></tr>",
                esc(&l.provider),
                esc(&l.cert),
                esc(&l.group),
                esc(&l.tls),
                l.full_ns / 1e3,
                l.resumed_ns / 1e3,
                l.full_per_s
            );
        }
        s.push_str("</tbody></table>");
    }
    s.push_str("<p class=\"muted\">Figures are means ± standard deviation over rounds; “vs baseline”: the change of the mean, Welch's p and the MDE (80% power, α = 0.05); bold: significant at p &lt; 0.05 (Welch's t-test on every round, no outlier filter). Server CPU per handshake: the server process's user + system CPU in the round ÷ the handshakes completed in it. A cell whose requests failed (more than 1% of those attempted) is marked failed and never compared. Error bars: ± one standard deviation.</p>");
    if !r.notes.is_empty() {
        s.push_str("<h2>Notes</h2><ul>");
        for n in &r.notes {
            let _ = write!(s, "<li>{}</li>", esc(n));
        }
        s.push_str("</ul>");
    }
    s.push_str("</body></html>\n");
    s
}

/// The charts a group gets, by `data-chart` kind (the HTML test counts them).
pub fn chart_kinds(g: &GroupResult) -> Vec<&'static str> {
    let mut k = vec!["handshakes-per-s", "request-cdf"];
    if g.cells.iter().any(|c| !c.handshake_resumed_hist.is_empty()) {
        k.push("handshake-histogram");
    }
    k
}

/// The CSS class of a verdict cell: `sig` (significantly better), `sig worse`, or none.
fn verdict_class(v: Option<&crate::lab::result::Versus>, higher_is_better: bool) -> &'static str {
    match v {
        Some(v) if v.significant => {
            let sign = if higher_is_better { 1.0 } else { -1.0 };
            if v.relative_change.unwrap_or(0.0) * sign > 0.0 {
                "sig"
            } else {
                "sig worse"
            }
        }
        _ => "",
    }
}

/// The group's lead table: each configuration with the compared metrics, each figure
/// with its verdict against the baseline under it (narrow enough for a laptop screen;
/// the other figures follow behind `<details>`).
fn compact_table(s: &mut String, g: &GroupResult) {
    // Metrics no cell measured (server CPU with --target) get no column.
    let compared = compared_in(g);
    let capacities = g.cells.iter().any(|c| c.capacity.is_some());
    s.push_str("<table class=\"compact\"><thead><tr><th>configuration</th>");
    if capacities {
        s.push_str("<th>capacity at the SLO</th>");
    }
    for &(m, _) in &compared {
        let heading = COLUMNS
            .iter()
            .find(|(c, _, _)| *c == m)
            .map_or(metric_words(m), |(_, h, _)| h);
        let _ = write!(s, "<th>{}</th>", esc(heading));
    }
    s.push_str("</tr></thead><tbody>");
    for c in &g.cells {
        let _ = write!(
            s,
            "<tr data-cell=\"{}\"><td>{} <span class=\"muted\">{}{}</span></td>",
            esc(&c.name),
            esc(&c.name),
            esc(&c.label),
            if c.failed {
                " <strong class=\"worse\">failed</strong>"
            } else {
                ""
            }
        );
        if capacities {
            let _ = write!(
                s,
                "<td data-metric=\"capacity_per_s\" data-value=\"{}\">{}</td>",
                c.capacity
                    .as_ref()
                    .and_then(|x| x.capacity_per_s)
                    .map_or(String::new(), |v| format!("{v}")),
                esc(&crate::lab::capacity::cell_text(c))
            );
        }
        for &(metric, higher) in &compared {
            let d = COLUMNS
                .iter()
                .find(|(m, _, _)| *m == metric)
                .map_or(3, |(_, _, d)| *d);
            let v = c.vs_baseline.get(metric);
            let class = verdict_class(v, higher);
            match c.summary.get(metric) {
                Some(m) => {
                    let _ = write!(
                        s,
                        "<td class=\"{class}\" data-metric=\"{metric}\" data-value=\"{:.*}\">{}<span class=\"muted\">{}</span></td>",
                        d,
                        m.mean,
                        esc(&figure(m, d)),
                        esc(&versus_text(g, c, metric)),
                    );
                }
                None => {
                    let _ = write!(
                        s,
                        "<td>–<span class=\"muted\">{}</span></td>",
                        esc(&versus_text(g, c, metric))
                    );
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
}

/// One group's section: its compact table, every figure (folded), its charts and its
/// failures.
fn group_html(s: &mut String, g: &GroupResult) {
    let _ = write!(
        s,
        "<section class=\"group\" data-group=\"{}\"><h2>{}</h2><p class=\"muted\">Baseline: {}</p>",
        esc(&g.group),
        esc(&g.title),
        esc(&g.baseline)
    );
    for w in &g.warnings {
        let _ = write!(s, "<p class=\"worse disturbed\">Disturbed: {}</p>", esc(w));
    }
    compact_table(s, g);
    s.push_str("<details><summary>All figures of this group</summary>");
    full_table(s, g);
    s.push_str("</details><div class=\"charts\">");
    charts(s, g);
    s.push_str("</div>");
    for c in &g.cells {
        if !c.errors.is_empty() || c.failed {
            let _ = write!(
                s,
                "<p class=\"worse\">Failures in {}{}</p>",
                esc(&failure_text(g, c)),
                if c.failed {
                    " — failed (more than 1%): not compared"
                } else {
                    ""
                }
            );
        }
    }
    s.push_str("</section>");
}

/// Every figure of every configuration of the group, and each comparison with the
/// baseline.
fn full_table(s: &mut String, g: &GroupResult) {
    // Columns no cell has a figure for (server CPU and memory with --target) are left out.
    let columns = columns_in(g);
    let compared = compared_in(g);
    s.push_str("<div class=\"scroll\"><table><thead><tr><th>configuration</th>");
    for (_, h, _) in &columns {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("<th>% of crypto limit</th>");
    for &(m, _) in &compared {
        let _ = write!(s, "<th>{}</th>", esc(versus_heading(m)));
    }
    s.push_str("</tr></thead><tbody>");
    for c in &g.cells {
        full_row(s, g, c, &columns, &compared);
    }
    s.push_str("</tbody></table></div>");
}

/// One configuration's row of [`full_table`].
fn full_row(
    s: &mut String,
    g: &GroupResult,
    c: &CellResult,
    columns: &[(&'static str, &'static str, usize)],
    compared: &[(&'static str, bool)],
) {
    let _ = write!(
        s,
        "<tr data-cell=\"{}\"{}{}><td>{} <span class=\"muted\">({})</span>{}</td>",
        esc(&c.name),
        if c.control {
            " data-control=\"true\""
        } else {
            ""
        },
        if c.failed {
            " data-failed=\"true\""
        } else {
            ""
        },
        esc(&c.name),
        esc(&c.label),
        if c.failed {
            " <strong class=\"worse\">failed</strong>"
        } else {
            ""
        }
    );
    for &(metric, _, d) in columns {
        match c.summary.get(metric) {
            Some(m) => {
                let _ = write!(
                    s,
                    "<td data-metric=\"{metric}\" data-value=\"{:.*}\">{}</td>",
                    d,
                    m.mean,
                    esc(&figure(m, d)),
                );
            }
            None => s.push_str("<td>–</td>"),
        }
    }
    match c.crypto_limit_pct {
        Some(p) => {
            let _ = write!(
                s,
                "<td data-metric=\"crypto_limit_pct\" data-value=\"{p:.0}\">{p:.0}%</td>"
            );
        }
        None => s.push_str("<td>–</td>"),
    }
    for &(metric, higher) in compared {
        let v = c.vs_baseline.get(metric);
        let class = verdict_class(v, higher);
        let data = v.map_or(String::new(), |v| {
            format!(
                " data-vs=\"{metric}\" data-p=\"{}\" data-significant=\"{}\"{}",
                v.p,
                v.significant,
                v.mde
                    .map_or(String::new(), |m| format!(" data-mde=\"{m}\""))
            )
        });
        let _ = write!(
            s,
            "<td class=\"{class}\"{data} title=\"{}\">{}</td>",
            esc(v.map_or("", |v| v.verdict.as_str())),
            esc(&versus_text(g, c, metric))
        );
    }
    s.push_str("</tr>");
}

/// The group's charts: handshakes/s, the request latency CDF and (when the group has
/// both kinds) full against resumed handshake times.
fn charts(s: &mut String, g: &GroupResult) {
    let bars: Vec<(String, f64, f64)> = g
        .cells
        .iter()
        .map(|c| {
            let m = c
                .summary
                .get("handshakes_per_s")
                .copied()
                .unwrap_or_default();
            (c.name.clone(), m.mean, m.sd)
        })
        .collect();
    s.push_str(&svg::bars(
        "handshakes-per-s",
        &format!("{}: handshakes/s (mean ± sd)", g.title),
        "handshakes/s",
        &bars,
    ));
    let cdf: Vec<(String, Vec<[f64; 2]>)> = g
        .cells
        .iter()
        .map(|c| {
            // Up to the 99th percentile: the tail would flatten the rest.
            let pts = c
                .request_cdf
                .iter()
                .copied()
                .filter(|p| p[1] <= 0.99)
                .collect();
            (c.name.clone(), pts)
        })
        .collect();
    s.push_str(&svg::lines(
        "request-cdf",
        &format!("{}: request latency CDF (to p99)", g.title),
        "ms (new connection + request)",
        "fraction",
        1.0,
        &cdf,
    ));
    if chart_kinds(g).contains(&"handshake-histogram") {
        // All the group's configurations together (their bins are shared): full
        // handshakes against resumed ones.
        let sum = |pick: fn(&CellResult) -> &Vec<[f64; 2]>| {
            let mut total: Vec<[f64; 2]> = Vec::new();
            for c in &g.cells {
                for (i, b) in pick(c).iter().enumerate() {
                    match total.get_mut(i) {
                        Some(t) => t[1] += b[1],
                        None => total.push(*b),
                    }
                }
            }
            total
        };
        let series = vec![
            ("full".to_string(), sum(|c| &c.handshake_full_hist)),
            ("resumed".to_string(), sum(|c| &c.handshake_resumed_hist)),
        ];
        s.push_str(&svg::histogram(
            "handshake-histogram",
            &format!("{}: full vs resumed handshake time", g.title),
            "ms (ClientHello to handshake complete)",
            &series,
        ));
    }
}

/// What `tlsperf lab` prints when it is done: where the report is and what to change.
pub fn summary(r: &LabResult, dir: &std::path::Path) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut s = format!(
        "tlsperf lab: {}, {} in {:.0} s{}\n\nWhat to change on this machine:\n",
        plural(r.groups.len(), "group", "groups"),
        plural(
            r.groups.iter().map(|g| g.cells.len()).sum::<usize>(),
            "configuration",
            "configurations"
        ),
        r.duration_s,
        if r.interrupted { " (interrupted)" } else { "" }
    );
    let disturbed = r.groups.iter().filter(|g| !g.warnings.is_empty()).count();
    if r.recommendations.is_empty() {
        s.push_str("  nothing beat its baseline significantly in this run");
        if disturbed > 0 {
            let _ = write!(
                s,
                ", but {} of {} ran disturbed (below): a difference may be hidden",
                plural(disturbed, "group", "groups"),
                r.groups.len()
            );
        }
        s.push('\n');
    }
    for rec in &r.recommendations {
        let _ = writeln!(s, "  - {}", rec.text);
    }
    for g in &r.groups {
        for w in &g.warnings {
            let _ = writeln!(s, "warning: group {}: {w}", g.group);
        }
    }
    if !r.trade_offs.is_empty() {
        s.push_str("  Trade-offs (faster, but weaker or costlier: not recommended):\n");
        for rec in &r.trade_offs {
            let _ = writeln!(s, "  - {}", rec.text);
        }
    }
    if let Some(slo) = &r.slo {
        let _ = writeln!(s, "\nCapacity at {slo} (new connections/s):");
        for g in &r.groups {
            for c in &g.cells {
                let _ = writeln!(
                    s,
                    "  - {} / {}: {}",
                    g.group,
                    c.name,
                    crate::lab::capacity::cell_text(c)
                );
            }
        }
    }
    if let Some(l) = &r.options.link {
        let _ = writeln!(
            s,
            "\nTime to first byte at {l} (mean over rounds, from the TCP connect):"
        );
        for g in &r.groups {
            let cells: Vec<String> = g
                .cells
                .iter()
                .filter(|c| !c.control)
                .filter_map(|c| {
                    let m = c.summary.get("first_byte_mean_ms")?;
                    Some(format!("{} {:.1} ms", c.name, m.mean))
                })
                .collect();
            if !cells.is_empty() {
                let _ = writeln!(s, "  {}: {}", g.group, cells.join(", "));
            }
        }
    }
    if let Some(c) = &r.link_counters {
        let _ = write!(s, "\n{}", c.text());
        for w in c.warnings() {
            let _ = writeln!(s, "warning: {w}");
        }
    }
    let _ = writeln!(s, "\n{}", aa_text(r));
    let _ = writeln!(s, "CPU pinning: {}.", r.machine.pinning.note);
    let failures = failure_lines(r);
    if !failures.is_empty() {
        s.push_str("\nFailed requests:\n");
        for f in failures {
            let _ = writeln!(s, "  - {f}");
        }
    }
    let _ = writeln!(
        s,
        "\nReport: {} (also report.md, results.json)",
        dir.join("index.html").display()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose one group was disturbed: said under "What to change" (beside
    /// "nothing beat its baseline"), in report.md and in the HTML report, per group.
    #[test]
    fn a_disturbed_group_is_warned_about_in_the_summary_and_the_reports() {
        let r: LabResult = serde_json::from_value(serde_json::json!({
            "schema": "tlsperf-lab/2",
            "started": "2026-12-07T00:00:00Z",
            "duration_s": 84.0,
            "machine": {"cores": 2, "cpu": "x", "kernel": "6"},
            "options": {"mode": "quick", "rounds": 8, "round_s": 0.25, "connections": 4, "target": null},
            "interrupted": false,
            "groups": [
                {"group": "tls", "title": "TLS version", "baseline": "1.3", "cells": [],
                 "warnings": ["the load generator was starved of CPU in 5 of 24 rounds"]},
                {"group": "kx", "title": "Key-exchange group", "baseline": "x25519", "cells": []}
            ],
            "recommendations": [],
            "crypto_limits": [],
            "notes": []
        }))
        .unwrap();
        let text = summary(&r, std::path::Path::new("lab"));
        assert!(
            text.contains("nothing beat its baseline significantly in this run, but 1 group of 2 ran disturbed (below): a difference may be hidden\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "warning: group tls: the load generator was starved of CPU in 5 of 24 rounds\n"
            ),
            "{text}"
        );
        assert!(!text.contains("group kx:"), "{text}");
        let md = markdown(&r);
        assert!(md.contains("## Disturbed groups"), "{md}");
        assert!(
            md.contains("**Disturbed**: the load generator was starved of CPU in 5 of 24 rounds"),
            "{md}"
        );
        let html = html(&r);
        assert!(html.contains("<h2 id=\"disturbed\">"), "{html}");
        assert!(
            html.contains("<p class=\"worse disturbed\">Disturbed: the load generator was starved"),
            "{html}"
        );
    }
}
