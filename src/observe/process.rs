//! Process attribution of local endpoints during live capture: which process owns each
//! end of a connection on this host. Only exact answers are given; a local end whose
//! process is not known exactly is [`UNKNOWN`], never a guess.
//!
//! Two sources, the first that works:
//! - **the kernel** ([`crate::probes::owners`]): the connecting process recorded inside
//!   `connect()`, the accepting one inside `accept()`, for every connection the host
//!   opens while observe runs (needs BPF capabilities and tracefs);
//! - **`/proc`**, otherwise: socket inodes and addresses from `/proc/net/tcp{,6}`, their
//!   owners from the `socket:[INODE]` links in `/proc/PID/fd`, names from
//!   `/proc/PID/comm`, read when a connection opens (at most once a second). A connection
//!   that ends between two reads is caught only at the server end, and only when its
//!   listening socket has a single owner (a listener shared by several processes, such as
//!   nginx's master and workers, does not say which one accepted). With the kernel's
//!   owners, `/proc` is read only for a server end they did not report, at most every
//!   [`RESCAN_WITH_KERNEL`].
//!
//! QUIC's ends are UDP sockets, which neither `connect()` nor `accept()` name: they are
//! attributed by the local address and port the socket is bound to (a QUIC server
//! answers every client from one socket; a socket bound to the wildcard address owns
//! the port on every local address). First from the kernel, when it traces UDP binds:
//! the process that called `bind()` (or, for a socket the kernel bound by itself in
//! `connect()` or `sendto()`, the one that first asked for its address), for a
//! handshake that began while that socket was bound (from its bind, or first sight, to
//! its release, [`UDP_SLACK`] either side), so that a port used again by another socket
//! is not taken for the first's. Then from `/proc/net/udp{,6}` (read at most every
//! [`RESCAN`], when an end is not known): the sockets of the moment, so a short-lived
//! client's socket is often gone (a socket the kernel bound that never asks for its own
//! address is known this way only). A socket held by more than one process, or an
//! address bound by sockets of different processes at once (`SO_REUSEPORT`), is
//! [`UNKNOWN`].

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The most addresses remembered.
pub const MAX_REMEMBERED: usize = 1 << 16;

/// How long a connection end the kernel reported is kept at least (at most twice as
/// long), when fewer than [`MAX_REMEMBERED`] ÷ 2 arrive in that time: its handshake is
/// analysed within seconds of the `connect()`/`accept()`, and an end nobody asks for (a
/// connection without a handshake, on a port not observed) is not kept for the run.
pub const ENDS_KEPT: Duration = Duration::from_secs(30);

/// The most process names remembered (short-lived clients each bring a pid).
pub const MAX_NAMES: usize = 4096;

/// The label of a local end whose process is not known exactly.
pub const UNKNOWN: &str = "(unknown)";

/// How far a handshake may begin outside its socket's bound life and still be that
/// socket's: the capture's and the kernel's clocks are compared through
/// CLOCK_REALTIME − CLOCK_MONOTONIC, read at each drain.
pub const UDP_SLACK: Duration = Duration::from_millis(5);

/// The shortest time between two reads of `/proc` (a read takes a few milliseconds in a
/// release build, tens in a debug one, on the capture's thread).
pub const RESCAN: Duration = Duration::from_secs(1);

/// The same with the kernel's socket owners: `/proc` then only names the owner of a
/// listening port for a server end the kernel did not report (every connection analyzed
/// opened after the tracer started, so only one whose record was lost, or one not on
/// this host's sockets, such as replayed traffic). Reading `/proc/net/tcp` walks the
/// kernel's whole established-connection table (262,144 buckets here: about 10 ms of CPU
/// per read of both files), which once a second was a fifth of observe's CPU on a
/// replayed capture whose server port no local process listens on.
pub const RESCAN_WITH_KERNEL: Duration = Duration::from_secs(30);

/// Who owns what: from the kernel as it happens, or from `/proc` as of the last read.
#[derive(Debug, Default)]
pub struct Processes {
    /// The kernel's socket owners, when they could be traced.
    tracer: Option<crate::probes::owners::Tracer>,
    /// From the kernel: (client, server) → the process at the client end.
    client_ends: Generations,
    /// From the kernel: (client, server) → the process at the server end.
    server_ends: Generations,
    /// From `/proc`: a connected socket's (local, remote) addresses → its owner (both
    /// addresses: an ephemeral port is soon reused by other connections).
    conns: HashMap<(SocketAddr, SocketAddr), String>,
    /// From `/proc`: listening port → its owner, when one process alone holds it.
    listening: HashMap<u16, String>,
    /// Socket inode → its owners, as found.
    inodes: HashMap<u64, Owners>,
    /// Processes found owning sockets, looked at first.
    pids: Vec<u32>,
    /// This host's addresses.
    local_ips: HashSet<IpAddr>,
    /// Process names by pid, and when they were read.
    names: HashMap<u32, (String, Instant)>,
    scanned: Option<Instant>,
    /// From `/proc/net/udp{,6}`: a UDP socket's bound address → its owner (`None`: not
    /// one process alone), as of the last read.
    udp: HashMap<SocketAddr, Option<String>>,
    udp_scanned: Option<Instant>,
    /// From the kernel: UDP binds by socket cookie, and the cookies bound to each address.
    udp_binds: HashMap<u64, UdpBind>,
    udp_by_addr: HashMap<SocketAddr, Vec<u64>>,
    udp_pruned: Option<Instant>,
}

/// A UDP socket's bind the kernel reported: its owner from `bound_ns` until
/// `released_ns` (CLOCK_REALTIME, ns, the capture's clock).
#[derive(Debug, Clone)]
struct UdpBind {
    local: SocketAddr,
    owner: String,
    bound_ns: u64,
    released_ns: Option<u64>,
}

/// The processes holding one socket: the first found, and whether there are more.
#[derive(Debug, Clone)]
struct Owners {
    first: String,
    shared: bool,
}

/// A bounded map of connection ends: when the newer generation is full, or
/// [`ENDS_KEPT`] old, the older one is dropped (ends never asked for, of connections
/// without a handshake, go with it).
#[derive(Debug, Default)]
struct Generations {
    new: HashMap<(SocketAddr, SocketAddr), String>,
    old: HashMap<(SocketAddr, SocketAddr), String>,
    /// When `new` began.
    since: Option<Instant>,
}

impl Generations {
    fn insert(&mut self, k: (SocketAddr, SocketAddr), v: String) {
        self.insert_at(k, v, Instant::now());
    }

    fn insert_at(&mut self, k: (SocketAddr, SocketAddr), v: String, now: Instant) {
        let since = *self.since.get_or_insert(now);
        if self.new.len() >= MAX_REMEMBERED / 2 || now.duration_since(since) >= ENDS_KEPT {
            // A fresh map: the capacity of a busy minute goes with the old one.
            self.old = std::mem::take(&mut self.new);
            self.since = Some(now);
        }
        self.new.insert(k, v);
    }

    fn take(&mut self, k: &(SocketAddr, SocketAddr)) -> Option<String> {
        self.new.remove(k).or_else(|| self.old.remove(k))
    }
}

fn unmap(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// Parses `0100007F:1F90` (IPv4) or the 32-hex-digit IPv6 form of `/proc/net/tcp*`.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let ip = match ip.len() {
        8 => {
            let v = u32::from_str_radix(ip, 16).ok()?;
            IpAddr::V4(Ipv4Addr::from(v.swap_bytes()))
        }
        32 => {
            let mut b = [0u8; 16];
            for (i, word) in b.chunks_mut(4).enumerate() {
                let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
                word.copy_from_slice(&w.swap_bytes().to_be_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(unmap(SocketAddr::new(ip, port)))
}

/// Every socket line of the `/proc/net` tables named (one unreadable is left out).
fn sockets_of(tables: [&str; 2]) -> Vec<(SocketAddr, SocketAddr, bool, u64)> {
    tables
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(parse_line)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One socket line of `/proc/net/tcp*` (or `udp*`, the same columns): local, remote,
/// listening?, inode.
fn parse_line(line: &str) -> Option<(SocketAddr, SocketAddr, bool, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let local = parse_addr(f.get(1)?)?;
    let remote = parse_addr(f.get(2)?)?;
    let listen = *f.get(3)? == "0A";
    let inode = f.get(9)?.parse().ok()?;
    Some((local, remote, listen, inode))
}

/// Socket inode → (pid, "comm (pid N)") of every process holding it, for the inodes in
/// `wanted`: the processes in `first` are looked at before the others (the walk goes on
/// through every process: a socket may be held by several).
fn owners(wanted: &HashSet<u64>, first: &[u32]) -> HashMap<u64, Vec<(u32, String)>> {
    let mut out = HashMap::new();
    if wanted.is_empty() {
        return out;
    }
    // Then the newest processes (a short-lived client is likely one of them).
    let mut rest: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !first.contains(pid))
        .collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    for pid in first.iter().copied().chain(rest) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let mut label = None;
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(inode) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
                .filter(|i| wanted.contains(i))
            else {
                continue;
            };
            let label = label.get_or_insert_with(|| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                format!("{} (pid {pid})", comm.trim())
            });
            let holders: &mut Vec<(u32, String)> = out.entry(inode).or_default();
            if !holders.iter().any(|(p, _)| *p == pid) {
                holders.push((pid, label.clone()));
            }
        }
    }
    out
}

/// This host's IP addresses (every interface's, and the loopback ranges).
fn local_ips() -> HashSet<IpAddr> {
    let mut out = HashSet::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list it allocates, freed below; each entry's
    // ifa_addr is null or points to a sockaddr of the family it names.
    unsafe {
        if libc::getifaddrs(&mut head) == 0 {
            let mut at = head;
            while !at.is_null() {
                let a = (*at).ifa_addr;
                if !a.is_null() {
                    match i32::from((*a).sa_family) {
                        libc::AF_INET => {
                            let sin = &*(a as *const libc::sockaddr_in);
                            out.insert(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                                sin.sin_addr.s_addr,
                            ))));
                        }
                        libc::AF_INET6 => {
                            let sin6 = &*(a as *const libc::sockaddr_in6);
                            out.insert(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                        }
                        _ => {}
                    }
                }
                at = (*at).ifa_next;
            }
            libc::freeifaddrs(head);
        }
    }
    out
}

fn is_local(ips: &HashSet<IpAddr>, a: SocketAddr) -> bool {
    a.ip().is_loopback() || ips.contains(&a.ip())
}

/// `pid`'s label, `NAME (pid PID)`: its name from `/proc/PID/comm`, read once a
/// second at most per process (`names` remembers them), or `thread`'s when the process
/// is gone.
fn label(names: &mut HashMap<u32, (String, Instant)>, pid: u32, thread: &str) -> String {
    let now = Instant::now();
    if names.len() > MAX_NAMES {
        names.retain(|_, (_, at)| now.duration_since(*at) < RESCAN);
        if names.len() > MAX_NAMES / 2 {
            names.clear();
        }
        names.shrink_to_fit();
    }
    let name = match names.get(&pid) {
        Some((name, at)) if now.duration_since(*at) < RESCAN => name.clone(),
        _ => {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|_| thread.to_string());
            names.insert(pid, (name.clone(), now));
            name
        }
    };
    format!("{name} (pid {pid})")
}

/// Takes in a UDP socket's bind (or first sight) the kernel reported. A socket reported
/// again while bound at the same address (the kernel's table of the sockets it reported
/// was full and dropped it) keeps its first report: it was bound since then.
fn take_udp_bind(
    binds: &mut HashMap<u64, UdpBind>,
    by_addr: &mut HashMap<SocketAddr, Vec<u64>>,
    cookie: u64,
    bind: UdpBind,
) {
    if binds
        .get(&cookie)
        .is_some_and(|b| b.local == bind.local && b.released_ns.is_none())
    {
        return;
    }
    let local = bind.local;
    if let Some(old) = binds.insert(cookie, bind) {
        forget(by_addr, old.local, cookie);
    }
    by_addr.entry(local).or_default().push(cookie);
}

/// Drops `cookie` from the cookies bound to `local`.
fn forget(by_addr: &mut HashMap<SocketAddr, Vec<u64>>, local: SocketAddr, cookie: u64) {
    if let Some(v) = by_addr.get_mut(&local) {
        v.retain(|c| *c != cookie);
        if v.is_empty() {
            by_addr.remove(&local);
        }
    }
}

/// `local`, then the wildcard addresses of its port (its family's first): where a socket
/// that receives for `local` may be bound.
fn with_wildcards(local: SocketAddr) -> [SocketAddr; 3] {
    let port = local.port();
    let any4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
    let any6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
    if local.is_ipv4() {
        [local, any4, any6]
    } else {
        [local, any6, any4]
    }
}

impl Processes {
    /// Attribution from the kernel when it can be traced, else from `/proc`; the second
    /// value says why the kernel could not be used.
    pub fn new() -> (Processes, Option<String>) {
        let (tracer, why) = match crate::probes::owners::Tracer::start() {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let p = Processes {
            tracer,
            local_ips: local_ips(),
            ..Processes::default()
        };
        (p, why)
    }

    /// Attribution from `/proc` only.
    pub fn from_proc() -> Processes {
        Processes {
            local_ips: local_ips(),
            ..Processes::default()
        }
    }

    /// Where the answers come from: `kernel` or `/proc`.
    pub fn source(&self) -> &'static str {
        if self.tracer.is_some() {
            "kernel"
        } else {
            "/proc"
        }
    }

    /// The kernel tracer's counts (None from `/proc`).
    pub fn kernel_counts(&self) -> Option<crate::probes::owners::OwnerCounts> {
        self.tracer.as_ref().map(|t| t.counts())
    }

    /// Takes in what the kernel recorded since the last call, each end labelled with its
    /// process's name (its `/proc/PID/comm`, read once a second at most per process; the
    /// thread's name when the process is gone). Called on each lookup, and by the live
    /// loop once a second and whenever the capture waits, so that the kernel's rings do
    /// not fill while no handshake is looked up (observed ports idle while the host opens
    /// other connections: a full ring drops the newest records, those of the next
    /// handshakes; the TCP ring holds about 29,000).
    pub fn drain(&mut self) {
        use crate::probes::owners::Event;
        let Some(t) = &mut self.tracer else { return };
        let (clients, servers, names) = (
            &mut self.client_ends,
            &mut self.server_ends,
            &mut self.names,
        );
        let (binds, by_addr) = (&mut self.udp_binds, &mut self.udp_by_addr);
        // Read the clocks only when a UDP event came: most drains (every TCP lookup)
        // have none.
        let mut offset = None;
        let mut real = |mono: u64| {
            let off = *offset.get_or_insert_with(crate::probes::join::clock_offset);
            u64::try_from(i128::from(mono) + off).unwrap_or(0)
        };
        t.drain(|event| {
            let o = match event {
                Event::Tcp(o) => o,
                Event::UdpBound(u) => {
                    let bind = UdpBind {
                        local: unmap(u.local),
                        owner: label(names, u.pid, &u.thread),
                        bound_ns: real(u.ns),
                        released_ns: None,
                    };
                    take_udp_bind(binds, by_addr, u.cookie, bind);
                    return;
                }
                Event::UdpReleased { cookie, ns } => {
                    if let Some(b) = binds.get_mut(&cookie) {
                        b.released_ns = Some(real(ns));
                    }
                    return;
                }
            };
            let label = label(names, o.pid, &o.thread);
            let key = (unmap(o.client), unmap(o.server));
            if o.client_end {
                clients.insert(key, label);
            } else {
                servers.insert(key, label);
            }
        });
        self.prune_udp_binds();
    }

    /// Forgets released binds once they are [`ENDS_KEPT`] old, when more than
    /// [`MAX_REMEMBERED`] ÷ 2 are kept (looked at once every [`RESCAN`] at most); all of
    /// them beyond [`MAX_REMEMBERED`] (their ends are then found from `/proc`, or not).
    fn prune_udp_binds(&mut self) {
        if self.udp_binds.len() <= MAX_REMEMBERED / 2
            || self.udp_pruned.is_some_and(|t| t.elapsed() < RESCAN)
        {
            return;
        }
        self.udp_pruned = Some(Instant::now());
        let before = self.udp_binds.len();
        let now = super::live::now_ns();
        let kept = ENDS_KEPT.as_nanos() as u64;
        self.udp_binds
            .retain(|_, b| b.released_ns.is_none_or(|r| now.saturating_sub(r) < kept));
        if self.udp_binds.len() > MAX_REMEMBERED {
            self.udp_binds.clear();
        }
        if self.udp_binds.len() == before {
            return;
        }
        self.udp_by_addr.clear();
        for (cookie, b) in &self.udp_binds {
            self.udp_by_addr.entry(b.local).or_default().push(*cookie);
        }
    }

    /// The kernel's answer for the UDP socket at `local` when a handshake began at
    /// `at_ns` (the capture's clock): the process that bound a socket there, exactly or
    /// by the wildcard address of its port, for a handshake within its bound life;
    /// [`UNKNOWN`] when sockets of different processes were bound there then; `None`
    /// when the kernel reported none.
    fn udp_bound_owner(&self, local: SocketAddr, at_ns: u64) -> Option<String> {
        let slack = UDP_SLACK.as_nanos() as u64;
        for addr in with_wildcards(local) {
            let mut owners = self
                .udp_by_addr
                .get(&addr)
                .into_iter()
                .flatten()
                .filter_map(|c| self.udp_binds.get(c))
                .filter(|b| {
                    b.bound_ns <= at_ns.saturating_add(slack)
                        && b.released_ns
                            .is_none_or(|r| at_ns <= r.saturating_add(slack))
                })
                .map(|b| b.owner.as_str());
            let Some(first) = owners.next() else { continue };
            return Some(if owners.all(|o| o == first) {
                first.to_string()
            } else {
                UNKNOWN.to_string()
            });
        }
        None
    }

    /// Reads `/proc` again, unless it was read less than [`RESCAN`] ago
    /// ([`RESCAN_WITH_KERNEL`] with the kernel's socket owners).
    pub fn refresh(&mut self) {
        let every = if self.tracer.is_some() {
            RESCAN_WITH_KERNEL
        } else {
            RESCAN
        };
        if self.scanned.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.scanned = Some(Instant::now());
        // The sockets first (a short-lived one is then looked for while it still
        // exists), then their owners, starting with the processes found before.
        let sockets = sockets_of(["/proc/net/tcp", "/proc/net/tcp6"]);
        let wanted: HashSet<u64> = sockets
            .iter()
            .filter(|s| self.tracer.is_none() || s.2)
            .map(|s| s.3)
            .filter(|i| *i != 0 && !self.inodes.contains_key(i))
            .collect();
        let found = owners(&wanted, &self.pids);
        tracing::debug!(
            sockets = sockets.len(),
            wanted = wanted.len(),
            found = found.len(),
            "read /proc for socket owners"
        );
        self.learn(found);
        if self.conns.len() > MAX_REMEMBERED {
            self.conns.clear();
        }
        for &(local, _, listen, inode) in &sockets {
            if !listen {
                continue;
            }
            match self.inodes.get(&inode) {
                Some(o) if !o.shared => {
                    self.listening.insert(local.port(), o.first.clone());
                }
                _ => {
                    self.listening.remove(&local.port());
                }
            }
        }
        if self.tracer.is_some() {
            return;
        }
        for (local, remote, listen, inode) in sockets {
            if listen {
                continue;
            }
            if let Some(o) = self.inodes.get(&inode).filter(|o| !o.shared) {
                self.conns.insert((local, remote), o.first.clone());
            }
        }
    }

    /// The UDP sockets' owners again, unless they were read less than [`RESCAN`] ago.
    fn refresh_udp(&mut self) {
        if self.udp_scanned.is_some_and(|t| t.elapsed() < RESCAN) {
            return;
        }
        self.udp_scanned = Some(Instant::now());
        let sockets = sockets_of(["/proc/net/udp", "/proc/net/udp6"]);
        let wanted: HashSet<u64> = sockets
            .iter()
            .map(|s| s.3)
            .filter(|i| *i != 0 && !self.inodes.contains_key(i))
            .collect();
        let found = owners(&wanted, &self.pids);
        tracing::debug!(
            sockets = sockets.len(),
            wanted = wanted.len(),
            found = found.len(),
            "read /proc/net/udp for socket owners"
        );
        self.learn(found);
        self.udp.clear();
        for (local, _, _, inode) in sockets {
            let owner = self
                .inodes
                .get(&inode)
                .filter(|o| !o.shared)
                .map(|o| o.first.clone());
            match self.udp.entry(local) {
                Entry::Vacant(e) => {
                    e.insert(owner);
                }
                Entry::Occupied(mut e) => {
                    if *e.get() != owner {
                        e.insert(None);
                    }
                }
            }
        }
    }

    /// The owner of the UDP socket bound to `local`, exactly or by the wildcard address
    /// of its family; `None` when none is known, `Some(None)` when it is not one process.
    fn udp_owner(&self, local: SocketAddr) -> Option<Option<String>> {
        with_wildcards(local)
            .iter()
            .find_map(|a| self.udp.get(a))
            .cloned()
    }

    /// The process that owns the local end `local` of a QUIC connection (its UDP socket)
    /// when it is on this host: exactly, else [`UNKNOWN`]. `None` for a remote end.
    /// `at_ns`: when its handshake began (the capture's clock; now when not known).
    pub fn udp(&mut self, local: SocketAddr, at_ns: Option<u64>) -> Option<String> {
        let local = unmap(local);
        if !is_local(&self.local_ips, local) {
            return None;
        }
        self.drain();
        let at = at_ns.unwrap_or_else(super::live::now_ns);
        if let Some(owner) = self.udp_bound_owner(local, at) {
            return Some(owner);
        }
        if self.udp_owner(local).is_none() {
            self.refresh_udp();
        }
        Some(
            self.udp_owner(local)
                .flatten()
                .unwrap_or_else(|| UNKNOWN.to_string()),
        )
    }

    /// Takes in the owners `found` of socket inodes.
    fn learn(&mut self, found: HashMap<u64, Vec<(u32, String)>>) {
        for (inode, holders) in found {
            for (pid, _) in &holders {
                if !self.pids.contains(pid) {
                    self.pids.push(*pid);
                }
            }
            if let Some((_, first)) = holders.first() {
                let shared = holders.len() > 1;
                let first = first.clone();
                self.inodes.insert(inode, Owners { first, shared });
            }
        }
        if self.inodes.len() > MAX_REMEMBERED {
            self.inodes.clear();
        }
        if self.pids.len() > 64 {
            let extra = self.pids.len() - 64;
            self.pids.drain(..extra);
        }
    }

    /// Notes a connection as it opens (its SYN): from `/proc`, its client's socket is
    /// looked for now, while it exists.
    pub fn opening(&mut self, client: SocketAddr, server: SocketAddr) {
        if self.tracer.is_none() && !self.conns.contains_key(&(unmap(client), unmap(server))) {
            self.refresh();
        }
    }

    /// The process at the client end of `client` → `server` when that end is on this host:
    /// its owner exactly, else [`UNKNOWN`]. `None` for a remote client.
    pub fn client(&mut self, client: SocketAddr, server: SocketAddr) -> Option<String> {
        let (client, server) = (unmap(client), unmap(server));
        if !is_local(&self.local_ips, client) {
            return None;
        }
        self.drain();
        if let Some(owner) = self.client_ends.take(&(client, server)) {
            return Some(owner);
        }
        if self.tracer.is_none() {
            if !self.conns.contains_key(&(client, server)) {
                self.refresh();
            }
            if let Some(owner) = self.conns.get(&(client, server)) {
                return Some(owner.clone());
            }
        }
        Some(UNKNOWN.to_string())
    }

    /// The process at the server end when it is on this host: its owner exactly (the
    /// process that accepted it, or the only one holding its listening socket), else
    /// [`UNKNOWN`]. `None` for a remote server.
    pub fn server(&mut self, client: SocketAddr, server: SocketAddr) -> Option<String> {
        let (client, server) = (unmap(client), unmap(server));
        if !is_local(&self.local_ips, server) {
            return None;
        }
        self.drain();
        if let Some(owner) = self.server_ends.take(&(client, server)) {
            return Some(owner);
        }
        if self.tracer.is_none()
            && let Some(owner) = self.conns.get(&(server, client))
        {
            return Some(owner.clone());
        }
        if !self.listening.contains_key(&server.port()) {
            self.refresh();
        }
        Some(
            self.listening
                .get(&server.port())
                .cloned()
                .unwrap_or_else(|| UNKNOWN.to_string()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_tcp_lines() {
        let l = "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 20 4 30 10 -1";
        let (local, remote, listen, inode) = parse_line(l).unwrap();
        assert_eq!(local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(remote, "127.0.0.1:50000".parse().unwrap());
        assert!(!listen);
        assert_eq!(inode, 12345);
        // ::ffff:127.0.0.1 port 443, listening.
        let l6 = "   1: 0000000000000000FFFF00000100007F:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1";
        let (local, _, listen, inode) = parse_line(l6).unwrap();
        assert_eq!(local, "127.0.0.1:443".parse().unwrap());
        assert!(listen);
        assert_eq!(inode, 777);
        let any6 = parse_addr("00000000000000000000000001000000:0050").unwrap();
        assert_eq!(any6, "[::1]:80".parse().unwrap());
        assert!(parse_line("garbage").is_none());
    }

    #[test]
    fn a_connection_not_caught_is_unknown_not_a_neighbours() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(server).unwrap();
        let _s = l.accept().unwrap();
        let mut p = Processes::from_proc();
        let me = format!("(pid {})", std::process::id());
        assert!(
            p.client(c.local_addr().unwrap(), server)
                .unwrap()
                .ends_with(&me)
        );
        // Another client port to the same server, never seen: not credited to the process
        // last found connecting there.
        let unseen: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(p.client(unseen, server).as_deref(), Some(UNKNOWN));
        // A remote end is nobody's here.
        let remote: SocketAddr = "192.0.2.1:5000".parse().unwrap();
        assert_eq!(p.client(remote, server), None);
    }

    #[test]
    fn finds_this_process_listening() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(addr).unwrap();
        let (_s, _) = l.accept().unwrap();
        let mut p = Processes::from_proc();
        let me = format!("(pid {})", std::process::id());
        let server = p.server(c.local_addr().unwrap(), addr).unwrap();
        assert!(server.ends_with(&me), "{server}");
        let client = p.client(c.local_addr().unwrap(), addr).unwrap();
        assert!(client.ends_with(&me), "{client}");
    }

    /// A QUIC end is its UDP socket's owner, by the address it is bound to or the
    /// wildcard address of its port.
    #[test]
    fn finds_the_owner_of_a_udp_socket_by_its_local_address() {
        let bound = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let any = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let spare = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let free = spare.local_addr().unwrap();
        drop(spare);
        let mut p = Processes::from_proc();
        let me = format!("(pid {})", std::process::id());
        let owner = p.udp(bound.local_addr().unwrap(), None).unwrap();
        assert!(owner.ends_with(&me), "{owner}");
        let at = SocketAddr::from(([127, 0, 0, 1], any.local_addr().unwrap().port()));
        let owner = p.udp(at, None).unwrap();
        assert!(owner.ends_with(&me), "{owner}");
        // A port no socket holds is nobody's; a remote end is not this host's.
        assert_eq!(p.udp(free, None).as_deref(), Some(UNKNOWN));
        assert_eq!(p.udp("192.0.2.1:443".parse().unwrap(), None), None);
    }

    /// The kernel's UDP binds answer for a handshake within the socket's bound life
    /// only: a port bound again by another process is that one's, a port between two
    /// sockets is nobody's known, two processes bound at once (`SO_REUSEPORT`) is
    /// unknown, and a wildcard bind owns the port on every address.
    #[test]
    fn udp_binds_answer_for_handshakes_within_their_bound_life() {
        let mut p = Processes::from_proc();
        let ms = 1_000_000u64;
        let mut bind = |cookie: u64, local: &str, owner: &str, from: u64, to: Option<u64>| {
            let local: SocketAddr = local.parse().unwrap();
            let b = UdpBind {
                local,
                owner: owner.into(),
                bound_ns: from * ms,
                released_ns: to.map(|t| t * ms),
            };
            take_udp_bind(&mut p.udp_binds, &mut p.udp_by_addr, cookie, b);
        };
        bind(1, "127.0.0.1:40000", "a (pid 1)", 100, Some(200));
        bind(2, "127.0.0.1:40000", "b (pid 2)", 300, None);
        bind(3, "0.0.0.0:40001", "c (pid 3)", 100, None);
        bind(4, "127.0.0.1:443", "d (pid 4)", 100, None);
        bind(5, "127.0.0.1:443", "e (pid 5)", 100, None);
        bind(6, "127.0.0.1:444", "f (pid 6)", 100, None);
        bind(7, "127.0.0.1:444", "f (pid 6)", 100, None);
        // A socket the kernel reported again, later (its table was full): still bound
        // since the first report.
        bind(8, "0.0.0.0:40002", "g (pid 8)", 100, None);
        bind(8, "0.0.0.0:40002", "g (pid 8)", 500, None);
        let at = |p: &Processes, a: &str, t: u64| p.udp_bound_owner(a.parse().unwrap(), t * ms);
        assert_eq!(at(&p, "127.0.0.1:40000", 150).as_deref(), Some("a (pid 1)"));
        // Between the two sockets: not the first's, and not yet the second's.
        assert_eq!(at(&p, "127.0.0.1:40000", 250), None);
        assert_eq!(at(&p, "127.0.0.1:40000", 350).as_deref(), Some("b (pid 2)"));
        // Before any bind there.
        assert_eq!(at(&p, "127.0.0.1:40000", 50), None);
        // Within the slack of the release (the clocks compared through an offset).
        assert_eq!(at(&p, "127.0.0.1:40000", 203).as_deref(), Some("a (pid 1)"));
        assert_eq!(at(&p, "127.0.0.1:40001", 150).as_deref(), Some("c (pid 3)"));
        assert_eq!(at(&p, "[::1]:40001", 150).as_deref(), Some("c (pid 3)"));
        assert_eq!(at(&p, "127.0.0.1:443", 150).as_deref(), Some(UNKNOWN));
        assert_eq!(at(&p, "127.0.0.1:444", 150).as_deref(), Some("f (pid 6)"));
        assert_eq!(at(&p, "127.0.0.1:40002", 150).as_deref(), Some("g (pid 8)"));
        assert_eq!(p.udp_by_addr[&"0.0.0.0:40002".parse().unwrap()], [8]);
    }

    #[test]
    fn connection_ends_are_kept_a_while_and_bounded() {
        let end = |i: u16| {
            (
                SocketAddr::from(([127, 0, 0, 1], i)),
                SocketAddr::from(([127, 0, 0, 1], 443)),
            )
        };
        let t0 = Instant::now();
        let mut g = Generations::default();
        g.insert_at(end(1), "a".into(), t0);
        g.insert_at(end(2), "b".into(), t0 + ENDS_KEPT / 2);
        // A generation later, the first is still there (in the older one).
        g.insert_at(end(3), "c".into(), t0 + ENDS_KEPT);
        assert_eq!(g.take(&end(1)).as_deref(), Some("a"));
        // Two generations later, an end never asked for is gone.
        g.insert_at(end(4), "d".into(), t0 + 2 * ENDS_KEPT);
        assert_eq!(g.take(&end(2)), None);
        assert_eq!(g.take(&end(3)).as_deref(), Some("c"));
        // However fast they come, at most MAX_REMEMBERED.
        for i in 0..(MAX_REMEMBERED as u32 * 2) {
            let k = (
                SocketAddr::from(([10, 0, (i >> 16) as u8, (i >> 8) as u8], i as u16)),
                SocketAddr::from(([127, 0, 0, 1], 443)),
            );
            g.insert_at(k, "x".into(), t0 + 2 * ENDS_KEPT);
        }
        assert!(g.new.len() + g.old.len() <= MAX_REMEMBERED);
    }
}
