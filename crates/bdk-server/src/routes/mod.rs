//! The router: one module per resource, assembled into the multi-agent layout
//! (`/<slug>/v1/...` per agent, host routes at the root) or the single layout (`/v1/...`).
//!
//! Auth runs on the session, listing, info and logs routes of each agent; `health` and `meta`
//! and the host routes (`/`, `/v1/agents`, `/v1/health`) run none, as the reference says. The
//! host-service routes (`/v1/host/...`, `host_services`) admit only a live per-call host token.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use tower_http::trace::TraceLayer;

use crate::auth;
use crate::error::ApiError;
use crate::extract::BodyLimit;
use crate::state::{AgentState, AppState, Mode};

mod abs;
pub(crate) mod approvals;
mod artifacts;
pub(crate) mod evals;
mod health;
mod host;
mod info;
mod logs;
mod meta;
mod reminders;
mod schedules;
mod session;
mod sessions;
mod tools;

/// The whole HTTP surface of a host, ready for `axum::serve` or `oneshot`.
///
/// Serve it with `into_make_service_with_connect_info::<SocketAddr>()`: the default auth needs
/// the peer address, and refuses requests without one.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new();
    match state.options.mode {
        Mode::Single => {
            if let Some(agent) = state.agents.first() {
                router = router.merge(agent_routes(&state, agent.clone()));
            }
        }
        Mode::Multi => {
            for agent in state.agents.iter() {
                router = router.nest(&state.base_path(agent), agent_routes(&state, agent.clone()));
            }
            router = router.merge(host::routes(state.clone()));
        }
    }
    router = router.merge(crate::web::routes(state.clone()));
    router = router.merge(crate::channels::fanout_routes(&state));
    router = router.merge(crate::telemetry::metrics_routes(&state));
    let limit = state.options.body_limit;
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(move |mut request: Request, next: Next| async move {
            // A declared length over the limit is refused before any byte of the body is read.
            if declared_length(&request).is_some_and(|length| length > limit as u64) {
                return axum::response::IntoResponse::into_response(ApiError::payload_too_large(limit));
            }
            request.extensions_mut().insert(BodyLimit(limit));
            next.run(request).await
        }))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.telemetry.clone(), crate::telemetry::http_span))
        .layer(TraceLayer::new_for_http())
        .layer(middleware::from_fn(crate::access_log::log))
}

/// One agent's routes, relative to its base path.
fn agent_routes(app: &AppState, agent: crate::state::Agent) -> Router {
    // Its `agent = "<slug>"` connections reach the agents of this host in-process.
    if let Some(mcp) = agent.engine.tools().mcp() {
        mcp.attach_peers(std::sync::Arc::new(crate::mcp::LocalPeers::new(&app.agents, agent.slug())));
    }
    let state = AgentState { base_path: app.base_path(&agent).into(), app: app.clone(), agent };
    let mut timed = Router::new();
    if app.options.dev {
        timed = timed.merge(schedules::dev_routes()).merge(reminders::dev_routes());
    }
    if !app.options.control_plane {
        timed = timed.merge(schedules::internal_routes()).merge(reminders::internal_routes());
    }
    let authed = Router::new()
        .merge(timed)
        .merge(session::routes())
        .merge(approvals::routes())
        .merge(sessions::routes())
        .merge(tools::routes())
        .merge(evals::routes())
        .merge(artifacts::routes())
        .merge(abs::routes())
        .route("/v1/info", get(info::get_info))
        .route("/v1/logs", get(logs::get_logs))
        .merge(crate::mcp::routes(&state.agent, &app.streams_end))
        .route_layer(middleware::from_fn_with_state(app.auth_state(), auth::require));
    let open = Router::new().route("/v1/health", get(health::agent_health)).route("/v1/meta", get(meta::get_meta));
    let open = open.merge(crate::web::agent_routes(app));
    // Host services admit by their own per-call token, never by the auth chain.
    let host = crate::host_services::routes::routes()
        .merge(crate::host_services::reminders::routes())
        .merge(crate::host_services::mcp::routes())
        .merge(crate::host_services::artifacts::routes())
        .merge(crate::host_services::otel::routes());
    let channels = crate::channels::routes(app, &state.agent.project);
    authed.merge(open).merge(host).merge(channels).with_state(state)
}

/// The request's `Content-Length`, when it has a readable one.
fn declared_length(request: &Request) -> Option<u64> {
    request.headers().get(axum::http::header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

async fn not_found(request: Request) -> ApiError {
    ApiError::route_not_found(request.uri().path())
}

async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

/// Extracts the [`auth::Caller`] the auth layer admitted.
pub(crate) mod caller {
    use axum::extract::FromRequestParts;
    use axum::http::request::Parts;

    use crate::auth::Caller;
    use crate::error::ApiError;

    impl<S: Send + Sync> FromRequestParts<S> for Caller {
        type Rejection = ApiError;

        async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
            parts.extensions.get::<Caller>().cloned().ok_or_else(|| ApiError::unauthorized("no caller"))
        }
    }
}

/// A success body: `{"ok": true, ...fields of T}`.
#[derive(Debug)]
pub(crate) struct OkJson<T>(pub T);

impl<T: serde::Serialize> axum::response::IntoResponse for OkJson<T> {
    fn into_response(self) -> Response {
        #[derive(serde::Serialize)]
        struct Body<T> {
            ok: bool,
            #[serde(flatten)]
            inner: T,
        }
        axum::Json(Body { ok: true, inner: self.0 }).into_response()
    }
}
