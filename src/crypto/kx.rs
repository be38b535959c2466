//! `tlsperf crypto kx`: key exchange through the providers' rustls key-exchange groups
//! ([`rustls::crypto::SupportedKxGroup`]), per side of a handshake.
//!
//! - Client side: `start()` (key generation) then `complete(server share)` (agreement,
//!   or ML-KEM decapsulation for the hybrid), one operation.
//! - Server side: `start_and_complete(client share)`, one operation (key generation and
//!   agreement, or encapsulation for the hybrid).
//! - The peer's share is made once, outside the timed loop. With ECDH any valid point
//!   costs the same. For X25519MLKEM768 the fixed ciphertext was made for another client
//!   key: ML-KEM decapsulation then takes its implicit-rejection path, which by design
//!   costs the same as a matching one (it always re-encrypts and compares).
//! - Before timing, client and server of every provider pair agree on the secret.

use std::fmt;

use rustls::crypto::SupportedKxGroup;
use serde::Serialize;

use super::CryptoError;
use super::measure::{MeasureOptions, Measurement, Op, measure, measure_interleaved};
use crate::tls::Provider;

/// A key-exchange group measured by `crypto kx`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, serde::Deserialize,
)]
pub enum KxGroup {
    /// X25519.
    #[value(name = "x25519")]
    #[serde(rename = "x25519")]
    X25519,
    /// ECDH on P-256.
    #[value(name = "secp256r1")]
    #[serde(rename = "secp256r1")]
    Secp256r1,
    /// ECDH on P-384.
    #[value(name = "secp384r1")]
    #[serde(rename = "secp384r1")]
    Secp384r1,
    /// The X25519 + ML-KEM-768 hybrid (aws-lc-rs only).
    #[value(name = "x25519mlkem768")]
    #[serde(rename = "x25519mlkem768")]
    X25519Mlkem768,
}

impl KxGroup {
    /// Every group, in a stable order.
    pub const ALL: [KxGroup; 4] = [
        KxGroup::X25519,
        KxGroup::Secp256r1,
        KxGroup::Secp384r1,
        KxGroup::X25519Mlkem768,
    ];

    /// The name used on the command line and in JSON (rustls's, lowercased).
    pub fn name(self) -> &'static str {
        match self {
            KxGroup::X25519 => "x25519",
            KxGroup::Secp256r1 => "secp256r1",
            KxGroup::Secp384r1 => "secp384r1",
            KxGroup::X25519Mlkem768 => "x25519mlkem768",
        }
    }

    /// The provider's rustls group, when it has one (looked up by name).
    pub fn group(self, provider: Provider) -> Option<&'static dyn SupportedKxGroup> {
        provider.kx_group(self.name())
    }
}

impl fmt::Display for KxGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which side of the handshake an operation belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The client.
    Client,
    /// The server.
    Server,
}

impl Role {
    /// `client` or `server`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }
}

/// What `crypto kx` measures.
#[derive(Debug, Clone)]
pub struct KxOptions {
    /// Groups, in order.
    pub groups: Vec<KxGroup>,
    /// Providers, in order.
    pub providers: Vec<Provider>,
    /// Time and rounds per row.
    pub measure: MeasureOptions,
}

impl crate::doc::Document for KxReport {
    const SCHEMA: &'static str = "tlsperf-crypto-kx/1";
    const NAME: &'static str = "tlsperf crypto kx result";
}

/// The result of `crypto kx`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct KxReport {
    /// `tlsperf-crypto-kx/1`.
    pub schema: String,
    /// Timed seconds per row.
    pub seconds: f64,
    /// Rounds per row.
    pub rounds: u32,
    /// Whether bytes/op were counted.
    pub allocations_counted: bool,
    /// One row per group, provider and side.
    pub rows: Vec<KxRow>,
    /// Chosen (group, provider) pairs the provider lacks, as `group/provider`.
    pub unavailable: Vec<String>,
}

/// One measured side.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct KxRow {
    /// The group.
    pub group: KxGroup,
    /// The provider.
    pub provider: Provider,
    /// Client (start + complete) or server (start_and_complete).
    pub side: Role,
    /// Bytes of the key share this side sends.
    pub share_len: usize,
    /// The figures.
    #[serde(flatten)]
    pub m: Measurement,
}

fn kx_err(provider: Provider, group: KxGroup, what: &str, e: impl fmt::Display) -> CryptoError {
    CryptoError::Kx {
        provider,
        group,
        what: what.to_string(),
        detail: e.to_string(),
    }
}

/// A client share, and the server's answer to it, for timing the other side.
#[derive(Debug, Clone)]
pub struct Shares {
    /// The client's key share.
    pub client: Vec<u8>,
    /// The server's key share (or ML-KEM ciphertext) answering `client`.
    pub server: Vec<u8>,
}

/// Runs one exchange between a client of `c` and a server of `s`, checks both sides got
/// the same secret and returns the shares.
pub fn exchange(group: KxGroup, c: Provider, s: Provider) -> Result<Shares, CryptoError> {
    let (cg, sg) = match (group.group(c), group.group(s)) {
        (Some(cg), Some(sg)) => (cg, sg),
        _ => {
            return Err(CryptoError::Nothing(format!(
                "{group} is not in {c} or {s}"
            )));
        }
    };
    let client = cg
        .start()
        .map_err(|e| kx_err(c, group, "client start", e))?;
    let client_share = client.pub_key().to_vec();
    let server = sg
        .start_and_complete(&client_share)
        .map_err(|e| kx_err(s, group, "server start_and_complete", e))?;
    let secret = client
        .complete(&server.pub_key)
        .map_err(|e| kx_err(c, group, "client complete", e))?;
    if secret.secret_bytes() != server.secret.secret_bytes() {
        return Err(kx_err(
            c,
            group,
            "agreement",
            format!("client and {s} server derived different secrets"),
        ));
    }
    Ok(Shares {
        client: client_share,
        server: server.pub_key,
    })
}

/// Measures the client side: `start()` + `complete(server share)`.
pub fn measure_client(
    opts: &MeasureOptions,
    group: KxGroup,
    provider: Provider,
    server_share: &[u8],
) -> Result<Measurement, CryptoError> {
    measure(opts, client_op(group, provider, server_share)?)
}

/// Measures the server side: `start_and_complete(client share)`.
pub fn measure_server(
    opts: &MeasureOptions,
    group: KxGroup,
    provider: Provider,
    client_share: &[u8],
) -> Result<Measurement, CryptoError> {
    measure(opts, server_op(group, provider, client_share)?)
}

fn rustls_group(
    group: KxGroup,
    provider: Provider,
) -> Result<&'static dyn SupportedKxGroup, CryptoError> {
    group
        .group(provider)
        .ok_or_else(|| CryptoError::Nothing(format!("{group} is not in {provider}")))
}

/// One client-side operation: `start()` + `complete(server share)`.
fn client_op(
    group: KxGroup,
    provider: Provider,
    server_share: &[u8],
) -> Result<impl FnMut() -> Result<(), CryptoError> + '_, CryptoError> {
    let g = rustls_group(group, provider)?;
    Ok(move || {
        let kx = g
            .start()
            .map_err(|e| kx_err(provider, group, "client start", e))?;
        std::hint::black_box(kx.pub_key());
        let secret = kx
            .complete(std::hint::black_box(server_share))
            .map_err(|e| kx_err(provider, group, "client complete", e))?;
        std::hint::black_box(secret.secret_bytes());
        Ok(())
    })
}

/// One server-side operation: `start_and_complete(client share)`.
fn server_op(
    group: KxGroup,
    provider: Provider,
    client_share: &[u8],
) -> Result<impl FnMut() -> Result<(), CryptoError> + '_, CryptoError> {
    let g = rustls_group(group, provider)?;
    Ok(move || {
        let done = g
            .start_and_complete(std::hint::black_box(client_share))
            .map_err(|e| kx_err(provider, group, "server start_and_complete", e))?;
        std::hint::black_box(&done.pub_key);
        std::hint::black_box(done.secret.secret_bytes());
        Ok(())
    })
}

/// Runs `crypto kx`.
pub fn run(opts: &KxOptions) -> Result<KxReport, CryptoError> {
    let mut rows = Vec::new();
    let mut unavailable = Vec::new();
    let mut pairs = Vec::new();
    for &group in &opts.groups {
        let have: Vec<Provider> = Provider::ALL
            .into_iter()
            .filter(|p| group.group(*p).is_some())
            .collect();
        // Every provider pair that has the group must agree before anything is timed.
        for &c in &have {
            for &s in &have {
                exchange(group, c, s)?;
            }
        }
        for &provider in &opts.providers {
            if group.group(provider).is_none() {
                unavailable.push(format!("{group}/{provider}"));
                continue;
            }
            pairs.push((group, provider, exchange(group, provider, provider)?));
        }
    }
    // Every row's rounds in turn with the others' (see `measure_interleaved`).
    let mut ops: Vec<Op<'_, CryptoError>> = Vec::with_capacity(2 * pairs.len());
    for (group, provider, shares) in &pairs {
        ops.push(Box::new(client_op(*group, *provider, &shares.server)?));
        ops.push(Box::new(server_op(*group, *provider, &shares.client)?));
    }
    tracing::info!("measuring {} rows, rounds interleaved", ops.len());
    let mut measured = measure_interleaved(&opts.measure, &mut ops)?.into_iter();
    drop(ops);
    for (group, provider, shares) in &pairs {
        for (side, share_len) in [
            (Role::Client, shares.client.len()),
            (Role::Server, shares.server.len()),
        ] {
            let Some(m) = measured.next() else { break };
            rows.push(KxRow {
                group: *group,
                provider: *provider,
                side,
                share_len,
                m,
            });
        }
    }
    if rows.is_empty() {
        return Err(CryptoError::Nothing(format!(
            "the chosen providers have none of the chosen groups ({})",
            unavailable.join(", ")
        )));
    }
    Ok(KxReport {
        schema: <KxReport as crate::doc::Document>::SCHEMA.into(),
        seconds: opts.measure.seconds(),
        rounds: opts.measure.rounds(),
        allocations_counted: super::alloc::installed(),
        rows,
        unavailable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_pair_agrees() {
        for group in KxGroup::ALL {
            for c in Provider::ALL {
                for s in Provider::ALL {
                    if group.group(c).is_some() && group.group(s).is_some() {
                        let sh = exchange(group, c, s).unwrap();
                        assert!(!sh.client.is_empty() && !sh.server.is_empty());
                    }
                }
            }
        }
        assert!(KxGroup::X25519Mlkem768.group(Provider::Ring).is_none());
        assert!(exchange(KxGroup::X25519Mlkem768, Provider::AwsLcRs, Provider::Ring).is_err());
    }
}
