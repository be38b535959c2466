//! The eBPF capture filter of a live observation: `capture.bpf.o` (its C source beside
//! the probes' in `src/probes/bpf/`, built by the same `build.sh`, committed) loaded with
//! aya and attached to the `AF_PACKET` socket with `SO_ATTACH_BPF`. It keeps what the
//! classic filter of [`super::live`] keeps (TCP and UDP on the ports; on loopback, not the
//! outgoing copy; UDP datagrams, QUIC's, always pass whole) and drops in the kernel the segments of the connection directions in
//! its `done_flows` map that carry no SYN, FIN or RST: the flow table adds a direction
//! there ([`KernelDrop`], through [`super::flow::KernelFlows`]) once its analysis reads
//! no more of it — after that side's first application record (the client's request,
//! the server's first byte after it), or at once for a connection that is not analyzed
//! — and it goes on ([`super::flow::KERNEL_AFTER`] segments later: a short connection is
//! not worth the system calls), and removes both when the connection ends or is
//! evicted. The program counts what it dropped (a per-CPU array) and stamps each
//! connection's entry with the time of its last dropped segment, which the flow table
//! asks for before evicting a connection it has not seen for a while.
//!
//! Frames are not cut shorter than the capture's snap length: a segment that passes is
//! one whose payload is read (a record header may be anywhere in it) or a SYN, FIN or
//! RST, whose payload is rare and small, and cutting it would count it as a frame cut
//! short.

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;

use aya::maps::{HashMap, MapData, PerCpuArray};
use aya::programs::SocketFilter;
use aya::{Ebpf, EbpfLoader};

use super::decode::Link;
use super::flow::KernelFlows;

/// The compiled filter (src/probes/bpf/capture.bpf.c, rebuilt by build.sh).
static OBJECT: &[u8] = aya::include_bytes_aligned!("../probes/bpf/capture.bpf.o");

/// Most connection directions the kernel map holds (two per connection); a connection
/// beyond it is not added (its segments pass).
pub const MAX_DONE_ENTRIES: u32 = 1 << 20;

/// `struct flow_key` of capture.bpf.c: one direction of a connection.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    saddr: [u8; 16],
    daddr: [u8; 16],
    sport: u16,
    dport: u16,
    family: u32,
}

// SAFETY: `FlowKey` is `repr(C)`, `Copy`, without padding (16 + 16 + 2 + 2 + 4 bytes) and
// valid for any bit pattern, as `aya::Pod` requires.
unsafe impl aya::Pod for FlowKey {}

impl FlowKey {
    /// The direction from `src` to `dst`, as the kernel program builds it from a segment.
    fn of(src: SocketAddr, dst: SocketAddr) -> FlowKey {
        let mut k = FlowKey {
            saddr: [0; 16],
            daddr: [0; 16],
            sport: src.port(),
            dport: dst.port(),
            family: 4,
        };
        for (out, a) in [(&mut k.saddr, src), (&mut k.daddr, dst)] {
            match a {
                SocketAddr::V4(v4) => out[..4].copy_from_slice(&v4.ip().octets()),
                SocketAddr::V6(v6) => out.copy_from_slice(&v6.ip().octets()),
            }
        }
        if src.is_ipv6() {
            k.family = 6;
        }
        k
    }
}

/// The loaded and attached filter: its counters (the map of done connections is given
/// to the flow table as a [`KernelDrop`]).
pub struct Filter {
    ebpf: Ebpf,
    done: Option<KernelDrop>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter").finish_non_exhaustive()
    }
}

/// Why the eBPF filter could not be used (the classic one is, then).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(String);

impl Filter {
    /// Loads the filter for `link` (loopback: the outgoing copy dropped) and `ports`
    /// (every port when empty), keeping `snaplen` bytes of a frame that passes, sizes its
    /// map for `max_flows` connections, and attaches it to `socket`.
    pub fn attach(
        socket: BorrowedFd<'_>,
        link: Link,
        loopback: bool,
        ports: &[u16],
        snaplen: u32,
        max_flows: usize,
    ) -> Result<Filter, Unavailable> {
        let link_header: u32 = if link == Link::Ethernet { 14 } else { 0 };
        let loopback = u32::from(loopback);
        let any_port = u32::from(ports.is_empty());
        let entries = u32::try_from(max_flows.saturating_mul(2))
            .unwrap_or(u32::MAX)
            .clamp(1024, MAX_DONE_ENTRIES);
        let mut ebpf = EbpfLoader::new()
            .override_global("link_header", &link_header, true)
            .override_global("loopback", &loopback, true)
            .override_global("any_port", &any_port, true)
            .override_global("snaplen", &snaplen, true)
            .map_max_entries("done_flows", entries)
            .load(OBJECT)
            .map_err(|e| Unavailable(format!("loading it failed: {}", chain(&e))))?;
        {
            let map = ebpf
                .map_mut("ports")
                .ok_or_else(|| Unavailable("its object has no ports map".into()))?;
            let mut map = HashMap::<_, u16, u8>::try_from(map)
                .map_err(|e| Unavailable(format!("its ports map: {}", chain(&e))))?;
            for p in ports {
                map.insert(p, 1, 0)
                    .map_err(|e| Unavailable(format!("setting its ports: {}", chain(&e))))?;
            }
        }
        let done = ebpf
            .take_map("done_flows")
            .ok_or_else(|| Unavailable("its object has no done_flows map".into()))?;
        let done = HashMap::<MapData, FlowKey, u64>::try_from(done)
            .map_err(|e| Unavailable(format!("its done_flows map: {}", chain(&e))))?;
        let program: &mut SocketFilter = ebpf
            .program_mut("observe_filter")
            .ok_or_else(|| Unavailable("its object has no observe_filter program".into()))?
            .try_into()
            .map_err(|e| Unavailable(format!("its program: {}", chain(&e))))?;
        program
            .load()
            .map_err(|e| Unavailable(format!("the kernel refused it: {}", chain(&e))))?;
        program
            .attach(socket)
            .map_err(|e| Unavailable(format!("attaching it failed: {}", chain(&e))))?;
        Ok(Filter {
            ebpf,
            done: Some(KernelDrop { map: done }),
        })
    }

    /// The map of done connections, for the flow table (once).
    pub fn take_kernel_drop(&mut self) -> Option<KernelDrop> {
        self.done.take()
    }

    /// Segments and bytes dropped in the kernel so far (summed over CPUs).
    pub fn dropped(&self) -> (u64, u64) {
        let Some(map) = self.ebpf.map("filter_counters") else {
            return (0, 0);
        };
        let Ok(array) = PerCpuArray::<_, u64>::try_from(map) else {
            return (0, 0);
        };
        let at = |i: u32| array.get(&i, 0).map_or(0, |v| v.iter().sum::<u64>());
        (at(0), at(1))
    }
}

/// An error and its sources, in words (a source that repeats what is said already left
/// out), with what to do when the kernel refused for want of privilege.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(c) = source {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = c.source();
    }
    if s.contains("(os error 1)") {
        s.push_str(" (eBPF needs CAP_BPF, or root)");
    }
    s
}

/// The kernel map of connections whose payload is dropped, as the flow table sees it.
pub struct KernelDrop {
    map: HashMap<MapData, FlowKey, u64>,
}

impl std::fmt::Debug for KernelDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelDrop").finish_non_exhaustive()
    }
}

/// `clock`'s time, ns (CLOCK_MONOTONIC is `bpf_ktime_get_ns`'s).
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

impl KernelFlows for KernelDrop {
    fn done(&mut self, from: SocketAddr, to: SocketAddr) {
        // Refused when the map is full (it holds two entries per connection of the
        // table: not without a leak) or for want of kernel memory: the direction's
        // segments keep coming, and are not read.
        if let Err(e) = self.map.insert(FlowKey::of(from, to), 0, 0) {
            tracing::debug!(
                "the kernel filter did not take {from} → {to}: {}",
                chain(&e)
            );
        }
    }

    fn ended(&mut self, a: SocketAddr, b: SocketAddr) {
        for k in [FlowKey::of(a, b), FlowKey::of(b, a)] {
            // Not there (the map was full when it was added): nothing to do.
            let _ = self.map.remove(&k);
        }
    }

    fn last_dropped(&self, a: SocketAddr, b: SocketAddr) -> Option<u64> {
        let t = [FlowKey::of(a, b), FlowKey::of(b, a)]
            .iter()
            .filter_map(|k| self.map.get(k, 0).ok())
            .max()
            .filter(|t| *t > 0)?;
        let ago = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(t);
        Some(clock_ns(libc::CLOCK_REALTIME).saturating_sub(ago))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error of `text` caused by `source`.
    #[derive(Debug)]
    struct Layer(&'static str, Box<dyn std::error::Error + 'static>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(self.1.as_ref())
        }
    }

    /// As aya's load errors nest: the map's name said twice was said twice.
    #[test]
    fn errors_are_said_once_with_what_to_do() {
        let io = std::io::Error::from_raw_os_error(libc::EPERM);
        let e = Layer(
            "map error: failed to create map `done_flows`",
            Box::new(Layer("failed to create map `done_flows`", Box::new(io))),
        );
        let text = chain(&e);
        assert_eq!(text.matches("done_flows").count(), 1, "{text}");
        assert!(
            text.ends_with(
                "`done_flows`: Operation not permitted (os error 1) (eBPF needs CAP_BPF, or root)"
            ),
            "{text}"
        );
    }

    #[test]
    fn keys_are_the_kernel_programs_directions() {
        assert_eq!(std::mem::size_of::<FlowKey>(), 40);
        let k = FlowKey::of(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:443".parse().unwrap(),
        );
        assert_eq!(&k.saddr[..5], &[10, 0, 0, 1, 0]);
        assert_eq!(&k.daddr[..4], &[10, 0, 0, 2]);
        assert_eq!((k.sport, k.dport, k.family), (40000, 443, 4));
        let k = FlowKey::of("[::1]:1".parse().unwrap(), "[::2]:2".parse().unwrap());
        assert_eq!((k.saddr[15], k.daddr[15], k.family), (1, 2, 6));
    }
}
