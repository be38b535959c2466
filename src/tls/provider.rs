//! The crypto provider choice: aws-lc-rs (the default) or ring.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rustls::crypto::{CryptoProvider, SupportedKxGroup};

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

    /// Every key-exchange group this provider implements (rustls's `ALL_KX_GROUPS`, its
    /// defaults included).
    pub fn all_kx_groups(self) -> &'static [&'static dyn SupportedKxGroup] {
        match self {
            Provider::AwsLcRs => rustls::crypto::aws_lc_rs::ALL_KX_GROUPS,
            Provider::Ring => rustls::crypto::ring::ALL_KX_GROUPS,
        }
    }

    /// The key-exchange group called `name` (rustls's name, any case: `x25519`,
    /// `secp256r1`, `X25519MLKEM768`) among all this provider implements.
    pub fn kx_group(self, name: &str) -> Option<&'static dyn SupportedKxGroup> {
        find_kx_group(self.all_kx_groups(), name)
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

/// The name rustls gives a group, lowercased as on our command line (`x25519`,
/// `secp256r1`, `secp384r1`, `x25519mlkem768`).
pub fn group_name(g: rustls::NamedGroup) -> String {
    format!("{g:?}").to_ascii_lowercase()
}

/// [`group_name`] without an allocation for the groups a server negotiates every
/// handshake (a label per connection).
pub fn group_label(g: rustls::NamedGroup) -> std::borrow::Cow<'static, str> {
    use rustls::NamedGroup as G;
    std::borrow::Cow::Borrowed(match g {
        G::X25519 => "x25519",
        G::secp256r1 => "secp256r1",
        G::secp384r1 => "secp384r1",
        G::secp521r1 => "secp521r1",
        G::X448 => "x448",
        G::X25519MLKEM768 => "x25519mlkem768",
        G::secp256r1MLKEM768 => "secp256r1mlkem768",
        G::MLKEM768 => "mlkem768",
        _ => return std::borrow::Cow::Owned(group_name(g)),
    })
}

/// The group of `groups` called `name` ([`group_name`], any case).
pub fn find_kx_group(
    groups: &[&'static dyn SupportedKxGroup],
    name: &str,
) -> Option<&'static dyn SupportedKxGroup> {
    groups
        .iter()
        .find(|g| group_name(g.name()).eq_ignore_ascii_case(name))
        .copied()
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

    #[test]
    fn groups_by_name() {
        for p in Provider::ALL {
            for name in ["x25519", "SECP256R1", "secp384r1"] {
                assert!(p.kx_group(name).is_some(), "{p} {name}");
            }
        }
        assert!(Provider::AwsLcRs.kx_group("x25519mlkem768").is_some());
        assert!(Provider::Ring.kx_group("x25519mlkem768").is_none());
        assert!(Provider::Ring.kx_group("ffdhe2048").is_none());
    }

    #[test]
    fn group_labels_are_group_names() {
        use rustls::NamedGroup as G;
        for g in [
            G::X25519,
            G::secp256r1,
            G::secp384r1,
            G::secp521r1,
            G::X448,
            G::X25519MLKEM768,
            G::secp256r1MLKEM768,
            G::MLKEM768,
            G::FFDHE2048,
        ] {
            assert_eq!(group_label(g), group_name(g), "{g:?}");
        }
    }
}
