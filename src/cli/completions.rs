//! `tlsperf completions SHELL`: a completion script on stdout.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use super::{Cli, CliError, Output};

/// Arguments of `tlsperf completions`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf completions bash > ~/.local/share/bash-completion/completions/tlsperf",
]))]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the script.
pub fn exec(args: CompletionsArgs, out: &Output) -> Result<(), CliError> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "tlsperf", &mut buf);
    out.text(&String::from_utf8_lossy(&buf))
}
