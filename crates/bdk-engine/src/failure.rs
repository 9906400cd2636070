//! Which stable [`FailureCode`] a failed turn gets. The codes themselves (and their wire
//! spelling) belong to the protocol; this module only maps engine-side causes onto them.

use bdk_model::ModelError;
use bdk_protocol::event::FailureCode;

/// The code of a model call that failed for good (after its retries).
pub(crate) fn model(error: &ModelError) -> FailureCode {
    match error {
        ModelError::Authentication { .. } => FailureCode::Authentication,
        ModelError::RateLimited { .. } => FailureCode::RateLimited,
        ModelError::ContextLengthExceeded { .. } => FailureCode::ContextLength,
        ModelError::InvalidRequest { .. } => FailureCode::InvalidRequest,
        ModelError::Server { .. } => FailureCode::ProviderError,
        ModelError::Network { .. } => FailureCode::Network,
        ModelError::Timeout { .. } => FailureCode::Timeout,
        ModelError::MalformedStream { .. } => FailureCode::MalformedStream,
        ModelError::ModelUnavailable { .. } => FailureCode::ModelUnavailable,
        ModelError::Cancelled => FailureCode::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bdk_model::TimeoutPhase;

    use super::*;

    #[test]
    fn every_model_error_has_its_own_code() {
        let cases = [
            (ModelError::Authentication { message: String::new() }, "authentication"),
            (ModelError::RateLimited { message: String::new(), retry_after: None }, "rate_limited"),
            (ModelError::ContextLengthExceeded { message: String::new() }, "context_length"),
            (ModelError::InvalidRequest { status: 400, message: String::new() }, "invalid_request"),
            (ModelError::Server { status: 503, message: String::new() }, "provider_error"),
            (ModelError::Network { message: String::new() }, "network"),
            (ModelError::Timeout { phase: TimeoutPhase::Idle, after: Duration::from_secs(1) }, "timeout"),
            (ModelError::MalformedStream { message: String::new() }, "malformed_stream"),
            (ModelError::ModelUnavailable { message: String::new() }, "model_unavailable"),
            (ModelError::Cancelled, "cancelled"),
        ];
        for (error, code) in cases {
            assert_eq!(model(&error).as_str(), code, "{error}");
        }
    }
}
