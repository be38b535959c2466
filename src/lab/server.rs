//! The lab's servers: `tlsperf serve` children of this process on ephemeral loopback
//! ports, each in its own process so that its CPU and memory are measured apart from the
//! load generator's, stopped (SIGTERM, then killed) when dropped.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::LabError;

/// A running server instance.
#[derive(Debug)]
pub struct LabServer {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl LabServer {
    /// Starts `EXE serve --listen 127.0.0.1:0 --json --threads 1 ARGS` and waits (at most
    /// 20 s) for the line saying where it listens. It stops by itself after `bound` in
    /// any case. With `cpu`, the child (every thread it starts) runs on that CPU only;
    /// with `netns`, it runs in that network namespace (the host's, when the lab's thread
    /// is on the client's side of a link).
    pub fn start(
        exe: &Path,
        args: &[String],
        bound: Duration,
        cpu: Option<usize>,
        netns: Option<&OwnedFd>,
    ) -> Result<LabServer, LabError> {
        let netns = netns.map(|f| f.as_raw_fd());
        let mut cmd = Command::new(exe);
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec the closure only makes the prctl, setns and
            // sched_setaffinity system calls (async-signal-safe; no allocation, no locks);
            // the namespace descriptor outlives the spawn (the caller holds it).
            unsafe {
                cmd.pre_exec(move || {
                    // The server dies with the lab, however the lab ends (a second Ctrl-C,
                    // SIGKILL): no server outlives the run that started it.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if let Some(fd) = netns
                        && libc::setns(fd, libc::CLONE_NEWNET) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    match cpu {
                        Some(cpu) => super::pin::pin_self_to(cpu),
                        None => Ok(()),
                    }
                });
            }
        }
        cmd.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--json",
            "--threads",
            "1",
        ])
        .arg("--duration")
        .arg(format!("{}s", bound.as_secs().max(1)))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let what = format!("tlsperf serve {}", args.join(" "));
        let mut child = cmd.spawn().map_err(|source| LabError::Spawn {
            what: what.clone(),
            source,
        })?;
        let stdout = child.stdout.take();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            if let Some(out) = stdout {
                let mut r = BufReader::new(out);
                let _ = r.read_line(&mut line);
                let _ = tx.send(line);
                // Keep draining so that the server never blocks on a full pipe.
                let mut sink = Vec::new();
                let _ = r.read_to_end(&mut sink);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let line = loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => break line,
                Err(_) if Instant::now() < deadline => {
                    if let Ok(Some(_)) = child.try_wait() {
                        break String::new();
                    }
                }
                Err(_) => break String::new(),
            }
        };
        let addr = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["addr"].as_str().and_then(|a| a.parse().ok()));
        match addr {
            Some(addr) => {
                // Drain stderr too.
                if let Some(mut err) = child.stderr.take() {
                    std::thread::spawn(move || {
                        let mut sink = Vec::new();
                        let _ = err.read_to_end(&mut sink);
                    });
                }
                Ok(LabServer { child, addr })
            }
            None => {
                let _ = child.kill();
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                let _ = child.wait();
                Err(LabError::ServerStart {
                    what,
                    stderr: err.trim().to_string(),
                })
            }
        }
    }

    /// The process id (its CPU and memory are sampled from /proc).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for LabServer {
    fn drop(&mut self) {
        // SIGTERM: the server drains and exits; killed if it has not within a second.
        // Invariant-free: a pid that fits in u32 fits in pid_t on Linux.
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a pid we spawned and have not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
