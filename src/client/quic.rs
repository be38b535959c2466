//! One QUIC connection and one HTTP/3 `GET` (`handshake --http3`), timed on the same
//! [`Timeline`] as a TCP exchange ([`super::exchange`]), so the same report and document
//! hold it. quinn makes the connection over the client's rustls configuration (ALPN `h3`);
//! the `h3` crate sends the request.
//!
//! The moments, as offsets from the start (before DNS):
//! - `resolved`: the resolver's answer back in our task;
//! - `connected`: the UDP socket (quinn's endpoint) made: QUIC has no connection set-up
//!   before its first packet, so the `connect` phase is this socket's creation alone;
//! - `hello_sent`: rustls handed quinn the first ClientHello, which quinn sends in the
//!   first Initial packet at once (read from the handshake messages:
//!   [`crate::quic_watch`]);
//! - `server_hello`: rustls read the (last) ServerHello: the server's Initial packet
//!   received and decrypted by quinn;
//! - `certificate`: rustls read the server's Certificate message (none when resumed);
//! - `handshake_done`: quinn reported the connection established (the server's Finished
//!   verified, our Finished written: 1-RTT keys in both directions); with 0-RTT, when
//!   quinn said whether the server accepted the early data (the same moment);
//! - `request_sent`: the request's headers and end of stream handed to quinn (with 0-RTT
//!   accepted, the request went before the handshake's end: the handshake's end);
//! - `first_byte`: the response's headers decoded by h3;
//! - `done`: the response's last body byte read.
//!
//! Receives are stamped when our task sees them (quinn reads the socket in its own
//! driver), so they include the driver's scheduling delay; `receive_stamps` says `read`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Buf;

use super::ConnectError;
use super::conn::{EarlyData, Handshake, HandshakeClass, Stamps};
use super::hello::Offered;
// The longest wait, after the response, for a session ticket the server has not sent yet
// (servers that send it after the handshake, e.g. ngtcp2's): a connection closed at once
// would leave the next one nothing to resume. Not part of any phase; the same as over TCP
// after 0-RTT.
use super::http1::{Response, TICKET_WAIT};
use super::target::Target;
use super::timeline::Timeline;
use super::verifier::{self, VerifyRecord};
use crate::quic_watch::{ReadHook, WatchedClientConfig};
use crate::tls::Negotiated;

/// The ALPN protocol of HTTP/3.
const H3: &[u8] = b"h3";

/// quinn's client configuration from the client's rustls one: ALPN `h3`, the Initial
/// packets' AES-128-GCM from the same provider (QUIC v1 fixes it), sessions stored and
/// reused as over TCP. An error in words when the configuration cannot carry QUIC (no
/// TLS 1.3).
pub fn quic_client_config(
    config: &rustls::ClientConfig,
) -> Result<quinn::crypto::rustls::QuicClientConfig, String> {
    let mut config = config.clone();
    config.alpn_protocols = vec![H3.to_vec()];
    let initial = config
        .crypto_provider()
        .cipher_suites
        .iter()
        .find_map(|cs| match cs {
            rustls::SupportedCipherSuite::Tls13(s)
                if s.common.suite == rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 =>
            {
                s.quic_suite()
            }
            _ => None,
        })
        .or_else(|| {
            rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
                .tls13()
                .and_then(|s| s.quic_suite())
        });
    let initial = initial.ok_or("the provider has no AES-128-GCM for QUIC's Initial packets")?;
    // What quinn would otherwise refuse only at the first connect.
    rustls::quic::ClientConnection::new(
        Arc::new(config.clone()),
        rustls::quic::Version::V1,
        rustls_pki_types::ServerName::from(std::net::Ipv4Addr::LOCALHOST),
        Vec::new(),
    )
    .map_err(|_| "QUIC carries TLS 1.3 only, and no TLS 1.3 cipher suite is enabled")?;
    quinn::crypto::rustls::QuicClientConfig::with_initial(Arc::new(config), initial)
        .map_err(|e| e.to_string())
}

/// quinn's client configuration for `handshake --http3` ([`quic_client_config`]).
#[derive(Clone)]
pub struct Http3Config(pub Arc<quinn::crypto::rustls::QuicClientConfig>);

impl std::fmt::Debug for Http3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Http3Config { alpn: h3 }")
    }
}

/// A completed HTTP/3 exchange: the same shape as a TCP one.
pub type Exchange = super::exchange::Exchange;

/// Connects to `target` over QUIC, handshakes and sends `GET path` over HTTP/3 (in 0-RTT
/// when `early_data` and the session allows it), all within `timeout`; the connection is
/// closed after the response (with `want_ticket`, once a session ticket has come, or
/// [`TICKET_WAIT`] after the response).
pub async fn exchange(
    target: &Target,
    config: &Http3Config,
    early_data: bool,
    want_ticket: bool,
    timeout: Duration,
) -> Result<Exchange, ConnectError> {
    let during = Arc::new(Mutex::new("resolving the server's name"));
    let d = Arc::clone(&during);
    tokio::time::timeout(timeout, run(target, &config.0, early_data, want_ticket, d))
        .await
        .map_err(|_| ConnectError::Timeout {
            during: during.lock().map(|d| *d).unwrap_or("in the exchange"),
            after: timeout,
        })?
}

/// A QUIC connection's end in words.
fn quic_failed(e: &quinn::ConnectionError) -> ConnectError {
    use quinn::ConnectionError as E;
    let alert = |code: quinn::TransportErrorCode| {
        let c = u64::from(code);
        (0x100..0x200)
            .contains(&c)
            .then(|| crate::observe::tls::alert_name((c - 0x100) as u8))
    };
    let reason = match e {
        // Our own refusal: the alert we sent says why (rustls's own text names enums).
        E::TransportError(t) => match alert(t.code).as_deref() {
            Some("unknown_ca") => {
                "the server's certificate is not accepted: it does not chain to a trusted root (alert unknown_ca)".into()
            }
            Some("certificate_expired") => {
                "the server's certificate is not accepted: expired or not yet valid (alert certificate_expired)".into()
            }
            Some(a @ ("bad_certificate" | "certificate_unknown" | "certificate_revoked"
            | "unsupported_certificate")) => {
                format!("the server's certificate is not accepted (alert {a})")
            }
            Some(a) => format!("the TLS handshake failed: we sent the alert {a}"),
            None => format!("QUIC protocol error (transport error code {})", t.code),
        },
        E::ConnectionClosed(c) => match alert(c.error_code).as_deref() {
            Some(a) => format!("the server refused the TLS handshake with the alert {a}"),
            None => format!("the server closed the connection (error code {})", c.error_code),
        },
        E::ApplicationClosed(c) => format!(
            "the server closed the connection (HTTP/3 error code {})",
            c.error_code
        ),
        E::TimedOut => "no answer from the server (QUIC idle timeout)".into(),
        E::Reset => "the server reset the connection (stateless reset)".into(),
        E::VersionMismatch => {
            return ConnectError::QuicVersion;
        }
        E::LocallyClosed | E::CidsExhausted => e.to_string(),
    };
    ConnectError::Quic { reason }
}

async fn run(
    target: &Target,
    config: &Arc<quinn::crypto::rustls::QuicClientConfig>,
    early_data: bool,
    want_ticket: bool,
    during: Arc<Mutex<&'static str>>,
) -> Result<Exchange, ConnectError> {
    let step = move |s: H3Step| {
        if let Ok(mut d) = during.lock() {
            *d = s.during();
        }
    };
    let t0 = Instant::now();
    let addrs = super::conn::resolve(&target.host, target.port).await?;
    let resolved = t0.elapsed();
    let uri: ::http::Uri = format!("https://{}{}", target.authority, target.path)
        .parse()
        .map_err(|e| ConnectError::Http {
            reason: format!("cannot build the request URI: {e}"),
        })?;
    let req = H3Request {
        uri,
        body: bytes::Bytes::new(),
    };
    let opened = open(
        addrs[routable(&addrs)],
        &target.server_name,
        config,
        &req,
        early_data,
        (t0, resolved),
        &step,
    )
    .await?;
    let Opened {
        conn,
        handshake,
        answer,
        ..
    } = opened;
    conn.close(want_ticket).await;
    let since = |t: Instant| t.saturating_duration_since(t0);
    let timeline = Timeline {
        conn: handshake.stamps,
        verify: handshake.verify,
        request_sent: since(answer.sent),
        first_byte: since(answer.first),
        done: since(answer.done),
    };
    Ok(Exchange {
        timeline,
        handshake,
        response: Response {
            status: answer.status,
            head_bytes: 0,
            body_bytes: answer.body,
            keep_alive: false,
            first_byte: answer.first,
            done: answer.done,
            wakeup: None,
        },
    })
}

/// The wildcard address of `a`'s family, port 0: where a client's UDP socket binds.
fn unspecified(a: SocketAddr) -> SocketAddr {
    if a.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    }
}

/// The index of the first of a name's addresses this network namespace has a route to
/// (behind `--link`, IPv4 only: a name's IPv6 address there has none), else 0. Asks the
/// kernel with a UDP socket connected to each in turn (no packet is sent).
pub fn routable(addrs: &[SocketAddr]) -> usize {
    addrs
        .iter()
        .position(|a| {
            std::net::UdpSocket::bind(unspecified(*a)).is_ok_and(|s| s.connect(*a).is_ok())
        })
        .unwrap_or(0)
}

/// Where an HTTP/3 exchange is, for a timeout's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H3Step {
    /// Making the UDP socket and handshaking (with 0-RTT, the first request goes out
    /// meanwhile).
    Handshake,
    /// Waiting for (or reading) a response.
    Response,
}

impl H3Step {
    /// In words, after "timed out …".
    pub fn during(self) -> &'static str {
        match self {
            H3Step::Handshake => "in the QUIC handshake (no complete answer from the server)",
            H3Step::Response => "waiting for the HTTP/3 response",
        }
    }
}

/// One HTTP/3 request: a `GET` of `uri`, or a `POST` of `body` when it is not empty.
#[derive(Debug, Clone)]
pub struct H3Request {
    /// The request's URI (scheme, authority and path).
    pub uri: ::http::Uri,
    /// The request body (empty: a `GET`).
    pub body: bytes::Bytes,
}

/// One HTTP/3 answer, its moments.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    /// The response's status.
    pub status: u16,
    /// Response body bytes read.
    pub body: u64,
    /// The request's headers (and body) and end of stream handed to quinn; with 0-RTT
    /// accepted, the handshake's end (sent before it, it counts as sent there, as over
    /// TCP).
    pub sent: Instant,
    /// The response's headers decoded.
    pub first: Instant,
    /// The last body byte read.
    pub done: Instant,
}

/// An open HTTP/3 connection: its own quinn endpoint (one UDP socket: one client per
/// connection), the QUIC connection and the HTTP/3 client on it.
pub struct H3Conn {
    /// Kept for the connection's life: dropping the last handle stops its driver.
    _endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    send: h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    driver: tokio::task::JoinHandle<()>,
    watch: Arc<crate::quic_watch::Watch>,
}

impl Drop for H3Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A new connection with its first answer.
pub struct Opened {
    /// The connection, for more requests.
    pub conn: H3Conn,
    /// How its handshake went (its stamps from `t0`).
    pub handshake: Handshake,
    /// The first request's answer.
    pub answer: Answer,
}

/// An HTTP/3 client on `conn`, its driver spawned.
async fn h3_client(
    conn: &quinn::Connection,
) -> Result<
    (
        h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
        tokio::task::JoinHandle<()>,
    ),
    ConnectError,
> {
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| h3_error(&e))?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok((send, drive))
}

fn h3_error(e: &dyn std::fmt::Display) -> ConnectError {
    ConnectError::Quic {
        reason: format!("HTTP/3: {e}"),
    }
}

/// Opens a QUIC connection to `addr` from a UDP socket of its own (verifying
/// `server_name`), and sends `req` on it over HTTP/3 — in 0-RTT when `early_data` and
/// the session allows it — stamped from `t0` (`resolved`: when the name was resolved);
/// `step` is told where it is.
pub async fn open(
    addr: SocketAddr,
    server_name: &rustls_pki_types::ServerName<'static>,
    config: &Arc<quinn::crypto::rustls::QuicClientConfig>,
    req: &H3Request,
    early_data: bool,
    (t0, resolved): (Instant, Duration),
    step: &(dyn Fn(H3Step) + Send + Sync),
) -> Result<Opened, ConnectError> {
    step(H3Step::Handshake);
    let since = |t: Instant| t.saturating_duration_since(t0);
    let endpoint = client_endpoint(unspecified(addr)).map_err(|source| ConnectError::Io {
        during: "making the UDP socket",
        source,
    })?;
    let connected = t0.elapsed();
    // The verifier's record of this connection: rustls verifies inside quinn's reads.
    let record = Arc::new(Mutex::new(VerifyRecord::default()));
    let r = Arc::clone(&record);
    let hook: ReadHook = Arc::new(move |read: &mut dyn FnMut()| {
        verifier::install(r.lock().map(|r| r.clone()).unwrap_or_default());
        read();
        let rec = verifier::take();
        if let Ok(mut r) = r.lock() {
            *r = rec;
        }
    });
    let watched = Arc::new(WatchedClientConfig::new(Arc::clone(config), Some(hook)));
    let client_config = quinn::ClientConfig::new(Arc::clone(&watched) as Arc<_>);
    let connecting = endpoint
        .connect_with(client_config, addr, &server_name.to_str())
        .map_err(|e| ConnectError::Quic {
            reason: e.to_string(),
        })?;
    let watch = watched.take_watch().unwrap_or_default();
    let (conn, early_task) = if early_data {
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => {
                // The request goes now, in 0-RTT; the handshake ends when quinn says
                // whether the server took it.
                let task = tokio::spawn(async move {
                    let ok = accepted.await;
                    (ok, Instant::now())
                });
                (conn, Some(task))
            }
            // No session allowing early data: an ordinary handshake.
            Err(connecting) => (connecting.await.map_err(|e| quic_failed(&e))?, None),
        }
    } else {
        (connecting.await.map_err(|e| quic_failed(&e))?, None)
    };
    let mut handshake_done = Instant::now();
    if early_task.is_none() {
        step(H3Step::Response);
    }
    let (mut send, mut driver) = h3_client(&conn).await?;
    let mut answer = get(&mut send, req).await;
    let early = match early_task {
        None => EarlyData::NotSent,
        Some(task) => {
            let (accepted, at) = task.await.unwrap_or((false, Instant::now()));
            handshake_done = at;
            step(H3Step::Response);
            if accepted {
                // Sent before the handshake's end: it counts as sent at that end, as over
                // TCP.
                if let Ok(a) = &mut answer {
                    a.sent = at;
                }
                EarlyData::Accepted
            } else {
                // Rejected: quinn dropped the 0-RTT streams (HTTP/3's control stream
                // too): a new HTTP/3 client, and the request sent again in 1-RTT.
                driver.abort();
                (send, driver) = h3_client(&conn).await?;
                answer = get(&mut send, req).await;
                EarlyData::Rejected
            }
        }
    };
    let answer = answer?;
    let moments = watch.client();
    let seen = watch.seen();
    let rec = record.lock().map(|r| r.clone()).unwrap_or_default();
    let hello = seen.server_hello.clone().unwrap_or_default();
    let stamps = Stamps {
        resolved,
        connected,
        hello_sent: moments.hello_written.map_or(connected, since),
        server_hello: moments.server_hello.map_or(connected, since),
        certificate: moments.certificate.map(since),
        handshake_done: since(handshake_done),
        wakeup: None,
    };
    let kind = if seen.resumed() {
        HandshakeClass::ResumedTicket
    } else if seen.hrr {
        HandshakeClass::FullHrr
    } else {
        HandshakeClass::Full
    };
    let chain = conn
        .peer_identity()
        .and_then(|p| {
            p.downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
                .ok()
        })
        .map(|c| *c)
        .unwrap_or_default();
    let handshake = Handshake {
        quic_retry: moments.initial_keys > 1,
        stamps,
        verify: rec.cpu,
        kind,
        early_data: early,
        offered: Offered {
            hello_len: moments.hello_len,
            session_id: false,
            tls12_ticket: false,
            psk: moments.psk_offered,
            early_data: early != EarlyData::NotSent,
        },
        negotiated: Negotiated {
            version: crate::observe::tls::version_name(hello.version),
            cipher_suite: format!("{:?}", rustls::CipherSuite::from(hello.suite)),
            group: hello
                .group
                .map(|g| crate::tls::choices::group_name(rustls::NamedGroup::from(g))),
            signature_scheme: rec.scheme.map(|s| format!("{s:?}")),
            alpn: Some(String::from_utf8_lossy(H3).into_owned()),
            ocsp_stapled_bytes: None,
        },
        chain,
        ocsp_len: rec.ocsp_len,
        server_flight_bytes: moments.server_flight_bytes,
    };
    Ok(Opened {
        conn: H3Conn {
            _endpoint: endpoint,
            conn,
            send,
            driver,
            watch,
        },
        handshake,
        answer,
    })
}

/// A client's quinn endpoint on a new UDP socket bound to `bind`, receiving one datagram
/// per buffer: quinn sizes an endpoint's receive buffer by the datagrams its socket may
/// deliver at once (with UDP GRO, 64 of 1472 bytes, × a batch of 32: 2.9 MiB zeroed for
/// every endpoint, a third of `load --http3`'s CPU with an endpoint per connection). GRO
/// is turned off on the socket, so the kernel delivers datagrams one by one, and quinn is
/// told so ([`SingleDatagrams`]); where it cannot be turned off, the socket stays as quinn
/// set it up.
fn client_endpoint(bind: SocketAddr) -> std::io::Result<quinn::Endpoint> {
    use std::os::fd::AsRawFd;
    let socket = std::net::UdpSocket::bind(bind)?;
    let fd = socket.as_raw_fd();
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    // quinn-udp turns GRO on when the kernel has it.
    let wrapped = runtime.wrap_udp_socket(socket)?;
    let off: libc::c_int = 0;
    // SAFETY: `fd` is the open socket `wrapped` owns; setsockopt only reads the int
    // given with its size.
    let gro_off = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_UDP,
            libc::UDP_GRO,
            (&raw const off).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    } == 0;
    let socket: Arc<dyn quinn::AsyncUdpSocket> = if gro_off {
        Arc::new(SingleDatagrams(wrapped))
    } else {
        wrapped
    };
    quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        socket,
        runtime,
    )
}

/// quinn's UDP socket with GRO off: it receives one datagram per buffer (see
/// [`client_endpoint`]); everything else is the socket's own.
#[derive(Debug)]
struct SingleDatagrams(Arc<dyn quinn::AsyncUdpSocket>);

impl quinn::AsyncUdpSocket for SingleDatagrams {
    fn create_io_poller(self: Arc<Self>) -> std::pin::Pin<Box<dyn quinn::UdpPoller>> {
        Arc::clone(&self.0).create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit) -> std::io::Result<()> {
        self.0.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut std::task::Context,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.poll_recv(cx, bufs, meta)
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.0.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        1
    }

    fn may_fragment(&self) -> bool {
        self.0.may_fragment()
    }
}

impl H3Conn {
    /// Sends `req` on this connection and reads its answer.
    pub async fn get(&mut self, req: &H3Request) -> Result<Answer, ConnectError> {
        get(&mut self.send, req).await
    }

    /// Closes the connection (QUIC's CONNECTION_CLOSE, no error); with `want_ticket`,
    /// once the server has sent a session ticket, or [`TICKET_WAIT`] after this call.
    pub async fn close(self, want_ticket: bool) {
        if want_ticket {
            let until = Instant::now() + TICKET_WAIT;
            while self.watch.client().tickets == 0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        self.conn.close(0u32.into(), b"");
    }
}

/// `req` over HTTP/3 on `send`.
async fn get(
    send: &mut h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
    req: &H3Request,
) -> Result<Answer, ConnectError> {
    let head = if req.body.is_empty() {
        ::http::Request::get(req.uri.clone())
    } else {
        ::http::Request::post(req.uri.clone())
            .header(::http::header::CONTENT_TYPE, "application/octet-stream")
    };
    let head = head.body(()).map_err(|e| h3_error(&e))?;
    let mut stream = send.send_request(head).await.map_err(|e| h3_error(&e))?;
    // The server may stop reading the request once it has what it needs and answer at
    // once (RFC 9114 §4.1: a GET's answer can come before the end of its stream reaches
    // the server; a slow upload is answered 408); the client must not discard that
    // answer, so a stop here only ends the sending and the response is read.
    let mut sending = if req.body.is_empty() {
        Ok(())
    } else {
        stream.send_data(req.body.clone()).await
    };
    if sending.is_ok() {
        sending = stream.finish().await;
    }
    match sending {
        Ok(()) | Err(h3::error::StreamError::RemoteTerminate { .. }) => {}
        Err(e) => return Err(h3_error(&e)),
    }
    let sent = Instant::now();
    let resp = stream.recv_response().await.map_err(|e| h3_error(&e))?;
    let first = Instant::now();
    let mut body = 0u64;
    while let Some(chunk) = stream.recv_data().await.map_err(|e| h3_error(&e))? {
        body += chunk.remaining() as u64;
    }
    let done = Instant::now();
    Ok(Answer {
        status: resp.status().as_u16(),
        body,
        sent,
        first,
        done,
    })
}
