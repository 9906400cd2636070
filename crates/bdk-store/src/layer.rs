//! One way to wrap an event log: a [`LogLayer`] names the log it wraps and overrides only what
//! it changes; every other [`EventLog`] method reaches the inner log untouched.
//!
//! Wrappers (timing, store health, the hooks' tap, the engine's stored-text expansion) used to
//! forward each method by hand, and a forgotten one silently fell back to the trait's default
//! instead of reaching the store. Here the forwarding is written once: the blanket
//! `impl<L: LogLayer> EventLog for L` names every method, and [`EventLog`] has no default
//! bodies, so a method added to the trait fails to compile until this impl forwards it.

use std::sync::Arc;

use bdk_protocol::{Event, SessionId};

use crate::api::{BoxFuture, EventLog, EventStream, NewEvent, SharedEvent};
use crate::error::Result;
use crate::record::SessionRecord;

/// A wrapper around an [`EventLog`]. Each method defaults to the inner log's; override the
/// ones the layer changes. Every `LogLayer` is an `EventLog` (hold it as `Arc<dyn EventLog>`).
pub trait LogLayer: Send + Sync + std::fmt::Debug {
    /// The log this layer wraps.
    fn inner(&self) -> &Arc<dyn EventLog>;

    /// Both forms of an append: [`EventLog::append`] (`record` is `None`) and
    /// [`EventLog::append_with_record`]. A layer that changes appends overrides this one method
    /// and so sees every append, whichever form the caller used.
    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: Option<SessionRecord>,
    ) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        append_to(self.inner().as_ref(), session, events, record)
    }

    /// See [`EventLog::read`].
    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Event>>> {
        self.inner().read(session, from, limit)
    }

    /// See [`EventLog::follow`].
    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, Result<EventStream>> {
        self.inner().follow(session, from)
    }

    /// See [`EventLog::len`].
    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<u64>> {
        self.inner().len(session)
    }

    /// See [`EventLog::release`].
    fn release(&self, session: &SessionId) {
        self.inner().release(session);
    }
}

/// Appends `events` to `log` in the form `record` asks for: with the session's record in the
/// same commit when it is set ([`EventLog::append_with_record`]), alone otherwise.
pub fn append_to<'a>(
    log: &'a dyn EventLog,
    session: &'a SessionId,
    events: Vec<NewEvent>,
    record: Option<SessionRecord>,
) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
    match record {
        Some(record) => log.append_with_record(session, events, record),
        None => log.append(session, events),
    }
}

impl<L: LogLayer> EventLog for L {
    fn append<'a>(&'a self, session: &'a SessionId, events: Vec<NewEvent>) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        LogLayer::write(self, session, events, None)
    }

    fn append_with_record<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: SessionRecord,
    ) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        LogLayer::write(self, session, events, Some(record))
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Event>>> {
        LogLayer::read(self, session, from, limit)
    }

    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, Result<EventStream>> {
        LogLayer::follow(self, session, from)
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<u64>> {
        LogLayer::len(self, session)
    }

    fn release(&self, session: &SessionId) {
        LogLayer::release(self, session);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bdk_protocol::EventData;
    use bdk_protocol::event::SessionWaiting;

    use super::*;

    /// A log that records which method reached it.
    #[derive(Debug, Default)]
    struct Recording {
        calls: Mutex<Vec<&'static str>>,
    }

    impl Recording {
        fn note(&self, call: &'static str) {
            self.calls.lock().unwrap_or_else(|p| p.into_inner()).push(call);
        }
    }

    impl EventLog for Recording {
        fn append<'a>(&'a self, _: &'a SessionId, _: Vec<NewEvent>) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
            self.note("append");
            Box::pin(async { Ok(Vec::new()) })
        }
        fn append_with_record<'a>(
            &'a self,
            _: &'a SessionId,
            _: Vec<NewEvent>,
            _: SessionRecord,
        ) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
            self.note("append_with_record");
            Box::pin(async { Ok(Vec::new()) })
        }
        fn read<'a>(&'a self, _: &'a SessionId, _: u64, _: Option<usize>) -> BoxFuture<'a, Result<Vec<Event>>> {
            self.note("read");
            Box::pin(async { Ok(Vec::new()) })
        }
        fn follow<'a>(&'a self, session: &'a SessionId, _: u64) -> BoxFuture<'a, Result<EventStream>> {
            self.note("follow");
            Box::pin(async move { Err(crate::Error::SessionNotFound(session.clone())) })
        }
        fn len<'a>(&'a self, _: &'a SessionId) -> BoxFuture<'a, Result<u64>> {
            self.note("len");
            Box::pin(async { Ok(7) })
        }
        fn release(&self, _: &SessionId) {
            self.note("release");
        }
    }

    /// A layer that changes nothing.
    #[derive(Debug)]
    struct Plain(Arc<dyn EventLog>);

    impl LogLayer for Plain {
        fn inner(&self) -> &Arc<dyn EventLog> {
            &self.0
        }
    }

    #[tokio::test]
    async fn a_layer_that_overrides_nothing_forwards_every_method() {
        let recording = Arc::new(Recording::default());
        let layer: Arc<dyn EventLog> = Arc::new(Plain(recording.clone()));
        let session = SessionId::generate();
        layer.append(&session, vec![NewEvent::new(EventData::SessionWaiting(SessionWaiting {}))]).await.unwrap();
        let record = SessionRecord::new(session.clone(), bdk_protocol::event::SessionMode::Chat, "http", "a");
        layer.append_with_record(&session, Vec::new(), record).await.unwrap();
        layer.read(&session, 0, None).await.unwrap();
        assert!(layer.follow(&session, 0).await.is_err());
        assert_eq!(layer.len(&session).await.unwrap(), 7);
        layer.release(&session);
        let calls = recording.calls.lock().unwrap().clone();
        assert_eq!(calls, ["append", "append_with_record", "read", "follow", "len", "release"]);
    }
}
