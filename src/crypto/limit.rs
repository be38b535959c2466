//! `tlsperf crypto limit`: the crypto one handshake does, per side, the handshakes/s per
//! core it allows, and how close the measured in-memory rate comes.
//!
//! Two measurements of the same handshake shape:
//! - **in the handshake**: handshakes driven in memory on the instrumented provider
//!   ([`super::instrument`]), every call into the crypto timed and charged to the side
//!   that made it — key exchange, signing, chain and handshake-signature verification,
//!   transcript hashing, the key schedule (HKDF, HMAC, PRF), record protection (AEAD),
//!   tickets and random bytes. The sum per handshake is the side's **crypto time**, and
//!   1e9 / crypto time the **crypto limit**: the handshakes/s one core could not exceed
//!   even if rustls's own work (parsing, encoding, state machine, buffers) cost nothing.
//!   Two clock reads per timed call are measured ([`instrument::clock_bias_ns`]) and
//!   subtracted per call.
//! - **in a tight loop**: the public-key operations alone (one key exchange; the
//!   handshake signature; on the client the two chain signatures and the handshake
//!   signature), each measured on its own as `crypto sign` / `crypto kx` do. They show
//!   what the same operations cost with warm caches, against their cost inside a
//!   handshake.
//!
//! The **measured rate** is `crypto handshake`'s, on the plain provider (no timing
//! wrappers); % of crypto limit = measured rate ÷ crypto limit = crypto time ÷ measured
//! time per handshake: the share of a handshake that is crypto.

use serde::Serialize;

use std::time::Duration;

use super::in_memory::{self, FullOrResumed, Shape};
use super::instrument::{self, CATEGORIES, Category, Tally};
use super::kx::{self, KxGroup, Role};
use super::measure::{MAX_UNCOUNTED, MeasureOptions, Measurement, measure, measure_parts};
use super::sign::{self, SigAlg, TestKey};
use super::{CryptoError, Implementation};
use crate::pki::KeyType;
use crate::tls::Provider;
use crate::tls::choices::TlsVersion;

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

/// `tlsperf-crypto-limit/1` documents read with what they lack empty or zero: no clock
/// bias, no `in_handshake`, no public-key split of the limits and, in files written before
/// the field existed, no `measured_rounds_ns` (their limits compare by medians only). Their
/// `crypto_ns` had another meaning; nothing reads it back.
impl crate::doc::Document for LimitReport {
    const SCHEMA: &'static str = "tlsperf-crypto-limit/2";
    const READS: &'static [&'static str] = &["tlsperf-crypto-limit/1"];
    const NAME: &'static str = "tlsperf crypto limit result";
}

/// The result of `crypto limit`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LimitReport {
    /// `tlsperf-crypto-limit/2`.
    pub schema: String,
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
    /// What the two clock reads of one timed call add to it, ns; subtracted per call
    /// from every in-handshake figure.
    #[serde(default)]
    pub clock_bias_ns: f64,
    /// The public-key operations in a tight loop, and how many of each a handshake does.
    pub operations: Vec<Operation>,
    /// The crypto inside real handshakes: one row per handshake kind and side.
    #[serde(default)]
    pub in_handshake: Vec<InHandshake>,
    /// One row per handshake kind and side.
    pub limits: Vec<Limit>,
}

/// The crypto one side does in one handshake of one kind, measured inside handshakes.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct InHandshake {
    /// Full or resumed.
    pub kind: FullOrResumed,
    /// Client or server.
    pub side: Role,
    /// Per category: calls and time per handshake (categories with no call left out).
    pub categories: Vec<CategoryTime>,
    /// The sum of the categories' ns per handshake.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub crypto_ns: f64,
    /// The side's whole time per handshake in the instrumented run, bias subtracted
    /// (compare with the plain run's `measured_ns`: the wrappers' own cost shows here).
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub instrumented_ns: f64,
}

/// One category's share of one side's handshake.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CategoryTime {
    /// What the calls do.
    pub category: Category,
    /// Calls per handshake.
    pub calls: u32,
    /// Median over the rounds of the time per handshake, ns, bias subtracted.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub ns: f64,
    /// Every round's time per handshake, ns, bias subtracted.
    #[serde(
        deserialize_with = "crate::doc::at_most_items::<_, _, { crate::stats::rows::MAX_ROUNDS }>"
    )]
    pub rounds_ns: Vec<f64>,
}

/// One measured crypto operation.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Operation {
    /// What it is, e.g. `kx x25519 server (start_and_complete)`.
    pub name: String,
    /// The side that performs it.
    pub side: Role,
    /// How many a full handshake does on that side.
    pub per_full: u32,
    /// How many a resumed handshake does on that side.
    pub per_resumed: u32,
    /// The figures.
    #[serde(flatten)]
    pub m: Measurement,
}

/// The crypto limit of one side of one kind of handshake, beside the measured rate.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Limit {
    /// Full or resumed.
    pub kind: FullOrResumed,
    /// Client or server.
    pub side: Role,
    /// Crypto time per handshake measured inside handshakes (every category).
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub crypto_ns: f64,
    /// Of that, public-key crypto (key exchange, signing, verification).
    #[serde(default)]
    pub public_key_ns: f64,
    /// The same public-key operations in a tight loop (sum over [`LimitReport::operations`]).
    #[serde(default)]
    pub tight_loop_public_key_ns: f64,
    /// 1e9 / `crypto_ns`: the handshakes/s one core cannot exceed; null when no crypto
    /// time was measured.
    pub limit_per_sec: Option<f64>,
    /// Measured in-memory handshakes/s of this side (`crypto handshake`).
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub measured_per_sec: f64,
    /// Measured ns per handshake of this side.
    #[serde(deserialize_with = "crate::doc::f64_or_nan")]
    pub measured_ns: f64,
    /// Every round of that measurement, ns per handshake of this side (the samples
    /// `tlsperf compare` tests).
    #[serde(
        default,
        deserialize_with = "crate::doc::at_most_items::<_, _, { crate::stats::rows::MAX_ROUNDS }>"
    )]
    pub measured_rounds_ns: Vec<f64>,
    /// measured / limit × 100; null without a limit.
    pub percent_of_limit: Option<f64>,
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
    let resumed_kx = u32::from(opts.tls == TlsVersion::V1_3);
    let mut operations = Vec::new();

    let shares = kx::exchange(g, p, p)?;
    operations.push(Operation {
        name: format!("kx {g} client (start + complete)"),
        side: Role::Client,
        per_full: 1,
        per_resumed: resumed_kx,
        m: kx::measure_client(m, g, p, &shares.server)?,
    });
    operations.push(Operation {
        name: format!("kx {g} server (start_and_complete)"),
        side: Role::Server,
        per_full: 1,
        per_resumed: resumed_kx,
        m: kx::measure_server(m, g, p, &shares.client)?,
    });

    let (chain_alg, hs_alg) = sig_algs(opts.cert);
    let key = TestKey::generate(opts.cert)?;
    let msg = sign::message();
    let imp = Implementation::from(p);
    let signer = sign::load(hs_alg, imp, &key)?;
    let mut sig = Vec::with_capacity(1024);
    operations.push(Operation {
        name: format!("sign {hs_alg} (handshake signature)"),
        side: Role::Server,
        per_full: 1,
        per_resumed: 0,
        m: measure(m, || signer.sign(&msg, &mut sig))?,
    });
    signer.sign(&msg, &mut sig)?;
    operations.push(Operation {
        name: format!("verify {hs_alg} (handshake signature)"),
        side: Role::Client,
        per_full: 1,
        per_resumed: 0,
        m: measure(m, || signer.verify(&msg, &sig))?,
    });
    let chain = sign::load(chain_alg, imp, &key)?;
    chain.sign(&msg, &mut sig)?;
    operations.push(Operation {
        name: format!("verify {chain_alg} (chain: leaf and intermediate)"),
        side: Role::Client,
        per_full: 2,
        per_resumed: 0,
        m: measure(m, || chain.verify(&msg, &sig))?,
    });

    let pki = in_memory::pki(opts.cert)?;
    let bias = instrument::clock_bias_ns();
    let mut in_handshake = Vec::new();
    let mut limits = Vec::new();
    let shapes = FullOrResumed::ALL.map(|kind| Shape {
        provider: p,
        tls: opts.tls,
        cert: opts.cert,
        kind,
        group: g,
    });
    let measured = measure_alternately([&shapes[0], &shapes[1]], &pki, m, bias)?;
    for (kind, (plain, inside)) in FullOrResumed::ALL.into_iter().zip(measured) {
        for ((side, measured), ih) in [Role::Client, Role::Server]
            .into_iter()
            .zip(plain)
            .zip(inside)
        {
            let tight: f64 = operations
                .iter()
                .filter(|o| o.side == side)
                .map(|o| {
                    let n = match kind {
                        FullOrResumed::Full => o.per_full,
                        FullOrResumed::Resumed => o.per_resumed,
                    };
                    f64::from(n) * o.m.ns_per_op
                })
                .sum();
            let public_key_ns = ih
                .categories
                .iter()
                .filter(|c| c.category.public_key())
                .map(|c| c.ns)
                .sum();
            let limit = (ih.crypto_ns > 0.0).then(|| 1e9 / ih.crypto_ns);
            limits.push(Limit {
                kind,
                side,
                crypto_ns: ih.crypto_ns,
                public_key_ns,
                tight_loop_public_key_ns: tight,
                limit_per_sec: limit,
                measured_per_sec: measured.ops_per_sec,
                measured_ns: measured.ns_per_op,
                measured_rounds_ns: measured.rounds_ns.clone(),
                percent_of_limit: limit.map(|l| measured.ops_per_sec / l * 100.0),
            });
            in_handshake.push(ih);
        }
    }
    Ok(LimitReport {
        schema: <LimitReport as crate::doc::Document>::SCHEMA.into(),
        provider: p,
        cert: opts.cert,
        group: g,
        tls: opts.tls,
        seconds: m.seconds(),
        rounds: m.rounds(),
        clock_bias_ns: bias,
        operations,
        in_handshake,
        limits,
    })
}

/// Slots of [`measure_parts`] for one plain and one instrumented handshake of one kind:
/// each side's time in the plain one, each side's whole time in the instrumented one,
/// then each side's time per category.
const PER_KIND: usize = 4 + 2 * CATEGORIES;
/// Both kinds, full first.
const SLOTS: usize = 2 * PER_KIND;

/// What [`measure_alternately`] gives for one kind: per side, the plain handshake's
/// measurement and the instrumented one's crypto.
type KindMeasured = ([Measurement; 2], [InHandshake; 2]);

/// Handshakes of the full and the resumed `shapes` on the plain provider and on the
/// instrumented one, one of each of the four in turn (so that all meet the same machine:
/// a vCPU whose speed moves between two separate measurements would move the resumed ÷
/// full ratio), for twice `m`'s time: per kind and side, the plain handshake's time and,
/// from the instrumented one, the time per category (median of the rounds) and the calls
/// per handshake, `bias` subtracted per call.
fn measure_alternately(
    shapes: [&Shape; 2],
    pki: &crate::pki::TestPki,
    m: &MeasureOptions,
    bias: f64,
) -> Result<[KindMeasured; 2], CryptoError> {
    let mut pairs = Vec::with_capacity(2);
    for shape in shapes {
        pairs.push((
            in_memory::configs(shape, pki)?,
            in_memory::instrumented_configs(shape, pki)?,
        ));
    }
    let mut buf = Vec::with_capacity(16 * 1024);
    let err = |shape: &Shape| {
        let shape = *shape;
        move |e: rustls::Error| in_memory::tls_err(&shape, "instrumented handshake", e)
    };
    let none_counted = |shape: &Shape| {
        in_memory::tls_err(
            shape,
            "instrumented handshake",
            format!(
                "{MAX_UNCOUNTED} handshakes in a row were not {}",
                shape.kind.name()
            ),
        )
    };
    // The calls of one counted handshake of each kind (the first resumption attempt is
    // full).
    let mut calls = [[[0u32; CATEGORIES]; 2]; 2];
    for (k, (shape, (_, pair))) in shapes.iter().zip(&pairs).enumerate() {
        let mut found = None;
        for _ in 0..MAX_UNCOUNTED {
            let mut sides = [Duration::ZERO; 2];
            let mut tallies = [Tally::default(); 2];
            if in_memory::handshake_tallied(pair, &mut buf, &mut sides, &mut tallies)
                .map_err(err(shape))?
            {
                found = Some(tallies.map(|t| t.calls));
                break;
            }
        }
        calls[k] = found.ok_or_else(|| none_counted(shape))?;
    }
    let both = m.doubled();
    let parts: [Measurement; SLOTS] = measure_parts(
        &both,
        |slots: &mut [Duration; SLOTS]| {
            let mut got = [Duration::ZERO; SLOTS];
            for (k, (shape, (plain, pair))) in shapes.iter().zip(&pairs).enumerate() {
                let base = k * PER_KIND;
                let mut plain_sides = [Duration::ZERO; 2];
                let plain_counted =
                    in_memory::handshake(plain, &mut buf, &mut plain_sides).map_err(err(shape))?;
                let mut sides = [Duration::ZERO; 2];
                let mut tallies = [Tally::default(); 2];
                let counted =
                    in_memory::handshake_tallied(pair, &mut buf, &mut sides, &mut tallies)
                        .map_err(err(shape))?;
                // Only rounds where all four had the wanted kind (the first resumptions
                // are full).
                if !(plain_counted && counted) {
                    return Ok(false);
                }
                got[base..base + 2].copy_from_slice(&plain_sides);
                got[base + 2..base + 4].copy_from_slice(&sides);
                for (side, t) in tallies.iter().enumerate() {
                    for i in 0..CATEGORIES {
                        got[base + 4 + side * CATEGORIES + i] = Duration::from_nanos(t.ns[i]);
                    }
                }
            }
            slots.iter_mut().zip(got).for_each(|(s, d)| *s += d);
            Ok(true)
        },
        || none_counted(shapes[1]),
    )?;
    Ok([0, 1].map(|k| {
        let base = k * PER_KIND;
        let plain = [parts[base].clone(), parts[base + 1].clone()];
        let inside = [Role::Client, Role::Server].map(|side| {
            let s = side_index(side);
            let n_of = |i: usize| calls[k][s][i];
            let categories: Vec<CategoryTime> = Category::ALL
                .iter()
                .enumerate()
                .filter(|(i, _)| n_of(*i) > 0)
                .map(|(i, &category)| {
                    let n = n_of(i);
                    let less = bias * f64::from(n);
                    let mm = &parts[base + 4 + s * CATEGORIES + i];
                    CategoryTime {
                        category,
                        calls: n,
                        ns: (mm.ns_per_op - less).max(0.0),
                        rounds_ns: mm.rounds_ns.iter().map(|r| (r - less).max(0.0)).collect(),
                    }
                })
                .collect();
            let all_calls: u32 = (0..CATEGORIES).map(n_of).sum();
            InHandshake {
                kind: shapes[k].kind,
                side,
                crypto_ns: categories.iter().map(|c| c.ns).sum(),
                categories,
                instrumented_ns: (parts[base + 2 + s].ns_per_op - bias * f64::from(all_calls))
                    .max(0.0),
            }
        });
        (plain, inside)
    }))
}

fn side_index(side: Role) -> usize {
    match side {
        Role::Client => 0,
        Role::Server => 1,
    }
}
