//! `tlsperf handshake URL`: flags → [`crate::handshake`] → output.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::client_args::ClientArgs;
use super::link_args::LinkArgs;
use super::{CliError, Output};
use crate::client::config;
use crate::error::{Classify, ErrorClass};
use crate::handshake::{Control, HandshakeOptions, run};
use crate::report::text;

/// Arguments of `tlsperf handshake`.
#[derive(Debug, Args)]
pub struct HandshakeArgs {
    /// The server: https://HOST[:PORT][/PATH].
    url: String,
    /// Requests to send, as in `tlsperf load`: each on a new connection of its own, one
    /// after the other, so also the number of handshakes (the first is reported apart, as
    /// cold; at most 1,000,000). `--count` is the old name.
    #[arg(short = 'n', long = "requests", visible_alias = "count", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    count: u64,
    /// Limit per connection (connect, handshake and response), e.g. 10s (at most 365
    /// days).
    #[arg(long, default_value = "10s", value_parser = super::duration::parse_positive)]
    timeout: Duration,
    /// Send the request as TLS 1.3 0-RTT early data when a resumed session allows it
    /// (needs a server accepting early data, e.g. `serve --early-data N --resumption
    /// stateful`).
    #[arg(long)]
    early_data: bool,
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    link: LinkArgs,
}

/// Runs `tlsperf handshake`: a progress bar on a terminal; Ctrl-C (or SIGTERM) stops the
/// run and prints what was measured (exit 130), a second one exits at once.
pub fn exec(args: HandshakeArgs, out: &Output) -> Result<(), CliError> {
    let target = args.client.target(&args.url)?;
    let opts = args
        .client
        .options(vec![b"http/1.1".to_vec()], args.early_data)?;
    args.client.warn_if_insecure();
    let built = config::build(&opts)?;
    let link = args.link.start(&target)?;
    // The runtime's sockets are made on this thread, in the client's namespace.
    let _inside = link.as_ref().map(|l| l.enter()).transpose()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime(e.into()))?;
    let run_opts = HandshakeOptions {
        count: args.count as usize,
        early_data: args.early_data,
        timeout: args.timeout,
        link: args.link.link.clone(),
    };
    let control = Arc::new(Control::default());
    let bar = progress_bar(args.count, out);
    let report = rt.block_on(async {
        let c = Arc::clone(&control);
        let first = super::signals::first_then_exit();
        tokio::spawn(async move {
            first.await;
            c.stop();
        });
        let c = Arc::clone(&control);
        let b = bar.clone();
        let ticker = tokio::spawn(async move {
            loop {
                b.set_position(c.done() as u64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let r = run(&target, &built, &run_opts, &control).await;
        ticker.abort();
        r
    });
    bar.finish_and_clear();
    let report = report.map_err(|e| {
        let class = e.class();
        CliError {
            class,
            error: anyhow::Error::new(e).context(format!("{target}")),
        }
    })?;
    out.result(&report, || text::handshake_run(&report))?;
    if report.interrupted {
        return Err(CliError {
            class: ErrorClass::Interrupted,
            error: anyhow::anyhow!(
                "interrupted: the report above covers the {} connections that were made",
                control.done()
            ),
        });
    }
    Ok(())
}

fn progress_bar(count: u64, out: &Output) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    if out.json() || out.quiet() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(count), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} connections [{elapsed}]")
    {
        bar.set_style(style);
    }
    bar
}
