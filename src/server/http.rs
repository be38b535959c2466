//! The HTTP side: `GET /` and `/health` answer a small JSON body (or `--body-size` bytes
//! of JSON for `/`); `POST /` (an upload: `load --body-size`) is read to its end, its
//! body counted and thrown away, and answered as `GET /` is; the metrics listener answers
//! `/metrics` (Prometheus) and `/stats`.

use std::convert::Infallible;
use std::sync::Arc;

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

/// Reads an upload's body to its end, counting its bytes into `metrics` as they come
/// (never held: a body may be larger than memory). A body cut short (the client gone)
/// leaves the bytes read counted.
pub async fn drain<B>(body: B, metrics: &Metrics)
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut body = std::pin::pin!(body);
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            metrics.request_body(data.len() as u64);
        }
    }
}

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

/// The TLS listener's service.
pub async fn serve(
    req: Request<Incoming>,
    bodies: Bodies,
    metrics: Arc<Metrics>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    metrics.request();
    let verb = Verb::of(req.method().as_str());
    let (status, body) = bodies.answer(verb, req.uri().path());
    if verb == Verb::Post && status == 200 {
        drain(req.into_body(), &metrics).await;
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

    #[tokio::test]
    async fn an_upload_is_drained_and_counted() {
        let m = Metrics::new();
        drain(Full::new(Bytes::from(vec![7u8; 3000])), &m).await;
        drain(Full::new(Bytes::from(vec![7u8; 1000])), &m).await;
        assert_eq!(m.snapshot().request_body_bytes, 4000);
    }
}
