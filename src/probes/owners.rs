//! Socket owners from the kernel: which process is at each end of every TCP connection
//! this host opens or accepts, exactly, and which process bound each UDP socket (QUIC's
//! ends) and when it was released, for `observe`'s process attribution. Tracepoints
//! (`sock:inet_sock_set_state`, `accept`/`accept4`) and cgroup socket hooks
//! (`post_bind4`/`6`, `sock_release`, `getsockname4`/`6`, on the root cgroup v2), no
//! uprobes: it needs BPF capabilities and tracefs, not a TLS library. The programs are
//! `bpf/owners.bpf.c`; where each end is taken is described there. The UDP hooks are
//! optional: without a cgroup v2 hierarchy, or where they cannot be attached, TCP's ends
//! are traced alone (an info line, `TLSPERF_LOG=info`, says why).
//!
//! [`Tracer::start`] loads and attaches them; [`Tracer::drain`] reads what arrived, as
//! [`Event`]s. Dropping the tracer detaches everything (the cgroup attachments are BPF
//! links: they also go when the process dies).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;

use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::{
    CgroupAttachMode, CgroupSock, CgroupSockAddr, Program, ProgramError, TracePoint,
};
use aya::{Ebpf, EbpfLoader};

use super::ProbeError;

/// The BPF object, built by `bpf/build.sh` from `bpf/owners.bpf.c`.
static OBJECT: &[u8] = aya::include_bytes_aligned!("bpf/owners.bpf.o");

/// (program, category, event).
const TRACEPOINTS: [(&str, &str, &str); 5] = [
    ("owner_set_state", "sock", "inet_sock_set_state"),
    ("owner_accept4_enter", "syscalls", "sys_enter_accept4"),
    ("owner_accept4_exit", "syscalls", "sys_exit_accept4"),
    ("owner_accept_enter", "syscalls", "sys_enter_accept"),
    ("owner_accept_exit", "syscalls", "sys_exit_accept"),
];

/// The cgroup socket programs (UDP binds and releases).
const CGROUP_PROGRAMS: [&str; 3] = ["owner_udp_bind4", "owner_udp_bind6", "owner_udp_release"];

/// The cgroup socket-address programs (UDP sockets the kernel bound, first seen in
/// `getsockname()`).
const CGROUP_ADDR_PROGRAMS: [&str; 2] = ["owner_udp_name4", "owner_udp_name6"];

/// The size of `struct owner_event`.
const RAW_LEN: usize = 4 + 1 + 1 + 2 + 2 + 2 + 16 + 16 + 16;

/// The size of `struct udp_event`.
const UDP_RAW_LEN: usize = 4 + 1 + 1 + 2 + 2 + 2 + 4 + 8 + 8 + 16 + 16;

/// What the kernel reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// One end of a TCP connection and the process there.
    Tcp(Owner),
    /// A UDP socket bound, in the binding process; or, for a socket the kernel bound by
    /// itself (`connect()` or `sendto()` without `bind()`), first seen in its process
    /// (in `getsockname()`) after that.
    UdpBound(UdpBound),
    /// A UDP socket whose bind was reported is released.
    UdpReleased {
        /// Its [`UdpBound::cookie`].
        cookie: u64,
        /// When (CLOCK_MONOTONIC, ns).
        ns: u64,
    },
}

/// A UDP socket's bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpBound {
    /// The kernel's socket cookie: names the socket until it is released.
    pub cookie: u64,
    /// The address and port bound (an unspecified address: every local one).
    pub local: SocketAddr,
    /// The binding process's id.
    pub pid: u32,
    /// The binding thread's name.
    pub thread: String,
    /// When (CLOCK_MONOTONIC, ns): the bind, or the first sight of a socket the kernel
    /// bound (it was bound by then).
    pub ns: u64,
}

/// One end of one connection and the process there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// True at the client end (it connected), false at the server end (it accepted).
    pub client_end: bool,
    /// The client's address.
    pub client: SocketAddr,
    /// The server's address.
    pub server: SocketAddr,
    /// The process's id.
    pub pid: u32,
    /// The name of the thread that connected or accepted (a process's threads may be
    /// named apart from it: `tokio-runtime-w`).
    pub thread: String,
}

/// What the kernel side counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OwnerCounts {
    /// Client ends recorded.
    pub clients: u64,
    /// Server ends recorded.
    pub servers: u64,
    /// Records lost: the ring buffer was full.
    pub lost: u64,
    /// Accepted connections whose peer the process did not ask for (`accept(fd, NULL,
    /// NULL)`): not recorded.
    pub no_peer: u64,
    /// Accepted connections whose local address was not seen (established before the
    /// tracer started): not recorded.
    pub no_local: u64,
    /// UDP binds recorded.
    pub udp_bound: u64,
    /// Releases of UDP sockets whose bind was recorded.
    pub udp_released: u64,
    /// UDP sockets the kernel bound, recorded when first seen.
    pub udp_seen: u64,
}

/// The loaded programs and their ring buffer.
pub struct Tracer {
    ebpf: Ebpf,
    ring: RingBuf<MapData>,
    /// UDP binds and releases (empty when their hooks are not attached).
    udp_ring: RingBuf<MapData>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracer").finish_non_exhaustive()
    }
}

impl Tracer {
    /// Loads and attaches the programs; an error says in words what is missing
    /// (capabilities, tracefs, BPF).
    pub fn start() -> Result<Tracer, ProbeError> {
        if !super::bpf_capable() {
            return Err(ProbeError::Unsupported(
                "exact process attribution needs CAP_BPF and CAP_PERFMON (or \
                 CAP_SYS_ADMIN): run as root"
                    .into(),
            ));
        }
        let mut notes = Vec::new();
        super::mount_tracefs(&mut notes)?;
        for n in notes {
            tracing::info!("{n}");
        }
        let mut ebpf = EbpfLoader::new()
            .load(OBJECT)
            .map_err(|e| ProbeError::Load(e.to_string()))?;
        for (prog, category, event) in TRACEPOINTS {
            let what = format!("tracepoint {category}:{event}");
            let attach = |e: &dyn std::fmt::Display| ProbeError::Attach {
                what: what.clone(),
                reason: e.to_string(),
            };
            let p = ebpf
                .program_mut(prog)
                .ok_or_else(|| attach(&"the BPF object has no such program"))?;
            let p: &mut TracePoint = p.try_into().map_err(|e| attach(&e))?;
            p.load().map_err(|e| attach(&e))?;
            p.attach(category, event).map_err(|e| attach(&e))?;
        }
        match cgroup_root().and_then(|root| attach_udp(&mut ebpf, &root).map(|()| root)) {
            Err(why) => tracing::info!("UDP sockets' owners from /proc only: {why}"),
            Ok(root) => {
                if let Err(why) = attach_udp_seen(&mut ebpf, &root) {
                    tracing::info!(
                        "the owners of UDP sockets the kernel bound (connect() or sendto() \
                         without bind()) from /proc only: {why}"
                    );
                }
            }
        }
        let map = ebpf
            .take_map("owners")
            .ok_or_else(|| ProbeError::Load("the BPF object has no owners map".into()))?;
        let ring = RingBuf::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
        let map = ebpf
            .take_map("udp_owners")
            .ok_or_else(|| ProbeError::Load("the BPF object has no udp_owners map".into()))?;
        let udp_ring = RingBuf::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
        Ok(Tracer {
            ebpf,
            ring,
            udp_ring,
        })
    }

    /// Every record that arrived since the last call: TCP's ends in order, then UDP's
    /// binds and releases in order.
    pub fn drain(&mut self, mut f: impl FnMut(Event)) {
        for ring in [&mut self.ring, &mut self.udp_ring] {
            while let Some(item) = ring.next() {
                if let Some(o) = decode(&item) {
                    f(o);
                }
            }
        }
    }

    /// The kernel side's counts so far (summed over CPUs).
    pub fn counts(&self) -> OwnerCounts {
        let Some(map) = self.ebpf.map("owner_counters") else {
            return OwnerCounts::default();
        };
        let Ok(array) = PerCpuArray::<_, u64>::try_from(map) else {
            return OwnerCounts::default();
        };
        let at = |i: u32| array.get(&i, 0).map_or(0, |v| v.iter().sum::<u64>());
        OwnerCounts {
            clients: at(0),
            servers: at(1),
            lost: at(2),
            no_peer: at(3),
            no_local: at(4),
            udp_bound: at(5),
            udp_released: at(6),
            udp_seen: at(7),
        }
    }
}

/// The mount point of the root of the cgroup v2 hierarchy, from `mountinfo` (the text
/// of `/proc/self/mountinfo`).
fn cgroup2_root(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (fields, rest) = line.split_once(" - ")?;
        let fstype = rest.split_whitespace().next()?;
        let mut f = fields.split_whitespace();
        let (root, mount) = (f.nth(3)?, f.next()?);
        (fstype == "cgroup2" && root == "/").then(|| PathBuf::from(mount))
    })
}

/// The root of the cgroup v2 hierarchy, where the UDP programs attach (every process's
/// sockets); `Err` says why there is none.
fn cgroup_root() -> Result<PathBuf, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    cgroup2_root(&mountinfo).ok_or_else(|| "no cgroup v2 hierarchy is mounted".to_string())
}

/// Opens `root` for an attachment.
fn open_cgroup(root: &std::path::Path) -> Result<std::fs::File, String> {
    std::fs::File::open(root).map_err(|e| format!("cannot open {}: {e}", root.display()))
}

/// Loads each of `progs` and attaches it to `root` with `attach`; `Err` says why one is
/// not. The attachments are BPF links (aya makes them from Linux 5.7 on): they take no
/// attach flags and run beside the programs already there, as BPF_F_ALLOW_MULTI would
/// (asking for that mode makes the kernel refuse the link).
fn attach_cgroup(
    ebpf: &mut Ebpf,
    root: &std::path::Path,
    progs: &[&str],
    attach: impl Fn(&mut Program, std::fs::File) -> Result<(), ProgramError>,
) -> Result<(), String> {
    for prog in progs {
        let p = ebpf
            .program_mut(prog)
            .ok_or_else(|| format!("the BPF object has no program {prog}"))?;
        attach(p, open_cgroup(root)?)
            .map_err(|e| format!("cannot load or attach {prog} to {}: {e}", root.display()))?;
    }
    Ok(())
}

/// Attaches the UDP bind and release programs to `root`; `Err` says why they are not.
fn attach_udp(ebpf: &mut Ebpf, root: &std::path::Path) -> Result<(), String> {
    attach_cgroup(ebpf, root, &CGROUP_PROGRAMS, |p, cgroup| {
        let p: &mut CgroupSock = p.try_into()?;
        p.load()?;
        p.attach(cgroup, CgroupAttachMode::Single).map(drop)
    })
}

/// Attaches the programs that see sockets the kernel bound (`getsockname`) to `root`;
/// `Err` says why they are not.
fn attach_udp_seen(ebpf: &mut Ebpf, root: &std::path::Path) -> Result<(), String> {
    attach_cgroup(ebpf, root, &CGROUP_ADDR_PROGRAMS, |p, cgroup| {
        let p: &mut CgroupSockAddr = p.try_into()?;
        p.load()?;
        p.attach(cgroup, CgroupAttachMode::Single).map(drop)
    })
}

/// An address of `family` (2: IPv4, 10: IPv6, v4-mapped ones unmapped) from 16 bytes.
fn ip(family: u16, a: &[u8]) -> Option<IpAddr> {
    match family {
        2 => Some(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
        10 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&a[..16]);
            let v6 = Ipv6Addr::from(o);
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}

/// A name from a NUL-padded `comm`.
fn comm(c: &[u8]) -> String {
    String::from_utf8_lossy(&c[..c.iter().position(|&b| b == 0).unwrap_or(c.len())]).into_owned()
}

/// A `struct owner_event` or `struct udp_event` (host byte order, as the kernel wrote
/// it), told apart by the role byte they share.
fn decode(b: &[u8]) -> Option<Event> {
    match b.get(4)? {
        1 | 2 => decode_tcp(b).map(Event::Tcp),
        3 | 4 => decode_udp(b),
        _ => None,
    }
}

/// A `struct udp_event`.
fn decode_udp(b: &[u8]) -> Option<Event> {
    if b.len() < UDP_RAW_LEN {
        return None;
    }
    let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let (cookie, ns) = (u64_at(16), u64_at(24));
    if b[4] == 4 {
        return Some(Event::UdpReleased { cookie, ns });
    }
    let family = u16::from_ne_bytes([b[6], b[7]]);
    let port = u16::from_ne_bytes([b[8], b[9]]);
    Some(Event::UdpBound(UdpBound {
        cookie,
        local: SocketAddr::new(ip(family, &b[32..48])?, port),
        pid: u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        thread: comm(&b[48..64]),
        ns,
    }))
}

/// A `struct owner_event`.
fn decode_tcp(b: &[u8]) -> Option<Owner> {
    if b.len() < RAW_LEN {
        return None;
    }
    let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let tgid = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    let role = b[4];
    let family = u16_at(6);
    let (lport, rport) = (u16_at(8), u16_at(10));
    let local = SocketAddr::new(ip(family, &b[12..28])?, lport);
    let remote = SocketAddr::new(ip(family, &b[28..44])?, rport);
    let thread = comm(&b[44..60]);
    match role {
        1 => Some(Owner {
            client_end: true,
            client: local,
            server: remote,
            pid: tgid,
            thread,
        }),
        2 => Some(Owner {
            client_end: false,
            client: remote,
            server: local,
            pid: tgid,
            thread,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_both_ends_and_both_families() {
        let mut b = vec![0u8; RAW_LEN];
        b[0..4].copy_from_slice(&4242u32.to_ne_bytes());
        b[4] = 2; // server
        b[6..8].copy_from_slice(&2u16.to_ne_bytes());
        b[8..10].copy_from_slice(&443u16.to_ne_bytes());
        b[10..12].copy_from_slice(&50000u16.to_ne_bytes());
        b[12..16].copy_from_slice(&[127, 0, 0, 1]);
        b[28..32].copy_from_slice(&[10, 0, 0, 2]);
        b[44..49].copy_from_slice(b"nginx");
        let o = decode_tcp(&b).unwrap();
        assert!(!o.client_end);
        assert_eq!(o.server, "127.0.0.1:443".parse().unwrap());
        assert_eq!(o.client, "10.0.0.2:50000".parse().unwrap());
        assert_eq!((o.pid, o.thread.as_str()), (4242, "nginx"));
        // A client end over IPv6, a v4-mapped address unmapped.
        b[4] = 1;
        b[6..8].copy_from_slice(&10u16.to_ne_bytes());
        let mapped: Ipv6Addr = "::ffff:127.0.0.1".parse().unwrap();
        b[12..28].copy_from_slice(&mapped.octets());
        b[28..44].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        let Some(Event::Tcp(o)) = decode(&b) else {
            panic!("not a TCP end")
        };
        assert!(o.client_end);
        assert_eq!(o.client, "127.0.0.1:443".parse().unwrap());
        assert_eq!(o.server, "[::1]:50000".parse().unwrap());
        assert!(decode(&b[..10]).is_none());
    }

    #[test]
    fn decodes_udp_binds_and_releases() {
        let mut b = vec![0u8; UDP_RAW_LEN];
        b[0..4].copy_from_slice(&777u32.to_ne_bytes());
        b[4] = 3;
        b[6..8].copy_from_slice(&10u16.to_ne_bytes());
        b[8..10].copy_from_slice(&51000u16.to_ne_bytes());
        b[16..24].copy_from_slice(&0xdead_beefu64.to_ne_bytes());
        b[24..32].copy_from_slice(&123_456u64.to_ne_bytes());
        // [::]: every address.
        b[48..55].copy_from_slice(b"tlsperf");
        let Some(Event::UdpBound(u)) = decode(&b) else {
            panic!("not a bind")
        };
        assert_eq!(u.local, "[::]:51000".parse().unwrap());
        assert_eq!((u.pid, u.thread.as_str()), (777, "tlsperf"));
        assert_eq!((u.cookie, u.ns), (0xdead_beef, 123_456));
        b[4] = 4;
        assert_eq!(
            decode(&b),
            Some(Event::UdpReleased {
                cookie: 0xdead_beef,
                ns: 123_456
            })
        );
        assert!(decode(&b[..40]).is_none());
        b[4] = 9;
        assert!(decode(&b).is_none());
    }

    #[test]
    fn finds_the_root_of_the_cgroup_v2_hierarchy() {
        let hybrid = "25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs ro,mode=755\n\
                      26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_root(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let v2 = "30 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_root(v2), Some(PathBuf::from("/sys/fs/cgroup")));
        // A container's view of its own cgroup only: not the root.
        let inner = "40 30 0:26 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        assert_eq!(cgroup2_root(inner), None);
    }
}
