//! `POST /v1/host/otel/{metric,tag}`: the reference's `host.otel` for commands: record a metric
//! of host code, or tag the calling session (its later turn spans carry the tag). Admission is
//! the host token's (`routes::HostCaller`); validation and recording are the engine's. With
//! telemetry off both answer `{"recorded": false}`.

use axum::Router;
use axum::routing::post;
use serde_json::Value;

use super::routes::{HostCaller, api_error};
use crate::error::ApiResult;
use crate::extract::JsonBody;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/host/otel/metric", post(metric)).route("/v1/host/otel/tag", post(tag))
}

async fn metric(caller: HostCaller, JsonBody(body): JsonBody<Value>) -> ApiResult<OkJson<Value>> {
    Ok(OkJson(caller.services().otel_metric(body).await.map_err(api_error)?))
}

async fn tag(caller: HostCaller, JsonBody(body): JsonBody<Value>) -> ApiResult<OkJson<Value>> {
    Ok(OkJson(caller.services().otel_tag(body).await.map_err(api_error)?))
}
