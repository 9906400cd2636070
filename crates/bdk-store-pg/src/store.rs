//! [`PgStore`]: one agent's durable state in a shared [`PgDatabase`]. Rows carry the agent's slug,
//! so one database serves every agent of every replica. Tool workspaces, traces and call scratch
//! folders are local directories under `local_dir` (tools run on this machine); session
//! workspaces are also saved to the database after each turn (see `workspaces.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_store::{Stores, TimedStore};

use crate::db::PgDatabase;

/// One agent's stores in PostgreSQL. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PgStore {
    pub(crate) db: Arc<PgDatabase>,
    pub(crate) agent: Arc<str>,
    pub(crate) local: Arc<Path>,
    /// Write debouncing (`storage.toml`'s `policy.debounce_ms`): event appends commit without
    /// waiting for the WAL flush.
    pub(crate) debounced: bool,
}

impl PgStore {
    /// The stores of agent `agent` (its slug) in `db`; local working folders under `local_dir`.
    pub fn new(db: Arc<PgDatabase>, agent: impl Into<String>, local_dir: impl Into<PathBuf>) -> Self {
        PgStore { db, agent: Arc::from(agent.into()), local: Arc::from(local_dir.into()), debounced: false }
    }

    /// This store with write debouncing on or off: `on`, its event appends commit with
    /// `synchronous_commit = off` (acknowledged once written to the WAL, flushed by the server's
    /// WAL writer within three `wal_writer_delay`s), unless they share a batch with an append
    /// that waits for the flush.
    pub fn debounced(mut self, on: bool) -> Self {
        self.debounced = on;
        self
    }

    /// Whether this store debounces its writes ([`PgStore::debounced`]).
    pub fn is_debounced(&self) -> bool {
        self.debounced
    }

    pub fn agent(&self) -> &str {
        &self.agent
    }

    pub fn database(&self) -> &Arc<PgDatabase> {
        &self.db
    }

    /// Where tool workspaces, traces and call scratch folders live on this machine.
    pub fn local_dir(&self) -> &Path {
        &self.local
    }

    /// This store as the trait objects the engine holds.
    pub fn stores(&self) -> Stores {
        Stores {
            sessions: Arc::new(self.clone()),
            events: Arc::new(self.clone()),
            workspaces: Arc::new(self.clone()),
            kv: Arc::new(self.clone()),
            data: Arc::new(self.clone()),
        }
    }

    /// The timed-work store (firings and reminders).
    pub fn timed(&self) -> Arc<dyn TimedStore> {
        Arc::new(self.clone())
    }
}
