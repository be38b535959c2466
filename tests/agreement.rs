//! Our latency figures against h2load's on the same scenario (issue: "our percentiles
//! agree with h2load's within 15%"): nginx from the distribution's packages serving a
//! 1 MiB body to one keep-alive connection, so a request's time is the server's and the
//! transfer's rather than either client's own overhead. h2load prints min, max, mean and
//! standard deviation but no percentiles, so means are compared: the median over five
//! rounds, the tools alternating, within 15%. Skipped (with the reason printed) when
//! nginx or h2load is not installed.
//!
//! A test binary of its own: the other tests' parallel load would disturb the timing. Run
//! in optimized builds only: a debug build of our client against h2load (C, -O2) measures
//! the compiler's optimizer, not the tool (seen: 1.16× in a debug CI run on a busy machine).

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::process::Command;

use common::nginx::{BIG_BYTES, Nginx};
use common::tlsperf;

/// h2load's "time for request" mean, in microseconds.
fn h2load_mean_us(url: &str, requests: u32) -> f64 {
    let out = Command::new("h2load")
        .args([
            "--h1",
            "-t",
            "1",
            "-c",
            "1",
            "-n",
            &requests.to_string(),
            url,
        ])
        .output()
        .expect("h2load runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "h2load: {text}");
    assert!(
        text.contains(&format!("{requests} succeeded")),
        "h2load: {text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("time for request:"))
        .unwrap_or_else(|| panic!("no 'time for request' in {text}"));
    // time for request:  MIN  MAX  MEAN  SD  +/-SD
    let mean = line.split_whitespace().nth(5).expect("a mean");
    duration_us(mean)
}

/// "719us", "1.82ms", "1.2s" → microseconds.
fn duration_us(s: &str) -> f64 {
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e6)
    } else {
        panic!("unknown duration {s:?}")
    };
    num.parse::<f64>().unwrap_or_else(|e| panic!("{s:?}: {e}")) * scale
}

/// `tlsperf load`'s mean request latency, in microseconds.
fn tlsperf_mean_us(url: &str, root: &str, requests: u32) -> f64 {
    let run = tlsperf([
        "load",
        url,
        "--roots",
        root,
        "-c",
        "1",
        "--threads",
        "1",
        "-n",
        &requests.to_string(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["requests"]["completed"], requests);
    assert_eq!(
        v["body_bytes"].as_u64().unwrap(),
        u64::from(requests) * BIG_BYTES as u64
    );
    v["latency"]["quantiles"]["mean_ns"].as_f64().unwrap() / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "compares a client's timing with h2load's: needs an optimized build (cargo test --release --test agreement; bench/load.sh reports the same row)"
)]
fn mean_request_latency_agrees_with_h2load_within_15_percent() {
    if !common::have(
        "h2load",
        "the agreement with h2load (apt-get install nghttp2-client)",
    ) {
        return;
    }
    let Some(nginx) = Nginx::start(true) else {
        return;
    };
    let url = format!("{}big", nginx.url());
    let requests = 400;
    // One warm-up each (page cache, first connection).
    h2load_mean_us(&url, 20);
    tlsperf_mean_us(&url, &nginx.root, 20);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        theirs.push(h2load_mean_us(&url, requests));
        ours.push(tlsperf_mean_us(&url, &nginx.root, requests));
    }
    let (a, b) = (median(ours.clone()), median(theirs.clone()));
    let ratio = a / b;
    eprintln!(
        "mean request latency: tlsperf {a:.0} µs {ours:?}, h2load {b:.0} µs {theirs:?}; ratio {ratio:.3}"
    );
    assert!(
        (0.85..=1.15).contains(&ratio),
        "tlsperf {a:.0} µs vs h2load {b:.0} µs (ratio {ratio:.3}); rounds: {ours:?} vs {theirs:?}"
    );
}
