//! Waiting for an open-loop request's intended send instant without the generator's own
//! lateness becoming part of the measured latency.
//!
//! tokio's timer has millisecond granularity: `sleep_until(t)` returned about 1.3 ms
//! after `t` (the deadline rounded up to the next millisecond tick, then the `epoll_wait`
//! timeout's own slack), and the corrected latency charged that to the server. Each
//! connection slot waits instead in two steps:
//!
//! 1. on its own Linux `timerfd` armed with an absolute `CLOCK_MONOTONIC` expiry
//!    (`TFD_TIMER_ABSTIME`; the clock behind [`Instant`]; no timer slack applies to
//!    timerfd expiries), registered with tokio's I/O driver through [`AsyncFd`], so no
//!    worker thread is blocked while it waits. It is armed a *lead* before `t`: waking a
//!    sleeping thread took 65–95 µs at the median on the 2-vCPU VM this was measured on
//!    (a halted vCPU has to be scheduled again), far more than the timer's error. The
//!    lead follows the wake-ups observed (a moving average, 1.5 × it + 20 µs, within
//!    20–300 µs);
//! 2. then until `t` in a cooperative spin: [`tokio::task::yield_now`] in a loop, which
//!    lets the worker poll its I/O and run every other ready task between two looks at
//!    the clock, so other connections' I/O is not held up (a blocking spin would hold
//!    it, and corrupt their latencies).
//!
//! When a timerfd cannot be created (out of file descriptors), the slot uses tokio's
//! timer for step 1; the lateness that adds is measured and reported like any other.
//!
//! The spin's looks at the clock are counted ([`spin_looks`]), and one look's CPU cost is
//! measured once per process ([`spin_look_cost`]), so that the generator's CPU can be
//! reported without its spinning: at high rates, with sends due closer together than the
//! lead, every slot spins and a thread that could send three times as fast shows ~100%
//! busy.
//!
//! On a machine busy with other processes, a woken thread may also wait for the running
//! task's scheduler slice to end: [`request_short_slice`] asks the kernel for short
//! slices for the threads that send, which lets their wake-ups preempt.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Bounds of the lead (how long before the instant the timer is armed).
const LEAD_MIN: Duration = Duration::from_micros(20);
const LEAD_MAX: Duration = Duration::from_micros(300);

/// Waits until given instants, as precisely as the kernel allows.
pub(crate) struct Pacer {
    timer: Option<Timerfd>,
    /// Moving average of how late the timer woke us (ns).
    wake_ns: f64,
}

struct Timerfd {
    fd: AsyncFd<OwnedFd>,
    /// The same moment as an [`Instant`] and as a `CLOCK_MONOTONIC` reading; the
    /// reading was taken second, so instants mapped through it are never early.
    base: (Instant, Duration),
}

impl Pacer {
    /// A pacer with its own timerfd (tokio's timer when none can be created). Must be
    /// called inside a tokio runtime with I/O enabled.
    pub(crate) fn new() -> Pacer {
        Pacer {
            timer: Timerfd::new(),
            wake_ns: 100e3,
        }
    }

    /// True when it waits on a timerfd (false: tokio's millisecond timer).
    #[cfg(test)]
    pub(crate) fn precise(&self) -> bool {
        self.timer.is_some()
    }

    /// How long before an instant the timer is armed.
    fn lead(&self) -> Duration {
        Duration::from_nanos((self.wake_ns * 1.5) as u64 + LEAD_MIN.as_nanos() as u64).min(LEAD_MAX)
    }

    /// Returns at `t` or just after, never before.
    pub(crate) async fn wait_until(&mut self, t: Instant) {
        let wake_at = t.checked_sub(self.lead()).unwrap_or(t);
        if Instant::now() < wake_at {
            match &self.timer {
                Some(timer) => {
                    if timer.wait_until(wake_at).await.is_err() {
                        // The timerfd failed (it should not): tokio's timer from now on.
                        self.timer = None;
                        tokio::time::sleep_until(wake_at.into()).await;
                    }
                }
                None => tokio::time::sleep_until(wake_at.into()).await,
            }
            let late = Instant::now().saturating_duration_since(wake_at);
            self.wake_ns += (late.as_nanos() as f64 - self.wake_ns) / 8.0;
        }
        while Instant::now() < t {
            SPIN_LOOKS.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
        }
    }
}

/// Looks at the clock in the spin that found the instant still ahead, process-wide.
static SPIN_LOOKS: AtomicU64 = AtomicU64::new(0);

/// The spin's looks at the clock so far, in this process (every pacer's).
pub(crate) fn spin_looks() -> u64 {
    SPIN_LOOKS.load(Ordering::Relaxed)
}

/// The CPU one look of the spin costs when nothing else is ready to run (a clock read
/// and a `yield_now` through the scheduler): measured once per process, on a thread of
/// its own with a one-worker runtime of the kind the generator runs, as the thread CPU
/// time of 5,000 looks. When other tasks are ready, a look takes longer (they run in
/// between) but the spin's own part of it stays this: looks × this estimates the CPU
/// the spin took, never the other tasks' work. `None` where it cannot be measured.
pub(crate) fn spin_look_cost() -> Option<Duration> {
    static COST: OnceLock<Option<Duration>> = OnceLock::new();
    *COST.get_or_init(|| {
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                tokio::spawn(async {
                    const LOOKS: u32 = 5_000;
                    let far = Instant::now() + Duration::from_secs(3600);
                    let t0 = thread_cpu();
                    for _ in 0..LOOKS {
                        if Instant::now() >= far {
                            break;
                        }
                        tokio::task::yield_now().await;
                    }
                    Some(thread_cpu().saturating_sub(t0) / LOOKS)
                })
                .await
                .ok()
                .flatten()
            })
        })
        .join()
        .ok()
        .flatten()
    })
}

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime only writes the timespec we pass.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The scheduler time slice the open loop's threads ask for (the kernel's minimum).
const SHORT_SLICE: Duration = Duration::from_micros(100);

/// Asks the kernel to give the calling thread short time slices (EEVDF, Linux 6.12 and
/// later: `sched_setattr` with `sched_runtime` as the slice, policy and nice kept; no
/// privilege needed). A thread with a shorter slice gets an earlier deadline, so when
/// its timer wakes it on a busy machine it preempts the running task instead of waiting
/// for that task's slice (0.75 ms by default) to end. Returns false where the kernel
/// does not allow it (older kernels ignore or refuse it; nothing else changes).
pub fn request_short_slice() -> bool {
    // SAFETY: sched_attr is plain data; zeroed is a valid value.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::sched_attr>() as u32;
    // SAFETY: pid 0 (this thread), a pointer to a struct of the size passed, flags 0.
    if unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr, size, 0) } != 0 {
        return false;
    }
    if attr.sched_policy != libc::SCHED_OTHER as u32 {
        return false;
    }
    attr.size = size;
    attr.sched_runtime = SHORT_SLICE.as_nanos() as u64;
    // SAFETY: pid 0 (this thread), a valid struct with its size, flags 0.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr, 0) == 0 }
}

fn monotonic_now() -> Duration {
    // SAFETY: clock_gettime only writes the timespec we pass.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and pointer; CLOCK_MONOTONIC cannot fail on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Timerfd {
    fn new() -> Option<Timerfd> {
        // SAFETY: timerfd_create takes no pointers; a negative result is an error.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return None;
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the OwnedFd owns the descriptor and keeps it open, unchanged, for as
        // long as the AsyncFd that owns it lives.
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }.ok()?;
        let instant = Instant::now();
        let mono = monotonic_now();
        Some(Timerfd {
            fd,
            base: (instant, mono),
        })
    }

    async fn wait_until(&self, t: Instant) -> std::io::Result<()> {
        let at = self.base.1 + t.saturating_duration_since(self.base.0);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: at.as_secs() as libc::time_t,
                // An all-zero value would disarm the timer; `at` is after boot.
                tv_nsec: at.subsec_nanos().max(1) as libc::c_long,
            },
        };
        let raw = self.fd.get_ref().as_raw_fd();
        // SAFETY: a valid timerfd and itimerspec; the old value is not asked for.
        if unsafe {
            libc::timerfd_settime(raw, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        loop {
            let mut guard = self.fd.readable().await?;
            let read = guard.try_io(|fd| {
                let mut expirations = 0u64;
                // SAFETY: reads 8 bytes into a u64 owned by this frame.
                let n = unsafe {
                    libc::read(
                        fd.get_ref().as_raw_fd(),
                        (&mut expirations as *mut u64).cast(),
                        8,
                    )
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match read {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                // Not expired yet (a stale readiness): wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn never_returns_before_the_instant() {
        let mut p = Pacer::new();
        assert!(p.precise(), "a timerfd can be created here");
        let start = Instant::now();
        for k in 1..=20u32 {
            let t = start + Duration::from_micros(700) * k;
            p.wait_until(t).await;
            assert!(Instant::now() >= t);
        }
        // An instant already past returns at once.
        p.wait_until(start).await;
    }

    /// The spin is counted, and one look's cost is measured: above zero, below what a
    /// look that did more than read the clock and yield would cost.
    #[tokio::test]
    async fn the_spin_is_counted_and_costed() {
        let mut p = Pacer::new();
        let before = spin_looks();
        // Sooner than the lead: all of it is spin.
        p.wait_until(Instant::now() + Duration::from_micros(15))
            .await;
        assert!(spin_looks() > before);
        let cost = tokio::task::spawn_blocking(spin_look_cost)
            .await
            .unwrap()
            .expect("measured");
        assert!(
            cost > Duration::ZERO && cost < Duration::from_micros(50),
            "{cost:?}"
        );
    }
}
