//! `tlsperf lab`: flags → [`crate::lab`] → progress bar → the report directory
//! (`report.md`, `results.json`, `index.html`, each written atomically).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use indicatif::ProgressBar;
use tokio::runtime::Runtime;

use super::link_args::LinkArgs;
use super::progress;
use super::runtime::{Threads, block_on_interruptible, runtime};
use super::{CliError, Output};
use crate::client::target::Target;
use crate::files::{FileMode, write_atomic};
use crate::lab::{self, Control, Event, External, Group, LabLink, LabOptions, LabResult};
use crate::link::Link;
use crate::report::lab as report;

/// Arguments of `tlsperf lab`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf lab --quick --out report",
    "tlsperf lab --only resumption,kx --slo p99=30ms",
]))]
pub struct LabArgs {
    /// 8 rounds of 0.25 s per configuration (≈ 80 s on 2 cores; the default).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// 12 rounds of 1 s per configuration, RSA-4096 too (several minutes).
    #[arg(long)]
    full: bool,
    /// The report directory (created; its report files are replaced).
    #[arg(long, value_name = "DIR", default_value = "tlsperf-report")]
    out: PathBuf,
    /// Only these groups (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "GROUP")]
    only: Vec<Group>,
    /// Rounds per configuration (at least 3: Welch's test needs spread to work with).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(3..=50))]
    rounds: Option<u64>,
    /// Run the client-side groups against this server instead of the lab's own
    /// (https://HOST[:PORT][/PATH]).
    #[arg(long, value_name = "URL")]
    target: Option<String>,
    /// Roots for --target (PEM, a regular file of at most 128 MiB); default: the system
    /// store.
    #[arg(long, value_name = "FILE", requires = "target")]
    cacert: Option<PathBuf>,
    /// After its rounds, search each configuration's capacity at this objective (new
    /// connections/s; as `tlsperf capacity --slo`, e.g. p99=30ms): the headline figure,
    /// and what "What to change" compares.
    #[arg(long, value_name = "OBJECTIVE")]
    slo: Option<crate::capacity::Slo>,
    /// The longest capacity search per configuration (with --slo; at least the search's
    /// shortest step: its 0.5 s warm-up, 1 s of requests and the request timeout, 10× the
    /// largest bound within 1s..10s; an unfinished search reports its bracket).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::duration::parse_positive, requires = "slo")]
    slo_time: std::time::Duration,
    /// A null lab: every configuration of each group replaced by the group's baseline,
    /// so that every comparison compares the same thing. "What to change" should then
    /// be empty in at least 95 runs of 100 (its error rate is controlled over the run:
    /// Holm): a check of the lab itself.
    #[arg(long)]
    null: bool,
    /// Upload: send each request as a POST with a body of this many bytes (at most 67108864,
    /// 64 MiB; as `load --body-size`), in the rounds and the --slo searches. Each round
    /// gives the uploads' goodput (bytes/s). With --target the server must accept a POST.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=crate::client::http1::MAX_BODY))]
    body_size: u64,
    /// `--link`: see the command's long help.
    #[command(flatten)]
    link: LinkArgs,
}

/// Runs `tlsperf lab`.
pub fn exec(args: LabArgs, out: &Output) -> Result<(), CliError> {
    let external = check(&args)?;
    // Made now so that a bad --out stops the run before it starts; removed again (when
    // this run made it and it is still empty) if nothing gets measured.
    let out_dir = OutDir::prepare(&args.out)?;
    let work = tempfile::Builder::new()
        .prefix("tlsperf-lab-")
        .tempdir()
        .map_err(|e| {
            CliError::runtime(anyhow::Error::new(e).context("creating a work directory"))
        })?;
    let exe = std::env::current_exe().map_err(|e| {
        CliError::runtime(anyhow::Error::new(e).context("finding the tlsperf executable"))
    })?;
    let mut opts = options(&args, exe, work.path().to_path_buf());
    // Before the runtime starts, so that every thread of the load generator inherits it.
    opts.pinning = match &external {
        Some(_) => lab::pin::not_pinned("--target: the server is not the lab's"),
        None => lab::pin::pin_client(),
    };
    // The link, once nothing else can fail on bad input: the servers go on its far side
    // (the host's namespace), this thread and the load generator's runtime on its near
    // side. Started after pinning, so its delay line shares the client's CPU.
    let link = match (&args.link.link, &external) {
        (None, _) => Ok(None),
        (Some(_), Some(ext)) => args.link.start(&ext.target),
        (Some(spec), None) => Link::start(spec).map(Some).map_err(CliError::from),
    };
    let link = link.inspect_err(|_| out_dir.discard())?;
    let host_ns = match &link {
        Some(_) => Some(Arc::new(crate::link::netns::open_ns()?)),
        None => None,
    };
    let _inside = link.as_ref().map(|l| l.enter()).transpose()?;
    if let (Some(l), Some(ns)) = (&link, host_ns) {
        opts.at_link(LabLink {
            // A profile's name comes first in the spec, then its figures.
            spec: l.spec().to_string(),
            rtt: l.spec().rtt,
            server_netns: ns,
        });
    }
    opts.target = external;
    let rt = runtime(Threads::One, None)?;
    let result = run_with_progress(&rt, &opts, out, work.path());
    let mut result = result.inspect_err(|_| out_dir.discard())?;
    result.link_counters = link.as_ref().map(|l| l.counters());
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    write_report(&result, &args.out)?;
    out.summary(&result, || report::summary(&result, &args.out))?;
    outcome(&result, &args.out)
}

/// The checks of flags clap cannot make; the `--target` server, if any.
fn check(args: &LabArgs) -> Result<Option<External>, CliError> {
    let at_link = args.link.link.is_some();
    if !at_link && let Some(g) = args.only.iter().find(|g| g.link_only()) {
        return Err(CliError::input(format!(
            "--only {} needs --link: on loopback a round trip costs nothing, so the group would show nothing",
            g.name()
        )));
    }
    // As `capacity --max-time`: a search shorter than its shortest step runs none.
    if let Some(slo) = &args.slo {
        let shortest = crate::lab::capacity::shortest_search(slo);
        if args.slo_time < shortest {
            return Err(CliError::input(format!(
                "--slo-time {} is shorter than the shortest step of the lab's capacity search \
                 ({} s: its warm-up, {} s of requests and the request timeout for their \
                 answers): no step could run",
                humantime::format_duration(args.slo_time),
                shortest.as_secs_f64(),
                crate::lab::capacity::STEP_MIN.as_secs_f64()
            )));
        }
    }
    let external = match &args.target {
        Some(url) => Some(External {
            target: Target::parse(url, None).map_err(CliError::input)?,
            cacert: args.cacert.clone(),
        }),
        None => None,
    };
    if let Some(p) = &args.cacert
        && !p.is_file()
    {
        return Err(CliError::input(format!(
            "--cacert {}: not a readable file",
            p.display()
        )));
    }
    Ok(external)
}

/// The report directory, and whether this run created it.
struct OutDir<'a> {
    path: &'a Path,
    made: bool,
}

impl<'a> OutDir<'a> {
    /// Creates `path` when missing and checks that the report files can be written there
    /// (a directory made for nothing is removed again).
    fn prepare(path: &'a Path) -> Result<Self, CliError> {
        let dir = OutDir {
            path,
            made: !path.exists(),
        };
        crate::files::create_dir_all(path)?;
        for name in ["results.json", "report.md", "index.html"] {
            if let Err(e) = crate::files::check_writable(&path.join(name)) {
                dir.discard();
                return Err(e.into());
            }
        }
        Ok(dir)
    }

    /// Removes the directory if this run made it and it is still empty: nothing was
    /// measured.
    fn discard(&self) {
        if self.made {
            let _ = std::fs::remove_dir(self.path);
        }
    }
}

/// The lab's options from the flags: the preset, the groups, and what the flags change
/// (pinning, the link and the target are the caller's).
fn options(args: &LabArgs, exe: PathBuf, work: PathBuf) -> LabOptions {
    let groups = if args.only.is_empty() {
        let mut g = Group::ALL.to_vec();
        if args.link.link.is_some() {
            g.extend(Group::LINK_ONLY);
        }
        g
    } else {
        // Each group once, in the order first named (`--only mtls,tls,mtls`).
        let mut g: Vec<Group> = Vec::new();
        for x in &args.only {
            if !g.contains(x) {
                g.push(*x);
            }
        }
        g
    };
    let mut opts = LabOptions::preset(args.full, groups, exe, work);
    if let Some(r) = args.rounds {
        opts.rounds = r as usize;
    }
    opts.slo = args.slo.clone();
    opts.slo_time = args.slo_time;
    opts.null = args.null;
    opts.body_size = args.body_size;
    opts
}

/// Runs the lab on `rt` under a progress bar; the first signal stops it between rounds,
/// a second one exits at once.
fn run_with_progress(
    rt: &Runtime,
    opts: &LabOptions,
    out: &Output,
    work: &Path,
) -> Result<LabResult, CliError> {
    let bar = progress::bar(out, 1, "{bar:40} {pos}/{len} rounds {msg} [{elapsed}]");
    let control = Arc::new(Control::default());
    let b = bar.clone();
    let lines = !(out.json() || out.quiet());
    let on_event = move |e: Event| {
        if let Some(line) = show(&b, e).filter(|_| lines) {
            // Off a terminal the bar draws nothing: a line per group says the run goes on.
            if b.is_hidden() {
                out.note(line);
            } else {
                b.println(line);
            }
        }
    };
    // A second signal exits at once: the servers die with us (PR_SET_PDEATHSIG), the work
    // directory and its private keys are removed first.
    let work_dir = work.to_path_buf();
    let stop = Arc::clone(&control);
    let result = block_on_interruptible(
        rt,
        move || stop.stop(),
        move || {
            let _ = std::fs::remove_dir_all(&work_dir);
        },
        lab::run(opts, &on_event, &control),
    );
    bar.finish_and_clear();
    Ok(result?)
}

/// Shows a lab event on the progress bar; a group's end is also a line to print (with
/// its warnings, each on a line of its own).
fn show(bar: &ProgressBar, e: Event) -> Option<String> {
    match e {
        Event::Planned { steps, .. } => {
            bar.set_length(steps as u64);
            None
        }
        Event::Preparing(what) => {
            bar.set_message(what);
            None
        }
        Event::Round {
            group,
            cell,
            round,
            step,
            steps,
        } => {
            bar.set_length(steps as u64);
            bar.set_position(step as u64 - 1);
            bar.set_message(format!("{} / {cell}, round {round}", group.name()));
            None
        }
        Event::GroupDone {
            group,
            index,
            groups,
            cells,
            elapsed_s,
            warnings,
        } => {
            let mut line = format!(
                "group {index} of {groups} done: {} ({cells} configurations) at {elapsed_s:.0} s",
                group.name()
            );
            for w in warnings {
                let _ = write!(line, "\nwarning: group {}: {w}", group.name());
            }
            Some(line)
        }
    }
}

/// Writes `results.json`, `report.md` and `index.html` to `dir`, each atomically.
fn write_report(result: &LabResult, dir: &Path) -> Result<(), CliError> {
    crate::doc::write(result, &dir.join("results.json"), true)?;
    write_atomic(
        &dir.join("report.md"),
        report::markdown(result).as_bytes(),
        FileMode::Public,
        true,
    )?;
    write_atomic(
        &dir.join("index.html"),
        report::html(result).as_bytes(),
        FileMode::Public,
        true,
    )?;
    Ok(())
}

/// Exit 0, or why not: an interrupted run, or a group whose baseline failed.
fn outcome(result: &LabResult, dir: &Path) -> Result<(), CliError> {
    if result.interrupted {
        return Err(CliError::interrupted(format!(
            "interrupted: the report in {} holds the groups that finished",
            dir.display()
        )));
    }
    let failed = result.failed_baselines();
    if !failed.is_empty() {
        return Err(CliError::runtime(anyhow::anyhow!(
            "a baseline failed, so its group was not compared: {} (report in {})",
            failed
                .iter()
                .map(|g| report::failure_text(g, &g.cells[0]))
                .collect::<Vec<_>>()
                .join("; "),
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bar has the run's total from the start (it jumped from 0/1 to 0/18 at the
    /// first round), and a group's end is a line with its warnings.
    #[test]
    fn the_total_is_known_at_once_and_each_group_ends_with_a_line() {
        let bar = ProgressBar::hidden();
        assert_eq!(
            show(
                &bar,
                Event::Planned {
                    groups: 2,
                    steps: 18
                }
            ),
            None
        );
        assert_eq!(bar.length(), Some(18));
        assert_eq!(show(&bar, Event::Preparing("x".into())), None);
        assert_eq!(bar.length(), Some(18));
        let line = show(
            &bar,
            Event::GroupDone {
                group: Group::ALL[0],
                index: 1,
                groups: 2,
                cells: 3,
                elapsed_s: 12.4,
                warnings: vec!["the load generator was starved".into()],
            },
        )
        .unwrap();
        let name = Group::ALL[0].name();
        assert_eq!(
            line,
            format!(
                "group 1 of 2 done: {name} (3 configurations) at 12 s\nwarning: group {name}: the load generator was starved"
            )
        );
    }
}
