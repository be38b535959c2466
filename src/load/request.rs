//! One request of a connection slot, on the wire: its connection opened when the slot has
//! none (TCP to the next address, the TLS handshake timed phase by phase, HTTP/2's
//! preface; the first request sent as 0-RTT data when asked and allowed), then the
//! request written and its answer read (HTTP/1.1 or HTTP/2), each phase noted in the
//! request's [`Obs`]. Over HTTP/3 (`--http3`), a new connection is a QUIC one from a UDP
//! socket of its own ([`crate::client::quic::open`]), with the same phases. A
//! [`StepCell`] says where the request was when it timed out.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;

use super::shared::Shared;
use super::tally::Obs;
use crate::client::conn::{self, EarlyData, Handshake, Stamps};
use crate::client::http1::Http1;
use crate::client::quic::{self, H3Conn, H3Step};
use crate::client::wire::WireStamps;
use crate::client::{ConnectError, Phase, TlsStream};

pub(super) enum Open {
    H1(Box<Http1<TlsStream>>),
    /// hyper's connection task owns the stream: its stamps are read through the handle.
    H2(
        hyper::client::conn::http2::SendRequest<Full<Bytes>>,
        WireStamps,
    ),
    /// HTTP/3 over QUIC: the connection (its own UDP socket) and its HTTP/3 client.
    H3(Box<H3Conn>),
}

/// quinn's client configuration of a slot (`--http3`): built from the slot's rustls one,
/// or why it could not be.
pub(super) type QuicConfig = Result<Arc<quinn::crypto::rustls::QuicClientConfig>, String>;

/// Where a request is, for a timeout's message.
#[derive(Debug, Clone, Copy)]
#[repr(u8)]
pub(super) enum Step {
    Connecting,
    Handshaking,
    Sending,
    Waiting,
    QuicHandshake,
}

/// A request's current [`Step`], shareable across the await points of a `Send` future.
#[derive(Default)]
pub(super) struct StepCell(std::sync::atomic::AtomicU8);

impl StepCell {
    fn set(&self, s: Step) {
        self.0.store(s as u8, Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> Step {
        match self.0.load(Ordering::Relaxed) {
            0 => Step::Connecting,
            1 => Step::Handshaking,
            2 => Step::Sending,
            3 => Step::Waiting,
            _ => Step::QuicHandshake,
        }
    }
}

impl Step {
    pub(super) fn during(self) -> &'static str {
        match self {
            Step::Connecting => "connecting (TCP)",
            Step::Handshaking => "in the TLS handshake (no complete answer from the server)",
            Step::Sending => "writing the request",
            Step::Waiting => "waiting for the HTTP response",
            Step::QuicHandshake => H3Step::Handshake.during(),
        }
    }
}

/// Closes a connection we are done with: close_notify over TCP; over QUIC, with
/// `want_ticket`, once the server's session ticket has come (or after a short wait: see
/// [`H3Conn::close`]), so that the slot's next connection can resume.
pub(super) async fn close(open: Option<Open>, want_ticket: bool) {
    match open {
        Some(Open::H1(mut h)) => h.shutdown().await,
        Some(Open::H3(h)) => h.close(want_ticket).await,
        _ => {}
    }
}

/// A connection the server closes after its answer (`Connection: close`): with
/// `want_ticket` after 0-RTT data was accepted on it, the session tickets the server
/// sends once it has the client's Finished, after that answer, are read until the
/// server's close ([`Http1::linger`]); else it is dropped at once.
pub(super) async fn linger(open: Option<Open>, want_ticket: bool, early: bool) {
    if let (Some(Open::H1(mut h)), true) = (open, want_ticket && early) {
        h.linger().await;
    }
}

/// One request on the slot's connection (opened first when needed). `Ok(keep)`: the
/// server keeps the connection open.
pub(super) async fn request(
    shared: &Shared,
    config: &Arc<ClientConfig>,
    quic: Option<&QuicConfig>,
    open: &mut Option<Open>,
    last_on_conn: bool,
    tally: &mut Obs,
    step: &StepCell,
) -> Result<bool, ConnectError> {
    if let Some(quic) = quic {
        return request_h3(shared, quic, open, tally, step).await;
    }
    let req = if last_on_conn {
        &shared.request_close
    } else {
        &shared.request_keep
    };
    // Set when the request went out as 0-RTT data and the server accepted it: when the
    // handshake completed.
    let mut sent_early = None;
    // When a connection was opened for this request: the handshake's last crossing,
    // where the request phase starts.
    let mut opened_at = None;
    if open.is_none() {
        // A GET only: an upload is not replay-safe, so it never goes as early data.
        let early = (shared.opts.early_data && !shared.opts.http2 && shared.upload.is_empty())
            .then_some(req.as_slice());
        let (o, early_data, done) = connect(shared, config, tally, early, step).await?;
        match early_data {
            EarlyData::Accepted => {
                tally.early = Some("accepted");
                sent_early = Some(done);
            }
            EarlyData::Rejected => tally.early = Some("rejected"),
            // No session, or the server's ticket allows no early data.
            EarlyData::NotSent if early.is_some() => tally.early = Some("not-sent"),
            EarlyData::NotSent => {}
        }
        opened_at = Some(done);
        *open = Some(o);
    }
    match open.as_mut() {
        Some(Open::H1(h)) => {
            let t = opened_at.unwrap_or_else(Instant::now);
            step.set(Step::Sending);
            let sent = match sent_early {
                Some(done) => done,
                None => h.send(req).await?,
            };
            step.set(Step::Waiting);
            let resp = h.read_response().await?;
            tally.phase(Phase::Request, sent.saturating_duration_since(t));
            tally.phase(
                Phase::FirstByte,
                resp.first_byte.saturating_duration_since(sent),
            );
            tally.phase(
                Phase::Body,
                resp.done.saturating_duration_since(resp.first_byte),
            );
            tally.status = Some(resp.status);
            tally.body_bytes = resp.body_bytes;
            tally.wakeup = resp.wakeup;
            Ok(resp.keep_alive)
        }
        Some(Open::H3(_)) => Err(ConnectError::ClosedMidHandshake),
        Some(Open::H2(send, wire)) => {
            // A GET, or a POST of the upload (an empty `Full` ends the stream with the
            // headers, as `Empty` does).
            let req = match shared.upload.is_empty() {
                true => http::Request::get(shared.uri.clone()),
                false => http::Request::post(shared.uri.clone())
                    .header(http::header::CONTENT_TYPE, "application/octet-stream"),
            }
            .body(Full::new(shared.upload.clone()))
            .map_err(|e| ConnectError::Http {
                reason: e.to_string(),
            })?;
            let t = opened_at.unwrap_or_else(Instant::now);
            step.set(Step::Waiting);
            let resp = send
                .send_request(req)
                .await
                .map_err(|e| ConnectError::Http {
                    reason: format!("HTTP/2 request failed: {e}"),
                })?;
            // hyper's connection task read the response head: the last receive before
            // it handed the response over (never later than that hand-over).
            let first = wire.last_receive().unwrap_or_else(Instant::now).max(t);
            let status = resp.status().as_u16();
            // Streamed and counted, never held: a body may be larger than memory.
            let mut body = resp.into_body();
            let mut body_bytes = 0u64;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| ConnectError::Http {
                    reason: format!("HTTP/2 body: {e}"),
                })?;
                if let Some(data) = frame.data_ref() {
                    body_bytes += data.len() as u64;
                }
            }
            let done = wire.last_receive().unwrap_or_else(Instant::now).max(first);
            tally.phase(Phase::FirstByte, first - t);
            tally.phase(Phase::Body, done - first);
            tally.status = Some(status);
            tally.body_bytes = body_bytes;
            tally.wakeup = wire.last_receive_delay();
            Ok(true)
        }
        None => Err(ConnectError::ClosedMidHandshake),
    }
}

/// Opens a connection (TCP, TLS, and HTTP/2's preface when asked for), sending `early`
/// as 0-RTT data when the session allows it; returns what became of it and when the
/// handshake completed.
async fn connect(
    shared: &Shared,
    config: &Arc<ClientConfig>,
    tally: &mut Obs,
    early: Option<&[u8]>,
    step: &StepCell,
) -> Result<(Open, EarlyData, Instant), ConnectError> {
    let fresh;
    let config = match &shared.opts.config_per_connection {
        Some(factory) => {
            fresh = (factory.0)().map_err(|source| ConnectError::Config { source })?;
            &fresh
        }
        None => config,
    };
    let t0 = Instant::now();
    step.set(Step::Connecting);
    let tcp = if shared.opts.addrs.is_empty() {
        let first = shared.preferred.load(Ordering::Relaxed);
        let (tcp, i) = conn::tcp_connect_any(&shared.resolved, first).await?;
        if i != first {
            shared.preferred.store(i, Ordering::Relaxed);
        }
        tcp
    } else {
        let i = shared.opened.fetch_add(1, Ordering::Relaxed) as usize;
        conn::tcp_connect(shared.opts.addrs[i % shared.opts.addrs.len()]).await?
    };
    let stamps = Stamps {
        connected: t0.elapsed(),
        ..Stamps::default()
    };
    step.set(Step::Handshaking);
    let (stream, hs) = conn::handshake(
        tcp,
        shared.target.server_name.clone(),
        Arc::clone(config),
        early,
        t0,
        stamps,
    )
    .await?;
    let done = t0 + hs.stamps.handshake_done;
    handshake_phases(tally, &hs);
    if shared.opts.http2 {
        let wire = stream.wire();
        if hs.negotiated.alpn.as_deref() != Some("h2") {
            return Err(ConnectError::Http {
                reason: "the server did not agree to HTTP/2 (ALPN h2)".into(),
            });
        }
        let (send, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .map_err(|e| ConnectError::Http {
                    reason: format!("HTTP/2 handshake: {e}"),
                })?;
        tokio::spawn(connection);
        Ok((Open::H2(send, wire), hs.early_data, done))
    } else {
        Ok((Open::H1(Box::new(Http1::new(stream))), hs.early_data, done))
    }
}

/// A new connection's handshake in the request's observations: its phases, its kind.
fn handshake_phases(tally: &mut Obs, hs: &Handshake) {
    let timeline = crate::client::Timeline {
        conn: hs.stamps,
        verify: hs.verify,
        ..Default::default()
    };
    for p in [
        Phase::Connect,
        Phase::ClientHello,
        Phase::ServerHello,
        Phase::Certificate,
        Phase::HandshakeFinish,
        Phase::Verify,
        Phase::Tls,
    ] {
        tally.phase(p, timeline.get(p));
    }
    tally.handshake = Some((hs.kind.name(), hs.kind.resumed(), timeline.get(Phase::Tls)));
}

/// One HTTP/3 request on the slot's QUIC connection, opened first when needed (the
/// request then goes with the handshake: in 0-RTT when asked and allowed). `Ok(true)`:
/// the connection stays usable.
async fn request_h3(
    shared: &Shared,
    quic: &QuicConfig,
    open: &mut Option<Open>,
    tally: &mut Obs,
    step: &StepCell,
) -> Result<bool, ConnectError> {
    let (answer, from) = match open {
        Some(Open::H3(h)) => {
            let t = Instant::now();
            step.set(Step::Waiting);
            (h.get(&shared.h3_request).await?, t)
        }
        _ => {
            let fresh;
            let config = match &shared.opts.config_per_connection {
                Some(factory) => {
                    let rustls = (factory.0)().map_err(|source| ConnectError::Config { source })?;
                    fresh = quic::quic_client_config(&rustls).map(Arc::new);
                    &fresh
                }
                None => quic,
            };
            let config = config.as_ref().map_err(|reason| ConnectError::Quic {
                reason: reason.clone(),
            })?;
            let addr = if shared.opts.addrs.is_empty() {
                let i = shared.preferred.load(Ordering::Relaxed);
                shared.resolved[i.min(shared.resolved.len() - 1)]
            } else {
                let i = shared.opened.fetch_add(1, Ordering::Relaxed) as usize;
                shared.opts.addrs[i % shared.opts.addrs.len()]
            };
            // A GET only: an upload is not replay-safe, so it never goes as early data.
            let early = shared.opts.early_data && shared.upload.is_empty();
            let t0 = Instant::now();
            let set = |s: H3Step| {
                step.set(match s {
                    H3Step::Handshake => Step::QuicHandshake,
                    H3Step::Response => Step::Waiting,
                })
            };
            let o = quic::open(
                addr,
                &shared.target.server_name,
                config,
                &shared.h3_request,
                early,
                (t0, Duration::ZERO),
                &set,
            )
            .await?;
            handshake_phases(tally, &o.handshake);
            tally.early = match o.handshake.early_data {
                EarlyData::Accepted => Some("accepted"),
                EarlyData::Rejected => Some("rejected"),
                EarlyData::NotSent if early => Some("not-sent"),
                EarlyData::NotSent => None,
            };
            tally.retried = o.handshake.quic_retry;
            let done = t0 + o.handshake.stamps.handshake_done;
            *open = Some(Open::H3(Box::new(o.conn)));
            (o.answer, done)
        }
    };
    tally.phase(Phase::Request, answer.sent.saturating_duration_since(from));
    tally.phase(
        Phase::FirstByte,
        answer.first.saturating_duration_since(answer.sent),
    );
    tally.phase(
        Phase::Body,
        answer.done.saturating_duration_since(answer.first),
    );
    tally.status = Some(answer.status);
    tally.body_bytes = answer.body;
    Ok(true)
}
