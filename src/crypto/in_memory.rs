//! `tlsperf crypto handshake`: rustls client and server connections driven in memory (no
//! sockets), like rustls's own `rustls-bench`: handshakes/s for each side, full and
//! resumed (tickets), TLS 1.2 and 1.3, per certificate type and provider.
//!
//! - Flights move through one reused `Vec<u8>`: the sender's `write_tls`, then the
//!   receiver's `read_tls` + `process_new_packets`. As in rustls-bench, a transfer's time
//!   is charged to the receiving side (it is almost all `process_new_packets`), and
//!   creating each `ClientConnection` / `ServerConnection` is charged to its side. Each
//!   side's time is this thread's CPU time ([`super::cpu_clock`]): what other processes
//!   take of the CPU meanwhile is not charged to either side.
//! - Two round trips finish every handshake shape here (TLS 1.3 full and resumed, TLS 1.2
//!   full and abbreviated); the last flight carries the server's tickets.
//! - A handshake of the wrong kind (a resumption that came out full, as the first one
//!   does) is run but not counted, as rustls-bench does.
//! - Certificates: a fresh test PKI (root → intermediate → leaf, one key type throughout)
//!   from [`crate::pki`]; the client trusts the root and verifies the whole chain.
//! - The provider is narrowed to one group (x25519 unless asked) and one cipher suite:
//!   TLS13_AES_128_GCM_SHA256, or ECDHE-ECDSA/RSA-AES128-GCM-SHA256 for TLS 1.2.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::Resumption;
use rustls::server::NoServerSessionStorage;
use rustls::{
    CipherSuite, ClientConfig, ClientConnection, ConnectionCommon, RootCertStore, ServerConfig,
    ServerConnection, SideData,
};
use rustls_pki_types::ServerName;
use serde::Serialize;

use super::CryptoError;
use super::cpu_clock::ThreadCpu;
use super::instrument::{self, Tally};
use super::kx::KxGroup;
use super::measure::{MeasureOptions, Measurement, measure_parts};
use crate::pki::{KeyType, PkiOptions, TestPki};
use crate::tls::choices::TlsVersion;
use crate::tls::{Negotiated, Provider};

/// Full handshake or resumption by ticket.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FullOrResumed {
    /// A full handshake (resumption off on both sides).
    Full,
    /// Resumed with a ticket (stateless resumption; TLS 1.3 PSK with (EC)DHE).
    Resumed,
}

impl FullOrResumed {
    /// Both, in a stable order.
    pub const ALL: [FullOrResumed; 2] = [FullOrResumed::Full, FullOrResumed::Resumed];

    /// `full` or `resumed`.
    pub fn name(self) -> &'static str {
        match self {
            FullOrResumed::Full => "full",
            FullOrResumed::Resumed => "resumed",
        }
    }

    fn rustls(self) -> rustls::HandshakeKind {
        match self {
            FullOrResumed::Full => rustls::HandshakeKind::Full,
            FullOrResumed::Resumed => rustls::HandshakeKind::Resumed,
        }
    }
}

/// The certificate types `crypto handshake` measures by default.
pub const DEFAULT_CERTS: [KeyType; 3] = [KeyType::EcdsaP256, KeyType::Ed25519, KeyType::Rsa2048];

/// One configuration: what the two configs were built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The provider of both sides.
    pub provider: Provider,
    /// The protocol version.
    pub tls: TlsVersion,
    /// Key type of the whole chain.
    pub cert: KeyType,
    /// Full or resumed.
    pub kind: FullOrResumed,
    /// The only key-exchange group offered and accepted.
    pub group: KxGroup,
}

/// The client and server configs of one [`Shape`].
pub struct Pair {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    name: ServerName<'static>,
    kind: FullOrResumed,
}

/// A handshake failure of `shape` at step `what`.
pub(super) fn tls_err(shape: &Shape, what: &str, e: impl fmt::Display) -> CryptoError {
    CryptoError::Handshake {
        shape: format!(
            "{} {} {} {} {}",
            shape.provider,
            shape.tls,
            shape.cert,
            shape.kind.name(),
            shape.group
        ),
        what: what.to_string(),
        detail: e.to_string(),
    }
}

/// Generates the test PKI for a certificate type (outside any timed loop).
pub fn pki(cert: KeyType) -> Result<TestPki, CryptoError> {
    TestPki::generate(&PkiOptions {
        ca_key: cert,
        leaf_key: cert,
        ..PkiOptions::default()
    })
    .map_err(|e| CryptoError::KeyGen {
        what: format!("{cert} test PKI"),
        source: Box::new(e),
    })
}

/// Builds the two configs of `shape` around `pki`.
pub fn configs(shape: &Shape, pki: &TestPki) -> Result<Pair, CryptoError> {
    build_configs(shape, pki, false)
}

/// Builds the two configs of `shape` around `pki` on the instrumented provider
/// ([`super::instrument`]): every crypto call, the ticketer's included, is timed.
pub fn instrumented_configs(shape: &Shape, pki: &TestPki) -> Result<Pair, CryptoError> {
    build_configs(shape, pki, true)
}

fn build_configs(shape: &Shape, pki: &TestPki, instrumented: bool) -> Result<Pair, CryptoError> {
    let wanted = shape.group.group(shape.provider).ok_or_else(|| {
        CryptoError::Nothing(format!("{} is not in {}", shape.group, shape.provider))
    })?;
    let mut provider = if instrumented {
        (*super::instrument::provider(shape.provider)).clone()
    } else {
        (*shape.provider.crypto_provider()).clone()
    };
    let group = provider
        .kx_groups
        .iter()
        .find(|g| g.name() == wanted.name())
        .copied()
        .ok_or_else(|| {
            CryptoError::Nothing(format!("{} is not in {}", shape.group, shape.provider))
        })?;
    provider.kx_groups = vec![group];
    provider.cipher_suites.retain(|s| {
        matches!(
            s.suite(),
            CipherSuite::TLS13_AES_128_GCM_SHA256
                | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    });
    let provider = Arc::new(provider);
    let versions: &[&'static rustls::SupportedProtocolVersion] = &[shape.tls.rustls()];

    let mut roots = RootCertStore::empty();
    roots
        .add(pki.root.der.clone())
        .map_err(|e| tls_err(shape, "trusting the test root", e))?;
    let mut client = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| tls_err(shape, "client config", e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.resumption = match shape.kind {
        FullOrResumed::Full => Resumption::disabled(),
        FullOrResumed::Resumed => Resumption::in_memory_sessions(128),
    };

    let mut server = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| tls_err(shape, "server config", e))?
        .with_no_client_auth()
        .with_single_cert(pki.server_chain(), pki.server.private_key_der())
        .map_err(|e| tls_err(shape, "server certificate", e))?;
    match shape.kind {
        FullOrResumed::Full => server.session_storage = Arc::new(NoServerSessionStorage {}),
        FullOrResumed::Resumed => {
            let ticketer = match shape.provider {
                Provider::AwsLcRs => rustls::crypto::aws_lc_rs::Ticketer::new(),
                Provider::Ring => rustls::crypto::ring::Ticketer::new(),
            }
            .map_err(|e| tls_err(shape, "ticketer", e))?;
            server.ticketer = if instrumented {
                super::instrument::ticketer(ticketer)
            } else {
                ticketer
            };
        }
    }
    let name = ServerName::try_from("localhost").map_err(|e| tls_err(shape, "server name", e))?;
    Ok(Pair {
        client: Arc::new(client),
        server: Arc::new(server),
        name,
        kind: shape.kind,
    })
}

/// Moves everything `from` has to write into `to` and lets `to` process it.
fn transfer<L, LS, R, RS>(from: &mut L, to: &mut R, buf: &mut Vec<u8>) -> Result<(), rustls::Error>
where
    L: DerefMut + Deref<Target = ConnectionCommon<LS>>,
    R: DerefMut + Deref<Target = ConnectionCommon<RS>>,
    LS: SideData,
    RS: SideData,
{
    buf.clear();
    while from.wants_write() {
        // Writing into a Vec cannot fail.
        if from.write_tls(buf).is_err() {
            break;
        }
    }
    let mut rd = &buf[..];
    while !rd.is_empty() {
        match to.read_tls(&mut rd) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                to.process_new_packets()?;
            }
        }
    }
    Ok(())
}

/// Runs one handshake, charging client time to `parts[0]` and server time to
/// `parts[1]` when it has the expected kind. Returns whether it had.
pub fn handshake(
    pair: &Pair,
    buf: &mut Vec<u8>,
    parts: &mut [Duration; 2],
) -> Result<bool, rustls::Error> {
    Ok(handshake_inner(pair, buf, parts, None)?.0)
}

/// [`handshake`] on a pair from [`instrumented_configs`], also adding each side's crypto
/// time ([`instrument::take`] where the side's work ends) to `tallies` when the
/// handshake counts.
pub fn handshake_tallied(
    pair: &Pair,
    buf: &mut Vec<u8>,
    parts: &mut [Duration; 2],
    tallies: &mut [Tally; 2],
) -> Result<bool, rustls::Error> {
    Ok(handshake_inner(pair, buf, parts, Some(tallies))?.0)
}

fn handshake_inner(
    pair: &Pair,
    buf: &mut Vec<u8>,
    parts: &mut [Duration; 2],
    tallies: Option<&mut [Tally; 2]>,
) -> Result<(bool, Negotiated), rustls::Error> {
    let (mut c, mut s) = (Duration::ZERO, Duration::ZERO);
    let mut sides = [Tally::default(); 2];
    // Called where one side's work ends: what the crypto did since goes to that side.
    let mut charge = |side: usize| {
        if tallies.is_some() {
            sides[side].add(&instrument::take());
        }
    };
    if tallies.is_some() {
        instrument::take();
    }
    let t = ThreadCpu::now();
    let mut client = ClientConnection::new(pair.client.clone(), pair.name.clone())?;
    c += t.elapsed();
    charge(0);
    let t = ThreadCpu::now();
    let mut server = ServerConnection::new(pair.server.clone())?;
    s += t.elapsed();
    charge(1);
    for _ in 0..2 {
        let t = ThreadCpu::now();
        transfer(&mut client, &mut server, buf)?;
        s += t.elapsed();
        charge(1);
        let t = ThreadCpu::now();
        transfer(&mut server, &mut client, buf)?;
        c += t.elapsed();
        charge(0);
    }
    if client.is_handshaking() || server.is_handshaking() {
        return Err(rustls::Error::General(
            "the handshake did not finish in two round trips".into(),
        ));
    }
    let want = Some(pair.kind.rustls());
    let counted = client.handshake_kind() == want && server.handshake_kind() == want;
    if counted {
        parts[0] += c;
        parts[1] += s;
        if let Some(t) = tallies {
            t[0].add(&sides[0]);
            t[1].add(&sides[1]);
        }
    }
    let negotiated = Negotiated::of(&client);
    Ok((counted, negotiated))
}

/// One flight of a connection: what one side writes before it must wait for the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flight {
    /// Written by the client (else by the server).
    pub from_client: bool,
    /// The bytes on the wire, TLS records as rustls wrote them.
    pub bytes: Vec<u8>,
}

/// The flights of one connection of `pair`'s kind, in memory: the handshake, then
/// `request` from the client (in the same flight as its last handshake message when it
/// has one, as a client that writes its request as soon as it may), then `response` and
/// the server's `close_notify`. Lets a bench replay a real connection's byte pattern
/// without any of its crypto (`examples/flight_floor.rs`). For a resumed kind the pair
/// runs full handshakes first until one resumes (at most three).
pub fn flights(pair: &Pair, request: &[u8], response: &[u8]) -> Result<Vec<Flight>, rustls::Error> {
    use std::io::Write;
    // Writing plaintext into a connection in memory fails only if rustls refuses it.
    let io = |e: std::io::Error| rustls::Error::General(e.to_string());
    // A transfer's bytes as a flight when there were any; whether there were.
    let keep = |out: &mut Vec<Flight>, from_client: bool, bytes: Vec<u8>| {
        let wrote = !bytes.is_empty();
        if wrote {
            out.push(Flight { from_client, bytes });
        }
        wrote
    };
    for _ in 0..3 {
        let mut client = ClientConnection::new(pair.client.clone(), pair.name.clone())?;
        let mut server = ServerConnection::new(pair.server.clone())?;
        let mut out = Vec::new();
        let mut request_sent = false;
        let mut response_sent = false;
        let mut got = Vec::new();
        // Alternate until neither side has anything left to write.
        for _ in 0..8 {
            if !client.is_handshaking() && !request_sent {
                client.writer().write_all(request).map_err(io)?;
                request_sent = true;
            }
            let mut buf = Vec::new();
            transfer(&mut client, &mut server, &mut buf)?;
            let client_wrote = keep(&mut out, true, buf);
            if request_sent && !response_sent && !server.is_handshaking() {
                // Ends with WouldBlock once the plaintext so far is read; what was read stays.
                let _ = std::io::Read::read_to_end(&mut server.reader(), &mut got);
                if got.len() >= request.len() {
                    server.writer().write_all(response).map_err(io)?;
                    server.send_close_notify();
                    response_sent = true;
                }
            }
            let mut buf = Vec::new();
            transfer(&mut server, &mut client, &mut buf)?;
            let server_wrote = keep(&mut out, false, buf);
            if response_sent && !client_wrote && !server_wrote {
                break;
            }
        }
        if !response_sent {
            return Err(rustls::Error::General(
                "the connection did not reach its response".into(),
            ));
        }
        if client.handshake_kind() == Some(pair.kind.rustls()) {
            return Ok(out);
        }
    }
    Err(rustls::Error::General(format!(
        "no {} handshake in three attempts",
        pair.kind.name()
    )))
}

/// What `crypto handshake` measures.
#[derive(Debug, Clone)]
pub struct HandshakeOptions {
    /// Providers.
    pub providers: Vec<Provider>,
    /// Protocol versions.
    pub versions: Vec<TlsVersion>,
    /// Certificate (chain) key types.
    pub certs: Vec<KeyType>,
    /// Full and/or resumed.
    pub kinds: Vec<FullOrResumed>,
    /// The group.
    pub group: KxGroup,
    /// Time and rounds per row.
    pub measure: MeasureOptions,
}

impl crate::doc::Document for HandshakeReport {
    const SCHEMA: &'static str = "tlsperf-crypto-handshake/1";
    const NAME: &'static str = "tlsperf crypto handshake result";
}

/// The result of `crypto handshake`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct HandshakeReport {
    /// `tlsperf-crypto-handshake/1`.
    pub schema: String,
    /// Timed seconds per row.
    pub seconds: f64,
    /// Rounds per row.
    pub rounds: u32,
    /// Whether allocations were counted.
    pub allocations_counted: bool,
    /// One row per provider, version, certificate type and kind.
    pub rows: Vec<HandshakeRow>,
}

/// One measured configuration.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct HandshakeRow {
    /// The provider.
    pub provider: Provider,
    /// The protocol version.
    pub tls: TlsVersion,
    /// The certificate chain's key type.
    pub cert: KeyType,
    /// Full or resumed.
    pub kind: FullOrResumed,
    /// What the handshakes negotiated.
    pub negotiated: Negotiated,
    /// Client side: ns per handshake, handshakes/s (`bytes_per_op` is null: see
    /// `bytes_per_handshake`).
    pub client: Measurement,
    /// Server side.
    pub server: Measurement,
    /// Bytes allocated per handshake, both sides together (warm-up).
    pub bytes_per_handshake: Option<f64>,
    /// Allocation calls per handshake, both sides together (warm-up).
    pub allocs_per_handshake: Option<f64>,
}

/// Measures one shape with a given PKI.
pub fn measure_shape(
    shape: &Shape,
    pki: &TestPki,
    opts: &MeasureOptions,
) -> Result<HandshakeRow, CryptoError> {
    let pair = configs(shape, pki)?;
    let mut buf = Vec::with_capacity(16 * 1024);
    // One checked handshake first: it must complete, and it primes the ticket store.
    let mut scratch = [Duration::ZERO; 2];
    let (_, mut negotiated) = handshake_inner(&pair, &mut buf, &mut scratch, None)
        .map_err(|e| tls_err(shape, "handshake", e))?;
    let [mut client, mut server] = measure_parts(
        opts,
        |parts| handshake(&pair, &mut buf, parts).map_err(|e| tls_err(shape, "handshake", e)),
        || {
            tls_err(
                shape,
                "handshake kind",
                format!(
                    "{} handshakes in a row were not {}",
                    super::measure::MAX_UNCOUNTED,
                    shape.kind.name()
                ),
            )
        },
    )?;
    // What a counted handshake negotiated (the first one above may have been full).
    if shape.kind == FullOrResumed::Resumed {
        let (counted, n) = handshake_inner(&pair, &mut buf, &mut scratch, None)
            .map_err(|e| tls_err(shape, "handshake", e))?;
        if counted {
            negotiated = n;
        }
    }
    let bytes = client.bytes_per_op.take();
    let allocs = client.allocs_per_op.take();
    server.bytes_per_op = None;
    server.allocs_per_op = None;
    Ok(HandshakeRow {
        provider: shape.provider,
        tls: shape.tls,
        cert: shape.cert,
        kind: shape.kind,
        negotiated,
        client,
        server,
        bytes_per_handshake: bytes,
        allocs_per_handshake: allocs,
    })
}

/// Runs `crypto handshake`.
pub fn run(opts: &HandshakeOptions) -> Result<HandshakeReport, CryptoError> {
    if opts.providers.is_empty()
        || opts.versions.is_empty()
        || opts.certs.is_empty()
        || opts.kinds.is_empty()
    {
        return Err(CryptoError::Nothing("an empty selection".into()));
    }
    for &p in &opts.providers {
        if opts.group.group(p).is_none() {
            return Err(CryptoError::Nothing(format!(
                "{} is not in {p}",
                opts.group
            )));
        }
    }
    let mut rows = Vec::new();
    for &cert in &opts.certs {
        tracing::info!("generating a {cert} test PKI");
        let pki = pki(cert)?;
        for &provider in &opts.providers {
            for &tls in &opts.versions {
                for &kind in &opts.kinds {
                    let shape = Shape {
                        provider,
                        tls,
                        cert,
                        kind,
                        group: opts.group,
                    };
                    tracing::info!("{provider} {tls} {cert} {}", kind.name());
                    rows.push(measure_shape(&shape, &pki, &opts.measure)?);
                }
            }
        }
    }
    Ok(HandshakeReport {
        schema: <HandshakeReport as crate::doc::Document>::SCHEMA.into(),
        seconds: opts.measure.seconds(),
        rounds: opts.measure.rounds(),
        allocations_counted: super::alloc::installed(),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flights of each shape alternate from the client, in the number of round trips
    /// of that shape (the request rides with the client's last handshake flight when it
    /// may), and the server's last one holds the response and its `close_notify`.
    #[test]
    fn flights_follow_each_shapes_round_trips() {
        let pki = pki(KeyType::EcdsaP256).unwrap();
        let (request, response) = (b"GET / HTTP/1.1\r\n\r\n".as_slice(), [b'x'; 300]);
        for (tls, kind, want) in [
            (TlsVersion::V1_3, FullOrResumed::Full, 4),
            (TlsVersion::V1_3, FullOrResumed::Resumed, 4),
            (TlsVersion::V1_2, FullOrResumed::Full, 6),
            (TlsVersion::V1_2, FullOrResumed::Resumed, 4),
        ] {
            let shape = Shape {
                provider: Provider::AwsLcRs,
                tls,
                cert: KeyType::EcdsaP256,
                kind,
                group: KxGroup::X25519,
            };
            let pair = configs(&shape, &pki).unwrap();
            let f = flights(&pair, request, &response).unwrap();
            assert_eq!(f.len(), want, "{shape:?}");
            for (i, flight) in f.iter().enumerate() {
                assert_eq!(flight.from_client, i % 2 == 0, "{shape:?} flight {i}");
                assert!(!flight.bytes.is_empty());
            }
            // 300 bytes of response, a record header and tag, and a close_notify record.
            assert!(
                f[want - 1].bytes.len() >= 300 + 5 + 16 + 5 + 2 + 16,
                "{shape:?}"
            );
            // A full handshake's server flight carries the certificate chain.
            if kind == FullOrResumed::Full {
                assert!(f[1].bytes.len() > 800, "{shape:?}: {}", f[1].bytes.len());
            } else {
                assert!(f[1].bytes.len() < 800, "{shape:?}: {}", f[1].bytes.len());
            }
        }
    }

    #[test]
    fn every_shape_completes_with_the_expected_kind() {
        let pki = pki(KeyType::EcdsaP256).unwrap();
        let mut buf = Vec::new();
        for provider in Provider::ALL {
            for tls in TlsVersion::ALL {
                for kind in FullOrResumed::ALL {
                    let shape = Shape {
                        provider,
                        tls,
                        cert: KeyType::EcdsaP256,
                        kind,
                        group: KxGroup::X25519,
                    };
                    let pair = configs(&shape, &pki).unwrap();
                    let mut parts = [Duration::ZERO; 2];
                    // The first resumption attempt is full (no ticket yet).
                    handshake(&pair, &mut buf, &mut parts).unwrap();
                    let (counted, n) = handshake_inner(&pair, &mut buf, &mut parts, None).unwrap();
                    assert!(counted, "{shape:?}");
                    assert!(parts[0] > Duration::ZERO && parts[1] > Duration::ZERO);
                    let suite = match tls {
                        TlsVersion::V1_3 => "TLS13_AES_128_GCM_SHA256",
                        TlsVersion::V1_2 => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                    };
                    assert_eq!(n.cipher_suite, suite);
                }
            }
        }
    }
}
