//! `tlsperf pki init`: for every key type, the PKI verifies with rustls's verifiers (both
//! providers) and with `openssl verify`, and the files are what users expect.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::Arc;

use common::{have, tlsperf};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tlsperf::pki::{KeyType, PkiOptions, TestPki};
use tlsperf::tls::Provider;

fn roots(pki: &TestPki) -> Arc<RootCertStore> {
    let mut store = RootCertStore::empty();
    store.add(pki.root.der.clone()).unwrap();
    Arc::new(store)
}

#[test]
fn every_key_type_verifies_with_rustls_on_every_provider() {
    for key in KeyType::ALL {
        let pki = TestPki::generate(&PkiOptions {
            ca_key: key,
            leaf_key: key,
            ..Default::default()
        })
        .unwrap();
        for provider in Provider::ALL {
            let server_verifier = WebPkiServerVerifier::builder_with_provider(
                roots(&pki),
                provider.crypto_provider(),
            )
            .build()
            .unwrap();
            for name in ["localhost", "127.0.0.1", "::1"] {
                server_verifier
                    .verify_server_cert(
                        &pki.server.der,
                        std::slice::from_ref(&pki.intermediate.der),
                        &ServerName::try_from(name).unwrap(),
                        &[],
                        UnixTime::now(),
                    )
                    .unwrap_or_else(|e| panic!("{key} {provider} {name}: {e}"));
            }
            // A name not in the SANs is rejected.
            assert!(
                server_verifier
                    .verify_server_cert(
                        &pki.server.der,
                        std::slice::from_ref(&pki.intermediate.der),
                        &ServerName::try_from("example.com").unwrap(),
                        &[],
                        UnixTime::now(),
                    )
                    .is_err()
            );
            // The client leaf is not a server certificate (EKU).
            assert!(
                server_verifier
                    .verify_server_cert(
                        &pki.client.der,
                        std::slice::from_ref(&pki.intermediate.der),
                        &ServerName::try_from("localhost").unwrap(),
                        &[],
                        UnixTime::now(),
                    )
                    .is_err(),
                "{key} {provider}: client leaf accepted as server certificate"
            );
            let client_verifier = WebPkiClientVerifier::builder_with_provider(
                roots(&pki),
                provider.crypto_provider(),
            )
            .build()
            .unwrap();
            client_verifier
                .verify_client_cert(
                    &pki.client.der,
                    std::slice::from_ref(&pki.intermediate.der),
                    UnixTime::now(),
                )
                .unwrap_or_else(|e| panic!("{key} {provider} client: {e}"));
            assert!(
                client_verifier
                    .verify_client_cert(
                        &pki.server.der,
                        std::slice::from_ref(&pki.intermediate.der),
                        UnixTime::now()
                    )
                    .is_err(),
                "{key} {provider}: server leaf accepted as client certificate"
            );
        }
    }
}

#[test]
fn cli_writes_every_file_and_openssl_agrees() {
    let openssl = have("openssl", "the PKI with openssl verify / x509 -text");
    for key in KeyType::ALL {
        let dir = tempfile::tempdir().unwrap();
        let pki_dir = dir.path().join("pki");
        let run = tlsperf([
            "pki",
            "init",
            pki_dir.to_str().unwrap(),
            "--key",
            key.name(),
            "--json",
        ]);
        assert_eq!(run.code, 0, "{key}: {}", run.stderr);
        let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        assert_eq!(report["files"].as_array().unwrap().len(), 8);
        assert_eq!(report["certificates"][2]["key"], key.name());

        for (name, mode) in [
            ("root.pem", 0o644),
            ("intermediate.pem", 0o644),
            ("server.pem", 0o644),
            ("server.key", 0o600),
            ("server-chain.pem", 0o644),
            ("client.pem", 0o644),
            ("client.key", 0o600),
            ("client-chain.pem", 0o644),
        ] {
            let meta = std::fs::metadata(pki_dir.join(name)).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, mode, "{key} {name}");
        }
        // Nothing else (no temporary files) in the directory.
        assert_eq!(std::fs::read_dir(&pki_dir).unwrap().count(), 8);

        // The files load as rustls would load them: chains of 2, a private key each.
        for role in ["server", "client"] {
            let chain: Vec<_> =
                CertificateDer::pem_file_iter(pki_dir.join(format!("{role}-chain.pem")))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
            assert_eq!(chain.len(), 2);
            PrivateKeyDer::from_pem_file(pki_dir.join(format!("{role}.key"))).unwrap();
        }

        if openssl {
            let verify = Command::new("openssl")
                .current_dir(&pki_dir)
                .args([
                    "verify",
                    "-CAfile",
                    "root.pem",
                    "-untrusted",
                    "intermediate.pem",
                    "server.pem",
                    "client.pem",
                ])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&verify.stdout);
            assert!(
                verify.status.success(),
                "{key}: {stdout} {}",
                String::from_utf8_lossy(&verify.stderr)
            );
            assert!(
                stdout.contains("server.pem: OK") && stdout.contains("client.pem: OK"),
                "{stdout}"
            );
            let text = |file: &str| {
                let o = Command::new("openssl")
                    .current_dir(&pki_dir)
                    .args(["x509", "-noout", "-text", "-in", file])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            let server = text("server.pem");
            assert!(server.contains("TLS Web Server Authentication"), "{server}");
            assert!(server.contains("DNS:localhost"), "{server}");
            assert!(server.contains("IP Address:127.0.0.1"), "{server}");
            assert!(server.contains("IP Address:0:0:0:0:0:0:0:1"), "{server}");
            let client = text("client.pem");
            assert!(client.contains("TLS Web Client Authentication"), "{client}");
            let root = text("root.pem");
            assert!(root.contains("CA:TRUE"), "{root}");
            let int = text("intermediate.pem");
            assert!(int.contains("pathlen:0"), "{int}");
        }
    }
}

#[test]
fn per_role_keys_sans_and_days() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("p");
    let run = tlsperf([
        "pki",
        "init",
        d.to_str().unwrap(),
        "--ca-key",
        "rsa-2048",
        "--leaf-key",
        "ed25519",
        "--san",
        "api.test",
        "--san",
        "10.1.2.3",
        "--days",
        "7",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let certs = v["certificates"].as_array().unwrap();
    assert_eq!(certs[0]["key"], "rsa-2048");
    assert_eq!(certs[1]["key"], "rsa-2048");
    assert_eq!(certs[2]["key"], "ed25519");
    assert_eq!(certs[2]["subject"], "api.test");
    assert_eq!(
        certs[2]["sans"],
        serde_json::json!(["api.test", "10.1.2.3"])
    );

    let pem = std::fs::read(d.join("server.pem")).unwrap();
    let der = CertificateDer::from_pem_slice(&pem).unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let validity = cert.validity();
    let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) as f64 / 86400.0;
    assert!((days - 7.0).abs() < 0.1, "validity {days} days");
    let eku = cert.extended_key_usage().unwrap().unwrap();
    assert!(eku.value.server_auth && !eku.value.client_auth);
}

#[test]
fn refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("p");
    let d = d.to_str().unwrap();
    assert_eq!(tlsperf(["pki", "init", d, "-q"]).code, 0);
    let before = std::fs::read(dir.path().join("p/root.pem")).unwrap();
    let run = tlsperf(["pki", "init", d]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("root.pem") && run.stderr.contains("--force"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read(dir.path().join("p/root.pem")).unwrap(),
        before
    );
    let run = tlsperf(["pki", "init", d, "--force", "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "-q prints nothing: {}", run.stdout);
    assert_ne!(
        std::fs::read(dir.path().join("p/root.pem")).unwrap(),
        before
    );
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();

    // A directory that cannot be created: its parent is a regular file.
    let under_file = file.join("pki");
    let run = tlsperf(["pki", "init", under_file.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(under_file.to_str().unwrap()),
        "{}",
        run.stderr
    );

    // DIR is an existing regular file.
    let run = tlsperf(["pki", "init", file.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not a directory"), "{}", run.stderr);

    // Unknown key type.
    let d = dir.path().join("k");
    let run = tlsperf(["pki", "init", d.to_str().unwrap(), "--key", "dsa-1024"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("dsa-1024") && run.stderr.contains("ecdsa-p256"),
        "{}",
        run.stderr
    );
    assert!(!d.exists(), "nothing created on a usage error");

    // Invalid SAN.
    let run = tlsperf(["pki", "init", d.to_str().unwrap(), "--san", "bad name"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("'bad name'"), "{}", run.stderr);
    assert!(!d.exists(), "nothing created on bad input");

    // Out-of-range days.
    let run = tlsperf(["pki", "init", d.to_str().unwrap(), "--days", "0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// SIGINT or SIGTERM while `pki bundle --force` writes its output: the process dies of the
/// signal as before, but leaves no hidden temporary file (and no half-written bundle).
#[test]
fn a_signal_while_writing_leaves_no_temporary_file() {
    for (signal, number) in [("-TERM", libc::SIGTERM), ("-INT", libc::SIGINT)] {
        let mut caught = false;
        for _attempt in 0..12 {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("bundle.pem");
            std::fs::write(&out, "old\n").unwrap();
            let mut command = Command::new(common::bin());
            command
                .args([
                    "pki", "bundle", "--count", "20000", "--force", "-q", "--out",
                ])
                .arg(&out)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // The signal's default action, whatever the tests inherited: a shell runs a
            // command started with `&` with SIGINT ignored, and tlsperf rightly leaves
            // an ignored signal ignored (it would never die of it).
            // SAFETY: between fork and exec, only signal(2), which is async-signal-safe.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                    libc::signal(number, libc::SIG_DFL);
                    Ok(())
                });
            }
            let mut child = command.spawn().unwrap();
            let temp = |d: &std::path::Path| {
                std::fs::read_dir(d)
                    .unwrap()
                    .filter_map(Result::ok)
                    .any(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.starts_with(".tlsperf-") && n.ends_with(".tmp")
                    })
            };
            // Wait for the temporary file to appear, then signal at once.
            let mut seen = false;
            while child.try_wait().unwrap().is_none() {
                if temp(dir.path()) {
                    seen = true;
                    // At once (a /bin/kill spawned under a loaded CI came after the
                    // rename in all six attempts).
                    // SAFETY: signals our own child, not yet reaped.
                    unsafe {
                        libc::kill(child.id() as libc::pid_t, number);
                    }
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            let status = child.wait().unwrap();
            if !seen || status.success() {
                continue; // finished before the signal landed: try again
            }
            caught = true;
            assert!(
                std::os::unix::process::ExitStatusExt::signal(&status).is_some(),
                "{signal}: {status}"
            );
            assert!(
                !temp(dir.path()),
                "{signal}: a temporary file was left behind"
            );
            // Either the old bundle or, if the rename won the race, the whole new one.
            let now = std::fs::read_to_string(&out).unwrap();
            assert!(now == "old\n" || now.ends_with("-----END CERTIFICATE-----\n"));
            break;
        }
        assert!(caught, "{signal}: never caught the command while it wrote");
    }
}
