//! Errors of timed work (schedules and reminders), each with a stable code the HTTP layer maps
//! to a status, and a message safe to show the caller.

use crate::error::EngineError;

#[derive(Debug, thiserror::Error)]
pub enum TimedError {
    /// No schedule with this id. HTTP 404.
    #[error("unknown schedule `{0}`")]
    UnknownSchedule(String),
    /// No reminder with this id (or not the caller's). HTTP 404.
    #[error("unknown reminder `{0}`")]
    UnknownReminder(String),
    /// No conversation has this continuation token. HTTP 404.
    #[error("no conversation has the continuation token `{0}`")]
    UnknownConversation(String),
    /// A bad request: a past `at`, an `every` below one second, an unknown handler. HTTP 400.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// Starting or waking the session failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Storage failed. HTTP 500.
    #[error("storage: {0}")]
    Store(#[from] bdk_store::Error),
}

impl TimedError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        TimedError::Invalid { code, message: message.into() }
    }

    /// The stable error code (`{ok:false, error: <code>}` on the wire).
    pub fn code(&self) -> &'static str {
        match self {
            TimedError::UnknownSchedule(_) => "schedule_not_found",
            TimedError::UnknownReminder(_) => "reminder_not_found",
            TimedError::UnknownConversation(_) => "session_not_found",
            TimedError::Invalid { code, .. } => code,
            TimedError::Engine(e) => e.code(),
            TimedError::Store(_) => "internal_error",
        }
    }
}
