//! `tlsperf compare A B`: two sample files, or two results of the same kind (load, lab,
//! capacity, a `tlsperf crypto` command, observe) → [`crate::compare::compare`] → one `tlsperf-compare/1`
//! document, printed as JSON or as text ([`crate::report::compare`]).

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Output};
use crate::compare::{Options, compare};
use crate::doc::Input;

/// Arguments of `tlsperf compare`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf compare before.json after.json",
    "tlsperf compare a.txt b.txt --higher-is-better",
]))]
pub struct CompareArgs {
    /// Baseline samples: one number a line; blank lines and `#` comments are ignored. Or
    /// a JSON result of `tlsperf load`, `tlsperf lab`, `tlsperf capacity`, `tlsperf
    /// crypto` or `tlsperf observe` (a regular file of at most 256 MiB).
    a: PathBuf,
    /// Candidate samples, same format (a result of the same kind as A).
    b: PathBuf,
    /// Significance level, above 0% and below 100%: 5% or 0.05 (the confidence interval
    /// is at 1 − alpha, 95%).
    #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = super::ratio::parse)]
    alpha: f64,
    /// Keep all samples (no Tukey 1.5×IQR outlier filter).
    #[arg(long)]
    no_filter: bool,
    /// The samples are rates (higher is better) rather than durations (lower is better).
    /// Sample files only: tlsperf results know the direction of each metric.
    #[arg(long)]
    higher_is_better: bool,
}

/// Runs `tlsperf compare`. Each input is read once ([`crate::doc::Input`]), so that
/// `compare <(…) <(…)` sees whole pipes.
pub fn exec(args: CompareArgs, out: &Output) -> Result<(), CliError> {
    let opts = Options {
        alpha: args.alpha,
        filter: !args.no_filter,
        higher_is_better: args.higher_is_better,
    };
    crate::stats::rows::check_alpha(opts.alpha).map_err(|_| {
        CliError::input(format!(
            "--alpha {}: must be above 0% and below 100% (e.g. 5%)",
            super::ratio::format(args.alpha)
        ))
    })?;
    let result = compare(&Input::read(&args.a)?, &Input::read(&args.b)?, &opts)?;
    out.result(&result, || crate::report::compare::compare(&result))
}
