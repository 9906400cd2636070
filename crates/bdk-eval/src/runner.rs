//! A batch: every selected case, `iterations` times each, at most `max_concurrency` attempts at
//! once, each within the per-case timeout, until done or cancelled. The snapshot is updated and
//! saved after every attempt, and the caller is told (`bdk eval`'s progress, the HTTP poll).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bdk_engine::Engine;
use bdk_project::model::EvalCase;
use chrono::Utc;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::drive::{self, Observed};
use crate::report::{Attempt, CaseResult, CaseStatus, Check, Outcome, RunSnapshot, RunStatus, Totals};
use crate::setup::EvalSetup;
use crate::store::RunStore;
use crate::{expect, judge};

/// What to run.
#[derive(Debug, Clone)]
pub struct Batch {
    pub cases: Vec<EvalCase>,
    /// The selection, recorded on the snapshot.
    pub filter_ids: Vec<String>,
    pub tags: Vec<String>,
    /// Overrides every case's `iterations`.
    pub iterations: Option<u32>,
    pub max_concurrency: u32,
    pub timeout: Duration,
}

impl Batch {
    /// The snapshot of this batch before anything ran.
    pub fn snapshot(&self, run_id: String, agent: &str) -> RunSnapshot {
        let cases = self
            .cases
            .iter()
            .map(|case| CaseResult {
                id: case.id.clone(),
                file: case.file.clone(),
                description: case.description.clone(),
                tags: case.tags.clone(),
                status: CaseStatus::Pending,
                iterations: self.iterations.unwrap_or(case.iterations).max(1),
                passes: 0,
                pass_rate: 0.0,
                usage: Default::default(),
                cost_usd: 0.0,
                duration_ms: 0,
                attempts: Vec::new(),
            })
            .collect();
        let mut snapshot = RunSnapshot {
            run_id,
            agent: agent.to_owned(),
            status: RunStatus::Running,
            started_at: Utc::now(),
            finished_at: None,
            filter_ids: self.filter_ids.clone(),
            tags: self.tags.clone(),
            iterations: self.iterations,
            max_concurrency: self.max_concurrency.max(1),
            timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            error: None,
            totals: Totals::default(),
            cases,
        };
        snapshot.settle_totals();
        snapshot
    }
}

/// What just happened, for progress output.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    Started { case: &'a str, iteration: u32 },
    Finished { case: &'a str, attempt: &'a Attempt },
}

/// Observes progress; called with the snapshot as it stands after the change.
pub type Observer<'a> = &'a (dyn Fn(Progress<'_>, &RunSnapshot) + Send + Sync);

/// Runs `batch` into `shared` (made by [`Batch::snapshot`]), saving it to `store` as it goes.
/// Returns the final snapshot. Never fails: a batch that cannot start ends `failed` with the
/// reason.
pub async fn run_batch(
    setup: &EvalSetup,
    store: &RunStore,
    batch: Batch,
    shared: Arc<Mutex<RunSnapshot>>,
    cancel: CancellationToken,
    observe: Observer<'_>,
) -> RunSnapshot {
    let first = lock(&shared).clone();
    let run_id = first.run_id.clone();
    save(store, &first).await;
    let engine = match store.run_dir(&run_id).and_then(|dir| setup.engine(&dir, batch.max_concurrency)) {
        Ok(engine) => engine,
        Err(err) => {
            let snapshot = {
                let mut snapshot = lock(&shared);
                snapshot.status = RunStatus::Failed;
                snapshot.error = Some(err.to_string());
                snapshot.finished_at = Some(Utc::now());
                snapshot.clone()
            };
            save(store, &snapshot).await;
            return snapshot;
        }
    };
    let units: Vec<(usize, u32)> = lock(&shared)
        .cases
        .iter()
        .enumerate()
        .flat_map(|(i, case)| (1..=case.iterations).map(move |n| (i, n)))
        .collect();
    let semaphore = Arc::new(Semaphore::new(batch.max_concurrency.max(1) as usize));
    let mut running = vec![0usize; batch.cases.len()];
    let mut tasks: JoinSet<(usize, Attempt)> = JoinSet::new();
    let mut next = 0;
    let mut cancelled = cancel.is_cancelled();
    loop {
        tokio::select! {
            biased;
            Some(joined) = tasks.join_next() => {
                let Ok((index, attempt)) = joined else { continue };
                let iteration = attempt.iteration;
                running[index] = running[index].saturating_sub(1);
                let snapshot = {
                    let mut snapshot = lock(&shared);
                    let case = &mut snapshot.cases[index];
                    case.attempts.push(attempt);
                    case.attempts.sort_by_key(|a| a.iteration);
                    case.settle(running[index] > 0, false);
                    snapshot.settle_totals();
                    snapshot.clone()
                };
                save(store, &snapshot).await;
                let case = &snapshot.cases[index];
                if let Some(attempt) = case.attempts.iter().find(|a| a.iteration == iteration) {
                    observe(Progress::Finished { case: &case.id, attempt }, &snapshot);
                }
            }
            () = cancel.cancelled(), if !cancelled && (next < units.len() || !tasks.is_empty()) => cancelled = true,
            permit = semaphore.clone().acquire_owned(), if !cancelled && next < units.len() => {
                let Ok(permit) = permit else { break };
                let (index, iteration) = units[next];
                next += 1;
                running[index] += 1;
                let case = batch.cases[index].clone();
                {
                    let mut snapshot = lock(&shared);
                    snapshot.cases[index].settle(true, false);
                    snapshot.settle_totals();
                    let id = snapshot.cases[index].id.clone();
                    observe(Progress::Started { case: &id, iteration }, &snapshot);
                }
                let (engine, judge, cancel, timeout) = (engine.clone(), setup.judge.clone(), cancel.clone(), batch.timeout);
                tasks.spawn(async move {
                    let attempt = run_attempt(&engine, judge.as_ref(), &case, iteration, timeout, &cancel).await;
                    drop(permit);
                    (index, attempt)
                });
            }
            else => break,
        }
    }
    let snapshot = {
        let mut snapshot = lock(&shared);
        for case in &mut snapshot.cases {
            case.settle(false, cancelled);
        }
        snapshot.settle_totals();
        snapshot.status = if cancelled { RunStatus::Cancelled } else { RunStatus::Completed };
        snapshot.finished_at = Some(Utc::now());
        snapshot.clone()
    };
    save(store, &snapshot).await;
    snapshot
}

async fn run_attempt(
    engine: &Engine,
    judge_model: &dyn bdk_model::ModelProvider,
    case: &EvalCase,
    iteration: u32,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Attempt {
    let observed = drive::attempt(engine, case, iteration, timeout, cancel).await;
    let mut checks = expect::evaluate(&case.expect, &observed);
    if let Some(rubric) = &case.expect.judge {
        checks.push(match observed.outcome {
            Outcome::Cancelled => Check {
                kind: "judge".into(),
                expected: expect::clip(rubric, 200),
                passed: false,
                detail: "not graded: the run was cancelled".into(),
                model_graded: true,
                reasoning: None,
                model: Some(judge_model.info().model),
            },
            _ => judge::grade(judge_model, rubric, case, &observed, cancel).await,
        });
    }
    attempt_of(case, iteration, observed, checks)
}

fn attempt_of(case: &EvalCase, iteration: u32, observed: Observed, checks: Vec<Check>) -> Attempt {
    // A turn that failed passes only an eval that expects `succeeded = false`; a timeout, a
    // cancellation or a refused conversation never passes.
    let outcome_ok = match observed.outcome {
        Outcome::Completed => true,
        Outcome::TurnFailed => case.expect.succeeded == Some(false),
        Outcome::TimedOut | Outcome::Cancelled | Outcome::Error => false,
    };
    Attempt {
        iteration,
        session_id: observed.session_id.as_ref().map(|s| s.as_str().to_owned()),
        outcome: observed.outcome,
        passed: outcome_ok && checks.iter().all(|c| c.passed),
        error: observed.error.clone(),
        reply: observed.trajectory.reply.clone(),
        tool_calls: observed.trajectory.tool_calls.iter().map(|c| c.tool_name.clone()).collect(),
        usage: observed.trajectory.usage,
        cost_usd: observed.trajectory.cost_usd,
        duration_ms: u64::try_from(observed.duration.as_millis()).unwrap_or(u64::MAX),
        checks,
    }
}

fn lock(shared: &Mutex<RunSnapshot>) -> MutexGuard<'_, RunSnapshot> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn save(store: &RunStore, snapshot: &RunSnapshot) {
    if let Err(err) = store.save(snapshot).await {
        tracing::warn!(run = %snapshot.run_id, "saving the eval run failed: {err}");
    }
}
