//! One connection and one request, timed end to end: DNS, TCP, the TLS handshake
//! ([`super::conn`]), then an HTTP/1.1 request ([`super::http1`]) — sent as 0-RTT data
//! when asked for and the session allows it, and sent again after the handshake if the
//! server rejected it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use super::ConnectError;
use super::conn::{self, EarlyData, Handshake, TlsStream};
use super::http1::{Http1, Response};
use super::target::Target;
use super::timeline::Timeline;

/// A completed exchange.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Its moments.
    pub timeline: Timeline,
    /// The handshake.
    pub handshake: Handshake,
    /// The response.
    pub response: Response,
}

/// Connects to `target`, handshakes and sends `request` (a prepared HTTP/1.1 request),
/// all within `timeout`. Returns the exchange and the connection, still open when the
/// server keeps it alive.
pub async fn exchange(
    target: &Target,
    config: Arc<ClientConfig>,
    request: &[u8],
    early_data: bool,
    timeout: Duration,
) -> Result<(Exchange, Option<Http1<TlsStream>>), ConnectError> {
    tokio::time::timeout(timeout, run(target, config, request, early_data))
        .await
        .map_err(|_| ConnectError::Timeout {
            during: "connecting, handshaking or waiting for the response",
            after: timeout,
        })?
}

async fn run(
    target: &Target,
    config: Arc<ClientConfig>,
    request: &[u8],
    early_data: bool,
) -> Result<(Exchange, Option<Http1<TlsStream>>), ConnectError> {
    let t0 = Instant::now();
    let early = early_data.then_some(request);
    let (stream, handshake) = conn::open(
        &target.host,
        target.port,
        target.server_name.clone(),
        config,
        early,
        t0,
    )
    .await?;
    let mut http = Http1::new(stream);
    let request_sent = if handshake.early_data == EarlyData::Accepted {
        handshake.stamps.handshake_done
    } else {
        http.send(request).await?.duration_since(t0)
    };
    let response = http.read_response().await?;
    let timeline = Timeline {
        conn: handshake.stamps,
        verify: handshake.verify,
        request_sent,
        first_byte: response.first_byte.duration_since(t0),
        done: response.done.duration_since(t0),
    };
    let keep = response.keep_alive;
    Ok((
        Exchange {
            timeline,
            handshake,
            response,
        },
        keep.then_some(http),
    ))
}
