//! A session's status as `GET /v1/sessions` shows it, read from the last event of its log:
//! a session-level event settles it, anything else means a turn is open. The actor keeps a copy
//! in `session.json` (`SessionRecord::status`) so a listing reads no log.

use bdk_protocol::{Event, EventData};
use bdk_store::record::SessionStatus;

pub(crate) const RUNNING: &str = "running";

/// `running`, `waiting`, `completed` or `failed`.
pub(crate) fn of_last_event(event: &Event) -> &'static str {
    of_event(event).as_str()
}

/// The status a log ending in `event` (a status event, see [`last_status_event`]) tells.
pub(crate) fn of_event(event: &Event) -> SessionStatus {
    match event.data {
        EventData::SessionWaiting(_) => SessionStatus::Waiting,
        EventData::SessionCompleted(_) => SessionStatus::Completed,
        EventData::SessionFailed(_) => SessionStatus::Failed,
        _ => SessionStatus::Running,
    }
}

/// Whether the event records a direct tool call (`POST /v1/tools/:name` bound to the session).
/// It says nothing about the session's status: readers of "the last event" skip it.
pub(crate) fn is_direct(event: &Event) -> bool {
    match &event.data {
        EventData::ActionsRequested(requested) => requested.direct == Some(true),
        EventData::ActionResult(result) => result.direct == Some(true),
        _ => false,
    }
}

/// The last event that tells the session's status (direct calls skipped).
pub(crate) fn last_status_event(events: &[Event]) -> Option<&Event> {
    events.iter().rev().find(|e| !is_direct(e))
}

/// Whether the event settles the session (nothing runs after it until a new message).
pub(crate) fn is_settled(event: &Event) -> bool {
    of_event(event) != SessionStatus::Running
}
