//! `POST /v1/host/reminders/{create,list,cancel}`: the reminders host service for commands
//! (the reference's `host.reminders`), on the calling session's conversation only. Admission is
//! the host token's (`routes::HostCaller`); the rest is the engine's host services, the same
//! implementation native tools reach in-process (`HostServices::reminder_*`).

use axum::Router;
use axum::routing::post;
use bdk_engine::reminders::CreateReminder;
use serde::Deserialize;
use serde_json::{Value, json};

use super::routes::{HostCaller, api_error};
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

async fn create(caller: HostCaller, JsonBody(body): JsonBody<CreateReminder>) -> ApiResult<OkJson<Value>> {
    // Parsed here too, so a bad body gets the strict-body message naming the field.
    let request = serde_json::to_value(&body).map_err(|e| ApiError::internal(&e))?;
    let record = caller.services().reminder_create(request).await.map_err(api_error)?;
    Ok(OkJson(json!({ "reminder": record })))
}

async fn list(caller: HostCaller) -> ApiResult<OkJson<Value>> {
    let all = caller.services().reminder_list().await.map_err(api_error)?;
    Ok(OkJson(json!({ "reminders": all })))
}

async fn cancel(caller: HostCaller, JsonBody(body): JsonBody<CancelBody>) -> ApiResult<OkJson<Value>> {
    let record = caller.services().reminder_cancel(body.id).await.map_err(api_error)?;
    Ok(OkJson(json!({ "reminder": record })))
}
