//! Session-ticket keys shared by every server instance: a key ring file read by all of
//! them, reloaded when it changes, and rotated through generate → standby → active →
//! decrypt-only → destroyed, so a ticket issued by one instance resumes on another and
//! survives one rotation.
//!
//! [`TicketKeyRing`] implements rustls's `ProducesTickets` with AES-256-GCM (aws-lc-rs):
//! a ticket is `key id (16) ‖ nonce (12) ‖ ciphertext ‖ tag (16)`, the key id also bound
//! as associated data. Tickets are encrypted with the active key and decrypted with any
//! key of the ring (the standby key too: an instance that rotated first issues tickets
//! under it). Garbage or tampered tickets decrypt to `None`, which makes rustls fall back
//! to a full handshake.
//!
//! The ring file is JSON, written with mode 0600 through a temporary file and a rename.
//! Secrets are never printed or logged: `Debug` shows key ids only, and secret bytes are
//! zeroed when dropped.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::error::{Classify, ErrorClass, io_input_class};
use crate::files::{self, FileMode};

/// Bytes of a key id.
pub const KEY_ID_LEN: usize = 16;
const SECRET_LEN: usize = 32;
const TAG_LEN: usize = 16;
/// The largest ticket plaintext accepted (rustls's are a few hundred bytes).
const MAX_PLAINTEXT: usize = 16 * 1024;

/// A failure of the ticket key ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TicketError {
    /// The file could not be read.
    #[error("cannot read ticket key file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid key ring.
    #[error("{}: not a valid ticket key ring: {reason}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file can be read by other users than its owner.
    #[error("{}: the ticket key file is readable by others (mode {mode:04o}); anyone who can read it can decrypt every session it protects: chmod 600 {} (or pass --allow-insecure-key-file)", .path.display(), .path.display())]
    Insecure {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Writing the file failed.
    #[error(transparent)]
    Write(#[from] files::FileError),
    /// The system random generator failed.
    #[error("the system random number generator failed")]
    Random,
}

impl Classify for TicketError {
    fn class(&self) -> ErrorClass {
        match self {
            TicketError::Read { source, .. } => io_input_class(source),
            TicketError::Invalid { .. } | TicketError::Insecure { .. } => ErrorClass::Input,
            TicketError::Write(e) => e.class(),
            TicketError::Random => ErrorClass::Runtime,
        }
    }
}

/// Where a key is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyState {
    /// Encrypts new tickets (and decrypts).
    Active,
    /// Becomes active at the next rotation; decrypts already (for instances ahead of us).
    Standby,
    /// Was active before the last rotation; only decrypts; destroyed at the next one.
    DecryptOnly,
}

/// One key of the ring.
struct TicketKey {
    id: [u8; KEY_ID_LEN],
    secret: Zeroizing<[u8; SECRET_LEN]>,
    state: KeyState,
    aead: LessSafeKey,
}

impl TicketKey {
    fn generate(rng: &SystemRandom, state: KeyState) -> Result<Self, TicketError> {
        let mut id = [0u8; KEY_ID_LEN];
        let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
        rng.fill(&mut id).map_err(|_| TicketError::Random)?;
        rng.fill(secret.as_mut()).map_err(|_| TicketError::Random)?;
        Self::new(id, secret, state).ok_or(TicketError::Random)
    }

    fn new(
        id: [u8; KEY_ID_LEN],
        secret: Zeroizing<[u8; SECRET_LEN]>,
        state: KeyState,
    ) -> Option<Self> {
        let aead = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, secret.as_ref()).ok()?);
        Some(TicketKey {
            id,
            secret,
            state,
            aead,
        })
    }

    fn id_hex(&self) -> String {
        hex(&self.id)
    }
}

/// The keys of a ring, oldest state first (decrypt-only, active, standby).
struct Ring {
    keys: Vec<TicketKey>,
    rotated_at: String,
}

impl Ring {
    fn active(&self) -> Option<&TicketKey> {
        self.keys.iter().find(|k| k.state == KeyState::Active)
    }
}

/// The ring file's JSON.
#[derive(Serialize, Deserialize)]
struct RingFile {
    version: u32,
    rotated_at: String,
    keys: Vec<KeyFile>,
}

#[derive(Serialize, Deserialize)]
struct KeyFile {
    id: String,
    state: KeyState,
    secret: String,
}

/// A key as shown to people: id and state, never the secret.
#[derive(Debug, Clone, Serialize)]
pub struct KeyInfo {
    /// Key id, hex.
    pub id: String,
    /// State.
    pub state: KeyState,
}

/// What a ring holds, for display.
#[derive(Debug, Clone, Serialize)]
pub struct RingInfo {
    /// The file.
    pub path: PathBuf,
    /// When it was created or last rotated.
    pub rotated_at: String,
    /// Keys, oldest first.
    pub keys: Vec<KeyInfo>,
}

/// Fails with [`TicketError::Insecure`] when the key ring at `path` (after symbolic
/// links) can be read or written by its group or others: only its owner may (mode 0600 or
/// 0400).
pub fn check_private(path: &Path) -> Result<(), TicketError> {
    let meta = std::fs::metadata(path).map_err(|source| TicketError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if files::not_regular(&meta).is_some() {
        // Not a key ring at all: reading it refuses it, saying what it is.
        return Ok(());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(TicketError::Insecure {
                path: path.to_path_buf(),
                mode,
            });
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    Ok(())
}

/// Creates a new ring file (active + standby keys), mode 0600. Refuses to overwrite unless
/// `overwrite`. Overwriting through a symbolic link (to a ring shared by several
/// instances) replaces the file it points to and keeps the link, as [`rotate`] does.
pub fn init(path: &Path, overwrite: bool) -> Result<RingInfo, TicketError> {
    let shown = path;
    // A broken link: replaced, as there is no ring behind it to share.
    let target = match overwrite {
        true => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        false => path.to_path_buf(),
    };
    let path = target.as_path();
    let rng = SystemRandom::new();
    let ring = Ring {
        keys: vec![
            TicketKey::generate(&rng, KeyState::Active)?,
            TicketKey::generate(&rng, KeyState::Standby)?,
        ],
        rotated_at: now_rfc3339(),
    };
    write(path, &ring, overwrite)?;
    Ok(info(shown, &ring))
}

/// Rotates the ring file in place: decrypt-only is destroyed, active becomes
/// decrypt-only, standby becomes active, and a new standby key is generated. When `path`
/// is a symbolic link (to a ring shared by several instances), the file it points to is
/// rotated and the link is kept: replacing the link with a file would leave the shared
/// ring unrotated and this instance on a ring of its own.
pub fn rotate(path: &Path) -> Result<RingInfo, TicketError> {
    let shown = path;
    // A broken link or a missing file: reading `path` reports it.
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let path = target.as_path();
    let mut ring = read(path)?;
    let rng = SystemRandom::new();
    ring.keys.retain(|k| k.state != KeyState::DecryptOnly);
    for k in &mut ring.keys {
        k.state = match k.state {
            KeyState::Active => KeyState::DecryptOnly,
            KeyState::Standby => KeyState::Active,
            KeyState::DecryptOnly => KeyState::DecryptOnly,
        };
    }
    ring.keys
        .push(TicketKey::generate(&rng, KeyState::Standby)?);
    ring.rotated_at = now_rfc3339();
    write(path, &ring, true)?;
    Ok(info(shown, &ring))
}

/// Reads a ring file and describes it (ids and states only).
pub fn show(path: &Path) -> Result<RingInfo, TicketError> {
    Ok(info(path, &read(path)?))
}

fn info(path: &Path, ring: &Ring) -> RingInfo {
    RingInfo {
        path: path.to_path_buf(),
        rotated_at: ring.rotated_at.clone(),
        keys: ring
            .keys
            .iter()
            .map(|k| KeyInfo {
                id: k.id_hex(),
                state: k.state,
            })
            .collect(),
    }
}

fn write(path: &Path, ring: &Ring, overwrite: bool) -> Result<(), TicketError> {
    let file = RingFile {
        version: 1,
        rotated_at: ring.rotated_at.clone(),
        keys: ring
            .keys
            .iter()
            .map(|k| KeyFile {
                id: k.id_hex(),
                state: k.state,
                secret: B64.encode(k.secret.as_ref()),
            })
            .collect(),
    };
    let text =
        Zeroizing::new(
            serde_json::to_string_pretty(&file).map_err(|e| TicketError::Invalid {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?,
        );
    for k in file.keys {
        drop(Zeroizing::new(k.secret));
    }
    files::write_atomic(path, text.as_bytes(), FileMode::Private, overwrite)?;
    Ok(())
}

fn read(path: &Path) -> Result<Ring, TicketError> {
    let invalid = |reason: String| TicketError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let text = Zeroizing::new(
        crate::files::read_input_to_string(path, crate::files::InputKind::KeyRing).map_err(
            |source| TicketError::Read {
                path: path.to_path_buf(),
                source,
            },
        )?,
    );
    // serde_json's text says where ("at line 1 column 2"); what is wrong with a file that is
    // not JSON at all (a PEM key given by mistake) is said here.
    let file: RingFile = serde_json::from_str(&text).map_err(|e| {
        invalid(match e.classify() {
            serde_json::error::Category::Data => e.to_string(),
            _ => format!(
                "it is not JSON ({e}); a key ring is the JSON file `tlsperf tickets init` writes"
            ),
        })
    })?;
    if file.version != 1 {
        return Err(invalid(format!(
            "version {} (this tlsperf reads version 1)",
            file.version
        )));
    }
    let mut keys = Vec::with_capacity(file.keys.len());
    for (i, k) in file.keys.into_iter().enumerate() {
        let secret_b64 = Zeroizing::new(k.secret);
        let id = unhex(&k.id)
            .and_then(|v| <[u8; KEY_ID_LEN]>::try_from(v).ok())
            .ok_or_else(|| {
                invalid(format!(
                    "key {}: id must be {KEY_ID_LEN} bytes of hex",
                    i + 1
                ))
            })?;
        let raw = Zeroizing::new(
            B64.decode(secret_b64.as_bytes())
                .map_err(|_| invalid(format!("key {}: secret is not base64", i + 1)))?,
        );
        let mut secret = Zeroizing::new([0u8; SECRET_LEN]);
        if raw.len() != SECRET_LEN {
            return Err(invalid(format!(
                "key {}: secret must be {SECRET_LEN} bytes",
                i + 1
            )));
        }
        secret.copy_from_slice(&raw);
        keys.push(
            TicketKey::new(id, secret, k.state)
                .ok_or_else(|| invalid(format!("key {}: unusable", i + 1)))?,
        );
    }
    let count = |s: KeyState| keys.iter().filter(|k| k.state == s).count();
    if count(KeyState::Active) != 1
        || count(KeyState::Standby) > 1
        || count(KeyState::DecryptOnly) > 1
    {
        return Err(invalid(
            "a ring needs exactly one active key, at most one standby and one decrypt-only".into(),
        ));
    }
    let mut ids: Vec<_> = keys.iter().map(|k| k.id).collect();
    ids.sort();
    ids.dedup();
    if ids.len() != keys.len() {
        return Err(invalid("two keys share an id".into()));
    }
    Ok(Ring {
        keys,
        rotated_at: file.rotated_at,
    })
}

/// The rustls ticketer over a ring file, reloaded when the file changes (checked at most
/// once per `check_every`, by file metadata).
pub struct TicketKeyRing {
    path: PathBuf,
    ring: RwLock<Arc<Ring>>,
    stamp: RwLock<FileStamp>,
    started: Instant,
    last_check_ms: AtomicU64,
    check_every: Duration,
    lifetime: u32,
    rng: SystemRandom,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode: m.ino(),
    })
}

impl TicketKeyRing {
    /// Loads the ring at `path`; tickets live `lifetime` (tell clients; keep it no longer
    /// than the rotation interval so every ticket is still decryptable).
    pub fn open(path: &Path, lifetime: Duration) -> Result<Arc<Self>, TicketError> {
        let stamp_now = stamp(path);
        let ring = read(path)?;
        Ok(Arc::new(TicketKeyRing {
            path: path.to_path_buf(),
            ring: RwLock::new(Arc::new(ring)),
            stamp: RwLock::new(stamp_now.unwrap_or(FileStamp {
                modified: None,
                len: 0,
                inode: 0,
            })),
            started: Instant::now(),
            last_check_ms: AtomicU64::new(0),
            check_every: Duration::from_secs(1),
            lifetime: u32::try_from(lifetime.as_secs()).unwrap_or(u32::MAX).max(1),
            rng: SystemRandom::new(),
        }))
    }

    /// Re-reads the file now if it changed. A bad file keeps the current keys (and says
    /// why in the error).
    pub fn reload_if_changed(&self) -> Result<bool, TicketError> {
        let Some(now) = stamp(&self.path) else {
            return Ok(false);
        };
        if self.stamp.read().is_ok_and(|s| *s == now) {
            return Ok(false);
        }
        let ring = read(&self.path)?;
        if let Ok(mut r) = self.ring.write() {
            *r = Arc::new(ring);
        }
        if let Ok(mut s) = self.stamp.write() {
            *s = now;
        }
        tracing::info!(path = %self.path.display(), "ticket keys reloaded");
        Ok(true)
    }

    /// Key ids and states currently in use.
    pub fn info(&self) -> RingInfo {
        info(&self.path, &self.current())
    }

    fn current(&self) -> Arc<Ring> {
        let elapsed = self.started.elapsed().as_millis() as u64;
        let last = self.last_check_ms.load(Ordering::Relaxed);
        if elapsed.saturating_sub(last) >= self.check_every.as_millis() as u64
            && self
                .last_check_ms
                .compare_exchange(last, elapsed, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            && let Err(e) = self.reload_if_changed()
        {
            tracing::warn!("keeping the current ticket keys: {e}");
        }
        self.ring
            .read()
            .map(|r| Arc::clone(&r))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }
}

impl fmt::Debug for TicketKeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ring = self.current();
        let ids: Vec<String> = ring
            .keys
            .iter()
            .map(|k| format!("{}:{:?}", k.id_hex(), k.state))
            .collect();
        f.debug_struct("TicketKeyRing")
            .field("path", &self.path)
            .field("keys", &ids)
            .finish()
    }
}

impl rustls::server::ProducesTickets for TicketKeyRing {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        self.lifetime
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        if plain.len() > MAX_PLAINTEXT {
            return None;
        }
        let ring = self.current();
        let key = ring.active()?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(KEY_ID_LEN + NONCE_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(&key.id);
        out.extend_from_slice(&nonce);
        let mut body = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.id),
                &mut body,
            )
            .ok()?;
        out.extend_from_slice(&body);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        if cipher.len() < KEY_ID_LEN + NONCE_LEN + TAG_LEN || cipher.len() > MAX_PLAINTEXT + 64 {
            return None;
        }
        let (id, rest) = cipher.split_at(KEY_ID_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let ring = self.current();
        let key = ring.keys.iter().find(|k| k.id == id)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = sealed.to_vec();
        let plain = key
            .aead
            .open_in_place(nonce, Aad::from(&key.id), &mut body)
            .ok()?;
        Some(plain.to_vec())
    }
}

fn now_rfc3339() -> String {
    crate::when::format_rfc3339(time::OffsetDateTime::now_utc())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::server::ProducesTickets;

    fn ring_file() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ticket.keys");
        init(&path, false).unwrap();
        (dir, path)
    }

    #[test]
    fn file_is_private_and_lifecycle_moves_keys() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, path) = ring_file();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let first = show(&path).unwrap();
        assert_eq!(
            first.keys.iter().map(|k| k.state).collect::<Vec<_>>(),
            [KeyState::Active, KeyState::Standby]
        );
        let second = rotate(&path).unwrap();
        assert_eq!(second.keys.len(), 3);
        assert_eq!(second.keys[0].id, first.keys[0].id);
        assert_eq!(second.keys[0].state, KeyState::DecryptOnly);
        assert_eq!(second.keys[1].id, first.keys[1].id);
        assert_eq!(second.keys[1].state, KeyState::Active);
        let third = rotate(&path).unwrap();
        assert_eq!(third.keys.len(), 3);
        assert!(
            !third.keys.iter().any(|k| k.id == first.keys[0].id),
            "destroyed"
        );
        assert!(init(&path, false).is_err(), "refuses to overwrite");
    }

    #[test]
    fn tickets_survive_one_rotation_and_not_two() {
        let (_d, path) = ring_file();
        let a = TicketKeyRing::open(&path, Duration::from_secs(3600)).unwrap();
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(a.decrypt(&t).unwrap(), b"session state");
        rotate(&path).unwrap();
        let b = TicketKeyRing::open(&path, Duration::from_secs(3600)).unwrap();
        assert_eq!(
            b.decrypt(&t).unwrap(),
            b"session state",
            "after one rotation"
        );
        rotate(&path).unwrap();
        let c = TicketKeyRing::open(&path, Duration::from_secs(3600)).unwrap();
        assert!(c.decrypt(&t).is_none(), "after two rotations");
        // A ticket from an instance that rotated first decrypts on one that did not yet.
        let (_d2, p2) = ring_file();
        let old = TicketKeyRing::open(&p2, Duration::from_secs(60)).unwrap();
        rotate(&p2).unwrap();
        let new = TicketKeyRing::open(&p2, Duration::from_secs(60)).unwrap();
        let t = new.encrypt(b"x").unwrap();
        assert_eq!(old.decrypt(&t).unwrap(), b"x", "standby key decrypts");
    }

    #[test]
    fn garbage_and_tampering_give_none() {
        let (_d, path) = ring_file();
        let r = TicketKeyRing::open(&path, Duration::from_secs(60)).unwrap();
        let t = r.encrypt(b"hello").unwrap();
        for i in 0..t.len() {
            let mut bad = t.clone();
            bad[i] ^= 0x01;
            assert!(r.decrypt(&bad).is_none(), "byte {i}");
        }
        assert!(r.decrypt(&[]).is_none());
        assert!(r.decrypt(&[0u8; 10]).is_none());
        assert!(r.decrypt(&t[..t.len() - 1]).is_none());
        assert!(r.decrypt(&vec![7u8; 100_000]).is_none());
    }

    #[test]
    fn reloads_when_the_file_changes() {
        let (_d, path) = ring_file();
        let r = TicketKeyRing::open(&path, Duration::from_secs(60)).unwrap();
        let before = r.info().keys[0].id.clone();
        rotate(&path).unwrap();
        assert!(r.reload_if_changed().unwrap());
        assert_eq!(r.info().keys[0].id, before);
        assert_eq!(r.info().keys[0].state, KeyState::DecryptOnly);
        assert!(!r.reload_if_changed().unwrap());
    }

    #[test]
    fn bad_files_name_the_problem_and_debug_hides_secrets() {
        let dir = tempfile::tempdir().unwrap();
        for (text, needle) in [
            (
                "not json",
                "it is not JSON (expected ident at line 1 column 2)",
            ),
            (
                "-----BEGIN PRIVATE KEY-----\n",
                "a key ring is the JSON file `tlsperf tickets init` writes",
            ),
            (
                r#"{"version":1,"rotated_at":"","keys":[{"id":"00","state":"spare","secret":"AA=="}]}"#,
                "unknown variant `spare`",
            ),
            (r#"{"version":2,"rotated_at":"","keys":[]}"#, "version 2"),
            (
                r#"{"version":1,"rotated_at":"","keys":[]}"#,
                "exactly one active",
            ),
            (
                r#"{"version":1,"rotated_at":"","keys":[{"id":"zz","state":"active","secret":"AA=="}]}"#,
                "id must be",
            ),
        ] {
            let p = dir.path().join("bad.keys");
            std::fs::write(&p, text).unwrap();
            let err = show(&p).err().unwrap();
            assert!(
                err.to_string().contains(needle) && err.to_string().contains("bad.keys"),
                "{err}"
            );
            assert_eq!(err.class(), ErrorClass::Input);
        }
        let (_d, path) = ring_file();
        let secrets: Vec<String> =
            serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&path).unwrap())
                .unwrap()["keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k["secret"].as_str().unwrap().to_string())
                .collect();
        let r = TicketKeyRing::open(&path, Duration::from_secs(60)).unwrap();
        let dbg = format!("{r:?} {:?}", r.info());
        for s in secrets {
            assert!(!dbg.contains(&s), "secret in Debug output");
        }
    }
}
