//! `tlsperf observe`: passive handshake analysis of any TLS stack from its packets,
//! without decrypting anything but QUIC's Initial packets (whose keys every observer can
//! derive). Per TCP connection, the handshake's timeline (TCP
//! connect, server think, the server's flight, client think, first application byte, the
//! server's first byte after the request),
//! its kind (`full`, `full-hrr`, `resumed`, `0rtt`) and parameters; aggregated into HDR
//! histograms per phase per kind with breakdowns and failures.
//!
//! Modules, in the order a packet goes through them:
//! - [`source`]: capture files (pcap, pcapng) → timestamped frames.
//! - [`live`]: live capture (AF_PACKET ring with a kernel filter) → timestamped frames.
//! - [`ebpf`]: the eBPF kernel filter (ports; segments of connections whose analysis is
//!   over dropped in the kernel).
//! - [`decode`]: a frame → a TCP segment (`etherparse`).
//! - [`flow`]: TCP reassembly and the bounded flow table.
//! - [`tls`]: TLS records and handshake messages (`tls-parser`).
//! - [`timeline`]: one connection's handshake timeline, kind and phases.
//! - [`quic`]: a UDP datagram → QUIC packets; Initial packets opened (rustls's QUIC
//!   Initial keys).
//! - [`quic_flow`]: QUIC connections (by connection ID and address), their Initial
//!   CRYPTO streams read with [`tls`], each one's handshake timeline, kind and phases.
//! - [`process`]: local endpoints → processes (live capture).
//! - [`aggregate`]: outcomes → an [`Observation`].
//! - [`metrics`]: outcomes → Prometheus metrics (live capture).
//! - [`otlp`]: the same metrics pushed to an OpenTelemetry collector (`--otlp`).
//! - [`connections`]: completed handshakes → JSON Lines (`--handshake-log FILE`).
//! - [`window`]: handshakes → one record per closed window per series (`--window`).
//! - [`baseline`]: closed windows → baselines, and anomaly events naming the phase that
//!   moved.
//! - [`long_baseline`]: closed windows → each series' headline over the last 24 hours
//!   (P99.9 and p50–p99), as one merged histogram per hour.
//! - [`group`]: the label that splits a series by executable, pid, cgroup, port or SNI
//!   (`--group-by`).
//! - [`canary`]: each closed window's groups compared with the stable one (`--group-by`).
//! - [`watch`]: the windows, baselines and their sinks in a live run (`--windows FILE`,
//!   `--state FILE`, the metrics).
//! - [`analyzer`]: the analysis, frame in, observation out.
//! - [`run`]: the read loops of each source (a capture file, a live capture, the probes).
//! - [`pipeline`]: the engine: sources → analysis and the join with the probes → sinks
//!   (the document, the connections stream, Prometheus), opened, run and closed in order.
//! - [`result`]: the result document, its merge and its reader.
//! - [`compare`]: what two observations compare on (`tlsperf compare`).
//! - `xorshift` (tests only): the pseudo-random garbage the modules' tests feed them.

pub mod aggregate;
pub mod analyzer;
pub mod audit;
pub mod baseline;
pub mod canary;
pub mod compare;
pub mod connections;
pub mod decode;
pub mod ebpf;
pub mod flow;
pub mod group;
pub mod live;
pub mod long_baseline;
pub mod metrics;
pub mod otlp;
pub mod pipeline;
pub mod pressure;
pub mod process;
pub mod quic;
pub mod quic_flow;
pub mod result;
pub mod run;
pub mod source;
pub mod timeline;
pub mod tls;
pub mod watch;
pub mod window;
#[cfg(test)]
mod xorshift;

use std::path::PathBuf;

use crate::error::{Classify, ErrorClass, io_input_class};
pub use analyzer::Analyzer;
pub use flow::Limits;
pub use pipeline::{Capture, Controls, Finished, Pipeline, PipelineError, Progress, Setup};
pub use result::{Observation, SCHEMA};

/// A capture that could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObserveError {
    /// The file could not be opened or read.
    #[error("cannot read capture file {}", .path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a pcap or pcapng file.
    #[error("{} is not a pcap or pcapng capture: {reason}", .path.display())]
    NotACapture {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A link layer tlsperf does not read.
    #[error(
        "{}: link type {linktype} is not supported (Ethernet, Linux cooked v1/v2, raw IP \
         and BSD loopback are; capture with tcpdump -i IF)",
        .path.display()
    )]
    UnsupportedLink {
        /// The file.
        path: PathBuf,
        /// The pcap LINKTYPE value.
        linktype: u32,
    },
    /// A malformed frame record.
    #[error("{}: frame {frame} is malformed: {reason}", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The frame's position (1-based).
        frame: u64,
        /// Why.
        reason: String,
    },
    /// No such network interface.
    #[error("no network interface named '{interface}' (see ip link)")]
    NoInterface {
        /// The name given.
        interface: String,
    },
    /// An interface whose link layer tlsperf does not read.
    #[error(
        "interface {interface} has link type {arphrd} (ARPHRD); tlsperf reads Ethernet, \
         loopback and raw-IP interfaces"
    )]
    UnsupportedInterface {
        /// The interface.
        interface: String,
        /// Its ARPHRD type.
        arphrd: String,
    },
    /// Live capture needs CAP_NET_RAW.
    #[error(
        "capturing on {interface} needs the CAP_NET_RAW capability: run as root, or grant \
         it (setcap cap_net_raw+ep $(command -v tlsperf))"
    )]
    NeedCapNetRaw {
        /// The interface.
        interface: String,
    },
    /// More ports than the kernel filter takes.
    #[error(
        "{count} ports given; at most {} can be observed live",
        live::MAX_PORTS
    )]
    TooManyPorts {
        /// How many were given.
        count: usize,
    },
    /// The capture socket failed.
    #[error("live capture on {interface} failed")]
    Live {
        /// The interface.
        interface: String,
        /// Why.
        source: std::io::Error,
    },
}

impl Classify for ObserveError {
    fn class(&self) -> ErrorClass {
        match self {
            ObserveError::Open { source, .. } => io_input_class(source),
            ObserveError::Live { .. } => ErrorClass::Runtime,
            _ => ErrorClass::Input,
        }
    }
}
