//! What the tests of `observe --probes` share: whether they may run (root), the
//! document's probe part checked for losses, a Go client's handshakes, and a scrape of
//! `/metrics`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// True as root; else the reason the probes are not checked is printed (a failure under
/// TLSPERF_TEST_PEERS=required).
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        super::missing("root", "the probes need root (BPF); not checking them");
        return false;
    }
    true
}

/// The document's `probes` part, after checking that no record was lost or dropped.
pub fn probes(doc: &Value) -> &Value {
    let p = &doc["probes"];
    assert!(p.is_object(), "no probes part in {doc}");
    assert_eq!(p["counts"]["lost"], 0, "{}", p["counts"]);
    assert_eq!(p["counts"]["dropped"], 0, "{}", p["counts"]);
    p
}

/// `n` handshakes of the Go client of tests/go with the server at `addr` (`pki`'s root
/// trusted, SNI localhost).
pub fn go_client(client: &Path, addr: &str, pki: &Path, n: u32) {
    let out = Command::new(client)
        .args(["-addr", addr, "-n", &n.to_string()])
        .args(["-server-name", "localhost"])
        .args(["-ca", pki.join("root.pem").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tlsclient: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// GET http://ADDR/metrics, the body.
pub fn metrics(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}
