//! Restoring a turn that was waiting for an approval when the host stopped: what restart
//! recovery reads from the log to rebuild it, and the parked state it puts back.
//!
//! A turn is restored when it is open (no `turn.completed` / `turn.failed`), it is the last open
//! turn of a session that is not a subagent's child, and its last step is in its tool calls
//! (`actions.requested` after the step's `step.started`) with at least one call parked: an
//! `action.approval_requested` with no `action.approval_resolved` and no `action.result`. Each
//! call of that step is then one of:
//!
//! - done: its `action.result` is in the log (kept as it is, for the model);
//! - parked: put back in the approvals registry with its original `requestedAt`, so it is
//!   listed and decided as before the restart;
//! - interrupted: it was running (or approved and about to run) when the host stopped. It is not
//!   run again (it may have had effects): it gets an `isError` `action.result` saying so.
//!
//! The turn then goes on in a fresh task (`turn.rs`): it waits for the decisions, runs the
//! approved calls, and continues with the next model step. Anything else open is closed by
//! `recovery.rs` as before. This module writes nothing itself.

use std::sync::Arc;

use bdk_model::Usage as ModelUsage;
use bdk_protocol::event::ActionCall;
use bdk_protocol::{CallId, Event, EventData, SessionId, TurnId};
use bdk_tools::ToolOutcome;
use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use crate::approvals::{PendingApproval, Resolution};
use crate::dispatch::PreparedCall;
use crate::engine::Core;
use crate::status;

/// What the model reads for a call that was running when the host stopped.
pub const INTERRUPTED_BY_RESTART: &str =
    "the host restarted while this call was running; it was not run again and its outcome is unknown";

/// Where one call of the restored step stood.
#[derive(Debug)]
pub(crate) enum Prior {
    /// Its result is in the log.
    Done(ToolOutcome),
    /// Parked again: the receiver yields the decision.
    Parked(oneshot::Receiver<Resolution>),
    /// Running when the host stopped: answered with [`INTERRUPTED_BY_RESTART`].
    Interrupted,
}

/// A turn to continue after a restart, handed to the session's actor.
#[derive(Debug)]
pub(crate) struct Resumed {
    /// The step whose tool calls are pending; the next model step is `step + 1`.
    pub step: u32,
    pub calls: Vec<PreparedCall>,
    /// One per call, in the same order.
    pub prior: Vec<Prior>,
    /// The model usage the turn's finished steps recorded (`step.completed`).
    pub usage: ModelUsage,
    /// Withdraws the re-parked calls if the turn never gets to wait for them.
    pub guard: Restored,
}

/// The restorable state of one open turn, read from the log.
#[derive(Debug)]
pub(crate) struct Plan {
    pub turn: TurnId,
    step: u32,
    calls: Vec<(ActionCall, State)>,
    usage: ModelUsage,
}

#[derive(Debug)]
enum State {
    Done(ToolOutcome),
    Parked(DateTime<Utc>),
    Interrupted,
}

impl Plan {
    /// The plan for `turn` if it can be restored (see the module docs).
    pub fn read(events: &[Event], turn: &TurnId) -> Option<Plan> {
        let mut step = None;
        let mut calls: Vec<ActionCall> = Vec::new();
        let mut usage = ModelUsage::default();
        for event in events.iter().filter(|e| e.turn_id.as_ref() == Some(turn) && !status::is_direct(e)) {
            match &event.data {
                EventData::StepStarted(started) => {
                    step = Some(started.step);
                    calls.clear();
                }
                EventData::StepCompleted(completed) => {
                    if let Some(used) = &completed.usage {
                        usage.add(&ModelUsage {
                            input_tokens: used.input_tokens,
                            output_tokens: used.output_tokens,
                            cached_input_tokens: used.cached_input_tokens,
                            cache_write_tokens: 0,
                            reasoning_tokens: (used.reasoning_tokens > 0).then_some(used.reasoning_tokens),
                        });
                    }
                }
                EventData::ActionsRequested(requested) => calls.extend(requested.calls.iter().cloned()),
                _ => {}
            }
        }
        let step = step?;
        let mut states: Vec<(ActionCall, State)> = calls.into_iter().map(|c| (c, State::Interrupted)).collect();
        let mut parked_at: Vec<(CallId, DateTime<Utc>)> = Vec::new();
        let mut decided: Vec<CallId> = Vec::new();
        for event in events.iter().filter(|e| e.turn_id.as_ref() == Some(turn) && !status::is_direct(e)) {
            match &event.data {
                EventData::ApprovalRequested(requested) => parked_at.push((requested.call_id.clone(), event.at)),
                EventData::ApprovalResolved(resolved) => decided.push(resolved.call_id.clone()),
                EventData::ActionResult(result) => {
                    if let Some((_, state)) = states.iter_mut().find(|(c, _)| c.call_id == result.call_id) {
                        *state = State::Done(ToolOutcome {
                            is_error: result.is_error,
                            result: result.result.clone(),
                            stubbed: result.stubbed == Some(true),
                        });
                    }
                }
                _ => {}
            }
        }
        for (call, state) in &mut states {
            if matches!(state, State::Done(_)) || decided.contains(&call.call_id) {
                continue;
            }
            if let Some((_, at)) = parked_at.iter().find(|(id, _)| id == &call.call_id) {
                *state = State::Parked(*at);
            }
        }
        let parked = states.iter().any(|(_, s)| matches!(s, State::Parked(_)));
        parked.then(|| Plan { turn: turn.clone(), step, calls: states, usage })
    }

    /// Puts the parked calls back in the registry (listed and decidable from now on) and
    /// returns the turn's state for its actor.
    pub fn restore(self, core: &Arc<Core>, session: &SessionId) -> Resumed {
        let mut guard = Restored { core: core.clone(), session: session.clone(), calls: Vec::new() };
        let mut calls = Vec::with_capacity(self.calls.len());
        let mut prior = Vec::with_capacity(self.calls.len());
        for (call, state) in self.calls {
            let prepared = PreparedCall {
                call_id: call.call_id.clone(),
                name: call.tool_name.clone(),
                input: call.input.clone(),
                invalid: None,
            };
            prior.push(match state {
                State::Done(outcome) => Prior::Done(outcome),
                State::Interrupted => Prior::Interrupted,
                State::Parked(requested_at) => {
                    let pending = PendingApproval {
                        call_id: call.call_id.clone(),
                        tool_name: call.tool_name,
                        input: call.input,
                        requested_at,
                        turn_id: self.turn.clone(),
                    };
                    guard.calls.push(call.call_id);
                    Prior::Parked(core.approvals.restore(session, pending))
                }
            });
            calls.push(prepared);
        }
        Resumed { step: self.step, calls, prior, usage: self.usage, guard }
    }
}

/// The calls recovery parked again. Dropping it withdraws those still parked (the turn that
/// should wait for them ended first), like `approvals::ParkedCalls` for a live dispatch.
#[derive(Debug)]
pub(crate) struct Restored {
    core: Arc<Core>,
    session: SessionId,
    calls: Vec<CallId>,
}

impl Drop for Restored {
    fn drop(&mut self) {
        for call_id in &self.calls {
            self.core.approvals.withdraw(&self.session, call_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use bdk_protocol::event::{
        ActionResult, ActionsRequested, ApprovalDecision, ApprovalRequested, ApprovalResolved, StepStarted,
        timestamp_now,
    };
    use serde_json::json;

    use super::*;

    fn log(turn: &TurnId, data: Vec<EventData>) -> Vec<Event> {
        let session = SessionId::generate();
        data.into_iter()
            .enumerate()
            .map(|(index, data)| Event {
                index: index as u64,
                session_id: session.clone(),
                turn_id: Some(turn.clone()),
                at: timestamp_now(),
                data,
            })
            .collect()
    }

    fn call(id: &CallId) -> ActionCall {
        ActionCall { call_id: id.clone(), tool_name: "t".into(), input: json!({}) }
    }

    fn requested(id: &CallId) -> EventData {
        EventData::ApprovalRequested(ApprovalRequested { call_id: id.clone(), tool_name: "t".into(), input: json!({}) })
    }

    #[test]
    fn each_call_of_the_last_step_gets_its_state() {
        let turn = TurnId::generate();
        let ids: Vec<CallId> = (0..4).map(|_| CallId::generate("t")).collect();
        let events = log(
            &turn,
            vec![
                EventData::StepStarted(StepStarted { step: 0 }),
                EventData::ActionsRequested(ActionsRequested { calls: ids.iter().map(call).collect(), direct: None }),
                requested(&ids[0]),
                requested(&ids[1]),
                // Approved, and running when the host stopped.
                EventData::ApprovalResolved(ApprovalResolved {
                    call_id: ids[1].clone(),
                    tool_name: "t".into(),
                    decision: ApprovalDecision::Approve,
                    principal: Some("alice".into()),
                    reason: None,
                }),
                EventData::ActionResult(ActionResult {
                    call_id: ids[2].clone(),
                    tool_name: "t".into(),
                    is_error: false,
                    result: json!("ok"),
                    duration_ms: 1,
                    stubbed: None,
                    direct: None,
                }),
                // ids[3]: running, never parked.
            ],
        );
        let plan = Plan::read(&events, &turn).unwrap();
        assert_eq!(plan.step, 0);
        let states: Vec<&str> = plan
            .calls
            .iter()
            .map(|(_, s)| match s {
                State::Done(_) => "done",
                State::Parked(_) => "parked",
                State::Interrupted => "interrupted",
            })
            .collect();
        assert_eq!(states, ["parked", "interrupted", "done", "interrupted"]);
    }

    #[test]
    fn nothing_to_restore_without_a_parked_call_in_the_last_step() {
        let turn = TurnId::generate();
        let id = CallId::generate("t");
        let mut data = vec![
            EventData::StepStarted(StepStarted { step: 0 }),
            EventData::ActionsRequested(ActionsRequested { calls: vec![call(&id)], direct: None }),
            requested(&id),
        ];
        assert!(Plan::read(&log(&turn, data.clone()), &turn).is_some());
        // The model was already asked again: the parked call belongs to an earlier step.
        data.push(EventData::StepStarted(StepStarted { step: 1 }));
        assert!(Plan::read(&log(&turn, data), &turn).is_none());
        // Another turn's events do not count.
        assert!(Plan::read(&log(&TurnId::generate(), vec![]), &turn).is_none());
    }
}
