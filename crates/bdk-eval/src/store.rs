//! Saved runs, typed: the run snapshots of one agent in a [`bdk_store::EvalRunStore`] (by
//! default the files `<state dir>/evals/<runId>/run.json`; in PostgreSQL when the agent's state
//! is there), and each run's local folder `<state dir>/evals/<runId>/state/` holding the run's
//! own sessions and host-code state on the machine that runs it. Runs left `running` by a host
//! that stopped are marked failed when the store is recovered (what "stopped" means is the
//! backend's: see [`bdk_store::EvalRunStore::claim_interrupted`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bdk_store::evals::{RUN_ID_PREFIX, is_run_id};
use bdk_store::{EvalRunRecord, EvalRunStore, FsEvalRuns};

use crate::error::{EvalError, Result};
use crate::report::{CaseStatus, RunSnapshot, RunStatus};

/// The error a run left `running` by a stopped process gets.
pub const INTERRUPTED: &str = "the host stopped before the run finished";

/// One agent's saved runs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct RunStore {
    /// `<state dir>/evals`: the runs' local folders (and, on the filesystem, their snapshots).
    dir: PathBuf,
    saved: Arc<dyn EvalRunStore>,
}

impl RunStore {
    /// The runs under `evals_dir` (`<state dir>/evals`), snapshots as files there.
    pub fn new(evals_dir: impl Into<PathBuf>) -> Self {
        let dir = evals_dir.into();
        Self { saved: Arc::new(FsEvalRuns::new(dir.clone())), dir }
    }

    /// Snapshots kept by `saved` (a database); the runs' local folders under `evals_dir`.
    pub fn with_backend(evals_dir: impl Into<PathBuf>, saved: Arc<dyn EvalRunStore>) -> Self {
        Self { dir: evals_dir.into(), saved }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new, time-ordered run id: `evr_<26 characters>`.
    pub fn new_run_id() -> String {
        let session = bdk_protocol::SessionId::generate();
        let suffix = session.as_str().split_once('_').map_or(session.as_str(), |(_, s)| s);
        format!("{RUN_ID_PREFIX}{}", suffix.to_ascii_lowercase())
    }

    /// The run's local folder; refuses ids that are not run ids (they name paths).
    pub fn run_dir(&self, run_id: &str) -> Result<PathBuf> {
        if !is_run_id(run_id) {
            return Err(EvalError::InvalidRunId(run_id.to_owned()));
        }
        Ok(self.dir.join(run_id))
    }

    /// Saves a new run, unless another run of the agent is running on another live host
    /// (`AlreadyRunning` with its id; a store one process owns never refuses).
    pub async fn begin(&self, snapshot: &RunSnapshot) -> Result<()> {
        self.run_dir(&snapshot.run_id)?;
        match self.saved.begin(record(snapshot)?).await? {
            Some(other) => Err(EvalError::AlreadyRunning(other)),
            None => Ok(()),
        }
    }

    /// Writes the snapshot (atomically for readers).
    pub async fn save(&self, snapshot: &RunSnapshot) -> Result<()> {
        self.run_dir(&snapshot.run_id)?;
        Ok(self.saved.save(record(snapshot)?).await?)
    }

    /// A saved run by id.
    pub async fn load(&self, run_id: &str) -> Result<RunSnapshot> {
        self.run_dir(run_id)?;
        match self.saved.load(run_id).await? {
            Some(value) => typed(value).map_err(|source| EvalError::Corrupt { path: self.dir.join(run_id), source }),
            None => Err(EvalError::RunNotFound(run_id.to_owned())),
        }
    }

    /// Every saved run, newest first. Unreadable ones are skipped with a warning.
    pub async fn list(&self) -> Result<Vec<RunSnapshot>> {
        let mut runs: Vec<RunSnapshot> = Vec::new();
        for value in self.saved.list().await? {
            let id = value.get("runId").and_then(|v| v.as_str()).unwrap_or("?").to_owned();
            match typed(value) {
                Ok(run) => runs.push(run),
                Err(err) => tracing::warn!("skipping eval run {id}: {err}"),
            }
        }
        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.run_id.cmp(&a.run_id)));
        Ok(runs)
    }

    /// Marks runs left `running` by a host that stopped as failed. Returns how many.
    pub async fn recover(&self) -> Result<usize> {
        let mut n = 0;
        for value in self.saved.claim_interrupted().await? {
            let mut run = match typed(value) {
                Ok(run) => run,
                Err(err) => {
                    tracing::warn!("skipping an unreadable interrupted eval run: {err}");
                    continue;
                }
            };
            run.status = RunStatus::Failed;
            run.error = Some(INTERRUPTED.into());
            run.finished_at = Some(chrono::Utc::now());
            for case in &mut run.cases {
                if matches!(case.status, CaseStatus::Pending | CaseStatus::Running) {
                    case.status = CaseStatus::Cancelled;
                }
            }
            run.settle_totals();
            self.save(&run).await?;
            n += 1;
        }
        Ok(n)
    }

    /// How often a serving host recovers runs (`None`: once at start is all).
    pub fn sweep_period(&self) -> Option<Duration> {
        self.saved.sweep_period()
    }

    /// Whether several hosts share these runs (a run may be running on another one).
    pub fn shared(&self) -> bool {
        self.sweep_period().is_some()
    }

    /// Asks the host running `run_id` elsewhere to cancel it; `false` when it is not running.
    pub async fn request_cancel(&self, run_id: &str) -> Result<bool> {
        Ok(self.saved.request_cancel(run_id).await?)
    }

    /// Whether another host asked to cancel this host's run `run_id`.
    pub async fn cancel_requested(&self, run_id: &str) -> Result<bool> {
        Ok(self.saved.cancel_requested(run_id).await?)
    }
}

fn record(snapshot: &RunSnapshot) -> Result<EvalRunRecord> {
    let value = serde_json::to_value(snapshot).map_err(bdk_store::Error::Encode)?;
    Ok(EvalRunRecord::from_snapshot(value)?)
}

fn typed(value: serde_json::Value) -> std::result::Result<RunSnapshot, serde_json::Error> {
    serde_json::from_value(value)
}

/// Reads a run file (`bdk eval --compare` also takes a path to one).
pub fn read(path: &Path, bytes: &[u8]) -> Result<RunSnapshot> {
    serde_json::from_slice(bytes).map_err(|source| EvalError::Corrupt { path: path.to_path_buf(), source })
}
