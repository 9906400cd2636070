//! Firing schedules by request: `POST /v1/dev/schedules/:id` (only under `serve --dev`, where
//! nothing fires by itself) and `POST /v1/internal/schedules/:id/fire` (only under
//! `--no-control-plane`, for an external scheduler; it admits only requests carrying the
//! timed-work marker header, after the auth chain). Both dispatch through the production path
//! (`Schedules::dispatch`) and answer `{scheduleId, sessionIds}`.

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use bdk_engine::TimedError;
use bdk_engine::schedules::{Dispatched, Trigger};

use crate::error::{ApiError, ApiResult};
use crate::state::AgentState;

/// The header an external scheduler's requests carry; the platform's proxy strips it from
/// outside traffic, so webhook and playground callers can never reach the internal routes.
pub const TIMED_WORK_HEADER: &str = "x-agent-serve-timed-work";

pub fn dev_routes() -> Router<AgentState> {
    Router::new().route("/v1/dev/schedules/{id}", post(dev_dispatch))
}

pub fn internal_routes() -> Router<AgentState> {
    Router::new().route("/v1/internal/schedules/{id}/fire", post(internal_fire))
}

async fn dev_dispatch(State(state): State<AgentState>, Path(id): Path<String>) -> ApiResult<Json<Dispatched>> {
    dispatch(&state, &id, Trigger::Dev).await
}

async fn internal_fire(
    State(state): State<AgentState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Dispatched>> {
    require_marker(&headers)?;
    dispatch(&state, &id, Trigger::Internal).await
}

/// Refuses a request without the timed-work marker (403 `timed_work_marker_required`).
pub(crate) fn require_marker(headers: &HeaderMap) -> Result<(), ApiError> {
    let marked = headers.get(TIMED_WORK_HEADER).is_some_and(|v| !v.as_bytes().trim_ascii().is_empty());
    if marked {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "timed_work_marker_required",
            format!("this route admits only timed-work requests from the platform (the {TIMED_WORK_HEADER} header)"),
        ))
    }
}

async fn dispatch(state: &AgentState, id: &str, trigger: Trigger) -> ApiResult<Json<Dispatched>> {
    let Some(schedules) = &state.agent.schedules else {
        return Err(TimedError::UnknownSchedule(id.to_owned()).into());
    };
    Ok(Json(schedules.dispatch(id, trigger).await?))
}

impl From<TimedError> for ApiError {
    fn from(err: TimedError) -> Self {
        let status = match err {
            TimedError::Engine(inner) => return inner.into(),
            TimedError::Store(_) => return ApiError::internal(&err),
            TimedError::UnknownSchedule(_) | TimedError::UnknownReminder(_) | TimedError::UnknownConversation(_) => {
                StatusCode::NOT_FOUND
            }
            TimedError::Invalid { .. } => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, err.code(), err.to_string())
    }
}
