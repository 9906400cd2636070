//! `host.mcp` over HTTP for command tools: the agent's MCP connections, model and host scope
//! alike (`/v1/host/mcp/servers`, `/v1/host/mcp/tools`, `/v1/host/mcp/call`), admitted by the
//! call's host token like every host service. An agent with no connection answers 404
//! `mcp_not_found` for a named server and an empty list of servers.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use bdk_tools::McpAccess;
use serde::Deserialize;
use serde_json::{Value, json};

use super::routes::{HostCaller, api_error};
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/host/mcp/servers", get(servers))
        .route("/v1/host/mcp/tools", post(tools))
        .route("/v1/host/mcp/call", post(call))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolsBody {
    server: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallBody {
    server: String,
    tool: String,
    #[serde(default)]
    arguments: Option<Value>,
}

fn access(caller: &HostCaller, server: &str) -> ApiResult<std::sync::Arc<dyn McpAccess>> {
    caller.services().mcp().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "mcp_not_found",
            format!("unknown MCP server `{server}`: this agent has no MCP connections"),
        )
    })
}

/// `GET /v1/host/mcp/servers`: `{ok, servers: [{name, scope, transport, description?}]}`.
async fn servers(caller: HostCaller) -> OkJson<Value> {
    let servers = caller.services().mcp().map(|m| m.servers()).unwrap_or_default();
    OkJson(json!({ "servers": servers }))
}

/// `POST /v1/host/mcp/tools {server}`: `{ok, tools: [{name, description?, inputSchema, outputSchema?, readOnly}]}`.
async fn tools(caller: HostCaller, JsonBody(body): JsonBody<ToolsBody>) -> ApiResult<OkJson<Value>> {
    let mcp = access(&caller, &body.server)?;
    let tools = mcp.list_tools(body.server).await.map_err(api_error)?;
    Ok(OkJson(json!({ "tools": tools })))
}

/// `POST /v1/host/mcp/call {server, tool, arguments}`: `{ok, isError, content, structuredContent?}`.
async fn call(caller: HostCaller, JsonBody(body): JsonBody<CallBody>) -> ApiResult<OkJson<Value>> {
    let mcp = access(&caller, &body.server)?;
    let arguments = body.arguments.unwrap_or_else(|| json!({}));
    let result = mcp.call(body.server, body.tool, arguments).await.map_err(api_error)?;
    Ok(OkJson(serde_json::to_value(result).map_err(|e| ApiError::internal(&e))?))
}
