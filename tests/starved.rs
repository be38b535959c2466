//! A generator, or a server, starved of CPU by another process on its CPU: told apart
//! (a test binary of its own, so that its busy loops never slow the tests of other
//! binaries, which cargo runs one binary at a time; its own tests take turns).
#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::process::Command;

use common::Serve;

/// One busy loop at a time: the tests of this binary take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A short capacity search at p99 ≤ 20 ms from 50/s, new connections, at most 40 s.
const SEARCH: [&str; 13] = [
    "--slo",
    "p99=20ms",
    "--new-conn",
    "--step-min",
    "500ms",
    "--step-max",
    "1s",
    "--timeout",
    "2s",
    "--max-time",
    "40s",
    "--start-rate",
    "50",
];

/// Kills a child when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The set-up both tests share: their turn, a `tlsperf serve` pinned to CPU 1 (its CA
/// written in `dir`), and a busy loop that outranks it or the generator (nice -10) on
/// `busy_cpu`. `None` on a machine of fewer than 2 CPUs.
struct Setup {
    _turn: std::sync::MutexGuard<'static, ()>,
    serve: Serve,
    ca: String,
    pid: String,
    _busy: Killed,
}

fn setup(dir: &std::path::Path, busy_cpu: &str) -> Option<Setup> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs (the server on one, the generator on the other)");
        return None;
    }
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let ca = dir.join("ca.pem");
    let serve = Serve::ecdsa_writing_ca(&ca, &[]);
    let pid = serve.pid().to_string();
    let pinned = Command::new("taskset")
        .args(["-apc", "1", &pid])
        .output()
        .unwrap();
    assert!(pinned.status.success(), "{pinned:?}");
    let busy = Command::new("nice")
        .args([
            "-n",
            "-10",
            "taskset",
            "-c",
            busy_cpu,
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .spawn()
        .unwrap();
    Some(Setup {
        _turn: turn,
        serve,
        ca: ca.to_str().unwrap().to_string(),
        pid,
        _busy: Killed(busy),
    })
}

/// Runs tlsperf with `args` on CPU 0: its exit code, stdout and stderr.
fn on_cpu0(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("taskset")
        .args(["-c", "0"])
        .arg(common::bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The operator's case: a busy loop that outranks the generator (nice -10) on the
/// generator's CPU, the server on a CPU of its own (`--server-pid` tells `capacity` the
/// two are apart, so the wait is not the server's). The generator uses little CPU, so
/// its CPU use cannot show it is starved; its threads' run-queue wait does. `load` warns
/// of it, and `capacity` stops as generator-bound (exit 3) saying the generator was
/// starved, instead of reporting the server's capacity.
#[test]
fn a_starved_generator_is_reported_not_taken_for_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(s) = setup(dir.path(), "0") else {
        return;
    };
    let url = s.serve.url();
    // Warnings go with the summary on stdout, errors on stderr: both.
    let (code, out, err) = on_cpu0(&["load", &url, "--rate", "200", "-d", "2s", "--cacert", &s.ca]);
    let err = out + &err;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("the generator was starved"), "{err}");
    let mut args = vec![
        "capacity",
        &url,
        "--server-pid",
        &s.pid,
        "--cacert",
        &s.ca,
        "-q",
    ];
    args.extend(SEARCH);
    let (code, out, err) = on_cpu0(&args);
    let err = out + &err;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("was starved of CPU"), "{err}");
}

/// A neighbour that outranks the server on the server's CPU (the generator on another):
/// the server uses little CPU and waits much, its failing steps say it was starved and a
/// warning lists them, instead of a lower capacity passing for the server's own.
#[test]
fn a_starved_server_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let Some(s) = setup(dir.path(), "1") else {
        return;
    };
    let url = s.serve.url();
    let mut args = vec![
        "capacity",
        &url,
        "--server-pid",
        &s.pid,
        "--cacert",
        &s.ca,
        "--json",
    ];
    args.extend(SEARCH);
    let (_, out, err) = on_cpu0(&args);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let steps = v["steps"].as_array().unwrap();
    let failed: Vec<&serde_json::Value> = steps.iter().filter(|s| s["verdict"] == "fail").collect();
    assert!(!failed.is_empty(), "{v}");
    assert!(
        failed.iter().all(|s| s["why"]
            .as_str()
            .unwrap()
            .contains("the server was starved")),
        "{failed:?}"
    );
    assert!(
        v["warnings"]
            .to_string()
            .contains("the server was starved in failing step"),
        "{}",
        v["warnings"]
    );
}
