//! Atomic file output: every file tlsperf writes goes to a temporary file in the
//! destination's directory and is renamed into place, so a reader never sees a
//! half-written file. Private material (keys) is created with mode 0600 from the start.
//!
//! [`Staging`] writes a set of files together: all contents are written and synced first,
//! then renamed one after another, so a failure while writing leaves nothing behind; a
//! rename that fails part-way puts back the files already replaced, so a set is replaced
//! whole or not at all. A SIGINT, SIGTERM or SIGHUP that would kill the process while
//! temporary files exist (no other handler installed) removes them first, then kills it as
//! the signal would have.
//!
//! Where a destination already is something other than a regular file, writing follows
//! what it is rather than replacing it: a symbolic link stays a link and the file it points
//! to is replaced; a FIFO or a character device (`--out /dev/stdout`, `/dev/null`) is
//! written to, in one go, without a temporary file and without `--force`, and so is a path
//! through a process's descriptor table (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`)
//! even when the descriptor is a regular file (a shell's `> out` or `>> log`): appended
//! to, never renamed over; a block device or a socket is refused. [`Staging`] (whole
//! documents) and [`open_log`] (lines as they come) follow the same rule.
//!
//! Every file tlsperf reads goes through [`open_input`] or [`read_input`]: the path is
//! checked with `stat` before it is opened, and opened non-blocking, so a FIFO, a device
//! (`/dev/zero`), a socket or a directory is refused with what it is instead of blocking in
//! `open()` or being read until memory runs out; and what is read is capped at a size
//! limit per kind of file ([`InputKind`]).

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Classify, ErrorClass, io_input_class};

/// The kinds of file tlsperf reads, each with its size limit (stated in the flags' help and
/// the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    /// PEM certificates, certificate chains and private keys (`--cert`, `--key`, `--sni`,
    /// `verify --chain`, `trust trim --keep-for`): 16 MiB.
    Pem,
    /// A CA bundle, or one file of a certificate directory (`--cacert`, `--roots`,
    /// `--bundle`, `--dir`, `SSL_CERT_FILE`): 128 MiB.
    Bundle,
    /// A DER OCSP response (`serve --ocsp`): 1 MiB.
    Ocsp,
    /// A session-ticket key ring (`--ticket-keys`, `tickets show|rotate`): 64 KiB.
    KeyRing,
    /// Results and sample files (`merge`, `compare`, `lab` results): 256 MiB; pipes
    /// (`<(…)`) are read too.
    Results,
}

impl InputKind {
    /// The largest file of this kind that is read, in bytes.
    pub fn limit(self) -> u64 {
        match self {
            InputKind::Pem => 16 << 20,
            InputKind::Bundle => 128 << 20,
            InputKind::Ocsp => 1 << 20,
            InputKind::KeyRing => 64 << 10,
            InputKind::Results => 256 << 20,
        }
    }

    /// What the file is, for messages.
    pub fn what(self) -> &'static str {
        match self {
            InputKind::Pem => "a certificate or key file",
            InputKind::Bundle => "a certificate bundle",
            InputKind::Ocsp => "an OCSP response",
            InputKind::KeyRing => "a ticket key ring",
            InputKind::Results => "a results or sample file",
        }
    }

    /// The limit in words (`16 MiB`, `64 KiB`).
    pub fn limit_text(self) -> String {
        let l = self.limit();
        if l >= 1 << 20 {
            format!("{} MiB", l >> 20)
        } else {
            format!("{} KiB", l >> 10)
        }
    }
}

/// What a non-regular file is, in words (`None` for a regular file).
pub fn not_regular(meta: &fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    if t.is_dir() {
        return Some("a directory");
    }
    Some("not a file")
}

fn not_regular_error(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("not a regular file: it is {what}"),
    )
}

/// Opens a file the user named for reading, refusing anything but a regular file: the
/// path is checked with `stat` (following symbolic links) before it is opened, and opened
/// non-blocking, so a FIFO can neither block the open nor be swapped in between. The
/// error for a non-regular file says what it is ([`std::io::ErrorKind::InvalidInput`]).
pub fn open_input(path: &Path) -> std::io::Result<(fs::File, fs::Metadata)> {
    if let Some(what) = not_regular(&fs::metadata(path)?) {
        return Err(not_regular_error(what));
    }
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // O_NONBLOCK has no effect on a regular file; it only keeps a FIFO put in place
        // after the check from blocking the open.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if let Some(what) = not_regular(&meta) {
        return Err(not_regular_error(what));
    }
    Ok((file, meta))
}

fn too_large(kind: InputKind, size: Option<u64>) -> std::io::Error {
    let size = match size {
        Some(n) => format!("{n} bytes is"),
        None => "it is".into(),
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "{size} larger than the {} limit for {}",
            kind.limit_text(),
            kind.what()
        ),
    )
}

/// Opens a pipe or FIFO for reading (`compare <(…) <(…)`): non-blocking so that the open
/// never waits for a writer, then blocking again so that reads wait for the data.
#[cfg(unix)]
fn open_pipe(path: &Path) -> std::io::Result<(fs::File, fs::Metadata)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok((file, meta))
}

/// Reads a whole file the user named, as [`open_input`] opens it, refusing one larger
/// than the limit of its kind (also when it grows while being read). Results and sample
/// files may also be pipes (`<(…)`, a FIFO with its writer): read once, to the end.
pub fn read_input(path: &Path, kind: InputKind) -> std::io::Result<Vec<u8>> {
    #[cfg(unix)]
    let (is_pipe, (file, meta)) = {
        use std::os::unix::fs::FileTypeExt;
        let is_pipe = kind == InputKind::Results && fs::metadata(path)?.file_type().is_fifo();
        if is_pipe {
            (true, open_pipe(path)?)
        } else {
            (false, open_input(path)?)
        }
    };
    #[cfg(not(unix))]
    let (is_pipe, (file, meta)) = (false, open_input(path)?);
    let limit = kind.limit();
    if meta.len() > limit {
        return Err(too_large(kind, Some(meta.len())));
    }
    let bytes = read_bounded(file, meta.len(), limit).ok_or_else(|| too_large(kind, None))?;
    let bytes = bytes?;
    if is_pipe && bytes.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a FIFO (named pipe) that nothing was written to (no writer)",
        ));
    }
    Ok(bytes)
}

/// The bytes read at a time while reading a file or pipe.
const READ_CHUNK: usize = 64 << 10;

/// Up to this much, the buffer of a read of unknown size grows by doubling; past it, it
/// jumps to the limit at once.
const READ_SMALL: usize = 1 << 20;

/// Reads `file` to its end in chunks of [`READ_CHUNK`], stopping as soon as more than
/// `limit` bytes came (`None`). The buffer starts at `size_hint` (the size `stat` gave,
/// 0 for a pipe). Past [`READ_SMALL`] it is reserved at once for the limit plus a chunk
/// instead of doubling: the memory not written is only reserved, not resident, and no
/// copy of a large buffer is ever made, so reading a pipe holds at most about the limit
/// in memory. (Doubling took the 256 MiB results limit to 512 MiB, with the buffers
/// before it still resident.) A large reservation holding a short text is given back.
fn read_bounded(
    mut file: impl Read,
    size_hint: u64,
    limit: u64,
) -> Option<std::io::Result<Vec<u8>>> {
    let cap_max = usize::try_from(limit)
        .unwrap_or(usize::MAX)
        .saturating_add(READ_CHUNK);
    let start = usize::try_from(size_hint)
        .unwrap_or(usize::MAX)
        .min(cap_max);
    let mut bytes = Vec::with_capacity(start);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Some(Err(e)),
        };
        if (bytes.len() + n) as u64 > limit {
            return None;
        }
        if bytes.capacity() - bytes.len() < n {
            let need = bytes.len() + n;
            let want = if need <= READ_SMALL {
                bytes.capacity().saturating_mul(2).clamp(need, READ_SMALL)
            } else {
                cap_max
            };
            bytes.reserve_exact(want - bytes.len());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    // Copying at most half the limit keeps the peak (both copies) within it.
    if bytes.len() <= cap_max / 2 && bytes.capacity() > bytes.len().max(READ_SMALL) {
        bytes.shrink_to_fit();
    }
    Some(Ok(bytes))
}

/// [`read_input`] for text: invalid UTF-8 is an [`std::io::ErrorKind::InvalidData`] error.
pub fn read_input_to_string(path: &Path, kind: InputKind) -> std::io::Result<String> {
    String::from_utf8(read_input(path, kind)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Who may read a written file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMode {
    /// World-readable (0644): certificates, reports, bundles.
    Public,
    /// Owner only (0600): private keys, ticket keys. Never widened, not even briefly.
    Private,
}

impl FileMode {
    /// The Unix permission bits for this mode.
    pub fn bits(self) -> u32 {
        match self {
            FileMode::Public => 0o644,
            FileMode::Private => 0o600,
        }
    }
}

/// A failure while writing output files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// Destination files exist and overwriting was not allowed.
    #[error("refusing to overwrite existing {}: {} (use --force to overwrite)",
        if .0.len() == 1 { "file" } else { "files" },
        .0.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    Exists(Vec<PathBuf>),
    /// The output directory could not be created.
    #[error("cannot create directory {}", .path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A destination path is unusable (no file name, its parent is not a directory, or it
    /// is a directory, a block device or a socket).
    #[error("cannot write {}: {reason}", .path.display())]
    BadPath {
        /// The destination.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A destination is also one of the command's input files.
    #[error("refusing to write {}: it is the input file {}; choose another output file",
        .path.display(), .input.display())]
    IsInput {
        /// The destination.
        path: PathBuf,
        /// The input it names.
        input: PathBuf,
    },
    /// Writing the temporary file failed.
    #[error("cannot write {}", .path.display())]
    Write {
        /// The destination the temporary file was for.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Renaming the temporary file into place failed.
    #[error("cannot move the finished file into place at {}", .path.display())]
    Rename {
        /// The destination.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Classify for FileError {
    fn class(&self) -> ErrorClass {
        match self {
            FileError::Exists(_) | FileError::BadPath { .. } | FileError::IsInput { .. } => {
                ErrorClass::Input
            }
            FileError::CreateDir { source, .. }
            | FileError::Write { source, .. }
            | FileError::Rename { source, .. } => io_input_class(source),
        }
    }
}

/// Fails with [`FileError::Exists`] naming every path that already exists (a FIFO or a
/// character device is written to, not overwritten, so it does not count).
pub fn check_absent<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Result<(), FileError> {
    let existing: Vec<PathBuf> = paths
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok() && !is_stream(p))
        .map(Path::to_path_buf)
        .collect();
    if existing.is_empty() {
        Ok(())
    } else {
        Err(FileError::Exists(existing))
    }
}

/// Checks, before any expensive work, that `dest` can be written: its parent directory
/// exists, it is not a directory, a block device or a socket, and (unless `overwrite`) it
/// does not exist yet.
pub fn check_destination(dest: &Path, overwrite: bool) -> Result<(), FileError> {
    target(dest)?;
    if overwrite {
        Ok(())
    } else {
        check_absent([dest])
    }
}

/// Checks, before any expensive work, that `dest` can be written now: as
/// [`check_destination`] with overwriting allowed, and its directory takes a new file (a
/// probe file is created there and removed at once), so a read-only directory is found
/// before the work rather than after it.
pub fn check_writable(dest: &Path) -> Result<(), FileError> {
    let Target::File(path) = target(dest)? else {
        return Ok(());
    };
    let dir = parent_dir(&path)?;
    tempfile::Builder::new()
        .prefix(".tlsperf-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|source| FileError::Write {
            path: dest.to_path_buf(),
            source,
        })
}

/// Fails with [`FileError::IsInput`] when `dest` is one of `inputs` (the same file, by
/// device and inode, whatever the path), so that `--out` cannot replace what the command
/// reads, such as the capture being analysed.
pub fn check_not_input<'a>(
    dest: &Path,
    inputs: impl IntoIterator<Item = &'a Path>,
) -> Result<(), FileError> {
    if !fs::metadata(dest).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    match inputs.into_iter().find(|input| same_file(dest, input)) {
        Some(input) => Err(FileError::IsInput {
            path: dest.to_path_buf(),
            input: input.to_path_buf(),
        }),
        None => Ok(()),
    }
}

/// Whether `a` and `b` both exist and are the same file (device and inode, whatever the
/// paths and links).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (fs::metadata(a), fs::metadata(b)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        fs::canonicalize(a)
            .ok()
            .is_some_and(|a| fs::canonicalize(b).ok() == Some(a))
    }
}

/// Creates `dir` and its parents if they do not exist.
pub fn create_dir_all(dir: &Path) -> Result<(), FileError> {
    fs::create_dir_all(dir).map_err(|source| FileError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })
}

enum Staged {
    /// A file, written to a temporary file beside where it goes and renamed there at
    /// commit.
    File {
        /// The temporary file, and its registration for removal if a signal kills the
        /// process: registered before the file is created, dropped after it is removed or
        /// renamed.
        temp: NamedTempFile<(fs::File, on_signal::Armed)>,
        /// The path as the user gave it, for messages.
        dest: PathBuf,
        /// Where the file goes: `dest` with its symbolic links followed.
        path: PathBuf,
    },
    /// A FIFO or a character device, written at commit in one go.
    Stream {
        /// The path as the user gave it.
        dest: PathBuf,
        /// What is written.
        contents: Vec<u8>,
    },
}

/// A set of files written together: contents go to temporary files first, and only
/// [`Staging::commit`] moves them into place. Dropping a `Staging` without committing
/// removes the temporary files.
pub struct Staging {
    files: Vec<Staged>,
    overwrite: bool,
}

impl Staging {
    /// Starts a new set. With `overwrite` false, [`Staging::commit`] never replaces an
    /// existing file, even one created after the set was started.
    pub fn new(overwrite: bool) -> Self {
        Staging {
            files: Vec::new(),
            overwrite,
        }
    }

    /// Writes `contents` to a temporary file beside `dest` (or beside the file a link at
    /// `dest` points to) with the given mode, synced to disk; for a FIFO or a character
    /// device, keeps `contents` to write at commit.
    pub fn add(&mut self, dest: &Path, contents: &[u8], mode: FileMode) -> Result<(), FileError> {
        self.add_with(dest, mode, |w| w.write_all(contents))
    }

    /// [`Staging::add`] with the contents written by `write` as they are produced (through
    /// a buffer, so a large document is never held whole in memory on its way to a file).
    pub fn add_with(
        &mut self,
        dest: &Path,
        mode: FileMode,
        write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), FileError> {
        let path = match target(dest)? {
            Target::File(path) => path,
            Target::Stream => {
                let mut contents = Vec::new();
                write(&mut contents).map_err(|source| FileError::Write {
                    path: dest.to_path_buf(),
                    source,
                })?;
                self.files.push(Staged::Stream {
                    dest: dest.to_path_buf(),
                    contents,
                });
                return Ok(());
            }
        };
        let dir = parent_dir(&path)?;
        let write_err = |source| FileError::Write {
            path: dest.to_path_buf(),
            source,
        };
        // The name is registered for removal on a fatal signal before the file exists, so
        // no signal finds a temporary file it does not know; created with mode 0600, so
        // private contents are never exposed.
        let mut temp = tempfile::Builder::new()
            .prefix(".tlsperf-")
            .suffix(".tmp")
            .make_in(dir, |path| {
                let armed = on_signal::Armed::new(path);
                let mut options = fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    options.mode(0o600);
                }
                Ok((options.open(path)?, armed))
            })
            .map_err(write_err)?;
        let file = &mut temp.as_file_mut().0;
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut *file);
        write(&mut buffered).map_err(write_err)?;
        buffered.flush().map_err(write_err)?;
        drop(buffered);
        if mode != FileMode::Private {
            set_mode(file, mode).map_err(write_err)?;
        }
        file.sync_all().map_err(write_err)?;
        self.files.push(Staged::File {
            temp,
            dest: dest.to_path_buf(),
            path,
        });
        Ok(())
    }

    /// Writes the FIFOs and devices, then moves every staged file into place in the order
    /// they were added. When a rename fails, the files this commit already replaced get
    /// their old contents back and the ones it created are removed (a copy of each file
    /// about to be replaced is kept until the set is in place), so the set is replaced
    /// whole or not at all. Writes to FIFOs and devices cannot be taken back: they go
    /// first, so a failing one leaves every file untouched.
    pub fn commit(self) -> Result<(), FileError> {
        let mut files = Vec::with_capacity(self.files.len());
        for staged in self.files {
            match staged {
                Staged::Stream { dest, contents } => write_stream(&dest, &contents)?,
                Staged::File { temp, dest, path } => files.push((temp, dest, path)),
            }
        }
        let several = files.len() > 1;
        let mut done: Vec<(PathBuf, Option<Backup>)> = Vec::with_capacity(files.len());
        for (temp, dest, path) in files {
            let backup = match several && self.overwrite {
                true => Backup::of(&path).map_err(|source| FileError::Write {
                    path: dest.clone(),
                    source,
                })?,
                false => None,
            };
            let result = if self.overwrite {
                temp.persist(&path)
            } else {
                temp.persist_noclobber(&path)
            };
            let err = match result {
                Ok(_) => {
                    done.push((path, backup));
                    continue;
                }
                Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                    FileError::Exists(vec![dest])
                }
                Err(e) => FileError::Rename {
                    path: dest,
                    source: e.error,
                },
            };
            drop(backup);
            for (path, backup) in done.into_iter().rev() {
                match backup {
                    Some(b) => b.restore(&path),
                    None => {
                        let _ = fs::remove_file(&path);
                    }
                }
            }
            return Err(err);
        }
        Ok(())
    }
}

/// A copy of a file about to be replaced, beside it (a hard link, or a copy where links
/// cannot be made); removed when dropped, or moved back by [`Backup::restore`].
struct Backup {
    path: PathBuf,
    _armed: on_signal::Armed,
}

impl Backup {
    /// Keeps the current `path` (`None` when there is no file there).
    fn of(path: &Path) -> std::io::Result<Option<Backup>> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_file() => {}
            _ => return Ok(None),
        }
        let dir = parent_dir(path).map_err(std::io::Error::other)?;
        let mut made = None;
        // A fresh name each try: another process may take the name first.
        for _ in 0..8 {
            let name = tempfile::Builder::new()
                .prefix(".tlsperf-")
                .suffix(".old")
                .make_in(dir, |p| Ok(p.to_path_buf()))?;
            let candidate = name.path().to_path_buf();
            // Only a random name: no file was made for it, so dropping `name` removes
            // nothing. The link or copy takes the name, and fails if it is taken.
            drop(name);
            let armed = on_signal::Armed::new(&candidate);
            let kept = fs::hard_link(path, &candidate).or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Err(e),
                _ => copy_new(path, &candidate),
            });
            match kept {
                Ok(()) => {
                    made = Some(Backup {
                        path: candidate,
                        _armed: armed,
                    });
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        made.map(Some).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "no free name for a copy of the file being replaced",
            )
        })
    }

    /// Puts the kept file back at `path`.
    fn restore(self, path: &Path) {
        if fs::rename(&self.path, path).is_err() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Drop for Backup {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Copies `from` to the new file `to` (failing if `to` exists), with `from`'s mode.
fn copy_new(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut src = fs::File::open(from)?;
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut dst = options.open(to)?;
    std::io::copy(&mut src, &mut dst)?;
    dst.set_permissions(src.metadata()?.permissions())?;
    Ok(())
}

/// Writes `contents` to a FIFO, a character device or a descriptor's file
/// (`/dev/stdout`), appending: what the descriptor's owner wrote there stays.
fn write_stream(dest: &Path, contents: &[u8]) -> Result<(), FileError> {
    let write_err = |source| FileError::Write {
        path: dest.to_path_buf(),
        source,
    };
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(dest)
        .map_err(write_err)?;
    f.write_all(contents).map_err(write_err)?;
    f.flush().map_err(write_err)
}

/// Opens `dest` for a log written as it goes (JSON Lines that a reader tails): a FIFO or
/// character device is written to, a symbolic link followed, a regular file created with
/// `mode` or (checked before with [`check_destination`]) truncated; `append`: a reopen
/// (after SIGHUP, when logrotate has moved the file away) adds to what is there.
/// Nothing is ever replaced by a rename: what a reader has open stays the file written.
pub fn open_log(dest: &Path, mode: FileMode, append: bool) -> Result<fs::File, FileError> {
    let write_err = |source| FileError::Write {
        path: dest.to_path_buf(),
        source,
    };
    let stream = is_stream(dest);
    let mut options = fs::OpenOptions::new();
    options.write(true);
    if stream {
        // A descriptor's file (`/dev/stdout` redirected with `>>`) keeps what is there.
        options.append(true);
    } else {
        options.create(true);
        if append {
            options.append(true);
        } else {
            options.truncate(true);
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode.bits());
    }
    let file = options.open(dest).map_err(write_err)?;
    if !stream && !append {
        // A file that existed (--force) keeps its old mode otherwise.
        set_mode(&file, mode).map_err(write_err)?;
    }
    Ok(file)
}

/// Writes one file atomically (temporary file + rename), its contents produced by
/// `write` as they are written ([`Staging::add_with`]).
pub fn write_atomic_with(
    dest: &Path,
    mode: FileMode,
    overwrite: bool,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), FileError> {
    let mut staging = Staging::new(overwrite);
    staging.add_with(dest, mode, write)?;
    staging.commit()
}

/// Writes one file atomically (temporary file + rename).
pub fn write_atomic(
    dest: &Path,
    contents: &[u8],
    mode: FileMode,
    overwrite: bool,
) -> Result<(), FileError> {
    let mut staging = Staging::new(overwrite);
    staging.add(dest, contents, mode)?;
    staging.commit()
}

/// Removing temporary files when a signal would kill the process.
///
/// While at least one temporary file exists, SIGINT, SIGTERM and SIGHUP get a handler —
/// only when their disposition is the default (a program that handles them itself, such as
/// `serve` or `load` with tokio's handlers, shuts down normally and drops its temporary
/// files). The handler unlinks every registered path (`unlink` is async-signal-safe),
/// restores the default disposition and raises the signal again, so the process still
/// dies of it. Paths live in fixed slots allocated once and reused, never freed, so the
/// handler never reads freed memory.
#[cfg(unix)]
mod on_signal {
    use std::ffi::c_char;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

    const SLOTS: usize = 64;
    const PATH_MAX: usize = 4096;
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    static BUFFERS: [AtomicPtr<c_char>; SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
    static ARMED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
    /// Live registrations and which signals carry our handler; taken by normal code only.
    static STATE: Mutex<(usize, [bool; 3])> = Mutex::new((0, [false; 3]));

    extern "C" fn handler(sig: libc::c_int) {
        for (armed, buf) in ARMED.iter().zip(BUFFERS.iter()) {
            if armed.load(Ordering::SeqCst) {
                let p = buf.load(Ordering::SeqCst);
                if !p.is_null() {
                    // SAFETY: a NUL-terminated path in a buffer that is never freed.
                    unsafe { libc::unlink(p) };
                }
            }
        }
        // SAFETY: async-signal-safe calls; the signal is blocked while this handler runs,
        // so the raised one is delivered (with the default action) when it returns.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }

    fn install(state: &mut (usize, [bool; 3])) {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: plain sigaction calls with initialized structures.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                    || old.sa_sigaction != libc::SIG_DFL
                {
                    continue;
                }
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler as extern "C" fn(libc::c_int) as usize;
                new.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut new.sa_mask);
                state.1[i] = libc::sigaction(sig, &new, std::ptr::null_mut()) == 0;
            }
        }
    }

    fn uninstall(state: &mut (usize, [bool; 3])) {
        for (i, &sig) in SIGNALS.iter().enumerate() {
            if !std::mem::take(&mut state.1[i]) {
                continue;
            }
            // SAFETY: as in `install`; only our own handler is replaced.
            unsafe {
                let mut cur: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                    && cur.sa_sigaction == handler as extern "C" fn(libc::c_int) as usize
                {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
        }
    }

    /// A registered temporary file (or nothing, when the path cannot be registered).
    pub(super) struct Armed(Option<usize>);

    impl Armed {
        /// Registers `path` for removal on a fatal signal.
        pub(super) fn new(path: &Path) -> Armed {
            let bytes = path.as_os_str().as_bytes();
            if bytes.len() >= PATH_MAX || bytes.contains(&0) {
                return Armed(None);
            }
            let Ok(mut state) = STATE.lock() else {
                return Armed(None);
            };
            let Some(slot) = ARMED.iter().position(|a| !a.load(Ordering::SeqCst)) else {
                return Armed(None);
            };
            let mut buf = BUFFERS[slot].load(Ordering::SeqCst);
            if buf.is_null() {
                buf = Box::leak(vec![0 as c_char; PATH_MAX].into_boxed_slice()).as_mut_ptr();
                BUFFERS[slot].store(buf, Ordering::SeqCst);
            }
            // SAFETY: the buffer holds PATH_MAX bytes; the path and its NUL fit.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
                *buf.add(bytes.len()) = 0;
            }
            ARMED[slot].store(true, Ordering::SeqCst);
            state.0 += 1;
            if state.0 == 1 {
                install(&mut state);
            }
            Armed(Some(slot))
        }
    }

    impl Drop for Armed {
        fn drop(&mut self) {
            let Some(slot) = self.0 else { return };
            let Ok(mut state) = STATE.lock() else { return };
            ARMED[slot].store(false, Ordering::SeqCst);
            state.0 -= 1;
            if state.0 == 0 {
                uninstall(&mut state);
            }
        }
    }
}

#[cfg(not(unix))]
mod on_signal {
    pub(super) struct Armed;
    impl Armed {
        pub(super) fn new(_: &std::path::Path) -> Armed {
            Armed
        }
    }
}

fn parent_dir(dest: &Path) -> Result<&Path, FileError> {
    let bad = |reason: &str| FileError::BadPath {
        path: dest.to_path_buf(),
        reason: reason.into(),
    };
    if dest.file_name().is_none() {
        return Err(bad("the path names no file"));
    }
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(bad("its parent directory does not exist"));
    }
    if dest.is_dir() {
        return Err(bad("it is a directory"));
    }
    Ok(dir)
}

/// Where writing a destination goes.
enum Target {
    /// A regular file (existing or not) at this path: the destination with its symbolic
    /// links followed.
    File(PathBuf),
    /// An existing FIFO or character device, or a descriptor's file (`/dev/stdout`),
    /// written to as it is.
    Stream,
}

/// What writing `dest` means (see the module docs), or why it cannot be written.
fn target(dest: &Path) -> Result<Target, FileError> {
    let meta = match fs::metadata(dest) {
        Ok(m) => m,
        // Nothing there (or a broken link): a new file where the links lead.
        Err(_) => {
            let path = follow_links(dest);
            parent_dir(&path)?;
            return Ok(Target::File(path));
        }
    };
    if is_stream(dest) {
        return Ok(Target::Stream);
    }
    if meta.is_file() {
        let linked = fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink());
        let path = match linked {
            true => fs::canonicalize(dest).map_err(|source| FileError::Write {
                path: dest.to_path_buf(),
                source,
            })?,
            false => dest.to_path_buf(),
        };
        parent_dir(&path)?;
        return Ok(Target::File(path));
    }
    let what = not_regular(&meta).unwrap_or("not a file");
    Err(FileError::BadPath {
        path: dest.to_path_buf(),
        reason: match meta.is_dir() {
            true => "it is a directory".into(),
            false => format!(
                "it is {what}; tlsperf writes regular files, FIFOs and character devices \
                 (such as /dev/stdout)"
            ),
        },
    })
}

/// Whether `path` is (or links to) a FIFO or a character device, or names one of a
/// process's open descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`): what such
/// a path leads to was opened by someone else (a shell's `> file` or `>> log`), so it is
/// written to where it is, never replaced.
fn is_stream(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        fs::metadata(path).is_ok_and(|m| {
            m.file_type().is_fifo() || m.file_type().is_char_device() || through_descriptor(path)
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Whether `path`, or a symbolic link it leads through, is an entry of a process's
/// descriptor table (`/proc/PID/fd/N`, `/proc/PID/task/TID/fd/N`, which `/dev/stdout`,
/// `/dev/stderr` and `/dev/fd/N` link to). Such an entry links to whatever the
/// descriptor is, a file another program opened; following it and renaming over its
/// target would replace that file (a shell's `>> log` lost).
fn through_descriptor(path: &Path) -> bool {
    let is_fd_dir = |dir: &Path| {
        let Ok(dir) = fs::canonicalize(dir) else {
            return false;
        };
        let parts: Vec<_> = dir.components().map(|c| c.as_os_str().to_owned()).collect();
        let names: Vec<&str> = parts.iter().filter_map(|p| p.to_str()).collect();
        matches!(
            names.as_slice(),
            ["/", "proc", _, "fd"] | ["/", "proc", _, "task", _, "fd"]
        )
    };
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        if p.parent().is_some_and(is_fd_dir) {
            return true;
        }
        let is_link = fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        let Some(next) = is_link.then(|| fs::read_link(&p).ok()).flatten() else {
            return false;
        };
        p = match p.parent() {
            Some(dir) => dir.join(next),
            None => next,
        };
    }
    false
}

/// `path` with its symbolic links followed as far as they lead (at most 40, as the kernel
/// does), for a link whose target does not exist yet.
fn follow_links(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        let is_link = fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
        let Some(next) = is_link.then(|| fs::read_link(&p).ok()).flatten() else {
            break;
        };
        p = match p.parent() {
            Some(dir) => dir.join(next),
            None => next,
        };
    }
    p
}

#[cfg(unix)]
fn set_mode(file: &fs::File, mode: FileMode) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(fs::Permissions::from_mode(mode.bits()))
}

#[cfg(not(unix))]
fn set_mode(_file: &fs::File, _mode: FileMode) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn mode_of(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn writes_with_modes_and_refuses_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k.key");
        let cert = dir.path().join("c.pem");
        write_atomic(&key, b"secret", FileMode::Private, false).unwrap();
        write_atomic(&cert, b"public", FileMode::Public, false).unwrap();
        #[cfg(unix)]
        {
            assert_eq!(mode_of(&key), 0o600);
            assert_eq!(mode_of(&cert), 0o644);
        }
        let err = write_atomic(&cert, b"again", FileMode::Public, false).unwrap_err();
        assert!(matches!(err, FileError::Exists(_)), "{err}");
        assert_eq!(err.class(), ErrorClass::Input);
        assert_eq!(fs::read(&cert).unwrap(), b"public");
        write_atomic(&cert, b"again", FileMode::Public, true).unwrap();
        assert_eq!(fs::read(&cert).unwrap(), b"again");
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn dropped_staging_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Staging::new(false);
        s.add(&dir.path().join("a"), b"a", FileMode::Public)
            .unwrap();
        drop(s);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn check_absent_lists_all_existing() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, b"").unwrap();
        fs::write(&b, b"").unwrap();
        let c = dir.path().join("c");
        match check_absent([a.as_path(), b.as_path(), c.as_path()]) {
            Err(FileError::Exists(v)) => assert_eq!(v, vec![a, b]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn check_writable_probes_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.svg");
        check_writable(&dest).unwrap();
        fs::write(&dest, b"old").unwrap();
        // An existing file may be replaced.
        check_writable(&dest).unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = check_writable(dir.path()).unwrap_err();
        assert!(matches!(err, FileError::BadPath { .. }), "{err}");
        let err = check_writable(&dir.path().join("missing").join("f")).unwrap_err();
        assert_eq!(err.class(), ErrorClass::Input);
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn inputs_refuse_fifos_devices_and_oversize_files() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Would block forever in open() if it were opened.
        let err = read_input(&fifo, InputKind::Pem).unwrap_err();
        assert_eq!(crate::error::io_input_class(&err), ErrorClass::Input);
        assert!(err.to_string().contains("FIFO"), "{err}");
        let err = read_input(Path::new("/dev/zero"), InputKind::Ocsp).unwrap_err();
        assert!(err.to_string().contains("character device"), "{err}");
        let err = read_input(dir.path(), InputKind::Pem).unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
        let big = dir.path().join("big");
        fs::write(&big, vec![b'x'; (InputKind::KeyRing.limit() + 1) as usize]).unwrap();
        let err = read_input(&big, InputKind::KeyRing).unwrap_err();
        assert_eq!(crate::error::io_input_class(&err), ErrorClass::Input);
        assert!(err.to_string().contains("64 KiB limit"), "{err}");
        assert_eq!(read_input(&big, InputKind::Pem).unwrap().len(), 65537);
    }

    /// An endless stream is refused as soon as it passes the limit, and the buffer never
    /// grew past the limit plus one chunk on the way (it used to double to the next power
    /// of two above it: 512 MiB for the 256 MiB results limit).
    #[test]
    fn bounded_reads_stop_at_the_limit_without_doubling_past_it() {
        /// Counts what was read: an endless source of `x`.
        struct Endless(u64);
        impl Read for Endless {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                buf.fill(b'x');
                self.0 += buf.len() as u64;
                Ok(buf.len())
            }
        }
        let limit = 3 * (READ_CHUNK as u64) + 100;
        let mut src = Endless(0);
        assert!(read_bounded(&mut src, 0, limit).is_none());
        // Stopped within one chunk of the limit, not at the end of a doubled buffer.
        assert!(src.0 <= limit + READ_CHUNK as u64, "read {} bytes", src.0);
        // Exactly at the limit: accepted, and the buffer is at most limit + one chunk.
        let data = vec![b'y'; limit as usize];
        let got = read_bounded(&data[..], 0, limit).unwrap().unwrap();
        assert_eq!(got.len(), limit as usize);
        assert!(
            got.capacity() <= limit as usize + READ_CHUNK,
            "{}",
            got.capacity()
        );
        let got = read_bounded(&data[..], 0, limit - 1);
        assert!(got.is_none());
    }

    /// A pipe (here a FIFO with its writer) longer than the limit is refused in words.
    #[cfg(unix)]
    #[test]
    fn an_oversize_pipe_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let path = fifo.clone();
        let writer = std::thread::spawn(move || {
            // Each open blocks until a reader opens; a reader that looked before this
            // writer was there hangs up at once (EPIPE), so open again until more than
            // the limit went through, or the reader hung up after reading past it.
            let block = vec![b' '; 1 << 20];
            loop {
                let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
                let mut sent = 0u64;
                while sent <= InputKind::Results.limit() {
                    if f.write_all(&block).is_err() {
                        break;
                    }
                    sent += block.len() as u64;
                }
                if sent > InputKind::Results.limit() / 2 {
                    break;
                }
            }
        });
        // The reader may open before the writer: retry until the writer is there.
        let err = loop {
            match read_input(&fifo, InputKind::Results) {
                Err(e) if e.to_string().contains("nothing was written") => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                other => break other.unwrap_err(),
            }
        };
        assert_eq!(crate::error::io_input_class(&err), ErrorClass::Input);
        assert!(err.to_string().contains("256 MiB limit"), "{err}");
        writer.join().unwrap();
    }

    #[test]
    fn a_set_that_fails_part_way_is_put_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        fs::write(&a, b"old a").unwrap();
        fs::write(&b, b"old b").unwrap();
        let mut s = Staging::new(true);
        for p in [&a, &b, &c] {
            s.add(p, b"new", FileMode::Public).unwrap();
        }
        // The last rename fails: a non-empty directory took the name meanwhile.
        fs::create_dir(&c).unwrap();
        fs::write(c.join("inside"), b"").unwrap();
        let err = s.commit().unwrap_err();
        assert!(matches!(err, FileError::Rename { .. }), "{err}");
        assert_eq!(fs::read(&a).unwrap(), b"old a");
        assert_eq!(fs::read(&b).unwrap(), b"old b");
        // Nothing else is left: no temporary file, no kept copy.
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a", "b", "c"]);
        // A new file of a set put back is removed.
        fs::remove_file(&b).unwrap();
        let d = dir.path().join("d");
        let mut s = Staging::new(true);
        for p in [&a, &b, &d] {
            s.add(p, b"new", FileMode::Public).unwrap();
        }
        fs::create_dir(&d).unwrap();
        fs::write(d.join("inside"), b"").unwrap();
        assert!(s.commit().is_err());
        assert!(!b.exists());
        assert_eq!(fs::read(&a).unwrap(), b"old a");
    }

    #[cfg(unix)]
    #[test]
    fn links_stay_links_and_devices_and_fifos_are_written_to() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.pem");
        let link = dir.path().join("link.pem");
        fs::write(&real, b"old").unwrap();
        std::os::unix::fs::symlink("real.pem", &link).unwrap();
        write_atomic(&link, b"new", FileMode::Public, true).unwrap();
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        // A broken link: the file it names is created.
        let dangling = dir.path().join("dangling.pem");
        std::os::unix::fs::symlink("later.pem", &dangling).unwrap();
        write_atomic(&dangling, b"x", FileMode::Public, true).unwrap();
        assert_eq!(fs::read(dir.path().join("later.pem")).unwrap(), b"x");
        // A character device is written to, without --force, and stays one.
        let null = Path::new("/dev/null");
        check_destination(null, false).unwrap();
        write_atomic(null, b"discarded", FileMode::Public, false).unwrap();
        assert!(null.metadata().unwrap().file_type().is_char_device());
        let err = write_atomic(Path::new("/dev/full"), b"x", FileMode::Public, false).unwrap_err();
        assert!(matches!(err, FileError::Write { .. }), "{err}");
        // A FIFO gets the contents, in one go.
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"through", FileMode::Public, false).unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(fifo.metadata().unwrap().file_type().is_fifo());
        // A socket is refused, saying what it is.
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let err = check_destination(&sock, true).unwrap_err();
        assert!(err.to_string().contains("it is a socket"), "{err}");
        assert_eq!(err.class(), ErrorClass::Input);
    }

    #[test]
    fn an_output_that_is_an_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("cap.pcap");
        fs::write(&input, b"capture").unwrap();
        let same = dir.path().join(".").join("cap.pcap");
        let err = check_not_input(&same, [input.as_path()]).unwrap_err();
        assert!(matches!(err, FileError::IsInput { .. }), "{err}");
        assert_eq!(err.class(), ErrorClass::Input);
        check_not_input(&dir.path().join("out.json"), [input.as_path()]).unwrap();
        assert!(same_file(&input, &same));
        assert!(!same_file(&input, &dir.path().join("missing")));
    }

    #[test]
    fn missing_parent_is_input_error() {
        let err = write_atomic(
            Path::new("/nonexistent-dir-xyz/file"),
            b"",
            FileMode::Public,
            false,
        )
        .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Input);
        assert!(err.to_string().contains("/nonexistent-dir-xyz/file"));
    }
}
