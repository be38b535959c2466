//! tlsperf: find out why TLS handshakes are slow, phase by phase, and prove the fix.
//!
//! The crate is a library with a thin command-line front end (`src/main.rs`, `src/cli/`).
//! Data flows one way: resolved configuration → engine → typed results → report sinks.
//! Engines never print; the CLI chooses between human text and JSON.
//!
//! Modules:
//! - [`pki`]: realistic test PKIs (root → intermediate → server/client leaf) and synthetic
//!   trust bundles, built with rcgen.
//! - [`stats`]: HDR histograms, summaries, Tukey's IQR filter, Welch's t-test, comparisons.
//! - [`trust`]: trust-store discovery, timed loading, the shared pre-warmed store.
//! - [`verify`]: the indexed chain verifier whose cost does not grow with the store.
//! - [`server`]: `tlsperf serve`, the reference HTTPS server and its metrics.
//! - [`tls`]: crypto provider choice (aws-lc-rs or ring), passed explicitly into configs.
//! - [`lab`]: the one-command lab: a matrix of server and client configurations on
//!   loopback, compared with Welch's t-test.
//! - [`report`]: human-readable renderings of results (text, and the lab's Markdown and
//!   HTML report).
//! - [`files`]: atomic file output (temp file + rename, private modes for keys) and the
//!   one bounded reader of every file the user names.
//! - [`doc`]: result documents: read once (pipes too), kind told by `schema`, written
//!   atomically.
//! - [`when`]: user-given points in time (RFC 3339).
//! - [`der`]: the few DER fields tlsperf reads itself (lengths, names, key ids).
//! - [`crypto`]: `tlsperf crypto`, signature and key-exchange micro-benchmarks per
//!   implementation (aws-lc-rs, ring, RustCrypto) on the wall clock.
//! - [`compare`]: `tlsperf compare` over any two documents of one kind (or sample
//!   files): the registry of comparable document kinds.
//! - [`observe`]: `tlsperf observe`, passive handshake analysis from packets (capture
//!   files or a live interface).
//! - [`error`]: how failures are classified into input errors and run-time failures.

pub mod capacity;
pub mod compare;
pub mod crypto;
pub mod doc;
pub mod error;
pub mod files;
pub mod handshake;
pub mod lab;
pub mod load;
pub mod observe;
pub mod pki;
pub mod report;
pub mod server;
pub mod stats;
pub mod tls;
pub mod trust;
pub mod verify;
pub mod when;

#[doc(hidden)]
pub mod cli;
pub mod client;
pub mod der;

pub use error::ErrorClass;
