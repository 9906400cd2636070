//! A session's trajectory folded from its events: the final reply, every tool call paired with
//! its result, token usage and estimated cost. Direct tool calls bound to the session
//! (`POST /v1/tools/:name`, `bdk call`) are not the model's: they are listed apart, in
//! `directCalls`, never among a turn's `toolCalls`. `bdk run --json` and `bdk trajectory` print it,
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
    /// The model's tool calls, in the order it asked for them.
    pub tool_calls: Vec<TrajectoryCall>,
    /// Direct tool calls bound to the session (events with `direct: true`), in log order.
    /// Omitted when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub direct_calls: Vec<TrajectoryCall>,
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
            direct_calls: Vec::new(),
            usage: Usage::default(),
            cost_usd: 0.0,
            events: events.len(),
            status: crate::status::last_status_event(events)
                .map_or(crate::status::RUNNING, crate::status::of_last_event)
                .to_owned(),
            error: None,
        };
        // Call id → (direct?, index in that list).
        let mut calls: HashMap<CallId, (bool, usize)> = HashMap::new();
        for event in events {
            match &event.data {
                EventData::ActionsRequested(requested) => {
                    let direct = requested.direct == Some(true);
                    let list = if direct { &mut trajectory.direct_calls } else { &mut trajectory.tool_calls };
                    for call in &requested.calls {
                        calls.insert(call.call_id.clone(), (direct, list.len()));
                        list.push(TrajectoryCall {
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
                    let found = calls.get(&result.call_id).and_then(|&(direct, i)| {
                        if direct { trajectory.direct_calls.get_mut(i) } else { trajectory.tool_calls.get_mut(i) }
                    });
                    if let Some(call) = found {
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

#[cfg(test)]
mod tests {
    use bdk_protocol::TurnId;
    use bdk_protocol::event::{ActionCall, ActionResult, ActionsRequested, SessionWaiting, TurnCompleted};
    use serde_json::json;

    use super::*;

    fn event(index: u64, session: &SessionId, turn: Option<&TurnId>, data: EventData) -> Event {
        Event { index, session_id: session.clone(), turn_id: turn.cloned(), at: chrono::Utc::now(), data }
    }

    fn requested(call: &CallId, tool: &str, direct: bool) -> EventData {
        EventData::ActionsRequested(ActionsRequested {
            calls: vec![ActionCall { call_id: call.clone(), tool_name: tool.into(), input: json!({"n": 1}) }],
            direct: direct.then_some(true),
        })
    }

    fn result(call: &CallId, tool: &str, direct: bool) -> EventData {
        EventData::ActionResult(ActionResult {
            call_id: call.clone(),
            tool_name: tool.into(),
            is_error: false,
            result: json!(tool),
            duration_ms: 3,
            stubbed: None,
            direct: direct.then_some(true),
        })
    }

    #[test]
    fn direct_calls_are_listed_apart_from_the_models_tool_calls() {
        let session = SessionId::generate();
        let (turn, direct_turn) = (TurnId::generate(), TurnId::generate());
        let (model_call, direct_call) = (CallId::generate("add"), CallId::generate("peek"));
        let completed = TurnCompleted {
            usage: Usage::default(),
            estimated_cost_usd: None,
            model: None,
            result: Some("done".into()),
            duration_ms: None,
        };
        let events = vec![
            event(0, &session, Some(&turn), requested(&model_call, "add", false)),
            // A direct call lands between the model's request and its result, under its own turn.
            event(1, &session, Some(&direct_turn), requested(&direct_call, "peek", true)),
            event(2, &session, Some(&direct_turn), result(&direct_call, "peek", true)),
            event(3, &session, Some(&turn), result(&model_call, "add", false)),
            event(4, &session, Some(&turn), EventData::TurnCompleted(completed)),
            event(5, &session, None, EventData::SessionWaiting(SessionWaiting {})),
        ];
        let trajectory = Trajectory::from_events(&events);
        assert_eq!(trajectory.tool_calls.len(), 1);
        assert_eq!(trajectory.tool_calls[0].tool_name, "add");
        assert_eq!(trajectory.tool_calls[0].result, Some(json!("add")));
        assert_eq!(trajectory.direct_calls.len(), 1);
        assert_eq!(trajectory.direct_calls[0].call_id, direct_call);
        assert_eq!(trajectory.direct_calls[0].result, Some(json!("peek")));
        assert_eq!(trajectory.status, "waiting");
        let json = serde_json::to_value(&trajectory).unwrap();
        assert_eq!(json["directCalls"][0]["toolName"], "peek");

        // Without direct calls the field is left out.
        let json = serde_json::to_value(Trajectory::from_events(&events[..1])).unwrap();
        assert!(json.get("directCalls").is_none());
    }
}
