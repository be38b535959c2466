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
    /// rustls refused the handshake or the peer sent an alert.
    #[error("TLS handshake failed")]
    Tls {
        /// rustls's error.
        #[source]
        source: rustls::Error,
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
    /// Stopped by the user (Ctrl-C) before anything was measured.
    #[error("interrupted before the first connection completed")]
    Interrupted,
    /// A client configuration built for this connection could not be built (roots
    /// reloaded per connection).
    #[error("client configuration")]
    Config {
        /// The cause.
        #[source]
        source: crate::tls::choices::ConfigError,
    },
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
            ConnectError::Tls { source } => match source {
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
            ConnectError::Config { .. } => "client-config",
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
