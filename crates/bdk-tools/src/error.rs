//! The crate's two failure kinds, kept apart: [`ToolError`] is a failed call the model is told
//! about (it becomes an `isError` outcome and never fails the turn); [`Error`] is a failure of the
//! runtime itself (building a registry, preparing a workspace) that the caller must handle.

use std::path::PathBuf;

/// A call failed; the message is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub message: String,
}

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self { message }
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<std::io::Error> for ToolError {
    fn from(error: std::io::Error) -> Self {
        Self::new(error.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> Self {
        Self::new(error.to_string())
    }
}

/// The runtime failed (not a tool call).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Two tools claim one name.
    #[error("two tools are named `{0}`")]
    NameClash(String),
    /// A schema (input schema or predicate) does not compile.
    #[error("tool `{tool}`: {what} is not a usable JSON Schema: {message}")]
    Schema { tool: String, what: &'static str, message: String },
    /// A definition the runtime cannot run.
    #[error("tool `{tool}`: {reason}")]
    Definition { tool: String, reason: String },
    /// A path given for the workspace leaves it or cannot be used.
    #[error("{path}: {reason}")]
    Path { path: String, reason: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
