//! Where command results go: JSON or human text on stdout, warnings on stderr. A closed
//! pipe (`| head`) is not an error. Both streams are any [`Write`], so tests can run a
//! command in-process and read what it printed ([`Output::with_writers`]).

use std::io::Write;
use std::sync::Mutex;

use anstyle::{AnsiColor, Style};
use serde::Serialize;

use super::CliError;

/// A stream `Output` writes to.
type Stream = Mutex<Box<dyn Write + Send>>;

/// The output choices of one invocation, and the streams it writes to.
pub struct Output {
    json: bool,
    quiet: bool,
    stdout: Stream,
    stderr: Stream,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("json", &self.json)
            .field("quiet", &self.quiet)
            .finish_non_exhaustive()
    }
}

/// The style of the `warning:` label.
const WARNING: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)))
    .bold();

impl Output {
    /// JSON or human text on the process's stdout (styles stripped when color is off);
    /// `quiet` drops human summaries of file-writing commands.
    pub fn new(json: bool, quiet: bool) -> Self {
        Output::with_writers(
            json,
            quiet,
            Box::new(anstream::stdout()),
            Box::new(anstream::stderr()),
        )
    }

    /// The same choices, writing results to `stdout` and warnings to `stderr`.
    pub fn with_writers(
        json: bool,
        quiet: bool,
        stdout: Box<dyn Write + Send>,
        stderr: Box<dyn Write + Send>,
    ) -> Self {
        Output {
            json,
            quiet,
            stdout: Mutex::new(stdout),
            stderr: Mutex::new(stderr),
        }
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

    /// [`Output::summary`] when the command writes its result to a file (`written`), else
    /// [`Output::result`]: `-q` never drops a result that goes nowhere else.
    pub fn product<T: Serialize>(
        &self,
        value: &T,
        written: bool,
        human: impl FnOnce() -> String,
    ) -> Result<(), CliError> {
        if written {
            self.summary(value, human)
        } else {
            self.result(value, human)
        }
    }

    /// Writes raw text (already formatted) to stdout.
    pub fn text(&self, text: &str) -> Result<(), CliError> {
        write_to(&self.stdout, text.as_bytes(), "stdout")
    }

    /// `value` as one line of compact JSON (the event streams of `serve --json`).
    pub fn json_line<T: Serialize>(&self, value: &T) -> Result<(), CliError> {
        let mut text = serde_json::to_string(value).map_err(encode_err)?;
        text.push('\n');
        self.text(&text)
    }

    /// A warning on stderr, `warning: <message>`, whatever `--json` and `-q` say: the run
    /// goes on, but its figures or its safety deserve a second look.
    pub fn warn(&self, message: impl std::fmt::Display) {
        let line = format!("{WARNING}warning:{WARNING:#} {message}\n");
        // A warning that cannot be written has nowhere else to go.
        let _ = write_to(&self.stderr, line.as_bytes(), "stderr");
    }

    /// A note on stderr (what was written where, next to a result on stdout).
    pub fn note(&self, message: impl std::fmt::Display) {
        let _ = write_to(&self.stderr, format!("{message}\n").as_bytes(), "stderr");
    }

    fn json_value<T: Serialize>(&self, value: &T) -> Result<(), CliError> {
        let mut text = serde_json::to_string_pretty(value).map_err(encode_err)?;
        text.push('\n');
        self.text(&text)
    }
}

fn encode_err(e: serde_json::Error) -> CliError {
    CliError::runtime(anyhow::Error::new(e).context("cannot encode JSON"))
}

fn write_to(stream: &Stream, bytes: &[u8], name: &str) -> Result<(), CliError> {
    // A writer poisoned by a panic elsewhere still takes bytes.
    let mut w = stream
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match w.write_all(bytes).and_then(|()| w.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::runtime(
            anyhow::Error::new(e).context(format!("cannot write to {name}")),
        )),
    }
}
