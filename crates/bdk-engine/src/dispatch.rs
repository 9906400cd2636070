//! Runs one step's tool calls through the registry, concurrently, and records each as
//! `action.result` the moment it finishes. Each call runs as its own task under a child of the
//! turn's cancellation token; when the turn is cancelled, calls still running are aborted and
//! recorded as cancelled errors so every `actions.requested` entry has its result.
//!
//! Arguments the model wrote as broken JSON never reach a tool: the model is told (an error
//! result), the turn goes on. A call whose input is valid and that the registry says needs
//! approval is parked first (`approvals.rs`): it runs once a person approves it, and a denial is
//! an error result the model reads. In a dry-run session a write is stubbed without parking:
//! nothing would run for a person to approve. A step may run at most `max_calls_per_step`
//! calls; the ones past it get an error result naming the limit, and the model can ask again. Tool failures are always "tell the model" here; only the model,
//! the step budget, cancellation or storage can fail a turn.
//!
//! When the host shuts down (drain past its grace) while only parked calls are left, the
//! dispatch writes nothing more and reports the turn suspended: it stays open in the log and
//! the next start restores it, still waiting (`resume.rs`, [`resume_calls`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bdk_model::ToolCall;
use bdk_protocol::event::{ActionCall, ActionResult, ApprovalDecision, ApprovalRequested};
use bdk_protocol::{CallId, EventData, SessionId, TurnId};
use bdk_tools::{Effect, ToolInvocation, ToolOutcome, ToolRegistry};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::approvals::{self, Approvals, ParkedCalls, Resolution};
use crate::emit::Emitter;
use crate::host::{HostLease, HostScope};
use crate::joined::{self, Ended};
use crate::resume::{INTERRUPTED_BY_RESTART, Prior};
use crate::subagents::{self, Parent, Spent};
use crate::{artifacts, skills};

/// Most tool calls one model step runs unless configured otherwise
/// (`EngineOptions::max_tool_calls_per_step`).
pub(crate) const MAX_CALLS_PER_STEP: usize = 64;

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
    /// What a `task` call's child spent (added to the turn's usage and cost).
    pub spent: Option<Spent>,
}

/// Where the calls run.
#[derive(Debug)]
pub(crate) struct DispatchContext<'a> {
    pub tools: &'a Arc<dyn ToolRegistry>,
    /// The turn's definitions (`tools` is theirs): built-ins and child turns use them too.
    pub defs: &'a Arc<crate::defs::Defs>,
    pub session: &'a SessionId,
    pub turn: &'a TurnId,
    pub workspace: Option<PathBuf>,
    pub cancel: &'a CancellationToken,
    pub settings: ToolSettings,
    pub approvals: &'a Approvals,
    /// For each call's host services (`host.rs`).
    pub core: &'a Arc<crate::engine::Core>,
    /// A subagent's child turn: `task` is refused.
    pub nested: bool,
    /// The turn span's context (telemetry on): the parent of each call's span.
    pub trace: Option<&'a bdk_telemetry::Context>,
}

/// The session's settings every tool call carries.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolSettings {
    /// Writes are stubbed (the session was created with `dryRun`).
    pub dry_run: bool,
    /// `time_args` are enforced against this instant (the session's `asOf`).
    pub as_of: Option<DateTime<Utc>>,
    /// The session's `purpose` (`"eval"` for eval sessions), told to every tool call.
    pub purpose: Option<String>,
}

/// What a call's task hands back.
enum Landed {
    /// The call ran (or was refused by the registry).
    Ran { index: usize, outcome: ToolOutcome, duration_ms: u64 },
    /// A parked call was decided (`None`: withdrawn without a decision).
    Decided { index: usize, resolution: Option<Resolution> },
    /// A `task` call's child finished.
    Delegated { index: usize, outcome: ToolOutcome, duration_ms: u64, spent: Spent },
    /// A `tag_artifact` call finished; `tagged` is its `artifact.tagged` event.
    Tagged { index: usize, outcome: ToolOutcome, duration_ms: u64, tagged: Option<EventData> },
    /// A `task` call's child was dropped by the runtime shutting down.
    ShuttingDown,
}

/// The error a call past the per-step cap gets.
fn over_cap(asked: usize, cap: usize) -> String {
    format!(
        "not run: this step asked for {asked} tool calls and at most {cap} run per step; \
         the first {cap} ran, ask for the rest in the next step"
    )
}

/// How a dispatch stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Halt {
    /// Every call has its result.
    Done,
    /// The turn was cancelled: calls still running got a cancelled result.
    Cancelled,
    /// The host is shutting down and only parked calls were left: nothing more was written, so
    /// the next start restores the turn still waiting for them (`resume.rs`).
    Suspended,
}

/// The calls one dispatch started and waits for.
struct InFlight<'a> {
    results: Vec<Option<ToolOutcome>>,
    spent: Vec<Option<Spent>>,
    set: JoinSet<Landed>,
    parked: ParkedCalls<'a>,
    /// Calls waiting for a decision (their task is in `set`).
    waiting: HashSet<usize>,
}

impl<'a> InFlight<'a> {
    fn new(context: &DispatchContext<'a>, calls: usize) -> Self {
        InFlight {
            results: vec![None; calls],
            spent: vec![None; calls],
            set: JoinSet::new(),
            parked: ParkedCalls::new(context.approvals, context.session),
            waiting: HashSet::new(),
        }
    }
}

/// Runs `calls`, recording each result as it lands. Returns the results in call order and
/// how the wait ended. `Err` is a storage failure.
pub(crate) async fn run_calls(
    context: DispatchContext<'_>,
    emit: &mut Emitter,
    calls: &[PreparedCall],
) -> bdk_store::Result<(Vec<Finished>, Halt)> {
    let mut flight = InFlight::new(&context, calls.len());
    let cap = context.core.max_calls_per_step;
    for (index, call) in calls.iter().enumerate() {
        let refused = if index >= cap { Some(over_cap(calls.len(), cap)) } else { call.invalid.clone() };
        if let Some(message) = refused {
            let outcome = ToolOutcome::error(message);
            emit.push(result_event(call, &outcome, 0));
            flight.results[index] = Some(outcome);
            continue;
        }
        match builtin(&context, call) {
            Builtin::No => {}
            Builtin::Answer(outcome) => {
                emit.push(result_event(call, &outcome, 0));
                flight.results[index] = Some(outcome);
                continue;
            }
            Builtin::Tag => {
                flight.set.spawn(tag_artifact(
                    context.core.clone(),
                    context.session.clone(),
                    context.workspace.clone(),
                    index,
                    call.input.clone(),
                ));
                continue;
            }
            Builtin::Delegate(delegation) => {
                // The child session exists before `subagent.called` names it.
                let parent = Parent {
                    defs: context.defs.clone(),
                    session: context.session.clone(),
                    workspace: context.workspace.clone(),
                    settings: context.settings.clone(),
                };
                match delegation.open(context.core, &parent).await {
                    Ok(record) => {
                        emit.push(delegation.called_event());
                        let run = delegation.run(context.core.clone(), parent, record, context.cancel.child_token());
                        let telemetry = &context.core.telemetry;
                        let span = crate::telemetry::subagent_span(
                            telemetry,
                            context.trace,
                            &call.input,
                            call.call_id.as_str(),
                        );
                        flight.set.spawn(async move {
                            let started = Instant::now();
                            let Some((outcome, spent)) = span.run(run).await else {
                                return Landed::ShuttingDown;
                            };
                            if outcome.is_error {
                                span.fail_with(|| result_text(&outcome.result));
                            }
                            span.end();
                            Landed::Delegated {
                                index,
                                outcome,
                                duration_ms: started.elapsed().as_millis() as u64,
                                spent,
                            }
                        });
                    }
                    Err(refused) => {
                        emit.push(result_event(call, &refused, 0));
                        flight.results[index] = Some(refused);
                    }
                }
                continue;
            }
        }
        if needs_approval(&context, call) {
            let decided = flight.parked.park(context.turn, &call.call_id, &call.name, &call.input);
            emit.push(EventData::ApprovalRequested(ApprovalRequested {
                call_id: call.call_id.clone(),
                tool_name: call.name.clone(),
                input: call.input.clone(),
            }));
            flight.set.spawn(wait_for_decision(index, decided));
            flight.waiting.insert(index);
            continue;
        }
        start_call(&mut flight.set, &context, index, call);
    }
    // A parked call is listed with its event's time, the one a restart restores.
    for event in emit.flush_written().await? {
        if let EventData::ApprovalRequested(requested) = &event.data {
            context.approvals.stamp(context.session, &requested.call_id, event.at);
        }
    }
    wait_all(&context, emit, calls, flight).await
}

/// Continues the tool calls of a turn restored after a restart: results already in the log are
/// kept, restored parked calls wait for their decision, and calls that were running when the
/// host stopped get an error result (they are not run twice).
pub(crate) async fn resume_calls(
    context: DispatchContext<'_>,
    emit: &mut Emitter,
    calls: &[PreparedCall],
    prior: Vec<Prior>,
) -> bdk_store::Result<(Vec<Finished>, Halt)> {
    let mut flight = InFlight::new(&context, calls.len());
    for ((index, call), prior) in calls.iter().enumerate().zip(prior) {
        match prior {
            Prior::Done(outcome) => flight.results[index] = Some(outcome),
            Prior::Parked(decided) => {
                flight.parked.adopt(&call.call_id);
                flight.set.spawn(wait_for_decision(index, decided));
                flight.waiting.insert(index);
            }
            Prior::Interrupted => {
                let outcome = ToolOutcome::error(INTERRUPTED_BY_RESTART);
                if call.name == subagents::TOOL && is_builtin(&context, subagents::TOOL) {
                    emit.push(subagents::completed_event(
                        &call.call_id,
                        &subagents::named(&call.input),
                        &outcome,
                        0,
                        None,
                    ));
                }
                emit.push(result_event(call, &outcome, 0));
                flight.results[index] = Some(outcome);
            }
        }
    }
    emit.flush().await?;
    wait_all(&context, emit, calls, flight).await
}

/// Waits for every call in flight, recording each result as it lands, then answers what is
/// left (cancelled calls) unless the turn is suspended.
async fn wait_all(
    context: &DispatchContext<'_>,
    emit: &mut Emitter,
    calls: &[PreparedCall],
    flight: InFlight<'_>,
) -> bdk_store::Result<(Vec<Finished>, Halt)> {
    let InFlight { mut results, mut spent, mut set, parked, mut waiting } = flight;
    let mut halt = Halt::Done;
    while !set.is_empty() {
        tokio::select! {
            biased;
            () = context.cancel.cancelled() => {
                // Shutting down with nothing running but parked calls: leave the turn open.
                let suspend = !context.nested
                    && context.core.is_draining()
                    && context.core.root.is_cancelled()
                    && !waiting.is_empty()
                    && waiting.len() == set.len();
                halt = if suspend { Halt::Suspended } else { Halt::Cancelled };
                break;
            }
            joined = set.join_next() => match joined.map(joined::ended) {
                Some(Ended::Returned(Landed::Ran { index, outcome, duration_ms })) => {
                    emit.send(result_event(&calls[index], &outcome, duration_ms)).await?;
                    results[index] = Some(outcome);
                }
                Some(Ended::Returned(Landed::Decided { index, resolution: Some(resolution) })) => {
                    waiting.remove(&index);
                    let call = &calls[index];
                    emit.send(approvals::resolved_event(&call.call_id, &call.name, &resolution)).await?;
                    let _ = resolution.recorded.send(());
                    if resolution.decision == ApprovalDecision::Approve {
                        start_call(&mut set, context, index, call);
                    } else {
                        let outcome = ToolOutcome::error(approvals::DENIED);
                        emit.send(result_event(call, &outcome, 0)).await?;
                        results[index] = Some(outcome);
                    }
                }
                Some(Ended::Returned(Landed::Delegated { index, outcome, duration_ms, spent: used })) => {
                    let call = &calls[index];
                    emit.push(subagents::completed_event(&call.call_id, &subagents::named(&call.input), &outcome, duration_ms, Some(used)));
                    emit.send(result_event(call, &outcome, duration_ms)).await?;
                    results[index] = Some(outcome);
                    spent[index] = Some(used);
                }
                Some(Ended::Returned(Landed::Tagged { index, outcome, duration_ms, tagged })) => {
                    if let Some(tagged) = tagged {
                        emit.push(tagged);
                    }
                    emit.send(result_event(&calls[index], &outcome, duration_ms)).await?;
                    results[index] = Some(outcome);
                }
                Some(Ended::Returned(Landed::Decided { index, resolution: None })) => {
                    waiting.remove(&index);
                    let outcome = ToolOutcome::error("the approval request was withdrawn; the call was not run");
                    emit.send(result_event(&calls[index], &outcome, 0)).await?;
                    results[index] = Some(outcome);
                }
                Some(Ended::ShuttingDown | Ended::Returned(Landed::ShuttingDown)) => {
                    // The process is going away. Write nothing, as a killed process would not;
                    // the next start restores or closes the turn from what is durable.
                    halt = Halt::Suspended;
                    break;
                }
                Some(Ended::Panicked(error)) => {
                    // A tool that panicked: tell the model, keep the turn.
                    tracing::error!(%error, "a tool call task failed");
                }
                None => break,
            },
        }
    }
    set.abort_all();
    drop(parked);
    if halt == Halt::Suspended {
        emit.flush().await?;
        return Ok((Vec::new(), halt));
    }

    let cancelled = halt == Halt::Cancelled;
    let mut finished = Vec::with_capacity(calls.len());
    for ((call, result), spent) in calls.iter().zip(results).zip(spent) {
        let outcome = match result {
            Some(outcome) => outcome,
            None => {
                let message =
                    if cancelled { "the tool call was cancelled" } else { "the tool call failed unexpectedly" };
                let outcome = ToolOutcome::error(message);
                if call.name == subagents::TOOL && is_builtin(context, subagents::TOOL) {
                    // The child sees the same cancellation and closes its own session.
                    emit.push(subagents::completed_event(
                        &call.call_id,
                        &subagents::named(&call.input),
                        &outcome,
                        0,
                        None,
                    ));
                }
                emit.push(result_event(call, &outcome, 0));
                outcome
            }
        };
        finished.push(Finished { call_id: call.call_id.clone(), outcome, spent });
    }
    emit.flush().await?;
    Ok((finished, halt))
}

/// Whether `name` is one of the engine's built-ins this turn offers or refuses (the skill tool,
/// `task`) rather than a registry tool.
fn is_builtin(context: &DispatchContext<'_>, name: &str) -> bool {
    let caps = &context.defs.capabilities;
    (name == skills::TOOL && !caps.skills.is_empty())
        || (name == subagents::TOOL && !caps.subagents.is_empty())
        || (name == artifacts::TOOL && caps.artifacts.agent_tool)
}

/// What an engine built-in makes of a call.
enum Builtin {
    /// Not a built-in this turn offers: a registry tool.
    No,
    /// Answered at once: a skill load, or a refused `task` call.
    Answer(ToolOutcome),
    /// An admitted `task` call, to open and run.
    Delegate(subagents::Delegation),
    /// A `tag_artifact` call, to run as a task.
    Tag,
}

fn builtin(context: &DispatchContext<'_>, call: &PreparedCall) -> Builtin {
    if !is_builtin(context, &call.name) {
        return Builtin::No;
    }
    let caps = &context.defs.capabilities;
    if call.name == skills::TOOL {
        return Builtin::Answer(skills::call(&caps.skills, &call.input));
    }
    if call.name == artifacts::TOOL {
        // Tagging writes durable state: a dry-run session gets the stub.
        if context.settings.dry_run {
            return Builtin::Answer(ToolOutcome::stub(Value::String(format!(
                "dry run: `{}` was not run (nothing was tagged)",
                artifacts::TOOL
            ))));
        }
        return Builtin::Tag;
    }
    match subagents::admit(&caps.subagents, context.nested, &call.call_id, &call.input) {
        Ok(delegation) => Builtin::Delegate(delegation),
        Err(refused) => Builtin::Answer(refused),
    }
}

/// Whether `call` must wait for a person: its input is valid (an invalid one is answered with
/// the validation errors at once), the registry says so, and it would really run.
fn needs_approval(context: &DispatchContext<'_>, call: &PreparedCall) -> bool {
    let tools = context.tools;
    tools.validate_input(&call.name, &call.input).is_ok()
        && tools.needs_approval(&call.name, &call.input)
        && !(context.settings.dry_run && tools.effect(&call.name, &call.input) == Effect::Write)
}

/// Runs one call as a task of `set`.
fn start_call(set: &mut JoinSet<Landed>, context: &DispatchContext<'_>, index: usize, call: &PreparedCall) {
    // The call's host services live exactly as long as its task (revoked when it returns).
    let lease = HostLease::grant(context.core, HostScope::session(context.session.clone(), call.call_id.clone()));
    let mut invocation = ToolInvocation {
        call_id: call.call_id.clone(),
        name: call.name.clone(),
        input: call.input.clone(),
        session_id: Some(context.session.clone()),
        turn_id: Some(context.turn.clone()),
        workspace: context.workspace.clone(),
        dry_run: context.settings.dry_run,
        as_of: context.settings.as_of,
        host: None,
        identity: None,
        services: None,
        purpose: context.settings.purpose.clone(),
    };
    lease.apply(&mut invocation);
    let telemetry = context.core.telemetry.clone();
    let span = crate::telemetry::tool_span(
        &telemetry,
        context.trace,
        &call.name,
        call.call_id.as_str(),
        context.session,
        context.turn,
    );
    // Current while the call is set up, and on every poll after: a command tool's
    // `TRACEPARENT` and an MCP request's `traceparent` name this span.
    let future = {
        let _current = span.enter();
        context.tools.call(invocation, context.cancel.child_token())
    };
    let name = call.name.clone();
    set.spawn(async move {
        let _lease = lease;
        let started = Instant::now();
        let outcome = span.run(future).await;
        crate::telemetry::tool_ended(&telemetry, &span, &name, started, &outcome);
        Landed::Ran { index, outcome, duration_ms: started.elapsed().as_millis() as u64 }
    });
}

/// Runs one `tag_artifact` call: the artifact belongs to the session's owner.
async fn tag_artifact(
    core: Arc<crate::engine::Core>,
    session: SessionId,
    workspace: Option<PathBuf>,
    index: usize,
    input: Value,
) -> Landed {
    let started = Instant::now();
    let landed = |outcome: ToolOutcome, tagged: Option<EventData>| Landed::Tagged {
        index,
        outcome,
        duration_ms: started.elapsed().as_millis() as u64,
        tagged,
    };
    let request: artifacts::TagRequest = match serde_json::from_value(input) {
        Ok(request) => request,
        Err(error) => return landed(ToolOutcome::error(format!("invalid `{}` input: {error}", artifacts::TOOL)), None),
    };
    let principal = match core.stores.sessions.get(&session).await {
        Ok(Some(record)) => record.principal,
        Ok(None) => return landed(ToolOutcome::error("the session no longer exists"), None),
        Err(error) => {
            tracing::error!(%error, "reading the session for tag_artifact");
            return landed(ToolOutcome::error("storage failed; see the server log"), None);
        }
    };
    let defs = core.defs();
    let tagger = artifacts::Tagger {
        store: core.artifact_store.as_ref(),
        spec: &defs.capabilities.artifacts,
        principal,
        session: Some(session),
        workspace: workspace.as_deref(),
        source: artifacts::SOURCE_TOOL,
    };
    match artifacts::tag(tagger, request).await {
        Ok(tagged) => {
            landed(ToolOutcome::ok(artifacts::tool_result(&tagged)), Some(artifacts::tagged_event(&tagged.record)))
        }
        Err(message) => landed(ToolOutcome::error(message), None),
    }
}

async fn wait_for_decision(index: usize, decided: oneshot::Receiver<Resolution>) -> Landed {
    Landed::Decided { index, resolution: decided.await.ok() }
}

fn result_event(call: &PreparedCall, outcome: &ToolOutcome, duration_ms: u64) -> EventData {
    EventData::ActionResult(ActionResult {
        call_id: call.call_id.clone(),
        tool_name: call.name.clone(),
        is_error: outcome.is_error,
        result: outcome.result.clone(),
        duration_ms,
        stubbed: outcome.stubbed.then_some(true),
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
