//! A running server as the backend of `chat --url`: the session API of docs/http.md
//! (`POST /v1/session`, follow-ups with the rotating token, the NDJSON stream, approvals, stop,
//! cost). The URL is the agent's base (`http://HOST:PORT/<slug>`, or the root under
//! `--mode single`); a trailing `/` or `/v1` is tolerated.

use std::time::Duration;

use anyhow::{Context as _, bail};
use bdk_engine::CostReport;
use bdk_protocol::event::ApprovalDecision;
use bdk_protocol::http::{ErrorResponse, FollowUpRequest, SessionResponse, StartSessionRequest};
use bdk_protocol::{CallId, Event, SessionId};
use serde::de::DeserializeOwned;

use super::backend::{Backend, Events, Send, Sent};

/// How long connecting may take; requests other than the stream also time out after
/// [`REQUEST_TIMEOUT`].
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Remote {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Remote {
    pub fn new(url: &str, token: Option<String>) -> anyhow::Result<Self> {
        let base = url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base).to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!("--url must start with http:// or https://, got {url}");
        }
        let client =
            reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).build().context("building the HTTP client")?;
        Ok(Self { client, base, token })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.client.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends `request`; a non-2xx answer becomes an error with the API's code and message.
    async fn call(&self, what: &str, request: reqwest::RequestBuilder) -> anyhow::Result<Vec<u8>> {
        let response =
            request.timeout(REQUEST_TIMEOUT).send().await.with_context(|| format!("{what} {}", self.base))?;
        let status = response.status();
        let body = response.bytes().await.with_context(|| format!("reading the answer to {what}"))?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorResponse>(&body) {
                Ok(err) => anyhow::anyhow!("{what}: {} {}: {}", status.as_u16(), err.error, err.message),
                Err(_) => anyhow::anyhow!("{what}: HTTP {status}"),
            });
        }
        Ok(body.to_vec())
    }

    async fn json<T: DeserializeOwned>(&self, what: &str, request: reqwest::RequestBuilder) -> anyhow::Result<T> {
        let body = self.call(what, request).await?;
        serde_json::from_slice(&body).with_context(|| format!("{what}: an unexpected answer"))
    }

    async fn event_count(&self, id: &SessionId) -> anyhow::Result<u64> {
        let path = format!("/v1/session/{id}/events");
        let body = self.call("GET events", self.request(reqwest::Method::GET, &path)).await?;
        Ok(body.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)).count() as u64)
    }
}

impl Backend for Remote {
    async fn send(&self, send: Send<'_>) -> anyhow::Result<Sent> {
        let Some(id) = send.session else {
            let body = StartSessionRequest {
                message: send.message.to_string(),
                dry_run: send.dry_run,
                purpose: Some(send.purpose.to_string()),
                ..StartSessionRequest::default()
            };
            let started: SessionResponse =
                self.json("POST /v1/session", self.request(reqwest::Method::POST, "/v1/session").json(&body)).await?;
            return Ok(Sent { id: started.session_id, from: 0, token: started.continuation_token });
        };
        let Some(token) = send.token else {
            bail!("continuing session {id} over --url needs its continuation token: pass --continuation-token")
        };
        let from = self.event_count(id).await?;
        let body = FollowUpRequest {
            continuation_token: token.to_string(),
            message: send.message.to_string(),
            ..FollowUpRequest::default()
        };
        let path = format!("/v1/session/{id}");
        let accepted: SessionResponse =
            self.json("POST follow-up", self.request(reqwest::Method::POST, &path).json(&body)).await?;
        Ok(Sent { id: id.clone(), from, token: accepted.continuation_token })
    }

    async fn follow(&self, id: &SessionId, from: u64) -> anyhow::Result<Events> {
        let path = format!("/v1/session/{id}/stream?startIndex={from}");
        let response = self.request(reqwest::Method::GET, &path).send().await.context("GET stream")?;
        if !response.status().is_success() {
            let status = response.status();
            let body = response.bytes().await.unwrap_or_default();
            match serde_json::from_slice::<ErrorResponse>(&body) {
                Ok(err) => bail!("GET stream: {} {}: {}", status.as_u16(), err.error, err.message),
                Err(_) => bail!("GET stream: HTTP {status}"),
            }
        }
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut response = response;
            let mut buffer: Vec<u8> = Vec::new();
            loop {
                while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buffer.drain(..=end).collect();
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let event = serde_json::from_slice::<Event>(&line).context("reading a stream line");
                    if tx.send(event).is_err() {
                        return;
                    }
                }
                match response.chunk().await {
                    Ok(Some(chunk)) => buffer.extend_from_slice(&chunk),
                    Ok(None) => return,
                    Err(error) => {
                        let _ = tx.send(Err(anyhow::Error::from(error).context("reading the stream")));
                        return;
                    }
                }
            }
        });
        Ok(events)
    }

    async fn resolve(&self, id: &SessionId, call: &CallId, decision: ApprovalDecision) -> anyhow::Result<()> {
        let path = format!("/v1/session/{id}/approvals/{call}");
        let body = serde_json::json!({ "decision": decision });
        self.call("POST approval", self.request(reqwest::Method::POST, &path).json(&body)).await?;
        Ok(())
    }

    async fn stop(&self, id: &SessionId) -> anyhow::Result<()> {
        let path = format!("/v1/session/{id}/stop");
        self.call("POST stop", self.request(reqwest::Method::POST, &path).json(&serde_json::json!({}))).await?;
        Ok(())
    }

    async fn cost(&self, id: &SessionId) -> anyhow::Result<CostReport> {
        let path = format!("/v1/session/{id}/cost");
        self.json("GET cost", self.request(reqwest::Method::GET, &path)).await
    }

    async fn trace(&self, id: &SessionId) -> anyhow::Result<String> {
        Ok(format!("{}/v1/session/{id}/events", self.base))
    }

    async fn settle(&self, _id: &SessionId) {}

    async fn status(&self, id: &SessionId) -> anyhow::Result<String> {
        // The events route answers 404 for a session this caller cannot see.
        self.event_count(id).await?;
        Ok("on the server".into())
    }
}
