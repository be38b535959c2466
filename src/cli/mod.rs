//! The command-line front end: one file per command, each turning flags into a library
//! call and its result into output. No business logic lives here.
//!
//! Conventions shared by every command:
//! - `--json` prints machine-readable results on stdout; human tables otherwise.
//! - `-v` (repeatable) and `-q` set how much is logged on stderr; `-q` also silences the
//!   human summary of commands whose product is a file.
//! - `--color auto|always|never` (auto honours `NO_COLOR` and whether stdout is a tty).
//! - Exit codes: 0 success, 1 run-time failure, 2 usage or bad input, 130 interrupted;
//!   `capacity` also 3 (the generator, not the server, saturated) and 4 (the search
//!   ended before an answer); `link` the exit code of the program it ran. Errors print their cause chain on one line on stderr.

mod capacity;
mod client_args;
mod compare;
mod completions;
mod count;
mod crypto;
mod examples;
mod handshake;
mod lab;
mod link_args;
mod link_run;
mod load;
mod man;
mod merge;
mod observe;
mod output;
mod pki;
mod progress;
mod runtime;
mod serve;
mod signals;
mod tickets;
mod trust;
mod verify;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::error::{Classify, ErrorClass};
// The shared syntaxes, as `super::duration::parse` and `super::ratio::parse` to the
// commands' files.
use crate::{duration, ratio};
pub use output::Output;

/// tlsperf: find out why TLS handshakes are slow, phase by phase, and prove the fix.
#[derive(Debug, Parser)]
#[command(
    name = "tlsperf",
    version,
    about,
    propagate_version = true,
    after_help = examples::block(&[
        "tlsperf serve --gen-cert ecdsa-p256 --write-ca ca.pem",
        "tlsperf handshake https://localhost:8443/ -n 20 --cacert ca.pem",
    ])
)]
pub struct Cli {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Print machine-readable JSON on stdout instead of human tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Log more on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Log only errors, and print nothing on success for commands that write files.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// When to use colors.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto, global = true)]
    pub color: ColorWhen,
}

/// When to color output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// When the stream is a terminal and `NO_COLOR` is not set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Test PKIs and synthetic trust bundles.
    Pki(pki::PkiArgs),
    /// Where clients find their CA certificates, what loading them costs, what is in them.
    Trust(trust::TrustArgs),
    /// Verify a chain like a client, with the path, phase times and signature checks.
    Verify(verify::VerifyArgs),
    /// A reference HTTPS server whose every TLS knob is a flag, with handshake metrics.
    Serve(Box<serve::ServeArgs>),
    /// Session-ticket keys shared by server instances: create, rotate, show.
    Tickets(tickets::TicketsArgs),
    /// N sequential handshakes, phase by phase: parameters, chain, full vs resumed.
    Handshake(Box<handshake::HandshakeArgs>),
    /// Load generator: requests/s, handshakes/s, per-phase percentiles, errors by kind, CPU.
    Load(Box<load::LoadArgs>),
    /// The highest rate within a latency objective (p99=30ms…), with its 90% interval.
    ///
    /// Open-loop steps, each rate chosen by a Bayesian sequential design (psi-marginal) on a
    /// logistic curve of the chance that a step meets the objective; the capacity is the rate
    /// a step meets it with probability 0.9, given with its 90% credible interval and a knee
    /// chart.
    Capacity(Box<capacity::CapacityArgs>),
    /// The TLS performance lab: server and client configurations compared, in a report.
    ///
    /// A matrix of server and client configurations on this machine, each pair compared
    /// with Welch's t-test and the recommendations adjusted for the run's many tests
    /// (Holm), in an HTML and Markdown report.
    ///
    /// With --link the load generator runs behind an emulated link and the servers on its
    /// far side; two groups are added (first-byte: full vs resumed vs 0-RTT resumed;
    /// chain: RSA-4096 chain with an OCSP staple vs ECDSA), each round lasts at least 25
    /// round trips, and "what to change" ranks by the time to first byte at that link.
    Lab(Box<lab::LabArgs>),
    /// Passive handshake analysis of any TLS stack: a capture, a live interface, eBPF probes.
    ///
    /// Phases per handshake kind, resumption, HelloRetryRequests, groups, failures; with
    /// --probes also the time spent inside the processes (OpenSSL, Go's crypto/tls).
    Observe(Box<observe::ObserveArgs>),
    /// Combine load, capacity or observe results of several processes into one, exactly.
    Merge(merge::MergeArgs),
    /// Is B faster than A? Two sample files or results: load, lab, capacity, crypto, observe.
    Compare(compare::CompareArgs),
    /// Signature and key-exchange speed per implementation, on the wall clock.
    Crypto(crypto::CryptoArgs),
    /// Print a shell completion script.
    Completions(completions::CompletionsArgs),
    /// Write man pages, one per command and subcommand (tlsperf.1, tlsperf-load.1, …).
    Man(man::ManArgs),
    /// Run a program behind an emulated link, as mahimahi's mm-delay, with its exit code.
    ///
    /// The link's counters are printed at the program's end.
    Link(Box<link_run::LinkRunArgs>),
}

/// A failure on its way to the user: the error chain and its class (exit code).
#[derive(Debug)]
pub struct CliError {
    /// Input (exit 2) or run-time (exit 1).
    pub class: ErrorClass,
    /// The error with its cause chain.
    pub error: anyhow::Error,
}

impl CliError {
    /// A bad-input error with a message.
    pub fn input(msg: impl std::fmt::Display) -> Self {
        CliError {
            class: ErrorClass::Input,
            error: anyhow::anyhow!("{msg}"),
        }
    }

    /// A run-time failure.
    pub fn runtime(error: anyhow::Error) -> Self {
        CliError {
            class: ErrorClass::Runtime,
            error,
        }
    }

    /// A run stopped by a signal (exit 130), after what it measured was shown.
    pub fn interrupted(msg: impl std::fmt::Display) -> Self {
        CliError {
            class: ErrorClass::Interrupted,
            error: anyhow::anyhow!("{msg}"),
        }
    }
}

impl<E> From<E> for CliError
where
    E: Classify + std::error::Error + Send + Sync + 'static,
{
    fn from(e: E) -> Self {
        CliError {
            class: e.class(),
            error: anyhow::Error::new(e),
        }
    }
}

/// Runs a parsed command line, printing to the process's stdout and stderr.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let out = Output::new(cli.global.json, cli.global.quiet);
    run_with(cli, &out)
}

/// Runs a parsed command line in this process, printing results to `stdout` and
/// warnings to `stderr` (for tests that would rather not spawn the binary).
pub fn run_to(
    cli: Cli,
    stdout: Box<dyn std::io::Write + Send>,
    stderr: Box<dyn std::io::Write + Send>,
) -> Result<(), CliError> {
    let out = Output::with_writers(cli.global.json, cli.global.quiet, stdout, stderr);
    run_with(cli, &out)
}

fn run_with(cli: Cli, out: &Output) -> Result<(), CliError> {
    match cli.command {
        Command::Pki(args) => pki::exec(args, out),
        Command::Trust(args) => trust::exec(args, out),
        Command::Verify(args) => verify::exec(args, out),
        Command::Serve(args) => serve::exec(*args, out),
        Command::Tickets(args) => tickets::exec(args, out),
        Command::Handshake(args) => handshake::exec(*args, out),
        Command::Load(args) => load::exec(*args, out),
        Command::Lab(args) => lab::exec(*args, out),
        Command::Capacity(args) => capacity::exec(*args, out),
        Command::Observe(args) => observe::exec(*args, out),
        Command::Merge(args) => merge::exec(args, out),
        Command::Compare(args) => compare::exec(args, out),
        Command::Crypto(args) => crypto::exec(args, out),
        Command::Completions(args) => completions::exec(args, out),
        Command::Man(args) => man::exec(args, out),
        Command::Link(args) => link_run::exec(*args, out),
    }
}

/// The whole program: parse arguments, set up color and logging, run, map the outcome to
/// an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let choice = match cli.global.color {
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
    init_logging(cli.global.verbose, cli.global.quiet);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // The program behind `tlsperf link` said what it had to say.
        Err(e) if matches!(e.class, ErrorClass::Program(_)) => ExitCode::from(e.class.exit_code()),
        Err(e) => {
            let label = anstyle::Style::new()
                .fg_color(Some(anstyle::AnsiColor::Red.into()))
                .bold();
            anstream::eprintln!("{label}error:{label:#} {:#}", e.error);
            ExitCode::from(e.class.exit_code())
        }
    }
}

/// The log filter for `-q`/`-v`: rustls's own warnings (an alert received, in its Debug
/// text) are shown from `-v` on, not by default; what tlsperf makes of them is in its
/// own messages.
fn log_filter(verbose: u8, quiet: bool) -> &'static str {
    match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn,rustls=error",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let level = log_filter(verbose, quiet);
    let filter = EnvFilter::try_from_env("TLSPERF_LOG").unwrap_or_else(|_| EnvFilter::new(level));
    let ansi = anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn rustls_warnings_are_not_shown_by_default() {
        assert_eq!(log_filter(0, false), "warn,rustls=error");
        assert_eq!(log_filter(1, false), "info");
        assert_eq!(log_filter(0, true), "error");
        // The filter parses.
        let _ = tracing_subscriber::EnvFilter::new(log_filter(0, false));
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every value-taking argument of the whole tree: (`tlsperf load --timeout`, the arg).
    fn value_args() -> Vec<(String, clap::Arg)> {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
            for arg in cmd.get_arguments() {
                if arg.get_action().takes_values() {
                    let name = match arg.get_long() {
                        Some(long) => format!("{path} --{long}"),
                        None => format!("{path} {}", arg.get_id()),
                    };
                    out.push((name, arg.clone()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "tlsperf", &mut out);
        out
    }

    /// The name `--help` shows for an argument's value.
    fn value_name(arg: &clap::Arg) -> String {
        arg.get_value_names()
            .and_then(|v| v.first())
            .map(|n| n.to_string())
            .unwrap_or_else(|| arg.get_id().as_str().to_uppercase())
    }

    /// What `--LONG=text` gives through `arg`'s own parser (`None`: refused, or not an
    /// `f64`, or not a `--long` flag).
    fn parse_f64(arg: &clap::Arg, text: &str) -> Option<f64> {
        let long = arg.get_long()?;
        let probe = clap::Command::new("probe").arg(
            clap::Arg::new(arg.get_id().clone())
                .long(&*long.to_string().leak())
                .value_parser(arg.get_value_parser().clone()),
        );
        let m = probe
            .try_get_matches_from(["probe", &format!("--{long}={text}")])
            .ok()?;
        m.try_get_one::<f64>(arg.get_id().as_str())
            .ok()
            .flatten()
            .copied()
    }

    /// One value name per kind of value: every duration is `<DURATION>`, every ratio
    /// `<PERCENT>` (and takes both 5% and 0.05), every count `<N>`, every file `<FILE>`
    /// and every directory `<DIR>`, every socket address `<ADDR>`, every instant `<TIME>`.
    #[test]
    fn one_value_name_per_kind_of_value() {
        use std::any::TypeId;
        let mut wrong = Vec::new();
        let args = value_args();
        assert!(args.len() > 100, "{}", args.len());
        for (name, arg) in &args {
            let shown = value_name(arg);
            let parser = arg.get_value_parser();
            let ty = parser.type_id();
            let allowed: &[&str] = if ty == TypeId::of::<std::time::Duration>() {
                &["DURATION"]
            } else if ty == TypeId::of::<std::path::PathBuf>() {
                // compare's two positional inputs are A and B, as its help names them.
                &["FILE", "DIR", "PATH", "A", "B"]
            } else if ty == TypeId::of::<std::net::SocketAddr>() {
                &["ADDR"]
            } else if ty == TypeId::of::<time::OffsetDateTime>() {
                &["TIME"]
            } else if [
                TypeId::of::<u64>(),
                TypeId::of::<u32>(),
                TypeId::of::<u16>(),
                TypeId::of::<usize>(),
            ]
            .iter()
            .any(|t| ty == *t)
            {
                // Counts are N; a size, a port, a process or a span of days says so.
                &["N", "BYTES", "MIB", "PORT", "PID", "DAYS"]
            } else if ty == TypeId::of::<f64>() {
                if parse_f64(arg, "5%").is_some() {
                    &["PERCENT"]
                } else {
                    &["R", "RATES", "FACTOR"]
                }
            } else {
                continue;
            };
            if !allowed.contains(&shown.as_str()) {
                wrong.push(format!("{name} <{shown}>: expected one of {allowed:?}"));
            }
            if shown == "PERCENT" {
                let at = |text: &str| parse_f64(arg, text);
                assert_eq!(at("5%"), Some(0.05), "{name}: 5%");
                assert_eq!(at("0.05"), Some(0.05), "{name}: 0.05");
            }
        }
        assert!(wrong.is_empty(), "value names:\n{}", wrong.join("\n"));
        // Names a reader would take for different kinds, once seen here.
        for (name, arg) in &args {
            let shown = value_name(arg);
            assert!(
                ![
                    "COUNT",
                    "REQUESTS",
                    "K",
                    "TIMEOUT",
                    "SHUTDOWN_TIMEOUT",
                    "STEP_MIN",
                    "OUT",
                    "FILE.svg",
                    // A duration is <DURATION>, whatever its unit was.
                    "MS",
                    "SECONDS",
                ]
                .contains(&shown.as_str()),
                "{name} <{shown}>"
            );
        }
    }

    /// Each command's one-liner fits on one line of `tlsperf --help` at 100 columns (the
    /// name column takes 15).
    #[test]
    fn command_one_liners_fit_on_one_line() {
        for sub in Cli::command().get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{} has no one-liner", sub.get_name());
            assert!(
                about.chars().count() <= 85 && !about.contains('\n'),
                "{}: {about}",
                sub.get_name()
            );
        }
    }

    /// `-d` is `--duration` wherever a command has one: how long it runs (in `crypto`, per
    /// row).
    #[test]
    fn every_duration_flag_has_its_short_d() {
        for (name, arg) in value_args() {
            if arg.get_long() == Some("duration") {
                assert_eq!(arg.get_short(), Some('d'), "{name}");
            }
        }
    }
}
