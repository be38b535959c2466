//! `tlsperf crypto …`: flags → [`crate::crypto`] → output.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::{CliError, Output};
use crate::crypto::in_memory::{self, FullOrResumed, HandshakeOptions};
use crate::crypto::kx::{self, KxGroup, KxOptions};
use crate::crypto::limit::{self, LimitOptions};
use crate::crypto::profile::{FlamegraphTarget, Sampling};
use crate::crypto::sign::{self, SigAlg, SignOptions};
use crate::crypto::{CryptoError, Implementation, MeasureOptions};
use crate::pki::KeyType;
use crate::report::crypto as report;
use crate::tls::Provider;
use crate::tls::choices::TlsVersion;

/// Arguments of `tlsperf crypto`.
#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf crypto sign --alg ecdsa-p256,ed25519",
    "tlsperf crypto limit --key-type rsa-2048",
]))]
pub struct CryptoArgs {
    #[command(subcommand)]
    command: CryptoCommand,
}

#[derive(Debug, Subcommand)]
enum CryptoCommand {
    /// Sign and verify ops/s, time and bytes allocated per operation for ECDSA, Ed25519
    /// and RSA, per implementation (aws-lc-rs, ring, RustCrypto).
    Sign(SignArgs),
    /// Key exchange through the providers' rustls groups: client (key generation +
    /// agreement) and server (start_and_complete) ns/op and ops/s.
    Kx(KxArgs),
    /// rustls client and server in memory (no sockets): handshakes/s for each side, full
    /// and resumed, TLS 1.2 and 1.3, per certificate type and provider.
    Handshake(HandshakeArgs),
    /// The public-key crypto of one full and one resumed handshake per side, the
    /// handshakes/s per core it allows, and the measured in-memory rate as a % of it.
    Limit(LimitArgs),
}

/// How long to measure each row.
#[derive(Debug, Args)]
struct MeasureArgs {
    /// How long to measure each row, e.g. 500ms or 2s (at most 24h), split into --rounds
    /// rounds (after an untimed warm-up).
    #[arg(short = 'd', long, value_name = "DURATION", default_value = "1s", value_parser = parse_measure_time)]
    duration: Duration,
    /// Rounds per row; the result is the median of the rounds kept by a 1.5×IQR filter.
    #[arg(long, value_name = "N", default_value_t = 5)]
    rounds: u32,
    /// Also sample the CPU during the whole run (key generation, warm-ups, rounds) and
    /// write a flame graph there (SVG; replaced if it exists).
    #[arg(long, value_name = "FILE")]
    flamegraph: Option<PathBuf>,
}

impl MeasureArgs {
    fn options(&self) -> Result<MeasureOptions, CliError> {
        Ok(MeasureOptions::new(self.duration, self.rounds)?)
    }

    /// The command as the flame graph's title: `tlsperf crypto NAME` with the selection
    /// flags given and the measurement flags (the duration as one word, `1s500ms`).
    fn title(&self, name: &str, flags: &[Option<String>]) -> String {
        let mut t = format!("tlsperf crypto {name}");
        for f in flags.iter().flatten() {
            t.push(' ');
            t.push_str(f);
        }
        t.push_str(&format!(
            " --duration {} --rounds {}",
            humantime::format_duration(self.duration)
                .to_string()
                .replace(' ', ""),
            self.rounds
        ));
        t
    }

    /// Runs a command: checks the `--flamegraph` path first, samples `run` when asked,
    /// prints the result with `print`, then writes the flame graph and says where.
    fn run<T>(
        &self,
        title: String,
        out: &Output,
        run: impl FnOnce() -> Result<T, CryptoError>,
        print: impl FnOnce(&T) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let Some(path) = &self.flamegraph else {
            return print(&run()?);
        };
        let target = FlamegraphTarget::new(path, title)?;
        let sampling = Sampling::start()?;
        let result = run()?;
        let profile = sampling.stop()?;
        print(&result)?;
        let written = profile.write(&target)?;
        if !out.quiet() {
            out.note(format_args!(
                "flame graph: {} ({} samples over {:.2} s)",
                written.path.display(),
                written.samples,
                profile.duration().as_secs_f64()
            ));
        }
        Ok(())
    }
}

/// `-d/--duration`: a duration longer than zero, at most [`MeasureOptions::MAX_TIME`].
fn parse_measure_time(s: &str) -> Result<Duration, String> {
    let d = super::duration::parse_positive(s)?;
    if d > MeasureOptions::MAX_TIME {
        return Err(format!("'{s}' is longer than the limit of 24h"));
    }
    Ok(d)
}

/// `--name a,b` for the values chosen, nothing when none were (all of them).
fn flag<T: ValueEnum>(name: &str, chosen: &[T]) -> Option<String> {
    let values: Vec<String> = chosen
        .iter()
        .filter_map(|v| v.to_possible_value().map(|p| p.get_name().to_string()))
        .collect();
    (!values.is_empty()).then(|| format!("{name} {}", values.join(",")))
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf crypto sign --alg ecdsa-p256,ed25519 --duration 2s",
]))]
struct SignArgs {
    /// Implementations to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    provider: Vec<Implementation>,
    /// Algorithms to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    alg: Vec<SigAlg>,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf crypto kx --groups x25519,x25519mlkem768",
]))]
struct KxArgs {
    /// Providers to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    provider: Vec<Provider>,
    /// Groups to measure (comma-separated or repeated; all by default). X25519MLKEM768
    /// exists in aws-lc-rs only. (`--group`, its spelling before 2026-12-07, still works:
    /// a list is `--groups` everywhere, one group `--group`.)
    #[arg(
        long = "groups",
        alias = "group",
        value_enum,
        value_delimiter = ',',
        value_name = "GROUPS"
    )]
    groups: Vec<KxGroup>,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf crypto handshake --key-type ecdsa-p256 --tls 1.3 --kind full",
]))]
struct HandshakeArgs {
    /// Providers to measure (comma-separated or repeated; all by default).
    #[arg(long, value_enum, value_delimiter = ',')]
    provider: Vec<Provider>,
    /// Key types of the certificate chain (default: ecdsa-p256, ed25519, rsa-2048; `--cert`,
    /// its spelling before 2026-12-07, still works).
    #[arg(
        long = "key-type",
        alias = "cert",
        value_enum,
        value_delimiter = ',',
        value_name = "TYPES"
    )]
    cert: Vec<KeyType>,
    /// Protocol versions (default: both).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VERSIONS")]
    tls: Vec<TlsVersion>,
    /// Full handshakes, resumptions by ticket, or both (the default).
    #[arg(long, value_enum, value_delimiter = ',')]
    kind: Vec<FullOrResumed>,
    /// The only key-exchange group offered and accepted.
    #[arg(long, value_enum, default_value = "x25519")]
    group: KxGroup,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Debug, Args)]
#[command(after_help = super::examples::block(&[
    "tlsperf crypto limit --key-type rsa-2048 --flamegraph limit.svg",
]))]
struct LimitArgs {
    /// Key type of the certificate chain (`--cert`, its spelling before 2026-12-07, still
    /// works).
    #[arg(
        long = "key-type",
        alias = "cert",
        value_enum,
        default_value = "ecdsa-p256",
        value_name = "TYPE"
    )]
    cert: KeyType,
    /// Key-exchange group.
    #[arg(long, value_enum, default_value = "x25519")]
    group: KxGroup,
    /// Protocol version.
    #[arg(long, value_enum, default_value = "1.3", value_name = "VERSION")]
    tls: TlsVersion,
    /// The provider of both sides.
    #[arg(long, value_enum, default_value = "aws-lc-rs")]
    provider: Provider,
    #[command(flatten)]
    measure: MeasureArgs,
}

/// Runs `tlsperf crypto`.
pub fn exec(args: CryptoArgs, out: &Output) -> Result<(), CliError> {
    match args.command {
        CryptoCommand::Sign(a) => {
            let title = a.measure.title(
                "sign",
                &[flag("--provider", &a.provider), flag("--alg", &a.alg)],
            );
            let opts = SignOptions {
                algs: or_all(a.alg, &SigAlg::ALL),
                implementations: or_all(a.provider, &Implementation::ALL),
                measure: a.measure.options()?,
            };
            a.measure.run(
                title,
                out,
                || sign::run(&opts),
                |r| out.result(r, || report::sign(r)),
            )
        }
        CryptoCommand::Kx(a) => {
            let title = a.measure.title(
                "kx",
                &[flag("--provider", &a.provider), flag("--groups", &a.groups)],
            );
            let opts = KxOptions {
                groups: or_all(a.groups, &KxGroup::ALL),
                providers: or_all(a.provider, &Provider::ALL),
                measure: a.measure.options()?,
            };
            a.measure.run(
                title,
                out,
                || kx::run(&opts),
                |r| out.result(r, || report::kx(r)),
            )
        }
        CryptoCommand::Handshake(a) => {
            let title = a.measure.title(
                "handshake",
                &[
                    flag("--provider", &a.provider),
                    flag("--key-type", &a.cert),
                    flag("--tls", &a.tls),
                    flag("--kind", &a.kind),
                    flag("--group", &[a.group]),
                ],
            );
            let opts = HandshakeOptions {
                providers: or_all(a.provider, &Provider::ALL),
                versions: or_all(a.tls, &TlsVersion::ALL),
                certs: or_all(a.cert, &in_memory::DEFAULT_CERTS),
                kinds: or_all(a.kind, &FullOrResumed::ALL),
                group: a.group,
                measure: a.measure.options()?,
            };
            a.measure.run(
                title,
                out,
                || in_memory::run(&opts),
                |r| out.result(r, || report::handshake(r)),
            )
        }
        CryptoCommand::Limit(a) => {
            let title = a.measure.title(
                "limit",
                &[
                    flag("--key-type", &[a.cert]),
                    flag("--group", &[a.group]),
                    flag("--tls", &[a.tls]),
                    flag("--provider", &[a.provider]),
                ],
            );
            let opts = LimitOptions {
                provider: a.provider,
                cert: a.cert,
                group: a.group,
                tls: a.tls,
                measure: a.measure.options()?,
            };
            a.measure.run(
                title,
                out,
                || limit::run(&opts),
                |r| out.result(r, || report::limit(r)),
            )
        }
    }
}

/// The user's choice without repeats, or every value.
fn or_all<T: Copy + PartialEq>(chosen: Vec<T>, all: &[T]) -> Vec<T> {
    if chosen.is_empty() {
        return all.to_vec();
    }
    let mut v = Vec::new();
    for c in chosen {
        if !v.contains(&c) {
            v.push(c);
        }
    }
    v
}
