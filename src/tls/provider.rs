//! The crypto provider choice: aws-lc-rs (the default) or ring.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// A rustls crypto provider tlsperf can use.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Provider {
    /// aws-lc-rs: rustls's default provider.
    #[default]
    #[value(name = "aws-lc-rs")]
    #[serde(rename = "aws-lc-rs")]
    AwsLcRs,
    /// ring.
    #[value(name = "ring")]
    #[serde(rename = "ring")]
    Ring,
}

impl Provider {
    /// Every provider, in a stable order (for loops over providers in tests and benches).
    pub const ALL: [Provider; 2] = [Provider::AwsLcRs, Provider::Ring];

    /// The provider's name as used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Provider::AwsLcRs => "aws-lc-rs",
            Provider::Ring => "ring",
        }
    }

    /// A fresh rustls [`CryptoProvider`] with this provider's default algorithms.
    pub fn crypto_provider(self) -> Arc<CryptoProvider> {
        Arc::new(match self {
            Provider::AwsLcRs => rustls::crypto::aws_lc_rs::default_provider(),
            Provider::Ring => rustls::crypto::ring::default_provider(),
        })
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Provider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown crypto provider '{s}' (expected aws-lc-rs or ring)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Provider::ALL {
            assert_eq!(p.name().parse::<Provider>().unwrap(), p);
            assert!(!p.crypto_provider().cipher_suites.is_empty());
        }
        assert!("openssl".parse::<Provider>().is_err());
    }
}
