//! `/v1/mcp/tools`: each of the agent's server tools as its own MCP tool, with its input and
//! output schemas. A call runs as a direct call (`POST /v1/tools/:name`) would: the same
//! validation and refusals, which answer as tool errors carrying the HTTP error body. An object
//! result is `structuredContent` as well as JSON text; any other result is text.

use bdk_engine::DirectCall;
use bdk_tools::Effect;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, ListToolsResult, PaginatedRequestParams, ServerInfo,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::agent::{principal, refusal, server_info, tool};
use crate::error::ApiError;
use crate::state::Agent;

/// `/v1/mcp/tools` for one agent.
#[derive(Debug, Clone)]
pub struct ToolsMcp {
    agent: Agent,
}

impl ToolsMcp {
    pub fn new(agent: Agent) -> Self {
        Self { agent }
    }
}

impl ServerHandler for ToolsMcp {
    fn get_info(&self) -> ServerInfo {
        server_info(&format!("{}-tools", self.agent.slug()), None)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let registry = self.agent.engine.tools();
        registry.refresh().await;
        let tools = registry
            .callable_names()
            .iter()
            .filter_map(|name| registry.lookup(name))
            .map(|info| {
                let read_only = registry.effect(&info.name, &json!({})) == Effect::Read;
                tool(&info.name, &info.description, info.input_schema, info.output_schema, read_only)
            })
            .collect();
        Ok(ListToolsResult { tools, ..ListToolsResult::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let principal = principal(&context, None)?;
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let call = DirectCall::new(request.name.to_string(), input, principal);
        let outcome = match self.agent.engine.call_tool(call).await {
            Ok(outcome) => outcome,
            Err(error) => return Ok(refusal(ApiError::from(error))),
        };
        let text = match &outcome.result {
            Value::String(text) => text.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        };
        let content = vec![Content::text(text)];
        let mut result =
            if outcome.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
        if outcome.result.is_object() {
            result.structured_content = Some(outcome.result);
        }
        Ok(result)
    }
}
