//! The `tlsperf observe` result document (`tlsperf-observe/1`): counts, HDR histograms per
//! phase per handshake kind, breakdowns, failures. Histograms are serialized exactly, so
//! observations from several capture points or time windows merge without loss
//! ([`merge`]: counts add, histograms merge). Read back with [`crate::doc::parse`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Classify, ErrorClass};
use crate::stats::HistogramError;

/// Schema name and version written in every observation.
pub const SCHEMA: &str = "tlsperf-observe/1";

/// Every phase, in timeline order, with where its timestamps are exact.
pub const PHASES: [(&str, &str); 7] = [
    (
        "connect",
        "either host: SYN → the client's ACK of the SYN-ACK, as seen from the capture point",
    ),
    (
        "server_think",
        "exact on the server host: ClientHello complete → ServerHello's first byte",
    ),
    (
        "server_flight",
        "exact on the server host: ServerHello → the end of the server's flight",
    ),
    (
        "client_think",
        "exact on the client host: end of the server's flight → the client's Finished",
    ),
    (
        "tls",
        "either host: first ClientHello → the client's Finished",
    ),
    (
        "first_app_byte",
        "exact on the client host: SYN → the client's first application-data byte",
    ),
    (
        "server_first_byte",
        "exact on the server host: the client's first application-data record after its \
         Finished complete → the server's first application-data byte after it, TLS 1.3 \
         tickets left out (time to first byte; not with 0-RTT; absent from documents \
         written before it existed)",
    ),
];

/// Every phase of a QUIC handshake (the `quic` part of an observation), in timeline order,
/// with where its timestamps are taken: the capture time of the datagram carrying the
/// packet named (see [`super::quic_flow`]).
pub const QUIC_PHASES: [(&str, &str); 6] = [
    (
        "server_think",
        "exact on the server host: the datagram completing the ClientHello (the one the \
         server answered, after a Retry or a HelloRetryRequest) → the server's datagram \
         completing its ServerHello (Initial packets, opened with the Initial keys)",
    ),
    (
        "server_flight",
        "exact on the server host: ServerHello → the server's last datagram carrying an \
         Initial or Handshake packet before the client's first Handshake packet",
    ),
    (
        "client_think",
        "exact on the client host: end of the server's flight → the client's first \
         Handshake packet (its Finished)",
    ),
    (
        "tls",
        "either host: the first ClientHello complete → the client's first Handshake \
         packet (its Finished)",
    ),
    (
        "first_app_byte",
        "exact on the client host: the client's first Initial → its first 1-RTT \
         (short-header) packet, or with 0-RTT its first 0-RTT packet",
    ),
    (
        "server_first_byte",
        "exact on the client host: the client's Finished (its first Handshake packet) → \
         the server's first 1-RTT (short-header) packet after it: the handshake \
         confirmed (HANDSHAKE_DONE) or the answer",
    ),
];

pub use crate::stats::histogram::Dist;

/// Sizes in bytes: count, sum and extremes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bytes {
    /// Number of values.
    pub count: u64,
    /// Their sum.
    pub total: u64,
    /// The smallest.
    pub min: u64,
    /// The largest.
    pub max: u64,
}

impl Bytes {
    /// Adds one value.
    pub fn add(&mut self, v: u64) {
        self.min = if self.count == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.count += 1;
        self.total = self.total.saturating_add(v);
    }

    /// Adds `o`'s values.
    pub fn merge(&mut self, o: &Bytes) {
        if o.count == 0 {
            return;
        }
        self.min = if self.count == 0 {
            o.min
        } else {
            self.min.min(o.min)
        };
        self.max = self.max.max(o.max);
        self.count = self.count.saturating_add(o.count);
        self.total = self.total.saturating_add(o.total);
    }
}

/// Handshakes of one kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KindStats {
    /// Completed handshakes.
    pub count: u64,
    /// Of which after a HelloRetryRequest: all of `full-hrr`, and resumptions after one
    /// (counted as `resumed`, as `tlsperf serve`'s /stats does). Absent (0) in documents
    /// written before it existed.
    #[serde(default)]
    pub hrr: u64,
    /// QUIC: of which after a Retry (address validation: one more round trip). Absent
    /// (0) when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry: u64,
    /// Per phase (see [`PHASES`]), the handshakes where both of its boundaries were
    /// captured. Read back, at most [`MAX_KINDS`] entries.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_KINDS>")]
    pub phases: BTreeMap<String, Dist>,
    /// Size of the server's flight (record headers included).
    pub server_flight_bytes: Bytes,
}

/// One row of a breakdown (by SNI, server, version, group).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Row {
    /// Completed handshakes.
    pub handshakes: u64,
    /// Of which resumed (0-RTT included).
    pub resumed: u64,
    /// Of which after a HelloRetryRequest (full, or resumed after one).
    pub hrr: u64,
    /// Server think time.
    pub server_think: Dist,
    /// Client think time.
    pub client_think: Dist,
}

/// Resumption.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Resumption {
    /// Resumed handshakes (0-RTT included).
    pub resumed: u64,
    /// Resumed ÷ completed handshakes (0 when there are none).
    pub rate: f64,
    /// By how the session was found: `psk` (TLS 1.3), `ticket`, `session-id` (TLS 1.2).
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, 32>")]
    pub by_method: BTreeMap<String, u64>,
}

/// What the ClientHellos of the completed handshakes offered (the ClientHello a
/// handshake began with).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientHellos {
    /// Handshakes by the first protocol their ClientHello's ALPN extension offered (the
    /// one it prefers: `h2`, `http/1.1`, `h3`…), `(none)` without the extension; at most
    /// [`MAX_OFFER_ROWS`] rows, the rest in [`OTHER`].
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_OFFER_ROWS + 1 }>")]
    pub alpn: BTreeMap<String, u64>,
    /// Handshakes whose ClientHello offered each group in its supported_groups (one
    /// ClientHello counts under every group it lists; GREASE values left out); at most
    /// [`MAX_OFFER_ROWS`] rows, the rest in [`OTHER`].
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_OFFER_ROWS + 1 }>")]
    pub offered_groups: BTreeMap<String, u64>,
    /// Handshakes whose ClientHello offered a pre-shared key (a TLS 1.3 resumption).
    pub psk_offered: u64,
}

/// The most rows of [`ClientHellos`]' maps (their keys come from the clients).
pub const MAX_OFFER_ROWS: usize = 64;

impl ClientHellos {
    /// Counts `n` under `key` in `map`, or in [`OTHER`] beyond [`MAX_OFFER_ROWS`]
    /// (allocating a key only for its first count).
    pub fn count(map: &mut BTreeMap<String, u64>, key: &str, n: u64) {
        if let Some(v) = map.get_mut(key) {
            *v = v.saturating_add(n);
            return;
        }
        let key = if map.len() >= MAX_OFFER_ROWS {
            OTHER
        } else {
            key
        };
        let v = map.entry(key.to_string()).or_default();
        *v = v.saturating_add(n);
    }

    /// Adds `o`'s counts.
    pub fn merge(&mut self, o: &ClientHellos) {
        for (k, v) in &o.alpn {
            Self::count(&mut self.alpn, k, *v);
        }
        for (k, v) in &o.offered_groups {
            Self::count(&mut self.offered_groups, k, *v);
        }
        self.psk_offered = self.psk_offered.saturating_add(o.psk_offered);
    }
}

/// The most sources an observation lists (a merge of more counts the rest).
pub const MAX_SOURCES: usize = 10_000;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The most alert descriptions a failure table holds: every one a byte can name, and
/// `encrypted`.
pub const MAX_ALERTS: usize = 257;

/// Handshakes that began (a ClientHello) and did not complete.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Failures {
    /// By the first alert seen (its description; `encrypted` when it was).
    /// Read back, at most [`MAX_ALERTS`] entries.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_ALERTS>")]
    pub alerts: BTreeMap<String, u64>,
    /// Reset mid-handshake.
    pub reset: u64,
    /// Closed (FIN) mid-handshake.
    pub closed: u64,
    /// Still incomplete at the end of the capture or when evicted.
    pub incomplete: u64,
}

impl Failures {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.alerts.values().sum::<u64>() + self.reset + self.closed + self.incomplete
    }
}

/// What was captured.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Packets {
    /// Frames read.
    pub frames: u64,
    /// TCP segments on the observed ports.
    pub tcp_segments: u64,
    /// TCP segments on other ports.
    pub other_ports: u64,
    /// Frames that are not a TCP segment (other protocols, fragments, cut short before
    /// the end of their TCP header).
    pub not_tcp: u64,
    /// Frames dropped by the kernel before they reached tlsperf (live capture only).
    pub kernel_drops: u64,
    /// Frames cut short by the capture's snap length (analyzed as far as they go; the
    /// rest of their payload is a gap in its stream). Absent (0) in documents written
    /// before it existed.
    #[serde(default)]
    pub cut_short: u64,
    /// TCP segments whose timestamp jumped more than 2 s from the capture's clock and
    /// was not confirmed by the next ones: analyzed, but not used to evict flows.
    /// Absent (0) in documents written before it existed.
    #[serde(default)]
    pub clock_outliers: u64,
    /// TCP segments the eBPF capture filter dropped in the kernel: those without SYN,
    /// FIN or RST of connections whose analysis read no more payload (live capture with
    /// the eBPF filter only; not in `frames`). Absent (0) in documents written before it
    /// existed.
    #[serde(default)]
    pub kernel_filtered: u64,
    /// QUIC (the `quic` part of an observation only): its datagrams and packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicPackets>,
}

/// The UDP datagrams and QUIC packets of an observation's `quic` part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuicPackets {
    /// UDP datagrams on the observed ports (whole: a datagram cut by the snap length is
    /// not read).
    pub datagrams: u64,
    /// UDP datagrams on other ports.
    pub other_ports: u64,
    /// Datagrams on the ports that are not QUIC (nor a version other than 1 and 2).
    pub not_quic: u64,
    /// Datagrams of a QUIC version other than 1 and 2 (not read).
    pub other_version: u64,
    /// Datagrams of no connection tracked (whose client's first Initial was not
    /// captured, or of a connection over the cap).
    pub unknown_connection: u64,
    /// Initial packets.
    pub initial: u64,
    /// Initial packets of a tracked connection that did not open with its Initial keys.
    pub undecryptable: u64,
    /// 0-RTT packets.
    pub zero_rtt: u64,
    /// Handshake packets.
    pub handshake: u64,
    /// Retry packets.
    pub retry: u64,
    /// Version Negotiation packets.
    pub version_negotiation: u64,
    /// Short-header (1-RTT) packets.
    pub short: u64,
}

impl QuicPackets {
    /// Every count with its name.
    pub fn named(&self) -> [(&'static str, u64); 12] {
        [
            ("datagrams", self.datagrams),
            ("other_ports", self.other_ports),
            ("not_quic", self.not_quic),
            ("other_version", self.other_version),
            ("unknown_connection", self.unknown_connection),
            ("initial", self.initial),
            ("undecryptable", self.undecryptable),
            ("zero_rtt", self.zero_rtt),
            ("handshake", self.handshake),
            ("retry", self.retry),
            ("version_negotiation", self.version_negotiation),
            ("short", self.short),
        ]
    }

    /// Adds `o`'s counts.
    pub fn merge(&mut self, o: &QuicPackets) {
        let QuicPackets {
            datagrams,
            other_ports,
            not_quic,
            other_version,
            unknown_connection,
            initial,
            undecryptable,
            zero_rtt,
            handshake,
            retry,
            version_negotiation,
            short,
        } = self;
        for (x, y) in [
            (datagrams, o.datagrams),
            (other_ports, o.other_ports),
            (not_quic, o.not_quic),
            (other_version, o.other_version),
            (unknown_connection, o.unknown_connection),
            (initial, o.initial),
            (undecryptable, o.undecryptable),
            (zero_rtt, o.zero_rtt),
            (handshake, o.handshake),
            (retry, o.retry),
            (version_negotiation, o.version_negotiation),
            (short, o.short),
        ] {
            *x = x.saturating_add(y);
        }
    }

    /// Whether any QUIC packet was seen.
    pub fn any_quic(&self) -> bool {
        self.initial
            + self.zero_rtt
            + self.handshake
            + self.retry
            + self.version_negotiation
            + self.short
            > 0
    }
}

/// What became of the TCP connections seen.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Connections {
    /// Tracked from their SYN.
    pub tracked: u64,
    /// Already open when the capture began (no SYN captured): not analyzed.
    pub midstream: u64,
    /// With a completed TLS handshake.
    pub handshakes: u64,
    /// With a handshake that began and did not complete (see `failures`).
    pub failed: u64,
    /// Whose first bytes were not TLS.
    pub not_tls: u64,
    /// TLS that could not be followed (malformed records or hellos, a capture gap), or
    /// payload that never became readable (a gap before it that never filled).
    pub unparsed: u64,
    /// Without any payload segment.
    pub empty: u64,
    /// Evicted after being idle (counted above too, by what they had shown).
    pub evicted_idle: u64,
    /// Evicted half-open (a SYN, no payload).
    pub evicted_half_open: u64,
    /// Not tracked: the flow table was full.
    pub over_cap: u64,
    /// Given up, or not tracked, to keep the analysis within its memory budget
    /// (`--max-memory`).
    #[serde(default)]
    pub shed: u64,
    /// Bytes the connections given up held.
    #[serde(default)]
    pub shed_bytes: u64,
}

/// What the memory budget kept out of the histograms (`--max-memory`: a quarter of it
/// is theirs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramsShed {
    /// Handshakes kept out of their own breakdown row, once per breakdown (SNI, server,
    /// version, group, processes): counted in its `(other)` row instead, or in none of
    /// it when even that did not fit.
    pub rows: u64,
    /// Phase values left out of a histogram that would have had to grow beyond the
    /// budget to hold them (the handshake is still counted).
    pub values: u64,
}

impl HistogramsShed {
    /// Nothing was shed.
    pub fn is_empty(&self) -> bool {
        self.rows == 0 && self.values == 0
    }
}

/// Where an observation came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// `pcap` (a capture file) or `live` (an interface).
    pub kind: String,
    /// The file or the interface.
    pub name: String,
}

/// The result of `tlsperf observe` (or of merging several).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Observation {
    /// [`SCHEMA`].
    pub schema: String,
    /// `tcp` (TLS over TCP: this document's connections and handshakes), or `quic` for
    /// the `quic` part. Absent (`tcp`) in documents written before QUIC was observed.
    #[serde(default = "tcp")]
    pub transport: String,
    /// What was observed. Read back, at most [`MAX_SOURCES`] (a merge keeps the first
    /// ones and counts the rest in [`Observation::sources_left_out`]).
    #[serde(deserialize_with = "crate::doc::at_most_items::<_, _, MAX_SOURCES>")]
    pub sources: Vec<Source>,
    /// Sources merged in beyond [`MAX_SOURCES`], not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sources_left_out: u64,
    /// The TCP ports observed (empty: every port).
    pub ports: Vec<u16>,
    /// Capture time covered, seconds (first to last frame, a frame stamped far from its
    /// neighbours left out; a probes-only run's length). Merged: the time the windows
    /// cover together (their union), when each says when it began; the longest
    /// otherwise (documents written before `started_ns`).
    pub duration_s: f64,
    /// When the time covered began, ns since the Unix epoch (the first frame's capture
    /// time; a probes-only run's start). Merged: the earliest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
    /// The run was interrupted: a partial result.
    pub interrupted: bool,
    /// Packets.
    pub packets: Packets,
    /// Connections.
    pub connections: Connections,
    /// What the memory budget kept out of the histograms. Absent (nothing) in documents
    /// written before it existed.
    #[serde(default)]
    pub histograms_shed: HistogramsShed,
    /// Completed handshakes by kind: `all`, `full`, `full-hrr`, `resumed`, `0rtt` (the
    /// kinds of `tlsperf serve`'s /stats).
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_KINDS>")]
    pub handshakes: BTreeMap<String, KindStats>,
    /// Resumption.
    pub resumption: Resumption,
    /// What the completed handshakes' ClientHellos offered: ALPN, groups, a pre-shared
    /// key. Empty in documents written before it was added.
    #[serde(default)]
    pub client_hello: ClientHellos,
    /// Completed handshakes by SNI (`(none)` without one).
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>")]
    pub by_sni: BTreeMap<String, Row>,
    /// By server address:port.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>")]
    pub by_server: BTreeMap<String, Row>,
    /// By negotiated version.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>")]
    pub by_version: BTreeMap<String, Row>,
    /// By key-exchange group (`none`: a TLS 1.2 resumption).
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>")]
    pub by_group: BTreeMap<String, Row>,
    /// By the local process at the client end, "comm (pid N)" (live capture only).
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>"
    )]
    pub by_client_process: BTreeMap<String, Row>,
    /// By the local process at the server end (live capture only).
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most::<_, _, { MAX_ROWS + 1 }>"
    )]
    pub by_server_process: BTreeMap<String, Row>,
    /// Where `by_client_process` and `by_server_process` come from: `kernel` (exact, from
    /// the kernel's socket tracepoints) or `/proc` (exact where given; a local end not
    /// caught is `(unknown)`); absent when processes were not attributed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<String>,
    /// With the kernel's attribution: the records of local ends (and UDP binds) it could
    /// not hand over, its ring full (a host opening connections faster than observe read
    /// them); those ends' processes may be `(unknown)`. Absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attribution_lost: u64,
    /// Live capture: the kernel filter attached — `eBPF: …`, or `classic …` and why the
    /// eBPF one was not (merged: each different one, joined by ` | `); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_filter: Option<String>,
    /// Handshakes that did not complete.
    pub failures: Failures,
    /// Per phase, what it spans and from which side it is exact.
    #[serde(deserialize_with = "crate::doc::at_most::<_, _, MAX_KINDS>")]
    pub phases: BTreeMap<String, String>,
    /// Inside the processes (`--probes`): each handshake's waiting and work, by process
    /// and kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<crate::probes::ProbeReport>,
    /// QUIC on UDP on the same ports, as an observation of its own (`transport: quic`,
    /// its phases [`QUIC_PHASES`]); absent when no QUIC packet was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<Box<Observation>>,
}

fn tcp() -> String {
    "tcp".to_string()
}

/// The most rows a breakdown keeps; the rest are added up in [`OTHER`].
pub const MAX_ROWS: usize = 1000;

/// The most handshake kinds, and phases per kind, a document read back may hold
/// (tlsperf writes at most 7 of each).
pub const MAX_KINDS: usize = 32;

/// The row holding what is beyond [`MAX_ROWS`].
pub const OTHER: &str = "(other)";

impl Observation {
    /// An empty observation of `sources` on `ports`.
    pub fn new(sources: Vec<Source>, ports: Vec<u16>) -> Observation {
        Observation {
            schema: SCHEMA.to_string(),
            transport: tcp(),
            sources,
            sources_left_out: 0,
            ports,
            duration_s: 0.0,
            started_ns: None,
            interrupted: false,
            packets: Packets::default(),
            connections: Connections::default(),
            histograms_shed: HistogramsShed::default(),
            handshakes: BTreeMap::new(),
            resumption: Resumption::default(),
            client_hello: ClientHellos::default(),
            by_sni: BTreeMap::new(),
            by_server: BTreeMap::new(),
            by_version: BTreeMap::new(),
            by_group: BTreeMap::new(),
            by_client_process: BTreeMap::new(),
            by_server_process: BTreeMap::new(),
            attribution: None,
            attribution_lost: 0,
            kernel_filter: None,
            failures: Failures::default(),
            phases: PHASES
                .iter()
                .map(|(p, d)| (p.to_string(), d.to_string()))
                .collect(),
            probes: None,
            quic: None,
        }
    }

    /// An empty observation of QUIC (`transport: quic`, its phases) of `sources` on
    /// `ports`.
    pub fn new_quic(sources: Vec<Source>, ports: Vec<u16>) -> Observation {
        let mut o = Observation::new(sources, ports);
        o.transport = "quic".to_string();
        o.phases = QUIC_PHASES
            .iter()
            .map(|(p, d)| (p.to_string(), d.to_string()))
            .collect();
        o
    }

    /// Completed handshakes of `kind` (`all`, `full`…), 0 when none.
    pub fn count(&self, kind: &str) -> u64 {
        self.handshakes.get(kind).map_or(0, |k| k.count)
    }

    /// Recomputes what derives from counts (the resumption rate).
    pub fn refresh(&mut self) {
        let all = self.count("all");
        self.resumption.rate = if all == 0 {
            0.0
        } else {
            self.resumption.resumed as f64 / all as f64
        };
    }
}

/// Why observations could not be merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// Another schema.
    #[error("observation {index} has schema '{found}', expected '{SCHEMA}'")]
    Schema {
        /// Its position (1-based).
        index: usize,
        /// Its schema.
        found: String,
    },
    /// Nothing to merge.
    #[error("no observations to merge")]
    Empty,
    /// Histograms did not merge.
    #[error(transparent)]
    Histogram(#[from] HistogramError),
}

impl Classify for MergeError {
    fn class(&self) -> ErrorClass {
        match self {
            MergeError::Histogram(e) => e.class(),
            _ => ErrorClass::Input,
        }
    }
}

fn merge_map<T: Default>(
    into: &mut BTreeMap<String, T>,
    from: &BTreeMap<String, T>,
    mut f: impl FnMut(&mut T, &T) -> Result<(), HistogramError>,
) -> Result<(), HistogramError> {
    for (k, v) in from {
        if into.len() >= MAX_ROWS && !into.contains_key(k) {
            f(into.entry(OTHER.to_string()).or_default(), v)?;
        } else {
            f(into.entry(k.clone()).or_default(), v)?;
        }
    }
    Ok(())
}

fn merge_row(a: &mut Row, b: &Row) -> Result<(), HistogramError> {
    a.handshakes = a.handshakes.saturating_add(b.handshakes);
    a.resumed = a.resumed.saturating_add(b.resumed);
    a.hrr = a.hrr.saturating_add(b.hrr);
    a.server_think.merge(&b.server_think)?;
    a.client_think.merge(&b.client_think)
}

/// The time `all` cover together and where it begins: the union of their windows when
/// each says when it began (consecutive windows add up, simultaneous ones count once),
/// else the longest.
fn covered(all: &[Observation]) -> (f64, Option<u64>) {
    let longest = all.iter().map(|o| o.duration_s).fold(0.0, f64::max);
    let mut windows: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for o in all {
        let Some(start) = o.started_ns else {
            return (longest, None);
        };
        let len = (o.duration_s.max(0.0) * 1e9) as u64;
        windows.push((start, start.saturating_add(len)));
    }
    windows.sort_unstable();
    let mut total = 0u64;
    let mut open: Option<(u64, u64)> = None;
    for (s, e) in windows {
        match &mut open {
            Some((_, end)) if s <= *end => *end = (*end).max(e),
            _ => {
                if let Some((a, b)) = open {
                    total += b - a;
                }
                open = Some((s, e));
            }
        }
    }
    if let Some((a, b)) = open {
        total += b - a;
    }
    (
        total as f64 / 1e9,
        all.iter().filter_map(|o| o.started_ns).min(),
    )
}

/// Combines observations exactly: counts add up, histograms merge, the duration is the
/// union of the windows (the longest when one does not say when it began), sources are
/// listed in order.
pub fn merge(all: &[Observation]) -> Result<Observation, MergeError> {
    let first = all.first().ok_or(MergeError::Empty)?;
    for (i, o) in all.iter().enumerate() {
        if o.schema != SCHEMA {
            return Err(MergeError::Schema {
                index: i + 1,
                found: o.schema.clone(),
            });
        }
    }
    let mut m = Observation::new(Vec::new(), Vec::new());
    m.transport = first.transport.clone();
    // Every phase any of them describes (a document written before a phase existed does
    // not list it), the first one's wording kept.
    m.phases = first.phases.clone();
    for o in &all[1..] {
        for (k, v) in &o.phases {
            if !m.phases.contains_key(k) && m.phases.len() < MAX_KINDS {
                m.phases.insert(k.clone(), v.clone());
            }
        }
    }
    let (duration_s, started_ns) = covered(all);
    let mut ports_seen = std::collections::HashSet::new();
    for o in all {
        for s in &o.sources {
            if m.sources.len() < MAX_SOURCES {
                m.sources.push(s.clone());
            } else {
                m.sources_left_out = m.sources_left_out.saturating_add(1);
            }
        }
        m.sources_left_out = m.sources_left_out.saturating_add(o.sources_left_out);
        for p in &o.ports {
            if ports_seen.insert(*p) {
                m.ports.push(*p);
            }
        }
        m.interrupted |= o.interrupted;
        let (p, q) = (&mut m.packets, &o.packets);
        p.frames = p.frames.saturating_add(q.frames);
        p.tcp_segments = p.tcp_segments.saturating_add(q.tcp_segments);
        p.other_ports = p.other_ports.saturating_add(q.other_ports);
        p.not_tcp = p.not_tcp.saturating_add(q.not_tcp);
        p.kernel_drops = p.kernel_drops.saturating_add(q.kernel_drops);
        p.clock_outliers = p.clock_outliers.saturating_add(q.clock_outliers);
        p.cut_short = p.cut_short.saturating_add(q.cut_short);
        p.kernel_filtered = p.kernel_filtered.saturating_add(q.kernel_filtered);
        if let Some(qq) = &q.quic {
            p.quic.get_or_insert_with(QuicPackets::default).merge(qq);
        }
        let (c, d) = (&mut m.connections, &o.connections);
        for (x, y) in [
            (&mut c.tracked, d.tracked),
            (&mut c.midstream, d.midstream),
            (&mut c.handshakes, d.handshakes),
            (&mut c.failed, d.failed),
            (&mut c.not_tls, d.not_tls),
            (&mut c.unparsed, d.unparsed),
            (&mut c.empty, d.empty),
            (&mut c.evicted_idle, d.evicted_idle),
            (&mut c.evicted_half_open, d.evicted_half_open),
            (&mut c.over_cap, d.over_cap),
            (&mut c.shed, d.shed),
            (&mut c.shed_bytes, d.shed_bytes),
        ] {
            *x = x.saturating_add(y);
        }
        let (h, g) = (&mut m.histograms_shed, &o.histograms_shed);
        h.rows = h.rows.saturating_add(g.rows);
        h.values = h.values.saturating_add(g.values);
        for (kind, ks) in &o.handshakes {
            let into = m.handshakes.entry(kind.clone()).or_default();
            into.count = into.count.saturating_add(ks.count);
            into.hrr = into.hrr.saturating_add(ks.hrr);
            into.retry = into.retry.saturating_add(ks.retry);
            into.server_flight_bytes.merge(&ks.server_flight_bytes);
            for (phase, dist) in &ks.phases {
                into.phases.entry(phase.clone()).or_default().merge(dist)?;
            }
        }
        m.resumption.resumed = m.resumption.resumed.saturating_add(o.resumption.resumed);
        for (k, v) in &o.resumption.by_method {
            let e = m.resumption.by_method.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
        m.client_hello.merge(&o.client_hello);
        merge_map(&mut m.by_sni, &o.by_sni, merge_row)?;
        merge_map(&mut m.by_server, &o.by_server, merge_row)?;
        merge_map(&mut m.by_version, &o.by_version, merge_row)?;
        merge_map(&mut m.by_group, &o.by_group, merge_row)?;
        merge_map(&mut m.by_client_process, &o.by_client_process, merge_row)?;
        merge_map(&mut m.by_server_process, &o.by_server_process, merge_row)?;
        m.attribution = match (m.attribution.take(), &o.attribution) {
            (None, b) => b.clone(),
            (Some(a), Some(b)) if !a.split(", ").any(|x| x == b) => Some(format!("{a}, {b}")),
            (a, _) => a,
        };
        m.attribution_lost = m.attribution_lost.saturating_add(o.attribution_lost);
        m.kernel_filter = match (m.kernel_filter.take(), &o.kernel_filter) {
            (None, b) => b.clone(),
            (Some(a), Some(b)) if !a.split(" | ").any(|x| x == b) => Some(format!("{a} | {b}")),
            (a, _) => a,
        };
        for (k, v) in &o.failures.alerts {
            let e = m.failures.alerts.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
        m.failures.reset = m.failures.reset.saturating_add(o.failures.reset);
        m.failures.closed = m.failures.closed.saturating_add(o.failures.closed);
        m.failures.incomplete = m.failures.incomplete.saturating_add(o.failures.incomplete);
        if let Some(p) = &o.probes {
            m.probes.get_or_insert_with(Default::default).merge(p)?;
        }
    }
    // One observation of every port makes the merge one of every port (an empty list),
    // not one of the ports the others named.
    if all.iter().any(|o| o.ports.is_empty()) {
        m.ports.clear();
    }
    let quic: Vec<Observation> = all
        .iter()
        .filter_map(|o| o.quic.as_deref().cloned())
        .collect();
    if !quic.is_empty() {
        let mut q = merge(&quic)?;
        q.sources = m.sources.clone();
        q.sources_left_out = m.sources_left_out;
        q.ports = m.ports.clone();
        m.quic = Some(Box::new(q));
    }
    m.refresh();
    m.duration_s = duration_s;
    m.started_ns = started_ns;
    Ok(m)
}

/// The largest count an observation may hold: 2^53, a handshake, packet or record every
/// nanosecond for 104 days (and the largest integer a JSON reader holds exactly). Beyond
/// it a document was not written by a run: it is refused before it is merged or compared
/// (2^64 − 1 merged and printed as 18446744073709551615).
pub const MAX_COUNT: u64 = 1 << 53;

impl Observation {
    /// [`MAX_COUNT`] for every count, and the kinds of handshake adding up to no more
    /// than `all`.
    fn counts_possible(&self) -> Result<(), String> {
        let check = |what: String, n: u64| -> Result<(), String> {
            if n > MAX_COUNT {
                return Err(format!(
                    "{what} {n} is more than any run counts (at most 2^53)"
                ));
            }
            Ok(())
        };
        let p = &self.packets;
        for (what, n) in [
            ("frames", p.frames),
            ("tcp_segments", p.tcp_segments),
            ("other_ports", p.other_ports),
            ("not_tcp", p.not_tcp),
            ("kernel_drops", p.kernel_drops),
            ("clock_outliers", p.clock_outliers),
            ("cut_short", p.cut_short),
            ("kernel_filtered", p.kernel_filtered),
        ] {
            check(format!("packets.{what}"), n)?;
        }
        if let Some(q) = &p.quic {
            for (what, n) in q.named() {
                check(format!("packets.quic.{what}"), n)?;
            }
        }
        let c = &self.connections;
        for (what, n) in [
            ("tracked", c.tracked),
            ("midstream", c.midstream),
            ("handshakes", c.handshakes),
            ("failed", c.failed),
            ("not_tls", c.not_tls),
            ("unparsed", c.unparsed),
            ("empty", c.empty),
        ] {
            check(format!("connections.{what}"), n)?;
        }
        for (kind, k) in &self.handshakes {
            check(format!("handshakes.{kind}.count"), k.count)?;
        }
        if let Some(all) = self.handshakes.get("all") {
            let kinds = self
                .handshakes
                .iter()
                .filter(|(kind, _)| kind.as_str() != "all")
                .try_fold(0u64, |a, (_, k)| a.checked_add(k.count));
            if kinds.is_none_or(|n| n > all.count) {
                return Err(format!(
                    "the kinds of handshake add up to more than the {} of handshakes.all",
                    all.count
                ));
            }
        }
        if let Some(probes) = &self.probes {
            let n = &probes.counts;
            for (what, v) in [
                ("started", n.started),
                ("emitted", n.emitted),
                ("received", n.received),
                ("lost", n.lost),
                ("dropped", n.dropped),
                ("table_full", n.table_full),
                ("matched_wire", n.matched_wire),
                ("unmatched_probes", n.unmatched_probes),
                ("unmatched_wire", n.unmatched_wire),
                ("before_attach", n.before_attach),
                ("in_progress_at_end", n.in_progress_at_end),
                ("unsplit", n.unsplit),
            ] {
                check(format!("probes.counts.{what}"), v)?;
            }
        }
        Ok(())
    }
}

impl crate::doc::Document for Observation {
    const SCHEMA: &'static str = SCHEMA;
    const NAME: &'static str = "tlsperf observe result";

    /// Refuses what no capture can have given: a duration out of range, a count beyond
    /// [`MAX_COUNT`], kinds of handshake adding up to more than `all`, more resumed or
    /// HelloRetryRequest handshakes than handshakes, distributions that do not hold what
    /// they say or hold more handshakes than their row, a rate outside 0..=1.
    fn validate(&self) -> Result<(), String> {
        const MAX_DURATION_S: f64 = 366.0 * 86_400.0;
        if !(self.duration_s.is_finite() && (0.0..=MAX_DURATION_S).contains(&self.duration_s)) {
            return Err(format!(
                "duration_s {:e} is not within 0 s ..= 1 year",
                self.duration_s
            ));
        }
        self.counts_possible()?;
        match (self.transport.as_str(), &self.quic) {
            ("tcp", Some(q)) => {
                if q.quic.is_some() || q.transport != "quic" {
                    return Err("quic: its transport must be quic, without a quic part".into());
                }
                crate::doc::Document::validate(q.as_ref()).map_err(|e| format!("quic: {e}"))?;
            }
            ("tcp" | "quic", None) => {}
            (t, _) => {
                return Err(format!(
                    "transport '{t}' is not tcp (nor quic, for the quic part alone)"
                ));
            }
        }
        let dist = |what: &str, d: &Dist, most: u64| -> Result<(), String> {
            d.check().map_err(|why| format!("{what}: {why}"))?;
            if d.quantiles.count > most {
                return Err(format!(
                    "{what} holds {} values, more than its {most} handshakes",
                    d.quantiles.count
                ));
            }
            Ok(())
        };
        let part = |what: String, n: u64, of: u64| -> Result<(), String> {
            if n > of {
                return Err(format!("{what} {n} is more than its {of} handshakes"));
            }
            Ok(())
        };
        for (kind, k) in &self.handshakes {
            part(format!("handshakes.{kind}.hrr"), k.hrr, k.count)?;
            part(format!("handshakes.{kind}.retry"), k.retry, k.count)?;
            let b = &k.server_flight_bytes;
            part(
                format!("handshakes.{kind}.server_flight_bytes.count"),
                b.count,
                k.count,
            )?;
            if b.count > 0 && b.min > b.max {
                return Err(format!(
                    "handshakes.{kind}.server_flight_bytes: min {} is above max {}",
                    b.min, b.max
                ));
            }
            for (phase, d) in &k.phases {
                dist(&format!("handshakes.{kind}.phases.{phase}"), d, k.count)?;
            }
        }
        let tables = [
            ("by_sni", &self.by_sni),
            ("by_server", &self.by_server),
            ("by_version", &self.by_version),
            ("by_group", &self.by_group),
            ("by_client_process", &self.by_client_process),
            ("by_server_process", &self.by_server_process),
        ];
        for (table, rows) in tables {
            for (key, r) in rows {
                part(format!("{table}[{key:?}].resumed"), r.resumed, r.handshakes)?;
                part(format!("{table}[{key:?}].hrr"), r.hrr, r.handshakes)?;
                dist(
                    &format!("{table}[{key:?}].server_think"),
                    &r.server_think,
                    r.handshakes,
                )?;
                dist(
                    &format!("{table}[{key:?}].client_think"),
                    &r.client_think,
                    r.handshakes,
                )?;
            }
        }
        let all = self.count("all");
        part("resumption.resumed".into(), self.resumption.resumed, all)?;
        let methods = self
            .resumption
            .by_method
            .values()
            .try_fold(0u64, |a, b| a.checked_add(*b));
        if methods.is_none_or(|n| n > self.resumption.resumed) {
            return Err(format!(
                "resumption.by_method adds up to more than the {} resumed",
                self.resumption.resumed
            ));
        }
        if !(0.0..=1.0).contains(&self.resumption.rate) {
            return Err(format!(
                "resumption.rate {} is not within 0..=1",
                self.resumption.rate
            ));
        }
        if let Some(p) = &self.probes {
            for (table, rows) in [
                ("probes.by_kind", &p.by_kind),
                ("probes.by_process", &p.by_process),
                ("probes.by_sni", &p.by_sni),
            ] {
                for (key, r) in rows {
                    let most = r.handshakes.saturating_add(r.failed);
                    for (phase, d) in &r.phases {
                        dist(&format!("{table}[{key:?}].phases.{phase}"), d, most)?;
                    }
                    dist(
                        &format!("{table}[{key:?}].wire_server_think"),
                        &r.wire_server_think,
                        most,
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_with_an_every_port_observation_covers_every_port() {
        let every = Observation::new(Vec::new(), Vec::new());
        let one = Observation::new(Vec::new(), vec![18443]);
        let two = Observation::new(Vec::new(), vec![8443]);
        assert!(merge(&[every, one.clone()]).unwrap().ports.is_empty());
        assert_eq!(merge(&[one, two]).unwrap().ports, vec![18443, 8443]);
    }

    #[test]
    fn the_quic_part_merges_and_is_checked() {
        use crate::doc::Document;
        let with_quic = |n: u64, retry: u64| {
            let mut o = Observation::new(Vec::new(), vec![443]);
            let mut q = Observation::new_quic(Vec::new(), vec![443]);
            q.handshakes.insert(
                "all".into(),
                KindStats {
                    count: n,
                    retry,
                    ..KindStats::default()
                },
            );
            q.packets.quic = Some(QuicPackets {
                initial: 2 * n,
                ..QuicPackets::default()
            });
            o.quic = Some(Box::new(q));
            o
        };
        let tcp_only = Observation::new(Vec::new(), vec![443]);
        let m = merge(&[with_quic(3, 1), tcp_only, with_quic(4, 0)]).unwrap();
        let q = m.quic.as_ref().unwrap();
        assert_eq!(
            (m.transport.as_str(), q.transport.as_str()),
            ("tcp", "quic")
        );
        assert_eq!(q.count("all"), 7);
        assert_eq!(q.handshakes["all"].retry, 1);
        assert_eq!(q.packets.quic.unwrap().initial, 14);
        assert!(q.phases.contains_key("server_think") && !q.phases.contains_key("connect"));
        m.validate().unwrap();
        // Read back: the same document.
        let text = serde_json::to_string(&m).unwrap();
        let back: Observation = serde_json::from_str(&text).unwrap();
        assert_eq!(back.quic.unwrap().count("all"), 7);
        // More Retries than handshakes, another transport, a quic part in a quic part.
        let mut bad = with_quic(1, 2);
        assert!(bad.validate().unwrap_err().contains("retry"));
        bad = with_quic(1, 0);
        bad.transport = "udp".into();
        assert!(bad.validate().unwrap_err().contains("transport"));
        bad = with_quic(1, 0);
        let inner = with_quic(1, 0).quic;
        bad.quic.as_mut().unwrap().quic = inner;
        assert!(bad.validate().is_err());
        // Documents written before: transport tcp, no quic part.
        let mut old: serde_json::Value =
            serde_json::to_value(Observation::new(Vec::new(), Vec::new())).unwrap();
        old.as_object_mut().unwrap().remove("transport");
        let old: Observation = serde_json::from_value(old).unwrap();
        assert_eq!(old.transport, "tcp");
        assert!(old.quic.is_none());
    }

    #[test]
    fn merged_windows_cover_their_union() {
        let window = |start_s: u64, len_s: f64| {
            let mut o = Observation::new(Vec::new(), Vec::new());
            o.started_ns = Some(start_s * 1_000_000_000);
            o.duration_s = len_s;
            o
        };
        // Consecutive minutes add up; two capture points of the same minute count once.
        let m = merge(&[window(100, 60.0), window(160, 60.0), window(100, 60.0)]).unwrap();
        assert_eq!((m.duration_s, m.started_ns), (120.0, Some(100_000_000_000)));
        // Overlapping: 100..160 and 130..200.
        assert_eq!(
            merge(&[window(130, 70.0), window(100, 60.0)])
                .unwrap()
                .duration_s,
            100.0
        );
        // A document that does not say when it began: the longest, as before.
        let older = Observation::new(Vec::new(), Vec::new());
        let m = merge(&[window(100, 60.0), window(300, 30.0), older]).unwrap();
        assert_eq!((m.duration_s, m.started_ns), (60.0, None));
    }
}
