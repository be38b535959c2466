//! `tlsperf crypto …`: flags → [`crate::crypto`] → output.

use clap::{Args, Subcommand};

use super::{CliError, Output};
use crate::crypto::kx::{self, KxGroup, KxOptions};
use crate::crypto::sign::{self, SigAlg, SignOptions};
use crate::crypto::{Implementation, MeasureOptions};
use crate::report::crypto as report;
use crate::tls::Provider;

/// Arguments of `tlsperf crypto`.
#[derive(Debug, Args)]
pub struct CryptoArgs {
    #[command(subcommand)]
    command: CryptoCommand,
}

#[derive(Debug, Subcommand)]
enum CryptoCommand {
    /// Sign and verify ops/s, time and bytes allocated per operation for ECDSA, Ed25519
    /// and RSA, per implementation (aws-lc-rs, ring, RustCrypto).
    Sign(SignArgs),
    /// Key exchange through the providers' rustls groups: client (key generation +
    /// agreement) and server (start_and_complete) ns/op and ops/s.
    Kx(KxArgs),
}

/// How long to measure each row.
#[derive(Debug, Args)]
struct MeasureArgs {
    /// Timed seconds per row, split into --rounds rounds (after an untimed warm-up).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    seconds: f64,
    /// Rounds per row; the result is the median of the rounds kept by a 1.5×IQR filter.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
}

impl MeasureArgs {
    fn options(&self) -> Result<MeasureOptions, CliError> {
        Ok(MeasureOptions::new(self.seconds, self.rounds)?)
    }
}

#[derive(Debug, Args)]
struct SignArgs {
    /// Implementations to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    provider: Vec<Implementation>,
    /// Algorithms to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    alg: Vec<SigAlg>,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Debug, Args)]
struct KxArgs {
    /// Providers to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    provider: Vec<Provider>,
    /// Groups to measure (comma-separated or repeated; all by default). X25519MLKEM768
    /// exists in aws-lc-rs only.
    #[arg(long, value_enum, value_delimiter = ',')]
    group: Vec<KxGroup>,
    #[command(flatten)]
    measure: MeasureArgs,
}

/// Runs `tlsperf crypto`.
pub fn exec(args: CryptoArgs, out: &Output) -> Result<(), CliError> {
    match args.command {
        CryptoCommand::Sign(a) => {
            let opts = SignOptions {
                algs: or_all(a.alg, &SigAlg::ALL),
                implementations: or_all(a.provider, &Implementation::ALL),
                measure: a.measure.options()?,
            };
            let r = sign::run(&opts)?;
            out.result(&r, || report::sign(&r))
        }
        CryptoCommand::Kx(a) => {
            let opts = KxOptions {
                groups: or_all(a.group, &KxGroup::ALL),
                providers: or_all(a.provider, &Provider::ALL),
                measure: a.measure.options()?,
            };
            let r = kx::run(&opts)?;
            out.result(&r, || report::kx(&r))
        }
    }
}

/// The user's choice without repeats, or every value.
fn or_all<T: Copy + PartialEq>(chosen: Vec<T>, all: &[T]) -> Vec<T> {
    if chosen.is_empty() {
        return all.to_vec();
    }
    let mut v = Vec::new();
    for c in chosen {
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}
