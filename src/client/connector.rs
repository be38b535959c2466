//! A connector for hyper-util's client (and anything built on it) that makes its HTTPS
//! connections through [`super::conn`], so a program records the same handshake phases
//! and classification for its own traffic as `tlsperf handshake` does. Each completed
//! handshake is handed to a callback.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use tlsperf::client::config::{build, ClientTlsOptions};
//! use tlsperf::client::connector::TimedConnector;
//!
//! let tls = build(&ClientTlsOptions::default())?;
//! let connector = TimedConnector::new(tls.config, Arc::new(|c| {
//!     eprintln!("{} handshake in {:?}", c.handshake.kind.name(), c.handshake.stamps.handshake_done);
//! }));
//! let client: Client<_, http_body_util::Empty<bytes::Bytes>> =
//!     Client::builder(TokioExecutor::new()).build(connector);
//! let response = client.get("https://example.com/".parse()?).await?;
//! # Ok(()) }
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls_pki_types::ServerName;

use super::ConnectError;
use super::conn::{self, Handshake, TlsStream};

/// One connection made by the connector.
#[derive(Debug, Clone)]
pub struct ConnectInfo {
    /// `host:port` connected to.
    pub authority: String,
    /// The handshake, with its moments (offsets from the start of the connection).
    pub handshake: Handshake,
}

/// Called once per completed handshake.
pub type OnHandshake = Arc<dyn Fn(&ConnectInfo) + Send + Sync>;

/// Makes HTTPS connections with a given rustls configuration, timing each.
#[derive(Clone)]
pub struct TimedConnector {
    config: Arc<ClientConfig>,
    on_handshake: OnHandshake,
}

impl TimedConnector {
    /// Connects with `config` (use [`super::config::build`] so that verification is timed
    /// too) and reports each handshake to `on_handshake`.
    pub fn new(config: Arc<ClientConfig>, on_handshake: OnHandshake) -> Self {
        TimedConnector {
            config,
            on_handshake,
        }
    }
}

impl tower_service::Service<Uri> for TimedConnector {
    type Response = TimedConnection;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<TimedConnection, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let config = Arc::clone(&self.config);
        let on_handshake = Arc::clone(&self.on_handshake);
        Box::pin(async move {
            let bad = |reason: &str| ConnectError::Http {
                reason: format!("{uri}: {reason}"),
            };
            if uri.scheme_str() != Some("https") {
                return Err(bad("only https URLs are supported"));
            }
            let host = uri.host().ok_or_else(|| bad("no host"))?;
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(443);
            let name = ServerName::try_from(host.clone()).map_err(|_| bad("invalid host name"))?;
            let (stream, handshake) =
                conn::open(&host, port, name, config, None, Instant::now()).await?;
            on_handshake(&ConnectInfo {
                authority: format!("{host}:{port}"),
                handshake,
            });
            Ok(TimedConnection(TokioIo::new(stream)))
        })
    }
}

/// A connection made by [`TimedConnector`].
pub struct TimedConnection(TokioIo<TlsStream>);

impl Connection for TimedConnection {
    fn connected(&self) -> Connected {
        let c = Connected::new();
        if self.0.inner().connection().alpn_protocol() == Some(b"h2") {
            c.negotiated_h2()
        } else {
            c
        }
    }
}

impl hyper::rt::Read for TimedConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for TimedConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
