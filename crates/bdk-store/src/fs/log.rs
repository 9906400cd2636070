//! One session's event log: the handle callers append through, and what the store's writer
//! thread (`writer.rs`) does to commit a batch of this log's appends: one `write`
//! ([`Shared::write`]), one fsync ([`Written::sync`]), then publish and acknowledge
//! ([`Written::finish`]).
//!
//! Order of effects for every batch: assign indices → write → fsync → update the durable mark,
//! the in-memory tail and broadcast (under one lock, so a new follower sees each event exactly
//! once: below the mark, from the tail or the disk, or on the channel above it) → acknowledge.
//! Replay and follow live in `follow.rs`.
//!
//! A failed write (disk full, file system read-only) fails its batch and nothing else: the
//! writer cuts the file back to the durable length, or, when even that fails, remembers to cut
//! it before its next write, so a torn line never sits under a later append. The writer keeps
//! running, and readers never see past the durable mark. A log whose file cannot be opened for
//! writing (a read-only file system) still opens for reading; the writer opens the file at its
//! first write.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bdk_protocol::event::timestamp_now;
use bdk_protocol::{Event, SessionId};
use tokio::sync::{broadcast, oneshot};

use super::blocking;
use super::handoff;
use super::live::LiveChannel;
use super::open_index;
use super::record_file::{self, RecordFiles};
use super::recover::{CHECKPOINT_EVERY, recover};
use super::syncs::SyncCounters;
use super::writer::{self, WriterHandle};
use crate::api::{NewEvent, SharedEvent};
use crate::error::{Error, Result};
use crate::record::SessionRecord;

/// Tuning for the filesystem backend.
#[derive(Debug, Clone)]
pub struct FsStoreOptions {
    /// The most events one group commit takes from the queue (across every log of the store).
    /// `1` disables group commit (one fsync per append); useful only as a benchmark baseline.
    pub max_batch_events: usize,
    /// Append requests (for every log of the store together) that may wait for the writer
    /// thread before `append` itself waits (backpressure).
    pub queue_capacity: usize,
    /// Live events buffered per follower; a follower that falls further behind catches up from disk.
    pub broadcast_capacity: usize,
    /// Threads that take turns committing appends (`writer.rs`): while one waits for a device
    /// flush, the next takes what has queued since.
    pub writer_threads: usize,
    /// Event log files kept open for appending between commits, for all sessions together. A
    /// session's log stays open while its actor lives (30 s idle by default), so a burst of new
    /// sessions would otherwise hold one file descriptor each until the process runs out; past
    /// this many, a log closes its file after each commit and opens it again at its next one.
    pub max_open_logs: usize,
    /// Write debouncing (`storage.toml`'s `policy.debounce_ms`): zero (the default) syncs every
    /// commit before acknowledging it; otherwise a commit is acknowledged once written, and
    /// synced at most this long after (`deferred.rs`).
    pub sync_delay: std::time::Duration,
}

impl Default for FsStoreOptions {
    fn default() -> Self {
        FsStoreOptions {
            max_batch_events: 4096,
            queue_capacity: 1024,
            broadcast_capacity: 1024,
            writer_threads: 4,
            max_open_logs: 512,
            sync_delay: std::time::Duration::ZERO,
        }
    }
}

/// The newest durable events a log keeps in memory, so that a read or a follow that starts near
/// the end of the log (the turn's catch-up read, a stream opened right after a POST) needs no
/// disk read. At most this many events...
pub(crate) const TAIL_EVENTS: usize = 32;
/// ...and this many encoded bytes.
pub(crate) const TAIL_BYTES: usize = 16 * 1024;

/// The newest durable events, contiguous and ending at the durable mark.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    events: VecDeque<(SharedEvent, usize)>,
    bytes: usize,
}

impl Tail {
    /// Adds the next durable event (`bytes`: its encoded line) and forgets the oldest past the
    /// limits.
    fn push(&mut self, event: SharedEvent, bytes: usize) {
        self.events.push_back((event, bytes));
        self.bytes += bytes;
        while self.events.len() > TAIL_EVENTS || self.bytes > TAIL_BYTES {
            let Some((_, bytes)) = self.events.pop_front() else { break };
            self.bytes -= bytes;
        }
    }

    /// Forgets every event it holds (its log has no follower left; see [`Shared::unfollowed`]).
    fn clear(&mut self) {
        self.events = VecDeque::new();
        self.bytes = 0;
    }

    /// How many events it holds.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Every durable event from `from` to `next_index` (the durable mark), if the tail holds them all.
    pub fn since(&self, from: u64, next_index: u64) -> Option<Vec<SharedEvent>> {
        let first = next_index - self.events.len() as u64;
        let skip = usize::try_from(from.checked_sub(first)?).ok()?;
        Some(self.events.iter().skip(skip).map(|(event, _)| event.clone()).collect())
    }
}

/// What the writer has made durable, shared with readers.
#[derive(Debug)]
pub(crate) struct Durable {
    pub len: u64,
    pub next_index: u64,
    pub checkpoints: Vec<u64>,
    /// Group commits (one write + one fsync each) since the log was opened.
    pub commits: u64,
    /// The newest durable events.
    pub tail: Tail,
}

impl Durable {
    /// A byte offset and its index at or before `index`, to start a scan from.
    pub fn seek(&self, index: u64) -> (u64, u64) {
        if index >= self.next_index {
            return (self.len, self.next_index);
        }
        let k = index / CHECKPOINT_EVERY;
        match usize::try_from(k).ok().and_then(|k| self.checkpoints.get(k)) {
            Some(offset) => (*offset, k * CHECKPOINT_EVERY),
            None => (0, 0),
        }
    }
}

/// State shared by the handle, the writer thread and followers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub session: SessionId,
    pub path: PathBuf,
    pub dropped_bytes_on_open: u64,
    /// Counts the log's disk reads (see `SyncCounters::log_read`).
    pub syncs: Arc<SyncCounters>,
    state: Mutex<Durable>,
    /// Live events for followers; a channel only while there are some.
    live: LiveChannel,
    /// The write side; only the writer thread locks it.
    file: Mutex<FileSide>,
    /// The writer found the session deleted and takes no more appends for this log.
    stopped: AtomicBool,
    /// `session.json` holds the newest record this log carries: it was written since the log
    /// was opened here, and its last write worked. Reads of the record then skip the log.
    record_current: AtomicBool,
    /// `FsStoreOptions::max_open_logs`.
    max_open_logs: usize,
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, Durable> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many followers are subscribed to live events.
    pub fn followers(&self) -> usize {
        self.live.followers()
    }

    /// Whether the log's live channel exists (someone followed it since its last publish).
    pub fn has_channel(&self) -> bool {
        self.live.is_open()
    }

    /// A follower ended: once none is left, the live channel and the in-memory tail go (the
    /// session's client has what it streamed; a later read that starts before the events
    /// appended since comes from the file). An idle session's open log then holds no events.
    pub fn unfollowed(&self) {
        let mut state = self.state();
        if self.live.prune() {
            state.tail.clear();
        }
    }

    /// Atomically: `read` of the durable state now and a receiver for every event published
    /// after it (see `handoff.rs`).
    pub fn subscribe<R>(&self, read: impl FnOnce(&Durable) -> R) -> (R, broadcast::Receiver<SharedEvent>) {
        handoff::subscribe(&self.state, &self.live, read)
    }

    /// Holds the write side: the writer thread waits inside this log's next commit until the
    /// guard is dropped.
    #[cfg(test)]
    pub fn hold_writes(&self) -> MutexGuard<'_, FileSide> {
        self.file.lock().unwrap()
    }

    /// Runs `replace` (which writes `session.json` outside the log) with no commit of this log
    /// in progress, so it cannot interleave with a commit's own replacement of the file. It gets
    /// the log's durable length and a created session's first record not yet committed, which
    /// it may replace with a newer one: the first commit then carries that.
    /// It also gets the log's knowledge of the session's open-session marker, to keep it true.
    pub fn replacing_record(
        &self,
        replace: impl FnOnce(u64, &mut Option<SessionRecord>, &mut RecordFiles) -> Result<()>,
    ) -> Result<()> {
        let mut side = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let len = self.state().len;
        let side = &mut *side;
        let replaced = replace(len, &mut side.pending, &mut side.records);
        // After a failed write `session.json` may lack a created session's first record (which
        // its first commit then does not write again): reads look in the log.
        self.record_current.store(replaced.is_ok(), Ordering::Release);
        replaced
    }

    /// The log is being released: the open-session marker it kept past a settled record goes.
    pub fn release_marker(&self) {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).records.release_marker();
    }

    /// Whether `session.json` holds the newest record this log carries (see the field).
    pub fn record_current(&self) -> bool {
        self.record_current.load(Ordering::Acquire)
    }

    /// Refuses every later append to this log; the store replaces it by reopening the file.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether appends to this log are refused for good (the session was deleted).
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

/// One append waiting for the writer thread.
pub(crate) struct AppendRequest {
    pub log: Arc<Shared>,
    pub events: Vec<NewEvent>,
    /// The session's new record, committed with the events (see `record_file.rs`).
    pub record: Option<SessionRecord>,
    pub ack: oneshot::Sender<Result<Vec<SharedEvent>>>,
}

/// A caller's handle on an open log. Dropping every handle (and every queued append) releases
/// the log: its file closes and its followers end.
#[derive(Debug)]
pub(crate) struct LogHandle {
    pub shared: Arc<Shared>,
    writer: WriterHandle,
}

impl LogHandle {
    /// Recovers the log file (see `recover.rs`) and hands its appends to the store's writer.
    pub async fn open(
        session: SessionId,
        path: PathBuf,
        records: RecordFiles,
        options: &FsStoreOptions,
        writer: WriterHandle,
        syncs: Arc<SyncCounters>,
    ) -> Result<Self> {
        let (recovered, file) = {
            let (path, session_json, session) = (path.clone(), records.session_json.clone(), session.clone());
            let hops = syncs.clone();
            let syncs = syncs.clone();
            blocking(&hops, move || {
                if !session_json.exists() {
                    return Err(Error::SessionNotFound(session));
                }
                syncs.log_read();
                let recovered = recover(&path, &syncs)?;
                let file = match open_append(&path) {
                    Ok(file) => Some(file),
                    // Reads work; the writer opens the file at its first write.
                    Err(e) if e.is_write_fault() => None,
                    Err(e) => return Err(e),
                };
                Ok((recovered, file))
            })
            .await?
        };
        let durable = Durable {
            len: recovered.len,
            next_index: recovered.next_index,
            checkpoints: recovered.checkpoints,
            commits: 0,
            tail: Tail::default(),
        };
        // An empty log may be a session created and never committed to: its folder is synced
        // with its first commit, as a created log's is (a no-op cost elsewhere).
        let unsynced_dirs = recovered.len == 0;
        let file = FileSide::new(file, recovered.cut_pending, records, None, unsynced_dirs, &syncs);
        Ok(Self::with(session, path, recovered.dropped_bytes, durable, file, options, writer, syncs))
    }

    /// The log of a session just created: `file` is its empty log, opened for appending, so
    /// nothing is read or reopened. `record`, the session's first record, goes into the log's
    /// first commit.
    pub fn created(
        path: PathBuf,
        records: RecordFiles,
        record: SessionRecord,
        file: File,
        options: &FsStoreOptions,
        writer: WriterHandle,
        syncs: Arc<SyncCounters>,
    ) -> Self {
        let durable = Durable { len: 0, next_index: 0, checkpoints: Vec::new(), commits: 0, tail: Tail::default() };
        let session = record.id.clone();
        // `create` made the marker of a record that may have an open turn.
        let records = RecordFiles { marked: open_index::is_open(record.status), ..records };
        let file = FileSide::new(Some(file), false, records, Some(record), true, &syncs);
        let handle = Self::with(session, path, 0, durable, file, options, writer, syncs);
        // `create` wrote it, and nothing is in the log yet.
        handle.shared.record_current.store(true, Ordering::Release);
        handle
    }

    #[allow(clippy::too_many_arguments)]
    fn with(
        session: SessionId,
        path: PathBuf,
        dropped_bytes_on_open: u64,
        durable: Durable,
        file: FileSide,
        options: &FsStoreOptions,
        writer: WriterHandle,
        syncs: Arc<SyncCounters>,
    ) -> Self {
        let shared = Arc::new(Shared {
            session,
            path,
            dropped_bytes_on_open,
            syncs,
            state: Mutex::new(durable),
            live: LiveChannel::new(options.broadcast_capacity),
            file: Mutex::new(file),
            stopped: AtomicBool::new(false),
            record_current: AtomicBool::new(false),
            max_open_logs: options.max_open_logs,
        });
        LogHandle { shared, writer }
    }

    /// Whether the writer has stopped taking appends for this log; a stopped handle must be
    /// replaced by reopening.
    pub fn is_closed(&self) -> bool {
        self.shared.is_stopped() || self.writer.is_closed()
    }

    /// Queues `events` (with the session's new `record`, if set) and waits until they are
    /// durable. `events` must not be empty when `record` is set.
    pub async fn append(&self, events: Vec<NewEvent>, record: Option<SessionRecord>) -> Result<Vec<SharedEvent>> {
        if events.is_empty() {
            debug_assert!(record.is_none(), "a record rides on an event");
            return Ok(Vec::new());
        }
        let (ack, done) = oneshot::channel();
        let closed = || Error::LogClosed(self.shared.session.clone());
        let request = AppendRequest { log: self.shared.clone(), events, record, ack };
        self.writer.send(request).await.map_err(|_| closed())?;
        done.await.map_err(|_| closed())?
    }
}

/// The write side of a log: only the writer thread touches it.
#[derive(Debug)]
pub(crate) struct FileSide {
    /// `None` until the file can be opened for appending (see the module docs).
    file: Option<File>,
    /// The file may hold bytes past the durable length (a failed write that could not be
    /// rolled back, or a torn tail recovery could not cut): cut them before the next write.
    cut_pending: bool,
    /// `session.json` and the open-session marker, replaced after a commit carrying a record.
    records: RecordFiles,
    /// A created session's first record, until a commit carries it.
    pending: Option<SessionRecord>,
    /// The session folder and `sessions/` may hold entries not yet durable (a session just
    /// created): the next commit syncs them after the log's data, before it answers.
    unsynced_dirs: bool,
    /// Counts `file` among the store's open logs (`FsStoreOptions::max_open_logs`).
    syncs: Arc<SyncCounters>,
}

impl Drop for FileSide {
    fn drop(&mut self) {
        if self.file.is_some() {
            self.syncs.log_closed();
        }
    }
}

/// A record a write carries in its line, and the end of that line in the log.
struct Embedded {
    record: SessionRecord,
    end: u64,
    /// The request's own record (`false`: a created session's first record, carried by its
    /// first commit).
    own: bool,
}

/// One request's events, encoded and waiting for the commit.
struct Staged {
    ack: oneshot::Sender<Result<Vec<SharedEvent>>>,
    /// Each event with the length of its encoded line.
    events: Vec<(SharedEvent, usize)>,
}

impl Shared {
    /// The first half of committing one batch of this log's appends, on the writer thread:
    /// gives them indices and writes them in one `write`. Requests that cannot be staged are
    /// answered here; `None` when nothing is left to sync (every request has been answered).
    pub(crate) fn write(&self, requests: Vec<AppendRequest>) -> Option<Written<'_>> {
        if self.is_stopped() {
            for request in requests {
                let _ = request.ack.send(Err(Error::LogClosed(self.session.clone())));
            }
            return None;
        }
        let mut side = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let (len, next_index) = {
            let state = self.state();
            (state.len, state.next_index)
        };
        let mut buf = Vec::with_capacity(requests.len() * 512);
        let mut checkpoints = Vec::new();
        // The newest record the batch carries, and the end of the line carrying it.
        let mut embedded: Option<Embedded> = None;
        let mut pending = side.pending.clone();
        let (staged, index) = writer::assign(next_index, requests, |mut request, first| {
            let (buf_mark, checkpoint_mark) = (buf.len(), checkpoints.len());
            let mut events = Vec::with_capacity(request.events.len());
            let mut index = first;
            // A request's own record is newer than a created session's first one.
            let own = request.record.is_some();
            let mut record = request.record.take().or_else(|| pending.clone());
            let mut carried_to = None;
            for new in request.events {
                let event = Event {
                    index,
                    session_id: self.session.clone(),
                    turn_id: new.turn_id,
                    at: timestamp_now(),
                    data: new.data,
                };
                let offset = len + buf.len() as u64;
                let start = buf.len();
                let carried = record.take();
                let encoded = serde_json::to_writer(&mut buf, &event)
                    .and_then(|()| carried.as_ref().map_or(Ok(()), |r| record_file::embed(&mut buf, r)));
                if let Err(e) = encoded {
                    // Only this request fails; the rest of the batch is unaffected.
                    buf.truncate(buf_mark);
                    checkpoints.truncate(checkpoint_mark);
                    let _ = request.ack.send(Err(Error::Encode(e)));
                    return None;
                }
                buf.push(b'\n');
                if index.is_multiple_of(CHECKPOINT_EVERY) {
                    checkpoints.push(offset);
                }
                if let Some(record) = carried {
                    carried_to = Some(Embedded { record, end: len + buf.len() as u64, own });
                }
                events.push((Arc::new(event), buf.len() - start));
                index += 1;
            }
            if carried_to.is_some() {
                embedded = carried_to;
                pending = None;
            }
            Some((Staged { ack: request.ack, events }, index - first))
        });
        if buf.is_empty() {
            for s in staged {
                let _ = s.ack.send(Ok(s.events.into_iter().map(|(event, _)| event).collect()));
            }
            return None;
        }

        // A session folder deleted behind our back must not be written to (the file would be
        // an orphan and the ack a lie).
        let failed = if side.records.session_json.exists() {
            side.ready(&self.path, len, &self.syncs)
                .and_then(|file| write_batch(file, &buf, &self.path).map_err(|e| Error::io(&self.path, e)))
                .err()
        } else {
            Some(Error::SessionNotFound(self.session.clone()))
        };
        let new_len = len + buf.len() as u64;
        Some(Written { log: self, side, staged, len, new_len, index, checkpoints, embedded, failed })
    }
}

/// One log's share of a batch, written and waiting for its fsync. Holds the log's write side.
pub(crate) struct Written<'a> {
    log: &'a Shared,
    side: MutexGuard<'a, FileSide>,
    staged: Vec<Staged>,
    /// The durable length before this write, and after it once synced.
    len: u64,
    new_len: u64,
    /// The index after the last event written.
    index: u64,
    checkpoints: Vec<u64>,
    /// The newest record the write carries.
    embedded: Option<Embedded>,
    /// Why the write failed, if it did.
    failed: Option<Error>,
}

impl<'a> Written<'a> {
    /// The log this belongs to.
    pub fn log(&self) -> &'a Shared {
        self.log
    }

    /// Leaves the sync [`Written::sync`] would make to `deferred` (write debouncing); nothing
    /// to do when the write failed.
    pub fn defer(&self, deferred: &super::deferred::Deferred) {
        if self.failed.is_none() && self.side.file.is_some() {
            deferred.written(&self.log.path, self.side.unsynced_dirs);
        }
    }

    /// Makes the write durable (`fdatasync`), and a new session's folder with it (see
    /// `sessions.rs`: `create`). Callable from any thread; nothing to do when the write failed.
    pub fn sync(&self) -> Result<()> {
        let (None, Some(file)) = (&self.failed, &self.side.file) else { return Ok(()) };
        let syncs = &self.log.syncs;
        syncs.data(file).map_err(|e| Error::io(&self.log.path, e))?;
        if self.side.unsynced_dirs {
            // `sessions/<id>/events.ndjson`: the session folder, then `sessions/`.
            for dir in self.log.path.ancestors().skip(1).take(2) {
                #[cfg(test)]
                if let Some(error) = faults::on_dir_sync(&self.log.path) {
                    return Err(Error::io(dir, error));
                }
                syncs.dir(dir).map_err(|e| Error::io(dir, e))?;
            }
        }
        Ok(())
    }

    /// The second half of the commit, after [`Written::sync`] returned `synced`: publish and
    /// acknowledge, or cut the file back and fail every request of the batch.
    pub fn finish(mut self, synced: Result<()>) {
        let log = self.log;
        let outcome = match self.failed.take() {
            Some(error) => Err(error),
            None => synced,
        };
        match outcome {
            Ok(()) => {
                self.side.unsynced_dirs = false;
                self.side.close_over(log.max_open_logs);
                if let Some(Embedded { record, end, own }) = self.embedded.take() {
                    self.side.pending = None;
                    // A created session's first record: `session.json` holds it already (it
                    // was written with it and replaced by nothing since), accounting for none
                    // of the log, so a reader that does not know it is current finds the same
                    // record in the log. No second rename for a new session.
                    let on_file = !own && log.record_current();
                    if !on_file {
                        // Durable in the log now; `session.json` follows without a sync, before
                        // anyone is answered. If this fails, readers rebuild it from the log.
                        let replaced = self.side.records.replace(&record, end);
                        log.record_current.store(replaced.is_ok(), Ordering::Release);
                        if let Err(error) = replaced {
                            tracing::warn!(session = %log.session, %error, "could not replace session.json; the log holds the record");
                        }
                    }
                }
                let mut tail = Vec::new();
                let committed = self
                    .staged
                    .into_iter()
                    .map(|s| {
                        tail.extend(s.events.iter().cloned());
                        (s.ack, s.events.into_iter().map(|(event, _)| event).collect())
                    })
                    .collect();
                let (new_len, index, checkpoints) = (self.new_len, self.index, self.checkpoints);
                handoff::publish_then_ack(
                    &log.state,
                    &log.live,
                    |state: &mut Durable| {
                        state.len = new_len;
                        state.next_index = index;
                        state.checkpoints.extend(checkpoints);
                        state.commits += 1;
                        for (event, bytes) in tail {
                            state.tail.push(event, bytes);
                        }
                    },
                    committed,
                    |ack, events| {
                        let _ = ack.send(Ok(events));
                    },
                );
            }
            Err(error) => {
                if matches!(error, Error::SessionNotFound(_)) {
                    log.stop();
                    tracing::error!(session = %log.session, error = %error, "event log stopped: its session is gone");
                } else {
                    // Whatever part of the batch reached the file is cut before the waiters
                    // hear of the failure, or before the next write if the cut fails too.
                    self.side.cut_pending = true;
                    if let Err(cut) = self.side.ready(&log.path, self.len, &log.syncs) {
                        tracing::warn!(session = %log.session, error = %cut, "cannot cut a failed write yet; will before the next write");
                    }
                }
                for s in self.staged {
                    let _ = s.ack.send(Err(error.duplicate()));
                }
            }
        }
    }
}

impl FileSide {
    fn new(
        file: Option<File>,
        cut_pending: bool,
        records: RecordFiles,
        pending: Option<SessionRecord>,
        unsynced_dirs: bool,
        syncs: &Arc<SyncCounters>,
    ) -> Self {
        if file.is_some() {
            syncs.log_opened();
        }
        FileSide { file, cut_pending, records, pending, unsynced_dirs, syncs: syncs.clone() }
    }

    /// Closes the file when the store holds more open logs than `max`: the next write opens it
    /// again (`ready`). Called after a commit, with nothing of the file left to sync.
    fn close_over(&mut self, max: usize) {
        if self.file.is_some() && self.syncs.open_logs() > max {
            self.file = None;
            self.syncs.log_closed();
        }
    }

    /// The file, ready for the next write: opened if it could not be yet, and cut back to the
    /// durable length `len` if a failed write may have left bytes past it.
    fn ready(&mut self, path: &Path, len: u64, syncs: &SyncCounters) -> Result<&File> {
        let file = match self.file.take() {
            Some(file) => file,
            None => {
                let file = open_append(path)?;
                self.syncs.log_opened();
                file
            }
        };
        let file = self.file.insert(file);
        if self.cut_pending {
            cut_to(file, len, path).and_then(|()| syncs.data(file)).map_err(|e| Error::io(path, e))?;
            self.cut_pending = false;
        }
        Ok(file)
    }
}

/// Opens the log for appending.
fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new().append(true).open(path).map_err(|e| Error::io(path, e))
}

/// Writes one batch at the end of the log: the only place the log's bytes reach the file.
fn write_batch(mut file: &File, buf: &[u8], path: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    if let Some(error) = faults::on_write(path, file, buf) {
        return Err(error);
    }
    let _ = path;
    file.write_all(buf)
}

/// Cuts the log back to `len` bytes.
fn cut_to(file: &File, len: u64, path: &Path) -> std::io::Result<()> {
    #[cfg(test)]
    if let Some(error) = faults::on_cut(path) {
        return Err(error);
    }
    let _ = path;
    file.set_len(len)
}

/// Injected write faults for the unit tests: a full disk that tears a write and refuses the
/// cuts after it, or refuses a new session's folder sync. Keyed by log path, so tests running
/// at once do not meet.
#[cfg(test)]
pub(crate) mod faults {
    use std::collections::HashMap;
    use std::fs::File;
    use std::io::{self, Write};
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    #[derive(Debug, Default, Clone, Copy)]
    pub struct Fault {
        /// Writes that fail (each after writing half its bytes: a torn line).
        pub torn_writes: u32,
        /// Cuts (truncations) that fail.
        pub failed_cuts: u32,
        /// Syncs of a new session's folder (by its first commit) that fail.
        pub failed_dir_syncs: u32,
    }

    static FAULTS: Mutex<Option<HashMap<PathBuf, Fault>>> = Mutex::new(None);

    pub fn inject(path: &Path, fault: Fault) {
        let mut faults = FAULTS.lock().unwrap();
        faults.get_or_insert_with(HashMap::new).insert(path.to_path_buf(), fault);
    }

    fn take(path: &Path, pick: impl FnOnce(&mut Fault) -> &mut u32) -> bool {
        let mut faults = FAULTS.lock().unwrap();
        let Some(fault) = faults.as_mut().and_then(|f| f.get_mut(path)) else { return false };
        let left = pick(fault);
        if *left == 0 {
            return false;
        }
        *left -= 1;
        true
    }

    fn full() -> io::Error {
        io::Error::from_raw_os_error(28) // ENOSPC
    }

    pub fn on_write(path: &Path, mut file: &File, buf: &[u8]) -> Option<io::Error> {
        take(path, |f| &mut f.torn_writes).then(|| {
            let _ = file.write_all(&buf[..buf.len() / 2]);
            full()
        })
    }

    pub fn on_cut(path: &Path) -> Option<io::Error> {
        take(path, |f| &mut f.failed_cuts).then(full)
    }

    /// `path`: the log whose commit syncs the folder.
    pub fn on_dir_sync(path: &Path) -> Option<io::Error> {
        take(path, |f| &mut f.failed_dir_syncs).then(full)
    }
}

#[cfg(test)]
#[path = "log_fault_tests.rs"]
mod fault_tests;
