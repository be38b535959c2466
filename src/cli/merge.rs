//! `tlsperf merge A.json B.json … --out C.json`: load results →
//! [`crate::load::result::merge`]; observations (`tlsperf observe --out`) →
//! [`crate::observe::result::merge`]. The first file's schema says which.

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Output};
use crate::doc::Input;
use crate::load::result::{merge, read};
use crate::observe::result as observe;
use crate::report::text;

/// Arguments of `tlsperf merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Results written by `tlsperf load --out` (runs made at the same time from several
    /// machines against one server), or by `tlsperf observe --out` (several capture
    /// points or time windows); regular files of at most 256 MiB each, all of one kind.
    #[arg(required = true, num_args = 2..)]
    results: Vec<PathBuf>,
    /// Where to write the combined result (JSON, atomically).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace --out FILE if it exists.
    #[arg(long)]
    force: bool,
    /// Merge load results made with different settings (TLS version, resumption, new
    /// connections or keep-alive, HTTP version, target…); refused otherwise, listing the
    /// differences. Counts, rates and durations may always differ.
    #[arg(long)]
    allow_mixed: bool,
}

/// Runs `tlsperf merge`.
pub fn exec(args: MergeArgs, out: &Output) -> Result<(), CliError> {
    crate::files::check_destination(&args.out, args.force)?;
    let first = Input::read(&args.results[0])?;
    if first.schema().as_deref() == Some(observe::SCHEMA) {
        let mut all = vec![observe::parse(&first.path, &first.bytes)?];
        for p in &args.results[1..] {
            let input = Input::read(p)?;
            all.push(observe::parse(&input.path, &input.bytes)?);
        }
        let merged = observe::merge(&all)?;
        crate::doc::write_json(&merged, &args.out, args.force)?;
        return out.summary(&merged, || crate::report::observe::observation(&merged));
    }
    let results = args
        .results
        .iter()
        .map(|p| read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let merged = merge(&results, args.allow_mixed)?;
    crate::doc::write_json(&merged, &args.out, args.force)?;
    out.summary(&merged, || text::load_result(&merged))
}
