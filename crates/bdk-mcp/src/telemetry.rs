//! The client span of one MCP tool call (`tools/call <tool>`, OpenTelemetry's MCP semantic
//! conventions), a child of the `execute_tool` span the engine made current. The handle comes
//! from that span's context (`Telemetry::current_handle`): with telemetry off, or for a call
//! made outside a traced tool call, no span is built and nothing is propagated.
//!
//! The span's `traceparent` goes in the request's `params._meta` (every transport; the
//! conventions' propagation), and on the HTTP request as a header (`http.rs` reads it back).

use bdk_telemetry::{KeyValue, Span, SpanKind, Telemetry, names};
use rmcp::RoleClient;
use rmcp::model::{CallToolResult, Meta};
use rmcp::service::Peer;

use crate::error::McpError;
use crate::server::{Connection, Endpoint};

/// The MCP method of a tool call.
pub const METHOD: &str = "tools/call";

/// Attribute names the MCP conventions add (those shared with GenAI are in `names`).
pub mod attr {
    pub const METHOD_NAME: &str = "mcp.method.name";
    pub const SESSION_ID: &str = "mcp.session.id";
    pub const PROTOCOL_VERSION: &str = "mcp.protocol.version";
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    pub const NETWORK_PROTOCOL: &str = "network.protocol.name";
    pub const SERVER_ADDRESS: &str = "server.address";
    pub const SERVER_PORT: &str = "server.port";
    /// The connection's name in the project (`mcp-connections/<name>.toml`).
    pub const SERVER: &str = "bdk.mcp.server";
}

/// Starts the call's span under the current one (none when nothing of ours is current).
pub(crate) fn call_span(conn: &Connection, tool: &str, peer: &Peer<RoleClient>) -> Span {
    let telemetry = Telemetry::current_handle();
    if !telemetry.traces() {
        return Span::none();
    }
    telemetry.span(format!("{METHOD} {tool}"), SpanKind::Client, None, || {
        let mut attributes = vec![
            KeyValue::new(attr::METHOD_NAME, METHOD),
            KeyValue::new(names::GEN_AI_OPERATION, "execute_tool"),
            KeyValue::new(names::GEN_AI_TOOL_NAME, tool.to_owned()),
            KeyValue::new(attr::SERVER, conn.name().to_owned()),
        ];
        if let Some(info) = peer.peer_info() {
            attributes.push(KeyValue::new(attr::PROTOCOL_VERSION, info.protocol_version.to_string()));
        }
        if let Some(session) = conn.session_id() {
            attributes.push(KeyValue::new(attr::SESSION_ID, session.to_string()));
        }
        match conn.endpoint() {
            Some(Endpoint::Pipe) => attributes.push(KeyValue::new(attr::NETWORK_TRANSPORT, "pipe")),
            Some(Endpoint::Http { host, port }) => {
                attributes.push(KeyValue::new(attr::NETWORK_TRANSPORT, "tcp"));
                attributes.push(KeyValue::new(attr::NETWORK_PROTOCOL, "http"));
                attributes.push(KeyValue::new(attr::SERVER_ADDRESS, host));
                attributes.push(KeyValue::new(attr::SERVER_PORT, i64::from(port)));
            }
            Some(Endpoint::InProcess) | None => {}
        }
        attributes
    })
}

/// The `_meta` that carries `span` to the server, when it is recorded.
pub(crate) fn meta(span: &Span) -> Option<Meta> {
    let traceparent = span.traceparent()?;
    let mut meta = Meta::new();
    meta.0.insert(crate::http::TRACEPARENT.to_owned(), traceparent.into());
    Some(meta)
}

/// Ends the call's span: `error.type` `tool_error` when the tool reported an error, the
/// failure's kind when the call failed. Results are never recorded.
pub(crate) fn call_ended(span: &Span, result: &Result<CallToolResult, McpError>) {
    if !span.is_recording() {
        return;
    }
    match result {
        Ok(result) if result.is_error == Some(true) => {
            span.set(|| vec![KeyValue::new(names::ERROR_TYPE, "tool_error")]);
            span.fail("the tool reported an error");
        }
        Ok(_) => {}
        Err(error) => {
            let kind = match error {
                McpError::Timeout { .. } => "timeout",
                McpError::Protocol { .. } => "mcp_error",
                _ => "mcp_unavailable",
            };
            span.set(|| vec![KeyValue::new(names::ERROR_TYPE, kind)]);
            span.fail_with(|| error.to_string());
        }
    }
    span.end();
}
