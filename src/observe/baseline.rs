//! Baselines and anomalies: each series' short baseline, learnt from its closed windows,
//! and the anomaly events raised when a window leaves it — naming the phase that moved.
//!
//! For every series, phase and quantile (p50, p90) the baseline is the last
//! [`AnomalyOptions::history`] windows' values that had at least
//! [`AnomalyOptions::min_handshakes`] handshakes (an hour of one-minute windows by
//! default), summarised by their median (the centre) and their median absolute deviation
//! × 1.4826 (the spread, a standard deviation's robust estimate). A window is *above*
//! when its headline phase's quantile (the wire: SYN → first application byte; the
//! probes: accept queue + until the first call + the calls' span) exceeds the centre by
//! more than the largest of `margin` × centre, `floor`, and `spreads` × spread. After
//! [`AnomalyOptions::consecutive`] windows above in a row an anomaly starts; after as many
//! not above, it ends. The phase that moved is the component (connect, server_think,
//! server_flight, client_think; accept_queue, until_first_call, work, waiting_for_peer)
//! whose quantile rose most above its own baseline; its share is that rise ÷ the
//! headline's. Every window joins the baseline (the median keeps a short anomaly out of
//! it; a lasting change becomes the new normal after `history` ÷ 2 windows). Memory: at
//! most `history` values per series, phase and quantile.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::long_baseline::{HourSlot, LongBaselines};
use super::window::{HeadlineBaseline, SeriesKey, SeriesRecord, WindowRecord, phases_of};

/// When a window is an anomaly.
#[derive(Debug, Clone)]
pub struct AnomalyOptions {
    /// How far above the centre, as a fraction of it (0.5: +50%).
    pub margin: f64,
    /// How far above the centre at least.
    pub floor: Duration,
    /// How far above the centre at least, in spreads.
    pub spreads: f64,
    /// Windows above (or back within) in a row before an anomaly starts (or ends).
    pub consecutive: usize,
    /// Handshakes a window needs in a series to be judged and learnt from.
    pub min_handshakes: u64,
    /// Windows the baseline remembers.
    pub history: usize,
    /// Windows the baseline needs before it judges.
    pub warmup: usize,
}

impl Default for AnomalyOptions {
    fn default() -> Self {
        AnomalyOptions {
            margin: 0.5,
            floor: Duration::from_millis(5),
            spreads: 5.0,
            consecutive: 2,
            min_handshakes: 50,
            history: 60,
            warmup: 5,
        }
    }
}

/// The quantiles judged.
const QUANTILES: [&str; 2] = ["p50", "p90"];

fn quantile(s: &SeriesRecord, phase: &str, q: &str) -> Option<u64> {
    let p = s.phases.get(phase)?;
    Some(if q == "p50" { p.p50_ns } else { p.p90_ns })
}

/// One phase's move, in an anomaly event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseMove {
    /// The phase.
    pub phase: String,
    /// Its baseline's centre, ns.
    pub baseline_ns: u64,
    /// The window's value, ns.
    pub now_ns: u64,
}

/// An anomaly's start or end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnomalyEvent {
    /// Always `anomaly`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `start` or `end`.
    pub state: String,
    /// The series.
    pub series: SeriesKey,
    /// `p50` or `p90`.
    pub quantile: String,
    /// The headline phase judged.
    pub phase: String,
    /// Its baseline's centre, ns.
    pub baseline_ns: u64,
    /// The threshold it was judged against, ns.
    pub threshold_ns: u64,
    /// The headline's value in the window that decided, ns.
    pub now_ns: u64,
    /// When the anomaly began: the start of its first window above, ns since the Unix
    /// epoch.
    pub since_ns: u64,
    /// When this event was decided: the end of the window that decided it.
    pub at_ns: u64,
    /// The component that rose most above its baseline (at `start`), and its share of
    /// the headline's rise (0–1, more when others fell).
    pub moved: Option<String>,
    /// `moved`'s share of the rise.
    pub share: Option<f64>,
    /// Every component, baseline and now.
    pub phases: Vec<PhaseMove>,
    /// The machine's CPU pressure in the window that decided (see
    /// [`super::window::WindowRecord::cpu_pressure`]); absent without PSI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure: Option<f64>,
    /// Its median over the windows before (at most the last hour's); absent before any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_before: Option<f64>,
}

/// The baseline of one series, phase and quantile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Track {
    values: VecDeque<u64>,
}

impl Track {
    fn push(&mut self, v: u64, keep: usize) {
        if self.values.len() >= keep {
            self.values.pop_front();
        }
        self.values.push_back(v);
    }

    /// Median and 1.4826 × median absolute deviation.
    fn centre_spread(&self) -> Option<(u64, u64)> {
        if self.values.is_empty() {
            return None;
        }
        let mut v: Vec<u64> = self.values.iter().copied().collect();
        let centre = median(&mut v);
        let mut dev: Vec<u64> = v.iter().map(|x| x.abs_diff(centre)).collect();
        let mad = median(&mut dev);
        Some((centre, (mad as f64 * 1.4826) as u64))
    }
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] / 2) + (v[n / 2] / 2) + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2
    }
}

/// An anomaly's progress for one series and quantile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Judgement {
    /// Windows above in a row (before a start), or not above (during one).
    run: usize,
    /// The start of the first window of the current run.
    run_since_ns: u64,
    /// The anomaly in progress: when it began.
    active_since_ns: Option<u64>,
}

/// What is kept across restarts (`--state FILE`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BaselineState {
    /// [`STATE_SCHEMA`] (or [`STATE_SCHEMA_V2`] or [`STATE_SCHEMA_V1`] when read from an
    /// older file).
    pub schema: String,
    tracks: Vec<(SeriesKey, String, String, Track)>,
    judgements: Vec<(SeriesKey, String, Judgement)>,
    /// The long baselines' hours (absent in version 1: learnt anew).
    #[serde(default)]
    long: Vec<(SeriesKey, Vec<HourSlot>)>,
}

/// The schema of [`BaselineState`]: version 2 added the long baselines, version 3 QUIC's
/// series (their keys' `transport`: a tlsperf that reads version 2 would take them for
/// TCP's, so it must refuse the file rather than mix them).
pub const STATE_SCHEMA: &str = "tlsperf-observe-baseline/3";
/// The schema of the state files written before QUIC's series were judged: TCP's
/// alone; read as they are.
pub const STATE_SCHEMA_V2: &str = "tlsperf-observe-baseline/2";
/// The schema of the state files written before the long baselines; still read (the
/// short baselines kept, the long ones learnt anew).
pub const STATE_SCHEMA_V1: &str = "tlsperf-observe-baseline/1";

/// Every series' baselines, and the anomalies in progress.
#[derive(Debug)]
pub struct Baselines {
    opts: AnomalyOptions,
    tracks: BTreeMap<(SeriesKey, &'static str, &'static str), Track>,
    judgements: BTreeMap<(SeriesKey, &'static str), Judgement>,
    long: LongBaselines,
}

impl Baselines {
    /// Nothing learnt yet.
    pub fn new(opts: AnomalyOptions) -> Baselines {
        Baselines {
            opts,
            tracks: BTreeMap::new(),
            judgements: BTreeMap::new(),
            long: LongBaselines::new(),
        }
    }

    /// Baselines learnt before (`--state FILE`); tracks of unknown phases are dropped.
    pub fn restore(opts: AnomalyOptions, state: BaselineState) -> Baselines {
        let mut b = Baselines::new(opts);
        b.long = LongBaselines::restore(state.long);
        let known = |view: &str, name: &str| phases_of(view).iter().find(|p| **p == name).copied();
        let q = |name: &str| QUANTILES.iter().find(|q| **q == name).copied();
        for (key, phase, quant, track) in state.tracks {
            if let (Some(p), Some(qq)) = (known(&key.view, &phase), q(&quant)) {
                let mut track = track;
                while track.values.len() > b.opts.history {
                    track.values.pop_front();
                }
                b.tracks.insert((key, p, qq), track);
            }
        }
        for (key, quant, j) in state.judgements {
            if let Some(qq) = q(&quant) {
                b.judgements.insert((key, qq), j);
            }
        }
        b
    }

    /// What to keep across a restart.
    pub fn state(&self) -> BaselineState {
        BaselineState {
            schema: STATE_SCHEMA.into(),
            tracks: self
                .tracks
                .iter()
                .map(|((k, p, q), t)| (k.clone(), (*p).to_string(), (*q).to_string(), t.clone()))
                .collect(),
            judgements: self
                .judgements
                .iter()
                .map(|((k, q), j)| (k.clone(), (*q).to_string(), j.clone()))
                .collect(),
            long: self.long.state(),
        }
    }

    /// Judges `w` against the baselines (noting in each series the baseline it was
    /// judged against, and its long baseline), then learns from it: the anomalies that
    /// started or ended with it. TCP's series and the `quic` part's alike, each against
    /// its own baseline (their keys differ by `transport`).
    pub fn judge(&mut self, w: &mut WindowRecord) -> Vec<AnomalyEvent> {
        let span = (w.start_ns, w.end_ns);
        let mut events = self.judge_series(&mut w.series, span);
        if let Some(q) = &mut w.quic {
            events.extend(self.judge_series(&mut q.series, span));
        }
        self.long.learn(w);
        events
    }

    /// [`Baselines::judge`] for one list of a window's series; `span`: the window's
    /// start and end, ns.
    fn judge_series(&mut self, series: &mut [SeriesRecord], span: (u64, u64)) -> Vec<AnomalyEvent> {
        let mut events = Vec::new();
        for record in series.iter_mut() {
            let s = &*record;
            if s.key.process == super::window::OTHER {
                continue;
            }
            let phases = phases_of(&s.key.view);
            let headline = phases[0];
            let enough = s
                .phases
                .get(headline)
                .is_some_and(|p| p.count >= self.opts.min_handshakes);
            if !enough {
                continue;
            }
            for q in QUANTILES {
                if let Some(e) = self.judge_one(span, s, phases, q) {
                    events.push(e);
                }
            }
            let centre = |q| self.centre_spread(&s.key, headline, q);
            let baseline = match (centre("p50"), centre("p90")) {
                (Some((p50, _, n)), Some((p90, _, _))) if n >= self.opts.warmup => {
                    Some(HeadlineBaseline {
                        phase: headline.to_string(),
                        p50_ns: p50,
                        p90_ns: p90,
                        windows: n,
                    })
                }
                _ => None,
            };
            for phase in phases {
                for q in QUANTILES {
                    if let Some(v) = quantile(s, phase, q) {
                        self.tracks
                            .entry((s.key.clone(), phase, q))
                            .or_default()
                            .push(v, self.opts.history);
                    }
                }
            }
            record.baseline = baseline;
        }
        events
    }

    fn centre_spread(
        &self,
        key: &SeriesKey,
        phase: &'static str,
        q: &'static str,
    ) -> Option<(u64, u64, usize)> {
        let t = self.tracks.get(&(key.clone(), phase, q))?;
        let (c, s) = t.centre_spread()?;
        Some((c, s, t.values.len()))
    }

    fn judge_one(
        &mut self,
        (start_ns, end_ns): (u64, u64),
        s: &SeriesRecord,
        phases: &'static [&'static str],
        q: &'static str,
    ) -> Option<AnomalyEvent> {
        let headline = phases[0];
        let now = quantile(s, headline, q)?;
        let (centre, spread, n) = self.centre_spread(&s.key, headline, q)?;
        if n < self.opts.warmup {
            return None;
        }
        let floor = u64::try_from(self.opts.floor.as_nanos()).unwrap_or(u64::MAX);
        let allowance = ((centre as f64 * self.opts.margin) as u64)
            .max(floor)
            .max((spread as f64 * self.opts.spreads) as u64);
        let threshold = centre.saturating_add(allowance);
        let above = now > threshold;
        let moves: Vec<PhaseMove> = phases[1..]
            .iter()
            .filter_map(|p| {
                let (c, _, _) = self.centre_spread(&s.key, p, q)?;
                Some(PhaseMove {
                    phase: (*p).to_string(),
                    baseline_ns: c,
                    now_ns: quantile(s, p, q)?,
                })
            })
            .collect();
        let consecutive = self.opts.consecutive.max(1);
        let j = self.judgements.entry((s.key.clone(), q)).or_default();
        let state = match j.active_since_ns {
            None if above => {
                if j.run == 0 {
                    j.run_since_ns = start_ns;
                }
                j.run += 1;
                (j.run >= consecutive).then(|| {
                    j.active_since_ns = Some(j.run_since_ns);
                    j.run = 0;
                    "start"
                })
            }
            None => {
                j.run = 0;
                None
            }
            Some(_) if !above => {
                j.run += 1;
                (j.run >= consecutive).then(|| {
                    j.run = 0;
                    "end"
                })
            }
            Some(_) => {
                j.run = 0;
                None
            }
        }?;
        let since = j.active_since_ns.unwrap_or(start_ns);
        if state == "end" {
            j.active_since_ns = None;
        }
        let rise = now.saturating_sub(centre);
        let top = moves
            .iter()
            .map(|m| (m, m.now_ns as i128 - m.baseline_ns as i128))
            .max_by_key(|(_, d)| *d)
            .filter(|(_, d)| *d > 0 && state == "start");
        Some(AnomalyEvent {
            cpu_pressure: None,
            cpu_pressure_before: None,
            kind: "anomaly".into(),
            state: state.into(),
            series: s.key.clone(),
            quantile: q.into(),
            phase: headline.into(),
            baseline_ns: centre,
            threshold_ns: threshold,
            now_ns: now,
            since_ns: since,
            at_ns: end_ns,
            moved: top.map(|(m, _)| m.phase.clone()),
            share: top.map(|(_, d)| {
                if rise > 0 {
                    d as f64 / rise as f64
                } else {
                    0.0
                }
            }),
            phases: moves,
        })
    }
}

/// How much more of the time tasks waited for a CPU in an anomaly's window than before
/// for its sentence to say the machine was short of CPU.
pub const SHORT_OF_CPU: f64 = 0.25;

/// An event in one line of words (stderr).
pub fn sentence(e: &AnomalyEvent) -> String {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let who = e.series.name();
    let since =
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + Duration::from_nanos(e.since_ns));
    if e.state == "end" {
        return format!(
            "anomaly over: {who} {} {} back to {} (baseline {}), since {since}",
            e.quantile,
            e.phase,
            ms(e.now_ns),
            ms(e.baseline_ns)
        );
    }
    let rise = e.now_ns.saturating_sub(e.baseline_ns);
    let place = match (&e.moved, e.share) {
        (Some(p), Some(share)) if share >= 0.8 => format!(", all of it in {p}"),
        (Some(p), Some(share)) => format!(", {:.0}% of it in {p}", share * 100.0),
        _ => String::new(),
    };
    let pressure = match (e.cpu_pressure, e.cpu_pressure_before) {
        (Some(now), Some(before)) if now >= before + SHORT_OF_CPU => format!(
            "; the machine was short of CPU: tasks waited for one {:.0}% of the time (before: {:.0}%)",
            now * 100.0,
            before * 100.0
        ),
        (Some(now), Some(before)) => format!(
            "; CPU pressure {:.0}% (before: {:.0}%)",
            now * 100.0,
            before * 100.0
        ),
        _ => String::new(),
    };
    format!(
        "anomaly: {who} {} {} {} against a baseline of {} (+{}) since {since}{place}{pressure}",
        e.quantile,
        e.phase,
        ms(e.now_ns),
        ms(e.baseline_ns),
        ms(rise)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::window::PhaseQuantiles;

    const MS: u64 = 1_000_000;

    fn window(i: u64, think_ms: u64, connect_ms: u64) -> WindowRecord {
        let q = |ns: u64| PhaseQuantiles {
            count: 100,
            p50_ns: ns,
            p90_ns: ns + ns / 10,
            p95_ns: ns,
            p99_ns: ns,
        };
        let mut phases = BTreeMap::new();
        phases.insert("server_think".into(), q(think_ms * MS));
        phases.insert("connect".into(), q(connect_ms * MS));
        phases.insert("first_app_byte".into(), q((think_ms + connect_ms + 1) * MS));
        WindowRecord {
            cpu_pressure: None,
            quic: None,
            kind: "window".into(),
            start_ns: i * 10_000 * MS,
            end_ns: (i + 1) * 10_000 * MS,
            seconds: 10.0,
            wire_failures: BTreeMap::new(),
            late: 0,
            series: vec![SeriesRecord {
                key: SeriesKey {
                    view: "wire".into(),
                    role: "server".into(),
                    process: "gw".into(),
                    port: 443,
                    group: None,
                    transport: Default::default(),
                },
                handshakes: 100,
                per_second: 10.0,
                peak_per_second: 10,
                failures: BTreeMap::new(),
                resumed_share: Some(0.0),
                kinds: BTreeMap::new(),
                versions: BTreeMap::new(),
                groups: BTreeMap::new(),
                sni: BTreeMap::new(),
                phases,
                baseline: None,
                long_baseline: None,
                headline_histogram: None,
            }],
        }
    }

    #[test]
    fn a_lasting_rise_starts_an_anomaly_that_names_its_phase_and_ends() {
        let mut b = Baselines::new(AnomalyOptions::default());
        let mut events = Vec::new();
        // Ten ordinary windows (think 1–2 ms), then five with 20 ms more think, then
        // ordinary again.
        for i in 0..10 {
            let mut w = window(i, 1 + i % 2, 1);
            events.extend(b.judge(&mut w));
            // Judged against a baseline once five windows were learnt.
            let base = &w.series[0].baseline;
            assert_eq!(base.is_some(), i >= 5, "{i}: {base:?}");
            if let Some(base) = base {
                assert_eq!(base.phase, "first_app_byte");
                assert_eq!(base.windows, i as usize);
                assert!((3 * MS..=4 * MS).contains(&base.p50_ns), "{base:?}");
            }
        }
        assert!(events.is_empty(), "{events:?}");
        for i in 10..15 {
            events.extend(b.judge(&mut window(i, 21, 1)));
        }
        let starts: Vec<&AnomalyEvent> = events.iter().filter(|e| e.state == "start").collect();
        assert_eq!(starts.len(), 2, "p50 and p90: {events:?}");
        let e = starts[0];
        assert_eq!(e.since_ns, 10 * 10_000 * MS, "from the first window above");
        assert_eq!(e.at_ns, 12 * 10_000 * MS, "decided by the second");
        assert_eq!(e.moved.as_deref(), Some("server_think"));
        assert!(e.share.unwrap() > 0.9, "{e:?}");
        let line = sentence(e);
        assert!(line.contains("all of it in server_think"), "{line}");
        assert!(!line.contains("CPU"), "{line}");
        // With the machine's CPU pressure: said, and called a shortage past the margin.
        let mut busy = e.clone();
        (busy.cpu_pressure, busy.cpu_pressure_before) = (Some(0.83), Some(0.12));
        let line = sentence(&busy);
        assert!(
            line.ends_with(
                "the machine was short of CPU: tasks waited for one 83% of the time (before: 12%)"
            ),
            "{line}"
        );
        busy.cpu_pressure = Some(0.20);
        assert!(sentence(&busy).ends_with("; CPU pressure 20% (before: 12%)"));
        events.clear();
        for i in 15..18 {
            events.extend(b.judge(&mut window(i, 1, 1)));
        }
        let ends: Vec<&AnomalyEvent> = events.iter().filter(|e| e.state == "end").collect();
        assert_eq!(ends.len(), 2, "{events:?}");
        assert_eq!(ends[0].at_ns, 17 * 10_000 * MS);
    }

    #[test]
    fn one_window_above_or_a_thin_one_is_no_anomaly_and_state_survives_a_restart() {
        let mut b = Baselines::new(AnomalyOptions::default());
        let mut events = Vec::new();
        for i in 0..10 {
            events.extend(b.judge(&mut window(i, 1, 1)));
        }
        events.extend(b.judge(&mut window(10, 30, 1)));
        events.extend(b.judge(&mut window(11, 1, 1)));
        let mut thin = window(12, 30, 1);
        for p in thin.series[0].phases.values_mut() {
            p.count = 10;
        }
        events.extend(b.judge(&mut thin.clone()));
        events.extend(b.judge(&mut thin.clone()));
        assert!(events.is_empty(), "{events:?}");
        // Saved and restored: judged at once, no relearning.
        let text = serde_json::to_string(&b.state()).unwrap();
        let state: BaselineState = serde_json::from_str(&text).unwrap();
        let mut b = Baselines::restore(AnomalyOptions::default(), state);
        events.extend(b.judge(&mut window(13, 30, 1)));
        events.extend(b.judge(&mut window(14, 30, 1)));
        assert_eq!(events.len(), 2, "{events:?}");
    }

    #[test]
    fn a_version_1_state_keeps_its_short_baselines_and_learns_the_long_one() {
        let mut b = Baselines::new(AnomalyOptions::default());
        for i in 0..10 {
            b.judge(&mut window(i, 1, 1));
        }
        let mut v1 = serde_json::to_value(b.state()).unwrap();
        assert_eq!(v1["schema"], STATE_SCHEMA);
        v1["schema"] = STATE_SCHEMA_V1.into();
        v1.as_object_mut().unwrap().remove("long");
        let state: BaselineState = serde_json::from_value(v1).unwrap();
        assert!(state.long.is_empty());
        let mut b = Baselines::restore(AnomalyOptions::default(), state);
        let mut w = window(10, 30, 1);
        b.judge(&mut w);
        assert_eq!(w.series[0].baseline.as_ref().unwrap().windows, 10);
    }

    /// `window(i, think_ms, 1)` with a QUIC part: the same series over QUIC (same view,
    /// process and port), its think `quic_think_ms`.
    fn with_quic(i: u64, think_ms: u64, quic_think_ms: u64) -> WindowRecord {
        let mut w = window(i, think_ms, 1);
        let mut q = window(i, quic_think_ms, 0).series.remove(0);
        q.phases.remove("connect");
        q.key.transport = crate::observe::timeline::Transport::Quic;
        w.quic = Some(crate::observe::window::QuicWindow {
            wire_failures: BTreeMap::new(),
            series: vec![q],
        });
        w
    }

    #[test]
    fn quic_series_are_judged_apart_from_tcps_and_survive_a_restart() {
        let mut b = Baselines::new(AnomalyOptions::default());
        let mut events = Vec::new();
        // TCP at 3 ms, QUIC at 31 ms: each its own baseline (one shared by the same
        // view, process and port would sit between the two, or flap).
        for i in 0..10 {
            let mut w = with_quic(i, 1, 30);
            events.extend(b.judge(&mut w));
            if i >= 5 {
                let tcp = w.series[0].baseline.as_ref().unwrap();
                let quic = w.quic.as_ref().unwrap().series[0]
                    .baseline
                    .as_ref()
                    .unwrap();
                assert_eq!(tcp.p50_ns, 3 * MS, "{tcp:?}");
                assert_eq!(quic.p50_ns, 31 * MS, "{quic:?}");
                assert!(w.quic.as_ref().unwrap().series[0].long_baseline.is_none());
            }
        }
        assert!(events.is_empty(), "{events:?}");
        // Kept across a restart, apart.
        let text = serde_json::to_string(&b.state()).unwrap();
        assert!(text.contains(r#""transport":"quic""#), "{text}");
        let mut b = Baselines::restore(
            AnomalyOptions::default(),
            serde_json::from_str(&text).unwrap(),
        );
        // QUIC's think rises by 40 ms, TCP's does not: only QUIC's series starts one.
        for i in 10..12 {
            events.extend(b.judge(&mut with_quic(i, 1, 70)));
        }
        let starts: Vec<&AnomalyEvent> = events.iter().filter(|e| e.state == "start").collect();
        assert_eq!(starts.len(), 2, "p50 and p90: {events:?}");
        for e in &starts {
            assert_eq!(
                e.series.transport,
                crate::observe::timeline::Transport::Quic
            );
            assert_eq!(e.moved.as_deref(), Some("server_think"));
        }
        let line = sentence(starts[0]);
        assert!(
            line.starts_with(
                "anomaly: wire server gw port 443 over QUIC p50 first_app_byte 71.0 ms"
            ),
            "{line}"
        );
        let json = serde_json::to_value(starts[0]).unwrap();
        assert_eq!(json["series"]["transport"], "quic", "{json}");
        // TCP's keys are written as before QUIC was observed: no `transport`.
        let mut w = window(12, 1, 1);
        b.judge(&mut w);
        let json = serde_json::to_value(&w).unwrap();
        assert!(json["series"][0].get("transport").is_none(), "{json}");
    }

    #[test]
    fn a_version_2_state_is_read_as_tcps_series() {
        let mut b = Baselines::new(AnomalyOptions::default());
        for i in 0..10 {
            b.judge(&mut window(i, 1, 1));
        }
        let mut v2 = serde_json::to_value(b.state()).unwrap();
        v2["schema"] = STATE_SCHEMA_V2.into();
        // Version 2 wrote no `transport`: every key was TCP's.
        assert!(!v2.to_string().contains("transport"), "{v2}");
        let state: BaselineState = serde_json::from_value(v2).unwrap();
        let mut b = Baselines::restore(AnomalyOptions::default(), state);
        let mut w = window(10, 1, 1);
        b.judge(&mut w);
        assert_eq!(w.series[0].baseline.as_ref().unwrap().windows, 10);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3, 1, 2]), 2);
        assert_eq!(median(&mut [4, 1, 2, 3]), 2);
        assert_eq!(median(&mut [u64::MAX, u64::MAX]), u64::MAX);
    }
}
