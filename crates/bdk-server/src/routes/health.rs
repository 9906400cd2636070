//! `GET /v1/health`: liveness, no auth. The host-level one (multi-agent layout) lives in `host`.
//!
//! Always 200 while the process answers (it is a liveness check: restarting the host does not
//! fix a full disk, and reads still work). When the state store refuses writes, `status` is
//! `degraded` and `store` says why; both go back by themselves once a probe write succeeds.

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
    /// Present only while the state store refuses writes (`writable: false`, `error`, `since`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<bdk_engine::StoreStatus>,
}

/// `ok`, or `degraded` while the store refuses writes.
pub fn status_of(store: Option<&bdk_engine::StoreStatus>) -> &'static str {
    if store.is_some() { "degraded" } else { "ok" }
}

pub async fn agent_health(State(state): State<AgentState>) -> OkJson<Health> {
    let hooks = state.agent.engine.hooks();
    let store = Some(state.agent.engine.store_status()).filter(|s| !s.writable);
    OkJson(Health {
        status: status_of(store.as_ref()),
        slug: Some(state.agent.slug().to_owned()),
        agents: None,
        hooks,
        store,
    })
}
