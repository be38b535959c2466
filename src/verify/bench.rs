//! `verify bench`: the cost of one chain verification as the trust store grows, for four
//! ways a client can hold its roots — (a) a shared, pre-loaded store with the indexed
//! verifier; (b) the same store with rustls's `WebPkiServerVerifier`; (c) reloading the
//! store for every verification (the anti-pattern: `load_native_certs()` for the system
//! store, a rustls-pki-types read of the bundle file otherwise); (d) a store trimmed to the
//! anchors the chain needs — plus the growth exponent of each and the throughput of
//! several threads sharing one verifier.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use serde::Serialize;

use super::index::AnchorIndex;
use super::verifier::{IndexedVerifier, count_signature_checks};
use crate::pki::{BundleOptions, KeyType, generate_bundle};
use crate::tls::Provider;
use crate::trust::trim::{Chain, TrimOptions, trim};
use crate::trust::{Source, StoreLoadOptions, TrustError, TrustStore, load};

/// A store size to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreSize {
    /// N anchors: N − 1 synthetic CAs (10% with cross-signed twins, which add anchors of
    /// the same subject) plus the chain's own anchor(s).
    Synthetic(usize),
    /// The system bundle plus the chain's anchor(s).
    System,
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The chain (leaf first) and the name to verify it for.
    pub chain: Vec<CertificateDer<'static>>,
    /// Server name.
    pub host: String,
    /// PEM of the anchors that verify the chain.
    pub anchors_pem: String,
    /// Validation time.
    pub at: UnixTime,
    /// Store sizes.
    pub sizes: Vec<StoreSize>,
    /// Verifications per cell (at most).
    pub iterations: usize,
    /// Time limit per cell.
    pub max_time: Duration,
    /// Thread counts for the shared-verifier throughput test.
    pub threads: Vec<usize>,
    /// Signature algorithms from this provider.
    pub provider: Provider,
    /// Where to write the synthetic stores (a temporary directory).
    pub work_dir: PathBuf,
}

/// One store size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    /// `system` or the number asked for.
    pub size: String,
    /// Anchors in the store as loaded.
    pub anchors: usize,
    /// (a) indexed, median ns per verification.
    pub indexed_ns: u64,
    /// (b) rustls default verifier, median ns.
    pub default_ns: u64,
    /// (c) reload per verification, median ns.
    pub reload_ns: u64,
    /// (d) trimmed store with the default verifier, median ns.
    pub trimmed_ns: u64,
    /// Anchors in the trimmed store.
    pub trimmed_anchors: usize,
    /// Signature checks of one verification, indexed.
    pub indexed_signature_checks: u32,
    /// Signature checks of one verification, default verifier.
    pub default_signature_checks: u32,
    /// Verifications timed per variant.
    pub samples: usize,
}

/// Throughput with T threads sharing one indexed verifier.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadRow {
    /// Threads.
    pub threads: usize,
    /// Verifications per second, all threads.
    pub total_per_s: f64,
    /// Per thread.
    pub per_thread_per_s: f64,
}

/// The result of `verify bench`.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// Chain description (leaf subject, length).
    pub chain: String,
    /// Server name.
    pub host: String,
    /// One row per size.
    pub sizes: Vec<SizeRow>,
    /// Slope of log(time) over log(anchors), per variant.
    pub growth_exponent: Exponents,
    /// Indexed time at the largest store ÷ at the smallest.
    pub indexed_largest_over_smallest: f64,
    /// Shared verifier under threads.
    pub threads: Vec<ThreadRow>,
    /// Cores available.
    pub cores: usize,
}

/// Growth exponents (0 = flat, 1 = linear in the store size).
#[derive(Debug, Clone, Serialize)]
pub struct Exponents {
    /// (a)
    pub indexed: f64,
    /// (b)
    pub default: f64,
    /// (c)
    pub reload: f64,
    /// (d)
    pub trimmed: f64,
}

/// Runs the benchmark.
pub fn run(opts: &BenchOptions) -> Result<BenchResult, TrustError> {
    let name = ServerName::try_from(opts.host.clone()).map_err(|_| TrustError::BadChain {
        name: opts.host.clone(),
        reason: "not a valid host name or IP address".into(),
    })?;
    let (end_entity, intermediates) =
        opts.chain
            .split_first()
            .ok_or_else(|| TrustError::BadChain {
                name: "chain".into(),
                reason: "empty".into(),
            })?;
    if opts.sizes.contains(&StoreSize::System) {
        crate::trust::discover::check_ssl_cert_file()?;
    }
    let provider = opts.provider.crypto_provider();
    let mut rows = Vec::new();
    let mut largest_indexed: Option<Arc<IndexedVerifier>> = None;
    for &size in &opts.sizes {
        let (path, label) = match size {
            StoreSize::Synthetic(n) => {
                let path = opts.work_dir.join(format!("store-{n}.pem"));
                let mut pem = String::new();
                if n > 1 {
                    let filler = n - 1;
                    let twins = (filler / 10).min(filler.saturating_sub(1));
                    let cross = if filler >= 2 { twins } else { 0 };
                    // Twins are anchors too: N − 1 certificates in all.
                    let cas = filler - cross;
                    let b = generate_bundle(&BundleOptions {
                        count: cas.max(1),
                        cross_signed: cross.min(cas.max(1)),
                        key: KeyType::EcdsaP256,
                        key_pool: Some(64),
                        days: 3650,
                    })
                    .map_err(|e| TrustError::BadChain {
                        name: "synthetic store".into(),
                        reason: e.to_string(),
                    })?;
                    pem.push_str(&b.pem);
                }
                pem.push_str(&opts.anchors_pem);
                std::fs::write(&path, pem).map_err(|e| TrustError::Read {
                    path: path.clone(),
                    source: Arc::new(e),
                })?;
                (path, n.to_string())
            }
            StoreSize::System => {
                let sys = load(&Source::System { root: None }, &StoreLoadOptions::CERTS)?;
                let path = opts.work_dir.join("store-system.pem");
                let mut pem = String::new();
                for c in sys.store.certs() {
                    pem.push_str(&crate::trust::trim::to_pem(c));
                }
                pem.push_str(&opts.anchors_pem);
                std::fs::write(&path, pem).map_err(|e| TrustError::Read {
                    path: path.clone(),
                    source: Arc::new(e),
                })?;
                (path, "system".to_string())
            }
        };
        let store = TrustStore::from_pem_file(&path)?;
        let indexed = Arc::new(IndexedVerifier::with_index(
            Arc::new(AnchorIndex::new(&store)),
            opts.provider,
        ));
        let default = store.verifier(opts.provider)?;
        let trimmed = trim(
            &store,
            &[Chain {
                name: "chain".into(),
                certs: opts.chain.clone(),
            }],
            &TrimOptions {
                at: opts.at,
                provider: opts.provider,
                also_keep: Vec::new(),
            },
        )?;
        let trimmed_store = {
            let tpath = opts.work_dir.join(format!("trimmed-{label}.pem"));
            std::fs::write(&tpath, &trimmed.pem).map_err(|e| TrustError::Read {
                path: tpath.clone(),
                source: Arc::new(e),
            })?;
            TrustStore::from_pem_file(&tpath)?
        };
        let trimmed_verifier = trimmed_store.verifier(opts.provider)?;

        // Sanity: every variant accepts the chain before anything is timed.
        for (what, v) in [
            ("indexed", indexed.as_ref() as &dyn ServerCertVerifier),
            ("default", default.as_ref()),
            ("trimmed", trimmed_verifier.as_ref()),
        ] {
            v.verify_server_cert(end_entity, intermediates, &name, &[], opts.at)
                .map_err(|e| TrustError::Unverifiable {
                    name: format!("chain ({what} verifier)"),
                    origin: format!("the {label} store"),
                    reason: e.to_string(),
                })?;
        }

        let verify = |v: &dyn ServerCertVerifier| {
            let t = Instant::now();
            let ok = v
                .verify_server_cert(end_entity, intermediates, &name, &[], opts.at)
                .is_ok();
            std::hint::black_box(ok);
            t.elapsed()
        };
        // Warm-up (caches, branch predictors, CPU clock), untimed.
        let warm_until = Instant::now() + (opts.max_time / 5).min(Duration::from_millis(300));
        let mut warm = 0;
        while warm < 20 || (Instant::now() < warm_until && warm < opts.iterations) {
            for v in [
                indexed.as_ref() as &dyn ServerCertVerifier,
                default.as_ref(),
                trimmed_verifier.as_ref(),
            ] {
                std::hint::black_box(
                    v.verify_server_cert(end_entity, intermediates, &name, &[], opts.at)
                        .is_ok(),
                );
            }
            warm += 1;
        }
        // (a) and (b) alternate, sample by sample.
        let mut a = Vec::new();
        let mut b = Vec::new();
        let started = Instant::now();
        while a.len() < opts.iterations.max(3) && (a.len() < 3 || started.elapsed() < opts.max_time)
        {
            a.push(verify(indexed.as_ref()));
            b.push(verify(default.as_ref()));
        }
        let mut d = Vec::new();
        let started = Instant::now();
        while d.len() < opts.iterations.max(3) && (d.len() < 3 || started.elapsed() < opts.max_time)
        {
            d.push(verify(trimmed_verifier.as_ref()));
        }
        let mut c = Vec::new();
        let started = Instant::now();
        while c.len() < opts.iterations.max(3) && (c.len() < 3 || started.elapsed() < opts.max_time)
        {
            let t = Instant::now();
            let roots = reload(size, &path, &opts.anchors_pem);
            let v =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build();
            if let Ok(v) = v {
                std::hint::black_box(
                    v.verify_server_cert(end_entity, intermediates, &name, &[], opts.at)
                        .is_ok(),
                );
            }
            c.push(t.elapsed());
        }
        rows.push(SizeRow {
            size: label,
            anchors: store.len(),
            indexed_ns: median_ns(&a),
            default_ns: median_ns(&b),
            reload_ns: median_ns(&c),
            trimmed_ns: median_ns(&d),
            trimmed_anchors: trimmed_store.len(),
            indexed_signature_checks: indexed
                .verify_detailed(end_entity, intermediates, &name, opts.at)
                .signature_checks,
            default_signature_checks: count_signature_checks(
                opts.provider,
                &store.root_cert_store(),
                end_entity,
                intermediates,
                opts.at,
            ),
            samples: a.len(),
        });
        largest_indexed = Some(indexed);
    }

    let slope = |f: &dyn Fn(&SizeRow) -> u64| {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.anchors > 0 && f(r) > 0)
            .map(|r| ((r.anchors as f64).ln(), (f(r) as f64).ln()))
            .collect();
        crate::stats::least_squares_slope(&pts)
    };
    let growth_exponent = Exponents {
        indexed: slope(&|r| r.indexed_ns),
        default: slope(&|r| r.default_ns),
        reload: slope(&|r| r.reload_ns),
        trimmed: slope(&|r| r.trimmed_ns),
    };
    let by_anchors = {
        let mut r: Vec<&SizeRow> = rows.iter().collect();
        r.sort_by_key(|r| r.anchors);
        r
    };
    let indexed_largest_over_smallest = match (by_anchors.first(), by_anchors.last()) {
        (Some(s), Some(l)) if s.indexed_ns > 0 => l.indexed_ns as f64 / s.indexed_ns as f64,
        _ => 0.0,
    };

    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut threads = Vec::new();
    if let Some(v) = largest_indexed {
        for &t in &opts.threads {
            threads.push(throughput(
                &v,
                t,
                end_entity,
                intermediates,
                &name,
                opts.at,
                opts.max_time,
            ));
        }
    }
    Ok(BenchResult {
        chain: format!("{} certificates", opts.chain.len()),
        host: opts.host.clone(),
        sizes: rows,
        growth_exponent,
        indexed_largest_over_smallest,
        threads,
        cores,
    })
}

/// The anti-pattern: a fresh root store for one verification.
fn reload(size: StoreSize, path: &Path, anchors_pem: &str) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    match size {
        StoreSize::System => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            // The chain's own anchors, which the system store may not have.
            roots.add_parsable_certificates(
                CertificateDer::pem_slice_iter(anchors_pem.as_bytes()).filter_map(Result::ok),
            );
        }
        StoreSize::Synthetic(_) => {
            if let Ok(iter) = CertificateDer::pem_file_iter(path) {
                roots.add_parsable_certificates(iter.filter_map(Result::ok));
            }
        }
    }
    roots
}

fn throughput(
    v: &Arc<IndexedVerifier>,
    threads: usize,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    name: &ServerName<'_>,
    at: UnixTime,
    duration: Duration,
) -> ThreadRow {
    let counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| {
                let v = Arc::clone(v);
                s.spawn(move || {
                    let started = Instant::now();
                    let mut n = 0u64;
                    while started.elapsed() < duration && n < 10_000_000 {
                        std::hint::black_box(
                            v.verify_server_cert(end_entity, intermediates, name, &[], at)
                                .is_ok(),
                        );
                        n += 1;
                    }
                    (n, started.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map(|(n, e)| (n as f64 / e.as_secs_f64()) as u64)
                    .unwrap_or(0)
            })
            .collect()
    });
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    ThreadRow {
        threads: threads.max(1),
        total_per_s: total,
        per_thread_per_s: total / threads.max(1) as f64,
    }
}

fn median_ns(d: &[Duration]) -> u64 {
    u64::try_from(crate::stats::median_duration(d).as_nanos()).unwrap_or(u64::MAX)
}
