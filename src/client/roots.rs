//! Where a client's roots for verifying servers come from ([`Roots`]): the system store,
//! the compiled-in Mozilla roots, a PEM file, or none (`--insecure`). Below both the
//! configuration that loads them once ([`super::config`]) and the verifier that loads
//! them again for every handshake ([`super::reload`]).

use std::path::PathBuf;

/// Where the roots for verifying servers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system store, loaded once per process and shared.
    System,
    /// The Mozilla roots compiled in (webpki-roots).
    Webpki,
    /// A PEM bundle (`--cacert` / `--roots FILE`).
    File(PathBuf),
    /// No verification of the server's certificate (`--insecure`); handshake signatures
    /// are still checked.
    Insecure,
}

impl std::str::FromStr for Roots {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "system" => Roots::System,
            "webpki" => Roots::Webpki,
            "" => return Err("empty roots (system, webpki or a PEM file)".into()),
            path => Roots::File(PathBuf::from(path)),
        })
    }
}
