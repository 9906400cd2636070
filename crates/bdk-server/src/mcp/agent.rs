//! The agent as an MCP server (`/v1/mcp`, and in-process peers): `ask` starts or continues a
//! chat session and waits a bounded time, `check` polls a session's latest turn, `call_tool`
//! runs one of the agent's server tools with no model turn (present only when it has some).
//! Refusals answer as tool errors whose `structuredContent` is the HTTP API's error body
//! (`{ok: false, error, message}`), so the direct-call error table carries over unchanged.

use std::sync::Arc;

use bdk_engine::{Admission, DirectCall, FollowUp, Principal, StartSession};
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerInfo, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::wait::{self, Report};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::Agent;

/// The channel sessions `ask` creates are recorded under.
pub const MCP_CHANNEL: &str = "mcp";

/// `/v1/mcp` for one agent.
#[derive(Debug, Clone)]
pub struct AgentMcp {
    agent: Agent,
    /// Who calls when the request carries no admitted caller (an in-process peer).
    fallback: Option<Principal>,
}

impl AgentMcp {
    /// Behind the HTTP auth chain: the caller comes from the request.
    pub fn http(agent: Agent) -> Self {
        Self { agent, fallback: None }
    }

    /// An in-process peer session opened by agent `caller_slug`.
    pub fn peer(agent: Agent, caller_slug: &str) -> Self {
        Self { agent, fallback: Some(Principal::new(format!("agent:{caller_slug}"))) }
    }
}

/// The admitted caller of a request, from the HTTP parts the transport put in its extensions.
pub(crate) fn principal(
    context: &RequestContext<RoleServer>,
    fallback: Option<&Principal>,
) -> Result<Principal, ErrorData> {
    let from_http = context.extensions.get::<axum::http::request::Parts>().and_then(|p| p.extensions.get::<Caller>());
    match (from_http, fallback) {
        (Some(caller), _) => Ok(caller.principal.clone()),
        (None, Some(principal)) => Ok(principal.clone()),
        (None, None) => Err(ErrorData::invalid_request("no admitted caller", None)),
    }
}

pub(crate) fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::from_iter([("type".to_owned(), json!("object"))])),
    }
}

pub(crate) fn tool(name: &str, description: &str, input: Value, output: Option<Value>, read_only: bool) -> Tool {
    Tool {
        name: name.to_owned().into(),
        title: None,
        description: Some(description.to_owned().into()),
        input_schema: schema(input),
        output_schema: output.map(schema),
        annotations: read_only.then(|| ToolAnnotations::new().read_only(true)),
        execution: None,
        icons: None,
        meta: None,
    }
}

pub(crate) fn server_info(name: &str, instructions: Option<String>) -> ServerInfo {
    ServerInfo {
        capabilities: ServerCapabilities::builder().enable_tools().build(),
        server_info: Implementation {
            name: name.to_owned(),
            title: None,
            version: env!("CARGO_PKG_VERSION").into(),
            description: None,
            icons: None,
            website_url: None,
        },
        instructions,
        ..ServerInfo::default()
    }
}

/// A success carrying `value` as `structuredContent` and as JSON text.
pub(crate) fn structured(value: Value, is_error: bool) -> CallToolResult {
    let text = serde_json::to_string(&value).unwrap_or_default();
    let mut result = if is_error {
        CallToolResult::error(vec![Content::text(text)])
    } else {
        CallToolResult::success(vec![Content::text(text)])
    };
    result.structured_content = Some(value);
    result
}

/// A refusal as a tool error with the HTTP error body.
pub(crate) fn refusal(error: ApiError) -> CallToolResult {
    structured(json!({"ok": false, "error": error.code, "message": error.message}), true)
}

fn report_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["running", "completed", "failed"]},
            "sessionId": {"type": "string"},
            "continuationToken": {"type": "string"},
            "turnId": {"type": "string"},
            "reply": {"type": "string"},
            "error": {"type": "string"}
        },
        "required": ["status", "sessionId", "continuationToken", "reply"]
    })
}

fn args(request: &CallToolRequestParams) -> Value {
    Value::Object(request.arguments.clone().unwrap_or_default())
}

fn text(args: &Value, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl AgentMcp {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            tool(
                "ask",
                "Send a message to this agent: starts a chat session, or continues the one `sessionId` names. \
                 Waits up to `waitSeconds` (default 30, at most 120) for the reply; when `status` is \
                 `running`, poll `check` with the `sessionId`.",
                json!({
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "minLength": 1},
                        "sessionId": {"type": "string", "description": "Continue this session (from an earlier ask)."},
                        "waitSeconds": {"type": "number", "minimum": 0, "maximum": 120}
                    },
                    "required": ["message"]
                }),
                Some(report_schema()),
                false,
            ),
            tool(
                "check",
                "Poll a session `ask` started: waits up to `waitSeconds` for its latest turn to end and \
                 returns its status and the reply so far.",
                json!({
                    "type": "object",
                    "properties": {
                        "sessionId": {"type": "string"},
                        "waitSeconds": {"type": "number", "minimum": 0, "maximum": 120}
                    },
                    "required": ["sessionId"]
                }),
                Some(report_schema()),
                true,
            ),
        ];
        if !self.agent.engine.tools().callable_names().is_empty() {
            tools.push(tool(
                "call_tool",
                "Run one of this agent's server tools directly, with no model turn. Answers the direct-call \
                 envelope {ok, toolName, callId, isError, result, durationMs}.",
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "input": {"type": "object"},
                        "sessionId": {"type": "string"}
                    },
                    "required": ["name"]
                }),
                None,
                false,
            ));
        }
        tools
    }

    async fn ask(&self, principal: Principal, args: Value) -> Result<Report, ApiError> {
        let engine = &self.agent.engine;
        let message = text(&args, "message").unwrap_or_default();
        let wait = wait::wait_from(args.get("waitSeconds").and_then(Value::as_f64));
        let (session, turn) = match text(&args, "sessionId") {
            None => {
                let started = engine
                    .start_session(StartSession {
                        message,
                        principal: principal.clone(),
                        channel: MCP_CHANNEL.into(),
                        continuation_key: None,
                        mode: SessionMode::Chat,
                        title: None,
                        dry_run: false,
                        as_of: None,
                        purpose: None,
                        workspace_files: Vec::new(),
                    })
                    .await?;
                (started.session_id, Some(started.turn_id))
            }
            Some(id) => {
                let id = SessionId::parse(id.as_str()).map_err(|_| ApiError::session_not_found(&id))?;
                let record = engine.session(&id, &principal).await?;
                let token = record.continuation_token.unwrap_or_default();
                let accepted = engine
                    .follow_up(
                        &id,
                        FollowUp {
                            message,
                            principal: principal.clone(),
                            continuation_token: token,
                            admission: Admission::Preempt,
                            workspace_files: Vec::new(),
                        },
                    )
                    .await?;
                (id, accepted.turn_id)
            }
        };
        Ok(wait::report(engine, &session, &principal, turn, wait).await?)
    }

    async fn check(&self, principal: Principal, args: Value) -> Result<Report, ApiError> {
        let id = text(&args, "sessionId").unwrap_or_default();
        let id = SessionId::parse(id.as_str()).map_err(|_| ApiError::session_not_found(&id))?;
        let wait = wait::wait_from(args.get("waitSeconds").and_then(Value::as_f64));
        Ok(wait::report(&self.agent.engine, &id, &principal, None, wait).await?)
    }

    async fn call_tool(&self, principal: Principal, args: Value) -> Result<Value, ApiError> {
        let name = text(&args, "name").unwrap_or_default();
        let input = args.get("input").cloned().unwrap_or_else(|| json!({}));
        let session_id = match text(&args, "sessionId") {
            Some(raw) => Some(SessionId::parse(raw.as_str()).map_err(|_| ApiError::session_not_found(&raw))?),
            None => None,
        };
        let call = DirectCall { session_id, ..DirectCall::new(name, input, principal) };
        let outcome = self.agent.engine.call_tool(call).await?;
        serde_json::to_value(outcome.into_response()).map_err(|e| ApiError::internal(&e))
    }
}

impl ServerHandler for AgentMcp {
    fn get_info(&self) -> ServerInfo {
        let description = self.agent.current().description.clone();
        server_info(self.agent.slug(), description)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.agent.engine.tools().refresh().await;
        Ok(ListToolsResult { tools: self.tools(), ..ListToolsResult::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let principal = principal(&context, self.fallback.as_ref())?;
        let args = args(&request);
        let answer = match request.name.as_ref() {
            "ask" if text(&args, "message").is_none_or(|m| m.trim().is_empty()) => {
                return Ok(refusal(ApiError::invalid_request("`ask` needs a non-empty `message`")));
            }
            "ask" => self.ask(principal, args).await.map(|r| serde_json::to_value(r).unwrap_or_default()),
            "check" if text(&args, "sessionId").is_none() => {
                return Ok(refusal(ApiError::invalid_request("`check` needs `sessionId`")));
            }
            "check" => self.check(principal, args).await.map(|r| serde_json::to_value(r).unwrap_or_default()),
            "call_tool" if text(&args, "name").is_none() => {
                return Ok(refusal(ApiError::invalid_request("`call_tool` needs `name`")));
            }
            "call_tool" => match self.call_tool(principal, args).await {
                Ok(envelope) => {
                    let is_error = envelope.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    return Ok(structured(envelope, is_error));
                }
                Err(error) => Err(error),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`; tools: ask, check, call_tool"),
                    None,
                ));
            }
        };
        Ok(match answer {
            Ok(value) => {
                let failed = value.get("status").and_then(Value::as_str) == Some("failed");
                structured(value, failed)
            }
            Err(error) => refusal(error),
        })
    }
}
