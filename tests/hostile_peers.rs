//! A server that never stops sending: endless `103 Early Hints`, a chunked body whose
//! trailer never ends, endless 1-byte chunks (tests/go/tlsserver `-stream`). Every time
//! limit and Ctrl-C must hold whatever it sends, and a bounded part of a response that
//! overflows is refused in words. The bounds below leave a second of slack for a loaded
//! CI machine; the due time itself is what the limit says.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, interrupt_and_wait, tlsperf_env};

const MODES: [&str; 3] = ["early-hints", "trailers", "chunks"];

struct Peer {
    child: Child,
    url: String,
    root: String,
    _dir: tempfile::TempDir,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Go server answering every request with `mode`; `None` without Go.
fn peer(mode: &str) -> Option<Peer> {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = common::go::peers(dir.path())?;
    let pki = dir.path().join("pki");
    let run = common::tlsperf(["pki", "init", pki.to_str().unwrap(), "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (child, addr) = common::go::server(&server, &pki, &["-stream", mode]);
    let port = addr.rsplit(':').next().unwrap();
    Some(Peer {
        child,
        url: format!("https://localhost:{port}/"),
        root: pki.join("root.pem").to_str().unwrap().to_string(),
        _dir: dir,
    })
}

/// Runs tlsperf with `args`; (exit code, stderr, seconds taken).
fn timed(args: &[&str]) -> (i32, String, f64) {
    let start = Instant::now();
    let run = tlsperf_env(args, &[], Duration::from_secs(60));
    (run.code, run.stderr, start.elapsed().as_secs_f64())
}

#[test]
fn handshake_timeout_holds_against_an_endless_answer() {
    for mode in MODES {
        let Some(p) = peer(mode) else { return };
        let (code, err, took) = timed(&[
            "handshake",
            &p.url,
            "-n",
            "1",
            "--timeout",
            "1s",
            "--cacert",
            &p.root,
        ]);
        assert_eq!(code, 1, "{mode}: {err}");
        // The trailer and the interim responses are refused by size or count before the
        // timeout; the endless chunks by the timeout.
        let why = match mode {
            "early-hints" => "interim (1xx) responses",
            "trailers" => "trailer section larger",
            _ => "timed out after 1s",
        };
        assert!(err.contains(why), "{mode}: {err}");
        assert!(took < 2.0, "{mode}: --timeout 1s took {took:.2} s");
    }
}

#[test]
fn load_timeout_and_duration_hold_against_an_endless_answer() {
    let Some(p) = peer("chunks") else { return };
    let (code, err, took) = timed(&[
        "load",
        &p.url,
        "-n",
        "2",
        "-c",
        "2",
        "--timeout",
        "2s",
        "--cacert",
        &p.root,
        "-q",
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(took < 3.0, "load -n 2 --timeout 2s took {took:.2} s: {err}");
    let run = tlsperf_env(
        [
            "load",
            &p.url,
            "-d",
            "3s",
            "--timeout",
            "1s",
            "-c",
            "2",
            "--cacert",
            &p.root,
            "--json",
        ],
        &[],
        Duration::from_secs(60),
    );
    let doc: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr));
    let d = doc["duration_s"].as_f64().unwrap();
    assert!((2.9..4.0).contains(&d), "load -d 3s reported {d} s");
}

#[test]
fn ctrl_c_stops_a_load_stuck_in_an_endless_answer() {
    let Some(p) = peer("chunks") else { return };
    let child = Command::new(bin())
        .args(["load", &p.url, "-d", "60s", "--timeout", "50s", "-c", "2"])
        .args(["--cacert", &p.root])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let start = Instant::now();
    let out = interrupt_and_wait(child, Duration::from_secs(30));
    let took = start.elapsed().as_secs_f64();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < 1.0, "SIGINT took {took:.2} s to stop the run");
}
