//! One client connection, timed from inside: DNS, TCP connect, then rustls's
//! `ClientConnection` driven over our own socket I/O so that each step of the handshake
//! is stamped when it really happens — ClientHello written, ServerHello processed (the
//! read that delivered it), certificate handed to the verifier, handshake complete — and
//! classified (full, with HelloRetryRequest, resumed by ticket or by session id, 0-RTT
//! accepted or rejected). After the handshake, [`TlsStream`] carries application data
//! (tokio `AsyncRead`/`AsyncWrite`).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use rustls::{ClientConfig, ClientConnection, HandshakeKind, ProtocolVersion};

use crate::tls::Negotiated;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::error::ConnectError;
use super::hello::{self, Offered};
use super::verifier::{self, VerifyRecord};
use super::wire::{self, Stamped, WireStamps};

/// How a handshake went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandshakeClass {
    /// A full handshake.
    Full,
    /// A full handshake after a HelloRetryRequest (the client's key share was not one
    /// the server wanted: an extra round trip).
    FullHrr,
    /// Resumed with a ticket (every TLS 1.3 resumption; TLS 1.2 with RFC 5077 tickets).
    ResumedTicket,
    /// Resumed by TLS 1.2 session id (server-side session cache).
    ResumedSessionId,
}

impl HandshakeClass {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeClass::Full => "full",
            HandshakeClass::FullHrr => "full-hrr",
            HandshakeClass::ResumedTicket => "resumed-ticket",
            HandshakeClass::ResumedSessionId => "resumed-session-id",
        }
    }

    /// True for either resumed kind.
    pub fn resumed(self) -> bool {
        matches!(
            self,
            HandshakeClass::ResumedTicket | HandshakeClass::ResumedSessionId
        )
    }
}

/// What happened to 0-RTT data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EarlyData {
    /// None sent.
    NotSent,
    /// Sent and accepted by the server.
    Accepted,
    /// Sent and rejected: it has to be sent again after the handshake.
    Rejected,
}

/// Moments of one connection, as offsets from its start (before DNS). Sends are stamped
/// right before the system call that handed the bytes to the kernel, receives right
/// after the one that returned them ([`super::wire`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stamps {
    /// Name resolved (the resolver's answer back in our task).
    pub resolved: Duration,
    /// TCP connection established (the kernel's report that the connect completed, as
    /// seen by our task).
    pub connected: Duration,
    /// The ClientHello handed to the kernel: right before the `write` that took its last
    /// byte (after a HelloRetryRequest, still the first ClientHello).
    pub hello_sent: Duration,
    /// The ServerHello received: right after the `read` that completed it (the one that
    /// completed the ServerHello answering our second ClientHello after a
    /// HelloRetryRequest).
    pub server_hello: Duration,
    /// The server's certificate received: right after the `read` that completed the
    /// Certificate message (`None` when resumed).
    pub certificate: Option<Duration>,
    /// Handshake complete: the last crossing of the handshake — right before the `write`
    /// of our last flight (the client Finished), or right after the `read` of the
    /// server's last flight when we send nothing after it.
    pub handshake_done: Duration,
    /// Our own wake-up delay: over the handshake's reads that the kernel stamped, the
    /// longest time from the arrival of a read's last byte to the return of our read
    /// (`None` when no read was stamped). Never part of a phase.
    pub wakeup: Option<Duration>,
}

/// Everything known about a completed handshake.
#[derive(Debug, Clone)]
pub struct Handshake {
    /// When each step happened.
    pub stamps: Stamps,
    /// Time spent verifying the certificate and handshake signature.
    pub verify: Duration,
    /// Full, resumed…
    pub kind: HandshakeClass,
    /// 0-RTT outcome.
    pub early_data: EarlyData,
    /// What our ClientHello offered.
    pub offered: Offered,
    /// Version, suite, group, the server's signature scheme (`None` when resumed) and
    /// ALPN; the OCSP staple's size is in `ocsp_len`.
    pub negotiated: Negotiated,
    /// The server's certificate chain, leaf first (from the session when resumed).
    pub chain: Vec<CertificateDer<'static>>,
    /// Size of the stapled OCSP response, 0 for none.
    pub ocsp_len: usize,
    /// TLS bytes of the server's flight that answered our (last) ClientHello: what we
    /// read from it before we next sent anything (TLS 1.3: ServerHello to Finished; TLS
    /// 1.2: ServerHello to ServerHelloDone, or to Finished when resumed).
    pub server_flight_bytes: usize,
    /// Over QUIC: the server answered the first Initial with a Retry (address
    /// validation), which took a round trip, as a HelloRetryRequest does. Never over TCP.
    pub quic_retry: bool,
}

/// Resolves `host:port` (timed by the caller).
pub async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, ConnectError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| ConnectError::Dns {
            host: host.to_string(),
            source,
        })?
        .collect();
    if addrs.is_empty() {
        return Err(ConnectError::Dns {
            host: host.to_string(),
            source: io::Error::new(io::ErrorKind::NotFound, "no addresses"),
        });
    }
    Ok(addrs)
}

/// Opens a TCP connection to `addr` (Nagle off: handshake flights go out at once).
pub async fn tcp_connect(addr: SocketAddr) -> Result<TcpStream, ConnectError> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|source| ConnectError::Connect { addr, source })?;
    tcp.set_nodelay(true)
        .map_err(|source| ConnectError::Connect { addr, source })?;
    Ok(tcp)
}

/// Connects to the first of `addrs` that accepts, trying them in order from `first`
/// (wrapping around), as a client walks a name's addresses; returns the stream and the
/// index of the address that accepted. The last error when none does.
pub async fn tcp_connect_any(
    addrs: &[SocketAddr],
    first: usize,
) -> Result<(TcpStream, usize), ConnectError> {
    let mut last = None;
    for k in 0..addrs.len() {
        let i = (first + k) % addrs.len();
        match tcp_connect(addrs[i]).await {
            Ok(tcp) => return Ok((tcp, i)),
            Err(e) => last = Some(e),
        }
    }
    // `resolve` returns at least one address, so a connect error was recorded.
    Err(last.unwrap_or(ConnectError::ClosedMidHandshake))
}

/// Resolves `host`, connects to its first address that accepts, and handshakes: the
/// whole set-up of one connection, stamped relative to `t0` (see [`handshake`] for
/// `early`).
pub async fn open(
    host: &str,
    port: u16,
    name: ServerName<'static>,
    config: Arc<ClientConfig>,
    early: Option<&[u8]>,
    t0: Instant,
) -> Result<(TlsStream, Handshake), ConnectError> {
    let mut stamps = Stamps::default();
    let addrs = resolve(host, port).await?;
    stamps.resolved = t0.elapsed();
    let (tcp, _) = tcp_connect_any(&addrs, 0).await?;
    stamps.connected = t0.elapsed();
    handshake(tcp, name, config, early, t0, stamps).await
}

/// Runs the TLS handshake over `tcp`, stamping each step relative to `t0`. With
/// `early`, those bytes are sent as 0-RTT data when the session allows it (check
/// [`Handshake::early_data`]: when not accepted, send them again).
pub async fn handshake(
    tcp: TcpStream,
    name: ServerName<'static>,
    config: Arc<ClientConfig>,
    early: Option<&[u8]>,
    t0: Instant,
    mut stamps: Stamps,
) -> Result<(TlsStream, Handshake), ConnectError> {
    let (mut conn, early_sent) = client_connection(config, name, early)?;
    let wire = WireStamps::new();
    {
        use std::os::fd::AsRawFd;
        wire.use_kernel_stamps(tcp.as_raw_fd());
    }
    let since = |at: Option<Instant>| at.map_or_else(|| t0.elapsed(), |at| at.duration_since(t0));
    let mut rec = VerifyRecord::default();
    let mut offered = None;
    // ClientHellos written before the ServerHello (2 after a HelloRetryRequest).
    let mut hellos = 0;
    // Bytes read since our last ClientHello, and the server's flight once we answer it.
    let mut read_since_hello = 0usize;
    let mut server_flight = None;
    let mut out = Vec::with_capacity(2048);
    loop {
        // Write whatever rustls has (the ClientHello first).
        if conn.wants_write() {
            out.clear();
            while conn.wants_write() {
                conn.write_tls(&mut out)
                    .map_err(|source| ConnectError::Io {
                        during: "encoding TLS records",
                        source,
                    })?;
            }
            if offered.is_none() {
                offered = Some(hello::offered(&out).unwrap_or_default());
            }
            write_all(&tcp, &out, &wire).await?;
            if stamps.server_hello.is_zero() {
                hellos += 1;
                read_since_hello = 0;
            } else if server_flight.is_none() && out != FAKE_CCS {
                // TLS 1.3's middlebox-compatibility ChangeCipherSpec, sent as soon as the
                // ServerHello is in, is not an answer to the server's flight.
                server_flight = Some(read_since_hello);
            }
            if stamps.hello_sent.is_zero() {
                stamps.hello_sent = since(wire.last_send());
            }
        }
        if !conn.is_handshaking() {
            break;
        }
        // Read the next flight.
        tcp.readable().await.map_err(|source| ConnectError::Io {
            during: "waiting for the server",
            source,
        })?;
        let n = match conn.read_tls(&mut SyncIo::new(&tcp, &wire)) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if closed(&e) => return Err(ConnectError::ClosedMidHandshake),
            Err(source) => {
                return Err(ConnectError::Io {
                    during: "reading the handshake",
                    source,
                });
            }
        };
        let read_at = since(wire.last_receive());
        if let Some(d) = wire.last_receive_delay() {
            stamps.wakeup = Some(stamps.wakeup.map_or(d, |w| w.max(d)));
        }
        if n == 0 {
            return Err(ConnectError::ClosedMidHandshake);
        }
        read_since_hello += n;
        verifier::install(std::mem::take(&mut rec));
        let processed = conn.process_new_packets();
        rec = verifier::take();
        if let Err(source) = processed {
            return Err(refused(&mut conn, &tcp, &mut out, source));
        }
        // rustls knows the suite from a HelloRetryRequest already: the ServerHello is the
        // answer to the second ClientHello.
        let hrr = conn.handshake_kind() == Some(HandshakeKind::FullWithHelloRetryRequest);
        if stamps.server_hello.is_zero()
            && conn.negotiated_cipher_suite().is_some()
            && (!hrr || hellos >= 2)
        {
            stamps.server_hello = read_at;
        }
        if stamps.certificate.is_none() && rec.cert_at.is_some() {
            stamps.certificate = Some(read_at);
        }
    }
    // The later of our last send and our last receive: the handshake's last crossing.
    stamps.handshake_done = since(wire.last_send().max(wire.last_receive()));
    let info = Handshake {
        quic_retry: false,
        stamps,
        server_flight_bytes: server_flight.unwrap_or(read_since_hello),
        ..summary(&conn, rec, offered.unwrap_or_default(), early_sent)
    };
    Ok((TlsStream::new(tcp, conn, wire), info))
}

/// A client connection to `name`; with `early`, those bytes are written as 0-RTT data
/// when the session allows all of them (`true`: they were).
fn client_connection(
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    early: Option<&[u8]>,
) -> Result<(ClientConnection, bool), ConnectError> {
    let mut conn =
        ClientConnection::new(config, name).map_err(|error| ConnectError::Tls { error })?;
    let mut early_sent = false;
    if let Some(data) = early
        && let Some(mut w) = conn.early_data()
        && w.bytes_left() >= data.len()
    {
        w.write_all(data).map_err(|source| ConnectError::Io {
            during: "writing early data",
            source,
        })?;
        early_sent = true;
    }
    Ok((conn, early_sent))
}

/// The error of a handshake rustls refused with `source`, after sending our alert (best
/// effort): the server does not speak TLS when its first record has no TLS type.
fn refused(
    conn: &mut ClientConnection,
    tcp: &TcpStream,
    out: &mut Vec<u8>,
    source: rustls::Error,
) -> ConnectError {
    // Send our alert, best effort.
    out.clear();
    let _ = conn.write_tls(out);
    let _ = tcp.try_write(out);
    // A first record of no TLS type, before anything TLS was negotiated: the
    // server does not speak TLS on this port.
    if source == rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
        && conn.negotiated_cipher_suite().is_none()
    {
        return ConnectError::NotTls;
    }
    ConnectError::Tls { error: source }
}

/// What a completed handshake was (its kind, early data, what was negotiated, the
/// chain), the stamps and the server's flight left at zero for the caller.
fn summary(
    conn: &ClientConnection,
    rec: VerifyRecord,
    offered: Offered,
    early_sent: bool,
) -> Handshake {
    let kind = match conn.handshake_kind() {
        Some(HandshakeKind::Resumed) => {
            if conn.protocol_version() == Some(ProtocolVersion::TLSv1_2) && !offered.tls12_ticket {
                HandshakeClass::ResumedSessionId
            } else {
                HandshakeClass::ResumedTicket
            }
        }
        Some(HandshakeKind::FullWithHelloRetryRequest) => HandshakeClass::FullHrr,
        _ => HandshakeClass::Full,
    };
    let early_data = match (early_sent, conn.is_early_data_accepted()) {
        (false, _) => EarlyData::NotSent,
        (true, true) => EarlyData::Accepted,
        (true, false) => EarlyData::Rejected,
    };
    Handshake {
        quic_retry: false,
        stamps: Stamps::default(),
        verify: rec.cpu,
        kind,
        early_data,
        offered,
        negotiated: Negotiated {
            signature_scheme: rec.scheme.map(|s| format!("{s:?}")),
            ..Negotiated::of(conn)
        },
        chain: conn
            .peer_certificates()
            .map(|c| c.to_vec())
            .unwrap_or_default(),
        ocsp_len: rec.ocsp_len,
        server_flight_bytes: 0,
    }
}

/// A ChangeCipherSpec record on its own (TLS 1.3 sends one for middlebox compatibility).
const FAKE_CCS: [u8; 6] = [0x14, 0x03, 0x03, 0x00, 0x01, 0x01];

/// The peer closed the connection: an orderly close, or a reset because it closed with
/// our data unread.
fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

/// Writes `buf`, recording each send in `wire`.
async fn write_all(tcp: &TcpStream, mut buf: &[u8], wire: &WireStamps) -> Result<(), ConnectError> {
    while !buf.is_empty() {
        tcp.writable().await.map_err(|source| ConnectError::Io {
            during: "writing the handshake",
            source,
        })?;
        match SyncIo::new(tcp, wire).write(buf) {
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if closed(&e) => return Err(ConnectError::ClosedMidHandshake),
            Err(source) => {
                return Err(ConnectError::Io {
                    during: "writing the handshake",
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Blocking-style `Read`/`Write` over a tokio socket: `WouldBlock` when not ready. Every
/// system call that moves bytes is stamped in `wire` (before a send, after a receive).
struct SyncIo<'a> {
    tcp: &'a TcpStream,
    wire: &'a WireStamps,
}

impl<'a> SyncIo<'a> {
    fn new(tcp: &'a TcpStream, wire: &'a WireStamps) -> Self {
        SyncIo { tcp, wire }
    }
}

impl Read for SyncIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.wire.kernel_stamps() {
            let r = self.tcp.try_read(buf);
            if r.is_ok() {
                self.wire.received(Instant::now());
            }
            return r;
        }
        use std::os::fd::AsRawFd;
        let fd = self.tcp.as_raw_fd();
        let (n, stamp) = self.tcp.try_io(tokio::io::Interest::READABLE, || {
            wire::recv_stamped(fd, buf)
        })?;
        match stamp.and_then(wire::age_of) {
            Some((returned, delay)) => self.wire.received_stamped(returned, delay),
            None => self.wire.received(Instant::now()),
        }
        Ok(n)
    }
}

impl Write for SyncIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let at = Instant::now();
        let r = self.tcp.try_write(buf);
        if matches!(r, Ok(n) if n > 0) {
            self.wire.sent(at);
        }
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS connection after its handshake: tokio `AsyncRead` + `AsyncWrite` over rustls.
pub struct TlsStream {
    tcp: TcpStream,
    conn: ClientConnection,
    /// The peer closed the TCP stream.
    eof: bool,
    /// When bytes last crossed the kernel boundary, each way.
    wire: WireStamps,
}

impl TlsStream {
    fn new(tcp: TcpStream, conn: ClientConnection, wire: WireStamps) -> Self {
        TlsStream {
            tcp,
            conn,
            eof: false,
            wire,
        }
    }

    /// This connection's send and receive stamps (a handle: it stays valid after the
    /// stream moves into hyper).
    pub fn wire(&self) -> WireStamps {
        self.wire.clone()
    }

    /// The rustls connection (negotiated parameters, peer certificates…).
    pub fn connection(&self) -> &ClientConnection {
        &self.conn
    }

    /// Writes pending TLS records; `Ready(Ok)` once none are left.
    fn poll_flush_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut SyncIo::new(&self.tcp, &self.wire)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_write_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Reads and processes more TLS records; `Ready(Ok(false))` at the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        loop {
            match self.conn.read_tls(&mut SyncIo::new(&self.tcp, &self.wire)) {
                Ok(0) => {
                    self.eof = true;
                    return Poll::Ready(Ok(false));
                }
                Ok(_) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        // Send the alert, best effort.
                        let _ = self.conn.write_tls(&mut SyncIo::new(&self.tcp, &self.wire));
                        return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
                    }
                    // Key updates and the like.
                    if self.conn.wants_write() {
                        let _ = self.poll_flush_tls(cx)?;
                    }
                    return Poll::Ready(Ok(true));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.tcp.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl Stamped for TlsStream {
    fn wire_stamps(&self) -> Option<&WireStamps> {
        Some(&self.wire)
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A peer that never stops sending must not keep this task from yielding: each
        // read takes from tokio's cooperative budget, so that a timeout or a signal
        // handler waiting on this thread gets its turn (a `try_read` that always finds
        // data would otherwise never return Pending).
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        let r = self.get_mut().poll_read_tls(cx, buf);
        if r.is_ready() {
            coop.made_progress();
        }
        r
    }
}

impl TlsStream {
    /// [`AsyncRead::poll_read`] without the cooperative budget.
    fn poll_read_tls(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self;
        loop {
            match this.conn.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            if this.eof {
                // rustls has seen the end of the stream: its reader says how it ended.
                return Poll::Ready(match this.conn.reader().read(buf.initialize_unfilled()) {
                    Ok(n) => {
                        buf.advance(n);
                        Ok(())
                    }
                    Err(e) => Err(e),
                });
            }
            ready!(this.poll_fill(cx))?;
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // Keep what rustls buffers bounded: flush before taking more.
        ready!(this.poll_flush_tls(cx))?;
        let n = this.conn.writer().write(buf)?;
        match this.poll_flush_tls(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Ready(Ok(n)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_tls(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.send_close_notify();
        ready!(this.poll_flush_tls(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connects_to_the_first_address_that_accepts_from_the_given_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // 127.0.0.2 is loopback too, but nothing listens on it at this port: refused.
        let refused: SocketAddr = format!("127.0.0.2:{port}").parse().unwrap();
        let open = listener.local_addr().unwrap();
        let addrs = [refused, open];
        let (_, i) = tcp_connect_any(&addrs, 0).await.unwrap();
        assert_eq!(i, 1);
        let (_, i) = tcp_connect_any(&addrs, 1).await.unwrap();
        assert_eq!(i, 1);
        match tcp_connect_any(&[refused], 0).await {
            Err(ConnectError::Connect { addr, .. }) => assert_eq!(addr, refused),
            other => panic!("{:?}", other.map(|(_, i)| i)),
        }
    }
}
