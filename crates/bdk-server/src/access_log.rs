//! The access log a person reads under `bdk serve` (target `bdk::access`, level info): one
//! line per request with its method, path, status and the time to the response head (a
//! stream's line appears when it opens). Health checks log at debug, so probes do not drown it.

use std::time::Instant;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

pub async fn log(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let ms = started.elapsed().as_millis() as u64;
    if path.ends_with("/health") {
        tracing::debug!(target: "bdk::access", %method, %path, status, duration_ms = ms, "{method} {path} {status} {ms} ms");
    } else {
        tracing::info!(target: "bdk::access", %method, %path, status, duration_ms = ms, "{method} {path} {status} {ms} ms");
    }
    response
}
