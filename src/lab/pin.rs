//! Keeping the load generator and the servers on different CPUs (Linux
//! `sched_setaffinity`): with two or more CPUs available to the process, the lab
//! process — the load generator — runs on the first and every `tlsperf serve` child on
//! the second, so that a server's CPU per handshake is not what is left of a core the
//! client also wants.

use serde::{Deserialize, Serialize};

/// Where the lab's processes ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinning {
    /// CPUs the lab process could use when it started (`sched_getaffinity`).
    pub available: Vec<usize>,
    /// The CPU the lab process (the load generator) was pinned to; `None`: not pinned.
    pub client_cpu: Option<usize>,
    /// The CPU every `tlsperf serve` child was pinned to; `None`: not pinned.
    pub server_cpu: Option<usize>,
    /// In words, with the reason when not pinned.
    pub note: String,
}

/// The CPUs this thread may run on.
pub fn available_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is the empty set; sched_getaffinity writes only into it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 (this thread) with the size of the set we pass.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i is below CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Restricts thread `tid` (0: the calling thread) to `cpu`.
fn set_affinity(tid: libc::pid_t, cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: callers pass a CPU from `available_cpus`, below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: a valid set of the size given.
    if unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Pins every thread of this process to the first available CPU and plans the servers
/// on the second, when at least two are available; call it before starting the runtime
/// (threads started later inherit the calling thread's CPU). With one CPU, or when the
/// kernel refuses, nothing changes and the note says why.
pub fn pin_client() -> Pinning {
    let available = available_cpus();
    let mut p = Pinning {
        available: available.clone(),
        ..Pinning::default()
    };
    if available.len() < 2 {
        p.note = format!(
            "not pinned: {} CPU available to the process, so the load generator and the servers share it",
            available.len()
        );
        return p;
    }
    let (client, server) = (available[0], available[1]);
    // Every thread there is now (normally just this one).
    let tids: Vec<libc::pid_t> = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let mut result = set_affinity(0, client);
    for tid in tids {
        if result.is_ok() {
            result = set_affinity(tid, client);
        }
    }
    match result {
        Ok(()) => {
            p.client_cpu = Some(client);
            p.server_cpu = Some(server);
            p.note = format!(
                "load generator (the lab process) pinned to CPU {client}, every server to CPU {server} (sched_setaffinity; CPUs available: {})",
                list(&available)
            );
        }
        Err(e) => {
            p.note = format!("not pinned: sched_setaffinity failed ({e})");
        }
    }
    p
}

/// Not pinned, and why (e.g. `--target`: the server is not the lab's).
pub fn not_pinned(why: &str) -> Pinning {
    Pinning {
        available: available_cpus(),
        client_cpu: None,
        server_cpu: None,
        note: format!("not pinned: {why}"),
    }
}

fn list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs in a server child between fork and exec: restricts it to `cpu`.
pub(crate) fn pin_self_to(cpu: usize) -> std::io::Result<()> {
    set_affinity(0, cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_has_cpus_and_pinning_a_thread_sticks() {
        let cpus = available_cpus();
        assert!(!cpus.is_empty());
        // In a thread of its own, so that the test harness's other threads are untouched.
        let last = *cpus.last().unwrap();
        let seen = std::thread::spawn(move || {
            pin_self_to(last).unwrap();
            available_cpus()
        })
        .join()
        .unwrap();
        assert_eq!(seen, [last]);
        let n = not_pinned("--target");
        assert!(n.client_cpu.is_none() && n.note.contains("--target"));
    }
}
