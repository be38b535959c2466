//! Loading a trust store in timed layers:
//!
//! 0. probe — find the bundle (system source only);
//! 1. I/O — open and read files (counted: files opened, bytes read);
//! 2. PEM → DER — find blocks, decode base64 ([`super::pem`]);
//! 3. DER → trust anchor — subject, SPKI, name constraints (rustls-webpki);
//! 4. optionally, a full X.509 parse (x509-parser) as analysis would need.
//!
//! Each layer runs over all files before the next starts, so each is timed on its own.
//! A file reached twice (a directory's hashed symlinks, the bundle inside its own
//! directory) is opened once; an identical certificate found twice is parsed once. Bad
//! files and blocks are reported one by one while the rest loads.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::{CertificateDer, TrustAnchor};
use serde::Serialize;

use super::TrustError;
use super::discover::{self, Probe, ProbeEnv};
use super::pem;
use super::store::{SharedStore, TrustStore};

/// Files larger than this are reported and skipped (a 100,000-certificate synthetic
/// bundle is ~70 MB).
pub const MAX_FILE_SIZE: u64 = 128 << 20;

/// Where to load certificates from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The system store as a client finds it (probe chain), optionally inside another
    /// filesystem root.
    System {
        /// Filesystem root to probe in (`None`: the host).
        root: Option<PathBuf>,
    },
    /// One bundle file (PEM or DER).
    Bundle(PathBuf),
    /// A directory of certificate files.
    Dir(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::System { root: None } => f.write_str("system store"),
            Source::System { root: Some(r) } => write!(f, "system store under {}", r.display()),
            Source::Bundle(p) => write!(f, "bundle {}", p.display()),
            Source::Dir(p) => write!(f, "directory {}", p.display()),
        }
    }
}

/// A problem with one file or block; the rest of the source still loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileProblem {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based block number in the file, when known.
    pub block: Option<usize>,
    /// Why.
    pub reason: String,
    /// True for things deliberately skipped (a CRL or key block, a subdirectory), false
    /// for damage.
    pub ignored: bool,
}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(block) = self.block {
            write!(f, ": block {block}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Time spent in each layer of one load (without [`StoreLoadOptions::layer_times`], only the
/// probe and the total; the layer fields stay zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LayerTimes {
    /// Probing candidate paths (system source only).
    #[serde(
        serialize_with = "crate::stats::serde_duration_ms",
        rename = "probe_ms"
    )]
    pub probe: Duration,
    /// Opening and reading files.
    #[serde(serialize_with = "crate::stats::serde_duration_ms", rename = "io_ms")]
    pub io: Duration,
    /// PEM → DER.
    #[serde(serialize_with = "crate::stats::serde_duration_ms", rename = "pem_ms")]
    pub pem: Duration,
    /// DER → trust anchor.
    #[serde(
        serialize_with = "crate::stats::serde_duration_ms",
        rename = "anchors_ms"
    )]
    pub anchors: Duration,
    /// Full X.509 parse, when asked for.
    #[serde(serialize_with = "serde_opt_ms", rename = "x509_ms")]
    pub x509: Option<Duration>,
    /// Everything, from the first probe to the finished store (excluding the X.509 layer).
    #[serde(
        serialize_with = "crate::stats::serde_duration_ms",
        rename = "total_ms"
    )]
    pub total: Duration,
}

fn serde_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64() * 1e3),
        None => s.serialize_none(),
    }
}

/// What one load did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoadStats {
    /// Files (and directories) opened: the file-opening syscalls this loader made.
    pub files_opened: usize,
    /// The regular files read, in order.
    pub files_read: Vec<PathBuf>,
    /// Bytes read.
    pub bytes_read: u64,
    /// Directory entries seen.
    pub dir_entries: usize,
    /// Directory entries not opened because they lead to a file already read (hashed
    /// symlinks, the bundle inside its own directory).
    pub same_file_skipped: usize,
    /// Certificates decoded from PEM/DER, duplicates included.
    pub certs_decoded: usize,
    /// Certificates identical to one already loaded: not parsed again.
    pub duplicate_certs: usize,
    /// Trust anchors in the store.
    pub anchors: usize,
    /// Problems, per file and block.
    pub problems: Vec<FileProblem>,
}

/// The result of a load: the store, the statistics and the layer times.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The store.
    pub store: TrustStore,
    /// Counts and problems.
    pub stats: LoadStats,
    /// Time per layer.
    pub times: LayerTimes,
    /// The probe (system source only).
    pub probe: Option<Probe>,
    /// How many times each of the store's certificates was found (same order as
    /// `store.certs()`): above 1 for exact duplicates.
    pub occurrences: Vec<u32>,
}

/// Stores built by loading a source (the constructors live with the loader, so the store
/// does not depend on how it is read).
impl TrustStore {
    /// Loads the system store now (probe, read, decode): a fresh load on every call. Use
    /// [`TrustStore::system_shared`] unless measuring the load itself.
    pub fn system() -> Result<TrustStore, TrustError> {
        Ok(load(
            &Source::System { root: None },
            &StoreLoadOptions::ANCHORS.untimed(),
        )?
        .store)
    }

    /// The process-wide system store: loaded once, on first use, then shared.
    pub fn system_shared() -> Result<Arc<TrustStore>, TrustError> {
        static SYSTEM: SharedStore = SharedStore::new();
        SYSTEM.get_or_load(TrustStore::system)
    }

    /// Loads a PEM (or DER) bundle file.
    pub fn from_pem_file(path: &Path) -> Result<TrustStore, TrustError> {
        Ok(load(
            &Source::Bundle(path.to_path_buf()),
            &StoreLoadOptions::CERTS.untimed(),
        )?
        .store)
    }

    /// Loads every certificate file of a directory (hashed links to the same file are read
    /// once).
    pub fn from_dir(path: &Path) -> Result<TrustStore, TrustError> {
        Ok(load(
            &Source::Dir(path.to_path_buf()),
            &StoreLoadOptions::CERTS.untimed(),
        )?
        .store)
    }
}

impl From<Loaded> for TrustStore {
    fn from(l: Loaded) -> Self {
        l.store
    }
}

/// What to keep and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLoadOptions {
    /// Keep every distinct certificate's DER (for analysis, trimming, listing). Without
    /// it, only trust anchors are kept — what a TLS client needs — and duplicates are
    /// recognized by their anchor (subject, key, name constraints).
    pub keep_certs: bool,
    /// Also time a full X.509 parse of every certificate (layer 4; implies `keep_certs`).
    pub x509: bool,
    /// Time each layer (two clock reads per certificate and per chunk read). Off, only
    /// the probe and the total are timed: what a client that just wants the store pays.
    pub layer_times: bool,
}

impl StoreLoadOptions {
    /// Anchors only: the store a TLS client uses.
    pub const ANCHORS: StoreLoadOptions = StoreLoadOptions {
        keep_certs: false,
        x509: false,
        layer_times: true,
    };
    /// Anchors and certificates.
    pub const CERTS: StoreLoadOptions = StoreLoadOptions {
        keep_certs: true,
        x509: false,
        layer_times: true,
    };

    /// The same without per-layer timing.
    pub const fn untimed(self) -> StoreLoadOptions {
        StoreLoadOptions {
            layer_times: false,
            ..self
        }
    }
}

/// A stopwatch for one layer's share that costs nothing when layer timing is off.
#[derive(Clone, Copy)]
struct Lap(Option<Instant>);

impl Lap {
    fn start(on: bool) -> Lap {
        Lap(on.then(Instant::now))
    }

    fn add_to(self, total: &mut Duration) {
        if let Some(t) = self.0 {
            *total += t.elapsed();
        }
    }
}

/// Size of the read buffer: a bundle is streamed through it, never held whole.
const CHUNK: usize = 16 << 10;

/// Loads `source` in timed layers.
///
/// Files are read in chunks into one reused buffer and decoded as they arrive: touching
/// fresh memory is what makes a first load slow (each new page faults), so a bundle
/// never sits in memory whole and certificates are decoded into reused scratch space.
/// The layers interleave; each one's time is summed separately.
pub fn load(source: &Source, opts: &StoreLoadOptions) -> Result<Loaded, TrustError> {
    let started = Instant::now();
    let keep_certs = opts.keep_certs || opts.x509;
    let mut stats = LoadStats::default();
    let mut times = LayerTimes::default();

    // Layer 0: probe.
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut probe = None;
    match source {
        Source::System { root } => {
            let p = discover::probe_for_load(root.as_deref(), &ProbeEnv::from_process());
            if let Some(i) = p.chosen_file {
                files.extend(p.entries[i].resolved.clone());
            }
            dirs.extend(
                p.chosen_dirs
                    .iter()
                    .filter_map(|&i| p.entries[i].resolved.clone()),
            );
            if files.is_empty() && dirs.is_empty() {
                return Err(TrustError::NoSystemStore {
                    probed: p.entries.iter().map(|e| e.path.clone()).collect(),
                });
            }
            probe = Some(p);
        }
        Source::Bundle(p) => files.push(p.clone()),
        Source::Dir(p) => dirs.push(p.clone()),
    }
    times.probe = started.elapsed();

    // Layers 1–3, streamed.
    let strict = !matches!(source, Source::System { .. });
    let mut reader = Reader {
        buf: vec![0u8; CHUNK],
        timed: opts.layer_times,
        sink: Sink::new(keep_certs, opts.layer_times),
        seen_files: BTreeSet::new(),
    };
    for f in &files {
        match reader.file(f, &mut stats, &mut times) {
            Ok(()) => {}
            Err(e) if strict => return Err(e),
            Err(e) => stats.problems.push(problem_of(f, &e)),
        }
    }
    for d in &dirs {
        reader.dir(d, strict, &mut stats, &mut times)?;
    }
    let sink = reader.sink;
    times.anchors = sink.anchor_time;
    times.pem = times.pem.saturating_sub(sink.anchor_time);
    stats.problems.extend(sink.problems);
    stats.certs_decoded = sink.decoded;
    stats.duplicate_certs = sink.duplicates;
    times.total = started.elapsed();

    // Layer 4 (optional): full X.509 parse.
    if opts.x509 {
        let t = Instant::now();
        for der in &sink.certs {
            if let Err(e) = x509_parser::parse_x509_certificate(der) {
                tracing::debug!("x509-parser rejects a certificate webpki accepted: {e}");
            }
        }
        times.x509 = Some(t.elapsed());
    }

    stats.anchors = sink.anchors.len();
    if sink.anchors.is_empty() {
        return Err(TrustError::NoCertificates {
            origin: source.to_string(),
            problems: stats.problems,
        });
    }
    Ok(Loaded {
        store: TrustStore::new(sink.certs, sink.anchors, source.to_string()),
        stats,
        times,
        probe,
        occurrences: sink.occurrences,
    })
}

/// Reads files through one buffer into a [`Sink`].
struct Reader {
    buf: Vec<u8>,
    timed: bool,
    sink: Sink,
    seen_files: BTreeSet<(u64, u64)>,
}

impl Reader {
    /// Streams one file; fails (for the caller to report or propagate) when it cannot be
    /// read at all. Problems inside the file are recorded in the sink.
    fn file(
        &mut self,
        path: &Path,
        stats: &mut LoadStats,
        times: &mut LayerTimes,
    ) -> Result<(), TrustError> {
        let read_err = |e: std::io::Error| TrustError::Read {
            path: path.to_path_buf(),
            source: Arc::new(e),
        };
        let t = Lap::start(self.timed);
        stats.files_opened += 1;
        // Checked before opening, and opened non-blocking: a FIFO would block in open(),
        // a device would be read forever.
        if let Ok(meta) = fs::metadata(path)
            && let Some(what) = crate::files::not_regular(&meta)
        {
            return Err(TrustError::NotRegular {
                path: path.to_path_buf(),
                what,
            });
        }
        let (mut file, meta) = crate::files::open_input(path).map_err(read_err)?;
        t.add_to(&mut times.io);
        if meta.len() > MAX_FILE_SIZE {
            return Err(TrustError::TooLarge {
                path: path.to_path_buf(),
                size: meta.len(),
            });
        }
        self.seen_files.insert((meta.dev(), meta.ino()));
        // About one certificate per 1.5 KB of PEM: grow once, not by doubling.
        self.sink.reserve((meta.len() / 1500) as usize);
        let shared_path: Arc<Path> = Arc::from(path);
        let mut stream = pem::PemStream::new();
        let mut filled = 0;
        let mut total: u64 = 0;
        let mut first = true;
        loop {
            if filled == self.buf.len() {
                // One block larger than the buffer: grow (bounded by MAX_FILE_SIZE).
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let t = Lap::start(self.timed);
            let n = file.read(&mut self.buf[filled..]).map_err(read_err)?;
            t.add_to(&mut times.io);
            filled += n;
            total += n as u64;
            if total > MAX_FILE_SIZE {
                // It grew while being read.
                return Err(TrustError::TooLarge {
                    path: path.to_path_buf(),
                    size: total,
                });
            }
            let eof = n == 0;
            if first && !eof && !pem::looks_like_pem(&self.buf[..filled]) {
                // A DER file: small; read it whole.
                let mut whole = self.buf[..filled].to_vec();
                let t = Lap::start(self.timed);
                (&mut file)
                    .take(MAX_FILE_SIZE + 1 - filled as u64)
                    .read_to_end(&mut whole)
                    .map_err(read_err)?;
                if whole.len() as u64 > MAX_FILE_SIZE {
                    return Err(TrustError::TooLarge {
                        path: path.to_path_buf(),
                        size: whole.len() as u64,
                    });
                }
                t.add_to(&mut times.io);
                total = whole.len() as u64;
                let t = Lap::start(self.timed);
                let decoded = pem::decode(&whole);
                t.add_to(&mut times.pem);
                for c in decoded.certs {
                    self.sink.cert(&c.der, &shared_path, c.line, c.block);
                }
                self.sink.block_problems(&shared_path, decoded.problems);
                break;
            }
            first = false;
            let t = Lap::start(self.timed);
            let sink = &mut self.sink;
            let consumed = stream.feed(&self.buf[..filled], eof, &mut |der, line, block| {
                sink.cert(der, &shared_path, line, block);
            });
            t.add_to(&mut times.pem);
            self.buf.copy_within(consumed..filled, 0);
            filled -= consumed;
            if eof {
                let problems = std::mem::take(&mut stream).finish(total);
                self.sink.block_problems(&shared_path, problems);
                break;
            }
        }
        stats.bytes_read += total;
        stats.files_read.push(path.to_path_buf());
        Ok(())
    }

    fn dir(
        &mut self,
        dir: &Path,
        strict: bool,
        stats: &mut LoadStats,
        times: &mut LayerTimes,
    ) -> Result<(), TrustError> {
        let t = Lap::start(self.timed);
        stats.files_opened += 1;
        let listing = fs::read_dir(dir).map(|rd| {
            let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            paths
        });
        t.add_to(&mut times.io);
        let paths = match listing {
            Ok(p) => p,
            Err(e) => {
                let err = TrustError::Read {
                    path: dir.to_path_buf(),
                    source: Arc::new(e),
                };
                if strict {
                    return Err(err);
                }
                stats.problems.push(problem_of(dir, &err));
                return Ok(());
            }
        };
        for path in paths {
            stats.dir_entries += 1;
            // Follows symbolic links without opening anything.
            let t = Lap::start(self.timed);
            let meta = fs::metadata(&path);
            t.add_to(&mut times.io);
            let meta = match meta {
                Ok(m) => m,
                Err(e) => {
                    let reason = match (discover::status_of(&e), fs::read_link(&path)) {
                        (discover::Status::NotFound, Ok(target)) => {
                            format!("broken symlink to {}", target.display())
                        }
                        (discover::Status::SymlinkLoop, _) => "symlink loop".into(),
                        (_, _) => format!("cannot read: {e}"),
                    };
                    stats.problems.push(FileProblem {
                        path,
                        line: None,
                        block: None,
                        reason,
                        ignored: false,
                    });
                    continue;
                }
            };
            if meta.is_dir() {
                stats.problems.push(FileProblem {
                    path,
                    line: None,
                    block: None,
                    reason: "subdirectory, not read".into(),
                    ignored: true,
                });
                continue;
            }
            if let Some(what) = crate::files::not_regular(&meta) {
                // Skipped, not refused: a directory of certificates is a store, and one odd
                // entry (a FIFO would block the load forever, a device would be read until
                // memory runs out) should not make the rest unusable, as with a broken
                // symbolic link or a subdirectory. It is listed as a problem (a warning).
                stats.problems.push(FileProblem {
                    path,
                    line: None,
                    block: None,
                    reason: format!("{what}, not a regular file; not read"),
                    ignored: true,
                });
                continue;
            }
            if self.seen_files.contains(&(meta.dev(), meta.ino())) {
                stats.same_file_skipped += 1;
                continue;
            }
            if let Err(e) = self.file(&path, stats, times) {
                stats.problems.push(problem_of(&path, &e));
            }
        }
        Ok(())
    }
}

/// Receives decoded certificates: drops duplicates, extracts trust anchors (timed as
/// layer 3), keeps certificates when asked.
struct Sink {
    keep_certs: bool,
    certs: Vec<CertificateDer<'static>>,
    anchors: Vec<TrustAnchor<'static>>,
    occurrences: Vec<u32>,
    /// Hash key → the latest anchor with that key; `same_key` chains to earlier ones
    /// (no allocation per entry).
    index: HashMap<u64, usize, BuildHasherDefault<KeyHasher>>,
    /// For each anchor, the previous anchor with the same hash key (`usize::MAX`: none).
    same_key: Vec<usize>,
    anchor_time: Duration,
    timed: bool,
    decoded: usize,
    duplicates: usize,
    problems: Vec<FileProblem>,
}

impl Sink {
    fn new(keep_certs: bool, timed: bool) -> Self {
        Sink {
            keep_certs,
            certs: Vec::new(),
            anchors: Vec::new(),
            occurrences: Vec::new(),
            index: HashMap::default(),
            same_key: Vec::new(),
            anchor_time: Duration::ZERO,
            timed,
            decoded: 0,
            duplicates: 0,
            problems: Vec::new(),
        }
    }

    fn cert(&mut self, der: &[u8], path: &Arc<Path>, line: usize, block: usize) {
        self.decoded += 1;
        let der_key = tail_key(der.len(), der);
        if self.keep_certs
            && let Some(i) = self.find(der_key, |i| self.certs[i].as_ref() == der)
        {
            self.duplicate(i);
            return;
        }
        let t = Lap::start(self.timed);
        match webpki::anchor_from_trusted_cert(&CertificateDer::from(der)) {
            Ok(anchor) => {
                if !self.keep_certs {
                    let key = tail_key(
                        anchor.subject.len(),
                        anchor.subject_public_key_info.as_ref(),
                    );
                    if let Some(i) = self.find(key, |i| same_anchor(&self.anchors[i], &anchor)) {
                        self.duplicate(i);
                        t.add_to(&mut self.anchor_time);
                        return;
                    }
                    self.remember(key);
                } else {
                    self.remember(der_key);
                    self.certs.push(CertificateDer::from(der.to_vec()));
                }
                self.anchors.push(anchor.to_owned());
                self.occurrences.push(1);
            }
            Err(e) => self.problems.push(FileProblem {
                path: path.to_path_buf(),
                line: Some(line),
                block: Some(block),
                reason: format!("not a usable certificate: {e:?}"),
                ignored: false,
            }),
        }
        t.add_to(&mut self.anchor_time);
    }

    fn reserve(&mut self, n: usize) {
        self.anchors.reserve(n);
        self.occurrences.reserve(n);
        self.index.reserve(n);
        self.same_key.reserve(n);
        if self.keep_certs {
            self.certs.reserve(n);
        }
    }

    fn find(&self, key: u64, same: impl Fn(usize) -> bool) -> Option<usize> {
        let mut at = *self.index.get(&key)?;
        while at != usize::MAX {
            if same(at) {
                return Some(at);
            }
            at = self.same_key[at];
        }
        None
    }

    /// Indexes the anchor about to be pushed under `key`.
    fn remember(&mut self, key: u64) {
        let i = self.anchors.len();
        let previous = self.index.insert(key, i).unwrap_or(usize::MAX);
        self.same_key.push(previous);
    }

    fn duplicate(&mut self, i: usize) {
        self.duplicates += 1;
        self.occurrences[i] += 1;
    }

    fn block_problems(&mut self, path: &Path, problems: Vec<pem::BlockProblem>) {
        self.problems
            .extend(problems.into_iter().map(|p| FileProblem {
                path: path.to_path_buf(),
                line: Some(p.line),
                block: p.block,
                reason: p.reason,
                ignored: p.ignored,
            }));
    }
}

fn same_anchor(a: &TrustAnchor<'_>, b: &TrustAnchor<'_>) -> bool {
    a.subject.as_ref() == b.subject.as_ref()
        && a.subject_public_key_info.as_ref() == b.subject_public_key_info.as_ref()
        && a.name_constraints.as_ref().map(|n| n.as_ref())
            == b.name_constraints.as_ref().map(|n| n.as_ref())
}

/// A cheap hash key: a length and the last 8 bytes (inside a signature or public key,
/// effectively random). Equality is always checked in full, so a weak key costs only
/// time, never correctness.
fn tail_key(len: usize, bytes: &[u8]) -> u64 {
    let mut tail = [0u8; 8];
    let t = &bytes[bytes.len().saturating_sub(8)..];
    tail[..t.len()].copy_from_slice(t);
    u64::from_le_bytes(tail) ^ (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Passes [`tail_key`]s through unhashed.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

fn problem_of(path: &Path, e: &TrustError) -> FileProblem {
    let reason = match e {
        TrustError::Read { source, .. } => source.to_string(),
        other => {
            let s = other.to_string();
            let prefix = format!("{}: ", path.display());
            s.strip_prefix(&prefix).map(str::to_string).unwrap_or(s)
        }
    };
    FileProblem {
        path: path.to_path_buf(),
        line: None,
        block: None,
        reason,
        ignored: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{PkiOptions, TestPki};
    use std::os::unix::fs::symlink;

    fn two_pkis() -> (TestPki, TestPki) {
        (
            TestPki::generate(&PkiOptions::default()).unwrap(),
            TestPki::generate(&PkiOptions::default()).unwrap(),
        )
    }

    #[test]
    fn bundle_with_duplicates() {
        let (a, b) = two_pkis();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bundle.pem");
        fs::write(&path, format!("{}{}{}", a.root.pem, b.root.pem, a.root.pem)).unwrap();
        let l = load(
            &Source::Bundle(path.clone()),
            &StoreLoadOptions {
                keep_certs: true,
                x509: true,
                layer_times: true,
            },
        )
        .unwrap();
        assert_eq!(l.stats.files_opened, 1);
        assert_eq!(l.stats.certs_decoded, 3);
        assert_eq!(l.stats.duplicate_certs, 1);
        assert_eq!(l.store.len(), 2);
        assert_eq!(l.occurrences, vec![2, 1]);
        assert!(l.times.x509.is_some());
        assert!(l.stats.problems.is_empty());
    }

    #[test]
    fn directory_with_hash_links_der_and_broken_links() {
        let (a, b) = two_pkis();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("a.pem"), &a.root.pem).unwrap();
        fs::write(d.join("b.der"), b.root.der.as_ref()).unwrap();
        fs::write(
            d.join("bundle.crt"),
            format!("{}{}", a.root.pem, b.root.pem),
        )
        .unwrap();
        symlink("a.pem", d.join("1a2b3c4d.0")).unwrap();
        symlink("b.der", d.join("5e6f7a8b.0")).unwrap();
        symlink("missing.pem", d.join("deadbeef.0")).unwrap();
        symlink("loop2", d.join("loop1")).unwrap();
        symlink("loop1", d.join("loop2")).unwrap();
        fs::create_dir(d.join("sub")).unwrap();
        let l = load(&Source::Dir(d.to_path_buf()), &StoreLoadOptions::CERTS).unwrap();
        assert_eq!(l.store.len(), 2);
        // The directory plus a.pem, b.der, bundle.crt; the two hash links are not opened.
        assert_eq!(l.stats.files_opened, 4, "{:?}", l.stats.files_read);
        assert_eq!(l.stats.same_file_skipped, 2);
        assert_eq!(l.stats.duplicate_certs, 2);
        let reasons: Vec<String> = l.stats.problems.iter().map(ToString::to_string).collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("deadbeef.0") && r.contains("broken symlink to missing.pem")),
            "{reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("loop1") && r.contains("symlink loop")),
            "{reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.contains("sub") && r.contains("subdirectory")),
            "{reasons:?}"
        );
    }

    #[test]
    fn system_source_in_an_image_reads_only_the_bundle() {
        let (a, b) = two_pkis();
        let img = tempfile::tempdir().unwrap();
        let certs = img.path().join("etc/ssl/certs");
        fs::create_dir_all(&certs).unwrap();
        fs::write(
            certs.join("ca-certificates.crt"),
            format!("{}{}", a.root.pem, b.root.pem),
        )
        .unwrap();
        fs::write(certs.join("a.pem"), &a.root.pem).unwrap();
        symlink("a.pem", certs.join("1a2b3c4d.0")).unwrap();
        let l = load(
            &Source::System {
                root: Some(img.path().to_path_buf()),
            },
            &StoreLoadOptions::ANCHORS,
        )
        .unwrap();
        assert_eq!(l.store.len(), 2);
        assert_eq!(l.stats.files_opened, 1);
        assert_eq!(l.stats.files_read, vec![certs.join("ca-certificates.crt")]);
        assert!(l.probe.is_some());
    }

    #[test]
    fn errors_and_problems() {
        let (a, _) = two_pkis();
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.pem");
        fs::write(&garbage, b"this is not a bundle\n").unwrap();
        let err = load(&Source::Bundle(garbage.clone()), &StoreLoadOptions::CERTS).unwrap_err();
        assert!(err.to_string().contains("garbage.pem"), "{err}");
        let missing = dir.path().join("missing.pem");
        let err = load(&Source::Bundle(missing), &StoreLoadOptions::CERTS).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let err = load(
            &Source::Bundle(dir.path().to_path_buf()),
            &StoreLoadOptions::CERTS,
        )
        .unwrap_err();
        assert!(
            matches!(err, TrustError::NotRegular { .. } | TrustError::Read { .. }),
            "{err}"
        );
        // A bad block among good ones: the good ones load, the bad one is named.
        let mixed = dir.path().join("mixed.pem");
        let bad = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        fs::write(&mixed, format!("{bad}{}", a.root.pem)).unwrap();
        let l = load(&Source::Bundle(mixed), &StoreLoadOptions::CERTS).unwrap();
        assert_eq!(l.store.len(), 1);
        assert_eq!(l.stats.problems.len(), 1);
        assert_eq!(l.stats.problems[0].line, Some(1));
        assert_eq!(l.stats.problems[0].block, Some(1));
    }
}
