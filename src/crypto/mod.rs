//! `tlsperf crypto`: how fast signatures and key exchange are on this machine, per
//! implementation: tight loops on the wall clock, in-memory handshakes on the thread's
//! CPU clock.
//!
//! - [`mod@measure`]: the harness (warm-up, rounds, Tukey's filter, median and spread, bytes
//!   allocated per operation) every command here uses.
//! - [`alloc`]: the counting wrapper the binary puts around its global allocator.
//! - [`sign`]: `crypto sign`, sign and verify with aws-lc-rs, ring and RustCrypto.
//! - [`in_memory`]: `crypto handshake`, rustls client and server in memory, per side.
//! - [`instrument`]: a rustls provider that times every call into its crypto, per
//!   category, so an in-memory handshake tells each side's crypto time.
//! - [`cpu_clock`]: the thread CPU clock the in-memory handshakes and the instrumented
//!   provider read (a busy machine does not inflate it as it does wall time).
//! - [`kx`]: `crypto kx`, the providers' rustls key-exchange groups, client and server
//!   side.
//! - [`limit`]: `crypto limit`, the public-key operations of one handshake per side, the
//!   handshakes/s they allow, and how close the measured in-memory rate comes.
//! - [`profile`]: `--flamegraph`, a sampled CPU profile of a command drawn as an SVG.
//! - [`compare`]: two results of the same command compared row by row (Welch's t-test
//!   on the rounds), for `tlsperf compare A.json B.json`.
//!
//! Engines here never print; they return serde-serializable reports.

pub mod alloc;
pub mod compare;
pub mod cpu_clock;
pub mod in_memory;
pub mod instrument;
pub mod kx;
pub mod limit;
pub mod measure;
pub mod profile;
pub mod sign;

use std::fmt;

use crate::error::{Classify, ErrorClass};
use crate::tls::Provider;

pub use measure::{MeasureOptions, Measurement, measure};

/// A crypto implementation measured by `tlsperf crypto`: the library behind one of the
/// rustls providers tlsperf can use ([`Provider`]), or the RustCrypto crates (p256, p384,
/// ed25519-dalek, rsa: pure Rust), which `crypto sign` also measures but which are no
/// rustls provider here. Named on the command line and in JSON by [`Implementation::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Implementation {
    /// A rustls provider's own library (aws-lc-rs, ring).
    Provider(Provider),
    /// The RustCrypto crates: pure Rust.
    RustCrypto,
}

impl Implementation {
    /// aws-lc-rs (AWS-LC), rustls's default provider.
    pub const AWS_LC_RS: Implementation = Implementation::Provider(Provider::AwsLcRs);
    /// ring.
    pub const RING: Implementation = Implementation::Provider(Provider::Ring);

    /// Every implementation, in a stable order: the providers, then RustCrypto.
    pub const ALL: [Implementation; 3] = [
        Implementation::AWS_LC_RS,
        Implementation::RING,
        Implementation::RustCrypto,
    ];

    /// The name used on the command line and in JSON (a provider's own name).
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Provider(p) => p.name(),
            Implementation::RustCrypto => "rustcrypto",
        }
    }

    /// The rustls provider, unless RustCrypto.
    pub fn provider(self) -> Option<Provider> {
        match self {
            Implementation::Provider(p) => Some(p),
            Implementation::RustCrypto => None,
        }
    }

    fn help(self) -> &'static str {
        match self {
            Implementation::Provider(Provider::AwsLcRs) => {
                "aws-lc-rs (AWS-LC), rustls's default provider"
            }
            Implementation::Provider(Provider::Ring) => "ring",
            Implementation::RustCrypto => {
                "The RustCrypto crates (p256, p384, ed25519-dalek, rsa): pure Rust"
            }
        }
    }
}

impl From<Provider> for Implementation {
    fn from(p: Provider) -> Self {
        Implementation::Provider(p)
    }
}

impl fmt::Display for Implementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl clap::ValueEnum for Implementation {
    fn value_variants<'a>() -> &'a [Self] {
        &Implementation::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.help()))
    }
}

impl serde::Serialize for Implementation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Implementation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Implementation::ALL
            .into_iter()
            .find(|i| i.name() == name)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown implementation '{name}' (expected aws-lc-rs, ring or rustcrypto)"
                ))
            })
    }
}

/// A failure of a `tlsperf crypto` command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// An option value is out of range.
    #[error("invalid {name}: {reason}")]
    BadOption {
        /// The flag.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// The selection leaves nothing to measure.
    #[error("nothing to measure: {0}")]
    Nothing(String),
    /// A test key could not be generated.
    #[error("cannot generate a {what} key")]
    KeyGen {
        /// The key.
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A key exchange failed or two sides disagreed.
    #[error("{provider} {group}: {what}: {detail}")]
    Kx {
        /// The provider.
        provider: crate::tls::Provider,
        /// The group.
        group: kx::KxGroup,
        /// The step.
        what: String,
        /// What rustls or the check said.
        detail: String,
    },
    /// An in-memory handshake failed.
    #[error("handshake {shape}: {what}: {detail}")]
    Handshake {
        /// Provider, version, certificate, kind and group.
        shape: String,
        /// The step.
        what: String,
        /// What rustls said.
        detail: String,
    },
    /// An implementation refused a key or failed an operation.
    #[error("{implementation} {alg}: {what} failed{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Op {
        /// The implementation.
        implementation: Implementation,
        /// The algorithm.
        alg: String,
        /// The operation (key load, sign, verify, …).
        what: &'static str,
        /// The implementation's message, when it gives one.
        detail: Option<String>,
    },
}

impl Classify for CryptoError {
    fn class(&self) -> ErrorClass {
        match self {
            CryptoError::BadOption { .. } | CryptoError::Nothing(_) => ErrorClass::Input,
            CryptoError::KeyGen { .. }
            | CryptoError::Op { .. }
            | CryptoError::Kx { .. }
            | CryptoError::Handshake { .. } => ErrorClass::Runtime,
        }
    }
}
