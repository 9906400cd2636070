//! Direct tool calls: the caller picks a server tool and its input and the engine runs it with no
//! model turn (`POST /v1/tools/:name`, `bdk call`, the `callTool` host service). Validation and
//! execution are the model path's: the registry's gate, the same `ToolOutcome`.
//!
//! Where a call runs (the reference's Tools page, "Call a tool without a model turn"):
//! - no `sessionId` or `continuationToken`: a scratch workspace `tool-calls/<callId>/`, removed
//!   when the call returns. A native tool gets its path only, and creates the folder on first
//!   use (`ToolContext::workspace`), so one that never uses it costs no `mkdir`/`rmdir` pair;
//!   a command's `BDK_WORKSPACE_DIR` must exist, so its folder is made before it runs;
//! - a session (by id, or a token that is some session's current token): its workspace, after
//!   the owner check, recorded on its stream as `actions.requested` + `action.result` under a
//!   turnId of its own and marked `direct` (the conversation sent to the model skips them). The
//!   session's actor admits it: a read runs beside a running turn, a write while a turn runs is
//!   `SessionBusy`, and a write on an idle session runs inside the actor, so no turn starts
//!   while it writes. The session's `dryRun` and `asOf` apply as they do to the model's calls;
//!   approvals do not (they gate what the model chooses, and here a caller chose);
//! - a token that names no session: a scratch workspace, with the token's channel id and key as
//!   the call's identity ([`CallIdentity`]);
//! - a session whose workspace cannot be created: a read falls back to a scratch workspace
//!   (`scratchWorkspace: true`), a write is `WorkspaceUnavailable`.
//!
//! A bound call runs on a task of its own, so a caller that goes away (a closed HTTP connection)
//! neither cancels a half-done write nor leaves an `actions.requested` without its result. An
//! unbound call records nothing and runs on the caller's task (a spawn is a measurable share of a
//! native call): a caller that goes away cancels it, and its scratch folder is still removed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bdk_protocol::event::{ActionCall, ActionResult, ActionsRequested};
use bdk_protocol::http::ToolCallResponse;
use bdk_protocol::{CallId, EventData, SessionId, TurnId};
use bdk_store::{NewEvent, SessionRecord};
use bdk_tools::{CallIdentity, Effect, ToolInvocation, ToolKind, ToolOutcome};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{OnceCell, oneshot};

use crate::access::check_owner;
use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::host::{HostLease, HostScope};
use crate::tokens;
use crate::types::Principal;

/// One direct call, as a server route or the CLI hands it to [`Engine::call_tool`](crate::Engine::call_tool).
#[derive(Debug, Clone)]
pub struct DirectCall {
    pub tool: String,
    pub input: Value,
    /// Who calls: a bound session must belong to this principal.
    pub principal: Principal,
    /// Bind to this session. Exclusive with `continuation_token`.
    pub session_id: Option<SessionId>,
    /// `<channelId>:<key>` (or an `http:` token): binds to the session whose current token it
    /// is, else runs in a scratch workspace with the token's channel and key as its identity.
    pub continuation_token: Option<String>,
}

impl DirectCall {
    /// An unbound call.
    pub fn new(tool: impl Into<String>, input: Value, principal: Principal) -> Self {
        Self { tool: tool.into(), input, principal, session_id: None, continuation_token: None }
    }
}

/// What a direct call that ran produced. `is_error` is the tool's failure, told the way the model
/// would have read it; refusals before the tool ran are [`EngineError`]s.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectOutcome {
    pub tool_name: String,
    pub call_id: CallId,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
    /// The bound session's workspace could not be created and this read ran in a scratch one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub scratch_workspace: bool,
    /// The session it was bound to (and recorded on), if any.
    #[serde(skip)]
    pub session_id: Option<SessionId>,
    /// Its turnId on that session's stream.
    #[serde(skip)]
    pub turn_id: Option<TurnId>,
}

impl DirectOutcome {
    /// The wire envelope `{ok: true, toolName, callId, isError, result, durationMs, scratchWorkspace?}`.
    pub fn into_response(self) -> ToolCallResponse {
        ToolCallResponse {
            ok: true,
            tool_name: self.tool_name,
            call_id: self.call_id,
            is_error: self.is_error,
            result: self.result,
            duration_ms: self.duration_ms,
            scratch_workspace: self.scratch_workspace,
        }
    }
}

/// A call that passed every check that needs no session: tool, input, identity.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    call_id: CallId,
    tool: String,
    input: Value,
    effect: Effect,
    kind: ToolKind,
    identity: Option<CallIdentity>,
    /// How many `callTool`s deep this call is (0: not made by a tool).
    depth: u32,
}

/// A checked call bound to a session, for its actor to admit.
#[derive(Debug)]
pub(crate) struct BoundCall {
    call: Checked,
    dry_run: bool,
    as_of: Option<DateTime<Utc>>,
    /// Replicas this call already crossed (see [`forward`]).
    hops: u8,
}

impl BoundCall {
    /// A write, which runs where the session's turns run.
    pub(crate) fn is_write(&self) -> bool {
        matches!(self.call.effect, Effect::Write)
    }

    /// Whether it may still be forwarded to the replica holding its session's lease.
    pub(crate) fn may_forward(&self) -> bool {
        self.hops < crate::remote::MAX_HOPS
    }
}

/// A bound call as one replica forwards it to the replica holding its session's lease: checked
/// again there against the same definitions and admitted by that replica's actor.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ForwardedCall {
    tool: String,
    input: Value,
    /// A token-bound call's identity: channel id and key.
    identity: Option<(String, String)>,
    depth: u32,
    hops: u8,
}

/// A direct call's outcome between replicas.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForwardedOutcome {
    tool_name: String,
    call_id: CallId,
    is_error: bool,
    result: Value,
    duration_ms: u64,
    scratch_workspace: bool,
    turn_id: Option<TurnId>,
}

/// With session leases: a write bound to a session another replica holds runs there, admitted
/// by the actor that runs the session's turns (409 `session_busy` only while one runs), as on
/// one process. Reads run where they arrive. A holder that does not answer is `Unavailable`
/// (503): the call is not retried here, since the holder may have run it.
pub(crate) async fn forward(
    core: Arc<Core>,
    session: SessionId,
    replica: String,
    call: BoundCall,
) -> Result<DirectOutcome> {
    let Some(leases) = core.leases.clone() else { return Err(EngineError::SessionBusy(session)) };
    let body = ForwardedCall {
        tool: call.call.tool,
        input: call.call.input,
        identity: call.call.identity.map(|i| (i.channel, i.key)),
        depth: call.call.depth,
        hops: call.hops + 1,
    };
    let answer = crate::remote::direct(&leases, &replica, &session, body).await?;
    let wire: ForwardedOutcome = serde_json::from_value(answer)
        .map_err(|e| EngineError::Store(bdk_store::Error::Backend(format!("a forwarded tool call's answer: {e}"))))?;
    Ok(DirectOutcome {
        tool_name: wire.tool_name,
        call_id: wire.call_id,
        is_error: wire.is_error,
        result: wire.result,
        duration_ms: wire.duration_ms,
        scratch_workspace: wire.scratch_workspace,
        session_id: Some(session),
        turn_id: wire.turn_id,
    })
}

/// Runs a call another replica forwarded here (this replica holds the session's lease).
pub(crate) async fn call_forwarded(core: &Arc<Core>, session: &SessionId, call: ForwardedCall) -> Result<Value> {
    let identity = call.identity.map(|(channel, key)| CallIdentity { channel, key });
    let mut checked = check(core, call.tool, call.input, identity)?;
    checked.depth = call.depth;
    let record =
        core.stores.sessions.get(session).await?.ok_or_else(|| EngineError::SessionNotFound(session.clone()))?;
    let bound = BoundCall { call: checked, dry_run: record.dry_run, as_of: record.as_of, hops: call.hops };
    let outcome =
        core.call(session, None, |reply| crate::actor::Command::Direct { call: Box::new(bound), reply }).await?;
    let wire = ForwardedOutcome {
        tool_name: outcome.tool_name,
        call_id: outcome.call_id,
        is_error: outcome.is_error,
        result: outcome.result,
        duration_ms: outcome.duration_ms,
        scratch_workspace: outcome.scratch_workspace,
        turn_id: outcome.turn_id,
    };
    serde_json::to_value(wire).map_err(|e| EngineError::Store(bdk_store::Error::Encode(e)))
}

/// Where the request says the call belongs.
enum Binding {
    Scratch,
    Session(SessionId),
    Token(String),
}

/// Runs one direct call (see the module docs).
pub(crate) async fn call_tool(core: &Arc<Core>, request: DirectCall) -> Result<DirectOutcome> {
    call_tool_at(core, request, 0).await
}

/// [`call_tool`] made `depth` `callTool`s deep (0: from outside any tool call).
pub(crate) async fn call_tool_at(core: &Arc<Core>, request: DirectCall, depth: u32) -> Result<DirectOutcome> {
    core.defs().tools.refresh().await;
    let (binding, identity) = binding(&request)?;
    let mut call = check(core, request.tool, request.input, identity)?;
    call.depth = depth;
    let record = match binding {
        Binding::Scratch => None,
        Binding::Session(id) => {
            Some(core.stores.sessions.get(&id).await?.ok_or_else(|| EngineError::SessionNotFound(id.clone()))?)
        }
        Binding::Token(token) => core.direct_tokens.find(core, &token).await?,
    };
    let Some(record) = record else {
        return run_scratch(core.clone(), call, request.principal).await;
    };
    check_owner(&record, &request.principal)?;
    let bound = BoundCall { call, dry_run: record.dry_run, as_of: record.as_of, hops: 0 };
    core.call(&record.id, None, |reply| crate::actor::Command::Direct { call: Box::new(bound), reply }).await
}

/// A call a running tool call makes through its host services (`callTool`), bound to the
/// caller's session. The caller was admitted already (it is part of a turn or of a direct call),
/// so this call is not admitted again: a write is not `SessionBusy` because of the caller's own
/// turn, and it never waits on an actor the caller is holding.
pub(crate) async fn call_nested(
    core: &Arc<Core>,
    session: SessionId,
    tool: String,
    input: Value,
    depth: u32,
) -> Result<DirectOutcome> {
    let mut call = check(core, tool, input, None)?;
    call.depth = depth;
    let record =
        core.stores.sessions.get(&session).await?.ok_or_else(|| EngineError::SessionNotFound(session.clone()))?;
    let bound = BoundCall { call, dry_run: record.dry_run, as_of: record.as_of, hops: 0 };
    spawn(run_bound(core.clone(), session, bound)).await
}

/// The request's binding. Both identifiers, or a malformed token, are `InvalidContinuationToken`.
fn binding(request: &DirectCall) -> Result<(Binding, Option<CallIdentity>)> {
    match (&request.session_id, &request.continuation_token) {
        (Some(_), Some(_)) => Err(EngineError::InvalidContinuationToken(
            "sessionId and continuationToken are mutually exclusive; pass one".into(),
        )),
        (Some(id), None) => Ok((Binding::Session(id.clone()), None)),
        (None, Some(token)) => {
            let (channel, key) = tokens::split(token).ok_or_else(|| {
                EngineError::InvalidContinuationToken(
                    "a continuation token is `<channelId>:<key>` (as /v1/sessions lists it)".into(),
                )
            })?;
            let identity = CallIdentity { channel: channel.to_owned(), key: key.to_owned() };
            Ok((Binding::Token(token.clone()), Some(identity)))
        }
        (None, None) => Ok((Binding::Scratch, None)),
    }
}

/// The checks that need no session: a callable server tool, and an input its schema accepts.
fn check(core: &Core, tool: String, input: Value, identity: Option<CallIdentity>) -> Result<Checked> {
    let defs = core.defs();
    let tools = &defs.tools;
    let Some(info) = tools.lookup(&tool) else {
        return Err(EngineError::UnknownTool { name: tool, available: tools.callable_names() });
    };
    if !info.callable {
        let reason = match info.kind {
            bdk_tools::ToolKind::Agent => "it is an agent tool: it runs in a session workspace, never on the host",
            _ => "it is a built-in workspace tool: only the model calls it, in a turn",
        };
        return Err(EngineError::ToolNotCallable { name: tool, reason: reason.into() });
    }
    if let Err(errors) = tools.validate_input(&tool, &input) {
        return Err(EngineError::InvalidToolInput { name: tool, errors });
    }
    let effect = tools.effect(&tool, &input);
    Ok(Checked { call_id: CallId::generate(&tool), tool, input, effect, kind: info.kind, identity, depth: 0 })
}

/// Runs `work` on a task of its own, so dropping the caller does not cut it short.
async fn spawn(work: impl Future<Output = Result<DirectOutcome>> + Send + 'static) -> Result<DirectOutcome> {
    tokio::spawn(work).await.unwrap_or_else(|error| {
        tracing::error!(%error, "a direct tool call task failed");
        Err(EngineError::Store(bdk_store::Error::Task("the tool call stopped unexpectedly".into())))
    })
}

/// The actor's half: admits a bound call by its effect while `busy` (a turn running or queued),
/// and answers on `reply`. A write on an idle session runs right here, holding the actor.
pub(crate) async fn admit(
    core: &Arc<Core>,
    session: &SessionId,
    busy: bool,
    call: BoundCall,
    reply: oneshot::Sender<Result<DirectOutcome>>,
) {
    match call.call.effect {
        Effect::Write if busy => {
            let _ = reply.send(Err(EngineError::SessionBusy(session.clone())));
        }
        Effect::Write => {
            let _ = reply.send(spawn(run_bound(core.clone(), session.clone(), call)).await);
        }
        Effect::Read => {
            let work = run_bound(core.clone(), session.clone(), call);
            tokio::spawn(async move {
                let _ = reply.send(work.await);
            });
        }
    }
}

/// A call bound to an existing session: its workspace (or, for a read, a scratch one), recorded
/// on its stream under a turnId of its own.
async fn run_bound(core: Arc<Core>, session: SessionId, bound: BoundCall) -> Result<DirectOutcome> {
    // Drain waits for this call's result to be durable, as for a turn.
    let _track = core.turns.token();
    let call = bound.call;
    let (workspace, scratch) = match core.stores.workspaces.session_workspace(&session).await {
        Ok(dir) => (dir, false),
        Err(bdk_store::Error::SessionNotFound(_)) => return Err(EngineError::SessionNotFound(session)),
        Err(error) => {
            tracing::warn!(%session, %error, tool = %call.tool, "the session workspace cannot be created");
            if call.effect == Effect::Write {
                return Err(EngineError::WorkspaceUnavailable(format!(
                    "the workspace of session {session} cannot be created, and `{}` is a write",
                    call.tool
                )));
            }
            (scratch_dir(&core, &call.call_id).await?, true)
        }
    };
    let turn = TurnId::generate();
    let requested = ActionsRequested {
        calls: vec![ActionCall {
            call_id: call.call_id.clone(),
            tool_name: call.tool.clone(),
            input: call.input.clone(),
        }],
        direct: Some(true),
    };
    core.stores
        .events
        .append(&session, vec![NewEvent::in_turn(turn.clone(), EventData::ActionsRequested(requested))])
        .await?;

    let invocation = ToolInvocation {
        session_id: Some(session.clone()),
        turn_id: Some(turn.clone()),
        workspace: Some(workspace),
        dry_run: bound.dry_run,
        as_of: bound.as_of,
        identity: call.identity.clone(),
        ..ToolInvocation::new(call.call_id.clone(), call.tool.clone(), call.input.clone())
    };
    let (outcome, duration_ms) = run(&core, invocation, None, call.depth).await;
    let result = ActionResult {
        call_id: call.call_id.clone(),
        tool_name: call.tool.clone(),
        is_error: outcome.is_error,
        result: outcome.result.clone(),
        duration_ms,
        stubbed: outcome.stubbed.then_some(true),
        direct: Some(true),
    };
    let written = core
        .stores
        .events
        .append(&session, vec![NewEvent::in_turn(turn.clone(), EventData::ActionResult(result))])
        .await;
    if scratch {
        remove_scratch(&core, &call.call_id).await;
    }
    core.release_if_idle(&session);
    written?;
    Ok(outcome_of(call, outcome, duration_ms, scratch, Some(session), Some(turn)))
}

/// A call with no session: a scratch workspace, removed afterwards (a native tool's only if it
/// made it: removing one never made is a failed `rmdir`).
async fn run_scratch(core: Arc<Core>, call: Checked, principal: Principal) -> Result<DirectOutcome> {
    let workspace = match call.kind {
        ToolKind::Native => core.stores.workspaces.call_workspace_path(&call.call_id),
        _ => scratch_dir(&core, &call.call_id).await?,
    };
    let mut guard = ScratchGuard { core: core.clone(), call: Some(call.call_id.clone()) };
    let invocation = ToolInvocation {
        workspace: Some(workspace),
        identity: call.identity.clone(),
        ..ToolInvocation::new(call.call_id.clone(), call.tool.clone(), call.input.clone())
    };
    let (outcome, duration_ms) = run(&core, invocation, Some(principal), call.depth).await;
    guard.call = None;
    remove_scratch(&core, &call.call_id).await;
    Ok(outcome_of(call, outcome, duration_ms, false, None, None))
}

/// Removes an unbound call's scratch folder if the call is dropped before it returns (its caller
/// went away); the call removes it itself otherwise.
struct ScratchGuard {
    core: Arc<Core>,
    call: Option<CallId>,
}

impl Drop for ScratchGuard {
    fn drop(&mut self) {
        let (Some(call), Ok(runtime)) = (self.call.take(), tokio::runtime::Handle::try_current()) else { return };
        let core = self.core.clone();
        runtime.spawn(async move { remove_scratch(&core, &call).await });
    }
}

/// Runs the tool under a child of the engine's token (drain cancels it), timing the body.
/// The call gets host services (`host.rs`) for as long as it runs; `principal` is who they act
/// for when no session is bound (a bound call acts for the session's owner).
async fn run(
    core: &Arc<Core>,
    mut invocation: ToolInvocation,
    principal: Option<Principal>,
    depth: u32,
) -> (ToolOutcome, u64) {
    let scope = HostScope { session_id: invocation.session_id.clone(), call_id: invocation.call_id.clone(), principal };
    let lease = HostLease::grant_at(core, scope, depth);
    lease.apply(&mut invocation);
    let started = Instant::now();
    let outcome = core.defs().tools.call(invocation, core.root.child_token()).await;
    (outcome, started.elapsed().as_millis() as u64)
}

async fn scratch_dir(core: &Core, call: &CallId) -> Result<PathBuf> {
    core.stores.workspaces.call_workspace(call).await.map_err(|error| {
        tracing::warn!(%call, %error, "a scratch workspace cannot be created");
        EngineError::WorkspaceUnavailable("a scratch workspace for the call cannot be created".into())
    })
}

async fn remove_scratch(core: &Core, call: &CallId) {
    if let Err(error) = core.stores.workspaces.remove_call_workspace(call).await {
        tracing::warn!(%call, %error, "could not remove a direct call's scratch workspace");
    }
}

fn outcome_of(
    call: Checked,
    outcome: ToolOutcome,
    duration_ms: u64,
    scratch: bool,
    session_id: Option<SessionId>,
    turn_id: Option<TurnId>,
) -> DirectOutcome {
    DirectOutcome {
        tool_name: call.tool,
        call_id: call.call_id,
        is_error: outcome.is_error,
        result: outcome.result,
        duration_ms,
        scratch_workspace: scratch,
        session_id,
        turn_id,
    }
}

/// Which session a continuation token is the current token of. Built from the session records on
/// first use, then kept current by the engine (`note` on every session created and every token
/// rotated); every hit is checked against the session's record, so a rotated-away or deleted
/// entry answers "no session" and is dropped.
#[derive(Debug, Default)]
pub(crate) struct TokenIndex {
    tokens: Mutex<HashMap<String, SessionId>>,
    loaded: OnceCell<()>,
}

impl TokenIndex {
    /// Records that `token` is now `session`'s token (the newest session wins a shared token).
    pub fn note(&self, token: &str, session: &SessionId) {
        self.map().insert(token.to_owned(), session.clone());
    }

    /// Records `session`'s new token in place of `old`: the index keeps one entry per session
    /// however many follow-ups rotate its token (a rotated-away token finds nothing either way).
    pub fn rotate(&self, old: Option<&str>, token: &str, session: &SessionId) {
        let mut map = self.map();
        if let Some(old) = old
            && map.get(old) == Some(session)
        {
            map.remove(old);
        }
        map.insert(token.to_owned(), session.clone());
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, SessionId>> {
        self.tokens.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The record of the session whose current token is `token`, if any.
    pub async fn find(&self, core: &Core, token: &str) -> Result<Option<SessionRecord>> {
        self.loaded
            .get_or_try_init(|| async {
                let records = core.stores.sessions.list().await?;
                let mut map = self.map();
                // Oldest first, so the newest session holding a token wins.
                for record in records {
                    if let Some(token) = record.continuation_token {
                        map.insert(token, record.id);
                    }
                }
                Ok::<(), EngineError>(())
            })
            .await?;
        let Some(id) = self.map().get(token).cloned() else { return Ok(None) };
        match core.stores.sessions.get(&id).await? {
            Some(record) if tokens::matches(record.continuation_token.as_deref(), token) => Ok(Some(record)),
            _ => {
                let mut map = self.map();
                if map.get(token) == Some(&id) {
                    map.remove(token);
                }
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bdk_protocol::SessionId;

    use super::TokenIndex;

    /// Every follow-up rotates an HTTP session's token: the index must not keep the old ones.
    #[test]
    fn a_rotated_token_replaces_the_old_one_in_the_index() {
        let index = TokenIndex::default();
        let (a, b) = (SessionId::generate(), SessionId::generate());
        index.note("t0", &a);
        index.note("shared", &b);
        for n in 1..100 {
            index.rotate(Some(&format!("t{}", n - 1)), &format!("t{n}"), &a);
        }
        // Another session's entry under the old token is left alone.
        index.rotate(Some("shared"), "t-a", &a);
        let map = index.map();
        assert_eq!(map.len(), 3, "{map:?}");
        assert_eq!(map.get("t99"), Some(&a));
        assert_eq!(map.get("shared"), Some(&b));
    }
}
