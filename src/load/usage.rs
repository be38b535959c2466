//! CPU and memory of processes, from the kernel: this process's CPU with `getrusage`,
//! another process's CPU and resident memory from `/proc/PID/stat` and
//! `/proc/PID/status`, and those of a whole process tree (a server's master and its
//! workers) from every `/proc/*/stat` (Linux).

use std::collections::HashMap;
use std::time::Duration;

/// User + system CPU time of this process so far.
pub fn self_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct we pass; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Time this process's threads have spent so far waiting on a run queue — ready to run,
/// but another task had their CPU — summed over its live threads (the second field of
/// `/proc/self/task/*/schedstat`); `None` where the kernel keeps no such figure. A
/// starved process uses little CPU, so its CPU use cannot tell it is starved; this can.
pub fn self_runqueue_wait() -> Option<Duration> {
    runqueue_wait_in("/proc/self/task").map(Duration::from_nanos)
}

/// A process's run-queue wait so far (ns), summed over its threads
/// (`/proc/PID/task/*/schedstat`).
fn runqueue_wait_of(pid: u32) -> Option<u64> {
    runqueue_wait_in(&format!("/proc/{pid}/task"))
}

/// The run-queue wait (ns) of the threads listed in `tasks` (a `/proc/…/task`
/// directory), summed: the second field of each one's `schedstat`.
fn runqueue_wait_in(tasks: &str) -> Option<u64> {
    let mut total = 0u64;
    let mut any = false;
    for task in std::fs::read_dir(tasks).ok()?.flatten() {
        if let Some(w) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        {
            total = total.saturating_add(w);
            any = true;
        }
    }
    any.then_some(total)
}

/// The CPUs this process may use under its cgroup's CPU quota (cgroup v2 `cpu.max`, v1
/// `cpu.cfs_quota_us` ÷ `cpu.cfs_period_us`; the tightest of its cgroup and the
/// cgroups above it), `None` without a quota or where none can be read. A container
/// limited to half a CPU saturates at 0.5 CPU-seconds a second, whatever its threads.
pub fn cgroup_cpu_limit() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<f64> = None;
    let mut tighten = |v: Option<f64>| {
        if let Some(v) = v.filter(|v| *v > 0.0) {
            best = Some(best.map_or(v, |b: f64| b.min(v)));
        }
    };
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let ancestors = || {
            std::path::Path::new(path)
                .ancestors()
                .map(|p| p.strip_prefix("/").unwrap_or(p).to_path_buf())
                .collect::<Vec<_>>()
        };
        if controllers.is_empty() {
            for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                for rel in ancestors() {
                    let f = std::path::Path::new(root).join(rel).join("cpu.max");
                    tighten(std::fs::read_to_string(f).ok().and_then(|t| {
                        let mut w = t.split_whitespace();
                        let quota: f64 = w.next()?.parse().ok()?;
                        let period: f64 = w.next()?.parse().ok()?;
                        Some(quota / period)
                    }));
                }
            }
        } else if controllers.split(',').any(|c| c == "cpu") {
            for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
                for rel in ancestors() {
                    let dir = std::path::Path::new(root).join(rel);
                    let read = |name: &str| -> Option<f64> {
                        std::fs::read_to_string(dir.join(name))
                            .ok()?
                            .trim()
                            .parse()
                            .ok()
                    };
                    tighten(
                        read("cpu.cfs_quota_us")
                            .zip(read("cpu.cfs_period_us"))
                            .and_then(|(q, p)| (q > 0.0 && p > 0.0).then(|| q / p)),
                    );
                }
            }
        }
    }
    best
}

/// The CPUs a process may run on (`Cpus_allowed_list` in `/proc/PID/status`, as
/// `taskset` or `sched_setaffinity` set it; `None`: this process), or `None` where it
/// cannot be read.
pub fn cpus_allowed(pid: Option<u32>) -> Option<Vec<usize>> {
    let path = pid.map_or_else(
        || "/proc/self/status".to_string(),
        |p| format!("/proc/{p}/status"),
    );
    let text = std::fs::read_to_string(path).ok()?;
    let list = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    parse_cpu_list(list.trim())
}

/// Time the CPUs spent, from `/proc/stat` (clock ticks): all of it, and the part the
/// hypervisor gave to other guests while this machine had work to run (`steal`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Every state's ticks summed (user … steal; guest time is inside user).
    pub total: u64,
    /// Ticks stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTicks {
    /// The share of `self − earlier` that was stolen; `None` when no tick passed.
    pub fn steal_since(&self, earlier: &CpuTicks) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let steal = self.steal.saturating_sub(earlier.steal);
        (total > 0).then(|| steal as f64 / total as f64)
    }
}

/// The ticks of the CPUs `cpus` (`None`: the whole machine) from `/proc/stat`, or
/// `None` where it cannot be read (not Linux).
pub fn cpu_ticks(cpus: Option<&[usize]>) -> Option<CpuTicks> {
    parse_cpu_ticks(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

fn parse_cpu_ticks(stat: &str, cpus: Option<&[usize]>) -> Option<CpuTicks> {
    let mut sum = CpuTicks::default();
    let mut found = false;
    for line in stat.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        let wanted = match cpus {
            None => name.is_empty(),
            Some(list) => name.parse::<usize>().is_ok_and(|c| list.contains(&c)),
        };
        if !wanted {
            continue;
        }
        // user nice system idle iowait irq softirq steal [guest guest_nice]: guest
        // time is already counted in user and nice.
        let ticks: Vec<u64> = fields.take(8).map_while(|f| f.parse().ok()).collect();
        if ticks.len() < 8 {
            return None;
        }
        sum.total += ticks.iter().sum::<u64>();
        sum.steal += ticks[7];
        found = true;
    }
    found.then_some(sum)
}

/// `0-3,6` → `[0, 1, 2, 3, 6]`; `None` for anything else.
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// A process that cannot be sampled.
#[derive(Debug, thiserror::Error)]
#[error("cannot read /proc/{pid}: {reason}")]
pub struct ProcError {
    /// The process.
    pub pid: u32,
    /// Why.
    pub reason: String,
}

impl crate::error::Classify for ProcError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Input
    }
}

/// User + system CPU time of process `pid` so far.
pub fn proc_cpu(pid: u32) -> Result<Duration, ProcError> {
    let err = |reason: String| ProcError { pid, reason };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| err(format!("{e} (is the process running, on this machine?)")))?;
    // Fields after the command name (which may hold spaces and parentheses).
    let after = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| err("unexpected stat format".into()))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat; `after` starts at field 3.
    let ticks = |i: usize| -> Result<u64, ProcError> {
        fields
            .get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| err("unexpected stat format".into()))
    };
    let total = ticks(11)? + ticks(12)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_nanos(total * 1_000_000_000 / hz))
}

/// User + system CPU time of process `pid` so far, to the nanosecond: the kernel's
/// per-process CPU clock (`clock_getcpuclockid`, the scheduler's run time of all its
/// threads, exited ones included) — the same time `/proc/PID/stat` reports as utime +
/// stime, without its rounding to clock ticks (10 ms at `USER_HZ` 100, a few percent of
/// a short round). Falls back to [`proc_cpu`] where that clock cannot be read.
pub fn proc_cpu_precise(pid: u32) -> Result<Duration, ProcError> {
    // Pid 0 and negative pids would name this process's own clock: not another's.
    let Ok(id) = libc::pid_t::try_from(pid) else {
        return proc_cpu(pid);
    };
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes only the clockid we pass.
    if id > 0 && unsafe { libc::clock_getcpuclockid(id, &mut clock) } == 0 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes only the timespec we pass.
        if unsafe { libc::clock_gettime(clock, &mut ts) } == 0 && ts.tv_sec >= 0 {
            return Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
        }
    }
    proc_cpu(pid)
}

/// Resident memory of process `pid` (KiB).
pub fn proc_rss_kib(pid: u32) -> Result<u64, ProcError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| ProcError {
        pid,
        reason: e.to_string(),
    })?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| ProcError {
            pid,
            reason: "no VmRSS in status".into(),
        })
}

/// What `/proc/PID/stat` says of one process.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: u32,
    ppid: u32,
    /// Start time after boot (clock ticks): with the pid, identifies the process even
    /// if its pid is reused.
    start: u64,
    /// utime + stime (clock ticks), all its threads.
    cpu_ticks: u64,
    /// Resident pages.
    rss_pages: u64,
}

fn parse_stat(pid: u32, stat: &str) -> Option<Stat> {
    // Fields after the command name (which may hold spaces and parentheses); the first
    // of them is field 3 (state).
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let num = |field: usize| -> Option<u64> { fields.get(field - 3)?.parse().ok() };
    Some(Stat {
        pid,
        ppid: num(4)? as u32,
        start: num(22)?,
        cpu_ticks: num(14)? + num(15)?,
        rss_pages: num(24)?,
    })
}

fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(
        pid,
        &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
    )
}

/// `root` and every process below it, from a walk over `/proc/*/stat` (threads are not
/// listed there: their CPU is inside their process's utime + stime).
fn tree(root: u32) -> Vec<Stat> {
    let Some(root_stat) = read_stat(root) else {
        return Vec::new();
    };
    let all: Vec<Stat> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != root)
        .filter_map(read_stat)
        .collect();
    let mut children: HashMap<u32, Vec<Stat>> = HashMap::new();
    for s in all {
        children.entry(s.ppid).or_default().push(s);
    }
    let mut out = vec![root_stat];
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.remove(&out[i].pid) {
            out.extend(c);
        }
        i += 1;
    }
    out
}

fn ticks_to_duration(ticks: u64) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / hz)
}

fn page_kib() -> u64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1024) as u64) / 1024
}

/// CPU of a process tree over a run: the tree (the root and its descendants, by parent
/// pid) is found by a walk over every `/proc/*/stat` at the start, at the end and in
/// some samples between ([`TreeCpu::sample`] with `discover`); the other samples read
/// only the processes already known (a walk reads every process on the machine). Each
/// process counts from its CPU at the first sample that saw it (0 for a process that
/// appeared during the run, as it started then) to its CPU at the last sample that saw
/// it: a process that exits during the run counts up to its last sample (what it used
/// after that is missed), and one that appeared and exited between two walks is missed
/// entirely.
#[derive(Debug)]
pub struct TreeCpu {
    root: u32,
    /// (pid, start) → (CPU ticks at the start, CPU ticks at the last sample seen).
    seen: HashMap<(u32, u64), (u64, u64)>,
    /// (pid, start) → (run-queue wait at the start, at the last sample seen), ns.
    waits: HashMap<(u32, u64), (u64, u64)>,
    /// The processes the last sample found.
    alive: Vec<(u32, u64)>,
    samples: u32,
}

impl TreeCpu {
    /// The first sample (a walk); an error when `root` cannot be read.
    pub fn start(root: u32) -> Result<TreeCpu, ProcError> {
        proc_cpu(root)?;
        let mut t = TreeCpu {
            root,
            seen: HashMap::new(),
            waits: HashMap::new(),
            alive: Vec::new(),
            samples: 0,
        };
        t.sample(true);
        Ok(t)
    }

    /// Samples the tree again, finding its processes anew when `discover` (a walk over
    /// `/proc`), else reading those known; returns its resident memory now (KiB, summed
    /// over its processes: pages shared between them count once per process).
    pub fn sample(&mut self, discover: bool) -> u64 {
        let first = self.samples == 0;
        self.samples += 1;
        let found: Vec<Stat> = if discover {
            tree(self.root)
        } else {
            self.alive
                .iter()
                .filter_map(|&(pid, start)| read_stat(pid).filter(|s| s.start == start))
                .collect()
        };
        self.alive.clear();
        let mut rss_pages = 0;
        for s in found {
            rss_pages += s.rss_pages;
            self.alive.push((s.pid, s.start));
            let e = self.seen.entry((s.pid, s.start)).or_insert(if first {
                (s.cpu_ticks, s.cpu_ticks)
            } else {
                (0, 0)
            });
            e.1 = s.cpu_ticks;
            // Only on walks (the first sample, the last, some between): a process's
            // threads' files are read then, not every 100 ms.
            if let Some(w) = discover.then(|| runqueue_wait_of(s.pid)).flatten() {
                let e = self.waits.entry((s.pid, s.start)).or_insert(if first {
                    (w, w)
                } else {
                    (0, 0)
                });
                e.1 = w;
            }
        }
        rss_pages * page_kib()
    }

    /// Time the tree's threads waited on a run queue (ready, another task on their CPU)
    /// between the first sample and the last, read at the walks (a process counts from
    /// the first walk that saw it to the last); `None` where the kernel keeps no such
    /// figure.
    pub fn runqueue_wait(&self) -> Option<Duration> {
        (!self.waits.is_empty()).then(|| {
            Duration::from_nanos(self.waits.values().map(|(a, b)| b.saturating_sub(*a)).sum())
        })
    }

    /// CPU used by the tree between the first sample and the last.
    pub fn cpu(&self) -> Duration {
        ticks_to_duration(self.seen.values().map(|(a, b)| b.saturating_sub(*a)).sum())
    }

    /// Processes seen in the tree.
    pub fn processes(&self) -> u32 {
        self.seen.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stolen_ticks() {
        let stat = "cpu  100 0 50 800 0 0 0 50 0 0\n\
                    cpu0 60 0 20 410 0 0 0 10 0 0\n\
                    cpu1 40 0 30 390 0 0 0 40 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(
            parse_cpu_ticks(stat, None),
            Some(CpuTicks {
                total: 1000,
                steal: 50
            })
        );
        assert_eq!(
            parse_cpu_ticks(stat, Some(&[1])),
            Some(CpuTicks {
                total: 500,
                steal: 40
            })
        );
        assert_eq!(parse_cpu_ticks(stat, Some(&[7])), None);
        let later = CpuTicks {
            total: 700,
            steal: 90,
        };
        let share = later.steal_since(&CpuTicks {
            total: 500,
            steal: 40,
        });
        assert_eq!(share, Some(0.25));
        assert_eq!(later.steal_since(&later), None);
    }

    #[test]
    fn reads_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        let own = cpus_allowed(None).expect("this process's CPUs");
        assert_eq!(own.len(), crate::lab::pin::available_cpus().len());
    }

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        // Burn a little CPU so that both counters move.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        assert!(x != 1);
        assert!(self_cpu() > Duration::ZERO);
        assert!(proc_cpu(pid).unwrap() > Duration::ZERO);
        assert!(proc_rss_kib(pid).unwrap() > 100);
        assert!(proc_cpu(u32::MAX).is_err());
        assert!(proc_cpu_precise(u32::MAX).is_err());
        // The precise clock and /proc agree to a few clock ticks.
        let (a, b) = (proc_cpu_precise(pid).unwrap(), proc_cpu(pid).unwrap());
        let gap = a.abs_diff(b);
        assert!(gap < Duration::from_millis(50), "{a:?} vs {b:?}");
    }

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 30 7 9 20 0 3 0 123456 1000 77 18446744073709551615";
        let s = parse_stat(4242, line).unwrap();
        assert_eq!((s.pid, s.ppid, s.start), (4242, 17, 123456));
        assert_eq!(s.cpu_ticks, 280, "utime + stime, not the children's");
        assert_eq!(s.rss_pages, 77);
        assert!(parse_stat(1, "garbage").is_none());
    }

    #[test]
    fn counts_a_busy_child_of_an_idle_parent() {
        busy_child("sh -c 'while :; do :; done' & wait");
    }

    #[test]
    fn counts_a_child_that_appears_during_the_run_from_zero() {
        busy_child("sleep 0.2; sh -c 'while :; do :; done' & wait");
    }

    /// `script` (run by sh) leads to a child burning CPU while sh waits.
    fn busy_child(script: &str) {
        use std::os::unix::process::CommandExt;
        // The parent waits; its child burns CPU. Its own process group, killed at the end.
        let mut parent = std::process::Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = parent.id();
        let mut t = TreeCpu::start(pid).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while t.cpu() < Duration::from_millis(100) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            assert!(t.sample(true) > 0);
        }
        let (cpu, n) = (t.cpu(), t.processes());
        let parent_cpu = proc_cpu(pid).unwrap();
        // SAFETY: kill takes no pointers; the group is the one we started.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        let _ = parent.wait();
        assert!(cpu >= Duration::from_millis(100), "{cpu:?}");
        assert!(n >= 2, "{n}");
        // The root alone (what was counted before) used almost nothing.
        assert!(parent_cpu * 2 < cpu, "{parent_cpu:?} {cpu:?}");
    }
}
