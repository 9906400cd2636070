//! `GET /v1/info`: the bare project-info object (`bdk info --json` for one project), with each
//! schedule's latest recorded firing, and its next firing only when this host fires it.

use axum::Json;
use axum::extract::State;
use bdk_protocol::info::ProjectInfo;

use crate::state::{Agent, AgentState};

pub async fn get_info(State(state): State<AgentState>) -> Json<ProjectInfo> {
    let mut info = bdk_project::manifest(&state.agent.current());
    if let Some(schedules) = &state.agent.schedules {
        let fires_here = Agent::clocks_run(&state.app.options);
        bdk_engine::schedules::annotate(&mut info, schedules.store().as_ref(), fires_here).await;
    }
    Json(info)
}
