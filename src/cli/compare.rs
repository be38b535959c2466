//! `tlsperf compare A B`: two sample files → [`crate::stats::compare`] → verdict.

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Output};
use crate::report::text;
use crate::stats::{CompareOptions, Direction, Samples, compare};

/// Arguments of `tlsperf compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline samples: one number a line; blank lines and `#` comments are ignored.
    a: PathBuf,
    /// Candidate samples, same format.
    b: PathBuf,
    /// Significance level (the confidence interval is at 1 − alpha).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Keep all samples (no Tukey 1.5×IQR outlier filter).
    #[arg(long)]
    no_filter: bool,
    /// The samples are rates (higher is better) rather than durations (lower is better).
    #[arg(long)]
    higher_is_better: bool,
}

/// Runs `tlsperf compare`.
pub fn exec(args: CompareArgs, out: &Output) -> Result<(), CliError> {
    let a = Samples::read(&args.a)?;
    let b = Samples::read(&args.b)?;
    let opts = CompareOptions {
        alpha: args.alpha,
        filter: !args.no_filter,
        direction: if args.higher_is_better {
            Direction::HigherIsBetter
        } else {
            Direction::LowerIsBetter
        },
    };
    let result = compare(&a, &b, &opts)?;
    out.result(&result, || text::comparison(&result))
}
