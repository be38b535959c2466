//! Where command results go: JSON or human text on stdout. A closed pipe (`| head`) is
//! not an error.

use std::io::Write;

use serde::Serialize;

use super::CliError;

/// The output choices of one invocation.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    json: bool,
    quiet: bool,
}

impl Output {
    /// JSON or human text; `quiet` drops human summaries of file-writing commands.
    pub fn new(json: bool, quiet: bool) -> Self {
        Output { json, quiet }
    }

    /// True when `-q` was given.
    pub fn quiet(&self) -> bool {
        self.quiet
    }

    /// True when `--json` was given.
    pub fn json(&self) -> bool {
        self.json
    }

    /// With `--json`, refuses (before anything is written) a path the JSON report will
    /// name but cannot hold: JSON strings are Unicode, and `path` is not.
    pub fn check_json_path(&self, flag: &str, path: &std::path::Path) -> Result<(), CliError> {
        if self.json && path.to_str().is_none() {
            return Err(CliError::input(format!(
                "{flag} {}: --json cannot report a path that is not valid UTF-8 (rename it, or \
                 drop --json)",
                path.display()
            )));
        }
        Ok(())
    }

    /// Prints a command's result: `value` as JSON with `--json`, else `human()`.
    pub fn result<T: Serialize>(
        &self,
        value: &T,
        human: impl FnOnce() -> String,
    ) -> Result<(), CliError> {
        if self.json {
            self.json_value(value)
        } else {
            self.text(&human())
        }
    }

    /// Like [`Output::result`], but the human text is dropped with `-q`: for commands whose
    /// product is a file.
    pub fn summary<T: Serialize>(
        &self,
        value: &T,
        human: impl FnOnce() -> String,
    ) -> Result<(), CliError> {
        if !self.json && self.quiet {
            return Ok(());
        }
        self.result(value, human)
    }

    /// Writes raw text (already formatted) to stdout.
    pub fn text(&self, text: &str) -> Result<(), CliError> {
        let mut out = anstream::stdout().lock();
        handle(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
    }

    fn json_value<T: Serialize>(&self, value: &T) -> Result<(), CliError> {
        let mut text = serde_json::to_string_pretty(value)
            .map_err(|e| CliError::runtime(anyhow::Error::new(e).context("cannot encode JSON")))?;
        text.push('\n');
        let mut out = std::io::stdout().lock();
        handle(out.write_all(text.as_bytes()).and_then(|()| out.flush()))
    }
}

fn handle(r: std::io::Result<()>) -> Result<(), CliError> {
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::runtime(
            anyhow::Error::new(e).context("cannot write to stdout"),
        )),
    }
}
