//! `POST /v1/host/artifacts/{tag,list}`: the artifacts host service for commands (the
//! reference's `ctx.artifacts.tag/list`), as the calling session's owner. Admission is the host
//! token's (`routes::HostCaller`); the checks and the storage are the engine's.

use axum::Router;
use axum::routing::post;
use serde_json::Value;

use super::routes::{HostCaller, api_error};
use crate::error::ApiResult;
use crate::extract::JsonBody;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/host/artifacts/tag", post(tag)).route("/v1/host/artifacts/list", post(list))
}

async fn tag(caller: HostCaller, JsonBody(body): JsonBody<Value>) -> ApiResult<OkJson<Value>> {
    Ok(OkJson(caller.services().artifact_tag(body).await.map_err(api_error)?))
}

async fn list(caller: HostCaller, JsonBody(body): JsonBody<Value>) -> ApiResult<OkJson<Value>> {
    Ok(OkJson(caller.services().artifact_list(body).await.map_err(api_error)?))
}
