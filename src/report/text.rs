//! Human-readable renderings, one file per command (`text/<command>.rs`): aligned tables
//! and one-line verdicts; this file keeps the shared styles and number formats. Styling (outside
//! tables, whose widths must not count escape codes) is emitted as ANSI sequences; the
//! CLI's output stream strips them when color is off.

use anstyle::{AnsiColor, Style};
use comfy_table::{CellAlignment, Table, presets};

use std::time::Duration;

mod audit;
mod handshake;
mod load;
mod observe;
mod pki;
mod serve;
mod tickets;
mod trust;
mod verify;

pub use audit::{audit_report, budget_words, clock, event_line, series_name};
pub use handshake::handshake_run;
pub use load::load_result;
pub use observe::{last_window, observation};
pub use pki::{bundle, pki_init};
pub use serve::{serve_listening, serve_summary, serve_summary_actix};
pub use tickets::ticket_ring;
pub use trust::{problems, trust_analysis, trust_load, trust_probe, trust_trim};
pub use verify::{verify_bench, verify_report};

const BOLD: Style = Style::new().bold();
const GOOD: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)))
    .bold();
const BAD: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .bold();

fn styled(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

/// Renders a table without the padding comfy-table leaves at line ends.
fn render(t: &Table) -> String {
    t.lines()
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Formats a number with about four significant digits, without exponent for ordinary
/// magnitudes.
pub fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-4..=9).contains(&mag) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - mag).clamp(0, 9) as usize;
    format!("{x:.decimals$}")
}

/// A duration with a unit that keeps three or four significant digits.
pub fn dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{} µs", num(ns / 1e3))
    } else if ns < 1e9 {
        format!("{} ms", num(ns / 1e6))
    } else {
        format!("{} s", num(ns / 1e9))
    }
}

fn right_align(t: &mut Table, cols: &[usize]) {
    for &c in cols {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(num(12.345678), "12.35");
        assert_eq!(num(0.0012345), "0.001234");
        assert_eq!(num(123456.7), "123457");
        assert_eq!(num(-6.014952), "-6.015");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.5e-7), "1.500e-7");
    }
}
