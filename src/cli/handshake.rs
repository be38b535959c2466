//! `tlsperf handshake URL`: flags → [`crate::handshake`] → output.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::client_args::ClientArgs;
use super::link_args::LinkArgs;
use super::progress::{self, Ticker};
use super::runtime::{Threads, block_on_interruptible, runtime};
use super::{CliError, Output};
use crate::client::config;
use crate::error::Classify;
use crate::handshake::{Control, HandshakeOptions, run};
use crate::report::text;

/// Arguments of `tlsperf handshake`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf handshake https://localhost:8443/ -n 20 --cacert ca.pem",
    "tlsperf handshake https://example.com/ --resume off --tls 1.2",
]))]
pub struct HandshakeArgs {
    /// The server: https://HOST[:PORT][/PATH].
    url: String,
    /// Requests to send, as in `tlsperf load`: each on a new connection of its own, one
    /// after the other, so also the number of handshakes (the first is reported apart, as
    /// cold; at most 1,000,000). `--count` is the old name.
    #[arg(short = 'n', long = "requests", value_name = "N", visible_alias = "count", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    count: u64,
    /// Limit per connection (connect, handshake and response), e.g. 10s (at most 365
    /// days).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::duration::parse_positive)]
    timeout: Duration,
    /// Send the request as TLS 1.3 0-RTT early data when a resumed session allows it
    /// (needs a server accepting early data, e.g. `serve --early-data BYTES --resumption
    /// stateful`).
    #[arg(long)]
    early_data: bool,
    /// Send each request as a POST with a body of this many bytes (at most 67108864, 64 MiB;
    /// `tlsperf serve` reads it and answers as to GET): an upload, timed in the
    /// `request` phase (to its last byte handed to the kernel) and `first_byte` (until
    /// the server has read it and answers). Not with --early-data.
    #[arg(long, value_name = "BYTES", default_value_t = 0, conflicts_with = "early_data", value_parser = clap::value_parser!(u64).range(0..=crate::client::http1::MAX_BODY))]
    body_size: u64,
    /// Make each connection over QUIC (UDP) with one HTTP/3 GET, as `serve --quic` and
    /// other HTTP/3 servers answer: the same phases (`connect` is the UDP socket's
    /// creation; see the guide), TLS 1.3 only, verification as over TCP; over --link too
    /// (UDP crosses the same delay line). Not with --body-size.
    #[arg(long, conflicts_with_all = ["body_size"])]
    http3: bool,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    link: LinkArgs,
}

/// Runs `tlsperf handshake`: a progress bar on a terminal; Ctrl-C (or SIGTERM) stops the
/// run and prints what was measured (exit 130), a second one exits at once.
pub fn exec(args: HandshakeArgs, out: &Output) -> Result<(), CliError> {
    let target = args.client.target(&args.url)?;
    let alpn = if args.http3 {
        b"h3".to_vec()
    } else {
        b"http/1.1".to_vec()
    };
    let opts = args.client.options(vec![alpn], args.early_data)?;
    args.client.warn_if_insecure(out);
    if args.http3 {
        args.client.check_http3()?;
    }
    let built = config::build(&opts)?;
    let http3 = if args.http3 {
        Some(crate::client::quic::Http3Config(Arc::new(
            crate::client::quic::quic_client_config(&built.config)
                .map_err(|e| CliError::input(format!("--http3: {e}: check --tls and --ciphers")))?,
        )))
    } else {
        None
    };
    let link = args.link.start(&target)?;
    // The runtime's sockets are made on this thread, in the client's namespace.
    let _inside = link.as_ref().map(|l| l.enter()).transpose()?;
    let rt = runtime(Threads::One, None)?;
    let run_opts = HandshakeOptions {
        count: args.count as usize,
        early_data: args.early_data,
        timeout: args.timeout,
        body_size: usize::try_from(args.body_size).unwrap_or(usize::MAX),
        link: args.link.link.clone(),
        ok_status: args.client.ok_status.clone(),
        http3,
    };
    let control = Arc::new(Control::default());
    let bar = progress::bar(
        out,
        args.count,
        "{bar:40} {pos}/{len} connections [{elapsed}]",
    );
    let stop = Arc::clone(&control);
    let report = block_on_interruptible(&rt, move || stop.stop(), || {}, async {
        let c = Arc::clone(&control);
        let _ticker = Ticker::start(&bar, move |b| b.set_position(c.done() as u64));
        run(&target, &built, &run_opts, &control).await
    });
    bar.finish_and_clear();
    let mut report = report.map_err(|e| {
        let class = e.class();
        CliError {
            class,
            error: anyhow::Error::new(e).context(format!("{target}")),
        }
    })?;
    report.link_counters = link.as_ref().map(|l| l.counters());
    out.result(&report, || text::handshake_run(&report))?;
    if report.interrupted {
        return Err(CliError::interrupted(format!(
            "interrupted: the report above covers the {} connections that were made",
            control.done()
        )));
    }
    Ok(())
}
