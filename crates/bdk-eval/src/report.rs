//! What a run produces: the snapshot the HTTP routes return, `--json` prints and `run.json`
//! holds. A run has cases; a case has attempts (one per iteration); an attempt has checks (one
//! per expectation, all of them, passed or not).

use bdk_protocol::event::Usage;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// Every attempt ran (cases may have failed: see `totals`).
    Completed,
    /// The batch itself broke (the host restarted mid-run, the eval state could not be opened).
    Failed,
    Cancelled,
}

/// Where a case is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Pending,
    Running,
    /// Every iteration passed.
    Passed,
    /// At least one iteration failed.
    Failed,
    /// The run was cancelled before every iteration finished.
    Cancelled,
}

/// How one attempt's conversation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every turn completed.
    Completed,
    /// A turn failed (`turn.failed`); later turns were not sent.
    TurnFailed,
    /// The per-case timeout ran out; the running turn was stopped.
    TimedOut,
    /// The run was cancelled while this attempt ran.
    Cancelled,
    /// The engine refused the conversation (it never started or could not continue).
    Error,
}

/// One expectation, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// The `[expect]` key: `succeeded`, `called_tool`, `reply_schema`, `judge`, ...
    pub kind: String,
    /// What was expected, on one line (`word_count {"text":"hi"}`, `<= 3`, the rubric).
    pub expected: String,
    pub passed: bool,
    /// What was observed, or why it failed.
    pub detail: String,
    /// Graded by a model (`judge`), not computed from the trajectory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_graded: bool,
    /// The judge's reasoning, for model-graded checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// The model that graded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// One iteration of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    /// 1-based.
    pub iteration: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub outcome: Outcome,
    /// Every check passed and the conversation was not cut short by a timeout or cancellation.
    pub passed: bool,
    /// Why the conversation did not complete, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The model's tool calls, by name, in order.
    pub tool_calls: Vec<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub duration_ms: u64,
    pub checks: Vec<Check>,
}

/// One case of the run and its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseResult {
    pub id: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub status: CaseStatus,
    /// Attempts asked for.
    pub iterations: u32,
    /// Attempts that passed.
    pub passes: u32,
    /// `passes` over finished attempts (0 before any finished).
    pub pass_rate: f64,
    pub usage: Usage,
    pub cost_usd: f64,
    pub duration_ms: u64,
    pub attempts: Vec<Attempt>,
}

impl CaseResult {
    /// Recomputes status, passes, rate and sums from the attempts. `running` says whether an
    /// attempt of this case is in flight; `cancelled` whether the run was cancelled.
    pub(crate) fn settle(&mut self, running: bool, cancelled: bool) {
        self.passes = self.attempts.iter().filter(|a| a.passed).count() as u32;
        let finished = self.attempts.len() as u32;
        self.pass_rate = if finished == 0 { 0.0 } else { f64::from(self.passes) / f64::from(finished) };
        self.usage = Usage::default();
        self.cost_usd = 0.0;
        self.duration_ms = 0;
        for attempt in &self.attempts {
            self.usage.add(&attempt.usage);
            self.cost_usd += attempt.cost_usd;
            self.duration_ms += attempt.duration_ms;
        }
        let any_failed = self.attempts.iter().any(|a| !a.passed && a.outcome != Outcome::Cancelled);
        let any_cancelled = self.attempts.iter().any(|a| a.outcome == Outcome::Cancelled);
        self.status = if any_failed {
            CaseStatus::Failed
        } else if any_cancelled || (cancelled && finished < self.iterations) {
            CaseStatus::Cancelled
        } else if finished >= self.iterations {
            CaseStatus::Passed
        } else if running || finished > 0 {
            CaseStatus::Running
        } else {
            CaseStatus::Pending
        };
    }
}

/// Sums over the run's cases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub cases: usize,
    pub passed: usize,
    pub failed: usize,
    /// Pending, running or cancelled.
    pub unfinished: usize,
    /// Attempts finished / asked for.
    pub attempts_done: usize,
    pub attempts: usize,
    pub usage: Usage,
    pub cost_usd: f64,
}

/// A run: its selection, settings, progress and results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSnapshot {
    pub run_id: String,
    /// The agent's slug.
    pub agent: String,
    pub status: RunStatus,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The selection the run was started with (empty: no filter).
    #[serde(default)]
    pub filter_ids: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// An iterations override for every case (`--iterations`), if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    pub max_concurrency: u32,
    pub timeout_ms: u64,
    /// Why the batch failed, for `status: failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub totals: Totals,
    pub cases: Vec<CaseResult>,
}

impl RunSnapshot {
    /// Recomputes the totals from the cases.
    pub(crate) fn settle_totals(&mut self) {
        let mut totals = Totals { cases: self.cases.len(), ..Totals::default() };
        for case in &self.cases {
            match case.status {
                CaseStatus::Passed => totals.passed += 1,
                CaseStatus::Failed => totals.failed += 1,
                _ => totals.unfinished += 1,
            }
            totals.attempts += case.iterations as usize;
            totals.attempts_done += case.attempts.len();
            totals.usage.add(&case.usage);
            totals.cost_usd += case.cost_usd;
        }
        self.totals = totals;
    }

    /// Whether every case passed (what `bdk eval` exits 0 on).
    pub fn all_passed(&self) -> bool {
        self.status == RunStatus::Completed && self.totals.passed == self.totals.cases
    }

    pub fn case(&self, id: &str) -> Option<&CaseResult> {
        self.cases.iter().find(|c| c.id == id)
    }
}
