//! `tlsperf man DIR`: man pages generated from the command-line definition
//! ([`clap_mangen`]), one per command and subcommand (`tlsperf.1`, `tlsperf-load.1`,
//! `tlsperf-pki-init.1`, …), written into DIR together (each under a temporary name,
//! renamed into place).

use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory};
use serde::Serialize;

use super::{Cli, CliError, Output};
use crate::files::{self, FileMode, Staging};

/// Arguments of `tlsperf man`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf man ~/.local/share/man/man1",
]))]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing; pages already there are
    /// replaced).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// One man page: its file name and roff text.
pub struct Page {
    /// `tlsperf.1`, `tlsperf-load.1`, `tlsperf-pki-init.1`, …
    pub file_name: String,
    /// The page, in roff.
    pub roff: Vec<u8>,
}

/// The man pages of the whole command tree: the top-level command first, then every
/// visible subcommand, depth first, named by joining the command names with `-`.
pub fn pages() -> Result<Vec<Page>, std::io::Error> {
    // `help` is clap's own subcommand; every page documents --help instead.
    let mut root = Cli::command().disable_help_subcommand(true);
    // Gives each subcommand its display name (`tlsperf-pki-init`) and the global flags.
    root.build();
    let mut pages = Vec::new();
    collect(&root, &mut pages)?;
    Ok(pages)
}

fn collect(cmd: &clap::Command, pages: &mut Vec<Page>) -> Result<(), std::io::Error> {
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut roff)?;
    pages.push(Page {
        file_name: format!("{name}.1"),
        roff,
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, pages)?;
    }
    Ok(())
}

#[derive(Serialize)]
struct ManReport<'a> {
    dir: &'a Path,
    files: Vec<&'a str>,
}

/// Writes the pages into `args.dir`, then lists them.
pub fn exec(args: ManArgs, out: &Output) -> Result<(), CliError> {
    let dir = &args.dir;
    out.check_json_path("DIR", dir)?;
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::input(format!(
            "tlsperf man {}: it exists and is not a directory",
            dir.display()
        )));
    }
    files::create_dir_all(dir)?;
    let pages = pages()
        .map_err(|e| CliError::runtime(anyhow::Error::new(e).context("rendering the man pages")))?;
    let mut staging = Staging::new(true);
    for page in &pages {
        staging.add(&dir.join(&page.file_name), &page.roff, FileMode::Public)?;
    }
    staging.commit()?;
    let report = ManReport {
        dir,
        files: pages.iter().map(|p| p.file_name.as_str()).collect(),
    };
    out.summary(&report, || {
        format!(
            "wrote {} man pages to {} (read one with: man -l {})\n",
            pages.len(),
            dir.display(),
            dir.join("tlsperf-load.1").display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_page_per_command_named_by_its_path() {
        let pages = pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|p| p.file_name.as_str()).collect();
        for want in [
            "tlsperf.1",
            "tlsperf-load.1",
            "tlsperf-handshake.1",
            "tlsperf-man.1",
            "tlsperf-pki.1",
            "tlsperf-pki-init.1",
            "tlsperf-crypto-sign.1",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
        let load = pages
            .iter()
            .find(|p| p.file_name == "tlsperf-load.1")
            .unwrap();
        let text = String::from_utf8_lossy(&load.roff);
        assert!(text.contains(".TH tlsperf-load 1"), "{text}");
        assert!(text.contains("\\-\\-rate"), "{text}");
    }
}
