//! `POST /v1/tools/:name`: a direct tool call with no model turn (the reference's Tools page, "Call
//! a tool without a model turn"). The engine decides where the call runs and whether it may
//! (`Engine::call_tool`); this route reads the body, names the caller, and answers the envelope
//! `{ok: true, toolName, callId, isError, result, durationMs, scratchWorkspace?}` or an error.

use axum::Json;
use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::routing::post;
use bdk_engine::{DirectCall, EngineError};
use bdk_protocol::SessionId;
use bdk_protocol::http::{ToolCallRequest, ToolCallResponse};
use serde_json::Value;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/tools/{name}", post(call))
}

async fn call(
    State(state): State<AgentState>,
    caller: Caller,
    name: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<ToolCallRequest>,
) -> ApiResult<Json<ToolCallResponse>> {
    let Path(name) = name.map_err(|rejection| ApiError::invalid_request(rejection.body_text()))?;
    let call = direct_call(name, caller, body)?;
    let outcome = state.engine().call_tool(call).await?;
    Ok(Json(outcome.into_response()))
}

/// The engine's request from the body. A `sessionId` that cannot be an id names no session (404),
/// unless a token came with it: then the pair itself is the error.
fn direct_call(name: String, caller: Caller, body: ToolCallRequest) -> Result<DirectCall, ApiError> {
    let session_id = match (body.session_id, &body.continuation_token) {
        (Some(_), Some(_)) => {
            return Err(EngineError::InvalidContinuationToken(
                "sessionId and continuationToken are mutually exclusive; pass one".into(),
            )
            .into());
        }
        (Some(raw), None) => Some(SessionId::parse(raw.as_str()).map_err(|_| ApiError::session_not_found(&raw))?),
        (None, _) => None,
    };
    Ok(DirectCall {
        tool: name,
        input: body.input.unwrap_or_else(|| Value::Object(Default::default())),
        principal: caller.principal,
        session_id,
        continuation_token: body.continuation_token,
    })
}
