//! `tlsperf tickets init|rotate|show FILE`: the shared session-ticket key ring
//! ([`crate::tls::tickets`]). Secrets are never printed: only key ids and states.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{CliError, Output};
use crate::report::text;
use crate::tls::tickets;

/// Arguments of `tlsperf tickets`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf tickets init keys.bin",
    "tlsperf tickets rotate keys.bin",
]))]
pub struct TicketsArgs {
    #[command(subcommand)]
    command: TicketsCommand,
}

#[derive(Debug, Subcommand)]
enum TicketsCommand {
    /// Create a key ring: an active key and a standby key (file mode 0600).
    #[command(after_help = super::examples::block(&[
        "tlsperf tickets init keys.bin",
        "tlsperf serve --resumption tickets --ticket-keys keys.bin",
    ]))]
    Init {
        /// The key ring file.
        file: PathBuf,
        /// Replace an existing file (every ticket issued under it stops resuming); through
        /// a symbolic link, the file it points to is replaced and the link kept.
        #[arg(long)]
        force: bool,
    },
    /// Rotate: destroy the decrypt-only key, active → decrypt-only, standby → active, new standby.
    #[command(after_help = super::examples::block(&[
        "tlsperf tickets rotate keys.bin",
    ]))]
    Rotate {
        /// The key ring file (a regular file of at most 64 KiB).
        file: PathBuf,
    },
    /// Show key ids and states (never the secrets).
    #[command(after_help = super::examples::block(&[
        "tlsperf tickets show keys.bin",
    ]))]
    Show {
        /// The key ring file (a regular file of at most 64 KiB).
        file: PathBuf,
    },
}

/// Runs `tlsperf tickets …`.
pub fn exec(args: TicketsArgs, out: &Output) -> Result<(), CliError> {
    let (info, verb) = match args.command {
        TicketsCommand::Init { file, force } => (tickets::init(&file, force)?, "created"),
        TicketsCommand::Rotate { file } => (tickets::rotate(&file)?, "rotated"),
        TicketsCommand::Show { file } => (tickets::show(&file)?, "key ring"),
    };
    if verb == "key ring" {
        out.result(&info, || text::ticket_ring(verb, &info))
    } else {
        out.summary(&info, || text::ticket_ring(verb, &info))
    }
}
