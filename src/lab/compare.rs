//! What two lab results compare on (`tlsperf compare A B`, through
//! [`crate::stats::rows::compare_rows`]): every configuration (group and cell) on each of
//! the metrics it is compared with its baseline ([`COMPARED`]: server CPU per handshake,
//! handshakes/s, mean request latency), the samples being its rounds that completed
//! something. A failed cell's rows have no rounds (too few to test) and are named in a
//! note; the run's mode, rounds, round length, connections and target are the settings.

use super::result::{COMPARED, LabResult, RoundMetrics};
use crate::stats::Direction;
use crate::stats::rows::{Comparable, Identity, Row, RowSet, Section};

const SECTION: &str = "cells";

/// The unit of a compared metric.
fn unit(metric: &str) -> &'static str {
    match metric {
        "server_cpu_us_per_handshake" => "µs",
        "handshakes_per_s" => "handshakes/s",
        _ => "ms",
    }
}

/// A compared metric of one round.
fn value(m: &RoundMetrics, metric: &str) -> Option<f64> {
    match metric {
        "server_cpu_us_per_handshake" => m.server_cpu_us_per_handshake,
        "handshakes_per_s" => Some(m.handshakes_per_s),
        "request_mean_ms" => Some(m.request_mean_ms),
        "first_byte_mean_ms" => m.first_byte_mean_ms,
        _ => None,
    }
}

impl Comparable for LabResult {
    const KIND: &'static str = "lab";

    fn row_set(&self) -> RowSet {
        let mut rows = Vec::new();
        let mut failed = Vec::new();
        // Time to first byte only when this run measured it (at a link).
        let measured: Vec<(&str, bool)> = COMPARED
            .into_iter()
            .filter(|(m, _)| {
                *m != "first_byte_mean_ms"
                    || self
                        .groups
                        .iter()
                        .flat_map(|g| &g.cells)
                        .flat_map(|c| &c.rounds)
                        .any(|r| value(r, m).is_some())
            })
            .collect();
        for g in &self.groups {
            for c in &g.cells {
                if c.failed {
                    failed.push(format!("{}/{}", g.group, c.name));
                }
                for &(metric, higher) in &measured {
                    let rounds = c
                        .rounds
                        .iter()
                        .filter(|r| r.completed > 0 && !c.failed)
                        .filter_map(|r| value(r, metric))
                        .collect();
                    rows.push(Row {
                        section: SECTION,
                        identity: Identity(vec![
                            ("group", g.group.clone()),
                            ("cell", c.name.clone()),
                            ("metric", metric.to_string()),
                        ]),
                        unit: unit(metric).into(),
                        direction: if higher {
                            Direction::HigherIsBetter
                        } else {
                            Direction::LowerIsBetter
                        },
                        rounds: Some(rounds),
                        median: None,
                        context: None,
                    });
                }
            }
        }
        let o = &self.options;
        let settings = [
            ("mode", o.mode.clone()),
            ("rounds", o.rounds.to_string()),
            ("round_s", o.round_s.to_string()),
            ("connections", o.connections.to_string()),
            ("target", o.target.clone().unwrap_or_else(|| "-".into())),
            ("link", o.link.clone().unwrap_or_else(|| "-".into())),
        ];
        RowSet {
            sections: vec![Section {
                name: SECTION,
                title: "Configurations, each on its rounds",
            }],
            rows,
            settings: settings
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            notes: if failed.is_empty() {
                Vec::new()
            } else {
                vec![format!(
                    "has failed configurations (not compared): {}",
                    failed.join(", ")
                )]
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Document;
    use crate::stats::rows::{Outcome, RowOptions, compare_rows};
    use std::path::Path;

    /// A version 1 document (no pinning, controls, failures, MDE or A/A tally) reads,
    /// and its cells compare on what it has.
    #[test]
    fn reads_version_1() {
        let round = |hs: f64| {
            serde_json::json!({
                "completed": 100, "failed": 0, "requests_per_s": hs, "handshakes_per_s": hs,
                "resumption_rate": 0.0, "handshake_p50_ms": 1.0, "handshake_p95_ms": 1.0,
                "handshake_p99_ms": 1.0, "request_mean_ms": 2.0 + hs / 1e4,
                "request_p50_ms": 2.0, "request_p95_ms": 2.0, "request_p99_ms": 2.0,
                "server_cpu_us_per_handshake": 300.0 + hs / 100.0, "server_rss_kib": 1000,
                "client_cpu_us_per_handshake": 400.0
            })
        };
        let doc = serde_json::json!({
            "schema": "tlsperf-lab/1", "started": "2025-01-01T00:00:00Z", "duration_s": 1.0,
            "machine": {"cores": 2, "cpu": "x", "kernel": "y"},
            "options": {"mode": "quick", "rounds": 3, "round_s": 0.7, "connections": 4, "target": null},
            "interrupted": false,
            "groups": [{"group": "tls", "title": "TLS version", "baseline": "1.3", "cells": [{
                "name": "1.3", "label": "TLS 1.3", "settings": {},
                "rounds": [round(1000.0), round(1010.0), round(990.0)],
                "summary": {}, "vs_baseline": {"handshakes_per_s": {
                    "relative_change": 0.0, "p": 0.5, "significant": false,
                    "outliers_dropped": [0, 0], "verdict": "no significant difference"}},
                "request_cdf": [], "handshake_full_hist": [], "handshake_resumed_hist": [],
                "errors": {}, "crypto_limit_pct": null
            }]}],
            "recommendations": [], "crypto_limits": [], "notes": []
        });
        let text = serde_json::to_vec(&doc).unwrap();
        let r: LabResult = crate::doc::parse(Path::new("a.json"), &text).unwrap();
        assert!(!r.groups[0].cells[0].failed && !r.groups[0].cells[0].control);
        assert!(
            r.groups[0].cells[0].vs_baseline["handshakes_per_s"]
                .mde
                .is_none()
        );
        assert_eq!(r.aa_control.compared, 0);
        assert!(r.machine.pinning.client_cpu.is_none());
        let c = compare_rows(&r.row_set(), &r.row_set(), &RowOptions::default()).unwrap();
        assert_eq!(c.rows.len(), 3);
        assert_eq!(c.rows[0].label, "tls 1.3 server_cpu_us_per_handshake");
        assert_eq!(c.rows[0].outcome, Outcome::NoDifference);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);

        // A failed cell in B: its rows have no rounds, and a note says why.
        let mut failed = r.clone();
        failed.groups[0].cells[0].failed = true;
        let c = compare_rows(&r.row_set(), &failed.row_set(), &RowOptions::default()).unwrap();
        assert_eq!(c.rows[1].outcome, Outcome::TooFewRounds);
        assert_eq!(
            c.warnings,
            ["B has failed configurations (not compared): tls/1.3"]
        );
        assert!(!LabResult::reads("tlsperf-lab/3"));
    }
}
