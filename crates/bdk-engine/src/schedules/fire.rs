//! One firing of a schedule: claim its row, run its action, record the outcome.
//!
//! A prompt schedule starts a task-mode session on channel `schedule` whose continuation key is
//! `<id>@<due millis>`. That key is what makes a restart safe: a claim found open at start-up
//! looks its session up by that token, so a session that was started is followed (never
//! started twice), and one that never started is started then (never lost).
//! A `run` schedule runs its command with host services acting as the schedule-scoped principal
//! `schedule:<id>`; a `receive` schedule hands its message into the named channel as
//! `schedule:<id>`, continuing one conversation keyed `schedule:<id>` across firings.

use std::sync::Arc;

use bdk_project::formats::namespace_of;
use bdk_project::model::ScheduleAction;
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;
use bdk_store::{FiringRecord, FiringStatus, TimedKind};
use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Dispatched, Inner, Schedule, Trigger};
use crate::channel_send::ChannelSend;
use crate::timed_command::{self, SessionEnd, TimedCommand};
use crate::timed_error::TimedError;
use crate::types::{Principal, StartSession};

/// The channel schedule sessions belong to.
pub const CHANNEL: &str = "schedule";

/// The principal a schedule acts as (the reference's `appAuth`).
pub fn principal(id: &str) -> Principal {
    Principal::new(format!("schedule:{id}"))
}

/// Claims `(schedule, due)` and starts the firing. `None` when the claim already existed.
pub(super) async fn fire(
    inner: &Arc<Inner>,
    schedule: &Schedule,
    due: DateTime<Utc>,
    trigger: Trigger,
) -> Result<Option<Dispatched>, TimedError> {
    let record = FiringRecord {
        kind: TimedKind::Schedule,
        owner: schedule.def.id.clone(),
        due_at: due,
        trigger: trigger.as_str().to_owned(),
        status: FiringStatus::Claimed,
        session_ids: Vec::new(),
        claimed_at: inner.clock.now(),
        finished_at: None,
        error: None,
    };
    // Held before the row exists, so a `recover` reading open rows never takes it for a claim
    // a previous process left behind.
    // (Already held: a concurrent claim of the same due time here; the store refuses this one.)
    let key = (record.owner.clone(), due);
    let fresh = inner.held.lock().await.insert(key.clone());
    let claimed = inner.store.claim_firing(record.clone()).await;
    if !matches!(claimed, Ok(true)) {
        if fresh {
            inner.held.lock().await.remove(&key);
        }
        return claimed.map(|_| None).map_err(Into::into);
    }
    tracing::info!(schedule = %schedule.def.id, due = %due, trigger = trigger.as_str(), "schedule firing");
    // The firing's span is current while it starts its session: the turn is its child.
    let span = crate::telemetry::schedule_span(&inner.engine.core().telemetry, &schedule.def.id);
    let result = span.run(resume(inner, schedule, record)).await;
    if let Err(error) = &result {
        span.fail_with(|| error.to_string());
    }
    span.end();
    result.map(Some)
}

/// Runs (or picks up) the claimed firing `record`.
pub(super) async fn resume(
    inner: &Arc<Inner>,
    schedule: &Schedule,
    mut record: FiringRecord,
) -> Result<Dispatched, TimedError> {
    let id = schedule.def.id.clone();
    match &schedule.def.action {
        ScheduleAction::Prompt(prompt) => {
            let session = match record.session_ids.first() {
                Some(session) => session.clone(),
                None => match start(inner, &record, prompt).await {
                    Ok(session) => session,
                    Err(error) => {
                        finish(inner, record, Err(error.to_string())).await;
                        return Err(error);
                    }
                },
            };
            if record.session_ids.is_empty() {
                record.session_ids = vec![session.clone()];
                inner.store.update_firing(record.clone()).await?;
            }
            let (waiter, followed) = (inner.clone(), session.clone());
            inner.tasks.spawn(async move {
                let core = waiter.engine.core().clone();
                let end = timed_command::session_end(&core, &followed, &principal(&record.owner), &waiter.cancel).await;
                match end {
                    Some(SessionEnd::Completed) => finish(&waiter, record, Ok(())).await,
                    Some(SessionEnd::Failed(message)) => finish(&waiter, record, Err(message)).await,
                    // Shutting down: the row stays open and the next start follows the session.
                    None => {}
                }
            });
            Ok(Dispatched { schedule_id: id, session_ids: vec![session] })
        }
        ScheduleAction::Run(argv) => {
            let command = TimedCommand {
                name: format!("schedule-{id}"),
                argv: argv.clone(),
                cwd: schedule.def.cwd.clone(),
                timeout: schedule.def.timeout,
                session_id: None,
                principal: principal(&id),
                extension: namespace_of(&id, schedule.def.source).map(str::to_owned),
            };
            let input = json!({
                "scheduleId": id,
                "dueAt": record.due_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "trigger": record.trigger,
            });
            let runner = inner.clone();
            inner.tasks.spawn(async move {
                let core = runner.engine.core().clone();
                let outcome = tokio::select! {
                    () = runner.cancel.cancelled() => return,
                    outcome = timed_command::run(&core, &command, &input) => outcome,
                };
                let result = if outcome.is_error { Err(outcome_text(&outcome.result)) } else { Ok(()) };
                finish(&runner, record, result).await;
            });
            Ok(Dispatched { schedule_id: id, session_ids: Vec::new() })
        }
        ScheduleAction::Receive { channel, message } => {
            // Every firing continues one conversation on the channel, keyed by the schedule.
            let mut send = ChannelSend::new(channel.clone(), message.clone(), principal(&id));
            send.continuation_key = Some(format!("schedule:{id}"));
            send.title = Some(format!("schedule {id}"));
            send.purpose = Some("schedule".to_owned());
            match inner.engine.channel_send(send).await {
                Ok(sent) => {
                    record.session_ids = vec![sent.session_id.clone()];
                    finish(inner, record, Ok(())).await;
                    Ok(Dispatched { schedule_id: id, session_ids: vec![sent.session_id] })
                }
                Err(error) => {
                    finish(inner, record, Err(error.to_string())).await;
                    Err(error.into())
                }
            }
        }
    }
}

/// Starts the firing's task session, or finds the one a previous process started for it.
async fn start(inner: &Arc<Inner>, record: &FiringRecord, prompt: &str) -> Result<SessionId, TimedError> {
    let core = inner.engine.core();
    let key = format!("{}@{}", record.owner, record.due_at.timestamp_millis());
    let token = crate::tokens::channel_token(CHANNEL, &key)?;
    if let Some(existing) = core.direct_tokens.find(core, &token).await? {
        return Ok(existing.id);
    }
    let request = StartSession {
        message: prompt.to_owned(),
        principal: principal(&record.owner),
        channel: CHANNEL.to_owned(),
        continuation_key: Some(key),
        mode: SessionMode::Task,
        title: Some(format!("schedule {}", record.owner)),
        dry_run: false,
        as_of: None,
        purpose: Some("schedule".to_owned()),
        workspace_files: Vec::new(),
    };
    Ok(core.start_session(request).await?.session_id)
}

/// Records the firing's outcome. A storage failure is logged: the row stays open and is picked
/// up at the next start.
pub(super) async fn finish(inner: &Inner, mut record: FiringRecord, result: Result<(), String>) {
    record.finished_at = Some(inner.clock.now());
    match result {
        Ok(()) => record.status = FiringStatus::Completed,
        Err(message) => {
            tracing::warn!(schedule = %record.owner, error = %message, "schedule firing failed");
            record.status = FiringStatus::Failed;
            record.error = Some(message);
        }
    }
    let key = (record.owner.clone(), record.due_at);
    match inner.store.update_firing(record).await {
        // Closed: no longer open, so no longer held.
        Ok(()) => {
            inner.held.lock().await.remove(&key);
        }
        Err(error) => tracing::error!(%error, "recording a schedule firing's outcome failed"),
    }
}

/// A command's error result as one line of text.
fn outcome_text(result: &serde_json::Value) -> String {
    match result {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
