//! `tlsperf compare` as text, for every kind of input: a heading, one aligned table per
//! section of rows (crypto rows in time per operation and operations per second), the
//! statistics behind each verdict when there are only one or two rows (always for sample
//! files), a tally, the rows one input has alone, and the warnings.

use anstyle::{AnsiColor, Color, Style};
use comfy_table::CellAlignment;

use super::crypto::{duration_ns, rate, render, table};
use super::text::num;
use crate::compare::{CompareDocument, describe};
use crate::stats::compare::format_p;
use crate::stats::rows::{Outcome, RowComparison, RowSide};

/// Rows at most this many get the statistics behind their verdict printed.
const DETAILED: usize = 2;

/// The whole comparison.
pub fn compare(c: &CompareDocument) -> String {
    if c.kind == crate::capacity::compare::KIND {
        return super::capacity::comparison(c);
    }
    let filter = if c.filter {
        "after Tukey's 1.5×IQR filter"
    } else {
        "all rounds, no filter"
    };
    let file = |f: &crate::compare::FileInfo| match &f.schema {
        Some(s) => format!("{} ({s})", f.path),
        None => f.path.clone(),
    };
    let samples = if c.kind == "samples" {
        "the samples"
    } else {
        "each row's rounds"
    };
    let rows = &c.compared.rows;
    let method = if !rows.is_empty() && rows.iter().all(|r| r.outcome == Outcome::MediansOnly) {
        // No rounds on either side (e.g. observations): there is nothing to test.
        "no rounds to test: each row's figures as a ratio B ÷ A".to_string()
    } else {
        format!("Welch's t-test on {samples} ({filter}), α = {}", c.alpha)
    };
    let mut s = format!(
        "{}s compared, B against A: {method}\nA: {}\nB: {}\n",
        describe(c.kind),
        file(&c.a),
        file(&c.b)
    );
    let labelled = rows.iter().any(|r| !r.label.is_empty());
    if labelled {
        for section in &c.compared.sections {
            let in_section: Vec<&RowComparison> =
                rows.iter().filter(|r| r.section == section.name).collect();
            if in_section.is_empty() {
                continue;
            }
            if !section.title.is_empty() {
                s += &format!("\n{}\n", section.title);
            }
            s += &format!("\n{}\n", section_table(&in_section));
        }
    }
    if rows.len() <= DETAILED {
        for r in rows.iter().filter(|r| r.welch.is_some()) {
            s += "\n";
            s += &detail(r);
        }
    }
    if labelled {
        s += &tally(c);
    }
    for (name, list) in [("A", &c.compared.only_in_a), ("B", &c.compared.only_in_b)] {
        if !list.is_empty() {
            let labels: Vec<&str> = list.iter().map(|u| u.label.as_str()).collect();
            s += &format!("only in {name}: {}\n", labels.join("; "));
        }
    }
    for r in rows.iter().filter(|r| r.outcome == Outcome::Untestable) {
        s += &format!("untestable: {}: {}\n", r.label, r.verdict);
    }
    for w in &c.compared.warnings {
        s += &format!("warning: {w}\n");
    }
    s
}

/// `N rows in both: B significantly better in …`.
fn tally(c: &CompareDocument) -> String {
    let count =
        |o: &dyn Fn(Outcome) -> bool| c.compared.rows.iter().filter(|r| o(r.outcome)).count();
    let better = count(&|o| o.better() == Some(true));
    let worse = count(&|o| o.better() == Some(false));
    let same = count(&|o| o == Outcome::NoDifference);
    let not_tested = c.compared.rows.len() - better - worse - same;
    format!(
        "\n{} in both: B significantly better in {better}, significantly worse in {worse}, \
         no significant difference in {same}{}\n",
        match c.compared.rows.len() {
            1 => "1 row".to_string(),
            n => format!("{n} rows"),
        },
        if not_tested > 0 {
            format!(", not tested in {not_tested}")
        } else {
            String::new()
        }
    )
}

/// The column heading of an identity field.
fn heading(field: &str) -> &str {
    match field {
        "alg" => "algorithm",
        "tls" => "TLS",
        "name" => "operation",
        other => other,
    }
}

/// The short verdict of a row, B against A.
fn short_verdict(r: &RowComparison) -> String {
    match r.outcome {
        Outcome::Faster => "significantly faster".into(),
        Outcome::Slower => "significantly slower".into(),
        Outcome::Higher => "significantly higher (better)".into(),
        Outcome::Lower => "significantly lower (worse)".into(),
        Outcome::NoDifference => "no significant difference".into(),
        Outcome::TooFewRounds => format!("too few rounds (A {}, B {})", r.a.rounds, r.b.rounds),
        Outcome::MediansOnly => "medians only (no rounds)".into(),
        Outcome::Untestable => "untestable (see below)".into(),
    }
}

/// One section's rows. Times per operation (ns/op) also show operations per second, and
/// their ratio; other units show the medians and how many times better B is.
fn section_table(rows: &[&RowComparison]) -> String {
    let first = rows[0];
    let per_op = rows.iter().all(|r| r.unit == "ns/op");
    let mut header: Vec<&str> = first.identity.0.iter().map(|(k, _)| heading(k)).collect();
    let id_cols = header.len();
    if per_op {
        header.extend(["A time/op", "B time/op", "A ops/s", "B ops/s", "B/A ops/s"]);
    } else {
        header.extend(["unit", "A median", "B median", "B better ×"]);
    }
    header.extend(["p", "verdict"]);
    let mut t = table(&header);
    let or_dash = |x: Option<String>| x.unwrap_or_else(|| "-".into());
    for r in rows {
        let mut cells: Vec<String> = r.identity.0.iter().map(|(_, v)| v.clone()).collect();
        let ratio = or_dash(r.ratio.map(|x| format!("{x:.3}×")));
        if per_op {
            let ops = |side: &RowSide| side.median.filter(|n| *n > 0.0).map(|n| rate(1e9 / n));
            cells.extend([
                or_dash(r.a.median.map(duration_ns)),
                or_dash(r.b.median.map(duration_ns)),
                or_dash(ops(&r.a)),
                or_dash(ops(&r.b)),
                ratio,
            ]);
        } else {
            cells.extend([
                r.unit.clone(),
                or_dash(r.a.median.map(num)),
                or_dash(r.b.median.map(num)),
                ratio,
            ]);
        }
        cells.extend([or_dash(r.p.map(format_p)), short_verdict(r)]);
        t.add_row(cells);
    }
    // Right-align the figures; the verdict (last) stays left-aligned.
    let verdict_col = t.column_count() - 1;
    for col in id_cols..verdict_col {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    render(&mut t, verdict_col + 1)
}

/// The statistics behind one tested row's verdict: both sides' summaries, the filter,
/// the difference with its confidence interval, Welch's t, df and p, the verdict.
fn detail(r: &RowComparison) -> String {
    let (Some(w), Some(sa), Some(sb)) = (&r.welch, &r.a.summary, &r.b.summary) else {
        return String::new();
    };
    let mut t = table(&["", "A", "B"]);
    t.add_row(vec!["n".to_string(), sa.n.to_string(), sb.n.to_string()]);
    for (name, a, b) in [
        ("median", sa.median, sb.median),
        ("mean", sa.mean, sb.mean),
        ("stddev", sa.stddev, sb.stddev),
        ("min", sa.min, sb.min),
        ("max", sa.max, sb.max),
    ] {
        t.add_row(vec![name.to_string(), num(a), num(b)]);
    }
    let dropped = |s: &RowSide| match s.outliers_dropped {
        Some(n) => format!("{n} of {}", s.rounds),
        None => "filter off".into(),
    };
    t.add_row(vec![
        "IQR outliers dropped".into(),
        dropped(&r.a),
        dropped(&r.b),
    ]);
    let mut out = String::new();
    match (r.label.is_empty(), r.unit.is_empty()) {
        (true, true) => {}
        (true, false) => out += &format!("({})\n", r.unit),
        (false, true) => out += &format!("{}\n", r.label),
        (false, false) => out += &format!("{} ({})\n", r.label, r.unit),
    }
    out += &render(&mut t, 1);
    out.push('\n');
    let rel = r
        .relative_change
        .map(|x| format!(" ({:+.1}%)", x * 100.0))
        .unwrap_or_default();
    out += &format!(
        "\nmean B − mean A = {}{rel}, {:.0}% CI [{}, {}]\n",
        num(w.diff),
        w.confidence * 100.0,
        num(w.ci_low),
        num(w.ci_high)
    );
    out += &format!(
        "Welch's t-test: t = {}, df = {}, p = {}\n",
        num(w.t),
        num(w.df),
        format_p(w.p)
    );
    let style = match r.outcome.better() {
        None => Style::new().fg_color(Some(Color::Ansi(AnsiColor::Yellow))),
        Some(true) => Style::new()
            .fg_color(Some(Color::Ansi(AnsiColor::Green)))
            .bold(),
        Some(false) => Style::new()
            .fg_color(Some(Color::Ansi(AnsiColor::Red)))
            .bold(),
    };
    out += &format!("{style}{}{style:#}\n", r.verdict);
    out
}
