//! `bdk github replay PAYLOAD.json --url U`: sends a saved GitHub webhook delivery to a running
//! server, signed with `X-Hub-Signature-256` the way GitHub signs it, so a pull request event can
//! be replayed in tests and evals without GitHub. `--url` is the host (then the delivery goes to
//! the loopback fan-out `POST /v1/webhooks/github`) or a channel's own `.../webhook` URL.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bdk_server::channels::signature::github_signature;
use serde_json::Value;

use crate::cli::{GithubArgs, GithubCommand, ReplayArgs};
use crate::exit::Exit;

const TIMEOUT: Duration = Duration::from_secs(30);
/// Events `replay` recognises from a file name or a payload's shape.
const EVENTS: [&str; 5] =
    ["pull_request", "issue_comment", "pull_request_review_comment", "pull_request_review", "ping"];

pub fn run(args: &GithubArgs) -> anyhow::Result<Exit> {
    match &args.command {
        GithubCommand::Replay(replay) => run_replay(replay),
    }
}

fn run_replay(args: &ReplayArgs) -> anyhow::Result<Exit> {
    let body = std::fs::read(&args.payload).with_context(|| format!("reading {}", args.payload.display()))?;
    let payload: Value =
        serde_json::from_slice(&body).with_context(|| format!("{} is not a JSON delivery", args.payload.display()))?;
    let file_name = args.payload.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let Some(event) = args.event.clone().or_else(|| event_of(file_name, &payload)) else {
        bail!("cannot tell which event {} is; pass --event (e.g. pull_request)", args.payload.display());
    };
    let secret = args.secret_env.as_deref().and_then(|name| std::env::var(name).ok()).filter(|s| !s.is_empty());
    if secret.is_none() {
        eprintln!(
            "warning: ${} is not set; the delivery is sent unsigned (a channel with a secret refuses it)",
            args.secret_env.as_deref().unwrap_or_default()
        );
    }
    let url = target_url(&args.url);
    let delivery = args.delivery.clone().unwrap_or_else(delivery_id);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let (status, answer) = runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(TIMEOUT).build().context("building the HTTP client")?;
        let mut request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("user-agent", "GitHub-Hookshot/bdk-replay")
            .header("x-github-event", &event)
            .header("x-github-delivery", &delivery)
            .body(body.clone());
        if let Some(secret) = &secret {
            request = request.header("x-hub-signature-256", github_signature(secret.as_bytes(), &body));
        }
        let response = request.send().await.with_context(|| format!("POST {url}"))?;
        let status = response.status();
        let text = response.text().await.with_context(|| format!("reading the answer of POST {url}"))?;
        anyhow::Ok((status, text))
    })?;
    println!("{}", answer.trim_end());
    if status.is_success() {
        eprintln!("delivered {event} ({delivery}) to {url}: HTTP {}", status.as_u16());
        Ok(Exit::Ok)
    } else {
        eprintln!("error: POST {url} answered HTTP {}", status.as_u16());
        Ok(Exit::Failure)
    }
}

/// The fan-out route when `url` is just a host; any other URL as given.
fn target_url(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    let after_scheme = trimmed.split_once("://").map_or(trimmed, |(_, rest)| rest);
    if after_scheme.contains('/') { trimmed.to_owned() } else { format!("{trimmed}/v1/webhooks/github") }
}

/// `pull_request.opened.json` → `pull_request`; else from the payload's shape.
fn event_of(file_name: &str, payload: &Value) -> Option<String> {
    let stem = file_name.split('.').next().unwrap_or_default();
    if EVENTS.contains(&stem) {
        return Some(stem.to_owned());
    }
    let has = |key: &str| payload.get(key).is_some();
    let event = if has("zen") && has("hook_id") {
        "ping"
    } else if has("comment") && has("issue") {
        "issue_comment"
    } else if has("comment") && has("pull_request") {
        "pull_request_review_comment"
    } else if has("review") && has("pull_request") {
        "pull_request_review"
    } else if has("pull_request") {
        "pull_request"
    } else {
        return None;
    };
    Some(event.to_owned())
}

/// A fresh delivery id in GitHub's GUID shape.
fn delivery_id() -> String {
    let mut bytes = [0u8; 16];
    let _ = bdk_protocol::ids::os_random(&mut bytes);
    let mut hex = String::with_capacity(32);
    bdk_protocol::ids::push_hex(&mut hex, &bytes);
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_come_from_the_file_name_or_the_shape() {
        assert_eq!(event_of("pull_request.opened.json", &json!({})).as_deref(), Some("pull_request"));
        assert_eq!(event_of("saved.json", &json!({"issue": {}, "comment": {}})).as_deref(), Some("issue_comment"));
        assert_eq!(event_of("saved.json", &json!({"pull_request": {}})).as_deref(), Some("pull_request"));
        assert_eq!(event_of("saved.json", &json!({"x": 1})), None);
    }

    #[test]
    fn a_bare_host_means_the_fan_out_route() {
        assert_eq!(target_url("http://127.0.0.1:3000"), "http://127.0.0.1:3000/v1/webhooks/github");
        assert_eq!(target_url("http://127.0.0.1:3000/"), "http://127.0.0.1:3000/v1/webhooks/github");
        let channel = "http://127.0.0.1:3000/bot/v1/channels/reviews/webhook";
        assert_eq!(target_url(channel), channel);
        assert_eq!(delivery_id().len(), 36);
    }
}
