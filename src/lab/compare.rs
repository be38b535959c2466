//! Two lab results compared configuration by configuration: for every cell present in
//! both (same group and name) and failed in neither, Welch's t-test on its rounds —
//! server CPU per handshake (lower is better), handshakes/s (higher is better) and mean
//! request latency (lower is better) — after Tukey's IQR filter. Reads schema versions 1
//! and 2.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::result::{LabResult, RoundMetrics, SCHEMAS_READ};
use crate::stats::{CompareOptions, Comparison, Direction, Samples, compare};

/// Why a lab result could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabReadError {
    /// I/O.
    #[error("cannot read {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON of the lab's schema.
    #[error("{}:{line}:{column}: not a tlsperf lab result: {reason}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Why.
        reason: String,
    },
    /// A JSON document of another kind or version.
    #[error(
        "{}: schema {}, not a lab result this version reads ({})",
        .path.display(),
        .found.as_deref().map_or("missing".to_string(), |f| format!("'{f}'")),
        SCHEMAS_READ.join(", ")
    )]
    Schema {
        /// The file.
        path: PathBuf,
        /// Its schema, if any.
        found: Option<String>,
    },
    /// The two results share no configuration.
    #[error("{} and {} have no configuration in common", .a.display(), .b.display())]
    Disjoint {
        /// First file.
        a: PathBuf,
        /// Second file.
        b: PathBuf,
    },
}

impl crate::error::Classify for LabReadError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// True when `text` is a lab result (of a version this build reads) by its schema field.
pub fn is_lab_result(text: &[u8]) -> bool {
    crate::doc::sniff(text).is_some_and(|s| SCHEMAS_READ.contains(&s.as_str()))
}

/// Reads a `results.json` written by `tlsperf lab`; errors name the file, line and column.
pub fn read(path: &Path) -> Result<LabResult, LabReadError> {
    let text =
        crate::files::read_input(path, crate::files::InputKind::Results).map_err(|source| {
            LabReadError::Io {
                path: path.to_path_buf(),
                source,
            }
        })?;
    parse(path, &text)
}

/// Parses a lab result after checking its schema (one of [`SCHEMAS_READ`]); `path`
/// names it in errors.
pub fn parse(path: &Path, text: &[u8]) -> Result<LabResult, LabReadError> {
    let json_err = |e: serde_json::Error| LabReadError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    };
    let found = crate::doc::sniff(text);
    match &found {
        Some(s) if SCHEMAS_READ.contains(&s.as_str()) => {
            return serde_json::from_slice(text).map_err(json_err);
        }
        Some(_) => {}
        // Not a JSON object with a schema: where its JSON breaks, if it does.
        None => {
            serde_json::from_slice::<serde::de::IgnoredAny>(text).map_err(json_err)?;
        }
    }
    Err(LabReadError::Schema {
        path: path.to_path_buf(),
        found,
    })
}

/// One configuration's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CellComparison {
    /// Group.
    pub group: String,
    /// Cell.
    pub cell: String,
    /// Server CPU per handshake, B against A (absent with `--target` results and when
    /// either has fewer than two rounds with it).
    pub server_cpu_us_per_handshake: Option<Comparison>,
    /// Handshakes/s, B against A (absent when either has fewer than two rounds).
    pub handshakes_per_s: Option<Comparison>,
    /// Mean request latency, B against A.
    pub request_mean_ms: Option<Comparison>,
}

fn samples(
    rounds: &[RoundMetrics],
    source: String,
    f: fn(&RoundMetrics) -> Option<f64>,
) -> Samples {
    Samples {
        source,
        values: rounds
            .iter()
            .filter(|r| r.completed > 0)
            .filter_map(f)
            .collect(),
    }
}

/// Compares every configuration present in both results (B against A).
pub fn compare_labs(
    a: &LabResult,
    b: &LabResult,
    paths: (&Path, &Path),
    alpha: f64,
    filter: bool,
) -> Result<Vec<CellComparison>, LabReadError> {
    let mut out = Vec::new();
    for ga in &a.groups {
        let Some(gb) = b.groups.iter().find(|g| g.group == ga.group) else {
            continue;
        };
        for ca in &ga.cells {
            let Some(cb) = gb.cells.iter().find(|c| c.name == ca.name) else {
                continue;
            };
            if ca.failed || cb.failed {
                continue;
            }
            let run = |f: fn(&RoundMetrics) -> Option<f64>, what: &str, direction| {
                let src = |p: &Path| format!("{} {}/{} ({what})", p.display(), ga.group, ca.name);
                compare(
                    &samples(&ca.rounds, src(paths.0), f),
                    &samples(&cb.rounds, src(paths.1), f),
                    &CompareOptions {
                        alpha,
                        filter,
                        direction,
                    },
                )
                .ok()
            };
            out.push(CellComparison {
                group: ga.group.clone(),
                cell: ca.name.clone(),
                server_cpu_us_per_handshake: run(
                    |m| m.server_cpu_us_per_handshake,
                    "server CPU µs per handshake per round",
                    Direction::LowerIsBetter,
                ),
                handshakes_per_s: run(
                    |m| Some(m.handshakes_per_s),
                    "handshakes/s per round",
                    Direction::HigherIsBetter,
                ),
                request_mean_ms: run(
                    |m| Some(m.request_mean_ms),
                    "mean request ms per round",
                    Direction::LowerIsBetter,
                ),
            });
        }
    }
    if out.is_empty() {
        return Err(LabReadError::Disjoint {
            a: paths.0.to_path_buf(),
            b: paths.1.to_path_buf(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(is_lab_result(&text));
        let r: LabResult = serde_json::from_slice(&text).unwrap();
        assert!(!r.groups[0].cells[0].failed && !r.groups[0].cells[0].control);
        assert!(
            r.groups[0].cells[0].vs_baseline["handshakes_per_s"]
                .mde
                .is_none()
        );
        assert_eq!(r.aa_control.compared, 0);
        assert!(r.machine.pinning.client_cpu.is_none());
        let p = Path::new("a.json");
        let rows = compare_labs(&r, &r, (p, p), 0.05, true).unwrap();
        assert_eq!(rows.len(), 1);
        assert!(
            !rows[0]
                .server_cpu_us_per_handshake
                .as_ref()
                .unwrap()
                .significant
        );
        assert!(!is_lab_result(br#"{"schema": "tlsperf-lab/3"}"#));
    }
}
