//! `tlsperf serve --stack axum`: the same accept loop, TLS handshake, handshake metrics,
//! connection limit and graceful shutdown as the hyper stack ([`super::Server`]), with an
//! axum 0.8 [`Router`] answering the requests instead of a bare hyper `service_fn`. The
//! router serves the same routes and bodies as [`super::http::serve`] (`GET /`: the
//! `--body-size` JSON document, `POST /`: the upload read and counted, then the same
//! document, `GET /health`, a JSON 404 and 405 otherwise) and is handed
//! to hyper-util's HTTP/1.1 and HTTP/2 connections through
//! [`hyper_util::service::TowerToHyperService`], so only the HTTP layer differs.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;

use super::http::{self, Bodies};
use super::metrics::Metrics;

#[derive(Clone)]
struct AppState {
    bodies: Bodies,
    metrics: Arc<Metrics>,
    upload: http::UploadLimits,
}

/// The router: `/` and `/health` (GET, and HEAD through axum's `get`), `POST /`, JSON
/// 404 and 405 bodies otherwise. Every request, answered or not, counts as one served request, as
/// with the hyper stack.
/// Uploads slower than `limits` are cut as with the hyper stack ([`http::too_slow`]; the
/// connection's [`http::Closer`] comes as a request extension).
pub fn router(bodies: Bodies, metrics: Arc<Metrics>, limits: http::UploadLimits) -> Router {
    Router::new()
        .route("/", get(root).merge(post(upload)))
        .route("/health", get(health))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .with_state(AppState {
            bodies,
            metrics,
            upload: limits,
        })
}

/// A JSON answer, with the `Alt-Svc` header when HTTP/3 is served too.
fn json(s: &AppState, status: StatusCode, body: Bytes) -> Response {
    let mut r = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Some(v) = s.bodies.alt_svc() {
        r.headers_mut().insert(header::ALT_SVC, v.clone());
    }
    r
}

async fn root(State(s): State<AppState>) -> Response {
    s.metrics.request();
    let (_, body) = s.bodies.answer(http::Verb::Read, "/");
    json(&s, StatusCode::OK, body)
}

async fn upload(
    State(s): State<AppState>,
    version: axum::http::Version,
    closer: Option<axum::Extension<http::Closer>>,
    body: axum::body::Body,
) -> Response {
    s.metrics.request();
    if http::drain(body, &s.metrics, s.upload).await.is_err() {
        return http::too_slow(version, closer.as_ref().map(|c| &c.0), &s.metrics);
    }
    let (_, body) = s.bodies.answer(http::Verb::Post, "/");
    json(&s, StatusCode::OK, body)
}

async fn health(State(s): State<AppState>) -> Response {
    s.metrics.request();
    let (_, body) = s.bodies.answer(http::Verb::Read, "/health");
    json(&s, StatusCode::OK, body)
}

async fn method_not_allowed(State(s): State<AppState>) -> Response {
    s.metrics.request();
    json(
        &s,
        StatusCode::METHOD_NOT_ALLOWED,
        Bytes::from_static(http::METHOD_NOT_ALLOWED),
    )
}

async fn not_found(State(s): State<AppState>, method: axum::http::Method) -> Response {
    s.metrics.request();
    // The hyper stack answers 405 before looking at the path.
    if method != axum::http::Method::GET && method != axum::http::Method::HEAD {
        return json(
            &s,
            StatusCode::METHOD_NOT_ALLOWED,
            Bytes::from_static(http::METHOD_NOT_ALLOWED),
        );
    }
    json(
        &s,
        StatusCode::NOT_FOUND,
        Bytes::from_static(http::NOT_FOUND),
    )
}
