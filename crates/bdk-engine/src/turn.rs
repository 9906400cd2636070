//! The turn loop, one task per turn: wait for a slot (`turn.queued`), `turn.started`, then model
//! steps until one ends without tool calls (`turn.completed` with usage and estimated cost) or
//! the step budget runs out, the model fails, or the turn is cancelled (`turn.failed`). The
//! conversation is rebuilt from the log at the start; within the turn it grows in memory with
//! exactly what the log records, so a rebuild later yields the same messages.
//!
//! The turn writes only events of its own turn. What happens to the session afterwards
//! (`session.waiting`, a coalesced follow-up, ...) is the actor's decision.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bdk_model::{
    FinishReason, Message, Messages, ModelError, ModelProvider, ModelRequest, Price, ToolCall, Usage as ModelUsage,
};
use bdk_protocol::event::{
    ActionsRequested, FailureCode, MessageReceived, StepCompleted, StepStarted, TurnCompleted, TurnFailStatus,
    TurnFailed, TurnQueued, TurnStarted,
};
use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::NewEvent;
use tokio_util::sync::CancellationToken;

use crate::accepting::{Accepted, Accepting};
use crate::admission::{Admitted, Slot};
use crate::compaction;
use crate::conversation::{Conversation, arguments_text, model_call_id};
use crate::cost;
use crate::defs::Defs;
use crate::dispatch::{self, DispatchContext, Halt, PreparedCall, ToolSettings, result_text};
use crate::emit::Emitter;
use crate::engine::Core;
use crate::failure;
use crate::result_gate::{self, Verdict};
use crate::resume::Resumed;
use crate::stream::{self, StepEnd};
use crate::subagents::Spent;
use crate::workspace::{self, WorkspacePrep};
use bdk_telemetry::Span;

use crate::telemetry;
use crate::{ab, skills};

/// The reason recorded when a turn is stopped or preempted.
pub const INTERRUPTED: &str = "turn interrupted";
/// The reason recorded when a turn is cancelled because the host is shutting down.
pub const SHUTTING_DOWN: &str = "turn interrupted: the host is shutting down";

/// Everything a turn task needs.
#[derive(Debug)]
pub(crate) struct TurnContext {
    pub core: Arc<Core>,
    /// The definitions this turn runs on, taken when it was created (a child turn: its
    /// parent's), so a reload in between never mixes two versions.
    pub defs: Arc<Defs>,
    pub session: SessionId,
    pub turn: TurnId,
    pub cancel: CancellationToken,
    /// The session's conversation fold so far (empty: fold the whole log).
    pub conversation: Conversation,
    /// The session's dry-run and `asOf` settings, for every tool call.
    pub settings: ToolSettings,
    /// What to prepare in the session workspace before the first step.
    pub workspace: WorkspacePrep,
    /// Who runs the turn when it is a subagent's child turn; `None`: the agent itself.
    pub persona: Option<Arc<Persona>>,
    /// A turn restored after a restart, waiting in its tool calls (`resume.rs`); `None`: a new
    /// turn.
    pub resume: Option<Box<Resumed>>,
    /// Its `max_running_turns` admission, when the actor asked for it while writing the
    /// message that starts the turn; `None`: the turn asks (a child turn never does).
    pub admitted: Option<Admitted>,
    /// The message that starts the turn, folded ahead of the log and still being written
    /// (`accepting.rs`): the turn writes nothing, and acts on nothing the model says, before it
    /// is answered. `None`: the message is written.
    pub accepting: Option<Accepting>,
    /// The trace context the turn's span goes under (telemetry on): the request that started
    /// it, or the subagent call that runs it.
    pub trace: Option<bdk_telemetry::Context>,
}

/// A subagent running a child turn (`subagents.rs`): its prompt, model and step budget, and the
/// parent's workspace. A child turn takes no `max_running_turns` slot (its parent holds one),
/// prepares no workspace and never gets `task`.
#[derive(Debug)]
pub(crate) struct Persona {
    pub instructions: String,
    pub provider: Arc<dyn ModelProvider>,
    /// The model id recorded on the child's turn.
    pub model: String,
    pub price: Option<Price>,
    pub max_steps: u32,
    /// The parent's workspace (`None`: looked up from the parent session when a tool runs).
    pub workspace: Option<PathBuf>,
    pub parent: SessionId,
}

/// How a turn ended, for the actor.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnEnd {
    Completed {
        result: Option<String>,
    },
    Failed {
        message: String,
        error: FailureCode,
    },
    Cancelled {
        message: String,
        error: FailureCode,
    },
    /// The host shut down while the turn only waited for approvals: it stays open in the log
    /// (no closing events) and the next start restores it.
    Suspended,
}

/// What a turn task hands back to the actor.
#[derive(Debug)]
pub(crate) struct TurnOutcome {
    pub end: TurnEnd,
    /// The turn's closing events, not yet written (see the module docs).
    pub closing: Vec<NewEvent>,
    /// The conversation fold, for the session's next turn.
    pub conversation: Conversation,
    /// The turn's `max_running_turns` slot: the actor gives it back once `closing` is written,
    /// so the next turn never starts (in the log) before this one ended.
    pub slot: Option<Slot>,
    /// The tool of each call that got a result in this turn, in order (for the turn log).
    pub tools: Vec<String>,
}

/// Why the loop stopped early.
enum Stop {
    Cancelled,
    Suspended,
    Failed(FailureCode, String),
    Store(bdk_store::Error),
    /// The message that started the turn was written after events its fold does not hold:
    /// start again on the log (nothing of the turn is written yet).
    Refold,
    /// The message that started the turn was not written: the turn leaves no trace.
    Unaccepted,
}

impl From<bdk_store::Error> for Stop {
    fn from(error: bdk_store::Error) -> Self {
        Stop::Store(error)
    }
}

/// Runs one turn to its end and stages how it ended.
pub(crate) async fn run(mut context: TurnContext) -> TurnOutcome {
    let core = context.core.clone();
    let mut conversation = std::mem::take(&mut context.conversation);
    let mut emit = Emitter::new(core.stores.events.clone(), context.session.clone(), context.turn.clone());
    let mut resume = context.resume.take();
    let mut admitted = context.admitted.take();
    let mut accepting = context.accepting.take();
    let mut usage = resume.as_ref().map(|r| r.usage).unwrap_or_default();
    let mut children = Spent::default();
    let mut priced = match &context.persona {
        Some(persona) => (persona.model.clone(), persona.price),
        None => (context.defs.model.clone(), context.defs.price),
    };
    let started = Instant::now();
    let span =
        telemetry::turn_span(&core.telemetry, context.trace.as_ref(), &core.slug, &context.session, &context.turn);
    let mut slot = None;
    let driven = loop {
        let driven = span
            .run(drive(
                &context,
                resume.take(),
                admitted.take(),
                &mut accepting,
                &span,
                &mut conversation,
                &mut emit,
                &mut usage,
                &mut children,
                &mut priced,
                &mut slot,
            ))
            .await;
        if !matches!(driven, Err(Stop::Refold)) {
            break driven;
        }
        // Nothing was written or staged for good: again, on the slot it holds, reading the
        // whole log (a rare race with another writer).
        conversation = Conversation::default();
        drop(emit.take());
        admitted = slot.take().map(|slot| Ok(Ok(slot)));
    };
    // A turn that ended before it needed the answer (a failure on the way to the model) waits
    // for it now: its closing events must follow the message, and its fold must be the log's.
    let driven = match accepting.take() {
        None => driven,
        Some(pending) => match pending.wait().await {
            Some(Accepted::AsFolded) => driven,
            Some(Accepted::Elsewhere) => {
                conversation = Conversation::default();
                driven
            }
            None => Err(Stop::Unaccepted),
        },
    };
    if matches!(driven, Err(Stop::Unaccepted)) {
        // The actor drops this outcome: it wrote nothing, and its slot is given back.
        let end = TurnEnd::Cancelled { message: "the message was not written".into(), error: FailureCode::Storage };
        return TurnOutcome {
            end,
            closing: Vec::new(),
            conversation: Conversation::default(),
            slot,
            tools: Vec::new(),
        };
    }
    let (model, price) = priced;
    // What the turn wrote joins the fold (when nothing came between), so the next turn need
    // not read it back.
    conversation.fold_own(&emit.take_written());
    let stop = match driven {
        Ok(result) => {
            if core.telemetry.is_enabled() {
                let tags = core.telemetry.session_tags(context.session.as_str());
                telemetry::turn_ended(&core.telemetry, &span, started, &model, &usage, "completed", None, tags);
            }
            emit.push(EventData::TurnCompleted(TurnCompleted {
                usage: with_children(&usage, &children),
                estimated_cost_usd: Some(cost::round_usd(cost::estimate(price.as_ref(), &usage) + children.cost_usd)),
                model: Some(model),
                result: result.clone(),
                duration_ms: Some(started.elapsed().as_millis() as u64),
            }));
            let tools = emit.tools().to_vec();
            return TurnOutcome { end: TurnEnd::Completed { result }, closing: emit.take(), conversation, slot, tools };
        }
        Err(Stop::Suspended) => {
            let tools = emit.tools().to_vec();
            return TurnOutcome { end: TurnEnd::Suspended, closing: emit.take(), conversation, slot, tools };
        }
        Err(stop) => stop,
    };
    let (status, code, message) = match stop {
        Stop::Cancelled if core.is_draining() => {
            (TurnFailStatus::Cancelled, FailureCode::ShuttingDown, SHUTTING_DOWN.to_owned())
        }
        Stop::Cancelled | Stop::Suspended | Stop::Refold | Stop::Unaccepted => {
            (TurnFailStatus::Cancelled, FailureCode::Cancelled, INTERRUPTED.to_owned())
        }
        Stop::Failed(code, message) => (TurnFailStatus::Failed, code, message),
        Stop::Store(error) => {
            tracing::error!(session = %context.session, turn = %context.turn, %error, "turn failed on storage");
            (TurnFailStatus::Failed, FailureCode::Storage, format!("storage failed: {error}"))
        }
    };
    let spent = (usage != ModelUsage::default() || children != Spent::default()).then_some(usage);
    emit.push(EventData::TurnFailed(TurnFailed {
        status,
        message: message.clone(),
        error: Some(code),
        usage: spent.as_ref().map(|u| with_children(u, &children)),
        estimated_cost_usd: spent
            .as_ref()
            .map(|u| cost::round_usd(cost::estimate(price.as_ref(), u) + children.cost_usd)),
    }));
    if core.telemetry.is_enabled() {
        let tags = core.telemetry.session_tags(context.session.as_str());
        let outcome = match status {
            TurnFailStatus::Cancelled => "cancelled",
            TurnFailStatus::Failed => "failed",
        };
        let error = Some((code.as_str(), message.as_str()));
        telemetry::turn_ended(&core.telemetry, &span, started, &model, &usage, outcome, error, tags);
    }
    let end = match status {
        TurnFailStatus::Cancelled => TurnEnd::Cancelled { message, error: code },
        TurnFailStatus::Failed => TurnEnd::Failed { message, error: code },
    };
    let tools = emit.tools().to_vec();
    TurnOutcome { end, closing: emit.take(), conversation, slot, tools }
}

/// [`run`] boxed, for a subagent's child turn: the child runs inside a tool call of its
/// parent's turn, so naming the boxed type breaks the cycle in the future types.
pub(crate) fn run_boxed(context: TurnContext) -> bdk_store::BoxFuture<'static, TurnOutcome> {
    Box::pin(run(context))
}

/// The loop itself. Returns the final text when the turn completes.
#[allow(clippy::too_many_arguments)]
async fn drive(
    context: &TurnContext,
    mut resume: Option<Box<Resumed>>,
    admitted: Option<Admitted>,
    accepting: &mut Option<Accepting>,
    span: &Span,
    conversation: &mut Conversation,
    emit: &mut Emitter,
    usage: &mut ModelUsage,
    children: &mut Spent,
    priced: &mut (String, Option<Price>),
    slot: &mut Option<Slot>,
) -> Result<Option<String>, Stop> {
    let core = &context.core;
    let defs = &context.defs;
    let cancel = &context.cancel;
    let persona = context.persona.as_deref();

    // A slot under `max_running_turns`, held until the turn's closing events are written (the
    // caller hands it on in the outcome); a child turn runs on its parent's. The actor usually
    // asked for it already, while it wrote the turn's message. Otherwise the turn's read of its
    // new events goes out with the claim: on a shared database each is a round trip, and
    // neither needs the other's answer. A turn that has to wait reads the rest after its wait.
    // A fold current as of the message that started the turn needs no read at all.
    let admission = async {
        match (persona, admitted) {
            (Some(_), _) => Ok(None),
            (None, Some(admitted)) => admitted.map(Some),
            (None, None) => core.slots.admit(&context.session, &context.turn).await.map(Some),
        }
    };
    let current = conversation.take_current();
    let read = async {
        if current {
            return Ok(Vec::new());
        }
        core.stores.events.read(&context.session, conversation.next_index(), None).await
    };
    let (admission, read) = tokio::join!(admission, read);
    let admission = admission?;
    let waited = matches!(admission, Some(Err(_)));
    *slot = match admission {
        None => None,
        Some(admitted) => match admitted {
            Ok(permit) => Some(permit),
            // A restored turn started long ago: it waits for its slot without `turn.queued`,
            // and if it is cancelled meanwhile its dispatch still answers its calls.
            Err(queued) if resume.is_some() => tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                permit = queued.wait() => permit,
            },
            Err(queued) => {
                accepted(accepting).await?;
                telemetry::admission(&core.telemetry, telemetry::Admission::Queued);
                emit.send(EventData::TurnQueued(TurnQueued { position: queued.position })).await?;
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return Err(Stop::Cancelled),
                    permit = queued.wait() => Some(permit.ok_or_else(|| Stop::Failed(FailureCode::Internal, "the turn queue closed".into()))?),
                }
            }
        },
    };
    conversation.fold(&read?);
    if cancel.is_cancelled() && resume.is_none() {
        return Err(Stop::Cancelled);
    }
    if waited {
        let new_events = core.stores.events.read(&context.session, conversation.next_index(), None).await?;
        conversation.fold(&new_events);
    }
    let mut messages = conversation.messages();
    // Tools listed by others (advertised MCP tools) load before the model sees the list.
    defs.tools.refresh().await;
    let tools = defs.tool_specs(persona.is_some());
    let arms = match persona {
        Some(_) => Vec::new(),
        None => ab::arms(&defs.capabilities.abs, conversation.assigned()),
    };
    let arm_model = arms.iter().rev().find_map(|arm| arm.model.as_ref());
    let (provider, model) = match (persona, arm_model) {
        (Some(p), _) => (&p.provider, &p.model),
        (None, Some((id, m))) => (&m.provider, id),
        (None, None) => (&defs.provider, &defs.model),
    };
    if let (None, Some((id, m))) = (persona, arm_model) {
        // An A/B arm's model: recorded and priced as that model.
        *priced = (id.clone(), m.price.or_else(|| bdk_model::price_for(id)));
    }
    // Shared by every step's request (and, for the agent itself, by every turn's).
    let system = match persona {
        Some(p) => Arc::from(skills::system_prompt(&p.instructions, &defs.capabilities.skills)),
        None if ab::adds_instructions(&arms) => Arc::from(skills::system_prompt(
            &ab::instructions(&defs.config.instructions, &arms),
            &defs.capabilities.skills,
        )),
        None => defs.system_prompt(),
    };
    let system = Some(system).filter(|s| !s.is_empty());
    if resume.is_none() {
        emit.push(EventData::TurnStarted(TurnStarted { model: Some(model.clone()) }));
    }

    let mut workspace = match persona {
        Some(p) => p.workspace.clone(),
        None => workspace::prepare(core, &defs.tools, &context.session, &context.workspace)
            .await
            .map_err(|message| Stop::Failed(FailureCode::Workspace, message))?,
    };
    // Where the tools of this turn run: a child's are its parent's.
    let workspace_of = persona.map_or(&context.session, |p| &p.parent);
    let max_steps = persona.map_or(defs.config.max_steps, |p| p.max_steps).max(1);
    let mut first = 0;
    if let Some(resumed) = resume.take() {
        // The restored step's calls first; then the model reads their results.
        let Resumed { step, calls, prior, guard, .. } = *resumed;
        if workspace.is_none() {
            workspace = core.stores.workspaces.session_workspace(workspace_of).await.ok();
        }
        let dispatch = DispatchContext {
            tools: &defs.tools,
            defs,
            session: &context.session,
            turn: &context.turn,
            workspace: workspace.clone(),
            cancel,
            settings: context.settings.clone(),
            approvals: &core.approvals,
            core,
            nested: false,
            trace: span.context(),
        };
        let (_, halt) = dispatch::resume_calls(dispatch, emit, &calls, prior).await?;
        drop(guard);
        match halt {
            Halt::Done => {}
            Halt::Cancelled => return Err(Stop::Cancelled),
            Halt::Suspended => return Err(Stop::Suspended),
        }
        let new_events = core.stores.events.read(&context.session, conversation.next_index(), None).await?;
        conversation.fold(&new_events);
        messages = conversation.messages();
        first = step + 1;
    }
    let traced = &core.telemetry;
    // `gen_ai.system`, read only when something is recorded (`info` allocates).
    let gen_ai_system = if traced.is_enabled() { provider.info().provider } else { String::new() };
    // Answers the result gate rejected so far.
    let mut revisions = 0u32;
    // Long conversations (`compaction.rs`): a child turn has no earlier items to compact.
    let policy = defs.capabilities.compaction;
    let mut compactor = Compactor {
        on: persona.is_none() && policy.enabled,
        window: compaction::window(&policy, model),
        budget: compaction::Budget::default(),
        own_from: messages.len(),
        view: None,
        refused: false,
    };
    // Copies nothing: the request shares the messages with the steps before (`Messages`).
    let build = |messages: &Messages| ModelRequest {
        system: system.clone(),
        messages: messages.clone(),
        tools: tools.clone(),
        params: Default::default(),
    };
    if compactor.on && compactor.window.is_some() {
        compactor.budget.seed(conversation.reported_tokens(), &build(&messages));
    }
    for step in first..max_steps {
        let mut request = build(&messages);
        if compactor.on
            && let Some(window) = compactor.window
        {
            let (tokens, _) = compactor.budget.estimate(&request);
            if compaction::over(&policy, tokens, window) {
                let measure = compaction::Measure { estimated_tokens: tokens, window, reason: compaction::THRESHOLD };
                accepted(accepting).await?;
                emit.flush().await?;
                let done = compactor.run(provider.as_ref(), conversation, context, measure, false).await?;
                if let Some(done) = done {
                    compactor.apply(done, &mut messages, emit, usage).await?;
                    request = build(&messages);
                }
            }
        }
        // Staged, not awaited: it goes out with the model's first output, or after a short
        // wait if the model is slow (`stream::assemble`), so a fast answer is one commit.
        emit.push(EventData::StepStarted(StepStarted { step }));
        let mut step_started = Instant::now();
        let output = loop {
            // Sizing a request serializes it: only when a window is known to measure against.
            let sized = compactor.on && compactor.window.is_some();
            let (estimated, bytes) = if sized { compactor.budget.estimate(&request) } else { (0, 0) };
            let model_started = Instant::now();
            let model_span = telemetry::model_span(traced, span, &gen_ai_system, model);
            // Current while the request is built, so its `traceparent` names the model call.
            let mut model_stream = {
                let _current = model_span.enter();
                provider.stream(std::mem::take(&mut request), cancel.child_token())
            };
            if let Some(pending) = accepting.take() {
                // The model starts on the message while it is written; what it says is kept
                // until the message is durable.
                let (answer, kept) = model_span.run(pending.wait_streaming(model_stream)).await;
                model_stream = kept;
                go_on(answer)?;
            }
            let cap = stream::OutputCap { bytes: core.max_output_bytes, tokens: core.max_output_tokens };
            let (output, end) = model_span.run(stream::assemble(emit, model_stream, cancel, cap)).await?;
            if traced.is_enabled() {
                let error = match &end {
                    StepEnd::Finished => None,
                    StepEnd::Cancelled => Some((FailureCode::Cancelled.as_str(), INTERRUPTED.to_owned())),
                    StepEnd::Failed(error) => Some((failure::model(error).as_str(), error.to_string())),
                    StepEnd::TooLarge(message) => Some((FailureCode::OutputTooLarge.as_str(), message.clone())),
                };
                let call = telemetry::ModelCall {
                    system: &gen_ai_system,
                    model,
                    started: model_started,
                    first_output: output.first_output,
                    usage: &output.usage,
                    finish: output.finish.as_ref(),
                    cost_usd: cost::estimate(priced.1.as_ref(), &output.usage),
                    error,
                };
                telemetry::model_ended(traced, &model_span, call);
            }
            usage.add(&output.usage);
            match end {
                StepEnd::Cancelled => return Err(Stop::Cancelled),
                StepEnd::Failed(error @ ModelError::ContextLengthExceeded { .. }) if compactor.on => {
                    if compactor.refused {
                        return Err(Stop::Failed(
                            FailureCode::ContextLength,
                            format!("{error} (even after compacting the conversation)"),
                        ));
                    }
                    compactor.refused = true;
                    let window = compactor.window.unwrap_or(0);
                    let estimated = if sized { estimated } else { compactor.budget.estimate(&build(&messages)).0 };
                    let measure =
                        compaction::Measure { estimated_tokens: estimated, window, reason: compaction::REFUSED };
                    emit.flush().await?;
                    match compactor.run(provider.as_ref(), conversation, context, measure, true).await? {
                        Some(done) => compactor.apply(done, &mut messages, emit, usage).await?,
                        None => return Err(Stop::Failed(FailureCode::ContextLength, error.to_string())),
                    }
                    request = build(&messages);
                    emit.push(EventData::StepStarted(StepStarted { step }));
                    step_started = Instant::now();
                    continue;
                }
                StepEnd::Failed(error) => return Err(Stop::Failed(failure::model(&error), error.to_string())),
                StepEnd::TooLarge(message) => return Err(Stop::Failed(FailureCode::OutputTooLarge, message)),
                StepEnd::Finished => {}
            }
            if sized {
                compactor.budget.reported(&output.usage, bytes);
            }
            break output;
        };
        emit.push(EventData::StepCompleted(StepCompleted {
            step,
            duration_ms: step_started.elapsed().as_millis() as u64,
            finish_reason: output.finish.as_ref().map(finish_name),
            usage: Some(cost::protocol_usage(&output.usage)),
        }));
        if output.tool_calls.is_empty() {
            let text = Some(output.text).filter(|t| !t.is_empty());
            let gate = defs.capabilities.result_gate.as_ref().filter(|_| persona.is_none());
            let Some(gate) = gate else { return Ok(text) };
            // Step events go out before the gate runs (it may take a while).
            emit.flush().await?;
            match result_gate::judge(core, gate, &context.session, &context.turn, text.as_deref(), cancel).await {
                _ if cancel.is_cancelled() => return Err(Stop::Cancelled),
                Verdict::Accept => return Ok(text),
                Verdict::Fail(reason) => return Err(Stop::Failed(FailureCode::Internal, reason)),
                Verdict::Reject(message) if revisions >= gate.max_revisions => {
                    return Err(Stop::Failed(
                        FailureCode::Internal,
                        format!("the result gate rejected the answer after {revisions} revision(s): {message}"),
                    ));
                }
                Verdict::Reject(message) => {
                    revisions += 1;
                    let feedback = result_gate::feedback(&message);
                    emit.push(EventData::MessageReceived(MessageReceived {
                        text: feedback.clone(),
                        principal: Some(result_gate::PRINCIPAL.into()),
                    }));
                    messages.push(Message::Assistant {
                        content: text.unwrap_or_default(),
                        reasoning: output.reasoning,
                        tool_calls: Vec::new(),
                    });
                    messages.push(Message::user(feedback));
                    continue;
                }
            }
        }

        let calls: Vec<PreparedCall> = output.tool_calls.iter().map(PreparedCall::new).collect();
        emit.push(EventData::ActionsRequested(ActionsRequested {
            calls: calls.iter().map(PreparedCall::action).collect(),
            direct: None,
        }));
        if workspace.is_none() {
            workspace = match core.stores.workspaces.session_workspace(workspace_of).await {
                Ok(dir) => Some(dir),
                Err(error) => {
                    tracing::warn!(session = %context.session, %error, "no session workspace for tool calls");
                    None
                }
            };
        }
        let dispatch = DispatchContext {
            tools: &defs.tools,
            defs,
            session: &context.session,
            turn: &context.turn,
            workspace: workspace.clone(),
            cancel,
            settings: context.settings.clone(),
            approvals: &core.approvals,
            core,
            nested: persona.is_some(),
            trace: span.context(),
        };
        let (finished, halt) = dispatch::run_calls(dispatch, emit, &calls).await?;
        if halt == Halt::Suspended {
            return Err(Stop::Suspended);
        }
        let cancelled = halt == Halt::Cancelled;
        for spent in finished.iter().filter_map(|done| done.spent) {
            children.usage.add(&spent.usage);
            children.cost_usd += spent.cost_usd;
        }
        messages.push(Message::Assistant {
            content: output.text,
            reasoning: output.reasoning,
            tool_calls: calls
                .iter()
                .map(|c| ToolCall {
                    id: model_call_id(&c.call_id),
                    name: c.name.clone(),
                    arguments: arguments_text(&c.input),
                })
                .collect(),
        });
        for done in finished {
            messages.push(Message::tool_result(
                model_call_id(&done.call_id),
                result_text(&done.outcome.result),
                done.outcome.is_error,
            ));
        }
        if cancelled {
            return Err(Stop::Cancelled);
        }
    }
    Err(Stop::Failed(
        FailureCode::MaxSteps,
        format!("the turn used all {max_steps} model steps (max_steps) without a final answer"),
    ))
}

/// Waits until the message that started the turn is written (`accepting.rs`), before the
/// turn's first write.
async fn accepted(accepting: &mut Option<Accepting>) -> Result<(), Stop> {
    let Some(pending) = accepting.take() else { return Ok(()) };
    go_on(pending.wait().await)
}

/// Whether the turn goes on after the answer to its message (`None`: not written).
fn go_on(answer: Option<Accepted>) -> Result<(), Stop> {
    match answer {
        Some(Accepted::AsFolded) => Ok(()),
        Some(Accepted::Elsewhere) => Err(Stop::Refold),
        None => Err(Stop::Unaccepted),
    }
}

/// A turn's compaction state (`compaction.rs` decides; this applies).
struct Compactor {
    /// A root turn of an agent that has compaction on.
    on: bool,
    window: Option<u64>,
    budget: compaction::Budget,
    /// Where this turn's own messages start in the request's messages.
    own_from: usize,
    /// The conversation as compacted during this turn (the fold gets it from the log later).
    view: Option<Conversation>,
    /// The provider already refused one request of this turn as too long.
    refused: bool,
}

impl Compactor {
    async fn run(
        &self,
        provider: &dyn ModelProvider,
        conversation: &Conversation,
        context: &TurnContext,
        measure: compaction::Measure,
        fallback: bool,
    ) -> Result<Option<compaction::Compacted>, Stop> {
        let current = self.view.as_ref().unwrap_or(conversation);
        let keep = context.defs.capabilities.compaction.keep_turns;
        compaction::compact(provider, current, &context.turn, keep, fallback, measure, &context.cancel).await.map_err(
            |failure| match failure {
                compaction::Failure::Cancelled => Stop::Cancelled,
                compaction::Failure::Summary(message) => Stop::Failed(
                    FailureCode::CompactionFailed,
                    format!("the conversation had to be compacted to fit the context window, and {message}"),
                ),
            },
        )
    }

    /// Records the compaction, counts its usage and rebuilds `messages` on it.
    async fn apply(
        &mut self,
        done: compaction::Compacted,
        messages: &mut Messages,
        emit: &mut Emitter,
        usage: &mut ModelUsage,
    ) -> Result<(), Stop> {
        emit.send(done.event).await?;
        usage.add(&done.usage);
        let own: Vec<Message> = messages.iter().skip(self.own_from).cloned().collect();
        let mut view = done.view;
        *messages = view.messages();
        self.own_from = messages.len();
        messages.extend(own);
        self.view = Some(view);
        self.budget.reset();
        Ok(())
    }
}

/// A turn's own usage plus its children's.
fn with_children(usage: &ModelUsage, children: &Spent) -> bdk_protocol::event::Usage {
    let mut total = cost::protocol_usage(usage);
    total.add(&children.usage);
    total
}

fn finish_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(other) => other.clone(),
    }
}
