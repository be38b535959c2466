//! The false-alarm rate of the anomaly rule at other margins: window streams that
//! `tlsperf observe --windows FILE` wrote, replayed through the baseline engine
//! (`tlsperf::observe::baseline`, the rule the agent runs) once per setting, from nothing
//! learnt, as if the run had used that setting.
//!
//! Usage: `rejudge [--only TEXT]... FILE... [-- MARGIN/FLOOR/WINDOWS...]` — `--only`
//! keeps the series whose name (`wire server tlsserver port 44401`) contains one of the
//! texts (a capture of a whole interface holds other servers' series); each setting as `50%/2ms/2`
//! (the margin above the centre, the floor, windows in a row); by default a grid. Each
//! file is replayed
//! on its own (its own baselines). (The grid: margins 50% and 100% × floors 2, 3, 5,
//! 10 ms × 2 and 3 windows.) Prints per setting: the judgements (series × quantile
//! × window, once the baseline has its warm-up windows), the anomalies started, their
//! rate per judgement and per hour of windows, and each start (series, quantile, when,
//! the phase named). On a null run (nothing changed) every start is a false alarm.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use tlsperf::observe::audit::{Record, parse_stream};
use tlsperf::observe::baseline::{AnomalyOptions, Baselines};
use tlsperf::observe::window::WindowRecord;

fn parse_setting(s: &str) -> AnomalyOptions {
    let parts: Vec<&str> = s.split('/').collect();
    assert_eq!(parts.len(), 3, "{s}: MARGIN/FLOOR/WINDOWS, e.g. 50%/2ms/2");
    let margin: f64 = parts[0].trim_end_matches('%').parse::<f64>().unwrap() / 100.0;
    let floor = humantime::parse_duration(parts[1]).unwrap();
    AnomalyOptions {
        margin,
        floor,
        consecutive: parts[2].parse().unwrap(),
        ..AnomalyOptions::default()
    }
}

fn windows(path: &str) -> Vec<WindowRecord> {
    let bytes = std::fs::read(path).unwrap();
    parse_stream(path, &bytes)
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            Record::Window(w) => Some(*w),
            Record::Anomaly(_) => None,
        })
        .collect()
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut only = Vec::new();
    while args.first().is_some_and(|a| a == "--only") && args.len() > 1 {
        only.push(args.remove(1));
        args.remove(0);
    }
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let files = &args[..split];
    assert!(
        !files.is_empty(),
        "usage: rejudge FILE... [-- MARGIN/FLOOR/WINDOWS...]"
    );
    let settings: Vec<String> = if split < args.len() {
        args[split + 1..].to_vec()
    } else {
        let mut grid = Vec::new();
        for w in [2, 3] {
            for m in ["50%", "100%"] {
                for f in ["2ms", "3ms", "5ms", "10ms"] {
                    grid.push(format!("{m}/{f}/{w}"));
                }
            }
        }
        grid
    };
    let keep = |w: &mut WindowRecord| {
        if !only.is_empty() {
            w.series
                .retain(|s| only.iter().any(|o| s.key.name().contains(o.as_str())));
        }
    };
    let streams: Vec<(String, Vec<WindowRecord>)> = files
        .iter()
        .map(|f| {
            let mut ws = windows(f);
            ws.iter_mut().for_each(keep);
            (f.clone(), ws)
        })
        .collect();
    let hours: f64 = streams
        .iter()
        .flat_map(|(_, ws)| ws.iter())
        .map(|w| w.seconds)
        .sum::<f64>()
        / 3600.0;
    println!(
        "{} windows in {} files, {:.2} h",
        streams.iter().map(|(_, w)| w.len()).sum::<usize>(),
        streams.len(),
        hours
    );
    println!("setting (margin/floor/in a row)  judged  started  per judgement  per hour");
    for setting in &settings {
        let opts = parse_setting(setting);
        let mut judged = 0u64;
        let mut starts = Vec::new();
        for (name, ws) in &streams {
            let mut b = Baselines::new(opts.clone());
            for w in ws {
                let mut w = w.clone();
                for s in &mut w.series {
                    s.baseline = None;
                }
                for e in b.judge(&mut w) {
                    if e.state == "start" {
                        starts.push((name.clone(), e));
                    }
                }
                judged += 2 * w.series.iter().filter(|s| s.baseline.is_some()).count() as u64;
            }
        }
        println!(
            "{setting:<32} {judged:>7} {:>8} {:>13.3}% {:>9.2}",
            starts.len(),
            100.0 * starts.len() as f64 / judged.max(1) as f64,
            starts.len() as f64 / hours.max(1e-9)
        );
        for (name, e) in &starts {
            let at = humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + Duration::from_nanos(e.since_ns),
            );
            println!(
                "    {name}: {} {} since {at}: {:.2} ms against {:.2} ms (threshold {:.2} ms), moved {}",
                e.series.name(),
                e.quantile,
                e.now_ns as f64 / 1e6,
                e.baseline_ns as f64 / 1e6,
                e.threshold_ns as f64 / 1e6,
                e.moved.as_deref().unwrap_or("-")
            );
        }
    }
}
