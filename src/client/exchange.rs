//! One connection and one request, timed end to end: DNS, TCP, the TLS handshake
//! ([`super::conn`]), then an HTTP/1.1 request ([`super::http1`]) — sent as 0-RTT data
//! when asked for and the session allows it, and sent again after the handshake if the
//! server rejected it.

use std::cell::Cell;
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
/// server keeps it alive. A timeout names the step it interrupted.
pub async fn exchange(
    target: &Target,
    config: Arc<ClientConfig>,
    request: &[u8],
    early_data: bool,
    timeout: Duration,
) -> Result<(Exchange, Option<Http1<TlsStream>>), ConnectError> {
    let step = Cell::new(Step::Resolving);
    tokio::time::timeout(timeout, run(target, config, request, early_data, &step))
        .await
        .map_err(|_| ConnectError::Timeout {
            during: step.get().during(),
            after: timeout,
        })?
}

/// Where an exchange is, for a timeout's message.
#[derive(Debug, Clone, Copy)]
enum Step {
    Resolving,
    Connecting,
    Handshaking,
    Sending,
    Waiting,
}

impl Step {
    fn during(self) -> &'static str {
        match self {
            Step::Resolving => "resolving the server's name",
            Step::Connecting => "connecting (TCP)",
            Step::Handshaking => "in the TLS handshake (no complete answer from the server)",
            Step::Sending => "writing the request",
            Step::Waiting => "waiting for the HTTP response",
        }
    }
}

async fn run(
    target: &Target,
    config: Arc<ClientConfig>,
    request: &[u8],
    early_data: bool,
    step: &Cell<Step>,
) -> Result<(Exchange, Option<Http1<TlsStream>>), ConnectError> {
    let t0 = Instant::now();
    let early = early_data.then_some(request);
    let mut stamps = conn::Stamps::default();
    let addrs = conn::resolve(&target.host, target.port).await?;
    stamps.resolved = t0.elapsed();
    step.set(Step::Connecting);
    let (tcp, _) = conn::tcp_connect_any(&addrs, 0).await?;
    stamps.connected = t0.elapsed();
    step.set(Step::Handshaking);
    let (stream, handshake) =
        conn::handshake(tcp, target.server_name.clone(), config, early, t0, stamps).await?;
    let mut http = Http1::new(stream);
    let request_sent = if handshake.early_data == EarlyData::Accepted {
        handshake.stamps.handshake_done
    } else {
        step.set(Step::Sending);
        http.send(request).await?.duration_since(t0)
    };
    step.set(Step::Waiting);
    let response = http.read_response().await?;
    let timeline = Timeline {
        conn: handshake.stamps,
        verify: handshake.verify,
        request_sent,
        first_byte: response.first_byte.duration_since(t0),
        done: response.done.duration_since(t0),
    };
    let keep = response.keep_alive;
    if !keep && handshake.early_data == EarlyData::Accepted {
        // The server's session tickets follow its answer: read before the connection
        // goes, outside every phase, so that the next connection can resume.
        http.linger().await;
    }
    Ok((
        Exchange {
            timeline,
            handshake,
            response,
        },
        keep.then_some(http),
    ))
}
