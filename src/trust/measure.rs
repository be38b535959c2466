//! Measuring loads: the first load in the process (cold) against the median of repeated
//! loads (warm), layer by layer, with rustls-native-certs and the plain "read one bundle
//! with rustls-pki-types into a `RootCertStore`" as comparison rows, timed alternately in
//! the same run. Also checks what a deferred certificate directory would have added.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde::Serialize;

use super::TrustError;
use super::load::{LayerTimes, LoadStats, Source, load};
use super::store::TrustStore;
use crate::stats::{median_duration, serde_duration_ms};

/// A comparison row: another way to load the same certificates.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// What was run.
    pub name: String,
    /// First call in the process.
    #[serde(serialize_with = "serde_duration_ms", rename = "cold_ms")]
    pub cold: Duration,
    /// Median of the repeated calls.
    #[serde(serialize_with = "serde_duration_ms", rename = "warm_ms")]
    pub warm: Duration,
    /// Certificates it returned.
    pub certs: usize,
    /// Errors it reported.
    pub errors: usize,
}

/// What a directory not read at load time holds, compared with the loaded store.
#[derive(Debug, Clone, Serialize)]
pub struct DirCoverage {
    /// The directory.
    pub dir: PathBuf,
    /// Entries listed.
    pub entries: usize,
    /// Distinct files behind them (hashed symlinks collapse).
    pub distinct_files: usize,
    /// Distinct certificates in those files.
    pub certs: usize,
    /// Of those, how many the loaded store has already: reads and parses avoided.
    pub already_loaded: usize,
    /// Certificates only in the directory (not trusted by the loaded store).
    pub only_in_dir: usize,
    /// Subjects of those certificates.
    pub only_in_dir_subjects: Vec<String>,
}

/// The result of `trust load`.
#[derive(Debug, Clone, Serialize)]
pub struct LoadMeasurement {
    /// The source, for humans.
    pub source: String,
    /// Loads timed (1 cold + warm repeats).
    pub iterations: usize,
    /// Counts and problems of the first load.
    pub stats: LoadStats,
    /// Layer times of the first (cold) load.
    pub cold: LayerTimes,
    /// Per-layer medians of the repeated (warm) loads.
    pub warm: LayerTimes,
    /// Time to get the shared store once it is loaded (median, no I/O).
    #[serde(serialize_with = "opt_ns", rename = "shared_warm_ns")]
    pub shared_warm: Option<Duration>,
    /// Comparison rows, timed in the same run.
    pub baselines: Vec<Baseline>,
    /// Directories a client might also read, checked against the store (system only).
    pub deferred_dirs: Vec<DirCoverage>,
}

fn opt_ns<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_nanos() as u64),
        None => s.serialize_none(),
    }
}

/// Loads `source` `iterations` times (at least 2: one cold, the rest warm), alternating
/// with the comparison rows, and measures the shared store's warm access for the system
/// source. "Cold" is the first call of each loader in this process; `baselines_first`
/// makes the comparison rows go first (so they, not tlsperf's loader, pay the process's
/// first-touch costs): run both orders in fresh processes to compare cold figures fairly.
pub fn measure_load(
    source: &Source,
    iterations: usize,
    x509: bool,
    baselines_first: bool,
) -> Result<LoadMeasurement, TrustError> {
    let iterations = iterations.max(2);
    // Time the store a TLS client gets: anchors only (certificates too with --x509).
    let opts = super::load::StoreLoadOptions {
        keep_certs: false,
        x509,
        layer_times: true,
    };
    let system = matches!(source, Source::System { root: None });
    if system {
        super::discover::check_ssl_cert_file()?;
    }
    let bundle_file = match source {
        Source::Bundle(p) => Some(p.clone()),
        Source::System { root } => {
            let p =
                super::discover::probe_for_load(root.as_deref(), &super::ProbeEnv::from_process());
            p.chosen_file.and_then(|i| p.entries[i].resolved.clone())
        }
        Source::Dir(_) => None,
    };

    // The baselines open the bundle themselves (rustls-pki-types, a blocking open that
    // reads to the end), possibly before tlsperf's own load has refused it.
    if let Some(f) = &bundle_file
        && let Ok(meta) = std::fs::metadata(f)
        && let Some(what) = crate::files::not_regular(&meta)
    {
        return Err(TrustError::NotRegular {
            path: f.clone(),
            what,
        });
    }
    let mut native_runs = Vec::new();
    let mut native_result = (0, 0);
    let mut pki_types_runs = Vec::new();
    let mut pki_types_certs = 0;
    let mut first = if baselines_first {
        None
    } else {
        Some(load(source, &opts)?)
    };
    if system {
        let t = Instant::now();
        let r = rustls_native_certs::load_native_certs();
        native_runs.push(t.elapsed());
        native_result = (r.certs.len(), r.errors.len());
    }
    if let Some(f) = &bundle_file {
        let t = Instant::now();
        pki_types_certs = read_one_bundle(f);
        pki_types_runs.push(t.elapsed());
    }
    let first = match first.take() {
        Some(f) => f,
        None => load(source, &opts)?,
    };

    let mut warm: Vec<LayerTimes> = Vec::with_capacity(iterations - 1);
    for _ in 1..iterations {
        warm.push(load(source, &opts)?.times);
        if system {
            let t = Instant::now();
            let r = rustls_native_certs::load_native_certs();
            native_runs.push(t.elapsed());
            std::hint::black_box(r);
        }
        if let Some(f) = &bundle_file {
            let t = Instant::now();
            std::hint::black_box(read_one_bundle(f));
            pki_types_runs.push(t.elapsed());
        }
    }

    let mut baselines = Vec::new();
    if system {
        baselines.push(Baseline {
            name: "rustls_native_certs::load_native_certs()".into(),
            cold: native_runs[0],
            warm: median_duration(&native_runs[1..]),
            certs: native_result.0,
            errors: native_result.1,
        });
    }
    if let Some(f) = &bundle_file {
        baselines.push(Baseline {
            name: format!(
                "read {} + rustls-pki-types PEM + RootCertStore",
                f.display()
            ),
            cold: pki_types_runs[0],
            warm: median_duration(&pki_types_runs[1..]),
            certs: pki_types_certs,
            errors: 0,
        });
    }

    let shared_warm = if system {
        TrustStore::system_shared()?;
        let mut runs = Vec::with_capacity(1000);
        for _ in 0..1000 {
            let t = Instant::now();
            std::hint::black_box(TrustStore::system_shared()?);
            runs.push(t.elapsed());
        }
        Some(median_duration(&runs))
    } else {
        None
    };

    let dirs: Vec<&PathBuf> = first
        .probe
        .iter()
        .flat_map(|p| p.deferred_dirs.iter())
        .filter(|d| d.is_dir())
        .collect();
    let deferred_dirs = if dirs.is_empty() {
        Vec::new()
    } else {
        // The timed loads keep anchors only; comparing needs the certificates.
        let with_certs = load(source, &super::load::StoreLoadOptions::CERTS).map(|l| l.store);
        let empty = TrustStore::new(Vec::new(), Vec::new(), String::new());
        let store = with_certs.as_ref().unwrap_or(&empty);
        dirs.into_iter().map(|d| dir_coverage(d, store)).collect()
    };

    Ok(LoadMeasurement {
        source: source.to_string(),
        iterations,
        stats: first.stats,
        cold: first.times,
        warm: median_layers(&warm),
        shared_warm,
        baselines,
        deferred_dirs,
    })
}

/// The usual way: rustls-pki-types PEM iterator into a `RootCertStore`.
fn read_one_bundle(path: &Path) -> usize {
    let mut store = RootCertStore::empty();
    if let Ok(iter) = CertificateDer::pem_file_iter(path) {
        let certs: Vec<_> = iter.filter_map(Result::ok).collect();
        store.add_parsable_certificates(certs);
    }
    store.len()
}

fn dir_coverage(dir: &Path, store: &TrustStore) -> DirCoverage {
    let loaded: std::collections::HashSet<&[u8]> =
        store.certs().iter().map(|c| c.as_ref()).collect();
    match load(
        &Source::Dir(dir.to_path_buf()),
        &super::load::StoreLoadOptions::CERTS,
    ) {
        Ok(l) => {
            let already = l
                .store
                .certs()
                .iter()
                .filter(|c| loaded.contains(c.as_ref()))
                .count();
            let only_in_dir_subjects = l
                .store
                .certs()
                .iter()
                .filter(|c| !loaded.contains(c.as_ref()))
                .map(|c| {
                    x509_parser::parse_x509_certificate(c)
                        .map(|(_, x)| super::analyze::common_name(x.subject()))
                        .unwrap_or_else(|_| "(unparsable)".into())
                })
                .collect();
            DirCoverage {
                only_in_dir_subjects,
                dir: dir.to_path_buf(),
                entries: l.stats.dir_entries,
                distinct_files: l.stats.files_read.len(),
                certs: l.store.len(),
                already_loaded: already,
                only_in_dir: l.store.len() - already,
            }
        }
        Err(_) => DirCoverage {
            dir: dir.to_path_buf(),
            entries: 0,
            distinct_files: 0,
            certs: 0,
            already_loaded: 0,
            only_in_dir: 0,
            only_in_dir_subjects: Vec::new(),
        },
    }
}

fn median_layers(runs: &[LayerTimes]) -> LayerTimes {
    let pick = |f: &dyn Fn(&LayerTimes) -> Duration| {
        median_duration(&runs.iter().map(f).collect::<Vec<_>>())
    };
    LayerTimes {
        probe: pick(&|t| t.probe),
        io: pick(&|t| t.io),
        pem: pick(&|t| t.pem),
        anchors: pick(&|t| t.anchors),
        x509: runs
            .first()
            .and_then(|t| t.x509)
            .map(|_| pick(&|t| t.x509.unwrap_or_default())),
        total: pick(&|t| t.total),
    }
}
