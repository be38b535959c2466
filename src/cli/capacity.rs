//! `tlsperf capacity URL --slo …`: flags → [`crate::capacity::run`] → one line per step
//! on stderr, the step table (or JSON), the result and HTML files, the exit code of the
//! outcome (0 capacity found or bounded, 1 no answer from the server, 3 generator-bound,
//! 4 unfinished, 130 interrupted).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::client_args::{
    ClientArgs, Http, generator_settings, requests_per_conn, settings_document, worker_threads,
};
use super::link_args::LinkArgs;
use super::runtime::{Threads, block_on_interruptible, runtime, short_slices};
use super::{CliError, Output};
use crate::capacity::{self, CapacityOptions, Outcome, Progress, Rules, Slo, numbers};
use crate::client::config::{BuiltClient, ClientTlsOptions};
use crate::error::ErrorClass;
use crate::load::LoadGenOptions;
use crate::load::share::RateShare;
use crate::report::capacity as report;

/// The shortest step unless `--step-min` says otherwise (or `--step-max` is shorter).
const STEP_MIN: Duration = Duration::from_secs(4);

/// Arguments of `tlsperf capacity`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::after(
    "Exit codes: 0 with an answer (a capacity, or above --max-rate / below the lowest \
rate), 1 when the server does not answer (every request of a step refused, not TLS or not \
trusted), 2 bad input, 3 generator-bound, 4 unfinished (--max-time, --max-steps or the end \
of a --plan before an interval within --resolution), 130 interrupted. The result is \
printed, and written to --out / --html, in every case but 2.",
    &[
        "tlsperf capacity https://localhost:8443/ --slo p99=30ms --cacert ca.pem --html knee.html",
        "tlsperf capacity https://localhost:8443/ --slo p99=30ms,errors=0.1% --new-conn --out cap.json",
    ],
))]
pub struct CapacityArgs {
    /// The server: https://HOST[:PORT][/PATH].
    url: String,
    /// The objective, on the corrected latency: percentiles and an optional failed
    /// share, e.g. p99=30ms or p99=30ms,p50=5ms,errors=0.1% (without errors=, any
    /// failed request fails a step).
    #[arg(long, value_name = "OBJECTIVE")]
    slo: Slo,
    /// A new connection (and handshake) for every request.
    #[arg(long, conflicts_with = "requests_per_conn")]
    new_conn: bool,
    /// Close each connection after N requests (default: keep it while the server does).
    #[arg(long, value_name = "N", value_parser = super::count::at_least_one)]
    requests_per_conn: Option<u64>,
    /// HTTP/2 (ALPN h2) instead of HTTP/1.1.
    #[arg(long, conflicts_with = "http3")]
    http2: bool,
    /// HTTP/3 over QUIC (UDP) instead, as `load --http3` sends it (TLS 1.3 only; not
    /// with --tls 1.2 or --resume ids).
    #[arg(long)]
    http3: bool,
    /// First rate of the ramp (requests/s, all generator processes together; at least
    /// one request a step: 1 ÷ --step-max). The ramp goes down to 1/s at the lowest (to
    /// this rate when it is lower, and never below 1 ÷ --step-max).
    #[arg(long, default_value_t = 100.0, value_name = "R")]
    start_rate: f64,
    /// Highest rate tried (requests/s; at most 10,000,000).
    #[arg(long, default_value_t = 100_000.0, value_name = "R")]
    max_rate: f64,
    /// Ramp factor between steps (greater than 1).
    #[arg(long, default_value_t = 2.0)]
    factor: f64,
    /// Stop when the capacity's 90% credible interval is this narrow: its high end
    /// within this percent above its low end (20%, or 0.2). The capacity is the rate at
    /// which a step meets the objective with probability 0.9.
    #[arg(long, value_name = "PERCENT", default_value = "20%", value_parser = super::ratio::parse)]
    resolution: f64,
    /// Run these rates (requests/s, all generator processes together; comma-separated,
    /// in this order, at most 1,000; each at least one request a step per process:
    /// n ÷ --step-max with --rate-share i/n) instead of searching, each step at a fixed instant,
    /// and estimate the capacity from them. Generator processes sharing a rate
    /// (--rate-share) need one: they cannot see each other's steps.
    #[arg(long, value_name = "RATES", value_delimiter = ',', value_parser = plan_rate)]
    plan: Option<Vec<f64>>,
    /// Shortest step (each is sized for enough answers at its rate) [default: 4s, or
    /// --step-max when that is shorter]. Near the knee a server's queue takes seconds
    /// to reach its steady state: a step of a second or two starts from an empty queue
    /// and passes by luck.
    #[arg(long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    step_min: Option<Duration>,
    /// Warm-up before each step's measured window: requests due in it open the
    /// connection slots and gather their resumption state, and count in no figure (at
    /// most 10 s). A step that opened all its connections at once would measure that
    /// burst, not the server's steady state.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = super::duration::parse)]
    warmup: Duration,
    /// Longest step (a step at a low rate may then have fewer answers than the rule asks).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::duration::parse_positive)]
    step_max: Duration,
    /// The whole run ends by then: no step is started that could end later (its warm-up,
    /// its length and --timeout for its last answers), and the wait for the server to
    /// recover after a failed step is cut short at it (the search then reports its
    /// estimate with the interval it reached).
    #[arg(long, value_name = "DURATION", default_value = "3m", value_parser = super::duration::parse_positive)]
    max_time: Duration,
    /// At most this many steps.
    #[arg(long, value_name = "N", default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_steps: u32,
    /// Upload: send each request as a POST with a body of this many bytes (at most 67108864,
    /// 64 MiB; as `load --body-size`). Each step gives its bodies' goodput both ways.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=crate::client::http1::MAX_BODY))]
    body_size: u64,
    /// Connection slots per step (default: twice the rate × the largest latency bound,
    /// at least 4).
    #[arg(short = 'c', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    connections: Option<u64>,
    /// Worker threads (default: the number of CPUs).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: Option<u64>,
    /// Limit per request (default: 10× the largest latency bound, within 1s..10s).
    #[arg(long, value_name = "DURATION", value_parser = super::duration::parse_positive)]
    timeout: Option<Duration>,
    /// Sample this process's CPU from /proc at every step (the server under test).
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// Send the i-th of n equal shares of each step's rate (several generator processes
    /// or machines as one search; give them one --plan and one --start-at, and merge
    /// their results with `tlsperf merge`).
    #[arg(long, value_name = "i/n")]
    rate_share: Option<RateShare>,
    /// Start at this wall-clock instant (RFC 3339); every step then starts at a fixed
    /// offset from it, so that processes started together stay in step. A time already
    /// past is refused.
    #[arg(long, value_name = "TIME", value_parser = super::load::parse_start)]
    start_at: Option<time::OffsetDateTime>,
    /// Write the result (steps with their HDR histograms) as JSON to FILE (atomically);
    /// read by `tlsperf compare` and `tlsperf merge`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write the HTML page with the knee chart to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Replace --out / --html FILE if it exists.
    #[arg(long)]
    force: bool,
    /// Verify every server certificate chain in full (see `load --no-verify-cache`).
    #[arg(long)]
    no_verify_cache: bool,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    link: LinkArgs,
}

/// Runs `tlsperf capacity`.
pub fn exec(args: CapacityArgs, out: &Output) -> Result<(), CliError> {
    let rules = rules(&args)?;
    let plan = plan(&args, &rules)?;
    let aligned_from = args
        .start_at
        .map(crate::load::share::start_instant)
        .transpose()?;
    if let (Some(at), false) = (args.start_at, out.quiet()) {
        out.note(format!(
            "waiting until {} to start",
            crate::when::format_rfc3339(at)
        ));
    }
    for path in [&args.out, &args.html].into_iter().flatten() {
        crate::files::check_destination(path, args.force)?;
        crate::files::check_writable(path)?;
    }
    let http = Http::from_flags(args.http2, args.http3);
    if http == Http::V3 {
        args.client.check_http3()?;
    }
    let (target, tls, built) =
        args.client
            .generator(&args.url, http, false, args.no_verify_cache, out)?;
    let opts = options(&args, rules, plan, aligned_from, &tls, &built);
    let link = args.link.start(&target)?;
    // The runtime's threads start here, in the client's namespace, and open their
    // sockets there.
    let _inside = link.as_ref().map(|l| l.enter()).transpose()?;
    let rt = runtime(
        Threads::from_flag(Some(opts.load.threads)),
        Some(short_slices),
    )?;
    let (progress, mut events) = Progress::with_events();
    let show = !(out.json() || out.quiet());
    let stop = Arc::clone(&progress);
    let mut result = block_on_interruptible(&rt, move || stop.stop(), || {}, async {
        let print = |e: capacity::Event| {
            if !show {
                return;
            }
            match e {
                capacity::Event::Started {
                    index,
                    kind,
                    offered_per_s,
                    length,
                    starts_in,
                } => out.note(format_args!(
                    "step {index} ({}) at {}/s for {:.1} s{}…",
                    kind.name(),
                    capacity::numbers::group(offered_per_s),
                    length.as_secs_f64(),
                    starts_in_note(starts_in)
                )),
                capacity::Event::Done(step) => out.note(report::step_line(&step, &args.slo)),
            }
        };
        // Steps are printed as they come; the run's end (an error too) ends the printing.
        let mut run = std::pin::pin!(capacity::run(
            target,
            built.config,
            opts,
            Arc::clone(&progress)
        ));
        let r = loop {
            tokio::select! {
                e = events.recv() => match e {
                    Some(e) => print(e),
                    None => break (&mut run).await,
                },
                r = &mut run => break r,
            }
        };
        while let Ok(e) = events.try_recv() {
            print(e);
        }
        r
    })?;
    rt.shutdown_timeout(Duration::from_millis(100));
    if let Some(l) = &link {
        let c = l.counters();
        result.warnings.extend(c.warnings());
        result.link_counters = Some(c);
    }
    let written = args.out.is_some() || args.html.is_some();
    out.product(&result, written, || report::text(&result))?;
    if let Some(path) = &args.out {
        crate::doc::write(&result, path, args.force)?;
    }
    if let Some(path) = &args.html {
        crate::files::write_atomic(
            path,
            report::html(&result).as_bytes(),
            crate::files::FileMode::Public,
            args.force,
        )?;
    }
    outcome_status(&result)
}

/// ", starting in 10.5 s (…)" for a step whose instant in the shared schedule is a
/// second or more away, else nothing: the schedule leaves each step its warm-up, its
/// length, `--timeout` for its last answers and the cooldown, and the wait would
/// otherwise pass without a word.
fn starts_in_note(starts_in: Duration) -> String {
    if starts_in < Duration::from_secs(1) {
        return String::new();
    }
    format!(
        ", starting in {:.1} s (its instant in the shared schedule, which leaves every step \
         its warm-up, its length, --timeout for its last answers and 0.5 s)",
        starts_in.as_secs_f64()
    )
}

/// The search's options from the flags: the objective and rules, and the load
/// generator's settings shared by every step (with the `options` its result records).
fn options(
    args: &CapacityArgs,
    rules: Rules,
    plan: Option<Vec<f64>>,
    aligned_from: Option<std::time::Instant>,
    tls: &ClientTlsOptions,
    built: &BuiltClient,
) -> CapacityOptions {
    let threads = worker_threads(args.threads);
    let per_conn = requests_per_conn(args.new_conn, args.requests_per_conn);
    let timeout = request_timeout(args);
    let mut echo = generator_settings(
        &args.client,
        tls,
        built,
        Http::from_flags(args.http2, args.http3),
        args.no_verify_cache,
        threads,
        per_conn,
    );
    echo.extend([
        ("timeout_s", json!(timeout.as_secs_f64())),
        ("connections", json!(args.connections)),
        ("max_time_s", json!(args.max_time.as_secs_f64())),
    ]);
    let echo = settings_document(echo, args.link.link.as_ref(), args.body_size);
    CapacityOptions {
        slo: args.slo.clone(),
        rules,
        max_time: args.max_time,
        max_steps: args.max_steps,
        connections: args.connections.map(|c| c as usize),
        cooldown: Duration::from_millis(500),
        share: args.rate_share.map(|s| (s.i, s.n)),
        plan,
        aligned_from,
        load: LoadGenOptions {
            requests: None,
            duration: None,
            connections: 1,
            rate: None,
            requests_per_conn: per_conn,
            http2: args.http2,
            http3: args.http3,
            body_size: args.body_size,
            timeout,
            threads,
            server_pid: args.server_pid,
            ok_status: args.client.ok_status.clone(),
            resume: tls.resume,
            echo,
            early_data: false,
            verdicts: built.verdicts.clone(),
            addrs: Vec::new(),
            config_per_connection: None,
            schedule_offset: Duration::ZERO,
            warmup: Duration::ZERO,
            start_at: None,
        },
    }
}

/// `--timeout`, or 10× the objective's largest latency bound within 1 s..10 s.
fn request_timeout(args: &CapacityArgs) -> Duration {
    let largest = args
        .slo
        .latency
        .iter()
        .map(|b| b.max())
        .max()
        .unwrap_or(Duration::from_secs(1));
    args.timeout
        .unwrap_or_else(|| (largest * 10).clamp(Duration::from_secs(1), Duration::from_secs(10)))
}

/// Refuses a rate at which this process's part of a step (`n`: the processes sharing
/// it) expects fewer than one request: such a step may send none and show nothing about
/// the server. `what`: the flag and value, as written in the message.
fn check_sends(what: &str, rate: f64, n: u32, rules: &Rules) -> Result<(), CliError> {
    let share = 1.0 / f64::from(n.max(1));
    if capacity::requests_per_step(rate, share, rules) >= 1.0 {
        return Ok(());
    }
    let least = f64::from(n.max(1)) / rules.step_max_s;
    let each = if n > 1 {
        format!(" (each of the {n} processes of --rate-share sends 1/{n} of it)")
    } else {
        String::new()
    };
    Err(CliError::input(format!(
        "{what}: a step at that rate{each} expects fewer than one request in its {} s \
         (--step-max), so it could send none and show nothing about the server; give at \
         least {}/s, or a longer --step-max",
        numbers::figure(rules.step_max_s),
        numbers::figure((least * 1000.0).ceil() / 1000.0)
    )))
}

/// `--plan`'s rates, each one `load --rate` accepts and sending at least one request a
/// step; `--rate-share` needs a plan.
fn plan(args: &CapacityArgs, rules: &Rules) -> Result<Option<Vec<f64>>, CliError> {
    if args.rate_share.is_some() && args.plan.is_none() {
        return Err(CliError::input(
            "--rate-share needs --plan: processes that cannot see each other's steps would \
             each steer a search by their own share's measurements and part ways; give every \
             process the same --plan RATES (and one --start-at), then merge their results",
        ));
    }
    let Some(rates) = &args.plan else {
        return Ok(None);
    };
    if rates.is_empty() || rates.len() > 1000 {
        return Err(CliError::input(format!(
            "--plan has {} rates: give 1 to 1000",
            rates.len()
        )));
    }
    let rates = rates
        .iter()
        .map(|&r| super::load::check_rate("--plan", r))
        .collect::<Result<Vec<f64>, CliError>>()?;
    let n = args.rate_share.map_or(1, |s| s.n);
    for &r in &rates {
        check_sends(&format!("--plan {}", show_rate(r)), r, n, rules)?;
    }
    Ok(Some(rates))
}

/// One rate of `--plan`, in words when it is not one: an empty item (`50,`), text, or a
/// number too large to hold (`1e400`, which parses as infinity). Its range is checked
/// with the other rates' ([`super::load::check_rate`]).
fn plan_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(
            "an empty rate (a comma too many?); give rates in requests/s, e.g. 50,100".into(),
        );
    }
    match t.parse::<f64>() {
        Ok(r) if r.is_finite() => Ok(r),
        Ok(r) if r == f64::INFINITY => Err(format!(
            "{t} is too large a rate (at most {} requests/s)",
            crate::load::MAX_RATE
        )),
        _ => Err(format!("{t} is not a rate in requests/s (e.g. 50 or 2.5)")),
    }
}

/// The search's rules from the flags.
fn rules(args: &CapacityArgs) -> Result<Rules, CliError> {
    let start = super::load::check_rate("--start-rate", args.start_rate)?;
    let max = super::load::check_rate("--max-rate", args.max_rate)?;
    if start > max {
        return Err(CliError::input(format!(
            "--start-rate {start} is above --max-rate {max}"
        )));
    }
    if !(args.factor.is_finite() && args.factor > 1.0 && args.factor <= 10.0) {
        // 1e300 as given, not as 301 digits.
        let shown = match args.factor.abs() < 1e6 {
            true => args.factor.to_string(),
            false => format!("{:e}", args.factor),
        };
        return Err(CliError::input(format!(
            "--factor {shown}: must be above 1 and at most 10"
        )));
    }
    if !(args.resolution.is_finite() && args.resolution > 0.0 && args.resolution < 1.0) {
        return Err(CliError::input(format!(
            "--resolution {}: must be above 0% and below 100% (e.g. 5%)",
            super::ratio::format(args.resolution)
        )));
    }
    let step_min = match args.step_min {
        Some(m) if m > args.step_max => {
            return Err(CliError::input("--step-min is longer than --step-max"));
        }
        Some(m) => m,
        None => STEP_MIN.min(args.step_max),
    };
    let warmup = args.warmup.min(Duration::from_secs(10));
    let rules = Rules {
        samples_needed: args.slo.samples_needed(),
        step_min_s: step_min.as_secs_f64(),
        step_max_s: args.step_max.as_secs_f64(),
        generator_cpu_max: capacity::GENERATOR_CPU_MAX,
        resolution: args.resolution,
        start_rate: start,
        factor: args.factor,
        max_rate: max,
        // Not below a rate whose step would send no request.
        min_rate: 1.0_f64.min(start).max(1.0 / args.step_max.as_secs_f64()),
        warmup_s: warmup.as_secs_f64(),
    };
    let timeout = request_timeout(args);
    let shortest = capacity::shortest_step(&rules, timeout);
    if args.max_time < shortest {
        return Err(CliError::input(format!(
            "--max-time {} is shorter than the shortest step ({} s: its warm-up {} s, \
             --step-min {} s and --timeout {} s for its last answers): no step could run",
            humantime::format_duration(args.max_time),
            numbers::figure(shortest.as_secs_f64()),
            numbers::figure(warmup.as_secs_f64()),
            numbers::figure(step_min.as_secs_f64()),
            numbers::figure(timeout.as_secs_f64()),
        )));
    }
    if args.plan.is_none() {
        check_sends(
            &format!("--start-rate {}", show_rate(start)),
            start,
            1,
            &rules,
        )?;
    }
    Ok(rules)
}

/// A rate as given, in plain digits or, very small or large, as 1e-300.
fn show_rate(r: f64) -> String {
    numbers::figure(r)
}

/// The exit status of an outcome: 0 with an answer about the server (a capacity, or a
/// bound: above the highest or below the lowest rate), 1 when the server does not answer
/// (every request of a step failed as no rate explains), 3 generator-bound, 4
/// unfinished, 130 interrupted.
pub fn outcome_status(r: &capacity::CapacityResult) -> Result<(), CliError> {
    let class = match r.outcome {
        Outcome::Capacity | Outcome::AboveMaxRate | Outcome::BelowMinRate => return Ok(()),
        Outcome::GeneratorBound => ErrorClass::GeneratorBound,
        Outcome::TimeLimit => ErrorClass::Unfinished,
        Outcome::Interrupted => ErrorClass::Interrupted,
        Outcome::NoAnswer => ErrorClass::Runtime,
    };
    Err(CliError {
        class,
        error: anyhow::anyhow!("{}", r.message),
    })
}
