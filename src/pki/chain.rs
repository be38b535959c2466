//! A realistic test PKI: root CA → intermediate CA → server leaf and client leaf, like the
//! ones cfssl or mkcert make, held in memory and written to a directory.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rand::RngCore;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::Serialize;
use time::{Duration, OffsetDateTime};

use super::{KeyType, PkiError, sha256_hex};
use crate::files::{self, FileMode, Staging};

/// The longest validity `--days` accepts (100 years).
pub const MAX_DAYS: u32 = 36_500;

/// What to generate.
#[derive(Debug, Clone)]
pub struct PkiOptions {
    /// Key type of the root and intermediate CAs.
    pub ca_key: KeyType,
    /// Key type of the server and client leaves.
    pub leaf_key: KeyType,
    /// Subject alternative names of the server leaf: IP addresses or DNS names.
    pub sans: Vec<String>,
    /// Validity of every certificate, in days from now.
    pub days: u32,
}

impl PkiOptions {
    /// Checks the options without generating anything: `days` in range, every SAN an IP
    /// address or a valid DNS name.
    pub fn validate(&self) -> Result<(), PkiError> {
        if self.days == 0 || self.days > MAX_DAYS {
            return Err(PkiError::BadParam {
                name: "--days",
                reason: format!("{} is out of range 1..={MAX_DAYS}", self.days),
            });
        }
        parse_sans(&self.sans).map(|_| ())
    }

    /// The default server SANs: `localhost`, `127.0.0.1`, `::1`.
    pub fn default_sans() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
    }
}

impl Default for PkiOptions {
    fn default() -> Self {
        PkiOptions {
            ca_key: KeyType::EcdsaP256,
            leaf_key: KeyType::EcdsaP256,
            sans: Self::default_sans(),
            days: 365,
        }
    }
}

/// One generated certificate with its private key.
pub struct Issued {
    /// The certificate, DER.
    pub der: CertificateDer<'static>,
    /// The certificate, PEM.
    pub pem: String,
    /// The private key.
    pub key: KeyPair,
    /// What was generated, for listings.
    pub summary: CertSummary,
}

impl Issued {
    /// The private key as PKCS#8 DER, for rustls configs.
    pub fn private_key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }
}

/// A description of a generated certificate.
#[derive(Debug, Clone, Serialize)]
pub struct CertSummary {
    /// Role in the PKI: `root`, `intermediate`, `server` or `client`.
    pub role: &'static str,
    /// Subject common name.
    pub subject: String,
    /// Key type.
    pub key: KeyType,
    /// Extended key usages (`serverAuth`, `clientAuth`), empty for CAs.
    pub eku: Vec<&'static str>,
    /// Subject alternative names.
    pub sans: Vec<String>,
    /// End of validity, RFC 3339.
    pub not_after: String,
    /// SHA-256 fingerprint of the DER, lowercase hex.
    pub sha256: String,
}

/// A complete test PKI in memory.
pub struct TestPki {
    /// Self-signed root CA.
    pub root: Issued,
    /// Intermediate CA, signed by the root (path length 0).
    pub intermediate: Issued,
    /// Server leaf (serverAuth), signed by the intermediate.
    pub server: Issued,
    /// Client leaf (clientAuth), signed by the intermediate.
    pub client: Issued,
}

impl TestPki {
    /// Generates a new PKI. Fresh keys every time; CA names carry a random suffix so that
    /// several PKIs can live in one trust store without subject clashes.
    pub fn generate(opts: &PkiOptions) -> Result<TestPki, PkiError> {
        opts.validate()?;
        let sans = parse_sans(&opts.sans)?;
        // Certificates carry whole seconds; so do the summaries.
        let now = OffsetDateTime::now_utc()
            .replace_nanosecond(0)
            .unwrap_or(OffsetDateTime::now_utc());
        let not_before = now - Duration::hours(1);
        let not_after = now + Duration::days(i64::from(opts.days));
        let tag = random_tag();

        let root_cn = format!("tlsperf Test Root CA {tag}");
        let int_cn = format!("tlsperf Test Intermediate CA {tag}");
        let server_cn = opts.sans.first().cloned().unwrap_or_default();
        let client_cn = "tlsperf test client".to_string();

        let root_key = opts.ca_key.generate()?;
        let mut root_params = base_params(root_cn.clone(), not_before, not_after);
        root_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        root_params.key_usages = ca_key_usages();
        let root_cert = root_params
            .self_signed(&root_key)
            .map_err(sign_err("root"))?;
        let root_issuer = Issuer::new(root_params, &root_key);

        let int_key = opts.ca_key.generate()?;
        let mut int_params = base_params(int_cn.clone(), not_before, not_after);
        int_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        int_params.key_usages = ca_key_usages();
        int_params.use_authority_key_identifier_extension = true;
        let int_cert = int_params
            .signed_by(&int_key, &root_issuer)
            .map_err(sign_err("intermediate"))?;
        let int_issuer = Issuer::new(int_params, &int_key);

        let server_key = opts.leaf_key.generate()?;
        let mut server_params = base_params(server_cn.clone(), not_before, not_after);
        server_params.subject_alt_names = sans;
        server_params.key_usages = leaf_key_usages(opts.leaf_key);
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        server_params.use_authority_key_identifier_extension = true;
        let server_cert = server_params
            .signed_by(&server_key, &int_issuer)
            .map_err(sign_err("server"))?;

        let client_key = opts.leaf_key.generate()?;
        let mut client_params = base_params(client_cn.clone(), not_before, not_after);
        client_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        client_params.use_authority_key_identifier_extension = true;
        let client_cert = client_params
            .signed_by(&client_key, &int_issuer)
            .map_err(sign_err("client"))?;

        let issued = |role, subject, cert: rcgen::Certificate, key, key_type, eku| {
            let der = cert.der().clone();
            let summary = CertSummary {
                role,
                subject,
                key: key_type,
                eku,
                sans: if role == "server" {
                    opts.sans.clone()
                } else {
                    Vec::new()
                },
                not_after: rfc3339(not_after),
                sha256: sha256_hex(&der),
            };
            Issued {
                pem: cert.pem(),
                der,
                key,
                summary,
            }
        };
        drop(root_issuer);
        drop(int_issuer);
        Ok(TestPki {
            root: issued("root", root_cn, root_cert, root_key, opts.ca_key, vec![]),
            intermediate: issued(
                "intermediate",
                int_cn,
                int_cert,
                int_key,
                opts.ca_key,
                vec![],
            ),
            server: issued(
                "server",
                server_cn,
                server_cert,
                server_key,
                opts.leaf_key,
                vec!["serverAuth"],
            ),
            client: issued(
                "client",
                client_cn,
                client_cert,
                client_key,
                opts.leaf_key,
                vec!["clientAuth"],
            ),
        })
    }

    /// The server's chain as sent in a handshake: leaf, then intermediate.
    pub fn server_chain(&self) -> Vec<CertificateDer<'static>> {
        vec![self.server.der.clone(), self.intermediate.der.clone()]
    }

    /// The client's chain as sent in a handshake: leaf, then intermediate.
    pub fn client_chain(&self) -> Vec<CertificateDer<'static>> {
        vec![self.client.der.clone(), self.intermediate.der.clone()]
    }

    /// The files of a PKI directory: name, contents, mode, description.
    pub fn files(&self) -> Vec<(&'static str, String, FileMode, &'static str)> {
        let chain = |leaf: &Issued| format!("{}{}", leaf.pem, self.intermediate.pem);
        vec![
            (
                "root.pem",
                self.root.pem.clone(),
                FileMode::Public,
                "root CA certificate",
            ),
            (
                "intermediate.pem",
                self.intermediate.pem.clone(),
                FileMode::Public,
                "intermediate CA certificate",
            ),
            (
                "server.pem",
                self.server.pem.clone(),
                FileMode::Public,
                "server leaf certificate",
            ),
            (
                "server.key",
                self.server.key.serialize_pem(),
                FileMode::Private,
                "server private key (PKCS#8)",
            ),
            (
                "server-chain.pem",
                chain(&self.server),
                FileMode::Public,
                "server leaf + intermediate",
            ),
            (
                "client.pem",
                self.client.pem.clone(),
                FileMode::Public,
                "client leaf certificate",
            ),
            (
                "client.key",
                self.client.key.serialize_pem(),
                FileMode::Private,
                "client private key (PKCS#8)",
            ),
            (
                "client-chain.pem",
                chain(&self.client),
                FileMode::Public,
                "client leaf + intermediate",
            ),
        ]
    }

    /// Summaries of the four certificates, root first.
    pub fn summaries(&self) -> Vec<CertSummary> {
        [&self.root, &self.intermediate, &self.server, &self.client]
            .into_iter()
            .map(|i| i.summary.clone())
            .collect()
    }
}

/// A file written by [`write_pki`].
#[derive(Debug, Clone, Serialize)]
pub struct WrittenFile {
    /// Where it is.
    pub path: PathBuf,
    /// What it holds.
    pub contents: &'static str,
    /// Unix permission bits, e.g. `0600`.
    pub mode: String,
}

/// The file names [`write_pki`] creates in its directory.
pub const PKI_FILE_NAMES: [&str; 8] = [
    "root.pem",
    "intermediate.pem",
    "server.pem",
    "server.key",
    "server-chain.pem",
    "client.pem",
    "client.key",
    "client-chain.pem",
];

/// Checks that `dir` can take a PKI (with extra files named `extra`, see
/// [`write_pki_with`]): creates it if needed and, unless `overwrite`, fails naming every
/// PKI file that already exists. Call it before generating keys so a refusal costs
/// nothing.
pub fn prepare_dir_with(dir: &Path, overwrite: bool, extra: &[&str]) -> Result<(), PkiError> {
    if dir.exists() && !dir.is_dir() {
        return Err(PkiError::BadParam {
            name: "DIR",
            reason: format!("{} exists and is not a directory", dir.display()),
        });
    }
    files::create_dir_all(dir)?;
    if !overwrite {
        let paths: Vec<PathBuf> = PKI_FILE_NAMES
            .iter()
            .chain(extra)
            .map(|n| dir.join(n))
            .collect();
        files::check_absent(paths.iter().map(PathBuf::as_path))?;
    }
    Ok(())
}

/// Writes the PKI's files into `dir` (created if needed): all are staged first and
/// renamed into place together; private keys are 0600 from the start. Without
/// `overwrite`, nothing is written if any of the files exists.
pub fn write_pki(pki: &TestPki, dir: &Path, overwrite: bool) -> Result<Vec<WrittenFile>, PkiError> {
    write_pki_with(pki, dir, overwrite, Vec::new())
}

/// A public file written beside a PKI's (e.g. `ocsp.der`).
pub struct ExtraFile {
    /// File name in the PKI directory.
    pub name: &'static str,
    /// Its bytes.
    pub contents: Vec<u8>,
    /// What it holds, for listings.
    pub what: &'static str,
}

/// [`write_pki`] plus `extra` public files, staged and renamed into place with the others.
pub fn write_pki_with(
    pki: &TestPki,
    dir: &Path,
    overwrite: bool,
    extra: Vec<ExtraFile>,
) -> Result<Vec<WrittenFile>, PkiError> {
    let names: Vec<&str> = extra.iter().map(|f| f.name).collect();
    prepare_dir_with(dir, overwrite, &names)?;
    let mut staging = Staging::new(overwrite);
    let mut written = Vec::new();
    let files = pki
        .files()
        .into_iter()
        .map(|(name, contents, mode, what)| (name, contents.into_bytes(), mode, what))
        .chain(
            extra
                .into_iter()
                .map(|f| (f.name, f.contents, FileMode::Public, f.what)),
        );
    for (name, contents, mode, what) in files {
        let path = dir.join(name);
        staging.add(&path, &contents, mode)?;
        written.push(WrittenFile {
            path,
            contents: what,
            mode: format!("{:04o}", mode.bits()),
        });
    }
    staging.commit()?;
    Ok(written)
}

fn base_params(
    cn: String,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "tlsperf");
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.not_before = not_before;
    params.not_after = not_after;
    params.serial_number = Some(random_serial());
    params
}

fn ca_key_usages() -> Vec<KeyUsagePurpose> {
    vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ]
}

fn leaf_key_usages(key: KeyType) -> Vec<KeyUsagePurpose> {
    let mut usages = vec![KeyUsagePurpose::DigitalSignature];
    if key.is_rsa() {
        // TLS 1.2 RSA key exchange needs it; harmless otherwise.
        usages.push(KeyUsagePurpose::KeyEncipherment);
    }
    usages
}

/// A positive 16-byte serial number (RFC 5280: positive, at most 20 octets).
pub(crate) fn random_serial() -> SerialNumber {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    SerialNumber::from_slice(&bytes)
}

fn random_tag() -> String {
    let mut bytes = [0u8; 3];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_sans(sans: &[String]) -> Result<Vec<SanType>, PkiError> {
    if sans.is_empty() {
        return Err(PkiError::BadParam {
            name: "--san",
            reason: "the server certificate needs at least one subject alternative name".into(),
        });
    }
    sans.iter()
        .map(|s| {
            if let Ok(ip) = s.parse::<IpAddr>() {
                return Ok(SanType::IpAddress(ip));
            }
            let bad = || PkiError::BadSan { san: s.clone() };
            rustls_pki_types::DnsName::try_from(s.as_str()).map_err(|_| bad())?;
            let ia5 = rcgen::string::Ia5String::try_from(s.as_str()).map_err(|_| bad())?;
            Ok(SanType::DnsName(ia5))
        })
        .collect()
}

fn sign_err(what: &'static str) -> impl Fn(rcgen::Error) -> PkiError {
    move |source| PkiError::Sign {
        what: what.to_string(),
        source,
    }
}

pub(crate) fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_sans_and_days() {
        let opts = PkiOptions {
            sans: vec!["not a name!".into()],
            ..Default::default()
        };
        let err = TestPki::generate(&opts).err().unwrap();
        assert!(err.to_string().contains("not a name!"), "{err}");
        let opts = PkiOptions {
            days: 0,
            ..Default::default()
        };
        assert!(TestPki::generate(&opts).is_err());
    }

    #[test]
    fn serials_are_positive() {
        for _ in 0..100 {
            let s = random_serial().to_bytes();
            assert_eq!(s.len(), 16);
            assert!(s[0] & 0x80 == 0 && s[0] != 0);
        }
    }
}
