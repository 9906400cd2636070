//! Shared fixtures: a store in a temp dir, sample events, and a timeout for every wait.

use std::future::Future;
use std::time::Duration;

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{EventData, SessionId};
use bdk_store::{FsStore, FsStoreOptions, NewEvent, SessionRecord, SessionStore};
use tempfile::TempDir;

/// Every wait in this suite is bounded by this.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Awaits `future` or panics after [`TIMEOUT`].
pub async fn within<F: Future>(future: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {TIMEOUT:?}"),
    }
}

pub struct Fixture {
    pub dir: TempDir,
    pub store: FsStore,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(FsStoreOptions::default())
    }

    pub fn with(options: FsStoreOptions) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open_with(dir.path().join("weather"), options).unwrap();
        Fixture { dir, store }
    }

    /// A second store on the same directory, as after a restart.
    pub fn reopen(&self) -> FsStore {
        FsStore::open(self.dir.path().join("weather")).unwrap()
    }

    pub async fn session(&self) -> SessionId {
        let id = SessionId::generate();
        within(self.store.create(record(&id))).await.unwrap();
        id
    }
}

pub fn record(id: &SessionId) -> SessionRecord {
    SessionRecord::new(id.clone(), SessionMode::Chat, "http", "local")
}

/// A small streamed-text event carrying `text`.
pub fn delta(text: impl Into<String>) -> NewEvent {
    NewEvent::new(EventData::MessageAppended(TextDelta { delta: text.into() }))
}

/// The text a [`delta`] event carries.
pub fn text_of(data: &EventData) -> &str {
    match data {
        EventData::MessageAppended(d) => &d.delta,
        other => panic!("not a delta: {other:?}"),
    }
}
