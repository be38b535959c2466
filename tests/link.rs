//! `--link`: handshakes and load over the emulated link, against nginx and `tlsperf serve`
//! on loopback, and the teardown of everything a run makes (namespace, TUN devices,
//! routes) after a normal exit, an error exit and Ctrl-C. Needs root and /dev/net/tun;
//! without them the tests that set a link up are skipped with the reason printed.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::nginx::Nginx;
use common::{Serve, interrupt_and_wait, tlsperf};
use serde_json::Value;

/// The link tests run one at a time: the timings they check are the link's, and tests
/// running beside them would add their own load to the client's wake-ups.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this machine and user can set a link up; prints why not.
fn can_link() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: --link needs root");
        return false;
    }
    if !Path::new("/dev/net/tun").exists() {
        eprintln!("SKIPPED: --link needs /dev/net/tun");
        return false;
    }
    true
}

fn json_run(args: &[&str]) -> Value {
    let run = tlsperf(args.iter().chain(&["--json"]).copied().collect::<Vec<_>>());
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// A warm phase's median, in milliseconds.
fn p50_ms(v: &Value, phase: &str) -> f64 {
    v["warm"]["phases"][phase]["p50_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("no warm {phase}: {v}"))
        / 1e6
}

#[test]
fn round_trips_at_60ms_against_nginx() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let Some(nginx) = Nginx::start(true) else {
        return;
    };
    let url = nginx.url();
    let rtt = 60.0;
    for (tls, trips) in [("1.3", 1.0), ("1.2", 2.0)] {
        let base = [
            "handshake",
            &url,
            "--roots",
            &nginx.root,
            "--resume",
            "off",
            "--tls",
            tls,
            "-n",
            "11",
        ];
        // The same handshakes on plain loopback: the CPU (both ends) and the loopback
        // round trips that the link adds its delay to.
        let plain = json_run(&base);
        let linked = json_run(
            &base
                .iter()
                .chain(&["--link", "rtt=60ms"])
                .copied()
                .collect::<Vec<_>>(),
        );
        // Below: the link cannot be faster than its RTT. Above: its ±5% plus 2.5 ms for
        // the client's own thread waiting for a CPU on a busy machine (the link's own
        // lateness is in docs/benchmarks.md).
        let connect = p50_ms(&linked, "connect");
        assert!(
            (rtt - 0.5..=rtt * 1.05 + 3.0).contains(&connect),
            "TLS {tls}: TCP connect p50 {connect:.2} ms at rtt=60ms"
        );
        let cpu = p50_ms(&plain, "tls");
        let hs = p50_ms(&linked, "tls");
        let want = trips * rtt;
        assert!(
            hs >= want - 0.5 && hs <= want * 1.05 + 2.0 * cpu + 3.0,
            "TLS {tls}: handshake p50 {hs:.2} ms at rtt=60ms, expected {trips} round trip(s) ({want} ms) + CPU ({cpu:.2} ms on loopback)"
        );
    }
}

#[test]
fn a_mebibyte_at_8_mbit_takes_its_serialization_time() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let Some(nginx) = Nginx::start(true) else {
        return;
    };
    let url = format!("https://localhost:{}/big", nginx.port);
    let v = json_run(&[
        "handshake",
        &url,
        "--roots",
        &nginx.root,
        "-n",
        "3",
        "--link",
        "rtt=20ms,down=8mbit",
    ]);
    // What crosses the link: 1 MiB in 64 TLS 1.3 records of 16,384 + 22 bytes, in
    // segments of 1,448 bytes (MSS with timestamps) under 52 bytes of TCP/IP headers.
    let tls_bytes = 64.0 * (16_384.0 + 22.0);
    let packets = (tls_bytes / 1448.0_f64).ceil();
    let ip_bytes = tls_bytes + packets * 52.0;
    let wire_s = ip_bytes * 8.0 / 8e6;
    let body_s = p50_ms(&v, "body") / 1e3;
    // The body phase starts at the first byte, so it holds the serialization of all
    // packets but the first, plus slow start's waits (a few round trips of 20 ms).
    assert!(
        body_s >= wire_s * 0.95 && body_s <= wire_s * 1.05 + 0.2,
        "1 MiB body at 8 Mbit/s took {body_s:.3} s; its {ip_bytes} IP bytes take {wire_s:.3} s on the wire"
    );
}

#[test]
fn load_at_2_percent_loss_completes_with_retransmission_tails() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = d.join("ca.pem");
    let server = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        ca.to_str().unwrap(),
    ]);
    let v = json_run(&[
        "load",
        &server.url(),
        "--roots",
        ca.to_str().unwrap(),
        "--link",
        "rtt=10ms,loss=2%",
        "-n",
        "300",
        "-c",
        "8",
        "--new-conn",
        "--timeout",
        "20s",
    ]);
    assert_eq!(v["requests"]["completed"], 300, "{}", v["requests"]);
    assert_eq!(v["requests"]["failed"], 0, "{}", v["errors"]);
    assert_eq!(v["options"]["link"], "rtt=10ms,loss=2%", "{}", v["options"]);
    // 300 connections each send a SYN and get a SYN-ACK: at 2% loss the chance that
    // none of the 600 is lost is 0.98^600 ≈ 5e-6. A lost one is sent again after the
    // initial retransmission timeout, 1 s.
    let max = v["latency"]["quantiles"]["max_ns"].as_f64().unwrap() / 1e9;
    assert!(max >= 1.0, "slowest request {max:.3} s: no retransmission?");
    let p50 = v["latency"]["quantiles"]["p50_ns"].as_f64().unwrap() / 1e9;
    assert!(p50 < 0.5, "median {p50:.3} s");
}

/// `capacity --link`: the search's steps run over the link (every answer on a kept-alive
/// connection takes at least one round trip; the link is echoed in the options). The
/// outcome itself (a capacity, or a generator too late on a busy machine) is not what is
/// checked here.
#[test]
fn capacity_steps_run_over_the_link() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let server = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        ca.to_str().unwrap(),
    ]);
    let run = tlsperf([
        "capacity",
        &server.url(),
        "--roots",
        ca.to_str().unwrap(),
        "--link",
        "rtt=40ms",
        "--slo",
        "p99=2s",
        "--start-rate",
        "10",
        "--max-steps",
        "2",
        "--step-max",
        "3s",
        "--json",
    ]);
    assert!(
        [0, 3, 4].contains(&run.code),
        "{}{}",
        run.stdout,
        run.stderr
    );
    let v: Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    assert_eq!(v["options"]["link"], "rtt=40ms", "{}", v["options"]);
    let steps = v["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{v}");
    for s in steps {
        let min = s["latency_corrected"]["quantiles"]["min_ns"]
            .as_f64()
            .unwrap()
            / 1e6;
        assert!(
            min >= 40.0,
            "a request answered in {min:.3} ms, under the link's RTT"
        );
    }
}

/// What a run made, read from its /proc entry while it runs: the host's TUN device (name
/// and ifindex, from the TUN descriptors' fdinfo) and the client's namespace (a thread's
/// `ns/net` other than the host's).
#[derive(Debug, Default)]
struct Footprint {
    devices: Vec<(String, String)>,
    namespaces: Vec<String>,
}

fn footprint(pid: u32) -> Footprint {
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    let mut fp = Footprint::default();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) {
        for fd in fds.flatten() {
            let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
            if let Some(line) = info.lines().find(|l| l.starts_with("iff:")) {
                let name = line["iff:".len()..].trim().to_string();
                if let Ok(index) = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
                {
                    fp.devices.push((name, index.trim().to_string()));
                }
            }
        }
    }
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(ns) = std::fs::read_link(t.path().join("ns/net"))
                && ns != host_ns
            {
                let ns = ns.to_string_lossy().into_owned();
                if !fp.namespaces.contains(&ns) {
                    fp.namespaces.push(ns);
                }
            }
        }
    }
    fp
}

/// Polls the running child until its device and namespace are seen.
fn wait_for_footprint(pid: u32) -> Footprint {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let fp = footprint(pid);
        if !fp.devices.is_empty() && !fp.namespaces.is_empty() {
            return fp;
        }
        assert!(
            Instant::now() < deadline,
            "no link seen in /proc/{pid}: {fp:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Nothing of `fp` remains: the device (that ifindex) is gone with its routes, and no
/// process or mount holds the namespace (unreferenced, the kernel frees it).
fn assert_gone(fp: &Footprint) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for (name, index) in &fp.devices {
        loop {
            let now = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).ok();
            if now.as_deref().map(str::trim) != Some(index.as_str()) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "device {name} ({index}) is still there"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let routes = std::fs::read_to_string("/proc/net/route").unwrap();
        assert!(
            !routes
                .lines()
                .any(|l| l.split_whitespace().next() == Some(name))
                || std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).is_ok(),
            "a route through {name} remains: {routes}"
        );
    }
    for ns in &fp.namespaces {
        // A process killed with its parent (PR_SET_PDEATHSIG) may take a moment to die.
        let holders = loop {
            let h = ns_holders(ns);
            if h.is_empty() || Instant::now() >= deadline {
                break h;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            holders.is_empty(),
            "namespace {ns} still held by {holders:?}"
        );
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let inode = ns.trim_start_matches("net:");
        assert!(
            !mounts
                .lines()
                .any(|l| l.contains("nsfs") && l.contains(inode)),
            "namespace {ns} is mounted"
        );
    }
    // No name in /run/netns holds it (other programs' named namespaces, other tests'
    // among them, may come and go meanwhile: only ours count).
    if let Ok(named) = std::fs::read_dir("/run/netns") {
        use std::os::unix::fs::MetadataExt;
        for e in named.flatten() {
            let Ok(ino) = e.metadata().map(|m| m.ino()) else {
                continue;
            };
            for ns in &fp.namespaces {
                assert_ne!(
                    format!("net:[{ino}]"),
                    *ns,
                    "namespace {ns} is named {:?}",
                    e.file_name()
                );
            }
        }
    }
}

/// The processes (`PID/task` or `PID/fd`) that hold network namespace `ns`.
fn ns_holders(ns: &str) -> Vec<String> {
    let mut holders = Vec::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = p.file_name();
        if !pid.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        for sub in ["task", "fd"] {
            let Ok(entries) = std::fs::read_dir(p.path().join(sub)) else {
                continue;
            };
            for e in entries.flatten() {
                let link = if sub == "task" {
                    std::fs::read_link(e.path().join("ns/net"))
                } else {
                    std::fs::read_link(e.path())
                };
                if link.is_ok_and(|l| l.to_string_lossy() == *ns) {
                    holders.push(format!("{}/{sub}", pid.to_string_lossy()));
                }
            }
        }
    }
    holders
}

fn spawn(args: &[&str]) -> std::process::Child {
    Command::new(common::bin())
        .args(args)
        .env_remove("TLSPERF_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tlsperf binary runs")
}

fn finish(child: std::process::Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn nothing_remains_after_normal_exit_error_exit_and_ctrl_c() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let server = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        ca.to_str().unwrap(),
    ]);
    let url = server.url();
    let ca = ca.to_str().unwrap();

    // Normal exit: 3 handshakes at 200 ms, about 2 s.
    let child = spawn(&[
        "handshake",
        &url,
        "--roots",
        ca,
        "-n",
        "3",
        "--link",
        "rtt=200ms",
    ]);
    let fp = wait_for_footprint(child.id());
    let (code, err) = finish(child);
    assert_eq!(code, 0, "{err}");
    assert_gone(&fp);

    // Error exit: a server that accepts and never answers, and a 1 s timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("https://localhost:{}/", silent.local_addr().unwrap().port());
    let child = spawn(&[
        "handshake",
        &silent_url,
        "--timeout",
        "1s",
        "--link",
        "rtt=50ms",
    ]);
    let fp = wait_for_footprint(child.id());
    let (code, err) = finish(child);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("error:"), "{err}");
    assert_gone(&fp);
    drop(silent);

    // Ctrl-C in the middle of a long run.
    let child = spawn(&[
        "load",
        &url,
        "--roots",
        ca,
        "-n",
        "100000",
        "-c",
        "2",
        "--link",
        "rtt=100ms",
    ]);
    let fp = wait_for_footprint(child.id());
    std::thread::sleep(Duration::from_millis(500));
    let out = interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_gone(&fp);

    // SIGKILL: no destructor runs; the kernel removes what only descriptors held.
    let mut child = spawn(&[
        "load",
        &url,
        "--roots",
        ca,
        "-n",
        "100000",
        "-c",
        "2",
        "--link",
        "rtt=100ms",
    ]);
    let fp = wait_for_footprint(child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert_gone(&fp);
}

#[test]
fn a_link_to_another_machine_or_a_bad_spec_is_a_usage_error() {
    let run = tlsperf(["handshake", "https://203.0.113.9/", "--link", "rtt=10ms"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("203.0.113.9 is not an address of this machine"),
        "{}",
        run.stderr
    );
    let run = tlsperf(["load", "https://127.0.0.1:1/", "--link", "wifi"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("not a profile (cable, dsl"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("Error {"), "{}", run.stderr);
    // The lab's link-only groups show nothing on loopback.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = tlsperf([
        "lab",
        "--only",
        "first-byte",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--only first-byte needs --link"),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "nothing is made on a usage error");
}

#[test]
fn without_root_the_message_says_what_is_missing() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIPPED: needs root and setpriv to run tlsperf as another user");
        return;
    }
    let out = Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(common::bin())
        .args(["handshake", "https://127.0.0.1:1/", "--link", "rtt=10ms"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--link needs"), "{err}");
}

#[test]
fn a_first_flight_past_the_initial_window_costs_one_more_round_trip() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A leaf with 600 names (~15 KB): the server's first flight no longer fits in 10
    // segments of 1,448 bytes.
    let names: Vec<String> = (0..600)
        .map(|i| format!("host-{i:04}.tlsperf.test"))
        .collect();
    let mut args = vec![
        "pki".to_string(),
        "init".into(),
        d.join("big").to_str().unwrap().into(),
        "-q".into(),
    ];
    for n in std::iter::once("localhost".to_string()).chain(names) {
        args.push("--san".into());
        args.push(n);
    }
    let run = tlsperf(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = tlsperf(["pki", "init", d.join("small").to_str().unwrap(), "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut tls_ms = Vec::new();
    for pki in ["small", "big"] {
        let p = d.join(pki);
        let server = Serve::start(&[
            "--cert",
            p.join("server-chain.pem").to_str().unwrap(),
            "--key",
            p.join("server.key").to_str().unwrap(),
        ]);
        let v = json_run(&[
            "handshake",
            &server.url(),
            "--roots",
            p.join("root.pem").to_str().unwrap(),
            "--resume",
            "off",
            "-n",
            "5",
            "--link",
            "rtt=60ms",
        ]);
        let link = &v["link"];
        let flight = &link["server_flight"];
        assert_eq!(v["server_flight_bytes"], flight["bytes"], "{v}");
        let big = pki == "big";
        assert_eq!(flight["fits"], !big, "{flight}");
        assert_eq!(
            link["cold"]["round_trips"],
            if big { 4 } else { 3 },
            "{link}"
        );
        assert_eq!(
            link["warnings"].as_array().unwrap().is_empty(),
            !big,
            "{link}"
        );
        tls_ms.push(p50_ms(&v, "tls"));
    }
    // Kernel TCP on the link: the big flight waits one round trip for an ACK.
    let (small, big) = (tls_ms[0], tls_ms[1]);
    assert!(
        (59.5..90.0).contains(&small),
        "small chain: handshake p50 {small:.1} ms"
    );
    assert!(
        big >= 119.5 && big < small + 90.0,
        "big chain: handshake p50 {big:.1} ms (small {small:.1})"
    );
}

/// 21 handshakes to `url` at rtt=60ms without and then with `--early-data`: at least 14
/// of the 20 warm ones 0-RTT, 3 round trips to the first byte without and 2 with, the
/// answer within the handshake's last flight, and `saved` ms (about one round trip)
/// less to the first byte. Returns the run with early data.
fn zero_rtt_saves_a_round_trip(url: &str, roots: &str, saved_range: std::ops::Range<f64>) -> Value {
    let run = |early: bool| {
        let mut args = vec![
            "handshake",
            url,
            "--roots",
            roots,
            "-n",
            "21",
            "--link",
            "rtt=60ms",
        ];
        if early {
            args.push("--early-data");
        }
        json_run(&args)
    };
    let (plain, early) = (run(false), run(true));
    let accepted = early["warm"]["early_data_accepted"].as_u64().unwrap();
    assert!(accepted >= 14, "{}", early["warm"]);
    assert_eq!(plain["link"]["warm"]["round_trips"], 3, "{}", plain["link"]);
    assert_eq!(early["link"]["warm"]["round_trips"], 2, "{}", early["link"]);
    // Without early data the request goes after the handshake and its answer takes a
    // round trip; with it, the answer comes with the handshake's last flight.
    let (fb_plain, fb_early) = (p50_ms(&plain, "first_byte"), p50_ms(&early, "first_byte"));
    assert!(
        fb_plain >= 59.5,
        "first byte after the request: {fb_plain:.1} ms"
    );
    assert!(
        fb_early < 15.0,
        "first byte with 0-RTT: {fb_early:.1} ms after the handshake"
    );
    let to_first_byte = |v: &Value| {
        ["connect", "tls", "request", "first_byte"]
            .iter()
            .map(|p| p50_ms(v, p))
            .sum::<f64>()
    };
    let saved = to_first_byte(&plain) - to_first_byte(&early);
    assert!(
        saved_range.contains(&saved),
        "0-RTT saved {saved:.1} ms to the first byte at rtt=60ms (one round trip expected)"
    );
    early
}

#[test]
fn zero_rtt_answers_the_first_request_one_round_trip_sooner() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let Some(nginx) = Nginx::start(true) else {
        return;
    };
    // nginx (OpenSSL) now and then answers a ticket with a full handshake (3 of 10 in
    // one run): the medians need most connections to be 0-RTT.
    let early = zero_rtt_saves_a_round_trip(&nginx.url(), &nginx.root, 30.0..90.0);
    assert_eq!(early["link"]["warm"]["kind"], "resumed-ticket+0rtt");
}

#[test]
fn zero_rtt_against_tlsperf_serve_answers_one_round_trip_sooner() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem").to_str().unwrap().to_string();
    // rustls accepts 0-RTT only with stateful resumption.
    let s = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        &ca,
        "--resumption",
        "stateful",
        "--early-data",
        "16384",
        "--tickets-per-handshake",
        "4",
    ]);
    // A 0-RTT connection ends before the tickets the server sends after the client's
    // Finished arrive, so each full handshake's 4 tickets last 4 resumptions: the medians
    // need most connections to be 0-RTT (16 of 20 expected). The server answers the
    // request that came as early data behind its own Finished, not after the client's.
    zero_rtt_saves_a_round_trip(&s.url(), &ca, 45.0..75.0);
    let stats = s.stderr();
    assert!(!stats.contains("panicked"), "{stats}");
}

#[test]
fn the_lab_at_a_link_times_the_first_byte_of_full_resumed_0rtt_and_both_chains() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let (dir, stdout, v) = lab_at_40ms("first-byte,chain");
    let out = dir.path().join("report");
    assert!(
        stdout.contains("Time to first byte at rtt=40ms (mean over rounds, from the TCP connect):"),
        "{stdout}"
    );
    assert_eq!(v["options"]["link"], "rtt=40ms");
    assert_eq!(v["options"]["link_rtt_ms"], 40.0);
    // Rounds last at least 25 round trips at a link.
    assert!(
        v["options"]["round_s"].as_f64().unwrap() >= 1.0,
        "{}",
        v["options"]
    );
    let rtt = 40.0;
    let fb = |group: &str, cell: &str| lab_first_byte(&v, group, cell);
    let (full, resumed, zero) = (
        fb("first-byte", "full"),
        fb("first-byte", "resumed"),
        fb("first-byte", "0rtt"),
    );
    // TCP, TLS 1.3 and the request: three round trips at least.
    assert!(
        full >= 3.0 * rtt,
        "full handshake: first byte after {full:.1} ms"
    );
    // TLS 1.3 resumption saves CPU (and its queueing on a busy machine), not a round trip.
    assert!(
        resumed < full + 0.25 * rtt && full - resumed < 0.75 * rtt,
        "resumed {resumed:.1} ms vs full {full:.1} ms"
    );
    // 0-RTT saves the request's round trip (on the connections that resume: about 4 in
    // 5, since a 0-RTT connection closes before its new tickets arrive). Against the
    // resumed cell, whose handshakes cost the same CPU, that round trip is all it saves;
    // against full handshakes it also saves their CPU (and its queueing on a busy machine).
    let saved = resumed - zero;
    assert!(
        (0.4 * rtt..1.3 * rtt).contains(&saved),
        "0-RTT: first byte {saved:.1} ms sooner than a resumed handshake at rtt={rtt}ms"
    );
    assert!(
        full - zero > 0.4 * rtt,
        "0-RTT {zero:.1} ms vs full {full:.1} ms"
    );
    // A big RSA chain costs the server its RSA-4096 signature: never sooner.
    let (rsa, ecdsa) = (fb("chain", "rsa-4096-ocsp"), fb("chain", "ecdsa"));
    assert!(
        rsa > ecdsa,
        "RSA-4096 chain {rsa:.1} ms vs ECDSA {ecdsa:.1} ms"
    );
    // Whatever was recommended on the first byte says it in milliseconds at this link.
    for r in v["recommendations"].as_array().unwrap() {
        if r["metric"] == "first_byte_mean_ms" {
            let text = r["text"].as_str().unwrap();
            assert!(text.contains(" ms to the first byte at rtt=40ms"), "{text}");
            assert!(r["first_byte_saved_ms"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("Link: rtt=40ms."), "{md}");
    assert!(md.contains("time to first byte vs baseline"), "{md}");
}

/// `lab --quick --link rtt=40ms --only GROUPS --rounds 3 --out DIR/report`, which must
/// exit 0: the directory, its standard output and its results.json.
fn lab_at_40ms(groups: &str) -> (tempfile::TempDir, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = tlsperf([
        "lab",
        "--quick",
        "--link",
        "rtt=40ms",
        "--only",
        groups,
        "--rounds",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    (dir, run.stdout, v)
}

/// A lab cell's time to the first byte at a link: the median of its rounds' means (one
/// round stalled by a busy machine moves a mean of three), checking it did not fail.
fn lab_first_byte(v: &Value, group: &str, cell: &str) -> f64 {
    let g = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == group)
        .unwrap_or_else(|| panic!("no group {group}: {}", v["groups"]));
    let c = g["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == cell)
        .unwrap_or_else(|| panic!("no cell {group}/{cell}"));
    assert!(
        !c["failed"].as_bool().unwrap(),
        "{group}/{cell} failed: {}",
        c["errors"]
    );
    let mut r: Vec<f64> = c["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["first_byte_mean_ms"]
                .as_f64()
                .unwrap_or_else(|| panic!("{group}/{cell}: no first byte: {r}"))
        })
        .collect();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

/// Issue 59's lab group: at a link, QUIC's first byte is a round trip before TCP + TLS
/// 1.3's and its 0-RTT another one before; TLS 1.2's full handshake a round trip after;
/// QUIC's gain is told as a trade-off when it costs server CPU.
#[test]
fn the_lab_at_a_link_compares_tcp_tls_and_quic() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let (_dir, _, v) = lab_at_40ms("transport");
    let rtt = 40.0;
    let fb = |cell: &str| lab_first_byte(&v, "transport", cell);
    let (tcp13, tcp12, quic, quic0) = (
        fb("tcp-1.3-full"),
        fb("tcp-1.2-full"),
        fb("quic-full"),
        fb("quic-0rtt"),
    );
    let trips = |name: &str, saved: f64| {
        assert!(
            (0.6 * rtt..1.3 * rtt).contains(&saved),
            "{name}: {saved:.1} ms at rtt={rtt}ms ({tcp12:.1}, {tcp13:.1}, {quic:.1}, {quic0:.1})"
        );
    };
    trips("QUIC before TCP + TLS 1.3", tcp13 - quic);
    trips("QUIC 0-RTT before QUIC", quic - quic0);
    trips("TCP + TLS 1.3 before TLS 1.2", tcp12 - tcp13);
    for cell in [
        "tcp-1.3-resumed",
        "tcp-1.3-0rtt",
        "tcp-1.2-resumed",
        "quic-resumed",
    ] {
        fb(cell);
    }
    // QUIC's first byte is never a recommendation that hides a cost: either nothing got
    // worse, or it is a trade-off naming what did.
    let listed = |key: &str| -> Vec<Value> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["to"].as_str().is_some_and(|t| t.starts_with("quic")))
            .cloned()
            .collect()
    };
    for t in listed("trade_offs") {
        let c = t["caveat"].as_str().unwrap();
        assert!(
            c.starts_with("a trade-off, not a recommendation: it costs "),
            "{t}"
        );
    }
    assert!(
        !listed("recommendations").is_empty() || !listed("trade_offs").is_empty(),
        "QUIC's round trip is neither recommended nor a trade-off: {}",
        v["recommendations"]
    );
}

/// Issue 59's target: on a `--link rtt=86ms` path to `serve --quic`, a new QUIC
/// connection's time to first byte is one round trip shorter than TCP+TLS 1.3's (within
/// 10% of the RTT), and a 0-RTT one's another round trip shorter. Each figure is the sum
/// of the warm connections' median `connect`, `tls`, `request` and `first_byte` (from the
/// socket's creation, or the TCP connect, to the response's first byte), 10 connections
/// each; UDP crosses the same delay line as TCP, with its counters.
#[test]
fn quic_saves_a_round_trip_over_tcp_and_0rtt_another_at_86ms() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, url, ca) = serve_with_ca(dir.path(), &["--quic", "--early-data", "16384"]);
    let rtt = 86.0;
    let run = |extra: &[&str]| {
        let mut args = vec![
            "handshake",
            &url,
            "--roots",
            &ca,
            "-n",
            "11",
            "--link",
            "rtt=86ms",
        ];
        args.extend_from_slice(extra);
        json_run(&args)
    };
    let tcp = run(&["--resume", "off"]);
    let quic = run(&["--http3", "--resume", "off"]);
    let zero = run(&["--http3", "--resume", "tickets", "--early-data"]);
    let to_first_byte = |v: &Value| {
        ["connect", "tls", "request", "first_byte"]
            .iter()
            .map(|p| p50_ms(v, p))
            .sum::<f64>()
    };
    let (t, q, z) = (
        to_first_byte(&tcp),
        to_first_byte(&quic),
        to_first_byte(&zero),
    );
    eprintln!(
        "time to first byte at rtt=86ms: TCP+TLS 1.3 {t:.1} ms, QUIC {q:.1} ms, QUIC 0-RTT {z:.1} ms"
    );
    for (name, v) in [("tcp", &tcp), ("quic", &quic), ("0-rtt", &zero)] {
        let c = &v["link_counters"];
        eprintln!(
            "{name}: line lateness up p50 {} p99 {} max {} µs, down p50 {} p99 {} max {} µs",
            c["up"]["late_p50_us"],
            c["up"]["late_p99_us"],
            c["up"]["late_max_us"],
            c["down"]["late_p50_us"],
            c["down"]["late_p99_us"],
            c["down"]["late_max_us"]
        );
        // Every packet, UDP as TCP, went through the line and out of it, none dropped
        // (a few the server sent as the last connection closed may still be on the line
        // when the counters are read).
        for dir in ["up", "down"] {
            let packets = c[dir]["packets"].as_u64().unwrap();
            assert!(packets > 20, "{name} {dir}: {c}");
            assert!(
                c[dir]["delivered"].as_u64().unwrap() + 3 >= packets,
                "{name} {dir}: {c}"
            );
            for drop in ["model_loss", "queue_drops", "device_drops"] {
                assert_eq!(c[dir][drop], 0, "{name} {dir}: {c}");
            }
        }
    }
    assert_eq!(quic["transport"], "quic");
    assert_eq!(tcp["link"]["warm"]["round_trips"], 3, "{}", tcp["link"]);
    assert_eq!(quic["link"]["warm"]["round_trips"], 2, "{}", quic["link"]);
    assert_eq!(zero["link"]["warm"]["round_trips"], 1, "{}", zero["link"]);
    assert!(
        zero["warm"]["early_data_accepted"].as_u64().unwrap() >= 8,
        "{}",
        zero["warm"]
    );
    // The target is one round trip ± 10%, which release builds meet (80.6 ms
    // saved at load 7-8: docs/guide/link.md). Here both ends are this debug build, quinn
    // and rustls unoptimized in user space on every QUIC flight: on a loaded machine
    // their CPU comes off the round trip saved, so 20% is allowed below, 10% above.
    let one_trip = (0.8 * rtt)..=(1.1 * rtt);
    assert!(
        one_trip.contains(&(t - q)),
        "QUIC saved {:.1} ms to the first byte against TCP+TLS 1.3 (TCP {t:.1} ms, QUIC {q:.1} ms): one round trip of {rtt} ms expected",
        t - q
    );
    assert!(
        one_trip.contains(&(q - z)),
        "0-RTT saved {:.1} ms against a full QUIC handshake (QUIC {q:.1} ms, 0-RTT {z:.1} ms): one round trip of {rtt} ms expected",
        q - z
    );
    let err = server.stderr();
    assert!(!err.contains("panicked"), "{err}");
}

/// Over QUIC the server's first flight is held to 3 × what the client sent until the
/// client's address is validated (RFC 9000 §8): a certificate with 200 names (~6 KB of
/// TLS) no longer fits in 3 × 1,200 bytes, and the rest of the flight waits a round trip
/// for the client's next packets — the `certificate` phase takes one RTT, the handshake
/// two, and the report counts and warns about it.
#[test]
fn a_quic_flight_past_the_amplification_limit_costs_one_more_round_trip() {
    let _serial = serial();
    if !can_link() {
        return;
    }
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
    let server = Serve::start(&[
        "--cert",
        big.join("server-chain.pem").to_str().unwrap(),
        "--key",
        big.join("server.key").to_str().unwrap(),
        "--quic",
    ]);
    let v = json_run(&[
        "handshake",
        "--http3",
        &server.url(),
        "--roots",
        big.join("root.pem").to_str().unwrap(),
        "--resume",
        "off",
        "-n",
        "6",
        "--link",
        "rtt=60ms",
    ]);
    let rtt = 60.0;
    let flight = &v["link"]["server_flight"];
    assert_eq!(flight["fits"], false, "{flight}");
    assert!(flight["bytes"].as_u64().unwrap() > 3600, "{flight}");
    assert_eq!(flight["amplification_limit_bytes"], 3600, "{flight}");
    assert_eq!(v["link"]["warm"]["round_trips"], 3, "{}", v["link"]);
    assert!(
        v["link"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("anti-amplification limit"),
        "{}",
        v["link"]
    );
    // The certificate's bytes past the limit come a round trip after the ServerHello.
    let cert = p50_ms(&v, "certificate");
    let tls = p50_ms(&v, "tls");
    assert!(
        cert >= rtt - 0.5 && cert <= rtt * 1.05 + 3.0,
        "certificate p50 {cert:.1} ms at rtt=60ms: one round trip expected"
    );
    assert!(
        tls >= 2.0 * rtt - 0.5 && tls <= 2.0 * rtt * 1.05 + 5.0,
        "QUIC handshake p50 {tls:.1} ms at rtt=60ms: two round trips expected"
    );
}

/// A server of ours for the counter tests: its URL and CA file (kept in `dir`).
fn serve_with_ca(dir: &Path, extra: &[&str]) -> (Serve, String, String) {
    let ca = dir.join("ca.pem");
    let server = Serve::ecdsa_writing_ca(&ca, extra);
    let url = server.url();
    (server, url, ca.to_str().unwrap().to_string())
}

#[test]
fn the_counters_show_the_model_loss_and_a_full_queue() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url, ca) = serve_with_ca(dir.path(), &["--body-size", "100000"]);
    // 5% loss each way: the model's drops over the packets it was given.
    let v = json_run(&[
        "load",
        &url,
        "--roots",
        &ca,
        "-n",
        "400",
        "-c",
        "8",
        "--link",
        "rtt=2ms,loss=5%",
    ]);
    let c = &v["link_counters"];
    assert_eq!(c["spec"], "rtt=2ms,loss=5%", "{c}");
    let mut packets = 0;
    let mut lost = 0;
    for dir in ["up", "down"] {
        let d = &c[dir];
        let n = d["packets"].as_u64().unwrap();
        assert!(n > 0, "{dir}: {d}");
        assert!(d["bytes"].as_u64().unwrap() > 0, "{dir}: {d}");
        assert!(d["delivered"].as_u64().unwrap() > 0, "{dir}: {d}");
        assert!(d["late_max_us"].as_f64().unwrap() > 0.0, "{dir}: {d}");
        assert_eq!(d["queue_drops"], 0, "{dir}: no rate, no queue: {d}");
        packets += n;
        lost += d["model_loss"].as_u64().unwrap();
    }
    // Binomial: 5 standard deviations either side of 5%.
    let expected = packets as f64 * 0.05;
    let sd = (packets as f64 * 0.05 * 0.95).sqrt();
    assert!(
        (lost as f64 - expected).abs() <= 5.0 * sd,
        "{lost} of {packets} packets lost by the model, expected about {expected:.0}: {c}"
    );
    for end in ["client", "server"] {
        let cc = c["congestion_control"][end].as_str().unwrap();
        assert!(!cc.is_empty() && cc != "unknown", "{end}: {c}");
    }

    // A 5-packet queue in front of 8 Mbit/s overflows under a 100 kB response.
    let v = json_run(&[
        "handshake",
        &url,
        "--roots",
        &ca,
        "-n",
        "2",
        "--link",
        "rtt=10ms,down=8mbit,queue=5pkt",
    ]);
    let down = &v["link_counters"]["down"];
    assert!(down["queue_drops"].as_u64().unwrap() > 0, "{down}");
    assert_eq!(down["queue_peak_packets"], 5, "{down}");
    assert_eq!(down["model_loss"], 0, "{down}");
    let run = tlsperf([
        "handshake",
        &url,
        "--roots",
        &ca,
        "-n",
        "1",
        "--link",
        "rtt=10ms",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("link rtt=10ms, what it carried:")
            && run.stdout.contains("TCP congestion control: client "),
        "{}",
        run.stdout
    );
}

/// A UDP echo on 127.0.0.1 (the host's side of a link): its address, and its thread,
/// which ends 2 s after the last datagram.
fn udp_echo() -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let echo = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    echo.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let to = echo.local_addr().unwrap();
    let echoer = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = echo.recv_from(&mut buf) {
            let _ = echo.send_to(&buf[..n], from);
        }
    });
    (to, echoer)
}

/// A UDP socket opened inside `link`'s namespace (the client's side).
fn udp_socket_inside(link: &tlsperf::link::Link) -> std::net::UdpSocket {
    let _inside = link.enter().unwrap();
    std::net::UdpSocket::bind("0.0.0.0:0").unwrap()
}

/// Jitter draws each packet's delay on its own: the mean round trip stays the RTT even for
/// packets sent much closer together than the jitter (kept in order, each would wait for
/// the slowest before it: +45% here).
#[test]
fn jitter_leaves_the_mean_round_trip_at_the_rtt() {
    use tlsperf::link::{Link, LinkSpec};
    let _serial = serial();
    if !can_link() {
        return;
    }
    let (to, echoer) = udp_echo();
    let spec: LinkSpec = "rtt=20ms,jitter=10ms".parse().unwrap();
    let link = Link::start(&spec).unwrap();
    let sock = udp_socket_inside(&link);
    sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let rx = sock.try_clone().unwrap();
    let receiver = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = rx.recv(&mut buf) {
            if n >= 8 {
                got.push((
                    u64::from_be_bytes(buf[..8].try_into().unwrap()),
                    Instant::now(),
                ));
            }
        }
        got
    });
    // 2,000 probes 0.25 ms apart: about 80 in flight each way, 40 per jitter's width.
    let n = 2000u64;
    let t0 = Instant::now();
    let mut sent = Vec::new();
    for i in 0..n {
        let due = t0 + Duration::from_micros(250 * i);
        while Instant::now() < due {
            std::thread::sleep(Duration::from_micros(50));
        }
        let mut probe = [0u8; 100];
        probe[..8].copy_from_slice(&i.to_be_bytes());
        sent.push(Instant::now());
        sock.send_to(&probe, to).unwrap();
    }
    let got = receiver.join().unwrap();
    let counters = link.counters();
    drop(link);
    echoer.join().unwrap();
    assert!(
        got.len() as u64 > n * 95 / 100,
        "{} of {n} echoes",
        got.len()
    );
    let rtts: Vec<f64> = got
        .iter()
        .map(|(i, t)| (*t - sent[*i as usize]).as_secs_f64() * 1e3)
        .collect();
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let (lo, hi) = rtts
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), &r| (l.min(r), h.max(r)));
    // The sum of two uniform draws over 5..15 ms: sd 4.1 ms, the mean of ~2,000 within
    // 0.1 ms of 20 ms (3 sd 0.3 ms); above it, the stack's and the line's own lateness:
    // 21.36 ms once in CI with the line's p99 lateness at 2.9-4.2 ms (tests running
    // beside it). A line whose packets never overtake each other gives each packet the
    // latest of the delays drawn around it: at probes 0.25 ms apart, near 15 ms each
    // way, a mean near 30 ms, far above this bound.
    assert!(
        (19.6..=22.0).contains(&mean),
        "mean round trip {mean:.3} ms at rtt=20ms,jitter=10ms (min {lo:.3}, max {hi:.3}); {counters:?}"
    );
    assert!((10.0..12.0).contains(&lo), "fastest round trip {lo:.3} ms");
    eprintln!("mean round trip {mean:.3} ms, min {lo:.3}, max {hi:.3}");
}

/// `tlsperf link SPEC -- PROGRAM`: the program runs behind the link and reaches the host's
/// servers at 127.0.0.1, one RTT away.
#[test]
fn link_runs_any_program_behind_the_link() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, _, ca) = serve_with_ca(dir.path(), &[]);
    let url = format!("https://127.0.0.1:{}/", server.port);

    // tlsperf's own client as the program: its TCP connect is the link's round trip.
    let run = tlsperf([
        "link",
        "rtt=40ms",
        "--",
        common::bin().to_str().unwrap(),
        "handshake",
        &url,
        "--roots",
        &ca,
        "-n",
        "6",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let connect = p50_ms(&v, "connect");
    assert!(
        (39.5..=40.0 * 1.05 + 3.0).contains(&connect),
        "TCP connect p50 {connect:.2} ms behind rtt=40ms"
    );
    assert!(
        run.stderr.contains("exited with 0")
            && run.stderr.contains("link rtt=40ms, what it carried:"),
        "{}",
        run.stderr
    );

    // curl, where there is one: time_connect is one round trip.
    let curl = Command::new("curl").arg("--version").output();
    if curl.is_ok_and(|o| o.status.success()) {
        let run = tlsperf([
            "link",
            "rtt=40ms",
            "--",
            "curl",
            "-sS",
            "--cacert",
            &ca,
            "-o",
            "/dev/null",
            "-w",
            "%{time_connect}",
            &format!("https://localhost:{}/", server.port),
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let secs: f64 = run.stdout.trim().parse().unwrap();
        assert!(
            (0.0395..=0.045).contains(&secs),
            "curl time_connect {secs} s behind rtt=40ms"
        );
    } else {
        eprintln!("no curl: its part skipped");
    }

    // The program's exit code (or 128 + its signal) is tlsperf's; --json puts the
    // counters on stderr, as one document.
    let run = tlsperf(["link", "rtt=1ms", "--json", "--", "sh", "-c", "exit 7"]);
    assert_eq!(run.code, 7, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stderr).unwrap();
    assert_eq!(v["exit_code"], 7);
    assert_eq!(v["link_counters"]["spec"], "rtt=1ms");
    let run = tlsperf(["link", "rtt=1ms", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(run.code, 143, "{}", run.stderr);

    // Bad input: exit 2, a plain sentence.
    for (args, says) in [
        (
            vec!["link", "rtt=1ms", "--", "no-such-program-tlsperf"],
            "cannot run 'no-such-program-tlsperf' behind the link: no such program",
        ),
        (vec!["link", "wifi", "--", "true"], "not a profile"),
        (vec!["link", "rtt=1ms"], "PROGRAM"),
    ] {
        let run = tlsperf(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert!(
            !run.stderr.contains("panicked") && !run.stderr.contains("Os {"),
            "{}",
            run.stderr
        );
    }
}

/// Starts `tlsperf link rtt=20ms -- sh -c 'echo "$(readlink /proc/self/ns/net)"; exec
/// sleep 30'` and returns it with what it made: tlsperf's devices and the program's
/// namespace. tlsperf starts with SIGINT and SIGTERM at their default actions, as a
/// command at a terminal does: a test harness started in the background of a script
/// inherits them ignored (SigIgn 0x7 under `nohup setsid bash -c … &`), the program
/// inherits that from tlsperf, and a SIGINT then left `sleep 30` running to exit 0
/// (CI failed so twice).
fn spawn_link_program(own_group: bool) -> (std::process::Child, Footprint) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(common::bin());
    cmd.args([
        "link",
        "rtt=20ms",
        "--",
        "sh",
        "-c",
        "echo \"$(readlink /proc/self/ns/net)\"; exec sleep 30",
    ])
    .env("NO_COLOR", "1")
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if own_group {
        cmd.process_group(0);
    }
    // SAFETY: between fork and exec, only signal(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut fp = footprint(child.id());
    assert!(!fp.devices.is_empty(), "no device seen: {fp:?}");
    let host_ns = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_ne!(line.trim(), host_ns.to_string_lossy(), "not in a namespace");
    fp.namespaces = vec![line.trim().to_string()];
    (child, fp)
}

#[test]
fn nothing_remains_after_link_s_program_ends_fails_or_is_interrupted() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    // Ctrl-C at a terminal: SIGINT to the whole group, tlsperf and the program.
    let (child, fp) = spawn_link_program(true);
    let group = child.id() as i32;
    // SAFETY: signals the test's own child process group.
    unsafe {
        libc::kill(-group, libc::SIGINT);
    }
    let (code, err) = finish(child);
    assert_eq!(code, 130, "{err}");
    assert!(
        err.contains("sleep exited with 130") || err.contains("exited with 130"),
        "{err}"
    );
    assert_gone(&fp);

    // SIGTERM to tlsperf alone: passed on to the program.
    let (child, fp) = spawn_link_program(false);
    // SAFETY: signals the test's own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let (code, err) = finish(child);
    assert_eq!(code, 143, "{err}");
    assert_gone(&fp);

    // SIGKILL to tlsperf: the program is killed with it (no destructor runs).
    let (mut child, fp) = spawn_link_program(false);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_gone(&fp);

    // A program that fails at once.
    let child = spawn(&["link", "rtt=20ms", "--", "sh", "-c", "exit 3"]);
    let (code, _) = finish(child);
    assert_eq!(code, 3);
}

/// `cc=NAME`: the link's namespace defaults to the congestion control asked for (what a
/// program behind the link reads from its sysctl), the counters record it beside the
/// host's, and a name the kernel lacks or does not allow a namespace is refused in words.
#[test]
fn cc_sets_the_congestion_control_behind_the_link_and_the_counters_record_it() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
            .unwrap()
            .trim()
            .to_string()
    };
    let host = sysctl("tcp_congestion_control");
    let allowed = sysctl("tcp_allowed_congestion_control");
    if !allowed.split_whitespace().any(|c| c == "reno") {
        eprintln!("SKIPPED: reno is not in tcp_allowed_congestion_control ({allowed})");
        return;
    }
    let run = tlsperf([
        "link",
        "cc=reno,rtt=10ms",
        "--json",
        "--",
        "cat",
        "/proc/sys/net/ipv4/tcp_congestion_control",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "reno", "behind the link");
    // stderr is one document, even when the machine is too busy for the link's timing:
    // the warnings are inside it.
    let v: Value = serde_json::from_str(&run.stderr).unwrap();
    assert!(v["warnings"].is_array(), "{v}");
    let c = &v["link_counters"];
    assert_eq!(c["spec"], "rtt=10ms,cc=reno", "{c}");
    assert_eq!(c["congestion_control"]["client"], "reno", "{c}");
    assert_eq!(c["congestion_control"]["server"], host.as_str(), "{c}");
    // The host's own default is untouched.
    assert_eq!(sysctl("tcp_congestion_control"), host);

    // tlsperf's own client behind such a link: the result records it.
    let dir = tempfile::tempdir().unwrap();
    let (_server, url, ca) = serve_with_ca(dir.path(), &[]);
    let v = json_run(&[
        "handshake",
        &url,
        "--roots",
        &ca,
        "-n",
        "1",
        "--link",
        "rtt=4ms,cc=reno",
    ]);
    let cc = &v["link_counters"]["congestion_control"];
    assert_eq!(cc["client"], "reno", "{cc}");
    assert_eq!(cc["server"], host.as_str(), "{cc}");

    // A name this kernel lacks: exit 2, saying what it has.
    let run = tlsperf(["link", "rtt=1ms,cc=nosuchcc", "--", "true"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("cc=nosuchcc: this kernel has no TCP congestion control 'nosuchcc'")
            && run.stderr.contains("available: "),
        "{}",
        run.stderr
    );
    // One the kernel has but does not let a namespace default to: exit 2, saying how to
    // allow it; allowed, it is set.
    let available = sysctl("tcp_available_congestion_control");
    if let Some(other) = available
        .split_whitespace()
        .find(|c| !allowed.split_whitespace().any(|a| a == *c))
    {
        let spec = format!("rtt=1ms,cc={other}");
        let run = tlsperf(["link", &spec, "--", "true"]);
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("net.ipv4.tcp_allowed_congestion_control"),
            "{}",
            run.stderr
        );
    }
    for other in allowed.split_whitespace() {
        let spec = format!("rtt=1ms,cc={other}");
        let run = tlsperf([
            "link",
            &spec,
            "--",
            "cat",
            "/proc/sys/net/ipv4/tcp_congestion_control",
        ]);
        assert_eq!(run.code, 0, "{spec}: {}", run.stderr);
        assert_eq!(run.stdout.trim(), other);
    }
}

/// A profile with a field overriding it, and a queue given in milliseconds, through the
/// command line: the counters show the profile's figures with the override, and a queue
/// of 6 ms at 8 Mbit/s (6,000 bytes: four full packets) overflows under a 100 kB answer.
#[test]
fn a_profile_with_overrides_and_a_queue_in_milliseconds() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let run = tlsperf([
        "link",
        "transatlantic,rtt=2ms,loss=1%",
        "--json",
        "--",
        "true",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stderr).unwrap();
    assert_eq!(
        v["link_counters"]["spec"], "transatlantic,rtt=2ms,loss=1%",
        "{v}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (_server, url, ca) = serve_with_ca(dir.path(), &["--body-size", "100000"]);
    let v = json_run(&[
        "handshake",
        &url,
        "--roots",
        &ca,
        "-n",
        "2",
        "--link",
        "rtt=10ms,down=8mbit,queue=6ms",
    ]);
    let down = &v["link_counters"]["down"];
    assert!(down["queue_drops"].as_u64().unwrap() > 0, "{down}");
    let peak = down["queue_peak_bytes"].as_u64().unwrap();
    assert!(
        (4500..=6000).contains(&peak),
        "queue peak {peak} bytes: {down}"
    );
    assert_eq!(v["link_counters"]["spec"], "rtt=10ms,down=8mbit,queue=6ms");
    // No rate to turn milliseconds into bytes: exit 2, saying why.
    let run = tlsperf(["link", "rtt=10ms,queue=6ms", "--", "true"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("needs a rate"), "{}", run.stderr);
}

/// Uploads over a link (`load --body-size`): the upload goodput is what the `up=` rate
/// leaves after TCP's and TLS's overhead and slow start, never more; `--timeout` still
/// ends an upload that the rate makes too slow, naming the step it interrupted.
#[test]
fn uploads_over_a_link_are_limited_by_its_up_rate_and_by_the_timeout() {
    let _serial = serial();
    if !can_link() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, url, ca) = serve_with_ca(dir.path(), &[]);
    // 20 Mbit/s up: 2.5 MB/s of IP bytes at most.
    let v = json_run(&[
        "load",
        &url,
        "--roots",
        &ca,
        "-n",
        "6",
        "-c",
        "1",
        "--body-size",
        "1000000",
        "--link",
        "rtt=10ms,up=20mbit",
    ]);
    assert_eq!(v["requests"]["completed"], 6, "{}", v["errors"]);
    assert_eq!(v["upload_bytes"], 6_000_000);
    let up = v["goodput"]["up_bytes_per_s"].as_f64().unwrap();
    let wire = 20e6 / 8.0;
    assert!(
        (0.6 * wire..wire).contains(&up),
        "upload goodput {up:.0} B/s at up=20mbit ({wire:.0} B/s of IP bytes)"
    );
    let carried = v["link_counters"]["up"]["delivered_bytes"]
        .as_u64()
        .unwrap();
    assert!(carried > 6_000_000, "the link carried {carried} bytes up");

    // 4 MB at 8 Mbit/s take 4 s: a 1 s timeout ends each upload while it is written.
    let t0 = Instant::now();
    let run = tlsperf([
        "load",
        &url,
        "--roots",
        &ca,
        "-n",
        "2",
        "-c",
        "1",
        "--body-size",
        "4000000",
        "--timeout",
        "1s",
        "--link",
        "rtt=10ms,up=8mbit",
        "--json",
    ]);
    let took = t0.elapsed();
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("timed out") && run.stderr.contains("writing the request"),
        "{}",
        run.stderr
    );
    assert!(took < Duration::from_secs(6), "the run took {took:?}");
}

/// `Link::start_bare` (the floor `examples/link_accuracy goodput` measures the delay line
/// against): the same namespace and devices with a forwarder that writes each packet as
/// soon as it reads it, whatever the spec says: no delay (a probe comes back well within
/// the 400 ms the spec asks for), no loss (50% asked), every packet counted both ways.
#[test]
fn a_bare_forwarder_carries_every_packet_at_once_whatever_the_spec() {
    use tlsperf::link::{Link, LinkSpec};
    let _serial = serial();
    if !can_link() {
        return;
    }
    let (to, echoer) = udp_echo();
    let spec: LinkSpec = "rtt=400ms,loss=50%".parse().unwrap();
    let link = Link::start_bare(&spec).unwrap();
    let sock = udp_socket_inside(&link);
    sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let n = 40;
    let mut buf = [0u8; 64];
    for i in 0..n {
        let t = Instant::now();
        sock.send_to(&[i as u8; 32], to).unwrap();
        let got = sock
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("probe {i} lost: {e}"));
        assert_eq!(got, 32);
        // Half the spec's round trip: the forwarder applies none of it.
        assert!(
            t.elapsed() < Duration::from_millis(200),
            "probe {i}: {:?}",
            t.elapsed()
        );
    }
    let (up, down) = (link.up(), link.down());
    drop(link);
    echoer.join().unwrap();
    for c in [up, down] {
        assert!(c.packets >= n, "{c:?}");
        assert_eq!(c.delivered, c.packets, "{c:?}");
        assert_eq!(c.lost + c.overflow + c.write_failed, 0, "{c:?}");
        assert_eq!(c.late_ns_max, 0, "{c:?}");
    }
}
