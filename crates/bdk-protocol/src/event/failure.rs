//! The machine-readable reason a turn or a task session failed: the `error` field of
//! `turn.failed` and `session.failed`. Codes are stable forever; docs/http.md says what a client
//! should do for each. Deciding which code a failure gets is the engine's job, not this module's.

use serde::{Deserialize, Serialize};

/// Why a turn (or a task session) failed. Serialized as a snake_case string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// The provider answered 429 after the retries ran out. Retry later.
    RateLimited,
    /// The model credential is missing, wrong or lacks permission. Fix the credential.
    Authentication,
    /// The conversation no longer fits the model's context window. Start a new session.
    ContextLength,
    /// The provider refused the request as malformed (another 4xx).
    InvalidRequest,
    /// The provider failed or is overloaded (5xx) after the retries ran out. Retry later.
    ProviderError,
    /// The connection to the provider failed or broke after the retries ran out.
    Network,
    /// No model can be called (no key, unknown model). Fix the configuration.
    ModelUnavailable,
    /// A wait on the model ran out after the retries.
    Timeout,
    /// The provider's stream could not be understood.
    MalformedStream,
    /// One model step produced more output than the host accepts.
    OutputTooLarge,
    /// The turn used every model step (`max_steps`) without a final answer.
    MaxSteps,
    /// The turn was stopped or preempted by a newer message.
    Cancelled,
    /// The host was shutting down and cancelled the turn.
    ShuttingDown,
    /// The host stopped while the turn ran; recovery closed it at the next start.
    HostRestarted,
    /// The state root could not be written (disk full, read-only).
    Storage,
    /// The session workspace could not be prepared.
    Workspace,
    /// Anything else: an internal error, a hook or a gate that failed the turn.
    Internal,
    /// The conversation had to be compacted to fit the context window, and the summary call
    /// failed or said nothing.
    CompactionFailed,
    /// A code this build does not know (written by a newer host).
    #[serde(other)]
    Unknown,
}

impl FailureCode {
    /// Every code, in declaration order (docs and tests list them).
    pub const ALL: [FailureCode; 19] = [
        FailureCode::RateLimited,
        FailureCode::Authentication,
        FailureCode::ContextLength,
        FailureCode::InvalidRequest,
        FailureCode::ProviderError,
        FailureCode::Network,
        FailureCode::ModelUnavailable,
        FailureCode::Timeout,
        FailureCode::MalformedStream,
        FailureCode::OutputTooLarge,
        FailureCode::MaxSteps,
        FailureCode::Cancelled,
        FailureCode::ShuttingDown,
        FailureCode::HostRestarted,
        FailureCode::Storage,
        FailureCode::Workspace,
        FailureCode::Internal,
        FailureCode::CompactionFailed,
        FailureCode::Unknown,
    ];

    /// The wire spelling, e.g. `rate_limited`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::RateLimited => "rate_limited",
            FailureCode::Authentication => "authentication",
            FailureCode::ContextLength => "context_length",
            FailureCode::InvalidRequest => "invalid_request",
            FailureCode::ProviderError => "provider_error",
            FailureCode::Network => "network",
            FailureCode::ModelUnavailable => "model_unavailable",
            FailureCode::Timeout => "timeout",
            FailureCode::MalformedStream => "malformed_stream",
            FailureCode::OutputTooLarge => "output_too_large",
            FailureCode::MaxSteps => "max_steps",
            FailureCode::Cancelled => "cancelled",
            FailureCode::ShuttingDown => "shutting_down",
            FailureCode::HostRestarted => "host_restarted",
            FailureCode::Storage => "storage",
            FailureCode::Workspace => "workspace",
            FailureCode::Internal => "internal",
            FailureCode::CompactionFailed => "compaction_failed",
            FailureCode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_spelling_matches_as_str() {
        for code in FailureCode::ALL {
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire, serde_json::Value::String(code.as_str().into()));
            let back: FailureCode = serde_json::from_value(wire).unwrap();
            assert_eq!(back, code);
        }
    }

    #[test]
    fn an_unknown_code_reads_as_unknown() {
        let code: FailureCode = serde_json::from_str("\"brand_new\"").unwrap();
        assert_eq!(code, FailureCode::Unknown);
    }
}
