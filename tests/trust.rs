//! `tlsperf trust probe|load|analyze|trim`, run as a user would, on fixtures the tests make.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use common::{spawn_tls_server, tlsperf};
use serde_json::Value;
use tlsperf::pki::{BundleOptions, KeyType, PkiOptions, TestPki, generate_bundle};

fn json(run: &common::Run) -> Value {
    assert_eq!(run.code, 0, "exit {}: {}", run.code, run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

fn pki() -> TestPki {
    TestPki::generate(&PkiOptions::default()).unwrap()
}

fn bundle(n: usize, twins: usize) -> String {
    generate_bundle(&BundleOptions {
        count: n,
        cross_signed: twins,
        key: KeyType::EcdsaP256,
        key_pool: Some(8),
        days: 30,
    })
    .unwrap()
    .pem
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn probe_an_extracted_image() {
    let img = tempfile::tempdir().unwrap();
    let r = img.path();
    fs::create_dir_all(r.join("etc/pki/tls/certs")).unwrap();
    fs::write(r.join("etc/pki/tls/certs/ca-bundle.crt"), pki().root.pem).unwrap();
    let run = tlsperf(["trust", "probe", "--root", s(r), "--json"]);
    let v = json(&run);
    let entries = v["entries"].as_array().unwrap();
    assert!(entries.len() >= 9);
    let found: Vec<&Value> = entries.iter().filter(|e| e["status"] == "found").collect();
    assert_eq!(found.len(), 2, "{entries:?}"); // the RHEL bundle and its directory
    assert_eq!(found[0]["path"], "/etc/pki/tls/certs/ca-bundle.crt");
    assert_eq!(v["chosen_file"], 1, "{v}");
    let human = tlsperf(["trust", "probe", "--root", s(r)]);
    assert!(
        human.stdout.contains("not found")
            && human
                .stdout
                .contains("a client loads /etc/pki/tls/certs/ca-bundle.crt"),
        "{}",
        human.stdout
    );
    let run = tlsperf(["trust", "probe", "--root", "/nonexistent-root-xyz"]);
    assert_eq!(run.code, 2);
}

#[test]
fn load_a_bundle_in_layers() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki();
    let path = dir.path().join("b.pem");
    // CRLF, text between blocks, a duplicate.
    let text = format!(
        "Generated bundle\r\n{}{}\nnotes\n{}",
        bundle(50, 5).replace('\n', "\r\n"),
        p.root.pem,
        p.root.pem
    );
    fs::write(&path, text).unwrap();
    let v = json(&tlsperf([
        "trust",
        "load",
        "--bundle",
        s(&path),
        "--iterations",
        "5",
        "--x509",
        "--json",
    ]));
    assert_eq!(v["stats"]["anchors"], 56);
    assert_eq!(v["stats"]["certs_decoded"], 57);
    assert_eq!(v["stats"]["duplicate_certs"], 1);
    assert_eq!(v["stats"]["files_opened"], 1);
    for layer in [
        "probe_ms",
        "io_ms",
        "pem_ms",
        "anchors_ms",
        "x509_ms",
        "total_ms",
    ] {
        assert!(v["cold"][layer].as_f64().is_some(), "{layer}");
        assert!(v["warm"][layer].as_f64().is_some(), "{layer}");
    }
    assert_eq!(v["iterations"], 5);
    let baselines = v["baselines"].as_array().unwrap();
    assert_eq!(baselines.len(), 1);
    assert_eq!(
        baselines[0]["certs"], 57,
        "RootCertStore keeps the duplicate"
    );
    let human = tlsperf(["trust", "load", "--bundle", s(&path), "--iterations", "3"]);
    assert!(
        human.stdout.contains("2 PEM → DER")
            && human.stdout.contains(
                "51 anchors from 57 certificates decoded (6 duplicates dropped: same trust anchor"
            ),
        "{}",
        human.stdout
    );
}

#[test]
fn load_a_directory_with_links_and_damage() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = (pki(), pki());
    fs::write(d.join("a.pem"), &a.root.pem).unwrap();
    fs::write(d.join("b.der"), b.root.der.as_ref()).unwrap();
    symlink("a.pem", d.join("0a1b2c3d.0")).unwrap();
    symlink("b.der", d.join("4e5f6a7b.0")).unwrap();
    symlink("gone.pem", d.join("deadbeef.0")).unwrap();
    symlink("loop-b", d.join("loop-a")).unwrap();
    symlink("loop-a", d.join("loop-b")).unwrap();
    fs::write(d.join("garbage.pem"), b"not a certificate at all\n").unwrap();
    let truncated = &a.intermediate.pem[..a.intermediate.pem.len() / 2];
    fs::write(d.join("truncated.pem"), truncated).unwrap();
    let bad_b64 = b.intermediate.pem.replacen("MII", "M*I", 1);
    fs::write(
        d.join("mixed.pem"),
        format!("{}{bad_b64}", a.intermediate.pem),
    )
    .unwrap();
    fs::write(
        d.join("not-cert.pem"),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    // A large file (sparse, 100 MB of zeros) and one over the size limit.
    fs::File::create(d.join("huge-100mb.pem"))
        .unwrap()
        .set_len(100 << 20)
        .unwrap();
    fs::File::create(d.join("over-limit.pem"))
        .unwrap()
        .set_len(200 << 20)
        .unwrap();

    // A FIFO (opening it would block the load forever) and a link to a device that never
    // ends: skipped with a warning, the rest of the directory is loaded.
    assert!(
        std::process::Command::new("mkfifo")
            .arg(d.join("fifo.pem"))
            .status()
            .unwrap()
            .success()
    );
    symlink("/dev/zero", d.join("zero.pem")).unwrap();

    let v = json(&common::tlsperf_env(
        [
            "trust",
            "load",
            "--dir",
            s(d),
            "--iterations",
            "2",
            "--json",
        ],
        &[],
        std::time::Duration::from_secs(120),
    ));
    let stats = &v["stats"];
    assert_eq!(stats["anchors"], 3, "{stats}"); // a.root, b.root, a.intermediate
    assert_eq!(stats["same_file_skipped"], 2);
    let problems: Vec<String> = stats["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{} line {} block {} {}",
                p["path"], p["line"], p["block"], p["reason"]
            )
        })
        .collect();
    let has = |file: &str, what: &str| {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(file) && p.contains(what)),
            "no '{what}' for {file} in {problems:#?}"
        )
    };
    has("deadbeef.0", "broken symlink to gone.pem");
    has("loop-a", "symlink loop");
    has("garbage.pem", "neither PEM");
    has("truncated.pem", "truncated");
    has("mixed.pem", "invalid base64");
    has("not-cert.pem", "not DER");
    has("huge-100mb.pem", "neither PEM");
    has("over-limit.pem", "larger than the 128 MiB limit");
    has(
        "fifo.pem",
        "a FIFO (named pipe), not a regular file; not read",
    );
    has(
        "zero.pem",
        "a character device, not a regular file; not read",
    );
    let line_of_bad = problems.iter().find(|p| p.contains("mixed.pem")).unwrap();
    assert!(line_of_bad.contains("block 2"), "{line_of_bad}");

    // Human output names each problem too.
    let human = tlsperf(["trust", "load", "--dir", s(d), "--iterations", "2"]);
    assert_eq!(human.code, 0);
    assert!(
        human.stdout.contains("problems (") && human.stdout.contains("deadbeef.0"),
        "{}",
        human.stdout
    );
}

#[test]
fn bad_sources_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.pem");
    fs::write(&garbage, b"\x00\x01garbage").unwrap();
    let empty = dir.path().join("empty.pem");
    fs::write(&empty, b"").unwrap();
    let missing = dir.path().join("missing.pem");
    for (path, needle) in [
        (&garbage, "garbage.pem"),
        (&empty, "empty file"),
        (&missing, "missing.pem"),
    ] {
        let run = tlsperf(["trust", "load", "--bundle", s(path)]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(run.stderr.contains(needle), "{}", run.stderr);
        let run = tlsperf(["trust", "analyze", s(path)]);
        assert_eq!(run.code, 2, "{}", run.stderr);
    }
    let run = tlsperf(["trust", "load", "--bundle", s(dir.path())]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = tlsperf(["trust", "load", "--bundle", "x", "--dir", "y"]);
    assert_eq!(run.code, 2);
    let run = tlsperf(["trust", "analyze", "webpki"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("trust anchors only"), "{}", run.stderr);
    let run = tlsperf(["trust", "analyze", s(&garbage), "--at", "tomorrow"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("RFC 3339"), "{}", run.stderr);
}

#[test]
fn analyze_reports_duplicates_twins_and_validity() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki();
    let path = dir.path().join("b.pem");
    fs::write(
        &path,
        format!(
            "{}{}{}{}",
            bundle(20, 4),
            p.root.pem,
            p.root.pem,
            p.server.pem
        ),
    )
    .unwrap();
    let v = json(&tlsperf(["trust", "analyze", s(&path), "--json"]));
    assert_eq!(v["count"], 27);
    assert_eq!(v["unique"], 26);
    assert_eq!(v["exact_duplicates"], 1);
    assert_eq!(v["twins"], 8);
    assert_eq!(v["twin_groups"], 4);
    assert_eq!(v["not_ca"], 1);
    assert_eq!(v["expired"], 0);
    assert_eq!(v["key_types"]["EC P-256"], 26);
    assert!(v.get("certificates").is_none());
    let v = json(&tlsperf([
        "trust",
        "analyze",
        s(&path),
        "--json",
        "--list",
        "--at",
        "2099-01-01T00:00:00Z",
    ]));
    assert_eq!(v["expired"], 26);
    let list = v["certificates"].as_array().unwrap();
    assert_eq!(list.len(), 26);
    assert!(list.iter().any(|c| {
        c["flags"]
            .as_array()
            .unwrap()
            .contains(&Value::from("twin"))
    }));
    assert!(
        list.iter()
            .all(|c| c["sha256"].as_str().unwrap().len() == 64)
    );
    let human = tlsperf(["trust", "analyze", s(&path), "--list"]);
    assert!(
        human.stdout.contains("exact duplicates") && human.stdout.contains("not-ca"),
        "{}",
        human.stdout
    );
}

#[test]
fn trim_keeps_only_the_anchors_the_chains_need() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (pki(), pki());
    let source = dir.path().join("source.pem");
    fs::write(
        &source,
        format!("{}{}{}", bundle(100, 10), a.root.pem, b.root.pem),
    )
    .unwrap();
    let chain_a = dir.path().join("a-chain.pem");
    fs::write(&chain_a, format!("{}{}", a.server.pem, a.intermediate.pem)).unwrap();
    let port = spawn_tls_server(b.server_chain(), b.server.private_key_der(), 1);
    let out = dir.path().join("trimmed.pem");
    let host = format!("127.0.0.1:{port}");
    let v = json(&tlsperf([
        "trust",
        "trim",
        "--source",
        s(&source),
        "--keep-for",
        s(&chain_a),
        &host,
        "--out",
        s(&out),
        "--json",
    ]));
    assert_eq!(v["source_anchors"], 112);
    let kept: Vec<&str> = v["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["sha256"].as_str().unwrap())
        .collect();
    assert_eq!(kept.len(), 2);
    assert!(kept.contains(&a.root.summary.sha256.as_str()));
    assert!(kept.contains(&b.root.summary.sha256.as_str()));
    assert_eq!(v["removed"].as_array().unwrap().len(), 110);
    assert_eq!(v["chains"][1]["name"], host.as_str());
    // The written bundle loads and holds exactly those two roots.
    let w = json(&tlsperf(["trust", "analyze", s(&out), "--json"]));
    assert_eq!(w["unique"], 2);

    // --also-keep adds an anchor by fingerprint; an unknown one is refused.
    let extra = tlsperf::trust::TrustStore::from_pem_file(&source).unwrap();
    let fp = tlsperf::pki::sha256_hex(&extra.certs()[0]);
    let colon_fp: String = fp
        .as_bytes()
        .chunks(2)
        .map(|c| std::str::from_utf8(c).unwrap().to_uppercase())
        .collect::<Vec<_>>()
        .join(":");
    let v = json(&tlsperf([
        "trust",
        "trim",
        "--source",
        s(&source),
        "--keep-for",
        s(&chain_a),
        "--also-keep",
        &colon_fp,
        "--out",
        s(&out),
        "--force",
        "--json",
    ]));
    assert_eq!(v["kept"].as_array().unwrap().len(), 2);
    let run = tlsperf([
        "trust",
        "trim",
        "--source",
        s(&source),
        "--keep-for",
        s(&chain_a),
        "--also-keep",
        "00ff",
        "--out",
        s(&dir.path().join("x.pem")),
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("00ff"), "{}", run.stderr);
    assert!(!dir.path().join("x.pem").exists());
}

#[test]
fn trim_writes_nothing_when_a_chain_does_not_verify() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (pki(), pki());
    let source = dir.path().join("source.pem");
    fs::write(&source, format!("{}{}", bundle(10, 0), a.root.pem)).unwrap();
    let good = dir.path().join("good.pem");
    fs::write(&good, format!("{}{}", a.server.pem, a.intermediate.pem)).unwrap();
    let foreign = dir.path().join("foreign.pem");
    fs::write(&foreign, format!("{}{}", b.server.pem, b.intermediate.pem)).unwrap();
    let missing_int = dir.path().join("no-intermediate.pem");
    fs::write(&missing_int, &a.server.pem).unwrap();
    let out = dir.path().join("out.pem");
    for (chain, needle) in [
        (&foreign, "foreign.pem"),
        (&missing_int, "no-intermediate.pem"),
    ] {
        let run = tlsperf([
            "trust",
            "trim",
            "--source",
            s(&source),
            "--keep-for",
            s(&good),
            s(chain),
            "--out",
            s(&out),
        ]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr.contains(needle) && run.stderr.contains("does not verify"),
            "{}",
            run.stderr
        );
        assert!(!out.exists(), "nothing written");
    }
    // A chain valid only in the past verifies with --at.
    let run = tlsperf([
        "trust",
        "trim",
        "--source",
        s(&source),
        "--keep-for",
        s(&good),
        "--out",
        s(&out),
        "--at",
        "2099-01-01",
    ]);
    assert_eq!(run.code, 2, "expired at 2099: {}", run.stderr);
    // A closed port is a run-time failure naming the target.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = format!("127.0.0.1:{closed}");
    let run = tlsperf([
        "trust",
        "trim",
        "--source",
        s(&source),
        "--keep-for",
        &target,
        "--out",
        s(&out),
        "--timeout",
        "2s",
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains(&target), "{}", run.stderr);
    assert!(!out.exists());
    // Refuses to overwrite without --force.
    fs::write(&out, b"keep me").unwrap();
    let run = tlsperf([
        "trust",
        "trim",
        "--source",
        s(&source),
        "--keep-for",
        s(&good),
        "--out",
        s(&out),
    ]);
    assert_eq!(run.code, 2);
    assert_eq!(fs::read(&out).unwrap(), b"keep me");
}

#[test]
fn host_system_store() {
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if !bundle.exists() && std::env::var_os("SSL_CERT_FILE").is_none() {
        eprintln!("SKIPPED: no system CA bundle on this host");
        return;
    }
    let v = json(&tlsperf([
        "trust",
        "load",
        "--system",
        "--iterations",
        "3",
        "--json",
    ]));
    assert!(v["stats"]["anchors"].as_u64().unwrap() > 10);
    assert_eq!(
        v["stats"]["files_opened"], 1,
        "the system store is one bundle read"
    );
    assert!(v["shared_warm_ns"].as_u64().is_some());
    let names: Vec<&str> = v["baselines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert!(names[0].contains("load_native_certs"), "{names:?}");

    // The shared store: concurrent first callers get one Arc, loaded once.
    let stores: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|_| sc.spawn(|| tlsperf::trust::TrustStore::system_shared().unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(stores.iter().all(|s| std::sync::Arc::ptr_eq(s, &stores[0])));
    assert!(!stores[0].is_empty());
    stores[0].verifier(tlsperf::tls::Provider::Ring).unwrap();
}
