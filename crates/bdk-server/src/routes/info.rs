//! `GET /v1/info`: the bare project-info object (`bdk info --json` for one project).

use axum::Json;
use axum::extract::State;
use bdk_protocol::info::ProjectInfo;

use crate::state::AgentState;

pub async fn get_info(State(state): State<AgentState>) -> Json<ProjectInfo> {
    Json(bdk_project::manifest(&state.agent.project))
}
