//! The `data` payload of each event type, one struct per type, camelCase on the wire.
//!
//! Payloads are open for extension: unknown fields are ignored when reading, optional fields
//! are omitted when absent, so a newer writer's log stays readable by an older reader.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::{CallId, SessionId, TurnId};

pub use super::failure::FailureCode;

/// How a session behaves after a turn: `chat` waits for follow-ups, `task` runs once and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    Chat,
    Task,
}

/// `session.started`: the session exists, with who opened it and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStarted {
    pub mode: SessionMode,
    /// The channel id that owns the session (`http`, `slack`, a schedule, ...).
    pub channel: String,
    /// The authenticated principal the session belongs to.
    pub principal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Write tools are stubbed instead of run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Tools must not see data newer than this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<DateTime<Utc>>,
    /// Why the session exists, e.g. `eval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
}

/// `ab.assigned`: the session was enrolled in one arm of an A/B experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbAssigned {
    pub experiment: String,
    pub arm: String,
}

/// `session.waiting`: a chat session is idle and accepts follow-ups.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionWaiting {}

/// `session.completed`: a task session finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionCompleted {
    /// The final assistant text, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// `session.failed`: a task session ended without a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionFailed {
    pub message: String,
    /// Why, as a stable code (absent in logs written before codes existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<FailureCode>,
}

/// `agent.bound`: the backing agent or conversation became known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentBound {
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `message.received`: a user message was accepted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageReceived {
    pub text: String,
    /// The principal who sent it, when it differs from the session owner's view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

/// `turn.queued`: the turn waits for a slot under `max_running_turns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnQueued {
    /// 1-based position in the queue.
    pub position: u32,
}

/// `turn.started`: the model turn began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStarted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Token counts for one step or one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_input_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Field-wise sum, for folding steps into a turn and turns into a session.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
    }
}

/// `turn.completed`: the turn's final result, token usage and estimated cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnCompleted {
    pub usage: Usage,
    /// Estimated cost in US dollars from the engine's price table; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The final assistant text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// How a turn ended without completing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnFailStatus {
    /// An error: the model, a hook, or the result gate.
    Failed,
    /// Stopped or preempted by a newer message.
    Cancelled,
}

/// `turn.failed`: the turn ended in an error or was cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnFailed {
    pub status: TurnFailStatus,
    /// Human-readable reason, e.g. `turn interrupted`.
    pub message: String,
    /// Why, as a stable code (absent in logs written before codes existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<FailureCode>,
    /// Tokens spent before the failure, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost_usd: Option<f64>,
}

/// `step.started`: one model request within the turn began.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStarted {
    /// 0-based step number within the turn.
    pub step: u32,
}

/// `step.completed`: one model request finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepCompleted {
    pub step: u32,
    pub duration_ms: u64,
    /// Why the model stopped: `stop`, `tool_calls`, `length`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `reasoning.appended` and `message.appended`: a streamed text delta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextDelta {
    pub delta: String,
}

/// `reasoning.completed` and `message.completed`: a finalized block of text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextCompleted {
    pub text: String,
}

/// One tool call the model asked for, with its validated arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionCall {
    pub call_id: CallId,
    pub tool_name: String,
    pub input: Value,
}

/// `actions.requested`: the model asked for one or more tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionsRequested {
    pub calls: Vec<ActionCall>,
    /// A direct call (`POST /v1/tools/:name`, `bdk call`) bound to the session, not the model's:
    /// recorded under its own turnId and never part of the conversation sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
}

/// `action.result`: one tool call finished. `isError` results go back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionResult {
    pub call_id: CallId,
    pub tool_name: String,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
    /// The call was not run because the session is a dry run; `result` is the stub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stubbed: Option<bool>,
    /// The result of a direct call (see [`ActionsRequested::direct`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
}

/// `action.approval_requested`: a tool call is parked until a person decides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequested {
    pub call_id: CallId,
    pub tool_name: String,
    pub input: Value,
}

/// How an approval request ended. `approve` and `deny` are a person's answer, the same words
/// as the approvals route body; `expired` is recorded by restart recovery for a call that was
/// still parked when the host stopped (the route never accepts it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalDecision {
    Approve,
    Deny,
    Expired,
}

/// `action.approval_resolved`: the parked call was approved, denied, or expired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolved {
    pub call_id: CallId,
    pub tool_name: String,
    pub decision: ApprovalDecision,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `subagent.called`: the model delegated work to a subagent through the `task` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentCalled {
    pub call_id: CallId,
    /// The subagent's id (its folder name).
    pub subagent: String,
    pub prompt: String,
    /// The child turn running the subagent, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_turn_id: Option<TurnId>,
    /// The child session whose log holds the subagent's own events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<SessionId>,
}

/// `subagent.completed`: the delegated work finished, failed or was cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentCompleted {
    pub call_id: CallId,
    pub subagent: String,
    pub is_error: bool,
    pub result: String,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `artifact.tagged`: a durable artifact was tagged for this session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactTagged {
    pub artifact_id: String,
    pub kind: String,
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `tag_artifact` when the model tagged it, `host` for host code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// `conversation.compacted`: older conversation items (user messages and whole turns, oldest
/// first) were replaced by a model-written summary so the next request fits the context window.
/// The conversation rebuilt from the log applies it at this point, so a restart sends the model
/// the same messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationCompacted {
    /// What the model wrote about the replaced items (it replaces them in every later request).
    pub summary: String,
    /// How many items, counted from the start of the conversation as it stood, the summary
    /// replaces (an earlier summary counts as one item).
    pub replaced_items: u32,
    /// The log index of the last event of the replaced items.
    pub through_index: u64,
    /// The estimated tokens of the request that would have been sent.
    pub estimated_tokens: u64,
    /// The context window it was measured against.
    pub context_window: u64,
    /// `threshold` (the request crossed the configured share of the window) or
    /// `context_length_exceeded` (the provider refused the request as too long).
    pub reason: String,
    /// Tokens the summary call used (also counted in the turn's usage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}
