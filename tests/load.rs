//! `tlsperf load URL`, `tlsperf merge` and `tlsperf compare` on load results: against our
//! own `tlsperf serve` (counts, handshake kinds, HTTP/2, open loop, server CPU, result
//! files, Ctrl-C), against failing targets, and against nginx from the distribution's
//! packages when installed, whose access log says independently how many requests
//! arrived and whether each session was resumed.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::nginx::{Nginx, reused_counts};
use common::{Run, Serve, tlsperf};
use serde_json::Value;

/// Runs `tlsperf load ARGS`.
fn load_run(args: &[&str]) -> Run {
    tlsperf(["load"].iter().chain(args).copied().collect::<Vec<_>>())
}

/// Runs `tlsperf load URL ARGS --json`, expects success and returns the result.
fn load(url: &str, args: &[&str]) -> Value {
    let mut all = vec![url, "--json"];
    all.extend_from_slice(args);
    let run = load_run(&all);
    assert_eq!(
        run.code, 0,
        "load {url} {args:?}: {}{}",
        run.stdout, run.stderr
    );
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
}

/// A result's warnings but the one saying the generator was starved of CPU: true on a
/// machine that runs many tests at once, and not what these tests are about.
fn not_starved(warnings: &Value) -> Vec<&Value> {
    warnings
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| !w.as_str().unwrap_or("").contains("generator was starved"))
        .collect()
}

/// `handshakes.kinds[kind]`, 0 when absent.
fn kind(v: &Value, kind: &str) -> u64 {
    v["handshakes"]["kinds"][kind].as_u64().unwrap_or(0)
}

/// `count` of a distribution (`latency`, `phases.tls`…).
fn count(dist: &Value) -> u64 {
    dist["quantiles"]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no quantiles.count in {dist}"))
}

/// The invariants every successful run keeps: counts agree with each other and with the
/// histograms, kinds add up to the handshakes, every status is 200.
fn assert_consistent(v: &Value, completed: u64) {
    let r = &v["requests"];
    assert_eq!(v["schema"], "tlsperf-load/1");
    assert_eq!(r["completed"], completed, "{r}");
    assert_eq!(r["failed"], 0, "{r} {}", v["error_examples"]);
    assert_eq!(r["attempted"], completed, "{r}");
    assert_eq!(v["status"]["200"], completed, "{}", v["status"]);
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["machines"], 1);
    assert_eq!(count(&v["latency"]), completed, "{}", v["latency"]);
    let q = &v["latency"]["quantiles"];
    let (min, p50, p99, max) = (
        q["min_ns"].as_u64().unwrap(),
        q["p50_ns"].as_u64().unwrap(),
        q["p99_ns"].as_u64().unwrap(),
        q["max_ns"].as_u64().unwrap(),
    );
    assert!(0 < min && min <= p50 && p50 <= p99 && p99 <= max, "{q}");
    assert!(!v["latency"]["hdr"].as_str().unwrap().is_empty());
    let hs = v["handshakes"]["total"].as_u64().unwrap();
    let kinds: u64 = v["handshakes"]["kinds"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(kinds, hs, "{}", v["handshakes"]);
    // One TLS phase sample per handshake, one request-phase sample per request.
    assert_eq!(count(&v["phases"]["tls"]), hs, "{}", v["phases"]["tls"]);
    assert_eq!(count(&v["phases"]["connect"]), hs);
    assert_eq!(count(&v["phases"]["first_byte"]), completed);
    let full = count_or_zero(&v["handshake_full"]);
    let resumed = count_or_zero(&v["handshake_resumed"]);
    assert_eq!(
        full + resumed,
        hs,
        "{} {}",
        v["handshake_full"],
        v["handshake_resumed"]
    );
    let per_conn: u64 = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(per_conn, completed, "{}", v["connections"]);
    let per_interval: u64 = v["interval_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(per_interval, completed);
    assert!(v["requests"]["per_second"].as_f64().unwrap() > 0.0);
    assert!(v["duration_s"].as_f64().unwrap() > 0.0);
}

fn count_or_zero(dist: &Value) -> u64 {
    if dist.is_null() { 0 } else { count(dist) }
}

/// A `tlsperf serve` with an ECDSA P-256 certificate and session tickets, and the CA file.
fn serve(dir: &Path) -> (Serve, String) {
    let ca = dir.join("ca.pem").to_str().unwrap().to_string();
    let s = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        &ca,
        "--resumption",
        "tickets",
    ]);
    (s, ca)
}

#[test]
fn new_connection_per_request_resumes_by_ticket_after_one_full_per_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let url = s.url();
    let v = load(
        &url,
        &[
            "-n",
            "300",
            "-c",
            "5",
            "--new-conn",
            "--resume",
            "tickets",
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 300);
    assert_eq!(v["target"], url.as_str());
    assert_eq!(v["handshakes"]["total"], 300, "{}", v["handshakes"]);
    // Each slot's first connection has no ticket yet (the five start together); every
    // later one resumes.
    let full = kind(&v, "full");
    assert!((1..=5).contains(&full), "{}", v["handshakes"]);
    assert!(kind(&v, "resumed-ticket") >= 295, "{}", v["handshakes"]);
    assert!(v["handshakes"]["resumption_rate"].as_f64().unwrap() >= 0.98);
    assert!(!v["handshake_resumed"].is_null());
    assert!(v["latency_corrected"].is_null(), "only with --rate");
    assert!(v["server"].is_null(), "only with --server-pid");
    assert_eq!(v["connections"].as_array().unwrap().len(), 5);
    let o = &v["options"];
    assert_eq!(o["requests"], 300, "{o}");
    assert_eq!(o["connections"], 5, "{o}");
    assert_eq!(o["requests_per_conn"], 1, "{o}");
    assert_eq!(o["http"], "1.1", "{o}");
    assert_eq!(o["resume"], "tickets", "{o}");
    let g = &v["generator"];
    assert!(g["cpu_seconds"].as_f64().unwrap() > 0.0, "{g}");
    assert!(g["cpu_us_per_handshake"].as_f64().unwrap() > 0.0, "{g}");
    // Only full handshakes carry a chain: each verified once, or accepted from the cache.
    assert_eq!(o["verify_cache"], true, "{o}");
    let h = &v["handshakes"];
    let (verified, cached) = (
        h["chains_verified"].as_u64().unwrap(),
        h["chains_from_cache"].as_u64().unwrap(),
    );
    assert_eq!(verified + cached, full, "{h}");
    assert!(verified >= 1, "{h}");
    assert!(h["early_data"].as_object().unwrap().is_empty(), "{h}");

    // No resumption: every handshake full, every certificate verified.
    let off = load(
        &url,
        &[
            "-n",
            "100",
            "-c",
            "5",
            "--new-conn",
            "--resume",
            "off",
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&off, 100);
    assert_eq!(kind(&off, "full"), 100, "{}", off["handshakes"]);
    assert_eq!(off["handshakes"]["resumption_rate"], 0.0);
    assert!(off["handshake_resumed"].is_null());
    assert!(
        off["phases"]["verify"]["quantiles"]["min_ns"]
            .as_u64()
            .unwrap()
            > 0
    );
    // The same chain every time: the five slots' first handshakes may race, the rest
    // come from the cache.
    let h = &off["handshakes"];
    let verified = h["chains_verified"].as_u64().unwrap();
    assert!((1..=5).contains(&verified), "{h}");
    assert_eq!(
        h["chains_from_cache"].as_u64().unwrap(),
        100 - verified,
        "{h}"
    );

    // --no-verify-cache: every chain verified in full.
    let each = load(
        &url,
        &[
            "-n",
            "50",
            "-c",
            "5",
            "--new-conn",
            "--resume",
            "off",
            "--no-verify-cache",
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&each, 50);
    assert_eq!(each["options"]["verify_cache"], false);
    assert_eq!(
        each["handshakes"]["chains_verified"], 50,
        "{}",
        each["handshakes"]
    );
    assert_eq!(each["handshakes"]["chains_from_cache"], 0);
}

#[test]
fn early_data_requests_are_answered_from_0rtt() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem").to_str().unwrap().to_string();
    // rustls accepts 0-RTT with stateful resumption (serve's default).
    let s = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        &ca,
        "--early-data",
        "16384",
    ]);
    let url = s.url();
    let v = load(
        &url,
        &[
            "-n",
            "60",
            "-c",
            "2",
            "--new-conn",
            "--early-data",
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 60);
    assert_eq!(v["options"]["early_data"], true);
    let e = &v["handshakes"]["early_data"];
    // Each slot's first connection has no session; every resumed one sends its request
    // as 0-RTT data, and the server answers it. The answer comes before the client's
    // Finished, so before the server's new tickets: serve finishes the handshake (and
    // sends them) before it closes, and the generator reads them after the answer, so
    // every later connection of a slot resumes (58 of 60). Before, a 0-RTT connection
    // left without them, and each full handshake's 2 tickets served 2 0-RTT
    // connections (40 of 60), as with nginx still.
    let full = kind(&v, "full");
    assert_eq!(full, 2, "{v}");
    assert_eq!(e["not-sent"].as_u64().unwrap_or(0), full, "{e}");
    assert_eq!(
        e["accepted"].as_u64().unwrap_or(0),
        kind(&v, "resumed-ticket"),
        "{e}"
    );
    assert_eq!(e["accepted"].as_u64().unwrap_or(0), 58, "{e}");
    assert!(e.get("rejected").is_none(), "{e}");

    // Without resumption there is nothing to send 0-RTT data with: a usage error.
    let run = load_run(&[&url, "-n", "1", "--early-data", "--resume", "off"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--early-data"), "{}", run.stderr);
}

#[test]
fn keep_alive_and_requests_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let url = s.url();

    // Keep-alive: one connection per slot for the whole run.
    let v = load(&url, &["-n", "500", "-c", "5", "--cacert", &ca]);
    assert_consistent(&v, 500);
    assert_eq!(v["handshakes"]["total"], 5, "{}", v["handshakes"]);
    assert!(v["options"]["requests_per_conn"].is_null());

    // K requests per connection: each slot opens ceil(its requests ÷ K) connections.
    // Slots share the request count, so they need not get 100 each: 50 handshakes when
    // they do, at most one more per slot otherwise.
    let v = load(
        &url,
        &[
            "-n",
            "500",
            "-c",
            "5",
            "--requests-per-conn",
            "10",
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 500);
    let expected: u64 = v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["requests"].as_u64().unwrap().div_ceil(10))
        .sum();
    let hs = v["handshakes"]["total"].as_u64().unwrap();
    assert_eq!(hs, expected, "{} {}", v["handshakes"], v["connections"]);
    assert!((50..=55).contains(&hs), "{}", v["handshakes"]);
    assert!(kind(&v, "resumed-ticket") >= hs - 5, "{}", v["handshakes"]);
}

#[test]
fn http2_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let v = load(
        &s.url(),
        &["-n", "200", "-c", "4", "--http2", "--cacert", &ca],
    );
    assert_consistent(&v, 200);
    assert_eq!(v["options"]["http"], "2");
    assert_eq!(v["handshakes"]["total"], 4, "{}", v["handshakes"]);
    assert_eq!(
        v["options"]["tls"],
        serde_json::json!([]),
        "{}",
        v["options"]
    );

    assert_eq!(
        v["options"]["ciphers"],
        serde_json::json!([]),
        "{}",
        v["options"]
    );

    // The options say the versions as the flag does (`1.2`, not a Rust name), and the
    // cipher suites asked for.
    let v = load(
        &s.url(),
        &[
            "-n",
            "20",
            "-c",
            "2",
            "--tls",
            "1.2",
            "--ciphers",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 20);
    assert_eq!(
        v["options"]["tls"],
        serde_json::json!(["1.2"]),
        "{}",
        v["options"]
    );
    assert_eq!(
        v["options"]["ciphers"],
        serde_json::json!(["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]),
        "{}",
        v["options"]
    );
    assert!(v["body_bytes"].as_u64().unwrap() > 0);
}

/// A quantile of a distribution (`p50_ns`, `max_ns`…).
fn q(dist: &Value, name: &str) -> u64 {
    dist["quantiles"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no quantiles.{name} in {dist}"))
}

/// `a ≤ b` up to the histograms' resolution (3 significant digits: 0.1%, with margin).
fn le(a: u64, b: u64) -> bool {
    a <= b + b.max(a) / 500 + 1
}

/// The relationships the open loop's three distributions keep by construction: request
/// by request, corrected = raw + lateness (raw from the actual send, corrected from the
/// intended one, lateness = actual − intended).
fn assert_lateness_consistent(v: &Value) {
    let (raw, c, l) = (&v["latency"], &v["latency_corrected"], &v["send_lateness"]);
    // One lateness sample per request sent, answered or not.
    assert_eq!(
        count(l),
        v["requests"]["attempted"].as_u64().unwrap(),
        "{l}"
    );
    assert_eq!(count(c), count(raw));
    for name in ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"] {
        let (r, cq) = (q(raw, name), q(c, name));
        assert!(le(r, cq), "{name}: raw {r} > corrected {cq}");
        assert!(
            le(cq, r + q(l, "max_ns")),
            "{name}: corrected {cq} > raw {r} + lateness max {}",
            q(l, "max_ns")
        );
    }
    assert!(le(q(raw, "min_ns") + q(l, "min_ns"), q(c, "min_ns")));
    let mean = |d: &Value| d["quantiles"]["mean_ns"].as_f64().unwrap();
    if v["requests"]["failed"] == 0 {
        let sum = mean(raw) + mean(l);
        assert!(
            (mean(c) - sum).abs() <= mean(c) / 200.0 + 1e3,
            "corrected mean {} vs raw + lateness {sum}",
            mean(c)
        );
    }
    // The warning says what the figures say.
    let warned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("send lateness"));
    assert_eq!(
        warned,
        q(l, "p99_ns") as f64 > 0.1 * q(raw, "p50_ns") as f64,
        "{}",
        v["warnings"]
    );
}

#[test]
fn open_loop_rate_reports_corrected_latency_and_send_lateness() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let out = dir.path().join("rate.json");
    let v = load(
        &s.url(),
        &[
            "--rate",
            "200",
            "-d",
            "1s",
            "-c",
            "4",
            "--cacert",
            &ca,
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let done = v["requests"]["completed"].as_u64().unwrap();
    assert_consistent(&v, done);
    // A sanity check of the pacing, not of performance: 200/s for 1 s.
    assert!((140..=260).contains(&done), "{}", v["requests"]);
    assert_eq!(v["options"]["rate"], 200.0);
    let c = &v["latency_corrected"];
    assert_eq!(count(c), done, "{c}");
    assert_lateness_consistent(&v);

    // The rate is over the run's schedule, not up to its last response: at 4/s for 1 s,
    // sends at 0, 0.25, 0.5 and 0.75 s are 4 requests in 1 s (4/s), not 4 in 0.75 s.
    let v = load(
        &s.url(),
        &["--rate", "4", "-d", "1s", "-c", "1", "--cacert", &ca],
    );
    assert_eq!(v["requests"]["completed"], 4, "{}", v["requests"]);
    let secs = v["duration_s"].as_f64().unwrap();
    assert!((1.0..1.5).contains(&secs), "{secs}");
    let rate = v["requests"]["per_second"].as_f64().unwrap();
    assert!((rate - 4.0 / secs).abs() < 1e-9 && rate <= 4.0, "{rate}");

    // A server stopped from 0.8 s after the start of a 2 s run at 100/s until after its
    // end: the requests due meanwhile that no slot was free to send are counted as unsent,
    // and every due request is accounted for.
    let child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args(["load", &s.url(), "--cacert", &ca, "--json"])
        .args(["--rate", "100", "-c", "2", "-d", "2s", "--timeout", "5s"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = s.pid().to_string();
    std::thread::sleep(Duration::from_millis(800));
    let signal = |sig: &str| {
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success());
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_millis(2000));
    signal("-CONT");
    let stalled = child.wait_with_output().unwrap();
    assert_eq!(
        stalled.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stalled.stderr)
    );
    let v: Value = serde_json::from_slice(&stalled.stdout).unwrap();
    let (attempted, unsent) = (
        v["requests"]["attempted"].as_u64().unwrap(),
        v["requests"]["unsent"].as_u64().unwrap(),
    );
    assert_eq!(attempted + unsent, 200, "{}", v["requests"]);
    assert!(unsent > 50, "{}", v["requests"]);
    let warned = v["warnings"].as_array().unwrap().iter().any(|w| {
        w.as_str()
            .unwrap()
            .contains(&format!("{unsent} of the 200 requests due were never sent"))
    });
    assert!(warned, "{}", v["warnings"]);

    // The summary shows the lateness in its own line.
    let run = load_run(&[
        &s.url(),
        "--rate",
        "100",
        "-n",
        "20",
        "-c",
        "2",
        "--cacert",
        &ca,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "generator send lateness (actual − intended send instant, 20 requests): p50 "
        ),
        "{}",
        run.stdout
    );

    // Closed loop: no lateness, no corrected latency.
    let closed = load(&s.url(), &["-n", "20", "-c", "2", "--cacert", &ca]);
    assert!(
        closed["send_lateness"].is_null(),
        "{}",
        closed["send_lateness"]
    );
    assert!(closed["latency_corrected"].is_null());

    // The warning logic, through merge (which recomputes warnings): a lateness of 1 µs
    // per request warns of nothing; one as large as the latency itself warns.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let attempted = doc["requests"]["attempted"].as_u64().unwrap();
    let hist = |ns: u64| {
        let mut h = tlsperf::stats::LatencyHistogram::new();
        for _ in 0..attempted {
            h.record_ns(ns).unwrap();
        }
        serde_json::to_value(tlsperf::load::result::Dist::of(h)).unwrap()
    };
    let p50 = q(&doc["latency"], "p50_ns");
    for (lateness_ns, warns) in [(1_000, false), (p50, true)] {
        doc["send_lateness"] = hist(lateness_ns);
        let f = dir.path().join(format!("late-{lateness_ns}.json"));
        std::fs::write(&f, serde_json::to_vec(&doc).unwrap()).unwrap();
        // The same run twice, as two files (one file given twice is refused).
        let g = dir.path().join(format!("late-{lateness_ns}-again.json"));
        std::fs::copy(&f, &g).unwrap();
        let merged = dir.path().join(format!("merged-{lateness_ns}.json"));
        let run = tlsperf([
            "merge",
            f.to_str().unwrap(),
            g.to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let m: Value = serde_json::from_str(&run.stdout).unwrap();
        // Merged exactly, like the other histograms.
        assert_eq!(count(&m["send_lateness"]), 2 * attempted);
        assert_eq!(
            q(&m["send_lateness"], "max_ns"),
            q(&doc["send_lateness"], "max_ns")
        );
        let w = m["warnings"].as_array().unwrap();
        assert_eq!(
            w.iter()
                .any(|w| w.as_str().unwrap().contains("send lateness p99")),
            warns,
            "{lateness_ns} ns: {w:?}"
        );
        let run = tlsperf([
            "merge",
            f.to_str().unwrap(),
            g.to_str().unwrap(),
            "--out",
            merged.to_str().unwrap(),
            "--force",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            run.stdout
                .contains("warning: the generator sent requests late"),
            warns,
            "{}",
            run.stdout
        );
    }
}

#[test]
fn cpu_per_request_and_per_handshake_have_their_own_denominators() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let pid = s.pid().to_string();
    let per = |v: &Value, who: &str, what: &str, n: u64| {
        let cpu = v[who]["cpu_seconds"].as_f64().unwrap();
        let per = v[who][what]
            .as_f64()
            .unwrap_or_else(|| panic!("{who}.{what}: {}", v[who]));
        assert!(
            (per * n as f64 / 1e6 - cpu).abs() <= cpu * 1e-9 + 1e-12,
            "{who}.{what} {per} × {n} ≠ {cpu} s"
        );
    };
    // Keep-alive: 4 handshakes carry 600 requests; the CPU is per request only.
    let v = load(
        &s.url(),
        &[
            "-n",
            "600",
            "-c",
            "4",
            "--requests-per-conn",
            "100000",
            "--server-pid",
            &pid,
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 600);
    assert_eq!(v["handshakes"]["total"], 4);
    for who in ["generator", "server"] {
        per(&v, who, "cpu_us_per_request", 600);
        assert!(v[who]["cpu_us_per_handshake"].is_null(), "{}", v[who]);
    }
    assert!(v["generator"]["cpu_us_per_request"].as_f64().unwrap() > 0.0);
    // More threads than CPUs: the utilization is over the CPUs the affinity allows, not
    // over the threads (8 threads on 2 CPUs read 4× too low).
    let v = load(
        &s.url(),
        &["-n", "200", "-c", "8", "--threads", "8", "--cacert", &ca],
    );
    let g = &v["generator"];
    let allowed = g["cpus_allowed"].as_u64().unwrap();
    assert!((1..=4096).contains(&allowed), "{g}");
    let mut cpus = allowed.min(8) as f64;
    if let Some(quota) = g["cpu_limit"].as_f64() {
        cpus = cpus.min(quota);
    }
    let expect = g["cpu_seconds"].as_f64().unwrap() / (v["duration_s"].as_f64().unwrap() * cpus);
    let got = g["utilization"].as_f64().unwrap();
    assert!(
        (got - expect).abs() <= expect * 1e-9,
        "{got} vs {expect}: {g}"
    );
    let run = load_run(&[&s.url(), "-n", "200", "-c", "2", "--cacert", &ca]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("generator:"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(line.contains("µs per request"), "{line}");
    assert!(!line.contains("per handshake"), "{line}");

    // A new connection per request: both, each over its own count.
    let v = load(
        &s.url(),
        &[
            "-n",
            "200",
            "-c",
            "4",
            "--new-conn",
            "--server-pid",
            &pid,
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 200);
    for who in ["generator", "server"] {
        per(&v, who, "cpu_us_per_request", 200);
        per(&v, who, "cpu_us_per_handshake", 200);
    }
}

#[test]
fn server_pid_reports_the_servers_cpu_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let pid = s.pid().to_string();
    // Full handshakes: enough server CPU to show at clock-tick resolution.
    let v = load(
        &s.url(),
        &[
            "-n",
            "200",
            "-c",
            "4",
            "--new-conn",
            "--resume",
            "off",
            "--server-pid",
            &pid,
            "--cacert",
            &ca,
        ],
    );
    assert_consistent(&v, 200);
    let srv = &v["server"];
    assert_eq!(srv["pid"].to_string(), pid, "{srv}");
    assert!(srv["cpu_seconds"].as_f64().unwrap() > 0.0, "{srv}");
    assert!(srv["cpu_us_per_request"].as_f64().unwrap() > 0.0, "{srv}");
    assert!(srv["cpu_us_per_handshake"].as_f64().unwrap() > 0.0, "{srv}");
    assert!(srv["rss_max_kib"].as_u64().unwrap() > 0, "{srv}");
    assert!(srv["rss_end_kib"].as_u64().unwrap() > 0, "{srv}");
    assert!(srv["rss_max_kib"].as_u64() >= srv["rss_end_kib"].as_u64());

    assert_eq!(srv["processes"], 1, "{srv}");
    assert!(not_starved(&v["warnings"]).is_empty(), "{}", v["warnings"]);

    // A process that is not there is an input error.
    let run = load_run(&[
        &s.url(),
        "-n",
        "1",
        "--server-pid",
        "999999999",
        "--cacert",
        &ca,
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("999999999"), "{}", run.stderr);
}

/// A process group started by a test, killed (all of it) when dropped.
struct Group(std::process::Child);

impl Group {
    fn start(script: &str) -> Group {
        use std::os::unix::process::CommandExt;
        Group(
            Command::new("sh")
                .args(["-c", script])
                .process_group(0)
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("/bin/kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

#[test]
fn server_pid_counts_the_whole_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    // The named process only waits; its child does the work (as an nginx master and
    // its workers).
    let busy = Group::start("sh -c 'while :; do :; done' & wait");
    let pid = busy.0.id().to_string();
    std::thread::sleep(Duration::from_millis(100));
    let v = load(
        &s.url(),
        &["-d", "1s", "-c", "2", "--server-pid", &pid, "--cacert", &ca],
    );
    let srv = &v["server"];
    assert!(srv["processes"].as_u64().unwrap() >= 2, "{srv}");
    // The child's CPU (the parent's is nil; how much the child gets depends on the
    // machine's load).
    assert!(srv["cpu_seconds"].as_f64().unwrap() > 0.0, "{srv}");
    assert!(srv["rss_max_kib"].as_u64().unwrap() > 0, "{srv}");
    assert!(not_starved(&v["warnings"]).is_empty(), "{}", v["warnings"]);
    drop(busy);

    // A tree that used no CPU: said in the result and under the summary.
    let idle = Group::start("exec sleep 30");
    let pid = idle.0.id().to_string();
    let v = load(
        &s.url(),
        &["-n", "50", "-c", "2", "--server-pid", &pid, "--cacert", &ca],
    );
    assert_eq!(v["server"]["cpu_seconds"], 0.0, "{}", v["server"]);
    assert_eq!(v["server"]["processes"], 1, "{}", v["server"]);
    let w = v["warnings"].as_array().unwrap();
    assert!(
        w.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains(&format!("--server-pid {pid}: its 1 process used no CPU"))),
        "{w:?}"
    );
    let run = load_run(&[&s.url(), "-n", "50", "--server-pid", &pid, "--cacert", &ca]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(&format!("warning: --server-pid {pid}")),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "server (pid {pid} and its descendants: 1 process)"
        )),
        "{}",
        run.stdout
    );
}

/// The fields `--out` and `--json` must agree on.
fn key_fields(v: &Value) -> Vec<Value> {
    [
        "requests",
        "handshakes",
        "latency",
        "phases",
        "status",
        "started",
        "connections",
    ]
    .iter()
    .map(|k| v[*k].clone())
    .collect()
}

#[test]
fn out_file_merge_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (s, ca) = serve(d);
    let url = s.url();
    let a = d.join("a.json");
    let a_s = a.to_str().unwrap();
    // Long enough for a few throughput intervals (compare needs 2 inner ones).
    let run = load_run(&[
        &url, "-d", "1200ms", "-c", "4", "--cacert", &ca, "--out", a_s, "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let printed: Value = serde_json::from_str(&run.stdout).unwrap();
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!(key_fields(&printed), key_fields(&written));
    assert_eq!(printed, written);

    // An existing file is not replaced without --force.
    let before = std::fs::read(&a).unwrap();
    let run = load_run(&[&url, "-n", "5", "--cacert", &ca, "--out", a_s]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--force"), "{}", run.stderr);
    assert_eq!(std::fs::read(&a).unwrap(), before, "the file is unchanged");

    let b = d.join("b.json");
    let b_s = b.to_str().unwrap();
    let run = load_run(&[
        &url,
        "-d",
        "1200ms",
        "-c",
        "4",
        "--new-conn",
        "--cacert",
        &ca,
        "--out",
        b_s,
        "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bv: Value = serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    // --force replaces.
    let run = load_run(&[
        &url, "-n", "5", "--cacert", &ca, "--out", a_s, "--force", "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let small: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!(small["requests"]["completed"], 5);
    std::fs::write(&a, &before).unwrap();
    let av = written;

    // Keep-alive and a new connection per request are different measurements: refused,
    // naming the difference, unless asked for.
    let m = d.join("m.json");
    let run = tlsperf(["merge", a_s, b_s, "--out", m.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("requests_per_conn"), "{}", run.stderr);
    assert!(run.stderr.contains("--allow-mixed"), "{}", run.stderr);
    assert!(!m.exists());
    // Merge: counts add exactly, histograms merge, the duration is the longer run's.
    let run = tlsperf([
        "merge",
        a_s,
        b_s,
        "--allow-mixed",
        "--out",
        m.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mv: Value = serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
    assert_eq!(mv, serde_json::from_str::<Value>(&run.stdout).unwrap());
    let n = |v: &Value, path: &[&str]| {
        path.iter()
            .fold(v, |v, k| &v[*k])
            .as_u64()
            .unwrap_or_else(|| panic!("{path:?}"))
    };
    for path in [
        &["requests", "completed"][..],
        &["requests", "attempted"],
        &["requests", "failed"],
        &["handshakes", "total"],
        &["handshakes", "kinds", "full"],
        &["latency", "quantiles", "count"],
        &["phases", "tls", "quantiles", "count"],
        &["phases", "first_byte", "quantiles", "count"],
        &["status", "200"],
        &["body_bytes"],
    ] {
        assert_eq!(n(&mv, path), n(&av, path) + n(&bv, path), "{path:?}");
    }
    assert_eq!(mv["machines"], 2);
    assert_eq!(
        mv["duration_s"].as_f64().unwrap(),
        av["duration_s"]
            .as_f64()
            .unwrap()
            .max(bv["duration_s"].as_f64().unwrap())
    );
    assert_eq!(mv["connections"].as_array().unwrap().len(), 8);
    let q = &mv["latency"]["quantiles"];
    assert_eq!(
        q["max_ns"].as_u64().unwrap(),
        n(&av, &["latency", "quantiles", "max_ns"])
            .max(n(&bv, &["latency", "quantiles", "max_ns"]))
    );
    // A merged result merges again.
    let m3 = d.join("m3.json");
    let run = tlsperf([
        "merge",
        m.to_str().unwrap(),
        a_s,
        "--out",
        m3.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let m3v: Value = serde_json::from_str(&std::fs::read_to_string(&m3).unwrap()).unwrap();
    assert_eq!(m3v["machines"], 3);

    // Compare: two Welch comparisons, per-connection latency and per-interval rate.
    let run = tlsperf(["compare", a_s, b_s, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let cv: Value = serde_json::from_str(&run.stdout).unwrap();
    // The one comparison document of every kind (load results used to print a bare
    // array of two comparisons): two rows.
    assert_eq!(cv["schema"], "tlsperf-compare/1", "{cv}");
    assert_eq!(cv["kind"], "load");
    let metrics: Vec<&Value> = cv["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["identity"]["metric"])
        .collect();
    // GETs: the response bodies' goodput, by value (one figure per run), and no
    // upload row.
    assert_eq!(
        metrics,
        [
            "mean latency per connection",
            "throughput per interval",
            "goodput down (response bodies)"
        ],
        "{cv}"
    );
    let down = &cv["rows"][2];
    assert_eq!(down["unit"], "bytes/s", "{down}");
    assert_eq!(
        down["a"]["median"], av["goodput"]["down_bytes_per_s"],
        "{down}"
    );
    assert_eq!(
        down["b"]["median"], bv["goodput"]["down_bytes_per_s"],
        "{down}"
    );
    let run = tlsperf(["compare", a_s, b_s]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("mean latency per connection"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("requests/s per 250 ms interval"),
        "{}",
        run.stdout
    );
    // A different offered load (here 16 connections against 4) is told beside the
    // verdicts; a different length is not.
    let mut other: Value = serde_json::from_str(&std::fs::read_to_string(&b).unwrap()).unwrap();
    other["options"]["connections"] = 16.into();
    other["options"]["duration_s"] = 9.0.into();
    let c = d.join("c.json");
    std::fs::write(&c, serde_json::to_vec(&other).unwrap()).unwrap();
    let run = tlsperf(["compare", b_s, c.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let cv: Value = serde_json::from_str(&run.stdout).unwrap();
    let warnings = cv["warnings"].to_string();
    assert!(
        warnings.contains("connections differs: A 4, B 16"),
        "{warnings}"
    );
    assert!(!warnings.contains("duration_s"), "{warnings}");

    // Bad input to merge: a damaged file (named with its line), a single file.
    let bad = d.join("bad.json");
    std::fs::write(&bad, "{\n  \"schema\": \"tlsperf-load/1\",\n  oops\n}\n").unwrap();
    let out = d.join("never.json");
    let run = tlsperf([
        "merge",
        a_s,
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("{}:3:", bad.display())),
        "{}",
        run.stderr
    );
    let other = d.join("other.json");
    std::fs::write(&other, "{\"schema\": \"something-else/1\"}\n").unwrap();
    let run = tlsperf([
        "merge",
        a_s,
        other.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("something-else/1"), "{}", run.stderr);
    let run = tlsperf(["merge", a_s, "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!out.exists(), "nothing written on errors");

    // Documents no run can write: counts that would overflow, a negative duration, more
    // completed than attempted. Exit 2 naming the problem; nothing written.
    let doctored = |name: &str, edit: &dyn Fn(&mut Value)| {
        let mut v = av.clone();
        edit(&mut v);
        let p = d.join(name);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        p
    };
    let max = doctored("max.json", &|v| {
        v["requests"]["attempted"] = u64::MAX.into();
        v["requests"]["completed"] = u64::MAX.into();
        v["requests"]["failed"] = 0.into();
    });
    let max_again = d.join("max-again.json");
    std::fs::copy(&max, &max_again).unwrap();
    let negative = doctored("negative.json", &|v| v["duration_s"] = (-1e308).into());
    let more = doctored("more.json", &|v| {
        v["requests"]["completed"] = 1_000_000_000.into()
    });
    for (args, says) in [
        (vec![&max, &max_again], "would exceed"),
        (vec![&a, &negative], "duration_s -1e308 is not within"),
        (vec![&more, &a], "is not the"),
    ] {
        let mut all = vec!["merge".to_string()];
        all.extend(args.iter().map(|p| p.to_str().unwrap().to_string()));
        all.extend(["--out".to_string(), out.to_str().unwrap().to_string()]);
        let run = tlsperf(&all);
        assert_eq!(run.code, 2, "{says}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{says}: {}", run.stderr);
        assert!(!out.exists(), "nothing written on errors");
    }
}

#[test]
fn usage_errors_exit_2() {
    let url = "https://127.0.0.1:9/";
    for args in [
        &["notaurl", "-n", "1"][..],
        &["http://x", "-n", "1"],
        &[url],
        &[url, "-n", "5", "--rate", "0"],
        &[url, "-n", "0"],
        &[url, "-n", "5", "--new-conn", "--requests-per-conn", "3"],
        &[url, "-n", "5", "--http1", "--http2"],
        &[url, "-d", "soon"],
        &[url, "-n", "5", "--body-size", "67108865"],
        &[url, "-n", "5", "--body-size", "-1"],
        &[url, "-n", "5", "--body-size", "100", "--early-data"],
    ] {
        let run = load_run(args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains("error"), "{args:?}: {}", run.stderr);
    }
    let run = load_run(&["notaurl", "-n", "1"]);
    assert!(run.stderr.contains("notaurl"), "{}", run.stderr);
    let run = load_run(&[url, "-n", "5", "--rate", "0"]);
    assert!(run.stderr.contains("--rate"), "{}", run.stderr);
    let run = load_run(&[url, "-n", "5", "--body-size", "100", "--early-data"]);
    assert!(
        run.stderr.contains("--body-size") && run.stderr.contains("--early-data"),
        "{}",
        run.stderr
    );
    let run = tlsperf(["handshake", url, "--body-size", "100", "--early-data"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

#[test]
fn closed_port_fails_every_request_as_connect_refused() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("https://127.0.0.1:{port}/");
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("run.json");
    let doc_arg = doc.to_str().unwrap();
    let run = load_run(&[
        &url,
        "-n",
        "7",
        "-c",
        "2",
        "--insecure",
        "--json",
        "--out",
        doc_arg,
    ]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("all 7 requests"), "{}", run.stderr);
    // Nothing written when no request succeeded: the corrected rerun needs no --force.
    assert!(!doc.exists(), "{} written", doc.display());
    assert!(
        run.stderr.contains(&format!("{doc_arg} not written")),
        "{}",
        run.stderr
    );
    // The result is still printed.
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["errors"]["connect-refused"], 7, "{}", v["errors"]);
    assert_eq!(v["requests"]["failed"], 7);
    assert_eq!(v["requests"]["completed"], 0);
    assert_eq!(v["handshakes"]["total"], 0);
    assert!(
        v["error_examples"]["connect-refused"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{port}")),
        "{}",
        v["error_examples"]
    );
}

#[test]
fn untrusted_ca_fails_every_request_on_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _ca) = serve(dir.path());
    let other = dir.path().join("other");
    assert_eq!(
        tlsperf(["pki", "init", other.to_str().unwrap(), "-q"]).code,
        0
    );
    let root = other.join("root.pem");
    let run = load_run(&[
        &s.url(),
        "-n",
        "4",
        "-c",
        "2",
        "--roots",
        root.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["errors"]["tls-certificate"], 4, "{}", v["errors"]);
    assert!(
        v["error_examples"]["tls-certificate"]
            .as_str()
            .unwrap()
            .contains("certificate"),
        "{}",
        v["error_examples"]
    );
}

#[test]
fn sigint_keeps_the_partial_result_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let out = dir.path().join("partial.json");
    let child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args([
            "load",
            &s.url(),
            "-d",
            "30s",
            "-c",
            "2",
            "--cacert",
            &ca,
            "--out",
            out.to_str().unwrap(),
            "--json",
        ])
        .env_remove("TLSPERF_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let sent = Instant::now();
    let output = common::interrupt_and_wait(child, Duration::from_secs(10));
    let took = sent.elapsed();
    assert!(took < Duration::from_secs(5), "stopped after {took:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(printed, written);
    assert_eq!(written["interrupted"], true);
    let done = written["requests"]["completed"].as_u64().unwrap();
    assert!(done > 0, "{}", written["requests"]);
    assert_eq!(count(&written["latency"]), done);
    assert!(written["duration_s"].as_f64().unwrap() < 10.0);
}

#[test]
fn nginx_log_agrees_on_requests_and_resumption() {
    let Some(nginx) = Nginx::start(true) else {
        return;
    };
    let url = nginx.url();
    let root = nginx.root.clone();

    // A new connection per request, resumed by ticket: nginx saw every request, and
    // resumed exactly the sessions tlsperf reports resumed.
    let v = load(
        &url,
        &[
            "-n",
            "200",
            "-c",
            "4",
            "--new-conn",
            "--resume",
            "tickets",
            "--roots",
            &root,
        ],
    );
    assert_consistent(&v, 200);
    assert_eq!(v["handshakes"]["total"], 200);
    let lines = nginx.log_lines(200);
    assert_eq!(lines.len(), 200, "{lines:?}");
    let (fresh, reused) = reused_counts(&lines, None);
    assert_eq!(reused, kind(&v, "resumed-ticket"), "{}", v["handshakes"]);
    assert_eq!(fresh, kind(&v, "full"), "{}", v["handshakes"]);
    // Everything after each slot's first handshake resumed.
    assert!(reused >= 196, "{}", v["handshakes"]);

    // No resumption: nginx resumed nothing.
    let off = load(
        &url,
        &[
            "-n",
            "100",
            "-c",
            "4",
            "--new-conn",
            "--resume",
            "off",
            "--roots",
            &root,
        ],
    );
    assert_consistent(&off, 100);
    assert_eq!(kind(&off, "full"), 100);
    let lines = nginx.log_lines(300);
    assert_eq!(lines.len(), 300, "{lines:?}");
    assert_eq!(reused_counts(&lines[200..], None), (100, 0));

    // Keep-alive: three connections carry all the requests.
    let ka = load(&url, &["-n", "300", "-c", "3", "--roots", &root]);
    assert_consistent(&ka, 300);
    assert_eq!(ka["handshakes"]["total"], 3, "{}", ka["handshakes"]);
    let lines = nginx.log_lines(600);
    assert_eq!(lines.len(), 600, "{lines:?}");
    reused_counts(&lines[300..], None);
}

/// `load --http2` streams response bodies and counts their bytes: four 64 MiB bodies in
/// flight at once never sit in memory (it used to collect each whole body: 786 MB of
/// resident memory for four 100 MB bodies).
#[test]
fn http2_streams_large_bodies() {
    const BODY: u64 = 64 << 20;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let ca = ca.to_str().unwrap();
    let body = BODY.to_string();
    let s = Serve::start(&[
        "--gen-cert",
        "ecdsa-p256",
        "--write-ca",
        ca,
        "--body-size",
        &body,
    ]);
    let url = s.url();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args([
            "load",
            &url,
            "-n",
            "4",
            "-c",
            "4",
            "--http2",
            "--json",
            "--cacert",
            ca,
            // 256 MiB through debug builds of both ends on a busy machine: more than the
            // default 10 s per request.
            "--timeout",
            "180s",
        ])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Peak resident memory of the generator while it runs.
    let status = format!("/proc/{}/status", child.id());
    let sampler = std::thread::spawn(move || {
        let mut peak_kib = 0u64;
        while let Ok(text) = std::fs::read_to_string(&status) {
            if let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak_kib = peak_kib.max(kib);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak_kib
    });
    let out = child.wait_with_output().unwrap();
    let peak_kib = sampler.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["body_bytes"].as_u64(),
        Some(4 * BODY),
        "{}",
        v["body_bytes"]
    );
    assert!(
        peak_kib > 0 && peak_kib < 160 * 1024,
        "generator peak RSS {peak_kib} KiB for 4 × 64 MiB bodies"
    );
}

/// The phase boundaries of `load` against a server whose delay the test controls (a relay
/// holding every server→client byte for 250 ms), HTTP/1.1 and HTTP/2: the waits on the
/// server hold the delay, what only depends on us does not.
#[test]
fn phase_boundaries_follow_a_known_server_delay() {
    // Long against what a busy machine can stall a thread for (ours must stay under
    // half of it).
    const D: u64 = 250_000_000;
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let relay = common::relay::DelayRelay::start(s.port, Duration::from_nanos(D));
    let url = format!("https://localhost:{}/", relay.port);
    for http in ["--http1", "--http2"] {
        let v = load(
            &url,
            &["-n", "12", "-c", "2", "--new-conn", http, "--cacert", &ca],
        );
        let q = |phase: &str, field: &str| {
            v["phases"][phase]["quantiles"][field]
                .as_u64()
                .unwrap_or_else(|| panic!("{http} {phase} {field}: {}", v["phases"]))
        };
        for waits in ["server_hello", "first_byte"] {
            assert!(
                q(waits, "min_ns") >= D,
                "{http} {waits}: {}",
                v["phases"][waits]
            );
        }
        // Ours: far under the delay at the median (a fiftieth of it: a machine running
        // many tests at once stalls a thread for a millisecond or more; 1 ms failed
        // there at 1.04 ms).
        assert!(
            q("client_hello", "p50_ns") < D / 50,
            "{http}: {}",
            v["phases"]
        );
        assert!(
            q("client_hello", "max_ns") < D / 2,
            "{http}: {}",
            v["phases"]
        );
        if http == "--http1" {
            assert!(q("request", "p50_ns") < D / 50, "{}", v["phases"]);
            assert!(q("request", "max_ns") < D / 2, "{}", v["phases"]);
        }
    }
}

/// A setup that cannot work (here: a server whose certificate we do not trust) does not
/// hammer the server for the whole `-d`: once the first attempts (connections + 10) all
/// fail alike and none succeeded, the run stops with that error (exit 1, `gave_up`).
#[test]
fn a_setup_that_cannot_work_gives_up_after_the_first_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _ca) = serve(dir.path());
    let other = dir.path().join("other");
    assert_eq!(
        tlsperf(["pki", "init", other.to_str().unwrap(), "-q"]).code,
        0
    );
    let root = other.join("root.pem");
    let t = Instant::now();
    let run = load_run(&[
        &s.url(),
        "-d",
        "20s",
        "-c",
        "4",
        "--roots",
        root.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["gave_up"], true, "{v}");
    assert_eq!(v["interrupted"], false, "{v}");
    let failed = v["requests"]["failed"].as_u64().unwrap();
    // 4 + 10 alike, plus those already in flight when it stopped.
    assert!((14..=18).contains(&failed), "{failed}: {}", v["errors"]);
    assert!(
        run.stderr.contains("every attempt failed the same way"),
        "{}",
        run.stderr
    );
}

/// Ctrl-C while an open-loop slot waits for its next send instant (`--rate 0.01`: one
/// request every 100 s per slot) and while a request waits on a server that never
/// answers (`--timeout 300s`): the run stops within a second, keeps what was measured
/// and exits 130.
#[test]
fn sigint_stops_waiting_slots_and_requests_in_flight() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    for args in [
        vec!["--rate", "0.01", "-c", "1", "-d", "300s"],
        vec!["-n", "3", "-c", "1", "--timeout", "300s"],
    ] {
        let url = format!("https://127.0.0.1:{port}/");
        let mut all = vec!["load", url.as_str(), "--insecure", "--json"];
        all.extend_from_slice(&args);
        let child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
            .args(&all)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let sent = Instant::now();
        let out = common::interrupt_and_wait(child, Duration::from_secs(20));
        let took = sent.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{args:?}: {stderr}");
        assert!(
            took < Duration::from_secs(2),
            "{args:?}: stopped after {took:?}"
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["interrupted"], true, "{v}");
    }
    drop(silent);

    // Stopped 1.5 s into a run whose one answer came at once: its time runs to the stop,
    // not to that answer.
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args(["load", &s.url(), "--cacert", &ca, "--json"])
        .args(["--rate", "0.1", "-c", "1", "-d", "300s"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let out = common::interrupt_and_wait(child, Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(130));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["requests"]["completed"], 1, "{}", v["requests"]);
    let secs = v["duration_s"].as_f64().unwrap();
    // From the run's start (after the process started and measured its pacer's spin
    // cost: 1.36 s once in CI) to the stop, not to the answer (a few ms).
    assert!((1.0..5.0).contains(&secs), "{secs}");
}

/// Ctrl-C during the `--start-at` wait: the run never started, so the generator was not
/// busy at all. It used to report `utilization: 212.0` ("21200% busy") and
/// `saturated: true`: its wind-down CPU over a window of 1 µs. Exit 130, the (empty)
/// result printed.
#[test]
fn sigint_during_the_start_at_wait_reports_an_idle_generator() {
    use std::io::{BufRead, BufReader};
    let at = (time::OffsetDateTime::now_utc() + time::Duration::seconds(120))
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tlsperf"))
        .args([
            "load",
            "https://127.0.0.1:9/",
            "-d",
            "5s",
            "--rate",
            "100",
            "--start-at",
            &at,
            "--json",
        ])
        .env_remove("TLSPERF_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    for _ in 0..20 {
        line.clear();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 || line.contains("waiting until") {
            break;
        }
    }
    assert!(line.contains("waiting until"), "{line}");
    // The note comes before the runtime and its signal handler: give it time.
    std::thread::sleep(Duration::from_secs(2));
    let output = common::interrupt_and_wait(child, Duration::from_secs(30));
    assert_eq!(output.status.code(), Some(130), "{output:?}");
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["requests"]["attempted"], 0, "{v}");
    let g = &v["generator"];
    assert_eq!(g["saturated"], false, "{g}");
    assert!(g["utilization"].as_f64().unwrap() <= 1.0, "{g}");
}

/// `-n 5 -d 10s` done in a fraction of a second reported `duration_s: 10.0` (and 0.5/s):
/// a run its count ended reports the time it took.
#[test]
fn a_run_ended_by_its_count_reports_the_time_it_took() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let began = Instant::now();
    let v = load(
        &s.url(),
        &["-n", "5", "-c", "1", "-d", "60s", "--cacert", &ca],
    );
    let took = began.elapsed().as_secs_f64();
    assert_eq!(v["requests"]["completed"], 5, "{v}");
    let d = v["duration_s"].as_f64().unwrap();
    assert!(d < 30.0 && d <= took, "duration_s {d} after {took} s");
}

/// A server answering 404 (a path it does not have): every request fails as `http-4xx`
/// (the status still counted), the run stops as a set-up that cannot work, and
/// `handshake` and `capacity` fail alike; `--ok-status` makes 404 a success. Before,
/// every 4xx/5xx answer counted as a completed request ("10 completed, 0 failed").
#[test]
fn error_statuses_fail_their_requests_unless_ok_status_says_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let s = Serve::ecdsa_writing_ca(&ca, &[]);
    let ca = ca.to_str().unwrap();
    let url = format!("https://localhost:{}/nope", s.port);
    let run = load_run(&[&url, "-n", "10", "-c", "1", "--cacert", ca, "--json"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["requests"]["completed"], 0, "{v}");
    assert_eq!(v["requests"]["failed"], v["requests"]["attempted"], "{v}");
    assert_eq!(v["status"]["404"], v["requests"]["attempted"], "{v}");
    assert_eq!(v["errors"]["http-4xx"], v["requests"]["attempted"], "{v}");
    assert!(
        run.stderr
            .contains("HTTP 404, not a success (--ok-status 100-399)"),
        "{}",
        run.stderr
    );
    let v = load(
        &url,
        &[
            "-n",
            "10",
            "-c",
            "1",
            "--cacert",
            ca,
            "--ok-status",
            "2xx,404",
        ],
    );
    assert_eq!(v["requests"]["completed"], 10, "{v}");
    assert_eq!(v["requests"]["failed"], 0, "{v}");
    assert_eq!(v["options"]["ok_status"], "200-299,404", "{v}");

    let hs = tlsperf(["handshake", &url, "-n", "2", "--cacert", ca]);
    assert_eq!(hs.code, 1, "{}", hs.stderr);
    assert!(hs.stderr.contains("HTTP 404"), "{}", hs.stderr);
    let hs = tlsperf([
        "handshake",
        &url,
        "-n",
        "2",
        "--cacert",
        ca,
        "--ok-status",
        "404",
    ]);
    assert_eq!(hs.code, 0, "{}", hs.stderr);

    let cap = tlsperf([
        "capacity",
        &url,
        "--cacert",
        ca,
        "--slo",
        "p50=100ms",
        "--new-conn",
        "--step-min",
        "500ms",
        "--step-max",
        "1s",
        "--timeout",
        "2s",
        "--max-time",
        "20s",
        "-q",
    ]);
    assert_eq!(cap.code, 1, "{}", cap.stderr);
    assert!(
        cap.stderr.contains("http-4xx") && cap.stderr.contains("not answering with a success"),
        "{}",
        cap.stderr
    );
    let bad = tlsperf(["load", &url, "-n", "1", "--ok-status", "7xx"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("'7xx' is not a status class"),
        "{}",
        bad.stderr
    );
}

/// Uploads compare: two `--body-size` runs give an upload goodput row (and a download
/// one), each side's figure the result's own; against a run of GETs the upload row is in
/// one input only, not compared with nothing.
#[test]
fn compare_shows_the_goodput_of_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let url = s.url();
    let d = dir.path();
    let run_to = |name: &str, extra: &[&str]| -> (String, Value) {
        let path = d.join(name).to_str().unwrap().to_string();
        let mut args = vec![&url[..], "-d", "1s", "-c", "2", "--cacert", &ca, "-q"];
        args.extend_from_slice(extra);
        args.extend(["--out", &path]);
        let run = load_run(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        (path, v)
    };
    let (a, av) = run_to("a.json", &["--body-size", "30000"]);
    let (b, bv) = run_to("b.json", &["--body-size", "60000"]);
    let (get, _) = run_to("get.json", &[]);
    assert!(
        av["goodput"]["up_bytes_per_s"].as_f64().unwrap() > 0.0,
        "{av}"
    );
    let run = tlsperf(["compare", &a, &b, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let cv: Value = serde_json::from_str(&run.stdout).unwrap();
    let row = |metric: &str| {
        cv["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["identity"]["metric"] == metric)
            .cloned()
            .unwrap_or_else(|| panic!("no row {metric}: {cv}"))
    };
    let up = row("goodput up (request bodies)");
    assert_eq!(up["unit"], "bytes/s");
    assert_eq!(up["a"]["median"], av["goodput"]["up_bytes_per_s"], "{up}");
    assert_eq!(up["b"]["median"], bv["goodput"]["up_bytes_per_s"], "{up}");
    let ratio = bv["goodput"]["up_bytes_per_s"].as_f64().unwrap()
        / av["goodput"]["up_bytes_per_s"].as_f64().unwrap();
    assert!((up["ratio"].as_f64().unwrap() - ratio).abs() < 1e-9, "{up}");
    row("goodput down (response bodies)");
    // The text names them too.
    let run = tlsperf(["compare", &a, &b]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("goodput up (request bodies)"),
        "{}",
        run.stdout
    );
    // Against GETs: the upload row is A's alone.
    let run = tlsperf(["compare", &a, &get, "--json"]);
    let cv: Value = serde_json::from_str(&run.stdout).unwrap();
    let only_a = cv["only_in_a"].to_string();
    assert!(only_a.contains("goodput up (request bodies)"), "{cv}");
    assert!(!cv["rows"].to_string().contains("goodput up"), "{cv}");
}

/// `-q` drops the summary of a command whose result goes to a file, never the only copy:
/// `load -q` without `--out` printed nothing and exited 0 (the result was lost).
#[test]
fn quiet_keeps_a_result_that_goes_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let (s, ca) = serve(dir.path());
    let url = s.url();
    let run = load_run(&[&url, "--cacert", &ca, "-n", "5", "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("requests"), "{}", run.stdout);
    let out = dir.path().join("run.json");
    let run = load_run(&[
        &url,
        "--cacert",
        &ca,
        "-n",
        "5",
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "", "the result is in {}", out.display());
    assert!(out.exists());
}
