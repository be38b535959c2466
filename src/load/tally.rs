//! What the connection slots measure: each request's observations ([`Obs`], gathered
//! without a lock) applied to a [`Tally`] in one lock — HDR histograms of the latencies,
//! the handshakes and their phases, counts by kind, completions per [`INTERVAL`] — one
//! tally per shard (a few per worker thread), merged into one at the run's end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::client::{ConnectError, Phase};
use crate::stats::LatencyHistogram;

/// Width of the per-interval throughput samples.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// What one connection slot measured.
pub(super) struct Tally {
    pub(super) latency: LatencyHistogram,
    pub(super) corrected: LatencyHistogram,
    /// Open loop: actual send instant − intended one, for every request sent.
    pub(super) lateness: LatencyHistogram,
    /// Open loop: actual send instant − the later of the intended one and the moment the
    /// slot was free to wait for it: the generator's own delay alone (timer wake-up,
    /// scheduling), without the wait for a slot still busy with its previous request.
    pub(super) pacing: LatencyHistogram,
    /// tlsperf's own wake-up delay at each response's last read (kernel-stamped ones).
    pub(super) wakeup: LatencyHistogram,
    pub(super) hs_full: LatencyHistogram,
    pub(super) hs_resumed: LatencyHistogram,
    pub(super) phases: BTreeMap<Phase, LatencyHistogram>,
    pub(super) kinds: BTreeMap<&'static str, u64>,
    pub(super) early: BTreeMap<&'static str, u64>,
    /// Over QUIC: handshakes after a Retry (`retry`), Version Negotiation packets that
    /// ended an attempt (`version-negotiation`).
    pub(super) quic: BTreeMap<&'static str, u64>,
    pub(super) status: BTreeMap<u16, u64>,
    pub(super) errors: BTreeMap<&'static str, u64>,
    /// Failures of requests due in the warm-up, by kind: in no figure, but what a run
    /// that gave up there failed on.
    pub(super) warm_errors: BTreeMap<&'static str, u64>,
    pub(super) examples: BTreeMap<&'static str, String>,
    pub(super) completed: u64,
    pub(super) failed: u64,
    pub(super) body_bytes: u64,
    pub(super) intervals: Vec<u64>,
    pub(super) last_done: Option<Instant>,
}

impl Tally {
    pub(super) fn new() -> Self {
        Tally {
            latency: LatencyHistogram::new(),
            corrected: LatencyHistogram::new(),
            lateness: LatencyHistogram::new(),
            pacing: LatencyHistogram::new(),
            wakeup: LatencyHistogram::new(),
            hs_full: LatencyHistogram::new(),
            hs_resumed: LatencyHistogram::new(),
            phases: BTreeMap::new(),
            kinds: BTreeMap::new(),
            early: BTreeMap::new(),
            quic: BTreeMap::new(),
            status: BTreeMap::new(),
            errors: BTreeMap::new(),
            warm_errors: BTreeMap::new(),
            examples: BTreeMap::new(),
            completed: 0,
            failed: 0,
            body_bytes: 0,
            intervals: Vec::new(),
            last_done: None,
        }
    }

    fn phase(&mut self, p: Phase, d: Duration) {
        // Values are bounded by the request timeout, well inside the histogram's range.
        let _ = self.phases.entry(p).or_default().record(d);
    }

    pub(super) fn error(&mut self, e: &ConnectError) {
        self.failed += 1;
        *self.errors.entry(e.kind()).or_default() += 1;
        // quinn ends an attempt on a Version Negotiation without our version: counted
        // with the handshakes' QUIC events too.
        if matches!(e, ConnectError::QuicVersion) {
            *self.quic.entry("version-negotiation").or_default() += 1;
        }
        self.example(e);
    }

    /// A request due in the warm-up failed: counted apart (see `warm_errors`).
    pub(super) fn warm_error(&mut self, e: &ConnectError) {
        *self.warm_errors.entry(e.kind()).or_default() += 1;
        self.example(e);
    }

    fn example(&mut self, e: &ConnectError) {
        let kind = e.kind();
        self.examples.entry(kind).or_insert_with(|| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(s) = src {
                msg += &format!(": {s}");
                src = s.source();
            }
            msg
        });
    }
}

pub(super) fn merge_tally(total: &mut Tally, t: &Tally) {
    let _ = total.latency.merge(&t.latency);
    let _ = total.corrected.merge(&t.corrected);
    let _ = total.lateness.merge(&t.lateness);
    let _ = total.pacing.merge(&t.pacing);
    let _ = total.wakeup.merge(&t.wakeup);
    let _ = total.hs_full.merge(&t.hs_full);
    let _ = total.hs_resumed.merge(&t.hs_resumed);
    for (p, h) in &t.phases {
        let _ = total.phases.entry(*p).or_default().merge(h);
    }
    for (k, v) in &t.kinds {
        *total.kinds.entry(k).or_default() += v;
    }
    for (k, v) in &t.early {
        *total.early.entry(k).or_default() += v;
    }
    for (k, v) in &t.quic {
        *total.quic.entry(k).or_default() += v;
    }
    for (k, v) in &t.status {
        *total.status.entry(*k).or_default() += v;
    }
    for (k, v) in &t.errors {
        *total.errors.entry(k).or_default() += v;
    }
    for (k, v) in &t.warm_errors {
        *total.warm_errors.entry(k).or_default() += v;
    }
    for (k, v) in &t.examples {
        total.examples.entry(k).or_insert_with(|| v.clone());
    }
    total.completed += t.completed;
    total.failed += t.failed;
    total.body_bytes += t.body_bytes;
    if total.intervals.len() < t.intervals.len() {
        total.intervals.resize(t.intervals.len(), 0);
    }
    for (a, b) in total.intervals.iter_mut().zip(&t.intervals) {
        *a += b;
    }
}

/// What one request observed, applied to a shared tally in one lock.
#[derive(Default)]
pub(super) struct Obs {
    pub(super) phases: Vec<(Phase, Duration)>,
    pub(super) handshake: Option<(&'static str, bool, Duration)>,
    /// With --early-data, what became of a new connection's request: sent as 0-RTT data
    /// and "accepted" or "rejected", or "not-sent" (no session allowing it).
    pub(super) early: Option<&'static str>,
    /// Over QUIC, the new connection's handshake followed a Retry.
    pub(super) retried: bool,
    pub(super) status: Option<u16>,
    pub(super) body_bytes: u64,
    /// How long after the kernel stamped the response's last byte our read returned it.
    pub(super) wakeup: Option<Duration>,
}

impl Obs {
    pub(super) fn phase(&mut self, p: Phase, d: Duration) {
        self.phases.push((p, d));
    }

    /// Empty again for the next request (the phases keep their allocation).
    pub(super) fn clear(&mut self) {
        self.phases.clear();
        self.handshake = None;
        self.early = None;
        self.retried = false;
        self.status = None;
        self.body_bytes = 0;
        self.wakeup = None;
    }
}

impl Tally {
    pub(super) fn apply(&mut self, obs: &Obs) {
        for &(p, d) in &obs.phases {
            self.phase(p, d);
        }
        if let Some((kind, resumed, tls)) = obs.handshake {
            let _ = if resumed {
                self.hs_resumed.record(tls)
            } else {
                self.hs_full.record(tls)
            };
            *self.kinds.entry(kind).or_default() += 1;
        }
        if let Some(e) = obs.early {
            *self.early.entry(e).or_default() += 1;
        }
        if obs.retried {
            *self.quic.entry("retry").or_default() += 1;
        }
        if let Some(status) = obs.status {
            *self.status.entry(status).or_default() += 1;
        }
        self.body_bytes += obs.body_bytes;
        if let Some(w) = obs.wakeup {
            let _ = self.wakeup.record(w);
        }
    }
}
