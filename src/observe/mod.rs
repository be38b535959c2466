//! `tlsperf observe`: passive handshake analysis of any TLS stack from its packets,
//! without decrypting anything. Per TCP connection, the handshake's timeline (TCP
//! connect, server think, the server's flight, client think, first application byte),
//! its kind (`full`, `full-hrr`, `resumed`, `0rtt`) and parameters; aggregated into HDR
//! histograms per phase per kind with breakdowns and failures.
//!
//! Modules, in the order a packet goes through them:
//! - [`source`]: capture files (pcap, pcapng) → timestamped frames.
//! - [`decode`]: a frame → a TCP segment (`etherparse`).
//! - [`flow`]: TCP reassembly and the bounded flow table.
//! - [`tls`]: TLS records and handshake messages (`tls-parser`).
//! - [`timeline`]: one connection's handshake timeline, kind and phases.
//! - [`aggregate`]: outcomes → an [`Observation`].
//! - [`analyzer`]: the pipeline, frame in, observation out.
//! - [`result`]: the result document, its merge and its reader.

pub mod aggregate;
pub mod analyzer;
pub mod decode;
pub mod flow;
pub mod result;
pub mod source;
pub mod timeline;
pub mod tls;

use std::path::{Path, PathBuf};

use crate::error::{Classify, ErrorClass, io_input_class};
pub use analyzer::Analyzer;
pub use flow::Limits;
pub use result::{Observation, SCHEMA};

/// What to observe and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// TCP ports observed (either end); every port when empty.
    pub ports: Vec<u16>,
    /// Flow-table limits.
    pub limits: Limits,
}

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
}

impl Classify for ObserveError {
    fn class(&self) -> ErrorClass {
        match self {
            ObserveError::Open { source, .. } => io_input_class(source),
            _ => ErrorClass::Input,
        }
    }
}

/// Analyzes the capture file at `path` (pcap or pcapng). A file cut short in its last
/// frame is read up to there; a warning is logged.
pub fn observe_file(path: &Path, opts: &Options) -> Result<Observation, ObserveError> {
    let mut file = source::CaptureFile::open(path)?;
    let mut analyzer = Analyzer::new(
        vec![result::Source {
            kind: "pcap".into(),
            name: path.display().to_string(),
        }],
        opts.ports.clone(),
        opts.limits,
    );
    let end = file.for_each(|ns, link, data| analyzer.frame(ns, link, data))?;
    if end == source::End::Truncated {
        tracing::warn!(
            "{}: the capture ends in the middle of a frame; read up to there",
            path.display()
        );
    }
    Ok(analyzer.finish())
}
