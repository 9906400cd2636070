//! The engine's shared data types: who calls (`Principal`), what they ask for (`StartSession`,
//! `FollowUp`, `Admission`), what they get back, the agent settings and engine options, and the
//! host-service grant types. Every other module of the crate may import these; this module
//! imports nothing of the crate but the equally low `capabilities.rs`, so the arrows inside the
//! engine point down to it. The public facade (`api.rs`) re-exports them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bdk_model::Price;
use bdk_protocol::event::{SessionMode, Usage};
use bdk_protocol::{CallId, SessionId, TurnId};
use bdk_tools::HostAccess;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::capabilities::Capabilities;

/// Who is calling. Sessions belong to the principal that created them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Principal(pub String);

impl Principal {
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a busy session does with a new message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Admission {
    /// Interrupt the running turn, wait for it to settle, then run the new message.
    #[default]
    Preempt,
    /// Leave the running turn alone; queued messages become one follow-up turn after it.
    Coalesce,
}

/// Per-agent settings the engine needs (resolved from the project by the caller).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub slug: String,
    /// The system prompt.
    pub instructions: String,
    /// Model steps per turn before the turn fails.
    pub max_steps: u32,
    /// Turns running at once across the agent; more wait with `turn.queued`.
    pub max_running_turns: u32,
    /// An idle session's actor exits after this long (its state lives in the log).
    pub idle_timeout: Duration,
}

/// Opens a session and starts its first turn.
#[derive(Debug, Clone)]
pub struct StartSession {
    pub message: String,
    pub principal: Principal,
    /// `http` for the session API; a channel id otherwise.
    pub channel: String,
    /// A channel's continuation key: the token becomes `<channel>:<key>` and never rotates.
    /// `None` for HTTP sessions, which get an opaque `http:<random>` token that rotates.
    pub continuation_key: Option<String>,
    pub mode: SessionMode,
    pub title: Option<String>,
    pub dry_run: bool,
    pub as_of: Option<DateTime<Utc>>,
    pub purpose: Option<String>,
    /// Files (path relative to the workspace, content) written into the session workspace
    /// before the first turn, after the project's skills, agent tools and seeds.
    pub workspace_files: Vec<(String, String)>,
}

/// What `start_session` returns once the first message is durable and its turn admitted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStarted {
    pub session_id: SessionId,
    pub continuation_token: String,
    pub turn_id: TurnId,
}

/// A follow-up message to an existing chat session.
#[derive(Debug, Clone)]
pub struct FollowUp {
    pub message: String,
    pub principal: Principal,
    /// Must equal the session's current token (HTTP tokens rotate on each accepted follow-up).
    pub continuation_token: String,
    pub admission: Admission,
    /// Files written into the session workspace before the turn that runs this message.
    pub workspace_files: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FollowUpAccepted {
    /// The token to present next time (rotated for HTTP sessions, unchanged for channel ones).
    pub continuation_token: String,
    /// The turn that will run the message (`None` when coalesced into a running turn's follow-up).
    pub turn_id: Option<TurnId>,
}

/// Which sessions a listing shows.
#[derive(Debug, Clone)]
pub enum ListScope {
    /// Only sessions this principal owns.
    Owner(Principal),
    /// Every principal's (`--dev` on loopback, `--allow-anonymous`).
    All,
}

/// One row of `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: SessionId,
    pub mode: SessionMode,
    pub channel: String,
    pub principal: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `running`, `waiting`, `completed` or `failed`.
    pub status: String,
    /// A channel session's token (`<channelId>:<key>`); absent for HTTP sessions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `GET /v1/session/:id/cost`: usage and estimated cost per turn, folded from `turn.completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostReport {
    pub session_id: SessionId,
    pub turns: Vec<TurnCost>,
    pub usage: Usage,
    pub cost_usd: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnCost {
    pub turn_id: TurnId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
}

/// Settings beyond [`AgentConfig`] with sensible defaults; pass them to [`Engine::with_options`].
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Token prices for cost estimates. `None`: the built-in table's price for the provider's
    /// model, when it has one (else costs are recorded as 0).
    pub price: Option<Price>,
    /// Mints the `BDK_HOST_URL` / `BDK_HOST_TOKEN` a command uses to reach the host services
    /// (the server's token table). `None`: commands get none; native tools still get the
    /// services in-process.
    pub host: Option<Arc<dyn HostAuthority>>,
    /// Skills, subagents and hooks (`setup::capabilities` builds them from a project). Empty:
    /// none of them.
    pub capabilities: Capabilities,
    /// Most tool calls one model step may run (`None`: 64); the excess are refused with a tool
    /// error the model reads.
    pub max_tool_calls_per_step: Option<usize>,
    /// Most bytes of output (text, reasoning, tool-call arguments) one model step may produce
    /// (`None`: 1 MiB); past it the step is cut off and the turn fails with `output_too_large`.
    pub max_output_bytes: Option<usize>,
    /// Most output tokens one model step may use, as the provider reports them (`None`: no cap);
    /// past it the turn fails with `output_too_large`.
    pub max_output_tokens: Option<u64>,
    /// Where artifacts are kept (`tag_artifact`, host code, `/v1/artifacts`). `None`: tagging
    /// fails with a clear error and listings are empty.
    pub artifacts: Option<Arc<dyn bdk_store::ArtifactStore>>,
    /// Spans and metrics (`docs/telemetry.md`). Default: disabled, costing nothing.
    pub telemetry: bdk_telemetry::Telemetry,
    /// Session leases shared with other replicas (PostgreSQL). `None`: this process is the only
    /// one running the agent's sessions.
    pub leases: Option<Arc<dyn bdk_store::SessionLeases>>,
    /// Which sessions start-up recovery restores (`storage.toml`'s `policy.restore`). Default:
    /// every one a previous process left open.
    pub restore: RestoreLimits,
}

/// Bounds on the sessions [`crate::Engine::recover`] restores at start-up: the most recently
/// updated ones first. A session left out is not lost: its actor closes what its log leaves
/// open (and restores a turn waiting for approvals) the first time the session is used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreLimits {
    /// At most this many sessions.
    pub max_sessions: Option<u32>,
    /// Only sessions updated this recently.
    pub max_age: Option<std::time::Duration>,
}

/// Who a grant of host services acts for: one tool call, in a session or (for a direct call)
/// in none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostScope {
    pub session_id: Option<SessionId>,
    pub call_id: CallId,
    /// Who `send` acts as. `None`: the session's owner (read when needed).
    pub principal: Option<Principal>,
}

impl HostScope {
    /// A call of a session's turn, acting as the session's owner.
    pub fn session(session_id: SessionId, call_id: CallId) -> Self {
        Self { session_id: Some(session_id), call_id, principal: None }
    }
}

/// Mints the credentials a command uses to reach the host services over HTTP. The server
/// implements it (an in-memory token table); the engine calls `grant` when a call starts and
/// `revoke` when it returns, and never knows the URL or how tokens are checked.
pub trait HostAuthority: Send + Sync + fmt::Debug {
    /// Credentials for `scope`, or `None` when no listener can serve them (then commands get no
    /// `BDK_HOST_URL`; native tools still get the services in-process).
    fn grant(&self, scope: &HostScope) -> Option<HostAccess>;

    /// Invalidates credentials `grant` returned. Idempotent.
    fn revoke(&self, access: &HostAccess);
}
