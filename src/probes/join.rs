//! The join of probed handshakes to captured connections: by the connection's addresses
//! *and* time, each captured handshake taken at most once per side. A client port recurs
//! (at a few hundred connections a second, half of them within 30 s), so the addresses
//! alone may name an earlier or later connection; the instant the process saw its socket
//! tells which.
//!
//! A record's instant is its TCP handshake's completion (`established`), else its
//! socket's (`accept` returned, `connect` called), else its first handshake call, on
//! CLOCK_MONOTONIC; a captured connection's is its SYN's capture time (its first
//! ClientHello's without one), on CLOCK_REALTIME. The two clocks' offset is read when the
//! probes start and again at every poll. The record joins the captured connection on its
//! addresses whose start is nearest its instant, and at most [`JOIN_WINDOW`] from it.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::event::{ProbeRecord, Role};
use super::report::WireHandshake;

/// What becomes of a captured handshake's line (`observe --handshake-log`) once its record
/// joined it (with the clocks' offset), or once none did within [`LINE_WAIT`].
pub type Line = Box<dyn FnOnce(Option<&ProbeRecord>, i128) + Send>;

/// How long a captured handshake's line waits for a record to join it.
pub const LINE_WAIT: Duration = Duration::from_secs(5);

/// The most captured handshakes kept for joining; older ones go first.
const WIRE_KEPT: usize = 200_000;
/// How long a captured handshake is kept for its records.
const WIRE_WAIT: Duration = Duration::from_secs(30);
/// The farthest a record's instant may be from its captured connection's start (ns). A
/// server's established instant follows the SYN by one round trip; a client's socket
/// precedes it by the time `connect` takes.
pub const JOIN_WINDOW: u64 = 5_000_000_000;
/// The farthest a record's TCP handshake completion may be from its captured
/// connection's (ns), when both are known: the same ACK's arrival in the kernel, seen by
/// a tracepoint and by the capture on the same host, microseconds apart. Tighter than
/// [`JOIN_WINDOW`], so that a record whose own connection the capture missed (frames
/// dropped on a busy machine) does not join the next connection from the same port.
pub const ESTABLISHED_WINDOW: u64 = 250_000_000;

struct Entry {
    wire: WireHandshake,
    seq: u64,
    /// Taken by the server's record, by the client's.
    taken: [bool; 2],
    line: Option<Line>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("wire", &self.wire)
            .field("seq", &self.seq)
            .field("taken", &self.taken)
            .finish_non_exhaustive()
    }
}

/// Captured handshakes waiting for their probe records, by (client, server).
#[derive(Debug, Default)]
pub struct WireIndex {
    map: HashMap<(SocketAddr, SocketAddr), Vec<Entry>>,
    order: VecDeque<((SocketAddr, SocketAddr), u64, Instant)>,
    /// The entries whose line is not written yet, oldest first.
    lines: VecDeque<((SocketAddr, SocketAddr), u64, Instant)>,
    seq: u64,
    /// The clocks' offset the lines are written with.
    offset: i128,
    ports: Vec<u16>,
    unmatched: u64,
}

/// CLOCK_REALTIME − CLOCK_MONOTONIC, ns: a probe instant plus this is a capture instant.
pub fn clock_offset() -> i128 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to write into; both clocks exist on Linux.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
    };
    let mono = read(libc::CLOCK_MONOTONIC);
    let real = read(libc::CLOCK_REALTIME);
    let mono2 = read(libc::CLOCK_MONOTONIC);
    real - (mono + mono2) / 2
}

fn side(role: Role) -> usize {
    match role {
        Role::Client => 1,
        _ => 0,
    }
}

impl WireIndex {
    /// An index of the captured connections on `ports` (every port when empty).
    pub fn new(ports: Vec<u16>) -> WireIndex {
        WireIndex {
            ports,
            ..WireIndex::default()
        }
    }

    /// A handshake the packet path completed, with what to do with its line once a
    /// record joined it (or none did in time).
    pub fn add(&mut self, h: WireHandshake, line: Option<Line>) {
        let key = (h.client, h.server);
        self.seq += 1;
        let now = Instant::now();
        if line.is_some() {
            self.lines.push_back((key, self.seq, now));
        }
        self.map.entry(key).or_default().push(Entry {
            wire: h,
            seq: self.seq,
            taken: [false; 2],
            line,
        });
        self.order.push_back((key, self.seq, now));
        while self.order.len() > WIRE_KEPT
            || self
                .order
                .front()
                .is_some_and(|(_, _, t)| t.elapsed() > WIRE_WAIT)
        {
            let Some((k, seq, _)) = self.order.pop_front() else {
                break;
            };
            self.evict(k, seq);
        }
    }

    fn evict(&mut self, key: (SocketAddr, SocketAddr), seq: u64) {
        let Some(v) = self.map.get_mut(&key) else {
            return;
        };
        if let Some(i) = v.iter().position(|e| e.seq == seq) {
            let e = v.swap_remove(i);
            if e.taken == [false; 2] {
                self.unmatched += 1;
            }
            if let Some(line) = e.line {
                line(None, self.offset);
            }
        }
        if v.is_empty() {
            self.map.remove(&key);
        }
    }

    /// True when the capture covers `r`'s connection (its server port is captured).
    pub fn covers(&self, r: &ProbeRecord) -> bool {
        let server = match r.role {
            Role::Server => r.local,
            _ => r.peer,
        };
        server.is_some_and(|s| self.ports.is_empty() || self.ports.contains(&s.port()))
    }

    /// The captured handshake of `r`'s connection, taken for `r`'s side: on its
    /// addresses, the one whose TCP handshake completed nearest `r`'s (plus `offset`, see
    /// [`clock_offset`]) within [`ESTABLISHED_WINDOW`] when both were seen; else the one
    /// whose start is nearest `r`'s instant, within [`JOIN_WINDOW`].
    pub fn take(&mut self, r: &ProbeRecord, offset: i128) -> Option<WireHandshake> {
        let (local, peer) = (r.local?, r.peer?);
        let key = match r.role {
            Role::Server => (peer, local),
            _ => (local, peer),
        };
        let at = i128::from(r.instant_ns()) + offset;
        let s = side(r.role);
        self.offset = offset;
        let v = self.map.get_mut(&key)?;
        let best = v
            .iter_mut()
            .filter(|e| !e.taken[s])
            .filter_map(|e| {
                let (wire_at, window) = match (r.established_ns, e.wire.established_ns) {
                    (Some(_), Some(w)) => (w, ESTABLISHED_WINDOW),
                    _ => (e.wire.start_ns?, JOIN_WINDOW),
                };
                let d = (at - i128::from(wire_at)).unsigned_abs();
                (d <= u128::from(window)).then_some((d, e))
            })
            .min_by_key(|(d, _)| *d)?;
        best.1.taken[s] = true;
        if let Some(line) = best.1.line.take() {
            line(Some(r), offset);
        }
        Some(best.1.wire.clone())
    }

    /// Writes the lines that waited [`LINE_WAIT`] for a record in vain (`all`: every
    /// line not written yet).
    pub fn flush_lines(&mut self, all: bool, offset: i128) {
        self.offset = offset;
        while let Some(&(key, seq, at)) = self.lines.front() {
            if !all && at.elapsed() < LINE_WAIT {
                break;
            }
            self.lines.pop_front();
            let line = self
                .map
                .get_mut(&key)
                .and_then(|v| v.iter_mut().find(|e| e.seq == seq))
                .and_then(|e| e.line.take());
            if let Some(line) = line {
                line(None, offset);
            }
        }
    }

    /// Captured handshakes that no record took, evicted so far and (`all`) still held.
    pub fn unmatched(&self, all: bool) -> u64 {
        let held = if all {
            self.map
                .values()
                .flatten()
                .filter(|e| e.taken == [false; 2])
                .count() as u64
        } else {
            0
        };
        self.unmatched + held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::event::{HandshakeResult, Library};

    fn wire(kind: &'static str, start: u64) -> WireHandshake {
        WireHandshake {
            client: "127.0.0.1:40000".parse().unwrap(),
            server: "127.0.0.1:443".parse().unwrap(),
            kind,
            server_think_ns: Some(1),
            sni: None,
            start_ns: Some(start),
            established_ns: None,
        }
    }

    fn record(role: Role, established: u64) -> ProbeRecord {
        let (local, peer) = ("127.0.0.1:443", "127.0.0.1:40000");
        let (local, peer) = match role {
            Role::Server => (local, peer),
            _ => (peer, local),
        };
        ProbeRecord {
            workload: None,
            pid: 1,
            tid: 1,
            comm: "x".into(),
            role,
            library: Library::OpenSsl,
            result: HandshakeResult::Ok,
            fd: 3,
            local: Some(local.parse().unwrap()),
            peer: Some(peer.parse().unwrap()),
            established_ns: Some(established),
            socket_ns: None,
            first_call_ns: established + 10,
            end_ns: established + 20,
            work_ns: 5,
            waiting_ns: 5,
            on_cpu_ns: None,
            parts: [None; crate::probes::event::PARTS.len()],
            trust_before_ns: None,
            signature_len: None,
            signature_kind: None,
            group: None,
            calls: 1,
            whole: true,
            split: true,
        }
    }

    #[test]
    fn a_recurring_port_joins_the_connection_of_its_time_once_per_side() {
        let mut ix = WireIndex::new(vec![443]);
        // The same addresses twice, 2 s apart; the clocks 1,000 s apart.
        ix.add(wire("full", 1_000_000_000_000), None);
        ix.add(wire("resumed", 1_002_000_000_000), None);
        let off = 1_000_000_000_000i128;
        let late = record(Role::Server, 2_000_100_000);
        assert_eq!(ix.take(&late, off).unwrap().kind, "resumed");
        let early = record(Role::Server, 100_000);
        assert_eq!(ix.take(&early, off).unwrap().kind, "full");
        // Each taken once by the server; the client's record of the first still joins.
        assert!(ix.take(&early, off).is_none());
        assert_eq!(
            ix.take(&record(Role::Client, 50_000), off).unwrap().kind,
            "full"
        );
        // A record far from every start joins nothing.
        let mut ix = WireIndex::new(vec![]);
        ix.add(wire("full", 1_000_000_000_000), None);
        assert!(
            ix.take(&record(Role::Server, 60_000_000_000), off)
                .is_none()
        );
        assert_eq!(ix.unmatched(true), 1);
        assert!(ix.covers(&early));
        assert!(!WireIndex::new(vec![8443]).covers(&early));
    }

    #[test]
    fn a_record_whose_connection_was_not_captured_joins_no_later_one() {
        let off = 1_000_000_000_000i128;
        // The record's own connection (established at 100 µs) was not captured; the next
        // one from the same port was, 3.8 s later.
        let mut ix = WireIndex::new(vec![443]);
        let mut later = wire("resumed", 1_003_800_000_000);
        later.established_ns = Some(1_003_800_050_000);
        ix.add(later.clone(), None);
        assert!(ix.take(&record(Role::Server, 100_000), off).is_none());
        // Its own connection joins, on the TCP handshake's completion.
        let mut own = wire("full", 999_999_950_000);
        own.established_ns = Some(1_000_000_000_000 + 99_000);
        ix.add(own, None);
        assert_eq!(
            ix.take(&record(Role::Server, 100_000), off).unwrap().kind,
            "full"
        );
        assert_eq!(
            ix.take(&record(Role::Server, 3_800_050_000), off)
                .unwrap()
                .kind,
            "resumed"
        );
        // Without the capture's completion, the start within JOIN_WINDOW still joins.
        let mut ix = WireIndex::new(vec![443]);
        ix.add(wire("full", 1_003_800_000_000), None);
        assert!(ix.take(&record(Role::Server, 100_000), off).is_some());
    }

    #[test]
    fn a_line_is_written_once_with_the_record_that_joined_it_or_without() {
        use std::sync::{Arc, Mutex};
        let seen: Arc<Mutex<Vec<Option<u32>>>> = Arc::default();
        let line = |seen: &Arc<Mutex<Vec<Option<u32>>>>| -> Line {
            let seen = Arc::clone(seen);
            Box::new(move |r, _| seen.lock().unwrap().push(r.map(|r| r.tid)))
        };
        let mut ix = WireIndex::new(vec![]);
        ix.add(wire("full", 1_000), Some(line(&seen)));
        let mut other = wire("full", 1_000);
        other.client = "127.0.0.1:40001".parse().unwrap();
        ix.add(other, Some(line(&seen)));
        let mut r = record(Role::Server, 1_000);
        r.tid = 9;
        assert!(ix.take(&r, 0).is_some());
        // The client's record takes it too: the line is written already.
        assert!(ix.take(&record(Role::Client, 1_000), 0).is_some());
        ix.flush_lines(false, 0);
        assert_eq!(*seen.lock().unwrap(), [Some(9)]);
        ix.flush_lines(true, 0);
        assert_eq!(*seen.lock().unwrap(), [Some(9), None]);
        ix.flush_lines(true, 0);
        assert_eq!(seen.lock().unwrap().len(), 2);
    }
}
