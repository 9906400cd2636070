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
//! Tool calls the open turn had parked for approval are closed first, before its `turn.failed`:
//! `action.approval_resolved` with decision `expired` and an `isError` `action.result` saying the
//! approval expired (see `approvals.rs`), so every requested call has its result.

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use bdk_protocol::event::{
    FailureCode, SessionCompleted, SessionFailed, SessionMode, SessionWaiting, TurnFailStatus, TurnFailed,
};
use bdk_protocol::{Event, EventData, TurnId};
use bdk_store::record::SessionStatus;
use bdk_store::{NewEvent, SessionRecord};

use crate::approvals;
use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::status;

/// The reason recorded on a turn the host was running when it stopped.
pub const RESTARTED: &str = "the host restarted while this turn was running";

/// Closes every open turn of every session not live in this engine. Returns how many turns.
///
/// Only sessions whose record may be behind their log are read: `running` (a message was
/// accepted; that status is written durably before the turn starts) or no status at all (a
/// record older than the field). A settled status (`waiting`, `completed`, `failed`) is written
/// after the closing event is durable, so its log has nothing open: start-up reads no log of a
/// settled session, and its cost follows the sessions that were open, not all state ever written.
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
    for record in core.stores.sessions.list().await? {
        if core.is_live(&record.id) || record.status.is_some_and(|s| s != SessionStatus::Running) {
            continue;
        }
        let result = recover_session(core, &record).await;
        core.stores.events.release(&record.id);
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

async fn recover_session(core: &Core, record: &SessionRecord) -> Result<usize> {
    let events = core.stores.events.read(&record.id, 0, None).await?;
    let (closed, last) = close_open_turns(core, record, &events).await?;
    // An empty log tells nothing: the record keeps its status (`running` if it has none, as
    // listings read such a log).
    let (status, at) = match last {
        Some(event) => (status::of_event(&event), event.at),
        None => (record.status.unwrap_or(SessionStatus::Running), record.updated_at),
    };
    if record.status != Some(status) {
        let mut next = record.clone();
        next.status = Some(status);
        next.updated_at = at.max(record.updated_at);
        core.stores.sessions.update(next).await?;
    }
    Ok(closed)
}

/// Closes what the log leaves open. Returns how many turns, and the log's last status event
/// after that (the appended settling event when it wrote one).
async fn close_open_turns(core: &Core, record: &SessionRecord, events: &[Event]) -> Result<(usize, Option<Event>)> {
    let Some(last) = status::last_status_event(events) else { return Ok((0, None)) };
    if status::is_settled(last) {
        return Ok((0, Some(last.clone())));
    }
    let open = open_turns(events);
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
    append.push(NewEvent::new(settle));
    tracing::info!(session = %record.id, turns = open.len(), "recovered a session left running");
    let written = core.stores.events.append(&record.id, append).await?;
    Ok((open.len(), written.last().map(|e| (**e).clone())))
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
