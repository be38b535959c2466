//! The indexed verifier accepts and rejects exactly as rustls's `WebPkiServerVerifier` does
//! with the whole store, on good, broken and hostile chains.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

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
    let t = Instant::now();
    let a = default.verify_server_cert(&chain[0], &chain[1..], &name, &[], now);
    let b = indexed.verify_server_cert(&chain[0], &chain[1..], &name, &[], now);
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "verification not bounded"
    );
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
    let t = Instant::now();
    let r = agree(&store_none, &chain, "localhost", now());
    assert!(r.is_err());
    assert!(t.elapsed() < Duration::from_secs(20));
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
        !bad.valid && bad.reason.as_deref().unwrap().contains("UnknownIssuer"),
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
