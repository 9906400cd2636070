//! The live side of one open log: a broadcast channel that exists only while someone follows.
//!
//! tokio's broadcast channel allocates its whole ring (`broadcast_capacity` slots, ~40 KiB at
//! the default 1024) when it is made, and an open log lives as long as its session's actor
//! (30 s past the last turn). A channel per open log cost every session that ring whether or not
//! anyone streamed it. So the channel is made by the first follower and dropped when the last
//! one is gone: at the next publish, or when a follower ends (`follow.rs`). Both happen under
//! the log's durable-state lock (see `handoff.rs`), so a follower still subscribes and sees each
//! event exactly once; the channel's own mutex is only ever taken inside that lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::broadcast;

use super::handoff::Topic;
use crate::api::SharedEvent;

/// A log's live channel, made on demand.
#[derive(Debug)]
pub(crate) struct LiveChannel {
    capacity: usize,
    tx: Mutex<Option<broadcast::Sender<SharedEvent>>>,
}

impl LiveChannel {
    pub fn new(capacity: usize) -> Self {
        LiveChannel { capacity: capacity.max(1), tx: Mutex::new(None) }
    }

    fn sender(&self) -> MutexGuard<'_, Option<broadcast::Sender<SharedEvent>>> {
        self.tx.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many followers are subscribed.
    pub fn followers(&self) -> usize {
        self.sender().as_ref().map_or(0, broadcast::Sender::receiver_count)
    }

    /// Whether the channel (and its ring) exists now.
    pub fn is_open(&self) -> bool {
        self.sender().is_some()
    }

    /// Drops the channel if nobody follows. Returns whether nobody does. Call under the log's
    /// durable-state lock.
    pub fn prune(&self) -> bool {
        let mut tx = self.sender();
        let unused = tx.as_ref().is_none_or(|tx| tx.receiver_count() == 0);
        if unused {
            *tx = None;
        }
        unused
    }
}

impl Topic for LiveChannel {
    type Item = SharedEvent;
    type Receiver = broadcast::Receiver<SharedEvent>;

    fn subscribe(&self) -> broadcast::Receiver<SharedEvent> {
        self.sender().get_or_insert_with(|| broadcast::channel(self.capacity).0).subscribe()
    }

    fn send(&self, item: SharedEvent) {
        let mut tx = self.sender();
        if let Some(sender) = tx.as_ref()
            && sender.send(item).is_err()
        {
            // No receiver left: nobody follows this session right now.
            *tx = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bdk_protocol::event::TextDelta;
    use bdk_protocol::event::timestamp_now;
    use bdk_protocol::{Event, EventData, SessionId};

    use super::*;

    fn event(index: u64) -> SharedEvent {
        let data = EventData::MessageAppended(TextDelta { delta: "x".into() });
        Arc::new(Event { index, session_id: SessionId::generate(), turn_id: None, at: timestamp_now(), data })
    }

    #[test]
    fn the_channel_lives_only_while_someone_follows() {
        let live = LiveChannel::new(4);
        live.send(event(0));
        assert!(!live.is_open(), "publishing with no follower makes no channel");
        let mut rx = live.subscribe();
        assert!(live.is_open());
        assert_eq!(live.followers(), 1);
        live.send(event(1));
        assert_eq!(rx.try_recv().unwrap().index, 1);
        assert!(!live.prune(), "a follower is subscribed");
        drop(rx);
        assert_eq!(live.followers(), 0);
        live.send(event(2));
        assert!(!live.is_open(), "the first publish with nobody listening drops it");
        let rx = live.subscribe();
        drop(rx);
        assert!(live.prune());
        assert!(!live.is_open());
    }
}
