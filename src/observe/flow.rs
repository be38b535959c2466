//! TCP flow reassembly and the bounded flow table. Each connection is tracked from its
//! SYN; its two byte streams are put back in order (retransmissions trimmed, segments
//! that arrive early held until the gap before them fills), and TLS records are cut out
//! of them as soon as they are whole and handed to the connection's
//! [`Timeline`].
//!
//! The table is bounded: connections idle longer than the idle timeout, and half-open
//! ones (a SYN and nothing more) after the half-open timeout, are evicted; beyond the
//! cap new connections are not tracked and are counted. Connections whose SYN was not
//! captured (already open when the capture began) are counted, not analyzed. Eviction
//! goes by the table's own [`Clock`], which a single frame with a wrong timestamp does
//! not move.
//!
//! Each direction's stream is read until its side's part of the analysis is in
//! ([`Timeline::done_with`]: the client's up to its request, the server's up to its first
//! byte after it); then its payload is no longer kept. Live, with the eBPF capture
//! filter, the table tells the kernel ([`KernelFlows`]) which directions it reads no
//! more payload of — those, once they go on ([`KERNEL_AFTER`] segments later), and both
//! directions of a connection not analyzed (its SYN not captured) — and removes a
//! connection's when it ends or is evicted; meanwhile the kernel drops their segments
//! that carry no SYN, FIN or RST. Such a connection is evicted as idle only when the
//! kernel has not dropped a segment of it for the idle timeout either.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;

use super::decode::Segment;
use super::timeline::{Endpoint, Outcome, Record, Timeline};
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
    /// Most memory the whole analysis may hold, in three shares: 3/8 for the
    /// connections' fixed parts (the table's allocation by its capacity, its growth
    /// included, and [`FLOW_COST`]'s own part per connection), 3/8 for the bytes their streams
    /// hold (in order, awaiting a record's end, and out of order), 1/4 for the
    /// histograms ([`Limits::histogram_budget`]). A new connection beyond the first share
    /// is not tracked, and a segment that takes the streams past the second gives up its
    /// own connection's reassembly (both counted in [`Counters::shed`]); what the third
    /// cannot hold is left out of the histograms and counted (see
    /// [`super::aggregate::Aggregate`]). So connections holding data out of order never
    /// keep new ones from being tracked, nor many breakdown rows either.
    pub max_memory: usize,
}

impl Limits {
    /// The connections' fixed parts' share of [`Limits::max_memory`].
    pub fn flow_budget(&self) -> usize {
        self.max_memory / 8 * 3
    }

    /// The streams' share of [`Limits::max_memory`].
    pub fn stream_budget(&self) -> usize {
        self.max_memory / 8 * 3
    }

    /// The histograms' share of [`Limits::max_memory`].
    pub fn histogram_budget(&self) -> usize {
        self.max_memory / 4
    }
}

/// The memory one tracked connection takes besides the bytes its streams hold: the
/// table's entry (its two streams and its timeline are in it) with its control byte, and
/// a bound of the small allocations of its own (its timeline's and streams' lists).
/// The table itself is counted by its capacity, not its entries: see
/// [`FlowTable::table_bytes`].
pub const FLOW_COST: usize = ENTRY_BYTES + FLOW_HEAP;

/// One slot of the flow table's allocation: a `(Key, Flow)` and its control byte.
const ENTRY_BYTES: usize = std::mem::size_of::<(Key, Flow)>() + 1;

/// A bound of what a tracked connection allocates besides its table slot and its streams'
/// bytes (its timeline's small lists).
const FLOW_HEAP: usize = 64;

/// What one segment held out of order costs besides its bytes: its B-tree slot (the
/// offset and the entry, in nodes about half full) and its allocation's rounding.
const AHEAD_ENTRY_COST: usize = 160;

/// The buckets of a hash table that holds `capacity` entries without growing (hashbrown:
/// a power of two, seven eighths usable).
fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..=3 => 4,
        4..=7 => 8,
        _ => (capacity * 8).div_ceil(7).next_power_of_two(),
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_flows: 100_000,
            idle_ns: 60_000_000_000,
            half_open_ns: 10_000_000_000,
            max_out_of_order: 256 * 1024,
            max_memory: 1 << 30,
        }
    }
}

/// The kernel's side of the capture filter (live, eBPF): the directions of connections
/// whose segments without SYN, FIN or RST it drops.
pub trait KernelFlows: Send + std::fmt::Debug {
    /// The table reads no more payload sent from `from` to `to`.
    fn done(&mut self, from: SocketAddr, to: SocketAddr);
    /// The connection between `a` and `b` (either order) ended or was evicted: all its
    /// segments pass again, both ways.
    fn ended(&mut self, a: SocketAddr, b: SocketAddr);
    /// When the kernel last dropped one of its segments, ns since the Unix epoch; `None`
    /// when it has dropped none (or does not hold the connection).
    fn last_dropped(&self, a: SocketAddr, b: SocketAddr) -> Option<u64>;
}

/// How many segments one side of a connection sends after its part of the analysis is
/// over (not analyzed: after the connection is tracked), the one that ended it included,
/// before that direction is put in the kernel's map: adding it and removing it are a
/// system call each, about 0.5 µs of CPU apiece, which a short request and answer
/// followed by the close would spend to save a few segments' reading; a direction that
/// goes on (a download, an upload, a stream) is dropped in the kernel after these.
pub const KERNEL_AFTER: u32 = 16;

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
    /// Connections given up (or not tracked) to keep the table within
    /// [`Limits::max_memory`].
    pub shed: u64,
    /// Bytes those connections held when they were given up.
    pub shed_bytes: u64,
    /// Segments whose timestamp was more than [`JUMP_NS`] away from the table's clock
    /// and not followed by [`JUMP_CONFIRM`] in a row as far: their time did not move the
    /// clock that evicts flows.
    pub clock_outliers: u64,
}

/// How far from the table's clock (ahead or behind) a segment's timestamp may be and
/// still move it at once.
pub const JUMP_NS: u64 = 2_000_000_000;

/// How many segments in a row must be that far, on the same side, for the clock to
/// jump (to the nearest of them): a capture that resumes after a pause moves it, a
/// single frame with a wrong timestamp does not.
pub const JUMP_CONFIRM: u32 = 3;

/// A capture clock that one frame with a wrong timestamp cannot move far: it follows
/// the timestamps within [`JUMP_NS`] of it, forward only; to a timestamp further away,
/// either way, it jumps only once [`JUMP_CONFIRM`] frames in a row are as far on the
/// same side (to the nearest of them, or ahead to the last when it is near that one),
/// so a capture resuming after a pause moves it and a stray frame does not. One frame stamped in the future used to evict every
/// connection in progress and then, the clock being past every later frame, stop
/// evictions for good.
#[derive(Debug, Default, Clone, Copy)]
pub struct Clock {
    now: Option<u64>,
    /// Frames in a row far from `now`: (ahead, the nearest timestamp, how many).
    far: Option<(bool, u64, u32)>,
    /// How far the clock moved forward in all (the capture time covered).
    covered: u64,
}

/// What one [`Clock::tick`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// The clock's time.
    pub now: u64,
    /// Frames found to be outliers by this one (far from the clock, not confirmed).
    pub outliers: u64,
    /// The clock jumped back.
    pub back: bool,
}

impl Clock {
    /// A frame captured at `ns`.
    pub fn tick(&mut self, ns: u64) -> Tick {
        let mut t = Tick {
            now: ns,
            outliers: 0,
            back: false,
        };
        let Some(clock) = self.now else {
            self.now = Some(ns);
            return t;
        };
        let ahead = ns > clock.saturating_add(JUMP_NS);
        let behind = ns < clock.saturating_sub(JUMP_NS);
        if !ahead && !behind {
            t.outliers = self.finish();
            t.now = clock.max(ns);
            self.covered += t.now - clock;
            self.now = Some(t.now);
            return t;
        }
        let (nearest, n) = match self.far {
            Some((side, f, n)) if side == ahead => (if ahead { f.min(ns) } else { f.max(ns) }, n),
            Some(_) => {
                t.outliers = self.finish();
                (ns, 0)
            }
            None => (ns, 0),
        };
        if n + 1 >= JUMP_CONFIRM {
            self.far = None;
            // Ahead: up to this frame when it is near the nearest (frames of a capture
            // that resumed), else the nearest.
            let nearest = if ahead && ns <= nearest.saturating_add(JUMP_NS) {
                ns.max(nearest)
            } else {
                nearest
            };
            self.now = Some(nearest);
            self.covered += nearest.saturating_sub(clock);
            t.now = nearest;
            t.back = behind;
            return t;
        }
        self.far = Some((ahead, nearest, n + 1));
        t.now = clock;
        t
    }

    /// Moves the clock forward to `ns` (a trusted time: the host's clock, live).
    pub fn advance(&mut self, ns: u64) {
        let now = self.now.map_or(ns, |c| c.max(ns));
        self.covered += now - self.now.unwrap_or(now);
        self.now = Some(now);
    }

    /// The frames held as far from the clock and not confirmed: outliers (the capture
    /// is over, or a frame near the clock came).
    pub fn finish(&mut self) -> u64 {
        self.far.take().map_or(0, |(_, _, n)| u64::from(n))
    }

    /// How far the clock moved forward in all, in ns.
    pub fn covered(&self) -> u64 {
        self.covered
    }

    /// Where the time covered began: the clock's time less what it covered (ns).
    pub fn began(&self) -> Option<u64> {
        self.now.map(|n| n.saturating_sub(self.covered))
    }
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
    /// Per delivered segment: (end offset, capture time, how much of the peer's stream
    /// it acknowledged).
    marks: VecDeque<(u64, u64, u64)>,
    /// Segments ahead of `next`: offset → (bytes, capture time, peer bytes acknowledged,
    /// bytes captured). Their bytes are timed, once delivered, by the segment that filled
    /// the gap before them.
    ahead: BTreeMap<u64, (Vec<u8>, u64, u64, usize)>,
    ahead_bytes: usize,
    /// Delivered ranges of offsets `[from, to)` whose bytes were not captured (frames cut
    /// by the snap length: zeros in `buf`), in order.
    holes: Vec<(u64, u64)>,
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

    /// Takes one segment's payload, `len` bytes on the wire of which `data` were
    /// captured (fewer when the frame was cut by the snap length: the rest is a hole in
    /// the stream); `Ok(true)` when bytes were delivered in order (to be read from
    /// `buf`). The common case, a whole segment that is next in order with nothing held
    /// before it, gives its whole records to `tl` straight from `data` and keeps only a
    /// record it leaves unfinished.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        seq: u32,
        data: &[u8],
        len: usize,
        ns: u64,
        acked: u64,
        limit: usize,
        side: Endpoint,
        tl: &mut Timeline,
    ) -> Result<bool, Gap> {
        let len = len.max(data.len());
        if len == 0 {
            return Ok(false);
        }
        let Some(off) = self.offset(seq) else {
            return Ok(false);
        };
        let end = off + len as u64;
        if end <= self.next {
            return Ok(false); // a retransmission of what we have
        }
        let cut = data.len() < len;
        if !cut && off == self.next && self.buf.is_empty() && self.ahead.is_empty() {
            let used = records(data, off, |_| (ns, acked), &[], side, tl);
            self.start = off + used as u64;
            self.next = end;
            if used < data.len() {
                self.buf.extend_from_slice(&data[used..]);
                self.marks.push_back((end, ns, acked));
            }
            return Ok(false);
        }
        // A cut segment's missing bytes are zeros, marked as a hole once delivered.
        let padded: std::borrow::Cow<'_, [u8]> = if cut {
            let mut v = Vec::with_capacity(len);
            v.extend_from_slice(data);
            v.resize(len, 0);
            v.into()
        } else {
            data.into()
        };
        if off > self.next {
            if self.ahead_bytes + len > limit {
                return Err(Gap);
            }
            let keep = self
                .ahead
                .entry(off)
                .or_insert_with(|| (Vec::new(), ns, acked, 0));
            // Keep the longer of two segments at one offset, or the one captured further.
            if keep.0.len() < len || (keep.0.len() == len && keep.3 < data.len()) {
                self.ahead_bytes += len - keep.0.len();
                *keep = (padded.into_owned(), ns, acked, data.len());
            }
            return Ok(false);
        }
        self.append(off, &padded, data.len(), ns, acked);
        // Segments held ahead become part of the stream now, when the gap before them
        // filled: their bytes are timed by this segment (the moment the receiver could
        // read them), not by their own earlier capture.
        while let Some(entry) = self.ahead.first_entry() {
            if *entry.key() > self.next {
                break;
            }
            let (off, (bytes, held_ns, acked, captured)) = entry.remove_entry();
            self.ahead_bytes -= bytes.len();
            if off + bytes.len() as u64 > self.next {
                self.append(off, &bytes, captured, ns.max(held_ns), acked);
            }
        }
        Ok(true)
    }

    /// Appends the part of `data` (at offset `off`, its first `captured` bytes
    /// captured) beyond `next`.
    fn append(&mut self, off: u64, data: &[u8], captured: usize, ns: u64, acked: u64) {
        // Invariant: off <= next < off + data.len() (checked by the callers).
        let skip = (self.next - off) as usize;
        if captured < data.len() {
            let from = off + captured.max(skip) as u64;
            let to = off + data.len() as u64;
            match self.holes.last_mut() {
                Some(h) if h.1 == from => h.1 = to,
                _ => self.holes.push((from, to)),
            }
        }
        self.buf.extend_from_slice(&data[skip..]);
        self.next = off + data.len() as u64;
        self.marks.push_back((self.next, ns, acked));
    }

    /// Capture time of the segment that delivered offset `off`, and how much of the
    /// peer's stream it acknowledged.
    fn mark_at(&self, off: u64) -> (u64, u64) {
        self.marks
            .iter()
            .find(|m| m.0 > off)
            .or(self.marks.back())
            .map_or((0, 0), |m| (m.1, m.2))
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        self.start += n as u64;
        while self.marks.front().is_some_and(|m| m.0 <= self.start) {
            self.marks.pop_front();
        }
        let start = self.start;
        self.holes.retain(|h| h.1 > start);
    }

    /// Bytes this stream holds: what its allocations take, not only the bytes in them
    /// (capacities, and each segment held out of order with its B-tree slot).
    fn held(&self) -> usize {
        self.buf.capacity()
            + self.ahead_bytes
            + self.ahead.len() * AHEAD_ENTRY_COST
            + self.marks.capacity() * std::mem::size_of::<(u64, u64, u64)>()
            + self.holes.capacity() * std::mem::size_of::<(u64, u64)>()
    }

    fn clear(&mut self) {
        self.buf = Vec::new();
        self.marks = VecDeque::new();
        self.ahead = BTreeMap::new();
        self.ahead_bytes = 0;
        self.holes = Vec::new();
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
    /// Bytes its streams held after its last segment (counted in the table's `held`).
    held: usize,
    /// Client → server, server → client: in the kernel's map of directions whose payload
    /// is dropped ([`KernelFlows`]).
    in_kernel: [bool; 2],
    /// Per direction, segments seen since its side's analysis was over (not analyzed:
    /// since it was tracked), until it is put in the kernel's map ([`KERNEL_AFTER`]).
    unread: [u32; 2],
}

impl Flow {
    /// The flow of a connection whose first segment seen is `seg`, captured at `ns`,
    /// with a timeline when it is `tracked` (it began with its SYN).
    fn new(ns: u64, seg: &Segment<'_>, tracked: bool) -> Flow {
        Flow {
            client: seg.src,
            streams: [Stream::default(), Stream::default()],
            timeline: tracked.then(|| Timeline::new(seg.src, seg.dst)),
            syn_ack: false,
            fin: [false; 2],
            payload_seen: false,
            first_ns: ns,
            last_ns: ns,
            held: 0,
            in_kernel: [false; 2],
            unread: [0; 2],
        }
    }

    /// One more segment from side `me` (0: the client) whose payload is not read: after
    /// [`KERNEL_AFTER`] of them, the kernel filter (when there is one) drops that side's
    /// payload.
    fn note_unread(
        &mut self,
        me: usize,
        kernel: &mut Option<Box<dyn KernelFlows>>,
        seg: &Segment<'_>,
    ) {
        if self.in_kernel[me] {
            return;
        }
        let Some(kernel) = kernel.as_mut() else {
            return;
        };
        self.unread[me] += 1;
        if self.unread[me] >= KERNEL_AFTER {
            kernel.done(seg.src, seg.dst);
            self.in_kernel[me] = true;
        }
    }
}

/// A connection's two addresses, the lower first (either direction's segments find it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key(SocketAddr, SocketAddr);

impl std::hash::Hash for Key {
    /// The addresses' bytes, in as few writes as they fit: the derived hash of two
    /// `SocketAddr`s writes each field apart (about a twentieth of `observe --pcap`'s
    /// time). Equal keys write the same (IPv6 flow labels and scopes, which `Eq` also
    /// compares, are left out: keys that differ only there share a hash, not an entry).
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match (self.0, self.1) {
            (SocketAddr::V4(a), SocketAddr::V4(b)) => {
                h.write_u64(u64::from(a.ip().to_bits()) << 32 | u64::from(b.ip().to_bits()));
                h.write_u32(u32::from(a.port()) << 16 | u32::from(b.port()));
            }
            (a, b) => {
                let bits = |s: SocketAddr| match s.ip() {
                    std::net::IpAddr::V4(v4) => u128::from(v4.to_bits()),
                    std::net::IpAddr::V6(v6) => v6.to_bits(),
                };
                h.write_u128(bits(a));
                h.write_u128(bits(b));
                h.write_u32(u32::from(a.port()) << 16 | u32::from(b.port()));
            }
        }
    }
}

fn key(a: SocketAddr, b: SocketAddr) -> Key {
    if a <= b { Key(a, b) } else { Key(b, a) }
}

/// The flow table: segments in, connection outcomes out (to `sink`).
#[derive(Debug)]
pub struct FlowTable {
    // foldhash: the table is looked up for every segment; SipHash's DoS resistance is not
    // needed for addresses of connections that were opened (a flood is bounded by the
    // cap), and costs a third of the per-segment time.
    flows: HashMap<Key, Flow, foldhash::fast::RandomState>,
    limits: Limits,
    counters: Counters,
    last_sweep_ns: u64,
    /// The capture time eviction goes by.
    clock: Clock,
    /// Bytes the flows' streams hold (each flow's `held`, summed).
    held: usize,
    /// The kernel filter's map of connections whose payload is dropped (live, eBPF).
    kernel: Option<Box<dyn KernelFlows>>,
}

impl FlowTable {
    /// An empty table.
    pub fn new(limits: Limits) -> FlowTable {
        FlowTable {
            flows: HashMap::default(),
            limits,
            counters: Counters::default(),
            last_sweep_ns: 0,
            clock: Clock::default(),
            held: 0,
            kernel: None,
        }
    }

    /// Tells `kernel` which connections' payload is no longer read, so that it drops
    /// their segments without SYN, FIN or RST (live capture with the eBPF filter).
    pub fn drop_in_kernel(&mut self, kernel: Box<dyn KernelFlows>) {
        self.kernel = Some(kernel);
    }

    /// Moves the eviction clock by a segment captured at `ns` (see [`Clock`]); the
    /// clock's time.
    fn tick(&mut self, ns: u64) -> u64 {
        let t = self.clock.tick(ns);
        self.counters.clock_outliers += t.outliers;
        if t.back {
            self.last_sweep_ns = t.now;
        }
        t.now
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

    /// The memory the table takes with `len` connections (each [`FLOW_HEAP`] of its own):
    /// its allocation, by capacity; when `len` is beyond the capacity, the old and the new
    /// allocation together, as both are held while it grows (hashbrown doubles).
    pub fn table_bytes(&self, len: usize) -> usize {
        let now = buckets(self.flows.capacity()) * ENTRY_BYTES;
        let table = if len <= self.flows.capacity() {
            now
        } else {
            now + buckets(len.max(self.flows.capacity() + 1)) * ENTRY_BYTES
        };
        table + len * FLOW_HEAP
    }

    /// Removes a flow, and what its streams held from the table's count.
    fn remove(&mut self, k: &Key) -> Option<Flow> {
        let f = self.flows.remove(k)?;
        self.held -= f.held;
        if f.in_kernel.contains(&true)
            && let Some(kernel) = self.kernel.as_mut()
        {
            kernel.ended(k.0, k.1);
        }
        Some(f)
    }

    /// One segment captured at `ns`; ended connections go to `sink`.
    pub fn segment(&mut self, ns: u64, seg: &Segment<'_>, sink: &mut impl FnMut(Outcome)) {
        let now = self.tick(ns);
        if now >= self.last_sweep_ns.saturating_add(1_000_000_000) {
            self.sweep(now, sink);
        }
        let k = key(seg.src, seg.dst);
        // A new SYN (another initial sequence number) on the addresses of a connection
        // still tracked: the port was reused before that connection was seen to close.
        if seg.flags.syn
            && !seg.flags.ack
            && self.flows.get(&k).is_some_and(|f| {
                f.client != seg.src || f.streams[0].base != Some(seg.seq.wrapping_add(1))
            })
            && let Some(old) = self.remove(&k)
            && let Some(tl) = old.timeline
        {
            sink(tl.outcome());
        }
        let flow = match self.flows.get_mut(&k) {
            Some(f) => f,
            None => {
                let Some(tracked) = self.admit(seg) else {
                    return;
                };
                // Made in place: a flow is about a kilobyte, and one made beforehand
                // and moved in made `observe --pcap` 3% slower (0.30 against 0.29 CPU s).
                self.flows
                    .entry(k)
                    .or_insert_with(|| Flow::new(ns, seg, tracked))
            }
        };
        flow.last_ns = ns;
        let has_payload = seg.payload_len > 0 || !seg.payload.is_empty();
        if has_payload {
            flow.payload_seen = true;
        }
        let side = if seg.src == flow.client {
            Endpoint::Client
        } else {
            Endpoint::Server
        };
        let me = match side {
            Endpoint::Client => 0,
            Endpoint::Server => 1,
        };
        let Some(tl) = flow.timeline.as_mut() else {
            // Not analyzed: none of its payload is read.
            flow.note_unread(me, &mut self.kernel, seg);
            // Forget it once it closes.
            if seg.flags.rst || seg.flags.fin {
                self.remove(&k);
            }
            return;
        };
        let peer = 1 - me;
        if seg.flags.syn {
            if side == Endpoint::Client && !seg.flags.ack {
                tl.syn(ns);
                flow.streams[0].base.get_or_insert(seg.seq.wrapping_add(1));
            } else if side == Endpoint::Server && seg.flags.ack {
                flow.syn_ack = true;
                flow.streams[1].base.get_or_insert(seg.seq.wrapping_add(1));
            }
        } else if side == Endpoint::Client && seg.flags.ack && flow.syn_ack {
            tl.handshake_ack(ns);
        }
        if flow.streams[me].base.is_none() && has_payload {
            // The SYN-ACK was not captured: start the server's stream here.
            flow.streams[me].base = Some(seg.seq);
        }
        if has_payload {
            // Payload, even if it never becomes readable (a gap before it that never
            // fills): the connection is not one without payload.
            tl.payload();
        }
        if has_payload && !tl.done_with(side) {
            // A SYN's data (TCP Fast Open: the ClientHello in the SYN) begins after the
            // SYN's own sequence number.
            let seq = if seg.flags.syn {
                seg.seq.wrapping_add(1)
            } else {
                seg.seq
            };
            // How many of the peer's bytes this segment acknowledges (none without an
            // ACK, or before the peer's stream has a start).
            let acked = if seg.flags.ack {
                flow.streams[peer].offset(seg.ack).unwrap_or(0)
            } else {
                0
            };
            let limit = self.limits.max_out_of_order;
            let stream = &mut flow.streams[me];
            match stream.push(
                seq,
                seg.payload,
                seg.payload_len,
                ns,
                acked,
                limit,
                side,
                tl,
            ) {
                Ok(true) => drain_records(&mut flow.streams[me], side, tl),
                Ok(false) => {}
                Err(Gap) => tl.unparsed(),
            }
            for (i, end) in [Endpoint::Client, Endpoint::Server].into_iter().enumerate() {
                if tl.done_with(end) {
                    flow.streams[i].clear();
                }
            }
            // The table's memory: this flow's streams as they are now.
            let held = flow.streams[0].held() + flow.streams[1].held();
            self.held = self.held - flow.held + held;
            flow.held = held;
            if self.held > self.limits.stream_budget() && held > 0 {
                // Over the budget: this connection's reassembly is given up.
                tl.unparsed();
                flow.streams[0].clear();
                flow.streams[1].clear();
                self.held -= held;
                flow.held = 0;
                self.counters.shed += 1;
                self.counters.shed_bytes += held as u64;
            }
        }
        if seg.flags.rst {
            tl.reset();
        }
        if seg.flags.fin {
            tl.fin();
            flow.fin[me] = true;
        }
        if tl.done_with(side) {
            flow.note_unread(me, &mut self.kernel, seg);
        }
        if (seg.flags.rst || (flow.fin[0] && flow.fin[1]))
            && let Some(f) = self.remove(&k)
            && let Some(tl) = f.timeline
        {
            sink(tl.outcome());
        }
    }

    /// Whether a segment of no tracked connection starts a flow: `Some(true)` for a
    /// SYN's (analyzed), `Some(false)` for one with payload (followed, not analyzed: it
    /// began before the capture); `None` for anything else, or when the table is full
    /// or over its memory budget (counted).
    fn admit(&mut self, seg: &Segment<'_>) -> Option<bool> {
        if self.flows.len() >= self.limits.max_flows {
            if seg.flags.syn && !seg.flags.ack {
                self.counters.over_cap += 1;
            }
            return None;
        }
        let tracked = seg.flags.syn && !seg.flags.ack;
        if !tracked && seg.payload_len == 0 {
            // A bare ACK, FIN or RST of a connection not tracked (often the last
            // ACK of one just closed): nothing to follow.
            return None;
        }
        if self.table_bytes(self.flows.len() + 1) > self.limits.flow_budget() {
            if tracked {
                self.counters.shed += 1;
            }
            return None;
        }
        if tracked {
            self.counters.tracked += 1;
        } else {
            self.counters.midstream += 1;
        }
        Some(tracked)
    }

    /// Evicts idle and half-open connections as of capture time `now_ns` (live capture:
    /// the host's clock, which moves the table's clock forward).
    pub fn sweep(&mut self, now_ns: u64, sink: &mut impl FnMut(Outcome)) {
        self.last_sweep_ns = now_ns;
        self.clock.advance(now_ns);
        let limits = self.limits;
        let mut evicted = Vec::new();
        for (k, f) in &mut self.flows {
            if f.in_kernel.contains(&true)
                && now_ns.saturating_sub(f.last_ns) > limits.idle_ns
                && let Some(t) = self
                    .kernel
                    .as_ref()
                    .and_then(|kf| kf.last_dropped(k.0, k.1))
            {
                // Its segments are dropped in the kernel: idle only if they stopped.
                f.last_ns = f.last_ns.max(t);
            }
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
            if let Some(f) = self.remove(&k)
                && let Some(tl) = f.timeline
            {
                sink(tl.outcome());
            }
        }
    }

    /// Ends every connection still tracked (the capture is over).
    pub fn finish(&mut self, sink: &mut impl FnMut(Outcome)) {
        self.counters.clock_outliers += self.clock.finish();
        self.held = 0;
        for (_, f) in self.flows.drain() {
            if let Some(tl) = f.timeline {
                sink(tl.outcome());
            }
        }
    }
}

/// Cuts the whole records out of a stream's buffer and gives them to the timeline.
fn drain_records(stream: &mut Stream, side: Endpoint, tl: &mut Timeline) {
    let used = records(
        &stream.buf,
        stream.start,
        |off| stream.mark_at(off),
        &stream.holes,
        side,
        tl,
    );
    stream.consume(used);
}

/// True when `[from, to)` meets one of `holes`.
fn in_hole(holes: &[(u64, u64)], from: u64, to: u64) -> bool {
    holes.iter().any(|&(a, b)| a < to && from < b)
}

/// Gives the whole records at the start of `buf` (stream offset `start`) to the
/// timeline, `mark(offset)` telling the capture time of the segment that delivered a
/// byte and how much of the peer's stream that segment acknowledged; the bytes they
/// took. A record whose header was not captured (in one of `holes`) ends the stream's
/// analysis (unparsed); one whose body was not, is given as cut short.
fn records(
    buf: &[u8],
    start: u64,
    mark: impl Fn(u64) -> (u64, u64),
    holes: &[(u64, u64)],
    side: Endpoint,
    tl: &mut Timeline,
) -> usize {
    let mut used = 0;
    loop {
        let first = start + used as u64;
        // (Holes are only where bytes were delivered: a header partly delivered and
        // partly in a hole is not one that more bytes will complete.)
        if !holes.is_empty() && in_hole(holes, first, first + 5) {
            tl.unparsed();
            break;
        }
        match frame(&buf[used..]) {
            Frame::NeedMore => break,
            Frame::Garbage => {
                tl.not_tls();
                break;
            }
            Frame::Record { content_type, len } => {
                let last = first + 5 + len as u64 - 1;
                let (first_ns, peer_acked) = mark(first);
                let (last_ns, _) = mark(last);
                tl.record(&Record {
                    side,
                    content_type,
                    body: &buf[used + 5..used + 5 + len],
                    first_ns,
                    last_ns,
                    offset: first,
                    peer_acked,
                    cut: !holes.is_empty() && in_hole(holes, first + 5, last + 1),
                });
                used += 5 + len;
                if tl.done_with(side) {
                    break;
                }
            }
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::decode::Flags;
    use crate::observe::timeline::{Handshake, HandshakeKind};

    const C: &str = "10.0.0.1:40000";
    const S: &str = "10.0.0.2:443";

    fn record(content_type: u8, body: &[u8]) -> Vec<u8> {
        let mut r = vec![content_type, 3, 3];
        r.extend((body.len() as u16).to_be_bytes());
        r.extend(body);
        r
    }

    fn handshake_msg(t: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![t];
        m.extend(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend(body);
        m
    }

    fn ext(t: u16, body: &[u8]) -> Vec<u8> {
        let mut e = t.to_be_bytes().to_vec();
        e.extend((body.len() as u16).to_be_bytes());
        e.extend(body);
        e
    }

    /// A TLS 1.3 ClientHello for `localhost` with an x25519 key share.
    fn client_hello() -> Vec<u8> {
        client_hello_with(&[])
    }

    /// [`client_hello`] with the extensions `extra` too.
    fn client_hello_with(extra: &[u8]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([7; 32]);
        b.push(0); // session id
        b.extend([0, 2, 0x13, 0x01]); // one suite
        b.extend([1, 0]); // null compression
        let mut exts = Vec::new();
        let name = b"localhost";
        let mut sni = ((name.len() + 3) as u16).to_be_bytes().to_vec();
        sni.push(0);
        sni.extend((name.len() as u16).to_be_bytes());
        sni.extend(name);
        exts.extend(ext(0, &sni));
        exts.extend(ext(43, &[2, 3, 4]));
        let mut ks = vec![0, 36, 0, 0x1d, 0, 32];
        ks.extend([9; 32]);
        exts.extend(ext(51, &ks));
        exts.extend(extra);
        b.extend((exts.len() as u16).to_be_bytes());
        b.extend(exts);
        record(22, &handshake_msg(1, &b))
    }

    /// A TLS 1.3 ServerHello choosing x25519.
    fn server_hello() -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend([5; 32]);
        b.push(0);
        b.extend([0x13, 0x01, 0]);
        let mut exts = ext(43, &[3, 4]);
        let mut ks = vec![0, 0x1d, 0, 32];
        ks.extend([8; 32]);
        exts.extend(ext(51, &ks));
        b.extend((exts.len() as u16).to_be_bytes());
        b.extend(exts);
        record(22, &handshake_msg(2, &b))
    }

    /// A TLS 1.3 ServerHello of `random` with extensions `exts`.
    fn server_hello_with(random: [u8; 32], exts: &[u8]) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend(random);
        b.push(0);
        b.extend([0x13, 0x01, 0]);
        b.extend((exts.len() as u16).to_be_bytes());
        b.extend(exts);
        record(22, &handshake_msg(2, &b))
    }

    /// Segments of one connection from (capture µs, from the client, payload, FIN): the
    /// SYN, SYN-ACK and ACK at 0, 1 and 2 µs, then these, with their sequence and
    /// acknowledgment numbers.
    fn wire(steps: &[(u64, bool, Vec<u8>, bool)]) -> Vec<Seg> {
        let us = 1_000;
        let (mut c, mut s) = (1_000u32, 90_000u32);
        let f = |syn, ack, fin| Flags {
            syn,
            ack,
            fin,
            rst: false,
        };
        let mut out = vec![
            Seg {
                ns: 0,
                from_client: true,
                flags: f(true, false, false),
                seq: c,
                ack: 0,
                payload: vec![],
            },
            Seg {
                ns: us,
                from_client: false,
                flags: f(true, true, false),
                seq: s,
                ack: c + 1,
                payload: vec![],
            },
            Seg {
                ns: 2 * us,
                from_client: true,
                flags: f(false, true, false),
                seq: c + 1,
                ack: s + 1,
                payload: vec![],
            },
        ];
        c += 1;
        s += 1;
        for (t, from_client, payload, fin) in steps {
            let (seq, ack) = if *from_client { (c, s) } else { (s, c) };
            let adv = payload.len() as u32 + u32::from(*fin);
            if *from_client {
                c += adv;
            } else {
                s += adv;
            }
            out.push(Seg {
                ns: t * us,
                from_client: *from_client,
                flags: f(false, true, *fin),
                seq,
                ack,
                payload: payload.clone(),
            });
        }
        out
    }

    struct Seg {
        ns: u64,
        from_client: bool,
        flags: Flags,
        seq: u32,
        ack: u32,
        payload: Vec<u8>,
    }

    /// A TLS 1.3 full handshake, timestamps in µs: SYN 0, SYN-ACK 1, ACK 2, ClientHello
    /// 10, the server's flight 20 (ServerHello, CCS, 2 encrypted records of 1000 bytes),
    /// the client's Finished and request 30, the response 40, FINs 50.
    fn conversation() -> Vec<Seg> {
        let us = 1_000;
        let (cisn, sisn) = (u32::MAX - 100, 7_000u32);
        let ch = client_hello();
        let mut flight = server_hello();
        flight.extend(record(20, &[1]));
        flight.extend(record(23, &[0xaa; 1000]));
        flight.extend(record(23, &[0xbb; 1000]));
        let mut fin = record(20, &[1]);
        fin.extend(record(23, &[0xcc; 53]));
        let req = record(23, &[0xdd; 80]);
        let resp = record(23, &[0xee; 300]);
        let f = |syn, ack, fin| Flags {
            syn,
            ack,
            fin,
            rst: false,
        };
        let c0 = cisn.wrapping_add(1);
        let s0 = sisn.wrapping_add(1);
        let cl = |n: usize| c0.wrapping_add(n as u32);
        let sl = |n: usize| s0.wrapping_add(n as u32);
        let after_flight = sl(flight.len());
        vec![
            Seg {
                ns: 0,
                from_client: true,
                flags: f(true, false, false),
                seq: cisn,
                ack: 0,
                payload: vec![],
            },
            Seg {
                ns: us,
                from_client: false,
                flags: f(true, true, false),
                seq: sisn,
                ack: c0,
                payload: vec![],
            },
            Seg {
                ns: 2 * us,
                from_client: true,
                flags: f(false, true, false),
                seq: c0,
                ack: s0,
                payload: vec![],
            },
            Seg {
                ns: 10 * us,
                from_client: true,
                flags: f(false, true, false),
                seq: c0,
                ack: s0,
                payload: ch.clone(),
            },
            Seg {
                ns: 20 * us,
                from_client: false,
                flags: f(false, true, false),
                seq: s0,
                ack: cl(ch.len()),
                payload: flight.clone(),
            },
            Seg {
                ns: 30 * us,
                from_client: true,
                flags: f(false, true, false),
                seq: cl(ch.len()),
                ack: after_flight,
                payload: fin.clone(),
            },
            Seg {
                ns: 31 * us,
                from_client: true,
                flags: f(false, true, false),
                seq: cl(ch.len() + fin.len()),
                ack: after_flight,
                payload: req.clone(),
            },
            Seg {
                ns: 40 * us,
                from_client: false,
                flags: f(false, true, false),
                seq: after_flight,
                ack: cl(ch.len() + fin.len() + req.len()),
                payload: resp.clone(),
            },
            Seg {
                ns: 50 * us,
                from_client: true,
                flags: f(false, true, true),
                seq: cl(ch.len() + fin.len() + req.len()),
                ack: sl(flight.len() + resp.len()),
                payload: vec![],
            },
            Seg {
                ns: 50 * us,
                from_client: false,
                flags: f(false, true, true),
                seq: sl(flight.len() + resp.len()),
                ack: cl(ch.len() + fin.len() + req.len() + 1),
                payload: vec![],
            },
        ]
    }

    /// Splits every payload into pieces of `size` bytes (same capture time).
    fn split(segs: Vec<Seg>, size: usize) -> Vec<Seg> {
        let mut out = Vec::new();
        for s in segs {
            if s.payload.len() <= size {
                out.push(s);
                continue;
            }
            for (i, chunk) in s.payload.chunks(size).enumerate() {
                out.push(Seg {
                    ns: s.ns,
                    from_client: s.from_client,
                    flags: s.flags,
                    seq: s.seq.wrapping_add((i * size) as u32),
                    ack: s.ack,
                    payload: chunk.to_vec(),
                });
            }
        }
        out
    }

    fn run(segs: &[Seg]) -> (Vec<Outcome>, Counters) {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let mut table = FlowTable::new(Limits::default());
        let mut out = Vec::new();
        for seg in segs {
            let (src, dst) = if seg.from_client { (c, s) } else { (s, c) };
            let segment = Segment {
                src,
                dst,
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags,
                payload: &seg.payload,
                payload_len: seg.payload.len(),
            };
            table.segment(seg.ns, &segment, &mut |o| out.push(o));
        }
        table.finish(&mut |o| out.push(o));
        (out, table.counters())
    }

    fn handshake(segs: &[Seg]) -> Handshake {
        let (out, _) = run(segs);
        assert_eq!(out.len(), 1, "{out:?}");
        match out.into_iter().next() {
            Some(Outcome::Handshake(h)) => *h,
            other => panic!("{other:?}"),
        }
    }

    fn expected() -> Handshake {
        let us = 1_000;
        let h = handshake(&conversation());
        assert_eq!(h.kind, HandshakeKind::Full);
        assert_eq!(h.sni.as_deref(), Some("localhost"));
        assert_eq!((h.version, h.group, h.suite), (0x0304, Some(0x1d), 0x1301));
        let p = h.phases;
        assert_eq!(p.connect, Some(2 * us));
        assert_eq!(p.server_think, Some(10 * us));
        assert_eq!(p.server_flight, Some(0));
        assert_eq!(p.client_think, Some(10 * us));
        assert_eq!(p.tls, Some(20 * us));
        assert_eq!(p.first_app_byte, Some(31 * us));
        // The request's record completes at 31 µs, the answer's first byte comes at 40.
        assert_eq!(p.server_first_byte, Some(9 * us));
        h
    }

    /// The server's first byte after the request, the server answering `delay_us` after
    /// it: `tickets` are the server's records sent at 32 and 33 µs (after the client's
    /// Finished at 30 and its request at 31), each segment a list of record lengths.
    fn time_to_first_byte(
        takes_tickets: bool,
        tickets: &[&[usize]],
        request_at: u64,
        delay_us: u64,
    ) -> Handshake {
        let ch = if takes_tickets {
            // psk_key_exchange_modes: psk_dhe_ke.
            client_hello_with(&ext(45, &[1, 1]))
        } else {
            client_hello()
        };
        let mut flight = server_hello();
        flight.extend(record(20, &[1]));
        flight.extend(record(23, &[0xaa; 1000]));
        let mut steps = vec![
            (10, true, ch, false),
            (20, false, flight, false),
            (30, true, record(23, &[0xcc; 53]), false),
        ];
        for (i, segment) in tickets.iter().enumerate() {
            let mut bytes = Vec::new();
            for len in *segment {
                bytes.extend(record(23, &vec![0x77; *len]));
            }
            steps.push((32 + i as u64, false, bytes, false));
        }
        steps.push((request_at, true, record(23, &[0xdd; 80]), false));
        steps.push((
            request_at + delay_us,
            false,
            record(23, &[0xee; 300]),
            false,
        ));
        steps.push((
            request_at + delay_us + 1,
            false,
            record(23, &[0xef; 300]),
            false,
        ));
        steps.sort_by_key(|s| s.0);
        let end = request_at + delay_us + 10;
        steps.extend([(end, true, vec![], true), (end, false, vec![], true)]);
        handshake(&wire(&steps))
    }

    /// Time to first byte: from the request complete to the answer's first byte, the
    /// server's TLS 1.3 NewSessionTickets (sent after the client's Finished, here after
    /// the request too) left out, whether in one record (rustls), one record each in one
    /// segment or in two (OpenSSL), or sent before the request.
    #[test]
    fn the_server_first_byte_is_the_answer_not_a_ticket() {
        let us = 1_000;
        // (A server answers after its tickets: it sends them on the client's Finished,
        // before it reads the request.)
        for delay in [5, 200_000] {
            for tickets in [&[&[250][..]][..], &[&[120, 120]], &[&[120], &[120]]] {
                let h = time_to_first_byte(true, tickets, 31, delay);
                assert_eq!(
                    h.phases.server_first_byte,
                    Some(delay * us),
                    "tickets {tickets:?}, delay {delay} µs"
                );
                // Tickets sent before the request (at 32 and 33, the request at 40).
                let h = time_to_first_byte(true, tickets, 40, delay);
                assert_eq!(h.phases.server_first_byte, Some(delay * us), "{tickets:?}");
            }
            // A client that takes no tickets gets none: the first record is the answer.
            let h = time_to_first_byte(false, &[], 31, delay);
            assert_eq!(h.phases.server_first_byte, Some(delay * us));
        }
        // Not an answer before the request: no time to first byte without one after it.
        let mut steps = vec![
            (10, true, client_hello(), false),
            (
                20,
                false,
                [server_hello(), record(20, &[1]), record(23, &[1; 90])].concat(),
                false,
            ),
            (30, true, record(23, &[0xcc; 53]), false),
            (31, true, record(23, &[0xdd; 80]), false),
        ];
        steps.extend([(50, true, vec![], true), (50, false, vec![], true)]);
        let h = handshake(&wire(&steps));
        assert_eq!(h.phases.first_app_byte, Some(31 * us));
        assert_eq!(h.phases.server_first_byte, None);
    }

    /// What the flow table told the kernel filter, and what the kernel says it dropped.
    #[derive(Debug, Clone, Default)]
    struct FakeKernel {
        calls: std::sync::Arc<std::sync::Mutex<Vec<&'static str>>>,
        last_dropped: Option<u64>,
    }

    impl KernelFlows for FakeKernel {
        fn done(&mut self, from: SocketAddr, to: SocketAddr) {
            let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
            let call = match (from, to) {
                (f, t) if f == c && t == s => "done client → server",
                (f, t) if f == s && t == c => "done server → client",
                other => panic!("{other:?}"),
            };
            self.calls.lock().unwrap().push(call);
        }
        fn ended(&mut self, a: SocketAddr, b: SocketAddr) {
            assert_eq!(key(a, b), key(C.parse().unwrap(), S.parse().unwrap()));
            self.calls.lock().unwrap().push("ended");
        }
        fn last_dropped(&self, _: SocketAddr, _: SocketAddr) -> Option<u64> {
            self.last_dropped
        }
    }

    /// Feeds `segs` to `table`, calling `after(i)` after the i-th.
    fn feed(
        table: &mut FlowTable,
        segs: &[Seg],
        out: &mut Vec<Outcome>,
        mut after: impl FnMut(usize),
    ) {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        for (i, seg) in segs.iter().enumerate() {
            let (src, dst) = if seg.from_client { (c, s) } else { (s, c) };
            let segment = Segment {
                src,
                dst,
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags,
                payload: &seg.payload,
                payload_len: seg.payload.len(),
            };
            table.segment(seg.ns, &segment, &mut |o| out.push(o));
            after(i);
        }
    }

    /// [`conversation`] with `more` segments of the server's answer after its first one.
    fn longer_conversation(more: usize) -> Vec<Seg> {
        let mut segs = conversation();
        let fins = segs.split_off(8);
        let answer = &segs[7];
        let (flags, ack) = (answer.flags, answer.ack);
        let mut seq = answer.seq.wrapping_add(answer.payload.len() as u32);
        for i in 0..more {
            let payload = record(23, &[0xe0; 100]);
            let len = payload.len() as u32;
            segs.push(Seg {
                ns: 41_000 + i as u64,
                from_client: false,
                flags,
                seq,
                ack,
                payload,
            });
            seq = seq.wrapping_add(len);
        }
        for mut f in fins {
            if !f.from_client {
                f.seq = seq;
            } else {
                f.ack = seq;
            }
            segs.push(f);
        }
        segs
    }

    /// The kernel is told to drop the server's payload once its part of the analysis is
    /// over — at its first application record after the request, not before — and it
    /// goes on ([`KERNEL_AFTER`] segments from then), and to let it all pass again when
    /// the connection ends; a direction that ends soon after is not worth it (here the
    /// client's: its FIN follows its request); the handshake is the same as without the
    /// kernel filter.
    #[test]
    fn the_kernel_drops_a_connection_once_its_analysis_is_over() {
        for (more, told) in [(40, true), (0, false)] {
            let kernel = FakeKernel::default();
            let calls = std::sync::Arc::clone(&kernel.calls);
            let mut table = FlowTable::new(Limits::default());
            table.drop_in_kernel(Box::new(kernel));
            let segs = longer_conversation(more);
            let answer = segs.iter().position(|s| s.ns == 40_000).unwrap();
            let put = answer + KERNEL_AFTER as usize - 1;
            let mut out = Vec::new();
            feed(&mut table, &segs, &mut out, |i| {
                // Put in the kernel's map after KERNEL_AFTER segments from the answer on;
                // taken out at the last FIN (the last segment).
                let n = calls.lock().unwrap().len();
                let want = if told {
                    usize::from(i >= put) + usize::from(i == segs.len() - 1)
                } else {
                    0
                };
                assert_eq!(n, want, "{more} more: after segment {i}");
            });
            let want: &[&str] = if told {
                &["done server → client", "ended"]
            } else {
                &[]
            };
            assert_eq!(*calls.lock().unwrap(), want);
            assert_eq!(out, vec![Outcome::Handshake(Box::new(expected()))]);
        }
    }

    /// An upload: the client's stream is read up to its request (its first application
    /// record), then no more, and that direction is dropped in the kernel once it goes
    /// on, while the server's is read until its answer, which is still timed.
    #[test]
    fn an_upload_is_dropped_in_the_kernel_after_its_first_record() {
        let us = 1_000;
        let mut steps = vec![
            (10, true, client_hello(), false),
            (
                20,
                false,
                [server_hello(), record(20, &[1]), record(23, &[1; 90])].concat(),
                false,
            ),
            (30, true, record(23, &[0xcc; 53]), false),
            (31, true, record(23, &[0xdd; 80]), false),
        ];
        // The body: 40 segments.
        let body: Vec<u8> = (0..20).flat_map(|_| record(23, &[0xbb; 1000])).collect();
        for (i, piece) in body.chunks(body.len() / 40).enumerate() {
            steps.push((32 + i as u64, true, piece.to_vec(), false));
        }
        steps.push((500, false, record(23, &[0xee; 300]), false));
        steps.extend([(600, true, vec![], true), (600, false, vec![], true)]);
        let kernel = FakeKernel::default();
        let calls = std::sync::Arc::clone(&kernel.calls);
        let mut table = FlowTable::new(Limits::default());
        table.drop_in_kernel(Box::new(kernel));
        let segs = wire(&steps);
        let mut out = Vec::new();
        let mut before_answer = 0;
        feed(&mut table, &segs, &mut out, |i| {
            if segs[i].ns < 500 * us {
                before_answer = calls.lock().unwrap().len();
            }
        });
        assert_eq!(before_answer, 1);
        assert_eq!(*calls.lock().unwrap(), ["done client → server", "ended"]);
        let [Outcome::Handshake(h)] = &out[..] else {
            panic!("{out:?}")
        };
        // The request complete at 31 µs, the answer at 500.
        assert_eq!(h.phases.server_first_byte, Some(469 * us));
    }

    /// A connection whose segments the kernel drops looks idle to the table: it is
    /// evicted only when the kernel has not dropped one for the idle timeout either.
    #[test]
    fn a_connection_dropped_in_the_kernel_is_idle_only_when_the_kernel_says_so() {
        let limits = Limits {
            idle_ns: 5_000_000_000,
            ..Limits::default()
        };
        let mut segs = longer_conversation(40);
        segs.truncate(48); // no FINs: the download goes on
        for recent in [true, false] {
            let mut kernel = FakeKernel::default();
            let calls = std::sync::Arc::clone(&kernel.calls);
            // Segments captured at 0..40 µs; the sweep at 10 s.
            let now = 10_000_000_000;
            kernel.last_dropped = recent.then_some(now - 1_000_000_000);
            let mut table = FlowTable::new(limits);
            table.drop_in_kernel(Box::new(kernel));
            let mut out = Vec::new();
            feed(&mut table, &segs, &mut out, |_| {});
            table.sweep(now, &mut |o| out.push(o));
            if recent {
                assert_eq!(table.len(), 1);
                assert!(out.is_empty());
                assert_eq!(*calls.lock().unwrap(), ["done server → client"]);
            } else {
                assert_eq!(table.len(), 0);
                assert_eq!(out.len(), 1);
                assert_eq!(table.counters().evicted_idle, 1);
                assert_eq!(*calls.lock().unwrap(), ["done server → client", "ended"]);
            }
        }
    }

    #[test]
    fn a_straight_conversation_has_its_phases() {
        let h = expected();
        assert_eq!(
            h.server_flight_bytes,
            (server_hello().len() + 6 + 2 * 1005) as u64
        );
    }

    #[test]
    fn records_split_across_segments_give_the_same_timeline() {
        let want = expected();
        for size in [1, 2, 5, 7, 100, 999] {
            assert_eq!(
                handshake(&split(conversation(), size)),
                want,
                "pieces of {size}"
            );
        }
    }

    #[test]
    fn retransmissions_and_out_of_order_segments_give_the_same_timeline() {
        let want = expected();
        // Every payload piece sent twice (a retransmission of what arrived).
        let mut with_copies = Vec::new();
        for s in split(conversation(), 300) {
            if !s.payload.is_empty() {
                with_copies.push(Seg {
                    payload: s.payload.clone(),
                    ..s
                });
            }
            with_copies.push(s);
        }
        assert_eq!(handshake(&with_copies), want);
        // … and each flight's pieces in reverse order (the record completes on the last
        // to arrive, at the same capture time).
        let mut reordered = split(conversation(), 300);
        let flight: Vec<usize> = (0..reordered.len())
            .filter(|&i| {
                !reordered[i].from_client
                    && !reordered[i].payload.is_empty()
                    && reordered[i].ns == 20_000
            })
            .collect();
        let (a, b) = (flight[0], flight[flight.len() - 1]);
        reordered[a..=b].reverse();
        assert_eq!(handshake(&reordered), want);
    }

    /// The ClientHello's first segment is lost before the capture point and
    /// retransmitted 200 ms later: the hello is complete (and the server can start) at
    /// the retransmission, not at the earlier capture of its last byte (which put the
    /// 200 ms in `server_think` and `tls`).
    #[test]
    fn a_client_hello_completed_by_a_retransmission_is_timed_by_it() {
        let delay = 200_000_000;
        let mut segs = conversation();
        let ch = segs.remove(3);
        let half = ch.payload.len() / 2;
        let tail = Seg {
            ns: ch.ns,
            seq: ch.seq.wrapping_add(half as u32),
            payload: ch.payload[half..].to_vec(),
            ..ch
        };
        let head = Seg {
            ns: ch.ns + delay,
            payload: ch.payload[..half].to_vec(),
            ..ch
        };
        for s in &mut segs[3..] {
            s.ns += delay;
        }
        segs.insert(3, head);
        segs.insert(3, tail);
        let want = expected();
        let got = handshake(&segs);
        assert_eq!(got.phases.server_think, want.phases.server_think);
        assert_eq!(got.phases.tls, want.phases.tls);
        assert_eq!(got.phases.connect, want.phases.connect);
        assert_eq!(got.phases.client_think, want.phases.client_think);
        assert_eq!(
            got.phases.first_app_byte,
            want.phases.first_app_byte.map(|v| v + delay)
        );
    }

    /// The middle of the server's flight is lost and retransmitted 5 µs later: the
    /// flight ends when its last missing byte arrives.
    #[test]
    fn a_server_flight_completed_by_a_retransmission_ends_at_it() {
        let us = 1_000;
        let mut segs = split(conversation(), 700);
        let flight: Vec<usize> = (0..segs.len())
            .filter(|&i| !segs[i].from_client && segs[i].ns == 20 * us)
            .collect();
        assert!(flight.len() >= 3, "{}", flight.len());
        let mut middle = segs.remove(flight[1]);
        middle.ns = 25 * us;
        // After the flight's last piece (one index lower now).
        segs.insert(flight[flight.len() - 1], middle);
        let h = handshake(&segs);
        assert_eq!(h.phases.server_think, Some(10 * us));
        assert_eq!(h.phases.server_flight, Some(5 * us));
        assert_eq!(h.phases.client_think, Some(5 * us));
        assert_eq!(h.phases.tls, Some(20 * us));
    }

    /// A HelloRetryRequest, then a PSK resumption: kind `resumed` (as rustls, and so
    /// `tlsperf serve`'s /stats, has it), counted as after a HelloRetryRequest (it was
    /// counted nowhere), its server think from the second ClientHello.
    #[test]
    fn a_resumption_after_a_hello_retry_request_counts_as_one() {
        use crate::observe::tls::HRR_RANDOM;
        let us = 1_000;
        let mut hrr_exts = ext(43, &[3, 4]);
        hrr_exts.extend(ext(51, &[0, 0x17]));
        let mut psk_exts = ext(43, &[3, 4]);
        let mut ks = vec![0, 0x17, 0, 32];
        ks.extend([8; 32]);
        psk_exts.extend(ext(51, &ks));
        psk_exts.extend(ext(41, &[0, 0]));
        let mut flight = server_hello_with([5; 32], &psk_exts);
        flight.extend(record(20, &[1]));
        flight.extend(record(23, &[0xaa; 100]));
        let mut fin = record(20, &[1]);
        fin.extend(record(23, &[0xcc; 53]));
        let segs = wire(&[
            (10, true, client_hello(), false),
            (15, false, server_hello_with(HRR_RANDOM, &hrr_exts), false),
            (17, true, client_hello(), false),
            (20, false, flight, false),
            (30, true, fin, false),
            (31, true, record(23, &[0xdd; 80]), false),
            (50, true, vec![], true),
            (50, false, vec![], true),
        ]);
        let h = handshake(&segs);
        assert_eq!(h.kind, HandshakeKind::Resumed);
        assert!(h.hrr);
        assert_eq!(h.resumption, Some("psk"));
        assert_eq!(h.phases.server_think, Some(3 * us));
        assert_eq!(h.phases.tls, Some(20 * us));
        let mut agg = crate::observe::aggregate::Aggregate::new(Vec::new(), Vec::new(), usize::MAX);
        agg.outcome(Outcome::Handshake(Box::new(h)));
        let o = agg.snapshot(
            Counters::default(),
            crate::observe::result::Packets::default(),
            1.0,
        );
        assert_eq!((o.count("resumed"), o.count("full-hrr")), (1, 0));
        assert_eq!(o.handshakes["all"].hrr, 1);
        assert_eq!(o.handshakes["resumed"].hrr, 1);
        assert_eq!(o.by_sni["localhost"].hrr, 1);
        assert_eq!(o.by_group["secp256r1"].hrr, 1);
    }

    /// Go sends its NewSessionTicket in its first flight, after its Finished (when it asks
    /// no client certificate): none follows the client's Finished, and the server's first
    /// record after the request is the answer, timed as such (it was taken for a ticket,
    /// and Go servers had no time to first byte).
    #[test]
    fn tickets_in_the_servers_first_flight_leave_the_first_record_after_the_request_the_answer() {
        let us = 1_000;
        // psk_key_exchange_modes: psk_dhe_ke.
        let ch = client_hello_with(&ext(45, &[1, 1]));
        for delay in [5, 20_000] {
            let mut flight = server_hello();
            flight.extend(record(20, &[1]));
            // EncryptedExtensions, Certificate, CertificateVerify, Finished, a ticket.
            for len in [40, 1000, 100, 53, 180] {
                flight.extend(record(23, &vec![0xaa; len]));
            }
            let h = handshake(&wire(&[
                (10, true, ch.clone(), false),
                (20, false, flight, false),
                (30, true, record(23, &[0xcc; 53]), false),
                (31, true, record(23, &[0xdd; 80]), false),
                (31 + delay, false, record(23, &[0xee; 300]), false),
                (31 + delay + 10, true, vec![], true),
                (31 + delay + 10, false, vec![], true),
            ]));
            assert_eq!(h.phases.server_first_byte, Some(delay * us), "{delay} µs");
        }
    }

    /// A TLS 1.3 resumption offering early data, the client's early record at 11 µs, the
    /// server's flight at 20 (resuming: pre_shared_key chosen), then the client's records
    /// after the flight at 30 (`reply`), the server's ticket at 31, the client's request at
    /// 32 when it sends one, the answer at 40. `hrr`: the server first asks for another key share, and the second
    /// ClientHello offers no early data (RFC 8446 §4.2.10).
    fn early_data(resume: bool, reply: &[usize], request: bool, hrr: bool) -> Handshake {
        use crate::observe::tls::HRR_RANDOM;
        let mut offer = ext(45, &[1, 1]);
        offer.extend(ext(42, &[]));
        let first = client_hello_with(&offer);
        let mut exts = ext(43, &[3, 4]);
        let mut ks = vec![0, 0x1d, 0, 32];
        ks.extend([8; 32]);
        exts.extend(ext(51, &ks));
        if resume {
            exts.extend(ext(41, &[0, 0]));
        }
        let mut flight = server_hello_with([5; 32], &exts);
        flight.extend(record(20, &[1]));
        flight.extend(record(23, &[0xaa; 60]));
        flight.extend(record(23, &[0xab; 53]));
        let mut replies = Vec::new();
        for len in reply {
            replies.extend(record(23, &vec![0xcc; *len]));
        }
        let mut steps = vec![
            (10, true, first, false),
            (11, true, record(23, &[0xd0; 80]), false),
        ];
        if hrr {
            let mut hrr_exts = ext(43, &[3, 4]);
            hrr_exts.extend(ext(51, &[0, 0x1d]));
            steps.push((12, false, server_hello_with(HRR_RANDOM, &hrr_exts), false));
            steps.push((14, true, client_hello_with(&ext(45, &[1, 1])), false));
        }
        steps.push((20, false, flight, false));
        steps.push((30, true, replies, false));
        // The server's ticket, on the client's Finished.
        steps.push((31, false, record(23, &[0x77; 150]), false));
        if request {
            steps.push((32, true, record(23, &[0xdd; 80]), false));
        }
        steps.push((40, false, record(23, &[0xee; 300]), false));
        steps.push((50, true, vec![], true));
        steps.push((50, false, vec![], true));
        handshake(&wire(&steps))
    }

    /// Early data counts as accepted 0-RTT only when the client's reply begins with its
    /// EndOfEarlyData (21 bytes of body): refused early data — after a HelloRetryRequest,
    /// or by a server that resumes without it, or that refuses the PSK — is not 0-RTT,
    /// and the first application byte is the request sent again after the Finished.
    #[test]
    fn early_data_is_0rtt_only_when_the_server_took_it() {
        let us = 1_000;
        // Taken: EndOfEarlyData, then the Finished.
        let h = early_data(true, &[21, 53], false, false);
        assert_eq!(h.kind, HandshakeKind::ZeroRtt);
        assert_eq!(h.phases.first_app_byte, Some(11 * us));
        // Refused although resumed: the reply is the Finished; the request is resent.
        let h = early_data(true, &[53], true, false);
        assert_eq!(h.kind, HandshakeKind::Resumed);
        assert_eq!(h.phases.first_app_byte, Some(32 * us));
        assert_eq!(h.phases.server_first_byte, Some(8 * us));
        // The PSK refused (a stale ticket): a full handshake, its request after it.
        let h = early_data(false, &[53], true, false);
        assert_eq!(h.kind, HandshakeKind::Full);
        assert_eq!(h.phases.first_app_byte, Some(32 * us));
        assert_eq!(h.phases.server_first_byte, Some(8 * us));
        // After a HelloRetryRequest the second ClientHello offers no early data.
        let h = early_data(true, &[53], true, true);
        assert_eq!(h.kind, HandshakeKind::Resumed);
        assert!(h.hrr);
        assert_eq!(h.phases.first_app_byte, Some(32 * us));
        assert_eq!(h.phases.server_first_byte, Some(8 * us));
    }

    /// A server that answers the early request right after its flight (half-RTT data, as
    /// `tlsperf serve` does) and a client reply that crosses that answer on the wire: the
    /// reply acknowledges the server's flight but not the answer, and is the client's
    /// Finished all the same, whether the server's Finished has a record of its own or
    /// shares one with its EncryptedExtensions (rustls resuming). Seen in CI: the
    /// connection was counted as failed, closed before its handshake ended.
    #[test]
    fn a_0rtt_reply_crossing_the_servers_half_rtt_answer_is_the_clients_finished() {
        let us = 1_000;
        let mut offer = ext(45, &[1, 1]);
        offer.extend(ext(42, &[]));
        let mut exts = ext(43, &[3, 4]);
        let mut ks = vec![0, 0x1d, 0, 32];
        ks.extend([8; 32]);
        exts.extend(ext(51, &ks));
        exts.extend(ext(41, &[0, 0]));
        let answer = record(23, &[0xee; 164]);
        let mut reply = record(23, &[0xcc; 21]);
        reply.extend(record(23, &[0xcc; 53]));
        for (crossing, shared) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut flight = server_hello_with([5; 32], &exts);
            flight.extend(record(20, &[1]));
            if shared {
                flight.extend(record(23, &[0xaa; 94]));
            } else {
                flight.extend(record(23, &[0xaa; 60]));
                flight.extend(record(23, &[0xab; 53]));
            }
            let mut segs = wire(&[
                (10, true, client_hello_with(&offer), false),
                (11, true, record(23, &[0xd0; 80]), false),
                (20, false, flight, false),
                (29, false, answer.clone(), false),
                (30, true, reply.clone(), false),
                (31, false, record(23, &[0x77; 150]), false),
                (40, false, vec![], true),
                (41, true, vec![], true),
            ]);
            if crossing {
                // Sent before the answer arrived: it acknowledges the flight only.
                let i = segs.iter().position(|s| s.ns == 30 * us).unwrap();
                segs[i].ack -= answer.len() as u32;
            }
            let h = handshake(&segs);
            let case = format!("crossing: {crossing}, shared: {shared}");
            assert_eq!(h.kind, HandshakeKind::ZeroRtt, "{case}");
            assert_eq!(h.phases.first_app_byte, Some(11 * us), "{case}");
            assert_eq!(h.phases.tls, Some(20 * us), "{case}");
        }
    }

    /// Frames cut by the snap length: the missing bytes are a hole in the stream, the
    /// sequence space still advancing by the segment's length on the wire. A hole inside
    /// an encrypted record's body does not matter; one over a record header, or inside a
    /// plaintext handshake message, leaves the connection unparsed.
    #[test]
    fn segments_cut_by_the_snap_length_leave_holes_in_their_streams() {
        let run_cut = |segs: &[Seg], cut: &dyn Fn(usize, &Seg) -> usize| {
            let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
            let mut table = FlowTable::new(Limits::default());
            let mut out = Vec::new();
            for (i, seg) in segs.iter().enumerate() {
                let (src, dst) = if seg.from_client { (c, s) } else { (s, c) };
                let keep = cut(i, seg).min(seg.payload.len());
                let segment = Segment {
                    src,
                    dst,
                    seq: seg.seq,
                    ack: seg.ack,
                    flags: seg.flags,
                    payload: &seg.payload[..keep],
                    payload_len: seg.payload.len(),
                };
                table.segment(seg.ns, &segment, &mut |o| out.push(o));
            }
            table.finish(&mut |o| out.push(o));
            out
        };
        let want = expected();
        let flight = 4;
        let sh = server_hello().len();
        // The flight's frame cut inside its last encrypted record's body: the same
        // handshake, its flight's size included.
        let last_body = sh + 6 + 1005 + 5 + 100;
        let out = run_cut(&conversation(), &|i, s| {
            if i == flight {
                last_body
            } else {
                s.payload.len()
            }
        });
        assert_eq!(out, vec![Outcome::Handshake(Box::new(want.clone()))]);
        // … and the response cut too (after the handshake: not read).
        let out = run_cut(&conversation(), &|i, s| match i {
            4 => last_body,
            7 => 10,
            _ => s.payload.len(),
        });
        assert_eq!(out, vec![Outcome::Handshake(Box::new(want.clone()))]);
        // Cut inside the first encrypted record: the second one's header is in the hole.
        let out = run_cut(&conversation(), &|i, s| {
            if i == flight {
                sh + 6 + 5 + 500
            } else {
                s.payload.len()
            }
        });
        assert_eq!(out, vec![Outcome::Unparsed]);
        // The ClientHello cut: its contents are not there.
        let out = run_cut(&conversation(), &|i, s| {
            if i == 3 { 40 } else { s.payload.len() }
        });
        assert_eq!(out, vec![Outcome::Unparsed]);
    }

    /// TCP Fast Open: the ClientHello rides in the SYN (its data begins after the SYN's
    /// sequence number); it was ignored, and the connection had no handshake.
    #[test]
    fn a_client_hello_in_a_fast_open_syn_is_read() {
        let us = 1_000;
        let mut segs = conversation();
        let ch = segs.remove(3);
        segs[0].payload = ch.payload;
        let h = handshake(&segs);
        assert_eq!(h.kind, HandshakeKind::Full);
        assert_eq!(h.sni.as_deref(), Some("localhost"));
        assert_eq!(h.phases.server_think, Some(20 * us));
        assert_eq!(h.phases.tls, Some(30 * us));
        assert_eq!(h.phases.connect, Some(2 * us));
    }

    /// The client's first bytes were never captured, so nothing it sent became
    /// readable: a gap (unparsed), not a connection without payload.
    #[test]
    fn data_that_never_becomes_contiguous_is_unparsed_not_empty() {
        let mut segs = conversation();
        segs.truncate(4);
        segs[3].payload.drain(..10);
        segs[3].seq = segs[3].seq.wrapping_add(10);
        let mut fins = conversation().split_off(8);
        for f in &mut fins {
            f.ack = 0;
        }
        segs.extend(fins);
        let (out, _) = run(&segs);
        assert_eq!(out, vec![Outcome::Unparsed]);
        // A bare connection still is one without payload.
        let mut bare = conversation();
        bare.truncate(3);
        let (out, _) = run(&bare);
        assert_eq!(out, vec![Outcome::Empty]);
    }

    #[test]
    fn garbage_in_a_stream_is_not_tls_or_unparsed_never_a_panic() {
        let mut segs = conversation();
        segs[3].payload = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let (out, _) = run(&segs);
        assert_eq!(out, vec![Outcome::NotTls]);
        let mut segs = conversation();
        let n = segs[4].payload.len();
        segs[4].payload = vec![0x42; n];
        let (out, _) = run(&segs);
        assert_eq!(out, vec![Outcome::Unparsed]);
        // Random payloads in every segment.
        let mut rng = crate::observe::xorshift::XorShift::new(0xdead_beef_cafe_f00d);
        for _ in 0..200 {
            let mut segs = conversation();
            for s in &mut segs {
                for b in &mut s.payload {
                    let x = rng.next_u64();
                    if x.is_multiple_of(7) {
                        *b = x as u8;
                    }
                }
            }
            let _ = run(&segs);
        }
    }

    #[test]
    fn a_reset_mid_handshake_is_a_failure_and_late_acks_open_nothing() {
        let mut segs = conversation();
        segs.truncate(5);
        segs[4].flags.rst = true;
        segs[4].payload.clear();
        // The client's ACK of the reset's segment comes after the flow is gone.
        segs.push(Seg {
            payload: vec![],
            ..conversation().swap_remove(2)
        });
        let (out, counters) = run(&segs);
        assert_eq!(
            out,
            vec![Outcome::Failed(crate::observe::timeline::Failure::Reset)]
        );
        assert_eq!((counters.tracked, counters.midstream), (1, 0));
    }

    #[test]
    fn the_table_is_bounded() {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let mut table = FlowTable::new(Limits {
            max_flows: 10,
            ..Limits::default()
        });
        let mut out = Vec::new();
        for i in 0..25u16 {
            let src = SocketAddr::new(c.ip(), 1000 + i);
            let syn = Segment {
                src,
                dst: s,
                seq: 1,
                ack: 0,
                flags: Flags {
                    syn: true,
                    ..Flags::default()
                },
                payload: &[],
                payload_len: 0,
            };
            table.segment(u64::from(i), &syn, &mut |o| out.push(o));
        }
        assert_eq!(table.len(), 10);
        assert_eq!(table.counters().over_cap, 15);
        // 11 s later every half-open connection is evicted.
        table.sweep(11_000_000_000, &mut |o| out.push(o));
        assert!(table.is_empty());
        assert_eq!(table.counters().evicted_half_open, 10);
        assert!(out.iter().all(|o| *o == Outcome::Empty), "{out:?}");
    }

    #[test]
    fn a_reused_port_starts_a_new_connection() {
        // The first connection never closes (its FINs were not captured); the same
        // addresses open again with another initial sequence number.
        let mut first = conversation();
        first.truncate(8);
        let mut second = conversation();
        for s in &mut second {
            s.ns += 1_000_000;
            if s.from_client {
                s.seq = s.seq.wrapping_add(50_000);
            } else {
                s.ack = s.ack.wrapping_add(50_000);
            }
        }
        let all: Vec<Seg> = first.into_iter().chain(second).collect();
        let (out, counters) = run(&all);
        assert_eq!(counters.tracked, 2);
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(
            out.iter().all(|o| matches!(o, Outcome::Handshake(_))),
            "{out:?}"
        );
    }

    /// 200 handshakes, one a second, over a background of unanswered SYNs (ten a
    /// second) in a table of 200 flows, and one segment stamped a year ahead at 5 s: it
    /// evicted the connections in progress and stopped evictions for the rest of the
    /// capture, the SYNs filled the table and the later handshakes were not tracked
    /// (20 of 200 analyzed). Then 300 s of silence: the capture's clock moves on once
    /// the traffic confirms it, and the half-open SYNs before the pause are evicted.
    /// 1,000 connections, each holding 200 KiB out of order (a segment past a gap that
    /// never fills): 200 MB held without a budget. With a 16 MiB budget the table holds
    /// at most that, the rest are shed and counted; the bytes held go back to zero as
    /// the connections end.
    #[test]
    fn the_memory_budget_holds_across_connections_and_sheds_the_rest() {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let budget = 16 << 20;
        let mut table = FlowTable::new(Limits {
            max_memory: budget,
            ..Limits::default()
        });
        let ahead = vec![0x16u8; 200 * 1024];
        let mut peak = 0;
        let mut outcomes = 0;
        for i in 0..1000u16 {
            let client = SocketAddr::new(c.ip(), 2000 + i);
            let syn = Segment {
                src: client,
                dst: s,
                seq: 99,
                ack: 0,
                flags: Flags {
                    syn: true,
                    ..Flags::default()
                },
                payload: &[],
                payload_len: 0,
            };
            table.segment(u64::from(i), &syn, &mut |_| outcomes += 1);
            // Data 1,000 bytes past the first byte expected: held out of order.
            let data = Segment {
                src: client,
                dst: s,
                seq: 100 + 1000,
                ack: 0,
                flags: Flags {
                    ack: true,
                    ..Flags::default()
                },
                payload: &ahead,
                payload_len: ahead.len(),
            };
            table.segment(u64::from(i) + 1, &data, &mut |_| outcomes += 1);
            peak = peak.max(table.table_bytes(table.flows.len()) + table.held);
        }
        let counters = table.counters();
        assert!(peak <= budget, "{peak} > {budget}");
        assert!(counters.shed > 900, "{counters:?}");
        assert!(counters.shed_bytes > 900 * 200 * 1024, "{counters:?}");
        // Every connection tracked: those holding data never crowd out new ones.
        assert_eq!(counters.tracked, 1000, "{counters:?}");
        table.finish(&mut |_| outcomes += 1);
        assert_eq!(table.held, 0);
        assert_eq!(outcomes, 1000);
    }

    #[test]
    fn one_future_timestamp_does_not_stop_eviction() {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let sec = 1_000_000_000u64;
        let mut table = FlowTable::new(Limits {
            max_flows: 200,
            ..Limits::default()
        });
        let mut handshakes = 0;
        let mut count = |o: Outcome| {
            if matches!(o, Outcome::Handshake(_)) {
                handshakes += 1;
            }
        };
        let mut port = 1000u16;
        let mut feed = |table: &mut FlowTable, t0: u64, count: &mut dyn FnMut(Outcome)| {
            port += 1;
            let client = SocketAddr::new(c.ip(), port);
            for (i, seg) in conversation().iter().enumerate() {
                // Ten unanswered SYNs a second, between the conversation's segments.
                if i < 10 {
                    port += 1;
                    let syn = Segment {
                        src: SocketAddr::new(c.ip(), port),
                        dst: s,
                        seq: 7,
                        ack: 0,
                        flags: Flags {
                            syn: true,
                            ..Flags::default()
                        },
                        payload: &[],
                        payload_len: 0,
                    };
                    table.segment(t0 + i as u64 * sec / 10, &syn, &mut |o| count(o));
                }
                let (src, dst) = if seg.from_client {
                    (client, s)
                } else {
                    (s, client)
                };
                let segment = Segment {
                    src,
                    dst,
                    seq: seg.seq,
                    ack: seg.ack,
                    flags: seg.flags,
                    payload: &seg.payload,
                    payload_len: seg.payload.len(),
                };
                table.segment(t0 + seg.ns, &segment, &mut |o| count(o));
            }
        };
        for i in 0..200 {
            feed(&mut table, 1_000 * sec + i * sec, &mut count);
            if i == 5 {
                let stray = Segment {
                    src: SocketAddr::new(c.ip(), 9),
                    dst: s,
                    seq: 1,
                    ack: 0,
                    flags: Flags {
                        syn: true,
                        ..Flags::default()
                    },
                    payload: &[],
                    payload_len: 0,
                };
                table.segment(1_000 * sec + 365 * 86_400 * sec, &stray, &mut count);
            }
        }
        assert_eq!(table.counters().over_cap, 0, "{:?}", table.counters());
        assert_eq!(table.counters().clock_outliers, 1);
        // After a pause, the capture goes on: the clock follows it.
        let later = 1_000 * sec + 500 * sec;
        feed(&mut table, later, &mut count);
        assert!(table.len() <= 12, "{} flows left", table.len());
        table.finish(&mut count);
        assert_eq!(handshakes, 201);
        assert_eq!(table.counters().clock_outliers, 1);
    }

    #[test]
    fn the_clock_skips_a_stray_timestamp_and_follows_a_pause() {
        let sec = 1_000_000_000u64;
        let year = 365 * 86_400 * sec;
        let mut c = Clock::default();
        let mut outliers = 0;
        let mut tick = |c: &mut Clock, ns| {
            let t = c.tick(ns);
            outliers += t.outliers;
            t.now
        };
        assert_eq!(tick(&mut c, 100 * sec), 100 * sec);
        assert_eq!(tick(&mut c, 101 * sec), 101 * sec);
        // A stray frame a year ahead, and one a year back: the clock stays.
        assert_eq!(tick(&mut c, 101 * sec + year), 101 * sec);
        assert_eq!(tick(&mut c, 102 * sec), 102 * sec);
        assert_eq!(tick(&mut c, 1), 102 * sec);
        // Slightly out of order: never back.
        assert_eq!(tick(&mut c, 101 * sec), 102 * sec);
        // A pause of 300 s: three frames confirm it.
        assert_eq!(tick(&mut c, 402 * sec), 102 * sec);
        assert_eq!(tick(&mut c, 403 * sec), 102 * sec);
        assert_eq!(tick(&mut c, 404 * sec), 404 * sec);
        assert_eq!(tick(&mut c, 405 * sec), 405 * sec);
        assert_eq!(outliers, 2);
        assert_eq!(c.covered(), 305 * sec);
        // A first frame a year ahead: the clock comes back once three frames agree.
        let mut c = Clock::default();
        let _ = c.tick(year);
        for i in 0..3 {
            let _ = c.tick(100 * sec + i);
        }
        assert_eq!(c.tick(101 * sec).now, 101 * sec);
        assert_eq!(c.covered(), sec - 2);
    }

    /// What the fuzz target `observe_flow` does, with pseudo-random inputs.
    #[test]
    fn random_segment_sequences_never_panic() {
        let (c, s): (SocketAddr, SocketAddr) = (C.parse().unwrap(), S.parse().unwrap());
        let mut rng = crate::observe::xorshift::XorShift::new(0x0123_4567_89ab_cdef);
        let mut next = move || rng.next_u64();
        for _ in 0..300 {
            let mut table = FlowTable::new(Limits {
                max_out_of_order: 4096,
                ..Limits::default()
            });
            let mut outcomes = 0u64;
            let mut ns = 0;
            let base = next() as u32;
            for _ in 0..(next() % 60) {
                let ctl = next();
                // Sequence numbers near each other, so that segments overlap and fill gaps.
                let seq = base.wrapping_add((next() % 3000) as u32);
                let ack = base.wrapping_add((next() % 3000) as u32);
                let mut payload: Vec<u8> = (0..next() % 400).map(|_| next() as u8).collect();
                if ctl & 64 != 0 && payload.len() > 5 {
                    // A plausible record header now and then.
                    payload[..3].copy_from_slice(&[22, 3, 3]);
                }
                let (src, dst) = if ctl & 1 == 0 { (c, s) } else { (s, c) };
                let seg = Segment {
                    src,
                    dst,
                    seq,
                    ack,
                    flags: Flags {
                        syn: ctl & 2 != 0,
                        ack: ctl & 4 != 0,
                        fin: ctl & 8 != 0,
                        rst: ctl & 16 != 0,
                    },
                    payload: &payload,
                    payload_len: payload.len(),
                };
                ns += (ctl >> 40) % 3 * 1_000_000_000;
                table.segment(ns, &seg, &mut |_| outcomes += 1);
            }
            table.finish(&mut |_| outcomes += 1);
            assert!(outcomes <= table.counters().tracked);
        }
    }
}
