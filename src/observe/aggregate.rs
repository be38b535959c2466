//! Aggregation: connection outcomes → an [`Observation`]: handshake counts and HDR
//! histograms per phase per kind (`all` holds every kind), breakdowns by SNI, server,
//! version and group (bounded to [`MAX_ROWS`] rows each), resumption, failures.
//!
//! The histograms are held within their share of the memory budget
//! ([`super::flow::Limits::histogram_budget`]): each one's array of counts, and each
//! breakdown row's key and entry, are counted as they are made or grow. A handshake
//! whose row would take the histograms past it is counted in its breakdown's `(other)`
//! row instead (in none of it when even that does not fit), and a value that would make
//! a histogram grow past it is left out of that histogram; both are counted
//! ([`HistogramsShed`]).
//!
//! A breakdown row not added to between two sweeps (every [`IDLE_SWEEP`] handshakes)
//! has its histograms held encoded (a few hundred bytes instead of arrays of tens to
//! hundreds of KiB; decoded again by its next handshake), and the memory counted anew:
//! the rows of short-lived client processes, and of SNIs seen now and then, do not keep
//! their arrays for the rest of a long live run.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddr;

use super::flow::Counters;
use super::result::{
    Bytes, ClientHellos, Dist, HistogramsShed, KindStats, MAX_OFFER_ROWS, MAX_ROWS, OTHER,
    Observation, PHASES, Packets, Row, Source,
};
use super::timeline::{Failure, Handshake, HandshakeKind, Outcome};
use super::tls;

/// Builds an observation one connection at a time.
#[derive(Debug)]
pub struct Aggregate {
    /// Everything but the handshakes by kind.
    obs: Observation,
    /// The handshakes by kind: index 0 unused (`all` is made by merging the others),
    /// then [`HandshakeKind::ALL`]'s order; made into `obs.handshakes` by
    /// [`Aggregate::snapshot`] (no map lookup per handshake, each value recorded once).
    kinds: [Option<KindAcc>; 5],
    /// The last server seen and its text (the key of `by_server`).
    last_server: Option<SocketAddr>,
    /// A buffer for the text of a breakdown key.
    scratch: String,
    /// The histograms' memory and what was kept out of it.
    mem: Memory,
    /// Handshakes since the last sweep for idle rows.
    since_sweep: u64,
    /// Per breakdown (in the order of [`Aggregate::breakdowns`]), each row's handshakes
    /// at the last sweep.
    seen: [HashMap<String, u64>; BREAKDOWNS],
    /// What the ClientHellos offered, by code point and protocol (named by the
    /// snapshot).
    offers: Offers,
}

/// What the handshakes' ClientHellos offered, counted without a string or a map lookup
/// per handshake (a few distinct values, scanned): made into
/// [`Observation::client_hello`] by [`Aggregate::snapshot`].
#[derive(Debug, Clone, Default)]
struct Offers {
    /// By first ALPN protocol (`None`: no ALPN), at most [`MAX_OFFER_ROWS`].
    alpn: Vec<(Option<Cow<'static, str>>, u64)>,
    /// By group offered, at most [`MAX_OFFER_ROWS`].
    groups: Vec<(u16, u64)>,
    /// Beyond the bounds: ALPN protocols, groups.
    other_alpn: u64,
    other_groups: u64,
    psk: u64,
}

impl Offers {
    fn add(&mut self, o: &tls::Offer) {
        Self::tally(&mut self.alpn, &mut self.other_alpn, &o.alpn);
        for g in o.groups() {
            Self::tally(&mut self.groups, &mut self.other_groups, g);
        }
        self.psk += u64::from(o.psk);
    }

    /// One more of `key` in `rows`, or in `other` beyond [`MAX_OFFER_ROWS`] rows.
    fn tally<K: PartialEq + Clone>(rows: &mut Vec<(K, u64)>, other: &mut u64, key: &K) {
        if let Some((_, n)) = rows.iter_mut().find(|(k, _)| k == key) {
            *n += 1;
        } else if rows.len() < MAX_OFFER_ROWS {
            rows.push((key.clone(), 1));
        } else {
            *other += 1;
        }
    }

    /// As the document has them.
    fn named(&self) -> ClientHellos {
        let mut c = ClientHellos {
            psk_offered: self.psk,
            ..ClientHellos::default()
        };
        for (a, n) in &self.alpn {
            ClientHellos::count(&mut c.alpn, a.as_deref().unwrap_or("(none)"), *n);
        }
        for (g, n) in &self.groups {
            ClientHellos::count(&mut c.offered_groups, &tls::group_label(*g), *n);
        }
        for (map, n) in [
            (&mut c.alpn, self.other_alpn),
            (&mut c.offered_groups, self.other_groups),
        ] {
            if n > 0 {
                *map.entry(OTHER.to_string()).or_default() += n;
            }
        }
        c
    }
}

/// Handshakes between two sweeps for idle breakdown rows.
pub const IDLE_SWEEP: u64 = 5_000;

/// The histograms' memory: what they hold, their budget, what was shed. The breakdown
/// rows may take at most half of the budget, so the kinds' histograms (the result's
/// main figures) always have the other half; room for each breakdown's `(other)` row is
/// kept from the start, so a handshake that finds no room for its own row is still
/// counted in its breakdown.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    /// Bytes held: the histograms' arrays, the breakdown rows' keys and entries.
    held: usize,
    /// Of which by the breakdown rows.
    rows_held: usize,
    /// Bytes kept for the `(other)` rows not made yet.
    reserve: usize,
    /// The most they may hold.
    budget: usize,
    /// What was left out.
    shed: HistogramsShed,
}

/// Who takes memory: a kind's histogram, or a breakdown row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum For {
    Kind,
    Row,
}

/// What a breakdown row takes besides its histograms' arrays: its entry in the map and
/// the map's node around it (its key's text is counted apart).
const ROW_COST: usize = std::mem::size_of::<(String, Row)>() + 64;

/// How many breakdowns there are (SNI, server, version, group, the two processes).
const BREAKDOWNS: usize = 6;

/// What a new row of `key` takes.
fn row_cost(key: &str) -> usize {
    ROW_COST + key.len() + 2 * empty_dist_bytes()
}

impl Memory {
    /// Nothing held, `budget` bytes to hold.
    fn new(budget: usize) -> Memory {
        Memory {
            reserve: (BREAKDOWNS * row_cost(OTHER)).min(budget / 2),
            budget,
            ..Memory::default()
        }
    }

    /// Takes `bytes` more for `who` when they fit.
    fn take(&mut self, bytes: usize, who: For) -> bool {
        let within = |held: usize, limit: usize| {
            held.saturating_add(self.reserve).saturating_add(bytes) <= limit
        };
        if !within(self.held, self.budget)
            || (who == For::Row && !within(self.rows_held, self.budget / 2))
        {
            return false;
        }
        self.held += bytes;
        if who == For::Row {
            self.rows_held += bytes;
        }
        true
    }

    /// Takes an `(other)` row's bytes from the room kept for it (once that is spent, as
    /// any row's).
    fn take_other(&mut self) -> bool {
        let cost = row_cost(OTHER);
        if self.reserve >= cost {
            self.reserve -= cost;
            self.held += cost;
            self.rows_held += cost;
            return true;
        }
        self.take(cost, For::Row)
    }
}

/// The memory of an empty histogram's array.
fn empty_dist_bytes() -> usize {
    crate::stats::histogram::LatencyHistogram::EMPTY_HEAP_BYTES
}

/// The handshakes of one kind so far.
#[derive(Debug, Clone, Default)]
struct KindAcc {
    count: u64,
    hrr: u64,
    retry: u64,
    server_flight_bytes: Bytes,
    /// Per phase of [`PHASES`], in its order: `None` until a handshake had it.
    phases: [Option<Dist>; PHASES.len()],
}

/// Where `kind` is in [`Aggregate::kinds`].
fn kind_index(kind: HandshakeKind) -> usize {
    match kind {
        HandshakeKind::Full => 1,
        HandshakeKind::FullHrr => 2,
        HandshakeKind::Resumed => 3,
        HandshakeKind::ZeroRtt => 4,
    }
}

/// The name of `kinds[i]`.
fn kind_name(i: usize) -> &'static str {
    match i {
        0 => "all",
        // Invariant: i < 5 (the length of `kinds`).
        i => HandshakeKind::ALL[i - 1].name(),
    }
}

/// Records `v` in `d` (`who`'s) when its growth, if any, fits in `mem` (else counts it
/// shed).
fn record(d: &mut Dist, v: Option<u64>, mem: &mut Memory, who: For) {
    if let Some(v) = v {
        let grows = d.hdr.growth_for(v);
        if grows > 0 && !mem.take(grows, who) {
            mem.shed.values += 1;
            return;
        }
        // Recording fails only for a value beyond the histogram's range, which an
        // auto-resizing histogram does not have; such a value is left out.
        let _ = d.hdr.record_ns(v);
    }
}

/// The row of `key`: made when it fits (within [`MAX_ROWS`] and the memory), else
/// [`OTHER`] (made when it fits), else none; a handshake kept out of its own row, or out
/// of the breakdown, for want of memory is counted shed.
fn row<'a>(map: &'a mut BTreeMap<String, Row>, key: &str, mem: &mut Memory) -> Option<&'a mut Row> {
    if map.contains_key(key) {
        return map.get_mut(key);
    }
    let full = map.len() >= MAX_ROWS;
    if !full {
        if mem.take(row_cost(key), For::Row) {
            return Some(entry(map, key));
        }
        mem.shed.rows += 1;
    }
    if map.contains_key(OTHER) {
        return map.get_mut(OTHER);
    }
    if mem.take_other() {
        return Some(entry(map, OTHER));
    }
    if full {
        // Beyond MAX_ROWS, and (other) does not fit: out of the breakdown.
        mem.shed.rows += 1;
    }
    None
}

/// The entry of `key`, allocating the key only the first time.
fn entry<'a, T: Default>(map: &'a mut BTreeMap<String, T>, key: &str) -> &'a mut T {
    if !map.contains_key(key) {
        map.insert(key.to_string(), T::default());
    }
    // Invariant: inserted just above when it was missing.
    map.get_mut(key).expect("the entry exists")
}

impl Aggregate {
    /// Notes where process attribution comes from (`kernel`, `/proc`).
    pub fn set_attribution(&mut self, source: &str) {
        self.obs.attribution = Some(source.to_string());
    }

    /// Nothing seen yet, from `sources` on `ports`, the histograms holding at most
    /// `budget` bytes.
    pub fn new(sources: Vec<Source>, ports: Vec<u16>, budget: usize) -> Aggregate {
        Aggregate {
            obs: Observation::new(sources, ports),
            kinds: Default::default(),
            last_server: None,
            scratch: String::new(),
            mem: Memory::new(budget),
            since_sweep: 0,
            seen: Default::default(),
            offers: Offers::default(),
        }
    }

    /// [`Aggregate::new`] of QUIC handshakes: its observation's transport is `quic`, its
    /// phases QUIC's.
    pub fn new_quic(sources: Vec<Source>, ports: Vec<u16>, budget: usize) -> Aggregate {
        let mut a = Aggregate::new(sources.clone(), ports.clone(), budget);
        a.obs = Observation::new_quic(sources, ports);
        a
    }

    /// The breakdowns, in a fixed order.
    fn breakdowns(obs: &mut Observation) -> [&mut BTreeMap<String, Row>; BREAKDOWNS] {
        [
            &mut obs.by_sni,
            &mut obs.by_server,
            &mut obs.by_version,
            &mut obs.by_group,
            &mut obs.by_client_process,
            &mut obs.by_server_process,
        ]
    }

    /// Holds encoded the histograms of the rows no handshake was added to since the last
    /// sweep, and counts the rows' memory anew.
    fn sweep_idle_rows(&mut self) {
        let mut rows_held = 0usize;
        for (map, seen) in Self::breakdowns(&mut self.obs)
            .into_iter()
            .zip(self.seen.iter_mut())
        {
            for (key, r) in map.iter_mut() {
                let idle = match seen.get_mut(key) {
                    Some(n) if *n == r.handshakes => true,
                    Some(n) => {
                        *n = r.handshakes;
                        false
                    }
                    None => {
                        seen.insert(key.clone(), r.handshakes);
                        false
                    }
                };
                if idle {
                    // A histogram that cannot be encoded stays as it is.
                    let _ = r.server_think.hdr.compact();
                    let _ = r.client_think.hdr.compact();
                }
                rows_held += ROW_COST
                    + key.len()
                    + r.server_think.hdr.heap_bytes()
                    + r.client_think.hdr.heap_bytes();
            }
        }
        self.mem.held = self.mem.held.saturating_sub(self.mem.rows_held) + rows_held;
        self.mem.rows_held = rows_held;
    }

    /// The bytes the histograms hold now (their arrays, the breakdown rows' keys and
    /// entries), as counted against their budget.
    pub fn held(&self) -> usize {
        self.mem.held
    }

    /// Adds what became of one connection.
    pub fn outcome(&mut self, o: Outcome) {
        let c = &mut self.obs.connections;
        match o {
            Outcome::Handshake(h) => {
                c.handshakes += 1;
                self.handshake(&h);
            }
            Outcome::Failed(f) => {
                c.failed += 1;
                let f2 = &mut self.obs.failures;
                match f {
                    Failure::Alert(a) => *f2.alerts.entry(a).or_default() += 1,
                    Failure::Reset => f2.reset += 1,
                    Failure::Closed => f2.closed += 1,
                    Failure::Incomplete => f2.incomplete += 1,
                }
            }
            Outcome::NotTls => c.not_tls += 1,
            Outcome::Unparsed => c.unparsed += 1,
            Outcome::Empty => c.empty += 1,
        }
    }

    fn handshake(&mut self, h: &Handshake) {
        self.since_sweep += 1;
        if self.since_sweep >= IDLE_SWEEP {
            self.since_sweep = 0;
            self.sweep_idle_rows();
        }
        let p = &h.phases;
        // In the order of PHASES.
        let phases = [
            p.connect,
            p.server_think,
            p.server_flight,
            p.client_think,
            p.tls,
            p.first_app_byte,
            p.server_first_byte,
        ];
        // Recorded under its kind only: `all` is the kinds merged, by the snapshot.
        {
            let ks = self.kinds[kind_index(h.kind)].get_or_insert_with(KindAcc::default);
            ks.count += 1;
            ks.hrr += u64::from(h.hrr);
            ks.retry += u64::from(h.retry);
            ks.server_flight_bytes.add(h.server_flight_bytes);
            for (d, v) in ks.phases.iter_mut().zip(phases) {
                if v.is_none() {
                    continue;
                }
                if d.is_none() {
                    if !self.mem.take(empty_dist_bytes(), For::Kind) {
                        self.mem.shed.values += 1;
                        continue;
                    }
                    *d = Some(Dist::default());
                }
                if let Some(d) = d {
                    record(d, v, &mut self.mem, For::Kind);
                }
            }
        }
        self.offers.add(&h.offer);
        let resumed = h.resumption.is_some();
        if let Some(m) = h.resumption {
            self.obs.resumption.resumed += 1;
            *entry(&mut self.obs.resumption.by_method, m) += 1;
        }
        // Every handshake after a HelloRetryRequest: `full-hrr`, and a resumption after
        // one (kind `resumed`, as `tlsperf serve` counts it).
        let hrr = h.hrr;
        // The keys are looked up as borrowed text: a String is made only for a row's
        // first handshake (the server's address is written into a buffer kept for it).
        if self.last_server != Some(h.server) {
            self.last_server = Some(h.server);
            self.scratch.clear();
            // Writing into a String cannot fail.
            let _ = write!(self.scratch, "{}", h.server);
        }
        let version = tls::version_label(h.version);
        let group = h.group.map_or(Cow::Borrowed("none"), tls::group_label);
        let keys: [(&mut BTreeMap<String, Row>, Option<&str>); 6] = [
            (
                &mut self.obs.by_sni,
                Some(h.sni.as_deref().unwrap_or("(none)")),
            ),
            (&mut self.obs.by_server, Some(&self.scratch)),
            (&mut self.obs.by_version, Some(&version)),
            (&mut self.obs.by_group, Some(&group)),
            (&mut self.obs.by_client_process, h.client_process.as_deref()),
            (&mut self.obs.by_server_process, h.server_process.as_deref()),
        ];
        for (map, key) in keys {
            let Some(key) = key else { continue };
            let Some(r) = row(map, key, &mut self.mem) else {
                continue;
            };
            r.handshakes += 1;
            r.resumed += u64::from(resumed);
            r.hrr += u64::from(hrr);
            record(&mut r.server_think, p.server_think, &mut self.mem, For::Row);
            record(&mut r.client_think, p.client_think, &mut self.mem, For::Row);
        }
    }

    /// The observation so far, with the flow table's and the capture's counters (a
    /// copy: the breakdowns' histograms are held twice while it lives).
    pub fn snapshot(&self, flows: Counters, packets: Packets, duration_s: f64) -> Observation {
        self.complete(self.obs.clone(), flows, packets, duration_s)
    }

    /// The observation, with the flow table's and the capture's counters (the
    /// breakdowns moved into it, not copied).
    pub fn into_observation(
        mut self,
        flows: Counters,
        packets: Packets,
        duration_s: f64,
    ) -> Observation {
        let obs = std::mem::replace(&mut self.obs, Observation::new(Vec::new(), Vec::new()));
        self.complete(obs, flows, packets, duration_s)
    }

    /// `o` (this aggregate's observation) with the counters, the kinds and percentiles.
    fn complete(
        &self,
        mut o: Observation,
        flows: Counters,
        packets: Packets,
        duration_s: f64,
    ) -> Observation {
        let c = &mut o.connections;
        c.tracked = flows.tracked;
        c.midstream = flows.midstream;
        c.evicted_idle = flows.evicted_idle;
        c.evicted_half_open = flows.evicted_half_open;
        c.over_cap = flows.over_cap;
        c.shed = flows.shed;
        c.shed_bytes = flows.shed_bytes;
        o.packets = packets;
        o.packets.clock_outliers = flows.clock_outliers;
        o.duration_s = duration_s;
        o.histograms_shed = self.mem.shed;
        o.client_hello = self.offers.named();
        let fresh = |d: &mut Dist| d.quantiles = d.hdr.quantiles();
        let mut all: Option<KindAcc> = None;
        for k in self.kinds[1..].iter().flatten() {
            let a = all.get_or_insert_with(KindAcc::default);
            a.count += k.count;
            a.hrr += k.hrr;
            a.retry += k.retry;
            a.server_flight_bytes.merge(&k.server_flight_bytes);
            for (d, kd) in a.phases.iter_mut().zip(&k.phases) {
                if let Some(kd) = kd {
                    // Histograms of one kind of value always merge (an auto-resizing
                    // histogram takes any value).
                    let _ = d.get_or_insert_with(Dist::default).hdr.merge(&kd.hdr);
                }
            }
        }
        let kinds = std::iter::once(all.as_ref()).chain(self.kinds[1..].iter().map(Option::as_ref));
        for (i, k) in kinds.enumerate() {
            let Some(k) = k else { continue };
            let phases = PHASES
                .iter()
                .zip(&k.phases)
                .filter_map(|((name, _), d)| {
                    let mut d = d.clone()?;
                    fresh(&mut d);
                    Some((name.to_string(), d))
                })
                .collect();
            o.handshakes.insert(
                kind_name(i).to_string(),
                KindStats {
                    count: k.count,
                    hrr: k.hrr,
                    retry: k.retry,
                    phases,
                    server_flight_bytes: k.server_flight_bytes,
                },
            );
        }
        for map in [
            &mut o.by_sni,
            &mut o.by_server,
            &mut o.by_version,
            &mut o.by_group,
            &mut o.by_client_process,
            &mut o.by_server_process,
        ] {
            for r in map.values_mut() {
                fresh(&mut r.server_think);
                fresh(&mut r.client_think);
            }
        }
        o.refresh();
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::timeline::Phases;

    /// A full TLS 1.3 handshake with SNI `sni` to `server`, its thinking times `think_ns`.
    fn handshake(sni: String, server: SocketAddr, think_ns: u64) -> Outcome {
        Outcome::Handshake(Box::new(Handshake {
            kind: HandshakeKind::Full,
            resumption: None,
            version: 0x0304,
            group: Some(0x1d),
            suite: 0x1301,
            sni: Some(sni),
            offer: Default::default(),
            client: "10.0.0.1:40000".parse().unwrap(),
            server,
            phases: Phases {
                connect: Some(100_000),
                server_think: Some(think_ns),
                server_flight: Some(10_000),
                client_think: Some(think_ns * 2),
                tls: Some(think_ns * 4),
                first_app_byte: Some(think_ns * 5),
                server_first_byte: Some(think_ns * 3),
            },
            server_flight_bytes: 1000,
            start_ns: None,
            hrr: false,
            retry: false,
            transport: crate::observe::timeline::Transport::Tcp,
            client_process: None,
            server_process: None,
        }))
    }

    /// Every byte the observation's histograms and rows hold, counted as the budget
    /// counts them, from the histograms themselves.
    fn held_by(o: &Observation) -> usize {
        let mut bytes = 0;
        for map in [&o.by_sni, &o.by_server, &o.by_version, &o.by_group] {
            for (key, r) in map {
                bytes += ROW_COST + key.len();
                bytes += r.server_think.hdr.heap_bytes() + r.client_think.hdr.heap_bytes();
            }
        }
        // The kind's own histograms (`all` is made by the snapshot, not held).
        for d in o.handshakes["full"].phases.values() {
            bytes += d.hdr.heap_bytes();
        }
        bytes
    }

    /// 3,000 handshakes, each with its own SNI and server (6,000 rows wanted, 2,000
    /// within the row limit): unbounded, their histograms take hundreds of MiB — in a
    /// live capture, a breakdown row for every SNI a gateway sees. Within a 4 MiB budget
    /// the histograms hold at most that (measured from the histograms themselves); the
    /// handshakes that found no room are in `(other)`, counted shed; every handshake is
    /// still counted in its kind, and in each breakdown once.
    #[test]
    fn many_rows_stay_within_the_histograms_budget_and_the_rest_is_counted() {
        let n = 3_000u64;
        let run = |budget: usize| {
            let mut agg = Aggregate::new(Vec::new(), Vec::new(), budget);
            for i in 0..n {
                let server = SocketAddr::from(([10, 1, (i / 250) as u8, (i % 250) as u8], 443));
                // 0.2 ms to ~0.5 s: the arrays grow as larger values come.
                let think = 200_000 + i * i * 50;
                agg.outcome(handshake(format!("host-{i}.example"), server, think));
                assert!(agg.held() <= budget, "{} > {budget}", agg.held());
            }
            let held = agg.held();
            (
                agg.snapshot(Counters::default(), Packets::default(), 1.0),
                held,
            )
        };
        // Unbounded, the 2,000 SNI and server rows alone would take at least their first
        // arrays: 64 MiB, and several times that as they grow.
        let budget = 4 << 20;
        assert!(2_000 * 2 * empty_dist_bytes() > 15 * budget);

        let (o, held) = run(budget);
        assert_eq!(held_by(&o), held, "the count is what the histograms hold");
        assert!(held <= budget, "{held} > {budget}");
        let shed = o.histograms_shed;
        assert!(shed.rows > 2 * 1000, "{shed:?}");
        assert_eq!(o.count("full"), n);
        for map in [&o.by_sni, &o.by_server] {
            let kept = map.len() as u64 - 1;
            assert!(kept > 1 && kept < 100, "{kept}");
            let counted: u64 = map.values().map(|r| r.handshakes).sum();
            assert_eq!(counted, n);
            assert_eq!(map[OTHER].handshakes, n - kept);
        }
        let kept = (o.by_sni.len() + o.by_server.len()) as u64 - 2;
        assert_eq!(shed.rows, 2 * n - kept);
        // The kind's histograms took the values first: every one is in.
        assert_eq!(
            o.handshakes["full"].phases["server_think"].quantiles.count,
            n
        );
        // The result and the summary say so.
        let text = crate::report::text::observation(&o);
        assert!(
            text.contains(&format!(
                "{} handshakes counted in a breakdown's (other)",
                shed.rows
            )),
            "{text}"
        );
    }

    /// A budget that holds the histograms' first arrays but not their growth: the values
    /// that would grow them are left out and counted, and the handshakes still counted.
    #[test]
    fn a_value_that_would_grow_a_histogram_past_the_budget_is_left_out_and_counted() {
        let server: SocketAddr = "10.0.0.2:443".parse().unwrap();
        let first = |budget: usize| {
            let mut agg = Aggregate::new(Vec::new(), Vec::new(), budget);
            agg.outcome(handshake("a".into(), server, 1_000));
            agg
        };
        // What the first handshake takes, twice (the rows have half), and no more.
        let probe = first(usize::MAX).mem;
        let budget = 2 * (probe.held + probe.reserve);
        let mut agg = first(budget);
        assert!(agg.mem.shed.is_empty(), "{:?}", agg.mem.shed);
        // 10 s: every array would have to grow to hold it.
        agg.outcome(handshake("a".into(), server, 10_000_000_000));
        assert!(agg.held() <= budget);
        let o = agg.snapshot(Counters::default(), Packets::default(), 1.0);
        assert_eq!(o.count("full"), 2);
        let shed = o.histograms_shed;
        assert!(shed.values > 0, "{shed:?}");
        assert_eq!(shed.rows, 0);
        assert_eq!(o.by_sni["a"].handshakes, 2);
        // Each handshake has 7 phase values and 2 per row of 4 breakdowns: each one is
        // in its histogram or counted shed.
        let recorded: u64 = o.handshakes["full"]
            .phases
            .values()
            .map(|d| d.quantiles.count)
            .sum::<u64>()
            + [&o.by_sni, &o.by_server, &o.by_version, &o.by_group]
                .iter()
                .flat_map(|m| m.values())
                .map(|r| r.server_think.quantiles.count + r.client_think.quantiles.count)
                .sum::<u64>();
        assert_eq!(recorded + shed.values, 2 * (7 + 2 * 4));
        // Merged, the counts add.
        let single = o.histograms_shed;
        let m = crate::observe::result::merge(&[o.clone(), o]).unwrap();
        assert_eq!(m.histograms_shed.values, 2 * single.values);
    }

    /// Rows no handshake came to between two sweeps are held encoded: the memory they
    /// hold falls, counted exactly; their values stay, and a later handshake to one is
    /// added to it.
    #[test]
    fn idle_rows_are_held_encoded_and_keep_their_values() {
        let busy: SocketAddr = "10.0.0.1:443".parse().unwrap();
        let mut agg = Aggregate::new(Vec::new(), Vec::new(), usize::MAX);
        // 200 SNIs and servers seen once, 5 ms thinking: arrays of tens of KiB each.
        for i in 0..200u64 {
            let server = SocketAddr::from(([10, 2, 0, i as u8], 443));
            agg.outcome(handshake(format!("once-{i}.example"), server, 5_000_000));
        }
        let before = agg.held();
        // Then only one SNI and server, over two sweeps.
        for _ in 0..2 * IDLE_SWEEP {
            agg.outcome(handshake("busy.example".into(), busy, 5_000_000));
        }
        let after = agg.held();
        assert!(after * 4 < before, "{after} not well below {before}");
        let o = agg.snapshot(Counters::default(), Packets::default(), 1.0);
        assert_eq!(held_by(&o), after, "the count is what the histograms hold");
        let r = &o.by_sni["once-7.example"];
        assert_eq!(r.server_think.quantiles.count, 1);
        assert!(r.server_think.hdr.heap_bytes() < 1024);
        // The busy rows were not encoded.
        assert!(o.by_sni["busy.example"].server_think.hdr.heap_bytes() > 1024);
        // An idle row's next handshake is added to it.
        let server = SocketAddr::from(([10, 2, 0, 7], 443));
        agg.outcome(handshake("once-7.example".into(), server, 6_000_000));
        let o = agg.snapshot(Counters::default(), Packets::default(), 1.0);
        assert_eq!(o.by_sni["once-7.example"].server_think.quantiles.count, 2);
        assert_eq!(held_by(&o), agg.held());
    }

    /// What the ClientHellos offered is counted by protocol and group, named in the
    /// document, and bounded: protocols beyond the rows kept are `(other)`.
    #[test]
    fn client_hello_offers_are_counted_and_bounded() {
        let mut offers = Offers::default();
        let mut o = tls::Offer::default();
        offers.add(&o);
        o.alpn = Some("h2".into());
        o.psk = true;
        offers.add(&o);
        offers.add(&o);
        for i in 0..MAX_OFFER_ROWS + 5 {
            o.alpn = Some(format!("proto-{i}").into());
            offers.add(&o);
        }
        let c = offers.named();
        assert_eq!(c.alpn["(none)"], 1);
        assert_eq!(c.alpn["h2"], 2);
        assert_eq!(c.alpn.len(), MAX_OFFER_ROWS + 1, "{:?}", c.alpn);
        assert_eq!(c.alpn[OTHER], 7);
        assert_eq!(c.alpn.values().sum::<u64>(), 3 + MAX_OFFER_ROWS as u64 + 5);
        assert_eq!(c.psk_offered, 2 + MAX_OFFER_ROWS as u64 + 5);
        assert!(c.offered_groups.is_empty());
    }
}
