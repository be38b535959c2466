//! `verify` and `verify bench`: one detailed verification, and the benchmark against
//! store size.

use std::path::Path;
use std::time::Duration;

use super::{BAD, BOLD, GOOD, dur, render, right_align, styled, table};

/// One detailed verification.
pub fn verify_report(
    chain: &Path,
    host: &str,
    roots: &str,
    r: &crate::verify::VerifyReport,
) -> String {
    let verdict = if r.valid {
        styled(GOOD, "VALID")
    } else {
        styled(
            BAD,
            &format!("INVALID: {}", r.reason.clone().unwrap_or_default()),
        )
    };
    let mut out = format!(
        "{} for {host} against {roots}: {verdict}\n",
        chain.display()
    );
    if !r.path.is_empty() {
        out.push_str(&format!("path: {}\n", r.path.join(" → ")));
    }
    out.push_str(&format!(
        "anchors: {} in the store, {} candidate(s) handed to webpki ({} matched by key identifier)\n",
        r.anchors_in_store, r.candidate_anchors, r.candidates_by_key_id
    ));
    out.push_str(&format!("signature checks: {}\n", r.signature_checks));
    let mut t = table(&["phase", "time"]);
    for (name, ns) in [
        ("anchor lookup (index)", r.lookup_ns),
        ("signature checks", r.signatures_ns),
        ("path building and policy", r.policy_ns),
        ("server name", r.name_ns),
        ("total", r.total_ns),
    ] {
        t.add_row(vec![name.to_string(), dur(Duration::from_nanos(ns))]);
    }
    right_align(&mut t, &[1]);
    out.push_str(&render(&t));
    out.push('\n');
    out
}

/// The verification benchmark.
pub fn verify_bench(b: &crate::verify::bench::BenchResult) -> String {
    let mut out = format!(
        "{} chain of {} for {}\n",
        styled(BOLD, "verify bench:"),
        b.chain,
        b.host
    );
    let mut t = table(&[
        "store",
        "anchors",
        "(a) indexed",
        "(b) rustls default",
        "(c) reload each time",
        "(d) trimmed",
        "sig checks a/b",
        "c ÷ a",
        "b ÷ a",
    ]);
    let d = |ns: u64| dur(Duration::from_nanos(ns));
    for r in &b.sizes {
        let ratio = |x: u64| {
            if r.indexed_ns == 0 {
                "-".into()
            } else {
                format!("{:.1}×", x as f64 / r.indexed_ns as f64)
            }
        };
        t.add_row(vec![
            r.size.clone(),
            r.anchors.to_string(),
            d(r.indexed_ns),
            d(r.default_ns),
            d(r.reload_ns),
            format!(
                "{} ({} anchor{})",
                d(r.trimmed_ns),
                r.trimmed_anchors,
                if r.trimmed_anchors == 1 { "" } else { "s" }
            ),
            format!(
                "{}/{}",
                r.indexed_signature_checks, r.default_signature_checks
            ),
            ratio(r.reload_ns),
            ratio(r.default_ns),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6, 7, 8]);
    out.push_str(&render(&t));
    let e = &b.growth_exponent;
    out.push_str(&format!(
        "\ngrowth exponent (slope of log time over log anchors): indexed {:.3}, default {:.3}, reload {:.3}, trimmed {:.3}\n",
        e.indexed, e.default, e.reload, e.trimmed
    ));
    out.push_str(&format!(
        "indexed, largest store ÷ smallest: {:.3}×\n",
        b.indexed_largest_over_smallest
    ));
    if !b.threads.is_empty() {
        let mut th = table(&[
            "threads sharing one verifier",
            "verifications/s",
            "per thread",
        ]);
        for r in &b.threads {
            th.add_row(vec![
                r.threads.to_string(),
                format!("{:.0}", r.total_per_s),
                format!("{:.0}", r.per_thread_per_s),
            ]);
        }
        right_align(&mut th, &[1, 2]);
        out.push('\n');
        out.push_str(&render(&th));
        out.push_str(&format!(
            "\n({} cores here: per-thread throughput can only stay flat up to that many threads)\n",
            b.cores
        ));
    }
    out
}
