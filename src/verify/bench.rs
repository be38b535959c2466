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
    let subject = Subject::new(opts)?;
    if opts.sizes.contains(&StoreSize::System) {
        crate::trust::discover::check_ssl_cert_file()?;
    }
    let provider = opts.provider.crypto_provider();
    let mut rows = Vec::new();
    let mut largest_indexed: Option<Arc<IndexedVerifier>> = None;
    for &size in &opts.sizes {
        let (path, label) = write_store(opts, size)?;
        let store = TrustStore::from_pem_file(&path)?;
        let verifiers = Verifiers::new(opts, &store, &label)?;
        // Sanity: every variant accepts the chain before anything is timed.
        verifiers.check(&subject, &label)?;
        let samples = time_variants(opts, &subject, &verifiers, |s| {
            s.reload(size, &path, &opts.anchors_pem, &provider)
        });
        rows.push(SizeRow {
            size: label,
            anchors: store.len(),
            indexed_ns: median_ns(&samples.indexed),
            default_ns: median_ns(&samples.default),
            reload_ns: median_ns(&samples.reload),
            trimmed_ns: median_ns(&samples.trimmed),
            trimmed_anchors: verifiers.trimmed_anchors,
            indexed_signature_checks: verifiers
                .indexed
                .verify_detailed(
                    subject.end_entity,
                    subject.intermediates,
                    &subject.name,
                    opts.at,
                )
                .signature_checks,
            default_signature_checks: count_signature_checks(
                opts.provider,
                &store.root_cert_store(),
                subject.end_entity,
                subject.intermediates,
                opts.at,
            ),
            samples: samples.indexed.len(),
        });
        largest_indexed = Some(verifiers.indexed);
    }

    let growth_exponent = growth_exponents(&rows);
    let indexed_largest_over_smallest = indexed_largest_over_smallest(&rows);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut threads = Vec::new();
    if let Some(v) = largest_indexed {
        for &t in &opts.threads {
            threads.push(throughput(&v, t, &subject, opts.max_time));
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

/// The chain under test as a verifier takes it: leaf, intermediates, the name and the
/// validation time.
struct Subject<'a> {
    end_entity: &'a CertificateDer<'static>,
    intermediates: &'a [CertificateDer<'static>],
    name: ServerName<'static>,
    at: UnixTime,
}

impl<'a> Subject<'a> {
    /// The chain and name of `opts`; an empty chain or a bad name is refused.
    fn new(opts: &'a BenchOptions) -> Result<Self, TrustError> {
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
        Ok(Subject {
            end_entity,
            intermediates,
            name,
            at: opts.at,
        })
    }

    /// One verification by `v`.
    fn verify(&self, v: &dyn ServerCertVerifier) -> Result<(), rustls::Error> {
        v.verify_server_cert(
            self.end_entity,
            self.intermediates,
            &self.name,
            &[],
            self.at,
        )
        .map(|_| ())
    }

    /// One verification by `v`, timed.
    fn timed(&self, v: &dyn ServerCertVerifier) -> Duration {
        let t = Instant::now();
        std::hint::black_box(self.verify(v).is_ok());
        t.elapsed()
    }

    /// (c): a fresh root store and verifier for one verification, timed.
    fn reload(
        &self,
        size: StoreSize,
        path: &Path,
        anchors_pem: &str,
        provider: &Arc<rustls::crypto::CryptoProvider>,
    ) -> Duration {
        let t = Instant::now();
        let roots = reload(size, path, anchors_pem);
        let v = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(provider))
            .build();
        if let Ok(v) = v {
            std::hint::black_box(self.verify(&*v).is_ok());
        }
        t.elapsed()
    }
}

/// Writes the store of one size to the work directory: (its path, its label in the
/// result).
fn write_store(opts: &BenchOptions, size: StoreSize) -> Result<(PathBuf, String), TrustError> {
    let (path, label, mut pem) = match size {
        StoreSize::Synthetic(n) => (
            opts.work_dir.join(format!("store-{n}.pem")),
            n.to_string(),
            synthetic_anchors(n)?,
        ),
        StoreSize::System => {
            let sys = load(&Source::System { root: None }, &StoreLoadOptions::CERTS)?;
            let mut pem = String::new();
            for c in sys.store.certs() {
                pem.push_str(&crate::trust::trim::to_pem(c));
            }
            (
                opts.work_dir.join("store-system.pem"),
                "system".to_string(),
                pem,
            )
        }
    };
    pem.push_str(&opts.anchors_pem);
    write_pem(&path, pem)?;
    Ok((path, label))
}

/// The PEM of the N − 1 synthetic anchors of a store of `n` (10% of them cross-signed
/// twins of the others); empty for a store of one.
fn synthetic_anchors(n: usize) -> Result<String, TrustError> {
    if n <= 1 {
        return Ok(String::new());
    }
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
    Ok(b.pem)
}

/// Writes a store file of the work directory.
fn write_pem(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), TrustError> {
    std::fs::write(path, contents).map_err(|e| TrustError::Read {
        path: path.to_path_buf(),
        source: Arc::new(e),
    })
}

/// The verifiers of one store that are built once: (a), (b) and (d).
struct Verifiers {
    /// (a) the indexed verifier.
    indexed: Arc<IndexedVerifier>,
    /// (b) rustls's default verifier.
    default: Arc<WebPkiServerVerifier>,
    /// (d) rustls's default verifier over the trimmed store.
    trimmed: Arc<WebPkiServerVerifier>,
    /// Anchors in the trimmed store.
    trimmed_anchors: usize,
}

impl Verifiers {
    /// Builds the verifiers of `store`, trimming it to the chain's anchors (the trimmed
    /// store is written beside it, labelled `label`, and read back).
    fn new(opts: &BenchOptions, store: &TrustStore, label: &str) -> Result<Self, TrustError> {
        let indexed = Arc::new(IndexedVerifier::with_index(
            Arc::new(AnchorIndex::new(store)),
            opts.provider,
        ));
        let default = store.verifier(opts.provider)?;
        let trimmed = trim(
            store,
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
        let tpath = opts.work_dir.join(format!("trimmed-{label}.pem"));
        write_pem(&tpath, &trimmed.pem)?;
        let trimmed_store = TrustStore::from_pem_file(&tpath)?;
        Ok(Verifiers {
            indexed,
            default,
            trimmed: trimmed_store.verifier(opts.provider)?,
            trimmed_anchors: trimmed_store.len(),
        })
    }

    /// (a), (b) and (d), in that order.
    fn all(&self) -> [&dyn ServerCertVerifier; 3] {
        [&*self.indexed, &*self.default, &*self.trimmed]
    }

    /// Whether every variant accepts the chain: the first refusal, said plainly.
    fn check(&self, subject: &Subject<'_>, label: &str) -> Result<(), TrustError> {
        for (what, v) in ["indexed", "default", "trimmed"]
            .into_iter()
            .zip(self.all())
        {
            subject.verify(v).map_err(|e| TrustError::Unverifiable {
                name: format!("chain ({what} verifier)"),
                origin: format!("the {label} store"),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }
}

/// The timed verifications of one store size, per variant.
struct Samples {
    indexed: Vec<Duration>,
    default: Vec<Duration>,
    reload: Vec<Duration>,
    trimmed: Vec<Duration>,
}

/// Warms the verifiers up (untimed), then times each variant: at most
/// `opts.iterations` verifications or `opts.max_time`, whichever ends first, at least 3.
/// (a) and (b) alternate, sample by sample; then (d); then (c), one `reload` each.
fn time_variants(
    opts: &BenchOptions,
    subject: &Subject<'_>,
    verifiers: &Verifiers,
    reload: impl Fn(&Subject<'_>) -> Duration,
) -> Samples {
    // Warm-up (caches, branch predictors, CPU clock), untimed.
    let warm_until = Instant::now() + (opts.max_time / 5).min(Duration::from_millis(300));
    let mut warm = 0;
    while warm < 20 || (Instant::now() < warm_until && warm < opts.iterations) {
        for v in verifiers.all() {
            std::hint::black_box(subject.verify(v).is_ok());
        }
        warm += 1;
    }
    let more = |taken: usize, started: Instant| {
        taken < opts.iterations.max(3) && (taken < 3 || started.elapsed() < opts.max_time)
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let started = Instant::now();
    while more(a.len(), started) {
        a.push(subject.timed(&*verifiers.indexed));
        b.push(subject.timed(&*verifiers.default));
    }
    let mut d = Vec::new();
    let started = Instant::now();
    while more(d.len(), started) {
        d.push(subject.timed(&*verifiers.trimmed));
    }
    let mut c = Vec::new();
    let started = Instant::now();
    while more(c.len(), started) {
        c.push(reload(subject));
    }
    Samples {
        indexed: a,
        default: b,
        reload: c,
        trimmed: d,
    }
}

/// The slope of log(time) over log(anchors) of each variant.
fn growth_exponents(rows: &[SizeRow]) -> Exponents {
    let slope = |f: &dyn Fn(&SizeRow) -> u64| {
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.anchors > 0 && f(r) > 0)
            .map(|r| ((r.anchors as f64).ln(), (f(r) as f64).ln()))
            .collect();
        crate::stats::least_squares_slope(&pts)
    };
    Exponents {
        indexed: slope(&|r| r.indexed_ns),
        default: slope(&|r| r.default_ns),
        reload: slope(&|r| r.reload_ns),
        trimmed: slope(&|r| r.trimmed_ns),
    }
}

/// The indexed time at the largest store ÷ at the smallest (0 without a time).
fn indexed_largest_over_smallest(rows: &[SizeRow]) -> f64 {
    let mut by_anchors: Vec<&SizeRow> = rows.iter().collect();
    by_anchors.sort_by_key(|r| r.anchors);
    match (by_anchors.first(), by_anchors.last()) {
        (Some(s), Some(l)) if s.indexed_ns > 0 => l.indexed_ns as f64 / s.indexed_ns as f64,
        _ => 0.0,
    }
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

/// Verifications per second of `threads` threads sharing `v` for `duration`.
fn throughput(
    v: &Arc<IndexedVerifier>,
    threads: usize,
    subject: &Subject<'_>,
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
                        std::hint::black_box(subject.verify(&*v).is_ok());
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
