//! `tlsperf trust probe|load|analyze|trim`: flags → [`crate::trust`] → output.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::{CliError, Output};
use crate::files::{self, FileMode};
use crate::report::text;
use crate::tls::Provider;
use crate::trust::{self, ProbeEnv, Source};

/// Arguments of `tlsperf trust`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf trust probe",
    "tlsperf trust analyze --list",
]))]
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
    /// What is in a trust store: duplicates, twins, expired, weak keys, non-CAs, key types.
    Analyze(AnalyzeArgs),
    /// Write the minimal bundle that still verifies the given chains or servers.
    Trim(TrimArgs),
}

/// `system` (default), `webpki` (compiled-in Mozilla roots), a bundle file or a directory.
fn parse_source(s: &str) -> Result<SourceArg, String> {
    match s {
        "system" => Ok(SourceArg::System),
        "webpki" => Ok(SourceArg::Webpki),
        path => {
            let p = PathBuf::from(path);
            match std::fs::metadata(&p) {
                Ok(m) if m.is_dir() => Ok(SourceArg::Path(Source::Dir(p))),
                Ok(_) => Ok(SourceArg::Path(Source::Bundle(p))),
                Err(e) => Err(format!(
                    "{path}: {e} (expected system, webpki, a bundle file or a directory)"
                )),
            }
        }
    }
}

#[derive(Debug, Clone)]
enum SourceArg {
    System,
    Webpki,
    Path(Source),
}

impl SourceArg {
    fn load(&self, root: Option<PathBuf>) -> Result<trust::Loaded, CliError> {
        match self {
            SourceArg::System => Ok(trust::load(
                &Source::System { root },
                &trust::StoreLoadOptions::CERTS,
            )?),
            SourceArg::Path(s) => Ok(trust::load(s, &trust::StoreLoadOptions::CERTS)?),
            SourceArg::Webpki => Err(trust::TrustError::AnchorsOnly {
                origin: "webpki-roots".into(),
            }
            .into()),
        }
    }
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf trust analyze --list",
    "tlsperf trust analyze /etc/ssl/certs/ca-certificates.crt",
]))]
struct AnalyzeArgs {
    /// system (default), a bundle file (at most 128 MiB) or a directory (files that are not
    /// regular files, such as FIFOs, are skipped with a warning); not webpki, which holds
    /// trust anchors, not certificates.
    #[arg(value_parser = parse_source, default_value = "system")]
    source: SourceArg,
    /// With the system source: probe inside this filesystem root.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Judge validity at this time (RFC 3339; default now).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    at: Option<time::OffsetDateTime>,
    /// One row per certificate (subject CN, SHA-256, not-after, key, flags).
    #[arg(long)]
    list: bool,
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf trust trim --keep-for example.com:443 --out trimmed.pem",
]))]
struct TrimArgs {
    /// Chain files (PEM: leaf, then intermediates; regular files of at most 16 MiB) or
    /// host:port servers to keep working.
    #[arg(long = "keep-for", value_name = "CHAIN_OR_HOST", required = true, num_args = 1..)]
    keep_for: Vec<String>,
    /// The store to trim: system (default), a bundle file (at most 128 MiB) or a directory.
    #[arg(long, value_parser = parse_source, default_value = "system")]
    source: SourceArg,
    /// SHA-256 fingerprint of an anchor to keep anyway (repeatable).
    #[arg(long = "also-keep", value_name = "FINGERPRINT")]
    also_keep: Vec<String>,
    /// Where to write the trimmed PEM bundle.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Overwrite the output file.
    #[arg(long)]
    force: bool,
    /// Validate the chains at this time (RFC 3339; default now).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    at: Option<time::OffsetDateTime>,
    /// Crypto provider for signature checks.
    #[arg(long, value_enum, default_value_t = Provider::AwsLcRs)]
    provider: Provider,
    /// Connect and handshake timeout for host:port chains (e.g. 500ms, 10s; at most 365
    /// days).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::duration::parse_positive)]
    timeout: std::time::Duration,
}

fn parse_time(s: &str) -> Result<time::OffsetDateTime, String> {
    crate::when::parse_rfc3339(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf trust probe",
    "tlsperf trust probe --root /srv/image-rootfs",
]))]
struct ProbeArgs {
    /// Probe inside this filesystem root (an extracted container image) instead of `/`.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf trust load",
    "tlsperf trust load --bundle /etc/ssl/certs/ca-certificates.crt --x509",
]))]
struct LoadArgs {
    /// Load the system store as a client finds it (the default).
    #[arg(long, conflicts_with_all = ["bundle", "dir"])]
    system: bool,
    /// Load one bundle file (PEM or DER; a regular file of at most 128 MiB).
    #[arg(long, value_name = "FILE", conflicts_with = "dir")]
    bundle: Option<PathBuf>,
    /// Load every certificate file of a directory (at most 128 MiB each; entries that are
    /// not regular files, such as FIFOs, are skipped with a warning).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// With --system: probe inside this filesystem root instead of `/`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "dir"])]
    root: Option<PathBuf>,
    /// Loads to time: the first is cold, the median of the others is warm.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    iterations: u64,
    /// Also time a full X.509 parse of every certificate (layer 4, as analysis needs).
    #[arg(long)]
    x509: bool,
    /// Run the comparison loaders before tlsperf's, so they pay the process's first-touch
    /// costs (for cold comparisons across fresh processes; see bench/trust.sh).
    #[arg(long)]
    baselines_first: bool,
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
            let m = trust::measure::measure_load(&source, iterations, a.x509, a.baselines_first)?;
            out.result(&m, || text::trust_load(&m))
        }
        TrustCommand::Analyze(a) => {
            let loaded = a.source.load(a.root)?;
            let at = a.at.unwrap_or_else(time::OffsetDateTime::now_utc);
            let analysis = trust::analyze::analyze(&loaded, at, a.list);
            out.result(&analysis, || text::trust_analysis(&analysis))?;
            // Damage (not deliberately skipped blocks) makes the input bad: the analysis
            // above covers what could be read, the exit code says the file is damaged.
            let damaged: Vec<String> = analysis
                .problems
                .iter()
                .filter(|p| !p.ignored)
                .map(ToString::to_string)
                .collect();
            if damaged.is_empty() {
                Ok(())
            } else {
                Err(CliError::input(format!(
                    "{} damaged block(s): {}",
                    damaged.len(),
                    damaged.join("; ")
                )))
            }
        }
        TrustCommand::Trim(a) => {
            files::check_destination(&a.out, a.force)?;
            let source = match &a.source {
                SourceArg::Path(Source::Bundle(p)) => Some(p.as_path()),
                _ => None,
            };
            let chains = a.keep_for.iter().map(Path::new);
            files::check_not_input(&a.out, source.into_iter().chain(chains))?;
            let store = a.source.load(None)?.store;
            let chains = trust::trim::resolve_chains(&a.keep_for, a.provider, a.timeout)?;
            let opts = trust::trim::TrimOptions {
                at: crate::when::to_unix_time(a.at.unwrap_or_else(time::OffsetDateTime::now_utc)),
                provider: a.provider,
                also_keep: a.also_keep,
            };
            let trimmed = trust::trim::trim(&store, &chains, &opts)?;
            files::write_atomic(&a.out, trimmed.pem.as_bytes(), FileMode::Public, a.force)?;
            out.summary(&trimmed, || text::trust_trim(&trimmed, &a.out))
        }
    }
}
