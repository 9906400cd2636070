//! The server's side of telemetry: the `agent_sdk.http` span around each request (a W3C
//! `traceparent` header makes the caller's span its parent), `http.server.request.duration`,
//! and the Prometheus text endpoint `GET /metrics` (only with `serve --metrics`). With
//! telemetry off the middleware is one branch. The exporters themselves are installed by the
//! binary (`bdk_telemetry::export`).

use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bdk_telemetry::{Context, KeyValue, SpanKind, Telemetry, traceparent};

use crate::state::AppState;

/// The span of one HTTP request (the reference's name).
pub const HTTP_SPAN: &str = "agent_sdk.http";

/// Middleware: a server span per request, under the caller's `traceparent` when it sent one.
pub(crate) async fn http_span(State(telemetry): State<Telemetry>, request: Request, next: Next) -> Response {
    if !telemetry.is_enabled() {
        return next.run(request).await;
    }
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let parent = request
        .headers()
        .get(traceparent::HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(traceparent::parent)
        .unwrap_or_else(Context::new);
    let span = telemetry.span(HTTP_SPAN, SpanKind::Server, Some(&parent), || {
        vec![
            KeyValue::new("http.request.method", method.clone()),
            KeyValue::new("url.path", request.uri().path().to_owned()),
        ]
    });
    let response = span.run(next.run(request)).await;
    let status = response.status().as_u16();
    span.set(|| vec![KeyValue::new("http.response.status_code", i64::from(status))]);
    if status >= 500 {
        span.fail_with(|| format!("HTTP {status}"));
    }
    span.end();
    if let Some(metrics) = telemetry.metrics() {
        metrics.http_duration.record(
            started.elapsed().as_secs_f64(),
            &[
                KeyValue::new("http.request.method", method),
                KeyValue::new("http.response.status_code", i64::from(status)),
            ],
        );
    }
    response
}

/// `GET /metrics`, when `--metrics` is set.
pub(crate) fn metrics_routes(state: &AppState) -> Router {
    if !state.options.metrics {
        return Router::new();
    }
    Router::new().route("/metrics", get(metrics)).with_state(state.clone())
}

async fn metrics(State(state): State<AppState>) -> Response {
    let Some(prometheus) = &state.prometheus else {
        let message = "no metrics reader is installed (the host was built without `AppState::with_telemetry`)\n";
        return (StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    };
    match prometheus.render() {
        Ok(text) => ([(header::CONTENT_TYPE, bdk_telemetry::prometheus::CONTENT_TYPE)], text).into_response(),
        Err(error) => {
            tracing::warn!(%error, "cannot collect metrics for /metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("cannot collect metrics: {error}\n")).into_response()
        }
    }
}
