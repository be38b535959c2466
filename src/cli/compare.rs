//! `tlsperf compare A B`: two sample files → [`crate::stats::compare`] → verdict; two
//! load, lab or crypto results → their own comparisons ([`crate::lab::compare`],
//! [`crate::crypto::compare`]); two capacity results → [`crate::capacity::compare`].

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Output};
use crate::doc::Input;
use crate::report::text;
use crate::stats::{CompareOptions, Direction, Samples, compare};

/// Arguments of `tlsperf compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline samples: one number a line; blank lines and `#` comments are ignored. Or
    /// a JSON result of `tlsperf load`, `tlsperf lab` or `tlsperf crypto` (a regular file of
    /// at most 256 MiB).
    a: PathBuf,
    /// Candidate samples, same format (a result of the same kind as A).
    b: PathBuf,
    /// Significance level (the confidence interval is at 1 − alpha).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Keep all samples (no Tukey 1.5×IQR outlier filter).
    #[arg(long)]
    no_filter: bool,
    /// The samples are rates (higher is better) rather than durations (lower is better).
    /// Sample files only: tlsperf results know the direction of each metric.
    #[arg(long)]
    higher_is_better: bool,
}

/// Runs `tlsperf compare`. Each input is read once ([`crate::doc::Input`]), its kind told
/// by its `schema`, and parsed from the same bytes: so `compare <(…) <(…)` sees whole
/// pipes.
pub fn exec(args: CompareArgs, out: &Output) -> Result<(), CliError> {
    use crate::crypto::compare::is_crypto_result;
    use crate::lab::compare::is_lab_result;
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(CliError::input(format!(
            "--alpha {}: must be between 0 and 1 (e.g. 0.05)",
            args.alpha
        )));
    }
    let a = Input::read(&args.a)?;
    let b = Input::read(&args.b)?;
    // Result documents know which way each of their metrics is better; only sample
    // files need to be told.
    if args.higher_is_better && (a.schema().is_some() || b.schema().is_some()) {
        return Err(CliError::input(
            "--higher-is-better applies to sample files only: tlsperf results (load, lab, \
             crypto) know which direction is better for each of their metrics",
        ));
    }
    if is_crypto_result(&a.bytes) || is_crypto_result(&b.bytes) {
        return compare_crypto_results(&args, &a, &b, out);
    }
    let capacity = |i: &Input| i.schema().as_deref() == Some(crate::capacity::SCHEMA);
    if capacity(&a) || capacity(&b) {
        return compare_capacity_results(&a, &b, out);
    }
    let json = |i: &Input| i.schema().is_some();
    if json(&a) && json(&b) {
        if is_lab_result(&a.bytes) || is_lab_result(&b.bytes) {
            return compare_lab_results(&args, &a, &b, out);
        }
        return compare_load_results(&args, &a, &b, out);
    }
    let samples = |i: &Input| Samples::parse(&i.path, &String::from_utf8_lossy(&i.bytes));
    let (a, b) = (samples(&a)?, samples(&b)?);
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

/// Two lab results: every configuration in both, its rounds compared.
fn compare_lab_results(
    args: &CompareArgs,
    ia: &Input,
    ib: &Input,
    out: &Output,
) -> Result<(), CliError> {
    use crate::lab::compare::{compare_labs, parse};
    let a = parse(&ia.path, &ia.bytes)?;
    let b = parse(&ib.path, &ib.bytes)?;
    let rows = compare_labs(&a, &b, (&args.a, &args.b), args.alpha, !args.no_filter)?;
    out.result(&rows, || {
        let mut s = String::new();
        for r in &rows {
            for (what, c) in [
                ("server CPU per handshake", &r.server_cpu_us_per_handshake),
                ("handshakes/s", &r.handshakes_per_s),
                ("mean request latency", &r.request_mean_ms),
            ] {
                s += &format!(
                    "{}/{} {what}: {}\n",
                    r.group,
                    r.cell,
                    c.as_ref()
                        .map_or("too few rounds to compare".to_string(), |c| c
                            .verdict
                            .clone())
                );
            }
        }
        s
    })
}

/// Two `tlsperf crypto` results of the same command: Welch's t-test per matched row on
/// its rounds (ns/op, lower is better).
fn compare_crypto_results(
    args: &CompareArgs,
    a: &Input,
    b: &Input,
    out: &Output,
) -> Result<(), CliError> {
    use crate::crypto::compare::{CryptoCompareOptions, compare_documents};
    let opts = CryptoCompareOptions {
        alpha: args.alpha,
        filter: !args.no_filter,
    };
    let result = compare_documents(a, b, &opts)?;
    out.result(&result, || crate::report::crypto::compare(&result))
}

/// Two load results: Welch's t-test on per-connection mean latencies (lower is better)
/// and on per-interval throughput (higher is better; the first and last, partial,
/// intervals left out).
fn compare_load_results(
    args: &CompareArgs,
    ia: &Input,
    ib: &Input,
    out: &Output,
) -> Result<(), CliError> {
    use crate::load::result::parse;
    let a = parse(&ia.path, &ia.bytes)?;
    let b = parse(&ib.path, &ib.bytes)?;
    let opts = |direction| CompareOptions {
        alpha: args.alpha,
        filter: !args.no_filter,
        direction,
    };
    let latency = |r: &crate::load::LoadResult, p: &std::path::Path| Samples {
        source: format!("{} (mean latency per connection, ms)", p.display()),
        values: r
            .connections
            .iter()
            .filter(|c| c.requests > 0)
            .map(|c| c.mean_latency_ms)
            .collect(),
    };
    let rate = |r: &crate::load::LoadResult, p: &std::path::Path| {
        let per_s = 1000.0 / r.interval_ms.max(1) as f64;
        let n = r.interval_requests.len();
        // Leave out the partial first and last intervals when enough remain.
        let inner = if n > 4 {
            &r.interval_requests[1..n - 1]
        } else {
            &r.interval_requests[..]
        };
        Samples {
            source: format!(
                "{} (requests/s per {} ms interval)",
                p.display(),
                r.interval_ms
            ),
            values: inner.iter().map(|&c| c as f64 * per_s).collect(),
        }
    };
    let mut results = vec![compare(
        &latency(&a, &args.a),
        &latency(&b, &args.b),
        &opts(Direction::LowerIsBetter),
    )?];
    let (rate_a, rate_b) = (rate(&a, &args.a), rate(&b, &args.b));
    // A run shorter than two intervals has no throughput samples to test.
    let short = rate_a.values.len() < 2 || rate_b.values.len() < 2;
    if !short {
        results.push(compare(&rate_a, &rate_b, &opts(Direction::HigherIsBetter))?);
    }
    out.result(&results, || {
        let mut text = results
            .iter()
            .map(text::comparison)
            .collect::<Vec<_>>()
            .join("\n");
        if short {
            text += &format!(
                "\n(no throughput comparison: a run lasted less than two {} ms intervals)\n",
                a.interval_ms
            );
        }
        text
    })
}

/// Two capacity results: is B's capacity really higher ([`crate::capacity::compare`]).
fn compare_capacity_results(ia: &Input, ib: &Input, out: &Output) -> Result<(), CliError> {
    use crate::capacity::result::parse;
    let a = parse(ia)?;
    let b = parse(ib)?;
    let row = crate::capacity::compare::compare(&a, &b)?;
    out.result(&row, || crate::report::capacity::comparison(&row))
}
