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

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls_pki_types::{CertificateDer, TrustAnchor};
use serde::Serialize;

use super::TrustError;
use super::discover::{self, Probe, ProbeEnv};
use super::pem;
use super::store::TrustStore;

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

/// Time spent in each layer of one load.
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

struct FileData {
    path: Arc<Path>,
    bytes: Vec<u8>,
}

/// Loads `source` in timed layers; `x509` adds layer 4.
pub fn load(source: &Source, x509: bool) -> Result<Loaded, TrustError> {
    let started = Instant::now();
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

    // Layer 1: I/O.
    let t = Instant::now();
    let mut seen_files: HashSet<(u64, u64)> = HashSet::new();
    let mut data: Vec<FileData> = Vec::new();
    let strict = !matches!(source, Source::System { .. });
    for f in &files {
        match read_file(f, &mut stats) {
            Ok((bytes, id)) => {
                seen_files.insert(id);
                data.push(FileData {
                    path: Arc::from(f.as_path()),
                    bytes,
                });
            }
            Err(e) if strict => return Err(e),
            Err(e) => stats.problems.push(problem_of(f, &e)),
        }
    }
    for d in &dirs {
        read_dir(d, strict, &mut seen_files, &mut data, &mut stats)?;
    }
    times.io = t.elapsed();

    // Layer 2: PEM → DER, then drop identical certificates.
    let t = Instant::now();
    let mut decoded: Vec<(CertificateDer<'static>, Arc<Path>, usize, usize)> = Vec::new();
    for file in &data {
        let d = pem::decode(&file.bytes);
        stats.certs_decoded += d.certs.len();
        for p in d.problems {
            stats.problems.push(FileProblem {
                path: file.path.to_path_buf(),
                line: Some(p.line),
                block: p.block,
                reason: p.reason,
                ignored: p.ignored,
            });
        }
        decoded.extend(
            d.certs
                .into_iter()
                .map(|c| (c.der, Arc::clone(&file.path), c.line, c.block)),
        );
    }
    drop(data);
    let mut first_index: HashMap<DerKey<'_>, usize> = HashMap::with_capacity(decoded.len());
    let mut keep = vec![false; decoded.len()];
    let mut counts = vec![0u32; decoded.len()];
    for (i, (der, ..)) in decoded.iter().enumerate() {
        let first = *first_index.entry(DerKey(der.as_ref())).or_insert(i);
        keep[i] = first == i;
        counts[first] += 1;
    }
    drop(first_index);
    stats.duplicate_certs = keep.iter().filter(|k| !**k).count();
    times.pem = t.elapsed();

    // Layer 3: DER → trust anchor.
    let t = Instant::now();
    let mut certs = Vec::with_capacity(decoded.len());
    let mut anchors: Vec<TrustAnchor<'static>> = Vec::with_capacity(decoded.len());
    let mut occurrences = Vec::with_capacity(decoded.len());
    for (((der, path, line, block), keep), count) in decoded.into_iter().zip(keep).zip(counts) {
        if !keep {
            continue;
        }
        match webpki::anchor_from_trusted_cert(&der) {
            Ok(anchor) => {
                anchors.push(anchor.to_owned());
                certs.push(der);
                occurrences.push(count);
            }
            Err(e) => stats.problems.push(FileProblem {
                path: path.to_path_buf(),
                line: Some(line),
                block: Some(block),
                reason: format!("not a usable certificate: {e:?}"),
                ignored: false,
            }),
        }
    }
    times.anchors = t.elapsed();
    times.total = started.elapsed();

    // Layer 4 (optional): full X.509 parse.
    if x509 {
        let t = Instant::now();
        for der in &certs {
            if let Err(e) = x509_parser::parse_x509_certificate(der) {
                tracing::debug!("x509-parser rejects a certificate webpki accepted: {e}");
            }
        }
        times.x509 = Some(t.elapsed());
    }

    stats.anchors = anchors.len();
    if anchors.is_empty() {
        return Err(TrustError::NoCertificates {
            origin: source.to_string(),
            problems: stats.problems,
        });
    }
    Ok(Loaded {
        store: TrustStore::new(certs, anchors, source.to_string()),
        stats,
        times,
        probe,
        occurrences,
    })
}

/// Opens and reads one file; returns the bytes and the file's (device, inode).
fn read_file(path: &Path, stats: &mut LoadStats) -> Result<(Vec<u8>, (u64, u64)), TrustError> {
    let read_err = |e: std::io::Error| TrustError::Read {
        path: path.to_path_buf(),
        source: Arc::new(e),
    };
    stats.files_opened += 1;
    let mut file = fs::File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(TrustError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > MAX_FILE_SIZE {
        return Err(TrustError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.read_to_end(&mut bytes).map_err(read_err)?;
    stats.bytes_read += bytes.len() as u64;
    stats.files_read.push(path.to_path_buf());
    Ok((bytes, (meta.dev(), meta.ino())))
}

fn read_dir(
    dir: &Path,
    strict: bool,
    seen: &mut HashSet<(u64, u64)>,
    data: &mut Vec<FileData>,
    stats: &mut LoadStats,
) -> Result<(), TrustError> {
    stats.files_opened += 1;
    let entries = match fs::read_dir(dir) {
        Ok(rd) => rd,
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
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        stats.dir_entries += 1;
        // Follows symbolic links without opening anything.
        let meta = match fs::metadata(&path) {
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
        if !seen.insert((meta.dev(), meta.ino())) {
            stats.same_file_skipped += 1;
            continue;
        }
        match read_file(&path, stats) {
            Ok((bytes, _)) => data.push(FileData {
                path: Arc::from(path.as_path()),
                bytes,
            }),
            Err(e) => stats.problems.push(problem_of(&path, &e)),
        }
    }
    Ok(())
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

/// Certificate bytes keyed cheaply: the hash covers the length and the last 16 bytes
/// (inside the signature, effectively random); equality compares everything.
#[derive(PartialEq, Eq)]
struct DerKey<'a>(&'a [u8]);

impl Hash for DerKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let b = self.0;
        state.write_usize(b.len());
        state.write(&b[b.len().saturating_sub(16)..]);
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
        let l = load(&Source::Bundle(path.clone()), true).unwrap();
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
        let l = load(&Source::Dir(d.to_path_buf()), false).unwrap();
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
            false,
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
        let err = load(&Source::Bundle(garbage.clone()), false).unwrap_err();
        assert!(err.to_string().contains("garbage.pem"), "{err}");
        let missing = dir.path().join("missing.pem");
        let err = load(&Source::Bundle(missing), false).unwrap_err();
        assert!(err.to_string().contains("missing.pem"), "{err}");
        let err = load(&Source::Bundle(dir.path().to_path_buf()), false).unwrap_err();
        assert!(
            matches!(err, TrustError::NotRegular { .. } | TrustError::Read { .. }),
            "{err}"
        );
        // A bad block among good ones: the good ones load, the bad one is named.
        let mixed = dir.path().join("mixed.pem");
        let bad = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        fs::write(&mixed, format!("{bad}{}", a.root.pem)).unwrap();
        let l = load(&Source::Bundle(mixed), false).unwrap();
        assert_eq!(l.store.len(), 1);
        assert_eq!(l.stats.problems.len(), 1);
        assert_eq!(l.stats.problems[0].line, Some(1));
        assert_eq!(l.stats.problems[0].block, Some(1));
    }
}
