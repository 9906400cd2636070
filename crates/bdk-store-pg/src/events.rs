//! [`EventLog`] on PostgreSQL. Appends go through the replica's group-commit writer
//! (`writer.rs`): one transaction locks the session rows of everything queued, inserts the
//! events at their next indices, and lets the trigger check density, move `next_index` and
//! notify every replica at commit. An append to a session whose lease this replica claimed is
//! fenced on that lease: once another replica claimed it, the append is refused (`LeaseLost`). Followers read rows; signals only wake them (`notify.rs`). A
//! follower outlives a database outage: it keeps its position and reads again when it is back.

use std::collections::VecDeque;
use std::sync::Arc;

use bdk_protocol::{Event, SessionId};
use bdk_store::{BoxFuture, Error, EventFollower, EventLog, EventStream, NewEvent, Result, SessionRecord, SharedEvent};

use crate::error::{corrupt, db, encode};
use crate::notify::{POLL, Signal};
use crate::store::PgStore;

/// Rows a follower reads at once.
const CHUNK: i64 = 512;

/// How long a follower waits before reading again while the database is unavailable.
const UNAVAILABLE_RETRY: std::time::Duration = std::time::Duration::from_millis(250);

impl PgStore {
    async fn session_exists(&self, session: &SessionId) -> Result<bool> {
        let client = self.db.client().await?;
        let statement = client.prepare_cached(EXISTS).await.map_err(db)?;
        let row = client.query_opt(&statement, &[&&*self.agent, &session.as_str()]).await.map_err(db)?;
        Ok(row.is_some())
    }

    /// Events from `from`, at most `limit`: one prepared statement, which also says whether
    /// the session exists (no row at all: it does not; one row without an event: nothing new).
    async fn read_rows(&self, session: &SessionId, from: u64, limit: i64) -> Result<Vec<Event>> {
        let client = self.db.client().await?;
        let statement = client.prepare_cached(READ).await.map_err(db)?;
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let rows = client.query(&statement, &[&&*self.agent, &session.as_str(), &from, &limit]).await.map_err(db)?;
        drop(client);
        if rows.is_empty() {
            return Err(Error::SessionNotFound(session.clone()));
        }
        rows.iter()
            .filter_map(|row| row.get::<_, Option<&str>>(0))
            .map(|body| serde_json::from_str::<Event>(body).map_err(|e| corrupt("an event", e)))
            .collect()
    }
}

const EXISTS: &str = "SELECT 1 FROM bdk_sessions WHERE agent = $1 AND id = $2";

const READ: &str = "SELECT e.body FROM bdk_sessions s LEFT JOIN LATERAL (SELECT body, idx FROM bdk_events \
     WHERE agent = s.agent AND session_id = s.id AND idx >= $3 ORDER BY idx LIMIT $4) e ON true \
     WHERE s.agent = $1 AND s.id = $2 ORDER BY e.idx";

impl EventLog for PgStore {
    fn append<'a>(&'a self, session: &'a SessionId, events: Vec<NewEvent>) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            if events.is_empty() {
                if !self.session_exists(session).await? {
                    return Err(Error::SessionNotFound(session.clone()));
                }
                return Ok(Vec::new());
            }
            let fence = self.db.fence(&self.agent, session.as_str());
            self.db.writer.append(self.agent.clone(), session.clone(), events, fence, None, !self.debounced).await
        })
    }

    /// The record rides in the append's own transaction (one durable commit for both).
    fn append_with_record<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: SessionRecord,
    ) -> BoxFuture<'a, Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            let body = serde_json::to_string(&record).map_err(encode)?;
            let fence = self.db.fence(&self.agent, session.as_str());
            let (agent, session) = (self.agent.clone(), session.clone());
            self.db.writer.append(agent, session, events, fence, Some(body), !self.debounced).await
        })
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Event>>> {
        Box::pin(async move {
            if limit == Some(0) {
                return Ok(Vec::new());
            }
            let limit = limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
            self.read_rows(session, from, limit).await
        })
    }

    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, Result<EventStream>> {
        Box::pin(async move {
            // Subscribe before the first read, so nothing appended after it goes unnoticed. The
            // first read also says whether the session exists (one round trip, not two).
            let signal = self.db.notifier.subscribe(&self.agent, session.as_str());
            let first = self.read_rows(session, from, CHUNK).await?;
            let mut follower = PgFollower {
                store: self.clone(),
                session: session.clone(),
                next: from,
                buffer: VecDeque::new(),
                signal,
                ended: false,
                woken: false,
            };
            follower.take(first);
            Ok(Box::new(follower) as EventStream)
        })
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let statement = client
                .prepare_cached("SELECT next_index FROM bdk_sessions WHERE agent = $1 AND id = $2")
                .await
                .map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &session.as_str()]).await.map_err(db)?;
            match row {
                Some(row) => Ok(row.get::<_, i64>(0) as u64),
                None => Err(Error::SessionNotFound(session.clone())),
            }
        })
    }

    /// Rows hold nothing per log open: nothing to free.
    fn release(&self, _session: &SessionId) {}
}

/// Replay-then-follow over rows: reads from `next` whenever signalled (or every [`POLL`]).
#[derive(Debug)]
struct PgFollower {
    store: PgStore,
    session: SessionId,
    next: u64,
    buffer: VecDeque<SharedEvent>,
    signal: Signal,
    ended: bool,
    /// The last wait ended on a signal (not the poll timer), or events were just taken from
    /// this replica's commits: a read may be skipped when nothing newer is known.
    woken: bool,
}

impl PgFollower {
    /// Buffers the rows read from `next` on; they come in index order, and anything else is
    /// skipped.
    fn take(&mut self, events: Vec<Event>) {
        for event in events {
            if event.index == self.next {
                self.next += 1;
                self.buffer.push_back(Arc::new(event));
            }
        }
    }
}

impl EventFollower for PgFollower {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<SharedEvent>>> {
        Box::pin(async move {
            loop {
                if let Some(event) = self.buffer.pop_front() {
                    return Some(Ok(event));
                }
                if self.ended {
                    return None;
                }
                // Mark the signal seen before reading: a later append wakes the wait below.
                self.signal.receiver.borrow_and_update();
                // What this replica just committed from exactly here: no need to read it back.
                let notifier = &self.store.db.notifier;
                if let Some(events) = notifier.recent_from(&self.store.agent, self.session.as_str(), self.next) {
                    self.next += events.len() as u64;
                    self.buffer.extend(events);
                    self.woken = true;
                    continue;
                }
                // Woken by a commit this replica knows the extent of, and already past it.
                let skip = std::mem::take(&mut self.woken)
                    && notifier.caught_up(&self.store.agent, self.session.as_str(), self.next);
                let read =
                    if skip { Ok(Vec::new()) } else { self.store.read_rows(&self.session, self.next, CHUNK).await };
                match read {
                    Ok(events) if !events.is_empty() => {
                        self.take(events);
                        continue;
                    }
                    Ok(_) => {}
                    Err(Error::SessionNotFound(_)) => {
                        self.ended = true;
                        return None;
                    }
                    // The database is away for a moment: keep the position and read again.
                    Err(Error::Unavailable(error)) => {
                        tracing::debug!(session = %self.session, %error, "follower waiting for the database");
                        tokio::time::sleep(UNAVAILABLE_RETRY).await;
                        continue;
                    }
                    Err(error) => {
                        self.ended = true;
                        return Some(Err(error));
                    }
                }
                tokio::select! {
                    changed = self.signal.receiver.changed() => {
                        if changed.is_err() {
                            tokio::time::sleep(POLL).await;
                        } else {
                            self.woken = true;
                        }
                    }
                    () = tokio::time::sleep(POLL) => {}
                }
            }
        })
    }
}
