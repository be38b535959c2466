//! A run's [`LoadResult`], assembled from its tallies merged into one and its other
//! figures ([`RunFigures`]: the measured window, the slots' samples, the generator's and
//! the server's CPU), with the rates and warnings derived from them.

use std::time::Duration;

use super::options::{LoadGenOptions, body_len};
use super::result::{
    ConnSample, Dist, GeneratorCpu, Goodput, Handshakes, LoadResult, Requests, ServerUsage,
};
use super::tally::{INTERVAL, Tally};
use super::usage;
use crate::stats::LatencyHistogram;

/// What a run measured besides its tallies, on its way into a [`LoadResult`].
pub(super) struct RunFigures {
    /// The target, as the result names it.
    pub(super) target: String,
    /// When the measured window began (wall clock).
    pub(super) started: time::OffsetDateTime,
    /// The measured window's length.
    pub(super) wall: Duration,
    pub(super) interrupted: bool,
    pub(super) gave_up: bool,
    /// Open loop: sends the schedule had due that never went out.
    pub(super) unsent: u64,
    pub(super) connections: Vec<ConnSample>,
    /// The generator's CPU time over the window.
    pub(super) cpu: Duration,
    /// The pacer's estimated spin, seconds.
    pub(super) pacing_spin: Option<f64>,
    /// The generator threads' run-queue wait, seconds.
    pub(super) runqueue_wait: Option<f64>,
    pub(super) server: Option<ServerUsage>,
}

/// The result of a run: its tallies merged into `total`, and its other figures.
pub(super) fn load_result(total: Tally, run: RunFigures, opts: &LoadGenOptions) -> LoadResult {
    let handshakes: u64 = total.kinds.values().sum();
    let counts = opts
        .verdicts
        .as_ref()
        .map(|v| v.counts())
        .unwrap_or_default();
    let dist = |h: &LatencyHistogram| (!h.is_empty()).then(|| Dist::of(h.clone()));
    let mut result = LoadResult {
        link_counters: None,
        schema: <LoadResult as crate::doc::Document>::SCHEMA.into(),
        target: run.target,
        transport: String::from(if opts.http3 { "quic" } else { "tcp" }),
        started: run
            .started
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        duration_s: run.wall.as_secs_f64(),
        machines: 1,
        interrupted: run.interrupted,
        gave_up: run.gave_up,
        options: opts.echo.clone(),
        requests: Requests {
            attempted: total.completed + total.failed,
            completed: total.completed,
            failed: total.failed,
            per_second: 0.0,
            unsent: run.unsent,
        },
        handshakes: Handshakes {
            total: handshakes,
            kinds: total
                .kinds
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            resumption_rate: 0.0,
            per_second: 0.0,
            chains_verified: counts.verified,
            chains_from_cache: counts.cached,
            early_data: total
                .early
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            quic: total
                .quic
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        },
        latency: Dist::of(total.latency.clone()),
        latency_corrected: opts.rate.and_then(|_| dist(&total.corrected)),
        send_lateness: opts.rate.and_then(|_| dist(&total.lateness)),
        pacing_lateness: opts.rate.and_then(|_| dist(&total.pacing)),
        client_wakeup: dist(&total.wakeup),
        handshake_full: dist(&total.hs_full),
        handshake_resumed: dist(&total.hs_resumed),
        phases: total
            .phases
            .iter()
            .map(|(p, h)| (p.name().to_string(), Dist::of(h.clone())))
            .collect(),
        status: total
            .status
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        errors: total
            .errors
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        warmup_errors: total
            .warm_errors
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        error_examples: total
            .examples
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        body_bytes: total.body_bytes,
        upload_bytes: total.completed.saturating_mul(body_len(opts) as u64),
        goodput: Goodput::default(),
        interval_ms: INTERVAL.as_millis() as u64,
        interval_requests: total.intervals.clone(),
        connections: run.connections,
        generator: GeneratorCpu {
            threads: opts.threads,
            cpu_seconds: run.cpu.as_secs_f64(),
            utilization: 0.0,
            cpus_allowed: usage::cpus_allowed(None).map(|c| c.len() as u64),
            cpu_limit: usage::cgroup_cpu_limit(),
            cpu_us_per_request: None,
            cpu_us_per_handshake: None,
            saturated: false,
            pacing_spin_s: run.pacing_spin.map(|s| s.min(run.cpu.as_secs_f64())),
            runqueue_wait_s: run.runqueue_wait,
        },
        server: run.server,
        warnings: Vec::new(),
    };
    result.finish_rates();
    result.generator.saturated = result.generator.utilization >= 0.9;
    result
}
