//! Subagents at run time: the built-in [`TOOL`] tool. Its description lists each subagent's
//! routing description; a call runs the named subagent as a child turn and answers with the
//! child's final text.
//!
//! A child is a task session of its own (channel `subagent`, the parent's principal and purpose,
//! `parentSessionId` in its record), so its events have a log of their own; the parent's stream
//! records `subagent.called` (naming the child session and turn) and `subagent.completed`
//! (with `isError` on failure or cancellation, and the child's usage). The child runs its own
//! instructions and model, falling back to the parent's, its own step budget, and the parent's
//! tools, skills and workspace; it never gets `task` (nesting is refused with a tool error). Each
//! child runs as its own task under a child of the calling tool call's cancellation token, so
//! several `task` calls of one step run at once and cancelling the parent cancels them; the task
//! always writes the child's closing events, even when the parent stops waiting for it.
//!
//! It depends on the core (`turn.rs` runs the child turn); `dispatch.rs` is its one caller.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bdk_protocol::event::{
    FailureCode, MessageReceived, SessionCompleted, SessionFailed, SessionMode, SessionStarted, SubagentCalled,
    SubagentCompleted, Usage,
};
use bdk_protocol::{CallId, EventData, SessionId, TurnId};
use bdk_store::record::SessionStatus;
use bdk_store::{NewEvent, SessionRecord};
use bdk_tools::{ToolOutcome, ToolSpec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::capabilities::SubagentSpec;
use crate::conversation::Conversation;
use crate::dispatch::ToolSettings;
use crate::engine::Core;
use crate::joined::{self, Ended};
use crate::turn::{self, Persona, TurnContext, TurnEnd};
use crate::workspace::WorkspacePrep;

/// The built-in delegation tool.
pub const TOOL: &str = "task";
/// The channel child sessions are recorded under.
pub const CHANNEL: &str = "subagent";
/// What a subagent that calls `task` is told.
pub const NESTED: &str = "a subagent cannot delegate: `task` is only available to the parent agent";

/// Usage and estimated cost a child spent, added to the parent turn's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Spent {
    pub usage: Usage,
    pub cost_usd: f64,
}

/// The tool's spec: one line per subagent with its routing description.
pub(crate) fn spec(subagents: &[SubagentSpec]) -> ToolSpec {
    let mut description = String::from(
        "Delegate a self-contained piece of work to a specialist subagent. It runs on its own with \
         the same tools and answers with its final text. Call it several times in one step to run \
         subagents in parallel. Subagents:\n",
    );
    for subagent in subagents {
        let routing = subagent.description.split_whitespace().collect::<Vec<_>>().join(" ");
        description.push_str(&format!("- `{}`: {routing}\n", subagent.id));
    }
    let ids: Vec<&str> = subagents.iter().map(|s| s.id.as_str()).collect();
    ToolSpec {
        name: TOOL.into(),
        description,
        input_schema: json!({
            "type": "object",
            "properties": {
                "subagent": {"type": "string", "enum": ids, "description": "Which subagent runs the work."},
                "prompt": {"type": "string", "description": "The complete task: the subagent sees nothing else of this conversation."},
            },
            "required": ["subagent", "prompt"],
            "additionalProperties": false,
        }),
        output_schema: None,
    }
}

/// One accepted `task` call, ready to run.
#[derive(Debug)]
pub(crate) struct Delegation {
    call_id: CallId,
    spec: SubagentSpec,
    prompt: String,
    child_session: SessionId,
    child_turn: TurnId,
}

/// Checks a `task` call: `Err` is the tool error the model reads (nesting, an unknown
/// subagent, a missing prompt).
pub(crate) fn admit(
    subagents: &[SubagentSpec],
    nested: bool,
    call_id: &CallId,
    input: &Value,
) -> Result<Delegation, ToolOutcome> {
    if nested {
        return Err(ToolOutcome::error(NESTED));
    }
    let ids = || subagents.iter().map(|s| format!("`{}`", s.id)).collect::<Vec<_>>().join(", ");
    let Some(id) = input.get("subagent").and_then(Value::as_str) else {
        return Err(ToolOutcome::error(format!("`task` needs `subagent`: one of {}", ids())));
    };
    let Some(spec) = subagents.iter().find(|s| s.id == id) else {
        return Err(ToolOutcome::error(format!("there is no subagent `{id}`; the subagents are {}", ids())));
    };
    let prompt = input.get("prompt").and_then(Value::as_str).unwrap_or_default().trim();
    if prompt.is_empty() {
        return Err(ToolOutcome::error("`task` needs a non-empty `prompt`: the whole task for the subagent"));
    }
    Ok(Delegation {
        call_id: call_id.clone(),
        spec: spec.clone(),
        prompt: prompt.to_owned(),
        child_session: SessionId::generate(),
        child_turn: TurnId::generate(),
    })
}

/// What the parent records when the child finished one way or another.
pub(crate) fn completed_event(
    call_id: &CallId,
    subagent: &str,
    outcome: &ToolOutcome,
    duration_ms: u64,
    spent: Option<Spent>,
) -> EventData {
    EventData::SubagentCompleted(SubagentCompleted {
        call_id: call_id.clone(),
        subagent: subagent.to_owned(),
        is_error: outcome.is_error,
        result: crate::dispatch::result_text(&outcome.result),
        duration_ms,
        usage: spent.map(|s| s.usage),
    })
}

/// The subagent a `task` input names (for closing a call that never landed).
pub(crate) fn named(input: &Value) -> String {
    input.get("subagent").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Where the child runs, taken from the parent's call.
#[derive(Debug, Clone)]
pub(crate) struct Parent {
    /// The parent turn's definitions: the child runs on the same version.
    pub defs: Arc<crate::defs::Defs>,
    pub session: SessionId,
    pub workspace: Option<PathBuf>,
    pub settings: ToolSettings,
}

impl Delegation {
    /// `subagent.called`, naming the child session and turn.
    pub fn called_event(&self) -> EventData {
        EventData::SubagentCalled(SubagentCalled {
            call_id: self.call_id.clone(),
            subagent: self.spec.id.clone(),
            prompt: self.prompt.clone(),
            child_turn_id: Some(self.child_turn.clone()),
            child_session_id: Some(self.child_session.clone()),
        })
    }

    /// Creates the child session (its record, `session.started`, the prompt as its message).
    /// `Err` is the tool error the model reads.
    pub async fn open(&self, core: &Core, parent: &Parent) -> Result<SessionRecord, ToolOutcome> {
        open_child(core, &self.spec, &self.prompt, &self.child_session, parent).await.map_err(|error| {
            tracing::error!(subagent = %self.spec.id, %error, "could not open a subagent session");
            ToolOutcome::error(format!("subagent `{}` could not start: {error}", self.spec.id))
        })
    }

    /// Runs the child, opened by [`open`](Self::open), to its end: its outcome for the model,
    /// and what it spent. `None` when the runtime shut down under it: the process is going
    /// away, and the caller writes nothing (as it does for its own tool calls).
    pub async fn run(
        self,
        core: Arc<Core>,
        parent: Parent,
        record: SessionRecord,
        cancel: CancellationToken,
    ) -> Option<(ToolOutcome, Spent)> {
        let spec_id = self.spec.id.clone();
        // Its own task: dropping this future (the parent stopped waiting) leaves the child
        // running until it sees `cancel`, so its closing events are always written.
        let task = tokio::spawn(run_child(core, self, parent, record, cancel));
        match joined::ended(task.await) {
            Ended::Returned(done) => Some(done),
            Ended::ShuttingDown => None,
            Ended::Panicked(error) => {
                tracing::error!(subagent = %spec_id, %error, "a subagent task failed");
                Some((ToolOutcome::error(format!("subagent `{spec_id}` failed unexpectedly")), Spent::default()))
            }
        }
    }
}

async fn run_child(
    core: Arc<Core>,
    delegation: Delegation,
    parent: Parent,
    record: SessionRecord,
    cancel: CancellationToken,
) -> (ToolOutcome, Spent) {
    let _track = core.turns.token();
    let Delegation { spec, child_session, child_turn, .. } = delegation;
    let (provider, price) = match &spec.model {
        Some(model) => (model.provider.clone(), model.price),
        None => (parent.defs.provider.clone(), parent.defs.price),
    };
    let instructions = if spec.instructions.trim().is_empty() {
        parent.defs.config.instructions.clone()
    } else {
        spec.instructions.clone()
    };
    let persona = Persona {
        instructions,
        model: provider.info().model,
        provider,
        price,
        max_steps: spec.max_steps.unwrap_or(parent.defs.config.max_steps),
        workspace: parent.workspace.clone(),
        parent: parent.session.clone(),
    };
    let context = TurnContext {
        core: core.clone(),
        defs: parent.defs.clone(),
        session: child_session.clone(),
        turn: child_turn,
        cancel,
        conversation: Conversation::default(),
        settings: parent.settings,
        workspace: WorkspacePrep { files: Vec::new(), ready: Arc::new(AtomicBool::new(true)) },
        persona: Some(Arc::new(persona)),
        resume: None,
        admitted: None,
        accepting: None,
        // The `invoke_agent` span of the parent's call is current here.
        trace: core.telemetry.current(),
    };
    let outcome = turn::run_boxed(context).await;
    let spent = spent_of(&outcome.closing);
    let (tool_outcome, closing, status) = match outcome.end {
        TurnEnd::Completed { result } => {
            let text = result.clone().unwrap_or_else(|| "(the subagent gave no final text)".into());
            (
                ToolOutcome::ok(Value::String(text)),
                EventData::SessionCompleted(SessionCompleted { result }),
                SessionStatus::Completed,
            )
        }
        // A child turn is never suspended (its dispatch is nested); treated as cancelled.
        TurnEnd::Suspended => (
            ToolOutcome::error(format!("subagent `{}` failed: {}", spec.id, crate::turn::SHUTTING_DOWN)),
            EventData::SessionFailed(SessionFailed {
                message: crate::turn::SHUTTING_DOWN.to_owned(),
                error: Some(FailureCode::ShuttingDown),
            }),
            SessionStatus::Failed,
        ),
        TurnEnd::Failed { message, error } | TurnEnd::Cancelled { message, error } => (
            ToolOutcome::error(format!("subagent `{}` failed: {message}", spec.id)),
            EventData::SessionFailed(SessionFailed { message, error: Some(error) }),
            SessionStatus::Failed,
        ),
    };
    let mut events = outcome.closing;
    events.push(NewEvent::new(closing));
    if let Err(error) = core.stores.events.append(&child_session, events).await {
        tracing::error!(session = %child_session, %error, "could not close a subagent session");
    }
    let mut settled = record;
    settled.status = Some(status);
    settled.updated_at = bdk_protocol::event::timestamp_now();
    if let Err(error) = core.stores.sessions.update_derived(settled).await {
        tracing::warn!(session = %child_session, %error, "could not record a subagent session's status");
    }
    core.release_if_idle(&child_session);
    (tool_outcome, spent)
}

/// Creates the child session: its record, `session.started` and the prompt as its message.
async fn open_child(
    core: &Core,
    spec: &SubagentSpec,
    prompt: &str,
    child: &SessionId,
    parent: &Parent,
) -> bdk_store::Result<SessionRecord> {
    let owner = core.stores.sessions.get(&parent.session).await?;
    let principal = owner.as_ref().map(|r| r.principal.clone()).unwrap_or_default();
    let purpose = owner.as_ref().and_then(|r| r.purpose.clone());
    let mut record = SessionRecord::new(child.clone(), SessionMode::Task, CHANNEL, &principal);
    record.title = Some(format!("subagent {}", spec.id));
    record.dry_run = parent.settings.dry_run;
    record.as_of = parent.settings.as_of;
    record.purpose = purpose.clone();
    record.status = Some(SessionStatus::Running);
    record.extra.insert("parentSessionId".into(), Value::String(parent.session.to_string()));
    core.stores.sessions.create(record.clone()).await?;
    let started = SessionStarted {
        mode: SessionMode::Task,
        channel: CHANNEL.into(),
        principal,
        title: record.title.clone(),
        dry_run: record.dry_run.then_some(true),
        as_of: record.as_of,
        purpose,
    };
    let received = MessageReceived { text: prompt.to_owned(), principal: None };
    core.stores
        .events
        .append(
            child,
            vec![
                NewEvent::new(EventData::SessionStarted(started)),
                NewEvent::new(EventData::MessageReceived(received)),
            ],
        )
        .await?;
    Ok(record)
}

/// Usage and cost from the child turn's closing event.
fn spent_of(closing: &[NewEvent]) -> Spent {
    for event in closing {
        match &event.data {
            EventData::TurnCompleted(done) => {
                return Spent { usage: done.usage, cost_usd: done.estimated_cost_usd.unwrap_or(0.0) };
            }
            EventData::TurnFailed(failed) => {
                return Spent {
                    usage: failed.usage.unwrap_or_default(),
                    cost_usd: failed.estimated_cost_usd.unwrap_or(0.0),
                };
            }
            _ => {}
        }
    }
    Spent::default()
}
