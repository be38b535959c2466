//! `tlsperf observe --pcap FILE | --interface IF [--probes] | --probes --pid PID`: flags →
//! [`crate::observe::observe_file`], [`crate::observe::observe_live`] or
//! [`crate::observe::observe_probes`] (with a [`crate::probes::Session`]) → output.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;

use super::runtime::{Threads, block_on_interruptible, runtime};
use super::{CliError, Output};
use crate::error::ErrorClass;
use crate::observe::connections::ConnectionLog;
use crate::observe::live::{FilterChoice, LiveCapture};
use crate::observe::metrics::{MetricsServer, ObserveMetrics};
use crate::observe::{
    Limits, LiveOptions, Observation, Options, observe_file, observe_live, observe_probes,
    process::Processes,
};
use crate::probes::{ProbeOptions, Session};
use crate::report::text::observation;

/// Arguments of `tlsperf observe`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["pcap", "interface", "probes"]).multiple(true)))]
#[command(after_help = super::examples::block(&[
    "tlsperf observe --pcap capture.pcap --port 443",
    "tlsperf observe --interface eth0 --port 443 --duration 30s --out seen.json",
    "tlsperf observe --probes --pid 1234",
]))]
pub struct ObserveArgs {
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
    /// skipped).
    #[arg(long = "port", value_name = "PORT")]
    ports: Vec<u16>,
    /// Look inside the processes too (eBPF; root or CAP_BPF+CAP_PERFMON): each handshake's
    /// accept queue, wait until the first library call, work inside OpenSSL or Go's
    /// crypto/tls, and waiting for the peer, per process and thread. With --interface the
    /// two views are joined by address and port; alone it needs --pid or --exe.
    #[arg(long, conflicts_with = "pcap")]
    probes: bool,
    /// Probe this process and its descendants, present and future (e.g. nginx's master
    /// from its pid file); repeatable.
    #[arg(long = "pid", value_name = "PID", requires = "probes", value_parser = clap::value_parser!(u32).range(1..))]
    pids: Vec<u32>,
    /// Probe every process running this executable or library (a Go program, or a
    /// libssl.so); repeatable.
    #[arg(long = "exe", value_name = "PATH", requires = "probes")]
    exes: Vec<PathBuf>,
    /// OpenSSL: also probe SSL_read/SSL_write (and their _ex forms, SSL_peek), for
    /// programs whose handshake runs inside them rather than in SSL_do_handshake,
    /// SSL_accept or SSL_connect. Each is a trap on every call, handshake or not.
    #[arg(long, requires = "probes")]
    probe_read_write: bool,
    /// Stop a live capture after this long, e.g. 30s (else at Ctrl-C).
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    duration: Option<Duration>,
    /// Serve Prometheus /metrics here while capturing live or probing (IP:PORT or
    /// HOST:PORT).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Write the result document (JSON, atomically), accepted by `tlsperf merge` and
    /// `tlsperf compare`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace --out FILE (and --connections FILE) if it exists.
    #[arg(long)]
    force: bool,
    /// Also write every completed handshake, one JSON object per line (JSON Lines):
    /// when its connection began, client and server address:port, SNI, kind, version,
    /// group, suite, every phase, and live the local processes; to join with a server's
    /// access log. Written under a temporary name, renamed at the end.
    #[arg(long, value_name = "FILE")]
    connections: Option<PathBuf>,
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

/// Runs `tlsperf observe`.
pub fn exec(args: ObserveArgs, out: &Output) -> Result<(), CliError> {
    if args.pcap.is_some() {
        for (flag, given) in [
            ("--duration", args.duration.is_some()),
            ("--metrics", args.metrics.is_some()),
            ("--classic-filter", args.classic_filter),
        ] {
            if given {
                return Err(CliError::input(format!(
                    "{flag} is for live capture (--interface IF), not --pcap"
                )));
            }
        }
    }
    if args.force && args.out.is_none() && args.connections.is_none() {
        return Err(CliError::input(
            "--force replaces --out FILE or --connections FILE; neither is given",
        ));
    }
    for dest in [&args.out, &args.connections].into_iter().flatten() {
        crate::files::check_destination(dest, args.force)?;
        crate::files::check_not_input(dest, args.pcap.as_deref())?;
    }
    if let (Some(a), Some(b)) = (&args.out, &args.connections)
        && (a == b || crate::files::same_file(a, b))
    {
        return Err(CliError::input(format!(
            "--out and --connections are the same file ({})",
            a.display()
        )));
    }
    let connections = args
        .connections
        .as_deref()
        .map(ConnectionsFile::create)
        .transpose()?;
    let opts = Options {
        ports: args.ports.clone(),
        limits: Limits {
            max_flows: usize::try_from(args.max_flows).unwrap_or(usize::MAX),
            idle_ns: u64::try_from(args.idle_timeout.as_nanos()).unwrap_or(u64::MAX),
            max_memory: usize::try_from(args.max_memory << 20).unwrap_or(usize::MAX),
            ..Limits::default()
        },
        connections: connections.as_ref().map(|c| Arc::clone(&c.log)),
    };
    if args.probes && args.interface.is_none() && args.pids.is_empty() && args.exes.is_empty() {
        return Err(CliError::input(
            "--probes alone needs --pid PID or --exe PATH (what to look inside); with \
             --interface IF it probes every process using the system's libssl",
        ));
    }
    let result = match (&args.pcap, &args.interface) {
        (Some(pcap), _) => observe_file(pcap, &opts)?,
        (None, Some(interface)) => live(&args, interface, opts, out)?,
        (None, None) if args.probes => probes_only(&args, out)?,
        // clap's group requires one of them.
        (None, None) => return Err(CliError::input("give --pcap FILE or --interface IF")),
    };
    if let Some(c) = connections {
        let n = c.persist()?;
        out.note(format!(
            "wrote {n} handshake{} to {}",
            if n == 1 { "" } else { "s" },
            args.connections
                .as_deref()
                .unwrap_or(Path::new(""))
                .display()
        ));
    }
    match &args.out {
        Some(dest) => {
            crate::doc::write(&result, dest, args.force)?;
            out.summary(&result, || observation(&result))?;
        }
        None => out.result(&result, || observation(&result))?,
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

fn live(
    args: &ObserveArgs,
    interface: &str,
    options: Options,
    out: &Output,
) -> Result<Observation, CliError> {
    let choice = if args.classic_filter {
        FilterChoice::Classic
    } else {
        FilterChoice::Ebpf {
            max_flows: options.limits.max_flows,
        }
    };
    // The probes first: attaching takes a while (seconds with many libraries), and a
    // capture opened before would go unread meanwhile.
    let mut probes = start_probes(args, Some(&options.ports), out)?;
    let capture = LiveCapture::open(interface, &options.ports, choice)?;
    // The capture sees every connection from now on: so do the probes.
    if let Some(p) = probes.as_mut() {
        p.arm()?;
    }
    if let Some(why) = capture
        .kernel_filter()
        .strip_prefix("classic (the ports only): ")
    {
        out.warn(format!(
            "every segment on the ports is copied to tlsperf (classic kernel filter): {why}"
        ));
    }
    let (metrics, _server) = start_metrics(args, out)?;
    let stop = Arc::new(AtomicBool::new(false));
    // One worker thread for the signal handlers (registered before the capture starts);
    // the capture itself runs on this thread, blocking, until `stop` or --duration.
    let rt = runtime(Threads::Many(Some(1)), None)?;
    let flag = Arc::clone(&stop);
    block_on_interruptible(
        &rt,
        move || flag.store(true, Ordering::Relaxed),
        || {},
        async {
            let result =
                capture_until_stopped(args, capture, options, metrics, probes.as_mut(), &stop, out);
            let mut result = result?;
            if let Some(p) = probes.take() {
                result.probes = Some(p.finish());
            }
            Ok(result)
        },
    )
}

/// The metrics, and their server when `--metrics` asks for one.
fn start_metrics(
    args: &ObserveArgs,
    out: &Output,
) -> Result<(Arc<ObserveMetrics>, Option<MetricsServer>), CliError> {
    let metrics = Arc::new(ObserveMetrics::new());
    let server = match &args.metrics {
        Some(addr) => {
            let listener = std::net::TcpListener::bind(addr.as_str()).map_err(|e| {
                CliError::input(format!("--metrics {addr}: cannot listen there: {e}"))
            })?;
            let local = listener
                .local_addr()
                .map_err(|e| CliError::runtime(e.into()))?;
            let server = MetricsServer::start(listener, Arc::clone(&metrics))
                .map_err(|e| CliError::runtime(anyhow::Error::new(e).context("--metrics")))?;
            out.note(format!("metrics: http://{local}/metrics"));
            Some(server)
        }
        None => None,
    };
    Ok((metrics, server))
}

/// Starts the probes when asked for (`join`: the ports of a capture to join them to).
fn start_probes(
    args: &ObserveArgs,
    join: Option<&[u16]>,
    out: &Output,
) -> Result<Option<Session>, CliError> {
    if !args.probes {
        return Ok(None);
    }
    let opts = ProbeOptions {
        pids: args.pids.clone(),
        exes: args.exes.clone(),
        read_write: args.probe_read_write,
    };
    let (session, notes) = Session::start(&opts, join)?;
    for n in notes {
        out.note(n);
    }
    Ok(Some(session))
}

/// `--probes --pid/--exe` without a capture: the processes' view alone.
fn probes_only(args: &ObserveArgs, out: &Output) -> Result<Observation, CliError> {
    let Some(mut session) = start_probes(args, None, out)? else {
        return Err(CliError::input(
            "give --pcap FILE, --interface IF or --probes",
        ));
    };
    session.arm()?;
    let (metrics, _server) = start_metrics(args, out)?;
    let mut names: Vec<String> = args.pids.iter().map(|p| format!("pid {p}")).collect();
    names.extend(args.exes.iter().map(|e| e.display().to_string()));
    let name = names.join(", ");
    if !out.quiet() {
        out.note(format!(
            "probing {name}; {}",
            match args.duration {
                Some(d) => format!("for {}", humantime::format_duration(d)),
                None => "Ctrl-C to stop".to_string(),
            }
        ));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let rt = runtime(Threads::Many(Some(1)), None)?;
    let flag = Arc::clone(&stop);
    let redraw = !out.json() && !out.quiet() && std::io::stdout().is_terminal();
    block_on_interruptible(
        &rt,
        move || flag.store(true, Ordering::Relaxed),
        || {},
        async {
            let metrics = args.metrics.is_some().then_some(metrics);
            let mut o = observe_probes(
                &mut session,
                name,
                args.duration,
                metrics,
                &stop,
                |snapshot| {
                    if redraw {
                        let _ = out.text(&format!("\x1b[H\x1b[2J{}", observation(snapshot)));
                    }
                },
            );
            if redraw {
                let _ = out.text("\x1b[H\x1b[2J");
            }
            o.probes = Some(session.finish());
            Ok(o)
        },
    )
}

/// The live capture on this thread: the table redrawn every second on a terminal.
fn capture_until_stopped(
    args: &ObserveArgs,
    capture: LiveCapture,
    options: Options,
    metrics: Arc<ObserveMetrics>,
    probes: Option<&mut Session>,
    stop: &AtomicBool,
    out: &Output,
) -> Result<Observation, CliError> {
    let interface = capture.interface().to_string();
    // Before the capture is announced: a connection opened after it is attributed.
    let (processes, why) = Processes::new();
    if let Some(why) = why {
        out.warn(format!(
            "processes are attributed from /proc, where a connection shorter than a second \
             may show as (unknown): the kernel's socket owners could not be traced: {why}"
        ));
    }
    if !out.quiet() {
        let ports: Vec<String> = options.ports.iter().map(u16::to_string).collect();
        out.note(format!(
            "capturing on {interface}, {}; {}",
            if ports.is_empty() {
                "every TCP port".to_string()
            } else {
                format!("TCP port {}", ports.join(", "))
            },
            match args.duration {
                Some(d) => format!("for {}", humantime::format_duration(d)),
                None => "Ctrl-C to stop".to_string(),
            }
        ));
    }
    let live = LiveOptions {
        limits: options.limits,
        duration: args.duration,
        metrics: args.metrics.is_some().then_some(metrics),
        connections: options.connections.clone(),
    };
    let redraw = !out.json() && !out.quiet() && std::io::stdout().is_terminal();
    // The table so far is made (a copy of the histograms) only when it is shown.
    let tick = redraw.then_some(|snapshot: &Observation| {
        // Home, clear, the table so far.
        let _ = out.text(&format!("\x1b[H\x1b[2J{}", observation(snapshot)));
    });
    let result = observe_live(capture, &live, probes, Some(processes), stop, tick)?;
    if redraw {
        let _ = out.text("\x1b[H\x1b[2J");
    }
    Ok(result)
}

/// `--connections FILE` while it is written: a temporary file beside FILE, renamed to it
/// at the end (removed if the run fails).
struct ConnectionsFile {
    log: Arc<std::sync::Mutex<ConnectionLog>>,
    temp: tempfile::NamedTempFile,
    dest: PathBuf,
}

impl ConnectionsFile {
    fn create(dest: &Path) -> Result<ConnectionsFile, CliError> {
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let cannot = |e: std::io::Error| {
            CliError::runtime(anyhow::anyhow!("cannot write {}: {e}", dest.display()))
        };
        let temp = tempfile::Builder::new()
            .prefix(".tlsperf-connections-")
            .tempfile_in(dir)
            .map_err(cannot)?;
        let file = temp.as_file().try_clone().map_err(cannot)?;
        let log = ConnectionLog::new(Box::new(std::io::BufWriter::new(file)));
        Ok(ConnectionsFile {
            log: Arc::new(std::sync::Mutex::new(log)),
            temp,
            dest: dest.to_path_buf(),
        })
    }

    /// Flushes and renames; the number of handshakes written.
    fn persist(self) -> Result<u64, CliError> {
        let cannot = |e: std::io::Error| {
            CliError::runtime(anyhow::anyhow!("cannot write {}: {e}", self.dest.display()))
        };
        let n = match self.log.lock() {
            Ok(mut g) => g.finish(),
            Err(p) => p.into_inner().finish(),
        }
        .map_err(cannot)?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(self.temp.path(), std::fs::Permissions::from_mode(0o644))
            .map_err(cannot)?;
        self.temp.persist(&self.dest).map_err(|e| cannot(e.error))?;
        Ok(n)
    }
}
