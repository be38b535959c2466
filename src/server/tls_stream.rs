//! The server's TLS stream: a rustls `ServerConnection` over an async socket, handed to
//! HTTP as soon as there is something to answer.
//!
//! [`ServerTls::accept`] drives the handshake until it completes, or, when rustls
//! accepted 0-RTT data, until the client's early data has arrived and the server's
//! whole first flight (ServerHello … Finished) has been written. HTTP then reads the
//! early data first and answers it right away (with `send_half_rtt_data` the response
//! leaves behind the server's Finished, as nginx answers 0-RTT), while the stream keeps
//! driving the rest of the handshake (the client's EndOfEarlyData and Finished, then
//! the session tickets) as it reads. tokio-rustls cannot do this: its accept future
//! only resolves once the client's Finished has arrived, one round trip later.
//!
//! The read and write paths follow tokio-rustls's `common::Stream` (MIT/Apache-2.0).

use std::io::{self, BufRead, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustls::{ServerConfig, ServerConnection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A server TLS connection over `IO`.
pub struct ServerTls<IO> {
    io: IO,
    conn: ServerConnection,
    /// 0-RTT data taken out of rustls, not yet read by HTTP; `early_pos` bytes of it were.
    early: Vec<u8>,
    early_pos: usize,
    /// Some 0-RTT data arrived.
    had_early: bool,
    /// The socket's read side has ended.
    eof: bool,
    /// `close_notify` has been queued.
    closed: bool,
}

impl<IO> ServerTls<IO> {
    /// The socket and the rustls connection.
    pub fn get_ref(&self) -> (&IO, &ServerConnection) {
        (&self.io, &self.conn)
    }

    /// The socket and the rustls connection, mutably.
    pub fn get_mut(&mut self) -> (&mut IO, &mut ServerConnection) {
        (&mut self.io, &mut self.conn)
    }

    /// Whether the connection began with 0-RTT data from the client.
    pub fn had_early_data(&self) -> bool {
        self.had_early
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> ServerTls<IO> {
    /// Runs the server side of a handshake on `io` until the connection has something to
    /// answer: the handshake is complete, or 0-RTT data has arrived and the server's
    /// flight is written. A handshake failure is an `InvalidData` error wrapping the
    /// `rustls::Error` (the alert, if any, is sent first).
    ///
    /// The stream (1.3 KB, most of it rustls's connection) is boxed once, here: the
    /// futures that hold it across awaits, and the task that holds them while the
    /// connection is idle, stay small and move cheaply.
    pub async fn accept(io: IO, config: Arc<ServerConfig>) -> io::Result<Box<Self>> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        let mut tls = Box::new(ServerTls {
            io,
            conn,
            early: Vec::new(),
            early_pos: 0,
            had_early: false,
            eof: false,
            closed: false,
        });
        std::future::poll_fn(|cx| tls.poll_accept(cx)).await?;
        Ok(tls)
    }

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_send_queued(cx))?;
            if !self.conn.is_handshaking() || self.early_pos < self.early.len() {
                return Poll::Ready(Ok(()));
            }
            if self.eof {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "tls handshake eof",
                )));
            }
            if ready!(self.read_io(cx))? == 0 {
                self.eof = true;
            }
            self.take_early();
        }
    }

    /// Moves 0-RTT data rustls holds into `early`.
    fn take_early(&mut self) {
        if let Some(mut data) = self.conn.early_data() {
            if self.early_pos == self.early.len() {
                self.early.clear();
                self.early_pos = 0;
            }
            if data.read_to_end(&mut self.early).is_ok_and(|n| n > 0) {
                self.had_early = true;
            }
        }
    }

    /// Reads TLS records from the socket and processes them; the bytes read (0 at EOF).
    fn read_io(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut reader = SyncAdapter {
            io: &mut self.io,
            cx,
        };
        let n = match self.conn.read_tls(&mut reader) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
            Err(e) => return Poll::Ready(Err(e)),
        };
        if let Err(e) = self.conn.process_new_packets() {
            // Send the alert describing the error, if there is one, before failing.
            let _ = self.write_io(cx);
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Poll::Ready(Ok(n))
    }

    fn write_io(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut writer = SyncAdapter {
            io: &mut self.io,
            cx,
        };
        match self.conn.write_tls(&mut writer) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
            r => Poll::Ready(r),
        }
    }

    /// Waits until there is something for HTTP to read: plaintext or 0-RTT data, or the
    /// client's close_notify. The bytes stay in rustls, and nothing of the reader's is
    /// allocated meanwhile: an idle connection keeps only rustls's own buffers. A socket
    /// that ends without close_notify is an `UnexpectedEof` error.
    pub async fn fill(&mut self) -> io::Result<()> {
        std::future::poll_fn(|cx| self.poll_fill(cx)).await
    }

    /// [`Self::fill`] as a poll: reads and processes TLS records until there is
    /// something to read. The rest of the handshake (tickets after the client's
    /// Finished) and key updates go out as they come.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            self.take_early();
            if self.early_pos < self.early.len() {
                return Poll::Ready(Ok(()));
            }
            match self.conn.reader().fill_buf() {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            if self.eof {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
            // A full socket buffer waits for the next write.
            if self.conn.wants_write()
                && let Poll::Ready(Err(e)) = self.poll_send_queued(cx)
            {
                return Poll::Ready(Err(e));
            }
            if ready!(self.read_io(cx))? == 0 {
                self.eof = true;
            }
        }
    }

    /// Writes every TLS record rustls has queued, then flushes the socket.
    fn poll_send_queued(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            if ready!(self.write_io(cx))? == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for ServerTls<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_fill(cx))?;
        // 0-RTT data first: it came before anything sent after the handshake.
        if this.early_pos < this.early.len() {
            let n = (this.early.len() - this.early_pos).min(buf.remaining());
            buf.put_slice(&this.early[this.early_pos..this.early_pos + n]);
            this.early_pos += n;
            return Poll::Ready(Ok(()));
        }
        // Copied out of rustls's own buffer into the caller's unfilled bytes: no zeroing
        // of the caller's (often 8 KiB) buffer first, as `read` would need.
        let mut reader = this.conn.reader();
        let chunk = reader.fill_buf()?;
        // Empty is the client's close_notify.
        let n = chunk.len().min(buf.remaining());
        buf.put_slice(&chunk[..n]);
        reader.consume(n);
        Poll::Ready(Ok(()))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ServerTls<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if bufs.iter().all(|b| b.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        loop {
            let written = this.conn.writer().write_vectored(bufs)?;
            let mut would_block = false;
            while this.conn.wants_write() {
                match this.write_io(cx) {
                    Poll::Ready(Ok(0)) | Poll::Pending => {
                        would_block = true;
                        break;
                    }
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                }
            }
            return match (written, would_block) {
                (0, true) => Poll::Pending,
                (0, false) => continue,
                (n, _) => Poll::Ready(Ok(n)),
            };
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.writer().flush()?;
        this.poll_send_queued(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // A 0-RTT request answered before the client's Finished: the handshake is
        // finished first (the client's EndOfEarlyData and Finished read), so that the
        // session tickets rustls then sends go out before close_notify. Closed at once,
        // a client that makes one request per connection would get no ticket to resume
        // its next one with. Bounded by whatever bounds the connection (its idle timeout).
        while !this.closed && this.conn.is_handshaking() && !this.eof {
            ready!(this.poll_send_queued(cx))?;
            if ready!(this.read_io(cx))? == 0 {
                this.eof = true;
            }
            this.take_early();
        }
        if !this.closed {
            this.conn.send_close_notify();
            this.closed = true;
        }
        ready!(this.poll_send_queued(cx))?;
        Poll::Ready(match ready!(Pin::new(&mut this.io).poll_shutdown(cx)) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        })
    }
}

/// `Read` and `Write` over an async socket for rustls: `Pending` becomes `WouldBlock`.
struct SyncAdapter<'a, 'b, T> {
    io: &'a mut T,
    cx: &'a mut Context<'b>,
}

impl<T: AsyncRead + Unpin> Read for SyncAdapter<'_, '_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut buf = ReadBuf::new(buf);
        match Pin::new(&mut self.io).poll_read(self.cx, &mut buf) {
            Poll::Ready(Ok(())) => Ok(buf.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<T: AsyncWrite + Unpin> Write for SyncAdapter<'_, '_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match Pin::new(&mut self.io).poll_flush(self.cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}
