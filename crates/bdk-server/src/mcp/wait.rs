//! What `ask` and `check` report about a session: the state of its latest turn (or of one named
//! turn) and the reply so far, read from the session's own event log, waiting a bounded time for
//! the turn to end. Nothing here keeps a second copy of the truth: it folds the events.

use std::time::Duration;

use bdk_engine::{Engine, EngineError, Principal};
use bdk_protocol::{EventData, SessionId, TurnId};
use serde::Serialize;

/// The longest wait a caller may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(120);
/// The wait when the caller names none.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// What `ask` and `check` return (as `structuredContent`, and as JSON text).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `running` (poll `check`), `completed` (the reply is final; follow up with `ask`) or
    /// `failed`.
    pub status: &'static str,
    pub session_id: SessionId,
    /// The token a follow-up `ask` presents (with the session id).
    pub continuation_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<TurnId>,
    /// The assistant's text so far (final once `completed`).
    pub reply: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The fold of one turn's events.
#[derive(Debug, Default)]
struct TurnState {
    turn: Option<TurnId>,
    /// Completed messages of the turn.
    messages: Vec<String>,
    /// The message being streamed.
    partial: String,
    done: Option<Result<Option<String>, String>>,
}

impl TurnState {
    fn reply(&self) -> String {
        let mut parts = self.messages.clone();
        if !self.partial.is_empty() {
            parts.push(self.partial.clone());
        }
        parts.join("\n\n")
    }

    /// Folds one event; `wanted` pins the turn (else the latest turn is followed).
    fn fold(&mut self, turn_id: Option<&TurnId>, data: &EventData, wanted: Option<&TurnId>) {
        let Some(turn_id) = turn_id else { return };
        if let Some(wanted) = wanted
            && wanted != turn_id
        {
            return;
        }
        if self.turn.as_ref() != Some(turn_id) {
            match data {
                EventData::TurnQueued(_) | EventData::TurnStarted(_) | EventData::MessageReceived(_) => {
                    *self = TurnState { turn: Some(turn_id.clone()), ..TurnState::default() };
                }
                _ => return,
            }
        }
        match data {
            EventData::MessageAppended(delta) => self.partial.push_str(&delta.delta),
            EventData::MessageCompleted(done) => {
                self.partial.clear();
                self.messages.push(done.text.clone());
            }
            EventData::TurnCompleted(done) => self.done = Some(Ok(done.result.clone())),
            EventData::TurnFailed(failed) => self.done = Some(Err(failed.message.clone())),
            _ => {}
        }
    }
}

/// Follows `session`'s log until its latest turn (or `turn`) ends or `wait` passes.
pub async fn report(
    engine: &Engine,
    session: &SessionId,
    principal: &Principal,
    turn: Option<TurnId>,
    wait: Duration,
) -> Result<Report, EngineError> {
    let turn = match turn {
        Some(turn) => Some(turn),
        None => latest_turn(engine, session, principal).await?,
    };
    let mut stream = engine.follow(session, principal, 0).await?;
    let mut state = TurnState::default();
    let deadline = tokio::time::Instant::now() + wait.min(MAX_WAIT);
    loop {
        if state.done.is_some() {
            break;
        }
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        match next {
            Ok(Some(Ok(event))) => state.fold(event.turn_id.as_ref(), &event.data, turn.as_ref()),
            Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
        }
    }
    drop(stream);
    let record = engine.session(session, principal).await?;
    let token = record.continuation_token.clone().unwrap_or_default();
    let reply = state.reply();
    let (status, reply, error) = match state.done {
        Some(Ok(result)) => ("completed", result.filter(|r| !r.is_empty()).unwrap_or(reply), None),
        Some(Err(message)) => ("failed", reply, Some(message)),
        None => ("running", reply, None),
    };
    Ok(Report {
        status,
        session_id: session.clone(),
        continuation_token: token,
        turn_id: state.turn.or(turn),
        reply,
        error,
    })
}

/// The session's latest turn (the last one queued or started).
async fn latest_turn(
    engine: &Engine,
    session: &SessionId,
    principal: &Principal,
) -> Result<Option<TurnId>, EngineError> {
    let events = engine.events(session, principal, 0).await?;
    Ok(events
        .iter()
        .rev()
        .find(|e| {
            matches!(e.data, EventData::TurnQueued(_) | EventData::TurnStarted(_) | EventData::MessageReceived(_))
        })
        .and_then(|e| e.turn_id.clone()))
}

/// A wait in seconds from a tool's input, bounded by [`MAX_WAIT`].
pub fn wait_from(seconds: Option<f64>) -> Duration {
    match seconds {
        Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s).min(MAX_WAIT),
        _ => DEFAULT_WAIT,
    }
}
