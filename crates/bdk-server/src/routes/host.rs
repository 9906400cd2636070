//! Host routes of the multi-agent layout, above every agent and without auth: `GET /` (an HTML
//! index of the mounted agents) and `GET /v1/agents` (the same as JSON), both only while the
//! playground is enabled, and `GET /v1/health`.

use std::fmt::Write as _;

use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use serde::Serialize;

use crate::routes::OkJson;
use crate::routes::health::Health;
use crate::state::AppState;
use crate::web::escape;

pub fn routes(state: AppState) -> Router {
    let mut router = Router::new().route("/v1/health", get(host_health));
    if state.options.playground {
        router = router.route("/", get(index)).route("/v1/agents", get(agents));
    }
    router.with_state(state)
}

/// `degraded` with the first failing agent's `store` while any agent's store refuses writes.
async fn host_health(State(state): State<AppState>) -> OkJson<Health> {
    let reload = state.reload.as_ref().map(|r| r.report());
    let operator = crate::routes::health::operator(&state, None, false).await;
    let store = state.agents.iter().map(|agent| agent.engine.store_status()).find(|s| !s.writable);
    OkJson(Health {
        status: crate::routes::health::status_of(store.as_ref()),
        slug: None,
        agents: Some(state.agents.len()),
        hooks: Vec::new(),
        reload,
        store,
        operator,
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentEntry {
    slug: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    base_path: String,
    playground_url: String,
}

#[derive(Debug, Serialize)]
struct AgentIndex {
    agents: Vec<AgentEntry>,
}

fn entries(state: &AppState) -> Vec<AgentEntry> {
    state
        .agents
        .iter()
        .map(|agent| {
            let base_path = state.base_path(agent);
            AgentEntry {
                slug: agent.slug().to_owned(),
                name: agent.current().name.clone(),
                description: agent.current().description.clone(),
                playground_url: format!("{base_path}/playground"),
                base_path,
            }
        })
        .collect()
}

async fn agents(State(state): State<AppState>) -> OkJson<AgentIndex> {
    OkJson(AgentIndex { agents: entries(&state) })
}

async fn index(State(state): State<AppState>) -> Html<String> {
    let mut page = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>BDK agents</title>\
         <style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}\
         li{margin:.6rem 0}code{background:#f3f3f3;padding:0 .25rem}</style></head>\n<body>\n<h1>BDK agents</h1>\n<ul>\n",
    );
    for entry in entries(&state) {
        let _ = write!(
            page,
            "<li><a href=\"{}\"><strong>{}</strong></a> <code>{}</code>",
            escape(&entry.playground_url),
            escape(&entry.name),
            escape(&entry.base_path),
        );
        if let Some(description) = &entry.description {
            let _ = write!(page, "<br>{}", escape(description));
        }
        page.push_str("</li>\n");
    }
    page.push_str("</ul>\n<p>JSON: <a href=\"/v1/agents\">/v1/agents</a> · API: <a href=\"/v1/openapi.json\">/v1/openapi.json</a>");
    if state.options.docs {
        page.push_str(" · Docs: <a href=\"/docs\">/docs</a>");
    }
    page.push_str("</p>\n</body></html>\n");
    Html(page)
}

#[cfg(test)]
mod tests {
    #[test]
    fn escape_neutralises_markup() {
        assert_eq!(super::escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
