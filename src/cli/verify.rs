//! `tlsperf verify` and `tlsperf verify bench`: flags → [`crate::verify`] → output.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use rustls_pki_types::ServerName;
use serde::Serialize;

use super::{CliError, Output};
use crate::error::ErrorClass;
use crate::pki::{PkiOptions, TestPki};
use crate::report::text;
use crate::tls::Provider;
use crate::trust::{self, Source, StoreLoadOptions, TrustStore};
use crate::verify::bench::{BenchOptions, StoreSize};
use crate::verify::{IndexedVerifier, VerifyReport};
use crate::when::{format_rfc3339, parse_rfc3339, to_unix_time};

/// Arguments of `tlsperf verify`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(after_help = super::examples::block(&[
    "tlsperf verify --chain pki/server-chain.pem --host localhost --roots pki/root.pem",
    "tlsperf verify bench --sizes 1,100,system,10000",
]))]
pub struct VerifyArgs {
    #[command(subcommand)]
    command: Option<VerifyCommand>,
    /// The chain as a client receives it: PEM, leaf first, then intermediates (a regular
    /// file of at most 16 MiB).
    #[arg(long, value_name = "FILE", required = true)]
    chain: Option<PathBuf>,
    /// The server name to verify for (DNS name or IP address).
    #[arg(long, value_name = "NAME", required = true)]
    host: Option<String>,
    /// Trust anchors: system, webpki (compiled-in Mozilla roots), a bundle file (at most 128
    /// MiB) or a directory.
    #[arg(long, default_value = "system")]
    roots: String,
    /// Validation time (RFC 3339; default now).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    at: Option<time::OffsetDateTime>,
    /// Crypto provider for signature checks.
    #[arg(long, value_enum, default_value_t = Provider::AwsLcRs)]
    provider: Provider,
}

#[derive(Debug, Subcommand)]
enum VerifyCommand {
    /// Verification cost against store size: indexed, rustls default, reload per
    /// verification, trimmed store; growth exponents; threads sharing one verifier.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf verify bench",
    "tlsperf verify bench --sizes 1,100,system,10000 --threads 1,2,4",
]))]
struct BenchArgs {
    /// A chain to use (PEM, leaf first); default: a generated ECDSA P-256 test chain.
    #[arg(long, value_name = "FILE", requires = "host")]
    chain: Option<PathBuf>,
    /// Server name for --chain.
    #[arg(long, value_name = "NAME", requires = "chain")]
    host: Option<String>,
    /// Store sizes: numbers of anchors, or `system` (the system bundle).
    #[arg(long, value_delimiter = ',', default_value = "1,10,system,1000,10000", value_parser = parse_size)]
    sizes: Vec<SizeArg>,
    /// At most this many verifications per variant and size.
    #[arg(long, value_name = "N", default_value_t = 400, value_parser = clap::value_parser!(u64).range(3..=1_000_000))]
    iterations: u64,
    /// At most this long per variant and size, e.g. 500ms or 2s (from 10ms to 10m).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_max_time)]
    max_time: Duration,
    /// Thread counts for the shared-verifier throughput test.
    #[arg(long, value_name = "N", value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u64).range(1..=256))]
    threads: Vec<u64>,
    /// Validation time (RFC 3339; default now).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    at: Option<time::OffsetDateTime>,
    /// Crypto provider.
    #[arg(long, value_enum, default_value_t = Provider::AwsLcRs)]
    provider: Provider,
}

#[derive(Debug, Clone, Copy)]
struct SizeArg(StoreSize);

fn parse_size(s: &str) -> Result<SizeArg, String> {
    match s.trim() {
        "system" => Ok(SizeArg(StoreSize::System)),
        n => match n.parse::<usize>() {
            Ok(v) if (1..=100_000).contains(&v) => Ok(SizeArg(StoreSize::Synthetic(v))),
            _ => Err(format!(
                "'{n}': expected `system` or a number of anchors from 1 to 100000"
            )),
        },
    }
}

/// `--max-time`: from 10 ms (a few verifications) to 10 min.
fn parse_max_time(s: &str) -> Result<Duration, String> {
    let d = super::duration::parse(s)?;
    if d < Duration::from_millis(10) || d > Duration::from_secs(600) {
        return Err(format!("'{s}' must be from 10ms to 10m"));
    }
    Ok(d)
}

fn parse_time(s: &str) -> Result<time::OffsetDateTime, String> {
    parse_rfc3339(s).map_err(|e| e.to_string())
}

#[derive(Serialize)]
struct VerifyOutput<'a> {
    chain: &'a std::path::Path,
    host: &'a str,
    roots: String,
    at: String,
    #[serde(flatten)]
    report: &'a VerifyReport,
}

/// Runs `tlsperf verify …`.
pub fn exec(args: VerifyArgs, out: &Output) -> Result<(), CliError> {
    if let Some(VerifyCommand::Bench(b)) = args.command {
        return bench(b, out);
    }
    // Invariant: clap requires --chain and --host when no subcommand is given.
    let (Some(chain_path), Some(host)) = (args.chain, args.host) else {
        return Err(CliError::input("--chain and --host are required"));
    };
    let name = ServerName::try_from(host.clone()).map_err(|_| {
        CliError::input(format!(
            "--host '{host}': not a valid DNS name or IP address"
        ))
    })?;
    let chain = trust::trim::chain_from_file(&chain_path)?;
    let store = roots(&args.roots)?;
    let at = args.at.unwrap_or_else(time::OffsetDateTime::now_utc);
    let verifier = IndexedVerifier::new(&store, args.provider);
    let (ee, rest) = chain
        .certs
        .split_first()
        .ok_or_else(|| CliError::input("empty chain"))?;
    let report = verifier.verify_detailed(ee, rest, &name, to_unix_time(at));
    let output = VerifyOutput {
        chain: &chain_path,
        host: &host,
        roots: store.origin().to_string(),
        at: format_rfc3339(at),
        report: &report,
    };
    out.result(&output, || {
        text::verify_report(&chain_path, &host, store.origin(), &report)
    })?;
    if report.valid {
        Ok(())
    } else {
        Err(CliError {
            class: ErrorClass::Runtime,
            error: anyhow::anyhow!(
                "{} is not valid: {}",
                chain_path.display(),
                report.reason.clone().unwrap_or_default()
            ),
        })
    }
}

fn roots(spec: &str) -> Result<TrustStore, CliError> {
    Ok(match spec {
        "system" => trust::load(&Source::System { root: None }, &StoreLoadOptions::CERTS)?.store,
        "webpki" => TrustStore::from_webpki_roots(),
        path => {
            let p = PathBuf::from(path);
            let source = if p.is_dir() {
                Source::Dir(p)
            } else {
                Source::Bundle(p)
            };
            trust::load(&source, &StoreLoadOptions::CERTS)?.store
        }
    })
}

fn bench(a: BenchArgs, out: &Output) -> Result<(), CliError> {
    let at = to_unix_time(a.at.unwrap_or_else(time::OffsetDateTime::now_utc));
    let (chain, host, anchors_pem) = match (a.chain, a.host) {
        (Some(path), Some(host)) => {
            let chain = trust::trim::chain_from_file(&path)?;
            let system =
                trust::load(&Source::System { root: None }, &StoreLoadOptions::CERTS)?.store;
            let trimmed = trust::trim::trim(
                &system,
                std::slice::from_ref(&chain),
                &trust::trim::TrimOptions {
                    at,
                    provider: a.provider,
                    also_keep: Vec::new(),
                },
            )?;
            (chain.certs, host, trimmed.pem)
        }
        _ => {
            let pki = TestPki::generate(&PkiOptions::default())?;
            (
                pki.server_chain(),
                "localhost".to_string(),
                pki.root.pem.clone(),
            )
        }
    };
    let work = tempfile::tempdir().map_err(|e| {
        CliError::runtime(anyhow::Error::new(e).context("cannot create a temporary directory"))
    })?;
    let opts = BenchOptions {
        chain,
        host,
        anchors_pem,
        at,
        sizes: a.sizes.iter().map(|s| s.0).collect(),
        iterations: usize::try_from(a.iterations).unwrap_or(usize::MAX),
        max_time: a.max_time,
        threads: a.threads.iter().map(|&t| t as usize).collect(),
        provider: a.provider,
        work_dir: work.path().to_path_buf(),
    };
    let result = crate::verify::bench::run(&opts)?;
    out.result(&result, || text::verify_bench(&result))
}
