//! Restart recovery: a turn the previous process left open (queued or started, never completed
//! or failed) is closed with `turn.failed` (status `failed`, the reason says the host
//! restarted), and a session whose log does not end settled gets its closing event: chat
//! sessions `session.waiting` (they take follow-ups again), task sessions `session.completed`
//! or `session.failed`. Running it twice changes nothing the second time.
//!
//! It also leaves each record's `status` (what `GET /v1/sessions` shows) equal to what the log
//! says: a crash between a closing event and the record's write, or a record written before the
//! field existed, is rewritten here, so listings after a restart read no log.
//!
//! A turn that was waiting for approvals is not closed: the session's last open turn, when its
//! last step has a parked call (and the session is not a subagent's child), is restored: its
//! parked calls are put back in the registry and its actor continues it, still waiting for the
//! decisions (`resume.rs`). The session stays `running` and gets no settling event. Parked calls
//! of a turn that is closed instead get `action.approval_resolved` with decision `expired` and an
//! `isError` `action.result` before its `turn.failed` (see `approvals.rs`), so every requested
//! call has its result.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use bdk_protocol::event::{
    FailureCode, SessionCompleted, SessionFailed, SessionMode, SessionWaiting, TurnFailStatus, TurnFailed,
};
use bdk_protocol::{Event, EventData, TurnId};
use bdk_store::record::SessionStatus;
use bdk_store::{NewEvent, SessionRecord};

use crate::actor::Command;
use crate::approvals;
use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::resume::Plan;
use crate::status;
use crate::subagents;

/// The reason recorded on a turn the host was running when it stopped.
pub const RESTARTED: &str = "the host restarted while this turn was running";

/// Closes every open turn of every session not live in this engine, within the agent's
/// [`crate::types::RestoreLimits`]. Returns how many turns.
///
/// Only sessions whose record may be behind their log are read: `running` (a message was accepted;
/// that status is written durably before the turn writes anything) or no status at all (a record
/// older than the field). A settled status (`waiting`, `completed`, `failed`) is written after the
/// closing event is durable, so its log has nothing open: start-up reads no log of a settled
/// session. The store lists those sessions from its index of open sessions
/// (`SessionStore::list_open`), so start-up does not even read a settled session's record: its cost
/// follows the sessions that were open, not all state ever written.
///
///
/// A session whose closing events the store refuses (a full or read-only disk) is recovered
/// again, in the background, each time the store takes writes again, until none is refused.
pub(crate) async fn recover(core: &Arc<Core>) -> Result<usize> {
    // Before the pass: a recovery of the store during it is still seen by the retry.
    let writable_again = core.store_health.recovered();
    // Health knows from the start whether the store takes writes (a host started on a full or
    // read-only disk still serves reads); the wrapper notes the outcome.
    if let Err(error) = core.stores.sessions.probe_write().await {
        tracing::warn!(%error, "the state store refuses writes at start-up");
    }
    let (closed, refused) = recover_once(core).await?;
    if refused {
        tokio::spawn(retry(Arc::downgrade(core), writable_again));
    }
    Ok(closed)
}

/// One pass: how many turns it closed, and whether the store refused any session's events.
async fn recover_once(core: &Arc<Core>) -> Result<(usize, bool)> {
    let mut closed = 0;
    let mut refused = false;
    let open: Vec<SessionRecord> = core
        .stores
        .sessions
        .list_open()
        .await?
        .into_iter()
        .filter(|record| record.status.is_none_or(|s| s == SessionStatus::Running))
        .collect();
    let (open, left) = within_limits(open, core.restore, chrono::Utc::now());
    if left > 0 {
        tracing::info!(
            restored = open.len(),
            left,
            "storage.toml's policy.restore leaves sessions for their next use, which closes what they left open"
        );
    }
    for record in open {
        if core.is_live(&record.id) {
            continue;
        }
        // Several replicas: another may be running this turn right now. Only a session whose
        // lease this replica can claim (free, or expired with its dead holder) is closed here.
        if core.leases.is_some() {
            match core.recover_one(&record.id).await {
                Ok(n) => closed += n,
                Err(crate::error::EngineError::LeasedElsewhere { .. }) => {}
                Err(error) => tracing::error!(session = %record.id, %error, "could not recover a session"),
            }
            continue;
        }
        let result = recover_session(core, &record, true).await;
        // A restored turn's actor keeps the log open.
        core.release_if_idle(&record.id);
        match result {
            Ok(n) => closed += n,
            Err(error) => {
                refused |= matches!(&error, EngineError::Store(e) if e.is_write_fault() || e.is_unavailable());
                tracing::error!(session = %record.id, %error, "could not recover a session");
            }
        }
    }
    Ok((closed, refused))
}

/// The sessions start-up restores under `limits`: the most recently updated first, none older
/// than `max_age`, at most `max_sessions`. Also returns how many are left out.
fn within_limits(
    mut open: Vec<SessionRecord>,
    limits: crate::types::RestoreLimits,
    now: chrono::DateTime<chrono::Utc>,
) -> (Vec<SessionRecord>, usize) {
    if limits == crate::types::RestoreLimits::default() {
        return (open, 0);
    }
    let all = open.len();
    if let Some(age) = limits.max_age.and_then(|age| chrono::Duration::from_std(age).ok()) {
        open.retain(|record| record.updated_at >= now - age);
    }
    open.sort_by_key(|record| std::cmp::Reverse(record.updated_at));
    if let Some(max) = limits.max_sessions {
        open.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    }
    let kept = open.len();
    (open, all - kept)
}

/// Runs recovery again each time the store takes writes again, until a pass is not refused.
async fn retry(core: Weak<Core>, mut writable_again: tokio::sync::watch::Receiver<u64>) {
    while writable_again.changed().await.is_ok() {
        let Some(core) = core.upgrade() else { return };
        match recover_once(&core).await {
            Ok((closed, false)) => {
                tracing::info!(turns = closed, "recovered the sessions the store had refused");
                return;
            }
            Ok((_, true)) => {}
            Err(error) => tracing::error!(%error, "recovery retry could not list sessions"),
        }
    }
}

/// Recovers one session. `restore`: a turn waiting for approvals is handed back to its actor
/// (`resume.rs`); without it that turn is closed like any other, its parked calls expired.
pub(crate) async fn recover_session(core: &Arc<Core>, record: &SessionRecord, restore: bool) -> Result<usize> {
    let (closed, plan) = recover_log(core, record, restore).await?;
    if let Some(plan) = plan {
        let turn = plan.turn.clone();
        let resumed = Box::new(plan.restore(core, &record.id));
        core.call(&record.id, None, |reply| Command::Resume { turn: turn.clone(), resumed, reply }).await?;
        tracing::info!(session = %record.id, %turn, "restored a turn waiting for approval");
    }
    Ok(closed)
}

/// [`recover_session`] up to the turn to restore, which it returns instead of handing it to the
/// session's actor: a session's own actor taking over a dead replica's lease continues it
/// itself (it cannot wait on its own mailbox).
pub(crate) async fn recover_log(
    core: &Arc<Core>,
    record: &SessionRecord,
    restore: bool,
) -> Result<(usize, Option<Plan>)> {
    let events = core.stores.events.read(&record.id, 0, None).await?;
    let (closed, last, restore) = close_open_turns(core, record, &events, restore).await?;
    drop(events);
    // An empty log tells nothing: the record keeps its status (`running` if it has none, as
    // listings read such a log). A restored turn keeps the session `running`.
    let (status, at) = match (&restore, last) {
        (Some(_), _) => (SessionStatus::Running, record.updated_at),
        (None, Some(event)) => (status::of_event(&event), event.at),
        (None, None) => (record.status.unwrap_or(SessionStatus::Running), record.updated_at),
    };
    if record.status != Some(status) {
        let mut next = record.clone();
        next.status = Some(status);
        next.updated_at = at.max(record.updated_at);
        core.stores.sessions.update(next).await?;
    }
    Ok((closed, restore))
}

/// What recovery did to one session's log: turns closed, the last status event after that,
/// and the turn to restore.
type Closed = (usize, Option<Event>, Option<Plan>);

/// Closes what the log leaves open, except a turn to restore. Returns how many turns were
/// closed, the log's last status event after that (the appended settling event when it wrote
/// one) and the restorable turn's plan.
async fn close_open_turns(core: &Core, record: &SessionRecord, events: &[Event], restore: bool) -> Result<Closed> {
    let Some(last) = status::last_status_event(events) else { return Ok((0, None, None)) };
    if status::is_settled(last) {
        return Ok((0, Some(last.clone()), None));
    }
    let mut open = open_turns(events);
    let restore = match open.last() {
        Some(turn) if restore && record.channel != subagents::CHANNEL => Plan::read(events, turn),
        _ => None,
    };
    if restore.is_some() {
        open.pop();
        if open.is_empty() {
            return Ok((0, Some(last.clone()), restore));
        }
    }
    let mut append = approvals::expire_parked(events, &open);
    append.extend(open.iter().map(|turn| {
        let failed = TurnFailed {
            status: TurnFailStatus::Failed,
            message: RESTARTED.to_owned(),
            error: Some(FailureCode::HostRestarted),
            usage: None,
            estimated_cost_usd: None,
        };
        NewEvent::in_turn(turn.clone(), EventData::TurnFailed(failed))
    }));
    let settle = match record.mode {
        SessionMode::Chat => EventData::SessionWaiting(SessionWaiting {}),
        SessionMode::Task => match last_turn_end(events) {
            Some(EventData::TurnCompleted(done)) if open.is_empty() => {
                EventData::SessionCompleted(SessionCompleted { result: done.result.clone() })
            }
            Some(EventData::TurnFailed(failed)) if open.is_empty() => {
                EventData::SessionFailed(SessionFailed { message: failed.message.clone(), error: failed.error })
            }
            _ => EventData::SessionFailed(SessionFailed {
                message: RESTARTED.to_owned(),
                error: Some(FailureCode::HostRestarted),
            }),
        },
    };
    if restore.is_none() {
        append.push(NewEvent::new(settle));
    }
    tracing::info!(session = %record.id, turns = open.len(), "recovered a session left running");
    let written = core.stores.events.append(&record.id, append).await?;
    Ok((open.len(), written.last().map(|e| (**e).clone()), restore))
}

/// Turns with a `turn.queued` or `turn.started` but no `turn.completed` / `turn.failed`, in
/// the order they began.
fn open_turns(events: &[Event]) -> Vec<TurnId> {
    let mut ended = HashSet::new();
    for event in events {
        if let (EventData::TurnCompleted(_) | EventData::TurnFailed(_), Some(turn)) = (&event.data, &event.turn_id) {
            ended.insert(turn.clone());
        }
    }
    let mut seen = HashSet::new();
    let mut open = Vec::new();
    for event in events {
        if let (EventData::TurnQueued(_) | EventData::TurnStarted(_), Some(turn)) = (&event.data, &event.turn_id)
            && !ended.contains(turn)
            && seen.insert(turn.clone())
        {
            open.push(turn.clone());
        }
    }
    open
}

fn last_turn_end(events: &[Event]) -> Option<&EventData> {
    events.iter().rev().map(|e| &e.data).find(|d| matches!(d, EventData::TurnCompleted(_) | EventData::TurnFailed(_)))
}
