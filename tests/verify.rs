//! The indexed verifier accepts and rejects exactly as rustls's `WebPkiServerVerifier` does
//! with the whole store, on good, broken and hostile chains.

#![allow(clippy::unwrap_used)] // tests unwrap: a panic is the failure report

mod common;

use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tlsperf::pki::{BundleOptions, KeyType, PkiOptions, TestPki, generate_bundle};
use tlsperf::tls::Provider;
use tlsperf::trust::TrustStore;
use tlsperf::verify::IndexedVerifier;

fn store_of(pems: &[&str]) -> TrustStore {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.pem");
    std::fs::write(&path, pems.concat()).unwrap();
    TrustStore::from_pem_file(&path).unwrap()
}

fn filler(n: usize, twins: usize) -> String {
    generate_bundle(&BundleOptions {
        count: n,
        cross_signed: twins,
        key: KeyType::EcdsaP256,
        key_pool: Some(16),
        days: 30,
    })
    .unwrap()
    .pem
}

/// Runs both verifiers and insists they agree, returning the verdict.
fn agree(
    store: &TrustStore,
    chain: &[CertificateDer<'static>],
    name: &str,
    now: UnixTime,
) -> Result<(), String> {
    let default = WebPkiServerVerifier::builder_with_provider(
        store.root_cert_store(),
        Provider::AwsLcRs.crypto_provider(),
    )
    .build()
    .unwrap();
    let indexed = IndexedVerifier::new(store, Provider::AwsLcRs);
    let name = ServerName::try_from(name.to_string()).unwrap();
    // No clock here: both verifiers bound their work by counting (webpki's budget; the
    // indexed verifier's `budget_exhausted`, checked where it matters).
    let a = default.verify_server_cert(&chain[0], &chain[1..], &name, &[], now);
    let b = indexed.verify_server_cert(&chain[0], &chain[1..], &name, &[], now);
    let fmt = |r: &Result<_, rustls::Error>| match r {
        Ok(_) => "Ok".to_string(),
        Err(e) => format!("{e:?}"),
    };
    assert_eq!(fmt(&a), fmt(&b), "indexed and default verifiers disagree");
    let detailed = indexed.verify_detailed(&chain[0], &chain[1..], &name, now);
    assert_eq!(detailed.valid, a.is_ok(), "detailed verdict: {detailed:?}");
    a.map(|_| ()).map_err(|e| format!("{e}"))
}

fn now() -> UnixTime {
    UnixTime::now()
}

fn later(days: u64) -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(now().as_secs() + days * 86400))
}

#[test]
fn agrees_on_ordinary_chains() {
    let pki = TestPki::generate(&PkiOptions::default()).unwrap();
    let other = TestPki::generate(&PkiOptions::default()).unwrap();
    let big = filler(300, 30);
    let store = store_of(&[&big, &pki.root.pem, &other.root.pem]);
    let chain = pki.server_chain();
    assert_eq!(agree(&store, &chain, "localhost", now()), Ok(()));
    assert_eq!(agree(&store, &chain, "127.0.0.1", now()), Ok(()));
    assert!(
        agree(&store, &chain, "example.com", now()).is_err(),
        "wrong name"
    );
    assert!(
        agree(&store, &chain, "localhost", later(400)).is_err(),
        "expired"
    );
    assert!(
        agree(
            &store,
            std::slice::from_ref(&pki.server.der),
            "localhost",
            now()
        )
        .is_err(),
        "missing intermediate"
    );
    assert!(
        agree(&store, &pki.client_chain(), "localhost", now()).is_err(),
        "client leaf as server"
    );
    let reversed = vec![pki.intermediate.der.clone(), pki.server.der.clone()];
    assert!(
        agree(&store, &reversed, "localhost", now()).is_err(),
        "wrong order"
    );
    let dup = vec![
        pki.server.der.clone(),
        pki.intermediate.der.clone(),
        pki.intermediate.der.clone(),
        pki.server.der.clone(),
    ];
    assert_eq!(
        agree(&store, &dup, "localhost", now()),
        Ok(()),
        "duplicates"
    );
    let with_root = vec![
        pki.server.der.clone(),
        pki.intermediate.der.clone(),
        pki.root.der.clone(),
    ];
    assert_eq!(agree(&store, &with_root, "localhost", now()), Ok(()));
    // Not trusted at all.
    let untrusted = store_of(&[&big, &other.root.pem]);
    assert!(agree(&untrusted, &chain, "localhost", now()).is_err());
    // Every key type.
    for key in KeyType::ALL {
        let p = TestPki::generate(&PkiOptions {
            ca_key: key,
            leaf_key: key,
            ..Default::default()
        })
        .unwrap();
        let s = store_of(&[&big, &p.root.pem]);
        assert_eq!(
            agree(&s, &p.server_chain(), "localhost", now()),
            Ok(()),
            "{key}"
        );
    }
}

/// A CA certificate named `cn`, with `key`, issued by `issuer` (self-signed when None).
fn ca(
    cn: &str,
    key: &KeyPair,
    issuer: Option<(&CertificateParams, &KeyPair)>,
) -> (CertificateParams, CertificateDer<'static>) {
    let mut params = CertificateParams::default();
    params.distinguished_name.remove(DnType::CommonName);
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.use_authority_key_identifier_extension = issuer.is_some();
    let cert = match issuer {
        None => params.self_signed(key).unwrap(),
        Some((ip, ik)) => params.signed_by(key, &Issuer::from_params(ip, ik)).unwrap(),
    };
    (params, cert.der().clone())
}

fn leaf(issuer: (&CertificateParams, &KeyPair)) -> CertificateDer<'static> {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params
        .signed_by(&key, &Issuer::from_params(issuer.0, issuer.1))
        .unwrap()
        .der()
        .clone()
}

fn pem(der: &CertificateDer<'_>) -> String {
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der.as_ref());
    let body: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        body.join("\n")
    )
}

#[test]
fn agrees_on_cross_signed_twins_loops_and_huge_chains() {
    let ka = KeyPair::generate().unwrap();
    let kb = KeyPair::generate().unwrap();
    let (pa, root_a) = ca("Root A", &ka, None);
    let (pb, root_b) = ca("Root B", &kb, None);
    // Twins: A cross-signed by B, B cross-signed by A (a loop).
    let (_, a_by_b) = ca("Root A", &ka, Some((&pb, &kb)));
    let (_, b_by_a) = ca("Root B", &kb, Some((&pa, &ka)));
    let ee = leaf((&pa, &ka));
    let big = filler(200, 20);

    // Trusting only B: the leaf reaches B through the cross-signed A.
    let store_b = store_of(&[&big, &pem(&root_b)]);
    let chain = vec![ee.clone(), a_by_b.clone(), b_by_a.clone()];
    assert_eq!(agree(&store_b, &chain, "localhost", now()), Ok(()));
    // Trusting both, with twins in the store too.
    let store_ab = store_of(&[
        &big,
        &pem(&root_a),
        &pem(&a_by_b),
        &pem(&root_b),
        &pem(&b_by_a),
    ]);
    assert_eq!(agree(&store_ab, &chain, "localhost", now()), Ok(()));
    // Trusting neither: the loop must end in bounded time.
    let store_none = store_of(&[&big]);
    assert!(agree(&store_none, &chain, "localhost", now()).is_err());

    // A 1,000-certificate chain of CAs sharing three names: every name matches hundreds of
    // candidates, so path building would explode without webpki's budget.
    let mut cas = Vec::new();
    let mut prev = (pa.clone(), ka);
    for i in 0..1000 {
        let k = KeyPair::generate().unwrap();
        let (p, der) = ca(&format!("Loop CA {}", i % 3), &k, Some((&prev.0, &prev.1)));
        cas.push(der);
        prev = (p, k);
    }
    let mut chain = vec![leaf((&prev.0, &prev.1))];
    chain.extend(cas.into_iter().rev());
    // Bounded work is checked by counting, not by the clock (the machine may be busy):
    // our verifier's report below must say its budget ran out after few signature checks.
    let r = agree(&store_none, &chain, "localhost", now());
    assert!(r.is_err());
    let v = IndexedVerifier::new(&store_none, Provider::AwsLcRs);
    let report = v.verify_detailed(
        &chain[0],
        &chain[1..],
        &ServerName::try_from("localhost").unwrap(),
        now(),
    );
    assert!(report.budget_exhausted, "{report:?}");
    assert!(report.signature_checks <= 100, "{report:?}");
    assert!(report.reason.unwrap().contains("budget"));
    let _ = root_a;
}

#[test]
fn detailed_report() {
    let pki = TestPki::generate(&PkiOptions::default()).unwrap();
    let store = store_of(&[&filler(1000, 100), &pki.root.pem]);
    let v = IndexedVerifier::new(&store, Provider::Ring);
    let name = ServerName::try_from("localhost").unwrap();
    let chain = pki.server_chain();
    let r = v.verify_detailed(&chain[0], &chain[1..], &name, now());
    assert!(r.valid, "{r:?}");
    assert_eq!(r.anchors_in_store, 1101);
    assert_eq!(r.candidate_anchors, 1);
    assert_eq!(r.candidates_by_key_id, 1);
    assert_eq!(r.signature_checks, 2);
    assert_eq!(r.path.len(), 3);
    assert_eq!(r.path[0], "localhost");
    assert!(
        r.path[2].starts_with("tlsperf Test Root CA") && r.path[2].ends_with("(trust anchor)"),
        "{r:?}"
    );
    assert!(r.total_ns >= r.signatures_ns);
    let bad = v.verify_detailed(&chain[0], &[], &name, now());
    assert!(
        !bad.valid
            && bad.reason_code == Some("unknown_issuer")
            && bad.reason.as_deref().unwrap().contains("unknown issuer"),
        "{bad:?}"
    );
    let wrong = v.verify_detailed(
        &chain[0],
        &chain[1..],
        &ServerName::try_from("nope.test").unwrap(),
        now(),
    );
    assert!(!wrong.valid && wrong.path.len() == 3, "{wrong:?}");
    // Usable as the verifier of a rustls client config.
    let config = rustls::ClientConfig::builder_with_provider(Provider::Ring.crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(v))
        .with_no_client_auth();
    assert!(!config.alpn_protocols.iter().any(|_| true));
}

struct Real {
    chain: &'static str,
    host: &'static str,
    at: &'static str,
    root: &'static str,
    valid: bool,
}

const REAL: &[Real] = &[
    Real {
        chain: "netflix-chain.pem",
        host: "netflix.com",
        at: "2017-04-17T15:08:36Z",
        root: "netflix-root.pem",
        valid: true,
    },
    Real {
        chain: "cloudflare-dns-chain.pem",
        host: "cloudflare-dns.com",
        at: "2022-09-18T10:09:31Z",
        root: "cloudflare-dns-root.pem",
        valid: true,
    },
    Real {
        chain: "cloudflare-dns-chain.pem",
        host: "1.1.1.1",
        at: "2022-09-18T10:09:31Z",
        root: "cloudflare-dns-root.pem",
        valid: true,
    },
    Real {
        chain: "amazon-valid-rootca1-chain.pem",
        host: "valid.rootca1.demo.amazontrust.com",
        at: "2025-02-23T10:02:16Z",
        root: "amazon-roots.pem",
        valid: true,
    },
    Real {
        chain: "amazon-valid-rootca2-chain.pem",
        host: "valid.rootca2.demo.amazontrust.com",
        at: "2025-02-23T10:02:16Z",
        root: "amazon-roots.pem",
        valid: true,
    },
    Real {
        chain: "amazon-valid-rootca3-chain.pem",
        host: "valid.rootca3.demo.amazontrust.com",
        at: "2025-02-23T10:02:16Z",
        root: "amazon-roots.pem",
        valid: true,
    },
    Real {
        chain: "amazon-valid-rootca4-chain.pem",
        host: "valid.rootca4.demo.amazontrust.com",
        at: "2025-02-23T10:02:16Z",
        root: "amazon-roots.pem",
        valid: true,
    },
    Real {
        chain: "amazon-expired-rootca1-chain.pem",
        host: "expired.rootca1.demo.amazontrust.com",
        at: "2025-02-23T10:02:16Z",
        root: "amazon-roots.pem",
        valid: false,
    },
    // A real chain at a time it was not valid, and for a name it does not have.
    Real {
        chain: "netflix-chain.pem",
        host: "netflix.com",
        at: "2030-01-01T00:00:00Z",
        root: "netflix-root.pem",
        valid: false,
    },
    Real {
        chain: "netflix-chain.pem",
        host: "example.com",
        at: "2017-04-17T15:08:36Z",
        root: "netflix-root.pem",
        valid: false,
    },
];

fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real-chains")
        .join(name)
}

#[test]
fn real_public_chains_against_a_bundle_and_a_trimmed_one() {
    let roots: String = [
        "netflix-root.pem",
        "cloudflare-dns-root.pem",
        "amazon-roots.pem",
    ]
    .iter()
    .map(|f| std::fs::read_to_string(data(f)).unwrap())
    .collect();
    let bundle = store_of(&[&filler(500, 50), &roots]);
    for r in REAL {
        let chain = tlsperf::trust::trim::chain_from_file(&data(r.chain))
            .unwrap()
            .certs;
        let at = tlsperf::when::to_unix_time(tlsperf::when::parse_rfc3339(r.at).unwrap());
        let verdict = agree(&bundle, &chain, r.host, at);
        assert_eq!(
            verdict.is_ok(),
            r.valid,
            "{} for {} at {}: {verdict:?}",
            r.chain,
            r.host,
            r.at
        );
        // Trimmed to the anchor file the chain needs, through the CLI as a user would.
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("bundle.pem");
        std::fs::write(&src, [filler(50, 5), roots.clone()].concat()).unwrap();
        let out = dir.path().join("trimmed.pem");
        let run = common::tlsperf([
            "trust",
            "trim",
            "--source",
            src.to_str().unwrap(),
            "--keep-for",
            data(r.chain).to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--at",
            r.at,
            "--json",
        ]);
        if r.valid || r.host == "example.com" {
            assert_eq!(run.code, 0, "{}: {}", r.chain, run.stderr);
            let trimmed = TrustStore::from_pem_file(&out).unwrap();
            assert_eq!(trimmed.len(), 1, "{}", r.chain);
            let expected_root = TrustStore::from_pem_file(&data(r.root)).unwrap();
            assert!(
                expected_root.certs().contains(&trimmed.certs()[0]),
                "{}: kept the wrong anchor",
                r.chain
            );
            assert_eq!(
                agree(&trimmed, &chain, r.host, at).is_ok(),
                r.valid,
                "{} trimmed",
                r.chain
            );
        } else {
            assert_eq!(
                run.code, 2,
                "{}: trim must refuse an invalid chain: {}",
                r.chain, run.stderr
            );
            assert!(!out.exists());
        }
        // The CLI verdict and exit code.
        let run = common::tlsperf([
            "verify",
            "--chain",
            data(r.chain).to_str().unwrap(),
            "--host",
            r.host,
            "--roots",
            src.to_str().unwrap(),
            "--at",
            r.at,
        ]);
        assert_eq!(
            run.code,
            if r.valid { 0 } else { 1 },
            "{}: {}{}",
            r.chain,
            run.stdout,
            run.stderr
        );
        assert!(
            run.stdout
                .contains(if r.valid { "VALID" } else { "INVALID" }),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn indexed_verifier_in_a_real_handshake() {
    use std::io::{Read, Write};
    let pki = TestPki::generate(&PkiOptions::default()).unwrap();
    let other = TestPki::generate(&PkiOptions::default()).unwrap();
    let port = common::spawn_tls_server(pki.server_chain(), pki.server.private_key_der(), 2);
    let handshake = |store: &TrustStore| -> Result<(), String> {
        let config =
            rustls::ClientConfig::builder_with_provider(Provider::AwsLcRs.crypto_provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(IndexedVerifier::new(
                    store,
                    Provider::AwsLcRs,
                )))
                .with_no_client_auth();
        let mut conn = rustls::ClientConnection::new(
            Arc::new(config),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
        }
        conn.send_close_notify();
        let _ = conn.complete_io(&mut tcp);
        let _ = tcp.flush();
        let _ = tcp.read(&mut [0u8; 1]);
        Ok(())
    };
    let good = store_of(&[&filler(100, 10), &pki.root.pem]);
    assert_eq!(handshake(&good), Ok(()));
    let bad = store_of(&[&filler(100, 10), &other.root.pem]);
    let err = handshake(&bad).unwrap_err();
    assert!(
        err.contains("UnknownIssuer") || err.contains("invalid peer certificate"),
        "{err}"
    );
}

/// A non-critical extension with arbitrary content (rcgen wraps it in the OCTET STRING).
fn ext(oid: &[u64], content: Vec<u8>) -> rcgen::CustomExtension {
    rcgen::CustomExtension::from_oid_content(oid, content)
}

const OID_SKI: &[u64] = &[2, 5, 29, 14];
const OID_AKI: &[u64] = &[2, 5, 29, 35];

/// A leaf for localhost issued by `issuer`, with `exts` and no authority key identifier of
/// rcgen's own.
fn leaf_with(
    issuer: (&CertificateParams, &KeyPair),
    exts: Vec<rcgen::CustomExtension>,
) -> CertificateDer<'static> {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    params.custom_extensions = exts;
    params
        .signed_by(&key, &Issuer::from_params(issuer.0, issuer.1))
        .unwrap()
        .der()
        .clone()
}

/// Key identifiers webpki ignores (non-critical, of the wrong ASN.1 type) must not hide a
/// certificate from the index: a leaf directly under a root and an intermediate.
#[test]
fn agrees_when_key_identifiers_are_malformed() {
    let kr = KeyPair::generate().unwrap();
    let (pr, root) = ca("Odd Root", &kr, None);
    let store = store_of(&[&filler(100, 10), &pem(&root)]);
    let integer_ski = ext(OID_SKI, vec![0x02, 0x01, 0x05]);
    let octets_aki = ext(OID_AKI, vec![0x04, 0x04, 1, 2, 3, 4]);

    let ee = leaf_with((&pr, &kr), vec![integer_ski.clone()]);
    assert_eq!(
        agree(&store, &[ee], "localhost", now()),
        Ok(()),
        "leaf: INTEGER SKI"
    );
    let ee = leaf_with((&pr, &kr), vec![octets_aki.clone()]);
    assert_eq!(
        agree(&store, &[ee], "localhost", now()),
        Ok(()),
        "leaf: OCTET STRING AKI"
    );
    let ee = leaf_with((&pr, &kr), vec![integer_ski.clone(), octets_aki.clone()]);
    assert_eq!(
        agree(&store, &[ee], "localhost", now()),
        Ok(()),
        "leaf: both"
    );

    // An intermediate whose authority key identifier is an OCTET STRING.
    let ki = KeyPair::generate().unwrap();
    let mut pi = CertificateParams::default();
    pi.distinguished_name
        .push(DnType::CommonName, "Odd Intermediate");
    pi.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    pi.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    pi.custom_extensions = vec![octets_aki];
    let int = pi
        .signed_by(&ki, &Issuer::from_params(&pr, &kr))
        .unwrap()
        .der()
        .clone();
    let ee = leaf((&pi, &ki));
    assert_eq!(
        agree(&store, &[ee, int], "localhost", now()),
        Ok(()),
        "intermediate: OCTET STRING AKI"
    );
}

/// DER: a length header for `len` content octets.
fn der_len(len: usize) -> Vec<u8> {
    match len {
        0..=0x7f => vec![len as u8],
        0x80..=0xff => vec![0x81, len as u8],
        _ => vec![0x82, (len >> 8) as u8, len as u8],
    }
}

fn der_tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut v = vec![tag];
    v.extend(der_len(content.len()));
    v.extend_from_slice(content);
    v
}

/// The TBSCertificate of `der` (its first element, header included).
fn tbs_of(der: &[u8]) -> Vec<u8> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.tbs_certificate.as_ref().to_vec()
}

/// Signs `tbs` with an ECDSA P-256 `key` and wraps it into a certificate.
fn resign(tbs: &[u8], key: &KeyPair) -> CertificateDer<'static> {
    use rcgen::SigningKey;
    // ecdsa-with-SHA256
    let alg = [
        0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02,
    ];
    let mut sig = vec![0u8];
    sig.extend(key.sign(tbs).unwrap());
    let mut body = tbs.to_vec();
    body.extend_from_slice(&alg);
    body.extend(der_tlv(0x03, &sig));
    CertificateDer::from(der_tlv(0x30, &body))
}

/// Fuzzes the DER reader behind the index against webpki: certificates with random
/// extensions (key identifier OIDs with random content) and randomly mutated TBS bytes,
/// re-signed so that only the mutation decides, must get the same verdict from the indexed
/// verifier as from `WebPkiServerVerifier`. `TLSPERF_FUZZ_ITERS` sets the executions
/// (default 400); the seed is printed so that a failure can be replayed with
/// `TLSPERF_FUZZ_SEED`.
#[test]
fn fuzz_der_reader_against_webpki() {
    use rand::{Rng, SeedableRng};
    let iters: usize = std::env::var("TLSPERF_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let seed: u64 = std::env::var("TLSPERF_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("fuzz_der_reader_against_webpki: seed {seed}, {iters} executions");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    let kr = KeyPair::generate().unwrap();
    let (pr, root) = ca("Fuzz Root", &kr, None);
    let ki = KeyPair::generate().unwrap();
    let (pi, int) = ca("Fuzz Intermediate", &ki, Some((&pr, &kr)));
    let store = store_of(&[&filler(50, 5), &pem(&root)]);
    let default = WebPkiServerVerifier::builder_with_provider(
        store.root_cert_store(),
        Provider::AwsLcRs.crypto_provider(),
    )
    .build()
    .unwrap();
    let indexed = IndexedVerifier::new(&store, Provider::AwsLcRs);
    let name = ServerName::try_from("localhost").unwrap();
    let fmt = |r: Result<_, rustls::Error>| match r {
        Ok(_) => "Ok".to_string(),
        Err(e) => format!("{e:?}"),
    };
    let int_tbs = tbs_of(&int);
    let oids: [&[u64]; 3] = [OID_SKI, OID_AKI, &[1, 3, 6, 1, 4, 1, 99999, 1]];
    let mut valid = 0;
    for i in 0..iters {
        // A leaf with up to three random extensions under the root or the intermediate.
        let under_root = rng.random_bool(0.5);
        let exts = (0..rng.random_range(0..=3))
            .map(|_| {
                let oid = oids[rng.random_range(0..oids.len())];
                let len = rng.random_range(0..24);
                let mut content: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                if rng.random_bool(0.5) && !content.is_empty() {
                    // Often a well-formed TLV of a random tag.
                    let tag = [0x02, 0x04, 0x30, 0x80, 0x05][rng.random_range(0..5)];
                    content = der_tlv(tag, &content);
                }
                let mut e = ext(oid, content);
                e.set_criticality(rng.random_bool(0.1));
                e
            })
            .collect();
        let issuer = if under_root { (&pr, &kr) } else { (&pi, &ki) };
        let ee = leaf_with(issuer, exts);
        // Then mutate a few bytes of the leaf's or the intermediate's TBS and re-sign it.
        let mut ee_tbs = tbs_of(&ee);
        let mut i_tbs = int_tbs.clone();
        let target = if under_root || rng.random_bool(0.5) {
            &mut ee_tbs
        } else {
            &mut i_tbs
        };
        for _ in 0..rng.random_range(0..3) {
            let at = rng.random_range(0..target.len());
            target[at] = rng.random();
        }
        let ee = resign(&ee_tbs, issuer.1);
        let chain: Vec<CertificateDer<'static>> = if under_root {
            vec![ee]
        } else {
            vec![ee, resign(&i_tbs, &kr)]
        };
        let a = fmt(default.verify_server_cert(&chain[0], &chain[1..], &name, &[], now()));
        let b = fmt(indexed.verify_server_cert(&chain[0], &chain[1..], &name, &[], now()));
        assert_eq!(
            a,
            b,
            "execution {i} (seed {seed}): verdicts differ for chain {:?}",
            chain.iter().map(pem).collect::<Vec<_>>()
        );
        valid += usize::from(a == "Ok");
    }
    eprintln!("{iters} executions, {valid} valid chains, all verdicts equal");
    assert!(
        valid > 0,
        "no valid chain was generated: the fuzzer tests nothing"
    );
}
