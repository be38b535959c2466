//! What the tests of `observe --probes` share: whether they may run (root), the
//! document's probe part checked for losses, a Go client's handshakes, and a scrape of
//! `/metrics`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// True as root; else the reason the probes are not checked is printed ([`super::root`]).
pub fn root() -> bool {
    super::root("the probes need root (BPF); not checking them")
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

/// `openssl s_server -rev` with `pki`'s certificate on a free loopback port, loading the
/// libssl in `lib` when given (`LD_LIBRARY_PATH`), once it accepts connections.
pub fn s_server(pki: &Path, lib: Option<&Path>) -> (std::process::Child, u16) {
    use std::process::Stdio;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new("openssl");
    cmd.args(["s_server", "-accept", &format!("127.0.0.1:{port}")])
        .args(["-rev", "-quiet"])
        .args(["-cert", pki.join("server-chain.pem").to_str().unwrap()])
        .args(["-key", pki.join("server.key").to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(lib) = lib {
        cmd.env("LD_LIBRARY_PATH", lib);
    }
    let child = cmd.spawn().unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}
