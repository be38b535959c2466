//! Groups (`observe --group-by exe|pid|cgroup|port|sni`): the label that splits a series
//! so that two versions of a server running side by side are two series — `exe=/srv/gw-v2`,
//! `pid=4242`, `cgroup=/system.slice/gw-canary.service`, `port=8444`, `sni=api.example`.
//!
//! The wire knows the server process as "comm (pid N)" (live capture, a local server),
//! the probes know its pid; the executable (`/proc/PID/exe`) and the cgroup
//! (`/proc/PID/cgroup`, the v2 path) are read once per pid and kept until the window
//! closes ([`Grouper::forget`]), at most [`MAX_PIDS`] of them, so that a reused pid is
//! not mislabelled for longer than a window. What cannot be known (a remote server, a
//! process gone, the probes' SNI, which they do not see) is `(unknown)`.

use std::collections::HashMap;
use std::path::PathBuf;

use super::timeline::Handshake;
use crate::probes::event::ProbeRecord;
use crate::probes::workload::cgroup_path;

/// The most pids whose labels are kept at once (beyond, the cache starts anew).
pub const MAX_PIDS: usize = 4096;
/// The label's value when it cannot be known.
pub const UNKNOWN: &str = "(unknown)";

/// What a series is split by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// The server process's executable.
    Exe,
    /// The server process.
    Pid,
    /// The server process's cgroup.
    Cgroup,
    /// The server's port.
    Port,
    /// The SNI the client asked for (the wire).
    Sni,
}

impl GroupBy {
    /// Its name, as `--group-by` spells it.
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Exe => "exe",
            GroupBy::Pid => "pid",
            GroupBy::Cgroup => "cgroup",
            GroupBy::Port => "port",
            GroupBy::Sni => "sni",
        }
    }
}

/// Labels handshakes by their group, with the per-pid reads cached.
#[derive(Debug)]
pub struct Grouper {
    by: GroupBy,
    proc_root: PathBuf,
    cache: HashMap<u32, String>,
}

/// N from "comm (pid N)".
pub(crate) fn pid_of(process: &str) -> Option<u32> {
    process
        .rsplit_once("(pid ")?
        .1
        .strip_suffix(')')?
        .parse()
        .ok()
}

impl Grouper {
    /// Labels by `by`, reading `/proc`.
    pub fn new(by: GroupBy) -> Grouper {
        Grouper::with_proc(by, PathBuf::from("/proc"))
    }

    /// Labels by `by`, reading the process files under `proc_root`.
    pub fn with_proc(by: GroupBy, proc_root: PathBuf) -> Grouper {
        Grouper {
            by,
            proc_root,
            cache: HashMap::new(),
        }
    }

    /// What it splits by.
    pub fn by(&self) -> GroupBy {
        self.by
    }

    /// Forgets what was read of the pids (a window closed).
    pub fn forget(&mut self) {
        self.cache.clear();
    }

    fn label(&self, value: &str) -> String {
        format!("{}={value}", self.by.name())
    }

    /// The label of the process `pid` (exe, pid or cgroup).
    fn of_pid(&mut self, pid: Option<u32>) -> String {
        let Some(pid) = pid else {
            return self.label(UNKNOWN);
        };
        if let Some(l) = self.cache.get(&pid) {
            return l.clone();
        }
        let dir = self.proc_root.join(pid.to_string());
        let value = match self.by {
            GroupBy::Exe => std::fs::read_link(dir.join("exe"))
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
            GroupBy::Cgroup => std::fs::read_to_string(dir.join("cgroup"))
                .ok()
                .and_then(|t| cgroup_path(&t)),
            _ => Some(pid.to_string()),
        };
        let l = self.label(value.as_deref().unwrap_or(UNKNOWN));
        if self.cache.len() >= MAX_PIDS {
            self.cache.clear();
        }
        self.cache.insert(pid, l.clone());
        l
    }

    /// A captured handshake's group (its server's).
    pub fn wire(&mut self, h: &Handshake) -> String {
        match self.by {
            GroupBy::Port => self.label(&h.server.port().to_string()),
            GroupBy::Sni => self.label(h.sni.as_deref().unwrap_or(UNKNOWN)),
            _ => self.of_pid(h.server_process.as_deref().and_then(pid_of)),
        }
    }

    /// A probed handshake's group (its process's).
    pub fn probe(&mut self, r: &ProbeRecord) -> String {
        match self.by {
            GroupBy::Port => match r.local {
                Some(a) => self.label(&a.port().to_string()),
                None => self.label(UNKNOWN),
            },
            GroupBy::Sni => self.label(UNKNOWN),
            _ => self.of_pid(Some(r.pid)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_cgroups_and_exes_are_read_from_proc_and_cached_until_forgotten() {
        assert_eq!(pid_of("gw (pid 42)"), Some(42));
        assert_eq!(pid_of("odd (pid) name (pid 7)"), Some(7));
        assert_eq!(pid_of("(remote)"), None);

        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("42");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("cgroup"), "0::/canary.slice\n").unwrap();
        std::os::unix::fs::symlink("/srv/gw-v2", p.join("exe")).unwrap();
        let mut g = Grouper::with_proc(GroupBy::Cgroup, dir.path().into());
        assert_eq!(g.of_pid(Some(42)), "cgroup=/canary.slice");
        std::fs::write(p.join("cgroup"), "0::/moved\n").unwrap();
        assert_eq!(g.of_pid(Some(42)), "cgroup=/canary.slice", "cached");
        g.forget();
        assert_eq!(g.of_pid(Some(42)), "cgroup=/moved");
        assert_eq!(g.of_pid(Some(43)), "cgroup=(unknown)");
        assert_eq!(g.of_pid(None), "cgroup=(unknown)");
        let mut g = Grouper::with_proc(GroupBy::Exe, dir.path().into());
        assert_eq!(g.of_pid(Some(42)), "exe=/srv/gw-v2");
        let mut g = Grouper::new(GroupBy::Pid);
        assert_eq!(g.of_pid(Some(9)), "pid=9");
        for pid in 0..(MAX_PIDS as u32 + 10) {
            g.of_pid(Some(pid));
        }
        assert!(g.cache.len() <= MAX_PIDS);
    }
}
