//! Saved runs: `<state dir>/evals/<runId>/run.json` (the snapshot, rewritten as the run
//! progresses, atomically) beside `<runId>/state/` (the run's own sessions and host-code state).
//! Runs left `running` by a process that stopped are marked failed when the store is recovered.

use std::path::{Path, PathBuf};

use crate::error::{EvalError, Result};
use crate::report::{CaseStatus, RunSnapshot, RunStatus};

/// The id prefix of eval runs.
const PREFIX: &str = "evr_";
const RUN_FILE: &str = "run.json";
/// The error a run left `running` by a stopped process gets.
pub const INTERRUPTED: &str = "the host stopped before the run finished";

/// One agent's saved runs.
#[derive(Debug, Clone)]
pub struct RunStore {
    dir: PathBuf,
}

impl RunStore {
    /// The runs under `evals_dir` (`<state dir>/evals`).
    pub fn new(evals_dir: impl Into<PathBuf>) -> Self {
        Self { dir: evals_dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new, time-ordered run id: `evr_<26 characters>`.
    pub fn new_run_id() -> String {
        let session = bdk_protocol::SessionId::generate();
        let suffix = session.as_str().split_once('_').map_or(session.as_str(), |(_, s)| s);
        format!("{PREFIX}{}", suffix.to_ascii_lowercase())
    }

    /// The run's folder; refuses ids that are not run ids (they name paths).
    pub fn run_dir(&self, run_id: &str) -> Result<PathBuf> {
        let valid =
            run_id.strip_prefix(PREFIX).is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
        if !valid {
            return Err(EvalError::InvalidRunId(run_id.to_owned()));
        }
        Ok(self.dir.join(run_id))
    }

    /// Writes the snapshot (a temporary file renamed over the old one).
    pub fn save(&self, snapshot: &RunSnapshot) -> Result<()> {
        let dir = self.run_dir(&snapshot.run_id)?;
        std::fs::create_dir_all(&dir).map_err(|e| EvalError::io(&dir, e))?;
        let path = dir.join(RUN_FILE);
        let tmp = dir.join(format!("{RUN_FILE}.tmp"));
        let body =
            serde_json::to_vec_pretty(snapshot).map_err(|source| EvalError::Corrupt { path: path.clone(), source })?;
        std::fs::write(&tmp, body).map_err(|e| EvalError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| EvalError::io(&path, e))
    }

    /// A saved run by id.
    pub fn load(&self, run_id: &str) -> Result<RunSnapshot> {
        let path = self.run_dir(run_id)?.join(RUN_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => read(&path, &bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(EvalError::RunNotFound(run_id.to_owned())),
            Err(err) => Err(EvalError::io(&path, err)),
        }
    }

    /// Every saved run, newest first. Unreadable ones are skipped with a warning.
    pub fn list(&self) -> Result<Vec<RunSnapshot>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(EvalError::io(&self.dir, err)),
        };
        let mut runs = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if self.run_dir(&name).is_err() {
                continue;
            }
            match self.load(&name) {
                Ok(run) => runs.push(run),
                Err(EvalError::RunNotFound(_)) => {}
                Err(err) => tracing::warn!("skipping eval run {name}: {err}"),
            }
        }
        runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.run_id.cmp(&a.run_id)));
        Ok(runs)
    }

    /// Marks runs left `running` by a process that stopped as failed. Returns how many.
    pub fn recover(&self) -> Result<usize> {
        let mut n = 0;
        for mut run in self.list()? {
            if run.status != RunStatus::Running {
                continue;
            }
            run.status = RunStatus::Failed;
            run.error = Some(INTERRUPTED.into());
            run.finished_at = Some(chrono::Utc::now());
            for case in &mut run.cases {
                if matches!(case.status, CaseStatus::Pending | CaseStatus::Running) {
                    case.status = CaseStatus::Cancelled;
                }
            }
            run.settle_totals();
            self.save(&run)?;
            n += 1;
        }
        Ok(n)
    }
}

/// Reads a run file (`bdk eval --compare` also takes a path to one).
pub fn read(path: &Path, bytes: &[u8]) -> Result<RunSnapshot> {
    serde_json::from_slice(bytes).map_err(|source| EvalError::Corrupt { path: path.to_path_buf(), source })
}
