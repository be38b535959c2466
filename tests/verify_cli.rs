//! `tlsperf verify` and `tlsperf verify bench` as a user runs them, including bad chains.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::fs;

use common::{tlsperf, write};
use tlsperf::pki::{PkiOptions, TestPki};

#[test]
fn verdicts_and_errors_for_bad_chains() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = TestPki::generate(&PkiOptions::default()).unwrap();
    let roots = write(d, "roots.pem", &p.root.pem);
    let cases: Vec<(&str, String, i32, &str)> = vec![
        (
            "good",
            format!("{}{}", p.server.pem, p.intermediate.pem),
            0,
            "VALID",
        ),
        (
            "wrong-order",
            format!("{}{}", p.intermediate.pem, p.server.pem),
            1,
            "INVALID",
        ),
        (
            "duplicates",
            format!("{0}{1}{1}{0}", p.server.pem, p.intermediate.pem),
            0,
            "VALID",
        ),
        (
            "missing-intermediate",
            p.server.pem.clone(),
            1,
            "unknown issuer",
        ),
        (
            "client-leaf",
            format!("{}{}", p.client.pem, p.intermediate.pem),
            1,
            "INVALID",
        ),
    ];
    for (name, pem, code, needle) in cases {
        let chain = write(d, &format!("{name}.pem"), &pem);
        let run = tlsperf([
            "verify",
            "--chain",
            &chain,
            "--host",
            "localhost",
            "--roots",
            &roots,
        ]);
        assert_eq!(run.code, code, "{name}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(needle), "{name}: {}", run.stdout);
        if code == 1 {
            assert!(
                run.stderr.contains(&format!("{name}.pem")),
                "{name}: {}",
                run.stderr
            );
        }
    }
    // JSON.
    let good = write(
        d,
        "good.pem",
        &format!("{}{}", p.server.pem, p.intermediate.pem),
    );
    let run = tlsperf([
        "verify",
        "--chain",
        &good,
        "--host",
        "127.0.0.1",
        "--roots",
        &roots,
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["signature_checks"], 2);
    assert_eq!(v["path"].as_array().unwrap().len(), 3);
    // Bad input: exit 2 with the file named.
    let empty = write(d, "empty.pem", "");
    let key_only = write(
        d,
        "key.pem",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let bad_block = write(
        d,
        "bad.pem",
        &format!(
            "{}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            p.server.pem
        ),
    );
    for (file, needle) in [
        (&empty, "empty.pem"),
        (&key_only, "key.pem"),
        (&bad_block, "bad.pem"),
    ] {
        let run = tlsperf([
            "verify",
            "--chain",
            file,
            "--host",
            "localhost",
            "--roots",
            &roots,
        ]);
        assert_eq!(run.code, 2, "{file}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{}", run.stderr);
    }
    let run = tlsperf([
        "verify",
        "--chain",
        &good,
        "--host",
        "not a host",
        "--roots",
        &roots,
    ]);
    assert_eq!(run.code, 2);
    let run = tlsperf(["verify", "--chain", &good]);
    assert_eq!(run.code, 2, "--host is required");
    let run = tlsperf([
        "verify",
        "--chain",
        &good,
        "--host",
        "localhost",
        "--roots",
        "/nonexistent/roots.pem",
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("/nonexistent/roots.pem"),
        "{}",
        run.stderr
    );
    let run = tlsperf([
        "verify",
        "--chain",
        &good,
        "--host",
        "localhost",
        "--roots",
        &roots,
        "--at",
        "soon",
    ]);
    assert_eq!(run.code, 2);
}

#[test]
fn hostile_chains_end_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = TestPki::generate(&PkiOptions::default()).unwrap();
    let roots = write(d, "roots.pem", &p.root.pem);
    // 1,000 certificates: the leaf followed by 999 copies of unrelated CAs with one name.
    let filler = tlsperf::pki::generate_bundle(&tlsperf::pki::BundleOptions {
        count: 999,
        cross_signed: 0,
        key: tlsperf::pki::KeyType::EcdsaP256,
        key_pool: Some(8),
        days: 30,
    })
    .unwrap();
    let chain = write(d, "huge.pem", &format!("{}{}", p.server.pem, filler.pem));
    // Bounded in work, not checked by the clock: the verdict must arrive, and none of the
    // 999 CAs (whose name is not the leaf's issuer) may cost a signature check.
    let run = tlsperf([
        "verify",
        "--chain",
        &chain,
        "--host",
        "localhost",
        "--roots",
        &roots,
        "--json",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["valid"], false);
    let checks = v["signature_checks"].as_u64().expect("signature_checks");
    assert_eq!(checks, 0, "unrelated CAs were tried as issuers");
}

#[test]
fn bench_reports_every_variant() {
    let run = tlsperf([
        "verify",
        "bench",
        "--sizes",
        "1,10,300",
        "--iterations",
        "20",
        "--max-time",
        "50ms",
        "--threads",
        "1,2",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let sizes = v["sizes"].as_array().unwrap();
    assert_eq!(sizes.len(), 3);
    assert_eq!(sizes[2]["anchors"], 300);
    for s in sizes {
        for k in ["indexed_ns", "default_ns", "reload_ns", "trimmed_ns"] {
            assert!(s[k].as_u64().unwrap() > 0, "{k}: {s}");
        }
        assert_eq!(s["indexed_signature_checks"], 2);
        assert_eq!(s["trimmed_anchors"], 1);
    }
    assert!(v["growth_exponent"]["indexed"].is_number());
    assert_eq!(v["threads"].as_array().unwrap().len(), 2);
    let run = tlsperf(["verify", "bench", "--sizes", "0"]);
    assert_eq!(run.code, 2);
    let run = tlsperf(["verify", "bench", "--sizes", "ten"]);
    assert_eq!(run.code, 2);
    // --max-time takes the one duration syntax, from 10ms to 10m.
    for bad in ["50", "5ms", "11m", "soon"] {
        let run = tlsperf(["verify", "bench", "--max-time", bad]);
        assert_eq!(run.code, 2, "--max-time {bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("--max-time <DURATION>"),
            "{}",
            run.stderr
        );
    }
    let _ = fs::metadata(".");
}
