//! `tlsperf pki init DIR` and `tlsperf pki bundle`: flags → [`crate::pki`] → output.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{CliError, Output};
use crate::files::{self, FileMode};
use crate::pki::{self, BundleOptions, KeyType, PkiOptions, TestPki};
use crate::report::text;

/// Arguments of `tlsperf pki`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf pki init pki",
    "tlsperf pki bundle --count 150 --cross-signed 10 --out bundle.pem",
]))]
pub struct PkiArgs {
    #[command(subcommand)]
    command: PkiCommand,
}

#[derive(Debug, Subcommand)]
enum PkiCommand {
    /// Write a test PKI: root CA → intermediate CA → server leaf and client leaf.
    ///
    /// Files: root.pem, intermediate.pem, server.pem, server.key, server-chain.pem
    /// (leaf + intermediate), client.pem, client.key, client-chain.pem, and with --ocsp
    /// ocsp.der. Keys are PKCS#8, mode 0600.
    Init(InitArgs),
    /// Write a synthetic trust bundle: --count CA certificates, --cross-signed of them with
    /// cross-signed twins.
    ///
    /// Keys are drawn round-robin from a pool of distinct keys (--key-pool); every CA
    /// still has its own subject, serial and key identifier. A twin has the same subject,
    /// key and key identifier as its CA and is issued by the next CA of the bundle.
    Bundle(BundleArgs),
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf pki init pki",
    "tlsperf pki init pki --key-type rsa-2048 --ocsp --force",
]))]
struct InitArgs {
    /// Directory to write into (created if missing).
    dir: PathBuf,
    /// Key type of every certificate (`--key`, its spelling before 2026-12-07, still works).
    #[arg(long = "key-type", alias = "key", value_enum, value_name = "TYPE", default_value_t = KeyType::EcdsaP256)]
    key: KeyType,
    /// Key type of the root and intermediate CAs (overrides --key-type; was `--ca-key`).
    #[arg(
        long = "ca-key-type",
        alias = "ca-key",
        value_enum,
        value_name = "TYPE"
    )]
    ca_key: Option<KeyType>,
    /// Key type of the server and client leaves (overrides --key-type; was `--leaf-key`).
    #[arg(
        long = "leaf-key-type",
        alias = "leaf-key",
        value_enum,
        value_name = "TYPE"
    )]
    leaf_key: Option<KeyType>,
    /// Subject alternative name of the server leaf: DNS name or IP address (repeatable;
    /// default: localhost, 127.0.0.1, ::1).
    #[arg(long = "san", value_name = "NAME")]
    sans: Vec<String>,
    /// Validity of every certificate, in days.
    #[arg(long, value_name = "DAYS", default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=i64::from(pki::chain::MAX_DAYS)))]
    days: u32,
    /// Also write ocsp.der: a DER OCSP response saying the server leaf is good, signed by
    /// the intermediate, valid for 7 days from now, for `tlsperf serve --ocsp` (needs an
    /// ECDSA P-256 or RSA CA key).
    #[arg(long)]
    ocsp: bool,
    /// Overwrite existing files.
    #[arg(long)]
    force: bool,
}

/// How long the OCSP response of `pki init --ocsp` is valid.
const OCSP_VALID: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf pki bundle --count 150 --cross-signed 10 --out bundle.pem",
]))]
struct BundleArgs {
    /// Number of distinct CA certificates.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=pki::bundle::MAX_BUNDLE as u64))]
    count: u64,
    /// How many of them get a cross-signed twin (at most --count).
    #[arg(long, value_name = "N", default_value_t = 0)]
    cross_signed: u64,
    /// Key type of every CA (`--key`, its spelling before 2026-12-07, still works).
    #[arg(long = "key-type", alias = "key", value_enum, value_name = "TYPE", default_value_t = KeyType::EcdsaP256)]
    key: KeyType,
    /// Distinct keys to generate and share round-robin (default: 1024, or 8 for RSA).
    #[arg(long, value_name = "N", value_parser = super::count::at_least_one)]
    key_pool: Option<u64>,
    /// Validity in days.
    #[arg(long, value_name = "DAYS", default_value_t = 3650, value_parser = clap::value_parser!(u32).range(1..=i64::from(pki::chain::MAX_DAYS)))]
    days: u32,
    /// Output PEM file.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Overwrite an existing output file.
    #[arg(long)]
    force: bool,
}

/// Runs `tlsperf pki …`.
pub fn exec(args: PkiArgs, out: &Output) -> Result<(), CliError> {
    match args.command {
        PkiCommand::Init(a) => init(a, out),
        PkiCommand::Bundle(a) => bundle(a, out),
    }
}

#[derive(Serialize)]
struct InitReport<'a> {
    dir: &'a std::path::Path,
    files: &'a [pki::WrittenFile],
    certificates: &'a [pki::CertSummary],
}

fn init(a: InitArgs, out: &Output) -> Result<(), CliError> {
    let opts = PkiOptions {
        ca_key: a.ca_key.unwrap_or(a.key),
        leaf_key: a.leaf_key.unwrap_or(a.key),
        sans: if a.sans.is_empty() {
            PkiOptions::default_sans()
        } else {
            a.sans
        },
        days: a.days,
    };
    // Refuse early (bad options, existing files, unusable directory, a report that
    // cannot be written): nothing is created on bad input and no time is spent on keys.
    opts.validate()?;
    out.check_json_path("DIR", &a.dir)?;
    if a.ocsp && !pki::ocsp::can_sign(opts.ca_key) {
        return Err(CliError::input(format!(
            "--ocsp needs an ecdsa-p256 or RSA CA key (the response is signed with it), not {}",
            opts.ca_key.name()
        )));
    }
    let extra_names: &[&str] = if a.ocsp { &[pki::ocsp::OCSP_FILE] } else { &[] };
    pki::chain::prepare_dir_with(&a.dir, a.force, extra_names)?;
    let pki = TestPki::generate(&opts)?;
    let mut extra = Vec::new();
    if a.ocsp {
        extra.push(pki::ExtraFile {
            name: pki::ocsp::OCSP_FILE,
            contents: pki::ocsp_response(&pki, OCSP_VALID)?,
            what: "OCSP response for the server leaf (good, 7 days)",
        });
    }
    let written = pki::write_pki_with(&pki, &a.dir, a.force, extra)?;
    let certs = pki.summaries();
    let report = InitReport {
        dir: &a.dir,
        files: &written,
        certificates: &certs,
    };
    out.summary(&report, || text::pki_init(&a.dir, &written, &certs))
}

#[derive(Serialize)]
struct BundleReport<'a> {
    path: &'a std::path::Path,
    bytes: usize,
    #[serde(flatten)]
    bundle: &'a pki::Bundle,
}

fn bundle(a: BundleArgs, out: &Output) -> Result<(), CliError> {
    let to_usize = |name: &str, v: u64| {
        usize::try_from(v).map_err(|_| CliError::input(format!("{name} {v} is too large")))
    };
    let opts = BundleOptions {
        count: to_usize("--count", a.count)?,
        cross_signed: to_usize("--cross-signed", a.cross_signed)?,
        key: a.key,
        key_pool: a.key_pool.map(|p| to_usize("--key-pool", p)).transpose()?,
        days: a.days,
    };
    files::check_destination(&a.out, a.force)?;
    out.check_json_path("--out", &a.out)?;
    let bundle = pki::generate_bundle(&opts)?;
    files::write_atomic(&a.out, bundle.pem.as_bytes(), FileMode::Public, a.force)?;
    let report = BundleReport {
        path: &a.out,
        bytes: bundle.pem.len(),
        bundle: &bundle,
    };
    out.summary(&report, || text::bundle(&a.out, &bundle))
}
