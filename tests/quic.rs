//! `tlsperf serve --quic`: HTTP/3 over QUIC beside TCP, checked with other stacks' clients:
//! ngtcp2's example client (GnuTLS; Debian's ngtcp2-client, `gtlsclient`), which does not
//! verify the server's certificate, and aioquic's (tests/quic/h3_get.py), which does,
//! against the test PKI. The server's own /stats and /metrics must count what the clients
//! did: full, resumed, 0-RTT, the group, client certificates.
//!
//! Everything runs on 127.0.0.1; every client run is bounded (`timeout`, and the clients'
//! own handshake and idle timeouts).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::{Serve, missing, tlsperf};
use serde_json::Value;

/// ngtcp2's HTTP/3 example client on GnuTLS (Debian: ngtcp2-client).
const NGTCP2_CLIENT: &str = "gtlsclient";

/// Whether ngtcp2's client is installed (it has no `--version`; `--help` exits 0).
fn have_ngtcp2_client(what: &str) -> bool {
    let ok = Command::new(NGTCP2_CLIENT)
        .arg("--help")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        missing("gtlsclient (Debian package ngtcp2-client)", what);
    }
    ok
}

/// Whether python3 has aioquic (PyPI: aioquic).
fn have_aioquic(what: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import aioquic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        missing("aioquic (python3 -m pip install aioquic)", what);
    }
    ok
}

/// A test PKI of `key_type` in `dir/NAME`.
fn pki(dir: &Path, name: &str, key_type: &str) -> String {
    let d = dir.join(name);
    let run = tlsperf([
        "pki",
        "init",
        d.to_str().unwrap(),
        "--key-type",
        key_type,
        "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    d.to_str().unwrap().to_string()
}

/// `serve --quic` with `pki`'s server certificate, a metrics listener, then `extra`.
fn serve(pki: &str, extra: &[&str]) -> Serve {
    let chain = format!("{pki}/server-chain.pem");
    let key = format!("{pki}/server.key");
    let mut args = vec![
        "--cert",
        &chain,
        "--key",
        &key,
        "--quic",
        "--metrics",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let s = Serve::start(&args);
    assert_eq!(
        s.listening["quic"].as_str(),
        Some(format!("127.0.0.1:{}", s.port).as_str()),
        "HTTP/3 on the TCP port: {}",
        s.listening
    );
    s
}

/// The body of `GET path` on the metrics listener.
fn metrics_get(s: &Serve, path: &str) -> String {
    let addr = s.listening["metrics"].as_str().unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(c, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// /stats.
fn stats(s: &Serve) -> Value {
    serde_json::from_str(&metrics_get(s, "/stats")).unwrap()
}

/// The QUIC handshakes /stats counted, by kind (`all` left out).
fn quic_counts(s: &Serve) -> BTreeMap<String, u64> {
    let st = stats(s);
    st["quic_handshakes"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| *k != "all")
                .map(|(k, v)| (k.clone(), v["count"].as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// The QUIC handshakes counted, once they are `pairs` or 5 s have passed: with 0-RTT
/// on, the server answers before the handshake completes, so a client can be done a
/// moment before its handshake is counted.
fn counts_become(
    s: &Serve,
    pairs: &[(&str, u64)],
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let want: BTreeMap<String, u64> = pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let got = quic_counts(s);
        if got == want || std::time::Instant::now() > deadline {
            return (got, want);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// ngtcp2's client: `GET /` over HTTP/3 to 127.0.0.1:`port` (SNI localhost), `extra`
/// first; its output (it logs to stdout) and exit status. Bounded: 5 s handshake and idle
/// timeouts, and `timeout 30`.
fn ngtcp2_get(port: u16, extra: &[&str]) -> (bool, String) {
    let port = port.to_string();
    let url = format!("https://localhost:{port}/");
    let out: Output = Command::new("timeout")
        .args([
            "30",
            NGTCP2_CLIENT,
            "--exit-on-all-streams-close",
            "--handshake-timeout=5s",
            "--timeout=5s",
            "--no-quic-dump",
        ])
        .args(extra)
        .args(["127.0.0.1", &port, &url])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `ngtcp2_get`, which must succeed with serve's answer ([`assert_answered`]): what the
/// client printed.
fn ngtcp2_answered(port: u16, extra: &[&str]) -> String {
    let (ok, text) = ngtcp2_get(port, extra);
    assert!(ok, "{text}");
    assert_answered(&text);
    text
}

/// The response ngtcp2's client printed was a 200 with serve's body.
fn assert_answered(text: &str) {
    assert!(text.contains("[:status: 200]"), "{text}");
    assert!(text.contains("body 15 bytes"), "{text}");
    assert!(text.contains(r#"{"status":"ok"}"#), "{text}");
}

#[test]
fn ngtcp2_gets_http3_full_then_resumed_then_in_0rtt_with_ecdsa_and_rsa_certificates() {
    if !have_ngtcp2_client("serve --quic against ngtcp2's client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for key_type in ["ecdsa-p256", "rsa-2048"] {
        let pki = pki(dir.path(), key_type, key_type);
        let s = serve(&pki, &["--early-data", "16384"]);
        let session = dir.path().join(format!("{key_type}.session"));
        let tp = dir.path().join(format!("{key_type}.tp"));
        let (session, tp) = (session.to_str().unwrap(), tp.to_str().unwrap());
        let files = ["--session-file", session, "--tp-file", tp];

        // A new connection saves the session ticket and transport parameters.
        let (ok, text) = ngtcp2_get(s.port, &files);
        assert!(ok, "{key_type}: {text}");
        assert_answered(&text);
        let (got, want) = counts_become(&s, &[("full", 1)]);
        assert_eq!(got, want, "{key_type}");

        // Resumed with the ticket, no early data.
        let (ok, text) = ngtcp2_get(s.port, &[&files[..], &["--disable-early-data"]].concat());
        assert!(ok, "{key_type}: {text}");
        assert_answered(&text);
        let (got, want) = counts_become(&s, &[("full", 1), ("resumed", 1)]);
        assert_eq!(got, want, "{key_type}");

        // Resumed with the request in 0-RTT packets, accepted.
        let (ok, text) = ngtcp2_get(s.port, &files);
        assert!(ok, "{key_type}: {text}");
        assert_answered(&text);
        assert!(text.contains("type=0RTT"), "no 0-RTT packet sent: {text}");
        let (got, want) = counts_become(&s, &[("full", 1), ("resumed", 1), ("0rtt", 1)]);
        assert_eq!(got, want, "{key_type}");
        let st = stats(&s);
        assert_eq!(st["requests"], 3, "{st}");
        // Counted with every handshake, TCP's too.
        assert_eq!(st["handshakes"]["all"]["count"], 3, "{st}");
        let m = metrics_get(&s, "/metrics");
        assert!(
            m.contains(
                r#"tlsperf_handshake_duration_seconds_count{kind="0rtt",version="TLSv1.3",group="x25519",suite="TLS13_AES_128_GCM_SHA256",client_auth="no",resumption="ticket",transport="quic"} 1"#
            ),
            "{m}"
        );
    }
}

/// serve --quic sends HTTP/3's control stream (its SETTINGS) with its first flight, at
/// 0.5-RTT, not in a datagram of its own after the handshake: ngtcp2's client reads it
/// before HANDSHAKE_DONE, which a server sends only once the client's Finished is in —
/// with and without 0.5-RTT answers (`--early-data`) and with client certificates asked
/// for (SETTINGS need no client authentication; requests still wait for it).
#[test]
fn http3_settings_leave_with_the_servers_first_flight() {
    if !have_ngtcp2_client("serve --quic's first flight") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "p", "ecdsa-p256");
    let (cert, key) = (
        format!("{pki}/client-chain.pem"),
        format!("{pki}/client.key"),
    );
    let ca = format!("{pki}/root.pem");
    let cases: [(&[&str], &[&str]); 3] = [
        (&[], &[]),
        (&["--early-data", "16384"], &[]),
        (
            &["--client-auth", "required", "--client-ca", &ca],
            &["--cert", &cert, "--key", &key],
        ),
    ];
    for (serve_args, client_args) in cases {
        let s = serve(&pki, serve_args);
        let (ok, text) = ngtcp2_get(s.port, client_args);
        assert!(ok, "{serve_args:?}: {text}");
        assert_answered(&text);
        let rx = |what: &dyn Fn(&str) -> bool| {
            text.lines()
                .position(|l| l.contains(" frm rx ") && what(l))
                .unwrap_or_else(|| panic!("{serve_args:?}: not received: {text}"))
        };
        // The server's first unidirectional stream: its control stream.
        let control = rx(&|l| l.contains(" STREAM(") && l.contains(" id=0x3 "));
        let done = rx(&|l| l.contains(" HANDSHAKE_DONE("));
        assert!(
            control < done,
            "{serve_args:?}: the control stream came after HANDSHAKE_DONE: {text}"
        );
    }
}

/// An answer ready at once (a `GET /`) is written before quinn's connection driver runs
/// again: it leaves in the same packet as what the connection's task wrote just before it
/// (h3's grease stream, written when the client's SETTINGS are read), not in a packet of
/// its own after a task switch. One thread, so that no other worker's driver can send in
/// between.
#[test]
fn a_ready_answer_shares_its_packet_with_what_came_before_it() {
    if !have_ngtcp2_client("serve --quic's answer packets") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "p", "ecdsa-p256");
    let s = serve(&pki, &["--threads", "1"]);
    let text = ngtcp2_answered(s.port, &[]);
    // The packet number a frame came in: "… frm rx PKN 1RTT STREAM(0x0b) id=0x0 …".
    let pkn = |stream: &str| {
        text.lines()
            .find(|l| l.contains(" frm rx ") && l.contains(" STREAM(") && l.contains(stream))
            .and_then(|l| l.split(" frm rx ").nth(1))
            .and_then(|l| l.split_whitespace().next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no STREAM{stream} received: {text}"))
    };
    // The client's request stream (0) and the server's grease stream (its fourth
    // unidirectional one, 0xf).
    assert_eq!(pkn(" id=0x0 "), pkn(" id=0xf "), "{text}");
}

#[test]
fn the_server_groups_apply_to_quic_and_a_hello_retry_is_counted() {
    if !have_ngtcp2_client("--groups over QUIC against ngtcp2's client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    // ngtcp2's client sends an x25519 key share: the server asks for secp384r1 instead.
    let s = serve(&pki, &["--groups", "secp384r1"]);
    ngtcp2_answered(s.port, &[]);
    let (got, want) = counts_become(&s, &[("full-hrr", 1)]);
    assert_eq!(got, want);
    let m = metrics_get(&s, "/metrics");
    assert!(
        m.contains(r#"kind="full-hrr",version="TLSv1.3",group="secp384r1""#),
        "{m}"
    );
}

#[test]
fn client_certificates_are_asked_for_over_quic_too() {
    if !have_ngtcp2_client("--client-auth over QUIC against ngtcp2's client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &["--client-auth", "required", "--client-ca", &root]);
    let cert = format!("{pki}/client-chain.pem");
    let key = format!("{pki}/client.key");
    ngtcp2_answered(s.port, &["--cert", &cert, "--key", &key]);
    let m = metrics_get(&s, "/metrics");
    assert!(
        m.contains(r#"client_auth="yes",resumption="none",transport="quic"} 1"#),
        "{m}"
    );
    // Without a certificate: refused, and counted as a failure.
    let (_, text) = ngtcp2_get(s.port, &[]);
    assert!(!text.contains("[:status: 200]"), "{text}");
    let st = stats(&s);
    assert_eq!(st["quic_handshakes"]["all"]["count"], 1, "{st}");
    assert_eq!(st["failures"]["bad-client-certificate"], 1, "{st}");
}

#[test]
fn quic_retry_validates_the_address_before_the_handshake() {
    if !have_ngtcp2_client("--quic-retry against ngtcp2's client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let s = serve(&pki, &["--quic-retry"]);
    let text = ngtcp2_answered(s.port, &[]);
    assert!(text.contains("type=Retry"), "no Retry received: {text}");
    let (got, want) = counts_become(&s, &[("full", 1)]);
    assert_eq!(got, want);
    // Without the flag, no Retry.
    let plain = serve(&pki, &[]);
    let (ok, text) = ngtcp2_get(plain.port, &[]);
    assert!(ok && !text.contains("type=Retry"), "{text}");
}

#[test]
fn aioquic_verifies_the_chain_and_resumes_in_0rtt() {
    if !have_aioquic("serve --quic against aioquic's client") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let other = pki(dir.path(), "other", "ecdsa-p256");
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let s = serve(&pki, &["--early-data", "16384"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/quic/h3_get.py");
    let get = |ca: &str, extra: &[&str]| {
        Command::new("timeout")
            .args([
                "60",
                "python3",
                script,
                "127.0.0.1",
                &s.port.to_string(),
                ca,
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = get(
        &format!("{pki}/root.pem"),
        &["--connections", "3", "--zero-rtt"],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["status"], 200, "{stdout}");
        assert_eq!(l["body_len"], 15, "{stdout}");
        assert_eq!(l["resumed"], i > 0, "{stdout}");
    }
    let (got, want) = counts_become(&s, &[("full", 1), ("0rtt", 2)]);
    assert_eq!(got, want);
    // A chain that does not lead to the client's root is refused by the client.
    let out = get(&format!("{other}/root.pem"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "verified against the wrong root");
    assert!(stderr.contains("certificate"), "{stderr}");
    let st = stats(&s);
    assert_eq!(st["quic_handshakes"]["all"]["count"], 3, "{st}");
}

/// An HTTP/3 upload a byte every 0.3 s is cut as one over TCP is: answered 408 within two
/// windows of `--body-timeout` (each must bring `--body-min-rate` × the window) and
/// counted as body-timeout; before, the server read it for as long as the client sent.
#[test]
fn a_trickling_http3_upload_is_cut_as_over_tcp() {
    if !have_aioquic("an HTTP/3 upload trickled to serve --quic") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let s = serve(&pki, &["--body-timeout", "1s"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/quic/h3_get.py");
    let out = Command::new("timeout")
        .args(["60", "python3", script, "127.0.0.1", &s.port.to_string()])
        .arg(format!("{pki}/root.pem"))
        .args(["--trickle", "10"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["status"], 408, "{stdout}");
    let took = line["answered_after_s"].as_f64().unwrap();
    // The bound of the server's own rule, not a performance figure: two 1-s windows.
    assert!(took < 5.0, "answered after {took} s");
    let st = stats(&s);
    assert_eq!(st["failures"]["body-timeout"], 1, "{st}");
}

#[test]
fn tcp_answers_advertise_http3_only_with_quic() {
    if !common::have("curl", "the Alt-Svc header") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let headers = |port: u16, path: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-D", "-"])
            .args(["--cacert", &root])
            .arg(format!("https://localhost:{port}{path}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_lowercase()
    };
    for stack in ["hyper", "axum"] {
        let s = serve(&pki, &["--stack", stack]);
        for path in ["/", "/health", "/nowhere"] {
            let h = headers(s.port, path);
            assert!(
                h.contains(&format!("alt-svc: h3=\":{}\"", s.port)),
                "{stack} {path}: {h}"
            );
        }
    }
    let chain = format!("{pki}/server-chain.pem");
    let key = format!("{pki}/server.key");
    let tcp_only = Serve::start(&["--cert", &chain, "--key", &key]);
    assert!(tcp_only.listening.get("quic").is_none());
    assert!(!headers(tcp_only.port, "/").contains("alt-svc"));
}

#[test]
fn quic_needs_tls13_and_our_accept_loop() {
    let run = tlsperf(["serve", "--quic", "--tls", "1.2", "--listen", "127.0.0.1:0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("TLS 1.3"), "{}", run.stderr);
    let run = tlsperf([
        "serve",
        "--quic",
        "--stack",
        "actix",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--stack actix"), "{}", run.stderr);
    let run = tlsperf(["serve", "--quic-retry", "--listen", "127.0.0.1:0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--quic"), "{}", run.stderr);
}

/// `tlsperf handshake --http3 URL ARGS --json` (60 s at most): its document.
fn handshake_http3(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["handshake", "--http3", url, "--json"];
    all.extend_from_slice(args);
    let run = common::tlsperf_env(&all, &[], Duration::from_secs(60));
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

/// The run's phases are there, the segments add up to the total, and the handshake's
/// steps took time.
fn assert_phases(conn: &Value) {
    let p = &conn["phases_ms"];
    let segments = [
        "dns",
        "connect",
        "client_hello",
        "server_hello",
        "certificate",
        "handshake_finish",
        "request",
        "first_byte",
        "body",
    ];
    let sum: f64 = segments.iter().map(|s| p[*s].as_f64().unwrap()).sum();
    let total = p["total"].as_f64().unwrap();
    assert!((sum - total).abs() < 1e-6 && total > 0.0, "{p}");
    assert!(p["server_hello"].as_f64().unwrap() > 0.0, "{p}");
    assert!(p["tls"].as_f64().unwrap() > 0.0, "{p}");
}

/// `handshake --http3` says which connections a Retry took a round trip from: every one
/// against `serve --quic-retry`, none against the same server without it.
#[test]
fn handshake_http3_counts_the_retries_it_met() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    for (flags, retried) in [(&["--quic-retry"][..], true), (&[][..], false)] {
        let s = serve(&pki, flags);
        let url = format!("https://localhost:{}/", s.port);
        let d = handshake_http3(&url, &["-n", "3", "--cacert", &root]);
        assert_eq!(d["cold"]["quic_retry"], retried, "{flags:?}: {}", d["cold"]);
        let want = if retried { 2 } else { 0 };
        assert_eq!(d["warm"]["quic_retries"], want, "{flags:?}: {}", d["warm"]);
        if retried {
            assert_eq!(
                stats(&s)["quic_retry"]["retries"],
                3,
                "the server's own count of Retry packets sent"
            );
        }
    }
    // Over TCP the fields are absent.
    let s = serve(&pki, &[]);
    let url = format!("https://localhost:{}/", s.port);
    let run = common::tlsperf_env(
        ["handshake", &url, "--json", "-n", "2", "--cacert", &root],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let d: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(d["cold"].get("quic_retry").is_none(), "{}", d["cold"]);
    assert!(d["warm"].get("quic_retries").is_none(), "{}", d["warm"]);
}

#[test]
fn handshake_http3_against_serve_quic_full_resumed_and_0rtt() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &["--early-data", "16384"]);
    let url = format!("https://localhost:{}/", s.port);
    let d = handshake_http3(&url, &["-n", "4", "--cacert", &root]);
    assert_eq!(d["transport"], "quic", "{d}");
    assert_eq!(d["negotiated"]["version"], "TLSv1.3", "{d}");
    assert_eq!(d["negotiated"]["alpn"], "h3", "{d}");
    assert_eq!(d["negotiated"]["group"], "x25519", "{d}");
    assert_eq!(
        d["negotiated"]["signature_scheme"], "ECDSA_NISTP256_SHA256",
        "{d}"
    );
    assert_eq!(d["chain"].as_array().unwrap().len(), 2, "{d}");
    assert_eq!(d["cold"]["kind"], "full", "{d}");
    assert_eq!(d["cold"]["status"], 200, "{d}");
    assert_phases(&d["cold"]);
    assert!(d["cold"]["phases_ms"]["certificate"].as_f64().unwrap() > 0.0);
    assert!(d["cold"]["phases_ms"]["verify"].as_f64().unwrap() > 0.0);
    assert!(d["client_hello_bytes"].as_u64().unwrap() > 200, "{d}");
    assert!(d["server_flight_bytes"].as_u64().unwrap() > 900, "{d}");
    assert_eq!(d["warm"]["kinds"]["resumed-ticket"], 3, "{d}");
    let (got, want) = counts_become(&s, &[("full", 1), ("resumed", 3)]);
    assert_eq!(got, want);

    // Every warm connection sends its request in 0-RTT, accepted.
    let d = handshake_http3(&url, &["-n", "3", "--cacert", &root, "--early-data"]);
    assert_eq!(d["warm"]["kinds"]["resumed-ticket"], 2, "{d}");
    assert_eq!(d["warm"]["early_data_accepted"], 2, "{d}");
    assert_eq!(d["warm"]["early_data_rejected"], 0, "{d}");
    let (got, want) = counts_become(&s, &[("full", 2), ("resumed", 3), ("0rtt", 2)]);
    assert_eq!(got, want);

    // Verification is on: another root refuses the server, in words.
    let other = pki_of(dir.path(), "other");
    let run = common::tlsperf_env(
        [
            "handshake",
            "--http3",
            &url,
            "-n",
            "1",
            "--cacert",
            &format!("{other}/root.pem"),
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("does not chain to a trusted root"),
        "{}",
        run.stderr
    );
}

fn pki_of(dir: &Path, name: &str) -> String {
    pki(dir, name, "ecdsa-p256")
}

/// ngtcp2's example server (GnuTLS; Debian: ngtcp2-server), serving `htdocs`.
struct Ngtcp2Server {
    child: std::process::Child,
    port: u16,
}

impl Drop for Ngtcp2Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ngtcp2_server(pki: &str, htdocs: &Path) -> Option<Ngtcp2Server> {
    let bin = ["/usr/sbin/gtlsserver", "/usr/bin/gtlsserver"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(bin) = bin else {
        missing(
            "gtlsserver (Debian package ngtcp2-server)",
            "handshake --http3 against ngtcp2's server",
        );
        return None;
    };
    // A free UDP port: bound, then released for the server.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args(["-q", "-d", htdocs.to_str().unwrap(), "127.0.0.1"])
        .arg(port.to_string())
        .arg(format!("{pki}/server.key"))
        .arg(format!("{pki}/server-chain.pem"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    Some(Ngtcp2Server { child, port })
}

#[test]
fn handshake_http3_against_ngtcp2s_server() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let htdocs = dir.path().join("htdocs");
    std::fs::create_dir(&htdocs).unwrap();
    std::fs::write(htdocs.join("index.html"), r#"{"status":"ok"}"#).unwrap();
    let Some(server) = ngtcp2_server(&pki, &htdocs) else {
        return;
    };
    let url = format!("https://localhost:{}/", server.port);
    let root = format!("{pki}/root.pem");
    let d = handshake_http3(&url, &["-n", "3", "--cacert", &root]);
    assert_eq!(d["transport"], "quic", "{d}");
    assert_eq!(d["cold"]["kind"], "full", "{d}");
    assert_eq!(d["cold"]["status"], 200, "{d}");
    assert_eq!(d["negotiated"]["alpn"], "h3", "{d}");
    assert_eq!(d["chain"].as_array().unwrap().len(), 2, "{d}");
    assert_phases(&d["cold"]);
    // GnuTLS sends its session ticket after the handshake: the client waits for it.
    assert_eq!(d["warm"]["kinds"]["resumed-ticket"], 2, "{d}");
    // 0-RTT: accepted by ngtcp2's server for the connections that resumed with it.
    let d = handshake_http3(&url, &["-n", "4", "--cacert", &root, "--early-data"]);
    assert!(
        d["warm"]["early_data_accepted"].as_u64().unwrap() >= 1,
        "{d}"
    );
    assert_eq!(d["warm"]["early_data_rejected"], 0, "{d}");
}

#[test]
fn handshake_http3_refuses_what_quic_cannot_do() {
    for (args, says) in [
        (&["--tls", "1.2"][..], "TLS 1.3"),
        (&["--resume", "ids"][..], "--resume ids"),
        (&["--body-size", "100"][..], "--body-size"),
    ] {
        let mut all = vec!["handshake", "--http3", "https://localhost:1/"];
        all.extend_from_slice(args);
        let run = tlsperf(&all);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}

// Hostile QUIC (issue 59): Initials from addresses that never answer, malformed datagrams
// and garbage frames, sent from many loopback source addresses (tests/common/quic_flood.rs).

#[path = "common/quic_flood.rs"]
mod quic_flood;

use quic_flood::{Initials, Reply};

/// The server's UDP address.
fn quic_addr(s: &Serve) -> std::net::SocketAddr {
    format!("127.0.0.1:{}", s.port).parse().unwrap()
}

/// A process's resident memory (KiB), from /proc.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// /stats's `quic_retry.unvalidated_handshakes`, once it is `want` or 10 s have passed.
fn unvalidated_becomes(s: &Serve, want: i64) -> i64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = stats(s)["quic_retry"]["unvalidated_handshakes"]
            .as_i64()
            .unwrap();
        if now == want || std::time::Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A flood of Initials from 64 addresses that never answer, at `--quic-retry-above 16`:
/// the first 16 get the server's flight, the 48 after them a Retry (without a flag
/// asking for it), counted in /stats; a real client meanwhile is served (its Retry
/// answered with the token); once the flood's handshakes time out, no more Retry.
#[test]
fn a_flood_of_initials_from_many_addresses_engages_retry_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(
        &pki,
        &["--quic-retry-above", "16", "--handshake-timeout", "5s"],
    );
    let st = stats(&s);
    assert_eq!(
        st["quic_retry"]["policy"], "above 16 unvalidated handshakes",
        "{st}"
    );
    let server = quic_addr(&s);
    let mut initials = Initials::new(server);
    let sockets: Vec<_> = (0..64)
        .map(|i| quic_flood::socket_on(quic_flood::source(3, i), Duration::from_millis(50)))
        .collect();
    for sock in &sockets {
        sock.send_to(&initials.initial(), server).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let (mut answered, mut retried) = (0, 0);
    for sock in &sockets {
        // Everything has arrived by now: a short quiet time each.
        let got = quic_flood::drain(sock, Duration::from_millis(5), Duration::from_secs(1));
        if got.iter().any(|(_, k)| *k == Reply::Retry) {
            retried += 1;
        } else if got.iter().any(|(_, k)| *k == Reply::Initial) {
            answered += 1;
        }
    }
    assert_eq!((answered, retried), (16, 48), "flight, Retry");
    let st = stats(&s);
    assert_eq!(st["quic_retry"]["retries"], 48, "{st}");
    assert_eq!(st["quic_retry"]["unvalidated_handshakes"], 16, "{st}");
    let metrics = metrics_get(&s, "/metrics");
    assert!(
        metrics.contains("tlsperf_quic_retries_total 48"),
        "{metrics}"
    );
    // A real client during the flood: retried, back with the token, served.
    let url = format!("https://localhost:{}/", s.port);
    let d = handshake_http3(&url, &["-n", "2", "--cacert", &root]);
    assert_eq!(d["cold"]["status"], 200, "{d}");
    // Each of its connections was retried (a new endpoint each: no token kept between
    // them), or the second came back with the first's NEW_TOKEN.
    let st = stats(&s);
    let retries = st["quic_retry"]["retries"].as_u64().unwrap();
    assert!((49..=50).contains(&retries), "{st}");
    assert_eq!(st["quic_retry"]["unvalidated_handshakes"], 16, "{st}");
    // The flood's handshakes time out: nothing under way, and a new address is answered
    // with the server's flight again.
    assert_eq!(unvalidated_becomes(&s, 0), 0);
    let late = quic_flood::socket_on(quic_flood::source(3, 100), Duration::from_millis(50));
    late.send_to(&initials.initial(), server).unwrap();
    let got = quic_flood::drain(&late, Duration::from_millis(300), Duration::from_secs(2));
    assert_eq!(got.first().map(|g| g.1), Some(Reply::Initial), "{got:?}");
    assert_eq!(stats(&s)["quic_retry"]["retries"], retries);
}

/// RFC 9000 §8: before an address is validated, the server sends it at most three times
/// the bytes it received. A server whose first flight is bigger than that (a certificate
/// with 200 names: a real client gets ~6 KB) sends an address that sent one Initial and
/// never answers no more than 3 × 1,200 bytes, retransmissions included.
#[test]
fn an_address_that_never_answers_gets_at_most_three_times_what_it_sent() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    let mut args = vec![
        "pki".to_string(),
        "init".into(),
        big.to_str().unwrap().into(),
        "-q".into(),
        "--san".into(),
        "localhost".into(),
    ];
    for i in 0..200 {
        args.push("--san".into());
        args.push(format!("host-{i:04}.tlsperf.test"));
    }
    let run = tlsperf(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let pki = big.to_str().unwrap().to_string();
    let s = serve(&pki, &[]);
    let url = format!("https://localhost:{}/", s.port);
    let d = handshake_http3(&url, &["-n", "1", "--cacert", &format!("{pki}/root.pem")]);
    let flight = d["server_flight_bytes"].as_u64().unwrap() as usize;
    assert!(
        flight > 3 * 1200,
        "the flight ({flight} bytes) is within the limit anyway"
    );
    let server = quic_addr(&s);
    let mut initials = Initials::new(server);
    let sources: Vec<_> = (0..5)
        .map(|i| {
            let sock = quic_flood::socket_on(quic_flood::source(4, i), Duration::from_millis(50));
            let initial = initials.initial();
            sock.send_to(&initial, server).unwrap();
            (sock, initial.len())
        })
        .collect();
    // Past two probe timeouts (quinn's first is about 1 s): retransmissions would come.
    std::thread::sleep(Duration::from_secs(4));
    for (sock, sent) in &sources {
        let got = quic_flood::drain(sock, Duration::from_millis(50), Duration::from_secs(2));
        let received: usize = got.iter().map(|g| g.0).sum();
        eprintln!(
            "sent {sent} bytes, received {received} bytes in {} datagrams (server flight to a real client: {flight} TLS bytes)",
            got.len()
        );
        assert!(
            received > *sent && received <= 3 * sent,
            "sent {sent} bytes, received {received} bytes in {} datagrams",
            got.len()
        );
    }
}

/// Malformed datagrams (truncated and altered Initials, unknown versions, garbage, the
/// largest datagram), Initials whose frames are garbage under correct packet protection
/// (so that the server's frame parser meets them), and a flood of 3,000 genuine Initials
/// from 3,000 addresses that never answer: no panic, the server's memory grows by less
/// than 40 MiB (the flood beyond `--quic-retry-above` gets Retry packets, which keep no
/// state), and a real client is served afterwards.
#[test]
fn malformed_datagrams_garbage_frames_and_a_flood_neither_panic_nor_grow_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &[]);
    let url = format!("https://localhost:{}/", s.port);
    handshake_http3(&url, &["-n", "2", "--cacert", &root]);
    let before = rss_kib(s.pid());
    let server = quic_addr(&s);
    let mut initials = Initials::new(server);
    let mut hostile = Vec::new();
    for round in 0..40u64 {
        for (_, d) in quic_flood::malformed(&initials.initial(), round + 1) {
            hostile.push(d);
        }
        // Each its own connection ID (8 to 20 bytes, the last two its round and kind): a new connection each, whose first
        // packet the server decrypts and parses.
        for (k, (_, frames)) in quic_flood::garbage_frames(round + 7)
            .into_iter()
            .enumerate()
        {
            let dcid: Vec<u8> = (0..6 + (round + k as u64) % 13)
                .map(|i| (round * 8 + k as u64 + i * 17) as u8)
                .chain([round as u8, k as u8])
                .collect();
            hostile.push(quic_flood::initial_with_frames(&dcid, &frames));
        }
    }
    let n_hostile = hostile.len();
    quic_flood::send_spoofed(server, 5, &hostile, 2);
    let flood: Vec<Vec<u8>> = (0..3000).map(|_| initials.initial()).collect();
    quic_flood::send_spoofed(server, 6, &flood, 4);
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(s.pid());
    let d = handshake_http3(&url, &["-n", "2", "--cacert", &root]);
    assert_eq!(d["cold"]["status"], 200, "{d}");
    let st = stats(&s);
    let err = s.stderr();
    assert!(!err.contains("panicked"), "{err}");
    // The garbage frames reached the parser: their connections closed on errors.
    let errors = st["failures"]["protocol-error"].as_u64().unwrap_or(0);
    eprintln!("{n_hostile} hostile datagrams; memory {before} KiB before, {after} KiB after; {st}");
    // 40 rounds of 8 garbage-frame Initials, each a connection of its own: all but the
    // random frames are errors whatever the bytes.
    assert!(errors >= 7 * 40, "{n_hostile} hostile datagrams, {st}");
    // Without Retry (--quic-retry-above 10000000) the same flood holds ~3,000
    // handshakes' state: the server grew by 109 MiB in one run.
    assert!(
        after < before + 40 * 1024,
        "the server grew from {before} KiB to {after} KiB: {st}"
    );
    assert!(
        st["quic_retry"]["retries"].as_u64().unwrap() >= 2500,
        "the flood was not answered with Retry packets: {st}"
    );
}

/// A long-header packet of version `version` in a datagram of `len` bytes (its
/// connection IDs 8 bytes each, the rest zeros).
fn unknown_version_initial(version: u32, len: usize) -> Vec<u8> {
    let mut d = vec![0xc0];
    d.extend_from_slice(&version.to_be_bytes());
    d.push(8);
    d.extend_from_slice(&[0x11; 8]);
    d.push(8);
    d.extend_from_slice(&[0x22; 8]);
    d.resize(len, 0);
    d
}

/// An Initial of a version serve does not speak is answered with a Version Negotiation
/// listing version 1, counted in /stats and /metrics; one in a
/// datagram under 1,200 bytes gets nothing and is not counted; a client of version 1
/// is served as before.
#[test]
fn version_negotiation_is_answered_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &[]);
    assert_eq!(stats(&s)["quic_retry"]["version_negotiations"], 0);
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let server = quic_addr(&s);
    let mut buf = [0u8; 2048];
    // Too short to be answered (RFC 9000 §5.2.2).
    sock.send_to(&unknown_version_initial(0x1a2a_3a4a, 1199), server)
        .unwrap();
    assert!(
        sock.recv_from(&mut buf).is_err(),
        "a short datagram was answered"
    );
    sock.send_to(&unknown_version_initial(0x1a2a_3a4a, 1200), server)
        .unwrap();
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("no Version Negotiation came back");
    let vn = &buf[..n];
    assert!(
        vn[0] & 0x80 != 0 && vn[1..5] == [0, 0, 0, 0],
        "not a VN: {vn:02x?}"
    );
    // Its connection IDs are ours swapped (DCID = our SCID), then the versions.
    assert_eq!(vn[5], 8);
    assert_eq!(vn[6..14], [0x22; 8]);
    assert_eq!(vn[14], 8);
    assert_eq!(vn[15..23], [0x11; 8]);
    let versions: Vec<u32> = vn[23..]
        .chunks(4)
        .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert!(versions.contains(&1), "{versions:x?}");
    let st = stats(&s);
    assert_eq!(st["quic_retry"]["version_negotiations"], 1, "{st}");
    let text = metrics_get(&s, "/metrics");
    assert!(
        text.lines()
            .any(|l| l == "tlsperf_quic_version_negotiations_total 1"),
        "{text}"
    );
    // Version 1 is served as before, and not counted.
    let url = format!("https://localhost:{}/", s.port);
    let d = handshake_http3(&url, &["-n", "1", "--cacert", &root]);
    assert_eq!(d["cold"]["status"], 200, "{d}");
    assert_eq!(stats(&s)["quic_retry"]["version_negotiations"], 1);
}

/// A handshake as tshark's dissection of a capture shows it, timed by observe's
/// definitions (docs/guide/observe.md, "HTTP/3 over QUIC"): its kind and each phase, ns.
#[derive(Debug, Default)]
struct TsharkQuic {
    start: Option<u64>,
    hello_first: Option<u64>,
    hello_last: Option<u64>,
    early_offered: bool,
    server_hello: Option<u64>,
    resumed: bool,
    retry: bool,
    /// The client's first Initial after a Retry was seen.
    hello_after_retry: bool,
    zero_rtt: Option<u64>,
    /// The server's last datagram with an Initial or Handshake packet before the
    /// client's first Handshake packet (`finished`); the first short-header datagram of
    /// each side from then on.
    flight_end: Option<u64>,
    finished: Option<u64>,
    client_short: Option<u64>,
    server_short: Option<u64>,
}

impl TsharkQuic {
    fn kind(&self) -> &'static str {
        match (self.resumed, self.early_offered && self.zero_rtt.is_some()) {
            (true, true) => "0rtt",
            (true, false) => "resumed",
            _ => "full",
        }
    }

    /// Each phase observe reports for QUIC, when both ends were seen.
    fn phases(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        let (Some(sh), Some(fin)) = (self.server_hello, self.finished) else {
            return out;
        };
        let flight_end = self.flight_end;
        let span = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| b - a);
        let app = if self.kind() == "0rtt" {
            self.zero_rtt
        } else {
            self.client_short
        };
        let server_after = self.server_short;
        for (name, v) in [
            ("server_think", span(self.hello_last, Some(sh))),
            ("server_flight", span(Some(sh), flight_end)),
            ("client_think", span(flight_end, Some(fin))),
            ("tls", span(self.hello_first, Some(fin))),
            ("first_app_byte", span(self.start, app)),
            ("server_first_byte", span(Some(fin), server_after)),
        ] {
            if let Some(v) = v {
                out.push((name, v));
            }
        }
        out
    }
}

/// tshark's view of the QUIC connections on UDP `port` of `file` (it opens the Initial
/// packets itself), by the client's port (each connection of these clients has its own;
/// a ClientHello on a port whose connection had its ServerHello begins the next one):
/// each one's datagrams by type and time, taken in the capture's order.
fn tshark_quic(file: &Path, port: u16) -> Vec<TsharkQuic> {
    let out = Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-n"])
        .args(["-d", &format!("udp.port=={port},quic"), "-Y", "quic"])
        .args(["-T", "fields", "-E", "separator=;", "-E", "occurrence=a"])
        .args(["-e", "frame.time_epoch", "-e", "udp.srcport"])
        .args(["-e", "udp.dstport", "-e", "quic.header_form"])
        .args(["-e", "quic.long.packet_type", "-e", "tls.handshake.type"])
        .args(["-e", "tls.handshake.extension.type"])
        .output()
        .expect("tshark runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut conns: Vec<TsharkQuic> = Vec::new();
    let mut by_port: BTreeMap<u64, usize> = BTreeMap::new();
    let list = |f: &str| -> Vec<u64> { f.split(',').filter_map(|x| x.parse().ok()).collect() };
    for line in text.lines() {
        let f: Vec<&str> = line.split(';').collect();
        let ns = common::epoch_ns(f[0]);
        let from_server = f[1] == port.to_string();
        // tshark dissects the capture's other QUIC ports too (by heuristics).
        if !from_server && f[2] != port.to_string() {
            continue;
        }
        let conn: u64 = if from_server { f[2] } else { f[1] }.parse().unwrap();
        let forms = list(f[3]);
        let long = list(f[4]);
        let messages = list(f[5]);
        let extensions = list(f[6]);
        let begins = !from_server
            && messages.contains(&1)
            && by_port
                .get(&conn)
                .is_none_or(|i| conns[*i].server_hello.is_some());
        if begins {
            by_port.insert(conn, conns.len());
            conns.push(TsharkQuic::default());
        }
        let Some(i) = by_port.get(&conn) else {
            continue;
        };
        let c = &mut conns[*i];
        let short = forms.contains(&0);
        if from_server {
            if long.contains(&3) {
                c.retry = true;
            }
            if messages.contains(&2) && c.server_hello.is_none() {
                c.server_hello = Some(ns);
                c.resumed = extensions.contains(&41);
            }
            let flight = long.contains(&0) || long.contains(&2);
            if flight && c.server_hello.is_some() && c.finished.is_none() {
                c.flight_end = Some(ns);
            }
            if short && c.finished.is_some() {
                c.server_short.get_or_insert(ns);
            }
        } else {
            if long.contains(&0) {
                c.start.get_or_insert(ns);
            }
            if messages.contains(&1) && c.server_hello.is_none() {
                c.hello_first.get_or_insert(ns);
                c.hello_last = Some(ns);
                c.early_offered = extensions.contains(&42);
            }
            // After a Retry the client sends its ClientHello again, from CRYPTO offset 0:
            // tshark takes it for a retransmission and does not dissect it again, so the
            // ClientHello the server answered is the client's first Initial after the
            // Retry (these clients' ClientHello fits in one).
            if long.contains(&0) && c.retry && !c.hello_after_retry {
                c.hello_after_retry = true;
                c.hello_last = Some(ns);
            }
            if long.contains(&1) {
                c.zero_rtt.get_or_insert(ns);
            }
            if long.contains(&2) && c.server_hello.is_some() {
                c.finished.get_or_insert(ns);
            }
            if short && c.finished.is_some() {
                c.client_short.get_or_insert(ns);
            }
        }
    }
    conns
}

/// The value at quantile `q` of `v` (nearest rank, as HDR histograms give it).
fn quantile(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).max(1);
    v[rank - 1]
}

/// QUIC handshakes of two clients against `serve --quic` (resumption and early data on;
/// a second server with --quic-retry), captured on lo: ngtcp2's client `ngtcp2` times
/// through full, resumed and 0-RTT connections, aioquic's `aioquic` connections (one full,
/// then 0-RTT), ngtcp2's `retried` times against the Retry server. The capture and its
/// two ports.
fn quic_capture(
    dir: &Path,
    ngtcp2: usize,
    aioquic: usize,
    retried: usize,
) -> (std::path::PathBuf, u16, u16) {
    let pki = pki(dir, "pki", "ecdsa-p256");
    let s = serve(&pki, &["--early-data", "16384"]);
    let r = serve(&pki, &["--quic-retry"]);
    let file = dir.join("quic.pcap");
    let dump = common::Tcpdump::start(
        &file,
        &[
            "udp",
            "and",
            "(port",
            &s.port.to_string(),
            "or",
            "port",
            &format!("{})", r.port),
        ],
    );
    let session = dir.join("ngtcp2.session");
    let tp = dir.join("ngtcp2.tp");
    let (session, tp) = (session.to_str().unwrap(), tp.to_str().unwrap());
    let files = ["--session-file", session, "--tp-file", tp];
    for i in 0..ngtcp2 {
        let extra: Vec<&str> = match i % 3 {
            // Full: no session given (the first run saves one).
            0 if i == 0 => files.to_vec(),
            0 => vec![],
            1 => [&files[..], &["--disable-early-data"]].concat(),
            _ => files.to_vec(),
        };
        let (ok, text) = ngtcp2_get(s.port, &extra);
        assert!(ok, "ngtcp2 run {i}: {text}");
    }
    if aioquic > 0 {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/quic/h3_get.py");
        let out = Command::new("timeout")
            .args(["120", "python3", script, "127.0.0.1", &s.port.to_string()])
            .arg(format!("{pki}/root.pem"))
            .args(["--connections", &aioquic.to_string(), "--zero-rtt"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for i in 0..retried {
        let (ok, text) = ngtcp2_get(r.port, &[]);
        assert!(ok, "ngtcp2 with Retry, run {i}: {text}");
    }
    dump.stop();
    (file, s.port, r.port)
}

/// observe's QUIC part agrees with tshark's dissection of the same capture: per kind the
/// same handshakes, and each phase's p50 and p90 within 1%. On a capture made here
/// (about 60 handshakes of ngtcp2's and aioquic's clients), or on `TLSPERF_QUIC_CAPTURE`
/// (`FILE:PORT`, as bench/observe-quic.sh makes it).
#[test]
fn observe_of_quic_agrees_with_tshark() {
    if !common::root("the capture of QUIC handshakes (tcpdump on lo)")
        || !common::have(
            "tcpdump",
            "QUIC handshakes captured (apt-get install tcpdump)",
        )
        || !common::have(
            "tshark",
            "the agreement with tshark (apt-get install tshark)",
        )
        || !have_ngtcp2_client("QUIC handshakes of ngtcp2's client to observe")
        || !have_aioquic("QUIC handshakes of aioquic's client to observe")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let given = std::env::var("TLSPERF_QUIC_CAPTURE").ok();
    let captures: Vec<(std::path::PathBuf, u16)> = match &given {
        Some(g) => {
            let (f, p) = g.rsplit_once(':').expect("TLSPERF_QUIC_CAPTURE=FILE:PORT");
            vec![(f.into(), p.parse().unwrap())]
        }
        None => {
            let (file, port, retry_port) = quic_capture(dir.path(), 30, 25, 5);
            vec![(file.clone(), port), (file, retry_port)]
        }
    };
    for (file, port) in captures {
        let ours = common::observe_pcap(&file, port);
        let q = &ours["quic"];
        assert_eq!(q["transport"], "quic", "{ours}");
        let theirs = tshark_quic(&file, port);
        let mut kinds: BTreeMap<&str, Vec<&TsharkQuic>> = BTreeMap::new();
        for c in theirs.iter().filter(|c| c.finished.is_some()) {
            kinds.entry(c.kind()).or_default().push(c);
            kinds.entry("all").or_default().push(c);
        }
        assert!(kinds.get("all").is_some_and(|a| a.len() >= 5), "{theirs:?}");
        let retries = theirs
            .iter()
            .filter(|c| c.retry && c.finished.is_some())
            .count() as u64;
        assert_eq!(
            q["handshakes"]["all"]["retry"].as_u64().unwrap_or(0),
            retries,
            "{q}"
        );
        for kind in ["all", "full", "resumed", "0rtt"] {
            let conns = kinds.get(kind).map_or(&[][..], Vec::as_slice);
            let count = q["handshakes"][kind]["count"].as_u64().unwrap_or(0);
            assert_eq!(
                count,
                conns.len() as u64,
                "{kind} handshakes on port {port}: {q}"
            );
            if conns.is_empty() {
                continue;
            }
            for phase in [
                "server_think",
                "server_flight",
                "client_think",
                "tls",
                "first_app_byte",
                "server_first_byte",
            ] {
                let mut v: Vec<u64> = conns
                    .iter()
                    .filter_map(|c| c.phases().into_iter().find(|(p, _)| *p == phase))
                    .map(|(_, v)| v)
                    .collect();
                let d = &q["handshakes"][kind]["phases"][phase]["quantiles"];
                assert_eq!(
                    d["count"].as_u64(),
                    Some(v.len() as u64),
                    "{kind} {phase}: {d}"
                );
                for (name, at) in [("p50_ns", 0.5), ("p90_ns", 0.9)] {
                    let want = quantile(&mut v, at);
                    let got = d[name].as_u64().unwrap();
                    eprintln!("port {port} {kind} {phase} {name}: observe {got} tshark {want}");
                    assert!(
                        got.abs_diff(want) <= want / 100,
                        "{kind} {phase} {name}: observe {got} ns, tshark {want} ns"
                    );
                }
            }
        }
    }
}

/// What the ClientHellos of one transport offered, as tshark or observe count them: by
/// first ALPN protocol, by group offered, and how many offered a pre-shared key.
#[derive(Debug, Default, PartialEq)]
struct Offers {
    hellos: u64,
    alpn: BTreeMap<String, u64>,
    groups: BTreeMap<String, u64>,
    psk: u64,
}

/// tshark's count of the ClientHellos on `port` of `file`, TLS over TCP and QUIC (it
/// opens the Initial packets itself) apart: (TCP, QUIC). Each connection of these
/// clients sends one ClientHello (no HelloRetryRequest, no loss on lo).
fn tshark_offers(file: &Path, port: u16) -> (Offers, Offers) {
    let out = Command::new("tshark")
        .args(["-r", file.to_str().unwrap(), "-n"])
        .args(["-d", &format!("udp.port=={port},quic")])
        .args([
            "-Y",
            &format!("tls.handshake.type == 1 && (tcp.dstport == {port} || udp.dstport == {port})"),
        ])
        .args(["-T", "fields", "-E", "separator=;", "-E", "occurrence=a"])
        .args([
            "-e",
            "tcp.stream",
            "-e",
            "tls.handshake.extensions_alpn_str",
        ])
        .args(["-e", "tls.handshake.extensions_supported_group"])
        .args(["-e", "tls.handshake.extension.type"])
        .output()
        .expect("tshark runs");
    assert!(out.status.success(), "{out:?}");
    let (mut tcp, mut quic) = (Offers::default(), Offers::default());
    let number = |x: &str| match x.strip_prefix("0x") {
        Some(hex) => u16::from_str_radix(hex, 16).ok(),
        None => x.parse().ok(),
    };
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split(';').collect();
        let o = if f[0].is_empty() { &mut quic } else { &mut tcp };
        o.hellos += 1;
        let alpn = f[1].split(',').next().filter(|a| !a.is_empty());
        *o.alpn
            .entry(alpn.unwrap_or("(none)").to_string())
            .or_default() += 1;
        for g in f[2].split(',').filter_map(number) {
            let [a, b] = g.to_be_bytes();
            if a == b && a & 0x0f == 0x0a {
                continue; // GREASE
            }
            let name = tlsperf::observe::tls::group_label(g).into_owned();
            *o.groups.entry(name).or_default() += 1;
        }
        o.psk += u64::from(f[3].split(',').filter_map(number).any(|t| t == 41));
    }
    (tcp, quic)
}

/// observe's count of the same, from one part of its document.
fn observed_offers(part: &Value) -> Offers {
    let map = |v: &Value| -> BTreeMap<String, u64> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let c = &part["client_hello"];
    Offers {
        hellos: part["handshakes"]["all"]["count"].as_u64().unwrap_or(0),
        alpn: map(&c["alpn"]),
        groups: map(&c["offered_groups"]),
        psk: c["psk_offered"].as_u64().unwrap_or(0),
    }
}

/// What the ClientHellos offered — the first ALPN protocol, each supported group, a
/// pre-shared key — counted by observe as tshark dissects the same capture, over TCP
/// (tlsperf's client, and curl's when installed) and over QUIC (tlsperf's HTTP/3 client
/// full then resumed with 0-RTT, and ngtcp2's when installed).
#[test]
fn observe_counts_what_client_hellos_offer_as_tshark_does() {
    if !common::root("the capture of handshakes (tcpdump on lo)")
        || !common::have("tcpdump", "handshakes captured (apt-get install tcpdump)")
        || !common::have(
            "tshark",
            "the agreement with tshark (apt-get install tshark)",
        )
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &["--early-data", "16384"]);
    let file = dir.path().join("hellos.pcap");
    let port = s.port.to_string();
    let dump = common::Tcpdump::start(&file, &["port", &port]);
    // QUIC: tlsperf's client, one connection after the other, each resumed after the first.
    let (code, d) = load_http3(
        &s.url(),
        &[
            "-n",
            "4",
            "-c",
            "1",
            "--new-conn",
            "--early-data",
            "--cacert",
            &root,
        ],
    );
    assert_eq!(code, 0, "{d}");
    if have_ngtcp2_client("ngtcp2's ClientHello in the count") {
        let (ok, text) = ngtcp2_get(s.port, &[]);
        assert!(ok, "{text}");
    }
    // TCP: tlsperf's client, and curl's (ALPN h2 and http/1.1, OpenSSL's groups).
    common::handshakes(&s.url(), Path::new(&root), 3);
    if common::have("curl", "curl's ClientHello in the count") {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "-o",
                "/dev/null",
                "--cacert",
                &root,
            ])
            .arg(s.url())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    // Every handshake counted by the server before the capture stops.
    std::thread::sleep(Duration::from_millis(500));
    dump.stop();
    let v = common::observe_pcap(&file, s.port);
    let (tcp, quic) = tshark_offers(&file, s.port);
    assert!(tcp.hellos >= 3 && quic.hellos >= 4, "{tcp:?} {quic:?}");
    assert!(quic.alpn.contains_key("h3") && quic.psk >= 3, "{quic:?}");
    assert_eq!(observed_offers(&v), tcp, "TCP: {}", v["client_hello"]);
    assert_eq!(
        observed_offers(&v["quic"]),
        quic,
        "QUIC: {}",
        v["quic"]["client_hello"]
    );
}

/// `tlsperf observe ARGS` with stdout piped, started; returns once it captures, with
/// what it wrote on stderr before (the rest is read and dropped, so that it never blocks).
fn observe_started(args: &[&str]) -> (std::process::Child, String) {
    let mut observe = Command::new(common::bin())
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (said, _) = common::watch::wait_ready(&mut observe, &["capturing on"]);
    (observe, said)
}

/// `observe --interface lo` sees QUIC handshakes live too, with the eBPF filter and with
/// the classic one (both pass UDP on the ports): ngtcp2's client's full, resumed and 0-RTT
/// connections, counted by kind as the server counted them.
#[test]
fn observe_reads_quic_handshakes_live() {
    if !common::root("observe --interface lo (live capture)")
        || !have_ngtcp2_client("QUIC handshakes of ngtcp2's client to observe live")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let s = serve(&pki, &["--early-data", "16384"]);
    let session = dir.path().join("ngtcp2.session");
    let tp = dir.path().join("ngtcp2.tp");
    let (session, tp) = (session.to_str().unwrap(), tp.to_str().unwrap());
    let files = ["--session-file", session, "--tp-file", tp];
    for (filter, want) in [
        (None, [("full", 1), ("resumed", 1), ("0rtt", 1)]),
        (
            Some("--classic-filter"),
            [("full", 0), ("resumed", 1), ("0rtt", 2)],
        ),
    ] {
        let port = s.port.to_string();
        let mut args = vec!["observe", "--interface", "lo", "--port", &port];
        args.extend(["--duration", "20s", "--json"]);
        args.extend(filter);
        let (observe, _) = observe_started(&args);
        let runs: [Vec<&str>; 3] = if filter.is_none() {
            [
                files.to_vec(),
                [&files[..], &["--disable-early-data"]].concat(),
                files.to_vec(),
            ]
        } else {
            [
                [&files[..], &["--disable-early-data"]].concat(),
                files.to_vec(),
                files.to_vec(),
            ]
        };
        for extra in &runs {
            let (ok, text) = ngtcp2_get(s.port, extra);
            assert!(ok, "{text}");
        }
        // SIGINT: the result of what was seen (exit 130).
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("/bin/kill")
            .args(["-INT", &observe.id().to_string()])
            .status();
        let out = observe.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        let q = &v["quic"];
        for (kind, n) in want {
            assert_eq!(
                q["handshakes"][kind]["count"].as_u64().unwrap_or(0),
                n,
                "{filter:?} {kind}: {q}"
            );
        }
        assert_eq!(q["handshakes"]["all"]["count"], 3, "{filter:?}: {q}");
    }
}

/// Live, a QUIC client whose socket the kernel bound by itself is named from the kernel:
/// aioquic's client (tests/quic/h3_get.py) over sockets connected without `bind()` that
/// then ask for their address (as Chromium's QUIC sockets do), ten short connections in
/// two runs, every end named with the client's pid. (ngtcp2's example client and quinn
/// `bind()` theirs.) From `/proc` alone, read at most once a second, most of these
/// sockets were closed before a read.
#[test]
fn observe_names_quic_clients_whose_socket_the_kernel_bound() {
    if !common::root("observe --interface lo (live capture)")
        || !have_aioquic("QUIC clients whose socket the kernel bound")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let s = serve(&pki, &[]);
    let log = dir.path().join("h.jsonl");
    let port = s.port.to_string();
    let (observe, _) = observe_started(&[
        "observe",
        "--interface",
        "lo",
        "--port",
        &port,
        "--duration",
        "60s",
        "--json",
        "--handshake-log",
        log.to_str().unwrap(),
    ]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/quic/h3_get.py");
    // Client port → the pid that owned it (the kernel may give a port again to the next
    // socket: the same process's then), and the connections made.
    let (mut owner, mut made) = (BTreeMap::new(), 0);
    for _ in 0..2 {
        let out = Command::new("timeout")
            .args(["60", "python3", script, "127.0.0.1", &port])
            .arg(format!("{pki}/root.pem"))
            .args(["--connections", "5", "--socket", "connected"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["status"], 200, "{v}");
            let local = v["local"].as_str().unwrap();
            let p: u16 = local.rsplit_once(':').unwrap().1.parse().unwrap();
            let pid = v["pid"].as_u64().unwrap();
            assert!(*owner.entry(p).or_insert(pid) == pid, "{owner:?} {v}");
            made += 1;
        }
    }
    assert_eq!(made, 10, "{owner:?}");
    std::thread::sleep(Duration::from_millis(500));
    let out = common::interrupt_and_wait(observe, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["transport"] == "quic")
        .collect();
    assert_eq!(lines.len(), 10, "{lines:?}");
    for l in &lines {
        let client: std::net::SocketAddr = l["client"].as_str().unwrap().parse().unwrap();
        let pid = owner.get(&client.port()).unwrap_or_else(|| panic!("{l}"));
        let named = l["client_process"].as_str().unwrap_or_default();
        assert!(
            named.starts_with("python") && named.ends_with(&format!(" (pid {pid})")),
            "{l}"
        );
    }
}

/// The body of `GET path` at `addr` (HTTP/1.0).
fn http_get(addr: &str, path: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(c, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The sum of the series of `name` in a Prometheus exposition whose labels contain
/// every one of `labels` (`transport="quic"`).
fn metric_sum(text: &str, name: &str, labels: &[&str]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// observe's metrics, windows and handshake log take QUIC's handshakes beside TCP's on
/// the same port, each transport apart, the QUIC ones attributed to the server's UDP
/// socket's owner: as many QUIC handshakes as serve's /stats counts, as many TCP ones as
/// the client made.
#[test]
fn observe_counts_quic_apart_from_tcp_in_its_metrics_windows_and_log_live() {
    if !common::root("observe --interface lo (live capture)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &["--early-data", "16384"]);
    let (windows, log) = (dir.path().join("w.jsonl"), dir.path().join("h.jsonl"));
    let port = s.port.to_string();
    let (windows_s, log_s) = (windows.to_str().unwrap(), log.to_str().unwrap());
    let (observe, said) = observe_started(&[
        "observe",
        "--interface",
        "lo",
        "--port",
        &port,
        "--metrics",
        "127.0.0.1:0",
        "--window",
        "2s",
        "--duration",
        "60s",
        "--windows",
        windows_s,
        "--handshake-log",
        log_s,
        "--json",
    ]);
    let metrics = said
        .lines()
        .find_map(|l| l.trim().strip_prefix("metrics: http://"))
        .and_then(|url| url.strip_suffix("/metrics"))
        .expect("observe says where its metrics are")
        .to_string();

    let d = load_http3_twelve_early(&s.url(), &root);
    let tcp = 4;
    common::handshakes(&s.url(), Path::new(&root), tcp);
    let (served, _) = counts_become(&s, &generator_counts(&d));
    let quic: u64 = served.values().sum();
    assert!(quic >= 12, "{served:?}");
    // observe counts each handshake when it is complete on the wire: soon after.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let text = loop {
        let text = http_get(&metrics, "/metrics");
        let n = |t| metric_sum(&text, "tlsperf_observe_handshakes_total", &[t]);
        if (n(r#"transport="quic""#), n(r#"transport="tcp""#)) == (quic, u64::from(tcp))
            || std::time::Instant::now() > deadline
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let n = |labels: &[&str]| metric_sum(&text, "tlsperf_observe_handshakes_total", labels);
    assert_eq!(n(&[r#"transport="quic""#]), quic, "{text}");
    assert_eq!(n(&[r#"transport="tcp""#]), u64::from(tcp), "{text}");
    // The QUIC server is this host's serve, found by its UDP socket.
    assert_eq!(
        n(&[r#"transport="quic""#, r#"process="tlsperf""#]),
        quic,
        "{text}"
    );
    // Each transport's phases are histograms of their own: QUIC has no connect.
    let count = |phase: &str, t: &str| {
        metric_sum(
            &text,
            "tlsperf_observe_handshake_phase_seconds_count",
            &[
                &format!(r#"phase="{phase}""#),
                &format!(r#"transport="{t}""#),
            ],
        )
    };
    assert_eq!(count("tls", "quic"), quic, "{text}");
    assert_eq!(count("tls", "tcp"), u64::from(tcp), "{text}");
    assert_eq!(count("connect", "quic"), 0, "{text}");
    assert_eq!(count("connect", "tcp"), u64::from(tcp), "{text}");

    let out = common::interrupt_and_wait(observe, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["quic"]["handshakes"]["all"]["count"], quic, "{v}");
    assert_eq!(v["handshakes"]["all"]["count"], tcp, "{v}");
    // The windows: QUIC's series in their `quic` part, TCP's as before.
    let records: Vec<Value> = std::fs::read_to_string(&windows)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| r["type"] == "window")
        .collect();
    let sum = |series: &dyn Fn(&Value) -> &Value| -> u64 {
        records
            .iter()
            .flat_map(|r| series(r).as_array().cloned().unwrap_or_default())
            .map(|s| s["handshakes"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum(&|r| &r["quic"]["series"]), quic, "{records:?}");
    assert_eq!(sum(&|r| &r["series"]), u64::from(tcp), "{records:?}");
    let quic_series = records
        .iter()
        .flat_map(|r| r["quic"]["series"].as_array().cloned().unwrap_or_default())
        .next()
        .unwrap();
    assert_eq!(quic_series["process"], "tlsperf", "{quic_series}");
    // Its key says QUIC (the baselines keep it apart by it); TCP's keys are as before.
    assert_eq!(quic_series["transport"], "quic", "{quic_series}");
    assert!(
        records
            .iter()
            .flat_map(|r| r["series"].as_array().cloned().unwrap_or_default())
            .all(|s| s.get("transport").is_none()),
        "{records:?}"
    );
    assert!(
        quic_series["phases"].get("connect").is_none(),
        "{quic_series}"
    );
    // The handshake log: a line per handshake, saying its transport.
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| lines.iter().filter(|l| l["transport"] == t).count() as u64;
    assert_eq!((of("quic"), of("tcp")), (quic, u64::from(tcp)), "{lines:?}");
    for l in lines.iter().filter(|l| l["transport"] == "quic") {
        assert!(
            l["server_process"]
                .as_str()
                .is_some_and(|p| p.starts_with(&format!("tlsperf (pid {})", s.pid()))),
            "{l}"
        );
        // The client end too: quinn binds each connection's socket, and the kernel's
        // socket owners record the bind (from /proc alone, once a second, these short
        // connections' sockets were mostly gone: 4 of 60 found).
        let client = l["client_process"].as_str().unwrap_or_default();
        assert!(
            client.starts_with("tlsperf (pid ")
                && !client.starts_with(&format!("tlsperf (pid {})", s.pid())),
            "{l}"
        );
        assert_eq!(l["retry"], false, "{l}");
    }
}

/// `tlsperf load --http3 URL ARGS --json` (120 s at most): its exit code and document.
fn load_http3(url: &str, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["load", "--http3", url, "--json", "--threads", "1"];
    all.extend_from_slice(args);
    let run = common::tlsperf_env(&all, &[], Duration::from_secs(120));
    let doc = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
    (run.code, doc)
}

/// `load --http3 URL -n 12 -c 2 --new-conn --early-data --cacert ROOT`, which must
/// complete all 12: its document.
fn load_http3_twelve_early(url: &str, root: &str) -> Value {
    let (code, d) = load_http3(
        url,
        &[
            "-n",
            "12",
            "-c",
            "2",
            "--new-conn",
            "--early-data",
            "--cacert",
            root,
        ],
    );
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["requests"]["completed"], 12, "{d}");
    d
}

/// A load document's count under `path` (0 when absent).
fn count(d: &Value, path: &[&str]) -> u64 {
    path.iter().fold(d, |v, k| &v[*k]).as_u64().unwrap_or(0)
}

/// What the generator counted, in /stats's names: `full` (full and full-hrr), `resumed`
/// (resumed without 0-RTT accepted), `0rtt` (0-RTT accepted); zeros left out.
fn generator_counts(d: &Value) -> Vec<(&'static str, u64)> {
    let full = count(d, &["handshakes", "kinds", "full"]);
    let hrr = count(d, &["handshakes", "kinds", "full-hrr"]);
    let resumed = count(d, &["handshakes", "kinds", "resumed-ticket"]);
    let early = count(d, &["handshakes", "early_data", "accepted"]);
    [
        ("full", full),
        ("full-hrr", hrr),
        (
            "resumed",
            resumed
                .checked_sub(early)
                .expect("0-RTT accepted only on resumed handshakes"),
        ),
        ("0rtt", early),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .collect()
}

#[test]
fn load_http3_counts_the_handshakes_serve_quic_counts() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &["--early-data", "16384"]);
    let url = format!("https://localhost:{}/", s.port);

    // A new connection per request, resumed with the slot's tickets, the request in
    // 0-RTT: each slot's first handshake is full, the others resumed with 0-RTT.
    let (code, d) = load_http3(
        &url,
        &[
            "-n",
            "24",
            "-c",
            "3",
            "--new-conn",
            "--early-data",
            "--cacert",
            &root,
        ],
    );
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["transport"], "quic", "{d}");
    assert_eq!(d["options"]["http"], "3", "{d}");
    assert_eq!(d["requests"]["completed"], 24, "{d}");
    assert_eq!(d["handshakes"]["total"], 24, "{d}");
    assert_eq!(d["status"]["200"], 24, "{d}");
    assert!(count(&d, &["handshakes", "kinds", "full"]) >= 3, "{d}");
    assert!(
        count(&d, &["handshakes", "early_data", "accepted"]) >= 1,
        "{d}"
    );
    for p in [
        "connect",
        "client_hello",
        "server_hello",
        "certificate",
        "tls",
        "first_byte",
    ] {
        assert!(
            d["phases"][p]["quantiles"]["count"].as_u64().unwrap() > 0,
            "{p}: {d}"
        );
    }
    assert!(d["handshakes"].get("quic").is_none(), "no Retry: {d}");
    let counted = generator_counts(&d);
    let (got, want) = counts_become(&s, &counted);
    assert_eq!(got, want, "the server's counts against the generator's");

    // Warm connections: one handshake per slot, every request on it.
    let before = quic_counts(&s);
    let (code, d) = load_http3(&url, &["-n", "30", "-c", "2", "--cacert", &root]);
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["requests"]["completed"], 30, "{d}");
    assert_eq!(d["handshakes"]["total"], 2, "{d}");
    let st = stats(&s);
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    let after = quic_counts(&s);
    assert_eq!(total(&after) - total(&before), 2, "{st}");

    // No resumption: every handshake full, as the server counts them.
    let (code, d) = load_http3(
        &url,
        &[
            "-n",
            "10",
            "-c",
            "2",
            "--new-conn",
            "--resume",
            "off",
            "--cacert",
            &root,
        ],
    );
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["handshakes"]["kinds"]["full"], 10, "{d}");
    assert!(
        d["handshakes"]["kinds"].get("resumed-ticket").is_none(),
        "{d}"
    );
    let full = after.get("full").copied().unwrap_or(0) + 10;
    let mut want = after.clone();
    want.insert("full".into(), full);
    let pairs: Vec<(&str, u64)> = want.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let (got, want) = counts_become(&s, &pairs);
    assert_eq!(got, want);
}

#[test]
fn an_answer_that_comes_before_the_request_is_sent_is_read_not_failed() {
    // A POST to a path serve refuses is answered 405 at once, its body unread: the
    // server stops the upload (STOP_SENDING) while 8 MiB are still going out, beyond
    // the stream's flow-control window. RFC 9114 §4.1: the client must not discard that
    // complete answer — before, it counted the stop as a failed request.
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &[]);
    let url = format!("https://localhost:{}/refused", s.port);
    let (code, d) = load_http3(
        &url,
        &[
            "-n",
            "4",
            "-c",
            "2",
            "--body-size",
            "8388608",
            "--ok-status",
            "405",
            "--cacert",
            &root,
        ],
    );
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["requests"]["completed"], 4, "{d}");
    assert_eq!(d["status"]["405"], 4, "{d}");
    assert!(
        d.get("errors")
            .is_none_or(|e| e.as_object().unwrap().is_empty()),
        "{d}"
    );
}

#[test]
fn load_http3_counts_retries_as_serve_quic_retry_sends_them() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &["--quic-retry"]);
    let url = format!("https://localhost:{}/", s.port);
    // Each connection from a new UDP socket: an address not validated yet, every time.
    let (code, d) = load_http3(
        &url,
        &["-n", "6", "-c", "2", "--new-conn", "--cacert", &root],
    );
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["handshakes"]["total"], 6, "{d}");
    assert_eq!(d["handshakes"]["quic"]["retry"], 6, "{d}");
    let (got, want) = counts_become(&s, &generator_counts(&d));
    assert_eq!(got, want);
}

/// A UDP responder on 127.0.0.1 that answers every long-header packet with a Version
/// Negotiation packet offering only a reserved version (RFC 9000 §17.2.1), until the
/// returned flag is set; its port.
fn version_negotiator() -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let port = sock.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s = std::sync::Arc::clone(&stop);
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !s.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let p = &buf[..n];
            if n < 7 || p[0] & 0x80 == 0 {
                continue;
            }
            let dcid_len = usize::from(p[5]);
            let Some(dcid) = p.get(6..6 + dcid_len) else {
                continue;
            };
            let Some(&scid_len) = p.get(6 + dcid_len) else {
                continue;
            };
            let at = 7 + dcid_len;
            let Some(scid) = p.get(at..at + usize::from(scid_len)) else {
                continue;
            };
            let mut vn = vec![0x80, 0, 0, 0, 0, scid_len];
            vn.extend_from_slice(scid);
            vn.push(dcid_len as u8);
            vn.extend_from_slice(dcid);
            vn.extend_from_slice(&[0x0a, 0x1a, 0x2a, 0x3a]);
            let _ = sock.send_to(&vn, from);
        }
    });
    (port, stop)
}

#[test]
fn load_http3_counts_a_version_negotiation_that_ends_the_attempt() {
    let (port, stop) = version_negotiator();
    let url = format!("https://localhost:{port}/");
    let (code, d) = load_http3(
        &url,
        &[
            "-n",
            "3",
            "-c",
            "1",
            "--new-conn",
            "--insecure",
            "--timeout",
            "5s",
        ],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(code, 1, "every attempt failed: {d}");
    assert_eq!(d["requests"]["failed"], 3, "{d}");
    assert_eq!(d["errors"]["quic-version-negotiation"], 3, "{d}");
    assert_eq!(d["handshakes"]["quic"]["version-negotiation"], 3, "{d}");
    assert!(
        d["error_examples"]["quic-version-negotiation"]
            .as_str()
            .unwrap()
            .contains("Version Negotiation"),
        "{d}"
    );
}

#[test]
fn load_http3_against_ngtcp2s_server_counts_its_handshakes_and_0rtt() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let htdocs = dir.path().join("htdocs");
    std::fs::create_dir(&htdocs).unwrap();
    std::fs::write(htdocs.join("index.html"), r#"{"status":"ok"}"#).unwrap();
    let log = dir.path().join("ngtcp2.log");
    let Some(server) = ngtcp2_server_logging(&pki, &htdocs, &log) else {
        return;
    };
    let url = format!("https://localhost:{}/", server.port);
    let root = format!("{pki}/root.pem");
    let d = load_http3_twelve_early(&url, &root);
    let accepted = count(&d, &["handshakes", "early_data", "accepted"]);
    assert!(accepted >= 1, "{d}");
    // The server logs each handshake's end, and every 0-RTT packet it receives with the
    // connection's ID: give it a moment to log the last ones.
    std::thread::sleep(Duration::from_millis(500));
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let completed = text.matches("QUIC handshake has completed").count() as u64;
    let early: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.contains(" pkt rx ") && l.contains("type=0RTT"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(completed, count(&d, &["handshakes", "total"]), "{d}");
    // Every connection that sent 0-RTT packets: accepted or (GnuTLS's anti-replay)
    // rejected.
    let rejected = count(&d, &["handshakes", "early_data", "rejected"]);
    assert_eq!(early.len() as u64, accepted + rejected, "{d}");
}

/// ngtcp2's example server (as [`ngtcp2_server`]) logging to `log` (its default
/// per-packet logging, without the frames' data).
fn ngtcp2_server_logging(pki: &str, htdocs: &Path, log: &Path) -> Option<Ngtcp2Server> {
    let bin = ["/usr/sbin/gtlsserver", "/usr/bin/gtlsserver"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(bin) = bin else {
        missing(
            "gtlsserver (Debian package ngtcp2-server)",
            "load --http3 against ngtcp2's server",
        );
        return None;
    };
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = std::fs::File::create(log).unwrap();
    let child = Command::new(bin)
        .args(["--no-quic-dump", "--no-http-dump", "-d"])
        .arg(htdocs)
        .arg("127.0.0.1")
        .arg(port.to_string())
        .arg(format!("{pki}/server.key"))
        .arg(format!("{pki}/server-chain.pem"))
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    Some(Ngtcp2Server { child, port })
}

/// aioquic's HTTP/3 server (tests/quic/h3_server.py): its process, port and log lines.
struct AioquicServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for AioquicServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl AioquicServer {
    fn start(pki: &str, extra: &[&str]) -> AioquicServer {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/quic/h3_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(format!("{pki}/server-chain.pem"))
            .arg(format!("{pki}/server.key"))
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Its first line, byte by byte: nothing after it is read here.
        let out = child.stdout.as_mut().unwrap();
        let mut first = Vec::new();
        let mut byte = [0u8];
        while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            first.push(byte[0]);
        }
        let port: Value = serde_json::from_slice(&first).unwrap();
        AioquicServer {
            port: port["port"].as_u64().unwrap() as u16,
            child,
        }
    }

    /// Stops the server: the handshakes it logged, (resumed, 0-RTT accepted) each.
    fn handshakes(mut self) -> Vec<(bool, bool)> {
        let _ = self.child.kill();
        let mut text = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|l| {
                let h = &l["handshake"];
                (
                    h["resumed"].as_bool().unwrap(),
                    h["early_data_accepted"].as_bool().unwrap(),
                )
            })
            .collect()
    }
}

#[test]
fn load_http3_against_aioquics_server_counts_what_it_logs() {
    if !have_aioquic("load --http3 against aioquic's server") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    for retry in [false, true] {
        let server = AioquicServer::start(&pki, if retry { &["--retry"] } else { &[] });
        let url = format!("https://localhost:{}/", server.port);
        let d = load_http3_twelve_early(&url, &root);
        std::thread::sleep(Duration::from_millis(300));
        let logged = server.handshakes();
        let n = |f: fn(&(bool, bool)) -> bool| logged.iter().filter(|h| f(h)).count() as u64;
        assert_eq!(n(|_| true), count(&d, &["handshakes", "total"]), "{d}");
        assert_eq!(
            n(|h| !h.0),
            count(&d, &["handshakes", "kinds", "full"]),
            "{d}"
        );
        assert_eq!(
            n(|h| h.0),
            count(&d, &["handshakes", "kinds", "resumed-ticket"]),
            "{d}"
        );
        assert_eq!(
            n(|h| h.1),
            count(&d, &["handshakes", "early_data", "accepted"]),
            "{d}"
        );
        if !retry {
            assert!(n(|h| h.1) >= 1, "no 0-RTT accepted: {d}");
        }
        let retries = count(&d, &["handshakes", "quic", "retry"]);
        assert_eq!(retries, if retry { 12 } else { 0 }, "{d}");
    }
}

#[test]
fn load_and_capacity_http3_refuse_what_quic_cannot_do() {
    for cmd in [
        &["load", "-n", "1"][..],
        &["capacity", "--slo", "p99=10ms"][..],
    ] {
        for (args, says) in [
            (&["--tls", "1.2"][..], "TLS 1.3"),
            (&["--tls", "1.2,1.3"][..], "TLS 1.3"),
            (&["--resume", "ids"][..], "--resume ids"),
            (&["--http2"][..], "--http2"),
        ] {
            let mut all = cmd.to_vec();
            all.extend_from_slice(&["--http3", "https://localhost:1/"]);
            all.extend_from_slice(args);
            let run = tlsperf(&all);
            assert_eq!(run.code, 2, "{all:?}: {}", run.stderr);
            assert!(run.stderr.contains(says), "{all:?}: {}", run.stderr);
        }
    }
}

#[test]
fn capacity_http3_searches_against_serve_quic() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "pki", "ecdsa-p256");
    let root = format!("{pki}/root.pem");
    let s = serve(&pki, &[]);
    let url = format!("https://localhost:{}/", s.port);
    let run = common::tlsperf_env(
        [
            "capacity",
            "--http3",
            &url,
            "--slo",
            "p99=1s",
            "--timeout",
            "1s",
            "--plan",
            "20,40",
            "--step-min",
            "1s",
            "--step-max",
            "1s",
            "--warmup",
            "0s",
            "--new-conn",
            "--threads",
            "1",
            "--cacert",
            &root,
            "--json",
        ],
        &[],
        Duration::from_secs(120),
    );
    assert!([0, 4].contains(&run.code), "{}", run.stderr);
    let d: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(d["options"]["http"], "3", "{d}");
    let steps = d["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{d}");
    // Every answer over QUIC, every one a new handshake the server counted.
    let answered: u64 = steps.iter().map(|s| s["completed"].as_u64().unwrap()).sum();
    assert!(answered >= 40, "{d}");
    let st = stats(&s);
    let quic = st["quic_handshakes"]["all"]["count"].as_u64().unwrap();
    assert!(quic >= answered, "{st}");
    assert_eq!(
        st["handshakes"]["all"]["count"].as_u64().unwrap(),
        quic,
        "no TCP: {st}"
    );
}
