//! `POST /v1/host/reminders/{create,list,cancel}`: the reminders host service for commands
//! (the reference's `host.reminders`), on the calling session's conversation only. Admission is
//! the host token's (`routes::HostCaller`); the reminders are the engine's.

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use bdk_engine::reminders::CreateReminder;
use bdk_protocol::SessionId;
use serde::Deserialize;
use serde_json::{Value, json};

use super::routes::HostCaller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/host/reminders/create", post(create))
        .route("/v1/host/reminders/list", post(list))
        .route("/v1/host/reminders/cancel", post(cancel))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelBody {
    id: String,
}

/// The calling session, which reminders are bound to.
fn session(caller: &HostCaller) -> Result<SessionId, ApiError> {
    caller
        .session_id()
        .ok_or_else(|| ApiError::invalid_request("reminders belong to a conversation; this call has no session"))
}

fn reminders(state: &AgentState) -> Result<&bdk_engine::reminders::Reminders, ApiError> {
    state.agent.reminders.as_ref().ok_or_else(|| ApiError::invalid_request("this host runs no reminders"))
}

fn value<T: serde::Serialize>(item: &T) -> Result<Value, ApiError> {
    serde_json::to_value(item).map_err(|e| ApiError::internal(&e))
}

async fn create(
    State(state): State<AgentState>,
    caller: HostCaller,
    JsonBody(body): JsonBody<CreateReminder>,
) -> ApiResult<OkJson<Value>> {
    let session = session(&caller)?;
    let record = reminders(&state)?.create(&session, body).await?;
    Ok(OkJson(json!({ "reminder": value(&record)? })))
}

async fn list(State(state): State<AgentState>, caller: HostCaller) -> ApiResult<OkJson<Value>> {
    let session = session(&caller)?;
    let all = reminders(&state)?.list(Some(&session)).await?;
    Ok(OkJson(json!({ "reminders": value(&all)? })))
}

async fn cancel(
    State(state): State<AgentState>,
    caller: HostCaller,
    JsonBody(body): JsonBody<CancelBody>,
) -> ApiResult<OkJson<Value>> {
    let session = session(&caller)?;
    let record = reminders(&state)?.cancel(&body.id, Some(&session)).await?;
    Ok(OkJson(json!({ "reminder": value(&record)? })))
}
