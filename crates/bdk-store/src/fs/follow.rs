//! Reading an event log back: bounded reads of the durable prefix, and the replay-then-follow
//! subscription. Appending lives in `log.rs`.
//!
//! A follower takes, under the writer's publish lock, the durable length and a broadcast
//! receiver. Everything below that mark comes from the log's in-memory tail when it holds it all
//! (no I/O), or else from disk, everything above from the channel, and the two cannot overlap or
//! leave a hole. A follower that lags past the channel's buffer (or
//! sees an index it did not expect) takes a fresh snapshot and catches up from disk again. That
//! protocol is `handoff.rs` (tested under `shuttle`); this file gives it the file and the channel.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use bdk_protocol::{Event, SessionId};
use tokio::sync::broadcast::{self, error::RecvError};

use super::blocking;
use super::handoff::{Follower, Live, Source};
use super::log::{Durable, Shared};
use super::syncs::SyncCounters;
use crate::api::{BoxFuture, EventFollower, SharedEvent};
use crate::error::{Error, Result};

/// Events a follower reads from disk per step.
const FOLLOW_CHUNK: usize = 512;

/// Where a scan of the durable prefix stands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor {
    /// Byte offset of the line with index `index`.
    pub offset: u64,
    pub index: u64,
    /// The durable length when the scan began; nothing past it is read.
    pub end: u64,
}

/// Reads events with `index >= from` starting at `cursor`, at most `max`. Returns them and the
/// cursor after the last line consumed.
pub(crate) fn read_chunk(path: &Path, cursor: Cursor, from: u64, max: usize) -> Result<(Vec<Event>, Cursor)> {
    let io = |e| Error::io(path, e);
    let mut file = File::open(path).map_err(io)?;
    file.seek(SeekFrom::Start(cursor.offset)).map_err(io)?;
    let mut reader = BufReader::with_capacity(128 * 1024, file.take(cursor.end.saturating_sub(cursor.offset)));
    let mut events = Vec::new();
    let mut next = cursor;
    let mut line = Vec::with_capacity(1024);
    while events.len() < max && next.offset < next.end {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io)? as u64;
        if n == 0 || line.last() != Some(&b'\n') {
            let reason = "the durable part of the log ends mid-line (was the file changed by hand?)".to_owned();
            return Err(Error::Corrupt { path: path.to_path_buf(), offset: next.offset, reason });
        }
        if next.index >= from {
            let event: Event = serde_json::from_slice(&line).map_err(|e| Error::json(path, e))?;
            if event.index != next.index {
                let reason = format!("line has index {} where {} was expected", event.index, next.index);
                return Err(Error::Corrupt { path: path.to_path_buf(), offset: next.offset, reason });
            }
            events.push(event);
        }
        next.offset += n;
        next.index += 1;
    }
    Ok((events, next))
}

/// Where the durable events from some index on are read from.
#[derive(Debug, Clone)]
pub(crate) enum Span {
    /// A scan of the file.
    Disk(Cursor),
    /// The events themselves, from the log's in-memory tail: reading them does no I/O.
    Tail(Vec<SharedEvent>),
}

/// Where to read the durable events from `from` on; `None` when nothing durable is at or past it.
pub(crate) fn start_span(shared: &Shared, from: u64) -> Option<Span> {
    span_for(&shared.state(), from)
}

fn span_for(state: &Durable, from: u64) -> Option<Span> {
    if from >= state.next_index {
        return None;
    }
    if let Some(events) = state.tail.since(from, state.next_index) {
        return Some(Span::Tail(events));
    }
    let (offset, index) = state.seek(from);
    Some(Span::Disk(Cursor { offset, index, end: state.len }))
}

/// The filesystem backend's [`EventFollower`]: the hand-off of `handoff.rs` over the log file
/// and its broadcast channel.
#[derive(Debug)]
pub(crate) struct FsFollower(Follower<FsSource>);

impl FsFollower {
    pub fn start(shared: &Arc<Shared>, from: u64) -> Self {
        let source = FsSource {
            session: shared.session.clone(),
            path: shared.path.clone(),
            syncs: shared.syncs.clone(),
            shared: Arc::downgrade(shared),
        };
        FsFollower(Follower::start(source, from))
    }
}

impl Drop for FsFollower {
    /// The last follower of a log to end takes its live channel and tail with it (see
    /// [`Shared::unfollowed`]).
    fn drop(&mut self) {
        self.0.end();
        if let Some(shared) = self.0.source().shared.upgrade() {
            shared.unfollowed();
        }
    }
}

impl EventFollower for FsFollower {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<SharedEvent>>> {
        Box::pin(self.0.next())
    }
}

/// One session's log as its followers read it.
#[derive(Debug)]
pub(crate) struct FsSource {
    session: SessionId,
    path: PathBuf,
    syncs: Arc<SyncCounters>,
    /// Weak, so that closing or deleting the log drops the channel and ends the stream.
    shared: Weak<Shared>,
}

impl Source for FsSource {
    type Event = SharedEvent;
    type Cursor = Span;
    type Receiver = broadcast::Receiver<SharedEvent>;
    type Error = Error;

    fn index(event: &SharedEvent) -> u64 {
        event.index
    }

    fn snapshot(&self, from: u64) -> Option<(Option<Span>, broadcast::Receiver<SharedEvent>)> {
        Some(self.shared.upgrade()?.subscribe(|state| span_for(state, from)))
    }

    async fn read(&self, span: Span, want: u64) -> Result<(Vec<SharedEvent>, Option<Span>)> {
        let cursor = match span {
            Span::Tail(mut events) => {
                events.retain(|event| event.index >= want);
                return Ok((events, None));
            }
            Span::Disk(cursor) => cursor,
        };
        let path = self.path.clone();
        self.syncs.log_read();
        match blocking(&self.syncs, move || read_chunk(&path, cursor, want, FOLLOW_CHUNK)).await {
            Ok((events, next)) => {
                Ok((events.into_iter().map(Arc::new).collect(), (next.offset < next.end).then_some(Span::Disk(next))))
            }
            Err(error) if error.is_not_found() => Err(Error::SessionNotFound(self.session.clone())),
            Err(error) => Err(error),
        }
    }

    async fn recv(receiver: &mut broadcast::Receiver<SharedEvent>) -> Live<SharedEvent> {
        match receiver.recv().await {
            Ok(event) => Live::Event(event),
            Err(RecvError::Lagged(_)) => Live::Lagged,
            Err(RecvError::Closed) => Live::Closed,
        }
    }

    fn lagged(&self, want: u64) {
        tracing::debug!(session = %self.session, want, "follower lagged; catching up from disk");
    }
}
