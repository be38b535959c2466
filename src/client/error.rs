//! Why a connection or request failed, with a short kind for counting failures under load.

use std::io;
use std::net::SocketAddr;

use crate::error::{Classify, ErrorClass};

/// A failed connection or request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The name did not resolve.
    #[error("cannot resolve {host}")]
    Dns {
        /// The host name.
        host: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// TCP connect failed.
    #[error("cannot connect to {addr}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The server closed the connection before the handshake completed.
    #[error("the server closed (or reset) the connection during the TLS handshake")]
    ClosedMidHandshake,
    /// rustls refused the handshake or the peer sent an alert (said in words by
    /// [`tls_words`]; rustls's own text prints enum names).
    #[error("TLS handshake failed: {}", tls_words(error))]
    Tls {
        /// rustls's error.
        error: rustls::Error,
    },
    /// The server's first bytes are not a TLS record: most often the port of a plain-HTTP
    /// server (an HTTP response begins with a byte no TLS record type has).
    #[error(
        "the server's answer is not TLS: is this a plain-HTTP port? (tlsperf needs the port where TLS listens)"
    )]
    NotTls,
    /// A socket error.
    #[error("I/O error {during}")]
    Io {
        /// What was being done.
        during: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A step took longer than the timeout.
    #[error("timed out after {} {during}", humantime::format_duration(*.after))]
    Timeout {
        /// What was being done.
        during: &'static str,
        /// The timeout.
        after: std::time::Duration,
    },
    /// The HTTP response could not be read.
    #[error("bad HTTP response: {reason}")]
    Http {
        /// Why.
        reason: String,
    },
    /// The server answered with a status that does not count as a success
    /// ([`super::status::OkStatus`]).
    #[error("the server answered HTTP {status}, not a success (--ok-status {ok})")]
    Status {
        /// The status.
        status: u16,
        /// The statuses that count as a success.
        ok: String,
    },
    /// Stopped by the user (Ctrl-C) before anything was measured.
    #[error("interrupted before the first connection completed")]
    Interrupted,
    /// A QUIC connection or its HTTP/3 request failed (`handshake --http3`).
    #[error("QUIC: {reason}")]
    Quic {
        /// What happened, in words.
        reason: String,
    },
    /// The server answered our first Initial with a Version Negotiation packet that does
    /// not list our QUIC version (1): it speaks none we do.
    #[error(
        "QUIC: the server answered with Version Negotiation: it speaks no QUIC version we do (we speak version 1)"
    )]
    QuicVersion,
    /// A client configuration built for this connection could not be built (roots
    /// reloaded per connection).
    #[error("client configuration")]
    Config {
        /// The cause.
        #[source]
        source: crate::tls::choices::ConfigError,
    },
}

/// rustls's error in plain words. Its own texts print enum names and `Debug` text
/// (`invalid peer certificate: UnknownIssuer`, `received fatal alert: CertificateRequired`,
/// `DnsName("localhost")`).
pub fn tls_words(e: &rustls::Error) -> String {
    use rustls::Error as E;
    match e {
        E::InvalidCertificate(c) => {
            format!(
                "the server's certificate is not accepted: {}",
                certificate_words(c)
            )
        }
        E::AlertReceived(a) => {
            let name = crate::observe::tls::alert_name(u8::from(*a));
            let hint = match name.as_str() {
                "certificate_required" => ": it requires a client certificate (--cert, --key)",
                "protocol_version" => ": no TLS version in common (see --tls)",
                "handshake_failure" => {
                    ": no cipher suite, key-exchange group or signature scheme in common"
                }
                "unrecognized_name" => ": it serves no certificate for this server name (SNI)",
                "bad_certificate"
                | "unknown_ca"
                | "certificate_unknown"
                | "access_denied"
                | "decrypt_error" => ": it did not accept tlsperf's client certificate",
                "no_application_protocol" => ": no ALPN protocol in common",
                _ => "",
            };
            format!("the server sent the alert {name}{hint}")
        }
        E::PeerIncompatible(why) => {
            format!(
                "no setting in common with the server: {}",
                words(&format!("{why:?}"))
            )
        }
        E::PeerMisbehaved(why) => format!(
            "the server broke the TLS protocol: {}",
            words(&format!("{why:?}"))
        ),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the server sent a malformed or unexpected TLS message".into()
        }
        E::InappropriateHandshakeMessage { .. } => {
            "the server sent an unexpected handshake message".into()
        }
        E::NoCertificatesPresented => "the server sent no certificate".into(),
        E::DecryptError => "a record from the server does not decrypt".into(),
        E::PeerSentOversizedRecord => "the server sent a record larger than TLS allows".into(),
        E::NoApplicationProtocol => "no ALPN protocol in common with the server".into(),
        E::General(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Why a certificate was refused, in words.
fn certificate_words(c: &rustls::CertificateError) -> String {
    use crate::verify::reason::{date, presented_name};
    use rustls::CertificateError as C;
    match c {
        C::UnknownIssuer => "no trusted root issued its chain (unknown issuer): give its CA \
                             with --cacert, or the server's chain lacks an intermediate"
            .into(),
        C::NotValidForNameContext {
            expected,
            presented,
        } => {
            let names: Vec<String> = presented.iter().map(|p| presented_name(p)).collect();
            format!(
                "it is not valid for {}: it is for {}",
                expected.to_str(),
                match names.is_empty() {
                    true => "no host name".into(),
                    false => names.join(", "),
                }
            )
        }
        C::NotValidForName => "it is not valid for the server name".into(),
        C::ExpiredContext { time, not_after } => format!(
            "it expired at {} (checked at {})",
            date(*not_after),
            date(*time)
        ),
        C::Expired => "it has expired".into(),
        C::NotValidYetContext { time, not_before } => format!(
            "it is not valid before {} (checked at {})",
            date(*not_before),
            date(*time)
        ),
        C::NotValidYet => "it is not valid yet".into(),
        C::Revoked => "it is revoked".into(),
        C::BadSignature => "a signature in its chain does not verify".into(),
        C::BadEncoding => "it is not well-formed DER".into(),
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "it is not for TLS servers (extended key usage)".into()
        }
        C::UnhandledCriticalExtension => "it has a critical extension tlsperf does not know".into(),
        // tlsperf's own verifiers pass webpki's errors on as they are; said as `verify`
        // says them.
        C::Other(o) => match o.0.downcast_ref::<webpki::Error>() {
            Some(w) => crate::verify::reason::describe(w, "the server name").message,
            None => o.to_string(),
        },
        other => words(&format!("{other:?}")),
    }
}

/// `NoCipherSuitesInCommon` → `no cipher suites in common`: a variant name as words.
fn words(debug: &str) -> String {
    let name = debug.split(['(', '{', ' ']).next().unwrap_or(debug);
    let mut out = String::with_capacity(name.len() + 8);
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push(' ');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

impl ConnectError {
    /// A short name for counting failures by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ConnectError::Dns { .. } => "dns",
            ConnectError::Connect { source, .. } => match source.kind() {
                io::ErrorKind::ConnectionRefused => "connect-refused",
                io::ErrorKind::TimedOut => "connect-timeout",
                _ => "connect",
            },
            ConnectError::ClosedMidHandshake => "closed-mid-handshake",
            ConnectError::NotTls => "tls-not-tls",
            ConnectError::Tls { error } => match error {
                rustls::Error::InvalidCertificate(_) => "tls-certificate",
                rustls::Error::AlertReceived(_) => "tls-alert-received",
                rustls::Error::InvalidMessage(_) => "tls-not-tls",
                _ => "tls",
            },
            ConnectError::Io { source, .. } => match source.kind() {
                io::ErrorKind::ConnectionReset => "connection-reset",
                io::ErrorKind::UnexpectedEof => "closed-early",
                _ => "io",
            },
            ConnectError::Timeout { .. } => "timeout",
            ConnectError::Http { .. } => "http",
            ConnectError::Status { status, .. } if *status >= 500 => "http-5xx",
            ConnectError::Status { status, .. } if *status >= 400 => "http-4xx",
            ConnectError::Status { .. } => "http-status",
            ConnectError::Config { .. } => "client-config",
            ConnectError::Quic { .. } => "quic",
            ConnectError::QuicVersion => "quic-version-negotiation",
            ConnectError::Interrupted => "interrupted",
        }
    }
}

impl Classify for ConnectError {
    fn class(&self) -> ErrorClass {
        match self {
            ConnectError::Interrupted => ErrorClass::Interrupted,
            _ => ErrorClass::Runtime,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_are_said_in_words_not_enum_names() {
        use rustls::{AlertDescription, CertificateError, Error, PeerIncompatible};
        let said = |e: Error| ConnectError::Tls { error: e }.to_string();
        let s = said(Error::AlertReceived(AlertDescription::CertificateRequired));
        assert_eq!(
            s,
            "TLS handshake failed: the server sent the alert certificate_required: it \
             requires a client certificate (--cert, --key)"
        );
        let s = said(Error::InvalidCertificate(
            CertificateError::NotValidForNameContext {
                expected: rustls_pki_types::ServerName::try_from("example.com").unwrap(),
                presented: vec![
                    "DnsName(\"localhost\")".into(),
                    "IpAddress(127.0.0.1)".into(),
                ],
            },
        ));
        assert!(
            s.ends_with("it is not valid for example.com: it is for localhost, 127.0.0.1"),
            "{s}"
        );
        let s = said(Error::PeerIncompatible(
            PeerIncompatible::NoCipherSuitesInCommon,
        ));
        assert!(s.ends_with("no cipher suites in common"), "{s}");
        let s = said(Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(std::sync::Arc::new(webpki::Error::CaUsedAsEndEntity)),
        )));
        assert!(
            s.ends_with("the leaf certificate is a CA certificate"),
            "{s}"
        );
        for s in [
            said(Error::InvalidCertificate(CertificateError::UnknownIssuer)),
            said(Error::AlertReceived(AlertDescription::ProtocolVersion)),
        ] {
            assert!(
                !s.contains("UnknownIssuer") && !s.contains("ProtocolVersion"),
                "{s}"
            );
        }
    }
}
