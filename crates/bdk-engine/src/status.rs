//! A session's status as `GET /v1/sessions` shows it, read from the last event of its log:
//! a session-level event settles it, anything else means a turn is open.

use bdk_protocol::{Event, EventData};

pub(crate) const RUNNING: &str = "running";
pub(crate) const WAITING: &str = "waiting";
pub(crate) const COMPLETED: &str = "completed";
pub(crate) const FAILED: &str = "failed";

/// `running`, `waiting`, `completed` or `failed`.
pub(crate) fn of_last_event(event: &Event) -> &'static str {
    match event.data {
        EventData::SessionWaiting(_) => WAITING,
        EventData::SessionCompleted(_) => COMPLETED,
        EventData::SessionFailed(_) => FAILED,
        _ => RUNNING,
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
    of_last_event(event) != RUNNING
}
