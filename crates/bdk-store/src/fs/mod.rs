//! The filesystem backend: one agent's state directory (see [`Layout`]), with a registry of open
//! event logs and a few writer threads that commit them all (`writer.rs`). Implements every trait
//! in `api.rs`; each concern has a file.

mod artifacts;
mod atomic;
mod deferred;
pub(crate) mod follow;
mod handoff;
#[cfg(test)]
mod handoff_tests;
mod host_data;
mod kv;
mod layout;
mod live;
mod log;
mod open_index;
mod record_file;
pub(crate) mod recover;
mod sessions;
pub(crate) mod syncs;
mod timed;
mod workspaces;
mod writer;

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bdk_protocol::{Event, SessionId};
use tokio::sync::OnceCell;

pub(crate) use host_data::check_path;
pub use layout::Layout;
pub use log::FsStoreOptions;
pub use syncs::SyncStats;

use crate::api::{BoxFuture, EventLog, EventStream, NewEvent, SessionStore, SharedEvent, Stores};
use crate::error::{Error, Result};
use crate::record::SessionRecord;
use follow::{FsFollower, Span, read_chunk, start_span};
use log::LogHandle;
use record_file::{LogView, RecordFiles};
use syncs::SyncCounters;
use writer::WriterHandle;

/// Stores under one agent's state directory. Cheap to clone; clones share open logs.
#[derive(Debug, Clone)]
pub struct FsStore {
    inner: Arc<Inner>,
}

type LogCell = Arc<OnceCell<Arc<LogHandle>>>;

#[derive(Debug)]
struct Inner {
    layout: Layout,
    options: FsStoreOptions,
    /// Open logs. A cell is filled once by whoever opens the log first; concurrent openers wait.
    logs: Mutex<HashMap<SessionId, LogCell>>,
    /// Every durable sync this store makes.
    syncs: Arc<SyncCounters>,
    /// The threads that write every log of this store.
    writer: WriterHandle,
}

impl Drop for Inner {
    /// A debouncing store syncs what it acknowledged unsynced before it goes.
    fn drop(&mut self) {
        self.writer.flush_deferred();
    }
}

/// What an open log knows about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogInfo {
    /// Durable events (also the next index).
    pub events: u64,
    /// Durable bytes.
    pub bytes: u64,
    /// Bytes of a torn final write cut off when the log was opened.
    pub dropped_bytes_on_open: u64,
    /// Group commits (one write + one fsync each) since the log was opened.
    pub commits: u64,
}

/// What a store's open logs hold in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogMemory {
    /// Open logs (each a file and a little state; released when the session's actor retires).
    pub open_logs: usize,
    /// Live channels: one per log that has followers (each a ring of `broadcast_capacity` slots).
    pub live_channels: usize,
    /// Events kept in the logs' in-memory tails (a log with no follower left keeps none from
    /// before that).
    pub tail_events: usize,
}

impl FsStore {
    /// Opens (creating if needed) the state directory `root` with default options.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        Self::open_with(root, FsStoreOptions::default())
    }

    pub fn open_with(root: impl Into<PathBuf>, options: FsStoreOptions) -> Result<Self> {
        let layout = Layout::new(root);
        for dir in [layout.sessions_dir(), layout.traces_dir(), layout.tool_calls_dir(), layout.kv_dir()] {
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        sessions::sweep_trash(&layout);
        let syncs = Arc::new(SyncCounters::default());
        let writer = WriterHandle::start(&options, &syncs)
            .map_err(|e| Error::Task(format!("cannot start the event log writer: {e}")))?;
        let logs = Mutex::new(HashMap::new());
        Ok(FsStore { inner: Arc::new(Inner { layout, options, logs, syncs, writer }) })
    }

    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// How many durable syncs (file data, directories) this store has made since it was opened,
    /// across every session, kv and data write. Take two readings and use [`SyncStats::since`]
    /// to count what one operation cost.
    pub fn syncs(&self) -> SyncStats {
        self.inner.syncs.stats()
    }

    pub(crate) fn sync_counters(&self) -> Arc<SyncCounters> {
        self.inner.syncs.clone()
    }

    /// How many times this store has opened an event log to read it: recovering a log it
    /// opens, reads or follows that start before the events a log keeps in memory, and record
    /// reads that look in the log for a record newer than `session.json`. Counted so tests see
    /// which reads touch the disk.
    pub fn log_reads(&self) -> u64 {
        self.inner.syncs.log_reads()
    }

    /// How many times this store has handed work to tokio's blocking pool (a thread hop there
    /// and back: a wake-up, a context switch and a wake-up back). Event log commits never do
    /// (the writer threads make them); a text turn of a session that exists makes none, counted
    /// so tests see it stay so.
    pub fn blocking_hops(&self) -> u64 {
        self.inner.syncs.blocking_hops()
    }

    /// This store as the trait objects the engine holds.
    pub fn stores(&self) -> Stores {
        Stores {
            sessions: Arc::new(self.clone()),
            events: Arc::new(self.clone()),
            workspaces: Arc::new(self.clone()),
            kv: Arc::new(self.clone()),
            data: Arc::new(self.clone()),
        }
    }

    /// Opens the session's log if needed and reports on it.
    pub async fn log_info(&self, session: &SessionId) -> Result<LogInfo> {
        let log = self.log(session).await?;
        let state = log.shared.state();
        Ok(LogInfo {
            events: state.next_index,
            bytes: state.len,
            dropped_bytes_on_open: log.shared.dropped_bytes_on_open,
            commits: state.commits,
        })
    }

    /// Releases the session's open log: its file closes once queued appends are written, and
    /// followers of it end. The next use reopens it. Call when a session goes idle for long.
    pub fn close_log(&self, session: &SessionId) {
        self.registry().remove(session);
    }

    /// How many event log files are held open for appending (at most
    /// [`FsStoreOptions::max_open_logs`] between commits).
    pub fn open_log_files(&self) -> usize {
        self.sync_counters().open_logs()
    }

    /// How many session logs are open (each holds a file, a live channel and its newest events).
    pub fn open_logs(&self) -> usize {
        self.registry().len()
    }

    /// What the open logs hold in memory, counted (tests assert on it; see [`LogMemory`]).
    pub fn log_memory(&self) -> LogMemory {
        let logs = self.registry();
        let mut memory = LogMemory { open_logs: logs.len(), ..LogMemory::default() };
        for handle in logs.values().filter_map(|cell| cell.get()) {
            memory.live_channels += usize::from(handle.shared.has_channel());
            memory.tail_events += handle.shared.state().tail.len();
        }
        memory
    }

    /// Closes the session's open log only if nothing uses it: no follower, no call in progress.
    /// Returns whether it was closed. What [`EventLog::release`] does for this backend.
    pub fn release_idle_log(&self, session: &SessionId) -> bool {
        let mut logs = self.registry();
        let Some(cell) = logs.get(session) else { return false };
        // Every caller of `log()` holds a clone of the cell while it works, and of the handle
        // while it appends or follows; a follower holds a broadcast receiver.
        let idle = Arc::strong_count(cell) == 1
            && cell.get().is_none_or(|handle| Arc::strong_count(handle) == 1 && handle.shared.followers() == 0);
        if idle {
            // Under the registry's lock: no new handle of this log can make the marker meanwhile.
            if let Some(handle) = cell.get() {
                handle.shared.release_marker();
            }
            logs.remove(session);
        }
        idle
    }

    /// Whether `session`'s log is open in this process (its handle owns the session's
    /// open-session marker while it is).
    fn is_log_open(&self, session: &SessionId) -> bool {
        self.registry().contains_key(session)
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, LogCell>> {
        self.inner.logs.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The open log of `session`, opening (and recovering) it on first use.
    async fn log(&self, session: &SessionId) -> Result<Arc<LogHandle>> {
        // Two rounds: the second replaces a handle whose writer stopped.
        for _ in 0..2 {
            let cell = self.registry().entry(session.clone()).or_default().clone();
            let layout = &self.inner.layout;
            let opened = cell
                .get_or_try_init(|| async {
                    let path = layout.events_path(session);
                    let handle = LogHandle::open(
                        session.clone(),
                        path,
                        self.record_files(session),
                        &self.inner.options,
                        self.inner.writer.clone(),
                        self.inner.syncs.clone(),
                    )
                    .await?;
                    Ok::<_, Error>(Arc::new(handle))
                })
                .await;
            match opened {
                Ok(handle) if !handle.is_closed() => return Ok(handle.clone()),
                Ok(_) => self.forget(session, &cell),
                Err(error) => {
                    self.forget(session, &cell);
                    return Err(error);
                }
            }
        }
        Err(Error::LogClosed(session.clone()))
    }

    /// Where `session`'s record lives besides its log.
    fn record_files(&self, session: &SessionId) -> RecordFiles {
        let layout = &self.inner.layout;
        RecordFiles::new(layout.session_json(session), open_index::marker(layout, session))
    }

    /// What a read of `session`'s record needs to know of its log here (`record_file.rs`).
    fn log_view(&self, session: &SessionId) -> LogView {
        let Some(cell) = self.registry().get(session).cloned() else { return LogView::Closed };
        match cell.get() {
            Some(handle) if handle.shared.record_current() => LogView::Current,
            Some(handle) => LogView::Open(handle.shared.state().len),
            None => LogView::Closed,
        }
    }

    /// Registers the log of a session just created, whose empty file `file` is open for
    /// appending: its first append needs no recovery and no reopening, and carries `record`.
    /// Gives `record` back when someone opened the log meanwhile (it recovered the same empty
    /// file, and its handle is kept): the caller must then make the record durable itself.
    fn register_created(&self, record: SessionRecord, file: fs::File) -> Option<SessionRecord> {
        let mut logs = self.registry();
        if logs.contains_key(&record.id) {
            return Some(record);
        }
        let layout = &self.inner.layout;
        let session = record.id.clone();
        let handle = LogHandle::created(
            layout.events_path(&session),
            self.record_files(&session),
            record,
            file,
            &self.inner.options,
            self.inner.writer.clone(),
            self.inner.syncs.clone(),
        );
        logs.insert(session, Arc::new(OnceCell::new_with(Some(Arc::new(handle)))));
        None
    }

    /// Drops `cell` from the registry if it is still the current one for `session`.
    fn forget(&self, session: &SessionId, cell: &LogCell) {
        let mut logs = self.registry();
        if logs.get(session).is_some_and(|current| Arc::ptr_eq(current, cell)) {
            logs.remove(session);
        }
    }
}

impl FsStore {
    async fn append_to_log(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
        record: Option<SessionRecord>,
    ) -> Result<Vec<SharedEvent>> {
        let log = self.log(session).await?;
        match log.append(events, record).await {
            Err(Error::LogClosed(_)) if !self.inner.layout.session_json(session).exists() => {
                Err(Error::SessionNotFound(session.clone()))
            }
            other => other,
        }
    }
}

/// Runs blocking file IO on tokio's blocking pool, counted in `counters` (each call is a hop
/// to another thread and back; see [`FsStore::blocking_hops`]).
pub(crate) fn blocking<T, F>(counters: &Arc<SyncCounters>, f: F) -> impl Future<Output = Result<T>> + Send + 'static
where
    F: FnOnce() -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    let counters = counters.clone();
    async move {
        counters.blocking_hop();
        tokio::task::spawn_blocking(f).await.map_err(|e| Error::Task(e.to_string()))?
    }
}

impl EventLog for FsStore {
    fn append<'a>(&'a self, session: &'a SessionId, events: Vec<NewEvent>) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        Box::pin(async move { self.append_to_log(session, events, None).await })
    }

    /// One durable write: the record rides in the first event's line of the same group commit
    /// (`record_file.rs`), and `session.json` is replaced, without a sync, before the answer. An
    /// error means neither was written. With no events, a durable `update`.
    fn append_with_record<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: SessionRecord,
    ) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            if events.is_empty() {
                SessionStore::update(self, record).await?;
                return Ok(Vec::new());
            }
            self.append_to_log(session, events, Some(record)).await
        })
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Event>>> {
        Box::pin(async move {
            let log = self.log(session).await?;
            let max = limit.unwrap_or(usize::MAX);
            let cursor = match start_span(&log.shared, from) {
                None => return Ok(Vec::new()),
                // The newest events are in memory: no disk read.
                Some(Span::Tail(events)) => return Ok(events.iter().take(max).map(|e| Event::clone(e)).collect()),
                Some(Span::Disk(cursor)) => cursor,
            };
            let path = log.shared.path.clone();
            log.shared.syncs.log_read();
            let read = blocking(&self.inner.syncs, move || read_chunk(&path, cursor, from, max)).await;
            match read {
                Ok((events, _)) => Ok(events),
                Err(error) if error.is_not_found() => Err(Error::SessionNotFound(session.clone())),
                Err(error) => Err(error),
            }
        })
    }

    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, Result<EventStream>> {
        Box::pin(async move {
            let log = self.log(session).await?;
            Ok(Box::new(FsFollower::start(&log.shared, from)) as EventStream)
        })
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move { Ok(self.log(session).await?.shared.state().next_index) })
    }

    fn release(&self, session: &SessionId) {
        self.release_idle_log(session);
    }
}
