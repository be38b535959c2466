//! A rustls [`CryptoProvider`] that times every call into the crypto underneath it: the
//! in-handshake half of `tlsperf crypto limit`.
//!
//! [`provider`] wraps aws-lc-rs's or ring's provider piece by piece — key exchange,
//! signing, signature verification (certificate chain and handshake signature apart),
//! transcript hashing, the key schedule (HKDF, HMAC, the TLS 1.2 PRF), record protection
//! (AEAD key set-up, encryption, decryption) and random bytes — and [`ticketer`] wraps a
//! ticket encrypter. Every wrapped call adds its *exclusive* CPU time on this thread (read
//! from [`super::cpu_clock`], so time other processes held the CPU is never charged; a
//! call made inside another timed call, such as the key exchange a TLS 1.2 PRF completes,
//! counts to its own category only) and one call to a per-thread [`Tally`]; [`take`] reads and
//! resets it. A handshake driven in memory on one thread, with `take` called where the
//! client's work ends and the server's begins, therefore gives each side's crypto time.
//!
//! Each timed call costs two clock reads; [`clock_bias_ns`] measures what that adds to a
//! call's recorded time, so callers can subtract it per call.
//!
//! The wrapped pieces are built once per provider and live for the whole process (rustls
//! wants `&'static` algorithm objects).

use std::cell::{Cell, RefCell};
use std::sync::{Arc, OnceLock};

use rustls::crypto::cipher::{
    AeadKey, InboundOpaqueMessage, InboundPlainMessage, Iv, KeyBlockShape, MessageDecrypter,
    MessageEncrypter, OutboundOpaqueMessage, OutboundPlainMessage, Tls12AeadAlgorithm,
    Tls13AeadAlgorithm, UnsupportedOperationError,
};
use rustls::crypto::tls12::Prf;
use rustls::crypto::tls13::{Hkdf, HkdfExpander, OkmBlock, OutputLengthError};
use rustls::crypto::{
    ActiveKeyExchange, CipherSuiteCommon, CompletedKeyExchange, CryptoProvider, GetRandomFailed,
    KeyProvider, SecureRandom, SharedSecret, SupportedKxGroup, WebPkiSupportedAlgorithms, hash,
    hmac,
};
use rustls::server::ProducesTickets;
use rustls::sign::{Signer, SigningKey};
use rustls::{
    ConnectionTrafficSecrets, Error, NamedGroup, SignatureAlgorithm, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion, Tls12CipherSuite, Tls13CipherSuite,
};
use rustls_pki_types::{
    AlgorithmIdentifier, InvalidSignature, PrivateKeyDer, SignatureVerificationAlgorithm,
    SubjectPublicKeyInfoDer,
};
use serde::Serialize;

use super::cpu_clock::ThreadCpu;
use crate::tls::Provider;

/// What a timed call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Key-exchange key generation and agreement.
    KeyExchange,
    /// Signing (the server's CertificateVerify / ServerKeyExchange, a client certificate's).
    Sign,
    /// Verifying the certificate chain's signatures.
    VerifyChain,
    /// Verifying the peer's handshake signature.
    VerifyHandshake,
    /// Transcript hashing.
    Hash,
    /// The key schedule: HKDF extract and expand, Finished HMACs, the TLS 1.2 PRF.
    KeySchedule,
    /// Record protection: AEAD key set-up, encryption and decryption of records.
    Aead,
    /// Session tickets: sealing and opening them.
    Tickets,
    /// Random bytes (hello randoms, nonces).
    Random,
}

/// The number of categories.
pub const CATEGORIES: usize = 9;

impl Category {
    /// Every category, in report order.
    pub const ALL: [Category; CATEGORIES] = [
        Category::KeyExchange,
        Category::Sign,
        Category::VerifyChain,
        Category::VerifyHandshake,
        Category::Hash,
        Category::KeySchedule,
        Category::Aead,
        Category::Tickets,
        Category::Random,
    ];

    /// A short description for reports.
    pub fn name(self) -> &'static str {
        match self {
            Category::KeyExchange => "key exchange",
            Category::Sign => "sign",
            Category::VerifyChain => "verify chain",
            Category::VerifyHandshake => "verify handshake signature",
            Category::Hash => "transcript hash",
            Category::KeySchedule => "key schedule (HKDF, HMAC, PRF)",
            Category::Aead => "record protection (AEAD)",
            Category::Tickets => "tickets",
            Category::Random => "random",
        }
    }

    /// Whether this is public-key crypto (key exchange, signatures).
    pub fn public_key(self) -> bool {
        matches!(
            self,
            Category::KeyExchange
                | Category::Sign
                | Category::VerifyChain
                | Category::VerifyHandshake
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Exclusive time and calls per category, on one thread since the last [`take`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Nanoseconds per category, indexed like [`Category::ALL`].
    pub ns: [u64; CATEGORIES],
    /// Calls per category.
    pub calls: [u32; CATEGORIES],
}

impl Tally {
    /// Adds another tally to this one.
    pub fn add(&mut self, other: &Tally) {
        for i in 0..CATEGORIES {
            self.ns[i] = self.ns[i].saturating_add(other.ns[i]);
            self.calls[i] = self.calls[i].saturating_add(other.calls[i]);
        }
    }

    /// Time of all categories.
    pub fn total_ns(&self) -> u64 {
        self.ns.iter().sum()
    }
}

thread_local! {
    static TALLY: RefCell<Tally> = RefCell::new(Tally::default());
    /// Time spent in timed calls nested inside the innermost running one.
    static NESTED_NS: Cell<u64> = const { Cell::new(0) };
}

/// Returns this thread's tally and resets it.
pub fn take() -> Tally {
    TALLY.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

/// Runs `f`, adding its exclusive time and one call to `cat`.
fn timed<T>(cat: Category, f: impl FnOnce() -> T) -> T {
    let outer_nested = NESTED_NS.with(|n| n.replace(0));
    let start = ThreadCpu::now();
    let out = f();
    let elapsed = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let inner_nested = NESTED_NS.with(|n| n.replace(outer_nested.saturating_add(elapsed)));
    TALLY.with(|t| {
        let mut t = t.borrow_mut();
        let i = cat.index();
        t.ns[i] = t.ns[i].saturating_add(elapsed.saturating_sub(inner_nested));
        t.calls[i] = t.calls[i].saturating_add(1);
    });
    out
}

/// What one timed call of nothing records, in ns (the median of 101 batches of 1,000):
/// the clock reads' share of every recorded call. Leaves this thread's tally as it was.
pub fn clock_bias_ns() -> f64 {
    let saved = take();
    let per_call: Vec<f64> = (0..101)
        .map(|_| {
            for _ in 0..1000 {
                timed(Category::Random, || std::hint::black_box(()));
            }
            take().ns[Category::Random.index()] as f64 / 1000.0
        })
        .collect();
    TALLY.with(|t| *t.borrow_mut() = saved);
    // 101 batches: never empty.
    crate::stats::median(&per_call).unwrap_or(0.0)
}

/// The instrumented version of a provider: same algorithms, every call timed.
pub fn provider(p: Provider) -> Arc<CryptoProvider> {
    static AWS: OnceLock<CryptoProvider> = OnceLock::new();
    static RING: OnceLock<CryptoProvider> = OnceLock::new();
    let cell = match p {
        Provider::AwsLcRs => &AWS,
        Provider::Ring => &RING,
    };
    Arc::new(cell.get_or_init(|| wrap(&p.crypto_provider())).clone())
}

/// Wraps a ticket encrypter so sealing and opening tickets are timed.
pub fn ticketer(inner: Arc<dyn ProducesTickets>) -> Arc<dyn ProducesTickets> {
    Arc::new(Tickets(inner))
}

fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

fn wrap(base: &CryptoProvider) -> CryptoProvider {
    let cipher_suites = base
        .cipher_suites
        .iter()
        .map(|s| match s {
            SupportedCipherSuite::Tls13(s) => SupportedCipherSuite::Tls13(leak(Tls13CipherSuite {
                common: common(&s.common),
                hkdf_provider: leak(HkdfW(s.hkdf_provider)),
                aead_alg: leak(Aead13(s.aead_alg)),
                quic: s.quic,
            })),
            SupportedCipherSuite::Tls12(s) => SupportedCipherSuite::Tls12(leak(Tls12CipherSuite {
                common: common(&s.common),
                prf_provider: leak(PrfW(s.prf_provider)),
                kx: s.kx,
                sign: s.sign,
                aead_alg: leak(Aead12(s.aead_alg)),
            })),
        })
        .collect();
    let kx_groups = base
        .kx_groups
        .iter()
        .map(|g| leak(Group(*g)) as &'static dyn SupportedKxGroup)
        .collect();
    let verify = |algs: &[&'static dyn SignatureVerificationAlgorithm], cat| {
        let v: Vec<&'static dyn SignatureVerificationAlgorithm> = algs
            .iter()
            .map(|a| leak(Verify { inner: *a, cat }) as &'static dyn SignatureVerificationAlgorithm)
            .collect();
        &*Vec::leak(v)
    };
    let algs = base.signature_verification_algorithms;
    let mapping: Vec<_> = algs
        .mapping
        .iter()
        .map(|(scheme, a)| (*scheme, verify(a, Category::VerifyHandshake)))
        .collect();
    CryptoProvider {
        cipher_suites,
        kx_groups,
        signature_verification_algorithms: WebPkiSupportedAlgorithms {
            all: verify(algs.all, Category::VerifyChain),
            mapping: Vec::leak(mapping),
        },
        secure_random: leak(Random(base.secure_random)),
        key_provider: leak(Keys(base.key_provider)),
    }
}

fn common(c: &CipherSuiteCommon) -> CipherSuiteCommon {
    CipherSuiteCommon {
        suite: c.suite,
        hash_provider: leak(HashW(c.hash_provider)),
        confidentiality_limit: c.confidentiality_limit,
    }
}

// Key exchange.

#[derive(Debug)]
struct Group(&'static dyn SupportedKxGroup);

impl SupportedKxGroup for Group {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        timed(Category::KeyExchange, || self.0.start())
            .map(|a| Box::new(Active(a)) as Box<dyn ActiveKeyExchange>)
    }

    fn start_and_complete(&self, peer_pub_key: &[u8]) -> Result<CompletedKeyExchange, Error> {
        timed(Category::KeyExchange, || {
            self.0.start_and_complete(peer_pub_key)
        })
    }

    fn ffdhe_group(&self) -> Option<rustls::ffdhe_groups::FfdheGroup<'static>> {
        self.0.ffdhe_group()
    }

    fn name(&self) -> NamedGroup {
        self.0.name()
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }

    fn usable_for_version(&self, version: rustls::ProtocolVersion) -> bool {
        self.0.usable_for_version(version)
    }
}

struct Active(Box<dyn ActiveKeyExchange>);

impl ActiveKeyExchange for Active {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, Error> {
        timed(Category::KeyExchange, || self.0.complete(peer_pub_key))
    }

    fn complete_for_tls_version(
        self: Box<Self>,
        peer_pub_key: &[u8],
        tls_version: &SupportedProtocolVersion,
    ) -> Result<SharedSecret, Error> {
        timed(Category::KeyExchange, || {
            self.0.complete_for_tls_version(peer_pub_key, tls_version)
        })
    }

    fn hybrid_component(&self) -> Option<(NamedGroup, &[u8])> {
        self.0.hybrid_component()
    }

    fn complete_hybrid_component(
        self: Box<Self>,
        peer_pub_key: &[u8],
    ) -> Result<SharedSecret, Error> {
        timed(Category::KeyExchange, || {
            self.0.complete_hybrid_component(peer_pub_key)
        })
    }

    fn pub_key(&self) -> &[u8] {
        self.0.pub_key()
    }

    fn ffdhe_group(&self) -> Option<rustls::ffdhe_groups::FfdheGroup<'static>> {
        self.0.ffdhe_group()
    }

    fn group(&self) -> NamedGroup {
        self.0.group()
    }
}

// Signing.

#[derive(Debug)]
struct Keys(&'static dyn KeyProvider);

impl KeyProvider for Keys {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn SigningKey>, Error> {
        Ok(Arc::new(Key(self.0.load_private_key(key_der)?)))
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

#[derive(Debug)]
struct Key(Arc<dyn SigningKey>);

impl SigningKey for Key {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        self.0
            .choose_scheme(offered)
            .map(|s| Box::new(SignerW(s)) as Box<dyn Signer>)
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        self.0.public_key()
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.0.algorithm()
    }
}

#[derive(Debug)]
struct SignerW(Box<dyn Signer>);

impl Signer for SignerW {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        timed(Category::Sign, || self.0.sign(message))
    }

    fn scheme(&self) -> SignatureScheme {
        self.0.scheme()
    }
}

// Verification.

#[derive(Debug)]
struct Verify {
    inner: &'static dyn SignatureVerificationAlgorithm,
    cat: Category,
}

impl SignatureVerificationAlgorithm for Verify {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), InvalidSignature> {
        timed(self.cat, || {
            self.inner.verify_signature(public_key, message, signature)
        })
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        self.inner.public_key_alg_id()
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.inner.signature_alg_id()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

// Hashing.

struct HashW(&'static dyn hash::Hash);

impl hash::Hash for HashW {
    fn start(&self) -> Box<dyn hash::Context> {
        Box::new(Ctx(timed(Category::Hash, || self.0.start())))
    }

    fn hash(&self, data: &[u8]) -> hash::Output {
        timed(Category::Hash, || self.0.hash(data))
    }

    fn output_len(&self) -> usize {
        self.0.output_len()
    }

    fn algorithm(&self) -> rustls::crypto::hash::HashAlgorithm {
        self.0.algorithm()
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

struct Ctx(Box<dyn hash::Context>);

impl hash::Context for Ctx {
    fn fork_finish(&self) -> hash::Output {
        timed(Category::Hash, || self.0.fork_finish())
    }

    fn fork(&self) -> Box<dyn hash::Context> {
        Box::new(Ctx(timed(Category::Hash, || self.0.fork())))
    }

    fn finish(self: Box<Self>) -> hash::Output {
        timed(Category::Hash, || self.0.finish())
    }

    fn update(&mut self, data: &[u8]) {
        timed(Category::Hash, || self.0.update(data));
    }
}

// The key schedule.

struct HkdfW(&'static dyn Hkdf);

fn expander(e: Box<dyn HkdfExpander>) -> Box<dyn HkdfExpander> {
    Box::new(Expander(e))
}

impl Hkdf for HkdfW {
    fn extract_from_zero_ikm(&self, salt: Option<&[u8]>) -> Box<dyn HkdfExpander> {
        expander(timed(Category::KeySchedule, || {
            self.0.extract_from_zero_ikm(salt)
        }))
    }

    fn extract_from_secret(&self, salt: Option<&[u8]>, secret: &[u8]) -> Box<dyn HkdfExpander> {
        expander(timed(Category::KeySchedule, || {
            self.0.extract_from_secret(salt, secret)
        }))
    }

    fn extract_from_kx_shared_secret(
        &self,
        salt: Option<&[u8]>,
        kx: Box<dyn ActiveKeyExchange>,
        peer_pub_key: &[u8],
    ) -> Result<Box<dyn HkdfExpander>, Error> {
        // `kx` is an `Active`: completing it is timed as key exchange, not here.
        timed(Category::KeySchedule, || {
            self.0.extract_from_kx_shared_secret(salt, kx, peer_pub_key)
        })
        .map(expander)
    }

    fn expander_for_okm(&self, okm: &OkmBlock) -> Box<dyn HkdfExpander> {
        expander(timed(Category::KeySchedule, || {
            self.0.expander_for_okm(okm)
        }))
    }

    fn hmac_sign(&self, key: &OkmBlock, message: &[u8]) -> hmac::Tag {
        timed(Category::KeySchedule, || self.0.hmac_sign(key, message))
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

struct Expander(Box<dyn HkdfExpander>);

impl HkdfExpander for Expander {
    fn expand_slice(&self, info: &[&[u8]], output: &mut [u8]) -> Result<(), OutputLengthError> {
        timed(Category::KeySchedule, || self.0.expand_slice(info, output))
    }

    fn expand_block(&self, info: &[&[u8]]) -> OkmBlock {
        timed(Category::KeySchedule, || self.0.expand_block(info))
    }

    fn hash_len(&self) -> usize {
        self.0.hash_len()
    }
}

struct PrfW(&'static dyn Prf);

impl Prf for PrfW {
    fn for_key_exchange(
        &self,
        output: &mut [u8; 48],
        kx: Box<dyn ActiveKeyExchange>,
        peer_pub_key: &[u8],
        label: &[u8],
        seed: &[u8],
    ) -> Result<(), Error> {
        // `kx` is an `Active`: completing it is timed as key exchange, not here.
        timed(Category::KeySchedule, || {
            self.0
                .for_key_exchange(output, kx, peer_pub_key, label, seed)
        })
    }

    fn for_secret(&self, output: &mut [u8], secret: &[u8], label: &[u8], seed: &[u8]) {
        timed(Category::KeySchedule, || {
            self.0.for_secret(output, secret, label, seed)
        });
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

// Record protection.

struct Aead13(&'static dyn Tls13AeadAlgorithm);

impl Tls13AeadAlgorithm for Aead13 {
    fn encrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageEncrypter> {
        Box::new(Enc(timed(Category::Aead, || self.0.encrypter(key, iv))))
    }

    fn decrypter(&self, key: AeadKey, iv: Iv) -> Box<dyn MessageDecrypter> {
        Box::new(Dec(timed(Category::Aead, || self.0.decrypter(key, iv))))
    }

    fn key_len(&self) -> usize {
        self.0.key_len()
    }

    fn extract_keys(
        &self,
        key: AeadKey,
        iv: Iv,
    ) -> Result<ConnectionTrafficSecrets, UnsupportedOperationError> {
        self.0.extract_keys(key, iv)
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

struct Aead12(&'static dyn Tls12AeadAlgorithm);

impl Tls12AeadAlgorithm for Aead12 {
    fn encrypter(&self, key: AeadKey, iv: &[u8], extra: &[u8]) -> Box<dyn MessageEncrypter> {
        Box::new(Enc(timed(Category::Aead, || {
            self.0.encrypter(key, iv, extra)
        })))
    }

    fn decrypter(&self, key: AeadKey, iv: &[u8]) -> Box<dyn MessageDecrypter> {
        Box::new(Dec(timed(Category::Aead, || self.0.decrypter(key, iv))))
    }

    fn key_block_shape(&self) -> KeyBlockShape {
        self.0.key_block_shape()
    }

    fn extract_keys(
        &self,
        key: AeadKey,
        iv: &[u8],
        explicit: &[u8],
    ) -> Result<ConnectionTrafficSecrets, UnsupportedOperationError> {
        self.0.extract_keys(key, iv, explicit)
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

struct Enc(Box<dyn MessageEncrypter>);

impl MessageEncrypter for Enc {
    fn encrypt(
        &mut self,
        msg: OutboundPlainMessage<'_>,
        seq: u64,
    ) -> Result<OutboundOpaqueMessage, Error> {
        timed(Category::Aead, || self.0.encrypt(msg, seq))
    }

    fn encrypted_payload_len(&self, payload_len: usize) -> usize {
        self.0.encrypted_payload_len(payload_len)
    }
}

struct Dec(Box<dyn MessageDecrypter>);

impl MessageDecrypter for Dec {
    fn decrypt<'a>(
        &mut self,
        msg: InboundOpaqueMessage<'a>,
        seq: u64,
    ) -> Result<InboundPlainMessage<'a>, Error> {
        timed(Category::Aead, || self.0.decrypt(msg, seq))
    }
}

// Random bytes and tickets.

#[derive(Debug)]
struct Random(&'static dyn SecureRandom);

impl SecureRandom for Random {
    fn fill(&self, buf: &mut [u8]) -> Result<(), GetRandomFailed> {
        timed(Category::Random, || self.0.fill(buf))
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

#[derive(Debug)]
struct Tickets(Arc<dyn ProducesTickets>);

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        self.0.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.0.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        timed(Category::Tickets, || self.0.encrypt(plain))
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        timed(Category::Tickets, || self.0.decrypt(cipher))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Spins until this thread has used `d` of CPU (the clock the timed calls read; a
    /// sleep would use none).
    fn burn(d: Duration) {
        let t = ThreadCpu::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn nested_time_counts_once_to_the_inner_category() {
        take();
        timed(Category::KeySchedule, || {
            burn(Duration::from_millis(5));
            timed(Category::KeyExchange, || {
                burn(Duration::from_millis(50));
            });
        });
        let t = take();
        let kx = t.ns[Category::KeyExchange.index()];
        let ks = t.ns[Category::KeySchedule.index()];
        assert!(kx >= 50_000_000, "{t:?}");
        // Counted twice, the outer category would hold the inner's time too (ks > kx);
        // counted once it holds only its own 5 ms of CPU (and the clock reads).
        assert!(ks >= 5_000_000 && ks < kx, "{t:?}");
        assert_eq!(t.calls[Category::KeyExchange.index()], 1);
        assert_eq!(t.calls[Category::KeySchedule.index()], 1);
        assert_eq!(take(), Tally::default());
    }

    #[test]
    fn the_wrapped_provider_keeps_every_algorithm() {
        for p in Provider::ALL {
            let base = p.crypto_provider();
            let w = provider(p);
            assert_eq!(w.cipher_suites.len(), base.cipher_suites.len());
            for (a, b) in w.cipher_suites.iter().zip(&base.cipher_suites) {
                assert_eq!(a.suite(), b.suite());
            }
            let names = |v: &[&'static dyn SupportedKxGroup]| {
                v.iter().map(|g| g.name()).collect::<Vec<_>>()
            };
            assert_eq!(names(&w.kx_groups), names(&base.kx_groups));
            let (wa, ba) = (
                w.signature_verification_algorithms,
                base.signature_verification_algorithms,
            );
            assert_eq!(wa.all.len(), ba.all.len());
            assert_eq!(wa.mapping.len(), ba.mapping.len());
        }
    }

    #[test]
    fn clock_bias_is_small_and_leaves_the_tally() {
        take();
        timed(Category::Sign, || ());
        let bias = clock_bias_ns();
        assert!(bias > 0.0 && bias < 10_000.0, "{bias}");
        assert_eq!(take().calls[Category::Sign.index()], 1);
    }
}
