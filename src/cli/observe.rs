//! `tlsperf observe --pcap FILE`: flags → [`crate::observe::observe_file`] → output.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{CliError, Output};
use crate::observe::{Limits, Options, observe_file};
use crate::report::observe::observation;

/// Arguments of `tlsperf observe`.
#[derive(Debug, Args)]
pub struct ObserveArgs {
    /// A capture file to analyze: pcap or pcapng, as `tcpdump -w FILE` writes it
    /// (Ethernet, Linux cooked, raw IP or loopback link layer).
    #[arg(long, value_name = "FILE")]
    pcap: PathBuf,
    /// Observe TCP connections to or from this port (repeatable); every port when not
    /// given (connections whose first bytes are not TLS are counted and skipped).
    #[arg(long = "port", value_name = "N")]
    ports: Vec<u16>,
    /// Write the result document (JSON, atomically), accepted by `tlsperf merge`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace --out FILE if it exists.
    #[arg(long, requires = "out")]
    force: bool,
    /// Most connections tracked at once; further new connections are counted, not
    /// tracked.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    max_flows: u64,
    /// A connection with no segment for this long (capture time) is evicted, e.g. 60s.
    #[arg(long, default_value = "60s", value_parser = super::duration::parse_positive)]
    idle_timeout: Duration,
}

/// Runs `tlsperf observe`.
pub fn exec(args: ObserveArgs, out: &Output) -> Result<(), CliError> {
    if let Some(dest) = &args.out {
        crate::files::check_destination(dest, args.force)?;
    }
    let opts = Options {
        ports: args.ports,
        limits: Limits {
            max_flows: usize::try_from(args.max_flows).unwrap_or(usize::MAX),
            idle_ns: u64::try_from(args.idle_timeout.as_nanos()).unwrap_or(u64::MAX),
            ..Limits::default()
        },
    };
    let result = observe_file(&args.pcap, &opts)?;
    match &args.out {
        Some(dest) => {
            crate::doc::write_json(&result, dest, args.force)?;
            out.summary(&result, || observation(&result))
        }
        None => out.result(&result, || observation(&result)),
    }
}
