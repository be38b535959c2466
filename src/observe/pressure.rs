//! The machine's CPU pressure over a window: the share of its time in which at least one
//! task was runnable and waiting for a CPU (Linux PSI, `/proc/pressure/cpu`, the `some`
//! line's `total` in µs, read when each window closes). A handshake that slowed while the
//! whole machine was short of CPU waited for a CPU, not for the server's own work; the
//! window records and anomaly events carry it so that the reader can tell.

use std::path::{Path, PathBuf};

/// Where the kernel publishes CPU pressure.
pub const PSI_CPU: &str = "/proc/pressure/cpu";

/// The `some` total (µs) of a PSI file's text.
pub fn some_total_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("total="))?
        .parse()
        .ok()
}

/// Readings of the CPU pressure, one per window.
#[derive(Debug)]
pub struct CpuPressure {
    path: PathBuf,
    /// The last reading: (the wall clock, ns; the `some` total, µs).
    last: Option<(u64, u64)>,
}

impl CpuPressure {
    /// Readings of `path` (normally [`PSI_CPU`]); the first is taken now.
    pub fn new(path: &Path, now_ns: u64) -> CpuPressure {
        let mut p = CpuPressure {
            path: path.to_path_buf(),
            last: None,
        };
        p.last = p.read().map(|t| (now_ns, t));
        p
    }

    fn read(&self) -> Option<u64> {
        some_total_us(&std::fs::read_to_string(&self.path).ok()?)
    }

    /// The share (0–1) of the time since the last reading in which some task waited for a
    /// CPU; `None` without PSI (an older kernel, or `psi=0`) or when no time passed.
    pub fn share(&mut self, now_ns: u64) -> Option<f64> {
        let total = self.read()?;
        let last = self.last.replace((now_ns, total));
        let (then_ns, then_total) = last?;
        let elapsed_us = now_ns.checked_sub(then_ns)? as f64 / 1e3;
        (elapsed_us > 0.0).then(|| (total.saturating_sub(then_total) as f64 / elapsed_us).min(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_the_stalled_time_over_the_time_between_readings() {
        assert_eq!(
            some_total_us(
                "some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
            Some(123_456)
        );
        assert_eq!(some_total_us("full avg10=0 total=5\n"), None);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cpu");
        let write = |total: u64| {
            std::fs::write(&f, format!("some avg10=0 avg60=0 avg300=0 total={total}\n")).unwrap()
        };
        write(1_000_000);
        let mut p = CpuPressure::new(&f, 0);
        // 10 s later, 2.5 s more stalled: 25%.
        write(3_500_000);
        let s = p.share(10_000_000_000).unwrap();
        assert!((s - 0.25).abs() < 1e-9, "{s}");
        assert_eq!(p.share(10_000_000_000), None, "no time passed");
        let mut none = CpuPressure::new(&dir.path().join("absent"), 0);
        assert_eq!(none.share(1_000_000_000), None);
    }
}
