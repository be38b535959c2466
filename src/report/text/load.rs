//! `load` (and `merge`): throughput, latency percentiles, phases and failures.

use super::{BAD, BOLD, num, render, right_align, styled, table};
use crate::load::LoadResult;

/// `tlsperf load` (and `merge`).
pub fn load_result(r: &LoadResult) -> String {
    let mut s = format!("{}\n\n", styled(BOLD, &heading(r)));
    s += &counts(r);
    s.push('\n');
    s += &latency_table(r);
    s.push('\n');
    s += &generator_delays(r);
    s += &errors(r);
    s += &cpu(r);
    if let Some(c) = &r.link_counters {
        s += &c.text();
    }
    for w in &r.warnings {
        s += &format!("{} {w}\n", styled(BAD, "warning:"));
    }
    s
}

/// The title: target, length, machines.
fn heading(r: &LoadResult) -> String {
    format!(
        "Load on {}{}: {:.2} s{}{}",
        r.target,
        match r.transport.as_str() {
            "quic" => " (HTTP/3 over QUIC)",
            "mixed" => " (TCP and QUIC runs merged)",
            _ => "",
        },
        r.duration_s,
        if r.machines > 1 {
            format!(", {} machines", r.machines)
        } else {
            String::new()
        },
        if r.interrupted {
            " (interrupted: partial result)"
        } else {
            ""
        }
    )
}

/// Requests, bodies, handshakes (their kinds, 0-RTT, chains verified) and statuses, a
/// line each.
fn counts(r: &LoadResult) -> String {
    let unsent = match r.requests.unsent {
        0 => String::new(),
        n => format!(", {n} due but never sent"),
    };
    let mut s = format!(
        "requests: {} completed, {} failed{unsent} — {} req/s\n",
        r.requests.completed,
        r.requests.failed,
        num(r.requests.per_second),
    );
    s += &format!(
        "bodies: received {} bytes, goodput {}",
        r.body_bytes,
        byte_rate(r.goodput.down_bytes_per_s)
    );
    if r.upload_bytes > 0 {
        s += &format!(
            "; sent {} bytes (POST), goodput {}",
            r.upload_bytes,
            byte_rate(r.goodput.up_bytes_per_s)
        );
    }
    s += "\n";
    let kinds: Vec<String> = r
        .handshakes
        .kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    s += &format!(
        "handshakes: {} ({}) — {} /s; resumption rate {:.1}%\n",
        r.handshakes.total,
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        },
        num(r.handshakes.per_second),
        r.handshakes.resumption_rate * 100.0
    );
    if !r.handshakes.early_data.is_empty() {
        let e: Vec<String> = r
            .handshakes
            .early_data
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s += &format!("0-RTT requests: {}\n", e.join(", "));
    }
    if !r.handshakes.quic.is_empty() {
        let e: Vec<String> = r
            .handshakes
            .quic
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s += &format!("QUIC: {}\n", e.join(", "));
    }
    if r.handshakes.chains_from_cache > 0 {
        s += &format!(
            "certificate chains: {} verified in full, {} accepted from the verdict cache (same chain and name; --no-verify-cache verifies each)\n",
            r.handshakes.chains_verified, r.handshakes.chains_from_cache
        );
    }
    let status: Vec<String> = r.status.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    if !status.is_empty() {
        s += &format!("status: {}\n", status.join(", "));
    }
    s
}

/// The latency percentiles (ms) of requests, handshakes and phases.
fn latency_table(r: &LoadResult) -> String {
    let ms = |ns: u64| format!("{:.3}", ns as f64 / 1e6);
    let mut t = table(&[
        "latency (ms)",
        "count",
        "p50",
        "p90",
        "p95",
        "p99",
        "p99.9",
        "max",
    ]);
    let mut row = |name: &str, d: &crate::load::result::Dist| {
        let q = &d.quantiles;
        t.add_row(vec![
            name.to_string(),
            q.count.to_string(),
            ms(q.p50_ns),
            ms(q.p90_ns),
            ms(q.p95_ns),
            ms(q.p99_ns),
            ms(q.p999_ns),
            ms(q.max_ns),
        ]);
    };
    row("request", &r.latency);
    if let Some(d) = &r.latency_corrected {
        row("request (from intended send)", d);
    }
    if let Some(d) = &r.handshake_full {
        row("TLS handshake, full", d);
    }
    if let Some(d) = &r.handshake_resumed {
        row("TLS handshake, resumed", d);
    }
    for p in crate::client::Phase::ALL {
        if let Some(d) = r.phases.get(p.name()) {
            row(&format!("  phase {}", p.name()), d);
        }
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6]);
    render(&t)
}

/// The generator's own delays, in microseconds: `what (how, N things): p50 … µs`.
fn generator_delays(r: &LoadResult) -> String {
    let own = |what: &str, d: &crate::stats::histogram::Dist| {
        let q = &d.quantiles;
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1e3);
        format!(
            "{what}: p50 {} µs, p99 {} µs, max {} µs\n",
            us(q.p50_ns),
            us(q.p99_ns),
            us(q.max_ns)
        )
    };
    let mut s = String::new();
    if let Some(d) = &r.send_lateness {
        s += &own(
            &format!(
                "generator send lateness (actual − intended send instant, {} requests)",
                d.quantiles.count
            ),
            d,
        );
    }
    if let Some(d) = &r.client_wakeup {
        s += &own(
            &format!(
                "generator wake-up delay (response's last byte in the kernel → tlsperf read it; in no latency, {} responses)",
                d.quantiles.count
            ),
            d,
        );
    }
    s
}

/// The errors by kind, with an example of each (nothing without errors).
fn errors(r: &LoadResult) -> String {
    if r.errors.is_empty() {
        return String::new();
    }
    let mut s = format!("\n{}\n", styled(BAD, "errors:"));
    for (k, n) in &r.errors {
        s += &format!(
            "  {k}: {n} (e.g. {})\n",
            r.error_examples.get(k).map(String::as_str).unwrap_or("")
        );
    }
    s
}

/// The CPU of the generator and, with `--server-pid`, of the server.
fn cpu(r: &LoadResult) -> String {
    // CPU per request always; per handshake only when every request opened its own
    // connection (finish_rates leaves it out otherwise).
    let per = |req: Option<f64>, hs: Option<f64>| {
        let mut p = String::new();
        if let Some(c) = req {
            p += &format!(", {c:.1} µs per request");
        }
        if let Some(c) = hs {
            p += &format!(", {c:.1} µs per handshake");
        }
        p
    };
    let g = &r.generator;
    // The pacer's spin before send instants is waiting, not work: said apart.
    let spin = g
        .pacing_spin_s
        .filter(|&x| x >= 0.001)
        .map_or(String::new(), |x| {
            format!(", of which {x:.3} s the pacer's spin before send instants")
        });
    let mut s = format!(
        "\ngenerator: {:.3} CPU s on {} threads{spin} ({:.0}% busy with work){}\n",
        g.cpu_seconds,
        g.threads,
        g.utilization * 100.0,
        per(g.cpu_us_per_request, g.cpu_us_per_handshake)
    );
    if let Some(sv) = &r.server {
        s += &format!(
            "server (pid {} and its descendants: {} process{}): {:.3} CPU s{}; resident memory (summed over the processes) max {} KiB, end {} KiB\n",
            sv.pid,
            sv.processes,
            if sv.processes == 1 { "" } else { "es" },
            sv.cpu_seconds,
            per(sv.cpu_us_per_request, sv.cpu_us_per_handshake),
            sv.rss_max_kib,
            sv.rss_end_kib
        );
    }
    s
}

/// Bytes per second, with the bit rate a network is sized in: `1.25 MB/s (10.0 Mbit/s)`.
fn byte_rate(bytes_per_s: f64) -> String {
    let (v, unit) = match bytes_per_s {
        b if b >= 1e9 => (b / 1e9, "GB/s"),
        b if b >= 1e6 => (b / 1e6, "MB/s"),
        b if b >= 1e3 => (b / 1e3, "kB/s"),
        b => (b, "B/s"),
    };
    let bits = bytes_per_s * 8.0;
    let (bv, bunit) = match bits {
        b if b >= 1e9 => (b / 1e9, "Gbit/s"),
        b if b >= 1e6 => (b / 1e6, "Mbit/s"),
        b if b >= 1e3 => (b / 1e3, "kbit/s"),
        b => (b, "bit/s"),
    };
    format!("{v:.3} {unit} ({bv:.3} {bunit})")
}
