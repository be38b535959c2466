//! Windows (`observe --window DURATION`): what was seen in each closed window of time, per
//! series, as one record — handshakes, rate, failures, resumption, the kinds, versions,
//! groups and SNIs seen (bounded), the p50/p90/p95/p99 of every wire and probe phase,
//! and the headline phase's histogram (so that windows merge exactly into a day).
//!
//! QUIC's handshakes and failures are a window's `quic` part, series of their own with
//! the same shape, their keys' `transport` `quic`: its phases are not TCP's (no
//! `connect`, a round trip less), so they are never in TCP's distributions, and what
//! reads a window's `series` (the canary, `observe report`, a reader written before QUIC
//! was observed) sees TCP's alone. The baselines and long baselines judge and learn the
//! `quic` part's series too, each apart by its key.
//!
//! A window is `[k·W, (k+1)·W)` on the wall clock (ns since the Unix epoch), W the
//! window's length. A captured handshake counts in the window of its start (its SYN's
//! capture time); a probed one in the window of its instant (its TCP handshake's
//! completion as the kernel saw it, else its first call), put on the wall clock. A window
//! is closed once the clock has passed its end by [`GRACE`], so that a handshake that
//! began just before the end is in it; one that arrives later still counts in the next
//! window, as `late`. The state held is one window's histograms: bounded by
//! [`WindowOptions::max_series`] series (the rest in `(other)`) and
//! [`MAX_SNI_TRACKED`] SNIs per window.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::group::{GroupBy, Grouper};
use super::timeline::{Outcome, Transport};
use crate::probes::event::{HandshakeResult, ProbeRecord};
use crate::stats::{LatencyHistogram, Quantiles};

/// How long after a window's end it is closed: handshakes that began before its end
/// and completed within this still count in it.
pub const GRACE: Duration = Duration::from_millis(500);
/// The most distinct SNIs counted in one window; the rest count in `(other)`.
pub const MAX_SNI_TRACKED: usize = 1024;
/// The row that takes what is beyond a bound.
pub const OTHER: &str = "(other)";
/// The phases of a probed handshake, in the order of [`ProbePhases`].
pub const PROBE_PHASES: [&str; 5] = [
    "accept_queue",
    "until_first_call",
    "work",
    "waiting_for_peer",
    "total",
];

/// The shape of the windows.
#[derive(Debug, Clone)]
pub struct WindowOptions {
    /// The length of a window.
    pub length: Duration,
    /// The most series a window holds (the rest in one `(other)` series).
    pub max_series: usize,
    /// The SNIs named in a window's record (the most frequent; the rest in `(other)`).
    pub top_sni: usize,
    /// What splits a series further (`--group-by`).
    pub group_by: Option<GroupBy>,
}

impl Default for WindowOptions {
    fn default() -> Self {
        WindowOptions {
            length: Duration::from_secs(60),
            max_series: 64,
            top_sni: 10,
            group_by: None,
        }
    }
}

/// What a series is: which view, which side, which process and service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SeriesKey {
    /// `wire` (the capture) or `probes` (inside the processes).
    pub view: String,
    /// `server` or `client` (the wire's series are the server's).
    pub role: String,
    /// The process's name (`comm`); `(remote)` for a server not on this host; `(other)`
    /// beyond the series bound.
    pub process: String,
    /// The server's port (the wire); 0 for the probes.
    pub port: u16,
    /// Its group (`--group-by`), e.g. `exe=/srv/gw-v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What carried its handshakes (the wire): `quic` for the series of a window's
    /// `quic` part; TCP's leave it out.
    #[serde(default, skip_serializing_if = "Transport::is_tcp")]
    pub transport: Transport,
}

impl SeriesKey {
    /// The series in words: `wire server nginx port 443`, `probes server nginx`, `wire
    /// server serve port 443 over QUIC`, with its group in parentheses (`--group-by`).
    pub fn name(&self) -> String {
        let mut name = format!("{} {} {}", self.view, self.role, self.process);
        if self.port != 0 {
            name += &format!(" port {}", self.port);
        }
        if self.transport == Transport::Quic {
            name += " over QUIC";
        }
        if let Some(g) = &self.group {
            name += &format!(" ({g})");
        }
        name
    }
}

/// Percentiles of one phase in one window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseQuantiles {
    /// Handshakes with this phase.
    pub count: u64,
    /// ns.
    pub p50_ns: u64,
    /// ns.
    pub p90_ns: u64,
    /// ns.
    pub p95_ns: u64,
    /// ns.
    pub p99_ns: u64,
}

impl From<Quantiles> for PhaseQuantiles {
    fn from(q: Quantiles) -> PhaseQuantiles {
        PhaseQuantiles {
            count: q.count,
            p50_ns: q.p50_ns,
            p90_ns: q.p90_ns,
            p95_ns: q.p95_ns,
            p99_ns: q.p99_ns,
        }
    }
}

/// One series in one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesRecord {
    /// Which series.
    #[serde(flatten)]
    pub key: SeriesKey,
    /// Completed handshakes (the wire), or handshakes that succeeded (the probes).
    pub handshakes: u64,
    /// Handshakes per second over the window.
    pub per_second: f64,
    /// The busiest second's handshakes.
    pub peak_per_second: u64,
    /// Handshakes that failed, by reason (the probes: `error`, `abandoned`).
    pub failures: BTreeMap<String, u64>,
    /// Resumed (`resumed` or `0rtt`) ÷ completed handshakes (the wire).
    pub resumed_share: Option<f64>,
    /// Handshakes by kind (the wire).
    pub kinds: BTreeMap<String, u64>,
    /// By negotiated version (the wire).
    pub versions: BTreeMap<String, u64>,
    /// By key-exchange group (the wire).
    pub groups: BTreeMap<String, u64>,
    /// By SNI: the most frequent, the rest in `(other)` (the wire).
    pub sni: BTreeMap<String, u64>,
    /// Percentiles of each phase (the wire's phases, or the probes').
    pub phases: BTreeMap<String, PhaseQuantiles>,
    /// The headline phase's baseline this window was judged against (`--window` runs;
    /// `None` before the baseline judges, or for a window too thin to judge).
    pub baseline: Option<HeadlineBaseline>,
    /// The headline phase over the series' last 24 hours, this window included (`--window`
    /// runs; `None` for the `(other)` series and a window without a headline value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_baseline: Option<LongBaseline>,
    /// The headline phase's histogram (the wire's `first_app_byte`, the probes' `total`;
    /// [`phases_of`]`(view)[0]`), HDR V2 in base64: mergeable, so that the percentiles of
    /// a day (`observe report`'s P99.9) are exact. Absent when the headline has no
    /// value, and in streams written before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline_histogram: Option<LatencyHistogram>,
}

/// The baseline a series' window was judged against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineBaseline {
    /// The headline phase (`first_app_byte` for the wire, `total` for the probes).
    pub phase: String,
    /// The centre of its p50s, ns.
    pub p50_ns: u64,
    /// The centre of its p90s, ns.
    pub p90_ns: u64,
    /// Windows it was learnt from.
    pub windows: usize,
}

/// A series' headline phase over the last 24 hours, shown with each window (learnt by
/// [`super::long_baseline`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongBaseline {
    /// The headline phase.
    pub phase: String,
    /// Hours with a window (at most 24).
    pub hours: usize,
    /// Windows merged.
    pub windows: u64,
    /// Handshakes merged.
    pub handshakes: u64,
    /// ns.
    pub p50_ns: u64,
    /// ns.
    pub p90_ns: u64,
    /// ns.
    pub p95_ns: u64,
    /// ns.
    pub p99_ns: u64,
    /// ns.
    pub p999_ns: u64,
}

/// One closed window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// Always `window`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The window's start, ns since the Unix epoch.
    pub start_ns: u64,
    /// Its end (exclusive): the start of the next.
    pub end_ns: u64,
    /// Seconds it covers (less than the length for the first and last of a run).
    pub seconds: f64,
    /// Captured connections that failed before completing a handshake, by reason (they
    /// carry no process, so they are counted here and not per series).
    pub wire_failures: BTreeMap<String, u64>,
    /// Handshakes that arrived after their window had closed (counted in this one).
    pub late: u64,
    /// Each series seen in the window, in key order.
    pub series: Vec<SeriesRecord>,
    /// The machine's CPU pressure from the previous window's close to this one's: the
    /// share of the time in which some task waited for a CPU (Linux PSI); absent without
    /// PSI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure: Option<f64>,
    /// QUIC's handshakes and failures in the window, apart from TCP's (absent when none
    /// was seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicWindow>,
}

/// A window's QUIC part: what [`WindowRecord`]'s `wire_failures` and `series` are for
/// TCP (the wire's series only: the probes read TLS over TCP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuicWindow {
    /// QUIC connections that failed before completing a handshake, by reason.
    pub wire_failures: BTreeMap<String, u64>,
    /// Each QUIC series seen in the window, in key order (`transport` `quic`; judged by
    /// the baselines as TCP's are, each against its own).
    pub series: Vec<SeriesRecord>,
}

/// Histograms of one phase set.
#[derive(Debug, Default)]
struct PhaseHists(BTreeMap<&'static str, LatencyHistogram>);

impl PhaseHists {
    fn record(&mut self, phase: &'static str, ns: Option<u64>) {
        if let Some(ns) = ns {
            // A value the histogram cannot hold is left out (counted nowhere else:
            // HDR holds up to hours at this precision).
            let _ = self.0.entry(phase).or_default().record_ns(ns);
        }
    }

    fn quantiles(&self) -> BTreeMap<String, PhaseQuantiles> {
        self.0
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(k, h)| ((*k).to_string(), PhaseQuantiles::from(h.quantiles())))
            .collect()
    }
}

#[derive(Debug, Default)]
struct SeriesAcc {
    handshakes: u64,
    resumed: u64,
    per_second: BTreeMap<u64, u64>,
    failures: BTreeMap<String, u64>,
    kinds: BTreeMap<String, u64>,
    versions: BTreeMap<String, u64>,
    groups: BTreeMap<String, u64>,
    sni: BTreeMap<String, u64>,
    phases: PhaseHists,
    /// Grouped series only: the headline phase's handshakes per second of the clock, and
    /// the sum of their values' natural logarithms.
    log_seconds: BTreeMap<u64, (u64, f64)>,
}

fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_string(), 1);
        }
    }
}

impl SeriesAcc {
    fn second(&mut self, at_ns: u64) {
        *self.per_second.entry(at_ns / 1_000_000_000).or_default() += 1;
    }

    /// A grouped series' headline value, in its second's batch.
    fn batch(&mut self, at_ns: u64, ns: Option<u64>) {
        if let Some(ns) = ns {
            let b = self.log_seconds.entry(at_ns / 1_000_000_000).or_default();
            b.0 += 1;
            b.1 += (ns.max(1) as f64).ln();
        }
    }

    fn record(self, key: SeriesKey, seconds: f64, top_sni: usize) -> SeriesRecord {
        let mut sni: Vec<(String, u64)> = self.sni.into_iter().collect();
        sni.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut named: BTreeMap<String, u64> = BTreeMap::new();
        for (i, (name, n)) in sni.into_iter().enumerate() {
            let row = if i < top_sni && name != OTHER {
                name
            } else {
                OTHER.to_string()
            };
            *named.entry(row).or_default() += n;
        }
        let wire = key.view == "wire";
        let headline_histogram = self
            .phases
            .0
            .get(phases_of(&key.view)[0])
            .filter(|h| !h.is_empty())
            .cloned();
        SeriesRecord {
            headline_histogram,
            handshakes: self.handshakes,
            per_second: if seconds > 0.0 {
                self.handshakes as f64 / seconds
            } else {
                0.0
            },
            peak_per_second: self.per_second.values().copied().max().unwrap_or(0),
            failures: self.failures,
            resumed_share: (wire && self.handshakes > 0)
                .then(|| self.resumed as f64 / self.handshakes as f64),
            kinds: self.kinds,
            versions: self.versions,
            groups: self.groups,
            sni: named,
            phases: self.phases.quantiles(),
            baseline: None,
            long_baseline: None,
            key,
        }
    }
}

/// The window being filled.
#[derive(Debug)]
struct Open {
    start_ns: u64,
    /// The first instant seen in it (the run's first window starts there).
    first_ns: u64,
    wire_failures: BTreeMap<String, u64>,
    late: u64,
    series: BTreeMap<SeriesKey, SeriesAcc>,
    /// QUIC's failures and series.
    quic_failures: BTreeMap<String, u64>,
    quic_series: BTreeMap<SeriesKey, SeriesAcc>,
    sni_tracked: usize,
}

impl Open {
    fn new(start_ns: u64, first_ns: u64) -> Open {
        Open {
            start_ns,
            first_ns,
            wire_failures: BTreeMap::new(),
            late: 0,
            series: BTreeMap::new(),
            quic_failures: BTreeMap::new(),
            quic_series: BTreeMap::new(),
            sni_tracked: 0,
        }
    }
}

/// The windows of a run: handshakes in, closed [`WindowRecord`]s out.
#[derive(Debug)]
pub struct Windows {
    opts: WindowOptions,
    length_ns: u64,
    open: Option<Open>,
    grouper: Option<Grouper>,
    /// The last closed window's headline histograms per grouped series (`--group-by`).
    headlines: Vec<Headline>,
}

/// A grouped series' headline phase in a closed window: what a canary is compared on.
#[derive(Debug, Clone)]
pub struct Headline {
    /// The series.
    pub key: SeriesKey,
    /// Its values.
    pub hist: LatencyHistogram,
    /// Per second of the clock: its handshakes, and the sum of the natural logarithms of
    /// their values (ns).
    pub log_seconds: BTreeMap<u64, (u64, f64)>,
}

/// `comm` from "comm (pid N)".
fn comm(process: &str) -> &str {
    process.split(" (pid ").next().unwrap_or(process)
}

impl Windows {
    /// No window open yet.
    pub fn new(opts: WindowOptions) -> Windows {
        let length_ns = u64::try_from(opts.length.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        Windows {
            grouper: opts.group_by.map(Grouper::new),
            opts,
            length_ns,
            open: None,
            headlines: Vec::new(),
        }
    }

    /// The open window (opened at `at_ns` when none is); `at_ns` before its start (a
    /// window already closed) counts as late.
    fn window(&mut self, at_ns: u64) -> &mut Open {
        let length = self.length_ns;
        let open = self
            .open
            .get_or_insert_with(|| Open::new(at_ns - at_ns % length, at_ns));
        if at_ns < open.start_ns {
            open.late += 1;
        }
        open
    }

    /// The accumulator of `key` in `series` (`(other)` beyond the bound).
    fn series(
        series: &mut BTreeMap<SeriesKey, SeriesAcc>,
        max_series: usize,
        mut key: SeriesKey,
    ) -> &mut SeriesAcc {
        if !series.contains_key(&key) && series.len() >= max_series {
            key.process = OTHER.to_string();
            key.port = 0;
            key.group = None;
        }
        series.entry(key).or_default()
    }

    /// A captured connection's outcome, over `transport` (QUIC's go to the window's
    /// `quic` part); `seen_ns`, for one without a start, when it was seen (a handshake
    /// counts at its start, ns since the Unix epoch).
    pub fn wire(&mut self, o: &Outcome, transport: Transport, seen_ns: u64) {
        let max_series = self.opts.max_series;
        match o {
            Outcome::Handshake(h) => {
                let at = h.start_ns.unwrap_or(seen_ns);
                let group = self.grouper.as_mut().map(|g| g.wire(h));
                let grouped = group.is_some();
                let open = self.window(at);
                let key = SeriesKey {
                    view: "wire".into(),
                    role: "server".into(),
                    process: h
                        .server_process
                        .as_deref()
                        .map_or("(remote)", comm)
                        .to_string(),
                    port: h.server.port(),
                    group,
                    transport,
                };
                let sni = h.sni.as_deref().unwrap_or("(none)");
                let track_sni = open.sni_tracked < MAX_SNI_TRACKED;
                let series = match transport {
                    Transport::Tcp => &mut open.series,
                    Transport::Quic => &mut open.quic_series,
                };
                let s = Self::series(series, max_series, key);
                s.handshakes += 1;
                s.second(at);
                if h.resumption.is_some() {
                    s.resumed += 1;
                }
                bump(&mut s.kinds, h.kind.name());
                bump(&mut s.versions, &super::tls::version_label(h.version));
                bump(
                    &mut s.groups,
                    &h.group
                        .map_or("none".into(), |g| super::tls::group_label(g).into_owned()),
                );
                let new_sni = !s.sni.contains_key(sni);
                if new_sni && !track_sni {
                    bump(&mut s.sni, OTHER);
                } else {
                    bump(&mut s.sni, sni);
                }
                for (name, v) in h.phases.named() {
                    s.phases.record(name, v);
                    if grouped && name == phases_of("wire")[0] {
                        s.batch(at, v);
                    }
                }
                if new_sni && track_sni {
                    open.sni_tracked += 1;
                }
            }
            Outcome::Failed(f) => {
                let open = self.window(seen_ns);
                let failures = match transport {
                    Transport::Tcp => &mut open.wire_failures,
                    Transport::Quic => &mut open.quic_failures,
                };
                bump(failures, f.reason());
            }
            Outcome::NotTls | Outcome::Unparsed | Outcome::Empty => {}
        }
    }

    /// A probed handshake; `offset`: CLOCK_REALTIME − CLOCK_MONOTONIC, ns.
    pub fn probe(&mut self, r: &ProbeRecord, offset: i128) {
        let at = u64::try_from(i128::from(r.instant_ns()) + offset).unwrap_or(0);
        let max_series = self.opts.max_series;
        let group = self.grouper.as_mut().map(|g| g.probe(r));
        let grouped = group.is_some();
        let open = self.window(at);
        let key = SeriesKey {
            view: "probes".into(),
            role: r.role.name().into(),
            process: r.comm.clone(),
            port: 0,
            group,
            transport: Default::default(),
        };
        let s = Self::series(&mut open.series, max_series, key);
        s.second(at);
        if r.result != HandshakeResult::Ok {
            bump(&mut s.failures, r.result.name());
            return;
        }
        s.handshakes += 1;
        let p = ProbePhases::of(r);
        for (name, v) in PROBE_PHASES.iter().zip(p.0) {
            s.phases.record(name, v);
            if grouped && *name == phases_of("probes")[0] {
                s.batch(at, v);
            }
        }
    }

    /// The window that closed by `now_ns` (the wall clock, ns since the Unix epoch), if
    /// any; the first call opens the run's first window.
    pub fn tick(&mut self, now_ns: u64) -> Option<WindowRecord> {
        let grace = u64::try_from(GRACE.as_nanos()).unwrap_or(u64::MAX);
        // The run's first window opens at its first tick, handshakes or not.
        let open = self.window(now_ns);
        let end = open.start_ns.saturating_add(self.length_ns);
        if now_ns < end.saturating_add(grace) {
            return None;
        }
        let closed = self.open.take()?;
        // The next window opens now, so that a quiet one is still a record (of nothing).
        let next = now_ns - now_ns % self.length_ns;
        self.open = Some(Open::new(next.max(end), next.max(end)));
        if let Some(g) = &mut self.grouper {
            g.forget();
        }
        Some(self.record(closed, end))
    }

    /// The open window, closed at `now_ns` (the end of the run): its record covers
    /// until then.
    pub fn finish(&mut self, now_ns: u64) -> Option<WindowRecord> {
        let open = self.open.take()?;
        let end = now_ns.clamp(open.start_ns, open.start_ns.saturating_add(self.length_ns));
        Some(self.record(open, end))
    }

    /// The headline phase's histogram of each grouped series of the window last closed
    /// (empty without `--group-by`): the samples a canary is compared on.
    pub fn take_headlines(&mut self) -> Vec<Headline> {
        std::mem::take(&mut self.headlines)
    }

    fn record(&mut self, open: Open, end_ns: u64) -> WindowRecord {
        self.headlines = open
            .series
            .iter()
            .chain(&open.quic_series)
            .filter(|(k, _)| k.group.is_some())
            .filter_map(|(k, acc)| {
                let h = acc.phases.0.get(phases_of(&k.view)[0])?;
                (!h.is_empty()).then(|| Headline {
                    key: k.clone(),
                    hist: h.clone(),
                    log_seconds: acc.log_seconds.clone(),
                })
            })
            .collect();
        let from = open.first_ns.max(open.start_ns);
        let seconds = end_ns.saturating_sub(from) as f64 / 1e9;
        let top_sni = self.opts.top_sni;
        let records = |series: BTreeMap<SeriesKey, SeriesAcc>| -> Vec<SeriesRecord> {
            series
                .into_iter()
                .map(|(k, acc)| acc.record(k, seconds, top_sni))
                .collect()
        };
        let quic =
            (!open.quic_series.is_empty() || !open.quic_failures.is_empty()).then(|| QuicWindow {
                wire_failures: open.quic_failures,
                series: records(open.quic_series),
            });
        WindowRecord {
            quic,
            cpu_pressure: None,
            kind: "window".into(),
            start_ns: open.start_ns,
            end_ns,
            seconds,
            wire_failures: open.wire_failures,
            late: open.late,
            series: records(open.series),
        }
    }
}

/// A probed handshake's phases, in [`PROBE_PHASES`]' order; `total` is the accept queue,
/// the wait until the first call and the span of the calls together.
#[derive(Debug, Clone, Copy)]
pub struct ProbePhases(pub [Option<u64>; 5]);

impl ProbePhases {
    /// The phases of `r`.
    pub fn of(r: &ProbeRecord) -> ProbePhases {
        let (queue, until) = (r.accept_queue_ns(), r.until_first_call_ns());
        let total = queue.unwrap_or(0) + until.unwrap_or(0) + r.span_ns();
        ProbePhases([queue, until, r.work(), r.waiting(), Some(total)])
    }
}

/// The phases a series' view has, the headline (the whole handshake) first.
pub fn phases_of(view: &str) -> &'static [&'static str] {
    const WIRE: [&str; 5] = [
        "first_app_byte",
        "connect",
        "server_think",
        "server_flight",
        "client_think",
    ];
    const PROBES: [&str; 5] = [
        "total",
        "accept_queue",
        "until_first_call",
        "work",
        "waiting_for_peer",
    ];
    if view == "wire" { &WIRE } else { &PROBES }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::timeline::{Handshake, HandshakeKind, Phases};

    const S: u64 = 1_000_000_000;

    impl Windows {
        fn wire_tcp(&mut self, o: &Outcome, seen_ns: u64) {
            self.wire(o, Transport::Tcp, seen_ns);
        }
    }

    fn handshake(start: u64, think_ms: u64, process: &str) -> Outcome {
        Outcome::Handshake(Box::new(Handshake {
            kind: HandshakeKind::Full,
            resumption: None,
            version: 0x0304,
            group: Some(0x1d),
            suite: 0x1301,
            sni: Some(format!("host{}", start % 3)),
            offer: Default::default(),
            client: "127.0.0.1:40000".parse().unwrap(),
            server: "127.0.0.1:443".parse().unwrap(),
            phases: Phases {
                server_think: Some(think_ms * 1_000_000),
                first_app_byte: Some(think_ms * 1_000_000 + 500_000),
                ..Phases::default()
            },
            server_flight_bytes: 3000,
            start_ns: Some(start),
            hrr: false,
            retry: false,
            transport: crate::observe::timeline::Transport::Tcp,
            client_process: None,
            server_process: Some(format!("{process} (pid 7)")),
        }))
    }

    #[test]
    fn a_window_closes_after_its_end_and_grace_with_its_quantiles() {
        let mut w = Windows::new(WindowOptions {
            length: Duration::from_secs(10),
            ..WindowOptions::default()
        });
        // 100 handshakes in [100 s, 110 s): think 1..=100 ms.
        for i in 0..100 {
            w.wire_tcp(&handshake(100 * S + i * S / 10, i + 1, "nginx"), 0);
        }
        assert!(w.tick(110 * S).is_none(), "closed before its grace");
        let r = w.tick(111 * S).unwrap();
        assert_eq!((r.start_ns, r.end_ns), (100 * S, 110 * S));
        assert_eq!(r.series.len(), 1);
        let s = &r.series[0];
        assert_eq!(s.key.process, "nginx");
        assert_eq!(s.key.port, 443);
        assert_eq!(s.handshakes, 100);
        assert!((s.per_second - 10.0).abs() < 1e-9, "{}", s.per_second);
        assert_eq!(s.peak_per_second, 10);
        let think = s.phases["server_think"];
        assert_eq!(think.count, 100);
        // HDR at 3 significant digits.
        assert!(
            (think.p50_ns as f64 / 50e6 - 1.0).abs() < 0.002,
            "{think:?}"
        );
        assert!(
            (think.p90_ns as f64 / 90e6 - 1.0).abs() < 0.002,
            "{think:?}"
        );
        assert_eq!(s.sni.values().sum::<u64>(), 100);
        // The headline's histogram, whole: it round-trips through JSON.
        let h = s.headline_histogram.as_ref().unwrap();
        assert_eq!(h.len(), 100);
        assert_eq!(h.quantiles().p90_ns, s.phases["first_app_byte"].p90_ns);
        let back: WindowRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        // A handshake of the closed window, arriving now, counts as late in the next.
        w.wire_tcp(&handshake(105 * S, 1, "nginx"), 0);
        let next = w.finish(115 * S).unwrap();
        assert_eq!(next.late, 1);
        assert_eq!(next.start_ns, 110 * S);
        assert_eq!(next.series[0].handshakes, 1);
    }

    #[test]
    fn series_and_snis_are_bounded() {
        let mut w = Windows::new(WindowOptions {
            length: Duration::from_secs(60),
            max_series: 2,
            top_sni: 1,
            group_by: None,
        });
        for p in ["a", "b", "c", "d"] {
            w.wire_tcp(&handshake(S, 1, p), 0);
        }
        let r = w.finish(2 * S).unwrap();
        let names: Vec<&str> = r.series.iter().map(|s| s.key.process.as_str()).collect();
        assert_eq!(names, ["(other)", "a", "b"]);
        assert_eq!(r.series[0].handshakes, 2);
        // One SNI named, the rest in (other).
        let mut w = Windows::new(WindowOptions {
            top_sni: 1,
            ..WindowOptions::default()
        });
        for i in 0..3 {
            w.wire_tcp(&handshake(S + i, 1, "a"), 0);
        }
        let r = w.finish(2 * S).unwrap();
        assert_eq!(r.series[0].sni.len(), 2, "{:?}", r.series[0].sni);
        assert_eq!(r.series[0].sni[OTHER], 2);
    }

    /// `--group-by port`: one series per port, labelled, and the closed window's headline
    /// histograms for the comparison (QUIC's beside TCP's); none without grouping.
    #[test]
    fn grouped_series_carry_their_label_and_headline_histograms() {
        let mut w = Windows::new(WindowOptions {
            length: Duration::from_secs(10),
            group_by: Some(GroupBy::Port),
            ..WindowOptions::default()
        });
        for i in 0..10 {
            w.wire_tcp(&handshake(100 * S + i, 1, "gw"), 0);
        }
        let Outcome::Handshake(mut h) = handshake(100 * S, 3, "gw") else {
            unreachable!()
        };
        h.server = "127.0.0.1:8444".parse().unwrap();
        w.wire_tcp(&Outcome::Handshake(h), 0);
        for i in 0..4 {
            w.wire(&handshake(100 * S + i, 7, "gw"), Transport::Quic, 0);
        }
        let r = w.tick(111 * S).unwrap();
        let groups: Vec<_> = r.series.iter().map(|s| s.key.group.as_deref()).collect();
        assert_eq!(groups, [Some("port=443"), Some("port=8444")]);
        let heads = w.take_headlines();
        // QUIC's grouped series too, for a comparison of their own.
        assert_eq!(heads.len(), 3);
        assert_eq!(
            (heads[2].key.transport, heads[2].key.group.as_deref()),
            (Transport::Quic, Some("port=443"))
        );
        assert_eq!(heads[2].hist.len(), 4);
        assert_eq!(heads[0].hist.len(), 10);
        // All ten in the 100th second; ln of 1.5 ms each.
        let (n, sum) = heads[0].log_seconds[&100];
        assert_eq!(n, 10);
        assert!((sum / 10.0 - 1.5e6f64.ln()).abs() < 1e-9, "{sum}");
        assert!(w.take_headlines().is_empty(), "taken");
        let json = serde_json::to_value(&r.series[1]).unwrap();
        assert_eq!(json["group"], "port=8444");
        let mut plain = Windows::new(WindowOptions::default());
        plain.wire_tcp(&handshake(100 * S, 1, "gw"), 0);
        let r = plain.finish(101 * S).unwrap();
        assert!(
            serde_json::to_value(&r.series[0])
                .unwrap()
                .get("group")
                .is_none()
        );
        assert!(plain.take_headlines().is_empty());
    }

    /// QUIC's handshakes and failures are the window's `quic` part, series of their own:
    /// TCP's series and failures are what they would be without them.
    #[test]
    fn quic_outcomes_are_a_part_of_their_own() {
        let mut w = Windows::new(WindowOptions::default());
        for i in 0..4 {
            w.wire(&handshake(S + i, 1, "gw"), Transport::Tcp, 0);
        }
        for i in 0..3 {
            w.wire(&handshake(S + i, 7, "gw"), Transport::Quic, 0);
        }
        w.wire(
            &Outcome::Failed(crate::observe::timeline::Failure::Incomplete),
            Transport::Quic,
            S,
        );
        let r = w.finish(2 * S).unwrap();
        assert_eq!(r.series.len(), 1);
        assert_eq!(r.series[0].handshakes, 4);
        // TCP's 1 ms alone (HDR at 3 significant digits), none of QUIC's 7 ms.
        let p99 = r.series[0].phases["server_think"].p99_ns;
        assert!((p99 as f64 / 1e6 - 1.0).abs() < 0.002, "{p99}");
        assert!(r.wire_failures.is_empty(), "{:?}", r.wire_failures);
        let q = r.quic.as_ref().unwrap();
        assert_eq!(q.series.len(), 1);
        // The same series but for its transport.
        assert_eq!(q.series[0].key.transport, Transport::Quic);
        assert_eq!(
            q.series[0].key,
            SeriesKey {
                transport: Transport::Quic,
                ..r.series[0].key.clone()
            }
        );
        assert_eq!(q.series[0].handshakes, 3);
        assert!(
            (q.series[0].phases["server_think"].p50_ns as f64 / 7e6 - 1.0).abs() < 0.002,
            "{:?}",
            q.series[0].phases
        );
        assert_eq!(q.wire_failures["incomplete"], 1);
        // It round-trips; a window without QUIC has no `quic` key at all.
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["quic"]["series"][0]["handshakes"], 3);
        assert_eq!(json["quic"]["series"][0]["transport"], "quic");
        assert!(json["series"][0].get("transport").is_none(), "{json}");
        let back: WindowRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        let mut tcp = Windows::new(WindowOptions::default());
        tcp.wire(&handshake(S, 1, "gw"), Transport::Tcp, 0);
        let json = serde_json::to_value(tcp.finish(2 * S).unwrap()).unwrap();
        assert!(json.get("quic").is_none(), "{json}");
    }
}
