//! The turn's event writer: events of one turn are staged and appended in batches, so the
//! events a decision produces together (a step's end, the turn's end) cost one durable write.
//! Nothing is published before it is durable; the log does the publishing.
//!
//! Streamed deltas need not hold the turn up while they become durable: [`Emitter::start`]
//! hands a batch to the log and returns, and the stream keeps reading while the log commits.
//! At most one such append is in flight; the next append (or [`Emitter::settle`]) waits for it
//! first, so batches stay in order and a failed append fails the turn at the next wait.

use std::sync::Arc;

use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::{BoxFuture, EventLog, NewEvent, SharedEvent};

/// An append handed to the log and not yet acknowledged.
type InFlight = BoxFuture<'static, bdk_store::Result<Vec<SharedEvent>>>;

pub(crate) struct Emitter {
    log: Arc<dyn EventLog>,
    session: SessionId,
    turn: TurnId,
    staged: Vec<NewEvent>,
    in_flight: Option<InFlight>,
    /// The tool of each model call that got a result, in order (for the turn log).
    tools: Vec<String>,
    /// Every event this turn's appends wrote, in order, for the session's conversation fold
    /// ([`Emitter::take_written`]).
    written: Vec<SharedEvent>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter")
            .field("session", &self.session)
            .field("turn", &self.turn)
            .field("staged", &self.staged.len())
            .field("in_flight", &self.in_flight.is_some())
            .finish()
    }
}

impl Emitter {
    pub fn new(log: Arc<dyn EventLog>, session: SessionId, turn: TurnId) -> Self {
        Emitter { log, session, turn, staged: Vec::new(), in_flight: None, tools: Vec::new(), written: Vec::new() }
    }

    /// Stages an event of this turn.
    pub fn push(&mut self, data: EventData) {
        if let EventData::ActionResult(result) = &data
            && result.direct != Some(true)
        {
            self.tools.push(result.tool_name.clone());
        }
        self.staged.push(NewEvent::in_turn(self.turn.clone(), data));
    }

    /// Appends everything staged and waits until it (and any append in flight) is durable.
    pub async fn flush(&mut self) -> bdk_store::Result<()> {
        self.flush_written().await.map(drop)
    }

    /// Like [`Emitter::flush`], returning the events this flush wrote (with their `at`).
    pub async fn flush_written(&mut self) -> bdk_store::Result<Vec<SharedEvent>> {
        self.settle().await?;
        if self.staged.is_empty() {
            return Ok(Vec::new());
        }
        let events = std::mem::take(&mut self.staged);
        let written = self.log.append(&self.session, events).await?;
        self.written.extend(written.iter().cloned());
        Ok(written)
    }

    /// Everything this turn's appends wrote so far, in order; clears the list.
    pub fn take_written(&mut self) -> Vec<SharedEvent> {
        std::mem::take(&mut self.written)
    }

    /// Whether events are staged and not yet handed to the log.
    pub fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Whether an append is in flight (started and not yet settled).
    pub fn is_busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Hands everything staged to the log without waiting for it to be durable. The caller must
    /// [`settle`](Self::settle) first: at most one append is in flight.
    pub fn start(&mut self) {
        debug_assert!(self.in_flight.is_none(), "an append is already in flight");
        if self.staged.is_empty() {
            return;
        }
        let (log, session, events) = (self.log.clone(), self.session.clone(), std::mem::take(&mut self.staged));
        self.in_flight = Some(Box::pin(async move { log.append(&session, events).await }));
    }

    /// Waits for the append in flight, if any. Cancel-safe: dropped before it resolves, the
    /// append stays in flight and is awaited next time.
    pub async fn settle(&mut self) -> bdk_store::Result<()> {
        let Some(append) = self.in_flight.as_mut() else { return Ok(()) };
        let result = append.await;
        self.in_flight = None;
        self.written.extend(result?);
        Ok(())
    }

    /// Hands over what is staged, unwritten, for someone else to append. Call after
    /// [`settle`](Self::settle), so the events handed over come after everything appended.
    pub fn take(&mut self) -> Vec<NewEvent> {
        debug_assert!(self.in_flight.is_none(), "an append is still in flight");
        std::mem::take(&mut self.staged)
    }

    /// The tool of each call that got a result so far, in order.
    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// Stages `data` and flushes.
    pub async fn send(&mut self, data: EventData) -> bdk_store::Result<()> {
        self.push(data);
        self.flush().await
    }
}

#[cfg(test)]
mod tests {
    use bdk_protocol::event::{SessionMode, TextDelta};
    use bdk_store::{FsStore, SessionRecord, SessionStore};

    use super::*;

    fn delta(text: &str) -> EventData {
        EventData::MessageAppended(TextDelta { delta: text.into() })
    }

    #[tokio::test]
    async fn an_append_in_flight_lands_before_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FsStore::open(dir.path()).unwrap());
        let session = SessionId::generate();
        store.create(SessionRecord::new(session.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
        let mut emit = Emitter::new(store.clone(), session.clone(), TurnId::generate());
        emit.push(delta("a"));
        emit.start();
        assert!(emit.is_busy());
        emit.send(delta("b")).await.unwrap();
        assert!(!emit.is_busy());
        let events = store.read(&session, 0, None).await.unwrap();
        let data: Vec<EventData> = events.into_iter().map(|e| e.data).collect();
        assert_eq!(data, vec![delta("a"), delta("b")]);
    }

    #[tokio::test]
    async fn a_failed_append_in_flight_is_reported_when_settled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FsStore::open(dir.path()).unwrap());
        let mut emit = Emitter::new(store, SessionId::generate(), TurnId::generate());
        emit.push(delta("lost"));
        emit.start();
        assert!(emit.settle().await.is_err(), "the session does not exist");
        assert!(!emit.is_busy());
        assert!(emit.settle().await.is_ok());
    }
}
