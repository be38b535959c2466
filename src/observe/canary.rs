//! Canaries (`observe --group-by …`): in each closed window, every group of a view, role
//! and transport compared with the stable group on the headline phase (the wire: SYN →
//! first application byte, over QUIC the client's first Initial → its first application
//! packet; the probes: accept queue + until the first call + the calls' span). QUIC's
//! groups are compared with each other, never with TCP's.
//!
//! The samples are the seconds of the window, paired: for each second of the clock in
//! which both sides completed handshakes, the mean of the natural logarithms of their
//! headline phase on each side; the test is Student's paired t-test
//! ([`crate::stats::paired_t_test`]) of the per-second differences (canary − stable)
//! against zero. Why these, and not the lab's Welch test:
//! - logarithms, because latencies are skewed and multiplicative: the difference of mean
//!   logs is the ratio of geometric means, which a few slow handshakes do not dominate;
//! - seconds, not handshakes, because the handshakes of one window are not independent
//!   draws: they come in bursts of the machine's load. Welch on every handshake's log
//!   (tried first) found two identical copies "significantly" different in 2 of 7
//!   five-second windows in tests/canary.rs, p-values far smaller than chance gives;
//!   one second's mean absorbs a burst;
//! - paired, not Welch on the two sets of seconds (tried next), because the groups run
//!   side by side on the same machine: a second of stalls slows both, and unpaired those
//!   seconds swamped a canary 2× slower (the 95% interval ran from −24% to +386% on a
//!   2-core machine with builds running); the per-second difference takes out what both
//!   suffered alike;
//! - one window, not many: one is enough to decide, so the slower group is named in the
//!   window it appears; the alternative, each window's p95 as one value per side, needs
//!   a dozen windows before a test has any power and says nothing in the first.
//!
//! Two cautions keep the error rate stated: the p-values of one window's comparisons (a
//! view, role and group each against its stable group) are adjusted together by Holm's
//! method ([`crate::stats::holm`]), as the lab adjusts its recommendations, so a window
//! with no difference anywhere is significant with probability at most [`ALPHA`]; and a
//! comparison is significant only when, besides, the geometric means differ by at least
//! [`MIN_EFFECT`]. Two copies of one server are not exchangeable in practice: in
//! tests/canary.rs (a 2-core machine shared with builds, the load generators on it, so
//! the wire's headline holds their own think time) identical copies differed by 10–22%,
//! the same way in every window of a run, with tight intervals — real differences of
//! those processes' conditions (their place in the schedule, their core), which the test
//! rightly finds and which no one would roll back for. 25% is above what was seen.
//! Each window is its own test: over N windows of two exchangeable groups, at most about
//! [`ALPHA`] × N are expected significant; copies that differ systematically by more
//! than [`MIN_EFFECT`] are significant in every window, as they should be.
//!
//! The stable group is `--stable VALUE` (its label, `port=8443`, or its value, `8443`),
//! else the group with the most handshakes in the window. A side needs
//! [`CanaryOptions::min_handshakes`] handshakes, and the two [`MIN_SECONDS`] seconds in
//! common; a pair with fewer is not compared (no record).
//! `windows` counts the windows in a row, ending with this one, whose verdict was the
//! same (the same group significantly slower, or nothing significant).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::timeline::Transport;
use super::window::{Headline, WindowRecord, phases_of};
use crate::stats::LatencyHistogram;
use crate::stats::compare::format_p;

/// The error rate of one window's comparisons, together (after Holm's adjustment).
pub const ALPHA: f64 = 0.05;
/// The least difference of geometric means a significant comparison shows (0.25: 25%).
pub const MIN_EFFECT: f64 = 0.25;
/// The fewest seconds with handshakes on both sides a window needs for a comparison
/// (fewer pairs give the test next to no power: a partial window, a quiet group).
pub const MIN_SECONDS: usize = 5;

/// How groups are compared.
#[derive(Debug, Clone)]
pub struct CanaryOptions {
    /// The stable group's label or value (`--stable`); else the one with most handshakes.
    pub stable: Option<String>,
    /// Handshakes each side needs in a window to be compared.
    pub min_handshakes: u64,
}

impl Default for CanaryOptions {
    fn default() -> Self {
        CanaryOptions {
            stable: None,
            min_handshakes: 50,
        }
    }
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The group's label, e.g. `port=8443`.
    pub group: String,
    /// Its handshakes with the headline phase in the window.
    pub handshakes: u64,
    /// The headline's median, ns.
    pub p50_ns: u64,
    /// Its p95, ns.
    pub p95_ns: u64,
    /// Its geometric mean, ns.
    pub geomean_ns: f64,
}

/// One group compared with the stable one in one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanaryRecord {
    /// Always `canary`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The window's start, ns since the Unix epoch.
    pub start_ns: u64,
    /// Its end.
    pub end_ns: u64,
    /// `wire` or `probes`.
    pub view: String,
    /// `server` or `client`.
    pub role: String,
    /// What carried the handshakes compared (the wire): `quic` when both groups' are
    /// QUIC's, compared with each other and never with TCP's; TCP's leave it out.
    #[serde(default, skip_serializing_if = "Transport::is_tcp")]
    pub transport: Transport,
    /// The headline phase compared.
    pub phase: String,
    /// The stable group.
    pub stable: Side,
    /// The group compared with it.
    pub canary: Side,
    /// The ratio of the canary's seconds' geometric mean to the stable's, − 1 (0.38: 38%
    /// slower).
    pub change: f64,
    /// The 95% confidence interval of `change`.
    pub change_ci: [f64; 2],
    /// The canary's p95 ÷ the stable's − 1.
    pub p95_change: f64,
    /// The paired t-test's two-sided p, over the seconds.
    pub p: f64,
    /// Seconds of the window compared: those in which both sides completed handshakes
    /// (each one pair: the mean of its handshakes' logs on each side).
    pub seconds: usize,
    /// `p` adjusted by Holm's method over the window's comparisons.
    pub p_adjusted: f64,
    /// The window's comparisons (Holm's family).
    pub comparisons: usize,
    /// `p_adjusted` < `alpha` and |`change`| ≥ `min_effect`.
    pub significant: bool,
    /// The error rate.
    pub alpha: f64,
    /// The least change that counts.
    pub min_effect: f64,
    /// `canary` or `stable` when significant: the slower one.
    pub slower: Option<String>,
    /// Windows in a row, this one the last, with the same verdict.
    pub windows: u64,
}

/// One group's headline in a window, its series merged.
#[derive(Debug, Default)]
struct Merged {
    hist: LatencyHistogram,
    /// Second → (handshakes, the sum of the logs of their values).
    seconds: BTreeMap<u64, (u64, f64)>,
}

impl Merged {
    /// The samples: for each second in which both completed handshakes, `self`'s mean
    /// of the logs − `base`'s.
    fn paired(&self, base: &Merged) -> Vec<f64> {
        let mean = |(n, sum): (u64, f64)| (n > 0).then(|| sum / n as f64);
        self.seconds
            .iter()
            .filter_map(|(second, b)| {
                let a = base.seconds.get(second)?;
                Some(mean(*b)? - mean(*a)?)
            })
            .collect()
    }
}

/// A pair compared: view, role, transport, the stable group, the canary.
type Pair = (String, String, Transport, String, String);

/// The comparisons of a run, with each pair's verdicts in a row.
#[derive(Debug)]
pub struct Canaries {
    opts: CanaryOptions,
    /// (view, role, stable, canary) → (the last verdict, windows in a row with it).
    streaks: BTreeMap<Pair, (Option<String>, u64)>,
}

fn side(group: &str, h: &LatencyHistogram) -> Side {
    let q = h.quantiles();
    Side {
        group: group.to_string(),
        handshakes: q.count,
        p50_ns: q.p50_ns,
        p95_ns: q.p95_ns,
        geomean_ns: h.log_summary().map_or(0.0, |s| s.mean.exp()),
    }
}

impl Canaries {
    /// Nothing compared yet.
    pub fn new(opts: CanaryOptions) -> Canaries {
        Canaries {
            opts,
            streaks: BTreeMap::new(),
        }
    }

    fn is_stable(&self, label: &str) -> bool {
        self.opts.stable.as_deref().is_some_and(|s| {
            label == s || label.split_once('=').is_some_and(|(_, value)| value == s)
        })
    }

    /// The comparisons of a closed window, from the headline phase of each grouped
    /// series ([`super::window::Windows::take_headlines`]).
    pub fn compare(&mut self, window: &WindowRecord, headlines: &[Headline]) -> Vec<CanaryRecord> {
        // (view, role, transport) → group → the merged headline of its series.
        let mut groups: BTreeMap<(&str, &str, Transport), BTreeMap<&str, Merged>> = BTreeMap::new();
        for head in headlines {
            let Some(group) = head.key.group.as_deref() else {
                continue;
            };
            let merged = groups
                .entry((
                    head.key.view.as_str(),
                    head.key.role.as_str(),
                    head.key.transport,
                ))
                .or_default()
                .entry(group)
                .or_default();
            // A histogram that cannot be merged (beyond HDR's range) is left out.
            let _ = merged.hist.merge(&head.hist);
            for (second, (n, sum)) in &head.log_seconds {
                let b = merged.seconds.entry(*second).or_default();
                b.0 += n;
                b.1 += sum;
            }
        }
        let mut records = Vec::new();
        for ((view, role, transport), by_group) in &groups {
            let stable = by_group
                .iter()
                .filter(|(g, _)| self.opts.stable.is_none() || self.is_stable(g))
                .max_by(|a, b| {
                    a.1.hist
                        .len()
                        .cmp(&b.1.hist.len())
                        .then_with(|| b.0.cmp(a.0))
                });
            let Some((stable, base)) = stable else {
                continue;
            };
            for (group, m) in by_group.iter().filter(|(g, _)| *g != stable) {
                if base.hist.len() < self.opts.min_handshakes
                    || m.hist.len() < self.opts.min_handshakes
                {
                    continue;
                }
                let pairs = m.paired(base);
                if pairs.len() < MIN_SECONDS {
                    continue;
                }
                let Ok(d) = crate::stats::Summary::of(&pairs) else {
                    continue;
                };
                let Ok(w) = crate::stats::paired_t_test(&d, 0.95) else {
                    continue;
                };
                let (s, c) = (side(stable, &base.hist), side(group, &m.hist));
                records.push(CanaryRecord {
                    kind: "canary".into(),
                    start_ns: window.start_ns,
                    end_ns: window.end_ns,
                    view: (*view).to_string(),
                    role: (*role).to_string(),
                    transport: *transport,
                    phase: phases_of(view)[0].to_string(),
                    change: w.diff.exp() - 1.0,
                    change_ci: [w.ci[0].exp() - 1.0, w.ci[1].exp() - 1.0],
                    p95_change: if s.p95_ns > 0 {
                        c.p95_ns as f64 / s.p95_ns as f64 - 1.0
                    } else {
                        0.0
                    },
                    p: w.p,
                    seconds: pairs.len(),
                    p_adjusted: w.p,
                    comparisons: 0,
                    significant: false,
                    alpha: ALPHA,
                    min_effect: MIN_EFFECT,
                    slower: None,
                    windows: 0,
                    stable: s,
                    canary: c,
                });
            }
        }
        let p: Vec<f64> = records.iter().map(|r| r.p).collect();
        let adjusted = crate::stats::holm(&p);
        let mut streaks = BTreeMap::new();
        for (r, adj) in records.iter_mut().zip(adjusted) {
            r.p_adjusted = adj;
            r.comparisons = p.len();
            r.significant = adj < ALPHA && r.change.abs() >= MIN_EFFECT;
            r.slower = r
                .significant
                .then(|| if r.change > 0.0 { "canary" } else { "stable" }.to_string());
            let key = (
                r.view.clone(),
                r.role.clone(),
                r.transport,
                r.stable.group.clone(),
                r.canary.group.clone(),
            );
            // Pairs not compared in this window are forgotten: "in a row" is unbroken.
            let run = match self.streaks.remove(&key) {
                Some((last, n)) if last == r.slower => n + 1,
                _ => 1,
            };
            r.windows = run;
            streaks.insert(key, (r.slower.clone(), run));
        }
        self.streaks = streaks;
        records
    }
}

/// "port 8444" from "port=8444".
fn spoken(label: &str) -> String {
    label.replacen('=', " ", 1)
}

/// One sentence for a significant comparison: the slower group first, e.g. "canary (exe
/// /srv/gw-v2) p95 +38% vs stable (exe /srv/gw-v1), wire first_app_byte, geometric mean
/// +35%, p = 0.002, over 12 windows" (QUIC's: "wire first_app_byte over QUIC").
pub fn sentence(r: &CanaryRecord) -> String {
    let canary_slower = r.slower.as_deref() != Some("stable");
    let (slow, slow_side, fast, fast_side) = if canary_slower {
        ("canary", &r.canary, "stable", &r.stable)
    } else {
        ("stable", &r.stable, "canary", &r.canary)
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b - 1.0 } else { 0.0 };
    format!(
        "{slow} ({}) p95 {:+.0}% vs {fast} ({}), {} {}{}, geometric mean {:+.0}%, p = {}, over {} window{}",
        spoken(&slow_side.group),
        ratio(slow_side.p95_ns as f64, fast_side.p95_ns as f64) * 100.0,
        spoken(&fast_side.group),
        r.view,
        r.phase,
        if r.transport == Transport::Quic {
            " over QUIC"
        } else {
            ""
        },
        ratio(slow_side.geomean_ns, fast_side.geomean_ns) * 100.0,
        format_p(r.p_adjusted),
        r.windows,
        if r.windows == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::window::SeriesKey;

    fn key(group: &str, port: u16) -> SeriesKey {
        SeriesKey {
            view: "wire".into(),
            role: "server".into(),
            process: "gw".into(),
            port,
            group: Some(group.into()),
            transport: Default::default(),
        }
    }

    /// `n` handshakes of `group` over ten seconds around `ms` (a deterministic spread of
    /// ±30%), shifted by `seed` so two samples of the same centre differ.
    fn head(group: &str, n: u64, ms: f64, seed: u64) -> Headline {
        let port = group.rsplit('=').next().unwrap().parse().unwrap();
        let mut h = Headline {
            key: key(group, port),
            hist: LatencyHistogram::new(),
            log_seconds: BTreeMap::new(),
        };
        for i in 0..n {
            let u = ((i * 7919 + seed * 104_729) % 1000) as f64 / 1000.0;
            let ns = (ms * 1e6 * (0.7 + 0.6 * u)) as u64;
            h.hist.record_ns(ns).unwrap();
            let b = h.log_seconds.entry(i % 10).or_default();
            b.0 += 1;
            b.1 += (ns as f64).ln();
        }
        h
    }

    fn window() -> WindowRecord {
        WindowRecord {
            cpu_pressure: None,
            quic: None,
            kind: "window".into(),
            start_ns: 0,
            end_ns: 10_000_000_000,
            seconds: 10.0,
            wire_failures: BTreeMap::new(),
            late: 0,
            series: Vec::new(),
        }
    }

    #[test]
    fn the_slower_group_is_named_and_identical_ones_are_not() {
        let mut c = Canaries::new(CanaryOptions::default());
        for round in 1..=3u64 {
            // port=8443 has the most handshakes: stable. 8444 is 40% slower, 8445 the
            // same as the stable.
            let h = vec![
                head("port=8443", 400, 2.0, round),
                head("port=8444", 300, 2.8, round + 1),
                head("port=8445", 300, 2.0, round + 2),
            ];
            let r = c.compare(&window(), &h);
            assert_eq!(r.len(), 2, "{r:?}");
            assert!(
                r.iter()
                    .all(|r| r.comparisons == 2 && r.stable.group == "port=8443")
            );
            let slow = r.iter().find(|r| r.canary.group == "port=8444").unwrap();
            assert!(slow.significant, "{slow:?}");
            assert_eq!(slow.slower.as_deref(), Some("canary"));
            assert!((slow.change - 0.4).abs() < 0.05, "{slow:?}");
            assert!(slow.change_ci[0] < slow.change && slow.change < slow.change_ci[1]);
            assert!(slow.p_adjusted >= slow.p);
            assert_eq!(slow.windows, round);
            let same = r.iter().find(|r| r.canary.group == "port=8445").unwrap();
            assert!(!same.significant, "{same:?}");
            assert_eq!(same.slower, None);
            let s = sentence(slow);
            assert!(
                s.starts_with("canary (port 8444) p95 +4") && s.contains("vs stable (port 8443)"),
                "{s}"
            );
            assert!(
                s.ends_with(&format!(
                    "over {round} window{}",
                    if round == 1 { "" } else { "s" }
                )),
                "{s}"
            );
        }
    }

    #[test]
    fn stable_is_chosen_by_flag_and_small_sides_are_not_compared() {
        let mut c = Canaries::new(CanaryOptions {
            stable: Some("8444".into()),
            min_handshakes: 50,
        });
        let h = vec![
            head("port=8443", 400, 3.0, 1),
            head("port=8444", 100, 2.0, 2),
            head("port=8445", 20, 2.0, 3),
        ];
        let r = c.compare(&window(), &h);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].stable.group, "port=8444");
        assert_eq!(r[0].canary.group, "port=8443");
        assert_eq!(r[0].slower.as_deref(), Some("canary"));
        // The stable slower: named first.
        let mut c = Canaries::new(CanaryOptions {
            stable: Some("port=8443".into()),
            min_handshakes: 50,
        });
        let r = c.compare(&window(), &h);
        assert_eq!(r[0].slower.as_deref(), Some("stable"));
        assert!(
            sentence(&r[0]).starts_with("stable (port 8443) p95 +"),
            "{}",
            sentence(&r[0])
        );
        // A stable group absent from the window: nothing compared.
        let mut c = Canaries::new(CanaryOptions {
            stable: Some("9999".into()),
            min_handshakes: 50,
        });
        assert!(c.compare(&window(), &h).is_empty());
    }

    /// QUIC's groups are compared with each other, apart from TCP's: the QUIC canary 40%
    /// slower is named (over QUIC) while the same groups over TCP do not differ.
    #[test]
    fn quic_groups_are_compared_apart_from_tcps() {
        let mut c = Canaries::new(CanaryOptions::default());
        let quic = |group: &str, n: u64, ms: f64, seed: u64| {
            let mut h = head(group, n, ms, seed);
            h.key.transport = Transport::Quic;
            h
        };
        let h = vec![
            head("port=8443", 400, 2.0, 1),
            head("port=8444", 300, 2.0, 2),
            quic("port=8443", 400, 20.0, 3),
            quic("port=8444", 300, 28.0, 4),
        ];
        let r = c.compare(&window(), &h);
        assert_eq!(r.len(), 2, "{r:?}");
        let tcp = r.iter().find(|r| r.transport == Transport::Tcp).unwrap();
        assert!(!tcp.significant, "{tcp:?}");
        let q = r.iter().find(|r| r.transport == Transport::Quic).unwrap();
        assert!(q.significant, "{q:?}");
        assert!((q.change - 0.4).abs() < 0.05, "{q:?}");
        assert!(
            sentence(q).contains("wire first_app_byte over QUIC"),
            "{}",
            sentence(q)
        );
        let json = serde_json::to_value(q).unwrap();
        assert_eq!(json["transport"], "quic");
        assert!(
            serde_json::to_value(tcp)
                .unwrap()
                .get("transport")
                .is_none()
        );
    }

    /// A small difference, significant with so many handshakes, is below the least
    /// effect: not significant.
    #[test]
    fn a_tiny_difference_is_not_significant() {
        let mut c = Canaries::new(CanaryOptions::default());
        let h = vec![
            head("port=1", 20_000, 2.0, 1),
            head("port=2", 20_000, 2.06, 2),
        ];
        let r = c.compare(&window(), &h);
        assert!(r[0].p < 1e-6, "{r:?}");
        assert!(!r[0].significant, "{r:?}");
    }
}
