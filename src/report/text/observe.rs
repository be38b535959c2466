//! `tlsperf observe` (and `merge` of observations) as text: counts, phase percentiles per
//! handshake kind, breakdowns, failures.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use crate::observe::result::{Dist, Observation, PHASES, Row};
use crate::observe::window::{WindowRecord, phases_of};
use crate::probes::report::{PROBE_PHASES, ProbeReport, ProbeRow, RecordPhases};

use super::{BAD, BOLD, render, right_align, styled, table};

/// The kinds in report order (`all` first).
const KINDS: [&str; 5] = ["all", "full", "full-hrr", "resumed", "0rtt"];

/// The most rows shown per breakdown (the JSON has them all).
const SHOWN_ROWS: usize = 10;

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// One row of a phase table: group, phase, n, p50, p90, p99, max (ms).
fn quantile_row(group: &str, phase: &str, d: &Dist) -> Vec<String> {
    let q = &d.quantiles;
    vec![
        group.to_string(),
        phase.to_string(),
        q.count.to_string(),
        ms(q.p50_ns),
        ms(q.p90_ns),
        ms(q.p99_ns),
        ms(q.max_ns),
    ]
}

/// The last closed window (`--window`), a row per series: its handshakes and rate, and
/// its headline phase's p50 and p90 beside the baseline they were judged against.
pub fn last_window(w: &WindowRecord) -> String {
    let clock = |ns: u64| {
        let t = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_nanos(ns));
        let t = t.to_string();
        t.get(11..19).unwrap_or(&t).to_string()
    };
    let mut t = table(&[
        "series",
        "phase",
        "n",
        "/s",
        "p50",
        "base p50",
        "p90",
        "base p90",
        "24h p90",
        "24h p99.9",
    ]);
    for s in &w.series {
        let Some(phase) = phases_of(&s.key.view).first() else {
            continue;
        };
        let q = s.phases.get(*phase);
        let base = s.baseline.as_ref();
        let long = s.long_baseline.as_ref();
        t.add_row(vec![
            s.key.name(),
            (*phase).to_string(),
            s.handshakes.to_string(),
            format!("{:.1}", s.per_second),
            q.map_or("-".into(), |q| ms(q.p50_ns)),
            base.map_or("-".into(), |b| ms(b.p50_ns)),
            q.map_or("-".into(), |q| ms(q.p90_ns)),
            base.map_or("-".into(), |b| ms(b.p90_ns)),
            long.map_or("-".into(), |l| ms(l.p90_ns)),
            long.map_or("-".into(), |l| ms(l.p999_ns)),
        ]);
    }
    right_align(&mut t, &[2, 3, 4, 5, 6, 7, 8, 9]);
    format!(
        "{} (ms; base: the baseline it was judged against; 24h: the series' last 24 hours)\n{}\n",
        styled(
            BOLD,
            &format!("last window {}–{}", clock(w.start_ns), clock(w.end_ns))
        ),
        render(&t)
    )
}

/// The whole observation.
pub fn observation(o: &Observation) -> String {
    let mut s = format!("{}\n\n", styled(BOLD, &heading(o)));
    if !o.sources.is_empty() && o.sources.iter().all(|s| s.kind == "probes") {
        if let Some(p) = &o.probes {
            s += &probes(p);
        }
        return s;
    }
    s += &packet_notes(o);
    s += &connection_notes(o);
    s += &handshake_counts(o);
    if o.count("all") > 0 {
        s += &phases_and_breakdowns(o);
    }
    s += &failures(o);
    s += PHASE_NOTE;
    if let Some(q) = &o.quic {
        s += "\n";
        s += &quic(q);
    }
    if let Some(p) = &o.probes {
        s += "\n";
        s += &probes(p);
    }
    s
}

/// Where each phase is exact, printed under every observation of packets.
const PHASE_NOTE: &str = "server_think, server_flight and server_first_byte are exact on the \
    server's host, client_think and first_app_byte on the client's (on loopback, all are); \
    server_first_byte is the request's last record → the answer's first byte, TLS 1.3 \
    tickets left out\n";

/// Where each QUIC phase's timestamps are taken, printed under the QUIC part.
const QUIC_PHASE_NOTE: &str = "QUIC phases are read from the packets' types and times (Initial packets \
    opened to read the hellos): client_think ends at the client's first Handshake packet (its \
    Finished), first_app_byte at its first 1-RTT or 0-RTT packet, server_first_byte is the \
    client's Finished → the server's first 1-RTT packet after it\n";

/// The QUIC part of an observation: its datagrams and packets, connections, handshakes,
/// phases and breakdowns, failures.
fn quic(q: &Observation) -> String {
    let p = q.packets.quic.unwrap_or_default();
    let c = &q.connections;
    let mut s = format!("{}\n", styled(BOLD, "QUIC (UDP)"));
    s += &format!(
        "datagrams: {} on the ports ({} on other ports, {} not QUIC, {} of another QUIC \
         version, {} of no connection tracked); packets: {} Initial ({} not opened), {} \
         0-RTT, {} Handshake, {} 1-RTT, {} Retry, {} Version Negotiation\n",
        p.datagrams,
        p.other_ports,
        p.not_quic,
        p.other_version,
        p.unknown_connection,
        p.initial,
        p.undecryptable,
        p.zero_rtt,
        p.handshake,
        p.short,
        p.retry,
        p.version_negotiation
    );
    s += &format!(
        "connections: {} tracked from the client's first Initial: {} handshakes, {} failed, \
         {} unparsed\n",
        c.tracked, c.handshakes, c.failed, c.unparsed
    );
    if c.evicted_idle + c.over_cap > 0 {
        s += &format!(
            "connection table: {} evicted idle, {} not tracked (table full)\n",
            c.evicted_idle, c.over_cap
        );
    }
    s += &handshake_counts(q);
    if q.count("all") > 0 {
        s += &phases_and_breakdowns(q);
    }
    s += &failures(q);
    s += QUIC_PHASE_NOTE;
    s
}

/// The title: the sources, the ports, the capture's length.
fn heading(o: &Observation) -> String {
    let mut sources: Vec<String> = o
        .sources
        .iter()
        .map(|s| format!("{} {}", s.kind, s.name))
        .collect();
    if o.sources_left_out > 0 {
        sources.push(format!("{} more sources", o.sources_left_out));
    }
    // QUIC is read from the same ports' UDP datagrams.
    let transports = if o.quic.is_some() {
        "TCP and UDP"
    } else {
        "TCP"
    };
    let ports = if o.ports.is_empty() {
        format!("every {transports} port")
    } else {
        let p: Vec<String> = o.ports.iter().map(u16::to_string).collect();
        format!("{transports} port {}", p.join(", "))
    };
    format!(
        "Handshakes observed in {} on {}: {:.3} s of capture{}",
        sources.join(" + "),
        ports,
        o.duration_s,
        if o.interrupted {
            " (interrupted: partial result)"
        } else {
            ""
        }
    )
}

/// The frames read, then what the kernel filter, the snap length and the clock left out.
fn packet_notes(o: &Observation) -> String {
    let p = &o.packets;
    let mut s = format!(
        "frames: {} ({} TCP segments observed, {} on other ports, {} not TCP){}\n",
        p.frames,
        p.tcp_segments,
        p.other_ports,
        p.not_tcp,
        if o.sources.iter().any(|s| s.kind == "live") {
            format!("; kernel drops {}", p.kernel_drops)
        } else {
            String::new()
        }
    );
    if let Some(f) = &o.kernel_filter {
        s += &format!("kernel filter: {f}");
        if p.kernel_filtered > 0 {
            s += &format!(
                "; {} segments of connections whose analysis was over dropped there",
                p.kernel_filtered
            );
        }
        s += "\n";
    }
    if p.kernel_drops > 0 {
        s += &format!(
            "{} the kernel dropped {} frames before tlsperf read them (its capture buffer \
             was full: a machine too busy, or more traffic than one reader keeps up with): \
             the connections they belonged to are missing, or counted as failed or unparsed\n",
            styled(BAD, "incomplete:"),
            p.kernel_drops
        );
    }
    if p.cut_short > 0 {
        s += &format!(
            "incomplete: {} frames were cut short by the capture's snap length (tcpdump -s): \
             analyzed as far as they go; a connection whose handshake lay in the missing \
             bytes counts as unparsed\n",
            p.cut_short
        );
    }
    if p.clock_outliers > 0 {
        s += &format!(
            "timestamps: {} segments stamped more than 2 s away from their neighbours \
             (not used to evict flows)\n",
            p.clock_outliers
        );
    }
    s
}

/// The connections tracked, then what the memory budget and the flow table left out.
fn connection_notes(o: &Observation) -> String {
    let c = &o.connections;
    let mut s = format!(
        "connections: {} tracked: {} handshakes, {} failed, {} not TLS, {} unparsed, {} \
         without payload; {} already open at the start (not analyzed)\n",
        c.tracked, c.handshakes, c.failed, c.not_tls, c.unparsed, c.empty, c.midstream
    );
    if c.shed > 0 {
        s += &format!(
            "{} {} connections given up or not tracked to stay within the memory budget \
             (--max-memory; they held {} bytes)\n",
            styled(BAD, "incomplete:"),
            c.shed,
            c.shed_bytes
        );
    }
    let h = &o.histograms_shed;
    if !h.is_empty() {
        s += &format!(
            "{} the histograms' share of the memory budget (--max-memory) was full: {} \
             handshakes counted in a breakdown's (other) row or in none (once per \
             breakdown), {} phase values left out of a histogram\n",
            styled(BAD, "incomplete:"),
            h.rows,
            h.values
        );
    }
    if o.attribution_lost > 0 {
        s += &format!(
            "{} the kernel's socket owners lost {} records before tlsperf read them (their \
             ring was full: connections opened faster than they were read): those ends' \
             processes may be (unknown)\n",
            styled(BAD, "process attribution:"),
            o.attribution_lost
        );
    }
    if c.evicted_idle + c.evicted_half_open + c.over_cap > 0 {
        s += &format!(
            "flow table: {} evicted idle, {} evicted half-open, {} not tracked (table full)\n",
            c.evicted_idle, c.evicted_half_open, c.over_cap
        );
    }
    s
}

/// The handshakes per kind, the HelloRetryRequests and the resumption rate.
fn handshake_counts(o: &Observation) -> String {
    let kinds: Vec<String> = KINDS[1..]
        .iter()
        .map(|k| format!("{k} {}", o.count(k)))
        .collect();
    let methods: Vec<String> = o
        .resumption
        .by_method
        .iter()
        .map(|(m, n)| format!("{m} {n}"))
        .collect();
    let hrr = o.handshakes.get("all").map_or(0, |k| k.hrr);
    let resumed_hrr = ["resumed", "0rtt"]
        .iter()
        .filter_map(|k| o.handshakes.get(*k))
        .map(|k| k.hrr)
        .sum::<u64>();
    let retry = o.handshakes.get("all").map_or(0, |k| k.retry);
    format!(
        "handshakes: {} — {}{}{}; resumption rate {:.1}%{}\n{}\n",
        o.count("all"),
        kinds.join(", "),
        if hrr > 0 {
            format!(" ({hrr} after a HelloRetryRequest, {resumed_hrr} of them resumed)")
        } else {
            String::new()
        },
        if retry > 0 {
            format!(" ({retry} after a Retry)")
        } else {
            String::new()
        },
        o.resumption.rate * 100.0,
        if methods.is_empty() {
            String::new()
        } else {
            format!(" ({})", methods.join(", "))
        },
        offered(o),
    )
}

/// What the handshakes' ClientHellos offered, a line (none without handshakes, or in a
/// document written before it was counted).
fn offered(o: &Observation) -> String {
    let c = &o.client_hello;
    if o.count("all") == 0 || (c.alpn.is_empty() && c.offered_groups.is_empty()) {
        return String::new();
    }
    // The most offered first.
    let counts = |m: &std::collections::BTreeMap<String, u64>| {
        let mut v: Vec<(&String, &u64)> = m.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let v: Vec<String> = v.into_iter().map(|(k, n)| format!("{k} {n}")).collect();
        v.join(", ")
    };
    format!(
        "ClientHellos offered: ALPN {}; groups {}; a pre-shared key {}\n",
        counts(&c.alpn),
        if c.offered_groups.is_empty() {
            "none".to_string()
        } else {
            counts(&c.offered_groups)
        },
        c.psk_offered
    )
}

/// The phase percentiles per kind, the server flight's size, the breakdowns (SNI,
/// server, version, group, processes) and where the processes came from.
fn phases_and_breakdowns(o: &Observation) -> String {
    let mut t = table(&["kind", "phase (ms)", "n", "p50", "p90", "p99", "max"]);
    for kind in KINDS {
        let Some(ks) = o.handshakes.get(kind).filter(|k| k.count > 0) else {
            continue;
        };
        for (phase, _) in PHASES {
            let Some(d) = ks.phases.get(phase) else {
                continue;
            };
            t.add_row(quantile_row(kind, phase, d));
        }
    }
    right_align(&mut t, &[2, 3, 4, 5, 6]);
    let mut s = render(&t);
    s += "\n\n";
    let flights: Vec<String> = KINDS[1..]
        .iter()
        .filter_map(|k| {
            let b = o.handshakes.get(*k)?.server_flight_bytes;
            (b.count > 0)
                .then(|| format!("{k} {} (min {}, max {})", b.total / b.count, b.min, b.max))
        })
        .collect();
    s += &format!("server flight, mean bytes: {}\n\n", flights.join("; "));
    for (title, map) in [
        ("SNI", &o.by_sni),
        ("server", &o.by_server),
        ("version", &o.by_version),
        ("group", &o.by_group),
        ("client process", &o.by_client_process),
        ("server process", &o.by_server_process),
    ] {
        if map.is_empty() {
            continue;
        }
        s += &breakdown(title, map);
        s += "\n";
    }
    match o.attribution.as_deref() {
        Some("kernel") => {
            s += "processes: exact, from the kernel (the process inside connect() and \
                  accept())\n\n"
        }
        Some(from) => {
            s += &format!("processes: from {from}; a local end not known exactly is (unknown)\n\n")
        }
        None => {}
    }
    s
}

/// The failed handshakes by alert and by how the connection ended (nothing without one).
fn failures(o: &Observation) -> String {
    let f = &o.failures;
    if f.total() == 0 {
        return String::new();
    }
    let mut parts: Vec<String> = f
        .alerts
        .iter()
        .map(|(a, n)| format!("alert {a} {n}"))
        .collect();
    for (what, n) in [
        ("reset", f.reset),
        ("closed", f.closed),
        ("incomplete", f.incomplete),
    ] {
        if n > 0 {
            parts.push(format!("{what} {n}"));
        }
    }
    format!(
        "{} {}\n\n",
        styled(BAD, "failed handshakes:"),
        parts.join(", ")
    )
}

fn p50(d: Option<&Dist>) -> String {
    d.filter(|d| d.quantiles.count > 0)
        .map_or("-".to_string(), |d| ms(d.quantiles.p50_ns))
}

/// One probe breakdown (by process, by SNI): the busiest rows and their p50s.
fn probe_rows(title: &str, map: &BTreeMap<String, ProbeRow>) -> String {
    let mut rows: Vec<(&String, &ProbeRow)> = map.iter().collect();
    rows.sort_by(|a, b| b.1.handshakes.cmp(&a.1.handshakes).then(a.0.cmp(b.0)));
    let mut t = table(&[
        title,
        "handshakes",
        "failed",
        "accept queue p50 ms",
        "until first call p50 ms",
        "work p50 ms",
        "on CPU p50 ms",
        "blocked p50 ms",
        "waiting for peer p50 ms",
    ]);
    for (k, r) in rows.iter().take(SHOWN_ROWS) {
        t.add_row(vec![
            k.to_string(),
            r.handshakes.to_string(),
            r.failed.to_string(),
            p50(r.phases.get("accept_queue")),
            p50(r.phases.get("until_first_call")),
            p50(r.phases.get("work")),
            p50(r.phases.get("on_cpu")),
            p50(r.phases.get("blocked")),
            p50(r.phases.get("waiting_for_peer")),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5, 6, 7, 8]);
    let mut s = render(&t);
    s += "\n";
    if rows.len() > SHOWN_ROWS {
        s += &format!("… and {} more (see --json)\n", rows.len() - SHOWN_ROWS);
    }
    s += "\n";
    s
}

/// "of it: callback 20.1, signature 0.080 (ecdsa-p256), …, rest 0.9": the parts of one
/// handshake's work that were measured, and the rest; `None` when none was.
fn parts_of_work(p: &RecordPhases) -> Option<String> {
    let rest = p.rest_ns?;
    let mut parts = Vec::new();
    for (name, v) in [
        ("callback", p.callback_ns),
        ("verification", p.verification_ns),
        ("signature", p.signature_ns),
        ("key exchange", p.key_exchange_ns),
        ("trust load", p.trust_load_ns),
    ] {
        if let Some(v) = v {
            let key = match (name, &p.signature_key, &p.key_exchange_group) {
                ("signature", Some(k), _) | ("key exchange", _, Some(k)) => format!(" ({k})"),
                _ => String::new(),
            };
            parts.push(format!("{name} {}{key}", ms(v)));
        }
    }
    parts.push(format!("rest {}", ms(rest)));
    Some(format!("of it: {}", parts.join(", ")))
}

/// A role and kind's mean handshake, its work split as measured: "work 21.1 = on CPU
/// 0.9 + blocked 20.2; of it: callback 20.1, signature 0.08, key exchange 0.05,
/// verification 0, rest 0.9" (means over the same handshakes, so they add up).
fn mean_split(row: &ProbeRow) -> Option<String> {
    let mean = |p: &str| {
        row.phases
            .get(p)
            .filter(|d| d.quantiles.count > 0)
            .map(|d| d.quantiles.mean_ns.round() as u64)
    };
    let work = mean("work")?;
    let mut s = format!("work {}", ms(work));
    if let (Some(c), Some(b)) = (mean("on_cpu"), mean("blocked")) {
        s += &format!(" = on CPU {} + blocked {}", ms(c), ms(b));
    }
    let mut parts = Vec::new();
    for (name, shown) in [
        ("callback", "callback"),
        ("verification", "verification"),
        ("signature", "signature"),
        ("key_exchange", "key exchange"),
        ("trust_load", "trust load"),
        ("rest", "rest"),
    ] {
        if let Some(v) = mean(name) {
            parts.push(format!("{shown} {}", ms(v)));
        }
    }
    if !parts.is_empty() {
        s += &format!("; of it: {}", parts.join(", "));
    }
    if let Some(t) = mean("trust_load_before").filter(|t| *t > 0) {
        s += &format!("; trust load before the first call {}", ms(t));
    }
    Some(s)
}

/// The processes' view (`--probes`).
fn probes(p: &ProbeReport) -> String {
    let c = &p.counts;
    let mut s = format!("{}\n", styled(BOLD, "Inside the processes (eBPF probes)"));
    s += &format!(
        "probed handshakes: {} begun, {} reported, {} read; {} matched to captured \
         connections\n",
        c.started, c.emitted, c.received, c.matched_wire
    );
    if c.lost + c.dropped + c.table_full > 0 {
        s += &format!(
            "{} {} lost (ring buffer full), {} dropped by tlsperf, {} not followed (table \
             full)\n",
            styled(BAD, "lost events:"),
            c.lost,
            c.dropped,
            c.table_full
        );
    } else {
        s += "lost events: 0\n";
    }
    if c.unmatched_probes + c.unmatched_wire > 0 {
        s += &format!(
            "not joined: {} probed handshakes without a captured one, {} captured without a \
             probed one\n",
            c.unmatched_probes, c.unmatched_wire
        );
    }
    if c.before_attach + c.in_progress_at_end > 0 {
        s += &format!(
            "left out: {} begun before the probes were attached, {} still in progress at \
             the end\n",
            c.before_attach, c.in_progress_at_end
        );
    }
    if c.unsplit > 0 {
        s += &format!(
            "{} Go handshakes whose connection was not found: their waits cannot be told \
             from work (span only)\n",
            c.unsplit
        );
    }
    s += "\n";
    if !p.by_kind.is_empty() {
        let mut t = table(&["role, kind", "phase (ms)", "n", "p50", "p90", "p99", "max"]);
        let mut kinds: Vec<&String> = p.by_kind.keys().collect();
        // `… all` first within each role.
        kinds.sort_by_key(|k| {
            (
                k.split(' ').next().map(str::to_string),
                !k.ends_with(" all"),
                k.to_string(),
            )
        });
        for k in kinds {
            let row = &p.by_kind[k];
            let mut phases: Vec<(&str, Option<&Dist>)> = PROBE_PHASES
                .iter()
                .map(|(name, _)| (*name, row.phases.get(*name)))
                .collect();
            if row.wire_server_think.quantiles.count > 0 {
                phases.insert(0, ("wire server_think", Some(&row.wire_server_think)));
            }
            for (phase, d) in phases {
                let Some(d) = d.filter(|d| d.quantiles.count > 0) else {
                    continue;
                };
                t.add_row(quantile_row(k, phase, d));
            }
        }
        right_align(&mut t, &[2, 3, 4, 5, 6]);
        s += &render(&t);
        s += "\n\n";
        let mut means = Vec::new();
        for (k, row) in &p.by_kind {
            if let Some(m) = mean_split(row) {
                means.push(format!("  {k}: {m}\n"));
            }
        }
        if !means.is_empty() {
            s += "mean handshake, inside (ms):\n";
            s += &means.concat();
            s += "\n";
        }
    }
    if !p.trust_loads.is_empty() {
        s += "trust-store loading by process (in handshakes or not):\n";
        let mut rows: Vec<_> = p.trust_loads.iter().collect();
        rows.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        for (k, t) in rows.iter().take(SHOWN_ROWS) {
            let mean = t.total_ns / t.loads.max(1);
            s += &format!(
                "  {k}: {} loads, {} ms in all, {} ms each on average\n",
                t.loads,
                ms(t.total_ns),
                ms(mean)
            );
        }
        if rows.len() > SHOWN_ROWS {
            s += &format!("  … and {} more (see --json)\n", rows.len() - SHOWN_ROWS);
        }
        s += "\n";
    }
    for (title, map) in [("process, role", &p.by_process), ("SNI, role", &p.by_sni)] {
        if !map.is_empty() {
            s += &probe_rows(title, map);
        }
    }
    if !p.slowest.is_empty() {
        s += "slowest server handshakes:\n";
        let opt = |v: Option<u64>| v.map_or("?".to_string(), ms);
        for b in &p.slowest {
            let head = match b.wire_server_think_ns {
                Some(t) => format!("wire server think {} ms; inside:", ms(t)),
                None => format!("span {} ms (not captured):", ms(b.phases.span_ns)),
            };
            let mut work = opt(b.phases.work_ns);
            let mut of = Vec::new();
            if let (Some(c), Some(o)) = (b.phases.on_cpu_ns, b.phases.blocked_ns) {
                of.push(format!("= on CPU {} + blocked {}", ms(c), ms(o)));
            }
            if let Some(parts) = parts_of_work(&b.phases) {
                of.push(parts);
            }
            if !of.is_empty() {
                work = format!("{work} ({})", of.join("; "));
            }
            if let Some(t) = b.phases.trust_load_before_ns.filter(|t| *t > 0) {
                work = format!("{work}, trust load before the first call {}", ms(t));
            }
            s += &format!(
                "  {} {} ← {} {}: {head} accept queue {}, until first call {}, work {work}, \
                 waiting for peer {} ms ({} calls, thread {})\n",
                b.process,
                b.server,
                b.client,
                b.kind,
                opt(b.phases.accept_queue_ns),
                opt(b.phases.until_first_call_ns),
                opt(b.phases.waiting_for_peer_ns),
                b.phases.calls,
                b.tid,
            );
        }
        s += "\n";
    }
    s
}

fn breakdown(title: &str, map: &BTreeMap<String, Row>) -> String {
    let mut rows: Vec<(&String, &Row)> = map.iter().collect();
    rows.sort_by(|a, b| b.1.handshakes.cmp(&a.1.handshakes).then(a.0.cmp(b.0)));
    let mut t = table(&[
        title,
        "handshakes",
        "resumed",
        "hrr",
        "server think p50 ms",
        "client think p50 ms",
    ]);
    for (k, r) in rows.iter().take(SHOWN_ROWS) {
        t.add_row(vec![
            k.to_string(),
            r.handshakes.to_string(),
            r.resumed.to_string(),
            r.hrr.to_string(),
            ms(r.server_think.quantiles.p50_ns),
            ms(r.client_think.quantiles.p50_ns),
        ]);
    }
    right_align(&mut t, &[1, 2, 3, 4, 5]);
    let mut s = render(&t);
    s.push('\n');
    if rows.len() > SHOWN_ROWS {
        s += &format!("… and {} more (see --json)\n", rows.len() - SHOWN_ROWS);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::window::{
        HeadlineBaseline, LongBaseline, PhaseQuantiles, SeriesKey, SeriesRecord, WindowRecord,
    };

    /// Frames the kernel dropped make the summary incomplete, in words (237,575 drops
    /// showed only as a number on the frames line).
    #[test]
    fn kernel_drops_mark_the_summary_incomplete() {
        let mut o = Observation::new(Vec::new(), vec![443]);
        assert!(!packet_notes(&o).contains("incomplete"));
        o.packets.kernel_drops = 237_575;
        let t = packet_notes(&o);
        assert!(
            t.contains("incomplete:") && t.contains("kernel dropped 237575 frames"),
            "{t}"
        );
    }

    /// Records the kernel's socket owners lost are said, in words, where the
    /// connections are counted.
    #[test]
    fn lost_attribution_records_are_said() {
        let mut o = Observation::new(Vec::new(), vec![443]);
        assert!(!connection_notes(&o).contains("process attribution"));
        o.attribution_lost = 12;
        let t = connection_notes(&o);
        assert!(t.contains("socket owners lost 12 records"), "{t}");
    }

    #[test]
    fn the_last_window_shows_each_series_beside_its_baseline() {
        let q = PhaseQuantiles {
            count: 400,
            p50_ns: 22_216_703,
            p90_ns: 23_461_887,
            p95_ns: 24_379_391,
            p99_ns: 29_114_367,
        };
        let series = |view: &str, port, baseline: Option<HeadlineBaseline>| SeriesRecord {
            key: SeriesKey {
                view: view.into(),
                role: "server".into(),
                process: "gw".into(),
                port,
                group: None,
                transport: Default::default(),
            },
            handshakes: 400,
            per_second: 40.0,
            peak_per_second: 41,
            failures: BTreeMap::new(),
            resumed_share: None,
            kinds: BTreeMap::new(),
            versions: BTreeMap::new(),
            groups: BTreeMap::new(),
            sni: BTreeMap::new(),
            phases: [(
                if view == "wire" {
                    "first_app_byte"
                } else {
                    "total"
                }
                .to_string(),
                q,
            )]
            .into(),
            long_baseline: baseline.as_ref().map(|_| LongBaseline {
                phase: "first_app_byte".into(),
                hours: 24,
                windows: 8640,
                handshakes: 3_456_000,
                p50_ns: 1_700_000,
                p90_ns: 2_500_000,
                p95_ns: 2_900_000,
                p99_ns: 4_000_000,
                p999_ns: 9_000_000,
            }),
            baseline,
            headline_histogram: None,
        };
        let w = WindowRecord {
            cpu_pressure: None,
            quic: None,
            kind: "window".into(),
            // 2026-12-06T18:58:00Z.
            start_ns: 1_796_583_480_000_000_000,
            end_ns: 1_796_583_490_000_000_000,
            seconds: 10.0,
            wire_failures: BTreeMap::new(),
            late: 0,
            series: vec![
                series(
                    "wire",
                    443,
                    Some(HeadlineBaseline {
                        phase: "first_app_byte".into(),
                        p50_ns: 1_800_000,
                        p90_ns: 2_400_000,
                        windows: 9,
                    }),
                ),
                series("probes", 0, None),
            ],
        };
        let text = last_window(&w);
        assert!(text.contains("last window 18:58:00–18:58:10"), "{text}");
        let wire = text
            .lines()
            .find(|l| l.contains("wire server gw port 443"))
            .unwrap();
        let cells: Vec<&str> = wire.split_whitespace().collect();
        assert_eq!(
            cells[5..],
            [
                "first_app_byte",
                "400",
                "40.0",
                "22.217",
                "1.800",
                "23.462",
                "2.400",
                "2.500",
                "9.000"
            ],
            "{text}"
        );
        let probes = text
            .lines()
            .find(|l| l.contains("probes server gw"))
            .unwrap();
        assert!(probes.contains("total") && probes.ends_with('-'), "{text}");
    }
}
