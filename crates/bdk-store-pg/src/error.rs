//! Errors of opening a database, and the mapping of driver errors onto `bdk_store::Error`
//! (connection trouble is `Unavailable`, retryable; anything else is `Backend`).

use bdk_store::Error;

/// Why a database could not be opened or migrated.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// The URL does not parse. The URL is shown without its password.
    #[error("invalid database URL {url}: {reason}")]
    Url { url: String, reason: String },
    /// The server could not be reached or refused the connection.
    #[error("cannot connect to the database at {url}: {reason}")]
    Connect { url: String, reason: String },
    /// The database holds a newer schema than this build knows: refusing to touch it.
    #[error(
        "the database schema is at version {found}, newer than this build supports ({supported}); upgrade bdk before pointing it at this database"
    )]
    NewerSchema { found: i32, supported: i32 },
    /// The database has no (or an older) schema and migrations were not to be applied.
    #[error(
        "the database schema is at version {found}, this build needs {supported}: run `bdk migrate` (or start serve without --no-migrate)"
    )]
    NeedsMigration { found: i32, supported: i32 },
    #[error(transparent)]
    Store(#[from] Error),
}

pub type Result<T, E = PgError> = std::result::Result<T, E>;

/// Maps a driver error onto the store's error.
pub(crate) fn db(error: tokio_postgres::Error) -> Error {
    if is_connection_error(&error) { Error::Unavailable(describe(&error)) } else { Error::Backend(describe(&error)) }
}

/// Maps a pool error (no connection in time, or a connection that failed to open).
pub(crate) fn pool(error: deadpool_postgres::PoolError) -> Error {
    match error {
        deadpool_postgres::PoolError::Backend(e) => db(e),
        other => Error::Unavailable(format!("no database connection: {other}")),
    }
}

/// The server's message with its SQLSTATE, or the driver's.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => {
            let mut text = error.to_string();
            let mut source = std::error::Error::source(error);
            while let Some(inner) = source {
                text.push_str(": ");
                text.push_str(&inner.to_string());
                source = inner.source();
            }
            text
        }
    }
}

fn is_connection_error(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    match error.code() {
        // Class 08 (connection exception), 57P01-57P03 (shutdown, crash, cannot connect now),
        // 53300 (too many connections).
        Some(code) => {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
        }
        // No SQLSTATE: unavailable only when the connection's IO failed (not, say, a value
        // that does not convert to its column's type).
        None => std::error::Error::source(error).is_some_and(|s| s.is::<std::io::Error>()),
    }
}

/// Shorthand for JSON encoding errors.
pub(crate) fn encode(error: serde_json::Error) -> Error {
    Error::Encode(error)
}

/// A stored row that does not parse.
pub(crate) fn corrupt(what: &str, error: serde_json::Error) -> Error {
    Error::Backend(format!("{what} in the database is not valid JSON: {error}"))
}
