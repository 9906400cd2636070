//! [`McpHub`]: one agent's MCP connections (model and host scope), by name. It applies each
//! connection's `allow_tools`/`deny_tools` and per-call `timeout`, turns transport failures
//! into errors that name the server and quote its stderr, and closes every server at shutdown.
//! Peer agents mounted in the same host are reached through the [`PeerSlot`] the server fills
//! once every agent is mounted.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use bdk_project::model::{ConnectionDef, ConnectionScope, Transport};
pub use bdk_tools::PeerConnector;
use bdk_tools::host::{HostErrorKind, HostResult, McpCallResult, McpServerInfo, McpToolInfo};
use bdk_tools::{BoxFuture, HostError, McpAccess};
use rmcp::model::{CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ServerResult, Tool};
use rmcp::service::ServiceError;
use serde_json::Value;
use tokio::io::DuplexStream;

use crate::error::{McpError, Result};
use crate::server::{Connection, Lookup};

/// Where the host puts its [`PeerConnector`] once every agent is mounted (registries are built
/// before the engines they serve): each hub owns one, and the host fills it through
/// [`McpAccess::attach_peers`]. Cheap to clone; clones share the slot. A later fill replaces an
/// earlier one (the host's routes built again).
#[derive(Debug, Clone, Default)]
pub struct PeerSlot(Arc<RwLock<Option<Arc<dyn PeerConnector>>>>);

impl PeerSlot {
    pub fn set(&self, connector: Arc<dyn PeerConnector>) {
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(connector);
        }
    }

    pub fn connect(&self, slug: &str) -> Option<DuplexStream> {
        let connector = self.0.read().ok()?.clone()?;
        connector.connect(slug)
    }
}

/// One server tool, after the connection's allow/deny lists.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// The server annotates it read-only (`readOnlyHint: true`).
    pub read_only: bool,
}

impl ServerTool {
    fn from_mcp(tool: &Tool) -> Self {
        Self {
            name: tool.name.to_string(),
            description: tool.description.as_ref().map(|d| d.to_string()),
            input_schema: Value::Object((*tool.input_schema).clone()),
            output_schema: tool.output_schema.as_ref().map(|s| Value::Object((**s).clone())),
            read_only: tool.annotations.as_ref().and_then(|a| a.read_only_hint).unwrap_or(false),
        }
    }

    pub fn info(&self) -> McpToolInfo {
        McpToolInfo {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            read_only: self.read_only,
        }
    }
}

struct Inner {
    connections: BTreeMap<String, Arc<Connection>>,
    /// Read-only annotations of the tools seen so far, by (server, tool), for sync questions.
    read_only: RwLock<HashMap<(String, String), bool>>,
    /// Where every connection finds the host's in-process peers.
    peers: PeerSlot,
}

/// One agent's MCP connections. Cheap to clone; clones share the servers.
#[derive(Clone)]
pub struct McpHub {
    inner: Arc<Inner>,
}

impl fmt::Debug for McpHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHub").field("connections", &self.inner.connections.keys().collect::<Vec<_>>()).finish()
    }
}

impl McpHub {
    /// The connections in `defs`, none started. Stdio servers run in `bot_dir`; placeholders are
    /// read from the process environment.
    pub fn new(defs: &[ConnectionDef], bot_dir: impl Into<PathBuf>, peers: PeerSlot) -> Self {
        Self::with_lookup(defs, bot_dir, peers, Arc::new(crate::env::process_env))
    }

    /// [`McpHub::new`] reading placeholders through `lookup`.
    pub fn with_lookup(defs: &[ConnectionDef], bot_dir: impl Into<PathBuf>, peers: PeerSlot, lookup: Lookup) -> Self {
        let bot_dir = bot_dir.into();
        let connections = defs
            .iter()
            .map(|def| {
                let conn = Connection::new(def.clone(), bot_dir.clone(), peers.clone(), Arc::clone(&lookup));
                (def.name.clone(), Arc::new(conn))
            })
            .collect();
        Self { inner: Arc::new(Inner { connections, read_only: RwLock::new(HashMap::new()), peers }) }
    }

    pub fn is_empty(&self) -> bool {
        self.inner.connections.is_empty()
    }

    /// The definitions, in name order.
    pub fn defs(&self) -> impl Iterator<Item = &ConnectionDef> {
        self.inner.connections.values().map(|c| &c.def)
    }

    /// The model-scope definitions, in name order.
    pub fn model_defs(&self) -> impl Iterator<Item = &ConnectionDef> {
        self.defs().filter(|d| d.scope == ConnectionScope::Model)
    }

    fn connection(&self, server: &str) -> Result<&Arc<Connection>> {
        self.inner.connections.get(server).ok_or_else(|| McpError::UnknownServer(server.to_owned()))
    }

    /// The tools `server` offers that its lists admit, opening it if needed.
    pub async fn tools(&self, server: &str) -> Result<Vec<ServerTool>> {
        let conn = self.connection(server)?;
        let (_, tools) = conn.open().await?;
        let admitted: Vec<ServerTool> =
            tools.iter().filter(|t| conn.def.admits(&t.name)).map(ServerTool::from_mcp).collect();
        if let Ok(mut seen) = self.inner.read_only.write() {
            for tool in &admitted {
                seen.insert((server.to_owned(), tool.name.clone()), tool.read_only);
            }
        }
        Ok(admitted)
    }

    /// Whether `tool` of `server` was listed with a read-only annotation (false when unknown).
    pub fn is_read_only(&self, server: &str, tool: &str) -> bool {
        self.inner
            .read_only
            .read()
            .ok()
            .and_then(|seen| seen.get(&(server.to_owned(), tool.to_owned())).copied())
            .unwrap_or(false)
    }

    /// Calls `tool` on `server` under the connection's timeout. A tool's own failure is an
    /// `Ok` result with `is_error`; a refusal, a protocol error, a dead or hung server is `Err`.
    pub async fn call(&self, server: &str, tool: &str, arguments: Value) -> Result<CallToolResult> {
        let conn = self.connection(server)?;
        if !conn.def.admits(tool) {
            return Err(McpError::NotAllowed { server: server.to_owned(), tool: tool.to_owned() });
        }
        let arguments = match arguments {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(McpError::Protocol {
                    server: server.to_owned(),
                    message: format!("arguments for `{tool}` must be an object, not {other}"),
                });
            }
        };
        let (peer, tools) = conn.open().await?;
        if !tools.iter().any(|t| t.name == tool) {
            return Err(McpError::UnknownTool { server: server.to_owned(), tool: tool.to_owned() });
        }
        let span = crate::telemetry::call_span(conn, tool, &peer);
        let params = CallToolRequestParams { meta: None, name: tool.to_owned().into(), arguments, task: None };
        let mut request = CallToolRequest { method: Default::default(), params, extensions: Default::default() };
        // The span goes to the server in `params._meta` (and, over HTTP, as a header).
        if let Some(meta) = crate::telemetry::meta(&span) {
            request.extensions.insert(meta);
        }
        let timeout = conn.def.timeout;
        let sent = peer.send_request(ClientRequest::CallToolRequest(request));
        let result = match tokio::time::timeout(timeout, span.run(sent)).await {
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(_)) => Err(McpError::Protocol {
                server: server.to_owned(),
                message: format!("the server answered the call to `{tool}` with something else than a tool result"),
            }),
            Ok(Err(ServiceError::McpError(error))) => {
                Err(McpError::Protocol { server: server.to_owned(), message: error.message.to_string() })
            }
            Ok(Err(error)) => {
                conn.check_alive().await;
                Err(McpError::Unavailable {
                    server: server.to_owned(),
                    message: conn.with_tail(format!("the call to `{tool}` failed: {error}")),
                })
            }
            Err(_) => Err(McpError::Timeout {
                server: server.to_owned(),
                tool: tool.to_owned(),
                seconds: timeout.as_secs_f64(),
            }),
        };
        crate::telemetry::call_ended(&span, &result);
        result
    }

    /// Closes every server and ends their processes. Later calls fail with [`McpError::Closed`].
    pub async fn close(&self) {
        let closing = self.inner.connections.values().map(|c| c.close());
        futures_join(closing).await;
    }
}

async fn futures_join<F: std::future::Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    for future in futures {
        future.await;
    }
}

/// The transport's wire name: `stdio`, `http` or `agent`.
pub fn transport_name(transport: &Transport) -> &'static str {
    match transport {
        Transport::Stdio { .. } => "stdio",
        Transport::Http { .. } => "http",
        Transport::Agent { .. } => "agent",
    }
}

fn host_error(error: McpError) -> HostError {
    let (kind, code) = match &error {
        McpError::UnknownServer(_) | McpError::UnknownTool { .. } => (HostErrorKind::NotFound, "mcp_not_found"),
        McpError::NotAllowed { .. } => (HostErrorKind::Forbidden, "mcp_tool_not_allowed"),
        McpError::Protocol { .. } => (HostErrorKind::Invalid, "mcp_error"),
        McpError::Unavailable { .. } | McpError::Timeout { .. } => (HostErrorKind::Unavailable, "mcp_unavailable"),
        McpError::Closed => (HostErrorKind::Unavailable, "shutting_down"),
    };
    HostError::new(kind, code, error.to_string())
}

impl McpAccess for McpHub {
    fn servers(&self) -> Vec<McpServerInfo> {
        self.defs()
            .map(|d| McpServerInfo {
                name: d.name.clone(),
                scope: match d.scope {
                    ConnectionScope::Model => "model",
                    ConnectionScope::Host => "host",
                }
                .to_owned(),
                transport: transport_name(&d.transport).to_owned(),
                description: d.description.clone(),
            })
            .collect()
    }

    fn list_tools(&self, server: String) -> BoxFuture<'_, HostResult<Vec<McpToolInfo>>> {
        Box::pin(async move {
            let tools = self.tools(&server).await.map_err(host_error)?;
            Ok(tools.iter().map(ServerTool::info).collect())
        })
    }

    fn call(&self, server: String, tool: String, arguments: Value) -> BoxFuture<'_, HostResult<McpCallResult>> {
        Box::pin(async move {
            let result = McpHub::call(self, &server, &tool, arguments).await.map_err(host_error)?;
            Ok(crate::convert::call_result(&result))
        })
    }

    fn attach_peers(&self, peers: Arc<dyn PeerConnector>) {
        self.inner.peers.set(peers);
    }
}
