//! [`McpTools`]: an agent's registry with its MCP connections added. Tools of a connection with
//! `advertise_tools` reach the model under their own names (`ns__tool` inside an extension),
//! with the server's schemas; a read-only annotation makes them read-effect (dry-run runs them,
//! a busy session admits a direct call). Every other model connection is reached through one
//! built-in `mcp` tool that lists servers, lists a server's tools, and calls one. Host
//! connections never appear here.
//!
//! The advertised list is loaded by [`ToolRegistry::refresh`] (which opens those servers): a
//! server that cannot open leaves its tools out of that turn, and is tried again next turn.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bdk_project::model::{Advertise, ConnectionScope};
use bdk_protocol::info::Source;
use bdk_tools::policy::DEFAULT_DRY_RUN_RESULT;
use bdk_tools::{BoxFuture, Effect, ToolInfo, ToolInvocation, ToolKind, ToolOutcome, ToolRegistry, ToolSpec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::convert;
use crate::hub::{McpHub, ServerTool, transport_name};

/// The name of the built-in tool that reaches connections that do not advertise their tools.
pub const MCP_TOOL: &str = "mcp";

/// One advertised tool: the name the model calls it by, its server, and what the server said.
#[derive(Debug, Clone)]
struct Advertised {
    model_name: String,
    server: String,
    tool: ServerTool,
    timeout: Duration,
}

/// A registry plus the agent's MCP connections.
pub struct McpTools {
    inner: Arc<dyn ToolRegistry>,
    hub: McpHub,
    advertised: RwLock<Vec<Advertised>>,
    /// Whether the `mcp` tool is offered (some model connection does not advertise all).
    mcp_tool: bool,
}

impl fmt::Debug for McpTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTools").field("inner", &self.inner).field("hub", &self.hub).finish_non_exhaustive()
    }
}

impl McpTools {
    /// `inner` plus `hub`'s model connections. With no model connection this adds nothing.
    pub fn new(inner: Arc<dyn ToolRegistry>, hub: McpHub) -> Self {
        let mcp_tool = hub.model_defs().any(|d| d.advertise != Advertise::All);
        Self { inner, hub, advertised: RwLock::new(Vec::new()), mcp_tool }
    }

    pub fn hub(&self) -> &McpHub {
        &self.hub
    }

    fn find(&self, name: &str) -> Option<Advertised> {
        self.advertised.read().ok()?.iter().find(|a| a.model_name == name).cloned()
    }

    fn mcp_spec() -> ToolSpec {
        ToolSpec::new(
            MCP_TOOL,
            "Reach the MCP servers connected to this agent. `action`: `list_servers` (names and \
             descriptions), `list_tools` (a server's tools with their input schemas; needs \
             `server`), or `call` (runs `tool` on `server` with `arguments`).",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["list_servers", "list_tools", "call"]},
                    "server": {"type": "string", "description": "The connection name."},
                    "tool": {"type": "string", "description": "The server's tool name (for `call`)."},
                    "arguments": {"type": "object", "description": "The tool's input (for `call`)."}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        )
    }

    /// The model connections the `mcp` tool reaches.
    fn mcp_servers(&self) -> Vec<Value> {
        self.hub
            .model_defs()
            .map(|d| {
                let mut server = json!({"name": d.name, "transport": transport_name(&d.transport)});
                if let Some(description) = &d.description {
                    server["description"] = json!(description);
                }
                server
            })
            .collect()
    }

    fn is_model_server(&self, name: &str) -> bool {
        self.hub.model_defs().any(|d| d.name == name)
    }

    async fn run_mcp_tool(&self, input: &Value, dry_run: bool) -> ToolOutcome {
        let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
        let action = text("action").unwrap_or_default();
        if action == "list_servers" {
            return ToolOutcome::ok(json!({"servers": self.mcp_servers()}));
        }
        let Some(server) = text("server") else {
            return ToolOutcome::error(format!("`mcp` action `{action}` needs `server`"));
        };
        if !self.is_model_server(&server) {
            let names: Vec<String> = self.hub.model_defs().map(|d| d.name.clone()).collect();
            return ToolOutcome::error(format!("unknown MCP server `{server}`; servers: {}", names.join(", ")));
        }
        match action.as_str() {
            "list_tools" => match self.hub.tools(&server).await {
                Ok(tools) => {
                    let tools: Vec<Value> = tools
                        .iter()
                        .map(|t| {
                            json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema, "readOnly": t.read_only})
                        })
                        .collect();
                    ToolOutcome::ok(json!({"server": server, "tools": tools}))
                }
                Err(error) => ToolOutcome::error(error.to_string()),
            },
            "call" => {
                let Some(tool) = text("tool") else {
                    return ToolOutcome::error("`mcp` action `call` needs `tool`");
                };
                if dry_run && !self.hub.is_read_only(&server, &tool) {
                    return ToolOutcome::stub(Value::String(DEFAULT_DRY_RUN_RESULT.to_owned()));
                }
                let arguments = input.get("arguments").cloned().unwrap_or_else(|| json!({}));
                self.call_server(&server, &tool, arguments).await
            }
            other => ToolOutcome::error(format!(
                "unknown `mcp` action `{other}`; use `list_servers`, `list_tools` or `call`"
            )),
        }
    }

    async fn call_server(&self, server: &str, tool: &str, arguments: Value) -> ToolOutcome {
        match self.hub.call(server, tool, arguments).await {
            Ok(result) => convert::outcome(&result),
            Err(error) => ToolOutcome::error(error.to_string()),
        }
    }
}

impl ToolRegistry for McpTools {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = self.inner.specs();
        if let Ok(advertised) = self.advertised.read() {
            specs.extend(advertised.iter().map(|a| {
                ToolSpec {
                    name: a.model_name.clone(),
                    description: a
                        .tool
                        .description
                        .clone()
                        .unwrap_or_else(|| format!("`{}` on MCP server `{}`", a.tool.name, a.server)),
                    input_schema: a.tool.input_schema.clone(),
                    output_schema: a.tool.output_schema.clone(),
                }
            }));
        }
        if self.mcp_tool {
            specs.push(Self::mcp_spec());
        }
        specs
    }

    fn call(&self, invocation: ToolInvocation, cancel: CancellationToken) -> BoxFuture<'static, ToolOutcome> {
        let is_mcp = self.mcp_tool && invocation.name == MCP_TOOL;
        let advertised = if is_mcp { None } else { self.find(&invocation.name) };
        if !is_mcp && advertised.is_none() {
            return self.inner.call(invocation, cancel);
        }
        let this = McpTools {
            inner: Arc::clone(&self.inner),
            hub: self.hub.clone(),
            advertised: RwLock::new(Vec::new()),
            mcp_tool: self.mcp_tool,
        };
        Box::pin(async move {
            let name = invocation.name.clone();
            let work = async {
                match advertised {
                    None => this.run_mcp_tool(&invocation.input, invocation.dry_run).await,
                    Some(a) => {
                        if invocation.dry_run && !a.tool.read_only {
                            return ToolOutcome::stub(Value::String(DEFAULT_DRY_RUN_RESULT.to_owned()));
                        }
                        this.call_server(&a.server, &a.tool.name, invocation.input.clone()).await
                    }
                }
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => ToolOutcome::error(format!("`{name}` was cancelled")),
                outcome = work => outcome,
            }
        })
    }

    fn lookup(&self, name: &str) -> Option<ToolInfo> {
        if let Some(a) = self.find(name) {
            return Some(ToolInfo {
                name: a.model_name.clone(),
                description: a.tool.description.clone().unwrap_or_default(),
                kind: ToolKind::Mcp,
                source: Source::File,
                input_schema: a.tool.input_schema.clone(),
                output_schema: a.tool.output_schema.clone(),
                time_args: Vec::new(),
                timeout: a.timeout,
                callable: true,
            });
        }
        if self.mcp_tool && name == MCP_TOOL {
            let spec = Self::mcp_spec();
            return Some(ToolInfo {
                name: spec.name,
                description: spec.description,
                kind: ToolKind::Mcp,
                source: Source::File,
                input_schema: spec.input_schema,
                output_schema: None,
                time_args: Vec::new(),
                timeout: self.hub.model_defs().map(|d| d.timeout).max().unwrap_or(Duration::from_secs(60)),
                callable: true,
            });
        }
        self.inner.lookup(name)
    }

    fn effect(&self, name: &str, input: &Value) -> Effect {
        if let Some(a) = self.find(name) {
            return if a.tool.read_only { Effect::Read } else { Effect::Write };
        }
        if self.mcp_tool && name == MCP_TOOL {
            let action = input.get("action").and_then(Value::as_str).unwrap_or_default();
            let target = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default();
            return match action {
                "call" if !self.hub.is_read_only(target("server"), target("tool")) => Effect::Write,
                _ => Effect::Read,
            };
        }
        self.inner.effect(name, input)
    }

    fn needs_approval(&self, name: &str, input: &Value) -> bool {
        self.inner.needs_approval(name, input)
    }

    fn validate_input(&self, name: &str, input: &Value) -> std::result::Result<(), Vec<String>> {
        let is_ours = self.find(name).is_some() || (self.mcp_tool && name == MCP_TOOL);
        if !is_ours {
            return self.inner.validate_input(name, input);
        }
        if !input.is_object() {
            return Err(vec![format!("/: `{name}` takes an object")]);
        }
        if name == MCP_TOOL && self.find(name).is_none() {
            match input.get("action").and_then(Value::as_str) {
                Some("list_servers" | "list_tools" | "call") => {}
                _ => return Err(vec!["/action: must be one of list_servers, list_tools, call".into()]),
            }
        }
        // The server validates an advertised tool's input against its own schema.
        Ok(())
    }

    fn time_args_refusal(&self) -> Option<String> {
        self.inner.time_args_refusal()
    }

    fn callable_names(&self) -> Vec<String> {
        let mut names = self.inner.callable_names();
        if let Ok(advertised) = self.advertised.read() {
            names.extend(advertised.iter().map(|a| a.model_name.clone()));
        }
        if self.mcp_tool {
            names.push(MCP_TOOL.to_owned());
        }
        names
    }

    fn prepare_workspace(&self, workspace: &Path, files: &[(String, String)]) -> bdk_tools::Result<()> {
        self.inner.prepare_workspace(workspace, files)
    }

    fn materializes_workspace(&self) -> bool {
        self.inner.materializes_workspace()
    }

    fn refresh(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.refresh().await;
            let mut fresh = Vec::new();
            for def in self.hub.model_defs().filter(|d| d.scope == ConnectionScope::Model) {
                if def.advertise == Advertise::None {
                    continue;
                }
                let tools = match self.hub.tools(&def.name).await {
                    Ok(tools) => tools,
                    Err(error) => {
                        tracing::warn!(server = %def.name, %error, "advertised MCP tools left out of this turn");
                        continue;
                    }
                };
                for tool in tools {
                    let listed = match &def.advertise {
                        Advertise::All => true,
                        Advertise::Only(names) => names.contains(&tool.name),
                        Advertise::None => false,
                    };
                    if listed {
                        fresh.push(Advertised {
                            model_name: def.model_tool_name(&tool.name),
                            server: def.name.clone(),
                            timeout: def.timeout,
                            tool,
                        });
                    }
                }
            }
            // A name the agent's own tools already use stays theirs (`validate` reports the clash).
            let own: Vec<String> = self.inner.specs().into_iter().map(|s| s.name).collect();
            fresh.retain(|a| !own.contains(&a.model_name) && a.model_name != MCP_TOOL);
            if let Ok(mut advertised) = self.advertised.write() {
                *advertised = fresh;
            }
        })
    }

    fn mcp(&self) -> Option<Arc<dyn bdk_tools::McpAccess>> {
        if self.hub.is_empty() { self.inner.mcp() } else { Some(Arc::new(self.hub.clone())) }
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.inner.shutdown().await;
            self.hub.close().await;
        })
    }
}
