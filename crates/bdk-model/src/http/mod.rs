//! What the HTTP providers share: timeouts, sending a request under them and cancellation,
//! mapping failed answers and transport errors onto [`ModelError`], and the SSE stream driver.
//!
//! Wire formats (request bodies, stream chunks) belong to each provider, not here.

pub(crate) mod body;
pub mod errors;
pub mod sse;
pub mod stream;

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{ModelError, TimeoutPhase};
use crate::types::ModelParams;

/// What an HTTP provider needs to reach its model.
#[derive(Clone, PartialEq)]
pub struct HttpConfig {
    /// The model id sent in the request.
    pub model: String,
    /// API root, such as `https://api.x.ai/v1`; the provider appends its path.
    pub base_url: String,
    /// Sent as a bearer token (OpenAI-compatible) or `x-api-key` (Anthropic); never logged.
    pub api_key: Option<String>,
    /// Defaults for every call; a request's own params win.
    pub params: ModelParams,
    pub timeouts: Timeouts,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("params", &self.params)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

/// How long to wait at each phase of a streamed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening the connection (TCP and TLS).
    pub connect: Duration,
    /// From sending the request to the first byte of the body. Reasoning models can think a
    /// while before they say anything, so this is generous.
    pub first_byte: Duration,
    /// Between two chunks of the body once it started.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { connect: Duration::from_secs(10), first_byte: Duration::from_secs(180), idle: Duration::from_secs(120) }
    }
}

/// Builds the client every HTTP provider uses.
pub(crate) fn client(timeouts: &Timeouts) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .user_agent(concat!("bdk/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ModelError::Network { message: format!("cannot build the HTTP client: {e}") })
}

/// Sends `request` and waits for a successful answer's headers, under the first-byte deadline
/// and `cancel`. A non-2xx answer is read and mapped with [`errors::from_response`].
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    timeouts: &Timeouts,
    started: Instant,
    cancel: &CancellationToken,
) -> Result<reqwest::Response, ModelError> {
    let deadline = started + timeouts.first_byte;
    let response = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(ModelError::Cancelled),
        result = tokio::time::timeout_at(deadline, request.send()) => match result {
            Err(_) => return Err(ModelError::Timeout { phase: TimeoutPhase::FirstByte, after: timeouts.first_byte }),
            Ok(Err(err)) => return Err(errors::from_reqwest(&err, timeouts)),
            Ok(Ok(response)) => response,
        },
    };
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    // The error body is small; give it the rest of the first-byte budget, then go without.
    let body = tokio::select! {
        biased;
        () = cancel.cancelled() => return Err(ModelError::Cancelled),
        body = tokio::time::timeout_at(deadline, response.text()) => body.ok().and_then(Result::ok).unwrap_or_default(),
    };
    Err(errors::from_response(status, &headers, &body))
}

/// Adds a W3C `traceparent` naming the current span, when there is one: the engine makes the
/// model call's span current while the request is built (telemetry on). With nothing traced it
/// is one thread-local read and the request is unchanged.
pub(crate) fn with_traceparent(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    use opentelemetry::trace::TraceContextExt as _;
    let value = opentelemetry::Context::map_current(|cx| {
        let span = cx.span();
        let span = span.span_context();
        span.is_valid().then(|| format!("00-{}-{}-{:02x}", span.trace_id(), span.span_id(), span.trace_flags().to_u8()))
    });
    match value {
        Some(value) => request.header("traceparent", value),
        None => request,
    }
}

/// Joins `base_url` and `path` with exactly one slash.
pub(crate) fn endpoint(base_url: &str, path: &str) -> String {
    format!("{}/{}", base_url.trim_end_matches('/'), path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn endpoint_joins_with_one_slash() {
        assert_eq!(super::endpoint("http://x/v1/", "/chat/completions"), "http://x/v1/chat/completions");
        assert_eq!(super::endpoint("http://x/v1", "messages"), "http://x/v1/messages");
    }
}
