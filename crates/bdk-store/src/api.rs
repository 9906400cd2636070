//! The storage traits every backend implements: session metadata, event logs, workspaces, kv and
//! the scoped host data (`host.kv`, `host.files`).
//! Backends live in their own modules; the engine only sees these traits.
//!
//! # Why async traits returning boxed futures
//!
//! The engine holds stores as `Arc<dyn Trait>`, so the traits must be dyn-compatible, which
//! native `async fn` in traits is not. The methods are async rather than sync because
//! (a) the planned Postgres backend is async end to end, and (b) an event append is only
//! acknowledged after a group commit, so the caller must be able to wait without holding a
//! thread. Each method therefore returns a [`BoxFuture`]: one allocation per call, negligible
//! next to an fsync or a network round trip. The filesystem backend runs its blocking file IO
//! on tokio's blocking pool, never on the async workers.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use bdk_protocol::{CallId, Event, EventData, SessionId, TurnId};
use serde_json::Value;

use crate::error::Result;
use crate::record::SessionRecord;

/// A boxed, sendable future: what every trait method returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An event as the log hands it out: shared, because one append fans out to every follower.
pub type SharedEvent = Arc<Event>;

/// An event before the log gives it an index, a session id and a time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub turn_id: Option<TurnId>,
    pub data: EventData,
}

impl NewEvent {
    /// A session-level event (no turn).
    pub fn new(data: EventData) -> Self {
        NewEvent { turn_id: None, data }
    }

    /// An event that belongs to `turn_id`.
    pub fn in_turn(turn_id: TurnId, data: EventData) -> Self {
        NewEvent { turn_id: Some(turn_id), data }
    }
}

impl From<EventData> for NewEvent {
    fn from(data: EventData) -> Self {
        NewEvent::new(data)
    }
}

/// Session metadata (`session.json`). One writer per session (its actor): `update` is
/// last-writer-wins.
pub trait SessionStore: Send + Sync + fmt::Debug {
    /// Creates the session with an empty event log. Fails with `SessionExists` if the id is taken.
    /// The record is durable by the time the session's first append is: a backend may make it
    /// durable in that append's commit (the filesystem does), so a session nobody appended to
    /// can be lost to a power loss.
    fn create(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>>;

    /// The session's record, or `None` when it does not exist (or its folder was deleted).
    fn get<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<Option<SessionRecord>>>;

    /// Replaces the record of an existing session atomically. `SessionNotFound` if it is gone.
    fn update(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>>;

    /// Like [`SessionStore::update`] (atomic for readers) but without waiting for durability:
    /// for facts the event log can rebuild, such as the status a listing shows. A crash may
    /// lose the write; recovery re-derives it. Backends without a cheaper path just update.
    fn update_derived(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        self.update(record)
    }

    /// Every session, oldest first.
    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionRecord>>>;

    /// The sessions that may have an open turn (status `running`, or none in a record older
    /// than the field), oldest first: what restart recovery reads. The default filters
    /// [`SessionStore::list`]; a backend keeps an index so this does not read every record.
    fn list_open(&self) -> BoxFuture<'_, Result<Vec<SessionRecord>>> {
        Box::pin(async move {
            let all = self.list().await?;
            Ok(all
                .into_iter()
                .filter(|r| r.status.is_none_or(|s| s == crate::record::SessionStatus::Running))
                .collect())
        })
    }

    /// Removes the session, its log and its workspace. `false` if it did not exist.
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool>>;

    /// Checks that the backend takes durable writes right now, with a small write of its own
    /// (no session data). The engine calls it while writes are failing (a full or read-only
    /// disk), to notice by itself when they work again. Backends that report their own outages
    /// (`Unavailable`) need no probe: the default answers `Ok`.
    fn probe_write(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// The append-only event log of each session: the source of truth for everything that happened.
///
/// Every method is required (no default body): wrappers are written as a
/// [`LogLayer`](crate::layer::LogLayer), whose blanket impl forwards each method by name, so a
/// method added here does not compile until that impl forwards it too.
pub trait EventLog: Send + Sync + fmt::Debug {
    /// Appends `events` contiguously (consecutive indices, in order) and resolves once they are
    /// durable; only then are they published to followers. Indices are assigned here: dense,
    /// from 0. An error means none of `events` was recorded. Dropping the future after the
    /// events were queued does not withdraw them: they are still written, just not acknowledged.
    fn append<'a>(&'a self, session: &'a SessionId, events: Vec<NewEvent>) -> BoxFuture<'a, Result<Vec<SharedEvent>>>;

    /// Like [`EventLog::append`], and replaces the session's record (as
    /// [`SessionStore::update`] does) with the same durability: both are durable when it
    /// resolves. An accepted message and the continuation token it rotates are written so.
    /// An error means none of `events` was recorded. A backend with transactions writes both
    /// in one (one durable commit; an error means neither was written); the filesystem writes
    /// the record into the same log commit as the events, then replaces `session.json` without
    /// a sync (an error means neither was written; see `fs/record_file.rs`).
    fn append_with_record<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: SessionRecord,
    ) -> BoxFuture<'a, Result<Vec<SharedEvent>>>;

    /// Durable events with `index >= from`, at most `limit` of them.
    fn read<'a>(&'a self, session: &'a SessionId, from: u64, limit: Option<usize>)
    -> BoxFuture<'a, Result<Vec<Event>>>;

    /// Replays durable events from index `from`, then follows new ones as they become durable,
    /// with no gap and no duplicate. The stream ends when the log is closed or deleted.
    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, Result<EventStream>>;

    /// The number of durable events, which is also the next index.
    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<u64>>;

    /// A hint that the session's log will not be used for a while (its actor went idle): the
    /// backend may free what an open log holds (a file, buffers, recent events). A log with live
    /// followers or a call in progress stays open. The next call reopens it transparently.
    /// Backends that hold nothing per log do nothing.
    fn release(&self, session: &SessionId);
}

/// A replay-then-follow subscription returned by [`EventLog::follow`].
pub trait EventFollower: Send + fmt::Debug {
    /// The next event, `None` once the log is closed, or an error (after which the stream ends).
    fn next(&mut self) -> BoxFuture<'_, Option<Result<SharedEvent>>>;
}

/// A boxed [`EventFollower`].
pub type EventStream = Box<dyn EventFollower>;

/// Directories tools run in. These are local paths even when metadata lives elsewhere.
pub trait WorkspaceStore: Send + Sync + fmt::Debug {
    /// The session's workspace directory, created if missing. `SessionNotFound` if the session is gone.
    fn session_workspace<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<PathBuf>>;

    /// A fresh scratch directory for one direct tool call, created if missing.
    fn call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, Result<PathBuf>>;

    /// Where [`call_workspace`](Self::call_workspace) puts a call's scratch directory, without
    /// creating it: a native tool's scratch folder is made on first use (`ToolContext::workspace`).
    fn call_workspace_path(&self, call: &CallId) -> PathBuf;

    /// Removes a call's scratch directory; missing is fine.
    fn remove_call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, Result<()>>;

    /// Where `run` writes the trace of a session.
    fn trace_path(&self, id: &SessionId) -> PathBuf;

    /// Called after each turn that used the session's workspace: a backend whose workspaces
    /// must follow the session to another machine saves it here. The filesystem backend's
    /// workspace already is the durable copy, so by default this does nothing.
    fn save_session_workspace<'a>(&'a self, _id: &'a SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// The agent's durable key-value store (`host.kv`): JSON values under string keys.
pub trait KvStore: Send + Sync + fmt::Debug {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Value>>>;

    /// Stores `value` atomically, replacing any previous value.
    fn put<'a>(&'a self, key: &'a str, value: Value) -> BoxFuture<'a, Result<()>>;

    /// `true` if the key existed.
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool>>;

    /// Keys starting with `prefix`, sorted.
    fn keys<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;
}

/// Whose host data (`host.kv`, `host.files`) a request reaches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataScope {
    /// Shared by every session of the agent: the reference's `host.kv` and `host.files`. The
    /// agent-wide kv is the same data [`KvStore`] holds.
    Agent,
    /// One session's own data, removed with the session.
    Session(SessionId),
}

/// One file of a `host.files` area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative to the area, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// `host.kv` and `host.files` per [`DataScope`]. Kv keys are any non-empty string; file paths
/// are relative, `/`-separated, with no empty, `.`, `..` or dot-leading segment
/// (`InvalidPath` otherwise), so no path leaves its area. A session scope whose session does
/// not exist is `SessionNotFound` for writes and empty for reads.
pub trait HostDataStore: Send + Sync + fmt::Debug {
    fn kv_get<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, Result<Option<Value>>>;

    /// Stores `value` atomically, replacing any previous value.
    fn kv_put<'a>(&'a self, scope: &'a DataScope, key: &'a str, value: Value) -> BoxFuture<'a, Result<()>>;

    /// `true` if the key existed.
    fn kv_delete<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, Result<bool>>;

    /// Keys starting with `prefix`, sorted.
    fn kv_keys<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>>;

    /// The file's bytes, or `None` when there is no such file.
    fn file_read<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>>;

    /// Replaces the file atomically, creating its folders.
    fn file_write<'a>(&'a self, scope: &'a DataScope, path: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<()>>;

    /// `true` if the file existed.
    fn file_delete<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, Result<bool>>;

    /// Files whose path starts with `prefix`, sorted by path.
    fn file_list<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, Result<Vec<FileEntry>>>;
}

/// Every store an agent needs, as trait objects, for the engine to hold.
#[derive(Debug, Clone)]
pub struct Stores {
    pub sessions: Arc<dyn SessionStore>,
    pub events: Arc<dyn EventLog>,
    pub workspaces: Arc<dyn WorkspaceStore>,
    pub kv: Arc<dyn KvStore>,
    /// Scoped `host.kv` and `host.files` (the host services of tool calls).
    pub data: Arc<dyn HostDataStore>,
}
