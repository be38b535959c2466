//! The trust-store lab: where clients find their roots, what loading them costs, what is in
//! a bundle, and the minimal bundle a set of servers needs.
//!
//! - [`discover`]: the probe chain (`SSL_CERT_FILE`, `SSL_CERT_DIR`, the standard paths).
//! - [`pem`]: fast, forgiving certificate decoding with per-block problems.
//! - [`mod@load`]: loading in timed layers (probe, I/O, PEM, anchors, X.509).
//! - [`measure`]: cold vs warm load timing with comparison rows (`trust load`).
//! - [`analyze`]: what is in a bundle (duplicates, twins, validity, weak keys…).
//! - [`trim`]: the minimal anchor set that verifies a set of chains.
//! - [`store`]: [`TrustStore`], and the shared pre-warmed system store.

pub mod analyze;
pub mod discover;
pub mod load;
pub mod measure;
pub mod pem;
pub mod store;
pub mod trim;

pub use discover::{Probe, ProbeEnv, probe};
pub use load::{FileProblem, LayerTimes, LoadStats, Loaded, Source, StoreLoadOptions, load};
pub use store::{SharedStore, TrustStore};

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Classify, ErrorClass, io_input_class};

/// A trust-store failure.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// No bundle file or certificate directory was found by the probe.
    #[error("no system CA bundle or certificate directory found (probed {})",
        .probed.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NoSystemStore {
        /// The candidates probed.
        probed: Vec<PathBuf>,
    },
    /// A file or directory could not be read.
    #[error("cannot read {}", .path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A bundle path is not a regular file.
    #[error("{}: not a regular file: it is {what}", .path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is instead (`a FIFO (named pipe)`, `a character device`, …).
        what: &'static str,
    },
    /// A file is larger than any bundle should be.
    #[error("{}: {size} bytes is larger than the {} MiB limit for a certificate file", .path.display(), load::MAX_FILE_SIZE >> 20)]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Nothing usable was found in the source.
    #[error("{origin}: no usable certificate{}", summarize(.problems))]
    NoCertificates {
        /// The source, for humans.
        origin: String,
        /// What went wrong, per file and block.
        problems: Vec<FileProblem>,
    },
    /// A chain file or fetched chain is unusable.
    #[error("chain {name}: {reason}")]
    BadChain {
        /// File or target.
        name: String,
        /// Why.
        reason: String,
    },
    /// A `host:port` target is malformed.
    #[error("invalid target '{target}': {reason}")]
    BadTarget {
        /// What was given.
        target: String,
        /// Why.
        reason: String,
    },
    /// A chain could not be fetched from a server.
    #[error("cannot fetch the chain of {target}: {reason}")]
    Fetch {
        /// `host:port`.
        target: String,
        /// Why.
        reason: String,
    },
    /// A chain does not verify against a store.
    #[error("chain {name} does not verify against {origin}: {reason}")]
    Unverifiable {
        /// File or target.
        name: String,
        /// The store.
        origin: String,
        /// rustls's reason.
        reason: String,
    },
    /// A fingerprint given to keep is not in the store.
    #[error("--also-keep {fingerprint}: no certificate with this SHA-256 fingerprint in {origin}")]
    UnknownFingerprint {
        /// What was given.
        fingerprint: String,
        /// The store.
        origin: String,
    },
    /// The source holds trust anchors only, not certificates.
    #[error(
        "{origin} holds trust anchors only (subject and key), not certificates: use a bundle file, a directory or the system store"
    )]
    AnchorsOnly {
        /// The store.
        origin: String,
    },
    /// The rustls verifier could not be built.
    #[error("cannot build a certificate verifier: {0}")]
    Verifier(String),
}

fn summarize(problems: &[FileProblem]) -> String {
    match problems {
        [] => String::new(),
        [one] => format!(" ({one})"),
        [first, rest @ ..] => format!(" ({first}; and {} more problems)", rest.len()),
    }
}

impl Classify for TrustError {
    fn class(&self) -> ErrorClass {
        match self {
            TrustError::Read { source, .. } => io_input_class(source),
            TrustError::NotRegular { .. }
            | TrustError::TooLarge { .. }
            | TrustError::NoCertificates { .. } => ErrorClass::Input,
            TrustError::BadChain { .. }
            | TrustError::BadTarget { .. }
            | TrustError::Unverifiable { .. }
            | TrustError::UnknownFingerprint { .. }
            | TrustError::AnchorsOnly { .. } => ErrorClass::Input,
            TrustError::NoSystemStore { .. }
            | TrustError::Verifier(_)
            | TrustError::Fetch { .. } => ErrorClass::Runtime,
        }
    }
}
