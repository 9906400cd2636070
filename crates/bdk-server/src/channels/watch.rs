//! Following one turn of a channel session to its end, for channels that deliver the answer
//! back to their surface (a Slack thread, a GitHub pull request): progress (reasoning and tool
//! activity) as it happens, then the final text or the failure. Reads the session's event
//! stream like any client; decides nothing about where the answer goes.

use std::time::Duration;

use bdk_engine::{Engine, Principal};
use bdk_protocol::{EventData, SessionId, TurnId};
use tokio::sync::mpsc;

/// The longest a delivery waits for its turn.
pub const MAX_WAIT: Duration = Duration::from_secs(30 * 60);

/// Something the turn is doing, for a status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The first line of a finished reasoning block.
    Reasoning(String),
    /// A tool call started.
    Tool(String),
}

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The final assistant text (`None` when the turn ended without one).
    Completed(Option<String>),
    /// The turn failed or was interrupted, with the reason.
    Failed(String),
}

/// Which turn to follow.
#[derive(Debug, Clone)]
pub struct Target {
    pub session: SessionId,
    pub principal: Principal,
    /// The turn the message runs in; `None` when it was queued behind a running turn (then the
    /// first turn that starts at or after `from` is the one).
    pub turn: Option<TurnId>,
    /// The event index to read from.
    pub from: u64,
}

/// The event count of `session` now (where a watch for a queued message starts).
pub async fn current_index(engine: &Engine, session: &SessionId, principal: &Principal) -> u64 {
    engine.events(session, principal, 0).await.map(|events| events.len() as u64).unwrap_or(0)
}

/// Follows `target` until its turn ends (or [`MAX_WAIT`] passes: `None`), sending progress.
pub async fn turn_end(engine: &Engine, target: Target, progress: Option<mpsc::Sender<Progress>>) -> Option<Ending> {
    tokio::time::timeout(MAX_WAIT, follow(engine, target, progress)).await.ok().flatten()
}

async fn follow(engine: &Engine, target: Target, progress: Option<mpsc::Sender<Progress>>) -> Option<Ending> {
    let mut stream = match engine.follow(&target.session, &target.principal, target.from).await {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, session = %target.session, "cannot follow a channel session");
            return None;
        }
    };
    let mut turn = target.turn;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "a channel session's stream failed");
                return None;
            }
        };
        if turn.is_none()
            && let EventData::TurnStarted(_) = &event.data
        {
            turn = event.turn_id.clone();
        }
        if turn.is_none() || event.turn_id != turn {
            continue;
        }
        let note = |p: Progress| {
            if let Some(tx) = &progress {
                let _ = tx.try_send(p);
            }
        };
        match &event.data {
            EventData::ReasoningCompleted(text) => {
                if let Some(line) = text.text.lines().map(str::trim).find(|l| !l.is_empty()) {
                    note(Progress::Reasoning(line.to_owned()));
                }
            }
            EventData::ActionsRequested(requested) if requested.direct != Some(true) => {
                for call in &requested.calls {
                    note(Progress::Tool(call.tool_name.clone()));
                }
            }
            EventData::TurnCompleted(done) => return Some(Ending::Completed(done.result.clone())),
            EventData::TurnFailed(failed) => return Some(Ending::Failed(failed.message.clone())),
            _ => {}
        }
    }
    None
}
