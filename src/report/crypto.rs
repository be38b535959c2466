//! Human-readable renderings of `tlsperf crypto` results: one aligned table per command,
//! figures as medians of rounds with their spread.

use comfy_table::{CellAlignment, Table, presets};

use super::text::num;
use crate::crypto::Measurement;
use crate::crypto::in_memory::HandshakeReport;
use crate::crypto::kx::KxReport;
use crate::crypto::limit::LimitReport;
use crate::crypto::sign::SignReport;

/// A borderless table with `header`.
pub(super) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

/// `t` as text, columns from `right_from` on right-aligned, without trailing padding.
pub(super) fn render(t: &mut Table, right_from: usize) -> String {
    let cols = t.column_count();
    for col in right_from..cols {
        if let Some(c) = t.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.lines()
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Formats nanoseconds with a unit that keeps about four significant digits.
pub fn duration_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return format!("{ns}");
    }
    if ns >= 1e6 {
        format!("{} ms", num(ns / 1e6))
    } else if ns >= 1e3 {
        format!("{} µs", num(ns / 1e3))
    } else {
        format!("{} ns", num(ns))
    }
}

/// Operations per second, rounded to units (or three decimals below ten).
pub fn rate(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// The spread of a measurement: kept rounds' min–max relative to the median.
pub fn spread(m: &Measurement) -> String {
    if !m.ns_per_op.is_finite() || m.ns_per_op == 0.0 {
        return "-".into();
    }
    let lo = (m.min_ns / m.ns_per_op - 1.0) * 100.0;
    let hi = (m.max_ns / m.ns_per_op - 1.0) * 100.0;
    format!("{lo:+.1}% / {hi:+.1}%")
}

/// Bytes per operation, or "-" when the allocator did not count.
pub fn bytes(x: Option<f64>) -> String {
    match x {
        Some(b) => format!("{b:.0}"),
        None => "-".into(),
    }
}

/// Outlier rounds dropped, as "k/n".
pub fn outliers(m: &Measurement) -> String {
    format!("{}/{}", m.outlier_rounds, m.rounds_ns.len())
}

/// The `crypto sign` table.
pub fn sign(r: &SignReport) -> String {
    let mut t = table(&[
        "algorithm",
        "implementation",
        "op",
        "ops/s",
        "time/op",
        "min / max",
        "outliers",
        "bytes/op",
        "allocs/op",
    ]);
    for row in &r.rows {
        let m = &row.m;
        t.add_row(vec![
            row.alg.name().to_string(),
            row.implementation.name().to_string(),
            match row.op {
                crate::crypto::sign::SignOp::Sign => "sign".to_string(),
                crate::crypto::sign::SignOp::Verify => "verify".to_string(),
            },
            rate(m.ops_per_sec),
            duration_ns(m.ns_per_op),
            spread(m),
            outliers(m),
            bytes(m.bytes_per_op),
            m.allocs_per_op
                .map(|a| format!("{a:.1}"))
                .unwrap_or("-".into()),
        ]);
    }
    format!(
        "Signatures over a {}-byte message: median of {} rounds ({} s per row), wall clock; \
         verify parses the public key each time; min / max of the rounds kept by the 1.5×IQR filter\n\n{}\n",
        r.message_len,
        r.rounds,
        r.seconds,
        render(&mut t, 3)
    )
}

/// The `crypto kx` table.
pub fn kx(r: &KxReport) -> String {
    let mut t = table(&[
        "group",
        "provider",
        "side",
        "share",
        "ops/s",
        "time/op",
        "min / max",
        "outliers",
        "bytes/op",
    ]);
    for row in &r.rows {
        let m = &row.m;
        t.add_row(vec![
            row.group.name().to_string(),
            row.provider.name().to_string(),
            row.side.name().to_string(),
            format!("{} B", row.share_len),
            rate(m.ops_per_sec),
            duration_ns(m.ns_per_op),
            spread(m),
            outliers(m),
            bytes(m.bytes_per_op),
        ]);
    }
    let mut s = format!(
        "Key exchange through rustls's groups: client = start + complete, server = \
         start_and_complete; median of {} rounds ({} s per row), wall clock\n\n{}\n",
        r.rounds,
        r.seconds,
        render(&mut t, 3)
    );
    if !r.unavailable.is_empty() {
        s += &format!("not available: {}\n", r.unavailable.join(", "));
    }
    s
}

/// The `crypto handshake` table.
pub fn handshake(r: &HandshakeReport) -> String {
    let mut t = table(&[
        "provider",
        "TLS",
        "cert",
        "kind",
        "client hs/s",
        "client time",
        "client min / max",
        "server hs/s",
        "server time",
        "server min / max",
        "bytes/hs",
    ]);
    for row in &r.rows {
        t.add_row(vec![
            row.provider.name().to_string(),
            row.tls.name().to_string(),
            row.cert.name().to_string(),
            row.kind.name().to_string(),
            rate(row.client.ops_per_sec),
            duration_ns(row.client.ns_per_op),
            spread(&row.client),
            rate(row.server.ops_per_sec),
            duration_ns(row.server.ns_per_op),
            spread(&row.server),
            bytes(row.bytes_per_handshake),
        ]);
    }
    let group = r
        .rows
        .first()
        .and_then(|row| row.negotiated.group.clone())
        .unwrap_or_else(|| "-".into());
    format!(
        "In-memory handshakes (no sockets), each side's time charged as rustls-bench does; \
         group {group}, AES-128-GCM-SHA256 suites; median of {} rounds ({} s per row)\n\n{}\n",
        r.rounds,
        r.seconds,
        render(&mut t, 4)
    )
}

/// The `crypto limit` tables: the operations, then the limit per kind and side.
pub fn limit(r: &LimitReport) -> String {
    let mut inside = table(&["handshake", "side", "crypto", "calls", "time/hs", "share"]);
    for ih in &r.in_handshake {
        for (i, c) in ih.categories.iter().enumerate() {
            let (kind, side) = if i == 0 {
                (ih.kind.name(), ih.side.name())
            } else {
                ("", "")
            };
            inside.add_row(vec![
                kind.to_string(),
                side.to_string(),
                c.category.name().to_string(),
                c.calls.to_string(),
                duration_ns(c.ns),
                percent(c.ns, ih.crypto_ns),
            ]);
        }
    }
    let mut ops = table(&[
        "operation",
        "side",
        "per full",
        "per resumed",
        "time/op",
        "min / max",
    ]);
    for o in &r.operations {
        ops.add_row(vec![
            o.name.clone(),
            o.side.name().to_string(),
            o.per_full.to_string(),
            o.per_resumed.to_string(),
            duration_ns(o.m.ns_per_op),
            spread(&o.m),
        ]);
    }
    let mut lim = table(&[
        "handshake",
        "side",
        "crypto/hs",
        "public-key/hs",
        "same in a tight loop",
        "crypto limit hs/s",
        "measured hs/s",
        "% of crypto limit",
    ]);
    for l in &r.limits {
        lim.add_row(vec![
            l.kind.name().to_string(),
            l.side.name().to_string(),
            duration_ns(l.crypto_ns),
            duration_ns(l.public_key_ns),
            duration_ns(l.tight_loop_public_key_ns),
            l.limit_per_sec.map(rate).unwrap_or_else(|| "none".into()),
            rate(l.measured_per_sec),
            l.percent_of_limit
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    format!(
        "Crypto limit of a {} handshake, {} chain, group {}, {} (per core; median of {} \
         rounds, {} s each item)\n\n\
         Crypto inside handshakes (every call into the provider timed; {:.0} ns of clock \
         reads subtracted per call):\n\n{}\n\n\
         Public-key operations alone, in a tight loop:\n\n{}\n\n\
         The limit (1 s ÷ crypto per handshake) against the measured in-memory rate \
         (plain provider, run in turn with the timed one):\n\n{}\n",
        r.tls,
        r.cert,
        r.group,
        r.provider,
        r.rounds,
        r.seconds,
        r.clock_bias_ns,
        render(&mut inside, 3),
        render(&mut ops, 2),
        render(&mut lim, 2)
    )
}

fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0}%", part / whole * 100.0)
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(duration_ns(512.0), "512.0 ns");
        assert_eq!(duration_ns(19_500.0), "19.50 µs");
        assert_eq!(duration_ns(2_500_000.0), "2.500 ms");
        assert_eq!(rate(51234.4), "51234");
        assert_eq!(bytes(None), "-");
    }
}
