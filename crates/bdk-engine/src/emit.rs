//! The turn's event writer: events of one turn are staged and appended in batches, so the
//! events a decision produces together (a step's end, the turn's end) cost one durable write.
//! Nothing is published before it is durable; the log does the publishing.

use std::sync::Arc;

use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::{EventLog, NewEvent};

#[derive(Debug)]
pub(crate) struct Emitter {
    log: Arc<dyn EventLog>,
    session: SessionId,
    turn: TurnId,
    staged: Vec<NewEvent>,
}

impl Emitter {
    pub fn new(log: Arc<dyn EventLog>, session: SessionId, turn: TurnId) -> Self {
        Emitter { log, session, turn, staged: Vec::new() }
    }

    /// Stages an event of this turn.
    pub fn push(&mut self, data: EventData) {
        self.staged.push(NewEvent::in_turn(self.turn.clone(), data));
    }

    /// Appends everything staged and waits until it is durable.
    pub async fn flush(&mut self) -> bdk_store::Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.staged);
        self.log.append(&self.session, events).await.map(drop)
    }

    /// Hands over what is staged, unwritten, for someone else to append.
    pub fn take(&mut self) -> Vec<NewEvent> {
        std::mem::take(&mut self.staged)
    }

    /// Stages `data` and flushes.
    pub async fn send(&mut self, data: EventData) -> bdk_store::Result<()> {
        self.push(data);
        self.flush().await
    }
}
