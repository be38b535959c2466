//! CPU and memory of processes, from the kernel: this process's CPU with `getrusage`,
//! another process's CPU and resident memory from `/proc/PID/stat` and
//! `/proc/PID/status` (Linux).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
