//! BDK durable state in PostgreSQL: the `bdk-store` traits (sessions, event logs, kv, host files,
//! timed work, workspaces) on one database that any number of `bdk serve` replicas share.
//!
//! - [`PgDatabase`]: the connection pool, the embedded migrations and the one `LISTEN`
//!   connection that tells followers on this replica about appends made on any replica.
//! - [`PgStore`]: one agent's view of the database (rows are keyed by the agent's slug), which
//!   implements every store trait (artifacts, session leases and saved eval runs included).
//!
//! The database enforces what several writers must agree on: dense per-session event indices
//! (a trigger), one firing per `(kind, owner, due time)` (a primary key).

mod artifacts;
mod data;
mod db;
mod error;
mod evals;
mod events;
mod import;
mod leases;
mod migrate;
mod notify;
mod sessions;
mod slots;
mod store;
mod timed;
mod wire;
mod workspaces;
mod writer;

pub use data::MAX_FILE_BYTES;
pub use db::{Commits, DEFAULT_SESSION_LEASE, PgDatabase, PgOptions, redact_url};
pub use error::PgError;
pub use import::ImportReport;
pub use migrate::{MigrationReport, SCHEMA_VERSION};
pub use store::PgStore;
pub use wire::RoundTrips;
pub use workspaces::MAX_WORKSPACE_BYTES;
