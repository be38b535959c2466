//! `observe --group-by port --stable PORT`: three copies of the Go server side by side
//! under the same load — the stable one, an identical copy and a canary whose
//! GetCertificate sleeps 5 ms — compared in each window: the slow canary is named in every
//! window with enough handshakes, the identical copy is not (beyond the stated error rate).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::bin;
use common::watch::{observe, records};
use serde_json::Value;

/// The `share`-th of three shares of one steady load of new full handshakes (90/s in
/// all, each process's sends 11 ms after the previous one's: interleaved, so that no
/// server's handshakes overlap another's more than the others'), sent to `addr`, from
/// `start` (RFC 3339).
fn load(addr: &str, root_pem: &Path, share: usize, start: &str) -> Child {
    Command::new(bin())
        .args(["load", &format!("https://{addr}/"), "--new-conn"])
        .args(["--resume", "off", "--rate", "90", "-d", "120s"])
        .args(["--rate-share", &format!("{share}/3"), "--start-at", start])
        .args(["--sni", "localhost", "-q", "--cacert"])
        .arg(root_pem)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// RFC 3339 of `secs` since the Unix epoch.
fn rfc3339(secs: u64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn port(addr: &str) -> String {
    addr.rsplit(':').next().unwrap().to_string()
}

#[test]
fn a_slow_canary_is_named_in_every_window_and_an_identical_copy_is_not() {
    if !common::root("live capture needs root; not checking the canaries") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((server, pki)) = common::go::server_and_pki(dir.path()) else {
        return;
    };
    let (mut stable, stable_addr) = common::go::server(&server, &pki, &[]);
    let (mut copy, copy_addr) = common::go::server(&server, &pki, &[]);
    let (mut slow, slow_addr) = common::go::server(&server, &pki, &["-getcert-sleep", "5ms"]);
    let (p_stable, p_copy, p_slow) = (port(&stable_addr), port(&copy_addr), port(&slow_addr));
    let windows = dir.path().join("w.jsonl");
    let group = ["--group-by", "port", "--stable", &p_stable];
    let (obs, said) = observe(
        &[
            &["--interface", "lo", "--port", &p_stable, "--port", &p_copy][..],
            &[
                "--port",
                &p_slow,
                "--window",
                "5s",
                "--windows",
                windows.to_str().unwrap(),
            ],
            &group,
        ]
        .concat(),
    );
    let root_pem = pki.join("root.pem");
    // The three shares start together, two seconds from now.
    let loaded = (now_ns() / 1_000_000_000 + 2) * 1_000_000_000;
    let start = rfc3339(loaded / 1_000_000_000);
    let mut loads: Vec<Child> = [&stable_addr, &copy_addr, &slow_addr]
        .iter()
        .enumerate()
        .map(|(i, a)| load(a, &root_pem, i + 1, &start))
        .collect();

    // Windows wholly under the load (the first, as the loads start, is not): seven
    // compared, 60 s at most.
    let under_load = |v: &&Value| v["start_ns"].as_u64().is_some_and(|s| s > loaded);
    let compared = |r: &[Value]| {
        r.iter()
            .filter(under_load)
            .filter(|v| v["type"] == "canary" && v["canary"]["group"] == format!("port={p_slow}"))
            .count()
    };
    let started = Instant::now();
    let r = loop {
        let r = records(&windows);
        if compared(&r) >= 7 || started.elapsed() > Duration::from_secs(60) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    for l in &mut loads {
        let _ = l.kill();
        let _ = l.wait();
    }
    let out = common::interrupt_and_wait(obs, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    // The reader thread's last lines.
    std::thread::sleep(Duration::from_millis(300));
    let stderr: String = said.try_iter().collect();
    for s in [&mut stable, &mut copy, &mut slow] {
        let _ = s.kill();
        let _ = s.wait();
    }

    let all: Vec<&Value> = r.iter().filter(|v| v["type"] == "canary").collect();
    let canaries: Vec<&Value> = all.iter().copied().filter(under_load).collect();
    let of = |port: &str| -> Vec<&Value> {
        canaries
            .iter()
            .filter(|v| v["canary"]["group"] == format!("port={port}"))
            .copied()
            .collect()
    };
    let (slow_cmp, copy_cmp) = (of(&p_slow), of(&p_copy));
    assert!(
        slow_cmp.len() >= 5,
        "{} windows compared: {r:?}",
        slow_cmp.len()
    );
    for c in canaries.iter() {
        assert_eq!(c["stable"]["group"], format!("port={p_stable}"), "{c}");
        assert_eq!(c["view"], "wire", "{c}");
        assert_eq!(c["phase"], "first_app_byte", "{c}");
        assert!(c["stable"]["handshakes"].as_u64().unwrap() >= 50, "{c}");
        assert!(c["p_adjusted"].as_f64().unwrap() >= c["p"].as_f64().unwrap());
    }
    // Every window with enough handshakes names the slow one.
    for c in &slow_cmp {
        assert_eq!(c["significant"], true, "{c}");
        assert_eq!(c["slower"], "canary", "{c}");
        assert!(
            c["change"].as_f64().unwrap() > 0.5,
            "5 ms on a loopback handshake: {c}"
        );
        assert_eq!(c["comparisons"], 2, "{c}");
    }
    // Significant in each: from one window to the next (5 s later) the run goes on.
    for pair in slow_cmp.windows(2) {
        let at = |c: &Value| c["start_ns"].as_u64().unwrap();
        let run = |c: &Value| c["windows"].as_u64().unwrap();
        if at(pair[1]) == at(pair[0]) + 5_000_000_000 {
            assert_eq!(run(pair[1]), run(pair[0]) + 1, "{pair:?}");
        } else {
            assert!(run(pair[1]) >= 1, "{pair:?}");
        }
    }
    // The identical copy: each window is a test at α = 0.05 (Holm over the window's two
    // comparisons, and 25% apart at least): of about seven windows, more than one
    // significant is a failure (under 5% likely if the test keeps its rate).
    let false_alarms = copy_cmp.iter().filter(|c| c["significant"] == true).count();
    assert!(copy_cmp.len() >= 5, "{copy_cmp:?}");
    assert!(
        false_alarms <= 1,
        "{false_alarms} of {}: {copy_cmp:?}",
        copy_cmp.len()
    );
    // Each significant comparison said on stderr, the slower group first.
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains(" vs ")).collect();
    // What a run says (shown with --nocapture).
    println!("{}", said.join("\n"));
    println!("{}", slow_cmp.last().unwrap());
    println!("{}", copy_cmp.last().unwrap());
    let significant = all.iter().filter(|c| c["significant"] == true).count();
    assert_eq!(said.len(), significant, "{stderr}");
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("canary (port {p_slow}) p95 +"))
                && l.contains(&format!("vs stable (port {p_stable}), wire first_app_byte"))),
        "{stderr}"
    );
}
