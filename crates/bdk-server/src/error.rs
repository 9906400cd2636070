//! The one error type every route returns, and its wire shape `{ok:false, error, message}`.
//!
//! Codes and statuses follow the reference's HTTP API page. Engine errors keep their stable code
//! (`EngineError::code`); storage and other internal failures are logged here and answered with a
//! generic message, so no path, OS error or stack detail reaches the caller.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bdk_engine::EngineError;
use serde::Serialize;

/// An error answer: status, stable code and a message safe to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// `WWW-Authenticate` value for 401s under bearer auth.
    pub challenge: Option<&'static str>,
    /// Extra body fields after `message`: `availableTools` (`unknown_tool`), `errors`
    /// (`invalid_tool_input`).
    pub details: Vec<(&'static str, Vec<String>)>,
}

/// The JSON body of every error.
#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    ok: bool,
    error: &'a str,
    message: &'a str,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), challenge: None, details: Vec::new() }
    }

    /// 400: a malformed body, query or parameter.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 401: no auth policy admitted the request.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 404 for a route that does not exist.
    pub fn route_not_found(path: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", format!("no route for {path}"))
    }

    /// 404 for a session id that does not name a session (or cannot: a malformed id).
    pub fn session_not_found(id: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "session_not_found", format!("session {id} not found"))
    }

    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "this route does not take that method")
    }

    /// 413: the body is over the configured limit.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body is larger than the limit of {limit} bytes"),
        )
    }

    /// 500 with a generic message. The detail goes to the log only.
    pub fn internal(detail: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error answering a request");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "internal error; see the server log")
    }

    /// 503 `store_unavailable`: the database is unreachable; retry later. The detail is logged.
    pub fn store_unavailable(detail: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %detail, "the store is unavailable");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the state store (database) is unavailable; retry shortly",
        )
    }

    /// 503 `store_unavailable`: the state root takes no writes (disk full, read-only); reads
    /// still work. The detail (with its path) is logged.
    pub fn store_unwritable(detail: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %detail, "the state store refuses writes");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "the state store takes no writes right now (disk full or read-only); retry shortly",
        )
    }

    pub fn with_challenge(mut self, challenge: &'static str) -> Self {
        self.challenge = Some(challenge);
        self
    }

    /// The JSON body: `{ok: false, error, message, ...details}`.
    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({"ok": false, "error": self.code, "message": self.message});
        if let Some(object) = body.as_object_mut() {
            for (key, values) in &self.details {
                object.insert((*key).to_owned(), values.clone().into());
            }
        }
        body
    }
}

impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        let status = match &err {
            EngineError::SessionNotFound(_) => StatusCode::NOT_FOUND,
            EngineError::Forbidden(_) => StatusCode::FORBIDDEN,
            EngineError::StaleToken(_) | EngineError::SessionBusy(_) | EngineError::NotFollowable(_) => {
                StatusCode::CONFLICT
            }
            EngineError::Draining
            | EngineError::LeasedElsewhere { .. }
            | EngineError::Store(bdk_store::Error::LeaseLost(_)) => StatusCode::SERVICE_UNAVAILABLE,
            EngineError::InvalidRequest(_) | EngineError::InvalidTimeArgs(_) => StatusCode::BAD_REQUEST,
            EngineError::ApprovalNotFound(_) => StatusCode::NOT_FOUND,
            EngineError::UnknownTool { .. } => StatusCode::NOT_FOUND,
            EngineError::ToolNotCallable { .. }
            | EngineError::InvalidToolInput { .. }
            | EngineError::InvalidContinuationToken(_) => StatusCode::BAD_REQUEST,
            EngineError::WorkspaceUnavailable(_) => StatusCode::INTERNAL_SERVER_ERROR,
            EngineError::Store(store) if store.is_unavailable() => return ApiError::store_unavailable(store),
            EngineError::Store(store) if store.is_write_fault() => return ApiError::store_unwritable(store),
            EngineError::Store(_) => return ApiError::internal(&err),
        };
        let details = match &err {
            EngineError::UnknownTool { available, .. } => vec![("availableTools", available.clone())],
            EngineError::InvalidToolInput { errors, .. } => vec![("errors", errors.clone())],
            _ => Vec::new(),
        };
        ApiError { details, ..ApiError::new(status, err.code(), err.to_string()) }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = if self.details.is_empty() {
            let body = ErrorBody { ok: false, error: self.code, message: &self.message };
            (self.status, Json(body)).into_response()
        } else {
            (self.status, Json(self.body())).into_response()
        };
        if let Some(challenge) = self.challenge {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response
    }
}

/// What handlers return.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use bdk_protocol::SessionId;

    #[test]
    fn engine_errors_keep_their_code_and_get_the_reference_status() {
        let id = SessionId::generate();
        let cases = [
            (EngineError::SessionNotFound(id.clone()), 404, "session_not_found"),
            (EngineError::Forbidden(id.clone()), 403, "forbidden"),
            (EngineError::StaleToken(id.clone()), 409, "stale_continuation_token"),
            (EngineError::SessionBusy(id.clone()), 409, "session_busy"),
            (EngineError::NotFollowable(id), 409, "session_not_followable"),
            (EngineError::Draining, 503, "shutting_down"),
            (EngineError::InvalidRequest("x".into()), 400, "invalid_request"),
            (EngineError::UnknownTool { name: "x".into(), available: vec![] }, 404, "unknown_tool"),
            (EngineError::ToolNotCallable { name: "x".into(), reason: "r".into() }, 400, "tool_not_callable"),
            (EngineError::InvalidToolInput { name: "x".into(), errors: vec![] }, 400, "invalid_tool_input"),
            (EngineError::InvalidContinuationToken("x".into()), 400, "invalid_continuation_token"),
            (EngineError::WorkspaceUnavailable("x".into()), 500, "workspace_unavailable"),
            (EngineError::InvalidTimeArgs("x".into()), 400, "invalid_time_args"),
            (EngineError::ApprovalNotFound(bdk_protocol::CallId::generate("x")), 404, "approval_not_found"),
            (
                EngineError::Store(bdk_store::Error::LeaseLost(bdk_protocol::SessionId::generate())),
                503,
                "session_leased_elsewhere",
            ),
        ];
        for (err, status, code) in cases {
            let api = ApiError::from(err);
            assert_eq!(api.status.as_u16(), status);
            assert_eq!(api.code, code);
        }
    }

    #[test]
    fn store_errors_do_not_leak_detail() {
        let err = EngineError::Store(bdk_store::Error::Corrupt {
            path: "/secret/path/events.ndjson".into(),
            offset: 3,
            reason: "bad".into(),
        });
        let api = ApiError::from(err);
        assert_eq!(api.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!api.message.contains("/secret"));
    }

    #[test]
    fn a_full_or_read_only_disk_is_503_store_unavailable() {
        for raw in [28, 30] {
            let source = std::io::Error::from_raw_os_error(raw);
            let err = EngineError::Store(bdk_store::Error::Io { path: "/secret/state/session.json".into(), source });
            assert_eq!(err.code(), "store_unavailable");
            let api = ApiError::from(err);
            assert_eq!((api.status.as_u16(), api.code), (503, "store_unavailable"));
            assert!(!api.message.contains("/secret"), "{}", api.message);
        }
    }
}
