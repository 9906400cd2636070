//! Where an agent's durable state lives: the filesystem under its state directory (the default),
//! or PostgreSQL when the host is given a database URL (`--database-url`, `BDK_DATABASE_URL`) or
//! the project's `storage.toml` says `backend = "postgres"` (URL in the variable `url_env`
//! names). Precedence: the host-wide URL (CLI > env) > `storage.toml` > filesystem. One pool per
//! distinct URL, shared by every agent on it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bdk_project::Project;
use bdk_store::{EvalRunStore, FsEvalRuns, FsStore, FsStoreOptions, Stores, TimedStore};
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};

/// The variable that gives every agent of the host one database.
pub const DATABASE_URL_ENV: &str = "BDK_DATABASE_URL";

/// An agent's opened store, either backend.
#[derive(Debug, Clone)]
pub enum AgentStore {
    Fs(FsStore),
    Pg(PgStore),
}

impl AgentStore {
    pub fn stores(&self) -> Stores {
        match self {
            AgentStore::Fs(store) => store.stores(),
            AgentStore::Pg(store) => store.stores(),
        }
    }

    pub fn timed(&self) -> Arc<dyn TimedStore> {
        match self {
            AgentStore::Fs(store) => Arc::new(store.clone()),
            AgentStore::Pg(store) => store.timed(),
        }
    }

    /// The agent's saved eval runs: `<state dir>/evals/<runId>/run.json`, or the database's rows.
    pub fn eval_runs(&self) -> Arc<dyn EvalRunStore> {
        match self {
            AgentStore::Fs(store) => Arc::new(FsEvalRuns::new(store.layout().root().join("evals"))),
            AgentStore::Pg(store) => store.eval_runs(),
        }
    }

    /// `fs` or `postgres`, for logs and `/v1/info`.
    pub fn backend(&self) -> &'static str {
        match self {
            AgentStore::Fs(_) => "fs",
            AgentStore::Pg(_) => "postgres",
        }
    }
}

/// Why an agent's store could not be chosen or opened.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("{slug}: {file} sets backend = \"postgres\" with url_env = {var}, but {var} is not set")]
    MissingUrl { slug: String, file: String, var: String },
    #[error("{slug}: {source}")]
    Database {
        slug: String,
        #[source]
        source: bdk_store_pg::PgError,
    },
    #[error("{slug}: cannot open the state directory {}: {source}", dir.display())]
    Fs {
        slug: String,
        dir: std::path::PathBuf,
        #[source]
        source: bdk_store::Error,
    },
}

/// The agent's filesystem store under `state_dir`, with what its `storage.toml` asks of it
/// (`policy.debounce_ms`: write debouncing).
pub fn open_fs(project: &Project, state_dir: &Path) -> bdk_store::Result<FsStore> {
    FsStore::open_with(state_dir, FsStoreOptions { sync_delay: debounce(project), ..FsStoreOptions::default() })
}

/// The agent's `storage.toml` `policy.debounce_ms` (zero: none).
fn debounce(project: &Project) -> std::time::Duration {
    project.storage.as_ref().map(|s| s.debounce).unwrap_or_default()
}

/// Opens stores for the agents of one host, sharing a pool per database URL.
#[derive(Debug, Default)]
pub struct Backends {
    /// The host-wide URL (`--database-url` or `BDK_DATABASE_URL`), if any.
    host_url: Option<String>,
    options: PgOptions,
    open: HashMap<String, Arc<PgDatabase>>,
}

impl Backends {
    pub fn new(host_url: Option<String>, options: PgOptions) -> Self {
        let host_url = host_url.filter(|url| !url.trim().is_empty());
        Backends { host_url, options, open: HashMap::new() }
    }

    /// The database URL `project` uses, or `None` for the filesystem. `lookup` reads the
    /// environment (a parameter so tests need not touch the process's).
    pub fn url_for(
        &self,
        project: &Project,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, BackendError> {
        if let Some(url) = &self.host_url {
            return Ok(Some(url.clone()));
        }
        match &project.storage {
            Some(def) if def.backend == "postgres" => {
                let var = def.url_env.clone().unwrap_or_default();
                match lookup(&var).filter(|v| !v.trim().is_empty()) {
                    Some(url) => Ok(Some(url)),
                    None => Err(BackendError::MissingUrl { slug: project.slug.clone(), file: def.file.clone(), var }),
                }
            }
            _ => Ok(None),
        }
    }

    /// The agent's store: its database's (connecting and migrating on first use) or its state
    /// directory's. Local working folders (tool workspaces, traces) are under `state_dir` either way.
    pub async fn open(&mut self, project: &Project, state_dir: &Path) -> Result<AgentStore, BackendError> {
        let url = self.url_for(project, &|name| std::env::var(name).ok())?;
        let Some(url) = url else {
            let store = open_fs(project, state_dir).map_err(|source| BackendError::Fs {
                slug: project.slug.clone(),
                dir: state_dir.to_path_buf(),
                source,
            })?;
            return Ok(AgentStore::Fs(store));
        };
        let db = match self.open.get(&url) {
            Some(db) => db.clone(),
            None => {
                let db = PgDatabase::connect(&url, &self.options)
                    .await
                    .map_err(|source| BackendError::Database { slug: project.slug.clone(), source })?;
                let report = db.migration();
                if !report.applied.is_empty() {
                    tracing::info!(database = db.url(), from = report.from, to = report.to, applied = ?report.applied,
                        "database schema migrated");
                }
                self.open.insert(url, db.clone());
                db
            }
        };
        let debounced = !debounce(project).is_zero();
        Ok(AgentStore::Pg(PgStore::new(db, project.slug.clone(), state_dir).debounced(debounced)))
    }
}
