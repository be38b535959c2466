//! Every example that ends a `--help`, run (issue 57 item 11): `src/cli/examples.rs`
//! checks that each parses; here each one works, in a temporary directory, against a
//! local `serve`, with `tlsperf` on `PATH` as this build's binary and `HOME` inside the
//! directory (`~/.local/...` examples write there).
//!
//! An example is run as written (through `sh -c`, redirections and `~` included) but for
//! the rewrites its entry in [`STEPS`] lists, each to stay on this machine and short: the
//! documentation's `localhost:8443` and `example.com` become the local server's port
//! (the docs test owns 8443), `eth0` becomes `lo`, durations shrink. Every client example
//! runs with `SSL_CERT_FILE` naming the local server's CA, as a machine whose trust store
//! holds it: an example without `--cacert` (`handshake https://example.com/`) meets the
//! system trust path it is written for. Files an example reads (`r.json`, `capture.pcap`,
//! `windows.jsonl`) are made by the steps before it, or by [`fixtures`].
//!
//! An example without an entry fails the test: a new example is added to [`STEPS`] with
//! the rewrites it needs, so no `--help` shows a command that was never run.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::CommandFactory;

/// One example and how it is run here.
struct Step {
    /// The example exactly as its `--help` prints it.
    example: &'static str,
    /// Text replacements, in order. In the replacement, `{port}` is the local server's
    /// port, `{dir}` the test's directory, `{pid}` an OpenSSL server's process id.
    rewrite: &'static [(&'static str, &'static str)],
    /// Runs only as root with `/dev/net/tun` (live capture, `link`, probes).
    root: bool,
}

const fn step(example: &'static str, rewrite: &'static [(&'static str, &'static str)]) -> Step {
    Step {
        example,
        rewrite,
        root: false,
    }
}

const fn root_step(
    example: &'static str,
    rewrite: &'static [(&'static str, &'static str)],
) -> Step {
    Step {
        example,
        rewrite,
        root: true,
    }
}

/// A `crypto` measurement, shortened: its subcommand's name gains short rounds.
macro_rules! quick {
    ($sub:literal) => {
        ($sub, concat!($sub, " --duration 50ms --rounds 2"))
    };
}

/// The local server instead of the documentation's.
const LOCAL: (&str, &str) = (":8443/", ":{port}/");
/// `serve` examples listen on an ephemeral port and stop by themselves.
const SERVE: (&str, &str) = (
    "tlsperf serve",
    "tlsperf serve --listen 127.0.0.1:0 --duration 1s",
);

/// Every example, in the order run: a step may read what an earlier one wrote.
const STEPS: &[Step] = &[
    step("tlsperf pki init pki", &[]),
    step(
        "tlsperf pki init pki --key-type rsa-2048 --ocsp --force",
        &[],
    ),
    step(
        "tlsperf pki bundle --count 150 --cross-signed 10 --out bundle.pem",
        &[],
    ),
    step(
        "tlsperf verify --chain pki/server-chain.pem --host localhost --roots pki/root.pem",
        &[],
    ),
    step(
        "tlsperf verify bench",
        &[("bench", "bench --max-time 20ms --iterations 20")],
    ),
    step(
        "tlsperf verify bench --sizes 1,100,system,10000",
        &[("bench", "bench --max-time 20ms --iterations 20")],
    ),
    step(
        "tlsperf verify bench --sizes 1,100,system,10000 --threads 1,2,4",
        &[("bench", "bench --max-time 20ms --iterations 20")],
    ),
    step("tlsperf tickets init keys.bin", &[]),
    step("tlsperf tickets rotate keys.bin", &[]),
    step("tlsperf tickets show keys.bin", &[]),
    step(
        "tlsperf serve --gen-cert ecdsa-p256 --write-ca ca.pem",
        &[SERVE],
    ),
    step(
        "tlsperf serve --cert pki/server-chain.pem --key pki/server.key --metrics 127.0.0.1:9090",
        &[SERVE, (":9090", ":0")],
    ),
    step(
        "tlsperf serve --resumption tickets --ticket-keys keys.bin",
        &[SERVE],
    ),
    // From here on the local server (fixtures) answers.
    step(
        "tlsperf handshake https://localhost:8443/ -n 20 --cacert ca.pem",
        &[LOCAL],
    ),
    step(
        "tlsperf handshake https://example.com/ --resume off --tls 1.2",
        &[("https://example.com/", "https://localhost:{port}/")],
    ),
    step(
        "tlsperf load https://localhost:8443/ -d 10s -c 50 --cacert ca.pem",
        &[LOCAL, ("-d 10s", "-d 1s")],
    ),
    step(
        "tlsperf load https://localhost:8443/ -d 30s --rate 2000 --new-conn --cacert ca.pem --out r.json",
        &[LOCAL, ("-d 30s", "-d 1s")],
    ),
    step("tlsperf merge a.json b.json --out all.json", &[]),
    step("tlsperf compare before.json after.json", &[]),
    step("tlsperf compare a.txt b.txt --higher-is-better", &[]),
    step(
        "tlsperf capacity https://localhost:8443/ --slo p99=30ms --cacert ca.pem --html knee.html",
        &[LOCAL, CAPACITY],
    ),
    step(
        "tlsperf capacity https://localhost:8443/ --slo p99=30ms,errors=0.1% --new-conn --out cap.json",
        &[LOCAL, CAPACITY],
    ),
    step(
        "tlsperf observe --pcap capture.pcap --port 443",
        &[("443", "{port}")],
    ),
    root_step(
        "tlsperf observe --interface eth0 --port 443 --duration 30s --out seen.json",
        &[("eth0", "lo"), ("443", "{port}"), ("30s", "2s")],
    ),
    root_step(
        "tlsperf observe --probes --pid 1234",
        &[("1234", "{pid}"), ("--probes", "--probes --duration 1s")],
    ),
    step("tlsperf observe report windows.jsonl --slo p95=30ms", &[]),
    step(
        "tlsperf observe report a.jsonl b.jsonl --slo p99=50ms --budget 0.1% --html audit.html",
        &[],
    ),
    root_step(
        "tlsperf link lte,loss=1% -- tlsperf handshake https://127.0.0.1:8443/ --cacert ca.pem",
        &[LOCAL],
    ),
    root_step(
        "tlsperf link rtt=60ms -- curl -sko /dev/null -w '%{time_connect}\\n' https://127.0.0.1:8443/",
        &[LOCAL],
    ),
    step(
        "tlsperf crypto handshake --key-type ecdsa-p256 --tls 1.3 --kind full",
        &[quick!("handshake")],
    ),
    step(
        "tlsperf crypto kx --groups x25519,x25519mlkem768",
        &[quick!("kx")],
    ),
    step(
        "tlsperf crypto limit --key-type rsa-2048",
        &[quick!("limit")],
    ),
    step(
        "tlsperf crypto limit --key-type rsa-2048 --flamegraph limit.svg",
        &[quick!("limit")],
    ),
    step(
        "tlsperf crypto sign --alg ecdsa-p256,ed25519",
        &[quick!("sign")],
    ),
    step(
        "tlsperf crypto sign --alg ecdsa-p256,ed25519 --duration 2s",
        &[("--duration 2s", "--duration 50ms --rounds 2")],
    ),
    step("tlsperf trust analyze --list", &[]),
    step(
        "tlsperf trust analyze /etc/ssl/certs/ca-certificates.crt",
        &[],
    ),
    step("tlsperf trust load", &[]),
    step(
        "tlsperf trust load --bundle /etc/ssl/certs/ca-certificates.crt --x509",
        &[],
    ),
    step("tlsperf trust probe", &[]),
    step(
        "tlsperf trust probe --root /srv/image-rootfs",
        &[("/srv/image-rootfs", "{dir}/rootfs")],
    ),
    step(
        "tlsperf trust trim --keep-for example.com:443 --out trimmed.pem",
        &[("example.com:443", "localhost:{port}")],
    ),
    step(
        "tlsperf lab --quick --out report",
        &[("--quick", "--quick --rounds 3")],
    ),
    step(
        "tlsperf lab --only resumption,kx --slo p99=30ms",
        &[("lab", "lab --quick --rounds 3 --slo-time 3s")],
    ),
    step(
        "tlsperf completions bash > ~/.local/share/bash-completion/completions/tlsperf",
        &[],
    ),
    step("tlsperf man ~/.local/share/man/man1", &[]),
];

/// `capacity` searches, shortened: two one-second steps below the local server's knee,
/// which answer "above --max-rate" (exit 0).
const CAPACITY: (&str, &str) = (
    "tlsperf capacity",
    "tlsperf capacity --start-rate 50 --max-rate 100 --step-min 1s --step-max 1s --warmup 200ms",
);

/// Every `--help`'s example lines, as `src/cli/examples.rs` reads them.
fn examples() -> Vec<String> {
    fn walk(cmd: &clap::Command, out: &mut Vec<String>) {
        let help = cmd
            .get_after_long_help()
            .or(cmd.get_after_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        if let Some((_, tail)) = help.split_once("Examples:") {
            out.extend(
                tail.lines()
                    .skip(1)
                    .take_while(|l| l.starts_with("  "))
                    .map(|l| l.trim().to_string()),
            );
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = Vec::new();
    walk(&tlsperf::cli::Cli::command(), &mut out);
    out
}

/// What the examples read that no earlier example writes: copies of a load result, two
/// sample files, a root file system, a capture and window streams of the local server.
fn fixtures(dir: &Path, port: u16) {
    let w = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    w("a.txt", "10.1\n10.4\n9.8\n10.0\n10.2\n");
    w("b.txt", "11.0\n11.3\n10.9\n11.2\n11.1\n");
    let certs = dir.join("rootfs/etc/ssl/certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::copy(dir.join("ca.pem"), certs.join("ca-certificates.crt")).unwrap();
    for d in [
        ".local/share/bash-completion/completions",
        ".local/share/man",
    ] {
        std::fs::create_dir_all(dir.join("home").join(d)).unwrap();
    }
    // Window streams: observe of the local server's handshakes, one-second windows.
    if common::root("window streams of a live capture (observe report's examples)") {
        let url = format!("https://localhost:{port}/");
        let observe = Command::new(common::bin())
            .args(["observe", "--interface", "lo", "--port", &port.to_string()])
            .args(["--window", "1s", "--windows", "windows.jsonl"])
            .args(["--duration", "4s", "-q"])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let ca = dir.join("ca.pem");
        let run = common::tlsperf([
            "load",
            &url,
            "--new-conn",
            "--rate",
            "100",
            "-d",
            "3s",
            "--cacert",
            ca.to_str().unwrap(),
            "-q",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let out = observe.wait_with_output().unwrap();
        assert!(out.status.success(), "observe --windows failed");
        std::fs::copy(dir.join("windows.jsonl"), dir.join("a.jsonl")).unwrap();
        std::fs::copy(dir.join("windows.jsonl"), dir.join("b.jsonl")).unwrap();
    }
}

/// A capture of the local server's handshakes by tcpdump, `capture.pcap` (as root).
fn capture(dir: &Path, port: u16, root: bool) -> bool {
    if !root || !common::have("tcpdump", "the pcap that observe --pcap's example reads") {
        return false;
    }
    let mut tcpdump = Command::new("tcpdump")
        .args(["-i", "lo", "-U", "-w", "capture.pcap", "-s", "0"])
        .arg(format!("tcp port {port}"))
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // tcpdump says "listening on" once its capture is open.
    let mut err = tcpdump.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("listening on") {
        use std::io::Read;
        let n = err.read(&mut buf).unwrap();
        assert!(n > 0, "tcpdump: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let ca = dir.join("ca.pem");
    common::handshakes(&format!("https://localhost:{port}/"), &ca, 20);
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("/bin/kill")
        .args(["-INT", &tcpdump.id().to_string()])
        .status();
    assert!(tcpdump.wait().unwrap().success());
    true
}

#[test]
fn every_help_example_runs() {
    let all = examples();
    // Each example has a step, and each step an example.
    for e in &all {
        assert!(
            STEPS.iter().any(|s| s.example == e),
            "`{e}` has no step: add it to STEPS in tests/help_examples.rs"
        );
    }
    for s in STEPS {
        assert!(
            all.iter().any(|e| e == s.example),
            "STEPS lists `{}`, which no --help shows any more",
            s.example
        );
    }

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin_dir = common::bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = dir.join("home");
    let root = common::root("live capture, link and probes examples")
        && Path::new("/dev/net/tun").exists();
    let mut server: Option<common::Serve> = None;
    // nginx, an OpenSSL server for the probes' example.
    let nginx = if root {
        common::nginx::Nginx::start(true)
    } else {
        None
    };
    let mut pcap = false;
    for s in STEPS {
        if s.example.starts_with("tlsperf handshake") && server.is_none() {
            // Every earlier step has run: the local server and what needs it.
            let ca = dir.join("ca.pem");
            let serve = common::Serve::ecdsa_writing_ca(&ca, &[]);
            fixtures(dir, serve.port);
            pcap = capture(dir, serve.port, root);
            server = Some(serve);
        }
        if s.example.starts_with("tlsperf merge") {
            for name in ["a.json", "b.json", "before.json", "after.json"] {
                std::fs::copy(dir.join("r.json"), dir.join(name)).unwrap();
            }
        }
        if s.root && !root {
            eprintln!("skipped (needs root and /dev/net/tun): {}", s.example);
            continue;
        }
        if s.example.contains("--pcap") && !pcap {
            continue;
        }
        if s.example.starts_with("tlsperf observe report") && !dir.join("a.jsonl").exists() {
            eprintln!("skipped (no window streams without root): {}", s.example);
            continue;
        }
        let mut pid = String::new();
        if s.example.contains("--pid 1234") {
            match &nginx {
                Some(n) => pid = n.pid().to_string(),
                None => continue,
            }
        }
        let port = server.as_ref().map_or(0, |s| s.port).to_string();
        let mut line = s.example.to_string();
        for (from, to) in s.rewrite {
            assert!(line.contains(from), "{}: no `{from}` to rewrite", s.example);
            let to = to
                .replace("{port}", &port)
                .replace("{dir}", dir.to_str().unwrap())
                .replace("{pid}", &pid);
            line = line.replacen(from, &to, 1);
        }
        let started = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {line}"))
            .current_dir(dir)
            .env("PATH", &path)
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .env("SSL_CERT_FILE", dir.join("ca.pem"))
            .env_remove("SSL_CERT_DIR")
            .env_remove("TLSPERF_LOG")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "`{}` (run as `{line}`) failed: {}\n{stderr}",
            s.example,
            out.status
        );
        assert!(!stderr.contains("panicked"), "`{line}` panicked: {stderr}");
        eprintln!("ran in {:.1?}: {line}", started.elapsed());
    }
    // What the examples say they write is there.
    for f in [
        "pki/root.pem",
        "bundle.pem",
        "keys.bin",
        "r.json",
        "all.json",
        "cap.json",
        "knee.html",
        "limit.svg",
        "home/.local/share/bash-completion/completions/tlsperf",
        "report/index.html",
        "trimmed.pem",
    ] {
        assert!(dir.join(f).exists(), "{f} was not written");
    }
}
