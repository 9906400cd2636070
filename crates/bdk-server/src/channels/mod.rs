//! Channels: the HTTP surfaces of `channels/<id>.toml` mounted under `/v1/channels/<id>`.
//!
//! - `custom` and `webhook` channels serve their declared routes (`custom.rs`); a webhook
//!   channel first checks an HMAC signature (`signature.rs`).
//! - `github` channels take webhook deliveries at `POST /v1/channels/<id>/webhook`, and
//!   `POST /v1/webhooks/github` (loopback only) fans one delivery out to all of them
//!   (`github.rs`).
//! - `slack` channels take the Events API at `POST /v1/channels/<id>/events`, or Socket Mode
//!   (`slack.rs`, started by [`start`]).
//!
//! Every channel turns a request into a `send` on the engine (start or continue a session keyed
//! by the channel's continuation key); `watch.rs` follows the turn for channels that deliver the
//! answer back to their surface. What does not live here: sessions (`bdk-engine`), the session
//! API's own auth (`auth.rs` of the crate), host services (`host_services`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::routing::{any, post};
use bdk_project::Project;
use bdk_project::model::{ChannelDef, ChannelKind};
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::extract::BodyLimit;
use crate::state::{AgentState, AppState};

mod auth;
mod custom;
pub mod github;
pub mod signature;
pub mod slack;
mod watch;

pub use auth::Chain;

/// The environment a channel reads its secrets from.
pub(crate) type Env = dyn Fn(&str) -> Option<String> + Send + Sync;

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Where channels read secrets and tokens: the process environment (the default), or a fixed
/// table (an embedder's secret store, or a test).
#[derive(Clone, Default)]
pub struct ChannelEnv(Option<Arc<HashMap<String, String>>>);

impl std::fmt::Debug for ChannelEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            None => f.write_str("ChannelEnv(process)"),
            Some(table) => write!(f, "ChannelEnv({} names)", table.len()),
        }
    }
}

impl ChannelEnv {
    /// Only these names and values; the process environment is not read.
    pub fn table(values: impl IntoIterator<Item = (String, String)>) -> Self {
        Self(Some(Arc::new(values.into_iter().collect())))
    }

    pub fn get(&self, name: &str) -> Option<String> {
        match &self.0 {
            None => process_env(name),
            Some(table) => table.get(name).filter(|v| !v.is_empty()).cloned(),
        }
    }
}

/// One mounted channel of an agent.
#[derive(Debug)]
pub(crate) struct Mounted {
    pub def: ChannelDef,
    pub chain: Chain,
    pub runtime: Runtime,
}

#[derive(Debug)]
pub(crate) enum Runtime {
    Custom,
    Webhook(custom::WebhookCheck),
    Github(Arc<github::Github>),
    Slack(Arc<slack::Slack>),
}

/// An agent's channels, by id.
#[derive(Debug, Clone, Default)]
pub(crate) struct Channels {
    by_id: Arc<HashMap<String, Arc<Mounted>>>,
}

impl Channels {
    fn build(app: &AppState, project: &Project, env: &Env) -> Self {
        let mut by_id = HashMap::new();
        for def in &project.caps.channels {
            let chain = Chain::new(&def.id, &def.auth, app.auth_state(), env);
            let runtime = match def.kind {
                ChannelKind::Custom => Runtime::Custom,
                ChannelKind::Webhook => Runtime::Webhook(custom::WebhookCheck::new(def, env)),
                ChannelKind::Github => Runtime::Github(Arc::new(github::Github::new(def, env, app.options.dev))),
                ChannelKind::Slack => Runtime::Slack(Arc::new(slack::Slack::new(def, env))),
            };
            by_id.insert(def.id.clone(), Arc::new(Mounted { def: def.clone(), chain, runtime }));
        }
        Self { by_id: Arc::new(by_id) }
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Arc<Mounted>> {
        self.by_id.get(id)
    }

    pub(crate) fn github(&self) -> impl Iterator<Item = (&Arc<Mounted>, &Arc<github::Github>)> {
        self.by_id.values().filter_map(|m| match &m.runtime {
            Runtime::Github(g) => Some((m, g)),
            _ => None,
        })
    }
}

/// What problems keep `project`'s channels from serving: a GitHub, Slack or signed webhook
/// channel whose secret is unset outside `--dev`. `serve` refuses to start on any.
pub fn startup_problems(project: &Project, dev: bool) -> Vec<String> {
    startup_problems_with(project, dev, &process_env)
}

/// [`startup_problems`] reading secrets from `env`.
pub fn startup_problems_with(project: &Project, dev: bool, env: &Env) -> Vec<String> {
    let mut problems = Vec::new();
    for def in &project.caps.channels {
        match def.kind {
            ChannelKind::Github => {
                if let Some(problem) = github::Settings::from_def(def).missing_secret(env, dev) {
                    problems.push(format!("{}: {problem}", def.file));
                }
            }
            ChannelKind::Slack => {
                if let Some(problem) = slack::Settings::from_def(def).missing_secret(env, dev) {
                    problems.push(format!("{}: {problem}", def.file));
                }
            }
            ChannelKind::Webhook => {
                let name = def.settings.as_ref().and_then(|s| s.get("secret_env")).and_then(serde_json::Value::as_str);
                if let Some(name) = name
                    && !dev
                    && env(name).is_none()
                {
                    problems.push(format!(
                        "{}: the webhook secret ${name} is not set; signed requests cannot be verified \
                         (set it, or serve with --dev)",
                        def.file
                    ));
                }
            }
            ChannelKind::Custom => {}
        }
    }
    problems
}

/// The channel routes of one agent, relative to its base path.
pub(crate) fn routes(app: &AppState, project: &Project) -> Router<AgentState> {
    let env = app.options.channel_env.clone();
    routes_with_env(app, project, &move |name| env.get(name))
}

pub(crate) fn routes_with_env(app: &AppState, project: &Project, env: &Env) -> Router<AgentState> {
    let channels = Channels::build(app, project, env);
    let host = github::host_routes().layer(axum::Extension(channels.clone()));
    Router::new()
        .route("/v1/channels/{channel}", any(dispatch_root))
        .route("/v1/channels/{channel}/{*rest}", any(dispatch))
        .layer(axum::Extension(channels))
        .merge(host)
}

/// `POST /v1/webhooks/github` (host level): one delivery to every mounted GitHub channel.
pub(crate) fn fanout_routes(app: &AppState) -> Router {
    let targets: Vec<(crate::state::Agent, Channels)> = app
        .agents
        .iter()
        .map(|agent| {
            let env = app.options.channel_env.clone();
            (agent.clone(), Channels::build(app, &agent.project, &move |name| env.get(name)))
        })
        .collect();
    Router::new().route("/v1/webhooks/github", post(github::fanout)).with_state(Arc::new(targets))
}

/// Starts what runs beside the routes (Slack Socket Mode connections). Cancel the token to stop.
pub fn start(app: &AppState) -> CancellationToken {
    let stop = CancellationToken::new();
    for agent in app.agents.iter() {
        for def in agent.project.caps.channels.iter().filter(|d| d.kind == ChannelKind::Slack) {
            let env = app.options.channel_env.clone();
            let slack = Arc::new(slack::Slack::new(def, &move |name| env.get(name)));
            if slack.socket_mode() {
                tokio::spawn(slack::socket_mode(slack, agent.engine.clone(), stop.child_token()));
            }
        }
    }
    stop
}

async fn dispatch_root(
    state: State<AgentState>,
    channels: axum::Extension<Channels>,
    Path(channel): Path<String>,
    request: Request,
) -> Response {
    handle(state, channels, channel, String::new(), request).await
}

async fn dispatch(
    state: State<AgentState>,
    channels: axum::Extension<Channels>,
    Path((channel, rest)): Path<(String, String)>,
    request: Request,
) -> Response {
    handle(state, channels, channel, rest, request).await
}

/// A request to a channel, read once: what every channel kind works from.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub method: Method,
    /// The path under the channel, starting with `/` (`/` for the channel root).
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub peer: Option<SocketAddr>,
    pub body: Bytes,
}

async fn handle(
    State(state): State<AgentState>,
    axum::Extension(channels): axum::Extension<Channels>,
    channel: String,
    rest: String,
    request: Request,
) -> Response {
    use axum::response::IntoResponse;
    let Some(mounted) = channels.get(&channel).cloned() else {
        return ApiError::new(StatusCode::NOT_FOUND, "channel_not_found", format!("no channel `{channel}`"))
            .into_response();
    };
    let incoming = match read(request, rest).await {
        Ok(incoming) => incoming,
        Err(error) => return error.into_response(),
    };
    let result = match &mounted.runtime {
        Runtime::Custom | Runtime::Webhook(_) => custom::handle(&state, &mounted, incoming).await,
        Runtime::Github(github) => github::handle(&state, &mounted, github, incoming).await,
        Runtime::Slack(slack) => slack::handle(&state, slack, incoming).await,
    };
    match result {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(channel = %mounted.def.id, status = error.status.as_u16(), code = error.code, message = %error.message, "channel request refused");
            error.into_response()
        }
    }
}

async fn read(request: Request, rest: String) -> Result<Incoming, ApiError> {
    let limit = request.extensions().get::<BodyLimit>().map_or(crate::state::DEFAULT_BODY_LIMIT, |l| l.0);
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, limit).await.map_err(|_| ApiError::payload_too_large(limit))?;
    Ok(Incoming {
        method: parts.method,
        path: format!("/{}", rest.trim_end_matches('/')),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers,
        peer,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, Project) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("p");
        std::fs::create_dir_all(root.join("bot/channels")).unwrap();
        std::fs::write(root.join("bot/agent.toml"), "name = \"p\"\n").unwrap();
        std::fs::write(root.join("bot/instructions.md"), "Hi.\n").unwrap();
        for (path, text) in files {
            std::fs::write(root.join(path), text).unwrap();
        }
        let mut discovery = bdk_project::discover(&[root]);
        (dir, discovery.projects.remove(0))
    }

    #[test]
    fn unverifiable_channels_are_startup_problems_outside_dev() {
        let (_dir, project) = project(&[
            ("bot/channels/gh.toml", "kind = \"github\"\n"),
            ("bot/channels/sl.toml", "kind = \"slack\"\n[slack]\nenv_prefix = \"OPS\"\n"),
            (
                "bot/channels/hook.toml",
                "kind = \"webhook\"\n[webhook]\nsecret_env = \"HOOK\"\n[[routes]]\nmethod = \"POST\"\npath = \"/\"\nhandler = [\"true\"]\n",
            ),
        ]);
        let none = |_: &str| None;
        let problems = startup_problems_with(&project, false, &none);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("$GITHUB_WEBHOOK_SECRET")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("$OPS_SLACK_SIGNING_SECRET")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("$HOOK")), "{problems:?}");
        assert!(startup_problems_with(&project, true, &none).is_empty());
        let all = |name: &str| Some(format!("value of {name}"));
        assert!(startup_problems_with(&project, false, &all).is_empty());
        let socket = |name: &str| (name == "OPS_SLACK_APP_TOKEN").then(|| "xapp".to_owned());
        let problems = startup_problems_with(&project, false, &socket);
        assert!(!problems.iter().any(|p| p.contains("OPS_SLACK")), "Socket Mode needs no signing secret: {problems:?}");
    }
}
