//! Live capture from a network interface: an `AF_PACKET` socket bound to the interface,
//! reading through the kernel's memory-mapped receive ring (`TPACKET_V3`: the kernel
//! fills blocks of frames that are read in place, one `poll` per block at most instead of
//! one system call per frame), with a classic BPF filter attached in the kernel
//! (`SO_ATTACH_FILTER`) so that only TCP segments and UDP datagrams (QUIC) to or from the
//! chosen ports cross into userspace (and, on a loopback interface, each packet once: its outgoing copy is
//! dropped in the kernel, as libpcap does). Each frame's time is the kernel's receive
//! timestamp (the ring's `tp_sec`/`tp_nsec`, taken as the frame was queued), not the time
//! tlsperf read it. The kernel's drop counter (frames that found the ring full) comes from
//! `PACKET_STATISTICS`. Needs `CAP_NET_RAW`.
//!
//! By default the filter is the eBPF one of [`super::ebpf`] (`SO_ATTACH_BPF`; needs
//! `CAP_BPF`): the same ports, and besides, the segments of connections whose analysis
//! reads no more payload dropped in the kernel. When it cannot be loaded, or when asked
//! ([`FilterChoice::Classic`]), the classic filter is attached instead, and
//! [`LiveCapture::kernel_filter`] says which and why.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::ObserveError;
use super::decode::Link;

/// The most ports the kernel filter takes (its jumps are 8-bit).
pub const MAX_PORTS: usize = 32;

/// Bytes kept of each frame (a GRO-merged loopback segment is at most 64 KiB).
pub const SNAPLEN: usize = 256 * 1024;

/// The receive ring: blocks of this size (a frame never spans two, so one must hold the
/// largest frame kept)…
pub const RING_BLOCK: usize = 1 << 20;

/// …this many of them (64 MiB: about half a second of a saturated 1 Gbit/s link).
pub const RING_BLOCKS: usize = 64;

/// A block that is not full is handed over after this long (ms): the longest a frame
/// waits in the kernel before tlsperf sees it (its timestamp is taken before).
const RING_RETIRE_MS: u32 = 10;

/// Which kernel filter a live capture asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterChoice {
    /// The eBPF filter, its map sized for this many connections (the flow table's cap);
    /// the classic filter when it cannot be loaded.
    Ebpf {
        /// Most connections tracked at once.
        max_flows: usize,
    },
    /// The classic BPF port filter: every segment on the ports reaches tlsperf.
    Classic,
}

/// An open live capture.
#[derive(Debug)]
pub struct LiveCapture {
    fd: OwnedFd,
    ring: Ring,
    link: Link,
    drops: u64,
    interface: String,
    ports: Vec<u16>,
    /// The eBPF filter, when it is the one attached.
    ebpf: Option<super::ebpf::Filter>,
    /// Which filter is attached, and why the classic one when it is.
    filter: String,
}

/// The memory-mapped `TPACKET_V3` ring and where reading is in it.
#[derive(Debug)]
struct Ring {
    base: *mut u8,
    len: usize,
    /// The block being read.
    block: usize,
    /// In that block, when it is ours: the next frame's offset and the frames left.
    cursor: Option<(usize, u32)>,
}

impl Ring {
    /// The status word of block `i` (shared with the kernel).
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: every block starts with `struct tpacket_block_desc`, whose
        // `hdr.bh1.block_status` (a u32, 8-byte aligned) is at byte 8; the mapping lives
        // as long as `self`.
        unsafe { &*self.base.add(i * RING_BLOCK + 8).cast::<AtomicU32>() }
    }

    fn u32_at(&self, offset: usize) -> u32 {
        // SAFETY: callers pass offsets inside the mapping, within a block the kernel has
        // handed over (its contents are not written until it is handed back).
        unsafe { std::ptr::read_unaligned(self.base.add(offset).cast::<u32>()) }
    }

    fn u16_at(&self, offset: usize) -> u16 {
        // SAFETY: as for `u32_at`.
        unsafe { std::ptr::read_unaligned(self.base.add(offset).cast::<u16>()) }
    }

    /// True when a frame can be read without waiting.
    fn ready(&self) -> bool {
        match self.cursor {
            Some((_, left)) => left > 0 || self.next_ready(),
            None => self.status(self.block).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0,
        }
    }

    /// True when the block after the current one is handed over.
    fn next_ready(&self) -> bool {
        let i = (self.block + 1) % RING_BLOCKS;
        self.status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// The next frame of a block handed over: (ns, the bytes kept, its length on the
    /// wire), or `None` when no block is.
    fn next(&mut self) -> Option<(u64, &[u8], usize)> {
        loop {
            match self.cursor {
                Some((_, 0)) => {
                    // Done with the block: back to the kernel, on to the next one.
                    self.status(self.block)
                        .store(libc::TP_STATUS_KERNEL, Ordering::Release);
                    self.block = (self.block + 1) % RING_BLOCKS;
                    self.cursor = None;
                }
                Some((at, left)) => {
                    let start = self.block * RING_BLOCK;
                    let end = start + RING_BLOCK;
                    let next = self.u32_at(at) as usize;
                    let (sec, nsec) = (self.u32_at(at + 4), self.u32_at(at + 8));
                    let snaplen = self.u32_at(at + 12) as usize;
                    let wire_len = self.u32_at(at + 16) as usize;
                    let mac = self.u16_at(at + 24) as usize;
                    // The kernel's offsets keep a frame inside its block; a frame that
                    // would not is not read (and the rest of the block is skipped).
                    let data = at + mac;
                    if data + snaplen > end || (left > 1 && (next == 0 || at + next >= end)) {
                        self.cursor = Some((at, 0));
                        continue;
                    }
                    self.cursor = Some((at + next, left - 1));
                    let ns = u64::from(sec) * 1_000_000_000 + u64::from(nsec);
                    // SAFETY: `data..data + snaplen` is inside this block, which is ours
                    // until it is handed back (on the call after the last frame).
                    let frame = unsafe { std::slice::from_raw_parts(self.base.add(data), snaplen) };
                    return Some((ns, frame, wire_len.max(snaplen)));
                }
                None => {
                    let status = self.status(self.block).load(Ordering::Acquire);
                    if status & libc::TP_STATUS_USER == 0 {
                        return None;
                    }
                    let start = self.block * RING_BLOCK;
                    let frames = self.u32_at(start + 12);
                    let first = self.u32_at(start + 16) as usize;
                    self.cursor = Some((start + first, frames));
                }
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `LiveCapture::open`, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// What kind of link layer an interface has, from `/sys/class/net/IF/type`.
fn link_of(interface: &str) -> Result<(Link, bool), ObserveError> {
    let path = format!("/sys/class/net/{interface}/type");
    let text = std::fs::read_to_string(&path).map_err(|_| ObserveError::NoInterface {
        interface: interface.to_string(),
    })?;
    match text.trim() {
        // ARPHRD_ETHER; ARPHRD_LOOPBACK (a zeroed Ethernet header).
        "1" => Ok((Link::Ethernet, false)),
        "772" => Ok((Link::Ethernet, true)),
        // ARPHRD_NONE (tun, WireGuard): IP packets without a link header.
        "65534" => Ok((Link::RawIp, false)),
        other => Err(ObserveError::UnsupportedInterface {
            interface: interface.to_string(),
            arphrd: other.to_string(),
        }),
    }
}

// Classic BPF opcodes (linux/filter.h).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MSH: u16 = 0xa0;
const JEQ: u16 = 0x10;
const JSET: u16 = 0x40;
const RSH: u16 = 0x70;
const K: u16 = 0x00;
/// `SKF_AD_OFF + SKF_AD_PKTTYPE`: the packet's type (4: outgoing).
const PKTTYPE: u32 = 0xffff_f000 + 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    Next,
    Accept,
    Drop,
    V4,
    V6,
    /// The instruction after the next.
    Skip,
}

/// One instruction with symbolic jump targets.
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u16,
    jt: To,
    jf: To,
    k: u32,
}

fn op(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: To::Next,
        jf: To::Next,
        k,
    }
}

fn jump(code: u16, k: u32, jt: To, jf: To) -> Insn {
    Insn { code, jt, jf, k }
}

/// The kernel filter: TCP or UDP (QUIC) over IPv4 (not a non-first fragment) or IPv6 (TCP
/// or UDP as the first next header), to or from one of `ports` (any port when empty); on
/// loopback, not the outgoing copy.
pub fn filter(link: Link, loopback: bool, ports: &[u16]) -> Vec<libc::sock_filter> {
    let l: u32 = if link == Link::Ethernet { 14 } else { 0 };
    let mut head = Vec::new();
    if loopback {
        head.push(op(LD | W | ABS, PKTTYPE));
        head.push(jump(JMP | JEQ | K, 4, To::Drop, To::Next));
    }
    if link == Link::Ethernet {
        head.push(op(LD | H | ABS, 12));
        head.push(jump(JMP | JEQ | K, 0x0800, To::V4, To::Next));
        head.push(jump(JMP | JEQ | K, 0x86dd, To::V6, To::Drop));
    } else {
        head.push(op(LD | B | ABS, 0));
        head.push(op(ALU | RSH | K, 4));
        head.push(jump(JMP | JEQ | K, 4, To::V4, To::Next));
        head.push(jump(JMP | JEQ | K, 6, To::V6, To::Drop));
    }
    let port_checks = |v: &mut Vec<Insn>, load: Insn, load2: Insn| {
        if ports.is_empty() {
            v.push(op(RET | K, SNAPLEN as u32));
            return;
        }
        for load in [load, load2] {
            v.push(load);
            for p in ports {
                v.push(jump(JMP | JEQ | K, u32::from(*p), To::Accept, To::Next));
            }
        }
        v.push(op(RET | K, 0));
    };
    let mut v4 = vec![
        op(LD | B | ABS, l + 9),
        jump(JMP | JEQ | K, 6, To::Skip, To::Next),
        jump(JMP | JEQ | K, 17, To::Next, To::Drop),
        op(LD | H | ABS, l + 6),
        jump(JMP | JSET | K, 0x1fff, To::Drop, To::Next),
        op(LDX | B | MSH, l),
    ];
    port_checks(&mut v4, op(LD | H | IND, l), op(LD | H | IND, l + 2));
    let mut v6 = vec![
        op(LD | B | ABS, l + 6),
        jump(JMP | JEQ | K, 6, To::Skip, To::Next),
        jump(JMP | JEQ | K, 17, To::Next, To::Drop),
    ];
    port_checks(&mut v6, op(LD | H | ABS, l + 40), op(LD | H | ABS, l + 42));
    let v4_at = head.len();
    let v6_at = v4_at + v4.len();
    let accept_at = v6_at + v6.len();
    let drop_at = accept_at + 1;
    let mut all: Vec<Insn> = head.into_iter().chain(v4).chain(v6).collect();
    all.push(op(RET | K, SNAPLEN as u32));
    all.push(op(RET | K, 0));
    let at = |t: To, i: usize| -> u8 {
        let target = match t {
            To::Next => i + 1,
            To::Skip => i + 2,
            To::Accept => accept_at,
            To::Drop => drop_at,
            To::V4 => v4_at,
            To::V6 => v6_at,
        };
        // Invariant: every jump is forward and, with at most MAX_PORTS ports, shorter
        // than 256 instructions.
        u8::try_from(target - (i + 1)).expect("a BPF jump fits in 8 bits")
    };
    all.iter()
        .enumerate()
        .map(|(i, insn)| libc::sock_filter {
            code: insn.code,
            jt: at(insn.jt, i),
            jf: at(insn.jf, i),
            k: insn.k,
        })
        .collect()
}

fn errno() -> io::Error {
    io::Error::last_os_error()
}

fn setsockopt<T>(fd: i32, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 { Err(errno()) } else { Ok(()) }
}

/// A failure of the capture socket on `interface`.
fn live_error(interface: &str) -> impl Fn(io::Error) -> ObserveError + '_ {
    move |source| ObserveError::Live {
        interface: interface.to_string(),
        source,
    }
}

/// The eBPF filter when `choice` asks for it and it attaches, and the attached filter
/// in words (the classic one, to attach when there is no eBPF filter, and why).
fn attach_filter(
    fd: &OwnedFd,
    link: Link,
    loopback: bool,
    ports: &[u16],
    choice: FilterChoice,
) -> (Option<super::ebpf::Filter>, String) {
    match choice {
        FilterChoice::Ebpf { max_flows } => {
            match super::ebpf::Filter::attach(
                fd.as_fd(),
                link,
                loopback,
                ports,
                SNAPLEN as u32,
                max_flows,
            ) {
                Ok(f) => (
                    Some(f),
                    "eBPF: the ports, and the segments of connections whose analysis \
                     reads no more payload dropped in the kernel"
                        .to_string(),
                ),
                Err(e) => (
                    None,
                    format!("classic (the ports only): the eBPF filter could not be used: {e}"),
                ),
            }
        }
        FilterChoice::Classic => (
            None,
            "classic (the ports only), as asked (--classic-filter)".to_string(),
        ),
    }
}

/// Sets socket `raw` to `TPACKET_V3` and maps its receive ring (locked in memory when
/// the memlock limit allows).
fn map_ring(raw: i32) -> io::Result<Ring> {
    let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
    setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &version)?;
    const FRAME: usize = 2048;
    let req = libc::tpacket_req3 {
        tp_block_size: RING_BLOCK as u32,
        tp_block_nr: RING_BLOCKS as u32,
        tp_frame_size: FRAME as u32,
        tp_frame_nr: (RING_BLOCK / FRAME * RING_BLOCKS) as u32,
        tp_retire_blk_tov: RING_RETIRE_MS,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    setsockopt(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)?;
    let len = RING_BLOCK * RING_BLOCKS;
    // SAFETY: mapping the ring the kernel just made for this socket, shared.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_LOCKED,
            raw,
            0,
        )
    };
    // MAP_LOCKED can fail under a memlock limit: the ring works unlocked too.
    // SAFETY: as above, without MAP_LOCKED.
    let base = if base == libc::MAP_FAILED {
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        }
    } else {
        base
    };
    if base == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(Ring {
        base: base.cast(),
        len,
        block: 0,
        cursor: None,
    })
}

/// Binds socket `raw` to the interface of `index`, every protocol: the capture starts.
fn bind_to_interface(raw: i32, index: u32) -> io::Result<()> {
    // SAFETY: zeroed sockaddr_ll is valid; the fields set are its documented ones.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = index as i32;
    // SAFETY: a valid sockaddr_ll of the size passed.
    let r = unsafe {
        libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 { Err(errno()) } else { Ok(()) }
}

impl LiveCapture {
    /// Opens a capture on `interface` of TCP segments to or from `ports` (every port
    /// when empty), filtered in the kernel as `choice` asks.
    pub fn open(
        interface: &str,
        ports: &[u16],
        choice: FilterChoice,
    ) -> Result<LiveCapture, ObserveError> {
        if interface.is_empty()
            || interface.len() >= libc::IFNAMSIZ
            || interface.contains(['/', '\0'])
            || interface == "."
            || interface == ".."
        {
            return Err(ObserveError::NoInterface {
                interface: interface.to_string(),
            });
        }
        if ports.len() > MAX_PORTS {
            return Err(ObserveError::TooManyPorts { count: ports.len() });
        }
        let (link, loopback) = link_of(interface)?;
        let name = std::ffi::CString::new(interface).map_err(|_| ObserveError::NoInterface {
            interface: interface.to_string(),
        })?;
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(ObserveError::NoInterface {
                interface: interface.to_string(),
            });
        }
        let live = live_error(interface);
        // Protocol 0: nothing is received until the filter is in place and the socket is
        // bound with ETH_P_ALL.
        // SAFETY: plain socket(2).
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = errno();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => ObserveError::NeedCapNetRaw {
                    interface: interface.to_string(),
                },
                _ => live(e),
            });
        }
        // SAFETY: `raw` is a descriptor we own from here on.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let (ebpf, filter_text) = attach_filter(&fd, link, loopback, ports, choice);
        if ebpf.is_none() {
            let mut program = filter(link, loopback, ports);
            let prog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_mut_ptr(),
            };
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog).map_err(&live)?;
        }
        let ring = map_ring(raw).map_err(&live)?;
        bind_to_interface(raw, index).map_err(&live)?;
        let mut cap = LiveCapture {
            fd,
            ring,
            link,
            drops: 0,
            interface: interface.to_string(),
            ports: ports.to_vec(),
            ebpf,
            filter: filter_text,
        };
        // Counters start now.
        let _ = cap.read_stats();
        cap.drops = 0;
        Ok(cap)
    }

    /// The interface.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The ports filtered on (every port when empty).
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The interface's link layer.
    pub fn link(&self) -> Link {
        self.link
    }

    /// Which kernel filter is attached: eBPF, or classic and why.
    pub fn kernel_filter(&self) -> &str {
        &self.filter
    }

    /// The eBPF filter's map of connections whose payload the kernel drops, for the flow
    /// table (once; `None` with the classic filter).
    pub fn take_kernel_drop(&mut self) -> Option<super::ebpf::KernelDrop> {
        self.ebpf.as_mut()?.take_kernel_drop()
    }

    /// Segments (and their bytes) the eBPF filter dropped so far: those of connections
    /// whose analysis reads no more payload; (0, 0) with the classic filter.
    pub fn kernel_filtered(&self) -> (u64, u64) {
        self.ebpf
            .as_ref()
            .map_or((0, 0), super::ebpf::Filter::dropped)
    }

    /// The next frame: `(kernel receive time in ns since the epoch, the bytes kept, its
    /// length on the wire)`, or `None` after 100 ms without one (or on a signal).
    pub fn next_frame(&mut self) -> io::Result<Option<(u64, &[u8], usize)>> {
        if !self.ring.ready() {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, 100) };
            if r < 0 {
                let e = errno();
                return match e.raw_os_error() {
                    Some(libc::EINTR) => Ok(None),
                    _ => Err(e),
                };
            }
        }
        Ok(self.ring.next())
    }

    /// The next frame already captured, without waiting: `None` when there is none (to
    /// read what was captured before a stop).
    pub fn next_queued(&mut self) -> Option<(u64, &[u8], usize)> {
        self.ring.next()
    }

    fn read_stats(&mut self) -> io::Result<u64> {
        // SAFETY: zeroed tpacket_stats is valid; getsockopt writes at most its size.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(errno());
        }
        Ok(u64::from(st.tp_drops))
    }

    /// Frames the kernel dropped since the capture opened (its counter resets on every
    /// read, so it is added up here).
    pub fn drops(&mut self) -> u64 {
        if let Ok(d) = self.read_stats() {
            self.drops += d;
        }
        self.drops
    }
}

/// The wall clock, ns since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// How often a live observation reports progress.
pub const TICK: Duration = Duration::from_secs(1);

/// How far past each whole second of the wall clock a live observation ticks: just past
/// a window's grace, since windows end on whole seconds (their lengths are whole seconds,
/// counted from the Unix epoch), so a window is closed and written about this long after
/// its end, not up to a whole tick later.
pub const TICK_PHASE: Duration =
    Duration::from_millis(super::window::GRACE.as_millis() as u64 + 20);

/// The ticks of a live observation: once every [`TICK`], at [`TICK_PHASE`] past a whole
/// second of the wall clock.
#[derive(Debug)]
pub struct Ticker {
    next_ns: u64,
}

impl Ticker {
    /// A ticker whose first tick is the next [`TICK_PHASE`] past a whole second.
    pub fn new() -> Ticker {
        Ticker {
            next_ns: Self::after(now_ns()),
        }
    }

    /// The first tick instant strictly after `now_ns`.
    fn after(now_ns: u64) -> u64 {
        let tick = TICK.as_nanos() as u64;
        let t = now_ns - now_ns % tick + TICK_PHASE.as_nanos() as u64;
        if t > now_ns { t } else { t + tick }
    }

    /// Whether a tick is due at `now_ns` (the wall clock); when it is, the next one is
    /// set. A wall clock set back by more than a tick does not stop the ticks.
    pub fn due_at(&mut self, now_ns: u64) -> bool {
        let tick = TICK.as_nanos() as u64;
        if now_ns >= self.next_ns || self.next_ns > now_ns.saturating_add(2 * tick) {
            self.next_ns = Self::after(now_ns);
            return true;
        }
        false
    }

    /// Whether a tick is due now.
    pub fn due(&mut self) -> bool {
        self.due_at(now_ns())
    }
}

impl Default for Ticker {
    fn default() -> Ticker {
        Ticker::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_just_past_a_windows_grace_once_a_second() {
        const S: u64 = 1_000_000_000;
        const B: u64 = 10_000 * S;
        let phase = TICK_PHASE.as_nanos() as u64;
        let mut t = Ticker {
            next_ns: Ticker::after(B + 1),
        };
        assert_eq!(t.next_ns, B + phase);
        assert!(!t.due_at(B + phase - 1));
        assert!(t.due_at(B + phase + 30_000_000));
        assert_eq!(t.next_ns, B + S + phase, "the next one a second later");
        assert!(!t.due_at(B + phase + 40_000_000), "once per second");
        // A late loop does not tick twice to catch up.
        assert!(t.due_at(B + 3 * S + phase + 5));
        assert_eq!(t.next_ns, B + 4 * S + phase);
        // The wall clock set back an hour: ticks go on at once, then once a second.
        let back = B + 4 * S - 3600 * S;
        assert!(t.due_at(back), "a clock set back ticks");
        assert_eq!(t.next_ns, back + phase);
        assert!(!t.due_at(back + 1));
    }

    /// A classic BPF interpreter for the instructions [`filter`] emits.
    fn run(prog: &[libc::sock_filter], pkt: &[u8], pkttype: u32) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let byte = |i: u32| u32::from(*pkt.get(i as usize).unwrap_or(&0));
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                c if c == LD | W | ABS && i.k == PKTTYPE => a = pkttype,
                c if c == LD | H | ABS => a = byte(i.k) << 8 | byte(i.k + 1),
                c if c == LD | B | ABS => a = byte(i.k),
                c if c == LD | H | IND => a = byte(x + i.k) << 8 | byte(x + i.k + 1),
                c if c == LDX | B | MSH => x = 4 * (byte(i.k) & 0xf),
                c if c == ALU | RSH | K => a >>= i.k,
                c if c == JMP | JEQ | K => {
                    pc += usize::from(if a == i.k { i.jt } else { i.jf });
                }
                c if c == JMP | JSET | K => {
                    pc += usize::from(if a & i.k != 0 { i.jt } else { i.jf });
                }
                c if c == RET | K => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    fn tcp4(sport: u16, dport: u16) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
            .ipv4([127, 0, 0, 1], [127, 0, 0, 1], 64)
            .tcp(sport, dport, 1, 100);
        let mut out = Vec::new();
        b.write(&mut out, b"x").unwrap();
        out
    }

    fn tcp6(sport: u16, dport: u16) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
            .ipv6([0; 16], [0; 16], 64)
            .tcp(sport, dport, 1, 100);
        let mut out = Vec::new();
        b.write(&mut out, b"x").unwrap();
        out
    }

    fn udp4(sport: u16, dport: u16) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
            .ipv4([127, 0, 0, 1], [127, 0, 0, 1], 64)
            .udp(sport, dport);
        let mut out = Vec::new();
        b.write(&mut out, b"x").unwrap();
        out
    }

    fn udp6(sport: u16, dport: u16) -> Vec<u8> {
        let b = etherparse::PacketBuilder::ethernet2([0; 6], [0; 6])
            .ipv6([0; 16], [0; 16], 64)
            .udp(sport, dport);
        let mut out = Vec::new();
        b.write(&mut out, b"x").unwrap();
        out
    }

    #[test]
    fn the_filter_keeps_the_chosen_tcp_and_udp_ports_only() {
        let p = filter(Link::Ethernet, true, &[443, 8443]);
        let host = 0;
        assert_eq!(run(&p, &tcp4(50000, 443), host), SNAPLEN as u32);
        assert_eq!(run(&p, &tcp4(8443, 50000), host), SNAPLEN as u32);
        assert_eq!(run(&p, &tcp4(50000, 80), host), 0);
        assert_eq!(run(&p, &tcp6(50000, 8443), host), SNAPLEN as u32);
        assert_eq!(run(&p, &tcp6(50000, 22), host), 0);
        // The outgoing copy on loopback.
        assert_eq!(run(&p, &tcp4(50000, 443), 4), 0);
        // UDP on the ports (QUIC), both ways, IPv4 and IPv6; not on others.
        assert_eq!(run(&p, &udp4(50000, 443), host), SNAPLEN as u32);
        assert_eq!(run(&p, &udp4(8443, 50000), host), SNAPLEN as u32);
        assert_eq!(run(&p, &udp6(50000, 443), host), SNAPLEN as u32);
        assert_eq!(run(&p, &udp4(50000, 53), host), 0);
        assert_eq!(run(&p, &udp6(53, 50000), host), 0);
        // Neither TCP nor UDP: ICMP.
        let mut icmp = tcp4(50000, 443);
        icmp[14 + 9] = 1;
        assert_eq!(run(&p, &icmp, host), 0);
        // Any port; raw IP links.
        let any = filter(Link::Ethernet, false, &[]);
        assert_eq!(run(&any, &tcp4(1, 2), 4), SNAPLEN as u32);
        let raw = filter(Link::RawIp, false, &[443]);
        assert_eq!(run(&raw, &tcp4(50000, 443)[14..], host), SNAPLEN as u32);
        assert_eq!(run(&raw, &tcp6(443, 1)[14..], host), SNAPLEN as u32);
        assert_eq!(run(&raw, &tcp4(50000, 444)[14..], host), 0);
        assert_eq!(run(&raw, &udp6(443, 1)[14..], host), SNAPLEN as u32);
        // The most ports still fit the 8-bit jumps.
        let many: Vec<u16> = (1..=MAX_PORTS as u16).collect();
        let p = filter(Link::Ethernet, true, &many);
        assert_eq!(
            run(&p, &tcp4(60000, MAX_PORTS as u16), host),
            SNAPLEN as u32
        );
    }
}
