//! Key types for generated certificates, and their generation.

use std::fmt;
use std::str::FromStr;

use rcgen::{KeyPair, RsaKeySize, SignatureAlgorithm};

use super::PkiError;

/// A key (and signature) type for a generated certificate.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum KeyType {
    /// ECDSA on P-256 with SHA-256.
    #[value(name = "ecdsa-p256")]
    #[serde(rename = "ecdsa-p256")]
    EcdsaP256,
    /// ECDSA on P-384 with SHA-384.
    #[value(name = "ecdsa-p384")]
    #[serde(rename = "ecdsa-p384")]
    EcdsaP384,
    /// Ed25519.
    #[value(name = "ed25519")]
    #[serde(rename = "ed25519")]
    Ed25519,
    /// RSA 2048-bit, PKCS#1 v1.5 signatures with SHA-256.
    #[value(name = "rsa-2048")]
    #[serde(rename = "rsa-2048")]
    Rsa2048,
    /// RSA 3072-bit, PKCS#1 v1.5 signatures with SHA-256.
    #[value(name = "rsa-3072")]
    #[serde(rename = "rsa-3072")]
    Rsa3072,
    /// RSA 4096-bit, PKCS#1 v1.5 signatures with SHA-256.
    #[value(name = "rsa-4096")]
    #[serde(rename = "rsa-4096")]
    Rsa4096,
}

impl KeyType {
    /// Every key type, in a stable order.
    pub const ALL: [KeyType; 6] = [
        KeyType::EcdsaP256,
        KeyType::EcdsaP384,
        KeyType::Ed25519,
        KeyType::Rsa2048,
        KeyType::Rsa3072,
        KeyType::Rsa4096,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::EcdsaP256 => "ecdsa-p256",
            KeyType::EcdsaP384 => "ecdsa-p384",
            KeyType::Ed25519 => "ed25519",
            KeyType::Rsa2048 => "rsa-2048",
            KeyType::Rsa3072 => "rsa-3072",
            KeyType::Rsa4096 => "rsa-4096",
        }
    }

    /// True for RSA keys (slow to generate; they also want keyEncipherment on TLS 1.2
    /// server leaves).
    pub fn is_rsa(self) -> bool {
        matches!(self, KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096)
    }

    /// The signature algorithm certificates signed by this key use.
    pub fn signature_algorithm(self) -> &'static SignatureAlgorithm {
        match self {
            KeyType::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyType::EcdsaP384 => &rcgen::PKCS_ECDSA_P384_SHA384,
            KeyType::Ed25519 => &rcgen::PKCS_ED25519,
            KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => &rcgen::PKCS_RSA_SHA256,
        }
    }

    /// Generates a fresh key pair of this type (aws-lc-rs does the work).
    pub fn generate(self) -> Result<KeyPair, PkiError> {
        let alg = self.signature_algorithm();
        let result = match self {
            KeyType::Rsa2048 => KeyPair::generate_rsa_for(alg, RsaKeySize::_2048),
            KeyType::Rsa3072 => KeyPair::generate_rsa_for(alg, RsaKeySize::_3072),
            KeyType::Rsa4096 => KeyPair::generate_rsa_for(alg, RsaKeySize::_4096),
            _ => KeyPair::generate_for(alg),
        };
        result.map_err(|source| PkiError::KeyGen { key: self, source })
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyType::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = KeyType::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown key type '{s}' (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in KeyType::ALL {
            assert_eq!(k.name().parse::<KeyType>().unwrap(), k);
        }
        let err = "dsa-1024".parse::<KeyType>().unwrap_err();
        assert!(err.contains("dsa-1024") && err.contains("ed25519"), "{err}");
    }

    #[test]
    fn generates_every_fast_type() {
        for k in [
            KeyType::EcdsaP256,
            KeyType::EcdsaP384,
            KeyType::Ed25519,
            KeyType::Rsa2048,
        ] {
            let kp = k.generate().unwrap();
            assert!(kp.is_compatible(k.signature_algorithm()), "{k}");
        }
    }
}
