//! Runs one step's tool calls through the registry, concurrently, and records each as
//! `action.result` the moment it finishes. Each call runs as its own task under a child of the
//! turn's cancellation token; when the turn is cancelled, calls still running are aborted and
//! recorded as cancelled errors so every `actions.requested` entry has its result.
//!
//! Arguments the model wrote as broken JSON never reach a tool: the model is told (an error
//! result), the turn goes on. Tool failures are always "tell the model" here; only the model,
//! the step budget, cancellation or storage can fail a turn.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bdk_model::ToolCall;
use bdk_protocol::event::{ActionCall, ActionResult};
use bdk_protocol::{CallId, EventData, SessionId, TurnId};
use bdk_tools::{ToolInvocation, ToolOutcome, ToolRegistry};
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::emit::Emitter;

/// A tool call as the engine records and runs it.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCall {
    pub call_id: CallId,
    pub name: String,
    /// The parsed arguments, or the raw text when it was not JSON.
    pub input: Value,
    /// Why the arguments could not be used.
    pub invalid: Option<String>,
}

impl PreparedCall {
    pub fn new(call: &ToolCall) -> Self {
        let call_id = CallId::generate(&call.name);
        let text = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
        let (input, invalid) = match serde_json::from_str::<Value>(text) {
            Ok(input) => (input, None),
            Err(error) => (
                Value::String(call.arguments.clone()),
                Some(format!("the arguments for `{}` are not valid JSON: {error}", call.name)),
            ),
        };
        PreparedCall { call_id, name: call.name.clone(), input, invalid }
    }

    pub fn action(&self) -> ActionCall {
        ActionCall { call_id: self.call_id.clone(), tool_name: self.name.clone(), input: self.input.clone() }
    }
}

/// One finished call, in the order the model asked for it.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub call_id: CallId,
    pub outcome: ToolOutcome,
}

/// Where the calls run.
#[derive(Debug)]
pub(crate) struct DispatchContext<'a> {
    pub tools: &'a Arc<dyn ToolRegistry>,
    pub session: &'a SessionId,
    pub turn: &'a TurnId,
    pub workspace: Option<PathBuf>,
    pub cancel: &'a CancellationToken,
}

/// Runs `calls`, recording each result as it lands. Returns the results in call order and
/// whether the turn was cancelled meanwhile. `Err` is a storage failure.
pub(crate) async fn run_calls(
    context: DispatchContext<'_>,
    emit: &mut Emitter,
    calls: &[PreparedCall],
) -> bdk_store::Result<(Vec<Finished>, bool)> {
    let mut results: Vec<Option<ToolOutcome>> = vec![None; calls.len()];
    let mut set = JoinSet::new();
    for (index, call) in calls.iter().enumerate() {
        if let Some(message) = &call.invalid {
            let outcome = ToolOutcome::error(message.clone());
            emit.push(result_event(call, &outcome, 0));
            results[index] = Some(outcome);
            continue;
        }
        let invocation = ToolInvocation {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            session_id: Some(context.session.clone()),
            turn_id: Some(context.turn.clone()),
            workspace: context.workspace.clone(),
            // Wired by the engine: the session's dryRun, asOf and host access.
            dry_run: false,
            as_of: None,
            host: None,
            identity: None,
        };
        let future = context.tools.call(invocation, context.cancel.child_token());
        set.spawn(async move {
            let started = Instant::now();
            let outcome = future.await;
            (index, outcome, started.elapsed().as_millis() as u64)
        });
    }
    emit.flush().await?;

    let mut cancelled = false;
    while !set.is_empty() {
        tokio::select! {
            biased;
            () = context.cancel.cancelled() => {
                cancelled = true;
                break;
            }
            joined = set.join_next() => match joined {
                Some(Ok((index, outcome, duration_ms))) => {
                    emit.send(result_event(&calls[index], &outcome, duration_ms)).await?;
                    results[index] = Some(outcome);
                }
                Some(Err(error)) => {
                    // A tool that panicked: tell the model, keep the turn.
                    tracing::error!(%error, "a tool call task failed");
                }
                None => break,
            },
        }
    }
    set.abort_all();

    let mut finished = Vec::with_capacity(calls.len());
    for (call, result) in calls.iter().zip(results) {
        let outcome = match result {
            Some(outcome) => outcome,
            None => {
                let message =
                    if cancelled { "the tool call was cancelled" } else { "the tool call failed unexpectedly" };
                let outcome = ToolOutcome::error(message);
                emit.push(result_event(call, &outcome, 0));
                outcome
            }
        };
        finished.push(Finished { call_id: call.call_id.clone(), outcome });
    }
    emit.flush().await?;
    Ok((finished, cancelled))
}

fn result_event(call: &PreparedCall, outcome: &ToolOutcome, duration_ms: u64) -> EventData {
    EventData::ActionResult(ActionResult {
        call_id: call.call_id.clone(),
        tool_name: call.name.clone(),
        is_error: outcome.is_error,
        result: outcome.result.clone(),
        duration_ms,
        stubbed: None,
        direct: None,
    })
}

/// A result as the model reads it: strings verbatim, anything else as JSON.
pub(crate) fn result_text(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
