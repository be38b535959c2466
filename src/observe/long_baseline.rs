//! The long baseline: each series' headline phase (the wire's `first_app_byte`, the
//! probes' `total`) over the last 24 hours — its P99.9 and p50/p90/p95/p99 over every
//! handshake of those hours — as a bounded summary, not every window kept.
//!
//! Per series, a ring of at most [`HOURS`] slots, one per hour of the wall clock (UTC,
//! `start_ns ÷ 1 h` of the windows), each the merge of its windows' headline histograms
//! (HDR, 3 significant digits, exact: [`SeriesRecord::headline_histogram`]) held encoded
//! (a few hundred bytes to a few KiB). A window joins the slot of its start's hour; slots
//! 24 hours or more older than the newest window are dropped, and a series with none
//! left is forgotten. At most [`MAX_SERIES`] series are kept (the one seen longest ago
//! is forgotten first). The summary shown with a window is over its series' slots after
//! it joined: the hours before the current one are merged once per hour and kept
//! (encoded), the current hour merged with them at each window. Memory: at most
//! [`MAX_SERIES`] × ([`HOURS`] + 1) encoded histograms.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::window::{LongBaseline, OTHER, SeriesKey, SeriesRecord, WindowRecord, phases_of};
use crate::stats::LatencyHistogram;

/// Hours a series' long baseline covers.
pub const HOURS: u64 = 24;
/// Series with a long baseline at once.
pub const MAX_SERIES: usize = 256;
const HOUR_NS: u64 = 3_600_000_000_000;

/// One hour of a series: its windows' headline histograms merged.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HourSlot {
    /// The hour: ns since the Unix epoch ÷ 1 h.
    pub hour: u64,
    /// Windows merged into it.
    pub windows: u64,
    /// Their headline histograms, merged (held encoded).
    pub histogram: LatencyHistogram,
}

#[derive(Debug, Default)]
struct Ring {
    slots: VecDeque<HourSlot>,
    /// The slots before hour `.0`, merged (encoded): valid while the newest hour is `.0`.
    past: Option<(u64, LatencyHistogram)>,
}

impl Ring {
    fn learn(&mut self, hour: u64, h: &LatencyHistogram) {
        match self.slots.iter_mut().find(|s| s.hour == hour) {
            Some(slot) => {
                // A value the merge cannot hold is left out, as a window leaves it out.
                let _ = slot.histogram.merge(h);
                slot.windows += 1;
            }
            None => {
                let mut histogram = h.clone();
                if histogram.compact().is_err() {
                    return;
                }
                let at = self.slots.partition_point(|s| s.hour < hour);
                self.slots.insert(
                    at,
                    HourSlot {
                        hour,
                        windows: 1,
                        histogram,
                    },
                );
                self.past = None;
            }
        }
    }

    /// Drops the slots 24 hours or more before `hour`.
    fn expire(&mut self, hour: u64) {
        let before = self.slots.len();
        self.slots.retain(|s| s.hour + HOURS > hour);
        if self.slots.len() != before {
            self.past = None;
        }
    }

    fn summary(&mut self, phase: &str) -> Option<LongBaseline> {
        let newest = self.slots.back()?.hour;
        if self.past.as_ref().is_none_or(|(h, _)| *h != newest) {
            let mut past = LatencyHistogram::new();
            for s in self.slots.iter().filter(|s| s.hour < newest) {
                let _ = past.merge(&s.histogram);
            }
            if past.compact().is_err() {
                return None;
            }
            self.past = Some((newest, past));
        }
        let mut all = LatencyHistogram::new();
        if let Some((_, past)) = &self.past {
            let _ = all.merge(past);
        }
        let _ = all.merge(&self.slots.back()?.histogram);
        if all.is_empty() {
            return None;
        }
        let q = all.quantiles();
        Some(LongBaseline {
            phase: phase.to_string(),
            hours: self.slots.len(),
            windows: self.slots.iter().map(|s| s.windows).sum(),
            handshakes: q.count,
            p50_ns: q.p50_ns,
            p90_ns: q.p90_ns,
            p95_ns: q.p95_ns,
            p99_ns: q.p99_ns,
            p999_ns: q.p999_ns,
        })
    }
}

/// Every series' long baseline.
#[derive(Debug, Default)]
pub struct LongBaselines {
    series: BTreeMap<SeriesKey, Ring>,
}

impl LongBaselines {
    /// Nothing learnt yet.
    pub fn new() -> LongBaselines {
        LongBaselines::default()
    }

    /// What [`LongBaselines::state`] kept, within the bounds (the newest 24 slots of the
    /// first [`MAX_SERIES`] series, in time order).
    pub fn restore(state: Vec<(SeriesKey, Vec<HourSlot>)>) -> LongBaselines {
        let mut b = LongBaselines::new();
        for (key, mut slots) in state.into_iter().take(MAX_SERIES) {
            slots.sort_by_key(|s| s.hour);
            slots.dedup_by_key(|s| s.hour);
            let skip = slots.len().saturating_sub(HOURS as usize);
            let mut ring = Ring::default();
            for mut s in slots.into_iter().skip(skip) {
                if s.histogram.compact().is_ok() {
                    ring.slots.push_back(s);
                }
            }
            if !ring.slots.is_empty() {
                b.series.insert(key, ring);
            }
        }
        b
    }

    /// What to keep across a restart.
    pub fn state(&self) -> Vec<(SeriesKey, Vec<HourSlot>)> {
        self.series
            .iter()
            .map(|(k, r)| (k.clone(), r.slots.iter().cloned().collect()))
            .collect()
    }

    /// Series held.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// True when no series is held.
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Learns from each series of `w` (its `quic` part's too) that has a headline histogram (the `(other)` series
    /// left out) and notes in it the summary of its last 24 hours; drops what is 24
    /// hours old.
    pub fn learn(&mut self, w: &mut WindowRecord) {
        let hour = w.start_ns / HOUR_NS;
        let quic = w.quic.iter_mut().flat_map(|q| q.series.iter_mut());
        for s in w.series.iter_mut().chain(quic) {
            s.long_baseline = self.learn_series(hour, s);
        }
        for ring in self.series.values_mut() {
            ring.expire(hour);
        }
        self.series.retain(|_, r| !r.slots.is_empty());
        while self.series.len() > MAX_SERIES {
            let oldest = self
                .series
                .iter()
                .min_by_key(|(_, r)| r.slots.back().map_or(0, |s| s.hour))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.series.remove(&k),
                None => break,
            };
        }
    }

    fn learn_series(&mut self, hour: u64, s: &SeriesRecord) -> Option<LongBaseline> {
        if s.key.process == OTHER {
            return None;
        }
        let h = s.headline_histogram.as_ref().filter(|h| !h.is_empty())?;
        let ring = self.series.entry(s.key.clone()).or_default();
        ring.learn(hour, h);
        ring.expire(hour);
        ring.summary(phases_of(&s.key.view)[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::window::PhaseQuantiles;

    const MS: u64 = 1_000_000;

    fn series(process: &str, values_ms: &[u64]) -> SeriesRecord {
        let mut h = LatencyHistogram::new();
        for v in values_ms {
            h.record_ns(v * MS).unwrap();
        }
        let q = PhaseQuantiles::from(h.quantiles());
        SeriesRecord {
            key: SeriesKey {
                view: "probes".into(),
                role: "server".into(),
                process: process.into(),
                port: 0,
                group: None,
                transport: Default::default(),
            },
            handshakes: values_ms.len() as u64,
            per_second: 1.0,
            peak_per_second: 1,
            failures: BTreeMap::new(),
            resumed_share: None,
            kinds: BTreeMap::new(),
            versions: BTreeMap::new(),
            groups: BTreeMap::new(),
            sni: BTreeMap::new(),
            phases: [("total".to_string(), q)].into_iter().collect(),
            baseline: None,
            long_baseline: None,
            headline_histogram: (!values_ms.is_empty()).then_some(h),
        }
    }

    fn window(start_ns: u64, series: Vec<SeriesRecord>) -> WindowRecord {
        WindowRecord {
            cpu_pressure: None,
            quic: None,
            kind: "window".into(),
            start_ns,
            end_ns: start_ns + 600_000 * MS,
            seconds: 600.0,
            wire_failures: BTreeMap::new(),
            late: 0,
            series,
        }
    }

    /// Within 0.1% (HDR's 3 significant digits).
    fn near(a: u64, b: u64) -> bool {
        a.abs_diff(b) * 1000 <= b
    }

    #[test]
    fn the_merge_over_hours_is_every_handshake_of_the_last_24() {
        let mut b = LongBaselines::new();
        // 30 hours, 6 windows an hour; hour k's handshakes are all k+1 ms, 100 a window.
        let mut last = None;
        for i in 0..30 * 6u64 {
            let hour = i / 6;
            let mut w = window(
                hour * HOUR_NS + (i % 6) * 600_000 * MS,
                vec![series("gw", &vec![hour + 1; 100])],
            );
            b.learn(&mut w);
            last = w.series[0].long_baseline.clone();
        }
        let l = last.unwrap();
        // Hours 6..=29 (values 7..=30 ms), each 600 handshakes.
        assert_eq!(l.phase, "total");
        assert_eq!(l.hours, 24);
        assert_eq!(l.windows, 24 * 6);
        assert_eq!(l.handshakes, 24 * 600);
        // The median of 7..=30 ms in equal parts: the 12th hour's value, 18 ms.
        assert!(near(l.p50_ns, 18 * MS), "{l:?}");
        assert!(near(l.p999_ns, 30 * MS), "{l:?}");
        assert!(near(l.p90_ns, 28 * MS), "{l:?}");
        // The same from the state, after a restart; the slots held encoded.
        let ring = &b.series.values().next().unwrap().slots;
        assert_eq!(ring.len(), 24);
        assert!(ring.iter().all(|s| s.histogram.heap_bytes() < 4096));
        let text = serde_json::to_string(&b.state()).unwrap();
        let mut again = LongBaselines::restore(serde_json::from_str(&text).unwrap());
        let mut w = window(29 * HOUR_NS + 3_000_000 * MS, vec![series("gw", &[30])]);
        again.learn(&mut w);
        let l2 = w.series[0].long_baseline.clone().unwrap();
        assert_eq!(l2.handshakes, 24 * 600 + 1);
        assert_eq!((l2.p90_ns, l2.p999_ns), (l.p90_ns, l.p999_ns));
    }

    #[test]
    fn series_and_hours_are_bounded_and_old_ones_forgotten() {
        let mut b = LongBaselines::new();
        for i in 0..(MAX_SERIES + 20) {
            // A minute apart: all within a day.
            let mut w = window(i as u64 * 60_000 * MS, vec![series(&format!("p{i}"), &[1])]);
            b.learn(&mut w);
            assert!(w.series[0].long_baseline.is_some());
        }
        assert_eq!(b.len(), MAX_SERIES);
        assert!(
            !b.series.keys().any(|k| k.process == "p0"),
            "the oldest forgotten"
        );
        // A day later, a window of one series: every other is 24 hours old.
        let mut w = window(100 * HOUR_NS, vec![series("p5", &[2])]);
        b.learn(&mut w);
        assert_eq!(b.len(), 1);
        let l = w.series[0].long_baseline.clone().unwrap();
        assert_eq!((l.hours, l.handshakes), (1, 1));
        // (other), and a series without a histogram, learn nothing.
        let mut w = window(100 * HOUR_NS, vec![series(OTHER, &[2]), series("q", &[])]);
        b.learn(&mut w);
        assert!(w.series.iter().all(|s| s.long_baseline.is_none()));
        assert_eq!(b.len(), 1);
        // A state beyond the bounds is cut to them.
        let slots: Vec<HourSlot> = (0..40)
            .map(|hour| HourSlot {
                hour,
                windows: 1,
                histogram: series("x", &[1]).headline_histogram.unwrap(),
            })
            .collect();
        let keys = (0..MAX_SERIES + 5).map(|i| series(&format!("s{i}"), &[]).key);
        let r = LongBaselines::restore(keys.map(|k| (k, slots.clone())).collect());
        assert_eq!(r.len(), MAX_SERIES);
        let ring = &r.series.values().next().unwrap().slots;
        assert_eq!(ring.len(), 24);
        assert_eq!(ring.front().unwrap().hour, 16);
    }
}
