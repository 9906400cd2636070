//! `/v1/session...`: start a session, follow up, stream (replay then live), dump events, stop,
//! and the cost report. Every route but start runs the engine's owner check (403).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::time::Duration;

use axum::{Json, Router};
use bdk_engine::{Admission, FollowUp, StartSession};
use bdk_protocol::event::SessionMode;
use bdk_protocol::http::{FollowUpRequest, SessionResponse, StartSessionRequest};
use bdk_protocol::{Event, SessionId, TurnId};
use bdk_store::EventStream;
use futures_util::stream;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiQuery, JsonBody, SessionPath};
use crate::routes::OkJson;
use crate::state::AgentState;

pub const NDJSON: &str = "application/x-ndjson";

pub fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/session", post(start))
        .route("/v1/session/{session_id}", post(follow_up))
        .route("/v1/session/{session_id}/stream", get(stream_events))
        .route("/v1/session/{session_id}/events", get(dump_events))
        .route("/v1/session/{session_id}/stop", post(stop))
        .route("/v1/session/{session_id}/cost", get(cost))
}

/// `POST /v1/session`: opens a chat session and admits its first turn.
async fn start(
    State(state): State<AgentState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody<StartSessionRequest>,
) -> ApiResult<Json<SessionResponse>> {
    require_message(&body.message)?;
    let started = state
        .engine()
        .start_session(StartSession {
            message: body.message,
            principal: caller.principal,
            channel: "http".into(),
            continuation_key: None,
            mode: SessionMode::Chat,
            title: body.title,
            dry_run: body.dry_run,
            as_of: body.as_of,
            purpose: body.purpose,
            workspace_files: body.workspace_files.into_iter().collect(),
        })
        .await?;
    Ok(Json(session_response(&state, &headers, started.session_id, started.continuation_token, Some(started.turn_id))))
}

/// `POST /v1/session/:id`: a follow-up with the current continuation token.
async fn follow_up(
    State(state): State<AgentState>,
    caller: Caller,
    headers: HeaderMap,
    SessionPath(id): SessionPath,
    JsonBody(body): JsonBody<FollowUpRequest>,
) -> ApiResult<Json<SessionResponse>> {
    if body.continuation_token.is_empty() {
        return Err(ApiError::invalid_request("continuationToken is required"));
    }
    require_message(&body.message)?;
    let admission = match body.admission.as_deref() {
        None | Some("preempt") => Admission::Preempt,
        Some("coalesce") => Admission::Coalesce,
        Some(other) => {
            return Err(ApiError::invalid_request(format!(
                "admission must be \"preempt\" or \"coalesce\", not {other:?}"
            )));
        }
    };
    let accepted = state
        .engine()
        .follow_up(
            &id,
            FollowUp {
                message: body.message,
                principal: caller.principal,
                continuation_token: body.continuation_token,
                admission,
                workspace_files: body.workspace_files.into_iter().collect(),
            },
        )
        .await?;
    Ok(Json(session_response(&state, &headers, id, accepted.continuation_token, accepted.turn_id)))
}

fn require_message(message: &str) -> ApiResult<()> {
    if message.trim().is_empty() {
        return Err(ApiError::invalid_request("message is required and may not be blank"));
    }
    Ok(())
}

/// `http://<host>` from the request, so links in responses work from where the caller stands.
fn origin(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| h.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(String::new, |host| format!("http://{host}"))
}

fn session_response(
    state: &AgentState,
    headers: &HeaderMap,
    session_id: SessionId,
    continuation_token: String,
    turn_id: Option<TurnId>,
) -> SessionResponse {
    let base = format!("{}{}", origin(headers), state.base_path);
    SessionResponse {
        ok: true,
        playground_url: state.app.options.playground.then(|| format!("{base}/playground?sessionId={session_id}")),
        trace_url: format!("{base}/v1/session/{session_id}/events"),
        session_id,
        continuation_token,
        turn_id,
    }
}

#[derive(Debug, Deserialize)]
struct IndexQuery {
    #[serde(rename = "startIndex")]
    start_index: Option<u64>,
}

/// `GET /v1/session/:id/stream?startIndex=N`: NDJSON, replay from N (default 0) then live.
async fn stream_events(
    State(state): State<AgentState>,
    caller: Caller,
    SessionPath(id): SessionPath,
    ApiQuery(query): ApiQuery<IndexQuery>,
) -> ApiResult<Response> {
    let follower = state.engine().follow(&id, &caller.principal, query.start_index.unwrap_or(0)).await?;
    let body = Body::from_stream(ndjson_lines(follower, state.app.streams_end.clone()));
    Ok(ndjson_response(body))
}

/// `GET /v1/session/:id/events?startIndex=N`: the same lines as the stream, without following.
async fn dump_events(
    State(state): State<AgentState>,
    caller: Caller,
    SessionPath(id): SessionPath,
    ApiQuery(query): ApiQuery<IndexQuery>,
) -> ApiResult<Response> {
    let events = state.engine().events(&id, &caller.principal, query.start_index.unwrap_or(0)).await?;
    let mut body = Vec::with_capacity(events.len() * 256);
    for event in &events {
        write_line(&mut body, event).map_err(|e| ApiError::internal(&e))?;
    }
    Ok(ndjson_response(Body::from(body)))
}

fn ndjson_response(body: Body) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn write_line(out: &mut Vec<u8>, event: &Event) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, event)?;
    out.push(b'\n');
    Ok(())
}

/// After shutdown ends the streams, how long a stream still waits for its next event. Events
/// already durable (the final ones of drained turns) are ready at once, so they still go out.
const FLUSH_AFTER_END: Duration = Duration::from_millis(200);

/// One NDJSON line per event, until the log ends, a read fails, or the host shuts down.
fn ndjson_lines(
    follower: EventStream,
    end: CancellationToken,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    stream::unfold((follower, end), |(mut follower, end)| async move {
        // The same `next` future is kept across the end signal, so no event is half-read.
        let next = {
            let next = follower.next();
            tokio::pin!(next);
            tokio::select! {
                biased;
                next = &mut next => next,
                () = end.cancelled() => tokio::time::timeout(FLUSH_AFTER_END, next).await.unwrap_or(None),
            }
        };
        let event = match next? {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!(error = %err, "event stream ended by a read error");
                return None;
            }
        };
        let mut line = Vec::with_capacity(256);
        if let Err(err) = write_line(&mut line, &event) {
            tracing::error!(error = %err, index = event.index, "event could not be encoded");
            return None;
        }
        Some((Ok(Bytes::from(line)), (follower, end)))
    })
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Stopped {
    session_id: SessionId,
}

/// `POST /v1/session/:id/stop`: interrupts the running turn, if any.
async fn stop(
    State(state): State<AgentState>,
    caller: Caller,
    SessionPath(id): SessionPath,
) -> ApiResult<OkJson<Stopped>> {
    state.engine().stop(&id, &caller.principal).await?;
    Ok(OkJson(Stopped { session_id: id }))
}

/// `GET /v1/session/:id/cost`: usage and estimated cost per turn.
async fn cost(
    State(state): State<AgentState>,
    caller: Caller,
    SessionPath(id): SessionPath,
) -> ApiResult<OkJson<bdk_engine::CostReport>> {
    Ok(OkJson(state.engine().cost(&id, &caller.principal).await?))
}
