//! `tlsperf crypto sign`: sign and verify ops/s, ns/op and bytes allocated per operation
//! for ECDSA P-256/P-384, Ed25519 and RSA-2048/3072/4096 (PKCS#1 v1.5 and PSS, SHA-256)
//! with aws-lc-rs, ring and RustCrypto, each through its own signature API.
//!
//! - One key per key type, generated (by aws-lc-rs, through [`crate::pki::KeyType`])
//!   outside any timed loop and loaded into every implementation from the same PKCS#8
//!   document, so every implementation signs with the same key.
//! - The message has the size of a TLS 1.3 CertificateVerify input (64 spaces, the
//!   context string, a SHA-256 transcript hash: 130 bytes); every implementation hashes it.
//! - Signatures are DER for ECDSA (as TLS sends them), raw for Ed25519 and RSA.
//! - Verification parses the public key on every call, as TLS verifiers do.
//! - Before timing, a signature from each implementation is verified by every
//!   implementation of the algorithm, so the loop measures operations that work.

use std::fmt;

use serde::Serialize;

use super::measure::{MeasureOptions, Measurement, Op, measure_interleaved};
use super::{CryptoError, Implementation};
use crate::pki::KeyType;
use crate::tls::Provider;

/// A signature algorithm measured by `crypto sign`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, serde::Deserialize,
)]
pub enum SigAlg {
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
    /// RSA-2048, PKCS#1 v1.5 with SHA-256.
    #[value(name = "rsa-2048-pkcs1")]
    #[serde(rename = "rsa-2048-pkcs1")]
    Rsa2048Pkcs1,
    /// RSA-2048, PSS with SHA-256 (salt of 32 bytes).
    #[value(name = "rsa-2048-pss")]
    #[serde(rename = "rsa-2048-pss")]
    Rsa2048Pss,
    /// RSA-3072, PKCS#1 v1.5 with SHA-256.
    #[value(name = "rsa-3072-pkcs1")]
    #[serde(rename = "rsa-3072-pkcs1")]
    Rsa3072Pkcs1,
    /// RSA-3072, PSS with SHA-256.
    #[value(name = "rsa-3072-pss")]
    #[serde(rename = "rsa-3072-pss")]
    Rsa3072Pss,
    /// RSA-4096, PKCS#1 v1.5 with SHA-256.
    #[value(name = "rsa-4096-pkcs1")]
    #[serde(rename = "rsa-4096-pkcs1")]
    Rsa4096Pkcs1,
    /// RSA-4096, PSS with SHA-256.
    #[value(name = "rsa-4096-pss")]
    #[serde(rename = "rsa-4096-pss")]
    Rsa4096Pss,
}

impl SigAlg {
    /// Every algorithm, in a stable order.
    pub const ALL: [SigAlg; 9] = [
        SigAlg::EcdsaP256,
        SigAlg::EcdsaP384,
        SigAlg::Ed25519,
        SigAlg::Rsa2048Pkcs1,
        SigAlg::Rsa2048Pss,
        SigAlg::Rsa3072Pkcs1,
        SigAlg::Rsa3072Pss,
        SigAlg::Rsa4096Pkcs1,
        SigAlg::Rsa4096Pss,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            SigAlg::EcdsaP256 => "ecdsa-p256",
            SigAlg::EcdsaP384 => "ecdsa-p384",
            SigAlg::Ed25519 => "ed25519",
            SigAlg::Rsa2048Pkcs1 => "rsa-2048-pkcs1",
            SigAlg::Rsa2048Pss => "rsa-2048-pss",
            SigAlg::Rsa3072Pkcs1 => "rsa-3072-pkcs1",
            SigAlg::Rsa3072Pss => "rsa-3072-pss",
            SigAlg::Rsa4096Pkcs1 => "rsa-4096-pkcs1",
            SigAlg::Rsa4096Pss => "rsa-4096-pss",
        }
    }

    /// The key type this algorithm signs with.
    pub fn key_type(self) -> KeyType {
        match self {
            SigAlg::EcdsaP256 => KeyType::EcdsaP256,
            SigAlg::EcdsaP384 => KeyType::EcdsaP384,
            SigAlg::Ed25519 => KeyType::Ed25519,
            SigAlg::Rsa2048Pkcs1 | SigAlg::Rsa2048Pss => KeyType::Rsa2048,
            SigAlg::Rsa3072Pkcs1 | SigAlg::Rsa3072Pss => KeyType::Rsa3072,
            SigAlg::Rsa4096Pkcs1 | SigAlg::Rsa4096Pss => KeyType::Rsa4096,
        }
    }

    fn pss(self) -> bool {
        matches!(
            self,
            SigAlg::Rsa2048Pss | SigAlg::Rsa3072Pss | SigAlg::Rsa4096Pss
        )
    }

    /// The implementations that have this algorithm (all three have every one here).
    pub fn implementations(self) -> &'static [Implementation] {
        &Implementation::ALL
    }
}

impl fmt::Display for SigAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sign or verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignOp {
    /// Making a signature.
    Sign,
    /// Checking one (public key parsed on each call).
    Verify,
}

/// What `crypto sign` measures.
#[derive(Debug, Clone)]
pub struct SignOptions {
    /// Algorithms, in order.
    pub algs: Vec<SigAlg>,
    /// Implementations, in order.
    pub implementations: Vec<Implementation>,
    /// Time and rounds per row.
    pub measure: MeasureOptions,
}

impl crate::doc::Document for SignReport {
    const SCHEMA: &'static str = "tlsperf-crypto-sign/1";
    const NAME: &'static str = "tlsperf crypto sign result";
}

/// The result of `crypto sign`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SignReport {
    /// `tlsperf-crypto-sign/1`.
    pub schema: String,
    /// Timed seconds per row.
    pub seconds: f64,
    /// Rounds per row.
    pub rounds: u32,
    /// Bytes in the signed message.
    pub message_len: usize,
    /// Whether bytes/op were counted (the binary's allocator counts; library callers may
    /// not have it).
    pub allocations_counted: bool,
    /// One row per algorithm, implementation and operation.
    pub rows: Vec<SignRow>,
}

/// One measured operation.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SignRow {
    /// The algorithm.
    pub alg: SigAlg,
    /// The implementation.
    pub implementation: Implementation,
    /// Sign or verify.
    pub op: SignOp,
    /// Length of the signature, bytes.
    pub signature_len: usize,
    /// The figures.
    #[serde(flatten)]
    pub m: Measurement,
}

/// The message signed: as long as a TLS 1.3 CertificateVerify input.
pub fn message() -> Vec<u8> {
    let mut m = vec![0x20u8; 64];
    m.extend_from_slice(b"TLS 1.3, server CertificateVerify\0");
    m.extend((0u8..32).map(|i| i.wrapping_mul(37).wrapping_add(11)));
    m
}

/// A key of one type: the PKCS#8 document and the public key as TLS carries it (SEC1
/// point, 32 Ed25519 bytes, PKCS#1 RSAPublicKey).
#[derive(Debug, Clone)]
pub struct TestKey {
    /// PKCS#8 private key.
    pub pkcs8: Vec<u8>,
    /// The public key.
    pub public: Vec<u8>,
}

impl TestKey {
    /// Generates a key of `kt` (outside any timed loop).
    pub fn generate(kt: KeyType) -> Result<TestKey, CryptoError> {
        use aws_lc_rs::signature::KeyPair as _;
        let kp = kt.generate().map_err(|e| CryptoError::KeyGen {
            what: kt.name().into(),
            source: Box::new(e),
        })?;
        let pkcs8 = kp.serialize_der();
        let bad = |e: aws_lc_rs::error::KeyRejected| CryptoError::Op {
            implementation: Implementation::AWS_LC_RS,
            alg: kt.name().into(),
            what: "key load",
            detail: Some(e.to_string()),
        };
        use aws_lc_rs::signature as s;
        let public = match kt {
            KeyType::EcdsaP256 => {
                s::EcdsaKeyPair::from_pkcs8(&s::ECDSA_P256_SHA256_ASN1_SIGNING, &pkcs8)
                    .map_err(bad)?
                    .public_key()
                    .as_ref()
                    .to_vec()
            }
            KeyType::EcdsaP384 => {
                s::EcdsaKeyPair::from_pkcs8(&s::ECDSA_P384_SHA384_ASN1_SIGNING, &pkcs8)
                    .map_err(bad)?
                    .public_key()
                    .as_ref()
                    .to_vec()
            }
            KeyType::Ed25519 => s::Ed25519KeyPair::from_pkcs8(&pkcs8)
                .map_err(bad)?
                .public_key()
                .as_ref()
                .to_vec(),
            KeyType::Rsa2048 | KeyType::Rsa3072 | KeyType::Rsa4096 => {
                s::RsaKeyPair::from_pkcs8(&pkcs8)
                    .map_err(bad)?
                    .public_key()
                    .as_ref()
                    .to_vec()
            }
        };
        Ok(TestKey { pkcs8, public })
    }
}

/// One implementation's signer and verifier for one algorithm and key.
pub trait SigImpl {
    /// Signs `msg` into `out` (cleared first; reused between calls).
    fn sign(&self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError>;
    /// Verifies `sig` over `msg`, parsing the public key first.
    fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), CryptoError>;
}

/// Loads `key` into `imp` for `alg`.
pub fn load(
    alg: SigAlg,
    imp: Implementation,
    key: &TestKey,
) -> Result<Box<dyn SigImpl>, CryptoError> {
    match imp {
        Implementation::Provider(Provider::AwsLcRs) => aws::load(alg, key),
        Implementation::Provider(Provider::Ring) => ring_impl::load(alg, key),
        Implementation::RustCrypto => rc::load(alg, key),
    }
}

fn op_err(
    imp: Implementation,
    alg: SigAlg,
    what: &'static str,
    detail: Option<String>,
) -> CryptoError {
    CryptoError::Op {
        implementation: imp,
        alg: alg.name().into(),
        what,
        detail,
    }
}

/// Signs with each implementation and verifies with each: every pair must agree.
pub fn cross_check(alg: SigAlg, key: &TestKey, msg: &[u8]) -> Result<(), CryptoError> {
    let impls: Vec<(Implementation, Box<dyn SigImpl>)> = alg
        .implementations()
        .iter()
        .map(|&i| load(alg, i, key).map(|s| (i, s)))
        .collect::<Result<_, _>>()?;
    let mut sig = Vec::new();
    for (signer_name, signer) in &impls {
        signer.sign(msg, &mut sig)?;
        for (verifier_name, verifier) in &impls {
            verifier.verify(msg, &sig).map_err(|_| {
                op_err(
                    *verifier_name,
                    alg,
                    "verification of a signature made by another implementation",
                    Some(format!("signed by {signer_name}")),
                )
            })?;
        }
        let mut bad = msg.to_vec();
        bad[0] ^= 1;
        if signer.verify(&bad, &sig).is_ok() {
            return Err(op_err(
                *signer_name,
                alg,
                "rejection of a signature over another message",
                None,
            ));
        }
    }
    Ok(())
}

/// A key loaded into one implementation for one algorithm, with a signature it made.
type Loaded = (SigAlg, Implementation, Box<dyn SigImpl>, Vec<u8>);

/// Runs `crypto sign`.
pub fn run(opts: &SignOptions) -> Result<SignReport, CryptoError> {
    if opts.algs.is_empty() || opts.implementations.is_empty() {
        return Err(CryptoError::Nothing(
            "no algorithm or no implementation chosen".into(),
        ));
    }
    let msg = message();
    let mut keys: Vec<(KeyType, TestKey)> = Vec::new();
    let mut rows = Vec::new();
    // Per row pair: the algorithm, the implementation, its loaded key and a signature.
    let mut loaded: Vec<Loaded> = Vec::new();
    for &alg in &opts.algs {
        let kt = alg.key_type();
        if !keys.iter().any(|(k, _)| *k == kt) {
            tracing::info!("generating a {kt} key");
            keys.push((kt, TestKey::generate(kt)?));
        }
        let key = keys
            .iter()
            .find(|(k, _)| *k == kt)
            .map(|(_, key)| key)
            .ok_or_else(|| CryptoError::Nothing(format!("no {kt} key")))?;
        cross_check(alg, key, &msg)?;
        for &imp in &opts.implementations {
            if !alg.implementations().contains(&imp) {
                continue;
            }
            let s = load(alg, imp, key)?;
            let mut sig = Vec::with_capacity(1024);
            s.sign(&msg, &mut sig)?;
            loaded.push((alg, imp, s, sig));
        }
    }
    if loaded.is_empty() {
        return Err(CryptoError::Nothing(
            "none of the chosen implementations has the chosen algorithms".into(),
        ));
    }
    // Every row's rounds in turn with the others' (see `measure_interleaved`).
    let mut ops: Vec<Op<'_, CryptoError>> = Vec::with_capacity(2 * loaded.len());
    for (_, _, s, sig) in &loaded {
        let msg = &msg;
        let mut out = Vec::with_capacity(1024);
        ops.push(Box::new(move || {
            s.sign(std::hint::black_box(msg), &mut out)?;
            std::hint::black_box(&out);
            Ok(())
        }));
        ops.push(Box::new(move || {
            s.verify(std::hint::black_box(msg), std::hint::black_box(sig))
        }));
    }
    tracing::info!("measuring {} rows, rounds interleaved", ops.len());
    let mut measured = measure_interleaved(&opts.measure, &mut ops)?.into_iter();
    drop(ops);
    for (alg, imp, _, sig) in &loaded {
        for op in [SignOp::Sign, SignOp::Verify] {
            let Some(m) = measured.next() else { break };
            rows.push(SignRow {
                alg: *alg,
                implementation: *imp,
                op,
                signature_len: sig.len(),
                m,
            });
        }
    }
    Ok(SignReport {
        schema: <SignReport as crate::doc::Document>::SCHEMA.into(),
        seconds: opts.measure.seconds(),
        rounds: opts.measure.rounds(),
        message_len: msg.len(),
        allocations_counted: super::alloc::installed(),
        rows,
    })
}

/// The signing module of a library with ring's `signature` API: aws-lc-rs kept that API,
/// so one body serves both, and the three places where they differ are arguments (how an
/// ECDSA key pair is read, how an Ed25519 one is, and an RSA key's modulus length).
macro_rules! ring_api_signer {
    (
        $(#[$attr:meta])*
        mod $module:ident for $lib:ident as $imp:expr;
        ecdsa_from_pkcs8($ealg:ident, $epk:ident, $erng:ident) => $ecdsa:expr;
        ed25519_from_pkcs8($dpk:ident) => $ed:expr;
        rsa_modulus_len($mk:ident) => $modlen:expr;
    ) => {
        $(#[$attr])*
        mod $module {
            use $lib::rand::SystemRandom;
            use $lib::signature::{self as s, UnparsedPublicKey};

            use super::{SigAlg, SigImpl, TestKey, op_err};
            use crate::crypto::{CryptoError, Implementation};

            const I: Implementation = $imp;

            enum Key {
                Ecdsa(s::EcdsaKeyPair),
                Ed(s::Ed25519KeyPair),
                Rsa(s::RsaKeyPair, &'static dyn s::RsaEncoding),
            }

            struct Signer {
                alg: SigAlg,
                key: Key,
                public: Vec<u8>,
                verify_alg: &'static dyn s::VerificationAlgorithm,
                rng: SystemRandom,
            }

            fn ecdsa(
                $ealg: &'static s::EcdsaSigningAlgorithm,
                $epk: &[u8],
                $erng: &SystemRandom,
            ) -> Result<s::EcdsaKeyPair, $lib::error::KeyRejected> {
                $ecdsa
            }

            fn ed25519($dpk: &[u8]) -> Result<s::Ed25519KeyPair, $lib::error::KeyRejected> {
                $ed
            }

            fn modulus_len($mk: &s::RsaKeyPair) -> usize {
                $modlen
            }

            pub(super) fn load(alg: SigAlg, key: &TestKey) -> Result<Box<dyn SigImpl>, CryptoError> {
                let bad = |e: $lib::error::KeyRejected| {
                    op_err(I, alg, "key load", Some(e.to_string()))
                };
                let rng = SystemRandom::new();
                let (k, verify_alg): (Key, &'static dyn s::VerificationAlgorithm) = match alg {
                    SigAlg::EcdsaP256 => (
                        Key::Ecdsa(
                            ecdsa(&s::ECDSA_P256_SHA256_ASN1_SIGNING, &key.pkcs8, &rng)
                                .map_err(bad)?,
                        ),
                        &s::ECDSA_P256_SHA256_ASN1,
                    ),
                    SigAlg::EcdsaP384 => (
                        Key::Ecdsa(
                            ecdsa(&s::ECDSA_P384_SHA384_ASN1_SIGNING, &key.pkcs8, &rng)
                                .map_err(bad)?,
                        ),
                        &s::ECDSA_P384_SHA384_ASN1,
                    ),
                    SigAlg::Ed25519 => (Key::Ed(ed25519(&key.pkcs8).map_err(bad)?), &s::ED25519),
                    _ => {
                        let kp = s::RsaKeyPair::from_pkcs8(&key.pkcs8).map_err(bad)?;
                        if alg.pss() {
                            (
                                Key::Rsa(kp, &s::RSA_PSS_SHA256),
                                &s::RSA_PSS_2048_8192_SHA256,
                            )
                        } else {
                            (
                                Key::Rsa(kp, &s::RSA_PKCS1_SHA256),
                                &s::RSA_PKCS1_2048_8192_SHA256,
                            )
                        }
                    }
                };
                Ok(Box::new(Signer {
                    alg,
                    key: k,
                    public: key.public.clone(),
                    verify_alg,
                    rng,
                }))
            }

            impl SigImpl for Signer {
                fn sign(&self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError> {
                    out.clear();
                    let fail = |_| op_err(I, self.alg, "sign", None);
                    match &self.key {
                        Key::Ecdsa(k) => {
                            out.extend_from_slice(k.sign(&self.rng, msg).map_err(fail)?.as_ref())
                        }
                        Key::Ed(k) => out.extend_from_slice(k.sign(msg).as_ref()),
                        Key::Rsa(k, padding) => {
                            out.resize(modulus_len(k), 0);
                            k.sign(*padding, &self.rng, msg, out).map_err(fail)?;
                        }
                    }
                    Ok(())
                }

                fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
                    UnparsedPublicKey::new(self.verify_alg, &self.public)
                        .verify(msg, sig)
                        .map_err(|_| op_err(I, self.alg, "verify", None))
                }
            }
        }
    };
}

ring_api_signer! {
    /// aws-lc-rs through `aws_lc_rs::signature`.
    mod aws for aws_lc_rs as Implementation::AWS_LC_RS;
    ecdsa_from_pkcs8(alg, pkcs8, _rng) => s::EcdsaKeyPair::from_pkcs8(alg, pkcs8);
    ed25519_from_pkcs8(pkcs8) => s::Ed25519KeyPair::from_pkcs8(pkcs8);
    rsa_modulus_len(k) => k.public_modulus_len();
}

ring_api_signer! {
    /// ring through `ring::signature`.
    mod ring_impl for ring as Implementation::RING;
    ecdsa_from_pkcs8(alg, pkcs8, rng) => s::EcdsaKeyPair::from_pkcs8(alg, pkcs8, rng);
    // ring wants PKCS#8 v2 (with the public key); accept v1 too.
    ed25519_from_pkcs8(pkcs8) => s::Ed25519KeyPair::from_pkcs8(pkcs8)
        .or_else(|_| s::Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8));
    rsa_modulus_len(k) => k.public().modulus_len();
}

mod rc {
    //! RustCrypto: p256, p384, ed25519-dalek, rsa (all through the `signature` traits).
    use rand_core_06::OsRng;
    use rsa::pkcs1::DecodeRsaPublicKey;
    use rsa::pkcs8::DecodePrivateKey;
    use rsa::sha2::Sha256;
    use rsa::signature::{RandomizedSigner, SignatureEncoding, Signer, Verifier};

    use super::{SigAlg, SigImpl, TestKey, op_err};
    use crate::crypto::{CryptoError, Implementation};

    const I: Implementation = Implementation::RustCrypto;

    enum Key {
        P256(p256::ecdsa::SigningKey),
        P384(p384::ecdsa::SigningKey),
        Ed(ed25519_dalek::SigningKey),
        RsaPkcs1(rsa::pkcs1v15::SigningKey<Sha256>),
        RsaPss(rsa::pss::SigningKey<Sha256>),
    }

    struct Rc {
        alg: SigAlg,
        key: Key,
        public: Vec<u8>,
    }

    pub(super) fn load(alg: SigAlg, key: &TestKey) -> Result<Box<dyn SigImpl>, CryptoError> {
        let bad = |e: &dyn std::fmt::Display| op_err(I, alg, "key load", Some(e.to_string()));
        let k = match alg {
            SigAlg::EcdsaP256 => {
                Key::P256(p256::ecdsa::SigningKey::from_pkcs8_der(&key.pkcs8).map_err(|e| bad(&e))?)
            }
            SigAlg::EcdsaP384 => {
                Key::P384(p384::ecdsa::SigningKey::from_pkcs8_der(&key.pkcs8).map_err(|e| bad(&e))?)
            }
            SigAlg::Ed25519 => {
                Key::Ed(ed25519_dalek::SigningKey::from_pkcs8_der(&key.pkcs8).map_err(|e| bad(&e))?)
            }
            _ => {
                let k = rsa::RsaPrivateKey::from_pkcs8_der(&key.pkcs8).map_err(|e| bad(&e))?;
                if alg.pss() {
                    Key::RsaPss(rsa::pss::SigningKey::new(k))
                } else {
                    Key::RsaPkcs1(rsa::pkcs1v15::SigningKey::new(k))
                }
            }
        };
        Ok(Box::new(Rc {
            alg,
            key: k,
            public: key.public.clone(),
        }))
    }

    impl SigImpl for Rc {
        fn sign(&self, msg: &[u8], out: &mut Vec<u8>) -> Result<(), CryptoError> {
            out.clear();
            let fail = |e: rsa::signature::Error| op_err(I, self.alg, "sign", Some(e.to_string()));
            match &self.key {
                Key::P256(k) => {
                    let sig: p256::ecdsa::DerSignature = k.try_sign(msg).map_err(fail)?;
                    out.extend_from_slice(sig.as_bytes());
                }
                Key::P384(k) => {
                    let sig: p384::ecdsa::DerSignature = k.try_sign(msg).map_err(fail)?;
                    out.extend_from_slice(sig.as_bytes());
                }
                Key::Ed(k) => out.extend_from_slice(&k.try_sign(msg).map_err(fail)?.to_bytes()),
                // Randomized signing: the private-key operation is blinded, as aws-lc's
                // and ring's are.
                Key::RsaPkcs1(k) => out.extend_from_slice(
                    &k.try_sign_with_rng(&mut OsRng, msg)
                        .map_err(fail)?
                        .to_bytes(),
                ),
                Key::RsaPss(k) => out.extend_from_slice(
                    &k.try_sign_with_rng(&mut OsRng, msg)
                        .map_err(fail)?
                        .to_bytes(),
                ),
            }
            Ok(())
        }

        fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), CryptoError> {
            let fail =
                |e: &dyn std::fmt::Display| op_err(I, self.alg, "verify", Some(e.to_string()));
            let p = &self.public;
            match self.alg {
                SigAlg::EcdsaP256 => {
                    let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(p).map_err(|e| fail(&e))?;
                    let sig = p256::ecdsa::DerSignature::try_from(sig).map_err(|e| fail(&e))?;
                    vk.verify(msg, &sig).map_err(|e| fail(&e))
                }
                SigAlg::EcdsaP384 => {
                    let vk = p384::ecdsa::VerifyingKey::from_sec1_bytes(p).map_err(|e| fail(&e))?;
                    let sig = p384::ecdsa::DerSignature::try_from(sig).map_err(|e| fail(&e))?;
                    vk.verify(msg, &sig).map_err(|e| fail(&e))
                }
                SigAlg::Ed25519 => {
                    let bytes: &[u8; 32] = p.as_slice().try_into().map_err(|e| fail(&e))?;
                    let vk =
                        ed25519_dalek::VerifyingKey::from_bytes(bytes).map_err(|e| fail(&e))?;
                    let sig = ed25519_dalek::Signature::from_slice(sig).map_err(|e| fail(&e))?;
                    vk.verify(msg, &sig).map_err(|e| fail(&e))
                }
                _ => {
                    let pk = rsa::RsaPublicKey::from_pkcs1_der(p).map_err(|e| fail(&e))?;
                    if self.alg.pss() {
                        let sig = rsa::pss::Signature::try_from(sig).map_err(|e| fail(&e))?;
                        rsa::pss::VerifyingKey::<Sha256>::new(pk)
                            .verify(msg, &sig)
                            .map_err(|e| fail(&e))
                    } else {
                        let sig = rsa::pkcs1v15::Signature::try_from(sig).map_err(|e| fail(&e))?;
                        rsa::pkcs1v15::VerifyingKey::<Sha256>::new(pk)
                            .verify(msg, &sig)
                            .map_err(|e| fail(&e))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_agrees_on_fast_algorithms() {
        let msg = message();
        assert_eq!(msg.len(), 130);
        for alg in [
            SigAlg::EcdsaP256,
            SigAlg::EcdsaP384,
            SigAlg::Ed25519,
            SigAlg::Rsa2048Pss,
        ] {
            let key = TestKey::generate(alg.key_type()).unwrap();
            cross_check(alg, &key, &msg).unwrap();
        }
    }

    #[test]
    fn tampered_signature_fails_everywhere() {
        let msg = message();
        let key = TestKey::generate(KeyType::EcdsaP256).unwrap();
        let signer = load(SigAlg::EcdsaP256, Implementation::AWS_LC_RS, &key).unwrap();
        let mut sig = Vec::new();
        signer.sign(&msg, &mut sig).unwrap();
        let n = sig.len();
        sig[n - 1] ^= 0x40;
        for imp in Implementation::ALL {
            let v = load(SigAlg::EcdsaP256, imp, &key).unwrap();
            assert!(
                v.verify(&msg, &sig).is_err(),
                "{imp} accepted a tampered signature"
            );
        }
    }
}
