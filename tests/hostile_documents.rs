//! Result documents written to hurt the reader: histograms whose few bytes stand for
//! hundreds of KiB of counts, and more rows than tlsperf ever writes. `merge` and
//! `compare` must read them in memory proportional to the file (here under an address-space
//! limit the dense form would exceed many times over), or refuse them naming the bound.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};

/// An HdrHistogram V2 encoding of one value near 2^62 ns at 3 significant digits: 24
/// bytes that hold 55,296 count slots (432 KiB) when decoded densely.
fn far_value_histogram() -> String {
    fn leb(mut n: u64, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let zigzag = |n: i64| ((n << 1) ^ (n >> 63)) as u64;
    let mut payload = Vec::new();
    leb(zigzag(-55_000), &mut payload); // 55,000 empty slots
    leb(zigzag(1), &mut payload); // then one value
    let mut b = Vec::new();
    b.extend_from_slice(&(0x1c84_9303u32 | 0x10).to_be_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes()); // normalizing offset
    b.extend_from_slice(&3u32.to_be_bytes()); // significant digits
    b.extend_from_slice(&1u64.to_be_bytes()); // lowest
    b.extend_from_slice(&(1u64 << 62).to_be_bytes()); // highest
    b.extend_from_slice(&1f64.to_bits().to_be_bytes());
    b.extend_from_slice(&payload);
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn dist(hdr: &str) -> Value {
    json!({
        "quantiles": {"count": 1, "min_ns": 0, "mean_ns": 0.0, "p50_ns": 0, "p90_ns": 0,
                      "p95_ns": 0, "p99_ns": 0, "p999_ns": 0, "max_ns": 0},
        "hdr": hdr,
    })
}

/// An observe document whose six breakdowns hold `rows` rows each, every row with two
/// far-value histograms, and one kind with its six phases.
fn observe_doc(rows: usize) -> Value {
    let d = dist(&far_value_histogram());
    let row = json!({"handshakes": 1, "resumed": 0, "hrr": 0,
                     "server_think": d, "client_think": d});
    let table: serde_json::Map<String, Value> =
        (0..rows).map(|i| (format!("h{i}"), row.clone())).collect();
    let phases: serde_json::Map<String, Value> = [
        "connect",
        "server_think",
        "server_flight",
        "client_think",
        "tls",
        "first_app_byte",
    ]
    .iter()
    .map(|p| (p.to_string(), d.clone()))
    .collect();
    json!({
        "schema": "tlsperf-observe/1",
        "sources": [{"kind": "pcap", "name": "crafted.pcap"}],
        "ports": [], "duration_s": 1.0, "interrupted": false,
        "packets": {"frames": 0, "tcp_segments": 0, "other_ports": 0, "not_tcp": 0,
                    "kernel_drops": 0},
        "connections": {"tracked": 0, "midstream": 0, "handshakes": 1, "failed": 0,
                        "not_tls": 0, "unparsed": 0, "empty": 0, "evicted_idle": 0,
                        "evicted_half_open": 0, "over_cap": 0},
        "handshakes": {"all": {"count": 1, "phases": phases,
                               "server_flight_bytes": {"count": 0, "total": 0, "min": 0, "max": 0}}},
        "resumption": {"resumed": 0, "rate": 0.0, "by_method": {}},
        "by_sni": table, "by_server": table, "by_version": table, "by_group": table,
        "by_client_process": table, "by_server_process": table,
        "failures": {"alerts": {}, "reset": 0, "closed": 0, "incomplete": 0},
        "phases": {},
    })
}

/// Runs tlsperf with its address space limited to `mib` MiB (`prlimit --as`).
fn tlsperf_within(mib: u64, args: &[&str]) -> (i32, String) {
    let out = Command::new("prlimit")
        .arg(format!("--as={}", mib << 20))
        .arg("--")
        .arg(common::bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write_json(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_vec(v).unwrap()).unwrap();
}

/// 250 rows × 6 breakdowns × 2 histograms + 6 phases: 3,006 histograms of 432 KiB each
/// decoded (1.3 GB) in a 0.8 MB file. Under a 512 MiB address space, merge and compare
/// both finish (held densely, they aborted: "memory allocation … failed").
#[test]
fn far_value_histograms_merge_and_compare_in_memory_proportional_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    write_json(&a, &observe_doc(250));
    let size = std::fs::metadata(&a).unwrap().len();
    assert!(size < 4 << 20, "{size}");
    // The same document twice, as two files (one file given twice is refused).
    let b = dir.path().join("b.json");
    std::fs::copy(&a, &b).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = dir.path().join("merged.json");
    let (code, err) = tlsperf_within(512, &["merge", a, b, "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let merged: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(merged["by_sni"].as_object().unwrap().len(), 250);
    assert_eq!(merged["by_sni"]["h7"]["handshakes"], 2);
    assert_eq!(
        merged["by_sni"]["h7"]["server_think"]["quantiles"]["count"],
        2
    );
    // The value near 2^62 ns survived both reads and the merge.
    let max = merged["handshakes"]["all"]["phases"]["tls"]["quantiles"]["max_ns"]
        .as_u64()
        .unwrap();
    assert!(max > 1 << 61, "{max}");

    let (code, err) = tlsperf_within(512, &["compare", a, out.to_str().unwrap()]);
    assert!(code == 0 || code == 3, "{code}: {err}");
    assert!(!err.contains("memory allocation"), "{err}");
}

/// One row more than a breakdown can hold (1000 and `(other)`), or more kinds than 32:
/// refused before the rest is read, naming the bound and the place.
#[test]
fn more_rows_or_kinds_than_tlsperf_writes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.json");
    let mut doc = observe_doc(1);
    let table: serde_json::Map<String, Value> = (0..1002)
        .map(|i| (format!("h{i}"), doc["by_sni"]["h0"].clone()))
        .collect();
    doc["by_server"] = Value::Object(table);
    write_json(&rows, &doc);
    let kinds = dir.path().join("kinds.json");
    let mut doc = observe_doc(1);
    let all = doc["handshakes"]["all"].clone();
    doc["handshakes"] = (0..33).map(|i| (format!("k{i}"), all.clone())).collect();
    write_json(&kinds, &doc);
    for (path, bound) in [(&rows, "1001"), (&kinds, "32")] {
        let p = path.to_str().unwrap();
        let copy = copy_of(p);
        for args in [
            vec!["merge", p, &copy, "--out", "/dev/null"],
            vec!["compare", p, p],
        ] {
            let r = common::tlsperf(&args);
            assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains(&format!("more than {bound} entries"))
                    && r.stderr.contains(p)
                    && r.stderr.contains("line 1"),
                "{args:?}: {}",
                r.stderr
            );
        }
    }
}

/// 3 million tiny alert counts: 39 MB of text that would take some 300 MB as a map.
/// Refused from its structure alone, before a map is built, in merge and compare alike.
#[test]
fn a_document_denser_than_tlsperf_writes_is_refused_before_it_is_built() {
    let dir = tempfile::tempdir().unwrap();
    let dense = dir.path().join("dense.json");
    let mut doc = observe_doc(1);
    doc["failures"]["alerts"] = (0..3_000_000)
        .map(|i| (format!("a{i:07}"), Value::from(0)))
        .collect();
    write_json(&dense, &doc);
    let p = dense.to_str().unwrap();
    let copy = copy_of(p);
    for args in [
        vec!["merge", p, &copy, "--out", "/dev/null"],
        vec!["compare", p, p],
    ] {
        let r = common::tlsperf(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(p)
                && r.stderr
                    .contains("more than 4 times the file's size and 64 MiB"),
            "{args:?}: {}",
            r.stderr
        );
    }
}

/// Documents no run can have written, each refused by `merge` and `compare` with exit 2,
/// the file and the field named (both used to accept them: a percentile table that
/// disagreed with its histogram, more resumed handshakes than handshakes, handshake
/// kinds adding up past the total, negative latencies and crypto rounds).
#[test]
fn impossible_values_are_refused_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cases: Vec<(String, &str, bool)> = Vec::new();
    let mut obs = |name: &str, edit: &dyn Fn(&mut Value), why: &'static str| {
        let mut doc = observe_doc(1);
        edit(&mut doc);
        let p = d.join(name);
        write_json(&p, &doc);
        cases.push((p.to_str().unwrap().to_string(), why, true));
    };
    obs(
        "quantiles.json",
        &|v| v["handshakes"]["all"]["phases"]["tls"]["quantiles"]["p50_ns"] = json!(5),
        "handshakes.all.phases.tls: its p50 (5 ns) is above its p90",
    );
    // Counts no run reaches (2^64 - 1 was merged and printed), and kinds that add up
    // to more handshakes than there are.
    obs(
        "observe-huge.json",
        &|v| v["handshakes"]["all"]["count"] = json!(u64::MAX),
        "handshakes.all.count 18446744073709551615 is more than any run counts (at most 2^53)",
    );
    obs(
        "observe-frames.json",
        &|v| v["packets"]["frames"] = json!(1u64 << 60),
        "packets.frames 1152921504606846976 is more than any run counts",
    );
    obs(
        "observe-kinds.json",
        &|v| {
            let mut full = v["handshakes"]["all"].clone();
            full["count"] = json!(2);
            v["handshakes"]["full"] = full;
        },
        "the kinds of handshake add up to more than the 1 of handshakes.all",
    );
    obs(
        "count.json",
        &|v| v["by_sni"]["h0"]["server_think"]["quantiles"]["count"] = json!(7),
        "its percentiles count 7 values but its histogram holds 1",
    );
    obs(
        "resumed.json",
        &|v| v["by_group"]["h0"]["resumed"] = json!(2),
        "by_group[\"h0\"].resumed 2 is more than its 1 handshakes",
    );
    obs(
        "rate.json",
        &|v| v["resumption"]["rate"] = json!(-6.5),
        "resumption.rate -6.5 is not within 0..=1",
    );
    obs(
        "duration.json",
        &|v| v["duration_s"] = json!(-1.0),
        "duration_s -1e0 is not within 0 s ..= 1 year",
    );

    // A load result and a crypto report of real runs, then made impossible.
    let ca = d.join("ca.pem");
    let serve = common::Serve::ecdsa_writing_ca(&ca, &[]);
    let load = d.join("load.json");
    let run = common::tlsperf([
        "load",
        &serve.url(),
        "-n",
        "20",
        "-c",
        "2",
        "--cacert",
        ca.to_str().unwrap(),
        "--out",
        load.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let real: Value = serde_json::from_slice(&std::fs::read(&load).unwrap()).unwrap();
    let mut load_case = |name: &str, edit: &dyn Fn(&mut Value), why: &'static str| {
        let mut doc = real.clone();
        edit(&mut doc);
        let p = d.join(name);
        write_json(&p, &doc);
        cases.push((p.to_str().unwrap().to_string(), why, true));
    };
    load_case(
        "kinds.json",
        &|v| v["handshakes"]["kinds"]["full"] = json!(u64::MAX),
        "handshakes.kinds add up to more than the",
    );
    load_case(
        "negative.json",
        &|v| v["connections"][0]["mean_latency_ms"] = json!(-3.0),
        "connections[0]: mean_latency_ms -3 is not a latency",
    );
    load_case(
        "intervals.json",
        &|v| {
            v["duration_s"] = json!(1.0);
            v["interval_requests"] = Value::Array(vec![json!(0); 100]);
        },
        "interval_requests holds 100 intervals of 250 ms, more than a 1 s run has",
    );
    load_case(
        "phase.json",
        &|v| {
            let q = &mut v["latency"]["quantiles"];
            q["max_ns"] = json!(1);
        },
        "latency: its",
    );
    let sign = d.join("sign.json");
    let run = common::tlsperf([
        "crypto",
        "sign",
        "--alg",
        "ed25519",
        "--duration",
        "100ms",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut doc: Value = serde_json::from_str(&run.stdout).unwrap();
    doc["rows"][0]["rounds_ns"][0] = json!(-12.5);
    write_json(&sign, &doc);
    cases.push((
        sign.to_str().unwrap().to_string(),
        "-12.5 ns/op is not a measurement",
        false,
    ));

    for (p, why, merges) in &cases {
        refused(p, why, *merges);
    }
}

/// A copy of the file at `path` beside it (`PATH.copy`), its path: `merge` refuses one
/// file given twice, so a document merged with itself is given as two files.
fn copy_of(path: &str) -> String {
    let copy = format!("{path}.copy");
    std::fs::copy(path, &copy).unwrap();
    copy
}

/// `compare P P` (and, with `merges`, `merge P COPY-OF-P`) exits 2 naming `path` and
/// `why`.
fn refused(path: &str, why: &str, merges: bool) {
    let copy = copy_of(path);
    let mut runs = vec![vec!["compare", path, path]];
    if merges {
        runs.push(vec!["merge", path, &copy, "--out", "/dev/null"]);
    }
    for args in runs {
        let r = common::tlsperf(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(path) && r.stderr.contains(why),
            "{args:?}: wanted {why:?} in {}",
            r.stderr
        );
    }
}

/// Lists and maps of text beyond what tlsperf writes (258 alert descriptions, 10,001
/// sources), a crypto row of more than a million rounds, any list of more than ten
/// million items: each refused by the readers, naming the file and the bound. Before, each was built in full
/// (a 250 MB list of rounds took 3.7 GB to compare).
#[test]
fn long_lists_and_text_maps_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cases: Vec<(String, String)> = Vec::new();
    let mut add = |name: &str, doc: &Value, why: &str| {
        let p = d.join(name);
        write_json(&p, doc);
        cases.push((p.to_str().unwrap().to_string(), why.to_string()));
    };
    let mut doc = observe_doc(1);
    doc["failures"]["alerts"] = (0..258).map(|i| (format!("a{i}"), json!(0))).collect();
    add("alerts.json", &doc, "more than 257 entries");
    let mut doc = observe_doc(1);
    doc["sources"] = (0..10_001)
        .map(|i| json!({"kind": "pcap", "name": format!("{i}.pcap")}))
        .collect();
    add("sources.json", &doc, "more than 10000 items");
    let mut doc = observe_doc(1);
    doc["ports"] = Value::Array(vec![json!(443); 10_000_001]);
    add("ports.json", &doc, "a list of more than 10000000 items");

    let run = common::tlsperf([
        "crypto",
        "sign",
        "--alg",
        "ed25519",
        "--duration",
        "100ms",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut sign: Value = serde_json::from_str(&run.stdout).unwrap();
    sign["rows"][0]["rounds_ns"] = Value::Array(vec![json!(1.5); 1_000_001]);
    add("rounds.json", &sign, "more than 1000000 items");

    for (p, why) in &cases {
        // Crypto results are compared, never merged.
        refused(p, why, !p.ends_with("rounds.json"));
    }
}
