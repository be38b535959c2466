//! The delay line: one thread per direction reads IP packets from one TUN device, decides
//! each one's fate with a [`Shaper`] (loss, drop-tail queue, serialization at the rate,
//! one-way delay and jitter) and writes it to the other TUN device at its due time.
//!
//! Times are `CLOCK_MONOTONIC` ([`Instant`]). A packet's arrival is stamped right after
//! the `read` that returned it; it is written by a `write` issued at its due time or just
//! after (the thread sleeps in `ppoll` with 1 ns timer slack until its own recent wake-up
//! lateness before the due time, and spins at most the last 5 µs: see [`run`]), or, when
//! a round of writes began less than [`MIN_GAP`] before, with the next round, at most
//! that much later; or, while packets stream in, with the next arrival's wake-up, at
//! most [`coalesce_limit`] later. The lateness counters include all of these.
//!
//! Also [`forward`]: the same threads' bare forwarder ([`super::Link::start_bare`]), each
//! packet written as soon as it is read, the floor the line's CPU is measured against.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::spec::{LinkSpec, Queue, Rate};

/// Largest IP packet read from a TUN device (its MTU is 1500; room for a bigger one).
const MAX_PACKET: usize = 65_536;
/// Below this much before a due time, the thread spins instead of sleeping.
const SPIN: Duration = Duration::from_micros(5);
/// The least time between the starts of two rounds of writes of one direction: packets
/// due sooner after a round began wait for the next one (at most this late) and go out
/// together, as a NIC's interrupt moderation hands the receiving stack its packets in
/// batches (50 µs is a common `rx-usecs`). It only acts above ~20,000 packets per second:
/// at 1 Gbit/s (a segment every 12 µs) one wake-up per segment kept the line and the
/// receiving stack too busy to carry more than 0.70–0.93 of the rate on a 2-vCPU machine;
/// rounds of about four segments carry 0.96 (docs/benchmarks.md).
pub const MIN_GAP: Duration = Duration::from_micros(50);
/// The most the thread asks to wake before a due time (see [`Lead`]).
const MAX_LEAD: Duration = Duration::from_micros(100);
/// The longest a packet may wait past its due time for the wake-up of the next arrival
/// ([`coalesce_limit`]), as a NIC's adaptive interrupt moderation waits for the next
/// packet only while packets keep coming.
pub const COALESCE_MAX: Duration = Duration::from_micros(200);

/// How long past its due time a packet of a direction whose one-way delay is `one_way`
/// may wait for the next arrival's wake-up rather than a timer of its own: 5% of the
/// one-way delay, at most [`COALESCE_MAX`] (200 µs from rtt=8ms up; 25 µs at rtt=1ms).
pub fn coalesce_limit(one_way: Duration) -> Duration {
    (one_way / 20).min(COALESCE_MAX)
}

/// Buckets of the lateness histogram: log-linear, 8 per power of two (12.5% wide).
const LATE_BUCKETS: usize = 16 + 60 * 8;

/// The bucket of a lateness of `ns` nanoseconds.
fn late_bucket(ns: u64) -> usize {
    if ns < 16 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize;
    (16 + (e - 4) * 8 + ((ns >> (e - 3)) & 7) as usize).min(LATE_BUCKETS - 1)
}

/// The largest lateness (ns) that falls in bucket `i`.
fn late_bucket_top(i: usize) -> u64 {
    if i < 16 {
        return i as u64;
    }
    let e = (i - 16) / 8 + 4;
    let sub = ((i - 16) % 8) as u64;
    ((8 + sub + 1) << (e - 3)).saturating_sub(1)
}

/// What happened to the packets of one direction.
#[derive(Debug)]
pub struct Counters {
    /// Packets read from the sending side.
    pub packets: AtomicU64,
    /// IP bytes read from the sending side.
    pub bytes: AtomicU64,
    /// Packets written to the receiving side.
    pub delivered: AtomicU64,
    /// IP bytes written to the receiving side.
    pub delivered_bytes: AtomicU64,
    /// Sum over delivered packets of how late the `write` began after the due time (ns):
    /// the delay line's own lateness.
    pub late_ns_sum: AtomicU64,
    /// The largest of those (ns).
    pub late_ns_max: AtomicU64,
    /// Packets dropped by the random loss.
    pub lost: AtomicU64,
    /// Packets dropped because the queue was full.
    pub overflow: AtomicU64,
    /// Packets the receiving device refused (its `write` failed): dropped outside the
    /// model.
    pub write_failed: AtomicU64,
    /// The most packets the queue held at once (waiting or being serialized).
    pub queue_peak_packets: AtomicU64,
    /// The most IP bytes it held at once.
    pub queue_peak_bytes: AtomicU64,
    /// Histogram of each delivered packet's lateness (see [`late_bucket`]).
    late: Box<[AtomicU64]>,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            packets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            delivered_bytes: AtomicU64::new(0),
            late_ns_sum: AtomicU64::new(0),
            late_ns_max: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
            write_failed: AtomicU64::new(0),
            queue_peak_packets: AtomicU64::new(0),
            queue_peak_bytes: AtomicU64::new(0),
            late: (0..LATE_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// A copy of [`Counters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CounterSnapshot {
    /// Packets read from the sending side.
    pub packets: u64,
    /// IP bytes read from the sending side.
    pub bytes: u64,
    /// Packets written to the receiving side.
    pub delivered: u64,
    /// IP bytes written to the receiving side.
    pub delivered_bytes: u64,
    /// Sum of the delay line's lateness over delivered packets (ns).
    pub late_ns_sum: u64,
    /// Its largest lateness (ns).
    pub late_ns_max: u64,
    /// Its median lateness (ns, the top of its histogram bucket: within 12.5%).
    pub late_ns_p50: u64,
    /// Its 99th percentile lateness (ns, likewise).
    pub late_ns_p99: u64,
    /// Packets dropped by the random loss.
    pub lost: u64,
    /// Packets dropped because the queue was full.
    pub overflow: u64,
    /// Packets the receiving device refused.
    pub write_failed: u64,
    /// The most packets the queue held at once.
    pub queue_peak_packets: u64,
    /// The most IP bytes it held at once.
    pub queue_peak_bytes: u64,
}

impl Counters {
    /// Records one delivered packet's lateness.
    fn record_late(&self, ns: u64) {
        self.late_ns_sum.fetch_add(ns, Ordering::Relaxed);
        self.late_ns_max.fetch_max(ns, Ordering::Relaxed);
        self.late[late_bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> CounterSnapshot {
        let late: Vec<u64> = self
            .late
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let max = self.late_ns_max.load(Ordering::Relaxed);
        let total: u64 = late.iter().sum();
        let quantile = |q: f64| -> u64 {
            if total == 0 {
                return 0;
            }
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (i, n) in late.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return late_bucket_top(i).min(max);
                }
            }
            max
        };
        CounterSnapshot {
            packets: self.packets.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            delivered_bytes: self.delivered_bytes.load(Ordering::Relaxed),
            late_ns_sum: self.late_ns_sum.load(Ordering::Relaxed),
            late_ns_max: max,
            late_ns_p50: quantile(0.5),
            late_ns_p99: quantile(0.99),
            lost: self.lost.load(Ordering::Relaxed),
            overflow: self.overflow.load(Ordering::Relaxed),
            write_failed: self.write_failed.load(Ordering::Relaxed),
            queue_peak_packets: self.queue_peak_packets.load(Ordering::Relaxed),
            queue_peak_bytes: self.queue_peak_bytes.load(Ordering::Relaxed),
        }
    }
}

/// A packet's fate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Deliver at this moment.
    Deliver(Instant),
    /// Lost at random.
    Lost,
    /// Dropped: the queue was full.
    Overflow,
}

/// One direction's model, apart from any I/O so that it can be tested on its own.
pub struct Shaper {
    rate: Option<Rate>,
    base: Duration,
    jitter: Duration,
    reorder: bool,
    loss: f64,
    queue: Queue,
    /// Packets in the queue (waiting or being serialized): when each finishes, and size.
    backlog: VecDeque<(Instant, usize)>,
    backlog_bytes: usize,
    last_delivery: Option<Instant>,
    rng: SmallRng,
}

impl Shaper {
    /// The model of one direction of `spec`, with `rate` as its rate.
    pub fn new(spec: &LinkSpec, rate: Option<Rate>, seed: u64) -> Shaper {
        Shaper {
            rate,
            base: spec.rtt / 2,
            jitter: spec.jitter,
            reorder: spec.reorder,
            loss: spec.loss,
            queue: spec.queue.at_rate(rate),
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            last_delivery: None,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// The one-way delay before jitter.
    pub fn one_way(&self) -> Duration {
        self.base
    }

    /// Packets and IP bytes in the queue after the last [`Shaper::admit`].
    pub fn depth(&self) -> (usize, usize) {
        (self.backlog.len(), self.backlog_bytes)
    }

    /// Decides the fate of a packet of `len` IP bytes that arrived at `now` (arrivals
    /// must come in time order).
    pub fn admit(&mut self, now: Instant, len: usize) -> Fate {
        if self.loss > 0.0 && self.rng.random::<f64>() < self.loss {
            return Fate::Lost;
        }
        while let Some(&(done, l)) = self.backlog.front() {
            if done > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= l;
        }
        let full = match self.queue {
            Queue::Packets(p) => self.backlog.len() as u64 >= p,
            Queue::Bytes(b) => (self.backlog_bytes + len) as u64 > b,
            // Only without a rate (`at_rate` made bytes of it otherwise): nothing queues.
            Queue::Time(_) => false,
        };
        if full {
            return Fate::Overflow;
        }
        let sent = match self.rate {
            Some(Rate(bps)) => {
                let start = self.backlog.back().map_or(now, |&(d, _)| d.max(now));
                let ser =
                    Duration::from_nanos((len as u64 * 8).saturating_mul(1_000_000_000) / bps);
                let done = start + ser;
                self.backlog.push_back((done, len));
                self.backlog_bytes += len;
                done
            }
            None => now,
        };
        let mut delay = self.base;
        if !self.jitter.is_zero() {
            let j = self.jitter.as_nanos() as f64;
            let offset = (self.rng.random::<f64>() - 0.5) * j;
            let d = (self.base.as_nanos() as f64 + offset).max(0.0);
            delay = Duration::from_nanos(d as u64);
        }
        let mut at = sent + delay;
        if !self.reorder
            && let Some(last) = self.last_delivery
        {
            at = at.max(last);
        }
        self.last_delivery = Some(at);
        Fate::Deliver(at)
    }
}

/// A packet waiting for its due time; ordered by due time, then arrival.
struct Pending {
    due: Instant,
    seq: u64,
    pkt: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Pending) -> bool {
        (self.due, self.seq) == (o.due, o.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Pending) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Pending {
    fn cmp(&self, o: &Pending) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(o.due, o.seq))
    }
}

/// Runs one direction until `stop` (an eventfd) becomes readable: reads from `from`,
/// writes to `to`. Returns when stopped; I/O errors other than a full or empty device
/// end the direction (the TCP connections over it then time out, they do not hang).
///
/// Timing: the thread sleeps in `ppoll` (1 ns timer slack) until [`Lead`] before the
/// next packet's due time (or [`MIN_GAP`] after the start of its last round of writes,
/// if later), `Lead` being its own recent wake-up lateness, so that it wakes about on
/// time without spinning; it spins only the last [`SPIN`]. While packets arrive at most
/// [`coalesce_limit`] apart (and the last came within it), a packet due before the next
/// arrival is expected (one inter-arrival gap after the last) needs no timer of its own:
/// it goes out at the next arrival's wake-up, or by a timer one gap past its due time; so
/// under a stream the writes ride on the reads' wake-ups and are at most one
/// inter-arrival gap late, while isolated packets (a handshake's, a slow stream's) still
/// go out on time. Whatever is due when it wakes goes out at once
/// (at high packet rates, several packets per wake-up); whatever is readable is read
/// until the device is empty.
pub fn run(
    from: &OwnedFd,
    to: &OwnedFd,
    stop: &OwnedFd,
    mut shaper: Shaper,
    counters: &Arc<Counters>,
) {
    real_time();
    // Packets waiting for their due time, earliest first (jitter may draw a packet an
    // earlier time than the one before it), each in a buffer of its own size, reused.
    let mut pending: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut seq: u64 = 0;
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut scratch = vec![0u8; MAX_PACKET];
    let mut lead = Lead::default();
    // When the last round of writes began: the next waits until MIN_GAP after it.
    let mut last_round: Option<Instant> = None;
    // While packets keep arriving at most `coalesce` apart, a packet due before the next
    // arrival is expected waits for that arrival's wake-up (at most one inter-arrival gap,
    // so at most `coalesce`, past its due time) instead of waking the thread by a timer of
    // its own.
    let coalesce = coalesce_limit(shaper.one_way());
    let mut last_input: Option<Instant> = None;
    let mut input_gap = Duration::MAX;
    loop {
        let mut now = Instant::now();
        let open = last_round.is_none_or(|t| now >= t + MIN_GAP);
        if open && pending.peek().is_some_and(|Reverse(p)| p.due <= now) {
            last_round = Some(now);
        }
        while let Some(Reverse(p)) = pending.peek() {
            if !open || p.due > now {
                break;
            }
            if let Some(Reverse(Pending { due, pkt, .. })) = pending.pop() {
                let late = now.saturating_duration_since(due).as_nanos() as u64;
                // SAFETY: writes `pkt.len()` bytes from a live buffer.
                let n = unsafe { libc::write(to.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
                if n >= 0 {
                    counters.delivered.fetch_add(1, Ordering::Relaxed);
                    counters
                        .delivered_bytes
                        .fetch_add(pkt.len() as u64, Ordering::Relaxed);
                    counters.record_late(late);
                } else {
                    counters.write_failed.fetch_add(1, Ordering::Relaxed);
                }
                spare.push(pkt);
            }
            now = Instant::now();
        }
        let wait = pending.peek().map(|Reverse(p)| {
            let at = match last_round {
                Some(t) => p.due.max(t + MIN_GAP),
                None => p.due,
            };
            at.saturating_duration_since(now)
        });
        let streaming = input_gap <= coalesce
            && last_input.is_some_and(|t| now.saturating_duration_since(t) <= coalesce);
        let ready = match wait {
            // Packets are arriving at most `coalesce` apart and this one is due before
            // the next is expected: it goes out with the next arrival's wake-up, or by a
            // timer one inter-arrival gap after its due time if none comes.
            Some(w) if streaming && w <= input_gap => poll(from, stop, Some(w + input_gap)),
            // Close to the due time: check the devices without sleeping.
            Some(w) if w <= SPIN => poll(from, stop, Some(Duration::ZERO)),
            Some(w) => {
                let ask = w.saturating_sub(lead.get()).max(Duration::from_micros(1));
                let ready = poll(from, stop, Some(ask));
                if ready == Ready::Timeout {
                    lead.woke(Instant::now().saturating_duration_since(now + ask));
                }
                ready
            }
            None => poll(from, stop, None),
        };
        match ready {
            Ready::Stop => return,
            Ready::Timeout => continue,
            Ready::Input => {}
        }
        let woke = Instant::now();
        if let Some(t) = last_input {
            input_gap = woke.saturating_duration_since(t);
        }
        last_input = Some(woke);
        loop {
            // SAFETY: reads into a live buffer of `scratch.len()` bytes.
            let n =
                unsafe { libc::read(from.as_raw_fd(), scratch.as_mut_ptr().cast(), scratch.len()) };
            if n <= 0 {
                break;
            }
            let at = Instant::now();
            let len = n as usize;
            counters.packets.fetch_add(1, Ordering::Relaxed);
            counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
            match shaper.admit(at, len) {
                Fate::Deliver(due) => {
                    let (p, b) = shaper.depth();
                    counters
                        .queue_peak_packets
                        .fetch_max(p as u64, Ordering::Relaxed);
                    counters
                        .queue_peak_bytes
                        .fetch_max(b as u64, Ordering::Relaxed);
                    let mut pkt = spare.pop().unwrap_or_default();
                    pkt.clear();
                    pkt.extend_from_slice(&scratch[..len]);
                    seq += 1;
                    pending.push(Reverse(Pending { due, seq, pkt }));
                }
                Fate::Lost => {
                    counters.lost.fetch_add(1, Ordering::Relaxed);
                }
                Fate::Overflow => {
                    counters.overflow.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Wake up on time even when every core is busy: real-time priority 1 (the lowest; it
/// only goes ahead of normal threads), with no timer slack. Without the right to it, the
/// thread stays a normal one and its lateness shows in the accuracy figures.
fn real_time() {
    // SAFETY: both calls only change this thread's scheduling.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
        let param = libc::sched_param { sched_priority: 1 };
        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param);
    }
}

/// A bare forwarder ([`super::Link::start_bare`]): until `stop` becomes readable, waits
/// for `from` to be readable, then reads each packet and writes it to `to` at once, until
/// the device is empty. No model, no timers, the scheduling of [`run`]: what carrying
/// the packets costs by itself, the floor of the delay line's CPU. `counters` get the
/// packets and bytes read and delivered (lateness 0) and the refused writes.
pub fn forward(from: &OwnedFd, to: &OwnedFd, stop: &OwnedFd, counters: &Arc<Counters>) {
    real_time();
    let mut buf = vec![0u8; MAX_PACKET];
    loop {
        match poll(from, stop, None) {
            Ready::Stop => return,
            Ready::Timeout => continue,
            Ready::Input => {}
        }
        loop {
            // SAFETY: reads into a live buffer of `buf.len()` bytes.
            let n = unsafe { libc::read(from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            counters.packets.fetch_add(1, Ordering::Relaxed);
            counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
            // SAFETY: writes `n` bytes from the live buffer just read into.
            let w = unsafe { libc::write(to.as_raw_fd(), buf.as_ptr().cast(), n as usize) };
            if w >= 0 {
                counters.delivered.fetch_add(1, Ordering::Relaxed);
                counters
                    .delivered_bytes
                    .fetch_add(n as u64, Ordering::Relaxed);
                counters.record_late(0);
            } else {
                counters.write_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// How long before a due time the thread asks to wake: a running mean of how late its
/// timed sleeps ended (at most [`MAX_LEAD`]).
#[derive(Default)]
struct Lead {
    ns: u64,
}

impl Lead {
    fn get(&self) -> Duration {
        Duration::from_nanos(self.ns)
    }

    /// A timed sleep ended `over` after the time asked.
    fn woke(&mut self, over: Duration) {
        let over = (over.as_nanos() as u64).min(MAX_LEAD.as_nanos() as u64);
        // Mean over the last ~8 wake-ups.
        self.ns = self.ns - self.ns / 8 + over / 8;
    }
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ready {
    /// The device has packets.
    Input,
    /// The stop eventfd.
    Stop,
    /// The time asked passed.
    Timeout,
}

/// Waits until `from` or `stop` is readable or `timeout` passes (none: no limit).
fn poll(from: &OwnedFd, stop: &OwnedFd, timeout: Option<Duration>) -> Ready {
    let mut fds = [
        libc::pollfd {
            fd: from.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: two valid pollfds; `tsp` is null or points at a live timespec.
    let n = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
    if n <= 0 {
        // A signal (EINTR) counts as the time passing: the caller looks again.
        return Ready::Timeout;
    }
    if fds[1].revents != 0 {
        Ready::Stop
    } else {
        Ready::Input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_waits_at_most_5_percent_of_the_one_way_delay_and_200_us() {
        assert_eq!(coalesce_limit(Duration::from_millis(10)), COALESCE_MAX);
        assert_eq!(coalesce_limit(Duration::from_millis(4)), COALESCE_MAX);
        assert_eq!(
            coalesce_limit(Duration::from_micros(500)),
            Duration::from_micros(25)
        );
        assert_eq!(coalesce_limit(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn lateness_buckets_hold_their_values() {
        for ns in [
            0u64,
            1,
            15,
            16,
            17,
            100,
            1_000,
            49_999,
            1 << 40,
            u64::MAX / 2,
        ] {
            let i = late_bucket(ns);
            assert!(late_bucket_top(i) >= ns, "{ns} in {i}");
            assert!(i == 0 || late_bucket_top(i - 1) < ns, "{ns} in {i}");
        }
        let c = Counters::default();
        for ns in 1..=1000u64 {
            c.record_late(ns * 1000);
        }
        let s = c.snapshot();
        assert!((500_000..=570_000).contains(&s.late_ns_p50), "{s:?}");
        assert!((990_000..=1_000_000).contains(&s.late_ns_p99), "{s:?}");
        assert_eq!(s.late_ns_max, 1_000_000);
    }

    fn spec(s: &str) -> LinkSpec {
        s.parse().unwrap()
    }

    #[test]
    fn delay_only() {
        let s = spec("rtt=60ms");
        let mut sh = Shaper::new(&s, None, 1);
        let t0 = Instant::now();
        assert_eq!(
            sh.admit(t0, 1500),
            Fate::Deliver(t0 + Duration::from_millis(30))
        );
        let t1 = t0 + Duration::from_millis(1);
        assert_eq!(
            sh.admit(t1, 40),
            Fate::Deliver(t1 + Duration::from_millis(30))
        );
    }

    #[test]
    fn rate_serializes_back_to_back() {
        // 8 Mbit/s: 1500 bytes take 1.5 ms.
        let s = spec("rtt=20ms,down=8mbit");
        let mut sh = Shaper::new(&s, s.down, 1);
        let t0 = Instant::now();
        let owd = Duration::from_millis(10);
        let per = Duration::from_micros(1500);
        for i in 1..=3u32 {
            assert_eq!(sh.admit(t0, 1500), Fate::Deliver(t0 + per * i + owd));
        }
        // After the queue drains, a packet goes at once.
        let later = t0 + Duration::from_millis(100);
        assert_eq!(sh.admit(later, 1500), Fate::Deliver(later + per + owd));
    }

    #[test]
    fn queue_drops_tail() {
        let s = spec("rtt=0,down=8mbit,queue=2pkt");
        let mut sh = Shaper::new(&s, s.down, 1);
        let t0 = Instant::now();
        assert!(matches!(sh.admit(t0, 1500), Fate::Deliver(_)));
        assert!(matches!(sh.admit(t0, 1500), Fate::Deliver(_)));
        assert_eq!(sh.admit(t0, 1500), Fate::Overflow);
        // One has been serialized 1.5 ms later: room for one more.
        let t1 = t0 + Duration::from_micros(1500);
        assert!(matches!(sh.admit(t1, 1500), Fate::Deliver(_)));
        assert_eq!(sh.admit(t1, 1500), Fate::Overflow);
        let s = spec("rtt=0,down=8mbit,queue=3000b");
        let mut sh = Shaper::new(&s, s.down, 1);
        assert!(matches!(sh.admit(t0, 1500), Fate::Deliver(_)));
        assert!(matches!(sh.admit(t0, 1500), Fate::Deliver(_)));
        assert_eq!(sh.admit(t0, 100), Fate::Overflow);
        // 3 ms at 8 Mbit/s is 3,000 bytes: two packets of 1,500.
        let s = spec("rtt=0,down=8mbit,queue=3ms");
        let mut sh = Shaper::new(&s, s.down, 1);
        assert!(matches!(sh.admit(t0, 1500), Fate::Deliver(_)));
        assert!(matches!(sh.admit(t0, 1500), Fate::Deliver(_)));
        assert_eq!(sh.admit(t0, 100), Fate::Overflow);
        // The direction without a rate has no queue.
        let mut sh = Shaper::new(&s, s.up, 1);
        for _ in 0..10 {
            assert_eq!(sh.admit(t0, 1500), Fate::Deliver(t0));
        }
    }

    /// Mean one-way delay (ms) of 100,000 packets 10 µs apart (back to back next to
    /// the jitter), the number lost, and whether any overtook the one before it.
    fn mean_owd_ms(s: &str) -> (f64, u64, bool) {
        let s = spec(s);
        let mut sh = Shaper::new(&s, None, 7);
        let t0 = Instant::now();
        let n = 100_000;
        let (mut lost, mut sum, mut delivered) = (0u64, 0.0, 0u64);
        let mut last = t0;
        let mut reordered = false;
        for i in 0..n {
            let at = t0 + Duration::from_micros(i * 10);
            match sh.admit(at, 100) {
                Fate::Lost => lost += 1,
                Fate::Deliver(d) => {
                    reordered |= d < last;
                    last = last.max(d);
                    let owd = d - at;
                    // Never later than the slowest draw, nor earlier than the fastest.
                    assert!(owd <= Duration::from_millis(60), "{owd:?}");
                    assert!(owd >= Duration::from_millis(40), "{owd:?}");
                    sum += owd.as_secs_f64() * 1e3;
                    delivered += 1;
                }
                Fate::Overflow => panic!("no queue limit hit without a rate"),
            }
        }
        (sum / delivered as f64, lost, reordered)
    }

    #[test]
    fn jitter_keeps_the_mean_delay_and_loss_its_rate() {
        let (mean, lost, reordered) = mean_owd_ms("rtt=100ms,jitter=20ms,loss=10%");
        // Uniform over 40..60 ms: sd 5.8 ms, over ~90,000 packets the mean's sd is 0.02 ms.
        assert!((mean - 50.0).abs() < 0.1, "mean one-way delay {mean:.3} ms");
        assert!(reordered);
        // 10% of 100,000: sd 95; 5 sd either side.
        assert!((9_525..=10_475).contains(&lost), "{lost}");
        // Kept in order, packets this close together wait for the slowest before them:
        // the mean goes up (towards rtt/2 + jitter/2), as the help says.
        let (mean, _, reordered) = mean_owd_ms("rtt=100ms,jitter=20ms,loss=10%,reorder=off");
        assert!(!reordered);
        assert!(mean > 55.0, "mean one-way delay {mean:.3} ms in order");
    }
}
