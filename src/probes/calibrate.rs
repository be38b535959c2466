//! The probe pair's own time: what an entry uprobe and a uretprobe add to the interval
//! they time, measured at attach time so that it is not charged to the function timed.
//!
//! An OpenSSL part's time runs from its entry probe's clock read to its return probe's.
//! Inside it are the entry probe's way back to the function (the rest of the kernel's
//! trap handling, the emulated first instruction) and the return probe's way in (the
//! return trampoline, the trap into the kernel), a microsecond or so on a VM, whatever
//! the function does. [`measure`] puts the same pair of programs' kind (clock read at
//! entry, clock read at return) on a function of tlsperf's own that does nothing but
//! begin with the instruction the libcrypto functions begin with (`push %rbp`, which
//! the kernel emulates), calls it [`CALLS`] times and takes the median interval: the
//! pair's own time on this machine and kernel, which the BPF program takes off each
//! timed call (`settings.pair_ns`).
//!
//! Owns: the do-nothing function, where it lies in tlsperf's file, the calibration run.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use aya::Ebpf;
use aya::maps::Array;
use aya::programs::uprobe::UProbeScope;

use super::ProbeError;

/// How [`measure`] attaches a program: (the object, the program's name, the file, the
/// offset in it, what it is in words, whose calls fire it). The loader's, which keeps the
/// attachment with the session's others.
pub type Attach<'a> =
    dyn FnMut(&mut Ebpf, &str, &Path, u64, &str, UProbeScope) -> Result<(), ProbeError> + 'a;

/// Calls timed; the BPF side keeps this many (`CALIB_SLOTS` of probes.bpf.c).
pub const CALLS: u32 = 1024;

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".pushsection .text.tlsperf_probe_calibration_point,\"ax\",@progbits",
    ".globl tlsperf_probe_calibration_point",
    ".type tlsperf_probe_calibration_point,@function",
    "tlsperf_probe_calibration_point:",
    "push rbp",
    "mov rbp, rsp",
    "pop rbp",
    "ret",
    ".size tlsperf_probe_calibration_point, .-tlsperf_probe_calibration_point",
    ".popsection",
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    /// Does nothing; begins with `push %rbp` as the probed libcrypto functions do.
    fn tlsperf_probe_calibration_point();
}

/// The calibration's outcome.
#[derive(Debug, Clone, Copy)]
pub struct PairTime {
    /// Median of the intervals, ns.
    pub median_ns: u32,
    /// Intervals measured.
    pub calls: u32,
}

/// Where `addr` lies in the file mapped there (`/proc/self/maps`): (file, offset).
fn file_offset(addr: u64) -> Option<(PathBuf, u64)> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (start, end) = f.next()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        if !(start..end).contains(&addr) {
            return None;
        }
        let offset = u64::from_str_radix(f.nth(1)?, 16).ok()?;
        let path = f.nth(2)?;
        path.starts_with('/')
            .then(|| (PathBuf::from(path), addr - start + offset))
    })
}

/// Measures the pair's own time. Its two attachments are made by `attach`, which keeps
/// them to be detached with the session's others (removing a uprobe waits for a grace
/// period; nothing calls the point again). `None` where the point cannot be found in a
/// file (not x86-64, or tlsperf's file replaced since it started): nothing is then taken
/// off.
pub fn measure(ebpf: &mut Ebpf, attach: &mut Attach<'_>) -> Result<Option<PairTime>, ProbeError> {
    #[cfg(target_arch = "x86_64")]
    {
        let addr = tlsperf_probe_calibration_point as *const () as u64;
        let Some((path, offset)) = file_offset(addr) else {
            return Ok(None);
        };
        let Some(pid) = NonZeroU32::new(std::process::id()) else {
            return Ok(None);
        };
        if !path.exists() {
            return Ok(None);
        }
        let what = format!("the calibration point in {}", path.display());
        for prog in ["calib_enter", "calib_return"] {
            attach(
                ebpf,
                prog,
                &path,
                offset,
                &what,
                UProbeScope::OneProcess(pid),
            )?;
        }
        for _ in 0..CALLS {
            // SAFETY: the function only pushes and pops a register and returns.
            unsafe { tlsperf_probe_calibration_point() };
        }
        let map = ebpf
            .map("calib")
            .ok_or_else(|| ProbeError::Load("the BPF object has no calib map".into()))?;
        let calib: Array<_, u64> =
            Array::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
        let mut ns: Vec<u64> = (0..CALLS)
            .filter_map(|i| calib.get(&i, 0).ok())
            .filter(|&v| v > 0)
            .collect();
        if ns.is_empty() {
            return Ok(None);
        }
        ns.sort_unstable();
        Ok(Some(PairTime {
            median_ns: u32::try_from(ns[ns.len() / 2]).unwrap_or(u32::MAX),
            calls: ns.len() as u32,
        }))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (ebpf, attach);
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_point_is_found_in_this_file() {
        #[cfg(target_arch = "x86_64")]
        {
            let addr = tlsperf_probe_calibration_point as *const () as u64;
            let (path, offset) = file_offset(addr).expect("mapped from a file");
            let bytes = std::fs::read(&path).unwrap();
            // push %rbp; mov %rsp,%rbp; pop %rbp; ret
            assert_eq!(
                &bytes[offset as usize..offset as usize + 6],
                &[0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3]
            );
        }
    }
}
