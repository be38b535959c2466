//! The last response of a connection and the TLS `close_notify` after it leave in one write.
//!
//! When an HTTP/1 request asks to close the connection (`Connection: close`, or HTTP/1.0
//! without keep-alive), hyper writes the response, flushes it, then shuts the connection
//! down; the TLS stream writes the response record at once and the `close_notify` alert in a
//! second system call. [`LastResponse`] keeps the response's TLS records in rustls's send
//! queue instead (flushes are no-ops once it has done so) and the shutdown writes them and
//! the alert together: one `writev` and one TCP segment fewer per connection, the same
//! bytes on the wire. The service marks the response as the last through a
//! [`LastFlag`]; HTTP/2 and keep-alive connections are never marked.

use std::io::{self, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use super::tls_stream::ServerTls;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Set by the service when the response it is answering is the connection's last.
#[derive(Clone, Default)]
pub struct LastFlag(Arc<AtomicBool>);

impl LastFlag {
    /// Marks the response being answered as the connection's last when `req` says the
    /// connection closes after it (hyper then shuts the connection down once it is sent).
    pub fn mark_if_closing<B>(&self, req: &hyper::Request<B>) {
        if closes_after(req) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the response being answered is the connection's last.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Whether hyper closes the connection after answering `req`: an HTTP/1.1 request with a
/// `close` token in `Connection`, or an HTTP/1.0 request without `keep-alive`.
pub fn closes_after<B>(req: &hyper::Request<B>) -> bool {
    let has = |token: &str| {
        req.headers()
            .get_all(hyper::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    match req.version() {
        hyper::Version::HTTP_11 => has("close"),
        hyper::Version::HTTP_10 => !has("keep-alive"),
        _ => false,
    }
}

/// A TLS stream whose last response waits in rustls for the shutdown's `close_notify`.
pub struct LastResponse<IO> {
    inner: Box<ServerTls<IO>>,
    last: LastFlag,
    /// Bytes of the last response are queued in rustls, not yet written to the socket.
    queued: bool,
}

impl<IO> LastResponse<IO> {
    /// Wraps `inner`; `last` is the flag the connection's service sets.
    pub fn new(inner: Box<ServerTls<IO>>, last: LastFlag) -> Self {
        LastResponse {
            inner,
            last,
            queued: false,
        }
    }

    /// Queues `data` (encrypted) in rustls when the response is the last; `None` when it
    /// is not, or when rustls's send buffer is full (then the ordinary path writes).
    fn queue(&mut self, bufs: &[io::IoSlice<'_>]) -> Option<usize> {
        if !self.last.is_set() || bufs.iter().all(|b| b.is_empty()) {
            return None;
        }
        match self.inner.get_mut().1.writer().write_vectored(bufs) {
            Ok(n) if n > 0 => {
                self.queued = true;
                Some(n)
            }
            _ => None,
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for LastResponse<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for LastResponse<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(n) = self.queue(&[io::IoSlice::new(buf)]) {
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(n) = self.queue(bufs) {
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.queued {
            // hyper shuts the connection down next; the shutdown writes what is queued.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // The TLS stream queues close_notify behind the response records, writes them all,
        // then shuts the TCP stream down.
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(version: hyper::Version, connection: Option<&str>) -> hyper::Request<()> {
        let mut b = hyper::Request::builder().version(version).uri("/");
        if let Some(c) = connection {
            b = b.header(hyper::header::CONNECTION, c);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn which_requests_close() {
        use hyper::Version;
        assert!(closes_after(&req(Version::HTTP_11, Some("close"))));
        assert!(closes_after(&req(Version::HTTP_11, Some("Upgrade, Close"))));
        assert!(!closes_after(&req(Version::HTTP_11, None)));
        assert!(!closes_after(&req(Version::HTTP_11, Some("keep-alive"))));
        assert!(!closes_after(&req(Version::HTTP_11, Some("closed"))));
        assert!(closes_after(&req(Version::HTTP_10, None)));
        assert!(!closes_after(&req(Version::HTTP_10, Some("keep-alive"))));
        assert!(!closes_after(&req(Version::HTTP_2, Some("close"))));
    }
}
