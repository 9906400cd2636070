//! One session's event log: the handle callers append through and the single writer task that
//! owns the file. Appends queue on a bounded channel; the writer drains everything queued, writes
//! it in one `write`, fsyncs once (group commit), then publishes and acknowledges.
//!
//! Order of effects for every batch: assign indices → write → fsync → update the durable mark
//! and broadcast (under one lock, so a new follower sees each event exactly once: on disk below
//! the mark or on the channel above it) → acknowledge. Replay and follow live in `follow.rs`.
//!
//! A failed write (disk full, file system read-only) fails its batch and nothing else: the
//! writer cuts the file back to the durable length, or, when even that fails, remembers to cut
//! it before its next write, so a torn line never sits under a later append. The writer keeps
//! running, and readers never see past the durable mark. A log whose file cannot be opened for
//! writing (a read-only file system) still opens for reading; the writer opens the file at its
//! first write.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bdk_protocol::event::timestamp_now;
use bdk_protocol::{Event, SessionId};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::blocking;
use super::handoff;
use super::recover::{CHECKPOINT_EVERY, recover};
use super::syncs::SyncCounters;
use crate::api::{NewEvent, SharedEvent};
use crate::error::{Error, Result};

/// Tuning for the filesystem backend.
#[derive(Debug, Clone)]
pub struct FsStoreOptions {
    /// The most events one group commit takes from the queue. `1` disables group commit
    /// (one fsync per append); useful only as a benchmark baseline.
    pub max_batch_events: usize,
    /// Append requests that may wait for the writer before `append` itself waits (backpressure).
    pub queue_capacity: usize,
    /// Live events buffered per follower; a follower that falls further behind catches up from disk.
    pub broadcast_capacity: usize,
}

impl Default for FsStoreOptions {
    fn default() -> Self {
        FsStoreOptions { max_batch_events: 4096, queue_capacity: 1024, broadcast_capacity: 1024 }
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

/// State shared by the handle, the writer and followers.
#[derive(Debug)]
pub(crate) struct Shared {
    pub session: SessionId,
    pub path: PathBuf,
    pub dropped_bytes_on_open: u64,
    state: Mutex<Durable>,
    tx: broadcast::Sender<SharedEvent>,
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, Durable> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many followers are subscribed to live events.
    pub fn followers(&self) -> usize {
        self.tx.receiver_count()
    }

    /// Atomically: `read` of the durable state now and a receiver for every event published
    /// after it (see `handoff.rs`).
    pub fn subscribe<R>(&self, read: impl FnOnce(&Durable) -> R) -> (R, broadcast::Receiver<SharedEvent>) {
        handoff::subscribe(&self.state, &self.tx, read)
    }
}

struct AppendRequest {
    events: Vec<NewEvent>,
    ack: oneshot::Sender<Result<Vec<SharedEvent>>>,
}

/// A caller's handle on an open log. Dropping every handle stops the writer after it drains.
#[derive(Debug)]
pub(crate) struct LogHandle {
    pub shared: Arc<Shared>,
    requests: mpsc::Sender<AppendRequest>,
}

impl LogHandle {
    /// Recovers the log file (see `recover.rs`) and starts its writer task.
    pub async fn open(
        session: SessionId,
        path: PathBuf,
        session_json: PathBuf,
        options: &FsStoreOptions,
        syncs: Arc<SyncCounters>,
    ) -> Result<Self> {
        let (recovered, file) = {
            let (path, session_json, session) = (path.clone(), session_json.clone(), session.clone());
            let syncs = syncs.clone();
            blocking(move || {
                if !session_json.exists() {
                    return Err(Error::SessionNotFound(session));
                }
                let recovered = recover(&path, &syncs)?;
                let file = match open_append(&path) {
                    Ok(file) => Some(Arc::new(file)),
                    // Reads work; the writer opens the file at its first write.
                    Err(e) if e.is_write_fault() => None,
                    Err(e) => return Err(e),
                };
                Ok((recovered, file))
            })
            .await?
        };
        let (tx, _) = broadcast::channel(options.broadcast_capacity.max(1));
        let shared = Arc::new(Shared {
            session,
            path,
            dropped_bytes_on_open: recovered.dropped_bytes,
            state: Mutex::new(Durable {
                len: recovered.len,
                next_index: recovered.next_index,
                checkpoints: recovered.checkpoints,
                commits: 0,
            }),
            tx,
        });
        let (requests, rx) = mpsc::channel(options.queue_capacity.max(1));
        let writer = Writer {
            file,
            cut_pending: recovered.cut_pending,
            shared: shared.clone(),
            session_json,
            len: recovered.len,
            next_index: recovered.next_index,
            max_batch: options.max_batch_events.max(1),
            syncs,
        };
        tokio::spawn(writer.run(rx));
        Ok(LogHandle { shared, requests })
    }

    /// Whether the writer has stopped; a stopped handle must be replaced by reopening.
    pub fn is_closed(&self) -> bool {
        self.requests.is_closed()
    }

    /// Queues `events` and waits until they are durable.
    pub async fn append(&self, events: Vec<NewEvent>) -> Result<Vec<SharedEvent>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let (ack, done) = oneshot::channel();
        let closed = || Error::LogClosed(self.shared.session.clone());
        self.requests.send(AppendRequest { events, ack }).await.map_err(|_| closed())?;
        done.await.map_err(|_| closed())?
    }
}

/// The only owner of the file's write side.
struct Writer {
    /// `None` until the file can be opened for appending (see the module docs).
    file: Option<Arc<File>>,
    /// The file may hold bytes past `len` (a failed write that could not be rolled back, or a
    /// torn tail recovery could not cut): cut them before the next write.
    cut_pending: bool,
    shared: Arc<Shared>,
    session_json: PathBuf,
    len: u64,
    next_index: u64,
    max_batch: usize,
    syncs: Arc<SyncCounters>,
}

/// One request's events, encoded and waiting for the commit.
struct Staged {
    ack: oneshot::Sender<Result<Vec<SharedEvent>>>,
    events: Vec<SharedEvent>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<AppendRequest>) {
        let mut batch = Vec::new();
        while let Some(first) = rx.recv().await {
            let mut count = first.events.len();
            batch.push(first);
            while count < self.max_batch {
                match rx.try_recv() {
                    Ok(request) => {
                        count += request.events.len();
                        batch.push(request);
                    }
                    Err(_) => break,
                }
            }
            if let Err(fatal) = self.commit(&mut batch).await {
                // Only a deleted session stops the writer; a failed write fails its batch.
                tracing::error!(session = %self.shared.session, error = %fatal, "event log writer stopped");
                break;
            }
        }
        // Requests still queued are dropped here; their callers get `LogClosed`.
    }

    /// Writes one batch. `Err` means the writer cannot continue (the session is gone); every
    /// waiter of the batch has been answered either way.
    async fn commit(&mut self, batch: &mut Vec<AppendRequest>) -> Result<()> {
        let mut buf = Vec::with_capacity(batch.len() * 512);
        let mut checkpoints = Vec::new();
        let mut staged = Vec::with_capacity(batch.len());
        let mut index = self.next_index;
        for request in batch.drain(..) {
            let (buf_mark, index_mark, checkpoint_mark) = (buf.len(), index, checkpoints.len());
            let mut events = Vec::with_capacity(request.events.len());
            let mut failed = None;
            for new in request.events {
                let event = Event {
                    index,
                    session_id: self.shared.session.clone(),
                    turn_id: new.turn_id,
                    at: timestamp_now(),
                    data: new.data,
                };
                let offset = self.len + buf.len() as u64;
                if let Err(e) = serde_json::to_writer(&mut buf, &event) {
                    failed = Some(e);
                    break;
                }
                buf.push(b'\n');
                if index.is_multiple_of(CHECKPOINT_EVERY) {
                    checkpoints.push(offset);
                }
                events.push(Arc::new(event));
                index += 1;
            }
            if let Some(e) = failed {
                // Only this request fails; the rest of the batch is unaffected.
                buf.truncate(buf_mark);
                checkpoints.truncate(checkpoint_mark);
                index = index_mark;
                let _ = request.ack.send(Err(Error::Encode(e)));
                continue;
            }
            staged.push(Staged { ack: request.ack, events });
        }
        if buf.is_empty() {
            for s in staged {
                let _ = s.ack.send(Ok(s.events));
            }
            return Ok(());
        }

        let new_len = self.len + buf.len() as u64;
        let written = match self.ready().await {
            Ok(file) => {
                let (path, session_json) = (self.shared.path.clone(), self.session_json.clone());
                let (session, syncs) = (self.shared.session.clone(), self.syncs.clone());
                blocking(move || {
                    // A session folder deleted behind our back must not be written to (the file
                    // would be an orphan and the ack a lie).
                    if !session_json.exists() {
                        return Err(Error::SessionNotFound(session));
                    }
                    write_batch(&file, &buf, &path).and_then(|()| syncs.data(&file)).map_err(|e| Error::io(&path, e))
                })
                .await
            }
            Err(error) => Err(error),
        };

        match written {
            Ok(()) => {
                let committed = staged.into_iter().map(|s| (s.ack, s.events)).collect();
                handoff::publish_then_ack(
                    &self.shared.state,
                    &self.shared.tx,
                    |state: &mut Durable| {
                        state.len = new_len;
                        state.next_index = index;
                        state.checkpoints.extend(checkpoints);
                        state.commits += 1;
                    },
                    committed,
                    |ack, events| {
                        let _ = ack.send(Ok(events));
                    },
                );
                self.len = new_len;
                self.next_index = index;
                Ok(())
            }
            Err(error) => {
                let stop = matches!(error, Error::SessionNotFound(_));
                if !stop {
                    // Whatever part of the batch reached the file is cut before the waiters
                    // hear of the failure, or before the next write if the cut fails too.
                    self.cut_pending = true;
                    if let Err(cut) = self.ready().await {
                        tracing::warn!(session = %self.shared.session, error = %cut, "cannot cut a failed write yet; will before the next write");
                    }
                }
                for s in staged {
                    let _ = s.ack.send(Err(error.duplicate()));
                }
                if stop { Err(error) } else { Ok(()) }
            }
        }
    }

    /// The file, ready for the next write: opened if it could not be yet, and cut back to the
    /// durable length if a failed write may have left bytes past it.
    async fn ready(&mut self) -> Result<Arc<File>> {
        if let (Some(file), false) = (&self.file, self.cut_pending) {
            return Ok(file.clone());
        }
        let (file, path, len, syncs) = (self.file.clone(), self.shared.path.clone(), self.len, self.syncs.clone());
        let cut = self.cut_pending;
        let file = blocking(move || {
            let file = match file {
                Some(file) => file,
                None => Arc::new(open_append(&path)?),
            };
            if cut {
                cut_to(&file, len, &path).and_then(|()| syncs.data(&file)).map_err(|e| Error::io(&path, e))?;
            }
            Ok(file)
        })
        .await?;
        self.file = Some(file.clone());
        self.cut_pending = false;
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
/// cuts after it. Keyed by log path, so tests running at once do not meet.
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
}

#[cfg(test)]
#[path = "log_fault_tests.rs"]
mod fault_tests;
