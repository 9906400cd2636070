//! Tools written in Rust and registered through the library: [`NativeTool`] with a typed input
//! whose JSON Schema `schemars` derives, the typed [`ToolContext`] a call gets (the same facts a
//! command reads from its `context` object and `BDK_*` environment), and the type-erased form the
//! registry stores. A native tool appears in `info` as `source: "native"`.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use std::{fs, io};

use bdk_project::formats::tool::DEFAULT_TIMEOUT;
use bdk_project::model::{Execution, Predicate, ToolBody, ToolDef};
use bdk_protocol::info::Source;
use bdk_protocol::{CallId, SessionId, TurnId};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{BoxFuture, CallIdentity, HostAccess, HostServices, ToolError, ToolInvocation};

/// What a native call knows about itself.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub call_id: CallId,
    pub session_id: Option<SessionId>,
    pub turn_id: Option<TurnId>,
    /// The path of the session workspace (a scratch folder `tool-calls/<callId>/` for a direct
    /// call with no session). A scratch folder is not created until the tool asks for it: use
    /// [`ToolContext::workspace`] to get a folder that exists.
    pub workspace: Option<PathBuf>,
    /// The agent's durable state root, shared by every session.
    pub state_root: Option<PathBuf>,
    pub dry_run: bool,
    pub as_of: Option<DateTime<Utc>>,
    /// The host services, scoped to this call's session.
    pub host: Option<HostAccess>,
    /// The channel conversation a direct call was made for (its continuation token).
    pub identity: Option<CallIdentity>,
    /// The host services in-process (kv, files, send, callTool), bound to this call's session
    /// and valid until the call returns. See [`ToolContext::services`].
    pub services: Option<Arc<dyn HostServices>>,
    /// The session's `purpose` (`"eval"` for eval sessions).
    pub purpose: Option<String>,
}

impl ToolContext {
    pub fn from_invocation(invocation: &ToolInvocation, state_root: Option<PathBuf>) -> Self {
        Self {
            call_id: invocation.call_id.clone(),
            session_id: invocation.session_id.clone(),
            turn_id: invocation.turn_id.clone(),
            workspace: invocation.workspace.clone(),
            state_root,
            dry_run: invocation.dry_run,
            as_of: invocation.as_of,
            host: invocation.host.clone(),
            identity: invocation.identity.clone(),
            services: invocation.services.clone(),
            purpose: invocation.purpose.clone(),
        }
    }

    /// This call's workspace folder, created if it does not exist yet. A direct call's scratch
    /// folder is made on first use, so a tool that never asks pays no `mkdir` for it; it is
    /// removed, with what the tool put there, when the call returns. `NotFound` when the call has
    /// no workspace.
    ///
    /// ```ignore
    /// let dir = ctx.workspace()?;
    /// std::fs::write(dir.join("notes.txt"), "scratch")?;
    /// ```
    pub fn workspace(&self) -> io::Result<&Path> {
        let dir = self
            .workspace
            .as_deref()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "this call has no workspace"))?;
        fs::create_dir_all(dir)?;
        Ok(dir)
    }

    /// The host services of this call (the reference's `ctx.host` and `ctx.send`), or an error
    /// the model can read when the engine running the call offers none:
    ///
    /// ```ignore
    /// let host = ctx.services()?;
    /// host.kv_put(Scope::Session, "seen".into(), json!(true)).await?;
    /// ```
    pub fn services(&self) -> Result<&dyn HostServices, ToolError> {
        self.services.as_deref().ok_or_else(|| ToolError::new("host services are not available to this call"))
    }
}

/// A tool implemented in Rust.
///
/// ```ignore
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Input { city: String }
///
/// struct Weather;
/// impl NativeTool for Weather {
///     type Input = Input;
///     fn name(&self) -> &str { "weather" }
///     fn description(&self) -> &str { "Read the current weather." }
///     fn effect(&self) -> Predicate { Predicate::Always(false) }
///     async fn call(&self, input: Input, _ctx: ToolContext) -> Result<Value, ToolError> {
///         Ok(serde_json::json!({ "city": input.city, "temperatureF": 72 }))
///     }
/// }
/// ```
pub trait NativeTool: Send + Sync + 'static {
    /// The input; its schema is derived and the JSON is validated against it before `call`.
    type Input: DeserializeOwned + JsonSchema + Send + 'static;

    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What the model reads before it chooses the tool.
    fn description(&self) -> &str;

    /// `Always(true)` (the default, as for an undeclared effect) is a write; `When(schema)` is a
    /// write when the input matches.
    fn effect(&self) -> Predicate {
        Predicate::Always(true)
    }

    /// Whether a call waits for a person (default: never).
    fn needs_approval(&self) -> Predicate {
        Predicate::Always(false)
    }

    /// What a dry-run session answers instead of running a write.
    fn dry_run_result(&self) -> Option<Value> {
        None
    }

    /// Input properties that carry time bounds (enforced under `asOf`).
    fn time_args(&self) -> Vec<String> {
        Vec::new()
    }

    fn timeout(&self) -> Duration {
        DEFAULT_TIMEOUT
    }

    /// The result shape, advertised to MCP clients (never enforced).
    fn output_schema(&self) -> Option<Value> {
        None
    }

    /// Runs the tool. `Err` is told to the model as an `isError` result.
    fn call(&self, input: Self::Input, ctx: ToolContext) -> impl Future<Output = Result<Value, ToolError>> + Send;
}

/// The JSON Schema `schemars` derives for `T`, trimmed for a model (no `$schema`/`title` at the
/// root). A schema that does not describe an object becomes `{"type": "object"}`.
pub fn input_schema_for<T: JsonSchema>() -> Value {
    let mut value = schemars::schema_for!(T).to_value();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
        let object = map.get("type").and_then(Value::as_str).is_none_or(|t| t == "object");
        if object && !map.is_empty() {
            return value;
        }
    }
    bdk_project::schema::any_object()
}

/// A native tool with its input type erased, as the registry stores it.
pub(crate) trait ErasedNative: Send + Sync {
    fn def(&self, cwd: PathBuf) -> ToolDef;
    fn call_value(&self, input: Value, ctx: ToolContext) -> BoxFuture<'static, Result<Value, ToolError>>;
}

pub(crate) struct Erased<T>(pub Arc<T>);

impl<T> fmt::Debug for Erased<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NativeTool")
    }
}

impl<T: NativeTool> ErasedNative for Erased<T> {
    fn def(&self, cwd: PathBuf) -> ToolDef {
        let tool = &self.0;
        ToolDef {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            source: Source::Native,
            file: None,
            execution: Execution::Server,
            effect_write: tool.effect(),
            needs_approval: tool.needs_approval(),
            input_schema: input_schema_for::<T::Input>(),
            output_schema: tool.output_schema(),
            dry_run_result: tool.dry_run_result(),
            time_args: tool.time_args(),
            timeout: tool.timeout(),
            body: ToolBody::Native,
            persistent: false,
            cwd,
        }
    }

    fn call_value(&self, input: Value, ctx: ToolContext) -> BoxFuture<'static, Result<Value, ToolError>> {
        let tool = Arc::clone(&self.0);
        Box::pin(async move {
            let input: T::Input =
                serde_json::from_value(input).map_err(|e| ToolError::new(format!("invalid input: {e}")))?;
            tool.call(input, ctx).await
        })
    }
}

/// Erases `tool` for storage in a registry.
pub(crate) fn erase<T: NativeTool>(tool: T) -> Arc<dyn ErasedNative> {
    Arc::new(Erased(Arc::new(tool)))
}

/// The [`ToolDef`] of a native tool, for callers that describe a project (`info` lists it with
/// `source: "native"`). `cwd` is the bot folder.
pub fn native_def<T: NativeTool>(tool: T, cwd: PathBuf) -> ToolDef {
    Erased(Arc::new(tool)).def(cwd)
}
