//! `tlsperf merge A.json B.json … --out C.json`: load results read and written through
//! [`crate::doc`] → [`crate::load::result::merge`].

use std::path::PathBuf;

use clap::Args;

use super::{CliError, Output};
use crate::load::result::merge;
use crate::report::text;

/// Arguments of `tlsperf merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Results written by `tlsperf load --out` (runs made at the same time from several
    /// machines against one server); regular files of at most 256 MiB each.
    #[arg(required = true, num_args = 2..)]
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
    let results = args
        .results
        .iter()
        .map(|p| crate::doc::read::<crate::load::LoadResult>(p))
        .collect::<Result<Vec<_>, _>>()?;
    let merged = merge(&results, args.allow_mixed)?;
    crate::doc::write(&merged, &args.out, args.force)?;
    out.summary(&merged, || text::load_result(&merged))
}
