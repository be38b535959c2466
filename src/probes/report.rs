//! Probed handshakes → the `probes` part of an observation: per process, per role and
//! kind (the kind from the wire when the connection was also captured), HDR histograms of
//! every phase, the wire's server think beside the process's own phases, the slowest
//! server handshakes broken down, and the counts that say whether anything was lost.
//! Merges exactly, like the rest of an observation.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::event::{HandshakeResult, ProbeRecord, Role};
use super::workload::Workload;
use crate::stats::histogram::Dist;
use crate::stats::{HistogramError, LatencyHistogram};

/// Every phase of a probed handshake, in order, with where its timestamps are taken.
pub const PROBE_PHASES: [(&str, &str); 14] = [
    (
        "accept_queue",
        "server: the tracepoint sock:inet_sock_set_state to ESTABLISHED (the TCP handshake \
         completed) → accept()/accept4() returned the socket (syscall exit tracepoint)",
    ),
    (
        "until_first_call",
        "server: accept returned → the library's first handshake call entered (uprobe); \
         client: connect() entered → the first handshake call entered",
    ),
    (
        "work",
        "time inside the handshake calls: OpenSSL, each call's entry (uprobe) → its return \
         (uretprobe), less the time inside reads on the connection (read, recvfrom, recvmsg, \
         readv: a blocking socket waits there), summed; Go, the handshake function's entry → \
         its return instruction, less waiting_for_peer",
    ),
    (
        "on_cpu",
        "of work, the time the handshake's thread (OpenSSL) or goroutine (Go) ran on a CPU: \
         its running intervals summed, each opened at a handshake call's entry, at the \
         thread's switch back in (tracepoint sched:sched_switch) and (Go) at \
         runtime.execute putting the goroutine on a thread; closed at the thread's switch \
         out, (Go) at runtime.gopark or runtime.execute of another goroutine on the thread, \
         and at the call's return",
    ),
    (
        "blocked",
        "work − on_cpu: off the CPU inside the handshake calls (sleeping, a lock, I/O other \
         than the peer's data, waiting for a CPU)",
    ),
    (
        "callback",
        "of work, Go: crypto/tls.(*Config).getCertificate's entry (uprobe, on the \
         handshake's goroutine) → any of its return instructions, summed: the certificate's \
         selection, with the program's GetCertificate when it set one",
    ),
    (
        "verification",
        "of work, chain verification: OpenSSL, X509_verify_cert's entry (uprobe, on the \
         thread inside a handshake call) → its return (uretprobe), summed (the peer's chain; \
         a server's own chain when it builds it per handshake)",
    ),
    (
        "signature",
        "of work, signing: OpenSSL, EVP_DigestSign's entry (uprobe, on the thread inside a \
         handshake call) → its return (uretprobe), summed (TLS 1.3's CertificateVerify, TLS \
         1.2's ServerKeyExchange; a call with no output buffer only asks the length: not \
         timed)",
    ),
    (
        "key_exchange",
        "of work, key exchange: OpenSSL, EVP_PKEY_generate and EVP_PKEY_derive, \
         each entry (uprobe, on the thread inside a handshake call) → its return \
         (uretprobe), summed (the key share and the peer's key object, the shared \
         secret; a derive with no output buffer only asks the length: not timed)",
    ),
    (
        "trust_load",
        "of work, trust-store loading inside the handshake calls: OpenSSL, \
         X509_load_cert_crl_file_ex's or X509_load_cert_file_ex's (1.1: without _ex) \
         entry (uprobe) → its return (uretprobe), summed (every certificate file that \
         X509_STORE_load_*, SSL_CTX_load_verify_* and *_set_default_verify_paths read)",
    ),
    (
        "trust_load_before",
        "trust-store loading on the handshake's thread before its first call (not part of \
         work): the loads since the thread's previous handshake began, for a client; for \
         a server, those begun after accept returned the connection",
    ),
    (
        "rest",
        "of work, what no part measured accounts for: work − (callback + verification + \
         signature + key_exchange + trust_load), each as measured",
    ),
    (
        "waiting_for_peer",
        "OpenSSL: span − work (between the handshake calls, and inside their reads on the \
         connection); Go: a read() on the connection that returned EAGAIN → the next read() \
         on it, summed",
    ),
    (
        "span",
        "the first handshake call entered → the call that completed the handshake returned",
    ),
];

/// `r`'s value of each of [`PROBE_PHASES`], in order (`None`: not probed or not measured).
pub fn phase_values(r: &ProbeRecord) -> [Option<u64>; PROBE_PHASES.len()] {
    [
        r.accept_queue_ns(),
        r.until_first_call_ns(),
        r.work(),
        r.on_cpu(),
        r.blocked(),
        r.part("callback"),
        r.part("verification"),
        r.part("signature"),
        r.part("key_exchange"),
        r.part("trust_load"),
        r.trust_before_ns,
        r.rest(),
        r.waiting(),
        Some(r.span_ns()),
    ]
}

/// The most rows a per-process or per-kind table keeps; the rest are added to `(other)`.
pub const MAX_ROWS: usize = 1000;
/// How many of the slowest server handshakes are kept, broken down.
pub const SLOWEST: usize = 10;

/// The most kinds, and phases per row, a report read back may hold (tlsperf writes at
/// most 6 kinds and 5 phases).
pub const MAX_KINDS: usize = 32;

/// One role and kind (or one process): completed handshakes and their phases.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeRow {
    /// Completed handshakes.
    pub handshakes: u64,
    /// Handshakes that ended without success (Go: an error returned; OpenSSL: the SSL
    /// object freed first).
    pub failed: u64,
    /// Per phase of [`PROBE_PHASES`]: the completed handshakes where both of its
    /// boundaries were probed. Read back, at most [`MAX_KINDS`] entries.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_KINDS>")]
    pub phases: BTreeMap<String, Dist>,
    /// The wire's server think (ClientHello complete → ServerHello), for the handshakes
    /// also captured (`observe --interface … --probes`).
    #[serde(default)]
    pub wire_server_think: Dist,
}

/// One slow server handshake, the wire's view beside the process's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Breakdown {
    /// "comm (pid N)".
    pub process: String,
    /// The thread that made the first call.
    pub tid: u32,
    /// Client address:port.
    pub client: String,
    /// Server address:port.
    pub server: String,
    /// The kind from the wire (`unknown` when it was not captured).
    pub kind: String,
    /// The wire's server think, ns (when captured).
    pub wire_server_think_ns: Option<u64>,
    /// The process's phases.
    #[serde(flatten)]
    pub phases: RecordPhases,
}

/// One probed handshake's phases, as a slow handshake's breakdown and a connections
/// line give them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordPhases {
    /// ns; `None` when a boundary was not probed.
    pub accept_queue_ns: Option<u64>,
    /// ns; `None` when a boundary was not probed.
    pub until_first_call_ns: Option<u64>,
    /// ns; `None` when waiting could not be told from work (a Go connection whose
    /// descriptor was not found).
    pub work_ns: Option<u64>,
    /// Of `work_ns`, on a CPU, ns; `None` when not measured (or `work_ns` is not known).
    #[serde(default)]
    pub on_cpu_ns: Option<u64>,
    /// `work_ns` − `on_cpu_ns`, ns; `None` as `on_cpu_ns`.
    #[serde(default)]
    pub blocked_ns: Option<u64>,
    /// Of `work_ns`, Go's certificate callback, ns; `None` when not measured.
    #[serde(default)]
    pub callback_ns: Option<u64>,
    /// Of `work_ns`, chain verification, ns; `None` when not measured.
    #[serde(default)]
    pub verification_ns: Option<u64>,
    /// Of `work_ns`, signing, ns; `None` when not measured.
    #[serde(default)]
    pub signature_ns: Option<u64>,
    /// The signing key's type, from the signature's length (`rsa-2048`, `ecdsa-p256`…).
    #[serde(default)]
    pub signature_key: Option<String>,
    /// Of `work_ns`, key exchange, ns; `None` when not measured.
    #[serde(default)]
    pub key_exchange_ns: Option<u64>,
    /// The key exchange's group (Go: `x25519`, `secp256r1`…), when known.
    #[serde(default)]
    pub key_exchange_group: Option<String>,
    /// Of `work_ns`, trust-store loading inside the handshake calls, ns; `None` when not
    /// measured.
    #[serde(default)]
    pub trust_load_ns: Option<u64>,
    /// Trust-store loading before the first call (not of `work_ns`), ns; `None` when not
    /// measured.
    #[serde(default)]
    pub trust_load_before_ns: Option<u64>,
    /// `work_ns` − the parts measured, ns; `None` when work or every part is not known.
    #[serde(default)]
    pub rest_ns: Option<u64>,
    /// ns; `None` as `work_ns`.
    pub waiting_for_peer_ns: Option<u64>,
    /// ns.
    pub span_ns: u64,
    /// Library calls that drove the handshake.
    pub calls: u32,
}

impl RecordPhases {
    /// The phases of `r`.
    pub fn of(r: &ProbeRecord) -> RecordPhases {
        RecordPhases {
            accept_queue_ns: r.accept_queue_ns(),
            until_first_call_ns: r.until_first_call_ns(),
            work_ns: r.work(),
            on_cpu_ns: r.on_cpu(),
            blocked_ns: r.blocked(),
            callback_ns: r.part("callback"),
            verification_ns: r.part("verification"),
            signature_ns: r.part("signature"),
            signature_key: r.signature_key().map(str::to_string),
            key_exchange_ns: r.part("key_exchange"),
            key_exchange_group: r.group_name(),
            trust_load_ns: r.part("trust_load"),
            trust_load_before_ns: r.trust_before_ns,
            rest_ns: r.rest(),
            waiting_for_peer_ns: r.waiting(),
            span_ns: r.span_ns(),
            calls: r.calls,
        }
    }
}

/// What the kernel side counted: compare `emitted` with `received`, and `lost` with 0.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct ProbeCounts {
    /// Handshakes begun (a first call probed).
    pub started: u64,
    /// Records written to the ring buffer.
    pub emitted: u64,
    /// Records read by tlsperf.
    pub received: u64,
    /// Records lost: the ring buffer was full (the kernel histograms still count them).
    pub lost: u64,
    /// Records dropped in tlsperf (its queue was full).
    pub dropped: u64,
    /// Handshakes not followed: the kernel's table of handshakes in progress was full.
    pub table_full: u64,
    /// Probed handshakes matched to a captured connection.
    pub matched_wire: u64,
    /// Probed handshakes with both addresses that no captured connection matched (by
    /// addresses and time) while the capture ran.
    #[serde(default)]
    pub unmatched_probes: u64,
    /// Captured handshakes that no probed handshake matched (e.g. processes not probed).
    #[serde(default)]
    pub unmatched_wire: u64,
    /// Records of handshakes that began before every probe was attached (the first
    /// instants of a run): left out of every row, never counted as failed.
    #[serde(default)]
    pub before_attach: u64,
    /// Handshakes still in progress when the run ended (after draining): neither
    /// completed nor failed.
    #[serde(default)]
    pub in_progress_at_end: u64,
    /// Completed handshakes whose waits could not be told from work (a Go connection
    /// whose descriptor was not found): their span is counted, not their work.
    #[serde(default)]
    pub unsplit: u64,
}

/// The `probes` part of an observation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeReport {
    /// What was attached ("openssl: /lib/…/libssl.so.3 (SSL_do_handshake, …)").
    #[serde(deserialize_with = "crate::doc::at_most_items::<_, _, MAX_ROWS>")]
    pub attached: Vec<String>,
    /// The counts.
    pub counts: ProbeCounts,
    /// By "role kind": `server all`, `server full`, `server resumed`, `client all`…
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_KINDS>")]
    pub by_kind: BTreeMap<String, ProbeRow>,
    /// By process, "comm (pid N)", with its role: `nginx (pid 12) server`.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>")]
    pub by_process: BTreeMap<String, ProbeRow>,
    /// By the ClientHello's SNI and role (`localhost server`; `(none)` without one), for
    /// the handshakes joined to a captured connection.
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>"
    )]
    pub by_sni: BTreeMap<String, ProbeRow>,
    /// The kernel's own count of completed handshakes per "pid N role", from its log2
    /// histograms (kept even when ring-buffer records are lost).
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_ROWS>")]
    pub kernel_counts: BTreeMap<String, u64>,
    /// The slowest completed server handshakes (by span, or by the wire's server think
    /// when captured), broken down.
    #[serde(deserialize_with = "crate::doc::at_most_items::<_, _, SLOWEST>")]
    pub slowest: Vec<Breakdown>,
    /// Per phase, what it spans.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_KINDS>")]
    pub phases: BTreeMap<String, String>,
    /// Per process of `by_process` ("comm (pid N)"), its cgroup and, where the cgroup
    /// path names them, its container and Kubernetes pod (read when its first record
    /// was taken; absent when the process was gone by then).
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>"
    )]
    pub workloads: BTreeMap<String, Workload>,
    /// Trust-store loading per process ("comm (pid N)"), in handshakes or not, as the
    /// kernel counted it (OpenSSL: every outermost `X509_load_cert_crl_file_ex` or
    /// `X509_load_cert_file_ex` call while probed). Absent from documents written before it existed.
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>"
    )]
    pub trust_loads: BTreeMap<String, TrustLoads>,
    /// What the probes followed while the run went on (files replaced and attached to
    /// again) or could not (a `--pid` process gone, its pid reused, a file replaced by one
    /// without a TLS library), in words, in order.
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most_items::<_, _, MAX_ROWS>"
    )]
    pub followed: Vec<String>,
}

/// One process's trust-store loading.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct TrustLoads {
    /// Loads (outermost calls of the loading function).
    pub loads: u64,
    /// Their time, summed, ns.
    pub total_ns: u64,
}

/// A handshake the packet path completed, as the probes need it to join (built by
/// `observe`, which owns the wire vocabulary).
#[derive(Debug, Clone)]
pub struct WireHandshake {
    /// Client address.
    pub client: SocketAddr,
    /// Server address.
    pub server: SocketAddr,
    /// Its kind (`full`, `full-hrr`, `resumed`, `0rtt`).
    pub kind: &'static str,
    /// The wire's server think, ns.
    pub server_think_ns: Option<u64>,
    /// The ClientHello's SNI.
    pub sni: Option<String>,
    /// When the connection began: its SYN's capture time (the first ClientHello's
    /// without one), ns since the Unix epoch.
    pub start_ns: Option<u64>,
    /// When its TCP handshake completed: the client's ACK of the SYN-ACK, captured, ns
    /// since the Unix epoch (with the SYN and that ACK captured).
    pub established_ns: Option<u64>,
}

#[derive(Debug, Default)]
struct RowAcc {
    handshakes: u64,
    failed: u64,
    phases: [Option<LatencyHistogram>; PROBE_PHASES.len()],
    wire: Option<LatencyHistogram>,
    /// Handshakes and failures at the last sweep: a row with none since is idle.
    at_sweep: u64,
}

/// Records between two sweeps for idle rows (see [`ProbeAggregate::add`]).
const IDLE_SWEEP: u64 = 16;

fn rec(h: &mut Option<LatencyHistogram>, v: Option<u64>) {
    if let Some(v) = v {
        // Only a value beyond an auto-resizing histogram's range fails; it is left out.
        let _ = h.get_or_insert_with(LatencyHistogram::new).record_ns(v);
    }
}

impl RowAcc {
    fn add(&mut self, r: &ProbeRecord, wire: Option<&WireHandshake>) {
        if r.result != HandshakeResult::Ok {
            self.failed += 1;
            return;
        }
        self.handshakes += 1;
        for (h, v) in self.phases.iter_mut().zip(phase_values(r)) {
            rec(h, v);
        }
        rec(&mut self.wire, wire.and_then(|w| w.server_think_ns));
    }

    /// Holds its histograms encoded (a few hundred bytes each instead of their arrays of
    /// counts, up to ~200 KiB each) when nothing was added since the last sweep; a row
    /// that gets a record again decodes them.
    fn sweep(&mut self) {
        let now = self.handshakes + self.failed;
        if now == self.at_sweep {
            for h in self.phases.iter_mut().chain([&mut self.wire]).flatten() {
                // A histogram that cannot be encoded stays as it is.
                let _ = h.compact();
            }
        }
        self.at_sweep = now;
    }

    fn row(&self) -> ProbeRow {
        let mut phases = BTreeMap::new();
        for (h, (name, _)) in self.phases.iter().zip(PROBE_PHASES) {
            if let Some(h) = h {
                phases.insert(name.to_string(), Dist::of(h.clone()));
            }
        }
        ProbeRow {
            handshakes: self.handshakes,
            failed: self.failed,
            phases,
            wire_server_think: self.wire.clone().map(Dist::of).unwrap_or_default(),
        }
    }
}

/// Builds a [`ProbeReport`] one probed handshake at a time.
#[derive(Debug, Default)]
pub struct ProbeAggregate {
    by_kind: BTreeMap<String, RowAcc>,
    by_process: BTreeMap<String, RowAcc>,
    by_sni: BTreeMap<String, RowAcc>,
    workloads: BTreeMap<String, Workload>,
    slowest: Vec<(u64, Breakdown)>,
    matched_wire: u64,
    unmatched_probes: u64,
    before_attach: u64,
    unsplit: u64,
    /// Records added since the last sweep for idle rows.
    since_sweep: u64,
}

fn row_of(map: &mut BTreeMap<String, RowAcc>, key: String) -> &mut RowAcc {
    let key = if map.len() >= MAX_ROWS && !map.contains_key(&key) {
        "(other)".to_string()
    } else {
        key
    };
    map.entry(key).or_default()
}

impl ProbeAggregate {
    /// Adds one probed handshake, with its captured connection when there is one.
    /// A record that began before the probes were armed is only counted as such.
    pub fn add(&mut self, r: &ProbeRecord, wire: Option<&WireHandshake>) {
        if !r.whole {
            self.before_attach += 1;
            return;
        }
        let role = r.role.name();
        if wire.is_some() {
            self.matched_wire += 1;
        }
        if r.result == HandshakeResult::Ok && !r.split {
            self.unsplit += 1;
        }
        row_of(&mut self.by_kind, format!("{role} all")).add(r, wire);
        if let Some(w) = wire {
            row_of(&mut self.by_kind, format!("{role} {}", w.kind)).add(r, wire);
            let sni = w.sni.as_deref().unwrap_or("(none)");
            row_of(&mut self.by_sni, format!("{sni} {role}")).add(r, wire);
        }
        row_of(&mut self.by_process, format!("{} {role}", r.process())).add(r, wire);
        // Short-lived processes (a curl each) make a row each: a row idle since the last
        // sweep is held encoded, so that rows cost their histograms' arrays only while
        // records come (memory and the report's copies stay bounded over weeks).
        self.since_sweep += 1;
        if self.since_sweep >= IDLE_SWEEP {
            self.since_sweep = 0;
            for row in self.by_process.values_mut().chain(self.by_sni.values_mut()) {
                row.sweep();
            }
        }
        if let Some(w) = &r.workload
            && self.workloads.len() < MAX_ROWS
        {
            self.workloads
                .entry(r.process())
                .or_insert_with(|| Workload::clone(w));
        }
        if r.role == Role::Server && r.result == HandshakeResult::Ok {
            let think = wire.and_then(|w| w.server_think_ns);
            let key = think.unwrap_or_else(|| r.span_ns());
            if self.slowest.len() < SLOWEST || self.slowest.last().is_some_and(|s| s.0 < key) {
                let addr = |a: Option<SocketAddr>| a.map_or("?".to_string(), |a| a.to_string());
                self.slowest.push((
                    key,
                    Breakdown {
                        process: r.process(),
                        tid: r.tid,
                        client: addr(r.peer),
                        server: addr(r.local),
                        kind: wire.map_or("unknown", |w| w.kind).to_string(),
                        wire_server_think_ns: think,
                        phases: RecordPhases::of(r),
                    },
                ));
                self.slowest.sort_by_key(|b| std::cmp::Reverse(b.0));
                self.slowest.truncate(SLOWEST);
            }
        }
    }

    /// One probed handshake on a captured port that no captured connection matched.
    pub fn unmatched(&mut self) {
        self.unmatched_probes += 1;
    }

    /// The counts this aggregate keeps (the kernel's and the reader's are the caller's).
    pub fn counts(&self) -> ProbeCounts {
        ProbeCounts {
            matched_wire: self.matched_wire,
            unmatched_probes: self.unmatched_probes,
            before_attach: self.before_attach,
            unsplit: self.unsplit,
            ..ProbeCounts::default()
        }
    }

    /// The report so far (`counts`, `attached` and `kernel_counts` are the caller's).
    pub fn report(&self) -> ProbeReport {
        ProbeReport {
            attached: Vec::new(),
            counts: self.counts(),
            by_kind: self
                .by_kind
                .iter()
                .map(|(k, v)| (k.clone(), v.row()))
                .collect(),
            by_process: self
                .by_process
                .iter()
                .map(|(k, v)| (k.clone(), v.row()))
                .collect(),
            by_sni: self
                .by_sni
                .iter()
                .map(|(k, v)| (k.clone(), v.row()))
                .collect(),
            kernel_counts: BTreeMap::new(),
            slowest: self.slowest.iter().map(|(_, b)| b.clone()).collect(),
            phases: phase_texts(),
            workloads: self.workloads.clone(),
            trust_loads: BTreeMap::new(),
            followed: Vec::new(),
        }
    }
}

/// [`PROBE_PHASES`] as a map.
pub fn phase_texts() -> BTreeMap<String, String> {
    PROBE_PHASES
        .iter()
        .map(|(p, d)| (p.to_string(), d.to_string()))
        .collect()
}

fn merge_row(a: &mut ProbeRow, b: &ProbeRow) -> Result<(), HistogramError> {
    a.handshakes = a.handshakes.saturating_add(b.handshakes);
    a.failed = a.failed.saturating_add(b.failed);
    for (p, d) in &b.phases {
        a.phases.entry(p.clone()).or_default().merge(d)?;
    }
    a.wire_server_think.merge(&b.wire_server_think)
}

fn merge_rows(
    into: &mut BTreeMap<String, ProbeRow>,
    from: &BTreeMap<String, ProbeRow>,
) -> Result<(), HistogramError> {
    for (k, v) in from {
        let key = if into.len() >= MAX_ROWS && !into.contains_key(k) {
            "(other)".to_string()
        } else {
            k.clone()
        };
        merge_row(into.entry(key).or_default(), v)?;
    }
    Ok(())
}

impl ProbeReport {
    /// Adds `o` exactly: counts add, histograms merge, the slowest stay the slowest.
    pub fn merge(&mut self, o: &ProbeReport) -> Result<(), HistogramError> {
        for a in &o.attached {
            if !self.attached.contains(a) && self.attached.len() < MAX_ROWS {
                self.attached.push(a.clone());
            }
        }
        let (c, d) = (&mut self.counts, &o.counts);
        for (x, y) in [
            (&mut c.started, d.started),
            (&mut c.emitted, d.emitted),
            (&mut c.received, d.received),
            (&mut c.lost, d.lost),
            (&mut c.dropped, d.dropped),
            (&mut c.table_full, d.table_full),
            (&mut c.matched_wire, d.matched_wire),
            (&mut c.unmatched_probes, d.unmatched_probes),
            (&mut c.unmatched_wire, d.unmatched_wire),
            (&mut c.before_attach, d.before_attach),
            (&mut c.in_progress_at_end, d.in_progress_at_end),
            (&mut c.unsplit, d.unsplit),
        ] {
            *x = x.saturating_add(y);
        }
        merge_rows(&mut self.by_kind, &o.by_kind)?;
        merge_rows(&mut self.by_process, &o.by_process)?;
        merge_rows(&mut self.by_sni, &o.by_sni)?;
        for (k, v) in &o.kernel_counts {
            if self.kernel_counts.len() < MAX_ROWS || self.kernel_counts.contains_key(k) {
                let e = self.kernel_counts.entry(k.clone()).or_default();
                *e = e.saturating_add(*v);
            }
        }
        for (k, w) in &o.workloads {
            if self.workloads.len() < MAX_ROWS {
                self.workloads.entry(k.clone()).or_insert_with(|| w.clone());
            }
        }
        for (k, t) in &o.trust_loads {
            if self.trust_loads.len() < MAX_ROWS || self.trust_loads.contains_key(k) {
                let e = self.trust_loads.entry(k.clone()).or_default();
                e.loads = e.loads.saturating_add(t.loads);
                e.total_ns = e.total_ns.saturating_add(t.total_ns);
            }
        }
        for f in &o.followed {
            if self.followed.len() < MAX_ROWS {
                self.followed.push(f.clone());
            }
        }
        self.slowest.extend(o.slowest.iter().take(SLOWEST).cloned());
        let key = |b: &Breakdown| b.wire_server_think_ns.unwrap_or(b.phases.span_ns);
        self.slowest.sort_by_key(|b| std::cmp::Reverse(key(b)));
        self.slowest.truncate(SLOWEST);
        if self.phases.is_empty() {
            self.phases = phase_texts();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::event::Library;

    /// Short-lived clients (a curl each) make a row each: the soak's agent held 1.7 GiB
    /// with 1,000 such rows, every row's histograms as arrays of counts (~2 MiB a row).
    /// Rows idle since the last sweep are held encoded, and keep their values.
    #[test]
    fn rows_of_processes_gone_are_held_encoded_and_keep_their_values() {
        let mut agg = ProbeAggregate::default();
        for pid in 0..300u32 {
            let mut r = record(Role::Client, 1_000, 500_000 + u64::from(pid), 20_000);
            (r.pid, r.comm) = (1000 + pid, "curl".into());
            agg.add(&r, None);
        }
        let held: usize = agg
            .by_process
            .values()
            .flat_map(|row| row.phases.iter().flatten())
            .map(LatencyHistogram::heap_bytes)
            .sum();
        assert_eq!(agg.by_process.len(), 300);
        // At most the last two sweeps' rows (32) hold arrays of counts.
        assert!(held < 40 << 20, "{held} bytes held by 300 rows");
        let fresh = {
            let mut h = LatencyHistogram::new();
            h.record_ns(500_000).unwrap();
            h.heap_bytes()
        };
        assert!(
            held < 300 * 12 * fresh / 4,
            "{held} against {fresh} per histogram"
        );
        let report = agg.report();
        let row = &report.by_process["curl (pid 1000) client"];
        assert_eq!(row.handshakes, 1);
        assert_eq!(row.phases["work"].quantiles.p50_ns / 1000, 500);
    }

    fn record(role: Role, first: u64, work: u64, wait: u64) -> ProbeRecord {
        ProbeRecord {
            workload: None,
            pid: 7,
            tid: 8,
            comm: "nginx".into(),
            role,
            library: Library::OpenSsl,
            result: HandshakeResult::Ok,
            fd: 3,
            local: Some("127.0.0.1:443".parse().unwrap()),
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            established_ns: Some(100),
            socket_ns: Some(200),
            first_call_ns: first,
            end_ns: first + work + wait,
            work_ns: work,
            waiting_ns: wait,
            on_cpu_ns: Some(work / 4),
            parts: [None, Some(work / 10), Some(work / 5), None, Some(0)],
            trust_before_ns: Some(7),
            signature_len: Some(71),
            signature_kind: None,
            group: None,
            calls: 2,
            whole: true,
            split: true,
        }
    }

    #[test]
    fn phases_land_in_their_rows_and_merge_exactly() {
        let mut a = ProbeAggregate::default();
        let w = WireHandshake {
            client: "127.0.0.1:5000".parse().unwrap(),
            server: "127.0.0.1:443".parse().unwrap(),
            kind: "full",
            server_think_ns: Some(5_000_000),
            sni: Some("localhost".into()),
            start_ns: None,
            established_ns: None,
        };
        a.add(
            &record(Role::Server, 20_000_200, 1_000_000, 40_000_000),
            Some(&w),
        );
        a.add(&record(Role::Server, 300, 2_000_000, 0), None);
        let r = a.report();
        let all = &r.by_kind["server all"];
        assert_eq!(all.handshakes, 2);
        assert_eq!(r.by_kind["server full"].handshakes, 1);
        assert_eq!(all.phases["accept_queue"].hdr.len(), 2);
        let q = &r.by_kind["server full"].phases["until_first_call"];
        // 20 ms, within the histogram's 3 significant digits.
        let us = q.hdr.quantile(0.5).as_micros();
        assert!((19_980..=20_020).contains(&us), "{us} µs");
        assert_eq!(r.by_process["nginx (pid 7) server"].handshakes, 2);
        assert_eq!(r.by_sni["localhost server"].handshakes, 1);
        assert_eq!(r.slowest.len(), 2);
        assert_eq!(r.slowest[0].wire_server_think_ns, Some(5_000_000));
        assert_eq!(r.counts.matched_wire, 1);
        let mut m = r.clone();
        m.merge(&r).unwrap();
        assert_eq!(m.by_kind["server all"].handshakes, 4);
        assert_eq!(m.by_kind["server all"].phases["work"].hdr.len(), 4);
        // work = on CPU + blocked, per handshake.
        let b = &r.slowest[1].phases;
        assert_eq!(b.work_ns, Some(2_000_000));
        assert_eq!(
            (b.on_cpu_ns, b.blocked_ns),
            (Some(500_000), Some(1_500_000))
        );
        assert_eq!(m.by_kind["server all"].phases["blocked"].hdr.len(), 4);
        // Work's parts, the rest what they leave; a part not measured is absent.
        assert_eq!(
            (b.verification_ns, b.signature_ns, b.key_exchange_ns),
            (Some(200_000), Some(400_000), None)
        );
        assert_eq!(
            (b.trust_load_ns, b.trust_load_before_ns),
            (Some(0), Some(7))
        );
        assert_eq!(b.rest_ns, Some(1_400_000));
        assert_eq!(b.signature_key.as_deref(), Some("ecdsa-p256"));
        let phases = &m.by_kind["server all"].phases;
        assert_eq!(phases["signature"].hdr.len(), 4);
        assert!(!phases.contains_key("key_exchange") && !phases.contains_key("callback"));
        assert_eq!(m.counts.matched_wire, 2);
        let mut t = r.clone();
        t.trust_loads.insert(
            "curl (pid 9)".into(),
            TrustLoads {
                loads: 1,
                total_ns: 30,
            },
        );
        let mut u = t.clone();
        u.merge(&t).unwrap();
        assert_eq!(u.trust_loads["curl (pid 9)"].total_ns, 60);
    }
}
