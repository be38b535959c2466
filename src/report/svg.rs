//! Small self-contained SVG charts for the lab's HTML report: bars with error bars, line
//! charts (CDFs) and histograms. No scripts, no external resources: the page reads
//! offline. Every chart is an `<svg class="chart" data-chart="…">` with a `<title>`.

use std::fmt::Write as _;

/// Colours of series, in order (colour-blind friendly).
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 80.0;

/// Escapes text for XML content and attributes.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The colour of series `i`.
pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// A round axis maximum at or above `x`.
fn nice_max(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= x {
            return m * p;
        }
    }
    10.0 * p
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn open(s: &mut String, kind: &str, title: &str) {
    let _ = write!(
        s,
        r#"<svg class="chart" data-chart="{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img"><title>{t}</title><text x="{x}" y="18" font-size="13" text-anchor="middle" font-weight="bold">{t}</text>"#,
        t = esc(title),
        x = W / 2.0
    );
}

fn y_axis(s: &mut String, max: f64, label: &str) {
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=4 {
        let v = max * f64::from(i) / 4.0;
        let y = TOP + plot_h * (1.0 - f64::from(i) / 4.0);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end">{v}</text>"##,
            x2 = W - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            v = fmt_tick(v)
        );
    }
    let _ = write!(
        s,
        r#"<text x="14" y="{y}" font-size="11" text-anchor="middle" transform="rotate(-90 14 {y})">{l}</text>"#,
        y = TOP + plot_h / 2.0,
        l = esc(label)
    );
}

/// Bars with ±error whiskers, one per label.
pub fn bars(kind: &str, title: &str, y_label: &str, items: &[(String, f64, f64)]) -> String {
    let mut s = String::new();
    open(&mut s, kind, title);
    let max = nice_max(items.iter().map(|(_, m, e)| m + e).fold(0.0, f64::max));
    y_axis(&mut s, max, y_label);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let n = items.len().max(1) as f64;
    let slot = plot_w / n;
    for (i, (label, mean, err)) in items.iter().enumerate() {
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let w = slot * 0.7;
        let h = plot_h * (mean / max).clamp(0.0, 1.0);
        let y = TOP + plot_h - h;
        let cx = x + w / 2.0;
        let top = TOP + plot_h * (1.0 - ((mean + err) / max).clamp(0.0, 1.0));
        let bot = TOP + plot_h * (1.0 - ((mean - err).max(0.0) / max).clamp(0.0, 1.0));
        let _ = write!(
            s,
            r##"<rect class="bar" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{l}: {m} ± {e}</title></rect><line class="err" x1="{cx:.1}" x2="{cx:.1}" y1="{top:.1}" y2="{bot:.1}" stroke="#333" stroke-width="1.5"/><line x1="{a:.1}" x2="{b:.1}" y1="{top:.1}" y2="{top:.1}" stroke="#333"/><line x1="{a:.1}" x2="{b:.1}" y1="{bot:.1}" y2="{bot:.1}" stroke="#333"/><text x="{cx:.1}" y="{ly:.1}" font-size="11" text-anchor="end" transform="rotate(-25 {cx:.1} {ly:.1})">{l}</text>"##,
            c = colour(i),
            l = esc(label),
            m = fmt_tick(*mean),
            e = fmt_tick(*err),
            a = cx - 5.0,
            b = cx + 5.0,
            ly = TOP + plot_h + 14.0,
        );
    }
    s.push_str("</svg>");
    s
}

/// Lines through `(x, y)` points, one per series, with a legend; y in 0..=y_max.
pub fn lines(
    kind: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    y_max: f64,
    series: &[(String, Vec<[f64; 2]>)],
) -> String {
    let mut s = String::new();
    open(&mut s, kind, title);
    y_axis(&mut s, y_max, y_label);
    let x_max = nice_max(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|q| q[0]))
            .fold(0.0, f64::max),
    );
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=4 {
        let v = x_max * f64::from(i) / 4.0;
        let x = LEFT + plot_w * f64::from(i) / 4.0;
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{y}" font-size="11" text-anchor="middle">{v}</text>"#,
            y = TOP + plot_h + 16.0,
            v = fmt_tick(v)
        );
    }
    let _ = write!(
        s,
        r#"<text x="{x}" y="{y}" font-size="11" text-anchor="middle">{l}</text>"#,
        x = LEFT + plot_w / 2.0,
        y = TOP + plot_h + 30.0,
        l = esc(x_label)
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .map(|p| {
                format!(
                    "{:.1},{:.1}",
                    LEFT + plot_w * (p[0] / x_max).clamp(0.0, 1.0),
                    TOP + plot_h * (1.0 - (p[1] / y_max).clamp(0.0, 1.0))
                )
            })
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="series" fill="none" stroke="{c}" stroke-width="2" points="{p}"><title>{n}</title></polyline>"#,
            c = colour(i),
            p = path.join(" "),
            n = esc(name)
        );
        legend(&mut s, i, name);
    }
    s.push_str("</svg>");
    s
}

fn legend(s: &mut String, i: usize, name: &str) {
    let x = LEFT + (i % 3) as f64 * 190.0;
    let y = H - 18.0 + if i >= 3 { 14.0 } else { 0.0 };
    let _ = write!(
        s,
        r#"<rect x="{x:.1}" y="{ry:.1}" width="10" height="10" fill="{c}"/><text x="{tx:.1}" y="{y:.1}" font-size="11">{n}</text>"#,
        ry = y - 9.0,
        c = colour(i),
        tx = x + 14.0,
        n = esc(name)
    );
}

/// Side-by-side histogram bars of several series over the same bins
/// (`[bin start, count]`).
pub fn histogram(
    kind: &str,
    title: &str,
    x_label: &str,
    series: &[(String, Vec<[f64; 2]>)],
) -> String {
    let mut s = String::new();
    open(&mut s, kind, title);
    let max = nice_max(
        series
            .iter()
            .flat_map(|(_, b)| b.iter().map(|p| p[1]))
            .fold(0.0, f64::max),
    );
    y_axis(&mut s, max, "handshakes");
    let bins = series
        .iter()
        .map(|(_, b)| b.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / bins as f64;
    let k = series.len().max(1) as f64;
    for (si, (name, b)) in series.iter().enumerate() {
        for (bi, p) in b.iter().enumerate() {
            let h = plot_h * (p[1] / max).clamp(0.0, 1.0);
            let w = slot / k;
            let x = LEFT + slot * bi as f64 + w * si as f64;
            let _ = write!(
                s,
                r#"<rect class="bin" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{c}"><title>{n}: {cnt} from {from} ms</title></rect>"#,
                y = TOP + plot_h - h,
                c = colour(si),
                n = esc(name),
                cnt = p[1],
                from = fmt_tick(p[0])
            );
        }
        legend(&mut s, si, name);
    }
    if let Some((_, b)) = series.iter().find(|(_, b)| !b.is_empty()) {
        for (i, p) in b.iter().enumerate().step_by((bins / 5).max(1)) {
            let _ = write!(
                s,
                r#"<text x="{x:.1}" y="{y}" font-size="11" text-anchor="middle">{v}</text>"#,
                x = LEFT + slot * i as f64,
                y = TOP + plot_h + 16.0,
                v = fmt_tick(p[0])
            );
        }
    }
    let _ = write!(
        s,
        r#"<text x="{x}" y="{y}" font-size="11" text-anchor="middle">{l}</text>"#,
        x = LEFT + plot_w / 2.0,
        y = TOP + plot_h + 30.0,
        l = esc(x_label)
    );
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_well_formed_and_escaped() {
        let b = bars(
            "bars",
            "a <b> & c",
            "req/s",
            &[("x".into(), 10.0, 1.0), ("y\"".into(), 20.0, 0.0)],
        );
        assert!(b.starts_with("<svg class=\"chart\" data-chart=\"bars\""));
        assert!(b.ends_with("</svg>"));
        assert!(b.contains("a &lt;b&gt; &amp; c"));
        assert!(b.contains("y&quot;"));
        assert_eq!(b.matches("class=\"bar\"").count(), 2);
        let l = lines(
            "cdf",
            "t",
            "ms",
            "fraction",
            1.0,
            &[("s".into(), vec![[0.0, 0.0], [2.0, 1.0]])],
        );
        assert!(l.contains("<polyline"));
        let h = histogram(
            "hist",
            "t",
            "ms",
            &[("full".into(), vec![[0.0, 3.0], [1.0, 0.0]])],
        );
        assert_eq!(h.matches("class=\"bin\"").count(), 2);
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(2300.0), 2500.0);
    }
}
