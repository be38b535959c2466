//! tlsperf: find out why TLS handshakes are slow, phase by phase, and prove the fix.
//!
//! The crate is a library with a thin command-line front end (`src/main.rs`, `src/cli/`).
//! Data flows one way: resolved options → engine → typed results (documents) → report
//! sinks. Engines never print; the CLI chooses between human text and JSON. Nothing
//! climbs back up: an engine never imports the CLI or the report, `stats` and `doc` import
//! no engine, and no module imports one that imports it back.
//!
//! Engines:
//! - [`quic_watch`]: what a QUIC connection's TLS handshake did (full, resumed, 0-RTT,
//!   group, suite, and the client's moments), read from the handshake messages rustls
//!   hands quinn; used by `serve --quic` and `handshake --http3`.
//! - [`pki`]: realistic test PKIs (root → intermediate → server/client leaf), OCSP
//!   responses and synthetic trust bundles, built with rcgen.
//! - [`trust`]: trust-store discovery, timed loading, analysis and trimming, the shared
//!   pre-warmed store.
//! - [`verify`]: the indexed chain verifier whose cost does not grow with the store, and
//!   its benchmark.
//! - [`tls`]: what server and client configurations share: the crypto provider (a value
//!   passed into every config), TLS versions and groups by name, session-ticket keys,
//!   key-share pools, and the verifier that skips certificate checks (`tls::danger`).
//! - [`server`]: `tlsperf serve`: its rustls configuration (`server::config`), the
//!   reference HTTPS server on three HTTP stacks, and its metrics.
//! - [`client`]: one connection timed from inside (phases stamped at the system calls),
//!   its rustls configuration (`client::config`) and verifiers.
//! - [`handshake`]: `tlsperf handshake`: N sequential exchanges with phase percentiles.
//! - [`load`]: `tlsperf load`: the closed- and open-loop load generator and its result.
//! - [`link`]: `--link`: an emulated network path (RTT, jitter, rate, loss, queue) of real
//!   kernel TCP between a client namespace and the host, through a userspace delay line.
//! - [`capacity`]: `tlsperf capacity`: the highest rate a server sustains within an
//!   objective, searched in steps of `load` runs.
//! - [`observe`]: `tlsperf observe`: passive handshake analysis from packets (a live
//!   interface or a capture file), no part taken in the handshakes.
//! - [`lab`]: the one-command lab: a matrix of server and client configurations on
//!   loopback, compared with Welch's t-test.
//! - [`crypto`]: `tlsperf crypto`, signature, key-exchange and in-memory handshake
//!   micro-benchmarks per implementation (aws-lc-rs, ring, RustCrypto) on the wall clock.
//!
//! Below the engines:
//! - [`stats`]: HDR histograms, summaries, Tukey's IQR filter, Welch's t-test, the one
//!   row-comparison engine.
//! - [`doc`]: result documents: one schema per type, sniffed, read and written atomically,
//!   one error type.
//! - [`compare`]: `tlsperf compare` over any two documents of one kind (or sample
//!   files): the registry of comparable document kinds.
//! - [`report`]: human-readable renderings of results (terminal text per command, and the
//!   lab's Markdown and HTML report).
//!
//! Shared ground:
//! - [`files`]: atomic file output (temp file + rename, private modes for keys) and the
//!   one bounded reader of every file the user names.
//! - [`error`]: how failures are classified (input, run-time, interrupted) into exit codes.
//! - [`when`]: user-given points in time (RFC 3339).
//! - [`duration`] and [`ratio`]: the one syntax of every duration (`500ms`, `10s`, `1h`)
//!   and every ratio (`5%` or `0.05`) a flag or a spec field (`--link`, `--slo`) takes.
//! - [`der`]: the few DER fields tlsperf reads itself (lengths, names, key ids).
//! - `cli` (hidden): the command-line front end, one file per command.
//! - `fuzzing` (hidden): the bodies of the fuzz targets in `fuzz/`, which
//!   `tests/fuzz_corpus.rs` replays their seed corpora through.

pub mod capacity;
pub mod compare;
pub mod crypto;
pub mod doc;
pub mod duration;
pub mod error;
pub mod files;
pub mod handshake;
pub mod lab;
pub mod link;
pub mod load;
pub mod observe;
pub mod pki;
pub mod probes;
pub mod quic_watch;
pub mod ratio;
pub mod report;
pub mod server;
pub mod stats;
pub mod sync;
pub mod tls;
pub mod trust;
pub mod verify;
pub mod when;

#[doc(hidden)]
pub mod cli;
pub mod client;
pub mod der;
#[doc(hidden)]
pub mod fuzzing;

pub use error::ErrorClass;
