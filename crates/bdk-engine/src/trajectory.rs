//! A session's trajectory folded from its events: the final reply, every tool call paired with
//! its result, token usage and estimated cost. `bdk run --json` and `bdk trajectory` print it,
//! and evals assert on it; all of them fold the same events, from a live log or a saved file.

use std::collections::HashMap;

use bdk_protocol::event::Usage;
use bdk_protocol::{CallId, Event, EventData, SessionId};
use serde::Serialize;
use serde_json::Value;

/// The shape `bdk run --json` and `bdk trajectory` print.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trajectory {
    /// `None` for an empty stream.
    pub session_id: Option<SessionId>,
    /// The last completed turn's final text (a task session's result).
    pub reply: Option<String>,
    pub tool_calls: Vec<TrajectoryCall>,
    /// Summed over completed turns.
    pub usage: Usage,
    pub cost_usd: f64,
    /// How many events were folded.
    pub events: usize,
    /// `running`, `waiting`, `completed` or `failed`, from the last event.
    pub status: String,
    /// The last `turn.failed` / `session.failed` message, when the stream ends in a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tool call and, once it finished, its result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrajectoryCall {
    pub call_id: CallId,
    pub tool_name: String,
    pub input: Value,
    /// `None` while the call has no `action.result`.
    pub result: Option<Value>,
    pub is_error: Option<bool>,
    pub duration_ms: Option<u64>,
}

impl Trajectory {
    /// Folds `events` (in log order).
    pub fn from_events(events: &[Event]) -> Self {
        let mut trajectory = Trajectory {
            session_id: events.first().map(|e| e.session_id.clone()),
            reply: None,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            cost_usd: 0.0,
            events: events.len(),
            status: crate::status::last_status_event(events)
                .map_or(crate::status::RUNNING, crate::status::of_last_event)
                .to_owned(),
            error: None,
        };
        let mut calls: HashMap<CallId, usize> = HashMap::new();
        for event in events {
            match &event.data {
                EventData::ActionsRequested(requested) => {
                    for call in &requested.calls {
                        calls.insert(call.call_id.clone(), trajectory.tool_calls.len());
                        trajectory.tool_calls.push(TrajectoryCall {
                            call_id: call.call_id.clone(),
                            tool_name: call.tool_name.clone(),
                            input: call.input.clone(),
                            result: None,
                            is_error: None,
                            duration_ms: None,
                        });
                    }
                }
                EventData::ActionResult(result) => {
                    if let Some(call) = calls.get(&result.call_id).and_then(|&i| trajectory.tool_calls.get_mut(i)) {
                        call.result = Some(result.result.clone());
                        call.is_error = Some(result.is_error);
                        call.duration_ms = Some(result.duration_ms);
                    }
                }
                EventData::TurnCompleted(completed) => {
                    trajectory.reply = completed.result.clone();
                    trajectory.usage.add(&completed.usage);
                    trajectory.cost_usd =
                        crate::cost::round_usd(trajectory.cost_usd + completed.estimated_cost_usd.unwrap_or(0.0));
                    trajectory.error = None;
                }
                EventData::TurnFailed(failed) => trajectory.error = Some(failed.message.clone()),
                EventData::SessionFailed(failed) => trajectory.error = Some(failed.message.clone()),
                EventData::MessageReceived(_) => trajectory.error = None,
                _ => {}
            }
        }
        trajectory
    }
}
