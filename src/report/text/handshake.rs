//! `handshake`: phases, negotiated parameters and the chain.

use super::{BAD, BOLD, render, right_align, styled, table};

/// `tlsperf handshake`.
pub fn handshake_run(r: &crate::handshake::HandshakeRun) -> String {
    use crate::client::Phase;
    let n = &r.negotiated;
    let mut s = format!(
        "{}\n\n",
        styled(BOLD, &format!("Handshakes with {}", r.target))
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
    let mut header = vec!["phase (ms)", "cold"];
    if r.warm.is_some() {
        header.extend(["warm p50", "p90", "p99", "max"]);
    }
    let mut t = table(&header);
    for p in Phase::ALL {
        let mut row = vec![
            p.name().to_string(),
            format!(
                "{:.3}",
                r.cold.phases_ms.get(p.name()).copied().unwrap_or(0.0)
            ),
        ];
        if let Some(w) = &r.warm
            && let Some(q) = w.phases.get(p.name())
        {
            for v in [q.p50_ns, q.p90_ns, q.p99_ns, q.max_ns] {
                row.push(format!("{:.3}", v as f64 / 1e6));
            }
        }
        t.add_row(row);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5]);
    s += &render(&t);
    s += &format!(
        "\n\ncold: {} handshake, HTTP {}{}\n",
        r.cold.kind,
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
        s.push('\n');
        for (k, n) in &w.errors {
            s += &format!(
                "{} {k}: {n} (e.g. {})\n",
                styled(BAD, "failed"),
                w.error_examples.get(k).map(String::as_str).unwrap_or("")
            );
        }
    }
    s
}
