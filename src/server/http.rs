//! The HTTP side: `GET /` and `/health` answer a small JSON body (or `--body-size` bytes
//! of JSON for `/`); the metrics listener answers `/metrics` (Prometheus) and `/stats`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

use super::metrics::Metrics;

/// The bodies served, built once.
#[derive(Clone)]
pub struct Bodies {
    root: Bytes,
    health: Bytes,
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
        }
    }

    /// The answer to a request for `path` (every stack serves the same): status and JSON
    /// body. `get_or_head` is whether the method is GET or HEAD.
    pub fn answer(&self, get_or_head: bool, path: &str) -> (u16, Bytes) {
        if !get_or_head {
            return (405, Bytes::from_static(METHOD_NOT_ALLOWED));
        }
        match path {
            "/" => (200, self.root.clone()),
            "/health" => (200, self.health.clone()),
            _ => (404, Bytes::from_static(NOT_FOUND)),
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
    let get_or_head = req.method() == Method::GET || req.method() == Method::HEAD;
    let (status, body) = bodies.answer(get_or_head, req.uri().path());
    Ok(json(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        body,
    ))
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
    fn body_sizes() {
        assert_eq!(&Bodies::new(0).root[..], br#"{"status":"ok"}"#);
        let b = Bodies::new(1000).root;
        assert_eq!(b.len(), 1000);
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["status"], "ok");
    }
}
