//! The kernel's removal of the probes, handed to a process of its own so that tlsperf can
//! exit at once.
//!
//! The kernel removes a uprobe or tracepoint attachment when the last file descriptor of
//! its link is closed, one at a time, each after a grace period: about 1.9 s for the 33
//! attachments of an OpenSSL + Go run on this kind of VM, however they are closed, and a
//! process cannot exit before the closes it started are done. [`Holder::spawn`] forks a
//! process (`tlsperf-detach`, in a session of its own) that keeps a copy of every link
//! and perf-event descriptor and nothing else — no stdin, stdout or stderr, no socket, no
//! file — and waits; the caller then drops its links (cheap: the copies keep them
//! alive) and [`Holder::release`]s it, and the holder's exit is what removes them. The
//! probes are disarmed before: until its link is gone a program runs, and returns at
//! once.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The process holding the links; [`Holder::release`] lets it go.
#[derive(Debug)]
pub struct Holder {
    /// The write end of a pipe the holder reads until it closes.
    release: OwnedFd,
}

/// Is this open file one that keeps an attachment in place?
fn is_attachment(target: &std::path::Path) -> bool {
    matches!(
        target.to_str(),
        Some("anon_inode:bpf_link" | "anon_inode:[perf_event]")
    )
}

/// This process's link and perf-event descriptors, ascending.
fn attachments() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut fds: Vec<i32> = dir
        .flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(e.path()).ok()?;
            is_attachment(&target).then_some(fd)
        })
        .collect();
    fds.sort_unstable();
    fds
}

/// The descriptor ranges to close so that only `keep` (ascending) stays open.
fn gaps(keep: &[i32]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(keep.len() + 1);
    let mut from: u32 = 0;
    for &fd in keep {
        let fd = fd as u32;
        if fd > from {
            out.push((from, fd - 1));
        }
        from = fd + 1;
    }
    out.push((from, u32::MAX));
    out
}

impl Holder {
    /// Forks the holder, when this process has attachments and the fork works.
    pub fn spawn() -> Option<Holder> {
        let mut keep = attachments();
        if keep.is_empty() {
            return None;
        }
        let mut ends = [0i32; 2];
        // SAFETY: `ends` has room for the two descriptors.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: each end is a descriptor just opened, owned here alone.
        let (read, release) =
            unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        keep.push(read.as_raw_fd());
        keep.sort_unstable();
        // Everything the child does after the fork is computed here: a forked child of a
        // threaded process may only make async-signal-safe calls.
        let close = gaps(&keep);
        let wait_on = read.as_raw_fd();
        let name = c"tlsperf-detach";
        // SAFETY: the child makes only async-signal-safe calls (fork, setsid, prctl,
        // close_range, read, _exit) on memory prepared before the fork.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: see above.
            unsafe {
                // The grandchild holds the links; the child exits at once, reaped below.
                if libc::fork() != 0 {
                    libc::_exit(0);
                }
                libc::setsid();
                libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0);
                for &(first, last) in &close {
                    libc::syscall(libc::SYS_close_range, first, last, 0);
                }
                let mut byte = 0u8;
                loop {
                    let n = libc::read(wait_on, (&raw mut byte).cast(), 1);
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                libc::_exit(0);
            }
        }
        drop(read);
        if child < 0 {
            return None;
        }
        let mut status = 0;
        // SAFETY: a child of this process, which exits right after its own fork.
        unsafe { libc::waitpid(child, &mut status, 0) };
        Some(Holder { release })
    }

    /// Lets the holder exit (once this process has dropped its own links): its exit
    /// removes the attachments.
    pub fn release(self) {
        drop(self.release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_leave_only_the_kept_descriptors_open() {
        assert_eq!(gaps(&[]), vec![(0, u32::MAX)]);
        assert_eq!(gaps(&[0, 1]), vec![(2, u32::MAX)]);
        assert_eq!(gaps(&[3, 4, 9]), vec![(0, 2), (5, 8), (10, u32::MAX)]);
    }

    #[test]
    fn only_links_and_perf_events_are_attachments() {
        assert!(is_attachment(std::path::Path::new("anon_inode:bpf_link")));
        assert!(is_attachment(std::path::Path::new(
            "anon_inode:[perf_event]"
        )));
        assert!(!is_attachment(std::path::Path::new("anon_inode:bpf-map")));
        assert!(!is_attachment(std::path::Path::new("socket:[1234]")));
        assert!(!is_attachment(std::path::Path::new("/dev/null")));
    }
}
