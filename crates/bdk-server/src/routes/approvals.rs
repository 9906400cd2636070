//! `/v1/session/:id/approvals`: the session's tool calls parked for a person's approval, and
//! resolving one with `{"decision": "approve" | "deny"}`. Both run the engine's owner check
//! (403). A call id that is not parked (unknown, already decided, or its turn ended) is 404
//! `approval_not_found`; the lifecycle is the engine's (`bdk_engine::Engine::resolve_approval`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use bdk_engine::PendingApproval;
use bdk_protocol::event::ApprovalDecision;
use bdk_protocol::{CallId, SessionId};
use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, SessionPath};
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/session/{session_id}/approvals", get(list))
        .route("/v1/session/{session_id}/approvals/{call_id}", post(resolve))
}

#[derive(Debug, Serialize)]
struct Approvals {
    approvals: Vec<PendingApproval>,
}

/// `GET /v1/session/:id/approvals`: the parked calls, oldest first.
async fn list(
    State(state): State<AgentState>,
    caller: Caller,
    SessionPath(id): SessionPath,
) -> ApiResult<OkJson<Approvals>> {
    let approvals = state.engine().approvals(&id, &caller.principal).await?;
    Ok(OkJson(Approvals { approvals }))
}

/// The body of `POST /v1/session/:id/approvals/:callId`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DecisionBody {
    decision: serde_json::Value,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Resolved {
    session_id: SessionId,
    call_id: CallId,
    tool_name: String,
    decision: ApprovalDecision,
}

/// `POST /v1/session/:id/approvals/:callId`: approve or deny one parked call. Answers once
/// `action.approval_resolved` is recorded.
async fn resolve(
    State(state): State<AgentState>,
    caller: Caller,
    Path((session, call)): Path<(String, String)>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> ApiResult<OkJson<Resolved>> {
    let session = SessionId::parse(session.as_str()).map_err(|_| ApiError::session_not_found(&session))?;
    let decision = match body.decision.as_str() {
        Some("approve") => ApprovalDecision::Approve,
        Some("deny") => ApprovalDecision::Deny,
        _ => {
            return Err(ApiError::invalid_request(format!(
                "decision must be \"approve\" or \"deny\", not {}",
                body.decision
            )));
        }
    };
    // A malformed id names no parked call, as a malformed session id names no session.
    let call_id = CallId::parse(call.as_str()).map_err(|_| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "approval_not_found",
            format!("no tool call {call} is waiting for approval"),
        )
    })?;
    let resolved = state.engine().resolve_approval(&session, &call_id, decision, &caller.principal).await?;
    Ok(OkJson(Resolved { session_id: session, call_id: resolved.call_id, tool_name: resolved.tool_name, decision }))
}
