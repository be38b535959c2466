//! Socket owners from the kernel: which process is at each end of every TCP connection
//! this host opens or accepts, exactly, for `observe`'s process attribution. Tracepoints
//! only (`sock:inet_sock_set_state`, `accept`/`accept4`), no uprobes: it needs BPF
//! capabilities and tracefs, not a TLS library. The programs are `bpf/owners.bpf.c`; where
//! each end is taken is described there.
//!
//! [`Tracer::start`] loads and attaches them; [`Tracer::drain`] reads what arrived, as
//! [`Owner`]s. Dropping the tracer detaches everything.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::programs::TracePoint;
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

/// The size of `struct owner_event`.
const RAW_LEN: usize = 4 + 1 + 1 + 2 + 2 + 2 + 16 + 16 + 16;

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
}

/// The loaded programs and their ring buffer.
pub struct Tracer {
    ebpf: Ebpf,
    ring: RingBuf<MapData>,
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
        let map = ebpf
            .take_map("owners")
            .ok_or_else(|| ProbeError::Load("the BPF object has no owners map".into()))?;
        let ring = RingBuf::try_from(map).map_err(|e| ProbeError::Load(e.to_string()))?;
        Ok(Tracer { ebpf, ring })
    }

    /// Every record that arrived since the last call, in order.
    pub fn drain(&mut self, mut f: impl FnMut(Owner)) {
        while let Some(item) = self.ring.next() {
            if let Some(o) = decode(&item) {
                f(o);
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
        }
    }
}

/// A `struct owner_event` (host byte order, as the kernel wrote it).
fn decode(b: &[u8]) -> Option<Owner> {
    if b.len() < RAW_LEN {
        return None;
    }
    let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
    let tgid = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
    let role = b[4];
    let family = u16_at(6);
    let (lport, rport) = (u16_at(8), u16_at(10));
    let ip = |at: usize| -> Option<IpAddr> {
        let a = &b[at..at + 16];
        match family {
            2 => Some(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
            10 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(a);
                let v6 = Ipv6Addr::from(o);
                Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
            }
            _ => None,
        }
    };
    let local = SocketAddr::new(ip(12)?, lport);
    let remote = SocketAddr::new(ip(28)?, rport);
    let comm = &b[44..60];
    let thread = String::from_utf8_lossy(&comm[..comm.iter().position(|&c| c == 0).unwrap_or(16)])
        .into_owned();
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
        let o = decode(&b).unwrap();
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
        let o = decode(&b).unwrap();
        assert!(o.client_end);
        assert_eq!(o.client, "127.0.0.1:443".parse().unwrap());
        assert_eq!(o.server, "[::1]:50000".parse().unwrap());
        assert!(decode(&b[..10]).is_none());
    }
}
