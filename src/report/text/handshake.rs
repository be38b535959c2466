//! `handshake`: phases, negotiated parameters and the chain.

use super::{BAD, BOLD, render, right_align, styled, table};

/// `tlsperf handshake`.
pub fn handshake_run(r: &crate::handshake::HandshakeRun) -> String {
    use crate::client::Phase;
    let n = &r.negotiated;
    let mut s = format!(
        "{}\n\n",
        styled(
            BOLD,
            &match r.transport {
                "quic" => format!("Handshakes with {} over QUIC (HTTP/3)", r.target),
                _ => format!("Handshakes with {}", r.target),
            }
        )
    );
    s += &format!(
        "negotiated: {} {} group {} signature {} ALPN {}\n",
        n.version,
        n.cipher_suite,
        n.group.as_deref().unwrap_or("-"),
        n.signature_scheme.as_deref().unwrap_or("-"),
        n.alpn.as_deref().unwrap_or("-")
    );
    s += &format!(
        "OCSP: {}\nroots: {} (loaded in {:.3} ms, before the first connection)\ncrypto provider first use: {:.3} ms (before the first connection)\nClientHello: {} bytes\n\n",
        match n.ocsp_stapled_bytes {
            Some(b) => format!("stapled ({b} bytes)"),
            None => "not stapled".into(),
        },
        r.roots,
        r.roots_ms,
        r.provider_init_ms,
        r.client_hello_bytes
    );
    if r.request_body_bytes > 0 {
        s += &format!(
            "request: POST with a body of {} bytes (an upload: its sending is in `request`, the server's reading of it in `first_byte`)\n\n",
            r.request_body_bytes
        );
    }
    let mut t = table(&["depth", "bytes", "subject", "not after"]);
    for c in &r.chain {
        t.add_row(vec![
            c.depth.to_string(),
            c.bytes.to_string(),
            c.subject.clone(),
            c.not_after.clone(),
        ]);
    }
    right_align(&mut t, &[0, 1]);
    s += &format!(
        "server chain ({} certificates, {} bytes):\n{}\n\n",
        r.chain.len(),
        r.chain.iter().map(|c| c.bytes).sum::<usize>(),
        render(&t)
    );
    let rtt_ms = r.link.as_ref().map(|l| l.rtt_ms).filter(|&ms| ms > 0.0);
    let mut header = vec!["phase (ms)", "cold"];
    if rtt_ms.is_some() {
        header.push("× RTT");
    }
    if r.warm.is_some() {
        header.extend(["warm p50", "p90", "p95", "p99", "max"]);
        if rtt_ms.is_some() {
            header.push("p50 × RTT");
        }
    }
    let mut t = table(&header);
    for p in Phase::ALL {
        let cold = r.cold.phases_ms.get(p.name()).copied().unwrap_or(0.0);
        let mut row = vec![p.name().to_string(), format!("{cold:.3}")];
        if let Some(rtt) = rtt_ms {
            row.push(format!("{:.2}", cold / rtt));
        }
        if let Some(w) = &r.warm
            && let Some(q) = w.phases.get(p.name())
        {
            for v in [q.p50_ns, q.p90_ns, q.p95_ns, q.p99_ns, q.max_ns] {
                row.push(format!("{:.3}", v as f64 / 1e6));
            }
            if let Some(rtt) = rtt_ms {
                row.push(format!("{:.2}", q.p50_ns as f64 / 1e6 / rtt));
            }
        }
        t.add_row(row);
    }
    let columns: Vec<usize> = (1..header.len()).collect();
    right_align(&mut t, &columns);
    s += &render(&t);
    s += &format!(
        "\n\ncold: {} handshake{}, HTTP {}{}\n",
        r.cold.kind,
        if r.cold.quic_retry == Some(true) {
            " after a Retry (address validation: one more round trip)"
        } else {
            ""
        },
        r.cold.status,
        match r.cold.early_data {
            crate::client::EarlyData::NotSent => String::new(),
            crate::client::EarlyData::Accepted => ", 0-RTT data accepted".into(),
            crate::client::EarlyData::Rejected => ", 0-RTT data rejected (sent again)".into(),
        }
    );
    if let Some(w) = &r.warm {
        let kinds: Vec<String> = w.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        s += &format!(
            "warm: {} connection{}: {}; resumption rate {:.1}%",
            w.count,
            if w.count == 1 { "" } else { "s" },
            kinds.join(", "),
            w.resumption_rate * 100.0
        );
        if w.early_data_accepted + w.early_data_rejected > 0 {
            s += &format!(
                "; 0-RTT accepted {} rejected {}",
                w.early_data_accepted, w.early_data_rejected
            );
        }
        if let Some(n) = w.quic_retries.filter(|n| *n > 0) {
            s += &format!("; {n} after a Retry");
        }
        s.push('\n');
        if let Some(q) = &w.client_wakeup {
            s += &format!(
                "receives dated by the kernel at arrival; tlsperf's own wake-up delay (in no phase): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms\n",
                q.p50_ns as f64 / 1e6,
                q.p99_ns as f64 / 1e6,
                q.max_ns as f64 / 1e6
            );
        }
        for n in &w.notes {
            s += &format!("{} {n}\n", styled(BAD, "note:"));
        }
        for (k, n) in &w.errors {
            s += &format!(
                "{} {k}: {n} (e.g. {})\n",
                styled(BAD, "failed"),
                w.error_examples.get(k).map(String::as_str).unwrap_or("")
            );
        }
    }
    if let Some(l) = &r.link {
        s += &handshake_link(r, l);
    }
    if let Some(c) = &r.link_counters {
        s += "\n";
        s += &c.text();
        for w in c.warnings() {
            s += &format!("{} {w}\n", styled(BAD, "warning:"));
        }
    }
    s
}

/// The link block of `tlsperf handshake --link`: the first flight against the initial
/// window and the round trips to the first byte, expected and measured.
fn handshake_link(r: &crate::handshake::HandshakeRun, l: &crate::handshake::LinkReport) -> String {
    let mut s = format!(
        "\nlink: {} (the client in its own network namespace, an emulated path to the server)\n",
        l.spec,
    );
    let f = &l.server_flight;
    let fits = if f.fits { "fits" } else { "does NOT fit" };
    match (f.wire_bytes, f.amplification_limit_bytes) {
        (Some(wire), Some(limit)) => {
            s += &format!(
                "server's first flight: {} TLS bytes, {} datagram{} (about {wire} bytes; anti-amplification limit: {limit} bytes, 3 × the client's first flight; initial window: {} datagrams): {fits}\n",
                f.bytes,
                f.segments,
                if f.segments == 1 { "" } else { "s" },
                f.initcwnd_segments,
            );
        }
        _ => {
            s += &format!(
                "server's first flight: {} bytes, {} segment{} of {} (initial congestion window: {} segments): {fits}\n",
                f.bytes,
                f.segments,
                if f.segments == 1 { "" } else { "s" },
                crate::link::trips::MSS,
                f.initcwnd_segments,
            );
        }
    }
    let path = |p: &crate::link::trips::CriticalPath| -> String {
        let steps: Vec<String> = p
            .steps
            .iter()
            .map(|st| format!("{} {}", st.what, st.round_trips))
            .collect();
        format!(
            "{} = {} round trip{} = {:.1} ms",
            steps.join(" + "),
            p.round_trips,
            if p.round_trips == 1 { "" } else { "s" },
            p.expected_ms
        )
    };
    let to_first_byte = ["connect", "tls", "request", "first_byte"];
    let cold: f64 = to_first_byte
        .iter()
        .map(|k| r.cold.phases_ms.get(k).copied().unwrap_or(0.0))
        .sum();
    let per_rtt = |ms: f64| {
        if l.rtt_ms > 0.0 {
            format!(" ({:.2} RTT)", ms / l.rtt_ms)
        } else {
            String::new()
        }
    };
    s += &format!(
        "round trips to the first byte:\n  cold ({}): {}; measured {:.1} ms{}\n",
        l.cold.kind,
        path(&l.cold),
        cold,
        per_rtt(cold)
    );
    if let (Some(p), Some(w)) = (&l.warm, &r.warm) {
        let warm: f64 = to_first_byte
            .iter()
            .filter_map(|k| w.phases.get(k))
            .map(|q| q.p50_ns as f64 / 1e6)
            .sum();
        s += &format!(
            "  warm ({}): {}; its phases' medians add up to {:.1} ms{}\n",
            p.kind,
            path(p),
            warm,
            per_rtt(warm)
        );
    }
    for w in &l.warnings {
        s += &format!("{} {w}\n", styled(BAD, "warning:"));
    }
    s
}
