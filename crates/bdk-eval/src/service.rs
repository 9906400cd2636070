//! One agent's eval runs as the HTTP routes see them: the discovered cases, at most one run at a
//! time in the background (a second start is refused), live snapshots to poll, cancellation,
//! and every saved run (newest first) read back from the store, so runs survive a restart.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bdk_project::model::EvalCase;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::{EvalError, Result};
use crate::report::RunSnapshot;
use crate::runner::{Batch, run_batch};
use crate::setup::EvalSetup;
use crate::store::RunStore;

/// How long a cancel waits for the run's attempts to stop before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(15);

/// What `POST /v1/dev/evals/runs` asks for.
#[derive(Debug, Clone, Default)]
pub struct StartRun {
    pub filter_ids: Vec<String>,
    pub tags: Vec<String>,
    pub iterations: Option<u32>,
}

#[derive(Debug)]
struct Active {
    run_id: String,
    snapshot: Arc<Mutex<RunSnapshot>>,
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
}

/// The eval runs of one mounted agent.
#[derive(Debug)]
pub struct EvalService {
    setup: EvalSetup,
    store: RunStore,
    active: Mutex<Option<Active>>,
    /// Cancels every run at shutdown.
    root: CancellationToken,
}

impl EvalService {
    /// The service for `setup`'s agent. Runs a previous process left `running` are marked
    /// failed first.
    pub fn new(setup: EvalSetup) -> Result<Arc<Self>> {
        let store = RunStore::new(setup.evals_dir());
        let recovered = store.recover()?;
        if recovered > 0 {
            tracing::info!(agent = %setup.project.slug, runs = recovered, "eval runs left running were marked failed");
        }
        Ok(Arc::new(Self { setup, store, active: Mutex::new(None), root: CancellationToken::new() }))
    }

    /// The discovered cases (empty without `evals/`).
    pub fn cases(&self) -> &[EvalCase] {
        self.setup.project.evals.as_ref().map_or(&[], |e| e.cases.as_slice())
    }

    /// `max_concurrency` and the per-case timeout from `evals/evals.toml`.
    pub fn config(&self) -> (u32, Duration) {
        self.setup.project.evals.as_ref().map_or(
            (bdk_project::formats::evals::DEFAULT_MAX_CONCURRENCY, bdk_project::formats::evals::DEFAULT_TIMEOUT),
            |e| (e.max_concurrency, e.timeout),
        )
    }

    pub fn store(&self) -> &RunStore {
        &self.store
    }

    fn active(&self) -> MutexGuard<'_, Option<Active>> {
        self.active.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a run in the background and returns its first snapshot. Refused while another
    /// runs (`AlreadyRunning`) or when the selection is empty (`NothingMatches`).
    pub fn start(self: &Arc<Self>, request: StartRun) -> Result<RunSnapshot> {
        let Some(evals) = self.setup.project.evals.as_ref() else { return Err(EvalError::NoEvals) };
        let mut active = self.active();
        if let Some(running) = active.as_ref().filter(|a| !*a.done.borrow()) {
            return Err(EvalError::AlreadyRunning(running.run_id.clone()));
        }
        let cases = crate::select::select(&evals.cases, &request.filter_ids, &request.tags);
        if cases.is_empty() {
            return Err(EvalError::NothingMatches);
        }
        let batch = Batch {
            cases,
            filter_ids: request.filter_ids,
            tags: request.tags,
            iterations: request.iterations,
            max_concurrency: evals.max_concurrency,
            timeout: evals.timeout,
        };
        let run_id = RunStore::new_run_id();
        let first = batch.snapshot(run_id.clone(), &self.setup.project.slug);
        self.store.save(&first)?;
        let snapshot = Arc::new(Mutex::new(first.clone()));
        let cancel = self.root.child_token();
        let (done_tx, done) = watch::channel(false);
        *active = Some(Active { run_id: run_id.clone(), snapshot: snapshot.clone(), cancel: cancel.clone(), done });
        drop(active);
        let service = self.clone();
        tokio::spawn(async move {
            let finished = run_batch(&service.setup, &service.store, batch, snapshot, cancel, &|_, _| {}).await;
            tracing::info!(
                run = %finished.run_id,
                passed = finished.totals.passed,
                failed = finished.totals.failed,
                status = ?finished.status,
                "eval run finished"
            );
            let _ = done_tx.send(true);
        });
        Ok(first)
    }

    /// Every run, newest first (the running one live), and the running one's id.
    pub fn runs(&self) -> Result<(Vec<RunSnapshot>, Option<String>)> {
        let mut runs = self.store.list()?;
        let active = self.active();
        let live = active.as_ref().filter(|a| !*a.done.borrow());
        if let Some(live) = live {
            let current = lock(&live.snapshot).clone();
            match runs.iter_mut().find(|r| r.run_id == current.run_id) {
                Some(slot) => *slot = current,
                None => runs.insert(0, current),
            }
        }
        Ok((runs, live.map(|a| a.run_id.clone())))
    }

    /// One run: live while it runs, else as saved.
    pub fn run(&self, run_id: &str) -> Result<RunSnapshot> {
        if let Some(active) = self.active().as_ref().filter(|a| a.run_id == run_id) {
            return Ok(lock(&active.snapshot).clone());
        }
        self.store.load(run_id).map_err(|err| match err {
            EvalError::InvalidRunId(id) => EvalError::RunNotFound(id),
            other => other,
        })
    }

    /// Cancels a running run and returns its snapshot once its attempts stopped (or after
    /// [`CANCEL_WAIT`]). `RunNotFound` for an unknown id, `NotRunning` for a finished run.
    pub async fn cancel(&self, run_id: &str) -> Result<RunSnapshot> {
        let (snapshot, cancel, mut done) = {
            let active = self.active();
            match active.as_ref().filter(|a| a.run_id == run_id && !*a.done.borrow()) {
                Some(a) => (a.snapshot.clone(), a.cancel.clone(), a.done.clone()),
                None => {
                    drop(active);
                    // Unknown ids are 404; a finished (or recovered) run is not running.
                    self.run(run_id)?;
                    return Err(EvalError::NotRunning(run_id.to_owned()));
                }
            }
        };
        cancel.cancel();
        let _ = tokio::time::timeout(CANCEL_WAIT, done.wait_for(|finished| *finished)).await;
        Ok(lock(&snapshot).clone())
    }

    /// Cancels any running run (at shutdown).
    pub fn shutdown(&self) {
        self.root.cancel();
    }
}

fn lock(shared: &Mutex<RunSnapshot>) -> MutexGuard<'_, RunSnapshot> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
