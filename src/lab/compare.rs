//! Two lab results compared configuration by configuration: for every cell present in
//! both (same group and name), Welch's t-test on its rounds — handshakes/s (higher is
//! better) and mean request latency (lower is better) — after Tukey's IQR filter.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::result::{LabResult, RoundMetrics, SCHEMA};
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

/// The schema named in a JSON document, if any.
pub fn schema_of(text: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(text).ok()?;
    v.get("schema")?.as_str().map(str::to_string)
}

/// True when `text` is a lab result by its schema field.
pub fn is_lab_result(text: &[u8]) -> bool {
    schema_of(text).as_deref() == Some(SCHEMA)
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
    serde_json::from_slice(&text).map_err(|e| LabReadError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    })
}

/// One configuration's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CellComparison {
    /// Group.
    pub group: String,
    /// Cell.
    pub cell: String,
    /// Handshakes/s, B against A (absent when either has fewer than two rounds).
    pub handshakes_per_s: Option<Comparison>,
    /// Mean request latency, B against A.
    pub request_mean_ms: Option<Comparison>,
}

fn samples(rounds: &[RoundMetrics], source: String, f: fn(&RoundMetrics) -> f64) -> Samples {
    Samples {
        source,
        values: rounds.iter().map(f).collect(),
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
            let run = |f: fn(&RoundMetrics) -> f64, what: &str, direction| {
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
                handshakes_per_s: run(
                    |m| m.handshakes_per_s,
                    "handshakes/s per round",
                    Direction::HigherIsBetter,
                ),
                request_mean_ms: run(
                    |m| m.request_mean_ms,
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
