//! Discovery: the chain of places a client probes for the system's CA certificates, in
//! order, as OpenSSL, Go and rustls-native-certs do on Linux, macOS and the BSDs — and what
//! each costs. With a `root`, the probe runs inside another filesystem tree (an extracted
//! container image), resolving symbolic links against that root, not the host's.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Bundle files, in probe order, with the systems that use them.
pub const STANDARD_FILES: [(&str, &str); 7] = [
    (
        "/etc/ssl/certs/ca-certificates.crt",
        "Debian, Ubuntu, Alpine",
    ),
    ("/etc/pki/tls/certs/ca-bundle.crt", "RHEL, Fedora"),
    ("/etc/ssl/ca-bundle.pem", "openSUSE"),
    (
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
        "RHEL, Fedora (extracted)",
    ),
    ("/etc/ssl/cert.pem", "macOS, BSD, Alpine"),
    ("/usr/local/share/certs/ca-root-nss.crt", "FreeBSD"),
    ("/etc/pki/tls/cacert.pem", "OpenELEC"),
];

/// Certificate directories, in probe order.
pub const STANDARD_DIRS: [(&str, &str); 2] = [
    ("/etc/ssl/certs", "Debian, Ubuntu, Alpine, SUSE"),
    ("/etc/pki/tls/certs", "RHEL, Fedora"),
];

/// The environment variables that override the probe, as read from the process.
#[derive(Debug, Clone, Default)]
pub struct ProbeEnv {
    /// `SSL_CERT_FILE`: replaces the standard bundle files.
    pub cert_file: Option<OsString>,
    /// `SSL_CERT_DIR`: colon-separated directories, replacing the standard ones.
    pub cert_dir: Option<OsString>,
}

impl ProbeEnv {
    /// Reads `SSL_CERT_FILE` and `SSL_CERT_DIR` (empty values count as unset).
    pub fn from_process() -> Self {
        let get = |k| std::env::var_os(k).filter(|v| !v.is_empty());
        ProbeEnv {
            cert_file: get("SSL_CERT_FILE"),
            cert_dir: get("SSL_CERT_DIR"),
        }
    }
}

/// File or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PathKind {
    /// A bundle file.
    File,
    /// A directory of certificates (hashed names).
    Dir,
}

/// What the probe found at a candidate path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Present and of the expected kind.
    Found,
    /// Nothing there (or a broken symbolic link).
    NotFound,
    /// Present but not readable (or not traversable).
    PermissionDenied,
    /// Present but not a regular file (for a file) or not a directory (for a directory).
    NotRegular,
    /// Symbolic links loop.
    SymlinkLoop,
    /// Anything else, with the OS's words.
    Error(String),
}

impl Status {
    /// A short human word.
    pub fn label(&self) -> String {
        match self {
            Status::Found => "found".into(),
            Status::NotFound => "not found".into(),
            Status::PermissionDenied => "permission denied".into(),
            Status::NotRegular => "not a regular file".into(),
            Status::SymlinkLoop => "symlink loop".into(),
            Status::Error(e) => format!("error: {e}"),
        }
    }
}

/// One probed candidate.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeEntry {
    /// The path as a client would name it.
    pub path: PathBuf,
    /// Where it really is (under `root`, symbolic links resolved) when found.
    pub resolved: Option<PathBuf>,
    /// File or directory.
    pub kind: PathKind,
    /// Why it is probed: `SSL_CERT_FILE`, `SSL_CERT_DIR` or the systems using it.
    pub origin: String,
    /// What was found.
    pub status: Status,
    /// Bytes (files) or number of entries (directories), when found.
    pub size: Option<u64>,
    /// Time spent probing this candidate.
    #[serde(
        serialize_with = "crate::stats::serde_duration_ms",
        rename = "elapsed_ms"
    )]
    pub elapsed: Duration,
}

/// The whole probe chain.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// The filesystem root probed (`/` for the host).
    pub root: PathBuf,
    /// Every candidate, in probe order.
    pub entries: Vec<ProbeEntry>,
    /// Index in `entries` of the bundle a client would load, if any.
    pub chosen_file: Option<usize>,
    /// Indexes of the directories loaded: only when no bundle file was found.
    pub chosen_dirs: Vec<usize>,
    /// Directories not read because a bundle was found. Many clients (rustls-native-certs,
    /// Go) read them too; on the systems listed here they hold the bundle's own
    /// certificates under hashed names (update-ca-certificates and c_rehash build both
    /// from the same files), which `trust load` checks and reports.
    pub deferred_dirs: Vec<PathBuf>,
    /// Total probe time.
    #[serde(
        serialize_with = "crate::stats::serde_duration_ms",
        rename = "elapsed_ms"
    )]
    pub elapsed: Duration,
}

struct Candidate {
    path: PathBuf,
    kind: PathKind,
    origin: String,
}

fn candidates(env: &ProbeEnv) -> Vec<Candidate> {
    let mut out = Vec::new();
    match &env.cert_file {
        Some(f) => out.push(Candidate {
            path: PathBuf::from(f),
            kind: PathKind::File,
            origin: "SSL_CERT_FILE".into(),
        }),
        None => out.extend(STANDARD_FILES.iter().map(|(p, who)| Candidate {
            path: PathBuf::from(p),
            kind: PathKind::File,
            origin: (*who).into(),
        })),
    }
    match &env.cert_dir {
        Some(dirs) => out.extend(
            std::env::split_paths(dirs)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|path| Candidate {
                    path,
                    kind: PathKind::Dir,
                    origin: "SSL_CERT_DIR".into(),
                }),
        ),
        None => out.extend(STANDARD_DIRS.iter().map(|(p, who)| Candidate {
            path: PathBuf::from(p),
            kind: PathKind::Dir,
            origin: (*who).into(),
        })),
    }
    out
}

/// Probes every candidate (the `trust probe` table). Files that are found are also
/// opened once to confirm they are readable; directories are listed to count entries.
pub fn probe(root: Option<&Path>, env: &ProbeEnv) -> Probe {
    run_probe(root, env, false)
}

/// Probes as a client loading the system store does: files in order until the first one
/// found (by metadata only, no open); directories only when no bundle file exists.
pub fn probe_for_load(root: Option<&Path>, env: &ProbeEnv) -> Probe {
    run_probe(root, env, true)
}

fn run_probe(root: Option<&Path>, env: &ProbeEnv, for_load: bool) -> Probe {
    let started = Instant::now();
    let root_path = root.map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let mut entries = Vec::new();
    let mut chosen_file = None;
    let mut chosen_dirs = Vec::new();
    let mut deferred_dirs = Vec::new();
    for c in candidates(env) {
        if for_load && chosen_file.is_some() {
            if c.kind == PathKind::Dir {
                deferred_dirs.push(match root {
                    Some(r) => resolve_in_root(r, &c.path)
                        .unwrap_or_else(|_| join(r, &components(&c.path))),
                    None => c.path,
                });
            }
            continue;
        }
        let t = Instant::now();
        let (status, resolved, size) = check(root, &c.path, c.kind, !for_load);
        let found = status == Status::Found;
        entries.push(ProbeEntry {
            path: c.path,
            resolved,
            kind: c.kind,
            origin: c.origin,
            status,
            size,
            elapsed: t.elapsed(),
        });
        if found {
            match c.kind {
                PathKind::File if chosen_file.is_none() => chosen_file = Some(entries.len() - 1),
                PathKind::Dir => chosen_dirs.push(entries.len() - 1),
                PathKind::File => {}
            }
        }
    }
    // A directory beside a found bundle holds the bundle's certificates under hashed
    // names: it is not read (see `Probe::deferred_dirs`).
    if chosen_file.is_some() && !chosen_dirs.is_empty() {
        deferred_dirs.extend(
            chosen_dirs
                .drain(..)
                .filter_map(|i| entries[i].resolved.clone()),
        );
    }
    Probe {
        root: root_path,
        entries,
        chosen_file,
        chosen_dirs,
        deferred_dirs,
        elapsed: started.elapsed(),
    }
}

fn check(
    root: Option<&Path>,
    path: &Path,
    kind: PathKind,
    thorough: bool,
) -> (Status, Option<PathBuf>, Option<u64>) {
    let resolved = match root {
        None => Ok(path.to_path_buf()),
        Some(r) => resolve_in_root(r, path),
    };
    let resolved = match resolved {
        Ok(p) => p,
        Err(e) => return (status_of(&e), None, None),
    };
    let meta = match fs::metadata(&resolved) {
        Ok(m) => m,
        Err(e) => return (status_of(&e), None, None),
    };
    match kind {
        PathKind::File if !meta.is_file() => (Status::NotRegular, Some(resolved), None),
        PathKind::Dir if !meta.is_dir() => (Status::NotRegular, Some(resolved), None),
        PathKind::File => {
            if thorough && let Err(e) = fs::File::open(&resolved) {
                return (status_of(&e), Some(resolved), Some(meta.len()));
            }
            (Status::Found, Some(resolved), Some(meta.len()))
        }
        PathKind::Dir => {
            if !thorough {
                return (Status::Found, Some(resolved), None);
            }
            match fs::read_dir(&resolved) {
                Ok(rd) => {
                    let n = rd.count() as u64;
                    (Status::Found, Some(resolved), Some(n))
                }
                Err(e) => (status_of(&e), Some(resolved), None),
            }
        }
    }
}

/// Refuses an `SSL_CERT_FILE` that exists but is not a regular file (a FIFO, a device),
/// before anything that honours it (rustls-native-certs opens it with a blocking `open()`
/// and reads it whole) is called; the probe itself only skips such a candidate.
pub fn check_ssl_cert_file() -> Result<(), super::TrustError> {
    let Some(path) = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from) else {
        return Ok(());
    };
    match fs::metadata(&path)
        .ok()
        .as_ref()
        .and_then(crate::files::not_regular)
    {
        Some(what) => Err(super::TrustError::NotRegular {
            path: PathBuf::from(format!("SSL_CERT_FILE={}", path.display())),
            what,
        }),
        None => Ok(()),
    }
}

/// Maps an I/O error to a probe status.
pub fn status_of(e: &io::Error) -> Status {
    match e.kind() {
        io::ErrorKind::NotFound => Status::NotFound,
        io::ErrorKind::PermissionDenied => Status::PermissionDenied,
        io::ErrorKind::NotADirectory => Status::NotFound,
        _ if e.raw_os_error() == Some(40) => Status::SymlinkLoop, // ELOOP on Linux
        _ => Status::Error(e.to_string()),
    }
}

/// Resolves `path` (absolute, as seen inside the image) under `root`, following symbolic
/// links the way the kernel would inside a chroot: absolute link targets restart at
/// `root`, `..` never climbs above it. Fails with ELOOP after 40 links.
pub fn resolve_in_root(root: &Path, path: &Path) -> io::Result<PathBuf> {
    let mut pending: Vec<OsString> = components(path);
    pending.reverse();
    let mut current: Vec<OsString> = Vec::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == ".." {
            current.pop();
            continue;
        }
        if part == "." {
            continue;
        }
        current.push(part);
        let host = join(root, &current);
        match fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return Err(io::Error::from_raw_os_error(40));
                }
                let target = fs::read_link(&host)?;
                current.pop();
                if target.is_absolute() {
                    current.clear();
                }
                let mut parts = components(&target);
                parts.reverse();
                pending.extend(parts);
            }
            Ok(_) => {}
            // Let the caller's metadata call report the real error on the full path.
            Err(_) => {
                let rest: Vec<OsString> = pending.drain(..).rev().collect();
                current.extend(rest);
                break;
            }
        }
    }
    Ok(join(root, &current))
}

fn components(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

fn join(root: &Path, parts: &[OsString]) -> PathBuf {
    let mut p = root.to_path_buf();
    for part in parts {
        p.push(part);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn image() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fs::create_dir_all(r.join("etc/ssl/certs")).unwrap();
        fs::write(r.join("etc/ssl/certs/ca-certificates.crt"), b"bundle").unwrap();
        // Alpine-style absolute link, which must resolve inside the image.
        symlink(
            "/etc/ssl/certs/ca-certificates.crt",
            r.join("etc/ssl/cert.pem"),
        )
        .unwrap();
        dir
    }

    #[test]
    fn probes_inside_a_root() {
        let img = image();
        let p = probe(Some(img.path()), &ProbeEnv::default());
        assert_eq!(p.entries.len(), STANDARD_FILES.len() + STANDARD_DIRS.len());
        let first = &p.entries[0];
        assert_eq!(first.status, Status::Found);
        assert_eq!(first.size, Some(6));
        assert_eq!(p.chosen_file, Some(0));
        let cert_pem = p
            .entries
            .iter()
            .find(|e| e.path == Path::new("/etc/ssl/cert.pem"))
            .unwrap();
        assert_eq!(
            cert_pem.status,
            Status::Found,
            "absolute link resolved in the root"
        );
        assert_eq!(
            cert_pem.resolved.as_deref(),
            Some(
                img.path()
                    .join("etc/ssl/certs/ca-certificates.crt")
                    .as_path()
            )
        );
        assert_eq!(p.entries[1].status, Status::NotFound);
        assert!(
            p.chosen_dirs.is_empty(),
            "the bundle's directory is not read"
        );
    }

    #[test]
    fn load_probe_stops_at_first_file() {
        let img = image();
        let p = probe_for_load(Some(img.path()), &ProbeEnv::default());
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.chosen_file, Some(0));
    }

    #[test]
    fn env_overrides() {
        let img = image();
        fs::create_dir_all(img.path().join("a")).unwrap();
        let env = ProbeEnv {
            cert_file: Some("/nope.pem".into()),
            cert_dir: Some("/a:/b".into()),
        };
        let p = probe_for_load(Some(img.path()), &env);
        assert_eq!(p.entries[0].origin, "SSL_CERT_FILE");
        assert_eq!(p.entries[0].status, Status::NotFound);
        assert_eq!(p.chosen_file, None);
        assert_eq!(p.entries.len(), 3);
        assert_eq!(p.chosen_dirs, vec![1]);
        fs::write(img.path().join("nope.pem"), b"x").unwrap();
        let p = probe_for_load(Some(img.path()), &env);
        assert_eq!(p.chosen_file, Some(0));
        assert!(p.chosen_dirs.is_empty());
        assert_eq!(
            p.deferred_dirs,
            vec![img.path().join("a"), img.path().join("b")]
        );
    }

    #[test]
    fn no_bundle_falls_back_to_directories() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("etc/pki/tls/certs")).unwrap();
        let p = probe_for_load(Some(dir.path()), &ProbeEnv::default());
        assert_eq!(p.chosen_file, None);
        assert_eq!(p.chosen_dirs.len(), 1);
        assert_eq!(
            p.entries[p.chosen_dirs[0]].path,
            Path::new("/etc/pki/tls/certs")
        );
    }

    #[test]
    fn loops_and_odd_kinds() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        fs::create_dir_all(r.join("etc/ssl")).unwrap();
        symlink("/etc/ssl/b", r.join("etc/ssl/ca-bundle.pem")).unwrap();
        symlink("/etc/ssl/ca-bundle.pem", r.join("etc/ssl/b")).unwrap();
        fs::create_dir_all(r.join("etc/ssl/cert.pem")).unwrap();
        fs::write(r.join("etc/ssl/certs"), b"not a dir").unwrap();
        let p = probe(Some(r), &ProbeEnv::default());
        let get = |path: &str| {
            p.entries
                .iter()
                .find(|e| e.path == Path::new(path))
                .unwrap()
                .status
                .clone()
        };
        assert_eq!(get("/etc/ssl/ca-bundle.pem"), Status::SymlinkLoop);
        assert_eq!(get("/etc/ssl/cert.pem"), Status::NotRegular);
        assert_eq!(get("/etc/ssl/certs"), Status::NotRegular);
    }
}
