//! Maps failed HTTP answers, in-stream error payloads and transport errors onto [`ModelError`].
//!
//! OpenAI-style (`{"error": {"message", "type", "code"}}`) and Anthropic-style
//! (`{"type": "error", "error": {"type", "message"}}`) bodies are both understood.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::Timeouts;
use crate::error::{ModelError, TimeoutPhase};

/// Longest error text kept from a body that is not JSON.
const MAX_BODY_IN_MESSAGE: usize = 500;

/// A non-2xx answer.
pub(crate) fn from_response(status: u16, headers: &HeaderMap, body: &str) -> ModelError {
    let (message, kind) = describe(body);
    let message = if message.is_empty() { format!("HTTP {status}") } else { message };
    classify(status, &kind, message, retry_after(headers))
}

/// An error payload received inside a stream (`error` SSE event or `{"error": ...}` chunk).
pub(crate) fn from_stream_payload(payload: &Value) -> ModelError {
    let (message, kind) = describe_value(payload);
    let status = match kind.as_str() {
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" => 429,
        "overloaded_error" => 529,
        "invalid_request_error" => 400,
        _ => payload.pointer("/error/status").or(payload.get("status")).and_then(Value::as_u64).unwrap_or(500) as u16,
    };
    classify(status, &kind, message, None)
}

/// `(message, type-or-code)` from an error body.
fn describe(body: &str) -> (String, String) {
    match serde_json::from_str::<Value>(body) {
        Ok(value) => describe_value(&value),
        Err(_) => (body.trim().chars().take(MAX_BODY_IN_MESSAGE).collect(), String::new()),
    }
}

fn describe_value(value: &Value) -> (String, String) {
    let error = value.get("error").unwrap_or(value);
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
    let message = match error {
        Value::String(s) => s.clone(),
        _ => text(error.get("message")),
    };
    let code = text(error.get("code"));
    let kind = if code.is_empty() { text(error.get("type")) } else { code };
    (message, kind)
}

fn classify(status: u16, kind: &str, message: String, retry_after: Option<Duration>) -> ModelError {
    if is_context_length(kind, &message) {
        return ModelError::ContextLengthExceeded { message };
    }
    match status {
        401 | 403 => ModelError::Authentication { message },
        // Out of credit: waiting will not help.
        429 if kind == "insufficient_quota" => ModelError::InvalidRequest { status, message },
        429 => ModelError::RateLimited { message, retry_after },
        404 => ModelError::ModelUnavailable {
            message: format!("{message} (check the model id: BDK_MODEL or `[model] id` in agent.toml)"),
        },
        413 => ModelError::ContextLengthExceeded { message },
        408 | 500..=599 => ModelError::Server { status, message },
        _ => ModelError::InvalidRequest { status, message },
    }
}

fn is_context_length(kind: &str, message: &str) -> bool {
    if matches!(kind, "context_length_exceeded" | "request_too_large") {
        return true;
    }
    let lower = message.to_ascii_lowercase();
    ["context length", "context_length", "maximum context", "context window", "prompt is too long", "too many tokens"]
        .iter()
        .any(|needle| lower.contains(needle))
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. HTTP dates are ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1000.0));
    }
    let secs = header("retry-after")?.parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// A transport error from reqwest.
pub(crate) fn from_reqwest(err: &reqwest::Error, timeouts: &Timeouts) -> ModelError {
    let message = error_chain(err);
    if err.is_connect() && (err.is_timeout() || message.contains("timed out")) {
        return ModelError::Timeout { phase: TimeoutPhase::Connect, after: timeouts.connect };
    }
    if err.is_timeout() {
        return ModelError::Timeout { phase: TimeoutPhase::FirstByte, after: timeouts.first_byte };
    }
    ModelError::Network { message }
}

/// The error and its sources, joined: reqwest's own message is often just "error sending request".
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn statuses_map_to_kinds() {
        let none = HeaderMap::new();
        let body = r#"{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(from_response(401, &none, body), ModelError::Authentication { message: "bad key".into() });
        let err = from_response(429, &headers(&[("retry-after", "2")]), "slow down");
        assert_eq!(
            err,
            ModelError::RateLimited { message: "slow down".into(), retry_after: Some(Duration::from_secs(2)) }
        );
        let err = from_response(429, &headers(&[("retry-after-ms", "150")]), "{}");
        assert_eq!(err.retry_after(), Some(Duration::from_millis(150)));
        assert!(
            !from_response(429, &none, r#"{"error":{"message":"pay","code":"insufficient_quota"}}"#).is_retryable()
        );
        assert_eq!(from_response(503, &none, "").code(), "server");
        assert_eq!(from_response(404, &none, "").code(), "model_unavailable");
        let ctx = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
        assert_eq!(from_response(400, &none, ctx).code(), "context_length_exceeded");
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 300000 tokens"}}"#;
        assert_eq!(from_response(400, &none, anthropic).code(), "context_length_exceeded");
        assert_eq!(from_response(400, &none, r#"{"error":{"message":"no"}}"#).code(), "invalid_request");
    }

    #[test]
    fn stream_payloads_map_by_type() {
        let overloaded = serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}});
        assert_eq!(from_stream_payload(&overloaded), ModelError::Server { status: 529, message: "busy".into() });
        let openai = serde_json::json!({"error": {"message": "boom"}});
        assert_eq!(from_stream_payload(&openai).code(), "server");
    }
}
