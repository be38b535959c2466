//! The calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`): the time this thread has
//! run on a CPU, user and kernel, with nanosecond resolution. Time the thread spent
//! waiting for a CPU while other processes ran is not in it, so what a thread measures
//! with it does not grow on a busy machine the way wall-clock time does.
//!
//! Reading it is a system call (the vDSO serves only the wall clocks), about a few
//! hundred nanoseconds: callers that read it per operation measure and subtract that
//! cost ([`super::instrument::clock_bias_ns`]).

use std::time::Duration;

/// A reading of the calling thread's CPU clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ThreadCpu(Duration);

impl ThreadCpu {
    /// The CPU time this thread has used so far.
    pub fn now() -> ThreadCpu {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes only the timespec we pass. It cannot fail for
        // CLOCK_THREAD_CPUTIME_ID with a valid pointer on Linux; if it ever did, `ts`
        // stays zero and the readings around a call are equal (nothing is charged).
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ThreadCpu(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    }

    /// CPU time this thread has used since this reading (must be read on the same
    /// thread; zero if the clock went backwards).
    pub fn elapsed(&self) -> Duration {
        ThreadCpu::now().0.saturating_sub(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_work_not_sleep() {
        let t = ThreadCpu::now();
        std::thread::sleep(Duration::from_millis(30));
        let slept = t.elapsed();
        let t = ThreadCpu::now();
        let mut x = 0u64;
        let wall = std::time::Instant::now();
        while wall.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let worked = t.elapsed();
        assert!(
            slept < Duration::from_millis(10),
            "sleeping used {slept:?} of CPU"
        );
        assert!(
            worked > slept,
            "work {worked:?} not more than sleep {slept:?}"
        );
    }
}
