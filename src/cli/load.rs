//! `tlsperf load URL`: flags → [`crate::load`] → progress bar, output and result file.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::client_args::{
    ClientArgs, Http, generator_settings, requests_per_conn, settings_document, worker_threads,
};
use super::link_args::LinkArgs;
use super::progress::{self, Ticker};
use super::runtime::{Threads, block_on_interruptible, runtime, short_slices};
use super::{CliError, Output};
use crate::client::target::Target;
use crate::load::{self, LoadGenOptions, Progress};
use crate::report::text;

/// Arguments of `tlsperf load`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("bound").required(true).multiple(true).args(["requests", "duration"])))]
#[command(after_help = super::examples::block(&[
    "tlsperf load https://localhost:8443/ -d 10s -c 50 --cacert ca.pem",
    "tlsperf load https://localhost:8443/ -d 30s --rate 2000 --new-conn --cacert ca.pem --out r.json",
]))]
pub struct LoadArgs {
    /// The server: https://HOST[:PORT][/PATH].
    url: String,
    /// Requests to send (started; failures count).
    #[arg(short = 'n', long = "requests", value_name = "N", value_parser = super::count::at_least_one)]
    requests: Option<u64>,
    /// How long to send requests, e.g. 10s (at most 365 days); with -n too, the run ends
    /// at whichever comes first.
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    duration: Option<Duration>,
    /// Connections (slots sending one request at a time each).
    #[arg(short = 'c', long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    connections: u64,
    /// Total requests per second, at most 10,000,000 (open loop; latency also reported
    /// from the intended send times, corrected for coordinated omission).
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// Send the i-th of n equal shares of --rate (several generator processes or
    /// machines as one; merge their results with `tlsperf merge`). A share whose first
    /// send, (i − 1) ÷ rate after the start, is at or after the end of -d is refused.
    #[arg(long, value_name = "i/n", requires = "rate")]
    rate_share: Option<crate::load::share::RateShare>,
    /// Start at this wall-clock instant (RFC 3339, e.g. 2026-06-01T12:00:00Z), so that
    /// several processes start together; a time already past, or more than 24 hours
    /// ahead, is refused.
    #[arg(long, value_name = "TIME", value_parser = parse_start)]
    start_at: Option<time::OffsetDateTime>,
    /// A new connection (and handshake) for every request.
    #[arg(long, conflicts_with = "requests_per_conn")]
    new_conn: bool,
    /// Close each connection after N requests (default: keep it while the server does).
    #[arg(long, value_name = "N", value_parser = super::count::at_least_one)]
    requests_per_conn: Option<u64>,
    /// HTTP/1.1 (the default).
    #[arg(long, conflicts_with_all = ["http2", "http3"])]
    http1: bool,
    /// HTTP/2 (ALPN h2).
    #[arg(long, conflicts_with = "http3")]
    http2: bool,
    /// HTTP/3 over QUIC (UDP), as `serve --quic` and other HTTP/3 servers answer: each
    /// connection from a UDP socket of its own, the same phases as `handshake --http3`,
    /// TLS 1.3 only (not with --tls 1.2 or --resume ids).
    #[arg(long)]
    http3: bool,
    /// Send each new connection's first request as TLS 1.3 0-RTT data when the session
    /// allows it (HTTP/1.1 or HTTP/3; needs resumption): counts of accepted and rejected
    /// 0-RTT.
    #[arg(long, conflicts_with = "http2")]
    early_data: bool,
    /// Upload: send each request as a POST with a body of this many bytes (at most 67108864,
    /// 64 MiB; `tlsperf serve` reads it and answers as to GET). The result gives the
    /// bodies' goodput both ways (bytes per second of the run). Not with --early-data: a
    /// POST is not safe to replay.
    #[arg(long, value_name = "BYTES", default_value_t = 0, conflicts_with = "early_data", value_parser = clap::value_parser!(u64).range(0..=crate::client::http1::MAX_BODY))]
    body_size: u64,
    /// Worker threads (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: Option<u64>,
    /// Limit per request, including a new connection's set-up (e.g. 10s; at most 365
    /// days).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::duration::parse_positive)]
    timeout: Duration,
    /// Sample this process's CPU and resident memory from /proc (the server under test).
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// Write the full result (with HDR histograms) as JSON to FILE (atomically); read by
    /// `tlsperf compare` and `tlsperf merge`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Replace --out FILE if it exists.
    #[arg(long)]
    force: bool,
    /// Verify every server certificate chain in full. By default a chain identical to
    /// one verified before (same certificates, name and OCSP response) is accepted from a
    /// cache, as browsers do, until the earliest expiry in the chain or 5 minutes; the
    /// handshake signature is checked on every handshake either way.
    #[arg(long)]
    no_verify_cache: bool,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    link: LinkArgs,
}

/// Runs `tlsperf load`: the summary first (whatever happens to the file, what was measured
/// is shown), then the result file, then warnings; Ctrl-C keeps the part that ran (130).
pub fn exec(args: LoadArgs, out: &Output) -> Result<(), CliError> {
    // No transparent huge pages for the generator: where the kernel backs anonymous memory
    // with them, each fresh 2 MiB that the run touches (histograms growing) is zeroed at
    // once — 8–10% of load's CPU in perf, 0.1% with 4 KiB pages. Not for `serve`: there
    // 4 KiB pages cost 14% of keep-alive requests/s on this VM (docs/benchmarks.md).
    // SAFETY: PR_SET_THP_DISABLE only reads its integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    let (target, config, opts) = resolve(&args, out)?;
    // Open loop: the threads that send ask for short scheduler slices, so that their
    // timers' wake-ups are not queued behind other processes' slices.
    let hook: Option<fn()> = args.rate.map(|_| short_slices as fn());
    let link = args.link.start(&target)?;
    // The runtime's threads start here, in the client's namespace, and open their
    // sockets there.
    let _inside = link.as_ref().map(|l| l.enter()).transpose()?;
    let rt = runtime(Threads::from_flag(Some(opts.threads)), hook)?;
    let progress = Arc::new(Progress::default());
    let bar = progress_bar(&args, out);
    let stop = Arc::clone(&progress);
    let mut result = block_on_interruptible(&rt, move || stop.stop(), || {}, async {
        let _ticker = ticker(&bar, &args, Arc::clone(&progress));
        load::run(target, config, opts, Arc::clone(&progress)).await
    })?;
    if let Some(l) = &link {
        result.set_link_counters(l.counters());
    }
    bar.finish_and_clear();
    // Don't wait for tasks still blocked on a dead connection.
    rt.shutdown_timeout(Duration::from_millis(100));
    // A run in which no request succeeded is printed, not written: the rerun that
    // corrects it (a missing --cacert, a wrong port) then needs no --force.
    let all_failed = result.all_failed();
    out.product(&result, args.out.is_some() && all_failed.is_none(), || {
        text::load_result(&result)
    })?;
    if let (Some(path), None) = (&args.out, &all_failed) {
        crate::doc::write(&result, path, args.force)?;
    }
    if let Some(warning) = result.saturation_warning() {
        out.warn(warning);
    }
    if let Some(why) = all_failed {
        let why = match &args.out {
            Some(path) => format!("{why}; {} not written", path.display()),
            None => why,
        };
        return Err(CliError::runtime(anyhow::anyhow!(why)));
    }
    if result.interrupted {
        return Err(CliError::interrupted(
            "interrupted: the result above covers the part that ran",
        ));
    }
    Ok(())
}

/// The flags resolved: the target, the client configuration and the engine's options.
fn resolve(
    args: &LoadArgs,
    out: &Output,
) -> Result<(Target, Arc<rustls::ClientConfig>, LoadGenOptions), CliError> {
    if let Some(r) = args.rate {
        check_rate("--rate", r)?;
        if let Some(share) = args.rate_share {
            check_share(share, r, args.requests, args.duration, out)?;
        }
    }
    let start_at = args
        .start_at
        .map(crate::load::share::start_instant)
        .transpose()?;
    if let (Some(at), false) = (args.start_at, out.quiet()) {
        out.note(format!(
            "waiting until {} to start",
            crate::when::format_rfc3339(at)
        ));
    }
    if let Some(path) = &args.out {
        // Before the run: a result that cannot be written is found now, not after it.
        crate::files::check_destination(path, args.force)?;
        crate::files::check_writable(path)?;
    }
    let http = Http::from_flags(args.http2, args.http3);
    if http == Http::V3 {
        args.client.check_http3()?;
    }
    let (target, opts, built) =
        args.client
            .generator(&args.url, http, args.early_data, args.no_verify_cache, out)?;
    let threads = worker_threads(args.threads);
    let per_conn = requests_per_conn(args.new_conn, args.requests_per_conn);
    let mut echo = generator_settings(
        &args.client,
        &opts,
        &built,
        http,
        args.no_verify_cache,
        threads,
        per_conn,
    );
    echo.extend([
        ("requests", json!(args.requests)),
        ("duration_s", json!(args.duration.map(|d| d.as_secs_f64()))),
        ("connections", json!(args.connections)),
        ("rate", json!(args.rate)),
        ("rate_share", json!(args.rate_share.map(|s| s.to_string()))),
        ("early_data", json!(args.early_data)),
        ("timeout_s", json!(args.timeout.as_secs_f64())),
    ]);
    let echo = settings_document(echo, args.link.link.as_ref(), args.body_size);
    let load_opts = LoadGenOptions {
        requests: args.requests,
        duration: args.duration,
        connections: args.connections as usize,
        rate: args.rate.map(|r| args.rate_share.map_or(r, |s| s.of(r))),
        requests_per_conn: per_conn,
        http2: args.http2,
        http3: args.http3,
        body_size: args.body_size,
        timeout: args.timeout,
        threads,
        server_pid: args.server_pid,
        ok_status: args.client.ok_status.clone(),
        resume: opts.resume,
        echo,
        early_data: args.early_data,
        verdicts: built.verdicts.clone(),
        addrs: Vec::new(),
        config_per_connection: None,
        schedule_offset: match (args.rate_share, args.rate) {
            (Some(s), Some(r)) => s.offset(r),
            _ => Duration::ZERO,
        },
        warmup: Duration::ZERO,
        start_at,
    };
    Ok((target, built.config, load_opts))
}

/// An open-loop rate: a positive number, at most [`crate::load::MAX_RATE`].
pub(super) fn check_rate(flag: &str, r: f64) -> Result<f64, CliError> {
    if !(r.is_finite() && r > 0.0) {
        return Err(CliError::input(format!(
            "{flag} {r}: must be a positive number"
        )));
    }
    if r > crate::load::MAX_RATE {
        // 1e300 as given, not as 301 digits.
        return Err(CliError::input(format!(
            "{flag} {r:e}: at most {} requests/s (all generator processes together)",
            crate::load::MAX_RATE
        )));
    }
    Ok(r)
}

/// `--rate-share i/n` at `--rate r`: this process sends its first request (i − 1) ÷ r
/// after the start, then one every n ÷ r. A share whose first send falls at or after
/// the end of `-d` would send nothing, and is refused; a `-n` schedule longer than the
/// longest `-d` (365 days) is refused, one longer than an hour is announced.
fn check_share(
    share: crate::load::share::RateShare,
    r: f64,
    requests: Option<u64>,
    duration: Option<Duration>,
    out: &Output,
) -> Result<(), CliError> {
    let first = share.offset(r);
    let every = 1.0 / share.of(r);
    let words = |secs: f64| {
        humantime::format_duration(Duration::from_secs(secs.min(1e12).round() as u64)).to_string()
    };
    if let Some(d) = duration
        && first >= d
    {
        return Err(CliError::input(format!(
            "--rate-share {share} at --rate {r}: this process's first send is {} s after \
             the start, at or after the end of -d {} ({} s): it would send nothing (raise \
             --rate or -d)",
            first.as_secs_f64(),
            humantime::format_duration(d),
            d.as_secs_f64()
        )));
    }
    if duration.is_none()
        && let Some(n) = requests
    {
        let schedule = first.as_secs_f64() + (n - 1) as f64 * every;
        const LONGEST: f64 = 365.0 * 24.0 * 3600.0;
        if schedule > LONGEST {
            return Err(CliError::input(format!(
                "--rate-share {share} at --rate {r}: this process's {n} requests would take \
                 {} (one every {}), more than -d's 365 days (raise --rate, or give -d)",
                words(schedule),
                words(every)
            )));
        }
        if schedule > 3600.0 {
            out.warn(format!(
                "--rate-share {share} at --rate {r}: this process's {n} requests take {} \
                 (the first {} after the start, then one every {}); give -d to bound the run",
                words(schedule),
                words(first.as_secs_f64()),
                words(every)
            ));
        }
    }
    Ok(())
}

/// `--start-at`: RFC 3339.
pub(super) fn parse_start(s: &str) -> Result<time::OffsetDateTime, String> {
    crate::when::parse_rfc3339(s).map_err(|e| e.to_string())
}

/// By request count when given, else by time (milliseconds) against `-d`.
fn progress_bar(args: &LoadArgs, out: &Output) -> indicatif::ProgressBar {
    let (len, template) = match (args.requests, args.duration) {
        (Some(n), _) => (n, "{bar:40} {pos}/{len} requests {msg} [{elapsed}]"),
        (None, Some(d)) => ((d.as_millis() as u64).max(1), "{bar:40} {msg} [{elapsed}]"),
        (None, None) => (1, "{msg}"),
    };
    progress::bar(out, len, template)
}

/// Moves the bar from the engine's counters.
fn ticker(bar: &indicatif::ProgressBar, args: &LoadArgs, progress: Arc<Progress>) -> Ticker {
    let by_time = args.requests.is_none();
    let started = std::time::Instant::now();
    Ticker::start(bar, move |b| {
        let done = progress.completed.load(Ordering::Relaxed);
        let failed = progress.failed.load(Ordering::Relaxed);
        if by_time {
            b.set_position(started.elapsed().as_millis() as u64);
        } else {
            b.set_position(done + failed);
        }
        b.set_message(format!("{done} ok, {failed} failed"));
    })
}
