//! The pipeline's read loops, one per source: a capture file to its end, a live capture
//! and the probes until a duration or a stop, each feeding the [`Analyzer`] (or, probes
//! alone, the probes' own report) and ticking about once a second. Called by
//! [`super::pipeline::Pipeline::run`], which opens the sources and sinks around them.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{
    Analyzer, Limits, Observation, ObserveError, connections, decode, live, metrics, process,
    result, source, window,
};
use crate::probes::follow::Event;

/// Analyzes the capture file at `path` (pcap or pcapng). A file cut short in its last
/// frame is read up to there; a warning is logged. One cut short in its first frame is
/// an error: there is nothing to analyze.
pub fn file(
    path: &Path,
    ports: &[u16],
    limits: Limits,
    connections: Option<Arc<Mutex<connections::ConnectionLog>>>,
) -> Result<Observation, ObserveError> {
    let mut file = source::CaptureFile::open(path)?;
    let mut analyzer = Analyzer::new(
        vec![result::Source {
            kind: "pcap".into(),
            name: path.display().to_string(),
        }],
        ports.to_vec(),
        limits,
    );
    if let Some(log) = connections {
        analyzer.log_connections(log);
    }
    let mut frames: u64 = 0;
    let mut links: Vec<decode::Link> = Vec::new();
    let end = file.for_each(|ns, link, data, wire_len| {
        frames += 1;
        if !links.contains(&link) {
            links.push(link);
        }
        analyzer.frame(ns, link, data, wire_len)
    })?;
    // Cut short before its first whole frame: nothing was read, which is no analysis.
    if end == source::End::Truncated && frames == 0 {
        return Err(ObserveError::Corrupt {
            path: path.to_path_buf(),
            frame: 1,
            reason: "its record runs past the end of the file (the file is cut short or its \
                     length field is damaged)"
                .into(),
        });
    }
    if end == source::End::Truncated {
        tracing::warn!(
            "{}: the capture ends in the middle of a frame; read up to there",
            path.display()
        );
    }
    let o = analyzer.finish();
    // Frames, and not one TCP segment or UDP datagram among them: say so rather than
    // print a result of nothing as if there had been nothing to see.
    let datagrams = o
        .quic
        .as_ref()
        .and_then(|q| q.packets.quic)
        .map_or(0, |q| q.datagrams + q.other_ports);
    if o.packets.frames > 0 && o.packets.tcp_segments + o.packets.other_ports + datagrams == 0 {
        let names: Vec<&str> = links.iter().map(|l| l.name()).collect();
        tracing::warn!(
            "{}: none of its {} frames ({}) held a TCP segment or a QUIC packet that tlsperf \
             could read",
            path.display(),
            o.packets.frames,
            names.join(", ")
        );
    }
    Ok(o)
}

/// The longest a live capture spends, after its stop, reading the frames captured
/// before it.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// What to observe live and how (the interface and ports are the capture's).
#[derive(Debug, Clone)]
pub struct Live {
    /// Limits.
    pub limits: Limits,
    /// Stop after this long (else at `stop`).
    pub duration: Option<Duration>,
    /// Count outcomes in these metrics too.
    pub metrics: Option<Arc<metrics::ObserveMetrics>>,
    /// Every completed handshake written here too, one line each.
    pub connections: Option<Arc<Mutex<connections::ConnectionLog>>>,
    /// Every handshake counted in the open window too.
    pub windows: Option<Arc<Mutex<window::Windows>>>,
}

/// Observes a live capture (opened with [`live::LiveCapture::open`]) until `duration`
/// has passed or `stop` is set, calling `tick` about once a second (from this thread)
/// with the observation so far when `snapshots` asks for it (a copy of it is made for
/// each call), attributing local endpoints through `processes` when given. The result
/// says `interrupted` when `stop` ended it.
pub fn live(
    mut cap: live::LiveCapture,
    opts: &Live,
    mut probes: Option<&mut crate::probes::Session>,
    processes: Option<process::Processes>,
    stop: &AtomicBool,
    snapshots: bool,
    tick: &mut dyn FnMut(Option<&Observation>, &[Event]),
) -> Result<Observation, ObserveError> {
    let link = cap.link();
    let interface = cap.interface().to_string();
    let mut analyzer = Analyzer::new(
        vec![result::Source {
            kind: "live".into(),
            name: interface.clone(),
        }],
        cap.ports().to_vec(),
        opts.limits,
    );
    if let Some(p) = processes {
        analyzer.attribute_processes(p);
    }
    if let Some(m) = &opts.metrics {
        analyzer.export(Arc::clone(m));
    }
    if let Some(log) = &opts.connections {
        analyzer.log_connections(Arc::clone(log));
    }
    if let Some(index) = probes.as_ref().and_then(|p| p.wire_index()) {
        analyzer.join_probes(index);
    }
    if let Some(kernel) = cap.take_kernel_drop() {
        analyzer.drop_in_kernel(Box::new(kernel));
    }
    if let Some(w) = &opts.windows {
        analyzer.windows(Arc::clone(w));
    }
    if let Some(p) = probes.as_deref_mut() {
        listen(p, opts.metrics.as_ref(), opts.windows.as_ref());
    }
    let started = Instant::now();
    let mut ticker = live::Ticker::new();
    let mut interrupted = false;
    loop {
        let frame = cap.next_frame().map_err(|source| ObserveError::Live {
            interface: interface.clone(),
            source,
        })?;
        match frame {
            Some((ns, data, wire_len)) => analyzer.frame(ns, link, data, wire_len),
            None => {
                analyzer.sweep(live::now_ns());
                analyzer.keep_up_processes();
            }
        }
        if let Some(p) = probes.as_deref_mut() {
            p.follow_now();
        }
        let stopping = stop.load(Ordering::Relaxed);
        interrupted |= stopping;
        if stopping || opts.duration.is_some_and(|d| started.elapsed() >= d) {
            // The probes' handshakes in progress end while the capture still reads.
            match probes.as_deref_mut() {
                Some(p) => {
                    if p.drained() {
                        break;
                    }
                    p.drain();
                }
                None => break,
            }
        }
        if ticker.due() {
            analyzer.keep_up_processes();
            analyzer.set_kernel_drops(cap.drops());
            analyzer.set_kernel_filtered(cap.kernel_filtered().0);
            let mut report = None;
            let mut events = Vec::new();
            if let Some(p) = probes.as_deref_mut() {
                p.poll(false);
                events = p.take_events();
                // The whole report (every row's histograms copied) only for a view that
                // shows it; an agent needs the counts.
                if let Some(m) = &opts.metrics {
                    m.probe_lost(&p.counts());
                }
                if snapshots {
                    report = Some(p.snapshot());
                }
            }
            if snapshots {
                let mut snapshot = analyzer.snapshot();
                snapshot.probes = report;
                tick(Some(&snapshot), &events);
            } else {
                tick(None, &events);
            }
        }
    }
    // What the kernel captured before the stop and queued for us is part of the
    // observation (bounded: a few seconds of frames at most).
    let end = Instant::now();
    while end.elapsed() < DRAIN_LIMIT {
        let Some((ns, data, wire_len)) = cap.next_queued() else {
            break;
        };
        analyzer.frame(ns, link, data, wire_len);
    }
    analyzer.set_kernel_drops(cap.drops());
    analyzer.set_kernel_filtered(cap.kernel_filtered().0);
    let mut o = analyzer.finish();
    o.interrupted = interrupted;
    o.kernel_filter = Some(cap.kernel_filter().to_string());
    Ok(o)
}

/// Counts every probed handshake in `metrics` and the open window of `windows` too.
fn listen(
    probes: &mut crate::probes::Session,
    metrics: Option<&Arc<metrics::ObserveMetrics>>,
    windows: Option<&Arc<Mutex<window::Windows>>>,
) {
    if metrics.is_none() && windows.is_none() {
        return;
    }
    let (m, w) = (metrics.cloned(), windows.cloned());
    let offset = crate::probes::join::clock_offset();
    probes.on_record(crate::probes::Listener(Box::new(move |r| {
        if let Some(m) = &m {
            m.probe(r);
        }
        if let Some(w) = &w {
            let mut w = crate::sync::lock(w);
            w.probe(r, offset);
        }
    })));
}

/// Observes inside processes only (`--probes` without a capture) until `duration` has
/// passed or `stop` is set, calling `tick` about once a second. The session is the
/// caller's to finish; the observation has no packets.
pub fn probes(
    probes: &mut crate::probes::Session,
    name: String,
    opts: &Live,
    stop: &AtomicBool,
    snapshots: bool,
    tick: &mut dyn FnMut(Option<&Observation>, &[Event]),
) -> Observation {
    let (duration, metrics) = (opts.duration, &opts.metrics);
    listen(probes, metrics.as_ref(), opts.windows.as_ref());
    let mut o = Observation::new(
        vec![result::Source {
            kind: "probes".into(),
            name,
        }],
        Vec::new(),
    );
    let started = Instant::now();
    o.started_ns = Some(live::now_ns());
    let mut ticker = live::Ticker::new();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        probes.follow_now();
        if stop.load(Ordering::Relaxed) {
            o.interrupted = true;
            break;
        }
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if ticker.due() {
            probes.poll(false);
            let events = probes.take_events();
            if let Some(m) = &metrics {
                m.probe_lost(&probes.counts());
            }
            o.duration_s = started.elapsed().as_secs_f64();
            // The whole report (every row's histograms copied) only for a view that shows
            // it; the run's own report is the session's at its end.
            if snapshots {
                o.probes = Some(probes.snapshot());
                tick(Some(&o), &events);
            } else {
                tick(None, &events);
            }
        }
    }
    o.duration_s = started.elapsed().as_secs_f64();
    o
}
