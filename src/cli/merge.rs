//! `tlsperf merge A.json B.json … --out C.json`: results read and written through
//! [`crate::doc`]; load results → [`crate::load::result::merge`], capacity results (the
//! processes of one shared search) → [`crate::capacity::merge::merge`], step by step;
//! observations (`tlsperf observe --out`) → [`crate::observe::result::merge`].

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Output};
use crate::doc::Document;
use crate::load::result::merge;
use crate::report::text;

/// Arguments of `tlsperf merge`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf merge a.json b.json --out all.json",
]))]
pub struct MergeArgs {
    /// Results written by `tlsperf load --out` (runs made at the same time from several
    /// machines against one server), or all by `tlsperf capacity --out` (the processes
    /// of one search with --rate-share), or all by `tlsperf observe --out` (capture points
    /// or time windows); regular files of at most 256 MiB each.
    #[arg(value_name = "FILE", required = true, num_args = 2..)]
    results: Vec<PathBuf>,
    /// Where to write the combined result (JSON, atomically).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace --out FILE if it exists.
    #[arg(long)]
    force: bool,
    /// Merge results made with different settings (TLS version, resumption, new
    /// connections or keep-alive, HTTP version, target…); refused otherwise, listing the
    /// differences. Counts, rates and durations may always differ.
    #[arg(long)]
    allow_mixed: bool,
}

/// Runs `tlsperf merge`.
pub fn exec(args: MergeArgs, out: &Output) -> Result<(), CliError> {
    crate::files::check_destination(&args.out, args.force)?;
    crate::files::check_not_input(&args.out, args.results.iter().map(PathBuf::as_path))?;
    // A result given twice (the same path, or a link to it) would count its requests
    // twice: refused, before anything is read.
    for (i, a) in args.results.iter().enumerate() {
        if let Some(b) = args.results[..i]
            .iter()
            .find(|b| crate::files::same_file(a, b))
        {
            return Err(CliError::input(format!(
                "{} and {} are the same file: merged, its counts would be added twice; \
                 give each result once",
                b.display(),
                a.display()
            )));
        }
    }
    let inputs = args
        .results
        .iter()
        .map(|p| crate::doc::Input::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let observation = |i: &crate::doc::Input| {
        i.schema().as_deref() == Some(<crate::observe::Observation as Document>::SCHEMA)
    };
    if inputs.iter().any(observation) {
        if let Some(other) = inputs.iter().find(|i| !observation(i)) {
            // Not JSON (or cut short): where it breaks says more than its kind.
            if other.schema().is_none() {
                other.parse::<crate::observe::Observation>()?;
            }
            return Err(CliError::input(format!(
                "{}: not a tlsperf observe result, unlike the others: merge observations \
                 with observations only",
                other.path.display()
            )));
        }
        let all = inputs
            .into_iter()
            .map(|i| i.parse::<crate::observe::Observation>())
            .collect::<Result<Vec<_>, _>>()?;
        let merged = crate::observe::result::merge(&all)?;
        crate::doc::write(&merged, &args.out, args.force)?;
        return out.summary(&merged, || crate::report::text::observation(&merged));
    }
    let capacity = |i: &crate::doc::Input| {
        i.schema().as_deref() == Some(<crate::capacity::CapacityResult as Document>::SCHEMA)
    };
    if inputs.iter().any(capacity) {
        if let Some(other) = inputs.iter().find(|i| !capacity(i)) {
            if other.schema().is_none() {
                other.parse::<crate::capacity::CapacityResult>()?;
            }
            return Err(CliError::input(format!(
                "{}: not a capacity result, unlike the others: merge capacity results with \
                 capacity results only",
                other.path.display()
            )));
        }
        let results = inputs
            .into_iter()
            .map(|i| i.parse::<crate::capacity::CapacityResult>())
            .collect::<Result<Vec<_>, _>>()?;
        // An error about one result names its file.
        let merged = crate::capacity::merge::merge(&results).map_err(|e| {
            match e.index().and_then(|i| args.results.get(i - 1)) {
                Some(path) => CliError::input(format!("{}: {e}", path.display())),
                None => e.into(),
            }
        })?;
        crate::doc::write(&merged, &args.out, args.force)?;
        return out.summary(&merged, || crate::report::capacity::text(&merged));
    }
    let results = inputs
        .into_iter()
        .map(|i| i.parse::<crate::load::LoadResult>())
        .collect::<Result<Vec<_>, _>>()?;
    let merged = merge(&results, args.allow_mixed)?;
    crate::doc::write(&merged, &args.out, args.force)?;
    out.summary(&merged, || text::load_result(&merged))
}
