//! Helpers shared by the integration tests: run the binary as a user would.

#![allow(dead_code)]

pub mod go;
pub mod nginx;
pub mod probes;
pub mod relay;
pub mod watch;

use std::path::Path;
use std::process::{Command, Output};

/// The outcome of one `tlsperf` run.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The binary under test: this build's, or `TLSPERF_TEST_BIN` when set (to show that a new
/// test fails against an older build).
pub fn bin() -> std::path::PathBuf {
    std::env::var_os("TLSPERF_TEST_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_tlsperf").into())
}

/// Runs the tlsperf binary with `args` (no color, no inherited log settings).
pub fn tlsperf<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    // A hang guard only: far longer than any command a test runs.
    tlsperf_env(args, &[], std::time::Duration::from_secs(1800))
}

/// Like [`tlsperf`], with extra environment variables, killed (exit code -1, "killed after"
/// on stderr) when it has not finished within `limit`: for inputs that could block.
pub fn tlsperf_env<I, S>(args: I, env: &[(&str, &str)], limit: std::time::Duration) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_remove("TLSPERF_LOG")
        // The trust-store probe honours these; tests use fixtures, not the host's setup.
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("the tlsperf binary runs");
    let pid = child.id().to_string();
    let (exited, wait_exit) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        // Disconnected: the child has exited (and been reaped); stand down.
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait_exit.recv_timeout(limit) {
            let _ = Command::new("/bin/kill").args(["-KILL", &pid]).status();
            true
        } else {
            false
        }
    });
    let out: Output = child.wait_with_output().unwrap();
    drop(exited);
    let killed = watchdog.join().unwrap();
    let mut run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    if killed {
        run.code = -1;
        run.stderr
            .push_str(&format!("\n(test harness: killed after {limit:?})"));
    }
    assert!(
        !run.stderr.contains("panicked") && !run.stderr.contains("RUST_BACKTRACE"),
        "tlsperf panicked:\n{}",
        run.stderr
    );
    run
}

/// Whether `program` runs (`program --version`, else `program version` as openssl spells
/// it). When it does not, the caller skips its check with the reason printed
/// ([`missing`]).
pub fn have(program: &str, why: &str) -> bool {
    let runs = |arg: &str| {
        Command::new(program)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if runs("--version") || runs("version") {
        return true;
    }
    missing(program, &format!("not checking {why}"));
    false
}

/// Says that a peer program the test needs is missing, and that the test skips its
/// check. Under `.ci/run`, which installs every peer and sets
/// `TLSPERF_TEST_PEERS=required`, a missing peer fails the test instead: there a skip
/// would pass without checking anything.
pub fn missing(program: &str, what: &str) {
    if std::env::var("TLSPERF_TEST_PEERS").as_deref() == Ok("required") {
        panic!("{program} is missing, but TLSPERF_TEST_PEERS=required ({what})");
    }
    eprintln!("SKIPPED: {program} is not installed; {what}");
}

/// Writes `text` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// A minimal TLS server on 127.0.0.1 for tests: serves `chain`/`key` to at most
/// `max_conns` connections (each handshake bounded by a 10 s timeout), then exits.
/// Returns the port.
pub fn spawn_tls_server(
    chain: Vec<rustls_pki_types::CertificateDer<'static>>,
    key: rustls_pki_types::PrivateKeyDer<'static>,
    max_conns: usize,
) -> u16 {
    use std::io::Write;
    use std::sync::Arc;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(max_conns) {
            let Ok(mut tcp) = stream else { continue };
            let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let _ = tcp.set_write_timeout(Some(std::time::Duration::from_secs(10)));
            let Ok(mut conn) = rustls::ServerConnection::new(config.clone()) else {
                continue;
            };
            while conn.is_handshaking() {
                if conn.complete_io(&mut tcp).is_err() {
                    break;
                }
            }
            conn.send_close_notify();
            let _ = conn.complete_io(&mut tcp);
            let _ = tcp.flush();
        }
    });
    port
}

/// A `tlsperf serve` child listening on 127.0.0.1 (a free port), killed when dropped.
pub struct Serve {
    child: std::process::Child,
    /// The port it listens on.
    pub port: u16,
    /// Its `listening` line (`metrics`, `quic`, …).
    pub listening: serde_json::Value,
    /// Kept open so that the server can still write to stdout.
    _stdout: std::io::BufReader<std::process::ChildStdout>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Serve {
    /// [`Serve::start`] with a fresh ECDSA P-256 certificate whose CA it writes to `ca`,
    /// then `extra`.
    pub fn ecdsa_writing_ca(ca: &Path, extra: &[&str]) -> Serve {
        let mut args = vec![
            "--gen-cert",
            "ecdsa-p256",
            "--write-ca",
            ca.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Serve::start(&args)
    }

    /// Starts `tlsperf serve --listen 127.0.0.1:0 --json --duration 120s ARGS` and waits
    /// for the line saying where it listens.
    pub fn start(args: &[&str]) -> Serve {
        use std::io::{BufRead, Read};
        use std::process::Stdio;
        let mut child = Command::new(bin())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--json",
                "--duration",
                "120s",
            ])
            .args(args)
            .env_remove("TLSPERF_LOG")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the tlsperf binary runs");
        // Drain stderr on a thread so that the server never blocks on a full pipe.
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = std::sync::Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        if line.is_empty() {
            let _ = child.wait();
            std::thread::sleep(std::time::Duration::from_millis(100));
            panic!("serve {args:?} did not start: {}", stderr.lock().unwrap());
        }
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let addr = v["addr"].as_str().expect("addr in the listening line");
        let port = addr.rsplit(':').next().unwrap().parse().unwrap();
        Serve {
            child,
            port,
            listening: v.clone(),
            _stdout: stdout,
            stderr,
        }
    }

    /// `https://localhost:PORT/`.
    pub fn url(&self) -> String {
        format!("https://localhost:{}/", self.port)
    }

    /// Its process id (for `load --server-pid`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// [`handshakes`] against it.
    pub fn handshakes(&self, ca: &Path, n: u32) {
        handshakes(&self.url(), ca, n);
    }
}

/// `tlsperf handshake URL -n N`, trusting `ca` (60 s at most), which must succeed.
pub fn handshakes(url: &str, ca: &Path, n: u32) {
    let run = tlsperf_env(
        [
            "handshake",
            url,
            "-n",
            &n.to_string(),
            "--cacert",
            ca.to_str().unwrap(),
            "-q",
        ],
        &[],
        std::time::Duration::from_secs(60),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// Whether the tests run as root; when not, says that `what` is not checked
/// ([`missing`]).
pub fn root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing("root", what);
        return false;
    }
    true
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every path of a JSON value into `out`: object keys joined by `.`, arrays of objects as
/// `[]` (`rows[].client.ns_per_op`); the form the docs' field tables use.
pub fn json_paths(
    v: &serde_json::Value,
    prefix: &str,
    out: &mut std::collections::BTreeSet<String>,
) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                json_paths(child, &p, out);
            }
        }
        serde_json::Value::Array(items) => {
            for item in items.iter().filter(|i| i.is_object()) {
                json_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// Sends SIGINT to `child` and waits for it to exit, collecting its output. A watchdog
/// sends SIGKILL if it has not exited within `limit` (`wait_with_output` has no timeout);
/// it stands down as soon as the child has exited, so it never signals a reused pid.
pub fn interrupt_and_wait(child: std::process::Child, limit: std::time::Duration) -> Output {
    let pid = child.id().to_string();
    let status = Command::new("/bin/kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let (exited, wait_exit) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        // Disconnected: the child has exited (and been reaped); stand down.
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait_exit.recv_timeout(limit) {
            let _ = Command::new("/bin/kill").args(["-KILL", &pid]).status();
        }
    });
    let output = child.wait_with_output().unwrap();
    drop(exited);
    let _ = watchdog.join();
    output
}

/// A loopback port answering every connection with a plain-HTTP response.
pub fn plain_http_server(n: usize) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().take(n).flatten() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    port
}

/// A port nothing listens on.
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// An expired self-signed server certificate and its key (PEM).
pub fn expired_cert(dir: &Path) -> (String, String) {
    let mut p = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    p.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(30);
    p.not_after = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    (
        write(dir, "expired.pem", &cert.pem()),
        write(dir, "expired.key", &key.serialize_pem()),
    )
}

/// `tcpdump -i lo` writing `file` with `filter`, started and listening; stopped by
/// [`Tcpdump::stop`] (SIGINT, so that it writes what it holds), killed when dropped.
pub struct Tcpdump {
    child: std::process::Child,
}

impl Tcpdump {
    /// Starts it and waits until its capture is open.
    pub fn start(file: &Path, filter: &[&str]) -> Tcpdump {
        use std::io::BufRead;
        let mut child = Command::new("tcpdump")
            .args([
                "-i",
                "lo",
                "-B",
                "65536",
                "--immediate-mode",
                "-U",
                "-n",
                "-w",
            ])
            .arg(file)
            .args(filter)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("tcpdump runs");
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("listening on") {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "tcpdump exited");
        }
        Tcpdump { child }
    }

    /// Stops it (after a moment for the last packets) and waits for it.
    pub fn stop(mut self) {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let _ = Command::new("/bin/kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Tcpdump {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A time as tshark prints `frame.time_epoch` (`SECONDS.FRACTION`), in ns.
pub fn epoch_ns(text: &str) -> u64 {
    let (s, frac) = text.split_once('.').unwrap_or((text, "0"));
    s.parse::<u64>().unwrap() * 1_000_000_000 + format!("{frac:0<9}")[..9].parse::<u64>().unwrap()
}

/// `tlsperf observe --pcap FILE --port PORT --json`, which must succeed: its document.
pub fn observe_pcap(file: &Path, port: u16) -> serde_json::Value {
    let run = tlsperf([
        "observe",
        "--pcap",
        file.to_str().unwrap(),
        "--port",
        &port.to_string(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}
