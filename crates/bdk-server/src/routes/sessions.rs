//! `GET /v1/sessions`: the caller's sessions, or every principal's under `--dev` on loopback or
//! `--allow-anonymous`.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use bdk_engine::SessionSummary;
use serde::Serialize;

use crate::auth::Caller;
use crate::error::ApiResult;
use crate::routes::OkJson;
use crate::state::AgentState;

pub fn routes() -> Router<AgentState> {
    Router::new().route("/v1/sessions", get(list))
}

#[derive(Debug, Serialize)]
struct SessionList {
    sessions: Vec<SessionSummary>,
}

async fn list(State(state): State<AgentState>, caller: Caller) -> ApiResult<OkJson<SessionList>> {
    let sessions = state.engine().list(caller.list_scope()).await?;
    Ok(OkJson(SessionList { sessions }))
}
