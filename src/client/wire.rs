//! The instants at which a connection's bytes crossed the kernel boundary, taken at the
//! system call that moved them: a *send* is stamped right before the `write`/`send`
//! system call that handed the bytes to the kernel (so a preemption of our thread after
//! the call returns — on loopback the peer is often woken onto our CPU by that very
//! write — cannot move the stamp past the peer's reaction). A *receive* is stamped by the
//! kernel where it can be: with software receive timestamps (`SO_TIMESTAMPING`,
//! `SOF_TIMESTAMPING_RX_SOFTWARE`) each segment is stamped as it enters the network
//! stack, and the `recvmsg` that returns bytes reports the stamp of the last segment it
//! read from, so the receive is the moment its last byte arrived, whenever our task got
//! to run. The gap between that moment and the return of our `recvmsg` is our own
//! wake-up delay, kept beside the stamp ([`WireStamps::last_receive_delay`]) and never
//! charged to the server. Without kernel stamps (refused by the socket, or a segment that
//! carries none) a receive is stamped right after the system call that returned it.
//! Every phase boundary of [`super::timeline`] is one of these stamps.
//!
//! The stamps live behind an `Arc` of atomics so that code which no longer owns the
//! stream (hyper's HTTP/2 connection task owns it after the handshake) can still read
//! them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where one connection records its last send and last receive (see the module docs).
#[derive(Debug, Clone)]
pub struct WireStamps(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// The origin of the offsets below.
    base: Instant,
    /// Nanoseconds after `base` + 1 of the last send (0: none yet).
    last_send: AtomicU64,
    /// Nanoseconds after `base` + 1 of the last receive (0: none yet).
    last_recv: AtomicU64,
    /// Sends so far (system calls that accepted at least one byte).
    sends: AtomicU64,
    /// Nanoseconds + 1 from the kernel's receive stamp of the last receive to the return
    /// of its system call (0: not known).
    last_recv_delay: AtomicU64,
    /// The socket reports kernel receive stamps.
    kernel: std::sync::atomic::AtomicBool,
}

impl Default for WireStamps {
    fn default() -> Self {
        Self::new()
    }
}

impl WireStamps {
    /// No crossing yet; offsets count from now.
    pub fn new() -> Self {
        WireStamps(Arc::new(Inner {
            base: Instant::now(),
            last_send: AtomicU64::new(0),
            last_recv: AtomicU64::new(0),
            sends: AtomicU64::new(0),
            last_recv_delay: AtomicU64::new(0),
            kernel: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// Asks the kernel to stamp what `fd` receives ([`request_kernel_stamps`]) and
    /// remembers whether it will.
    pub fn use_kernel_stamps(&self, fd: std::os::fd::RawFd) -> bool {
        let on = request_kernel_stamps(fd);
        self.0.kernel.store(on, Ordering::Release);
        on
    }

    /// True when receives are read with the kernel's stamps.
    pub fn kernel_stamps(&self) -> bool {
        self.0.kernel.load(Ordering::Acquire)
    }

    fn encode(&self, at: Instant) -> u64 {
        let ns = at.saturating_duration_since(self.0.base).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1) + 1
    }

    fn decode(&self, v: u64) -> Option<Instant> {
        (v != 0).then(|| self.0.base + Duration::from_nanos(v - 1))
    }

    /// Records a send system call that accepted bytes; `at` was read right before it.
    pub fn sent(&self, at: Instant) {
        self.0.last_send.store(self.encode(at), Ordering::Release);
        self.0.sends.fetch_add(1, Ordering::AcqRel);
    }

    /// Records a receive system call that returned (data or the end of the stream);
    /// `at` was read right after it.
    pub fn received(&self, at: Instant) {
        self.0.last_recv.store(self.encode(at), Ordering::Release);
        self.0.last_recv_delay.store(0, Ordering::Release);
    }

    /// Records a receive whose last byte the kernel stamped `delay` before the system
    /// call returned at `returned`: the receive is `returned − delay`.
    pub fn received_stamped(&self, returned: Instant, delay: Duration) {
        let at = returned.checked_sub(delay).unwrap_or(returned);
        self.0.last_recv.store(self.encode(at), Ordering::Release);
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX - 1);
        self.0.last_recv_delay.store(ns + 1, Ordering::Release);
    }

    /// For the last receive, how long after the kernel stamped its last byte our system
    /// call returned it: our own wake-up delay (`None` without a kernel stamp).
    pub fn last_receive_delay(&self) -> Option<Duration> {
        let v = self.0.last_recv_delay.load(Ordering::Acquire);
        (v != 0).then(|| Duration::from_nanos(v - 1))
    }

    /// The instant right before the last send system call.
    pub fn last_send(&self) -> Option<Instant> {
        self.decode(self.0.last_send.load(Ordering::Acquire))
    }

    /// The instant right after the last receive system call.
    pub fn last_receive(&self) -> Option<Instant> {
        self.decode(self.0.last_recv.load(Ordering::Acquire))
    }

    /// Send system calls so far.
    pub fn sends(&self) -> u64 {
        self.0.sends.load(Ordering::Acquire)
    }
}

/// `SO_TIMESTAMPING` (x86-64, arm64: the 64-bit `timespec` form).
const SO_TIMESTAMPING: libc::c_int = 37;

/// Asks the kernel for software receive timestamps on `fd`, reported with each
/// `recvmsg` (`SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE`). False when the
/// socket refuses.
pub fn request_kernel_stamps(fd: std::os::fd::RawFd) -> bool {
    keep_kernel_stamping();
    set_stamping(fd)
}

/// The kernel stamps arriving packets only while some socket asks for it, and turns
/// stamping on from a deferred work item: a connection that is the only one asking may
/// see its first segments unstamped. One socket kept open for the process's life keeps
/// stamping on from the first call (made early, when a client is built) to the exit.
pub fn keep_kernel_stamping() {
    use std::os::fd::AsRawFd;
    static KEEPER: std::sync::OnceLock<Option<std::net::UdpSocket>> = std::sync::OnceLock::new();
    KEEPER.get_or_init(|| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").ok()?;
        set_stamping(s.as_raw_fd()).then_some(s)
    });
}

fn set_stamping(fd: std::os::fd::RawFd) -> bool {
    let flags: libc::c_uint = libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
    // SAFETY: a valid option value of the size given, on a descriptor the caller owns.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TIMESTAMPING,
            (&flags as *const libc::c_uint).cast(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    r == 0
}

/// One `recvmsg` on `fd` into `buf`: the bytes read and, when the kernel stamped them,
/// the time of that stamp on `CLOCK_REALTIME` (the clock software timestamps use).
pub fn recv_stamped(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<Duration>)> {
    // Room for one SCM_TIMESTAMPING message (three timespecs) and its header.
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: zeroed msghdr is a valid empty header; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at live buffers of the sizes it states.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote within `msg_controllen`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPING {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                if ts.tv_sec > 0 || ts.tv_nsec > 0 {
                    stamp = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// The instant now and how long ago `stamp` (on `CLOCK_REALTIME`) was: the real-time
/// clock is read first, then the monotonic one, so `now − age` is never before the
/// stamp (at most the tens of nanoseconds between the two reads after it). `None` when
/// the clock says the stamp is in the future or more than a minute old (the clock was
/// set in between).
pub fn age_of(stamp: Duration) -> Option<(Instant, Duration)> {
    let mut real = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut real) };
    let now = Instant::now();
    let real = Duration::new(real.tv_sec as u64, real.tv_nsec as u32);
    let age = real
        .checked_sub(stamp)
        .filter(|d| *d < Duration::from_secs(60))?;
    Some((now, age))
}

/// A byte stream that records its [`WireStamps`]. Streams that do not (in-memory pipes in
/// tests) return `None`, and their users fall back to reading the clock themselves.
pub trait Stamped {
    /// This stream's stamps.
    fn wire_stamps(&self) -> Option<&WireStamps>;
}

impl Stamped for tokio::io::DuplexStream {
    fn wire_stamps(&self) -> Option<&WireStamps> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that arrived 50 ms before we read them carry the kernel's stamp of their
    /// arrival: the receive is dated then, and the 50 ms are our own delay.
    #[test]
    fn a_late_read_is_dated_at_the_arrival() {
        use std::io::Write as _;
        use std::os::fd::AsRawFd;
        keep_kernel_stamping();
        // Stamping is turned on by deferred work.
        std::thread::sleep(Duration::from_millis(20));
        let w = WireStamps::new();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        assert!(request_kernel_stamps(server.as_raw_fd()));
        let sent = Instant::now();
        client.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut buf = [0u8; 16];
        let (n, stamp) = recv_stamped(server.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        let (returned, delay) =
            age_of(stamp.expect("a kernel stamp")).expect("a stamp in the past");
        assert!(delay >= Duration::from_millis(50), "{delay:?}");
        w.received_stamped(returned, delay);
        let at = w.last_receive().unwrap();
        assert!(
            at >= sent && at < sent + Duration::from_millis(50),
            "{:?}",
            at - sent
        );
        assert_eq!(w.last_receive_delay(), Some(delay));
        // A receive without a stamp clears the delay.
        w.received(Instant::now());
        assert_eq!(w.last_receive_delay(), None);
    }

    #[test]
    fn records_the_last_crossing_each_way() {
        let w = WireStamps::new();
        assert_eq!(
            (w.last_send(), w.last_receive(), w.sends()),
            (None, None, 0)
        );
        let a = Instant::now();
        w.sent(a);
        let b = a + Duration::from_micros(7);
        w.sent(b);
        let c = b + Duration::from_micros(3);
        w.received(c);
        assert_eq!(w.last_send(), Some(b));
        assert_eq!(w.last_receive(), Some(c));
        assert_eq!(w.sends(), 2);
        // A clone shares the stamps (hyper's connection task holds the stream).
        let shared = w.clone();
        w.received(c + Duration::from_nanos(1));
        assert_eq!(shared.last_receive(), Some(c + Duration::from_nanos(1)));
    }
}
