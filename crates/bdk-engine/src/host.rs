//! Host services for tool calls (DESIGN.md §3): the engine's implementation of
//! [`bdk_tools::HostServices`] (kv, files, send, callTool) bound to one call's session, and the
//! lease that gives a call those services for exactly as long as it runs.
//!
//! Two transports reach the same implementation. A native tool gets it in-process
//! (`ToolInvocation::services`). A command gets `BDK_HOST_URL` and `BDK_HOST_TOKEN` from a
//! [`HostAuthority`] (the server's token table; the engine never names it), and the server's
//! host routes resolve the token back to a [`HostScope`] and call
//! [`Engine::host_services`](crate::Engine::host_services).
//! Dropping the lease — the call returned, was cancelled or its task aborted — revokes the token
//! and turns the in-process services inert, so neither outlives the call.
//!
//! Scoping: `session` data is keyed by the scope's session id, which only the engine sets, so
//! no request can name another session's data. `agent` data is the agent-wide store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bdk_protocol::CallId;
use bdk_store::DataScope;
use bdk_tools::host::{CallOutcome, FileEntry, HostErrorKind, HostIdentity, HostResult, SendOutcome, SendRequest};
use bdk_tools::{BoxFuture, HostAccess, HostError, HostServices, Scope, ToolInvocation};
use serde_json::{Value, json};

use crate::direct::DirectCall;
use crate::engine::Core;
use crate::error::EngineError;
use crate::types::{Admission, Principal};

/// Who an unbound `callTool` acts for when its grant names no principal.
const HOST_PRINCIPAL: &str = "host";

pub use crate::types::{HostAuthority, HostScope};

/// How deep `callTool` may nest: a call made by a tool made by a tool ... this many levels
/// below the model's (or a direct) call. One more is refused with `call_depth_exceeded`.
pub const MAX_CALL_DEPTH: u32 = 8;

/// The engine's host-service state: the authority and the lock that makes `send` with a
/// continuation key find-or-create atomically.
#[derive(Debug, Default)]
pub(crate) struct HostState {
    pub authority: Option<Arc<dyn HostAuthority>>,
    pub(crate) send_lock: tokio::sync::Mutex<()>,
    /// How many `callTool`s deep each running nested call is (absent: 0).
    depths: std::sync::Mutex<HashMap<CallId, u32>>,
}

impl HostState {
    pub fn new(authority: Option<Arc<dyn HostAuthority>>) -> Self {
        Self { authority, send_lock: tokio::sync::Mutex::new(()), depths: Default::default() }
    }

    fn depth_of(&self, call: &CallId) -> u32 {
        self.depths.lock().ok().and_then(|depths| depths.get(call).copied()).unwrap_or(0)
    }
}

/// A call's host services, held for as long as the call runs. Dropping it revokes them.
#[derive(Debug)]
pub(crate) struct HostLease {
    access: Option<HostAccess>,
    authority: Option<Arc<dyn HostAuthority>>,
    services: Arc<EngineHost>,
    /// Set when the call is nested (`callTool`): its entry in the depth table.
    nested: Option<(Weak<Core>, CallId)>,
}

impl HostLease {
    /// Grants host services to the call `scope` names.
    pub fn grant(core: &Arc<Core>, scope: HostScope) -> Self {
        Self::grant_at(core, scope, 0)
    }

    /// [`HostLease::grant`] for a call made `depth` `callTool`s deep.
    pub fn grant_at(core: &Arc<Core>, scope: HostScope, depth: u32) -> Self {
        let nested = (depth > 0).then(|| {
            if let Ok(mut depths) = core.host.depths.lock() {
                depths.insert(scope.call_id.clone(), depth);
            }
            (Arc::downgrade(core), scope.call_id.clone())
        });
        let authority = core.host.authority.clone();
        let access = authority.as_ref().and_then(|authority| authority.grant(&scope));
        let services = Arc::new(EngineHost::new(Arc::downgrade(core), scope));
        HostLease { access, authority, services, nested }
    }

    /// Sets the invocation's `host` (for commands) and `services` (for native tools).
    pub fn apply(&self, invocation: &mut ToolInvocation) {
        invocation.host = self.access.clone();
        invocation.services = Some(self.services.clone());
    }
}

impl Drop for HostLease {
    fn drop(&mut self) {
        self.services.live.store(false, Ordering::SeqCst);
        if let (Some(authority), Some(access)) = (&self.authority, &self.access) {
            authority.revoke(access);
        }
        if let Some((core, call)) = self.nested.take()
            && let Some(core) = core.upgrade()
            && let Ok(mut depths) = core.host.depths.lock()
        {
            depths.remove(&call);
        }
    }
}

/// The host services for `scope` ([`Engine::host_services`](crate::Engine::host_services)).
pub(crate) fn services(core: &Arc<Core>, scope: HostScope) -> Arc<dyn HostServices> {
    Arc::new(EngineHost::new(Arc::downgrade(core), scope))
}

/// [`HostServices`] bound to one scope.
#[derive(Debug)]
pub(crate) struct EngineHost {
    core: Weak<Core>,
    scope: HostScope,
    identity: HostIdentity,
    /// Cleared when the lease is dropped.
    live: AtomicBool,
}

impl EngineHost {
    fn new(core: Weak<Core>, scope: HostScope) -> Self {
        let identity = HostIdentity { session_id: scope.session_id.clone(), call_id: scope.call_id.clone() };
        EngineHost { core, scope, identity, live: AtomicBool::new(true) }
    }

    /// The engine, if this grant is still live and the engine still exists.
    fn core(&self) -> HostResult<Arc<Core>> {
        if !self.live.load(Ordering::SeqCst) {
            return Err(HostError::revoked());
        }
        self.core
            .upgrade()
            .ok_or_else(|| HostError::new(HostErrorKind::Unavailable, "shutting_down", "the host is shutting down"))
    }

    fn data_scope(&self, scope: Scope) -> HostResult<DataScope> {
        match (scope, &self.scope.session_id) {
            (Scope::Agent, _) => Ok(DataScope::Agent),
            (Scope::Session, Some(id)) => Ok(DataScope::Session(id.clone())),
            (Scope::Session, None) => Err(HostError::no_session()),
        }
    }

    /// The principal `send` acts as: the scope's, else the calling session's owner.
    async fn principal(&self, core: &Core) -> HostResult<Principal> {
        if let Some(principal) = &self.scope.principal {
            return Ok(principal.clone());
        }
        let Some(id) = &self.scope.session_id else {
            return Err(HostError::new(HostErrorKind::Forbidden, "forbidden", "this call acts for no principal"));
        };
        match core.stores.sessions.get(id).await.map_err(store_error)? {
            Some(record) => Ok(Principal::new(record.principal)),
            None => {
                Err(HostError::new(HostErrorKind::NotFound, "session_not_found", format!("session {id} not found")))
            }
        }
    }

    async fn send_now(&self, request: SendRequest) -> HostResult<SendOutcome> {
        let core = self.core()?;
        let principal = self.principal(&core).await?;
        if request.channel == "http" && request.continuation_key.is_some() {
            return Err(HostError::invalid(
                "invalid_request",
                "the http channel takes no continuation key; name a channel (e.g. \"ops\")",
            ));
        }
        // A dry-run session's sends start dry-run sessions.
        let dry_run = match &self.scope.session_id {
            Some(id) => core.stores.sessions.get(id).await.map_err(store_error)?.is_some_and(|r| r.dry_run),
            None => false,
        };
        let admission = match request.admission.as_deref() {
            None | Some("coalesce") => Admission::Coalesce,
            Some("preempt") => Admission::Preempt,
            Some(other) => {
                return Err(HostError::invalid(
                    "invalid_request",
                    format!("admission must be \"coalesce\" or \"preempt\", not {other:?}"),
                ));
            }
        };
        let send = crate::channel_send::ChannelSend {
            channel: request.channel,
            message: request.message,
            principal,
            continuation_key: request.continuation_key,
            title: request.title,
            // By default a send never interrupts a running turn (it may be the caller's own).
            admission,
            dry_run,
            purpose: None,
        };
        crate::channel_send::send(&core, send).await.map_err(engine_error)
    }

    /// Bound to the calling session, the call runs as part of the caller (`direct::call_nested`);
    /// with no session, as an unbound direct call in a scratch workspace.
    async fn call_tool_now(&self, name: String, input: Value) -> HostResult<CallOutcome> {
        let core = self.core()?;
        let depth = core.host.depth_of(&self.scope.call_id) + 1;
        if depth > MAX_CALL_DEPTH {
            return Err(HostError::new(
                HostErrorKind::Conflict,
                "call_depth_exceeded",
                format!("`callTool` nests at most {MAX_CALL_DEPTH} calls deep; `{name}` would be call {depth}"),
            ));
        }
        let outcome = match &self.scope.session_id {
            Some(session) => crate::direct::call_nested(&core, session.clone(), name, input, depth).await,
            None => {
                let principal = self.scope.principal.clone().unwrap_or_else(|| Principal::new(HOST_PRINCIPAL));
                crate::direct::call_tool_at(&core, DirectCall::new(name, input, principal), depth).await
            }
        }
        .map_err(engine_error)?;
        Ok(CallOutcome {
            tool_name: outcome.tool_name,
            call_id: outcome.call_id,
            is_error: outcome.is_error,
            result: outcome.result,
            duration_ms: outcome.duration_ms,
        })
    }
}

impl HostServices for EngineHost {
    fn identity(&self) -> &HostIdentity {
        &self.identity
    }

    fn mcp(&self) -> Option<Arc<dyn bdk_tools::McpAccess>> {
        self.core().ok()?.defs().tools.mcp()
    }

    fn otel_metric(&self, request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async move {
            let core = self.core()?;
            crate::telemetry::host_metric(&core.telemetry, &request).map(|recorded| json!({ "recorded": recorded }))
        })
    }

    fn otel_tag(&self, request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async move {
            let core = self.core()?;
            let Some(session) = &self.scope.session_id else {
                return Err(HostError::invalid("no_session", "this call has no session to tag"));
            };
            crate::telemetry::host_tag(&core.telemetry, session, &request)
                .map(|recorded| json!({ "recorded": recorded }))
        })
    }

    fn kv_get(&self, scope: Scope, key: String) -> BoxFuture<'_, HostResult<Option<Value>>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.kv_get(&scope, &key).await.map_err(store_error)
        })
    }

    fn kv_put(&self, scope: Scope, key: String, value: Value) -> BoxFuture<'_, HostResult<()>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.kv_put(&scope, &key, value).await.map_err(store_error)
        })
    }

    fn kv_delete(&self, scope: Scope, key: String) -> BoxFuture<'_, HostResult<bool>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.kv_delete(&scope, &key).await.map_err(store_error)
        })
    }

    fn kv_list(&self, scope: Scope, prefix: String) -> BoxFuture<'_, HostResult<Vec<String>>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.kv_keys(&scope, &prefix).await.map_err(store_error)
        })
    }

    fn file_read(&self, scope: Scope, path: String) -> BoxFuture<'_, HostResult<Option<Vec<u8>>>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.file_read(&scope, &path).await.map_err(store_error)
        })
    }

    fn file_write(&self, scope: Scope, path: String, bytes: Vec<u8>) -> BoxFuture<'_, HostResult<()>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.file_write(&scope, &path, bytes).await.map_err(store_error)
        })
    }

    fn file_delete(&self, scope: Scope, path: String) -> BoxFuture<'_, HostResult<bool>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            core.stores.data.file_delete(&scope, &path).await.map_err(store_error)
        })
    }

    fn file_list(&self, scope: Scope, prefix: String) -> BoxFuture<'_, HostResult<Vec<FileEntry>>> {
        Box::pin(async move {
            let (core, scope) = (self.core()?, self.data_scope(scope)?);
            let files = core.stores.data.file_list(&scope, &prefix).await.map_err(store_error)?;
            Ok(files.into_iter().map(|f| FileEntry { path: f.path, size: f.size }).collect())
        })
    }

    fn send(&self, request: SendRequest) -> BoxFuture<'_, HostResult<SendOutcome>> {
        Box::pin(self.send_now(request))
    }

    fn call_tool(&self, name: String, input: Value) -> BoxFuture<'_, HostResult<CallOutcome>> {
        Box::pin(self.call_tool_now(name, input))
    }

    fn artifact_tag(&self, request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(self.artifact_tag_now(request))
    }

    fn artifact_list(&self, query: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(self.artifact_list_now(query))
    }

    fn reminder_create(&self, request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async move {
            let (reminders, caller) = self.reminders()?;
            reminders.create(caller, request).await
        })
    }

    fn reminder_list(&self) -> BoxFuture<'_, HostResult<Vec<Value>>> {
        Box::pin(async move {
            let (reminders, caller) = self.reminders()?;
            reminders.list(caller).await
        })
    }

    fn reminder_cancel(&self, id: String) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async move {
            let (reminders, caller) = self.reminders()?;
            reminders.cancel(caller, id).await
        })
    }
}

/// `host.artifacts.list` filters.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArtifactListQuery {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    session_id: Option<bdk_protocol::SessionId>,
    #[serde(default)]
    limit: Option<usize>,
}

impl EngineHost {
    /// The agent's reminders and whose they are to this call: the calling session's, or, for a
    /// call bound to no session that acts for a principal (a schedule's `run`), that principal's.
    fn reminders(&self) -> HostResult<(Arc<dyn bdk_tools::ReminderAccess>, bdk_tools::ReminderCaller)> {
        use bdk_tools::ReminderCaller;
        let core = self.core()?;
        let caller = match (&self.scope.session_id, &self.scope.principal) {
            (Some(session), _) => ReminderCaller::Session(session.clone()),
            (None, Some(principal)) => ReminderCaller::Principal(principal.as_str().to_owned()),
            (None, None) => {
                return Err(HostError::invalid(
                    "invalid_request",
                    "reminders belong to a conversation; this call has no session and acts for no principal",
                ));
            }
        };
        let reminders = core.reminder_access().ok_or_else(bdk_tools::host::reminders_unavailable)?;
        Ok((reminders, caller))
    }

    /// Tags as the calling session's owner; the session's stream records `artifact.tagged`.
    async fn artifact_tag_now(&self, request: Value) -> HostResult<Value> {
        let core = self.core()?;
        let request: crate::artifacts::TagRequest = strict(request, "invalid artifact tag")?;
        let principal = match self.principal(&core).await {
            Ok(principal) => principal,
            Err(_) if self.scope.session_id.is_none() => Principal::new(HOST_PRINCIPAL),
            Err(error) => return Err(error),
        };
        let workspace = match &self.scope.session_id {
            Some(id) => Some(core.stores.workspaces.session_workspace(id).await.map_err(store_error)?),
            None => None,
        };
        let defs = core.defs();
        let tagger = crate::artifacts::Tagger {
            store: core.artifact_store.as_ref(),
            spec: &defs.capabilities.artifacts,
            principal: principal.as_str().to_owned(),
            session: self.scope.session_id.clone(),
            workspace: workspace.as_deref(),
            source: crate::artifacts::SOURCE_HOST,
        };
        let tagged = crate::artifacts::tag(tagger, request)
            .await
            .map_err(|message| HostError::invalid("invalid_artifact", message))?;
        if let Some(session) = &self.scope.session_id {
            let event = bdk_store::NewEvent::new(crate::artifacts::tagged_event(&tagged.record));
            core.stores.events.append(session, vec![event]).await.map_err(store_error)?;
        }
        Ok(serde_json::json!({ "artifact": tagged.record, "created": tagged.created }))
    }

    async fn artifact_list_now(&self, query: Value) -> HostResult<Value> {
        let core = self.core()?;
        let query: ArtifactListQuery = strict(query, "invalid artifact query")?;
        let principal = match self.principal(&core).await {
            Ok(principal) => principal,
            Err(_) if self.scope.session_id.is_none() => Principal::new(HOST_PRINCIPAL),
            Err(error) => return Err(error),
        };
        let query = bdk_store::ArtifactQuery {
            principal: None,
            kind: query.kind,
            session_id: query.session_id,
            limit: query.limit,
        };
        let records = crate::artifacts::list(&core, &crate::types::ListScope::Owner(principal), query)
            .await
            .map_err(engine_error)?;
        Ok(serde_json::json!({ "artifacts": records }))
    }
}

/// A request body as `T` (whose unknown fields are refused): an unknown field names itself and
/// the accepted ones; a value of the wrong type is named by its path, as the HTTP API's bodies.
fn strict<T: serde::de::DeserializeOwned>(body: Value, what: &str) -> HostResult<T> {
    serde_path_to_error::deserialize(body).map_err(|err| {
        let path = err.path().to_string();
        let err = err.into_inner();
        let message = if path == "." || err.to_string().starts_with("unknown field") {
            format!("{what}: {err}")
        } else {
            format!("{what}: field `{path}`: {err}")
        };
        HostError::invalid("invalid_request", message)
    })
}

/// A store failure as the caller sees it: bad keys and paths are the caller's, anything else is
/// logged and answered generically.
fn store_error(error: bdk_store::Error) -> HostError {
    match error {
        bdk_store::Error::InvalidKey { .. } => HostError::invalid("invalid_key", error.to_string()),
        bdk_store::Error::InvalidPath { .. } => HostError::invalid("invalid_path", error.to_string()),
        bdk_store::Error::SessionNotFound(_) => {
            HostError::new(HostErrorKind::NotFound, "session_not_found", error.to_string())
        }
        other => engine_error(EngineError::Store(other)),
    }
}

pub(crate) fn engine_error(error: EngineError) -> HostError {
    let kind = match &error {
        EngineError::SessionNotFound(_) | EngineError::UnknownTool { .. } => HostErrorKind::NotFound,
        EngineError::Forbidden(_) => HostErrorKind::Forbidden,
        EngineError::StaleToken(_) | EngineError::SessionBusy(_) | EngineError::NotFollowable(_) => {
            HostErrorKind::Conflict
        }
        EngineError::Draining => HostErrorKind::Unavailable,
        EngineError::InvalidRequest(_) => HostErrorKind::Invalid,
        EngineError::WorkspaceUnavailable(_) => HostErrorKind::Internal,
        EngineError::Store(detail) => {
            tracing::error!(error = %detail, "host service storage failure");
            return HostError::new(HostErrorKind::Internal, "internal_error", "internal error; see the server log");
        }
        _ => HostErrorKind::Invalid,
    };
    HostError::new(kind, error.code(), error.to_string())
}
