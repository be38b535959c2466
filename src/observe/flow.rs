//! TCP flow reassembly and the bounded flow table. Each connection is tracked from its
//! SYN; its two byte streams are put back in order (retransmissions trimmed, segments
//! that arrive early held until the gap before them fills), and TLS records are cut out
//! of them as soon as they are whole and handed to the connection's
//! [`Timeline`](super::timeline::Timeline). Once a connection's handshake and first
//! application byte are in, its payload is no longer kept.
//!
//! The table is bounded: connections idle longer than the idle timeout, and half-open
//! ones (a SYN and nothing more) after the half-open timeout, are evicted; beyond the
//! cap new connections are not tracked and are counted. Connections whose SYN was not
//! captured (already open when the capture began) are counted, not analyzed.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;

use super::decode::Segment;
use super::timeline::{Outcome, Record, Side, Timeline};
use super::tls::{Frame, frame};

/// Limits of the flow table.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections tracked at once.
    pub max_flows: usize,
    /// A connection without a segment for this long (capture time) is evicted.
    pub idle_ns: u64,
    /// A connection with a SYN and no payload for this long is evicted.
    pub half_open_ns: u64,
    /// Most bytes held out of order per direction before the stream is given up.
    pub max_out_of_order: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_flows: 100_000,
            idle_ns: 60_000_000_000,
            half_open_ns: 10_000_000_000,
            max_out_of_order: 256 * 1024,
        }
    }
}

/// What the table did besides analyzing connections (see [`FlowTable::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Connections tracked from their SYN.
    pub tracked: u64,
    /// Connections whose SYN was not captured (not analyzed).
    pub midstream: u64,
    /// Connections evicted idle (their handshake, if complete, still counts).
    pub evicted_idle: u64,
    /// Half-open connections evicted.
    pub evicted_half_open: u64,
    /// Connections not tracked because the table was full.
    pub over_cap: u64,
}

/// One direction's byte stream.
#[derive(Debug, Default)]
struct Stream {
    /// Sequence number of stream offset 0 (the ISN + 1).
    base: Option<u32>,
    /// Next offset expected.
    next: u64,
    /// Delivered bytes not yet consumed, from offset `start`.
    buf: Vec<u8>,
    start: u64,
    /// Per delivered segment: (end offset, capture time, acked every byte of the peer).
    marks: VecDeque<(u64, u64, bool)>,
    /// Segments ahead of `next`: offset → (bytes, capture time, acks flag).
    ahead: BTreeMap<u64, (Vec<u8>, u64, bool)>,
    ahead_bytes: usize,
}

/// A stream that cannot be followed any more.
struct Gap;

impl Stream {
    fn offset(&self, seq: u32) -> Option<u64> {
        let base = self.base?;
        // Relative to the next expected byte, so that sequence numbers may wrap.
        let next_seq = base.wrapping_add(self.next as u32);
        let delta = i64::from(seq.wrapping_sub(next_seq) as i32);
        u64::try_from(self.next as i64 + delta).ok()
    }

    fn push(
        &mut self,
        seq: u32,
        data: &[u8],
        ns: u64,
        acks: bool,
        limit: usize,
    ) -> Result<bool, Gap> {
        if data.is_empty() {
            return Ok(false);
        }
        let Some(off) = self.offset(seq) else {
            return Ok(false);
        };
        let end = off + data.len() as u64;
        if end <= self.next {
            return Ok(false); // a retransmission of what we have
        }
        if off > self.next {
            if self.ahead_bytes + data.len() > limit {
                return Err(Gap);
            }
            let keep = self
                .ahead
                .entry(off)
                .or_insert_with(|| (Vec::new(), ns, acks));
            if keep.0.len() < data.len() {
                self.ahead_bytes += data.len() - keep.0.len();
                *keep = (data.to_vec(), ns, acks);
            }
            return Ok(false);
        }
        self.append(off, data, ns, acks);
        while let Some(entry) = self.ahead.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (off, (bytes, ns, acks)) = entry.remove_entry();
            self.ahead_bytes -= bytes.len();
            if off + bytes.len() as u64 > self.next {
                self.append(off, &bytes, ns, acks);
            }
        }
        Ok(true)
    }

    fn append(&mut self, off: u64, data: &[u8], ns: u64, acks: bool) {
        // Invariant: off <= next < off + data.len() (checked by the callers).
        let skip = (self.next - off) as usize;
        self.buf.extend_from_slice(&data[skip..]);
        self.next = off + data.len() as u64;
        self.marks.push_back((self.next, ns, acks));
    }

    /// Capture time and acks flag of the segment that delivered offset `off`.
    fn mark_at(&self, off: u64) -> (u64, bool) {
        self.marks
            .iter()
            .find(|m| m.0 > off)
            .or(self.marks.back())
            .map_or((0, false), |m| (m.1, m.2))
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        self.start += n as u64;
        while self.marks.front().is_some_and(|m| m.0 <= self.start) {
            self.marks.pop_front();
        }
    }

    fn clear(&mut self) {
        self.buf = Vec::new();
        self.marks = VecDeque::new();
        self.ahead = BTreeMap::new();
        self.ahead_bytes = 0;
    }
}

#[derive(Debug)]
struct Flow {
    client: SocketAddr,
    /// Client → server, server → client.
    streams: [Stream; 2],
    timeline: Option<Timeline>,
    syn_ack: bool,
    fin: [bool; 2],
    payload_seen: bool,
    first_ns: u64,
    last_ns: u64,
}

type Key = (SocketAddr, SocketAddr);

fn key(a: SocketAddr, b: SocketAddr) -> Key {
    if a <= b { (a, b) } else { (b, a) }
}

/// The flow table: segments in, connection outcomes out (to `sink`).
#[derive(Debug)]
pub struct FlowTable {
    flows: HashMap<Key, Flow>,
    limits: Limits,
    counters: Counters,
    last_sweep_ns: u64,
}

impl FlowTable {
    /// An empty table.
    pub fn new(limits: Limits) -> FlowTable {
        FlowTable {
            flows: HashMap::new(),
            limits,
            counters: Counters::default(),
            last_sweep_ns: 0,
        }
    }

    /// What the table did besides analysis.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Connections tracked right now.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// True when no connection is tracked.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// One segment captured at `ns`; ended connections go to `sink`.
    pub fn segment(&mut self, ns: u64, seg: &Segment<'_>, sink: &mut impl FnMut(Outcome)) {
        if ns >= self.last_sweep_ns.saturating_add(1_000_000_000) {
            self.sweep(ns, sink);
        }
        let k = key(seg.src, seg.dst);
        let flow = match self.flows.get_mut(&k) {
            Some(f) => f,
            None => {
                if self.flows.len() >= self.limits.max_flows {
                    if seg.flags.syn && !seg.flags.ack {
                        self.counters.over_cap += 1;
                    }
                    return;
                }
                let tracked = seg.flags.syn && !seg.flags.ack;
                if !tracked && seg.payload.is_empty() {
                    // A bare ACK, FIN or RST of a connection not tracked (often the last
                    // ACK of one just closed): nothing to follow.
                    return;
                }
                if tracked {
                    self.counters.tracked += 1;
                } else {
                    self.counters.midstream += 1;
                }
                self.flows.entry(k).or_insert_with(|| Flow {
                    client: seg.src,
                    streams: [Stream::default(), Stream::default()],
                    timeline: tracked.then(|| Timeline::new(seg.src, seg.dst)),
                    syn_ack: false,
                    fin: [false; 2],
                    payload_seen: false,
                    first_ns: ns,
                    last_ns: ns,
                })
            }
        };
        flow.last_ns = ns;
        if !seg.payload.is_empty() {
            flow.payload_seen = true;
        }
        let side = if seg.src == flow.client {
            Side::Client
        } else {
            Side::Server
        };
        let Some(tl) = flow.timeline.as_mut() else {
            // Not analyzed: forget it once it closes.
            if seg.flags.rst || seg.flags.fin {
                self.flows.remove(&k);
            }
            return;
        };
        let (me, peer) = match side {
            Side::Client => (0, 1),
            Side::Server => (1, 0),
        };
        if seg.flags.syn {
            if side == Side::Client && !seg.flags.ack {
                tl.syn(ns);
                flow.streams[0].base.get_or_insert(seg.seq.wrapping_add(1));
            } else if side == Side::Server && seg.flags.ack {
                flow.syn_ack = true;
                flow.streams[1].base.get_or_insert(seg.seq.wrapping_add(1));
            }
        } else if side == Side::Client && seg.flags.ack && flow.syn_ack {
            tl.handshake_ack(ns);
        }
        if flow.streams[me].base.is_none() && !seg.payload.is_empty() {
            // The SYN-ACK was not captured: start the server's stream here.
            flow.streams[me].base = Some(seg.seq);
        }
        if !seg.payload.is_empty() && !tl.done() {
            let acks = seg.flags.ack
                && flow.streams[peer].base.is_some_and(|b| {
                    i64::from(seg.ack.wrapping_sub(b) as i32) >= flow.streams[peer].next as i64
                });
            let limit = self.limits.max_out_of_order;
            match flow.streams[me].push(seg.seq, seg.payload, ns, acks, limit) {
                Ok(true) => drain_records(&mut flow.streams[me], side, tl),
                Ok(false) => {}
                Err(Gap) => tl.unparsed(),
            }
            if tl.done() {
                flow.streams[0].clear();
                flow.streams[1].clear();
            }
        }
        if seg.flags.rst {
            tl.reset();
        }
        if seg.flags.fin {
            tl.fin();
            flow.fin[me] = true;
        }
        if seg.flags.rst || (flow.fin[0] && flow.fin[1]) {
            if let Some(f) = self.flows.remove(&k)
                && let Some(tl) = f.timeline
            {
                sink(tl.outcome());
            }
        }
    }

    /// Evicts idle and half-open connections as of capture time `now_ns`.
    pub fn sweep(&mut self, now_ns: u64, sink: &mut impl FnMut(Outcome)) {
        self.last_sweep_ns = now_ns;
        let limits = self.limits;
        let mut evicted = Vec::new();
        for (k, f) in &self.flows {
            let idle = now_ns.saturating_sub(f.last_ns);
            if !f.payload_seen && now_ns.saturating_sub(f.first_ns) > limits.half_open_ns {
                evicted.push((*k, true));
            } else if idle > limits.idle_ns {
                evicted.push((*k, false));
            }
        }
        for (k, half_open) in evicted {
            if half_open {
                self.counters.evicted_half_open += 1;
            } else {
                self.counters.evicted_idle += 1;
            }
            if let Some(f) = self.flows.remove(&k)
                && let Some(tl) = f.timeline
            {
                sink(tl.outcome());
            }
        }
    }

    /// Ends every connection still tracked (the capture is over).
    pub fn finish(&mut self, sink: &mut impl FnMut(Outcome)) {
        for (_, f) in self.flows.drain() {
            if let Some(tl) = f.timeline {
                sink(tl.outcome());
            }
        }
    }
}

/// Cuts the whole records out of a stream and gives them to the timeline.
fn drain_records(stream: &mut Stream, side: Side, tl: &mut Timeline) {
    let mut used = 0;
    loop {
        match frame(&stream.buf[used..]) {
            Frame::NeedMore => break,
            Frame::Garbage => {
                tl.not_tls();
                break;
            }
            Frame::Record { content_type, len } => {
                let first = stream.start + used as u64;
                let last = first + 5 + len as u64 - 1;
                let (first_ns, acks_server) = stream.mark_at(first);
                let (last_ns, _) = stream.mark_at(last);
                tl.record(&Record {
                    side,
                    content_type,
                    body: &stream.buf[used + 5..used + 5 + len],
                    first_ns,
                    last_ns,
                    acks_server,
                });
                used += 5 + len;
                if tl.done() {
                    break;
                }
            }
        }
    }
    stream.consume(used);
}
