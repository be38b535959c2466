//! The minimal trust bundle for a set of servers: the fewest anchors of a source store that
//! still verify every given chain (PEM files of leaf + intermediates, or `host:port` whose
//! chain is fetched with a handshake). Each chain is checked with rustls's own path
//! validation before and after trimming; nothing is produced if any chain fails.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::server::ParsedCertificate;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use serde::Serialize;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::TrustError;
use super::analyze::common_name;
use super::pem;
use super::store::TrustStore;
use crate::pki::sha256_hex;
use crate::tls::Provider;
use crate::tls::danger::InsecureVerifier;

/// A chain to keep working.
#[derive(Debug, Clone)]
pub struct Chain {
    /// Where it came from (file path or `host:port`).
    pub name: String,
    /// Leaf first, then intermediates (and possibly a root), as presented.
    pub certs: Vec<CertificateDer<'static>>,
}

/// Reads a chain file: PEM (or one DER certificate), leaf first.
pub fn chain_from_file(path: &Path) -> Result<Chain, TrustError> {
    let bytes = crate::files::read_input(path, crate::files::InputKind::Pem).map_err(|e| {
        TrustError::Read {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    })?;
    let decoded = pem::decode(&bytes);
    if let Some(p) = decoded.problems.iter().find(|p| !p.ignored) {
        return Err(TrustError::BadChain {
            name: path.display().to_string(),
            reason: format!("line {}: {}", p.line, p.reason),
        });
    }
    if decoded.certs.is_empty() {
        return Err(TrustError::BadChain {
            name: path.display().to_string(),
            reason: "no certificate in the file".into(),
        });
    }
    Ok(Chain {
        name: path.display().to_string(),
        certs: decoded.certs.into_iter().map(|c| c.der).collect(),
    })
}

/// Splits `host:port` (`[v6]:port` for IPv6; port 443 when absent).
pub fn parse_target(target: &str) -> Result<(String, u16), TrustError> {
    let bad = |why: &str| TrustError::BadTarget {
        target: target.to_string(),
        reason: why.to_string(),
    };
    let t = target
        .strip_prefix("https://")
        .unwrap_or(target)
        .trim_end_matches('/');
    let (host, port) = if let Some(rest) = t.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        match after.strip_prefix(':') {
            Some(p) => (h, Some(p)),
            None if after.is_empty() => (h, None),
            None => return Err(bad("unexpected text after ']'")),
        }
    } else {
        match t.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => return Err(bad("IPv6 addresses need brackets: [::1]:443")),
            None => (t, None),
        }
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let port = match port {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| bad("the port is not a number from 1 to 65535"))?,
        None => 443,
    };
    if port == 0 {
        return Err(bad("port 0"));
    }
    ServerName::try_from(host.to_string())
        .map_err(|_| bad("not a valid host name or IP address"))?;
    Ok((host.to_string(), port))
}

/// Fetches the chain a server presents, with a real TLS handshake (TLS 1.2 or 1.3).
/// The handshake checks the server's signature but not its chain: that is judged later
/// against the stores.
pub fn fetch_chain(
    target: &str,
    provider: Provider,
    timeout: Duration,
) -> Result<Chain, TrustError> {
    let (host, port) = parse_target(target)?;
    let fail = |reason: String| TrustError::Fetch {
        target: target.to_string(),
        reason,
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| fail(format!("cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| fail(format!("{host} has no address")))?;
    let mut tcp = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| fail(format!("connect to {addr}: {e}")))?;
    tcp.set_read_timeout(Some(timeout))
        .map_err(|e| fail(e.to_string()))?;
    tcp.set_write_timeout(Some(timeout))
        .map_err(|e| fail(e.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider.crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(InsecureVerifier::new(
            provider.crypto_provider(),
        )))
        .with_no_client_auth();
    let name = ServerName::try_from(host.clone()).map_err(|e| fail(e.to_string()))?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| fail(e.to_string()))?;
    while conn.is_handshaking() {
        match conn.complete_io(&mut tcp) {
            Ok((0, 0)) if conn.is_handshaking() => {
                return Err(fail(
                    "the server closed the connection during the handshake".into(),
                ));
            }
            Ok(_) => {}
            // A read or write timeout on a blocking socket ends as EAGAIN/EWOULDBLOCK.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(fail(format!(
                    "no answer from {addr} within {} during the TLS handshake",
                    humantime::format_duration(timeout)
                )));
            }
            Err(e) => return Err(fail(format!("TLS handshake: {e}"))),
        }
    }
    conn.send_close_notify();
    let _ = conn.complete_io(&mut tcp);
    let _ = tcp.flush();
    let mut sink = [0u8; 1];
    let _ = tcp.read(&mut sink);
    let certs = conn
        .peer_certificates()
        .map(|c| c.to_vec())
        .unwrap_or_default();
    if certs.is_empty() {
        return Err(fail("the server sent no certificate".into()));
    }
    Ok(Chain {
        name: format!("{host}:{port}"),
        certs,
    })
}

/// Options of a trim.
#[derive(Debug, Clone)]
pub struct TrimOptions {
    /// Validation time.
    pub at: UnixTime,
    /// Signature algorithms come from this provider.
    pub provider: Provider,
    /// SHA-256 fingerprints (hex, colons allowed) of anchors to keep regardless.
    pub also_keep: Vec<String>,
}

/// An anchor in the trim result.
#[derive(Debug, Clone, Serialize)]
pub struct AnchorRow {
    /// Subject common name.
    pub subject_cn: String,
    /// SHA-256 fingerprint.
    pub sha256: String,
    /// Chains this anchor verifies (kept anchors only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verifies: Vec<String>,
    /// Kept because of `--also-keep`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub also_kept: bool,
}

/// The result of a trim.
#[derive(Debug, Clone, Serialize)]
pub struct Trimmed {
    /// The source store, for humans.
    pub source: String,
    /// Distinct anchors in the source (duplicate certificates counted once, as `trust
    /// load` counts them).
    pub source_anchors: usize,
    /// Certificates in the source.
    pub source_certificates: usize,
    /// Kept anchors.
    pub kept: Vec<AnchorRow>,
    /// Removed anchors.
    pub removed: Vec<AnchorRow>,
    /// Each chain, with the anchors of the source that verify it.
    pub chains: Vec<ChainRow>,
    /// The trimmed bundle, PEM.
    #[serde(skip)]
    pub pem: String,
}

/// One chain of the trim.
#[derive(Debug, Clone, Serialize)]
pub struct ChainRow {
    /// File or `host:port`.
    pub name: String,
    /// Leaf subject common name.
    pub leaf: String,
    /// Certificates presented.
    pub length: usize,
    /// Fingerprints of every source anchor that verifies it.
    pub verified_by: Vec<String>,
}

/// Computes the minimal anchor set of `store` that verifies every chain.
pub fn trim(
    store: &TrustStore,
    chains: &[Chain],
    opts: &TrimOptions,
) -> Result<Trimmed, TrustError> {
    if store.certs().is_empty() {
        return Err(TrustError::AnchorsOnly {
            origin: store.origin().to_string(),
        });
    }
    if chains.is_empty() {
        return Err(TrustError::BadChain {
            name: "--keep-for".into(),
            reason: "no chain given".into(),
        });
    }
    let algs = opts
        .provider
        .crypto_provider()
        .signature_verification_algorithms;
    let anchors = store.anchors();
    let fingerprints: Vec<String> = store.certs().iter().map(|c| sha256_hex(c)).collect();

    let mut rows = Vec::with_capacity(chains.len());
    let mut coverers: Vec<BTreeSet<usize>> = Vec::with_capacity(chains.len());
    for chain in chains {
        let ok = anchors_verifying(store, chain, opts.at, algs)?;
        rows.push(ChainRow {
            name: chain.name.clone(),
            leaf: leaf_cn(&chain.certs[0]),
            length: chain.certs.len(),
            verified_by: ok.iter().map(|&i| fingerprints[i].clone()).collect(),
        });
        coverers.push(ok);
    }
    let mut kept = greedy_cover(&coverers);
    let also = also_keep(store, &fingerprints, &opts.also_keep)?;
    kept.extend(also.iter().copied());

    // Check every chain against the trimmed set with the real verifier.
    let trimmed = RootCertStore {
        roots: kept.iter().map(|&i| anchors[i].clone()).collect(),
    };
    check_trimmed(chains, &trimmed, opts.at, algs)?;

    let row = |i: usize, verifies: Vec<String>| AnchorRow {
        subject_cn: leaf_cn(&store.certs()[i]),
        sha256: fingerprints[i].clone(),
        verifies,
        also_kept: also.contains(&i),
    };
    let kept_rows = kept
        .iter()
        .map(|&i| {
            let names = chains
                .iter()
                .zip(&coverers)
                .filter(|(_, c)| c.contains(&i))
                .map(|(ch, _)| ch.name.clone())
                .collect();
            row(i, names)
        })
        .collect();
    let removed = (0..anchors.len())
        .filter(|i| !kept.contains(i))
        .map(|i| row(i, Vec::new()))
        .collect();
    let mut pem = String::new();
    for &i in &kept {
        pem.push_str(&format!(
            "# {}\n# SHA-256 {}\n",
            leaf_cn(&store.certs()[i]),
            fingerprints[i]
        ));
        pem.push_str(&to_pem(&store.certs()[i]));
    }
    Ok(Trimmed {
        source: store.origin().to_string(),
        source_anchors: fingerprints
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        source_certificates: anchors.len(),
        kept: kept_rows,
        removed,
        chains: rows,
        pem,
    })
}

/// The anchors of `store` (their indexes) that each verify `chain` alone; none is an
/// error that says why the whole store does not verify it either.
fn anchors_verifying(
    store: &TrustStore,
    chain: &Chain,
    at: UnixTime,
    algs: WebPkiSupportedAlgorithms,
) -> Result<BTreeSet<usize>, TrustError> {
    let leaf = ParsedCertificate::try_from(&chain.certs[0]).map_err(|e| TrustError::BadChain {
        name: chain.name.clone(),
        reason: format!("the leaf is not a usable certificate: {e}"),
    })?;
    let rest = &chain.certs[1..];
    // Every anchor whose subject names the issuer of a presented certificate is a
    // candidate; each is tried alone with rustls's path validation.
    let issuers: Vec<&[u8]> = chain
        .certs
        .iter()
        .filter_map(|c| crate::der::cert_names(c).map(|n| n.issuer))
        .collect();
    let mut ok = BTreeSet::new();
    for (i, anchor) in store.anchors().iter().enumerate() {
        if !issuers.iter().any(|iss| *iss == anchor.subject.as_ref()) {
            continue;
        }
        let single = RootCertStore {
            roots: vec![anchor.clone()],
        };
        if verify_server_cert_signed_by_trust_anchor(&leaf, &single, rest, at, algs.all).is_ok() {
            ok.insert(i);
        }
    }
    if ok.is_empty() {
        let full = store.root_cert_store();
        let reason =
            match verify_server_cert_signed_by_trust_anchor(&leaf, &full, rest, at, algs.all) {
                Err(e) => e.to_string(),
                Ok(()) => {
                    "verified by the whole store only through a path no single anchor completes"
                        .into()
                }
            };
        return Err(TrustError::Unverifiable {
            name: chain.name.clone(),
            origin: store.origin().to_string(),
            reason,
        });
    }
    Ok(ok)
}

/// Greedy set cover of the chains (`coverers[c]`: the anchors that verify chain `c`):
/// the anchor verifying most uncovered chains first, the lowest index on a tie.
fn greedy_cover(coverers: &[BTreeSet<usize>]) -> BTreeSet<usize> {
    let mut kept: BTreeSet<usize> = BTreeSet::new();
    let mut uncovered: BTreeSet<usize> = (0..coverers.len()).collect();
    while !uncovered.is_empty() {
        let mut best: Option<(usize, usize)> = None;
        for &c in &uncovered {
            for &a in &coverers[c] {
                let n = uncovered
                    .iter()
                    .filter(|&&u| coverers[u].contains(&a))
                    .count();
                if best.is_none_or(|(bn, ba)| n > bn || (n == bn && a < ba)) {
                    best = Some((n, a));
                }
            }
        }
        let Some((_, a)) = best else { break };
        kept.insert(a);
        uncovered.retain(|&u| !coverers[u].contains(&a));
    }
    kept
}

/// The anchors named by `--also-keep` (SHA-256 fingerprints, colons allowed, any case),
/// by index; one the store lacks is an error.
fn also_keep(
    store: &TrustStore,
    fingerprints: &[String],
    also_keep: &[String],
) -> Result<BTreeSet<usize>, TrustError> {
    let mut also = BTreeSet::new();
    for fp in also_keep {
        let want: String = fp
            .chars()
            .filter(|c| *c != ':')
            .collect::<String>()
            .to_ascii_lowercase();
        match fingerprints.iter().position(|f| *f == want) {
            Some(i) => {
                also.insert(i);
            }
            None => {
                return Err(TrustError::UnknownFingerprint {
                    fingerprint: fp.clone(),
                    origin: store.origin().to_string(),
                });
            }
        }
    }
    Ok(also)
}

/// Verifies every chain against the trimmed anchors with rustls's path validation.
fn check_trimmed(
    chains: &[Chain],
    trimmed: &RootCertStore,
    at: UnixTime,
    algs: WebPkiSupportedAlgorithms,
) -> Result<(), TrustError> {
    for chain in chains {
        let leaf =
            ParsedCertificate::try_from(&chain.certs[0]).map_err(|e| TrustError::BadChain {
                name: chain.name.clone(),
                reason: e.to_string(),
            })?;
        verify_server_cert_signed_by_trust_anchor(&leaf, trimmed, &chain.certs[1..], at, algs.all)
            .map_err(|e| TrustError::Unverifiable {
                name: chain.name.clone(),
                origin: "the trimmed store".into(),
                reason: e.to_string(),
            })?;
    }
    Ok(())
}

/// The chains named on the command line: existing files are chain files, anything else
/// is a `host:port` to fetch.
pub fn resolve_chains(
    specs: &[String],
    provider: Provider,
    timeout: Duration,
) -> Result<Vec<Chain>, TrustError> {
    specs
        .iter()
        .map(|s| {
            let p = PathBuf::from(s);
            if p.exists() || looks_like_a_file(s) {
                chain_from_file(&p)
            } else {
                fetch_chain(s, provider, timeout)
            }
        })
        .collect()
}

/// Whether a `--keep-for` spec that names no existing file was meant as one (a path with a
/// directory, or a certificate file's extension), so that a mistyped file name is reported
/// missing instead of being looked up as a host name.
fn looks_like_a_file(spec: &str) -> bool {
    if spec.starts_with("https://") {
        return false;
    }
    let ext = Path::new(spec)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    spec.trim_end_matches('/').contains('/')
        || matches!(
            ext.as_deref(),
            Some("pem" | "crt" | "cer" | "der" | "chain")
        )
}

fn leaf_cn(der: &CertificateDer<'_>) -> String {
    X509Certificate::from_der(der)
        .map(|(_, c)| common_name(c.subject()))
        .unwrap_or_else(|_| "(unparsable)".into())
}

/// PEM text of one certificate.
pub fn to_pem(der: &CertificateDer<'_>) -> String {
    let b64 = base64_simd::STANDARD.encode_to_string(der.as_ref());
    let mut out = String::with_capacity(b64.len() + b64.len() / 64 + 60);
    out.push_str("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mistyped_chain_files_are_not_host_names() {
        for spec in ["nope.pem", "chains/leaf.pem", "./x", "LEAF.CRT"] {
            assert!(looks_like_a_file(spec), "{spec}");
        }
        for spec in [
            "example.com",
            "example.com:443",
            "https://example.com/",
            "[::1]:8443",
        ] {
            assert!(!looks_like_a_file(spec), "{spec}");
        }
        let err = resolve_chains(
            &["/nonexistent-dir-xyz/nope.pem".into()],
            Provider::default(),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, TrustError::Read { .. }), "{err}");
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("example.com:8443").unwrap(),
            ("example.com".into(), 8443)
        );
        assert_eq!(
            parse_target("example.com").unwrap(),
            ("example.com".into(), 443)
        );
        assert_eq!(parse_target("[::1]:9000").unwrap(), ("::1".into(), 9000));
        assert_eq!(
            parse_target("https://127.0.0.1:1/").unwrap(),
            ("127.0.0.1".into(), 1)
        );
        for bad in [
            "::1:443",
            "host:99999",
            "host:0",
            ":443",
            "[::1",
            "bad host:1",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
