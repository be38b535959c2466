//! A process's workload: its cgroup (the v2 path of `/proc/PID/cgroup`) and, where the
//! path says so, the container and the Kubernetes pod it runs in. Only the path is read:
//! nothing asks a container runtime or the Kubernetes API.
//!
//! The path forms recognised (systemd and cgroupfs drivers alike):
//! - a container: `docker-<64 hex>.scope`, `cri-containerd-<64 hex>.scope`,
//!   `crio-<64 hex>.scope`, `libpod-<64 hex>.scope` (systemd driver) or a bare
//!   `/docker/<64 hex>`, `/<64 hex>` component (cgroupfs driver, Kubernetes' too);
//! - a pod: `kubepods…-pod<uid>.slice` (systemd driver, the UID's dashes written as
//!   underscores) or `/kubepods/…/pod<uid>` (cgroupfs driver).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Where a process runs, from its cgroup path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// The cgroup v2 path (`/system.slice/nginx.service`); the first hierarchy's path on
    /// a v1-only system.
    pub cgroup: String,
    /// The container's id (64 hex digits), when the path names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The Kubernetes pod's UID (`8f3c…-…`), when the path names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
}

/// The v2 cgroup path of a `/proc/PID/cgroup` text (the `0::` line), else the first
/// hierarchy's path.
pub fn cgroup_path(text: &str) -> Option<String> {
    let lines = || text.lines().filter_map(|l| l.splitn(3, ':').nth(2));
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| lines().next())
        .map(str::to_string)
}

fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The container id a cgroup path names (its last such component), if any.
pub fn container_id(path: &str) -> Option<String> {
    path.split('/').rev().find_map(|c| {
        let c = c.strip_suffix(".scope").unwrap_or(c);
        let id = ["docker-", "cri-containerd-", "crio-", "libpod-"]
            .iter()
            .find_map(|p| c.strip_prefix(p))
            .unwrap_or(c);
        is_container_id(id).then(|| id.to_ascii_lowercase())
    })
}

fn is_pod_uid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        })
}

/// The Kubernetes pod UID a cgroup path names, if any.
pub fn pod_uid(path: &str) -> Option<String> {
    if !path.contains("kubepods") {
        return None;
    }
    path.split('/').rev().find_map(|c| {
        let c = c.strip_suffix(".slice").unwrap_or(c);
        let uid = c
            .rsplit_once("-pod")
            .map(|(_, u)| u)
            .or_else(|| c.strip_prefix("pod"))?;
        let uid = uid.replace('_', "-");
        is_pod_uid(&uid).then(|| uid.to_ascii_lowercase())
    })
}

impl Workload {
    /// The workload of a cgroup path.
    pub fn of_path(cgroup: &str) -> Workload {
        Workload {
            cgroup: cgroup.to_string(),
            container_id: container_id(cgroup),
            pod_uid: pod_uid(cgroup),
        }
    }

    /// The workload of process `pid`, from `proc_root`/PID/cgroup (`None`: the process is
    /// gone or the file unreadable).
    pub fn read(proc_root: &Path, pid: u32) -> Option<Workload> {
        let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
        cgroup_path(&text).map(|p| Workload::of_path(&p))
    }
}

/// The most processes whose workload is kept at once.
pub const MAX_PIDS: usize = 4096;

/// How long a process's workload is kept before it is read again (a pid used again by
/// another process is not mislabelled for longer).
pub const KEPT: Duration = Duration::from_secs(10);

/// Workloads read once per process and kept a little while.
#[derive(Debug, Default)]
pub struct Cache {
    map: HashMap<u32, Option<Arc<Workload>>>,
    since: Option<Instant>,
    /// Where the processes are read (`None`: /proc).
    proc_root: Option<std::path::PathBuf>,
}

impl Cache {
    /// A cache reading the process files under `proc_root` instead of /proc.
    pub fn with_proc(proc_root: std::path::PathBuf) -> Cache {
        Cache {
            proc_root: Some(proc_root),
            ..Cache::default()
        }
    }

    /// The workload of `pid`, from /proc (`None`: the process is gone).
    pub fn of(&mut self, pid: u32) -> Option<Arc<Workload>> {
        let since = self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= KEPT || self.map.len() >= MAX_PIDS {
            self.map.clear();
            *since = Instant::now();
        }
        let root = self.proc_root.as_deref().unwrap_or(Path::new("/proc"));
        self.map
            .entry(pid)
            .or_insert_with(|| Workload::read(root, pid).map(Arc::new))
            .clone()
    }

    /// Reads `pid` again next time (it exited, or its pid names another process).
    pub fn forget(&mut self, pid: u32) {
        self.map.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f4e2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";

    #[test]
    fn container_ids_and_pod_uids_are_read_from_the_path_forms_runtimes_write() {
        for path in [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}"),
            format!("/machine.slice/libpod-{ID}.scope"),
            format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/cri-containerd-{ID}.scope"
            ),
            format!(
                "/kubepods.slice/kubepods-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/crio-{ID}.scope"
            ),
            format!("/kubepods/besteffort/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/{ID}"),
        ] {
            let w = Workload::of_path(&path);
            assert_eq!(w.container_id.as_deref(), Some(ID), "{path}");
            assert_eq!(w.cgroup, path);
            if path.contains("kubepods") {
                assert_eq!(
                    w.pod_uid.as_deref(),
                    Some("1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"),
                    "{path}"
                );
            } else {
                assert_eq!(w.pod_uid, None, "{path}");
            }
        }
        // A pod's own slice, no container yet; and paths that name neither.
        let w = Workload::of_path(
            "/kubepods.slice/kubepods-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice",
        );
        assert_eq!(w.container_id, None);
        assert!(w.pod_uid.is_some());
        for path in [
            "/system.slice/nginx.service",
            "/user.slice/user-0.slice/session-3.scope",
            "/docker-abc.scope",
            "/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901",
            &format!("/docker-{}.scope", &ID[1..]),
        ] {
            let w = Workload::of_path(path);
            assert_eq!((w.container_id, w.pod_uid), (None, None), "{path}");
        }
        assert_eq!(
            cgroup_path("12:cpu:/old\n0::/system.slice/gw.service\n").as_deref(),
            Some("/system.slice/gw.service")
        );
        assert_eq!(cgroup_path("3:memory:/v1/gw\n").as_deref(), Some("/v1/gw"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("7")).unwrap();
        std::fs::write(dir.path().join("7/cgroup"), format!("0::/docker/{ID}\n")).unwrap();
        let w = Workload::read(dir.path(), 7).unwrap();
        assert_eq!(w.container_id.as_deref(), Some(ID));
        assert_eq!(Workload::read(dir.path(), 8), None);
    }
}
