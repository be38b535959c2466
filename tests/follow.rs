//! `tlsperf observe --probes` while the processes it probes come and go, without a
//! restart of tlsperf: nginx reloaded ten times (new workers) and restarted (a new
//! master), a Go server whose binary is replaced on disk and restarted, a libssl replaced
//! by rename (as a package upgrade does) under a running server; and the attribution of
//! probed handshakes to the cgroup, container and pod of their process, in cgroups the
//! test creates. Needs root (BPF, cgroups); a run without it skips with the reason.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::nginx::Nginx;
use common::probes::{go_client, metrics, probes, root};
use common::{interrupt_and_wait, missing, tlsperf};
use serde_json::Value;

const LIBSSL: &str = "/lib/x86_64-linux-gnu/libssl.so.3";

/// A running `tlsperf observe … --json --out OUT`, with everything it says on stderr.
struct Observe {
    child: Child,
    said: Arc<Mutex<String>>,
    out: PathBuf,
}

impl Observe {
    /// Starts it and returns once it is probing.
    fn start(args: &[&str], out: &Path) -> Observe {
        let mut all = args.to_vec();
        all.extend(["--json", "--out", out.to_str().unwrap()]);
        let (child, first, lines) = common::watch::spawn(&all, &[], &["probing ", "capturing on "]);
        let said = Arc::new(Mutex::new(first));
        let writer = Arc::clone(&said);
        std::thread::spawn(move || {
            for line in lines {
                writer.lock().unwrap().push_str(&line);
            }
        });
        let o = Observe {
            child,
            said,
            out: out.to_path_buf(),
        };
        o.wait_for(&["probing ", "capturing on "], Duration::from_secs(60));
        o
    }

    fn said(&self) -> String {
        self.said.lock().unwrap().clone()
    }

    /// Waits until stderr holds one of `needles`; panics with what it said after `limit`.
    fn wait_for(&self, needles: &[&str], limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let said = self.said();
            if needles.iter().any(|n| said.contains(n)) {
                return said;
            }
            assert!(
                Instant::now() < deadline,
                "observe did not say any of {needles:?} within {limit:?}:\n{said}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it (SIGINT), checks it exited 130 and returns its document and stderr.
    fn stop(self) -> (Value, String) {
        let o = interrupt_and_wait(self.child, Duration::from_secs(30));
        // The reader thread has everything once the child is gone.
        std::thread::sleep(Duration::from_millis(100));
        let said = self.said.lock().unwrap().clone();
        assert_eq!(o.status.code(), Some(130), "observe exit status: {said}");
        let doc = serde_json::from_str(&std::fs::read_to_string(&self.out).unwrap()).unwrap();
        (doc, said)
    }
}

/// Server handshakes per pid of the `by_process` rows whose comm is `comm`.
fn server_rows(p: &Value, comm: &str) -> Vec<(u32, u64)> {
    let prefix = format!("{comm} (pid ");
    p["by_process"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(k, v)| {
            let pid = k
                .strip_prefix(&prefix)?
                .strip_suffix(") server")?
                .parse()
                .ok()?;
            Some((pid, v["handshakes"].as_u64().unwrap_or(0)))
        })
        .collect()
}

/// `n` new connections to nginx (no resumption across them: each is a handshake).
fn load(nginx: &Nginx, n: u32) {
    let run = tlsperf([
        "load",
        &nginx.url(),
        "--new-conn",
        "-n",
        &n.to_string(),
        "-c",
        "2",
        "--cacert",
        &nginx.root,
        "-q",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn nginx_reloaded_ten_times_is_followed_and_counted_as_its_log() {
    if !root() {
        return;
    }
    let Some(nginx) = Nginx::start_master(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("obs.json");
    let master = nginx.pid();
    let obs = Observe::start(&["--probes", "--pid", &master.to_string()], &out);
    let mut workers = std::collections::BTreeSet::new();
    for _ in 0..10 {
        workers.extend(nginx.workers());
        load(&nginx, 10);
        nginx.reload();
    }
    workers.extend(nginx.workers());
    load(&nginx, 10);
    let lines = nginx.log_lines(110);
    assert_eq!(lines.len(), 110, "nginx's log");
    std::thread::sleep(Duration::from_millis(300));
    let (doc, said) = obs.stop();
    let p = probes(&doc);
    let rows = server_rows(p, "nginx");
    let total: u64 = rows.iter().map(|(_, n)| n).sum();
    assert_eq!(
        total, 110,
        "probed against nginx's log: {}",
        p["by_process"]
    );
    assert_eq!(p["by_kind"]["server all"]["handshakes"], 110);
    assert_eq!(p["by_kind"]["server all"]["failed"], 0);
    // Every reload's new workers did some of them, and only the master's workers.
    assert!(rows.len() > 2, "{rows:?}");
    for (pid, _) in &rows {
        assert!(
            workers.contains(pid),
            "pid {pid} is no worker of the master: {rows:?}"
        );
    }
    // The kernel's count agrees, and nothing was said: nothing went unobserved.
    let kernel: u64 = p["kernel_counts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(kernel, 110, "{}", p["kernel_counts"]);
    assert!(!said.contains("has exited"), "{said}");
    assert_eq!(p["followed"], serde_json::json!([]), "{said}");
}

#[test]
fn nginx_restarted_is_followed_under_exe_and_flagged_under_pid() {
    if !root() {
        return;
    }
    let Some(mut nginx) = Nginx::start_master(true) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (by_pid, by_exe) = (dir.path().join("pid.json"), dir.path().join("exe.json"));
    let port = nginx.port.to_string();
    let first = nginx.pid();
    let pid_obs = Observe::start(&["--probes", "--pid", &first.to_string()], &by_pid);
    // Every process running the system's libssl is probed; the capture of nginx's port
    // tells nginx's handshakes from any other's.
    let exe_obs = Observe::start(
        &[
            "--interface",
            "lo",
            "--port",
            &port,
            "--probes",
            "--exe",
            LIBSSL,
        ],
        &by_exe,
    );
    load(&nginx, 15);
    let old_workers = nginx.workers();
    nginx.restart();
    let second = nginx.pid();
    assert_ne!(first, second);
    let new_workers = nginx.workers();
    load(&nginx, 25);
    let lines = nginx.log_lines(40);
    assert_eq!(lines.len(), 40, "nginx's log");
    // The master given with --pid is gone: said in words, within a few seconds.
    pid_obs.wait_for(&["has exited"], Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    let (doc, said) = pid_obs.stop();
    let p = probes(&doc);
    assert!(
        said.contains(&format!(
            "process {first} (nginx) given with --pid has exited"
        )) && said.contains("--exe PATH"),
        "{said}"
    );
    let followed = p["followed"].as_array().unwrap();
    assert!(
        followed
            .iter()
            .any(|f| f.as_str().unwrap().contains("has exited")),
        "{followed:?}"
    );
    // What it probed is the first master's workers' alone.
    let rows = server_rows(p, "nginx");
    assert_eq!(rows.iter().map(|(_, n)| n).sum::<u64>(), 15, "{rows:?}");
    assert!(
        rows.iter().all(|(pid, _)| old_workers.contains(pid)),
        "{rows:?}"
    );

    let (doc, said) = exe_obs.stop();
    let p = probes(&doc);
    assert_eq!(p["counts"]["matched_wire"], 40, "{} {said}", p["counts"]);
    let rows = server_rows(p, "nginx");
    let on = |workers: &[u32]| -> u64 {
        rows.iter()
            .filter(|(pid, _)| workers.contains(pid))
            .map(|(_, n)| n)
            .sum()
    };
    assert_eq!(on(&old_workers), 15, "{rows:?}");
    assert_eq!(on(&new_workers), 25, "{rows:?}");
}

/// The Go server at `path`, and its address.
fn go_server(path: &Path, pki: &Path) -> (Child, String) {
    common::go::server(path, pki, &[])
}

/// Copies `from` to a new file beside `to` and renames it over `to` (a new inode, as
/// an installer or a package upgrade does).
fn replace(from: &Path, to: &Path) {
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).unwrap().ino()
}

#[test]
fn a_go_binary_replaced_on_disk_and_restarted_is_probed_again() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((built, pki)) = common::go::server_and_pki(dir.path()) else {
        return;
    };
    let client = dir.path().join("tlsclient");
    let installed = dir.path().join("gw");
    std::fs::copy(&built, &installed).unwrap();
    let out = dir.path().join("obs.json");
    let obs = Observe::start(&["--probes", "--exe", installed.to_str().unwrap()], &out);
    let (mut old, addr) = go_server(&installed, &pki);
    go_client(&client, &addr, &pki, 5);
    // A new version installed, the service restarted at once.
    let before = inode(&installed);
    replace(&built, &installed);
    assert_ne!(before, inode(&installed));
    let _ = old.kill();
    let _ = old.wait();
    let (mut new, addr) = go_server(&installed, &pki);
    let said = obs.wait_for(&["re-attached to "], Duration::from_secs(10));
    assert!(
        said.contains(&format!(
            "re-attached to {} (new inode {})",
            installed.display(),
            inode(&installed)
        )),
        "{said}"
    );
    go_client(&client, &addr, &pki, 7);
    std::thread::sleep(Duration::from_millis(300));
    let (doc, _) = obs.stop();
    let _ = new.kill();
    let _ = new.wait();
    let p = probes(&doc);
    let rows = server_rows(p, "gw");
    assert!(rows.contains(&(old.id(), 5)), "{rows:?}");
    assert!(rows.contains(&(new.id(), 7)), "{rows:?}");
    let attached = p["attached"].to_string();
    assert_eq!(
        attached.matches("serverHandshake in ").count(),
        2,
        "the old file and the new: {attached}"
    );
    assert!(
        p["followed"][0]
            .as_str()
            .unwrap()
            .starts_with("re-attached to "),
        "{}",
        p["followed"]
    );
}

/// `n` handshakes with `openssl s_client` (the system's libssl, not the one probed).
fn s_client(port: u16, pki: &Path, n: u32) {
    for _ in 0..n {
        // Its exit status is not the handshake's: the counts below are.
        let _ = Command::new("openssl")
            .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
            .args(["-CAfile", pki.join("root.pem").to_str().unwrap()])
            .stdin(Stdio::null())
            .output()
            .unwrap();
    }
}

#[test]
fn a_libssl_replaced_while_running_is_followed_in_old_and_new_processes() {
    if !root() || !common::have("openssl", "openssl s_server") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let run = tlsperf(["pki", "init", pki.to_str().unwrap(), "-q"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    let probed = lib.join("libssl.so.3");
    std::fs::copy(LIBSSL, &probed).unwrap();
    let (mut old, old_port) = common::probes::s_server(&pki, Some(&lib));
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", old.id())).unwrap();
    assert!(
        maps.contains(probed.to_str().unwrap()),
        "s_server does not load {}",
        probed.display()
    );
    let out = dir.path().join("obs.json");
    let obs = Observe::start(&["--probes", "--exe", probed.to_str().unwrap()], &out);
    s_client(old_port, &pki, 2);
    // The upgrade: a new file renamed over the old one while s_server runs on it.
    replace(Path::new(LIBSSL), &probed);
    let said = obs.wait_for(&["re-attached to "], Duration::from_secs(10));
    assert!(
        said.contains(&format!("re-attached to {} (new inode", probed.display())),
        "{said}"
    );
    // The running server still runs the old file, still probed; a new one the new file.
    s_client(old_port, &pki, 3);
    let (mut new, new_port) = common::probes::s_server(&pki, Some(&lib));
    s_client(new_port, &pki, 4);
    std::thread::sleep(Duration::from_millis(300));
    let (doc, _) = obs.stop();
    for c in [&mut old, &mut new] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let p = probes(&doc);
    let rows = server_rows(p, "openssl");
    assert!(rows.contains(&(old.id(), 5)), "{rows:?}");
    assert!(rows.contains(&(new.id(), 4)), "{rows:?}");
}

/// A cgroup v2 hierarchy the test creates (`path` under the cgroup2 mount), its
/// processes moved back to where they came from and every directory removed on drop.
struct TestCgroup {
    mount: PathBuf,
    dirs: Vec<PathBuf>,
    leaf: PathBuf,
}

impl TestCgroup {
    /// Creates `mount`/`path` (each component), or `None` without a writable cgroup2.
    fn create(path: &str) -> Option<TestCgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next() == Some("cgroup2"))
                .then(|| PathBuf::from(left.split_whitespace().nth(4).unwrap()))
        });
        let Some(mount) = mount else {
            missing("cgroup2", "a cgroup v2 mount to create test cgroups in");
            return None;
        };
        let mut cg = TestCgroup {
            leaf: mount.clone(),
            mount,
            dirs: Vec::new(),
        };
        for part in path.trim_start_matches('/').split('/') {
            cg.leaf = cg.leaf.join(part);
            if let Err(e) = std::fs::create_dir(&cg.leaf) {
                missing(
                    "cgroup2",
                    &format!("cannot create {}: {e}", cg.leaf.display()),
                );
                return None;
            }
            cg.dirs.push(cg.leaf.clone());
        }
        Some(cg)
    }

    /// Moves process `pid` in.
    fn enter(&self, pid: u32) {
        std::fs::write(self.leaf.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.leaf.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(self.mount.join("cgroup.procs"), pid);
        }
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

const CONTAINER: &str = "4d6f1c0e9b2a8f7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f7e";
const POD: &str = "0b7c4e2a-91d3-4f6e-8a5b-3c2d1e0f9a8b";

#[test]
fn probed_handshakes_are_attributed_to_the_cgroup_container_and_pod() {
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((built, pki)) = common::go::server_and_pki(dir.path()) else {
        return;
    };
    let client = dir.path().join("tlsclient");
    let path = format!(
        "/tlsperf-test-{}/kubepods.slice/kubepods-burstable.slice/\
         kubepods-burstable-pod{}.slice/cri-containerd-{CONTAINER}.scope",
        std::process::id(),
        POD.replace('-', "_")
    );
    let Some(cgroup) = TestCgroup::create(&path) else {
        return;
    };
    let (mut server, addr) = go_server(&built, &pki);
    cgroup.enter(server.id());
    let port = addr.rsplit(':').next().unwrap().to_string();
    let out = dir.path().join("obs.json");
    let lines = dir.path().join("conns.jsonl");
    let pid = server.id().to_string();
    let obs = Observe::start(
        &[
            "--interface",
            "lo",
            "--port",
            &port,
            "--probes",
            "--pid",
            &pid,
            "--connections",
            lines.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
        &out,
    );
    let said = obs.said();
    let metrics_addr = said
        .lines()
        .find_map(|l| l.split("metrics: http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics address in {said}"))
        .to_string();
    go_client(&client, &addr, &pki, 4);
    // The metrics are updated once a second.
    std::thread::sleep(Duration::from_millis(1500));
    let text = metrics(&metrics_addr);
    let (doc, _) = obs.stop();
    let _ = server.kill();
    let _ = server.wait();
    drop(cgroup);
    let p = probes(&doc);
    let w = &p["workloads"][format!("tlsserver (pid {pid})")];
    assert_eq!(w["cgroup"], path, "{}", p["workloads"]);
    assert_eq!(w["container_id"], CONTAINER);
    assert_eq!(w["pod_uid"], POD);
    let joined: Vec<Value> = std::fs::read_to_string(&lines)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["probe"].is_object())
        .collect();
    assert_eq!(joined.len(), 4, "{joined:?}");
    for l in &joined {
        assert_eq!(l["probe"]["cgroup"], path, "{l}");
        assert_eq!(l["probe"]["container_id"], CONTAINER, "{l}");
        assert_eq!(l["probe"]["pod_uid"], POD, "{l}");
    }
    let series = format!(
        r#"tlsperf_observe_probe_handshakes_total{{process="tlsserver",role="server",result="ok",container_id="{CONTAINER}",pod_uid="{POD}"}} 4"#
    );
    assert!(text.contains(&series), "{text}");
    // The wire's handshakes too, by the server process's cgroup.
    let labels = format!(r#",container_id="{CONTAINER}",pod_uid="{POD}",transport="tcp"}} "#);
    let wire: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with(r#"tlsperf_observe_handshakes_total{role="server",process="tlsserver","#)
                && l.contains(&labels)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(wire, 4.0, "{text}");
}
