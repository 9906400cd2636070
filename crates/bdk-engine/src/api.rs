//! The engine's public surface: what servers and the CLI call. Request/response structs are
//! plain data; [`Engine`] is cheap to clone and shared across tasks.

use std::sync::Arc;
use std::time::Duration;

use bdk_model::ModelProvider;
use bdk_protocol::event::ApprovalDecision;
use bdk_protocol::{CallId, Event, SessionId};
use bdk_store::{EventStream, SessionRecord, Stores};
use bdk_tools::ToolRegistry;

use crate::approvals::PendingApproval;
use crate::defs::Definitions;
use crate::engine::Core;
use crate::error::Result;
pub use crate::types::{
    Admission, AgentConfig, CostReport, EngineOptions, FollowUp, FollowUpAccepted, ListScope, Principal, RestoreLimits,
    SessionStarted, SessionSummary, StartSession, TurnCost,
};

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

    /// The shared core, for the capability modules (schedules, reminders) built on it.
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.inner
    }

    /// The agent settings new turns run with (after the last [`Engine::reload`]).
    pub fn config(&self) -> AgentConfig {
        self.inner.defs().config.clone()
    }

    /// Makes `definitions` what new turns run with: instructions, `max_steps`, model provider
    /// and price, tools, skills, subagents, result gate, artifacts, A/B experiments. Running
    /// turns finish on the definitions they started with; sessions, followers, queued turns and
    /// parked approvals are untouched. The slug, `max_running_turns` and the hooks keep what
    /// the engine was built with. A tool registry replaced here is dropped when the last turn
    /// using it ends: call [`ToolRegistry::shutdown`] on it only if nothing it holds is shared
    /// with the new one.
    pub fn reload(&self, definitions: Definitions) {
        self.inner.reload(definitions);
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
        self.inner.check_owned(session, principal).await?;
        let events = self.inner.stores.events.read(session, from, None).await;
        self.inner.release_if_idle(session);
        Ok(events?)
    }

    /// Replays from `from`, then follows live events, without gaps or duplicates.
    pub async fn follow(&self, session: &SessionId, principal: &Principal, from: u64) -> Result<EventStream> {
        self.inner.check_owned(session, principal).await?;
        let stream = self.inner.stores.events.follow(session, from).await?;
        Ok(crate::engine::Following::wrap(stream, &self.inner, session))
    }

    pub async fn list(&self, scope: ListScope) -> Result<Vec<SessionSummary>> {
        self.inner.list(scope).await
    }

    pub async fn cost(&self, session: &SessionId, principal: &Principal) -> Result<CostReport> {
        self.inner.check_owned(session, principal).await?;
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

    /// Artifacts `scope` may see, newest-updated first (`query.principal` is set from `scope`).
    pub async fn artifacts(
        &self,
        scope: &ListScope,
        query: bdk_store::ArtifactQuery,
    ) -> Result<Vec<bdk_store::ArtifactRecord>> {
        crate::artifacts::list(&self.inner, scope, query).await
    }

    /// One artifact's record and content, if it exists, has content and `scope` may see it.
    pub async fn artifact_content(
        &self,
        scope: &ListScope,
        id: &str,
    ) -> Result<Option<(bdk_store::ArtifactRecord, Vec<u8>)>> {
        crate::artifacts::content(&self.inner, scope, id).await
    }

    /// The A/B experiments with their assignments and per-arm totals, folded from the logs of
    /// the sessions `scope` may see.
    pub async fn abs(&self, scope: &ListScope) -> Result<crate::ab::AbReport> {
        crate::ab::report(&self.inner, scope).await
    }

    /// The agent's model provider (kind, model, base URL): what `/v1/health?check=model` probes.
    pub fn model_info(&self) -> bdk_model::ProviderInfo {
        self.inner.defs().provider.info()
    }

    /// The telemetry handle the engine records on.
    pub fn telemetry(&self) -> &bdk_telemetry::Telemetry {
        &self.inner.telemetry
    }

    /// Whether the state store takes writes right now (what `/v1/health` reports). A store
    /// that refused a write (disk full, read-only) is probed every second until it takes one.
    pub fn store_status(&self) -> crate::StoreStatus {
        self.inner.store_health.status()
    }

    pub fn hooks(&self) -> Vec<crate::hooks::HookStatus> {
        self.inner.hooks.as_ref().map(|hub| hub.status()).unwrap_or_default()
    }

    /// Whether a turn of this session is running or queued right now (direct tool calls bound
    /// to the session answer `session_busy` while it is).
    pub fn is_busy(&self, session: &SessionId) -> bool {
        self.inner.is_busy(session)
    }

    /// Hands a message into a channel: starts a chat session on it, or continues the one whose
    /// token is `<channel>:<key>` under `request.admission` (owner-checked).
    pub async fn channel_send(
        &self,
        request: crate::channel_send::ChannelSend,
    ) -> Result<bdk_tools::host::SendOutcome> {
        crate::channel_send::send(&self.inner, request).await
    }

    /// The id of the session whose current continuation token is `token`, if any.
    pub async fn find_by_token(&self, token: &str) -> Result<Option<SessionId>> {
        Ok(self.inner.direct_tokens.find(&self.inner, token).await?.map(|record| record.id))
    }

    /// Runs a command with host services granted for exactly as long as it runs (a channel
    /// handler, say): the agent folder as cwd, `{"input", "context"}` on stdin, killed after
    /// its timeout. Failures are an `is_error` outcome.
    pub async fn run_host_command(
        &self,
        command: &crate::HostCommand,
        input: &serde_json::Value,
    ) -> bdk_tools::ToolOutcome {
        crate::timed_command::run(&self.inner, command, input).await
    }

    /// Closes what the agent's tools keep running (MCP servers and their processes). Call it
    /// once at shutdown, after [`Engine::drain`].
    pub async fn close_tools(&self) {
        self.inner.defs().tools.shutdown().await;
    }

    /// The agent's tool registry (the one new turns use).
    pub fn tools(&self) -> Arc<dyn ToolRegistry> {
        self.inner.defs().tools.clone()
    }

    /// Stops admitting turns, lets running ones finish for up to `grace`, then cancels them and
    /// waits until their final events are durable.
    pub async fn drain(&self, grace: Duration) {
        self.inner.drain(grace).await;
    }
}
