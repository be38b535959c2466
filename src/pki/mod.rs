//! Test PKIs and synthetic trust bundles, built with rcgen.
//!
//! - [`key`]: the key types tlsperf can generate ([`KeyType`]).
//! - [`chain`]: a realistic test PKI — root CA → intermediate CA → server leaf and client
//!   leaf — in memory ([`TestPki`]) and written to a directory ([`write_pki`]).
//! - [`ocsp`]: a signed OCSP response (`good`) for a test PKI's server leaf, to staple
//!   ([`ocsp_response`]).
//! - [`bundle`]: synthetic trust bundles of N CA certificates, some with cross-signed
//!   twins, for trust-store scaling experiments ([`generate_bundle`]).

pub mod bundle;
pub mod chain;
pub mod key;
pub mod ocsp;

pub use bundle::{Bundle, BundleOptions, generate_bundle};
pub use chain::{
    CertSummary, ExtraFile, PkiOptions, TestPki, WrittenFile, write_pki, write_pki_with,
};
pub use key::KeyType;
pub use ocsp::ocsp_response;

use crate::error::{Classify, ErrorClass};
use crate::files::FileError;

/// A failure while building or writing test certificates.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PkiError {
    /// The crypto backend could not generate a key.
    #[error("cannot generate a {key} key")]
    KeyGen {
        /// The key type asked for.
        key: KeyType,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// The certificate could not be built or signed.
    #[error("cannot build the {what} certificate")]
    Sign {
        /// Which certificate.
        what: String,
        /// The cause.
        #[source]
        source: rcgen::Error,
    },
    /// A subject alternative name is neither an IP address nor a valid DNS name.
    #[error("invalid --san '{san}': not an IP address and not a valid DNS name")]
    BadSan {
        /// The rejected value.
        san: String,
    },
    /// A parameter is out of range.
    #[error("invalid {name}: {reason}")]
    BadParam {
        /// The parameter (as a flag name).
        name: &'static str,
        /// Why it is rejected.
        reason: String,
    },
    /// The OCSP response could not be built or signed.
    #[error("cannot build the OCSP response: {reason}")]
    Ocsp {
        /// Why.
        reason: String,
    },
    /// Writing the output failed.
    #[error(transparent)]
    Files(#[from] FileError),
}

impl Classify for PkiError {
    fn class(&self) -> ErrorClass {
        match self {
            PkiError::KeyGen { .. } | PkiError::Sign { .. } | PkiError::Ocsp { .. } => {
                ErrorClass::Runtime
            }
            PkiError::BadSan { .. } | PkiError::BadParam { .. } => ErrorClass::Input,
            PkiError::Files(e) => e.class(),
        }
    }
}

/// Lowercase hex SHA-256 of `der`: the certificate fingerprint used in listings and JSON.
pub fn sha256_hex(der: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
