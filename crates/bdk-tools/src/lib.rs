//! The tool runtime. The engine holds an `Arc<dyn ToolRegistry>` and never names a concrete tool
//! kind; [`ProjectTools`] implements the trait for one agent's command, persistent, agent, native
//! and built-in tools. Policy the engine applies around a call (approvals, dry-run effects,
//! `asOf` time bounds) is answered here as pure functions in [`policy`] and as trait methods, so
//! the engine never compiles a schema itself. This crate never imports the engine.
//!
//! Map of the crate:
//! - [`command`]: one process per call, DESIGN.md §3 (JSON on stdin, JSON or text on stdout).
//! - [`persistent`]: one long-lived process per tool speaking NDJSON.
//! - [`validate`]: compiled input schemas and schema predicates.
//! - [`policy`]: effect, approval, dry-run stub, `time_args`.
//! - [`native`]: tools written in Rust ([`NativeTool`]).
//! - [`host`]: the host services a call reaches ([`HostServices`]: kv, files, send, callTool).
//! - [`builtins`]: read, ls, glob, grep, write, edit, shell on the session workspace.
//! - [`workspace`]: session workspace materialization and path confinement.
//! - [`registry`]: [`ProjectTools`], which puts them behind [`ToolRegistry`].

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use bdk_protocol::{CallId, SessionId, TurnId};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub mod builtins;
pub mod command;
pub mod contain;
mod error;
pub mod host;
pub mod native;
pub mod persistent;
pub mod policy;
mod process;
pub mod registry;
pub mod sandbox;
pub mod validate;
pub mod workspace;

pub use error::{Error, Result, ToolError};
pub use host::{HostError, HostServices, McpAccess, PeerConnector, ReminderAccess, ReminderCaller, Scope};
pub use native::{NativeTool, ToolContext};
pub use policy::Effect;
pub use registry::{ProjectTools, ProjectToolsBuilder, RegistryOptions, ToolInfo, ToolKind};

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool as the model sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
    /// JSON Schema of the result, advertised (never enforced) for MCP clients.
    pub output_schema: Option<Value>,
}

impl ToolSpec {
    pub fn new(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        Self { name: name.into(), description: description.into(), input_schema, output_schema: None }
    }
}

/// The host services a command reaches through `BDK_HOST_URL` with a token scoped to one call.
#[derive(Clone, PartialEq, Eq)]
pub struct HostAccess {
    pub url: String,
    pub token: String,
}

impl fmt::Debug for HostAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostAccess").field("url", &self.url).field("token", &"<redacted>").finish()
    }
}

/// Who a direct call acts for when it names a channel conversation (`<channelId>:<key>`), whether
/// or not a session exists for it yet: the tool sees them as `context.channel` and
/// `context.continuationKey`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallIdentity {
    pub channel: String,
    pub key: String,
}

/// One call, as the engine hands it to the registry.
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    pub call_id: CallId,
    pub name: String,
    pub input: Value,
    pub session_id: Option<SessionId>,
    pub turn_id: Option<TurnId>,
    /// The session workspace (or a scratch folder for direct calls).
    pub workspace: Option<PathBuf>,
    /// The session is a dry run: reads run, writes answer with a stub (`stubbed: true`).
    pub dry_run: bool,
    /// The session's frozen instant: `time_args` are enforced against it.
    pub as_of: Option<DateTime<Utc>>,
    /// Host services for this call (`BDK_HOST_URL` / `BDK_HOST_TOKEN`).
    pub host: Option<HostAccess>,
    /// The channel conversation a direct call was made for (its continuation token).
    pub identity: Option<CallIdentity>,
    /// The same host services in-process, for native tools ([`ToolContext::services`]).
    pub services: Option<std::sync::Arc<dyn HostServices>>,
    /// The session's `purpose` (`"eval"` for eval sessions), so host code can tell.
    pub purpose: Option<String>,
}

impl ToolInvocation {
    /// A call with no session, workspace, dry-run, `asOf` or host access.
    pub fn new(call_id: CallId, name: impl Into<String>, input: Value) -> Self {
        Self {
            call_id,
            name: name.into(),
            input,
            session_id: None,
            turn_id: None,
            workspace: None,
            dry_run: false,
            as_of: None,
            host: None,
            identity: None,
            services: None,
            purpose: None,
        }
    }

    /// [`ToolInvocation::new`] with a freshly generated call id.
    pub fn generate(name: impl Into<String>, input: Value) -> Self {
        let name = name.into();
        Self::new(CallId::generate(&name), name, input)
    }
}

/// What a call produced. `is_error` results are told to the model; they never fail the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub is_error: bool,
    /// A string is passed to the model verbatim; anything else is serialized as JSON.
    pub result: Value,
    /// The body did not run: a dry-run session answered a write with its stub.
    pub stubbed: bool,
}

impl ToolOutcome {
    pub fn ok(result: Value) -> Self {
        Self { is_error: false, result, stubbed: false }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self { is_error: true, result: Value::String(message.into()), stubbed: false }
    }

    /// A dry-run stub: not an error, marked stubbed.
    pub fn stub(result: Value) -> Self {
        Self { is_error: false, result, stubbed: true }
    }
}

/// The tools of one agent.
///
/// Only `specs` and `call` are required. The other methods answer the engine's and the direct-call
/// route's policy questions; their defaults describe a registry that declares nothing (every call
/// a write, no approvals, no `time_args`, no workspace to prepare).
pub trait ToolRegistry: Send + Sync + fmt::Debug {
    /// Every tool the model may call, in a stable order.
    fn specs(&self) -> Vec<ToolSpec>;

    /// Whether [`specs`](Self::specs) answers the same for as long as the registry lives. The
    /// engine then builds the model's tool list once per definitions snapshot and shares it
    /// across turns, instead of asking (and copying every schema) on each turn. A registry whose
    /// list can change (tools listed by others on [`refresh`](Self::refresh)) answers `false`.
    fn fixed_specs(&self) -> bool {
        false
    }

    /// Runs one call. Unknown names and invalid input are `is_error` outcomes, not panics.
    /// When `cancel` fires the call stops promptly and returns an error outcome.
    /// A dry-run invocation stubs writes; an invocation with `as_of` enforces `time_args`.
    fn call(&self, invocation: ToolInvocation, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome>;

    /// What the direct-call route and `info` need to know about one tool.
    fn lookup(&self, _name: &str) -> Option<ToolInfo> {
        None
    }

    /// Whether this call changes anything (undeclared = write). Decides dry-run stubbing and
    /// busy-session admission of direct calls.
    fn effect(&self, _name: &str, _input: &Value) -> Effect {
        Effect::Write
    }

    /// Whether this call must wait for a person before it runs (the engine parks it).
    fn needs_approval(&self, _name: &str, _input: &Value) -> bool {
        false
    }

    /// Checks `input` against the tool's input schema: `Err` lists readable errors
    /// (`/path: message`). Unknown tools are `Err` too.
    fn validate_input(&self, _name: &str, _input: &Value) -> std::result::Result<(), Vec<String>> {
        Ok(())
    }

    /// For a session created with `asOf`: why it must refuse to start (a `time_args` name absent
    /// from its tool's input schema), or `None`.
    fn time_args_refusal(&self) -> Option<String> {
        None
    }

    /// Names a direct call (`POST /v1/tools/:name`, `bdk call`) may run, in spec order.
    fn callable_names(&self) -> Vec<String> {
        Vec::new()
    }

    /// Prepares a session workspace before its first turn (skills, agent-tool scripts and their
    /// catalog, seeds) and writes per-send `files` (path → content) into it. Idempotent. Does
    /// blocking file IO: call it from `spawn_blocking`.
    fn prepare_workspace(&self, _workspace: &Path, _files: &[(String, String)]) -> Result<()> {
        Ok(())
    }

    /// Whether [`prepare_workspace`](Self::prepare_workspace) puts anything into a workspace
    /// besides per-send files. When it does not, a session's workspace folder is created only
    /// when a tool call or a send's files first need it. A registry that overrides
    /// `prepare_workspace` to materialize files must answer `true`.
    fn materializes_workspace(&self) -> bool {
        false
    }

    /// Lets tools that come from elsewhere (advertised MCP tools, listed by their server) load
    /// before [`specs`](Self::specs), `lookup` and the policy questions are asked: the engine
    /// awaits it before each turn's specs and before each direct call. Cheap once loaded.
    fn refresh(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// The MCP connections host code reaches through this registry's agent (`host.mcp`).
    fn mcp(&self) -> Option<std::sync::Arc<dyn McpAccess>> {
        None
    }

    /// Closes what the registry keeps running beyond one call (MCP servers): the host calls it
    /// once at shutdown, after the turns drained.
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A registry with no tools.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTools;

impl ToolRegistry for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    fn fixed_specs(&self) -> bool {
        true
    }

    fn call(&self, invocation: ToolInvocation, _cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        Box::pin(async move { ToolOutcome::error(format!("unknown tool `{}`", invocation.name)) })
    }

    fn validate_input(&self, name: &str, _input: &Value) -> std::result::Result<(), Vec<String>> {
        Err(vec![format!("unknown tool `{name}`")])
    }
}
