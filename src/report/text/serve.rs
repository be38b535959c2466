//! `serve`: the line printed once listening and the summaries at shutdown.

use std::time::Duration;

use super::{BOLD, dur, render, right_align, styled, table};

/// The line `serve` prints once listening.
pub fn serve_listening(
    url: &str,
    metrics: Option<std::net::SocketAddr>,
    quic: Option<std::net::SocketAddr>,
) -> String {
    let mut out = format!("listening on {url} (h2, http/1.1, http/1.0)");
    if let Some(q) = quic {
        out.push_str(&format!("; HTTP/3 on UDP {q}"));
    }
    if let Some(m) = metrics {
        out.push_str(&format!("; metrics on http://{m}/metrics and /stats"));
    }
    out.push('\n');
    out
}

/// The summary `serve` prints at shutdown.
pub fn serve_summary(s: &crate::server::ServeSummary) -> String {
    let mut out = format!("{} after {:.1} s\n", styled(BOLD, "stopped"), s.seconds);
    let mut t = table(&["handshakes", "count", "p50", "p90", "p99", "p99.9", "max"]);
    // Every handshake by kind, then the QUIC ones alone (`serve --quic`).
    let quic = s
        .stats
        .quic_handshakes
        .iter()
        .map(|(k, q)| (format!("quic {k}"), q));
    for (kind, q) in s
        .stats
        .handshakes
        .iter()
        .map(|(k, q)| (k.clone(), q))
        .chain(quic)
    {
        let d = |ns: u64| dur(Duration::from_nanos(ns));
        t.add_row(vec![
            kind,
            q.count.to_string(),
            d(q.p50_ns),
            d(q.p90_ns),
            d(q.p99_ns),
            d(q.p999_ns),
            d(q.max_ns),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6]);
    out.push_str(&render(&t));
    out.push_str(&format!(
        "\nrequests: {}{}\n",
        s.stats.requests,
        uploads(s.stats.request_body_bytes)
    ));
    if !s.stats.failures.is_empty() {
        let f: Vec<String> = s
            .stats
            .failures
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!("failed handshakes: {}\n", f.join(", ")));
    }
    if let Some(r) = s.stats.quic_retry.as_ref().filter(|r| r.retries > 0) {
        out.push_str(&format!(
            "QUIC address validation: {} Retry packet{} sent ({})\n",
            r.retries,
            if r.retries == 1 { "" } else { "s" },
            r.policy
        ));
    }
    if let Some(r) = s
        .stats
        .quic_retry
        .as_ref()
        .filter(|r| r.version_negotiations > 0)
    {
        out.push_str(&format!(
            "QUIC version negotiation: {} Version Negotiation packet{} sent (Initials of \
             a version serve does not speak)\n",
            r.version_negotiations,
            if r.version_negotiations == 1 { "" } else { "s" },
        ));
    }
    if let Some(k) = &s.kx_pool {
        out.push_str(&format!(
            "key-share pool: {} handshakes used a pre-generated share, {} generated one\n",
            k.hits, k.misses
        ));
    }
    if s.unfinished_connections > 0 {
        out.push_str(&format!(
            "connections cut at the shutdown deadline: {}\n",
            s.unfinished_connections
        ));
    }
    out
}

/// The summary `serve --stack actix` prints at shutdown: what it can count, and what it
/// cannot.
pub fn serve_summary_actix(s: &crate::server::actix_stack::ActixSummary) -> String {
    let mut out = format!(
        "{} after {:.1} s (actix-web)\n",
        styled(BOLD, "stopped"),
        s.seconds
    );
    out.push_str(&format!(
        "requests: {}{}\n",
        s.requests,
        uploads(s.request_body_bytes)
    ));
    if let Some(k) = &s.kx_pool {
        out.push_str(&format!(
            "key-share pool: {} handshakes used a pre-generated share, {} generated one\n",
            k.hits, k.misses
        ));
    }
    out.push_str(&format!(
        "not available with actix-web (tlsperf's accept loop measures them): {}\n",
        s.not_available.join(", ").replace('_', " ")
    ));
    out
}

/// `; uploads: N bytes read` when POST bodies were read.
fn uploads(bytes: u64) -> String {
    match bytes {
        0 => String::new(),
        n => format!("; uploads: {n} bytes of request bodies read"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ServeSummary;
    use crate::server::metrics::{QuicRetryStats, StatsSnapshot};

    fn summary(retries: u64, version_negotiations: u64) -> String {
        serve_summary(&ServeSummary {
            stack: Default::default(),
            seconds: 1.0,
            stats: StatsSnapshot {
                handshakes: Default::default(),
                quic_handshakes: Default::default(),
                requests: 0,
                request_body_bytes: 0,
                open_connections: 0,
                quic_retry: Some(QuicRetryStats {
                    policy: "always".into(),
                    retries,
                    unvalidated_handshakes: 0,
                    version_negotiations,
                }),
                failures: Default::default(),
            },
            unfinished_connections: 0,
            kx_pool: None,
        })
    }

    #[test]
    fn the_summary_says_what_quics_endpoint_answered_without_a_handshake() {
        let text = summary(0, 0);
        assert!(!text.contains("QUIC"), "{text}");
        let text = summary(3, 1);
        assert!(
            text.contains("QUIC address validation: 3 Retry packets sent (always)"),
            "{text}"
        );
        assert!(
            text.contains("QUIC version negotiation: 1 Version Negotiation packet sent"),
            "{text}"
        );
    }
}
