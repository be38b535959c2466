//! The Go test peers of tests/go (a TLS server with knobs, a client), built by the tests
//! that need them with the machine's Go.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The Go test peers, built into `dir`: (tlsserver, tlsclient); `None` (with the reason
/// printed, or a failure under TLSPERF_TEST_PEERS=required) without Go.
pub fn peers(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    if !super::have("go", "the Go server and client") {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(format!("{}/", dir.display()))
        .arg("./...")
        .current_dir(&src)
        .env("CGO_ENABLED", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((dir.join("tlsserver"), dir.join("tlsclient")))
}

/// A Go server with `pki`'s certificate and `extra` flags: (child, address).
pub fn server(server: &Path, pki: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(server)
        .args(["-cert", pki.join("server-chain.pem").to_str().unwrap()])
        .args(["-key", pki.join("server.key").to_str().unwrap()])
        .args(["-duration", "120s"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = listening_on(&mut child);
    (child, addr)
}

/// The address a test server (tests/go/tlsserver, tests/openssl/callback_server.py) says
/// it listens on, in its first line on stdout: "listening on ADDR".
pub fn listening_on(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("the server's first line: {line:?}"))
        .to_string()
}

/// The Go server built into `dir` and a PKI made there by `tlsperf pki init`: (tlsserver,
/// the PKI's directory); `None` as [`peers`].
pub fn server_and_pki(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let (server, _) = peers(dir)?;
    let pki = dir.join("pki");
    let run = super::tlsperf(["pki", "init", pki.to_str().unwrap(), "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    Some((server, pki))
}
