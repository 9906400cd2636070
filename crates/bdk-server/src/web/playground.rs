//! The playground: a hand-written web app (HTML, CSS and vanilla ES modules under `assets/`,
//! embedded with `include_bytes!`) served at `<base>/playground` with its files at
//! `<base>/playground/assets/:file`. The page learns its agent's base path from a `<meta>` tag
//! and then uses only the public HTTP API, with the same auth as any client.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use super::escape;
use crate::error::ApiError;
use crate::state::AgentState;

/// (file name, content type, bytes) of every asset.
pub const ASSETS: &[(&str, &str, &[u8])] = &[
    ("style.css", "text/css; charset=utf-8", include_bytes!("assets/style.css")),
    ("app.js", "text/javascript; charset=utf-8", include_bytes!("assets/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_bytes!("assets/api.js")),
    ("dom.js", "text/javascript; charset=utf-8", include_bytes!("assets/dom.js")),
    ("chat.js", "text/javascript; charset=utf-8", include_bytes!("assets/chat.js")),
    ("runs.js", "text/javascript; charset=utf-8", include_bytes!("assets/runs.js")),
    ("trace.js", "text/javascript; charset=utf-8", include_bytes!("assets/trace.js")),
    ("agent.js", "text/javascript; charset=utf-8", include_bytes!("assets/agent.js")),
    ("tools.js", "text/javascript; charset=utf-8", include_bytes!("assets/tools.js")),
    ("views.js", "text/javascript; charset=utf-8", include_bytes!("assets/views.js")),
    ("session.js", "text/javascript; charset=utf-8", include_bytes!("assets/session.js")),
];

const PAGE: &str = include_str!("assets/index.html");

pub fn routes() -> Router<AgentState> {
    Router::new().route("/playground", get(page)).route("/playground/assets/{file}", get(asset))
}

async fn page(State(state): State<AgentState>) -> Response {
    let base = escape(&state.base_path);
    let html = PAGE.replace("{{BASE}}", &base).replace("{{NAME}}", &escape(&state.agent.current().name));
    let mut response = Html(html).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, bytes)) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, *content_type), (header::CACHE_CONTROL, "no-cache")], *bytes)
                .into_response()
        }
        None => ApiError::new(StatusCode::NOT_FOUND, "asset_not_found", format!("no playground asset {file:?}"))
            .into_response(),
    }
}
