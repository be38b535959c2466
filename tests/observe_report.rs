//! `tlsperf observe report`: the audit of window streams, on synthetic streams whose
//! values are known, so that every count is exact: windows meeting the objective, the
//! budget burnt, the worst windows, the day's exact P99.9 from the windows' histograms
//! (and its absence for windows without one), anomalies per day, several files merged
//! by time with a duplicate counted once; and bad input.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{tlsperf, write};
use serde_json::Value;
use tlsperf::observe::baseline::AnomalyEvent;
use tlsperf::observe::timeline::Transport;
use tlsperf::observe::window::{PhaseQuantiles, QuicWindow, SeriesKey, SeriesRecord, WindowRecord};
use tlsperf::stats::LatencyHistogram;

const MS: u64 = 1_000_000;
const MIN: u64 = 60_000_000_000;
/// 2026-12-05 00:00:00 UTC.
const DAY1: u64 = 1_796_428_800_000_000_000;
const DAY2: u64 = DAY1 + 1440 * MIN;

fn key(view: &str, process: &str, port: u16) -> SeriesKey {
    SeriesKey {
        view: view.into(),
        role: "server".into(),
        process: process.into(),
        port,
        group: None,
        transport: Default::default(),
    }
}

/// A series' window whose headline holds `values` (ns); with its histogram or without.
fn series(key: SeriesKey, values: &[u64], histogram: bool) -> SeriesRecord {
    let mut h = LatencyHistogram::new();
    for v in values {
        h.record_ns(*v).unwrap();
    }
    let q = h.quantiles();
    let phase = if key.view == "wire" {
        "first_app_byte"
    } else {
        "total"
    };
    let mut phases = BTreeMap::new();
    if !values.is_empty() {
        phases.insert(phase.to_string(), PhaseQuantiles::from(q));
    }
    SeriesRecord {
        key,
        handshakes: values.len() as u64,
        per_second: values.len() as f64 / 60.0,
        peak_per_second: 1,
        failures: BTreeMap::new(),
        resumed_share: None,
        kinds: BTreeMap::new(),
        versions: BTreeMap::new(),
        groups: BTreeMap::new(),
        sni: BTreeMap::new(),
        phases,
        baseline: None,
        long_baseline: None,
        headline_histogram: (histogram && !values.is_empty()).then_some(h),
    }
}

fn window(start: u64, series: Vec<SeriesRecord>) -> String {
    window_with_quic(start, series, None)
}

/// A window record with a `quic` part when `quic` is given (its series).
fn window_with_quic(
    start: u64,
    series: Vec<SeriesRecord>,
    quic: Option<Vec<SeriesRecord>>,
) -> String {
    let w = WindowRecord {
        cpu_pressure: Some(0.1),
        quic: quic.map(|series| QuicWindow {
            wire_failures: BTreeMap::new(),
            series,
        }),
        kind: "window".into(),
        start_ns: start,
        end_ns: start + MIN,
        seconds: 60.0,
        wire_failures: BTreeMap::new(),
        late: 0,
        series,
    };
    serde_json::to_string(&w).unwrap()
}

fn anomaly(state: &str, since: u64, at: u64) -> String {
    let e = AnomalyEvent {
        cpu_pressure: Some(0.8),
        cpu_pressure_before: Some(0.1),
        kind: "anomaly".into(),
        state: state.into(),
        series: key("wire", "nginx", 443),
        quantile: "p90".into(),
        phase: "first_app_byte".into(),
        baseline_ns: 20 * MS,
        threshold_ns: 30 * MS,
        now_ns: 40 * MS,
        since_ns: since,
        at_ns: at,
        moved: (state == "start").then(|| "server_think".into()),
        share: (state == "start").then_some(0.9),
        phases: Vec::new(),
    };
    serde_json::to_string(&e).unwrap()
}

/// The wire series' window `i` of day 1: 200 handshakes; windows 10, 20, 30 at 40 ms,
/// the others at 20 ms, and windows 40..70 with one of their 200 at 500 ms (above their
/// p99: the window records' p99s never see it, the day's P99.9 does).
fn wire_values(i: u64) -> Vec<u64> {
    let base = if [10, 20, 30].contains(&i) { 40 } else { 20 } * MS;
    let mut v = vec![base; 200];
    if (40..70).contains(&i) {
        v[0] = 500 * MS;
    }
    v
}

/// Two files, out of time order: day 1's first 50 minutes and its anomalies in `a`; the
/// rest of day 1, a copy of its first window, and day 2 in `b`. The probes' series has
/// windows without histograms (an older stream) and one without a handshake.
fn streams(dir: &Path) -> (String, String) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for i in 0..100 {
        let mut s = vec![series(key("wire", "nginx", 443), &wire_values(i), true)];
        if i < 11 {
            let v = if i == 10 { vec![] } else { vec![5 * MS; 50] };
            s.push(series(key("probes", "nginx", 0), &v, false));
        }
        let line = window(DAY1 + i * MIN, s);
        if i < 50 { &mut a } else { &mut b }.push(line);
    }
    b.push(a[0].clone());
    a.push(anomaly("start", DAY1 + 10 * MIN, DAY1 + 11 * MIN));
    a.push(anomaly("end", DAY1 + 10 * MIN, DAY1 + 13 * MIN));
    for i in 0..10 {
        b.push(window(
            DAY2 + i * MIN,
            vec![series(key("wire", "nginx", 443), &[20 * MS; 100], true)],
        ));
    }
    b.push(anomaly("start", DAY2 + 2 * MIN, DAY2 + 3 * MIN));
    (
        write(dir, "a.jsonl", &(a.join("\n") + "\n")),
        write(dir, "b.jsonl", &(b.join("\n") + "\n")),
    )
}

fn close(ns: u64, ms: u64) -> bool {
    (ns as f64 / (ms * MS) as f64 - 1.0).abs() < 0.002
}

#[test]
fn the_audit_counts_windows_budget_worst_and_p999_per_day_and_series() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = streams(dir.path());
    let run = tlsperf(["--json", "observe", "report", &b, &a, "--slo", "p95=30ms"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(r["schema"], "tlsperf-observe-report/1");
    assert_eq!(r["objective"]["percentile"], 95);
    assert_eq!(r["objective"]["max_ns"], 30 * MS);
    assert_eq!(r["budget"], 0.01);
    // 100 + 11 + 10 windows of series; the copied window's two left out.
    assert_eq!(r["windows_read"], 121);
    assert_eq!(r["duplicates"], 2);
    let days = r["days"].as_array().unwrap();
    assert_eq!(days.len(), 2);
    assert_eq!(days[0]["date"], "2026-12-05");
    assert_eq!(days[1]["date"], "2026-12-06");

    // Series in key order: probes before wire.
    let probes = &days[0]["series"][0];
    let wire = &days[0]["series"][1];
    assert_eq!(wire["series"]["process"], "nginx");
    assert_eq!(wire["phase"], "first_app_byte");
    assert_eq!(wire["handshakes"], 20_000);
    assert_eq!(wire["windows"], 100);
    assert_eq!(wire["met"], 97);
    assert_eq!(wire["met_share"], 0.97);
    assert_eq!(wire["budget"]["burnt_share"], 0.03);
    assert_eq!(wire["budget"]["allowed_share"], 0.01);
    assert!((wire["budget"]["burnt_of_allowed"].as_f64().unwrap() - 3.0).abs() < 1e-9);
    assert_eq!(wire["budget"]["within"], false);
    // The three at 40 ms, then the earliest at 20 ms.
    let worst: Vec<(u64, u64)> = wire["worst"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                (w["start_ns"].as_u64().unwrap() - DAY1) / MIN,
                w["value_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        worst.iter().map(|w| w.0).collect::<Vec<_>>(),
        [10, 20, 30, 0, 1]
    );
    assert!(close(worst[0].1, 40) && close(worst[4].1, 20), "{worst:?}");
    // 30 values of 500 ms in 20,000: the day's P99.9 is 500 ms, exactly (HDR), though
    // no window's p99 is above 40 ms.
    assert!(close(wire["p999_ns"].as_u64().unwrap(), 500), "{wire}");
    assert!(
        close(wire["max_window_p99_ns"].as_u64().unwrap(), 40),
        "{wire}"
    );
    assert_eq!(wire["points"].as_array().unwrap().len(), 100);

    assert_eq!(probes["phase"], "total");
    assert_eq!(probes["windows"], 10);
    assert_eq!(probes["windows_empty"], 1);
    assert_eq!(probes["met"], 10);
    assert_eq!(probes["budget"]["within"], true);
    assert_eq!(probes["budget"]["burnt_of_allowed"], 0.0);
    // No histogram in its windows: no P99.9, the largest window p99 only.
    assert_eq!(probes["p999_ns"], Value::Null);
    assert!(close(probes["max_window_p99_ns"].as_u64().unwrap(), 5));

    let events = days[0]["anomalies"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["state"], "start");
    assert_eq!(events[0]["moved"], "server_think");
    assert_eq!(events[1]["state"], "end");
    assert_eq!(days[1]["anomalies"].as_array().unwrap().len(), 1);
    let day2 = &days[1]["series"][0];
    assert_eq!(
        (day2["windows"].as_u64(), day2["met"].as_u64()),
        (Some(10), Some(10))
    );

    // A looser objective: p50 ≤ 45 ms holds everywhere.
    let run = tlsperf(["--json", "observe", "report", &a, &b, "--slo", "p50=45ms"]);
    let r: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(r["days"][0]["series"][1]["met"], 100);
    // A budget of 5%: 3% burnt is within it.
    let run = tlsperf([
        "--json", "observe", "report", &a, &b, "--slo", "p95=30ms", "--budget", "5%",
    ]);
    let r: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(r["days"][0]["series"][1]["budget"]["within"], true);
}

#[test]
fn the_text_says_the_budget_in_words_and_the_html_charts_each_series() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = streams(dir.path());
    let html = dir.path().join("audit.html");
    let args = [
        "observe",
        "report",
        &a,
        &b,
        "--slo",
        "p95=30ms",
        "--html",
        html.to_str().unwrap(),
    ];
    let run = tlsperf(args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let t = &run.stdout;
    assert!(t.contains("2026-12-05 (UTC)"), "{t}");
    assert!(
        t.contains(
            "wire server nginx port 443: burnt 300% of the 1% budget (3% of the windows \
             missed): exhausted"
        ),
        "{t}"
    );
    assert!(
        t.contains("probes server nginx: burnt 0% of the 1% budget"),
        "{t}"
    );
    assert!(t.contains("worst windows (p95): 00:10:00 40"), "{t}");
    assert!(
        t.contains("00:11:00 start wire server nginx port 443 p90 first_app_byte"),
        "{t}"
    );
    assert!(t.contains("moved: server_think"), "{t}");
    assert!(
        t.contains("max p99 is the largest window p99, not a P99.9"),
        "{t}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    // Two series, two charts each; the wire's latency chart marks the anomalies.
    for chart in ["rate-0", "latency-0", "rate-1", "latency-1"] {
        assert!(page.contains(&format!("data-chart=\"{chart}\"")), "{chart}");
    }
    // One series of marks (its line's title and its legend), in the wire's chart.
    assert_eq!(page.matches("anomaly starts").count(), 2);
    let wire_chart = page.split("data-chart=\"latency-1\"").nth(1).unwrap();
    assert!(wire_chart.contains("anomaly starts"));
    assert!(page.contains("objective p95 ≤ 30 ms"));
    assert!(!page.contains("NaN") && !page.contains("inf"));
    // Not replaced without --force; replaced with it.
    let again = tlsperf(args);
    assert_eq!(again.code, 2, "{}", again.stderr);
    assert!(
        again.stderr.contains("refusing to overwrite"),
        "{}",
        again.stderr
    );
    assert_eq!(tlsperf(args.iter().chain(&["--force"])).code, 0);
}

/// A window's `quic` part holds QUIC's series: each is judged as a series of its own,
/// apart from TCP's of the same process and port (QUIC at 8 ms meets p95 ≤ 10 ms in every
/// window while TCP at 20 ms misses it in every one), and named "over QUIC".
#[test]
fn quic_series_are_judged_apart_from_tcps() {
    let dir = tempfile::tempdir().unwrap();
    let quic_key = SeriesKey {
        transport: Transport::Quic,
        ..key("wire", "serve", 443)
    };
    let lines: Vec<String> = (0..6)
        .map(|i| {
            window_with_quic(
                DAY1 + i * MIN,
                vec![series(key("wire", "serve", 443), &[20 * MS; 50], true)],
                Some(vec![series(quic_key.clone(), &[8 * MS; 30], true)]),
            )
        })
        .collect();
    let f = write(dir.path(), "w.jsonl", &(lines.join("\n") + "\n"));
    let run = tlsperf(["--json", "observe", "report", &f, "--slo", "p95=10ms"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(r["windows_read"], 12);
    let series = r["days"][0]["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{series:?}");
    let (tcp, quic) = (&series[0], &series[1]);
    assert!(tcp["series"].get("transport").is_none(), "{tcp}");
    assert_eq!(quic["series"]["transport"], "quic", "{quic}");
    assert_eq!(
        (tcp["handshakes"].as_u64(), tcp["met"].as_u64()),
        (Some(300), Some(0))
    );
    assert_eq!(
        (quic["handshakes"].as_u64(), quic["met"].as_u64()),
        (Some(180), Some(6))
    );
    assert!(close(quic["p999_ns"].as_u64().unwrap(), 8), "{quic}");
    let text = tlsperf(["observe", "report", &f, "--slo", "p95=10ms"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("wire server serve port 443 over QUIC: burnt 0% of the 1% budget"),
        "{}",
        text.stdout
    );
}

#[test]
fn bad_input_is_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = window(DAY1, vec![series(key("wire", "x", 443), &[MS; 10], true)]);
    let cases = [
        (
            "bad.jsonl",
            format!("{good}\n\n{{\"type\":\"connection\",\"sni\":\"a\"}}\n"),
            "bad.jsonl:3: type \"connection\": neither a window, an anomaly nor a canary record",
        ),
        (
            "broken.jsonl",
            format!("{good}\n{{\"type\":\"window\"\n"),
            "broken.jsonl:2: not JSON",
        ),
        ("empty.jsonl", String::new(), "empty.jsonl: empty"),
        (
            "only.jsonl",
            anomaly("start", DAY1, DAY1) + "\n",
            "no window record in",
        ),
    ];
    for (name, text, expected) in cases {
        let path = write(dir.path(), name, &text);
        let run = tlsperf(["observe", "report", &path, "--slo", "p95=30ms"]);
        assert_eq!(run.code, 2, "{name}");
        assert!(run.stderr.contains(expected), "{name}: {}", run.stderr);
    }
    let ok = write(dir.path(), "ok.jsonl", &(good + "\n"));
    for slo in ["p99.9=1s", "p95=30ms,p50=5ms", "p95=30ms,errors=1%", "p95"] {
        let run = tlsperf(["observe", "report", &ok, "--slo", slo]);
        assert_eq!(run.code, 2, "{slo}: {}", run.stderr);
    }
    // `observe` itself still needs a source.
    assert_eq!(tlsperf(["observe"]).code, 2);
}
