//! The tool registry seen by the engine: what the model may call and how a call is run. The
//! engine holds an `Arc<dyn ToolRegistry>` and never names a concrete tool kind; command, native,
//! MCP and built-in tools (the tool-runtime work) implement it. This crate never imports the
//! engine.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

use bdk_protocol::{CallId, SessionId, TurnId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
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
}

/// What a call produced. `is_error` results are told to the model; they never fail the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub is_error: bool,
    /// A string is passed to the model verbatim; anything else is serialized as JSON.
    pub result: Value,
}

impl ToolOutcome {
    pub fn ok(result: Value) -> Self {
        Self { is_error: false, result }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Self { is_error: true, result: Value::String(message.into()) }
    }
}

/// The tools of one agent.
pub trait ToolRegistry: Send + Sync + fmt::Debug {
    /// Every tool the model may call, in a stable order.
    fn specs(&self) -> Vec<ToolSpec>;

    /// Runs one call. Unknown names and invalid input are `is_error` outcomes, not panics.
    /// When `cancel` fires the call stops promptly and returns an error outcome.
    fn call(&self, invocation: ToolInvocation, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome>;
}

/// A registry with no tools.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTools;

impl ToolRegistry for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    fn call(&self, invocation: ToolInvocation, _cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        Box::pin(async move { ToolOutcome::error(format!("unknown tool `{}`", invocation.name)) })
    }
}
