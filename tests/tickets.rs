//! Shared ticket keys: a ticket issued by server instance A resumes on instance B; after
//! one rotation it still resumes; after two, the handshake is full (and succeeds). Runs
//! real rustls handshakes in memory.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::sync::Arc;
use std::time::Duration;

use rustls::{
    ClientConfig, ClientConnection, HandshakeKind, RootCertStore, ServerConfig, ServerConnection,
};
use rustls_pki_types::ServerName;
use tlsperf::pki::{PkiOptions, TestPki};
use tlsperf::tls::Provider;
use tlsperf::tls::tickets::{self, TicketKeyRing};

fn server(pki: &TestPki, ring: Arc<TicketKeyRing>) -> Arc<ServerConfig> {
    let mut cfg = ServerConfig::builder_with_provider(Provider::AwsLcRs.crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.server_chain(), pki.server.private_key_der())
        .unwrap();
    cfg.ticketer = ring;
    Arc::new(cfg)
}

/// One in-memory handshake (plus the tickets sent after it); returns its kind.
fn handshake(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>) -> HandshakeKind {
    let mut c = ClientConnection::new(
        Arc::clone(client),
        ServerName::try_from("localhost").unwrap(),
    )
    .unwrap();
    let mut s = ServerConnection::new(Arc::clone(server)).unwrap();
    let mut buf = Vec::new();
    for _ in 0..20 {
        buf.clear();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        let mut rd = buf.as_slice();
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
        }
        s.process_new_packets().unwrap();
        buf.clear();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = buf.as_slice();
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
        }
        c.process_new_packets().unwrap();
        if !c.is_handshaking() && !s.is_handshaking() && !s.wants_write() {
            break;
        }
    }
    assert!(!c.is_handshaking());
    c.handshake_kind().unwrap()
}

#[test]
fn shared_ring_resumes_across_instances_and_one_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ticket.keys");
    tickets::init(&path, false).unwrap();
    let pki = TestPki::generate(&PkiOptions::default()).unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(pki.root.der.clone()).unwrap();
    let client = Arc::new(
        ClientConfig::builder_with_provider(Provider::AwsLcRs.crypto_provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let life = Duration::from_secs(3600);
    let a = server(&pki, TicketKeyRing::open(&path, life).unwrap());
    let b = server(&pki, TicketKeyRing::open(&path, life).unwrap());

    assert_eq!(handshake(&client, &a), HandshakeKind::Full);
    assert_eq!(
        handshake(&client, &b),
        HandshakeKind::Resumed,
        "B resumes A's ticket"
    );

    // One rotation: instance C reads the rotated file; tickets issued before still resume.
    tickets::rotate(&path).unwrap();
    let c = server(&pki, TicketKeyRing::open(&path, life).unwrap());
    assert_eq!(
        handshake(&client, &c),
        HandshakeKind::Resumed,
        "after one rotation"
    );

    // Two rotations: the old key is destroyed. A fresh client with only an old ticket
    // falls back to a full handshake that succeeds.
    let old_ticket_client = Arc::new((*client).clone());
    let a2 = server(&pki, TicketKeyRing::open(&path, life).unwrap());
    assert_eq!(handshake(&old_ticket_client, &a2), HandshakeKind::Resumed);
    tickets::rotate(&path).unwrap();
    tickets::rotate(&path).unwrap();
    let d = server(&pki, TicketKeyRing::open(&path, life).unwrap());
    assert_eq!(
        handshake(&old_ticket_client, &d),
        HandshakeKind::Full,
        "after two rotations"
    );
}

#[test]
fn cli_init_rotate_show_never_print_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.keys");
    let p = path.to_str().unwrap();
    let run = common::tlsperf(["tickets", "init", p]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("active") && run.stdout.contains("standby"),
        "{}",
        run.stdout
    );
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let secrets: Vec<String> = file["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["secret"].as_str().unwrap().to_string())
        .collect();
    for args in [
        vec!["tickets", "show", p],
        vec!["tickets", "rotate", p],
        vec!["tickets", "show", p, "--json"],
        vec!["-vvv", "tickets", "rotate", p],
    ] {
        let run = common::tlsperf(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        for s in &secrets {
            assert!(
                !run.stdout.contains(s.as_str()) && !run.stderr.contains(s.as_str()),
                "{args:?} printed a secret"
            );
        }
    }
    let v: serde_json::Value =
        serde_json::from_str(&common::tlsperf(["tickets", "show", p, "--json"]).stdout).unwrap();
    assert_eq!(v["keys"].as_array().unwrap().len(), 3);
    let run = common::tlsperf(["tickets", "init", p]);
    assert_eq!(run.code, 2, "refuses to overwrite");
    let bad = dir.path().join("bad.keys");
    std::fs::write(&bad, "{}").unwrap();
    let run = common::tlsperf(["tickets", "rotate", bad.to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("bad.keys"), "{}", run.stderr);
    let run = common::tlsperf([
        "tickets",
        "show",
        dir.path().join("missing").to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2);
}

/// Rotating the key ring while `tlsperf load` resumes by ticket against `tlsperf serve`:
/// no handshake fails; tickets whose key was destroyed fall back to full handshakes.
#[test]
fn rotating_keys_under_load_fails_no_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("ring.json");
    let ca = dir.path().join("ca.pem");
    let r = common::tlsperf(["tickets", "init", ring.to_str().unwrap(), "-q"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let s = common::Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        ca.to_str().unwrap(),
        "--resumption",
        "tickets",
        "--ticket-keys",
        ring.to_str().unwrap(),
    ]);
    let load = std::process::Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args(["load", &s.url(), "--cacert", ca.to_str().unwrap()])
        .args([
            "-d",
            "4s",
            "-c",
            "4",
            "--new-conn",
            "--resume",
            "tickets",
            "--json",
        ])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Three rotations during the run: the first key ends destroyed.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(900));
        let r = common::tlsperf(["tickets", "rotate", ring.to_str().unwrap(), "-q"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let out = load.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"]["failed"], 0, "{}", v["errors"]);
    let kinds = &v["handshakes"]["kinds"];
    let resumed = kinds["resumed-ticket"].as_u64().unwrap_or(0);
    let full = kinds["full"].as_u64().unwrap_or(0);
    assert!(resumed > 100, "{kinds}");
    // Each slot's first handshake, plus those whose ticket's key was destroyed.
    assert!(full >= 4, "{kinds}");
}

/// `tickets rotate LINK` where LINK is a symbolic link to the shared ring rotates the
/// shared ring and keeps the link (replacing it would leave the shared ring unrotated and
/// this instance on a ring of its own).
#[test]
fn rotating_through_a_symlink_rotates_the_shared_ring() {
    let dir = tempfile::tempdir().unwrap();
    let shared_dir = dir.path().join("shared");
    std::fs::create_dir(&shared_dir).unwrap();
    let shared = shared_dir.join("ring.json");
    let link = dir.path().join("ring.json");
    assert_eq!(
        common::tlsperf(["tickets", "init", shared.to_str().unwrap(), "-q"]).code,
        0
    );
    std::os::unix::fs::symlink("shared/ring.json", &link).unwrap();
    let ids = |p: &std::path::Path| -> Vec<String> {
        let run = common::tlsperf(["tickets", "show", p.to_str().unwrap(), "--json"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        v["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| format!("{}={}", k["id"], k["state"]))
            .collect()
    };
    let still_a_link = || {
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    };
    let before = ids(&shared);
    let run = common::tlsperf(["tickets", "rotate", link.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(still_a_link(), "the link was replaced by a file");
    let after = ids(&shared);
    assert_ne!(before, after, "the shared ring was not rotated");
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(ids(&link), after);
    // `init --force` through the link makes a new shared ring, and keeps the link too.
    let run = common::tlsperf(["tickets", "init", link.to_str().unwrap(), "--force", "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(still_a_link(), "init --force replaced the link by a file");
    let fresh = ids(&shared);
    assert_eq!(fresh.len(), 2, "{fresh:?}");
    assert!(
        fresh.iter().all(|k| !after.contains(k)),
        "{fresh:?} {after:?}"
    );
    assert_eq!(ids(&link), fresh);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&shared).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // No temporary file left beside either.
    for d in [dir.path(), shared_dir.as_path()] {
        for e in std::fs::read_dir(d).unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!n.ends_with(".tmp"), "{n} left in {}", d.display());
        }
    }
}
