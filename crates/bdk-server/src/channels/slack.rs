//! Slack channels: the Events API over HTTP (`POST /v1/channels/<id>/events`, signed with the
//! app's signing secret inside a five-minute replay window) and Socket Mode (a websocket opened
//! with `apps.connections.open`, every envelope acknowledged). Both feed one event handler.
//!
//! Credentials come from the environment, prefixed so several bots share a host:
//! `<PREFIX>_SLACK_BOT_TOKEN`, `<PREFIX>_SLACK_APP_TOKEN`, `<PREFIX>_SLACK_SIGNING_SECRET`
//! (`SLACK_...` without `env_prefix`). A mention, a DM or a top-level post in a watched channel
//! starts or continues the thread's session (key `<channel>:<thread_ts>`; DMs share one session
//! per DM channel unless `continuation = "slack.dmthread/v2"`), with `coalesce` admission. While
//! the turn runs a status message in the thread shows reasoning and tool activity; then one
//! complete reply is posted and the status removed. `stop` in a thread interrupts its turn.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bdk_engine::{Admission, ChannelSend, Engine, Principal};
use bdk_project::model::ChannelDef;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::custom::invalid_signature;
use super::watch::{self, Ending, Progress, Target};
use super::{Env, Incoming, signature};
use crate::error::ApiError;
use crate::state::AgentState;

/// The public Slack Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";
/// The principal Slack sessions belong to.
pub const PRINCIPAL: &str = "slack";
/// The status text before the turn reports anything.
pub const WORKING: &str = "_Working on it…_";
const SEEN_EVENTS: usize = 4096;

/// `[slack]` of a channel file.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Settings {
    pub env_prefix: Option<String>,
    pub continuation: Option<String>,
    pub reply_mode: Option<String>,
    #[serde(default)]
    pub channel_posts: Vec<String>,
    pub api_url: Option<String>,
    pub socket_mode: Option<bool>,
    pub status_reasoning: Option<bool>,
    pub status_tools: Option<bool>,
}

impl Settings {
    pub fn from_def(def: &ChannelDef) -> Self {
        def.settings.clone().and_then(|v| serde_json::from_value(v).ok()).unwrap_or_default()
    }

    /// `<PREFIX>_SLACK_<NAME>` (or `SLACK_<NAME>`).
    pub fn env_name(&self, name: &str) -> String {
        match &self.env_prefix {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}_SLACK_{name}"),
            _ => format!("SLACK_{name}"),
        }
    }

    fn uses_socket_mode(&self, env: &Env) -> bool {
        self.socket_mode.unwrap_or_else(|| env(&self.env_name("APP_TOKEN")).is_some())
    }

    /// The startup problem of missing credentials outside `--dev`.
    pub fn missing_secret(&self, env: &Env, dev: bool) -> Option<String> {
        if dev {
            return None;
        }
        let needed = if self.uses_socket_mode(env) { "APP_TOKEN" } else { "SIGNING_SECRET" };
        let name = self.env_name(needed);
        env(&name).is_none().then(|| {
            format!("the Slack credential ${name} is not set; events cannot be received safely (set it, or serve with --dev)")
        })
    }
}

/// One Slack channel at run time.
pub struct Slack {
    pub id: String,
    settings: Settings,
    signing_secret: Option<Vec<u8>>,
    app_token: Option<String>,
    socket: bool,
    api: Api,
    seen: Mutex<VecDeque<String>>,
}

impl std::fmt::Debug for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slack").field("id", &self.id).field("api", &self.api.base).finish()
    }
}

impl Slack {
    pub(crate) fn new(def: &ChannelDef, env: &Env) -> Self {
        let settings = Settings::from_def(def);
        let api = Api::new(
            settings.api_url.clone().or_else(|| env("SLACK_API_URL")).unwrap_or_else(|| DEFAULT_API_URL.to_owned()),
            env(&settings.env_name("BOT_TOKEN")),
        );
        Self {
            id: def.id.clone(),
            signing_secret: env(&settings.env_name("SIGNING_SECRET")).map(String::into_bytes),
            app_token: env(&settings.env_name("APP_TOKEN")),
            socket: settings.uses_socket_mode(env),
            settings,
            api,
            seen: Mutex::new(VecDeque::new()),
        }
    }

    pub fn socket_mode(&self) -> bool {
        self.socket
    }

    fn replayed(&self, id: &str) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.iter().any(|s| s == id) {
            return true;
        }
        if seen.len() == SEEN_EVENTS {
            seen.pop_front();
        }
        seen.push_back(id.to_owned());
        false
    }
}

/// `POST /v1/channels/<id>/events`: the Events API.
pub(crate) async fn handle(state: &AgentState, slack: &Arc<Slack>, incoming: Incoming) -> Result<Response, ApiError> {
    if incoming.path != "/events" && incoming.path != "/" {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "route_not_found",
            format!("a Slack channel takes events at /v1/channels/{}/events", slack.id),
        ));
    }
    if incoming.method != Method::POST {
        return Err(ApiError::method_not_allowed());
    }
    let header = |name: &str| incoming.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    match &slack.signing_secret {
        Some(secret) => {
            let timestamp = header("x-slack-request-timestamp");
            let sent_at: i64 = timestamp
                .parse()
                .map_err(|_| invalid_signature("the X-Slack-Request-Timestamp header is missing or not a number"))?;
            let now = chrono::Utc::now().timestamp();
            if (now - sent_at).abs() > signature::SLACK_REPLAY_WINDOW_SECS {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "stale_request",
                    "the request timestamp is more than five minutes from now (a replay?)",
                ));
            }
            let presented = header("x-slack-signature");
            let parts: [&[u8]; 4] = [b"v0:", timestamp.as_bytes(), b":", &incoming.body];
            if !signature::verify(signature::Algorithm::Sha256, secret, &parts, "v0=", &presented) {
                return Err(invalid_signature("X-Slack-Signature does not match the request"));
            }
        }
        None => {
            // No signing secret (only under --dev): direct loopback callers only.
            let local = incoming.peer.is_some_and(|p| p.ip().is_loopback())
                && !crate::auth::PROXY_HEADERS.iter().any(|h| incoming.headers.contains_key(*h));
            if !local {
                return Err(ApiError::unauthorized(
                    "this Slack channel has no signing secret; only loopback callers are admitted",
                ));
            }
        }
    }
    let payload: Value = serde_json::from_slice(&incoming.body)
        .map_err(|e| ApiError::invalid_request(format!("the event is not valid JSON: {e}")))?;
    match payload.get("type").and_then(Value::as_str) {
        Some("url_verification") => {
            let challenge = payload.get("challenge").cloned().unwrap_or(Value::Null);
            Ok(axum::Json(json!({"challenge": challenge})).into_response())
        }
        Some("event_callback") => {
            let reason = accept(slack, state.engine(), &payload);
            let body = match reason {
                None => json!({"ok": true}),
                Some(reason) => json!({"ok": true, "ignored": reason}),
            };
            Ok(axum::Json(body).into_response())
        }
        other => {
            let reason = format!("Slack payload type {:?} is not handled", other.unwrap_or("(none)"));
            Ok((StatusCode::OK, axum::Json(json!({"ok": true, "ignored": reason}))).into_response())
        }
    }
}

/// Takes an `event_callback`: answers at once (`None`, or why it is ignored) and handles the
/// event in the background.
fn accept(slack: &Arc<Slack>, engine: &Engine, payload: &Value) -> Option<String> {
    if let Some(id) = payload.get("event_id").and_then(Value::as_str)
        && slack.replayed(id)
    {
        return Some(format!("event {id} was already handled"));
    }
    let event = payload.get("event").cloned().unwrap_or(Value::Null);
    let wake = match wake_up(&slack.settings, &event) {
        Ok(wake) => wake,
        Err(reason) => {
            tracing::debug!(channel = %slack.id, reason, "Slack event ignored");
            return Some(reason);
        }
    };
    let (slack, engine) = (slack.clone(), engine.clone());
    tokio::spawn(async move { converse(&slack, &engine, wake).await });
    None
}

/// Who woke the bot, where, and what they said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wake {
    channel: String,
    /// The thread the reply goes in.
    thread_ts: String,
    /// The session key.
    key: String,
    user: String,
    text: String,
}

/// Whether `event` should wake the bot (a mention, a DM, or a top-level post in a watched
/// channel), and how; `Err` says why not.
fn wake_up(settings: &Settings, event: &Value) -> Result<Wake, String> {
    let text = |key: &str| event.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let kind = text("type");
    if event.get("bot_id").is_some() || !text("subtype").is_empty() {
        return Err("bot messages and edits do not wake the bot".into());
    }
    let (channel, ts, thread) = (text("channel"), text("ts"), text("thread_ts"));
    if channel.is_empty() || ts.is_empty() {
        return Err("the event names no channel or timestamp".into());
    }
    let thread_ts = if thread.is_empty() { ts.clone() } else { thread.clone() };
    let key = match (kind.as_str(), text("channel_type").as_str()) {
        ("app_mention", _) => format!("{channel}:{thread_ts}"),
        ("message", "im") => {
            if settings.continuation.as_deref() == Some("slack.dmthread/v2") {
                format!("{channel}:{thread_ts}")
            } else {
                format!("{channel}:dm")
            }
        }
        ("message", _) => {
            let watched = settings.channel_posts.iter().any(|c| c.trim_start_matches('#') == channel);
            if !watched {
                return Err(format!(
                    "channel {channel} is not watched (mention the bot, or add it to `channel_posts`)"
                ));
            }
            if !thread.is_empty() {
                return Err("replies in a watched channel's threads need a mention".into());
            }
            format!("{channel}:{thread_ts}")
        }
        _ => return Err(format!("event type {kind:?} does not wake the bot")),
    };
    Ok(Wake { channel, thread_ts, key, user: text("user"), text: strip_mentions(&text("text")) })
}

/// The text without `<@U123>` mentions.
fn strip_mentions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        out.push_str(&rest[..start]);
        match rest[start..].find('>') {
            Some(end) => rest = &rest[start + end + 1..],
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One wake-up: stop, or send and deliver the answer in the thread.
async fn converse(slack: &Slack, engine: &Engine, wake: Wake) {
    let principal = Principal::new(PRINCIPAL);
    let token = format!("{}:{}", slack.id, wake.key);
    if wake.text.eq_ignore_ascii_case("stop") {
        let stopped = match engine.find_by_token(&token).await {
            Ok(Some(session)) => engine.stop(&session, &principal).await.is_ok(),
            _ => false,
        };
        let text = if stopped { "Stopped." } else { "Nothing is running in this thread." };
        slack.api.post_message(&wake.channel, &wake.thread_ts, text).await.ok();
        return;
    }
    if wake.text.is_empty() {
        return;
    }
    let mut send =
        ChannelSend::new(slack.id.clone(), format!("<@{}> wrote: {}", wake.user, wake.text), principal.clone());
    send.continuation_key = Some(wake.key.clone());
    send.title = Some(wake.text.chars().take(80).collect());
    send.admission = Admission::Coalesce;
    let sent = match engine.channel_send(send).await {
        Ok(sent) => sent,
        Err(error) => {
            tracing::warn!(%error, channel = %slack.id, "a Slack message could not be handed to the agent");
            slack
                .api
                .post_message(&wake.channel, &wake.thread_ts, &format!("Sorry, I could not take that: {error}"))
                .await
                .ok();
            return;
        }
    };
    let from = match &sent.turn_id {
        Some(_) => 0,
        None => watch::current_index(engine, &sent.session_id, &principal).await,
    };
    let status = slack.api.post_message(&wake.channel, &wake.thread_ts, WORKING).await.ok();
    let (tx, mut rx) = mpsc::channel::<Progress>(64);
    let show_reasoning = slack.settings.status_reasoning.unwrap_or(true);
    let show_tools = slack.settings.status_tools.unwrap_or(true);
    let updater = {
        let (api, channel, status) = (slack.api.clone(), wake.channel.clone(), status.clone());
        tokio::spawn(async move {
            while let Some(progress) = rx.recv().await {
                let line = match progress {
                    Progress::Reasoning(line) if show_reasoning => format!("_Thinking: {line}_"),
                    Progress::Tool(name) if show_tools => format!("_Running `{name}`…_"),
                    _ => continue,
                };
                if let Some(ts) = &status {
                    api.update(&channel, ts, &line).await.ok();
                }
            }
        })
    };
    let target = Target { session: sent.session_id.clone(), principal, turn: sent.turn_id.clone(), from };
    let ending = watch::turn_end(engine, target, Some(tx)).await;
    let _ = updater.await;
    let reply = match ending {
        Some(Ending::Completed(Some(text))) if !text.trim().is_empty() => Some(text),
        Some(Ending::Completed(_)) => None,
        // Interrupted by `stop`, which answers for itself.
        Some(Ending::Failed(reason)) if reason.contains("interrupted") => None,
        Some(Ending::Failed(reason)) => Some(format!("Sorry, that failed: {reason}")),
        None => None,
    };
    if let Some(reply) = reply
        && let Err(error) = slack.api.post_message(&wake.channel, &wake.thread_ts, &reply).await
    {
        tracing::warn!(%error, "posting the Slack reply failed");
    }
    if let Some(ts) = status {
        slack.api.delete(&wake.channel, &ts).await.ok();
    }
}

/// Socket Mode: keeps one websocket open (reconnecting with backoff) until `stop`.
pub(crate) async fn socket_mode(slack: Arc<Slack>, engine: Engine, stop: CancellationToken) {
    let Some(app_token) = slack.app_token.clone() else {
        tracing::warn!(channel = %slack.id, env = %slack.settings.env_name("APP_TOKEN"), "Socket Mode needs an app token; not connecting");
        return;
    };
    let mut backoff = Duration::from_secs(1);
    while !stop.is_cancelled() {
        match connect_once(&slack, &engine, &app_token, &stop).await {
            Ok(()) => backoff = Duration::from_secs(1),
            Err(error) => {
                tracing::warn!(channel = %slack.id, %error, "Slack Socket Mode connection failed; retrying");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// One websocket session: until Slack asks to reconnect, the socket closes, or `stop`.
async fn connect_once(
    slack: &Arc<Slack>,
    engine: &Engine,
    app_token: &str,
    stop: &CancellationToken,
) -> Result<(), String> {
    let opened = slack.api.call_with("apps.connections.open", app_token, &json!({})).await?;
    let url = opened.get("url").and_then(Value::as_str).ok_or("apps.connections.open returned no url")?;
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.map_err(|e| format!("websocket: {e}"))?;
    tracing::info!(channel = %slack.id, "Slack Socket Mode connected");
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => {
                let _ = socket.close(None).await;
                return Ok(());
            }
            message = socket.next() => message,
        };
        let Some(message) = message else { return Ok(()) };
        let message = message.map_err(|e| format!("websocket: {e}"))?;
        let text = match message {
            Message::Text(text) => text.to_string(),
            Message::Ping(data) => {
                socket.send(Message::Pong(data)).await.map_err(|e| format!("websocket: {e}"))?;
                continue;
            }
            Message::Close(_) => return Ok(()),
            _ => continue,
        };
        let Ok(envelope) = serde_json::from_str::<Value>(&text) else {
            tracing::warn!(channel = %slack.id, "Socket Mode sent something that is not JSON");
            continue;
        };
        if let Some(id) = envelope.get("envelope_id").and_then(Value::as_str) {
            let ack = json!({"envelope_id": id}).to_string();
            socket.send(Message::Text(ack.into())).await.map_err(|e| format!("websocket: {e}"))?;
        }
        match envelope.get("type").and_then(Value::as_str) {
            Some("events_api") => {
                if let Some(payload) = envelope.get("payload") {
                    accept(slack, engine, payload);
                }
            }
            Some("disconnect") => return Ok(()),
            _ => {}
        }
    }
}

/// A small Slack Web API client.
#[derive(Debug, Clone)]
struct Api {
    base: String,
    bot_token: Option<String>,
    http: reqwest::Client,
}

impl Api {
    fn new(base: String, bot_token: Option<String>) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap_or_default();
        Self { base: base.trim_end_matches('/').to_owned(), bot_token, http }
    }

    async fn post_message(&self, channel: &str, thread_ts: &str, text: &str) -> Result<String, String> {
        let answer =
            self.call("chat.postMessage", &json!({"channel": channel, "thread_ts": thread_ts, "text": text})).await?;
        answer
            .get("ts")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| "chat.postMessage returned no ts".into())
    }

    async fn update(&self, channel: &str, ts: &str, text: &str) -> Result<Value, String> {
        self.call("chat.update", &json!({"channel": channel, "ts": ts, "text": text})).await
    }

    async fn delete(&self, channel: &str, ts: &str) -> Result<Value, String> {
        self.call("chat.delete", &json!({"channel": channel, "ts": ts})).await
    }

    async fn call(&self, method: &str, body: &Value) -> Result<Value, String> {
        let token = self.bot_token.clone().ok_or("no Slack bot token is configured")?;
        self.call_with(method, &token, body).await
    }

    async fn call_with(&self, method: &str, token: &str, body: &Value) -> Result<Value, String> {
        let response = self
            .http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .map_err(|e| format!("{method}: {e}"))?;
        let answer: Value = response.json().await.map_err(|e| format!("{method}: {e}"))?;
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(answer)
        } else {
            Err(format!("{method}: {}", answer.get("error").and_then(Value::as_str).unwrap_or("not ok")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_dms_and_watched_posts_wake_the_bot() {
        let settings = Settings { channel_posts: vec!["#C9".into()], ..Settings::default() };
        let mention =
            json!({"type": "app_mention", "channel": "C1", "ts": "1.1", "user": "U1", "text": "<@UBOT> hi there"});
        let wake = wake_up(&settings, &mention).unwrap();
        assert_eq!((wake.key.as_str(), wake.text.as_str(), wake.thread_ts.as_str()), ("C1:1.1", "hi there", "1.1"));
        let in_thread =
            json!({"type": "app_mention", "channel": "C1", "ts": "2.2", "thread_ts": "1.1", "text": "<@UBOT> more"});
        assert_eq!(wake_up(&settings, &in_thread).unwrap().key, "C1:1.1");
        let dm = json!({"type": "message", "channel_type": "im", "channel": "D1", "ts": "3.3", "text": "hey"});
        assert_eq!(wake_up(&settings, &dm).unwrap().key, "D1:dm");
        let per_thread = Settings { continuation: Some("slack.dmthread/v2".into()), ..Settings::default() };
        assert_eq!(wake_up(&per_thread, &dm).unwrap().key, "D1:3.3");
        let watched =
            json!({"type": "message", "channel_type": "channel", "channel": "C9", "ts": "4.4", "text": "deploy?"});
        assert_eq!(wake_up(&settings, &watched).unwrap().key, "C9:4.4");
        let reply = json!({"type": "message", "channel": "C9", "ts": "5.5", "thread_ts": "4.4", "text": "x"});
        assert!(wake_up(&settings, &reply).is_err());
        let other = json!({"type": "message", "channel": "C2", "ts": "6.6", "text": "x"});
        assert!(wake_up(&settings, &other).is_err());
        let bot = json!({"type": "app_mention", "channel": "C1", "ts": "7.7", "bot_id": "B1", "text": "x"});
        assert!(wake_up(&settings, &bot).is_err());
    }

    #[test]
    fn env_names_carry_the_prefix() {
        let settings = Settings { env_prefix: Some("TRIAGE".into()), ..Settings::default() };
        assert_eq!(settings.env_name("BOT_TOKEN"), "TRIAGE_SLACK_BOT_TOKEN");
        assert_eq!(Settings::default().env_name("APP_TOKEN"), "SLACK_APP_TOKEN");
    }
}
