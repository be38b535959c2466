//! Aggregation: connection outcomes → an [`Observation`]: handshake counts and HDR
//! histograms per phase per kind (`all` holds every kind), breakdowns by SNI, server,
//! version and group (bounded to [`MAX_ROWS`] rows each), resumption, failures.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;

use super::flow::Counters;
use super::result::{
    Bytes, Dist, KindStats, MAX_ROWS, OTHER, Observation, PHASES, Packets, Row, Source,
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
}

/// The handshakes of one kind so far.
#[derive(Debug, Clone, Default)]
struct KindAcc {
    count: u64,
    hrr: u64,
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

fn record(d: &mut Dist, v: Option<u64>) {
    if let Some(v) = v {
        // Recording fails only for a value beyond the histogram's range, which an
        // auto-resizing histogram does not have; such a value is left out.
        let _ = d.hdr.record_ns(v);
    }
}

fn row<'a>(map: &'a mut BTreeMap<String, Row>, key: &str) -> &'a mut Row {
    let key = if map.len() >= MAX_ROWS && !map.contains_key(key) {
        OTHER
    } else {
        key
    };
    entry(map, key)
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

    /// Nothing seen yet, from `sources` on `ports`.
    pub fn new(sources: Vec<Source>, ports: Vec<u16>) -> Aggregate {
        Aggregate {
            obs: Observation::new(sources, ports),
            kinds: Default::default(),
            last_server: None,
            scratch: String::new(),
        }
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
            ks.server_flight_bytes.add(h.server_flight_bytes);
            for (d, v) in ks.phases.iter_mut().zip(phases) {
                if v.is_some() {
                    record(d.get_or_insert_with(Dist::default), v);
                }
            }
        }
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
            let r = row(map, key);
            r.handshakes += 1;
            r.resumed += u64::from(resumed);
            r.hrr += u64::from(hrr);
            record(&mut r.server_think, p.server_think);
            record(&mut r.client_think, p.client_think);
        }
    }

    /// The observation so far, with the flow table's and the capture's counters.
    pub fn snapshot(&self, flows: Counters, packets: Packets, duration_s: f64) -> Observation {
        let mut o = self.obs.clone();
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
        let fresh = |d: &mut Dist| d.quantiles = d.hdr.quantiles();
        let mut all: Option<KindAcc> = None;
        for k in self.kinds[1..].iter().flatten() {
            let a = all.get_or_insert_with(KindAcc::default);
            a.count += k.count;
            a.hrr += k.hrr;
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
