//! Why a chain is not valid, in plain words and as a stable machine-readable code:
//! webpki's errors print as Rust `Debug` text (`CertExpired { time: UnixTime(…), … }`),
//! which is no message for a person and no key for a program.

use rustls_pki_types::UnixTime;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A verification failure, described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// Stable code (snake case), e.g. `cert_expired`, `name_mismatch`, `unknown_issuer`.
    pub code: &'static str,
    /// A sentence with the facts (dates, names).
    pub message: String,
}

pub(crate) fn date(t: UnixTime) -> String {
    i64::try_from(t.as_secs())
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|d| d.format(&Rfc3339).ok())
        .unwrap_or_else(|| format!("{} s after 1970", t.as_secs()))
}

/// `DnsName("a.example")` → `a.example`, `IpAddress(127.0.0.1)` → `127.0.0.1`: how
/// webpki lists the names a certificate presents.
pub(crate) fn presented_name(debug: &str) -> String {
    let inner = debug
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(debug);
    inner.trim_matches('"').to_string()
}

/// Describes `e` (`name` is the server name verified against).
pub fn describe(e: &webpki::Error, name: &str) -> Reason {
    use webpki::Error as E;
    let r = |code, message: String| Reason { code, message };
    match e {
        E::CertExpired { time, not_after } => r(
            "cert_expired",
            format!(
                "a certificate of the chain expired at {} (checked at {})",
                date(*not_after),
                date(*time)
            ),
        ),
        E::CertNotValidYet { time, not_before } => r(
            "cert_not_yet_valid",
            format!(
                "a certificate of the chain is not valid before {} (checked at {})",
                date(*not_before),
                date(*time)
            ),
        ),
        E::CertNotValidForName(ctx) => {
            let names: Vec<String> = ctx.presented.iter().map(|p| presented_name(p)).collect();
            r(
                "name_mismatch",
                if names.is_empty() {
                    format!("the certificate is not valid for {name}: it names no host")
                } else {
                    format!(
                        "the certificate is not valid for {name}: it is for {}",
                        names.join(", ")
                    )
                },
            )
        }
        E::UnknownIssuer => r(
            "unknown_issuer",
            "no trust anchor in the store issued the chain (unknown issuer): the root is \
             missing from the store, or an intermediate is missing from the chain"
                .into(),
        ),
        E::CertRevoked => r(
            "cert_revoked",
            "a certificate of the chain is revoked".into(),
        ),
        E::InvalidSignatureForPublicKey => r(
            "bad_signature",
            "a signature in the chain does not verify with its issuer's public key".into(),
        ),
        E::UnsupportedSignatureAlgorithmContext(_)
        | E::UnsupportedSignatureAlgorithmForPublicKeyContext(_)
        | E::SignatureAlgorithmMismatch => r(
            "unsupported_signature_algorithm",
            "a certificate of the chain is signed with an algorithm this verifier does not \
             accept (or one that does not match the issuer's key)"
                .into(),
        ),
        E::CaUsedAsEndEntity => r(
            "ca_used_as_leaf",
            "the leaf certificate is a CA certificate".into(),
        ),
        E::EndEntityUsedAsCa => r(
            "leaf_used_as_ca",
            "a certificate that is not a CA issued another one of the chain".into(),
        ),
        E::RequiredEkuNotFoundContext(_) | E::EmptyEkuExtension => r(
            "not_for_server_auth",
            "a certificate of the chain is not allowed for TLS servers (extended key usage \
             without serverAuth)"
                .into(),
        ),
        E::PathLenConstraintViolated => r(
            "path_len_exceeded",
            "the chain is longer than a CA's path length constraint allows".into(),
        ),
        E::NameConstraintViolation => r(
            "name_constraint_violated",
            format!("a CA's name constraints do not allow {name}"),
        ),
        E::MaximumSignatureChecksExceeded
        | E::MaximumPathBuildCallsExceeded
        | E::MaximumNameConstraintComparisonsExceeded
        | E::MaximumPathDepthExceeded => r(
            "budget_exhausted",
            "webpki gave up: building a path took more than its work budget (at most 100 \
             signature checks per verification, 6 certificates deep)"
                .into(),
        ),
        E::BadDer | E::BadDerTime | E::TrailingData(_) | E::MalformedExtensions => r(
            "malformed_certificate",
            "a certificate of the chain is not well-formed DER".into(),
        ),
        E::UnsupportedCriticalExtension => r(
            "unsupported_critical_extension",
            "a certificate of the chain has a critical extension this verifier does not know"
                .into(),
        ),
        E::InvalidCertValidity => r(
            "invalid_validity",
            "a certificate of the chain ends its validity before it begins".into(),
        ),
        E::UnsupportedCertVersion => r(
            "unsupported_version",
            "a certificate of the chain is not an X.509 v3 certificate".into(),
        ),
        E::CertDistrusted => r(
            "cert_distrusted",
            "a certificate's public key is explicitly distrusted".into(),
        ),
        E::ExtensionValueInvalid
        | E::InvalidSerialNumber
        | E::MalformedDnsIdentifier
        | E::MalformedNameConstraint
        | E::InvalidNetworkMaskConstraint
        | E::UnsupportedNameType => r(
            "malformed_certificate",
            format!(
                "a certificate of the chain has an invalid field ({})",
                words(e)
            ),
        ),
        other => r("other", format!("the chain is not valid: {}", words(other))),
    }
}

/// An error's variant name in words: `CrlExpired { … }` → `crl expired`.
fn words(e: &webpki::Error) -> String {
    let debug = format!("{e:?}");
    let name = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_names_in_plain_words() {
        let e = webpki::Error::CertExpired {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_893_456_000)),
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_827_566_967)),
        };
        let d = describe(&e, "localhost");
        assert_eq!(d.code, "cert_expired");
        assert_eq!(
            d.message,
            "a certificate of the chain expired at 2027-11-30T09:29:27Z (checked at \
             2030-01-01T00:00:00Z)"
        );
        assert!(!d.message.contains("UnixTime"));
        assert_eq!(presented_name("DnsName(\"localhost\")"), "localhost");
        assert_eq!(presented_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(
            describe(&webpki::Error::UnknownIssuer, "x").code,
            "unknown_issuer"
        );
        let crl = describe(&webpki::Error::UnsupportedDeltaCrl, "x");
        assert_eq!(crl.message, "the chain is not valid: unsupported delta crl");
    }
}
