//! One attempt: a case's conversation as a real eval session (`purpose: "eval"`, chat mode, dry
//! run when the eval says so), turn after turn through the public engine API, within the
//! per-case timeout and the run's cancellation. A failed or refused turn ends the conversation
//! early; a tool call that waits for a person's approval is stopped, since an eval cannot
//! approve it. What happened is folded from the session's own events.

use std::time::{Duration, Instant};

use bdk_engine::{Admission, Engine, FollowUp, Principal, StartSession, Trajectory};
use bdk_project::model::EvalCase;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{Event, EventData, SessionId, TurnId};
use bdk_store::EventStream;
use tokio_util::sync::CancellationToken;

use crate::report::Outcome;
use crate::setup::PURPOSE;

/// The principal and channel eval sessions are recorded with.
pub(crate) const PRINCIPAL: &str = "eval";
const CHANNEL: &str = "eval";
/// How long stopping a cut-short turn may take before its events are read anyway.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// One turn as it ended.
#[derive(Debug, Clone)]
pub(crate) struct TurnRecord {
    pub duration_ms: u64,
}

/// What an attempt observed: what the expectations are checked against.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub session_id: Option<SessionId>,
    pub outcome: Outcome,
    /// Why the conversation did not complete.
    pub error: Option<String>,
    pub trajectory: Trajectory,
    /// The turns that ended, in order.
    pub turns: Vec<TurnRecord>,
    pub duration: Duration,
}

impl Observed {
    /// Every turn was sent and completed.
    pub fn succeeded(&self) -> bool {
        self.outcome == Outcome::Completed
    }
}

/// Runs `case`'s conversation once.
pub(crate) async fn attempt(
    engine: &Engine,
    case: &EvalCase,
    iteration: u32,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Observed {
    let started = Instant::now();
    let principal = Principal::new(PRINCIPAL);
    let mut run = Conversation {
        engine,
        principal,
        session: None,
        stream: None,
        turn: None,
        sent: Instant::now(),
        token: String::new(),
        events: Vec::new(),
        turns: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + timeout;
    // Opening the session is not raced against the timeout or cancellation: it returns as soon
    // as the first message is durable, and a session opened behind our back could not be
    // stopped. Its time still counts against the timeout.
    let ended = match run.open(case, iteration).await {
        Err(ended) => ended,
        Ok(()) => tokio::select! {
            ended = tokio::time::timeout_at(deadline, run.converse(case)) => match ended {
                Ok(ended) => ended,
                Err(_) => Ended::new(Outcome::TimedOut, format!("timed out after {}", humanize(timeout))),
            },
            () = cancel.cancelled() => Ended::new(Outcome::Cancelled, "the run was cancelled".into()),
        },
    };
    if matches!(ended.outcome, Outcome::TimedOut | Outcome::Cancelled) {
        run.stop().await;
    }
    let events = run.all_events().await;
    Observed {
        session_id: run.session.clone(),
        outcome: ended.outcome,
        error: ended.error,
        trajectory: Trajectory::from_events(&events),
        turns: run.turns,
        duration: started.elapsed(),
    }
}

struct Ended {
    outcome: Outcome,
    error: Option<String>,
}

impl Ended {
    fn new(outcome: Outcome, error: String) -> Self {
        Self { outcome, error: Some(error) }
    }
}

struct Conversation<'a> {
    engine: &'a Engine,
    principal: Principal,
    session: Option<SessionId>,
    /// The session's events, followed from index 0.
    stream: Option<EventStream>,
    /// The turn being waited for, when its message was sent, and the token for the next one.
    turn: Option<TurnId>,
    sent: Instant,
    token: String,
    /// Events read so far.
    events: Vec<Event>,
    turns: Vec<TurnRecord>,
}

impl Conversation<'_> {
    /// Opens the eval session with the first turn's message and follows its events.
    async fn open(&mut self, case: &EvalCase, iteration: u32) -> Result<(), Ended> {
        let Some(first) = case.turns.first() else {
            return Err(Ended::new(Outcome::Error, "the case has no turns".into()));
        };
        let request = StartSession {
            message: first.message.clone(),
            principal: self.principal.clone(),
            channel: CHANNEL.into(),
            continuation_key: None,
            mode: SessionMode::Chat,
            title: Some(format!("eval {} #{iteration}", case.id)),
            dry_run: case.dry_run,
            as_of: None,
            purpose: Some(PURPOSE.into()),
            workspace_files: Vec::new(),
        };
        self.sent = Instant::now();
        let started = match self.engine.start_session(request).await {
            Ok(started) => started,
            Err(err) => return Err(Ended::new(Outcome::Error, format!("the session could not start: {err}"))),
        };
        self.session = Some(started.session_id.clone());
        self.token = started.continuation_token;
        self.turn = Some(started.turn_id);
        match self.engine.follow(&started.session_id, &self.principal, 0).await {
            Ok(stream) => self.stream = Some(stream),
            Err(err) => {
                return Err(Ended::new(Outcome::Error, format!("the session's events could not be read: {err}")));
            }
        }
        Ok(())
    }

    /// Waits for each turn and sends the next message, until every turn completed or one did not.
    async fn converse(&mut self, case: &EvalCase) -> Ended {
        let Some(session) = self.session.clone() else {
            return Ended::new(Outcome::Error, "the session was not opened".into());
        };
        for i in 0..case.turns.len() {
            if let Err(ended) = self.wait_turn(&session).await {
                return ended;
            }
            self.turns.push(TurnRecord { duration_ms: millis(self.sent.elapsed()) });
            let Some(following) = case.turns.get(i + 1) else { break };
            let follow = FollowUp {
                message: following.message.clone(),
                principal: self.principal.clone(),
                continuation_token: self.token.clone(),
                admission: Admission::Preempt,
                workspace_files: Vec::new(),
            };
            self.sent = Instant::now();
            match self.engine.follow_up(&session, follow).await {
                Ok(accepted) => {
                    self.token = accepted.continuation_token;
                    match accepted.turn_id {
                        Some(id) => self.turn = Some(id),
                        None => return Ended::new(Outcome::Error, format!("turn {} was not admitted", i + 2)),
                    }
                }
                Err(err) => return Ended::new(Outcome::Error, format!("turn {} was refused: {err}", i + 2)),
            }
        }
        Ended { outcome: Outcome::Completed, error: None }
    }

    /// Reads events until the current turn completes (`Ok`) or fails (`Err` with the reason).
    async fn wait_turn(&mut self, session: &SessionId) -> Result<(), Ended> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return Err(Ended::new(Outcome::Error, "the session's events are not followed".into()));
            };
            let Some(next) = stream.next().await else {
                return Err(Ended::new(Outcome::Error, "the session's event stream ended".into()));
            };
            let event = match next {
                Ok(event) => (*event).clone(),
                Err(err) => return Err(Ended::new(Outcome::Error, format!("reading the session's events: {err}"))),
            };
            let ours = event.turn_id.is_some() && event.turn_id == self.turn;
            let verdict = match &event.data {
                EventData::TurnCompleted(_) if ours => Some(Ok(())),
                EventData::TurnFailed(failed) if ours => {
                    Some(Err(Ended::new(Outcome::TurnFailed, format!("turn failed: {}", failed.message))))
                }
                EventData::ApprovalRequested(requested) => {
                    let _ = self.engine.stop(session, &self.principal).await;
                    Some(Err(Ended::new(
                        Outcome::TurnFailed,
                        format!(
                            "{} waits for a person's approval, which an eval cannot give; the turn was stopped",
                            requested.tool_name
                        ),
                    )))
                }
                _ => None,
            };
            self.events.push(event);
            if let Some(verdict) = verdict {
                return verdict;
            }
        }
    }

    /// Stops the running turn of a cut-short attempt and waits (up to [`STOP_GRACE`]) for its
    /// final event, so the log the trajectory folds is settled.
    async fn stop(&mut self) {
        let Some(session) = self.session.clone() else { return };
        let _ = self.engine.stop(&session, &self.principal).await;
        if self.stream.is_some() && self.turn.is_some() {
            let _ = tokio::time::timeout(STOP_GRACE, self.wait_turn(&session)).await;
        }
    }

    /// The session's whole log (what the trajectory folds), or what was read if it cannot be.
    async fn all_events(&mut self) -> Vec<Event> {
        let Some(session) = &self.session else { return Vec::new() };
        match self.engine.events(session, &self.principal, 0).await {
            Ok(events) => events,
            Err(_) => self.events.clone(),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `90s`, `1.5s`, `250ms`.
pub(crate) fn humanize(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
