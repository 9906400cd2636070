//! The web surface: the playground app (`playground`), the documentation site (`docs`) and the
//! OpenAPI document route. Host-level routes are [`routes`]; each agent's playground is
//! [`agent_routes`]. Everything is embedded in the binary; nothing loads from elsewhere.

use axum::Router;
use axum::extract::State;
use axum::response::Redirect;
use axum::routing::get;

use crate::state::{AgentState, AppState, Mode};

pub mod docs;
pub mod playground;

/// Host routes: `/docs...` (unless `--no-docs`), `/v1/openapi.json`, and the way to the
/// playground: `/playground` in the multi-agent layout, `/` in the single one.
pub fn routes(state: AppState) -> Router {
    let mut router = Router::new().route("/v1/openapi.json", get(crate::openapi::get_document));
    if state.options.docs {
        router = router.merge(docs::routes());
    }
    if state.options.playground {
        router = match state.options.mode {
            Mode::Multi => router.route("/playground", get(to_playground)),
            Mode::Single => router.route("/", get(|| async { Redirect::to("/playground") })),
        };
    }
    router.with_state(state)
}

/// Each agent's playground (unless `--no-playground`), relative to its base path.
pub fn agent_routes(app: &AppState) -> Router<AgentState> {
    if app.options.playground { playground::routes() } else { Router::new() }
}

/// `/playground` in the multi-agent layout: the one agent's playground, or the index.
async fn to_playground(State(state): State<AppState>) -> Redirect {
    match state.agents.as_slice() {
        [agent] => Redirect::to(&format!("{}/playground", state.base_path(agent))),
        _ => Redirect::to("/"),
    }
}

/// Escapes text for HTML element content and double-quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
