//! One agent's eval runs as the HTTP routes see them: the discovered cases, at most one run at a
//! time in the background (a second start is refused), live snapshots to poll, cancellation,
//! and every saved run (newest first) read back from the store, so runs survive a restart.
//! On a store several replicas share (PostgreSQL) the rules hold for the group: one run at a
//! time per agent, runs listed and polled on any replica, a cancel sent to any replica reaches
//! the one running it, and a dead replica's run is marked failed by one of the others.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bdk_project::model::EvalCase;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::{EvalError, Result};
use crate::report::{RunSnapshot, RunStatus};
use crate::runner::{Batch, run_batch};
use crate::setup::EvalSetup;
use crate::store::RunStore;

/// How long a cancel waits for the run's attempts to stop before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(15);

/// How often a run checks for (and a remote cancel waits on) a cancel sent through a shared
/// store.
const CANCEL_POLL: Duration = Duration::from_millis(250);

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
    /// Held while a run starts (its first save is awaited), so two starts never both begin.
    starting: tokio::sync::Mutex<()>,
    /// Cancels every run at shutdown.
    root: CancellationToken,
}

impl EvalService {
    /// The service for `setup`'s agent, its runs in `store`. Runs a stopped host left `running`
    /// are marked failed first; on a store several hosts share, also every
    /// [`RunStore::sweep_period`] while the service lives (a replica that died mid-run).
    pub async fn open(setup: EvalSetup, store: RunStore) -> Result<Arc<Self>> {
        let slug = setup.project.slug.clone();
        let recovered = store.recover().await?;
        if recovered > 0 {
            tracing::info!(agent = %slug, runs = recovered, "eval runs left running were marked failed");
        }
        let root = CancellationToken::new();
        if let Some(period) = store.sweep_period() {
            tokio::spawn(sweep(store.clone(), period, root.child_token(), slug));
        }
        Ok(Arc::new(Self { setup, store, active: Mutex::new(None), starting: tokio::sync::Mutex::new(()), root }))
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
    /// runs, here or on another host sharing the store (`AlreadyRunning`), or when the selection
    /// is empty (`NothingMatches`).
    pub async fn start(self: &Arc<Self>, request: StartRun) -> Result<RunSnapshot> {
        let Some(evals) = self.setup.project.evals.as_ref() else { return Err(EvalError::NoEvals) };
        let _starting = self.starting.lock().await;
        if let Some(running) = self.active().as_ref().filter(|a| !*a.done.borrow()) {
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
        self.store.begin(&first).await?;
        let snapshot = Arc::new(Mutex::new(first.clone()));
        let cancel = self.root.child_token();
        let (done_tx, done) = watch::channel(false);
        *self.active() = Some(Active {
            run_id: run_id.clone(),
            snapshot: snapshot.clone(),
            cancel: cancel.clone(),
            done: done.clone(),
        });
        if self.store.shared() {
            tokio::spawn(watch_cancel(self.store.clone(), run_id, cancel.clone(), done));
        }
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

    /// Every run, newest first (the running one live), and the running one's id: this host's,
    /// else (on a shared store) the one another host runs.
    pub async fn runs(&self) -> Result<(Vec<RunSnapshot>, Option<String>)> {
        let mut runs = self.store.list().await?;
        let active = self.active();
        let live = active.as_ref().filter(|a| !*a.done.borrow());
        if let Some(live) = live {
            let current = lock(&live.snapshot).clone();
            match runs.iter_mut().find(|r| r.run_id == current.run_id) {
                Some(slot) => *slot = current,
                None => runs.insert(0, current),
            }
        }
        let elsewhere = || {
            let running = runs.iter().find(|r| r.status == RunStatus::Running);
            running.filter(|_| self.store.shared()).map(|r| r.run_id.clone())
        };
        let active_id = live.map(|a| a.run_id.clone()).or_else(elsewhere);
        drop(active);
        Ok((runs, active_id))
    }

    /// One run: live while it runs here, else as saved (by whichever host runs it).
    pub async fn run(&self, run_id: &str) -> Result<RunSnapshot> {
        if let Some(snapshot) = self.active().as_ref().filter(|a| a.run_id == run_id).map(|a| a.snapshot.clone()) {
            return Ok(lock(&snapshot).clone());
        }
        self.store.load(run_id).await.map_err(|err| match err {
            EvalError::InvalidRunId(id) => EvalError::RunNotFound(id),
            other => other,
        })
    }

    /// Cancels a running run and returns its snapshot once its attempts stopped (or after
    /// [`CANCEL_WAIT`]). A run another host runs is asked to stop through the store.
    /// `RunNotFound` for an unknown id, `NotRunning` for a finished run.
    pub async fn cancel(&self, run_id: &str) -> Result<RunSnapshot> {
        let here = {
            let active = self.active();
            active
                .as_ref()
                .filter(|a| a.run_id == run_id && !*a.done.borrow())
                .map(|a| (a.snapshot.clone(), a.cancel.clone(), a.done.clone()))
        };
        let Some((snapshot, cancel, mut done)) = here else {
            // Unknown ids are 404; a finished (or recovered) run is not running.
            let saved = self.run(run_id).await?;
            if saved.status != RunStatus::Running || !self.store.request_cancel(run_id).await? {
                return Err(EvalError::NotRunning(run_id.to_owned()));
            }
            return self.settled_elsewhere(run_id).await;
        };
        cancel.cancel();
        let _ = tokio::time::timeout(CANCEL_WAIT, done.wait_for(|finished| *finished)).await;
        Ok(lock(&snapshot).clone())
    }

    /// The snapshot of a run another host was asked to cancel, once it ended (or after
    /// [`CANCEL_WAIT`]).
    async fn settled_elsewhere(&self, run_id: &str) -> Result<RunSnapshot> {
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        loop {
            let saved = self.store.load(run_id).await?;
            if saved.status != RunStatus::Running || tokio::time::Instant::now() >= deadline {
                return Ok(saved);
            }
            tokio::time::sleep(CANCEL_POLL).await;
        }
    }

    /// Cancels any running run (at shutdown).
    pub fn shutdown(&self) {
        self.root.cancel();
    }
}

impl Drop for EvalService {
    /// Stops the sweep (a running run holds the service, so none is running by now).
    fn drop(&mut self) {
        self.root.cancel();
    }
}

/// Recovers runs of hosts that died, every `period`, until `stop`.
async fn sweep(store: RunStore, period: Duration, stop: CancellationToken, agent: String) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        match store.recover().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(agent = %agent, runs = n, "eval runs of a stopped replica were marked failed"),
            Err(err) => tracing::warn!(agent = %agent, "recovering eval runs failed: {err}"),
        }
    }
}

/// Cancels this host's run `run_id` when another host asks to (through the store), until the
/// run ends.
async fn watch_cancel(store: RunStore, run_id: String, cancel: CancellationToken, mut done: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = done.wait_for(|finished| *finished) => return,
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(CANCEL_POLL) => {}
        }
        match store.cancel_requested(&run_id).await {
            Ok(true) => {
                tracing::info!(run = %run_id, "eval run cancelled from another replica");
                cancel.cancel();
                return;
            }
            Ok(false) => {}
            Err(err) => tracing::warn!(run = %run_id, "checking for a cancel request failed: {err}"),
        }
    }
}

fn lock(shared: &Mutex<RunSnapshot>) -> MutexGuard<'_, RunSnapshot> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
