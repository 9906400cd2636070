//! The host services a tool call reaches (DESIGN.md §3; the reference's `ctx.host` and
//! `ctx.send`): `host.kv`, `host.files`, `send` (start or resume a session on a channel) and
//! `callTool`. [`HostServices`] is the typed interface, already bound to one call's session: the
//! engine implements it, native tools get it in their [`ToolContext`](crate::ToolContext), and
//! the server serves the same methods over HTTP to commands (`BDK_HOST_URL` + `BDK_HOST_TOKEN`).
//!
//! Data comes in two [`Scope`]s. `session` (the default) is the calling session's own kv and
//! files: no call of another session can read or write it. `agent` is shared by every session of
//! the agent, as the reference's `host.kv` and `host.files` are. This module defines the shapes;
//! it stores nothing and decides nothing.

use std::fmt;
use std::sync::Arc;

use bdk_protocol::{CallId, SessionId, TurnId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{BoxFuture, ToolError};

/// Whose data a kv or files request reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The calling session's own data (removed with the session). A call without a session
    /// has none: `no_session`.
    #[default]
    Session,
    /// Shared by every session of the agent.
    Agent,
}

/// One file of a files area.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// Relative to the area, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// `send`: start a chat session on `channel`, or resume the one `continuation_key` names there
/// (its token is `<channel>:<key>`). The new session belongs to the calling session's principal.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendRequest {
    pub channel: String,
    pub message: String,
    #[serde(default)]
    pub continuation_key: Option<String>,
    /// The title of a session this send creates.
    #[serde(default)]
    pub title: Option<String>,
    /// What the message does to a busy session it continues: `"coalesce"` (the default: run
    /// after the running turn) or `"preempt"` (interrupt it).
    #[serde(default)]
    pub admission: Option<String>,
}

/// What `send` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SendOutcome {
    pub session_id: SessionId,
    pub continuation_token: String,
    /// The turn that runs the message (`None` when it joined a running turn's follow-up).
    pub turn_id: Option<TurnId>,
    /// Whether a new session was started (else an existing one was resumed).
    pub created: bool,
}

/// What `callTool` returns: the direct-call envelope (`POST /v1/tools/:name`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallOutcome {
    pub tool_name: String,
    pub call_id: CallId,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
}

/// Who a set of host services acts for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostIdentity {
    /// The calling session (`None` for a direct call bound to none).
    pub session_id: Option<SessionId>,
    /// The tool call the services were granted to.
    pub call_id: CallId,
}

/// What kind of failure a [`HostError`] is; the HTTP layer maps it to a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostErrorKind {
    /// The request is malformed (bad key, path escape, empty message). HTTP 400.
    Invalid,
    /// The call these services were granted to has returned. HTTP 401.
    Revoked,
    /// Not this caller's to touch. HTTP 403.
    Forbidden,
    /// No such thing (tool, session). HTTP 404.
    NotFound,
    /// The state does not allow it now (busy session, stale token). HTTP 409.
    Conflict,
    /// The host is shutting down. HTTP 503.
    Unavailable,
    /// Storage or another internal failure. HTTP 500.
    Internal,
}

/// A failed host request: a stable code (`{ok:false, error: <code>}` on the wire) and a message
/// safe to show the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    pub kind: HostErrorKind,
    pub code: &'static str,
    pub message: String,
}

impl HostError {
    pub fn new(kind: HostErrorKind, code: &'static str, message: impl Into<String>) -> Self {
        Self { kind, code, message: message.into() }
    }

    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(HostErrorKind::Invalid, code, message)
    }

    /// The call these services were granted to has returned.
    pub fn revoked() -> Self {
        Self::new(
            HostErrorKind::Revoked,
            "unauthorized",
            "the host token is no longer valid: its tool call has returned",
        )
    }

    /// A session-scoped request from a call bound to no session.
    pub fn no_session() -> Self {
        Self::invalid("no_session", "this call is not bound to a session; use scope \"agent\"")
    }
}

impl From<HostError> for ToolError {
    fn from(error: HostError) -> Self {
        ToolError::new(error.message)
    }
}

pub type HostResult<T> = std::result::Result<T, HostError>;

/// The host services of one tool call, bound to its session. Every method fails with
/// [`HostError::revoked`] once the call has returned.
pub trait HostServices: Send + Sync + fmt::Debug {
    /// Who these services act for.
    fn identity(&self) -> &HostIdentity;

    fn kv_get(&self, scope: Scope, key: String) -> BoxFuture<'_, HostResult<Option<Value>>>;

    fn kv_put(&self, scope: Scope, key: String, value: Value) -> BoxFuture<'_, HostResult<()>>;

    /// `true` if the key existed.
    fn kv_delete(&self, scope: Scope, key: String) -> BoxFuture<'_, HostResult<bool>>;

    /// Keys starting with `prefix`, sorted.
    fn kv_list(&self, scope: Scope, prefix: String) -> BoxFuture<'_, HostResult<Vec<String>>>;

    /// The file's bytes, or `None` when there is none. Paths are relative and `/`-separated;
    /// one that would leave the area is `invalid_path`.
    fn file_read(&self, scope: Scope, path: String) -> BoxFuture<'_, HostResult<Option<Vec<u8>>>>;

    fn file_write(&self, scope: Scope, path: String, bytes: Vec<u8>) -> BoxFuture<'_, HostResult<()>>;

    /// `true` if the file existed.
    fn file_delete(&self, scope: Scope, path: String) -> BoxFuture<'_, HostResult<bool>>;

    /// Files whose path starts with `prefix`, sorted by path.
    fn file_list(&self, scope: Scope, prefix: String) -> BoxFuture<'_, HostResult<Vec<FileEntry>>>;

    /// Starts or resumes a session on a channel, as the calling session's principal.
    fn send(&self, request: SendRequest) -> BoxFuture<'_, HostResult<SendOutcome>>;

    /// Calls a server tool directly, bound to the calling session.
    fn call_tool(&self, name: String, input: Value) -> BoxFuture<'_, HostResult<CallOutcome>>;

    /// Tags (creates or updates by kind and key) an artifact owned by the calling session's
    /// principal: `{kind?, key, title?, data?, path? | content?, contentType?}`, `path` being a
    /// file of the session workspace. Answers the stored record. Hosts without artifacts answer
    /// `artifacts_unavailable`.
    fn artifact_tag(&self, _request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async { Err(HostError::invalid("artifacts_unavailable", "this host keeps no artifacts")) })
    }

    /// The caller's artifacts, newest first: `{kind?, sessionId?, limit?}`.
    fn artifact_list(&self, _query: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async { Err(HostError::invalid("artifacts_unavailable", "this host keeps no artifacts")) })
    }
    /// The agent's MCP connections (`host.mcp`), when it has any.
    fn mcp(&self) -> Option<std::sync::Arc<dyn McpAccess>> {
        None
    }

    /// Records a metric of host code (`host.otel`): `{name, kind: "counter" | "histogram" |
    /// "gauge", value, attributes?: {k: string}}`. Answers `{recorded}`: `false` when the host
    /// exports no telemetry (the call still succeeds, so tools need not check).
    fn otel_metric(&self, _request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async { Ok(serde_json::json!({ "recorded": false })) })
    }

    /// Tags the calling session (`host.otel`): `{key, value}`. The session's later turn spans
    /// carry the tag. Answers `{recorded}` as [`HostServices::otel_metric`] does.
    fn otel_tag(&self, _request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async { Ok(serde_json::json!({ "recorded": false })) })
    }

    /// Arms a reminder on the calling session's conversation (`host.reminders.create`): exactly
    /// one of `delay`, `every`, `cron`, `at`, and a `prompt` (with `until`) or a named `handler`
    /// (with `args`), as `POST /v1/host/reminders/create` takes. A call bound to no session (a
    /// schedule's `run`) names the conversation with `continuationToken`; its principal must own
    /// it. Answers the stored record. Hosts without reminders answer `reminders_unavailable`.
    fn reminder_create(&self, _request: Value) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async { Err(reminders_unavailable()) })
    }

    /// The calling session's reminders, oldest first (`host.reminders.list`); for a call bound
    /// to no session, those of every conversation its principal owns.
    fn reminder_list(&self) -> BoxFuture<'_, HostResult<Vec<Value>>> {
        Box::pin(async { Err(reminders_unavailable()) })
    }

    /// Cancels one of the calling session's reminders by id (for a call bound to no session, one
    /// of its principal's); answers its record (a cancelled reminder never fires again). Anyone
    /// else's reminder is `reminder_not_found`.
    fn reminder_cancel(&self, _id: String) -> BoxFuture<'_, HostResult<Value>> {
        Box::pin(async { Err(reminders_unavailable()) })
    }
}

/// What a host without reminders answers.
pub fn reminders_unavailable() -> HostError {
    HostError::invalid("reminders_unavailable", "this host runs no reminders")
}

/// Whose reminders a host call reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReminderCaller {
    /// A call bound to a session: that conversation's reminders only.
    Session(SessionId),
    /// A call bound to no session that acts for a principal (a schedule's `run` acts as
    /// `schedule:<id>`): the reminders of the conversations that principal owns. `create` names
    /// the conversation by its `continuationToken`.
    Principal(String),
}

/// One agent's reminders as the host services reach them, for one caller per request. The
/// engine implements it over its reminders (with their validation); the host services of a
/// tool call forward to it with the call's session, or its principal when it has none.
pub trait ReminderAccess: Send + Sync + fmt::Debug {
    fn create(&self, caller: ReminderCaller, request: Value) -> BoxFuture<'_, HostResult<Value>>;

    fn list(&self, caller: ReminderCaller) -> BoxFuture<'_, HostResult<Vec<Value>>>;

    fn cancel(&self, caller: ReminderCaller, id: String) -> BoxFuture<'_, HostResult<Value>>;
}

/// One MCP server a host caller can reach (`host.mcp.names()`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerInfo {
    pub name: String,
    /// `model` (mcp-connections/) or `host` (host-connections/).
    pub scope: String,
    /// `stdio`, `http` or `agent`.
    pub transport: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One tool of an MCP server, as the server lists it (after the connection's allow/deny lists).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The server annotates it read-only (`readOnlyHint`).
    pub read_only: bool,
}

/// What one MCP tool call returned: the MCP result's content, `structuredContent` and `isError`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpCallResult {
    pub is_error: bool,
    pub content: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

/// The MCP connections host code reaches (`host.mcp`: names, listTools, callTool), model and
/// host connections alike. Implemented by the MCP client crate; the engine hands it to tool calls.
pub trait McpAccess: Send + Sync + fmt::Debug {
    /// Every connection, in name order.
    fn servers(&self) -> Vec<McpServerInfo>;

    /// The tools `server` offers (starting it if it is not running).
    fn list_tools(&self, server: String) -> BoxFuture<'_, HostResult<Vec<McpToolInfo>>>;

    /// Calls `tool` on `server` with `arguments` (an object).
    fn call(&self, server: String, tool: String, arguments: Value) -> BoxFuture<'_, HostResult<McpCallResult>>;

    /// Gives these connections the in-process peers of the host that mounted them (what an
    /// `agent = "<slug>"` connection reaches). The host calls it once its agents are mounted; a
    /// later call replaces an earlier one. Without such connections there is nothing to do.
    fn attach_peers(&self, peers: Arc<dyn PeerConnector>) {
        let _ = peers;
    }
}

/// Opens in-process MCP sessions with the agents mounted in the same host (`agent = "<slug>"`).
/// Implemented by the server; [`McpAccess::attach_peers`] hands it to an agent's connections.
pub trait PeerConnector: Send + Sync + fmt::Debug {
    /// One end of a new in-process session with agent `slug`'s `/v1/mcp` server, or `None`
    /// when no agent of that slug is mounted.
    fn connect(&self, slug: &str) -> Option<tokio::io::DuplexStream>;
}
