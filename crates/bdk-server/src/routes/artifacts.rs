//! `GET /v1/artifacts` (`kind`, `sessionId`, `limit`; newest first) and
//! `GET /v1/artifacts/:id/content` (the content as an attachment with its content type). Both
//! are owner-scoped: a caller sees its own artifacts (every principal's under `--dev` on
//! loopback or `--allow-anonymous`, as for session listings); another principal's artifact is
//! as absent as an unknown one (404 `artifact_not_found`).

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bdk_protocol::SessionId;
use bdk_store::{ArtifactQuery, ArtifactRecord};
use serde::{Deserialize, Serialize};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::routes::OkJson;
use crate::state::AgentState;

/// Listings return at most this many unless `limit` says fewer.
const MAX_LIMIT: usize = 1000;
const DEFAULT_LIMIT: usize = 100;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/artifacts", get(list)).route("/v1/artifacts/{id}/content", get(content))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListQuery {
    kind: Option<String>,
    session_id: Option<String>,
    limit: Option<String>,
}

#[derive(Debug, Serialize)]
struct ArtifactList {
    artifacts: Vec<ArtifactRecord>,
}

async fn list(
    State(state): State<AgentState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<OkJson<ArtifactList>> {
    let Query(query) = query.map_err(|e| ApiError::invalid_request(e.body_text()))?;
    let limit = match &query.limit {
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::invalid_request(format!("`limit` must be a whole number from 1 to {MAX_LIMIT}")));
            }
        },
        None => DEFAULT_LIMIT,
    };
    let session_id = match &query.session_id {
        Some(raw) => Some(
            SessionId::parse(raw.as_str())
                .map_err(|_| ApiError::invalid_request(format!("`sessionId` {raw:?} is not a session id")))?,
        ),
        None => None,
    };
    let filter = ArtifactQuery { principal: None, kind: query.kind, session_id, limit: Some(limit) };
    let artifacts = state.engine().artifacts(&caller.list_scope(), filter).await?;
    Ok(OkJson(ArtifactList { artifacts }))
}

async fn content(State(state): State<AgentState>, caller: Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let Some((record, bytes)) = state.engine().artifact_content(&caller.list_scope(), &id).await? else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "artifact_not_found",
            format!("no artifact {id} with content (unknown, evicted, or not yours)"),
        ));
    };
    let info = record.content.unwrap_or_else(|| bdk_store::ContentInfo {
        file_name: "content".into(),
        content_type: "application/octet-stream".into(),
        size: bytes.len() as u64,
    });
    let content_type =
        HeaderValue::from_str(&info.content_type).unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let safe_name: String = info
        .file_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{safe_name}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_DISPOSITION, disposition),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    Ok((headers, bytes).into_response())
}
