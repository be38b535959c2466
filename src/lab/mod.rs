//! `tlsperf lab`: the one-command TLS performance lab. It prepares certificates and key
//! files in a work directory, starts `tlsperf serve` instances on loopback ports
//! ([`server`]), and runs the load generator against every configuration of the matrix
//! ([`matrix`]) — a new connection per request, rounds alternating between a group's
//! cells — then compares each cell with its group's baseline ([`result`]). The engine
//! never prints: it reports progress through a callback and returns a [`LabResult`]; the
//! report sinks render it.

pub mod capacity;
pub mod compare;
mod limits;
mod live;
pub mod matrix;
pub mod pin;
mod prepare;
mod recommend;
pub mod result;
mod run;
pub mod server;
mod summarize;

pub use run::run;
pub use summarize::versus;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::client::target::Target;
use crate::load::{self, Progress};
use crate::tls::choices::ConfigError;
pub use matrix::{Cell, Group, TicketKeys, Trust};
pub use pin::Pinning;
pub use result::LabResult;

/// How to run the lab.
#[derive(Debug, Clone)]
pub struct LabOptions {
    /// `--full`: longer rounds, more of them, RSA-4096.
    pub full: bool,
    /// Rounds per cell (≥ 3 gives Welch's test something to work with).
    pub rounds: usize,
    /// Load per round.
    pub round_time: Duration,
    /// Unrecorded load each cell gets before its first round (its server's first
    /// connections, allocations and page faults stay out of the rounds).
    pub warmup: Duration,
    /// Connection slots of the load generator.
    pub connections: usize,
    /// Groups to run, in order.
    pub groups: Vec<Group>,
    /// The `tlsperf` executable that runs the servers.
    pub exe: PathBuf,
    /// Where certificates and key files go (a temporary directory).
    pub work_dir: PathBuf,
    /// An external server: only the client-side groups run, against it.
    pub target: Option<External>,
    /// Where the load generator and the servers run ([`pin::pin_client`] before the
    /// runtime starts); the servers are started on `server_cpu`.
    pub pinning: Pinning,
    /// `--slo`: after its rounds, each configuration's capacity at this objective
    /// ([`capacity`]), each search at most `slo_time` long.
    pub slo: Option<crate::capacity::Slo>,
    /// The longest capacity search per configuration (`--slo-time`).
    pub slo_time: Duration,
    /// `--link`: the lab's own thread (the load generator) runs in the link's client
    /// namespace, the servers on the far side of the link.
    pub link: Option<LabLink>,
    /// `--null`: every configuration of a group replaced by the group's baseline (under
    /// its own name): a run whose comparisons all compare the same thing, so that it
    /// should recommend nothing. It checks the error rate of "What to change".
    pub null: bool,
    /// `--body-size`: every request a POST with a body of this many bytes (0: GETs),
    /// in the rounds and the capacity searches alike.
    pub body_size: u64,
}

/// The emulated link a lab runs over (`tlsperf lab --link`).
#[derive(Debug, Clone)]
pub struct LabLink {
    /// The link for the report: its canonical spec (a profile's name first, then the
    /// settings).
    pub spec: String,
    /// Its round-trip time.
    pub rtt: Duration,
    /// The host's network namespace, where the servers are started (the thread that
    /// starts them is in the client's).
    pub server_netns: Arc<std::os::fd::OwnedFd>,
}

/// An external server for `--target`.
#[derive(Debug, Clone)]
pub struct External {
    /// Parsed URL.
    pub target: Target,
    /// Its roots (`--cacert`), else the system store.
    pub cacert: Option<PathBuf>,
}

impl LabOptions {
    /// `--quick` (default) or `--full` settings for `groups`. The drift of a shared
    /// machine between rounds is the main noise, so rounds are many and short: in
    /// quick mode 8 of 0.25 s per configuration (about 80 s for every group and its A/A
    /// control on 2 cores), in full mode 12 of 1 s.
    pub fn preset(full: bool, groups: Vec<Group>, exe: PathBuf, work_dir: PathBuf) -> Self {
        LabOptions {
            full,
            rounds: if full { 12 } else { 8 },
            round_time: if full {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(250)
            },
            warmup: if full {
                Duration::from_millis(500)
            } else {
                Duration::from_millis(100)
            },
            connections: 4,
            groups,
            exe,
            work_dir,
            target: None,
            pinning: pin::not_pinned("not asked for"),
            slo: None,
            slo_time: Duration::from_secs(60),
            link: None,
            null: false,
            body_size: 0,
        }
    }
}

impl LabOptions {
    /// Runs over `link`: each round lasts at least 25 of its round trips and each warm-up
    /// 5, so that every connection slot completes several requests per round (a new
    /// connection costs 3 round trips or more).
    pub fn at_link(&mut self, link: LabLink) {
        self.round_time = self.round_time.max(link.rtt * 25);
        self.warmup = self.warmup.max(link.rtt * 5);
        self.link = Some(link);
    }
}

/// Why the lab could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// A server could not be started.
    #[error("cannot start {what}")]
    Spawn {
        /// The command.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A server exited before saying where it listens.
    #[error("{what} did not start: {stderr}")]
    ServerStart {
        /// The command.
        what: String,
        /// What it wrote on stderr.
        stderr: String,
    },
    /// Preparing certificates or files failed.
    #[error("preparing the lab in {dir}: {reason}")]
    Prepare {
        /// The work directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// A client configuration could not be built.
    #[error("client configuration for {cell}")]
    Client {
        /// The cell.
        cell: String,
        /// The cause.
        #[source]
        source: ConfigError,
    },
    /// The target could not be reached before the run: nothing was measured.
    #[error("{target}: the request before the run failed, so nothing was measured")]
    Unreachable {
        /// host:port.
        target: String,
        /// Why.
        #[source]
        source: crate::client::ConnectError,
    },
    /// A configuration's capacity search could not run.
    #[error("capacity search of {cell}: {reason}")]
    Capacity {
        /// The cell.
        cell: String,
        /// Why.
        reason: String,
    },
    /// The load generator failed to start a round.
    #[error("load round of {cell}")]
    Load {
        /// The cell.
        cell: String,
        /// The cause.
        #[source]
        source: load::LoadError,
    },
}

impl crate::error::Classify for LabError {
    fn class(&self) -> crate::error::ErrorClass {
        crate::error::ErrorClass::Runtime
    }
}

/// Progress of a lab run, for a progress display.
#[derive(Debug, Clone)]
pub enum Event {
    /// What the run will do, before anything else: `groups` groups, `steps` recorded
    /// rounds in all (so that a progress display has its total from the start).
    Planned {
        /// Groups to run.
        groups: usize,
        /// Rounds in the whole run.
        steps: usize,
    },
    /// Preparing certificates and servers.
    Preparing(String),
    /// A round of a cell is starting: `step` of `steps` in the whole run.
    Round {
        /// The group.
        group: Group,
        /// The cell.
        cell: String,
        /// Round number (1-based).
        round: usize,
        /// Rounds done so far in the whole run.
        step: usize,
        /// Rounds in the whole run.
        steps: usize,
    },
    /// A group finished (its rounds, and with `--slo` its capacities).
    GroupDone {
        /// The group.
        group: Group,
        /// 1-based, of `groups`.
        index: usize,
        /// Groups in the run.
        groups: usize,
        /// Its configurations (the A/A control included).
        cells: usize,
        /// Seconds since the run started.
        elapsed_s: f64,
        /// Its warnings ([`result::GroupResult::warnings`]).
        warnings: Vec<String>,
    },
}

/// Stops a lab run from another task (Ctrl-C): the round running is abandoned, the
/// groups already finished are kept.
#[derive(Debug, Default)]
pub struct Control {
    stop: AtomicBool,
    current: Mutex<Option<Arc<Progress>>>,
}

impl Control {
    /// Asks the run to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(p) = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            p.stop();
        }
    }

    /// True once [`Control::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn round(&self, p: Option<Arc<Progress>>) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = p;
    }
}
