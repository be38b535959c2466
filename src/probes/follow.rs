//! Processes and files that come and go while the probes run, followed or flagged in
//! words, never silently unobserved.
//!
//! What the kernel already does: a uprobe is placed on a file's inode, so every process
//! that maps that inode is probed, those started later included (nginx's new workers
//! after `nginx -s reload`, a server restarted from the same file); with `--pid`, what a
//! probed process forks is added to the filter by the fork tracepoint.
//!
//! What this module adds, looked at about once a second on a thread of its own
//! ([`Follower::spawn`], so that reading /proc and parsing a new file never hold back the
//! capture) and at once when inotify says a watched path's name changed ([`Heard`]), the
//! attachments then made by the session as soon as it sees them
//! ([`Watcher::pending`]):
//! - a watched path (`--exe PATH`, or the system's libssl when neither `--pid` nor
//!   `--exe` is given) that now names another inode — a binary replaced and restarted,
//!   a package upgrade's new libssl (both write a new file and rename it over the old):
//!   the new file is attached to as well ("re-attached to PATH (new inode …)"); the
//!   processes still running the old one stay probed on it. A path rewritten in place
//!   (same inode, other contents), removed, or replaced by a file without a TLS library
//!   is said in a warning;
//! - a `--pid` process tree that maps a TLS library not attached yet (an `exec`, a
//!   library loaded later): attached to;
//! - a `--pid` process that exited (a restart's new master has a new pid, not
//!   followed: a warning says to use `--exe`), or whose pid names another process now
//!   (its start time, field 22 of `/proc/PID/stat`, changed): a warning, and the pid
//!   leaves the filter, as does every pid the fork tracepoint added once its process is
//!   gone or its pid reused.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant, SystemTime};

use super::target::{self, Target};

/// How often the files and processes are looked at.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The most events kept for the report (later ones are still said, not kept).
pub const MAX_EVENTS: usize = 1000;

/// Something the follower did or could not do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// True when something goes unobserved (or may be probed wrongly) because of it.
    pub warning: bool,
    /// What happened, in words.
    pub text: String,
}

/// A path being watched, and what it named when last looked at.
#[derive(Debug)]
struct Watched {
    path: PathBuf,
    /// (device, inode, modification time, size); `None`: missing when last looked.
    seen: Option<(u64, u64, Option<SystemTime>, u64)>,
}

fn identity(path: &Path) -> Option<(u64, u64, Option<SystemTime>, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.modified().ok(), m.len()))
}

/// A `--pid` process as it was when the run began.
#[derive(Debug)]
struct Given {
    pid: u32,
    comm: String,
    start: u64,
    gone: bool,
}

/// Watches what the probes were given; tells the session what to attach to next.
#[derive(Debug)]
pub struct Follower {
    proc_root: PathBuf,
    watched: Vec<Watched>,
    given: Vec<Given>,
    /// Inodes attached to, or looked at and found without a TLS library.
    known: BTreeSet<(u64, u64)>,
    /// Start times of the pids in the kernel's filter, when first seen there.
    filtered: HashMap<u32, u64>,
}

impl Follower {
    /// Follows a run attached to `targets`: the paths of `exes` (or, with neither pids
    /// nor exes, of the system's libssl targets) are watched, the `pids` remembered.
    pub fn new(pids: &[u32], exes: &[PathBuf], targets: &[Target]) -> Follower {
        Follower::with_proc(Path::new("/proc"), pids, exes, targets)
    }

    /// As [`Follower::new`], reading the processes under `proc_root`.
    pub fn with_proc(
        proc_root: &Path,
        pids: &[u32],
        exes: &[PathBuf],
        targets: &[Target],
    ) -> Follower {
        let paths: Vec<PathBuf> = if pids.is_empty() && exes.is_empty() {
            targets.iter().map(|t| t.path.clone()).collect()
        } else {
            exes.to_vec()
        };
        let watched = paths
            .into_iter()
            .map(|path| Watched {
                seen: identity(&path),
                path,
            })
            .collect();
        let given = pids
            .iter()
            .map(|&pid| Given {
                pid,
                comm: comm_in(proc_root, pid),
                start: target::stat(proc_root, pid).map_or(0, |s| s.start),
                gone: false,
            })
            .collect();
        // What the pids ran at the start was looked at already: only what they run
        // later is news.
        let known = targets
            .iter()
            .map(|t| t.path.clone())
            .chain(pids.iter().flat_map(|&p| target::pid_files(p)))
            .filter_map(|p| target::inode(&p))
            .collect();
        Follower {
            proc_root: proc_root.to_path_buf(),
            watched,
            given,
            known,
            filtered: HashMap::new(),
        }
    }

    /// Looks every [`PERIOD`] on a thread of its own until the [`Watcher`] is dropped.
    pub fn spawn(mut self) -> Watcher {
        let (found_tx, found) = channel();
        let (filter, filter_rx) = channel::<Vec<u32>>();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let news = Arc::new(AtomicBool::new(false));
        let told = Arc::clone(&news);
        let spawned = std::thread::Builder::new()
            .name("tlsperf-follow".into())
            .spawn(move || {
                let mut heard = Heard::new(&self.watched);
                let mut last = Instant::now();
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    // A watched file's name was written, renamed over or removed: its
                    // files are looked at now, the processes at the period.
                    let now = heard.news();
                    if !now && last.elapsed() < PERIOD {
                        continue;
                    }
                    let mut f = Found::default();
                    f.attach = self.files(&mut f.events);
                    if last.elapsed() >= PERIOD {
                        last = Instant::now();
                        // The filter as the session last read it.
                        if let Some(pids) = filter_rx.try_iter().last() {
                            f.stale = self.stale(&pids, &mut f.events);
                        }
                    }
                    let empty = f.attach.is_empty() && f.stale.is_empty() && f.events.is_empty();
                    if !empty {
                        if found_tx.send(f).is_err() {
                            return;
                        }
                        told.store(true, Ordering::Release);
                    }
                }
            });
        let started = match spawned {
            Ok(_) => None,
            Err(e) => Some(Event {
                warning: true,
                text: format!(
                    "cannot start the thread that follows replaced files and exited \
                     processes ({e}): they are not followed"
                ),
            }),
        };
        Watcher {
            found,
            news,
            filter,
            stop,
            started,
        }
    }

    /// Files to attach to now: watched paths that name a new inode, and TLS libraries
    /// the `--pid` trees run that are not attached yet; with what happened to the rest.
    pub fn files(&mut self, events: &mut Vec<Event>) -> Vec<(Target, String)> {
        let mut out = Vec::new();
        for w in &mut self.watched {
            let now = identity(&w.path);
            let path = w.path.display();
            match (w.seen, now) {
                (Some(a), Some(b)) if a == b => {}
                (_, None) => {
                    if w.seen.is_some() {
                        events.push(Event {
                            warning: true,
                            text: format!(
                                "{path} was removed: the processes still running it stay \
                                 probed; one started from a new file there is probed once \
                                 it appears (looked at every {} s)",
                                PERIOD.as_secs()
                            ),
                        });
                    }
                }
                (Some((dev, ino, ..)), Some((ndev, nino, ..))) if (dev, ino) == (ndev, nino) => {
                    events.push(Event {
                        warning: true,
                        text: format!(
                            "{path} was rewritten in place (the same inode, other contents): \
                             the probes were placed at its old offsets and may not fit the \
                             new code; restart tlsperf observe (replace files by renaming \
                             a new one over them, as package managers do)"
                        ),
                    });
                }
                (_, Some((ndev, nino, ..))) => {
                    if !self.known.contains(&(ndev, nino)) {
                        self.known.insert((ndev, nino));
                        match target::file_target(&w.path) {
                            Ok(Some(t)) => out.push((
                                t,
                                format!(
                                    "re-attached to {path} (new inode {nino}): the processes \
                                     started from it are probed from now on; those still \
                                     running the file it replaced stay probed on that one"
                                ),
                            )),
                            Ok(None) => events.push(Event {
                                warning: true,
                                text: format!(
                                    "{path} was replaced by a file with no TLS library \
                                     tlsperf can probe: the processes started from it are \
                                     not observed"
                                ),
                            }),
                            Err(e) => events.push(Event {
                                warning: true,
                                text: format!(
                                    "{path} was replaced, and the new file cannot be \
                                     probed: {e}; the processes started from it are not \
                                     observed"
                                ),
                            }),
                        }
                    }
                }
            }
            w.seen = now;
        }
        for g in self.given.iter().filter(|g| !g.gone) {
            for f in target::pid_files(g.pid) {
                let Some(id) = target::inode(&f) else {
                    continue;
                };
                if !self.known.insert(id) {
                    continue;
                }
                match target::file_target(&f) {
                    Ok(Some(t)) => out.push((
                        t,
                        format!(
                            "attached to {} too: process {} ({}) or one it started runs it now",
                            f.display(),
                            g.pid,
                            g.comm
                        ),
                    )),
                    Ok(None) => {}
                    Err(e) => events.push(Event {
                        warning: true,
                        text: format!(
                            "process {} ({}) or one it started runs {}, which cannot be \
                             probed: {e}",
                            g.pid,
                            g.comm,
                            f.display()
                        ),
                    }),
                }
            }
        }
        out
    }

    /// The pids of the kernel's filter (`in_filter`) that should leave it: their process
    /// is gone, or the pid names another process now. A `--pid` process's own end is
    /// said in `events`.
    pub fn stale(&mut self, in_filter: &[u32], events: &mut Vec<Event>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut now: BTreeMap<u32, u64> = BTreeMap::new();
        for &pid in in_filter {
            match target::stat(&self.proc_root, pid) {
                Some(s) => {
                    now.insert(pid, s.start);
                }
                None => out.push(pid),
            }
        }
        for g in self.given.iter_mut().filter(|g| !g.gone) {
            let (pid, comm) = (g.pid, &g.comm);
            match target::stat(&self.proc_root, pid) {
                None => {
                    g.gone = true;
                    events.push(Event {
                        warning: true,
                        text: format!(
                            "process {pid} ({comm}) given with --pid has exited: the \
                             processes it started that still run stay probed, but one \
                             that takes its place (a restart, with a new pid) is not; to \
                             follow restarts, name the executable or library with --exe \
                             PATH instead of --pid"
                        ),
                    });
                }
                Some(s) if s.start != g.start => {
                    g.gone = true;
                    let other = comm_in(&self.proc_root, pid);
                    events.push(Event {
                        warning: true,
                        text: format!(
                            "pid {pid} given with --pid now names another process \
                             ({other}, started after the run began): process {pid} \
                             ({comm}) has exited, and the new one is not probed; to follow \
                             restarts, name the executable or library with --exe PATH"
                        ),
                    });
                    if !out.contains(&pid) && in_filter.contains(&pid) {
                        out.push(pid);
                    }
                }
                Some(_) => {}
            }
        }
        for (pid, start) in now {
            match self.filtered.get(&pid) {
                Some(&was) if was != start => {
                    if !out.contains(&pid) {
                        out.push(pid);
                    }
                }
                Some(_) => {}
                None => {
                    // A pid the run was given must still be its own process.
                    let mine = self
                        .given
                        .iter()
                        .find(|g| g.pid == pid)
                        .is_none_or(|g| g.start == start);
                    if mine {
                        self.filtered.insert(pid, start);
                    } else if !out.contains(&pid) {
                        out.push(pid);
                    }
                }
            }
        }
        for pid in &out {
            self.filtered.remove(pid);
        }
        out
    }
}

/// What one look found.
#[derive(Debug, Default)]
pub struct Found {
    /// Files to attach to, each with what to say once it is.
    pub attach: Vec<(Target, String)>,
    /// Pids to take out of the `--pid` filter.
    pub stale: Vec<u32>,
    /// What else happened.
    pub events: Vec<Event>,
}

/// The follower's thread, seen from the session: stops when dropped.
#[derive(Debug)]
pub struct Watcher {
    found: Receiver<Found>,
    /// Set by the thread when it sends something, cleared by [`Watcher::found`]: a check
    /// cheap enough for every captured frame.
    news: Arc<AtomicBool>,
    filter: Sender<Vec<u32>>,
    stop: Arc<AtomicBool>,
    started: Option<Event>,
}

/// The watched paths' directories, through inotify: what happened to the paths' names
/// (written, renamed over, removed) is heard within the follower's 50 ms wake-up, not at
/// its next look. Without inotify (its limits reached, say) the looks every [`PERIOD`]
/// still find everything, a second later.
struct Heard {
    inotify: Option<inotify::Inotify>,
    /// The file names watched (of any directory: a name event in another watched
    /// directory only brings a look forward).
    names: BTreeSet<std::ffi::OsString>,
    buffer: Vec<u8>,
}

impl Heard {
    fn new(watched: &[Watched]) -> Heard {
        use inotify::WatchMask;
        let names: BTreeSet<_> = watched
            .iter()
            .filter_map(|w| w.path.file_name().map(|n| n.to_os_string()))
            .collect();
        let inotify = inotify::Inotify::init().ok().and_then(|i| {
            let dirs: BTreeSet<&Path> = watched.iter().filter_map(|w| w.path.parent()).collect();
            let mut any = false;
            for dir in dirs {
                let mask = WatchMask::MOVED_TO
                    | WatchMask::CREATE
                    | WatchMask::CLOSE_WRITE
                    | WatchMask::DELETE
                    | WatchMask::MOVED_FROM;
                match i.watches().add(dir, mask) {
                    Ok(_) => any = true,
                    Err(e) => tracing::debug!(
                        "no inotify watch on {} ({e}): looked at every {} s",
                        dir.display(),
                        PERIOD.as_secs()
                    ),
                }
            }
            any.then_some(i)
        });
        Heard {
            inotify,
            names,
            buffer: vec![0; 4096],
        }
    }

    /// Whether a watched name had an event since the last call (the queue is drained).
    fn news(&mut self) -> bool {
        let Some(i) = self.inotify.as_mut() else {
            return false;
        };
        let mut news = false;
        // Non-blocking: an empty queue is WouldBlock.
        while let Ok(events) = i.read_events(&mut self.buffer) {
            let mut n = 0;
            for e in events {
                n += 1;
                // An overflowed queue names nothing: look.
                news |= e.name.is_none_or(|name| self.names.contains(name));
            }
            if n == 0 {
                break;
            }
        }
        news
    }
}

impl Watcher {
    /// Whether the thread found something not taken by [`Watcher::found`] yet.
    pub fn pending(&self) -> bool {
        self.news.load(Ordering::Acquire) || self.started.is_some()
    }

    /// What the thread found since the last call.
    pub fn found(&mut self) -> Vec<Found> {
        // Cleared first: what is sent after this is said again.
        self.news.store(false, Ordering::Release);
        let mut out: Vec<Found> = self.found.try_iter().collect();
        if let Some(e) = self.started.take() {
            out.push(Found {
                events: vec![e],
                ..Found::default()
            });
        }
        out
    }

    /// The pids of the kernel's `--pid` filter now, for the thread's next look.
    pub fn filter(&self, pids: Vec<u32>) {
        let _ = self.filter.send(pids);
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn comm_in(proc_root: &Path, pid: u32) -> String {
    std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_stat(root: &Path, pid: u32, comm: &str, start: u64) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        // Fields 3…22: state, ppid, then 17 more up to starttime.
        let mut fields = vec!["S".to_string(), "1".to_string()];
        fields.extend((5..22).map(|_| "0".to_string()));
        fields.push(start.to_string());
        fields.push("0".into());
        std::fs::write(
            d.join("stat"),
            format!("{pid} ({comm} (x)) {}\n", fields.join(" ")),
        )
        .unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
    }

    #[test]
    fn a_given_pid_that_exits_or_is_reused_is_said_and_leaves_the_filter() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write_stat(root, 100, "nginx", 5000);
        write_stat(root, 101, "nginx", 5001);
        write_stat(root, 200, "gw", 7000);
        assert_eq!(target::stat(root, 100).unwrap().start, 5000);
        assert_eq!(target::stat(root, 100).unwrap().ppid, 1);
        let mut f = Follower::with_proc(root, &[100, 200], &[], &[]);
        let mut events = Vec::new();
        // Everything as it was: nothing leaves, nothing is said.
        assert!(f.stale(&[100, 101, 200], &mut events).is_empty());
        assert!(events.is_empty());
        // A worker exits; its pid is then reused by another process.
        std::fs::remove_dir_all(root.join("101")).unwrap();
        assert_eq!(f.stale(&[100, 101, 200], &mut events), [101]);
        assert!(events.is_empty(), "a forked worker's end is not news");
        // The given 100 is reused by a process that started later; 200 exits.
        write_stat(root, 100, "bash", 9000);
        std::fs::remove_dir_all(root.join("200")).unwrap();
        let mut out = f.stale(&[100, 200], &mut events);
        out.sort_unstable();
        assert_eq!(out, [100, 200]);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(events.iter().all(|e| e.warning));
        let text: Vec<&str> = events.iter().map(|e| e.text.as_str()).collect();
        assert!(
            text.iter().any(|t| t.contains(
                "pid 100 given with --pid now names another \
                                             process (bash"
            ) && t.contains("process 100 (nginx) has exited")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.contains("process 200 (gw) given with --pid has exited")),
            "{text:?}"
        );
        // Said once.
        events.clear();
        f.stale(&[], &mut events);
        assert!(events.is_empty(), "{events:?}");
        // A filtered pid reused while tlsperf did not look: its start time changed.
        write_stat(root, 300, "worker", 10);
        assert!(f.stale(&[300], &mut events).is_empty());
        write_stat(root, 300, "other", 11);
        assert_eq!(f.stale(&[300], &mut events), [300]);
    }

    #[test]
    fn a_watched_path_replaced_removed_or_rewritten_is_followed_or_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("srv");
        std::fs::write(&path, b"not a program").unwrap();
        let mut f = Follower::with_proc(dir.path(), &[], std::slice::from_ref(&path), &[]);
        let mut events = Vec::new();
        assert!(f.files(&mut events).is_empty());
        assert!(events.is_empty());
        // Replaced by rename: a new inode, looked at, no TLS library in it.
        let new = dir.path().join("srv.new");
        std::fs::write(&new, b"still not a program").unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert!(f.files(&mut events).is_empty());
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(events[0].text.contains("no TLS library"), "{events:?}");
        // Rewritten in place.
        events.clear();
        std::fs::write(&path, b"other contents, longer than before").unwrap();
        f.files(&mut events);
        assert!(
            events.iter().any(|e| e.text.contains("rewritten in place")),
            "{events:?}"
        );
        // Removed.
        events.clear();
        std::fs::remove_file(&path).unwrap();
        f.files(&mut events);
        assert!(
            events.iter().any(|e| e.text.contains("was removed")),
            "{events:?}"
        );
        events.clear();
        f.files(&mut events);
        assert!(events.is_empty(), "said once: {events:?}");
    }

    #[test]
    fn a_watched_name_renamed_over_is_heard_and_other_names_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libssl.so.3");
        std::fs::write(&lib, b"old").unwrap();
        let mut heard = Heard::new(&[Watched {
            seen: identity(&lib),
            path: lib.clone(),
        }]);
        assert!(heard.inotify.is_some(), "inotify is available here");
        assert!(!heard.news());
        // Another file of the directory, written and renamed: no news.
        std::fs::write(dir.path().join("other"), b"x").unwrap();
        std::fs::rename(dir.path().join("other"), dir.path().join("other2")).unwrap();
        assert!(!heard.news());
        // A new file renamed over the watched name, as an upgrade does.
        let new = dir.path().join("libssl.so.3.dpkg-new");
        std::fs::write(&new, b"new").unwrap();
        assert!(!heard.news(), "the temporary name is not watched");
        std::fs::rename(&new, &lib).unwrap();
        assert!(heard.news());
        assert!(!heard.news(), "heard once");
        std::fs::remove_file(&lib).unwrap();
        assert!(heard.news(), "a removal is news too");
    }
}
