//! `tlsperf trust probe|load|analyze|trim`: flags → [`crate::trust`] → output.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{CliError, Output};
use crate::report::text;
use crate::trust::{self, ProbeEnv, Source};

/// Arguments of `tlsperf trust`.
#[derive(Debug, Args)]
pub struct TrustArgs {
    #[command(subcommand)]
    command: TrustCommand,
}

#[derive(Debug, Subcommand)]
enum TrustCommand {
    /// Show the chain of places a client probes for the system's CA certificates.
    Probe(ProbeArgs),
    /// Load a trust store in timed layers, cold and warm, beside the usual loaders.
    Load(LoadArgs),
}

#[derive(Debug, Args)]
struct ProbeArgs {
    /// Probe inside this filesystem root (an extracted container image) instead of `/`.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct LoadArgs {
    /// Load the system store as a client finds it (the default).
    #[arg(long, conflicts_with_all = ["bundle", "dir"])]
    system: bool,
    /// Load one bundle file (PEM or DER).
    #[arg(long, value_name = "FILE", conflicts_with = "dir")]
    bundle: Option<PathBuf>,
    /// Load every certificate file of a directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// With --system: probe inside this filesystem root instead of `/`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "dir"])]
    root: Option<PathBuf>,
    /// Loads to time: the first is cold, the median of the others is warm.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    iterations: u64,
    /// Also time a full X.509 parse of every certificate (layer 4, as analysis needs).
    #[arg(long)]
    x509: bool,
}

/// Runs `tlsperf trust …`.
pub fn exec(args: TrustArgs, out: &Output) -> Result<(), CliError> {
    match args.command {
        TrustCommand::Probe(a) => {
            if let Some(r) = &a.root
                && !r.is_dir()
            {
                return Err(CliError::input(format!(
                    "--root {}: not a directory",
                    r.display()
                )));
            }
            let probe = trust::probe(a.root.as_deref(), &ProbeEnv::from_process());
            out.result(&probe, || text::trust_probe(&probe))
        }
        TrustCommand::Load(a) => {
            let source = match (a.bundle, a.dir) {
                (Some(b), _) => Source::Bundle(b),
                (None, Some(d)) => Source::Dir(d),
                (None, None) => {
                    if let Some(r) = &a.root
                        && !r.is_dir()
                    {
                        return Err(CliError::input(format!(
                            "--root {}: not a directory",
                            r.display()
                        )));
                    }
                    Source::System { root: a.root }
                }
            };
            let iterations = usize::try_from(a.iterations).unwrap_or(usize::MAX);
            let m = trust::measure::measure_load(&source, iterations, a.x509)?;
            out.result(&m, || text::trust_load(&m))
        }
    }
}
