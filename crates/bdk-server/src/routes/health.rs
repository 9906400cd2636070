//! `GET /v1/health`: liveness, no auth. The host-level one (multi-agent layout) lives in `host`.

use axum::extract::State;
use serde::Serialize;

use crate::routes::OkJson;
use crate::state::AgentState;

#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents: Option<usize>,
    /// Each hook's delivered / dropped / restart counts (absent without hooks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<bdk_engine::HookStatus>,
    /// The last hot reload under `serve --dev` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload: Option<crate::reload::ReloadReport>,
}

pub async fn agent_health(State(state): State<AgentState>) -> OkJson<Health> {
    let hooks = state.agent.engine.hooks();
    let reload = state.app.reload.as_ref().map(|r| r.report());
    OkJson(Health { status: "ok", slug: Some(state.agent.slug().to_owned()), agents: None, hooks, reload })
}
