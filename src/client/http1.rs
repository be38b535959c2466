//! A small HTTP/1.1 client for measuring: one prepared request written as is, the
//! response's status line and headers parsed with `httparse`, its body consumed by
//! `Content-Length`, chunked encoding or the end of the connection, with the moment of
//! the first response byte. Keep-alive is the default; nothing is retried.

use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::ConnectError;
use super::wire::Stamped;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 << 10;
/// The most interim (1xx) responses read before the answer (curl and browsers see one
/// or two: 100 Continue, 103 Early Hints).
const MAX_INTERIM: usize = 64;

/// The largest request body (`--body-size`): 64 MiB, as `serve --body-size`.
pub const MAX_BODY: u64 = 64 << 20;

/// A prepared `GET` request.
pub fn get_request(host: &str, path: &str, close: bool) -> Vec<u8> {
    request(host, path, close, 0)
}

/// A prepared request: a `GET` when `body_size` is 0, else a `POST` of `body_size` bytes
/// (`application/octet-stream`, `Content-Length`), the body right after the head in the
/// same buffer so that both leave in one write (a small body in the head's packet).
pub fn request(host: &str, path: &str, close: bool, body_size: usize) -> Vec<u8> {
    let method = if body_size == 0 { "GET" } else { "POST" };
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tlsperf/{}\r\nAccept: */*\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if body_size > 0 {
        r.push_str(&format!(
            "Content-Type: application/octet-stream\r\nContent-Length: {body_size}\r\n"
        ));
    }
    if close {
        r.push_str("Connection: close\r\n");
    }
    r.push_str("\r\n");
    let mut r = r.into_bytes();
    r.resize(r.len() + body_size, b'x');
    r
}

/// A response, read completely.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Bytes of the status line and headers.
    pub head_bytes: usize,
    /// Bytes of the body (after de-chunking).
    pub body_bytes: u64,
    /// The server keeps the connection open for another request.
    pub keep_alive: bool,
    /// When the first byte of the response arrived: the arrival of the last byte of the
    /// `read` that returned the TLS record carrying it (see [`super::wire`]).
    pub first_byte: Instant,
    /// When the response was complete: the arrival of the last byte of the `read` that
    /// returned its last byte (the end of the stream for a body delimited by closing).
    pub done: Instant,
    /// How long after that arrival our `read` returned it: our own wake-up delay (`None`
    /// when the kernel did not stamp it).
    pub wakeup: Option<std::time::Duration>,
}

/// Longest wait, after the answer to a request sent as 0-RTT data on a connection the
/// server closes, for the session tickets that follow it ([`Http1::linger`]; over QUIC,
/// the same wait: `quic::H3Conn::close`).
pub const TICKET_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// An HTTP/1.1 connection over any byte stream.
pub struct Http1<S> {
    io: S,
    /// Read buffer, always initialized; data is `buf[start..end]`.
    buf: Vec<u8>,
    /// Bytes at the start of `buf` already consumed.
    start: usize,
    /// End of the data read.
    end: usize,
}

impl<S: AsyncRead + AsyncWrite + Stamped + Unpin> Http1<S> {
    /// Wraps `io`.
    pub fn new(io: S) -> Self {
        Http1 {
            io,
            buf: vec![0; 16 << 10],
            start: 0,
            end: 0,
        }
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// Writes `request` and returns when it was handed to the kernel: right before the
    /// `write` that took its last byte (see [`super::wire`]).
    pub async fn send(&mut self, request: &[u8]) -> Result<Instant, ConnectError> {
        self.io
            .write_all(request)
            .await
            .map_err(|source| ConnectError::Io {
                during: "writing the request",
                source,
            })?;
        self.io.flush().await.map_err(|source| ConnectError::Io {
            during: "writing the request",
            source,
        })?;
        Ok(self.last_send().unwrap_or_else(Instant::now))
    }

    /// Right before the stream's last send system call.
    fn last_send(&self) -> Option<Instant> {
        self.io.wire_stamps().and_then(|w| w.last_send())
    }

    /// Right after the stream's last receive system call, or now for a stream that does
    /// not record its stamps.
    fn last_receive(&self) -> Instant {
        self.io
            .wire_stamps()
            .and_then(|w| w.last_receive())
            .unwrap_or_else(Instant::now)
    }

    /// Reads one complete response, skipping interim 1xx responses before it (their
    /// bytes count in `first_byte`, which is when the server started answering, but not
    /// in `head_bytes`).
    pub async fn read_response(&mut self) -> Result<Response, ConnectError> {
        let mut first_byte = None;
        if self.start >= self.end {
            self.end = 0;
            self.start = 0;
        } else {
            // Read with an earlier response: it arrived then.
            first_byte = Some(self.last_receive());
        }
        // Head.
        let mut interim = 0usize;
        let (status, head_len, framing, keep_alive) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf[self.start..self.end]) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = resp.code.unwrap_or(0);
                    // An interim response (100 Continue, 103 Early Hints…) precedes the
                    // answer: skip it (101 would switch protocols, which we never ask).
                    if (100..200).contains(&status) && status != 101 {
                        interim += 1;
                        if interim > MAX_INTERIM {
                            return Err(http_err(format!(
                                "more than {MAX_INTERIM} interim (1xx) responses before the \
                                 answer"
                            )));
                        }
                        self.start += n;
                        continue;
                    }
                    let (framing, keep_alive) = framing(&resp, status)?;
                    break (status, n, framing, keep_alive);
                }
                Ok(httparse::Status::Partial) => {
                    if self.end - self.start > MAX_HEAD {
                        return Err(http_err(format!(
                            "response head larger than {MAX_HEAD} bytes"
                        )));
                    }
                    if self.fill().await? == 0 {
                        return Err(ConnectError::Io {
                            during: "reading the response",
                            source: std::io::ErrorKind::UnexpectedEof.into(),
                        });
                    }
                    if first_byte.is_none() {
                        first_byte = Some(self.last_receive());
                    }
                }
                Err(e) => return Err(http_err(format!("unparsable response head: {e}"))),
            }
        };
        let first_byte = first_byte.unwrap_or_else(|| self.last_receive());
        self.start += head_len;
        let body_bytes = match framing {
            Framing::Length(n) => {
                self.skip(n).await?;
                n
            }
            Framing::Chunked => self.chunked().await?,
            Framing::Close => {
                let mut n = (self.end - self.start) as u64;
                self.start = self.end;
                loop {
                    self.end = 0;
                    self.start = 0;
                    let got = self.fill().await?;
                    if got == 0 {
                        break;
                    }
                    n += got as u64;
                }
                self.start = self.end;
                n
            }
        };
        Ok(Response {
            status,
            head_bytes: head_len,
            body_bytes,
            keep_alive: keep_alive && framing != Framing::Close,
            first_byte,
            done: self.last_receive(),
            wakeup: self.io.wire_stamps().and_then(|w| w.last_receive_delay()),
        })
    }

    /// Reads more bytes into the buffer; 0 at the end of the stream. The buffer stays
    /// initialized (zeroed once), so reads never clear memory first.
    async fn fill(&mut self) -> Result<usize, ConnectError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                // A head or chunk line is capped at MAX_HEAD, so this stays bounded.
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let n = self
            .io
            .read(&mut self.buf[self.end..])
            .await
            .map_err(|source| ConnectError::Io {
                during: "reading the response",
                source,
            })?;
        self.end += n;
        Ok(n)
    }

    /// Consumes `n` body bytes.
    async fn skip(&mut self, mut n: u64) -> Result<(), ConnectError> {
        loop {
            let have = (self.end - self.start) as u64;
            if have >= n {
                self.start += n as usize;
                return Ok(());
            }
            n -= have;
            self.start = self.end;
            if self.fill().await? == 0 {
                return Err(ConnectError::Io {
                    during: "reading the response body",
                    source: std::io::ErrorKind::UnexpectedEof.into(),
                });
            }
        }
    }

    /// Consumes a chunked body; returns its de-chunked size.
    async fn chunked(&mut self) -> Result<u64, ConnectError> {
        let mut total = 0u64;
        loop {
            let line = self.line().await?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(size_text, 16)
                .map_err(|_| http_err(format!("bad chunk size '{size_text}'")))?;
            if size == 0 {
                // Trailers until an empty line, MAX_HEAD bytes at most (as a head).
                let mut trailers = 0usize;
                loop {
                    let line = self.line().await?;
                    if line.is_empty() {
                        return Ok(total);
                    }
                    trailers += line.len() + 2;
                    if trailers > MAX_HEAD {
                        return Err(http_err(format!(
                            "trailer section larger than {MAX_HEAD} bytes"
                        )));
                    }
                }
            }
            self.skip(size).await?;
            if !self.line().await?.is_empty() {
                return Err(http_err("chunk not followed by CRLF".into()));
            }
            total += size;
        }
    }

    /// One CRLF-terminated line (without the CRLF).
    async fn line(&mut self) -> Result<String, ConnectError> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let raw = &self.buf[self.start..self.start + i];
                let line =
                    String::from_utf8_lossy(raw.strip_suffix(b"\r").unwrap_or(raw)).into_owned();
                self.start += i + 1;
                return Ok(line);
            }
            if self.end - self.start > MAX_HEAD {
                return Err(http_err("line too long in chunked body".into()));
            }
            if self.fill().await? == 0 {
                return Err(ConnectError::Io {
                    during: "reading a chunked body",
                    source: std::io::ErrorKind::UnexpectedEof.into(),
                });
            }
        }
    }

    /// Reads, discarding, until the server closes the connection, for at most
    /// [`TICKET_WAIT`]: after a request sent as 0-RTT data, whose answer came before the
    /// handshake's end, the server's session tickets come after the answer (once it has
    /// the client's Finished), and rustls takes them in as it reads. Not part of any
    /// phase.
    pub async fn linger(&mut self) {
        let mut scratch = [0u8; 1024];
        let _ = tokio::time::timeout(TICKET_WAIT, async {
            while let Ok(n) = self.io.read(&mut scratch).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    }

    /// Closes the connection (TLS close_notify, then TCP shutdown).
    pub async fn shutdown(&mut self) {
        let _ = self.io.shutdown().await;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    Close,
}

/// The body's framing and whether the connection stays open. A `Content-Length` that is
/// not a decimal number, or several that differ, make the response unreadable (RFC 9112
/// §6.3): there is no telling where it ends, so it is refused rather than waited for.
fn framing(
    resp: &httparse::Response<'_, '_>,
    status: u16,
) -> Result<(Framing, bool), ConnectError> {
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut keep_alive = true;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            // `Content-Length: 5, 5` (a list of one value repeated) is allowed; each
            // member must be 1*DIGIT.
            for part in h.value.split(|&b| b == b',') {
                let v = part.trim_ascii();
                let n = std::str::from_utf8(v)
                    .ok()
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| {
                        http_err(format!(
                            "invalid Content-Length {:?}",
                            String::from_utf8_lossy(h.value)
                        ))
                    })?;
                match length {
                    Some(m) if m != n => {
                        return Err(http_err(format!(
                            "differing Content-Length values {m} and {n}"
                        )));
                    }
                    _ => length = Some(n),
                }
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if h.value.to_ascii_lowercase().ends_with(b"chunked") {
                chunked = true;
            }
        } else if h.name.eq_ignore_ascii_case("connection")
            && h.value.eq_ignore_ascii_case(b"close")
        {
            keep_alive = false;
        }
    }
    // Transfer-Encoding overrides Content-Length; no body for 1xx, 204 and 304.
    let framing = if status / 100 == 1 || status == 204 || status == 304 {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::Close
    };
    Ok((framing, keep_alive))
}

fn http_err(reason: String) -> ConnectError {
    ConnectError::Http { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(wire: &[u8]) -> Vec<Result<Response, String>> {
        let (mut a, b) = tokio::io::duplex(1 << 16);
        // Written beside the reader: a wire longer than the pipe would block otherwise.
        let wire = wire.to_vec();
        let writer = tokio::spawn(async move {
            let _ = a.write_all(&wire).await;
        });
        let mut h = Http1::new(b);
        let mut out = Vec::new();
        for _ in 0..3 {
            let r = h.read_response().await.map_err(|e| e.to_string());
            let stop = r.is_err();
            out.push(r);
            if stop {
                break;
            }
        }
        writer.abort();
        out
    }

    #[test]
    fn a_body_makes_a_post_of_that_many_bytes() {
        let get = get_request("h", "/p", true);
        assert!(
            get.starts_with(b"GET /p HTTP/1.1\r\n") && get.ends_with(b"Connection: close\r\n\r\n")
        );
        let post = request("h", "/", false, 1000);
        let head_end = memchr::memmem::find(&post, b"\r\n\r\n").unwrap() + 4;
        let head = std::str::from_utf8(&post[..head_end]).unwrap();
        assert!(head.starts_with("POST / HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nContent-Length: 1000\r\n"), "{head}");
        assert!(!head.contains("Connection: close"), "{head}");
        assert_eq!(post.len() - head_end, 1000);
    }

    #[tokio::test]
    async fn lengths_chunks_and_close() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\nuntil the end";
        let r = read_all(wire).await;
        let ok: Vec<_> = r.iter().map(|r| r.as_ref().unwrap()).collect();
        assert_eq!(
            (ok[0].status, ok[0].body_bytes, ok[0].keep_alive),
            (200, 5, true)
        );
        assert_eq!((ok[1].status, ok[1].body_bytes), (404, 5));
        assert_eq!(
            (ok[2].status, ok[2].body_bytes, ok[2].keep_alive),
            (200, 13, false)
        );
    }

    #[tokio::test]
    async fn interim_responses_are_skipped() {
        let wire = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 204 No Content\r\n\r\n";
        let r = read_all(wire).await;
        let ok: Vec<_> = r.iter().take(2).map(|r| r.as_ref().unwrap()).collect();
        assert_eq!((ok[0].status, ok[0].body_bytes), (200, 2));
        assert_eq!(
            ok[0].head_bytes,
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n".len()
        );
        // The next response is the 204, not the 200 answering a second request.
        assert_eq!(ok[1].status, 204);
    }

    #[tokio::test]
    async fn endless_interim_responses_and_trailers_are_refused_in_words() {
        let wire = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM + 1);
        let r = read_all(&wire).await;
        assert!(
            r[0].as_ref()
                .unwrap_err()
                .contains("interim (1xx) responses"),
            "{r:?}"
        );
        let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
        wire.extend(b"X-Trailer: 1\r\n".repeat(MAX_HEAD / 10));
        let r = read_all(&wire).await;
        assert!(
            r[0].as_ref()
                .unwrap_err()
                .contains("trailer section larger"),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn truncated_and_garbage() {
        let r = read_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").await;
        assert!(
            r[0].as_ref()
                .unwrap_err()
                .contains("reading the response body"),
            "{r:?}"
        );
        // Differing duplicate lengths and an invalid one: an error at once (RFC 9112
        // §6.3), not a wait for bytes that may never come.
        for wire in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 100\r\n\r\nhello"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 100\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nhello",
        ] {
            let r = read_all(wire).await;
            let e = r[0].as_ref().unwrap_err();
            assert!(
                e.contains("bad HTTP response") && e.contains("Content-Length"),
                "{r:?}"
            );
        }
        // The same length twice is one length.
        let r =
            read_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5, 5\r\n\r\nhello")
                .await;
        assert_eq!(r[0].as_ref().unwrap().body_bytes, 5, "{r:?}");
        let r = read_all(b"\x16\x03\x03garbage\r\n\r\n").await;
        assert!(
            r[0].as_ref().unwrap_err().contains("bad HTTP response"),
            "{r:?}"
        );
    }
}
