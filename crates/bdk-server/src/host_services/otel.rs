//! `POST /v1/host/otel/{metric,tag}`: the reference's `host.otel` for commands: record a metric
//! of host code, or tag the calling session (its later turn spans carry the tag). Admission is
//! the host token's (`routes::HostCaller`); the bodies are strict like every other (an unknown
//! field or a value of the wrong type is a 400 `invalid_request` naming it); the remaining
//! validation and the recording are the engine's. With telemetry off both answer
//! `{"recorded": false}`.

use axum::Router;
use axum::routing::post;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::routes::{HostCaller, api_error};
use crate::error::ApiResult;
use crate::extract::JsonBody;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/host/otel/metric", post(metric)).route("/v1/host/otel/tag", post(tag))
}

/// `{name, kind?, value, attributes?}`.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetricBody {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attributes: Option<Map<String, Value>>,
}

/// `{key, value}`; the engine checks that `value` is a string, number or boolean.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TagBody {
    key: String,
    value: Value,
}

async fn metric(caller: HostCaller, JsonBody(body): JsonBody<MetricBody>) -> ApiResult<OkJson<Value>> {
    let body = serde_json::to_value(body).unwrap_or_default();
    Ok(OkJson(caller.services().otel_metric(body).await.map_err(api_error)?))
}

async fn tag(caller: HostCaller, JsonBody(body): JsonBody<TagBody>) -> ApiResult<OkJson<Value>> {
    let body = serde_json::to_value(body).unwrap_or_default();
    Ok(OkJson(caller.services().otel_tag(body).await.map_err(api_error)?))
}
