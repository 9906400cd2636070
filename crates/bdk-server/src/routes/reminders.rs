//! Reminders by request: `GET /v1/dev/reminders` and `POST /v1/dev/reminders/:id` (only under
//! `serve --dev`, where reminder timers are off), and `POST /v1/internal/reminders/:id/fire`
//! (only under `--no-control-plane`, with the timed-work marker). The reminders themselves are
//! the engine's (`bdk_engine::reminders`).

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use bdk_engine::TimedError;
use bdk_engine::reminders::Reminders;
use bdk_protocol::SessionId;
use bdk_store::{FiringRecord, ReminderRecord};
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use crate::state::AgentState;

pub fn dev_routes() -> Router<AgentState> {
    Router::new().route("/v1/dev/reminders", get(list)).route("/v1/dev/reminders/{id}", post(dev_fire))
}

pub fn internal_routes() -> Router<AgentState> {
    Router::new().route("/v1/internal/reminders/{id}/fire", post(internal_fire))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListQuery {
    session_id: Option<String>,
}

#[derive(Debug, Serialize)]
struct ReminderList {
    reminders: Vec<ReminderRecord>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Fired {
    reminder_id: String,
    /// `false`: that due time had already fired (a retried request).
    fired: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    firing: Option<FiringRecord>,
}

fn reminders<'a>(state: &'a AgentState, id: &str) -> Result<&'a Reminders, ApiError> {
    state.agent.reminders.as_ref().ok_or_else(|| TimedError::UnknownReminder(id.to_owned()).into())
}

async fn list(State(state): State<AgentState>, Query(query): Query<ListQuery>) -> ApiResult<Json<ReminderList>> {
    let session = match &query.session_id {
        Some(raw) => Some(SessionId::parse(raw.as_str()).map_err(|_| ApiError::session_not_found(raw))?),
        None => None,
    };
    let Some(all) = &state.agent.reminders else { return Ok(Json(ReminderList { reminders: Vec::new() })) };
    Ok(Json(ReminderList { reminders: all.list(session.as_ref()).await? }))
}

async fn dev_fire(State(state): State<AgentState>, Path(id): Path<String>) -> ApiResult<Json<Fired>> {
    let firing = reminders(&state, &id)?.dispatch(&id).await?;
    Ok(Json(Fired { reminder_id: id, fired: true, firing: Some(firing) }))
}

async fn internal_fire(
    State(state): State<AgentState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Fired>> {
    super::schedules::require_marker(&headers)?;
    let firing = reminders(&state, &id)?.fire_due(&id).await?;
    Ok(Json(Fired { reminder_id: id, fired: firing.is_some(), firing }))
}
