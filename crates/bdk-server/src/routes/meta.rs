//! `GET /v1/meta`: what a browser app needs to boot (agent name, dev flag, base path). No auth.

use axum::extract::State;
use serde::Serialize;

use crate::routes::OkJson;
use crate::state::AgentState;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    pub name: String,
    pub slug: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub dev: bool,
    /// The prefix of this agent's routes: `/<slug>`, or empty under `--mode single`.
    pub base_path: String,
    /// `localDevStrict`, `bearer`, `bearer+anonymous` or `allowAll`.
    pub auth: &'static str,
    pub playground: bool,
    pub version: &'static str,
}

pub async fn get_meta(State(state): State<AgentState>) -> OkJson<Meta> {
    let project = state.agent.current();
    OkJson(Meta {
        name: project.name.clone(),
        slug: project.slug.clone(),
        description: project.description.clone(),
        dev: state.app.options.dev,
        base_path: state.base_path.to_string(),
        auth: state.app.options.auth.name(),
        playground: state.app.options.playground,
        version: env!("CARGO_PKG_VERSION"),
    })
}
