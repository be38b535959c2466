//! `tlsperf observe --pcap FILE | --interface IF [--probes] | --probes --pid PID`: flags →
//! a [`crate::observe::Setup`] → [`crate::observe::Pipeline`] started and run (Ctrl-C
//! stops a live run) → output.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use super::runtime::{Threads, interruptible, runtime};
use super::{CliError, Output};
use crate::error::{Classify, ErrorClass};
use crate::observe::baseline::{AnomalyOptions, sentence};
use crate::observe::canary::CanaryOptions;
use crate::observe::group::GroupBy;
use crate::observe::otlp::OtlpSetup;
use crate::observe::watch::WatchSetup;
use crate::observe::window::WindowOptions;
use crate::observe::{Capture, Controls, Limits, Pipeline, Progress, Setup};
use crate::probes::ProbeOptions;
use crate::report::text::last_window as window_text;
use crate::report::text::observation;

/// Arguments of `tlsperf observe`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["pcap", "interface", "probes"]).multiple(true)))]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(after_help = super::examples::block(&[
    "tlsperf observe --pcap capture.pcap --port 443",
    "tlsperf observe --interface eth0 --port 443 --duration 30s --out seen.json",
    "tlsperf observe --probes --pid 1234",
]))]
pub struct ObserveArgs {
    /// What to do with what was observed (instead of observing).
    #[command(subcommand)]
    command: Option<ObserveCommand>,
    /// A capture file to analyze: pcap or pcapng, as `tcpdump -w FILE` writes it
    /// (Ethernet, Linux cooked, raw IP or loopback link layer).
    #[arg(long, value_name = "FILE", conflicts_with = "interface")]
    pcap: Option<PathBuf>,
    /// Capture live on this interface (e.g. eth0, lo); needs CAP_NET_RAW. A terminal
    /// shows the table refreshed every second; Ctrl-C stops and keeps what was seen
    /// (exit 130).
    #[arg(long, value_name = "IF")]
    interface: Option<String>,
    /// Observe TCP connections to or from this port (repeatable; at most 32 live); every
    /// port when not given (connections whose first bytes are not TLS are counted and
    /// skipped). QUIC on UDP to or from it too (the result's quic part).
    #[arg(long = "port", value_name = "PORT")]
    ports: Vec<u16>,
    /// Look inside the processes too (eBPF; root or CAP_BPF+CAP_PERFMON): each handshake's
    /// accept queue, wait until the first library call, work inside OpenSSL or Go's
    /// crypto/tls, and waiting for the peer, per process and thread. With --interface the
    /// two views are joined by address and port; alone it needs --pid or --exe.
    #[arg(long, conflicts_with = "pcap")]
    probes: bool,
    /// Probe this process and its descendants, present and future (e.g. nginx's master
    /// from its pid file: reloads are followed); repeatable. A restart (a new pid) is not:
    /// tlsperf says so when the process exits; use --exe for services that restart.
    #[arg(long = "pid", value_name = "PID", requires = "probes", value_parser = clap::value_parser!(u32).range(1..))]
    pids: Vec<u32>,
    /// Probe every process running this executable or library (a Go program, or a
    /// libssl.so), those started later and from a new file renamed over it (an upgrade)
    /// too; repeatable.
    #[arg(long = "exe", value_name = "PATH", requires = "probes")]
    exes: Vec<PathBuf>,
    /// OpenSSL: also probe SSL_read/SSL_write (and their _ex forms, SSL_peek), for
    /// programs whose handshake runs inside them rather than in SSL_do_handshake,
    /// SSL_accept or SSL_connect. Each is a trap on every call, handshake or not.
    #[arg(long, requires = "probes")]
    probe_read_write: bool,
    /// Go: also split each handshake's work into on CPU and blocked, with uprobes on the
    /// runtime's scheduler (runtime.execute, runtime.gopark). Each is a trap on every
    /// goroutine switch of the program, handshake or not: a Go server's CPU per full
    /// handshake rose by 28% with them (docs/probes.md). OpenSSL's split needs no flag.
    #[arg(long, requires = "probes")]
    probe_go_on_cpu: bool,
    /// Also split each handshake's work into its parts: chain verification, signature,
    /// key exchange and trust-store loading (OpenSSL: a uprobe and a uretprobe on each
    /// libcrypto function, six hits per full handshake; Go: its part functions). Off by
    /// default: they cost nginx 1-2.5% more CPU per full handshake on top of the probes'
    /// own, a Go server 26% (docs/probes.md). Go's certificate callback part needs no flag.
    #[arg(long, requires = "probes")]
    probe_parts: bool,
    /// Stop a live capture after this long, e.g. 30s (else at Ctrl-C).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    duration: Option<Duration>,
    /// Serve Prometheus /metrics here while capturing live or probing (IP:PORT or
    /// HOST:PORT).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Push the same metrics to an OpenTelemetry collector over OTLP/HTTP (protobuf),
    /// e.g. http://127.0.0.1:4318 (/v1/metrics is appended to a URL without a path;
    /// https verifies the collector against the system's roots). Attributes carry the
    /// semantic conventions' names (tls.protocol.version, error.type, …); headers from
    /// OTEL_EXPORTER_OTLP_HEADERS, resource from OTEL_RESOURCE_ATTRIBUTES. The last
    /// export is sent at the end of the run (and at Ctrl-C).
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
    /// Time between two OTLP exports.
    #[arg(long, value_name = "DURATION", default_value = "10s", requires = "otlp", value_parser = super::duration::parse_positive)]
    otlp_interval: Duration,
    /// Write the result document (JSON, atomically), accepted by `tlsperf merge` and
    /// `tlsperf compare`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace --out FILE (and --handshake-log FILE, --windows FILE) if it exists.
    #[arg(long)]
    force: bool,
    /// Also write every completed handshake, one JSON object per line (JSON Lines):
    /// when its connection began, client and server address:port, SNI, kind, version,
    /// group, suite, every phase, and live the local processes; to join with a server's
    /// access log. Each line is written as its handshake completes (flushed: `tail -f`
    /// shows it); SIGHUP opens FILE again (after logrotate moved it). Spelt
    /// `--connections` before 2026-12-07 (still accepted), which `load` and `capacity` use
    /// for a count.
    #[arg(long = "handshake-log", alias = "connections", value_name = "FILE")]
    connections: Option<PathBuf>,
    /// Live: close a window of this length on the wall clock (e.g. 10s, 1m) and judge each
    /// series' p50 and p90 against its baseline (the median of its last 60 windows);
    /// anomalies, and which phase moved, go to stderr, --windows FILE, --metrics and
    /// --otlp.
    /// Default 1m when --windows or --state is given.
    #[arg(long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    window: Option<Duration>,
    /// Live: write each closed window (per series: rate, failures, resumption, kinds, SNIs,
    /// p50/p90/p95/p99 of every phase) and each anomaly event as a JSON line, flushed as
    /// it closes; SIGHUP opens FILE again.
    #[arg(long, value_name = "FILE")]
    windows: Option<PathBuf>,
    /// Live: keep the baselines in FILE (written atomically after each window), read at
    /// the start, so a restarted run judges at once instead of learning again.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// A window is an anomaly when its quantile is this far above the baseline's centre
    /// (and above --anomaly-floor, and five spreads).
    #[arg(long, value_name = "PERCENT", default_value = "50%", value_parser = super::ratio::parse)]
    anomaly_margin: f64,
    /// ... and at least this far above it.
    #[arg(long, value_name = "DURATION", default_value = "5ms", value_parser = super::duration::parse_positive)]
    anomaly_floor: Duration,
    /// Windows in a row above the baseline before an anomaly starts (and back within it
    /// before it ends).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000))]
    anomaly_windows: u32,
    /// Handshakes a series needs in a window to be judged and learnt from (and, with
    /// --group-by, each side of a comparison).
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    anomaly_min_handshakes: u64,
    /// Live: split each series by the server's executable, pid, cgroup, port or the SNI,
    /// and compare in each window every group with the stable one (a paired t-test over
    /// the window's seconds of the logs of the handshakes' headline phase, Holm-adjusted
    /// over the window, and at least 25% apart): a "canary" record per comparison in
    /// --windows FILE, a line on stderr when one is significantly slower.
    #[arg(long, value_name = "BY", value_enum)]
    group_by: Option<GroupBy>,
    /// With --group-by: the stable group, by its value (8443) or its label (port=8443);
    /// by default the group with the most handshakes in each window.
    #[arg(long, value_name = "VALUE", requires = "group_by")]
    stable: Option<String>,
    /// Most connections tracked at once; further new connections are counted, not
    /// tracked.
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    max_flows: u64,
    /// Most memory the analysis may hold, in MiB: 3/8 for the connections' table, 3/8
    /// for the bytes reassembled or held out of order, 1/4 for the histograms. Beyond
    /// its share a connection's reassembly is given up, a breakdown row goes to
    /// (other), a histogram's value is left out; each counted and reported as
    /// incomplete.
    #[arg(long, value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..=1_048_576))]
    max_memory: u64,
    /// A connection with no segment for this long (capture time) is evicted, e.g. 60s.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::duration::parse_positive)]
    idle_timeout: Duration,
    /// Live: filter in the kernel with the classic BPF port filter only. By default an
    /// eBPF filter (needs CAP_BPF; the classic one when it cannot be loaded, said in the
    /// result) also drops there the segments of connections whose analysis reads no more
    /// payload (after each side's first application record).
    #[arg(long)]
    classic_filter: bool,
}

/// Subcommands of `tlsperf observe`.
#[derive(Debug, clap::Subcommand)]
enum ObserveCommand {
    /// The audit of window streams: per UTC day and series, the windows meeting a latency
    /// objective, the error budget burnt, the worst windows, P99.9, the anomalies.
    ///
    /// Reads the JSON Lines `observe --window DURATION --windows FILE` writes, from one
    /// or more files (several agents, or rotated files), merged by time. The objective is
    /// on the headline phase: the wire's first_app_byte, the probes' total.
    #[command(after_help = super::examples::block(&[
        "tlsperf observe report windows.jsonl --slo p95=30ms",
        "tlsperf observe report a.jsonl b.jsonl --slo p99=50ms --budget 0.1% --html audit.html",
    ]))]
    Report(ReportArgs),
}

/// Arguments of `tlsperf observe report`.
#[derive(Debug, Args)]
struct ReportArgs {
    /// Window streams (`observe --windows FILE`, JSON Lines), merged by time.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// The objective on each window's headline: one of p50, p90, p95, p99 with its bound,
    /// e.g. p95=30ms (the syntax of `capacity --slo`).
    #[arg(long, value_name = "OBJECTIVE")]
    slo: crate::stats::slo::Slo,
    /// The share of windows that may miss the objective (the error budget), e.g. 1% or
    /// 0.1%.
    #[arg(long, value_name = "PERCENT", default_value = "1%", value_parser = super::ratio::parse)]
    budget: f64,
    /// Also write the report as a self-contained HTML page with a time-series chart per
    /// series.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Replace --html FILE if it exists.
    #[arg(long, requires = "html")]
    force: bool,
}

/// Runs `tlsperf observe report`.
fn report(args: ReportArgs, out: &Output) -> Result<(), CliError> {
    use crate::observe::audit::{Objective, audit};
    let objective =
        Objective::from_slo(&args.slo).map_err(|why| CliError::input(format!("--slo: {why}")))?;
    if !(0.0..1.0).contains(&args.budget) {
        return Err(CliError::input("--budget: a share within 0% ..< 100%"));
    }
    if let Some(dest) = &args.html {
        crate::files::check_destination(dest, args.force)?;
        crate::files::check_not_input(dest, args.files.iter().map(PathBuf::as_path))?;
    }
    let inputs = args
        .files
        .iter()
        .map(|f| crate::doc::Input::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    let result = audit(&inputs, objective, args.budget)?;
    out.result(&result, || crate::report::text::audit_report(&result))?;
    if let Some(dest) = &args.html {
        crate::files::write_atomic(
            dest,
            crate::report::audit::html(&result).as_bytes(),
            crate::files::FileMode::Public,
            args.force,
        )?;
        out.note(format!("wrote {}", dest.display()));
    }
    Ok(())
}

/// Runs `tlsperf observe`.
pub fn exec(mut args: ObserveArgs, out: &Output) -> Result<(), CliError> {
    if let Some(ObserveCommand::Report(r)) = args.command.take() {
        return report(r, out);
    }
    if args.pcap.is_some() {
        for (flag, given) in [
            ("--duration", args.duration.is_some()),
            ("--metrics", args.metrics.is_some()),
            ("--otlp", args.otlp.is_some()),
            ("--classic-filter", args.classic_filter),
            ("--window", args.window.is_some()),
            ("--windows", args.windows.is_some()),
            ("--state", args.state.is_some()),
            ("--group-by", args.group_by.is_some()),
        ] {
            if given {
                return Err(CliError::input(format!(
                    "{flag} is for live capture (--interface IF), not --pcap"
                )));
            }
        }
    }
    if args.group_by.is_some() && args.window.is_none() && args.windows.is_none() {
        return Err(CliError::input(
            "--group-by compares the groups of each window: give --window DURATION or --windows FILE",
        ));
    }
    if args.force && args.out.is_none() && args.connections.is_none() && args.windows.is_none() {
        return Err(CliError::input(
            "--force replaces --out FILE, --handshake-log FILE or --windows FILE; none is given",
        ));
    }
    let outputs = [
        ("--out", &args.out),
        ("--handshake-log", &args.connections),
        ("--windows", &args.windows),
        ("--state", &args.state),
    ];
    for (flag, dest) in outputs {
        let Some(dest) = dest else { continue };
        // The state file is read back at the start: it is meant to be there.
        crate::files::check_destination(dest, args.force || flag == "--state")?;
        crate::files::check_not_input(dest, args.pcap.as_deref())?;
    }
    for (i, (fa, a)) in outputs.iter().enumerate() {
        for (fb, b) in &outputs[i + 1..] {
            if let (Some(a), Some(b)) = (a, b)
                && (a == b || crate::files::same_file(a, b))
            {
                return Err(CliError::input(format!(
                    "{fa} and {fb} are the same file ({})",
                    a.display()
                )));
            }
        }
    }
    if args.probes && args.interface.is_none() && args.pids.is_empty() && args.exes.is_empty() {
        return Err(CliError::input(
            "--probes alone needs --pid PID or --exe PATH (what to look inside); with \
             --interface IF it probes every process using the system's libssl",
        ));
    }
    let capture = match (&args.pcap, &args.interface) {
        (Some(pcap), _) => Capture::File(pcap.clone()),
        (None, Some(interface)) => Capture::Live {
            interface: interface.clone(),
            classic_filter: args.classic_filter,
        },
        (None, None) if args.probes => Capture::None,
        // clap's group requires one of them.
        (None, None) => return Err(CliError::input("give --pcap FILE or --interface IF")),
    };
    let live = args.pcap.is_none();
    let setup = Setup {
        capture,
        ports: args.ports.clone(),
        limits: Limits {
            max_flows: usize::try_from(args.max_flows).unwrap_or(usize::MAX),
            idle_ns: u64::try_from(args.idle_timeout.as_nanos()).unwrap_or(u64::MAX),
            max_memory: usize::try_from(args.max_memory << 20).unwrap_or(usize::MAX),
            ..Limits::default()
        },
        probes: args.probes.then(|| ProbeOptions {
            pids: args.pids.clone(),
            exes: args.exes.clone(),
            read_write: args.probe_read_write,
            go_on_cpu: args.probe_go_on_cpu,
            parts: args.probe_parts,
        }),
        duration: args.duration,
        metrics: args.metrics.clone(),
        otlp: args.otlp.clone().map(|endpoint| OtlpSetup {
            endpoint,
            interval: args.otlp_interval,
        }),
        connections: args.connections.clone(),
        watch: (args.window.is_some() || args.windows.is_some() || args.state.is_some()).then(
            || WatchSetup {
                windows: WindowOptions {
                    length: args.window.unwrap_or(Duration::from_secs(60)),
                    group_by: args.group_by,
                    ..WindowOptions::default()
                },
                anomalies: AnomalyOptions {
                    margin: args.anomaly_margin,
                    floor: args.anomaly_floor,
                    consecutive: args.anomaly_windows as usize,
                    min_handshakes: args.anomaly_min_handshakes,
                    ..AnomalyOptions::default()
                },
                canary: CanaryOptions {
                    stable: args.stable.clone(),
                    min_handshakes: args.anomaly_min_handshakes,
                },
                stream: args.windows.clone(),
                state: args.state.clone(),
            },
        ),
        // The table redrawn every second on a terminal.
        snapshots: live && !out.json() && !out.quiet() && std::io::stdout().is_terminal(),
    };
    let redraw = setup.snapshots;
    // On a terminal, the last window beside its baseline, under the table so far.
    let mut last_window = String::new();
    let mut progress = |p: Progress<'_>| match p {
        Progress::Note(n) => out.note(n),
        Progress::Started(n) if !out.quiet() => out.note(n),
        Progress::Started(_) => {}
        Progress::Warning(w) => out.warn(w),
        // Home, clear, the table so far.
        Progress::Snapshot(o) => {
            let _ = out.text(&format!("\x1b[H\x1b[2J{}{last_window}", observation(o)));
        }
        Progress::Window(w) if redraw => last_window = format!("\n{}", window_text(w)),
        // In --windows FILE.
        Progress::Window(_) => {}
        Progress::Anomaly(e) => out.warn(sentence(e)),
        Progress::Canary(c) if c.significant => out.warn(crate::observe::canary::sentence(c)),
        Progress::Canary(_) => {}
    };
    let controls = Arc::new(Controls::default());
    // Live: one worker thread for the signal handlers, registered before the pipeline
    // starts, so that a signal while the probes are attached, or between their attachment
    // and the run, stops the attachment or the run (the default action would kill tlsperf
    // there); the run itself goes on this thread, blocking, until `stop` or --duration.
    let rt = if live {
        let rt = runtime(Threads::Many(Some(1)), None)?;
        let on_stop = Arc::clone(&controls);
        let stop = move || {
            on_stop.stop.store(true, Ordering::Relaxed);
            crate::probes::interrupt_attaching();
        };
        interruptible(&rt, stop, || {});
        // SIGHUP: the streamed files are opened again (logrotate).
        let inside = rt.enter();
        let mut hangup = signal(SignalKind::hangup())
            .map_err(|e| CliError::runtime(anyhow::Error::new(e).context("SIGHUP")))?;
        let on_hangup = Arc::clone(&controls);
        rt.spawn(async move {
            while hangup.recv().await.is_some() {
                on_hangup.reopen.store(true, Ordering::Relaxed);
            }
        });
        drop(inside);
        Some(rt)
    } else {
        None
    };
    let pipeline = Pipeline::start(setup, &mut progress)?;
    let finished = match &rt {
        Some(rt) => rt.block_on(async { pipeline.run(&controls, &mut progress) })?,
        None => pipeline.run(&controls, &mut progress)?,
    };
    if redraw {
        let _ = out.text("\x1b[H\x1b[2J");
    }
    let result = finished.observation;
    // The result first, whatever became of the other outputs: --out, else (or when --out
    // cannot be written) the whole result on stdout. Then every output that failed is
    // said, and the run ends with one exit rule for all of them ([`failed_outputs`]).
    let mut failed: Vec<(String, ErrorClass)> = Vec::new();
    let written = match &args.out {
        Some(dest) => match crate::doc::write(&result, dest, args.force) {
            Ok(()) => true,
            Err(e) => {
                failed.push((crate::error::sentence(&e), e.class()));
                false
            }
        },
        None => false,
    };
    out.product(&result, written, || observation(&result))?;
    match finished.connections {
        Some((path, Ok(n))) if !out.quiet() => out.note(format!(
            "wrote {n} handshake{} to {}",
            if n == 1 { "" } else { "s" },
            path.display()
        )),
        Some((path, Err(e))) => failed.push((
            format!(
                "cannot write {}: {}",
                path.display(),
                crate::error::sentence(&e)
            ),
            crate::error::io_input_class(&e),
        )),
        _ => {}
    }
    if let Some(e) = failed_outputs(out, failed) {
        return Err(e);
    }
    if result.interrupted {
        return Err(CliError {
            class: ErrorClass::Interrupted,
            error: anyhow::anyhow!(
                "interrupted: the result above covers what was captured until then"
            ),
        });
    }
    Ok(())
}

/// Says every output that could not be written (a warning each when more than one) and
/// the error the run ends with: exit 2 when one of them failed for a reason of its path
/// (a read-only file system, no permission, no such directory: the same rule as for
/// every file tlsperf writes), else 1 (a full disk, an I/O error). `None`: none failed.
fn failed_outputs(out: &Output, failed: Vec<(String, ErrorClass)>) -> Option<CliError> {
    let class = if failed.iter().any(|(_, c)| *c == ErrorClass::Input) {
        ErrorClass::Input
    } else {
        ErrorClass::Runtime
    };
    match failed.len() {
        0 => None,
        1 => failed.into_iter().next().map(|(why, class)| CliError {
            class,
            error: anyhow::anyhow!("{why}"),
        }),
        n => {
            for (why, _) in &failed {
                out.warn(why);
            }
            Some(CliError {
                class,
                error: anyhow::anyhow!(
                    "{n} outputs could not be written (said above); the result is complete"
                ),
            })
        }
    }
}
