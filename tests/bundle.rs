//! `tlsperf pki bundle`: synthetic trust bundles with cross-signed twins.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use common::tlsperf;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

#[test]
fn writes_a_bundle_with_twins() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle.pem");
    let out_s = out.to_str().unwrap();
    let run = tlsperf([
        "pki",
        "bundle",
        "--count",
        "200",
        "--cross-signed",
        "20",
        "--out",
        out_s,
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["certificates"], 220);
    assert_eq!(v["cas"], 200);
    assert_eq!(v["twins"], 20);
    assert_eq!(v["distinct_keys"], 200);
    let certs: Vec<_> = CertificateDer::pem_file_iter(&out)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(certs.len(), 220);
    // rustls accepts every one as a trust anchor.
    let mut store = rustls::RootCertStore::empty();
    let (added, ignored) = store.add_parsable_certificates(certs);
    assert_eq!((added, ignored), (220, 0));

    // Refuses to overwrite; --force replaces.
    let run = tlsperf(["pki", "bundle", "--count", "3", "--out", out_s]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("bundle.pem"), "{}", run.stderr);
    let run = tlsperf([
        "pki", "bundle", "--count", "3", "--out", out_s, "--force", "--key", "ed25519",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("3 certificates"), "{}", run.stdout);
}

#[test]
fn rsa_bundles_reuse_a_small_key_pool() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rsa.pem");
    let run = tlsperf([
        "pki",
        "bundle",
        "--count",
        "40",
        "--key",
        "rsa-2048",
        "--key-pool",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["distinct_keys"], 2);
    assert_eq!(v["certificates"], 40);
}

#[test]
fn bad_bundle_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("b.pem");
    let out_s = out.to_str().unwrap();
    for (args, needle) in [
        (vec!["--count", "0", "--out", out_s], "--count"),
        (
            vec!["--count", "5", "--cross-signed", "6", "--out", out_s],
            "--cross-signed",
        ),
        (
            vec!["--count", "1", "--cross-signed", "1", "--out", out_s],
            "at least 2 CAs",
        ),
        (
            vec!["--count", "5", "--key-pool", "0", "--out", out_s],
            "--key-pool",
        ),
        (
            vec!["--count", "5", "--out", "/nonexistent-dir-xyz/b.pem"],
            "/nonexistent-dir-xyz/b.pem",
        ),
        (vec!["--count", "5"], "--out"),
    ] {
        let mut full = vec!["pki", "bundle"];
        full.extend(args.iter().copied());
        let run = tlsperf(&full);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert!(!out.exists(), "{args:?}: nothing written");
    }
}
