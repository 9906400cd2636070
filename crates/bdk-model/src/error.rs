//! The one error type every provider returns, and whether retrying can help.
//!
//! It does not decide *when* to retry (that is `retry.rs`) nor map HTTP answers onto it (that is
//! each provider's `errors` module).

use std::time::Duration;

/// Result of a model call.
pub type Result<T> = std::result::Result<T, ModelError>;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Opening the TCP/TLS connection.
    Connect,
    /// From sending the request to the first byte of the answer's body.
    FirstByte,
    /// Between two chunks of a streamed answer.
    Idle,
}

impl TimeoutPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::FirstByte => "first byte",
            TimeoutPhase::Idle => "idle",
        }
    }
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The credential was missing, wrong or lacks permission (401/403). Never retried.
    #[error("authentication failed: {message}")]
    Authentication { message: String },
    /// Too many requests (429); `retry_after` is what the server asked for, if it said.
    #[error("rate limited: {message}")]
    RateLimited { message: String, retry_after: Option<Duration> },
    /// The conversation no longer fits the model's context window.
    #[error("context length exceeded: {message}")]
    ContextLengthExceeded { message: String },
    /// The provider refused the request as malformed (other 4xx). Never retried.
    #[error("invalid request (HTTP {status}): {message}")]
    InvalidRequest { status: u16, message: String },
    /// The provider failed or is overloaded (5xx, Anthropic `overloaded_error`).
    #[error("server error (HTTP {status}): {message}")]
    Server { status: u16, message: String },
    /// The connection failed or broke.
    #[error("network error: {message}")]
    Network { message: String },
    /// A wait ran out.
    #[error("timed out waiting for the model ({} timeout after {}ms)", phase.as_str(), after.as_millis())]
    Timeout { phase: TimeoutPhase, after: Duration },
    /// The stream could not be understood (bad JSON, an unknown shape, ended early).
    #[error("malformed model stream: {message}")]
    MalformedStream { message: String },
    /// No model can be called; the message says what to set.
    #[error("model unavailable: {message}")]
    ModelUnavailable { message: String },
    /// The caller cancelled the call.
    #[error("model call cancelled")]
    Cancelled,
}

impl ModelError {
    /// Whether the same request may succeed if sent again (rate limits, 5xx, network, timeouts).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Network { .. }
                | ModelError::Timeout { .. }
        )
    }

    /// A stable snake_case code for events and HTTP error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Authentication { .. } => "authentication",
            ModelError::RateLimited { .. } => "rate_limited",
            ModelError::ContextLengthExceeded { .. } => "context_length_exceeded",
            ModelError::InvalidRequest { .. } => "invalid_request",
            ModelError::Server { .. } => "server",
            ModelError::Network { .. } => "network",
            ModelError::Timeout { .. } => "timeout",
            ModelError::MalformedStream { .. } => "malformed_stream",
            ModelError::ModelUnavailable { .. } => "model_unavailable",
            ModelError::Cancelled => "cancelled",
        }
    }

    /// How long the server asked us to wait, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_kinds() {
        let retryable = [
            ModelError::RateLimited { message: String::new(), retry_after: None },
            ModelError::Server { status: 500, message: String::new() },
            ModelError::Network { message: String::new() },
            ModelError::Timeout { phase: TimeoutPhase::Idle, after: Duration::from_secs(1) },
        ];
        assert!(retryable.iter().all(ModelError::is_retryable));
        let fatal = [
            ModelError::Authentication { message: String::new() },
            ModelError::ContextLengthExceeded { message: String::new() },
            ModelError::InvalidRequest { status: 400, message: String::new() },
            ModelError::MalformedStream { message: String::new() },
            ModelError::ModelUnavailable { message: String::new() },
            ModelError::Cancelled,
        ];
        assert!(!fatal.iter().any(ModelError::is_retryable));
    }

    #[test]
    fn timeout_message_names_the_phase() {
        let err = ModelError::Timeout { phase: TimeoutPhase::FirstByte, after: Duration::from_millis(250) };
        assert_eq!(err.to_string(), "timed out waiting for the model (first byte timeout after 250ms)");
        assert_eq!(err.code(), "timeout");
    }
}
