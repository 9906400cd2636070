//! The eval runner: the cases of a project's `evals/` run as real turns through the session
//! engine, each followed by every expectation it declares, repeated `iterations` times for a
//! pass rate, at most `max_concurrency` at once, each within the per-case timeout.
//!
//! Eval sessions carry `purpose: "eval"` and live in a store of their own under
//! `<state dir>/evals/<runId>/state/`, so a run never changes what the served agent sees. Each
//! run's snapshot is saved as it progresses (`run.json` beside it, or the agent's database:
//! [`bdk_store::EvalRunStore`]), so `bdk eval --compare` and the HTTP routes read runs back
//! after a restart, and replicas sharing a database see each other's runs.
//!
//! What lives here: selection ([`select`]), one attempt through the engine (`drive`), the checks
//! (`expect`, `judge`), the batch (`runner`), results and their files ([`report`], [`store`]),
//! JUnit XML ([`junit`]), comparison ([`compare`]) and the one-run-at-a-time service the HTTP
//! routes use ([`service`]). What does not: the command line (`bdk-cli`), routes (`bdk-server`).

pub mod compare;
mod drive;
mod error;
mod expect;
mod judge;
pub mod junit;
pub mod report;
mod runner;
pub mod select;
pub mod service;
mod setup;
pub mod store;

pub use error::{EvalError, Result};
pub use report::{Attempt, CaseResult, CaseStatus, Check, Outcome, RunSnapshot, RunStatus, Totals};
pub use runner::{Batch, Progress, run_batch};
pub use service::{EvalService, StartRun};
pub use setup::{EvalSetup, PURPOSE, ToolsFactory, judge_provider};
pub use store::RunStore;
