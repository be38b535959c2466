//! The HTTP side: `GET /` and `/health` answer a small JSON body (or `--body-size` bytes
//! of JSON for `/`); `POST /` (an upload: `load --body-size`) is read to its end, its
//! body counted and thrown away, and answered as `GET /` is; the metrics listener answers
//! `/metrics` (Prometheus) and `/stats`.
//!
//! An upload too slow for [`UploadLimits`] (`--body-timeout`, `--body-min-rate`) is cut:
//! counted as `body-timeout`, answered `408` with `Connection: close` on HTTP/1.1 (hyper
//! then closes the connection), and on HTTP/2 its whole connection is closed at once
//! ([`Closer`]): a client that trickles its bodies would otherwise hold the connection
//! with one new stream after another, each byte resetting the idle timeout.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};

use super::metrics::Metrics;

/// The bodies served, built once.
#[derive(Clone)]
pub struct Bodies {
    root: Bytes,
    health: Bytes,
    /// `Alt-Svc` for every answer over TCP, when HTTP/3 is served too (`serve --quic`).
    alt_svc: Option<hyper::header::HeaderValue>,
}

impl Bodies {
    /// `/` answers exactly `body_size` bytes of JSON when it is larger than the default.
    pub fn new(body_size: usize) -> Self {
        let small = br#"{"status":"ok"}"#;
        let root = if body_size > small.len() + 10 {
            let prefix = br#"{"status":"ok","pad":""#;
            let mut v = Vec::with_capacity(body_size);
            v.extend_from_slice(prefix);
            v.resize(body_size - 2, b'x');
            v.extend_from_slice(br#""}"#);
            Bytes::from(v)
        } else {
            Bytes::from_static(small)
        };
        Bodies {
            root,
            health: Bytes::from_static(small),
            alt_svc: None,
        }
    }

    /// Answers over TCP advertise HTTP/3 on UDP `port`: `Alt-Svc: h3=":PORT"` (RFC 7838;
    /// the same host, for the default 24 hours).
    pub fn with_alt_svc(mut self, port: u16) -> Self {
        self.alt_svc = hyper::header::HeaderValue::from_str(&format!("h3=\":{port}\"")).ok();
        self
    }

    /// The `Alt-Svc` header value answers over TCP carry, if any.
    pub fn alt_svc(&self) -> Option<&hyper::header::HeaderValue> {
        self.alt_svc.as_ref()
    }

    /// The answer to a `method` request for `path` (every stack serves the same): status
    /// and JSON body. A `POST /` (its body read by the stack first) is answered as
    /// `GET /`.
    pub fn answer(&self, method: Verb, path: &str) -> (u16, Bytes) {
        match (method, path) {
            (Verb::Read, "/") | (Verb::Post, "/") => (200, self.root.clone()),
            (Verb::Read, "/health") => (200, self.health.clone()),
            (Verb::Read, _) => (404, Bytes::from_static(NOT_FOUND)),
            (Verb::Post | Verb::Other, _) => (405, Bytes::from_static(METHOD_NOT_ALLOWED)),
        }
    }
}

/// What a request's method asks, as far as the answers differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET or HEAD.
    Read,
    /// POST: an upload, accepted on `/` only.
    Post,
    /// Anything else: 405.
    Other,
}

impl Verb {
    /// The verb of the method named `method` (`GET`: every stack's method type has
    /// `as_str`).
    pub fn of(method: &str) -> Verb {
        match method {
            "GET" | "HEAD" => Verb::Read,
            "POST" => Verb::Post,
            _ => Verb::Other,
        }
    }
}

/// How slow an upload may be (`--body-timeout`, `--body-min-rate`): its body is read in
/// windows of `timeout` from the moment the request's head has been read, and each window
/// must bring at least `min_rate` × `timeout` bytes (at least one) or the body's end.
///
/// A per-read timeout alone (nginx's `client_body_timeout`: the time between two reads)
/// is defeated by a client sending one byte every 0.3 s, and one deadline for the whole
/// body would cut large uploads on slow links; a minimum rate per window cuts the
/// trickle within two windows and lets any upload at the rate through, however long,
/// while a client that sent much early still has to keep sending.
#[derive(Debug, Clone, Copy)]
pub struct UploadLimits {
    /// The window.
    pub timeout: Duration,
    /// Bytes per second each window must average.
    pub min_rate: u64,
}

impl UploadLimits {
    /// Bytes each window must bring: `min_rate` × `timeout`, at least one.
    fn per_window(&self) -> u64 {
        let bytes = self.min_rate as f64 * self.timeout.as_secs_f64();
        (bytes.ceil() as u64).max(1)
    }
}

/// The clock of one upload against its [`UploadLimits`]: the current window's end and the
/// bytes it brought.
#[derive(Debug)]
pub struct UploadClock {
    limits: UploadLimits,
    window_end: Instant,
    in_window: u64,
}

impl UploadClock {
    /// A clock started now (the request's head has been read).
    pub fn start(limits: UploadLimits) -> Self {
        UploadClock {
            limits,
            window_end: Instant::now() + limits.timeout,
            in_window: 0,
        }
    }

    /// The instant the current window ends: wait for the body no longer than this, then
    /// call [`UploadClock::on_time`].
    pub fn window_end(&self) -> tokio::time::Instant {
        self.window_end.into()
    }

    /// `n` more bytes of the body arrived.
    pub fn bytes(&mut self, n: u64) {
        self.in_window = self.in_window.saturating_add(n);
    }

    /// False when a window has ended short of its bytes (the upload is too slow); else
    /// starts the windows that have ended since.
    pub fn on_time(&mut self) -> bool {
        let now = Instant::now();
        while now >= self.window_end {
            if self.in_window < self.limits.per_window() {
                return false;
            }
            self.in_window = 0;
            self.window_end += self.limits.timeout;
        }
        true
    }
}

/// An upload cut for being slower than its [`UploadLimits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooSlow;

/// Reads an upload's body to its end, counting its bytes into `metrics` as they come
/// (never held: a body may be larger than memory), within `limits`. A body cut short
/// (the client gone) leaves the bytes read counted; one slower than `limits` is left
/// unread ([`TooSlow`]).
pub async fn drain<B>(body: B, metrics: &Metrics, limits: UploadLimits) -> Result<(), TooSlow>
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    let mut clock = UploadClock::start(limits);
    loop {
        match tokio::time::timeout_at(clock.window_end(), body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    metrics.request_body(data.len() as u64);
                    clock.bytes(data.len() as u64);
                }
            }
            // The end of the body, or the client gone.
            Ok(None | Some(Err(_))) => return Ok(()),
            Err(_) => {}
        }
        if !clock.on_time() {
            return Err(TooSlow);
        }
    }
}

/// Closes the connection a request came on, with every HTTP/2 stream on it: the accept
/// loop's close request, the one that sheds idle connections.
#[derive(Clone)]
pub struct Closer(pub(super) Arc<super::ConnState>);

impl Closer {
    /// Asks the connection's task to close it now.
    pub fn close(&self) {
        self.0
            .shed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.0.close.notify_one();
    }
}

/// The body of a 408 answer.
pub const REQUEST_TIMEOUT: &[u8] = br#"{"error":"request body too slow"}"#;

/// The body of a 405 answer.
pub const METHOD_NOT_ALLOWED: &[u8] = br#"{"error":"method not allowed"}"#;
/// The body of a 404 answer.
pub const NOT_FOUND: &[u8] = br#"{"error":"not found"}"#;

fn json(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The answer to an upload [`drain`] cut, counted as `body-timeout`: a JSON `408` with
/// `Connection: close` on HTTP/1 (hyper closes the connection after it); on HTTP/2 the
/// connection is closed through `closer` at once (the answer may not leave).
pub fn too_slow<B: From<Bytes>>(
    version: hyper::Version,
    closer: Option<&Closer>,
    metrics: &Metrics,
) -> Response<B> {
    metrics.failure("body-timeout");
    let mut r = Response::new(B::from(Bytes::from_static(REQUEST_TIMEOUT)));
    *r.status_mut() = StatusCode::REQUEST_TIMEOUT;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if version == hyper::Version::HTTP_2 {
        if let Some(c) = closer {
            c.close();
        }
    } else {
        r.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

/// The TLS listener's service; `closer` closes the request's connection (an HTTP/2
/// upload too slow for `limits`).
pub async fn serve(
    req: Request<Incoming>,
    bodies: Bodies,
    metrics: Arc<Metrics>,
    limits: UploadLimits,
    closer: Closer,
) -> Result<Response<Full<Bytes>>, Infallible> {
    metrics.request();
    let verb = Verb::of(req.method().as_str());
    let version = req.version();
    let (status, body) = bodies.answer(verb, req.uri().path());
    if verb == Verb::Post
        && status == 200
        && drain(req.into_body(), &metrics, limits).await.is_err()
    {
        return Ok(too_slow(version, Some(&closer), &metrics));
    }
    let mut r = json(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body,
    );
    if let Some(v) = bodies.alt_svc() {
        r.headers_mut().insert(hyper::header::ALT_SVC, v.clone());
    }
    Ok(r)
}

/// The metrics listener's service.
pub async fn serve_metrics(
    req: Request<Incoming>,
    metrics: Arc<Metrics>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(match req.uri().path() {
        "/metrics" => {
            let mut r = Response::new(Full::new(Bytes::from(metrics.prometheus_text())));
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        "/stats" => {
            let body = serde_json::to_vec(&metrics.snapshot()).unwrap_or_default();
            json(StatusCode::OK, Bytes::from(body))
        }
        _ => json(StatusCode::NOT_FOUND, Bytes::from_static(NOT_FOUND)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alt_svc_names_the_port() {
        assert!(Bodies::new(0).alt_svc().is_none());
        let b = Bodies::new(0).with_alt_svc(8443);
        assert_eq!(b.alt_svc().unwrap(), "h3=\":8443\"");
    }

    #[test]
    fn body_sizes() {
        assert_eq!(&Bodies::new(0).root[..], br#"{"status":"ok"}"#);
        let b = Bodies::new(1000).root;
        assert_eq!(b.len(), 1000);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["status"], "ok");
    }

    #[test]
    fn a_post_to_the_root_is_answered_as_a_get_and_elsewhere_refused() {
        let b = Bodies::new(1000);
        assert_eq!(b.answer(Verb::Post, "/"), (200, b.root.clone()));
        assert_eq!(b.answer(Verb::Post, "/health").0, 405);
        assert_eq!(b.answer(Verb::Post, "/nowhere").0, 405);
        assert_eq!(b.answer(Verb::Other, "/").0, 405);
        assert_eq!(b.answer(Verb::Read, "/nowhere").0, 404);
        assert_eq!(Verb::of(hyper::Method::HEAD.as_str()), Verb::Read);
        assert_eq!(Verb::of(hyper::Method::POST.as_str()), Verb::Post);
        assert_eq!(Verb::of(hyper::Method::PUT.as_str()), Verb::Other);
    }

    const LIMITS: UploadLimits = UploadLimits {
        timeout: Duration::from_secs(10),
        min_rate: 1024,
    };

    #[tokio::test]
    async fn an_upload_is_drained_and_counted() {
        let m = Metrics::new();
        let r = drain(Full::new(Bytes::from(vec![7u8; 3000])), &m, LIMITS).await;
        assert_eq!(r, Ok(()));
        let r = drain(Full::new(Bytes::from(vec![7u8; 1000])), &m, LIMITS).await;
        assert_eq!(r, Ok(()));
        assert_eq!(m.snapshot().request_body_bytes, 4000);
    }

    #[test]
    fn each_window_must_bring_its_bytes() {
        let limits = UploadLimits {
            timeout: Duration::from_millis(20),
            min_rate: 1000,
        };
        assert_eq!(limits.per_window(), 20);
        let zero = UploadLimits {
            min_rate: 0,
            ..limits
        };
        assert_eq!(zero.per_window(), 1);
        // Enough in the first window, nothing in the second.
        let mut c = UploadClock::start(limits);
        c.bytes(25);
        assert!(c.on_time());
        std::thread::sleep(Duration::from_millis(25));
        assert!(c.on_time(), "the first window brought 25 bytes");
        std::thread::sleep(Duration::from_millis(20));
        assert!(!c.on_time(), "the second brought none");
        // A trickle: 19 bytes a window.
        let mut c = UploadClock::start(limits);
        c.bytes(19);
        std::thread::sleep(Duration::from_millis(25));
        assert!(!c.on_time());
    }
}
