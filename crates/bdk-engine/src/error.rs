//! Engine errors. Each has a stable code the HTTP layer maps to a status (`code()`), and a
//! message safe to show the caller.

use bdk_protocol::{CallId, SessionId};

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No such session (never existed, or its folder was deleted). HTTP 404.
    #[error("session {0} not found")]
    SessionNotFound(SessionId),
    /// The caller is not the session's owner. HTTP 403.
    #[error("session {0} belongs to another principal")]
    Forbidden(SessionId),
    /// The continuation token is not the session's current one. HTTP 409.
    #[error("stale continuation token for session {0}")]
    StaleToken(SessionId),
    /// The session is busy and the request cannot interrupt it. HTTP 409.
    #[error("session {0} is busy")]
    SessionBusy(SessionId),
    /// Task sessions take no follow-ups. HTTP 409.
    #[error("session {0} is a task session and takes no follow-ups")]
    NotFollowable(SessionId),
    /// The host is shutting down and admits no new turns. HTTP 503.
    #[error("the host is shutting down")]
    Draining,
    /// The request itself is malformed (empty message, bad token shape). HTTP 400.
    #[error("{0}")]
    InvalidRequest(String),
    /// A session with `asOf` cannot start: a tool's `time_args` names no input property. HTTP 400.
    #[error("{0}")]
    InvalidTimeArgs(String),
    /// No call of this session is waiting for approval under that id (unknown, already
    /// decided, or its turn ended). HTTP 404.
    #[error("no tool call {0} is waiting for approval in this session")]
    ApprovalNotFound(CallId),
    /// Storage failed; nothing was acknowledged. HTTP 500.
    #[error("storage: {0}")]
    Store(#[from] bdk_store::Error),
}

impl EngineError {
    /// The stable error code (`{ok:false, error: <code>}` on the wire).
    pub fn code(&self) -> &'static str {
        match self {
            EngineError::SessionNotFound(_) => "session_not_found",
            EngineError::Forbidden(_) => "forbidden",
            EngineError::StaleToken(_) => "stale_continuation_token",
            EngineError::SessionBusy(_) => "session_busy",
            EngineError::NotFollowable(_) => "session_not_followable",
            EngineError::Draining => "shutting_down",
            EngineError::InvalidRequest(_) => "invalid_request",
            EngineError::InvalidTimeArgs(_) => "invalid_time_args",
            EngineError::ApprovalNotFound(_) => "approval_not_found",
            EngineError::Store(_) => "internal_error",
        }
    }
}
