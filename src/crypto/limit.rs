//! `tlsperf crypto limit`: the crypto a handshake cannot avoid, measured per side, and the
//! handshakes/s per core it allows, beside the measured in-memory handshake rate.
//!
//! The operations counted (each measured with the provider's own primitives):
//! - server, full: the key exchange (`start_and_complete`) and one signature
//!   (CertificateVerify in TLS 1.3, ServerKeyExchange in TLS 1.2);
//! - client, full: the key exchange (`start` + `complete`), the two signatures of the
//!   chain (leaf by intermediate, intermediate by root) and the server's handshake
//!   signature, each verification parsing its public key as webpki and rustls do;
//! - resumed by ticket: TLS 1.3 keeps the key exchange (PSK with (EC)DHE) and drops the
//!   signatures; a TLS 1.2 abbreviated handshake has no public-key operation at all, so it
//!   has no limit here.
//!
//! Hashing, HKDF, record encryption and the ticket's AEAD are left out: next to the
//! public-key operations they are small, and leaving them out keeps the figure an upper
//! bound. RSA handshake signatures are measured as RSA-PSS with SHA-256 (rustls picks
//! PSS; the hash it picks differs in cost by a 130-byte message at most).

use serde::Serialize;

use super::handshake::{self, Kind, Shape, TlsVersion};
use super::kx::{self, KxGroup, Side};
use super::measure::{MeasureOptions, Measurement, measure};
use super::sign::{self, SigAlg, TestKey};
use super::{CryptoError, Implementation};
use crate::pki::KeyType;
use crate::tls::Provider;

/// What `crypto limit` computes.
#[derive(Debug, Clone)]
pub struct LimitOptions {
    /// The provider of both sides.
    pub provider: Provider,
    /// Key type of the certificate chain.
    pub cert: KeyType,
    /// Key-exchange group.
    pub group: KxGroup,
    /// Protocol version.
    pub tls: TlsVersion,
    /// Time and rounds per measured item.
    pub measure: MeasureOptions,
}

/// The result of `crypto limit`.
#[derive(Debug, Clone, Serialize)]
pub struct LimitReport {
    /// `tlsperf-crypto-limit/1`.
    pub schema: &'static str,
    /// The provider.
    pub provider: Provider,
    /// Certificate chain key type.
    pub cert: KeyType,
    /// Key-exchange group.
    pub group: KxGroup,
    /// Protocol version.
    pub tls: TlsVersion,
    /// Timed seconds per measured item.
    pub seconds: f64,
    /// Rounds per measured item.
    pub rounds: u32,
    /// The crypto operations measured, and how many of each a handshake does.
    pub operations: Vec<Operation>,
    /// One row per handshake kind and side.
    pub limits: Vec<Limit>,
}

/// One measured crypto operation.
#[derive(Debug, Clone, Serialize)]
pub struct Operation {
    /// What it is, e.g. `kx x25519 server (start_and_complete)`.
    pub name: String,
    /// The side that performs it.
    pub side: Side,
    /// How many a full handshake does on that side.
    pub per_full: u32,
    /// How many a resumed handshake does on that side.
    pub per_resumed: u32,
    /// The figures.
    #[serde(flatten)]
    pub m: Measurement,
}

/// The crypto limit of one side of one kind of handshake, beside the measured rate.
#[derive(Debug, Clone, Serialize)]
pub struct Limit {
    /// Full or resumed.
    pub kind: Kind,
    /// Client or server.
    pub side: Side,
    /// Sum of the operations' median ns.
    pub crypto_ns: f64,
    /// 1e9 / `crypto_ns`: the handshakes/s one core cannot exceed; null when the
    /// handshake has no public-key operation (TLS 1.2 resumption).
    pub limit_per_sec: Option<f64>,
    /// Measured in-memory handshakes/s of this side (`crypto handshake`).
    pub measured_per_sec: f64,
    /// Measured ns per handshake of this side.
    pub measured_ns: f64,
    /// Every round of that measurement, ns per handshake of this side (the samples
    /// `tlsperf compare` tests).
    pub measured_rounds_ns: Vec<f64>,
    /// measured / limit × 100; null without a limit.
    pub percent_of_limit: Option<f64>,
}

fn implementation(p: Provider) -> Implementation {
    match p {
        Provider::AwsLcRs => Implementation::AwsLcRs,
        Provider::Ring => Implementation::Ring,
    }
}

/// The algorithms of the chain's signatures and of the handshake signature.
fn sig_algs(cert: KeyType) -> (SigAlg, SigAlg) {
    match cert {
        KeyType::EcdsaP256 => (SigAlg::EcdsaP256, SigAlg::EcdsaP256),
        KeyType::EcdsaP384 => (SigAlg::EcdsaP384, SigAlg::EcdsaP384),
        KeyType::Ed25519 => (SigAlg::Ed25519, SigAlg::Ed25519),
        KeyType::Rsa2048 => (SigAlg::Rsa2048Pkcs1, SigAlg::Rsa2048Pss),
        KeyType::Rsa3072 => (SigAlg::Rsa3072Pkcs1, SigAlg::Rsa3072Pss),
        KeyType::Rsa4096 => (SigAlg::Rsa4096Pkcs1, SigAlg::Rsa4096Pss),
    }
}

/// Runs `crypto limit`.
pub fn run(opts: &LimitOptions) -> Result<LimitReport, CryptoError> {
    let (p, g) = (opts.provider, opts.group);
    if g.group(p).is_none() {
        return Err(CryptoError::Nothing(format!("{g} is not in {p}")));
    }
    let m = &opts.measure;
    let resumed_kx = u32::from(opts.tls == TlsVersion::Tls13);
    let mut operations = Vec::new();

    let shares = kx::exchange(g, p, p)?;
    operations.push(Operation {
        name: format!("kx {g} client (start + complete)"),
        side: Side::Client,
        per_full: 1,
        per_resumed: resumed_kx,
        m: kx::measure_client(m, g, p, &shares.server)?,
    });
    operations.push(Operation {
        name: format!("kx {g} server (start_and_complete)"),
        side: Side::Server,
        per_full: 1,
        per_resumed: resumed_kx,
        m: kx::measure_server(m, g, p, &shares.client)?,
    });

    let (chain_alg, hs_alg) = sig_algs(opts.cert);
    let key = TestKey::generate(opts.cert)?;
    let msg = sign::message();
    let imp = implementation(p);
    let signer = sign::load(hs_alg, imp, &key)?;
    let mut sig = Vec::with_capacity(1024);
    operations.push(Operation {
        name: format!("sign {hs_alg} (handshake signature)"),
        side: Side::Server,
        per_full: 1,
        per_resumed: 0,
        m: measure(m, || signer.sign(&msg, &mut sig))?,
    });
    signer.sign(&msg, &mut sig)?;
    operations.push(Operation {
        name: format!("verify {hs_alg} (handshake signature)"),
        side: Side::Client,
        per_full: 1,
        per_resumed: 0,
        m: measure(m, || signer.verify(&msg, &sig))?,
    });
    let chain = sign::load(chain_alg, imp, &key)?;
    chain.sign(&msg, &mut sig)?;
    operations.push(Operation {
        name: format!("verify {chain_alg} (chain: leaf and intermediate)"),
        side: Side::Client,
        per_full: 2,
        per_resumed: 0,
        m: measure(m, || chain.verify(&msg, &sig))?,
    });

    let pki = handshake::pki(opts.cert)?;
    let mut limits = Vec::new();
    for kind in Kind::ALL {
        let shape = Shape {
            provider: p,
            tls: opts.tls,
            cert: opts.cert,
            kind,
            group: g,
        };
        let row = handshake::measure_shape(&shape, &pki, m)?;
        for (side, measured) in [(Side::Client, &row.client), (Side::Server, &row.server)] {
            let crypto_ns: f64 = operations
                .iter()
                .filter(|o| o.side == side)
                .map(|o| {
                    let n = match kind {
                        Kind::Full => o.per_full,
                        Kind::Resumed => o.per_resumed,
                    };
                    f64::from(n) * o.m.ns_per_op
                })
                .sum();
            let limit = (crypto_ns > 0.0).then(|| 1e9 / crypto_ns);
            limits.push(Limit {
                kind,
                side,
                crypto_ns,
                limit_per_sec: limit,
                measured_per_sec: measured.ops_per_sec,
                measured_ns: measured.ns_per_op,
                measured_rounds_ns: measured.rounds_ns.clone(),
                percent_of_limit: limit.map(|l| measured.ops_per_sec / l * 100.0),
            });
        }
    }
    Ok(LimitReport {
        schema: "tlsperf-crypto-limit/1",
        provider: p,
        cert: opts.cert,
        group: g,
        tls: opts.tls,
        seconds: m.seconds(),
        rounds: m.rounds(),
        operations,
        limits,
    })
}
