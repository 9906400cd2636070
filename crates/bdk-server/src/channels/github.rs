//! GitHub channels: webhook deliveries in, reviews and comments out.
//!
//! A delivery (`POST /v1/channels/<id>/webhook`, or the loopback-only fan-out
//! `POST /v1/webhooks/github`) is verified with `X-Hub-Signature-256` (HMAC-SHA256 of the raw
//! body, constant time) when the channel's secret is set; without one (allowed only under
//! `--dev`) only direct loopback callers are admitted. Then it is filtered like the reference's
//! PR triggers: `pull_request` opened, reopened, synchronize (pushed to), ready_for_review and a
//! retargeted base (drafts wait), comments on pull requests (`issue_comment`,
//! `pull_request_review_comment`) except the bot's own, and only the `events` and `repos` the
//! channel names. What passes becomes a `send` keyed `pr:owner/repo#N`; the turn's answer is
//! posted back (`reply = "comment"` or `"review"`) through a small GitHub REST client whose base
//! URL and token come from the settings and the environment. Tools post reviews themselves
//! through the host services `github/comment` and `github/review`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bdk_engine::{ChannelSend, Engine, HostCommand, ListScope, Principal};
use bdk_project::model::ChannelDef;
use serde::Deserialize;
use serde_json::{Value, json};

use super::custom::invalid_signature;
use super::watch::{self, Ending, Target};
use super::{Channels, Env, Incoming, Mounted, signature};
use crate::error::ApiError;
use crate::extract::JsonBody;
use crate::host_services::routes::HostCaller;
use crate::routes::OkJson;
use crate::state::{Agent, AgentState};

/// The public GitHub API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// Where the webhook secret is read from when `webhook_secret_env` is not set.
pub const DEFAULT_SECRET_ENV: &str = "GITHUB_WEBHOOK_SECRET";
/// Where the API token is read from when `token_env` is not set.
pub const DEFAULT_TOKEN_ENV: &str = "GITHUB_TOKEN";
/// The principal channel sessions of GitHub belong to.
pub const PRINCIPAL: &str = "github";
/// Events a channel handles when `events` is empty.
pub const DEFAULT_EVENTS: [&str; 3] = ["pull_request", "issue_comment", "pull_request_review_comment"];
/// Pull request actions that start or continue a review (the reference's PR triggers).
const PR_ACTIONS: [&str; 5] = ["opened", "reopened", "synchronize", "ready_for_review", "edited"];
/// How many delivery ids are remembered to refuse replays.
const SEEN_DELIVERIES: usize = 4096;

/// `[github]` of a channel file.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Settings {
    pub bot_name: Option<String>,
    #[serde(default)]
    pub repos: Vec<String>,
    pub webhook_secret_env: Option<String>,
    #[serde(default)]
    pub events: Vec<String>,
    pub handler: Option<Vec<String>>,
    pub api_url: Option<String>,
    pub token_env: Option<String>,
    pub reactions: Option<bool>,
    pub reply: Option<String>,
}

impl Settings {
    pub fn from_def(def: &ChannelDef) -> Self {
        def.settings.clone().and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
    }

    fn secret_env(&self) -> &str {
        self.webhook_secret_env.as_deref().unwrap_or(DEFAULT_SECRET_ENV)
    }

    /// The startup problem of an unset secret outside `--dev`.
    pub fn missing_secret(&self, env: &Env, dev: bool) -> Option<String> {
        (!dev && env(self.secret_env()).is_none()).then(|| {
            format!(
                "the GitHub webhook secret ${} is not set; deliveries cannot be verified (set it, or serve with --dev)",
                self.secret_env()
            )
        })
    }
}

/// One GitHub channel at run time.
pub struct Github {
    pub id: String,
    settings: Settings,
    def: ChannelDef,
    secret: Option<Vec<u8>>,
    client: Client,
    seen: Mutex<VecDeque<String>>,
}

impl std::fmt::Debug for Github {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Github").field("id", &self.id).field("api", &self.client.base).finish()
    }
}

impl Github {
    pub(crate) fn new(def: &ChannelDef, env: &Env, _dev: bool) -> Self {
        let settings = Settings::from_def(def);
        let secret = env(settings.secret_env()).map(String::into_bytes);
        let base =
            settings.api_url.clone().or_else(|| env("GITHUB_API_URL")).unwrap_or_else(|| DEFAULT_API_URL.to_owned());
        let token = env(settings.token_env.as_deref().unwrap_or(DEFAULT_TOKEN_ENV));
        Self {
            id: def.id.clone(),
            client: Client::new(base, token),
            settings,
            def: def.clone(),
            secret,
            seen: Mutex::new(VecDeque::new()),
        }
    }

    /// Whether `id` was delivered before (and remembers it).
    fn replayed(&self, id: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.iter().any(|s| s == id) {
            return true;
        }
        if seen.len() == SEEN_DELIVERIES {
            seen.pop_front();
        }
        seen.push_back(id.to_owned());
        false
    }
}

/// A pull request the channel talks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRef {
    pub repo: String,
    pub number: u64,
}

impl PullRef {
    /// The continuation key `pr:owner/repo#N`.
    pub fn key(&self) -> String {
        format!("pr:{}#{}", self.repo, self.number)
    }

    /// Parses `pr:owner/repo#N` (the reference's `parseGitHubPrContinuationKey`).
    pub fn parse_key(key: &str) -> Option<Self> {
        let rest = key.strip_prefix("pr:")?;
        let (repo, number) = rest.rsplit_once('#')?;
        let (owner, name) = repo.split_once('/')?;
        let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        (ok(owner) && ok(name)).then_some(())?;
        Some(Self { repo: repo.to_owned(), number: number.parse().ok()? })
    }
}

/// What a delivery asks for.
#[derive(Debug)]
enum Decision {
    Ignore(String),
    Send { pull: PullRef, message: String, title: String, comment_id: Option<u64> },
}

/// Decides what a delivery of `event` means for this channel.
fn decide(github: &Github, event: &str, payload: &Value) -> Decision {
    let settings = &github.settings;
    let handled = if settings.events.is_empty() {
        DEFAULT_EVENTS.contains(&event)
    } else {
        settings.events.iter().any(|e| e == event)
    };
    if !handled {
        return Decision::Ignore(format!("event `{event}` is not one this channel handles"));
    }
    let text = |pointer: &str| payload.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
    let repo = text("/repository/full_name");
    if repo.is_empty() {
        return Decision::Ignore("the payload names no repository".into());
    }
    if !settings.repos.is_empty() && !settings.repos.iter().any(|r| r.eq_ignore_ascii_case(&repo)) {
        return Decision::Ignore(format!("repository {repo} is not in this channel's `repos`"));
    }
    let action = text("/action");
    let sender = text("/sender/login");
    match event {
        "pull_request" => {
            let number = payload.pointer("/pull_request/number").and_then(Value::as_u64);
            let Some(number) = number else { return Decision::Ignore("the payload has no pull_request.number".into()) };
            if !PR_ACTIONS.contains(&action.as_str()) {
                return Decision::Ignore(format!("pull_request action `{action}` does not start a review"));
            }
            if action == "edited" && payload.pointer("/changes/base").is_none() {
                return Decision::Ignore("pull_request edited without a new base".into());
            }
            if payload.pointer("/pull_request/draft").and_then(Value::as_bool) == Some(true) {
                return Decision::Ignore("draft pull requests wait until they are ready for review".into());
            }
            let pull = PullRef { repo: repo.clone(), number };
            let title = text("/pull_request/title");
            let what = match action.as_str() {
                "opened" => "opened",
                "reopened" => "reopened",
                "synchronize" => "pushed to",
                "ready_for_review" => "marked ready for review",
                _ => "retargeted to a new base",
            };
            let message = format!(
                "Pull request {repo}#{number} was {what} by {sender}: {title}\n{}\n\n{}",
                text("/pull_request/html_url"),
                text("/pull_request/body"),
            );
            Decision::Send {
                title: format!("{repo}#{number}: {title}"),
                pull,
                message: message.trim_end().to_owned(),
                comment_id: None,
            }
        }
        "issue_comment" | "pull_request_review_comment" => {
            if action != "created" {
                return Decision::Ignore(format!("{event} action `{action}` is not a new comment"));
            }
            let author = text("/comment/user/login");
            if is_bot(settings.bot_name.as_deref(), &author) {
                return Decision::Ignore(format!("the comment is the bot's own ({author})"));
            }
            let number = if event == "issue_comment" {
                if payload.pointer("/issue/pull_request").is_none() {
                    return Decision::Ignore("the comment is on an issue, not a pull request".into());
                }
                payload.pointer("/issue/number").and_then(Value::as_u64)
            } else {
                payload.pointer("/pull_request/number").and_then(Value::as_u64)
            };
            let Some(number) = number else { return Decision::Ignore("the payload names no pull request".into()) };
            let pull = PullRef { repo: repo.clone(), number };
            let mut message = format!("{author} commented on {repo}#{number}");
            if event == "pull_request_review_comment" {
                message.push_str(&format!(
                    " at {}:{}",
                    text("/comment/path"),
                    payload.pointer("/comment/line").cloned().unwrap_or(Value::Null)
                ));
            }
            message.push_str(&format!(":\n{}", text("/comment/body")));
            let comment_id = payload.pointer("/comment/id").and_then(Value::as_u64);
            Decision::Send { title: format!("{repo}#{number}"), pull, message, comment_id }
        }
        other => Decision::Ignore(format!("event `{other}` is not one a GitHub channel handles")),
    }
}

/// The bot's own account: `bot_name`, or the GitHub App's `bot_name[bot]`.
fn is_bot(bot: Option<&str>, author: &str) -> bool {
    bot.is_some_and(|bot| author.eq_ignore_ascii_case(bot) || author.eq_ignore_ascii_case(&format!("{bot}[bot]")))
}

/// `POST /v1/channels/<id>/webhook`.
pub(crate) async fn handle(
    state: &AgentState,
    mounted: &Mounted,
    github: &Arc<Github>,
    incoming: Incoming,
) -> Result<Response, ApiError> {
    if incoming.path != "/webhook" && incoming.path != "/" {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "route_not_found",
            format!("a GitHub channel takes deliveries at /v1/channels/{}/webhook", github.id),
        ));
    }
    if incoming.method != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    if github.secret.is_none() {
        // No secret (only possible under --dev): loopback callers only, by the channel's chain.
        mounted.chain.admit(incoming.peer, &incoming.headers)?;
    }
    let (status, body) = deliver(state.engine(), github, &incoming).await?;
    Ok((status, axum::Json(body)).into_response())
}

/// Verifies, filters and sends one delivery; answers the status and body for the caller.
async fn deliver(engine: &Engine, github: &Arc<Github>, incoming: &Incoming) -> Result<(StatusCode, Value), ApiError> {
    let header = |name: &str| incoming.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(secret) = &github.secret {
        let Some(presented) = header("x-hub-signature-256") else {
            return Err(invalid_signature("the X-Hub-Signature-256 header is missing"));
        };
        if !signature::verify(signature::Algorithm::Sha256, secret, &[&incoming.body], "sha256=", &presented) {
            return Err(invalid_signature("X-Hub-Signature-256 does not match the body"));
        }
    }
    let Some(event) = header("x-github-event") else {
        return Err(ApiError::invalid_request("the X-GitHub-Event header is missing"));
    };
    let payload: Value = serde_json::from_slice(&incoming.body)
        .map_err(|e| ApiError::invalid_request(format!("the delivery is not valid JSON: {e}")))?;
    if !payload.is_object() {
        return Err(ApiError::invalid_request("the delivery is not a JSON object"));
    }
    if let Some(delivery) = header("x-github-delivery")
        && github.replayed(&delivery)
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "duplicate_delivery",
            format!("delivery {delivery} was already handled"),
        ));
    }
    if event == "ping" {
        return Ok((StatusCode::OK, json!({"ok": true, "pong": true})));
    }
    let (pull, mut message, mut title, comment_id) = match decide(github, &event, &payload) {
        Decision::Ignore(reason) => {
            tracing::info!(channel = %github.id, event, reason, "GitHub delivery ignored");
            return Ok((StatusCode::OK, json!({"ok": true, "ignored": reason})));
        }
        Decision::Send { pull, message, title, comment_id } => (pull, message, title, comment_id),
    };
    if let Some(handler) = &github.settings.handler {
        match run_handler(engine, github, handler, &event, &payload, &pull, &message).await? {
            HandlerSays::Ignore(reason) => return Ok((StatusCode::OK, json!({"ok": true, "ignored": reason}))),
            HandlerSays::Send { message: m, title: t } => {
                message = m.unwrap_or(message);
                title = t.unwrap_or(title);
            }
        }
    }
    let principal = Principal::new(PRINCIPAL);
    let mut send = ChannelSend::new(github.id.clone(), message, principal.clone());
    send.continuation_key = Some(pull.key());
    send.title = Some(title);
    send.admission = match github.def.admission {
        bdk_project::model::Admission::Preempt => bdk_engine::Admission::Preempt,
        bdk_project::model::Admission::Coalesce => bdk_engine::Admission::Coalesce,
    };
    let sent = engine.channel_send(send).await?;
    if github.settings.reactions == Some(true) {
        let (client, pull) = (github.client.clone(), pull.clone());
        tokio::spawn(async move {
            let path = match comment_id {
                Some(id) => format!("/repos/{}/issues/comments/{id}/reactions", pull.repo),
                None => format!("/repos/{}/issues/{}/reactions", pull.repo, pull.number),
            };
            if let Err(error) = client.post(&path, &json!({"content": "eyes"})).await {
                tracing::warn!(%error, "posting the progress reaction failed");
            }
        });
    }
    let reply = github.settings.reply.clone().unwrap_or_else(|| "comment".to_owned());
    if reply != "none" {
        let from = match &sent.turn_id {
            Some(_) => 0,
            None => watch::current_index(engine, &sent.session_id, &principal).await,
        };
        let target = Target { session: sent.session_id.clone(), principal, turn: sent.turn_id.clone(), from };
        let (engine, client, pull) = (engine.clone(), github.client.clone(), pull.clone());
        tokio::spawn(async move {
            match watch::turn_end(&engine, target, None).await {
                Some(Ending::Completed(Some(text))) if !text.trim().is_empty() => {
                    let posted = if reply == "review" {
                        client.review(&pull, &text, "COMMENT").await
                    } else {
                        client.comment(&pull, &text).await
                    };
                    if let Err(error) = posted {
                        tracing::warn!(%error, pr = %pull.key(), "posting the reply to GitHub failed");
                    }
                }
                Some(Ending::Failed(reason)) => {
                    tracing::warn!(pr = %pull.key(), reason, "the turn for a GitHub delivery failed")
                }
                _ => {}
            }
        });
    }
    Ok((
        StatusCode::ACCEPTED,
        json!({
            "ok": true,
            "sessionId": sent.session_id,
            "continuationToken": sent.continuation_token,
            "created": sent.created,
        }),
    ))
}

enum HandlerSays {
    Ignore(String),
    Send { message: Option<String>, title: Option<String> },
}

/// The optional `handler`: `null` or `{"ignore": true}` drops the delivery; `{"message",
/// "title"}` replaces what is sent.
async fn run_handler(
    engine: &Engine,
    github: &Github,
    handler: &[String],
    event: &str,
    payload: &Value,
    pull: &PullRef,
    message: &str,
) -> Result<HandlerSays, ApiError> {
    let command = HostCommand {
        name: format!("channel-{}", github.id),
        argv: handler.to_vec(),
        cwd: github.def.cwd.clone(),
        timeout: bdk_project::formats::channel::DEFAULT_HANDLER_TIMEOUT,
        session_id: None,
        principal: Principal::new(PRINCIPAL),
        extension: bdk_project::formats::namespace_of(&github.def.id, github.def.source).map(str::to_owned),
    };
    let input = json!({
        "event": event,
        "action": payload.get("action"),
        "continuationKey": pull.key(),
        "message": message,
        "payload": payload,
    });
    let outcome = engine.run_host_command(&command, &input).await;
    if outcome.is_error {
        return Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "handler_failed",
            outcome.result.as_str().unwrap_or("the handler failed").to_owned(),
        ));
    }
    match outcome.result {
        Value::Null => Ok(HandlerSays::Ignore("the channel's handler ignored the event".into())),
        Value::Object(map) if map.get("ignore").and_then(Value::as_bool) == Some(true) => {
            Ok(HandlerSays::Ignore("the channel's handler ignored the event".into()))
        }
        Value::Object(map) => Ok(HandlerSays::Send {
            message: map.get("message").and_then(Value::as_str).map(str::to_owned),
            title: map.get("title").and_then(Value::as_str).map(str::to_owned),
        }),
        _ => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "handler_invalid_output",
            "the handler must print null or a JSON object",
        )),
    }
}

/// The fan-out's targets: every agent with its channels.
pub(crate) type Targets = Arc<Vec<(Agent, Channels)>>;

/// `POST /v1/webhooks/github`: loopback only; one delivery to every mounted GitHub channel.
pub(crate) async fn fanout(State(targets): State<Targets>, request: Request) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let proxied = crate::auth::PROXY_HEADERS.iter().any(|h| request.headers().contains_key(*h));
    if !peer.is_some_and(|p| p.ip().is_loopback()) || proxied {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "POST /v1/webhooks/github takes direct loopback callers only",
        )
        .into_response();
    }
    let incoming = match super::read(request, String::new()).await {
        Ok(incoming) => incoming,
        Err(error) => return error.into_response(),
    };
    let mut deliveries = Vec::new();
    for (agent, channels) in targets.iter() {
        for (_, github) in channels.github() {
            let result = deliver(&agent.engine, github, &incoming).await;
            let mut entry = json!({"agent": agent.slug(), "channel": github.id});
            match result {
                Ok((status, body)) => {
                    entry["status"] = json!(status.as_u16());
                    if let (Some(entry), Value::Object(body)) = (entry.as_object_mut(), body) {
                        entry.extend(body.into_iter().filter(|(k, _)| k != "ok"));
                    }
                }
                Err(error) => {
                    entry["status"] = json!(error.status.as_u16());
                    entry["error"] = json!(error.code);
                    entry["message"] = json!(error.message);
                }
            }
            deliveries.push(entry);
        }
    }
    if deliveries.is_empty() {
        return ApiError::new(StatusCode::NOT_FOUND, "no_github_channels", "no mounted agent has a GitHub channel")
            .into_response();
    }
    (StatusCode::ACCEPTED, axum::Json(json!({"ok": true, "deliveries": deliveries}))).into_response()
}

/// A small GitHub REST client: comments, reviews and reactions.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Client {
    pub fn new(base: String, token: Option<String>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .user_agent(concat!("bdk/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self { base: base.trim_end_matches('/').to_owned(), token, http }
    }

    pub async fn comment(&self, pull: &PullRef, body: &str) -> Result<Value, String> {
        self.post(&format!("/repos/{}/issues/{}/comments", pull.repo, pull.number), &json!({"body": body})).await
    }

    pub async fn review(&self, pull: &PullRef, body: &str, event: &str) -> Result<Value, String> {
        let path = format!("/repos/{}/pulls/{}/reviews", pull.repo, pull.number);
        self.post(&path, &json!({"body": body, "event": event})).await
    }

    async fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        let Some(token) = &self.token else {
            return Err("no GitHub token is configured (set $GITHUB_TOKEN or `token_env`)".into());
        };
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .json(body)
            .send()
            .await
            .map_err(|e| format!("POST {path}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let detail: String = text.chars().take(300).collect();
            return Err(format!("POST {path}: GitHub answered {status}: {detail}"));
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Host services for tools: post a comment or a review on the calling session's pull request.
pub(crate) fn host_routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/host/github/comment", post(host_comment))
        .route("/v1/host/github/review", post(host_review))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PostBody {
    body: String,
    /// `COMMENT` (default), `APPROVE` or `REQUEST_CHANGES` (reviews only).
    #[serde(default)]
    event: Option<String>,
    /// `owner/repo` and `number`, when the call is not in a pull request's session.
    #[serde(default)]
    repo: Option<String>,
    #[serde(default)]
    number: Option<u64>,
    /// A GitHub channel id, when the agent has several and the session is on none of them.
    #[serde(default)]
    channel: Option<String>,
}

async fn host_comment(
    State(state): State<AgentState>,
    axum::Extension(channels): axum::Extension<Channels>,
    caller: HostCaller,
    JsonBody(body): JsonBody<PostBody>,
) -> Result<OkJson<Value>, ApiError> {
    let (github, pull) = target(&state, &channels, &caller, &body).await?;
    let posted = github.client.comment(&pull, &body.body).await.map_err(upstream)?;
    Ok(OkJson(json!({"repo": pull.repo, "number": pull.number, "id": posted.get("id"), "url": posted.get("html_url")})))
}

async fn host_review(
    State(state): State<AgentState>,
    axum::Extension(channels): axum::Extension<Channels>,
    caller: HostCaller,
    JsonBody(body): JsonBody<PostBody>,
) -> Result<OkJson<Value>, ApiError> {
    let event = body.event.clone().unwrap_or_else(|| "COMMENT".into());
    if !matches!(event.as_str(), "COMMENT" | "APPROVE" | "REQUEST_CHANGES") {
        return Err(ApiError::invalid_request(format!(
            "`event` is {event:?}; use COMMENT, APPROVE or REQUEST_CHANGES"
        )));
    }
    let (github, pull) = target(&state, &channels, &caller, &body).await?;
    let posted = github.client.review(&pull, &body.body, &event).await.map_err(upstream)?;
    Ok(OkJson(json!({"repo": pull.repo, "number": pull.number, "id": posted.get("id"), "url": posted.get("html_url")})))
}

fn upstream(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_GATEWAY, "github_failed", message)
}

/// The channel and pull request a host call means: explicit `repo`/`number`, else the calling
/// session's `pr:owner/repo#N` token.
async fn target(
    state: &AgentState,
    channels: &Channels,
    caller: &HostCaller,
    body: &PostBody,
) -> Result<(Arc<Github>, PullRef), ApiError> {
    let session = match caller.session_id() {
        Some(id) => state.engine().list(ListScope::All).await?.into_iter().find(|s| s.session_id == id),
        None => None,
    };
    let by_id = |id: &str| channels.github().find(|(_, g)| g.id == id).map(|(_, g)| g.clone());
    let github = body
        .channel
        .as_deref()
        .and_then(by_id)
        .or_else(|| session.as_ref().and_then(|s| by_id(&s.channel)))
        .or_else(|| {
            let mut all = channels.github();
            match (all.next(), all.next()) {
                (Some((_, only)), None) => Some(only.clone()),
                _ => None,
            }
        })
        .ok_or_else(|| {
            ApiError::invalid_request("name the GitHub channel (`channel`): this agent has none or several")
        })?;
    let pull = match (&body.repo, body.number) {
        (Some(repo), Some(number)) => PullRef { repo: repo.clone(), number },
        _ => session
            .as_ref()
            .and_then(|s| s.continuation_token.as_deref())
            .and_then(|t| t.split_once(':'))
            .and_then(|(_, key)| PullRef::parse_key(key))
            .ok_or_else(|| {
                ApiError::invalid_request("this call is not in a pull request's session; pass `repo` and `number`")
            })?,
    };
    Ok((github, pull))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host routes' body (`/v1/host/github/comment`, `/review`) is strict like every other.
    #[test]
    fn the_host_body_refuses_unknown_fields_and_names_wrong_types() {
        let typo = crate::extract::parse_json::<PostBody>(br#"{"body": "LGTM", "evnt": "APPROVE"}"#).unwrap_err();
        assert_eq!((typo.status.as_u16(), typo.code), (400, "invalid_request"));
        assert!(typo.message.contains("unknown field `evnt`, expected one of `body`, `event`"), "{}", typo.message);
        let wrong = crate::extract::parse_json::<PostBody>(br#"{"body": "LGTM", "number": "7"}"#).unwrap_err();
        assert!(wrong.message.starts_with("field `number`:"), "{}", wrong.message);
    }

    #[test]
    fn continuation_keys_round_trip() {
        let pull = PullRef { repo: "acme/app".into(), number: 7 };
        assert_eq!(pull.key(), "pr:acme/app#7");
        assert_eq!(PullRef::parse_key("pr:acme/app#7"), Some(pull));
        for bad in ["acme/app#7", "pr:acme#7", "pr:acme/app#x", "pr:/app#1", "pr:a b/c#1"] {
            assert_eq!(PullRef::parse_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_bot_is_recognised_with_or_without_the_app_suffix() {
        assert!(is_bot(Some("review-bot"), "review-bot[bot]"));
        assert!(is_bot(Some("review-bot"), "Review-Bot"));
        assert!(!is_bot(Some("review-bot"), "alice"));
        assert!(!is_bot(None, "alice"));
    }
}
