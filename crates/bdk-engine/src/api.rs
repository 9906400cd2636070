//! The engine's public surface: what servers and the CLI call. Request/response structs are
//! plain data; [`Engine`] is cheap to clone and shared across tasks.

use std::sync::Arc;
use std::time::Duration;

use bdk_model::{ModelProvider, Price};
use bdk_protocol::event::{ApprovalDecision, SessionMode, Usage};
use bdk_protocol::{CallId, Event, SessionId, TurnId};
use bdk_store::{EventStream, SessionRecord, Stores};
use bdk_tools::ToolRegistry;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::approvals::PendingApproval;
use crate::engine::Core;
use crate::error::Result;

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

#[derive(Debug, Clone, PartialEq, Serialize)]
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
    pub host: Option<Arc<dyn crate::host::HostAuthority>>,
    /// Most tool calls one model step may run (`None`: 64); the excess are refused with a tool
    /// error the model reads.
    pub max_tool_calls_per_step: Option<usize>,
    /// Most bytes of output (text, reasoning, tool-call arguments) one model step may produce
    /// (`None`: 1 MiB); past it the step is cut off and the turn fails with `output_too_large`.
    pub max_output_bytes: Option<usize>,
    /// Most output tokens one model step may use, as the provider reports them (`None`: no cap);
    /// past it the turn fails with `output_too_large`.
    pub max_output_tokens: Option<u64>,
}

/// One agent's session engine. Clone it freely.
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<Core>,
}

impl Engine {
    pub fn new(
        config: AgentConfig,
        stores: Stores,
        provider: Arc<dyn ModelProvider>,
        tools: Arc<dyn ToolRegistry>,
    ) -> Self {
        Self::with_options(config, stores, provider, tools, EngineOptions::default())
    }

    /// [`Engine::new`] with explicit [`EngineOptions`].
    pub fn with_options(
        config: AgentConfig,
        stores: Stores,
        provider: Arc<dyn ModelProvider>,
        tools: Arc<dyn ToolRegistry>,
        options: EngineOptions,
    ) -> Self {
        Self { inner: Core::new(config, stores, provider, tools, options) }
    }

    /// The agent settings this engine runs with.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// Closes turns left open by a previous process (`turn.failed`, reason: the host restarted)
    /// so those sessions wait for a follow-up. Call once before serving. Returns how many.
    pub async fn recover(&self) -> Result<usize> {
        crate::recovery::recover(&self.inner).await
    }

    pub async fn start_session(&self, request: StartSession) -> Result<SessionStarted> {
        self.inner.start_session(request).await
    }

    pub async fn follow_up(&self, session: &SessionId, request: FollowUp) -> Result<FollowUpAccepted> {
        self.inner.follow_up(session, request).await
    }

    /// Interrupts the running turn (`turn.failed`, status `cancelled`); the session stays followable.
    pub async fn stop(&self, session: &SessionId, principal: &Principal) -> Result<()> {
        self.inner.stop(session, principal).await
    }

    /// The session's record, after the owner check.
    pub async fn session(&self, session: &SessionId, principal: &Principal) -> Result<SessionRecord> {
        self.inner.owned_record(session, principal).await
    }

    /// Recorded events from `from` (a one-shot dump).
    pub async fn events(&self, session: &SessionId, principal: &Principal, from: u64) -> Result<Vec<Event>> {
        self.inner.owned_record(session, principal).await?;
        let events = self.inner.stores.events.read(session, from, None).await;
        self.inner.release_if_idle(session);
        Ok(events?)
    }

    /// Replays from `from`, then follows live events, without gaps or duplicates.
    pub async fn follow(&self, session: &SessionId, principal: &Principal, from: u64) -> Result<EventStream> {
        self.inner.owned_record(session, principal).await?;
        let stream = self.inner.stores.events.follow(session, from).await?;
        Ok(crate::engine::Following::wrap(stream, &self.inner, session))
    }

    pub async fn list(&self, scope: ListScope) -> Result<Vec<SessionSummary>> {
        self.inner.list(scope).await
    }

    pub async fn cost(&self, session: &SessionId, principal: &Principal) -> Result<CostReport> {
        self.inner.owned_record(session, principal).await?;
        let events = self.inner.stores.events.read(session, 0, None).await;
        self.inner.release_if_idle(session);
        Ok(crate::cost::cost_report(session, &events?))
    }

    /// The session's tool calls waiting for a person's approval, oldest first (owner-checked).
    pub async fn approvals(&self, session: &SessionId, principal: &Principal) -> Result<Vec<PendingApproval>> {
        self.inner.approvals(session, principal).await
    }

    /// Approves or denies one parked call (owner-checked). Returns once
    /// `action.approval_resolved` is durable; the call then runs (approve) or the model is told
    /// it was denied. A call that is not parked (unknown, already decided, or its turn ended) is
    /// `ApprovalNotFound`; `ApprovalDecision::Expired` is `InvalidRequest`.
    pub async fn resolve_approval(
        &self,
        session: &SessionId,
        call_id: &CallId,
        decision: ApprovalDecision,
        principal: &Principal,
    ) -> Result<PendingApproval> {
        self.inner.resolve_approval(session, call_id, decision, principal).await
    }

    /// The host services (kv, files, send, callTool) for `scope`, live as long as the returned
    /// value: what the server's host routes call once a token has resolved to its scope.
    pub fn host_services(&self, scope: crate::host::HostScope) -> Arc<dyn bdk_tools::HostServices> {
        crate::host::services(&self.inner, scope)
    }

    /// Runs a server tool with no model turn: in a scratch workspace, or bound to a session by
    /// id or continuation token (see `direct.rs` for the rules). Refusals before the tool runs are
    /// errors (`UnknownTool`, `ToolNotCallable`, `InvalidToolInput`, `InvalidContinuationToken`,
    /// `SessionNotFound`, `Forbidden`, `SessionBusy`, `WorkspaceUnavailable`); a tool that fails
    /// is an outcome with `is_error`.
    pub async fn call_tool(&self, request: crate::direct::DirectCall) -> Result<crate::direct::DirectOutcome> {
        crate::direct::call_tool(&self.inner, request).await
    }

    /// Whether a turn of this session is running or queued right now (direct tool calls bound
    /// to the session answer `session_busy` while it is).
    pub fn is_busy(&self, session: &SessionId) -> bool {
        self.inner.is_busy(session)
    }

    /// Stops admitting turns, lets running ones finish for up to `grace`, then cancels them and
    /// waits until their final events are durable.
    pub async fn drain(&self, grace: Duration) {
        self.inner.drain(grace).await;
    }
}
