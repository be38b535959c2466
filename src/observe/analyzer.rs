//! The analysis pipeline shared by capture files and live capture: frame → decode → port
//! filter → flow table (reassembly, TLS records, timelines) → aggregation; a UDP datagram
//! on the ports → the QUIC connection table → an aggregation of its own (the
//! observation's `quic` part), live and from capture files alike. Every outcome, of
//! either transport, then goes through the same hooks (process attribution, metrics,
//! windows, the handshake log), each keeping the transports apart (a `transport` label, a
//! window's `quic` part, a log line's `transport`); the join with the probes is TCP's
//! alone (they read OpenSSL's and Go's TLS over TCP sockets).

use std::sync::{Arc, Mutex};

use super::aggregate::Aggregate;
use super::connections::{ConnectionLog, ProbeLine};
use super::decode::{Link, decode, decode_udp};
use super::flow::{Clock, FlowTable, KernelFlows, Limits};
use super::metrics::ObserveMetrics;
use super::process::Processes;
use super::quic_flow::QuicTable;
use super::result::{Observation, Packets, QuicPackets, Source};
use super::timeline::{Outcome, Transport};
use super::window::Windows;
use crate::probes::join::Line;
use crate::probes::{WireHandshake, WireIndex};

/// Frames in, an [`Observation`] out.
#[derive(Debug)]
pub struct Analyzer {
    ports: Vec<u16>,
    table: FlowTable,
    agg: Aggregate,
    packets: Packets,
    /// The capture time covered, as a clock that stray timestamps do not move.
    clock: Clock,
    hooks: Hooks,
    /// QUIC, made at the first UDP datagram on the ports.
    quic: Option<Box<Quic>>,
    sources: Vec<Source>,
    limits: Limits,
}

/// The QUIC side of the analysis: its connections and their aggregation.
#[derive(Debug)]
struct Quic {
    table: QuicTable,
    agg: Aggregate,
}

/// The share of the histograms' budget the QUIC aggregation takes (of its own, beside
/// TCP's).
const QUIC_HISTOGRAM_SHARE: usize = 4;

/// What else happens to each outcome (live capture): process attribution, metrics,
/// windows, the join with the probes (TCP's outcomes only), the connections log.
#[derive(Debug, Default)]
struct Hooks {
    processes: Option<Processes>,
    metrics: Option<Arc<ObserveMetrics>>,
    probes: Option<Arc<Mutex<WireIndex>>>,
    connections: Option<Arc<Mutex<ConnectionLog>>>,
    windows: Option<Arc<Mutex<Windows>>>,
}

impl Hooks {
    /// The kernel's socket-owner records lost so far (0 without them).
    fn attribution_lost(&self) -> u64 {
        let counts = self.processes.as_ref().and_then(|p| p.kernel_counts());
        counts.map_or(0, |c| c.lost)
    }

    /// `o`, an outcome of a connection over `transport`, to each hook, then into `agg`.
    fn apply(&mut self, mut o: Outcome, transport: Transport, agg: &mut Aggregate) {
        if let (Some(p), Outcome::Handshake(h)) = (&mut self.processes, &mut o) {
            match transport {
                Transport::Tcp => {
                    h.client_process = p.client(h.client, h.server);
                    h.server_process = p.server(h.client, h.server);
                }
                Transport::Quic => {
                    h.client_process = p.udp(h.client, h.start_ns);
                    h.server_process = p.udp(h.server, h.start_ns);
                }
            }
        }
        if let Some(m) = &self.metrics {
            m.outcome(&o, transport);
        }
        if let Some(w) = &self.windows {
            let mut w = crate::sync::lock(w);
            w.wire(&o, transport, super::live::now_ns());
        }
        let probed = transport == Transport::Tcp;
        if let (Some(index), Outcome::Handshake(h), true) = (&self.probes, &o, probed) {
            // The line waits for its probe record (or for the wait to end).
            let line = self.connections.as_ref().map(|log| {
                let (log, h) = (Arc::clone(log), h.clone());
                let line: Line = Box::new(move |r, offset| {
                    let probe = r.map(|r| ProbeLine::of(r, offset));
                    crate::sync::lock(&log).record_probed(&h, probe)
                });
                line
            });
            let mut index = crate::sync::lock(index);
            index.add(
                WireHandshake {
                    client: h.client,
                    server: h.server,
                    kind: h.kind.name(),
                    server_think_ns: h.phases.server_think,
                    sni: h.sni.clone(),
                    start_ns: h.start_ns,
                    established_ns: h.start_ns.zip(h.phases.connect).map(|(s, c)| s + c),
                },
                line,
            );
        } else if let (Some(log), Outcome::Handshake(h)) = (&self.connections, &o) {
            crate::sync::lock(log).record(h)
        }
        agg.outcome(o);
    }
}

impl Analyzer {
    /// An analyzer of `sources`, keeping TCP segments to or from `ports` (every port when
    /// empty).
    pub fn new(sources: Vec<Source>, ports: Vec<u16>, limits: Limits) -> Analyzer {
        Analyzer {
            agg: Aggregate::new(sources.clone(), ports.clone(), limits.histogram_budget()),
            ports,
            table: FlowTable::new(limits),
            packets: Packets::default(),
            clock: Clock::default(),
            hooks: Hooks::default(),
            quic: None,
            sources,
            limits,
        }
    }

    /// Attributes local endpoints to processes through `p` (live capture on this host).
    pub fn attribute_processes(&mut self, p: Processes) {
        self.agg.set_attribution(p.source());
        self.hooks.processes = Some(p);
    }

    /// Gives every completed handshake to the probes, to join with what they saw inside
    /// the processes.
    pub fn join_probes(&mut self, index: Arc<Mutex<WireIndex>>) {
        self.hooks.probes = Some(index);
    }

    /// Writes every completed handshake to `log` too.
    pub fn log_connections(&mut self, log: Arc<Mutex<ConnectionLog>>) {
        self.hooks.connections = Some(log);
    }

    /// Tells the kernel filter which connections' payload is no longer read (live, eBPF).
    pub fn drop_in_kernel(&mut self, kernel: Box<dyn KernelFlows>) {
        self.table.drop_in_kernel(kernel);
    }

    /// Counts every outcome in the open window of `windows` too (live).
    pub fn windows(&mut self, windows: Arc<Mutex<Windows>>) {
        self.hooks.windows = Some(windows);
    }

    /// Counts every outcome in `metrics` too.
    pub fn export(&mut self, metrics: Arc<ObserveMetrics>) {
        self.hooks.metrics = Some(metrics);
    }

    /// One frame captured at `ns` (nanoseconds since the Unix epoch), `wire_len` bytes
    /// long on the wire of which `data` were captured (fewer: cut by the snap length).
    pub fn frame(&mut self, ns: u64, link: Link, data: &[u8], wire_len: usize) {
        self.packets.frames += 1;
        if wire_len > data.len() {
            self.packets.cut_short += 1;
        }
        // Its outliers are counted by the flow table (TCP segments on the ports); its
        // time evicts idle QUIC connections.
        let now = self.clock.tick(ns).now;
        let Some(seg) = decode(link, data, wire_len) else {
            self.packets.not_tcp += 1;
            if let Some(d) = decode_udp(link, data, wire_len) {
                self.datagram(ns, now, d.src, d.dst, d.payload);
            }
            return;
        };
        if !self.ports.is_empty()
            && !self.ports.contains(&seg.src.port())
            && !self.ports.contains(&seg.dst.port())
        {
            self.packets.other_ports += 1;
            return;
        }
        self.packets.tcp_segments += 1;
        if seg.flags.syn
            && !seg.flags.ack
            && let Some(p) = &mut self.hooks.processes
        {
            p.opening(seg.src, seg.dst);
        }
        let (agg, hooks) = (&mut self.agg, &mut self.hooks);
        self.table
            .segment(ns, &seg, &mut |o| hooks.apply(o, Transport::Tcp, agg));
    }

    /// A UDP datagram: to the QUIC table when on the ports.
    fn datagram(
        &mut self,
        ns: u64,
        now: u64,
        src: std::net::SocketAddr,
        dst: std::net::SocketAddr,
        payload: &[u8],
    ) {
        let (sources, ports, limits) = (&self.sources, &self.ports, self.limits);
        let q = self.quic.get_or_insert_with(|| {
            Box::new(Quic {
                table: QuicTable::new(limits),
                agg: Aggregate::new_quic(
                    sources.clone(),
                    ports.clone(),
                    limits.histogram_budget() / QUIC_HISTOGRAM_SHARE,
                ),
            })
        });
        if !ports.is_empty() && !ports.contains(&src.port()) && !ports.contains(&dst.port()) {
            q.table.other_port();
            return;
        }
        let (agg, hooks) = (&mut q.agg, &mut self.hooks);
        q.table.datagram(ns, now, src, dst, payload, &mut |o| {
            hooks.apply(o, Transport::Quic, agg)
        });
    }

    /// The QUIC part of the observation: `None` when no QUIC packet was seen.
    fn quic_part(
        packets: QuicPackets,
        agg: Observation,
        duration_s: f64,
        started_ns: Option<u64>,
    ) -> Option<Box<Observation>> {
        if !packets.any_quic() {
            return None;
        }
        let mut o = agg;
        o.packets = Packets {
            frames: packets.datagrams,
            quic: Some(packets),
            ..Packets::default()
        };
        o.duration_s = duration_s;
        o.started_ns = started_ns;
        Some(Box::new(o))
    }

    /// Takes in the kernel's socket owners recorded since the last handshake looked up
    /// (live capture: see [`Processes::drain`]).
    pub fn keep_up_processes(&mut self) {
        if let Some(p) = &mut self.hooks.processes {
            p.drain();
        }
    }

    /// Frames the kernel dropped (live capture).
    pub fn set_kernel_drops(&mut self, drops: u64) {
        self.packets.kernel_drops = drops;
        if let Some(m) = &self.hooks.metrics {
            m.kernel_drops(drops);
        }
    }

    /// Segments the kernel filter dropped, of connections whose analysis was over (live,
    /// eBPF).
    pub fn set_kernel_filtered(&mut self, segments: u64) {
        self.packets.kernel_filtered = segments;
        if let Some(m) = &self.hooks.metrics {
            m.kernel_filtered(segments);
        }
    }

    /// Evicts idle and half-open connections as of `now_ns` (live capture, when no
    /// frame arrives to do it).
    pub fn sweep(&mut self, now_ns: u64) {
        let (agg, hooks) = (&mut self.agg, &mut self.hooks);
        self.table
            .sweep(now_ns, &mut |o| hooks.apply(o, Transport::Tcp, agg));
        if let Some(q) = &mut self.quic {
            let agg = &mut q.agg;
            q.table
                .sweep(now_ns, &mut |o| hooks.apply(o, Transport::Quic, agg));
        }
    }

    /// First to last frame, seconds, a frame stamped far from its neighbours left out.
    fn duration_s(&self) -> f64 {
        self.clock.covered() as f64 / 1e9
    }

    /// What is known so far (connections still open are not in it).
    pub fn snapshot(&self) -> Observation {
        let mut o = self
            .agg
            .snapshot(self.table.counters(), self.packets, self.duration_s());
        o.started_ns = self.clock.began();
        o.attribution_lost = self.hooks.attribution_lost();
        if let Some(q) = &self.quic {
            let agg = q
                .agg
                .snapshot(q.table.counters(), Packets::default(), self.duration_s());
            o.quic = Self::quic_part(q.table.packets(), agg, self.duration_s(), o.started_ns);
        }
        o
    }

    /// Ends every connection still open and returns the observation.
    pub fn finish(mut self) -> Observation {
        let (agg, hooks) = (&mut self.agg, &mut self.hooks);
        self.table
            .finish(&mut |o| hooks.apply(o, Transport::Tcp, agg));
        let duration_s = self.duration_s();
        let started_ns = self.clock.began();
        let mut o = self
            .agg
            .into_observation(self.table.counters(), self.packets, duration_s);
        o.started_ns = started_ns;
        if let Some(mut q) = self.quic.take() {
            let (agg, hooks) = (&mut q.agg, &mut self.hooks);
            q.table
                .finish(&mut |o| hooks.apply(o, Transport::Quic, agg));
            let Quic { table, agg } = *q;
            let (counters, packets) = (table.counters(), table.packets());
            let part = agg.into_observation(counters, Packets::default(), duration_s);
            o.quic = Self::quic_part(packets, part, duration_s, started_ns);
        }
        o.attribution_lost = self.hooks.attribution_lost();
        o
    }
}
