//! Saved eval runs: the snapshot of each run of an agent's evals, rewritten as the run
//! progresses, listed and read back by the eval routes and `bdk eval --compare`. The snapshot is
//! opaque JSON here (`bdk-eval` owns its shape); a backend only reads the three fields it indexes
//! ([`EvalRunRecord::from_snapshot`]). What a run *is*, and what marking one failed means, is
//! `bdk-eval`'s.
//!
//! Two backends: [`FsEvalRuns`] (`<state dir>/evals/<runId>/run.json`, one process owns the
//! folder) and the database's (`bdk-store-pg`), where a run is owned by the replica running it
//! while that replica's heartbeat keeps it alive, so runs survive on any replica and only a dead
//! replica's runs are recovered.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::api::BoxFuture;
use crate::error::{Error, Result};

/// The id prefix of eval runs (`evr_<lowercase letters and digits>`).
pub const RUN_ID_PREFIX: &str = "evr_";
/// The `status` of a run that has not ended.
pub const RUNNING: &str = "running";
const RUN_FILE: &str = "run.json";

/// Whether `id` is a run id (they name folders, so nothing else is accepted).
pub fn is_run_id(id: &str) -> bool {
    id.strip_prefix(RUN_ID_PREFIX).is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// A snapshot as a backend stores it: the JSON and the fields a backend indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalRunRecord {
    pub run_id: String,
    /// `running`, `completed`, `failed`, `cancelled`.
    pub status: String,
    pub started_at: DateTime<Utc>,
    pub snapshot: Value,
}

impl EvalRunRecord {
    /// The record of a snapshot: a JSON object with `runId` (a run id), `status` and
    /// `startedAt` (RFC 3339).
    pub fn from_snapshot(snapshot: Value) -> Result<Self> {
        let field = |name: &str| snapshot.get(name).and_then(Value::as_str).map(str::to_owned);
        let bad = |reason: &str| Error::Backend(format!("not an eval run snapshot: {reason}"));
        let run_id = field("runId").filter(|id| is_run_id(id)).ok_or_else(|| bad("no valid runId"))?;
        let status = field("status").ok_or_else(|| bad("no status"))?;
        let started_at = field("startedAt")
            .and_then(|at| DateTime::parse_from_rfc3339(&at).ok())
            .ok_or_else(|| bad("no startedAt"))?
            .with_timezone(&Utc);
        Ok(EvalRunRecord { run_id, status, started_at, snapshot })
    }

    pub fn is_running(&self) -> bool {
        self.status == RUNNING
    }
}

/// One agent's saved eval runs.
pub trait EvalRunStore: Send + Sync + fmt::Debug {
    /// Saves a new run unless another run of the agent is running on a live host: then nothing
    /// is written and the other run's id is returned. A backend one process owns answers `None`
    /// (that process knows what it runs).
    fn begin(&self, run: EvalRunRecord) -> BoxFuture<'_, Result<Option<String>>>;

    /// Replaces the run's snapshot (atomically for readers). A running run belongs to the host
    /// that saves it; a backend shared by several hosts refuses a save from a host whose run
    /// another host has recovered meanwhile.
    fn save(&self, run: EvalRunRecord) -> BoxFuture<'_, Result<()>>;

    /// The run's snapshot, `None` for an unknown (or invalid) id.
    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<Value>>>;

    /// Every run's snapshot, newest first. Unreadable ones are skipped with a warning.
    fn list(&self) -> BoxFuture<'_, Result<Vec<Value>>>;

    /// The runs left `running` by a host that is gone, each handed to exactly one caller, who
    /// settles and saves it. Filesystem: every running run (one process owns the folder, so call
    /// this once at open, before starting runs). Database: runs whose replica stopped renewing
    /// them for a lease period.
    fn claim_interrupted(&self) -> BoxFuture<'_, Result<Vec<Value>>>;

    /// How often a host should call [`EvalRunStore::claim_interrupted`] while it serves: `None`
    /// for a backend one process owns (once at open is all).
    fn sweep_period(&self) -> Option<Duration> {
        None
    }

    /// Asks the host running `run_id` to cancel it (another replica's run). `false` when the run
    /// is not running. A backend one process owns has no other host: `false`.
    fn request_cancel<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let _ = run_id;
        Box::pin(async { Ok(false) })
    }

    /// Whether a cancel was requested for this host's running run `run_id`.
    fn cancel_requested<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<bool>> {
        let _ = run_id;
        Box::pin(async { Ok(false) })
    }
}

/// Runs as files: `<dir>/<runId>/run.json`, written atomically (a temporary file renamed over
/// the old one). The files are small and written once per finished attempt, inline.
#[derive(Debug, Clone)]
pub struct FsEvalRuns {
    dir: PathBuf,
}

impl FsEvalRuns {
    /// The runs under `dir` (`<state dir>/evals`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FsEvalRuns { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, run_id: &str) -> Option<PathBuf> {
        is_run_id(run_id).then(|| self.dir.join(run_id).join(RUN_FILE))
    }

    /// Writes the snapshot of `run`.
    pub fn write(&self, run: &EvalRunRecord) -> Result<()> {
        let path =
            self.file(&run.run_id).ok_or_else(|| Error::Backend(format!("`{}` is not an eval run id", run.run_id)))?;
        let dir = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let tmp = dir.join(format!("{RUN_FILE}.tmp"));
        let body = serde_json::to_vec_pretty(&run.snapshot).map_err(Error::Encode)?;
        std::fs::write(&tmp, body).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))
    }

    /// The run's snapshot, `None` when there is none.
    pub fn read(&self, run_id: &str) -> Result<Option<Value>> {
        let Some(path) = self.file(run_id) else { return Ok(None) };
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::json(&path, e)),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(Error::io(&path, err)),
        }
    }

    /// Every readable run, newest first.
    pub fn read_all(&self) -> Result<Vec<EvalRunRecord>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(Error::io(&self.dir, err)),
        };
        let mut runs = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_run_id(&name) {
                continue;
            }
            match self.read(&name).and_then(|v| v.map(EvalRunRecord::from_snapshot).transpose()) {
                Ok(Some(run)) => runs.push(run),
                Ok(None) => {}
                Err(err) => tracing::warn!("skipping eval run {name}: {err}"),
            }
        }
        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.run_id.cmp(&a.run_id)));
        Ok(runs)
    }
}

impl EvalRunStore for FsEvalRuns {
    fn begin(&self, run: EvalRunRecord) -> BoxFuture<'_, Result<Option<String>>> {
        Box::pin(async move { self.write(&run).map(|()| None) })
    }

    fn save(&self, run: EvalRunRecord) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.write(&run) })
    }

    fn load<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Option<Value>>> {
        Box::pin(async move { self.read(run_id) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        Box::pin(async move { Ok(self.read_all()?.into_iter().map(|r| r.snapshot).collect()) })
    }

    fn claim_interrupted(&self) -> BoxFuture<'_, Result<Vec<Value>>> {
        Box::pin(async move {
            Ok(self.read_all()?.into_iter().filter(EvalRunRecord::is_running).map(|r| r.snapshot).collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_name_nothing_else() {
        assert!(is_run_id("evr_01abc"));
        for bad in ["evr_", "evr_../x", "run_1", "evr_a/b", ""] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }

    #[test]
    fn records_read_their_fields() {
        let snapshot = serde_json::json!({"runId": "evr_1", "status": "running", "startedAt": "2026-01-02T03:04:05Z"});
        let record = EvalRunRecord::from_snapshot(snapshot).unwrap();
        assert!(record.is_running());
        assert_eq!(record.started_at.to_rfc3339(), "2026-01-02T03:04:05+00:00");
        assert!(EvalRunRecord::from_snapshot(serde_json::json!({"runId": "x", "status": "running"})).is_err());
    }
}
