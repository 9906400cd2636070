//! The store's error type at its boundary, and `Result`.

use std::io;
use std::path::{Path, PathBuf};

use bdk_protocol::SessionId;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("session {0} not found")]
    SessionNotFound(SessionId),

    #[error("session {0} already exists")]
    SessionExists(SessionId),

    #[error("invalid kv key {key:?}: {reason}")]
    InvalidKey { key: String, reason: &'static str },

    /// A `host.files` path that is not a plain relative path inside its area.
    #[error("invalid file path {path:?}: {reason}")]
    InvalidPath { path: String, reason: &'static str },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("{}: invalid JSON: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// The log has damage that is not a torn final write, so it is not repaired silently.
    #[error("{}: event log is corrupt at byte {offset}: {reason}", path.display())]
    Corrupt { path: PathBuf, offset: u64, reason: String },

    /// The event could not be encoded as JSON (a payload with a non-string map key, say).
    #[error("event could not be encoded: {0}")]
    Encode(#[source] serde_json::Error),

    /// The log's writer stopped (the session was deleted or the log closed). Reopening the log
    /// starts a new writer. A failed write does not stop it: see [`Error::is_write_fault`].
    #[error("the event log of session {0} is closed")]
    LogClosed(SessionId),

    /// A background task failed to run to completion.
    #[error("store task failed: {0}")]
    Task(String),

    /// The backend cannot be reached right now (a database down or restarting, a pool that
    /// timed out). Retryable: the same request may succeed later. Servers answer 503.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),

    /// The backend refused or failed the operation (a constraint, a query error).
    #[error("the store failed: {0}")]
    Backend(String),

    /// A value larger than the backend keeps (a `host.files` file over its documented limit).
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { what: &'static str, size: u64, limit: u64 },

    /// The append was refused because this replica no longer holds the session's lease: it
    /// expired and another replica claimed it (a stalled process resuming, say). Nothing was
    /// written; the new holder owns the session's log.
    #[error(
        "this replica no longer holds the lease of session {0}: another replica runs it now, the write was refused"
    )]
    LeaseLost(SessionId),
}

impl Error {
    pub(crate) fn io(path: impl AsRef<Path>, source: io::Error) -> Self {
        Error::Io { path: path.as_ref().to_path_buf(), source }
    }

    pub(crate) fn json(path: impl AsRef<Path>, source: serde_json::Error) -> Self {
        Error::Json { path: path.as_ref().to_path_buf(), source }
    }

    /// A copy for the second and later waiters of a failed batch (`io::Error` is not `Clone`).
    pub(crate) fn duplicate(&self) -> Self {
        match self {
            Error::SessionNotFound(id) => Error::SessionNotFound(id.clone()),
            Error::SessionExists(id) => Error::SessionExists(id.clone()),
            Error::LogClosed(id) => Error::LogClosed(id.clone()),
            Error::InvalidKey { key, reason } => Error::InvalidKey { key: key.clone(), reason },
            Error::InvalidPath { path, reason } => Error::InvalidPath { path: path.clone(), reason },
            Error::Io { path, source } => {
                Error::Io { path: path.clone(), source: io::Error::new(source.kind(), source.to_string()) }
            }
            Error::Corrupt { path, offset, reason } => {
                Error::Corrupt { path: path.clone(), offset: *offset, reason: reason.clone() }
            }
            Error::Unavailable(message) => Error::Unavailable(message.clone()),
            Error::Backend(message) => Error::Backend(message.clone()),
            Error::TooLarge { what, size, limit } => Error::TooLarge { what, size: *size, limit: *limit },
            Error::LeaseLost(id) => Error::LeaseLost(id.clone()),
            other => Error::Task(other.to_string()),
        }
    }

    /// Whether retrying later may succeed (the backend was unreachable).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

    /// Whether the state root refused a write: the disk (or the quota) is full, or the file
    /// system is read-only. Nothing was acknowledged, and the same write may succeed once the
    /// disk is fixed; servers answer 503 `store_unavailable`, and a read still works.
    pub fn is_write_fault(&self) -> bool {
        matches!(self, Error::Io { source, .. } if is_write_fault(source))
    }

    /// Whether this is an IO error of kind `NotFound`.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// Whether an IO error means "this file system takes no writes right now" (see
/// [`Error::is_write_fault`]).
pub fn is_write_fault(error: &io::Error) -> bool {
    use io::ErrorKind::{FileTooLarge, QuotaExceeded, ReadOnlyFilesystem, StorageFull};
    matches!(error.kind(), StorageFull | QuotaExceeded | ReadOnlyFilesystem | FileTooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_read_only_disks_are_write_faults_and_survive_duplication() {
        for raw in [28, 30, 122] {
            // ENOSPC, EROFS, EDQUOT
            let error = Error::io("/state/events.ndjson", io::Error::from_raw_os_error(raw));
            assert!(error.is_write_fault(), "{error}");
            assert!(error.duplicate().is_write_fault(), "a failed batch's other waiters see the same kind");
        }
        assert!(!Error::io("/x", io::Error::from(io::ErrorKind::NotFound)).is_write_fault());
        assert!(!Error::io("/x", io::Error::from_raw_os_error(13)).is_write_fault(), "EACCES is a setup error");
        assert!(!Error::Unavailable("db down".into()).is_write_fault());
    }
}
