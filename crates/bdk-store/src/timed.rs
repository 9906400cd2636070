//! Durable records of timed work: one firing row per (schedule or reminder, due time), and the
//! armed reminders. The trait says what a backend must guarantee; deciding when something is
//! due, and running it, is the engine's.
//!
//! The one guarantee that makes "fires exactly once" hold is [`TimedStore::claim_firing`]: it
//! records a firing durably and refuses a second claim for the same key, so a process that
//! restarts (or a second replica) finds the claim and does not run the firing again. The
//! filesystem backend creates the row with an exclusive link; a PostgreSQL backend implements it
//! as an `INSERT ... ON CONFLICT DO NOTHING` on a table with `UNIQUE (kind, owner, due_at)`.

use std::fmt;

use bdk_protocol::SessionId;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::BoxFuture;
use crate::error::Result;

/// What a firing belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimedKind {
    Schedule,
    Reminder,
}

impl TimedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TimedKind::Schedule => "schedule",
            TimedKind::Reminder => "reminder",
        }
    }
}

/// Where a firing is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FiringStatus {
    /// Recorded before the work started; still open.
    Claimed,
    Completed,
    Failed,
}

impl FiringStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FiringStatus::Claimed => "claimed",
            FiringStatus::Completed => "completed",
            FiringStatus::Failed => "failed",
        }
    }
}

/// One firing: the unique row for `(kind, owner, due_at)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FiringRecord {
    pub kind: TimedKind,
    /// The schedule id or reminder id.
    pub owner: String,
    /// The due time this firing serves (whole seconds for cron, any instant for a manual one).
    pub due_at: DateTime<Utc>,
    /// What started it: `cron`, `missed`, `dev`, `internal`.
    pub trigger: String,
    pub status: FiringStatus,
    /// Sessions the firing started or woke, once known.
    #[serde(default)]
    pub session_ids: Vec<SessionId>,
    pub claimed_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An armed (or ended) reminder. The cadence fields are stored as given; the engine computes
/// `next_due_at` and advances it after each firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReminderRecord {
    /// `rem_<suffix>`: one path segment.
    pub id: String,
    /// The conversation it is bound to.
    pub session_id: SessionId,
    /// That conversation's channel continuation token (`<channel>:<key>`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
    /// Who the wake acts as (the session's owner).
    pub principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// `delay`, `at`, `every` or `cron`, and its value as given (`"2h"`, an RFC 3339 time, ...).
    pub cadence: String,
    pub cadence_value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// A named handler (`reminders/<name>.toml`) and its JSON args.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub args: Value,
    /// `active`, `cancelled` or `done`.
    pub status: String,
    /// The next due time while active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_due_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// Firings so far.
    #[serde(default)]
    pub fired: u64,
}

/// Durable timed-work state. One writer decides (the engine's timed-work task); the store only
/// guarantees that a firing key is claimed at most once and that what was written survives.
pub trait TimedStore: Send + Sync + fmt::Debug {
    /// Records `record` (status `claimed`) durably. `Ok(false)` when its `(kind, owner, due_at)`
    /// was already claimed: the caller must not run it.
    fn claim_firing(&self, record: FiringRecord) -> BoxFuture<'_, Result<bool>>;

    /// Replaces the row of an existing claim (session ids, outcome).
    fn update_firing(&self, record: FiringRecord) -> BoxFuture<'_, Result<()>>;

    /// The firings of one owner, oldest due time first (recent history; backends may prune).
    fn firings<'a>(&'a self, kind: TimedKind, owner: &'a str) -> BoxFuture<'a, Result<Vec<FiringRecord>>>;

    /// Every firing still `claimed`: work a previous process started and may not have finished.
    fn open_firings(&self) -> BoxFuture<'_, Result<Vec<FiringRecord>>>;

    /// Creates or replaces a reminder.
    fn put_reminder(&self, record: ReminderRecord) -> BoxFuture<'_, Result<()>>;

    fn reminder<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ReminderRecord>>>;

    /// Every reminder, oldest first.
    fn reminders(&self) -> BoxFuture<'_, Result<Vec<ReminderRecord>>>;
}
