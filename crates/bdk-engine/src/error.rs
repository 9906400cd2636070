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
    /// A direct call names no callable server tool. HTTP 404; the answer lists `available`.
    #[error("unknown tool `{name}`; {}", callable_list(.available))]
    UnknownTool { name: String, available: Vec<String> },
    /// A direct call names a tool that cannot run on the host (an agent or built-in tool). HTTP 400.
    #[error("`{name}` cannot be called directly: {reason}")]
    ToolNotCallable { name: String, reason: String },
    /// A direct call's input does not match the tool's input schema. HTTP 400, with `errors`.
    #[error("invalid input for `{name}`: {}", .errors.join("; "))]
    InvalidToolInput { name: String, errors: Vec<String> },
    /// A direct call's continuation token is malformed, or came with a `sessionId`. HTTP 400.
    #[error("{0}")]
    InvalidContinuationToken(String),
    /// A direct write's session workspace (or a scratch one) cannot be created. HTTP 500.
    #[error("{0}")]
    WorkspaceUnavailable(String),
    /// Another replica holds the session's lease (several replicas on one database) and the
    /// command could not be handed to it. HTTP 503: retry (the lease moves when it retires or dies).
    #[error("session {session} is running on replica {replica}; retry shortly")]
    LeasedElsewhere { session: SessionId, replica: String },
    /// Storage failed; nothing was acknowledged. HTTP 500, or 503 `store_unavailable` when the
    /// store refuses writes for now (disk full, read-only, database down).
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
            EngineError::UnknownTool { .. } => "unknown_tool",
            EngineError::ToolNotCallable { .. } => "tool_not_callable",
            EngineError::InvalidToolInput { .. } => "invalid_tool_input",
            EngineError::InvalidContinuationToken(_) => "invalid_continuation_token",
            EngineError::WorkspaceUnavailable(_) => "workspace_unavailable",
            EngineError::LeasedElsewhere { .. } | EngineError::Store(bdk_store::Error::LeaseLost(_)) => {
                "session_leased_elsewhere"
            }
            EngineError::Store(store) if store.is_unavailable() || store.is_write_fault() => "store_unavailable",
            EngineError::Store(_) => "internal_error",
        }
    }
}

/// "callable tools: a, b" (or that there are none), for `UnknownTool`.
fn callable_list(names: &[String]) -> String {
    if names.is_empty() {
        "this agent has no callable tools".into()
    } else {
        format!("callable tools: {}", names.join(", "))
    }
}
