//! Group commit of event appends: every append of every agent and session on this replica goes
//! through one of [`SHARDS`] queues (a session always through the same one), whose task writes
//! everything queued since its last batch in one transaction (like the filesystem backend's
//! writer), so concurrent appends share one WAL flush. Each append is answered only after that
//! commit: an acknowledged event is durable. A queue overlaps up to [`MAX_IN_FLIGHT`] batches;
//! each starts only once the one before holds its session locks, so two batches touching one
//! session write it in queue order.
//!
//! A batch is one round trip: a pipeline of prepared statements in one transaction, sent
//! together (each sees the ones before):
//! 1. `BEGIN`, with the statements planned as key lookups ([`crate::db::BEGIN_KEYED`]; a batch of
//!    debounced appends only also sets `synchronous_commit = off`);
//! 2. the lease check of the fenced appends (`FOR SHARE`, so no claim can move the lease before
//!    the commit);
//! 3. the session rows locked `FOR UPDATE` in key order (replicas writing to the same sessions
//!    lock them in the same order), which gives each session's next index;
//! 4. one `INSERT ... SELECT` of every event of the batch whose session exists and whose fence
//!    (if any) holds: the database numbers each session's rows from its `next_index`, in batch
//!    order, and writes the index into the stored line (the client sends each line in two
//!    parts, before and after its index);
//! 5. the session records written with their appends (`UPDATE ... FROM unnest(...)`, same
//!    conditions, see [`bdk_store::EventLog::append_with_record`]);
//! 6. `COMMIT`.
//!
//! The client then works out from the answers of 2 and 3 which appends were written and their
//! indices, exactly as the database did (a batch never holds two appends of one session under
//! different fences, so a session's appends are all written or all refused). A statement that
//! fails makes the rest fail and the commit a rollback: nothing of the batch is written.
//!
//! The insert trigger checks density and sends one `NOTIFY` per session per batch, carrying the
//! session's next index. An append of a session that is gone, or whose lease this replica lost,
//! is refused alone; the rest of the batch is written.

use std::collections::HashMap;
use std::sync::Arc;

use bdk_protocol::event::timestamp_now;
use bdk_protocol::{Event, SessionId};
use bdk_store::{Error, NewEvent, Result, SharedEvent};
use deadpool_postgres::Pool;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::db::Params;
use crate::error::db;
use crate::notify::Notifier;

/// Events one batch takes at most (it always takes at least one append whole).
const MAX_BATCH_EVENTS: usize = 16_384;

/// Group-commit queues per replica (sessions are spread over them by a hash of their id).
const SHARDS: usize = 4;

/// Batches one queue writes at once: while one waits for its commit's WAL flush, the next locks its
/// sessions and encodes its events.
const MAX_IN_FLIGHT: usize = 4;

const LEASES: &str = "SELECT k.o FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(a, s, t, o) \
     JOIN bdk_session_leases l ON l.agent = k.a AND l.session_id = k.s AND l.token = k.t \
     ORDER BY l.agent, l.session_id FOR SHARE OF l";

const SESSIONS: &str = "SELECT agent, id, next_index FROM bdk_sessions \
     WHERE (agent, id) IN (SELECT * FROM unnest($1::text[], $2::text[])) \
     ORDER BY agent, id FOR UPDATE";

/// Every event of the batch (agent, session, fence, the line before its index and after it), in
/// batch order; a session's rows are numbered from its `next_index`. Rows of a session that is
/// gone or whose fence does not hold are left out.
const INSERT: &str = "INSERT INTO bdk_events (agent, session_id, idx, body) \
     SELECT r.a, r.s, r.i, r.h || r.i || r.t FROM (SELECT u.a, u.s, u.h, u.t, \
     n.next_index + row_number() OVER (PARTITION BY u.a, u.s ORDER BY u.o) - 1 AS i \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(a, s, f, h, t, o) \
     JOIN bdk_sessions n ON n.agent = u.a AND n.id = u.s \
     WHERE u.f IS NULL OR EXISTS (SELECT 1 FROM bdk_session_leases l \
     WHERE l.agent = u.a AND l.session_id = u.s AND l.token = u.f OFFSET 0)) AS r";

/// The records written with their appends, under the same fence condition.
const RECORDS: &str = "UPDATE bdk_sessions s SET record = u.r \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(a, i, f, r) \
     WHERE s.agent = u.a AND s.id = u.i AND (u.f IS NULL OR EXISTS (SELECT 1 FROM bdk_session_leases l \
     WHERE l.agent = u.a AND l.session_id = u.i AND l.token = u.f OFFSET 0))";

/// Where an event's index goes in its stored line: the line is encoded with index 0, and the
/// database writes the real one between the part before `0` and the part after it.
const INDEX_FIELD: &str = "\"index\":0,";

/// One append waiting for its batch.
struct Append {
    agent: Arc<str>,
    session: SessionId,
    events: Vec<NewEvent>,
    /// The lease token this replica holds on the session, when it holds one: the append is
    /// written only while that holding is current.
    fence: Option<String>,
    /// The session's new record (JSON), written in the same transaction.
    record: Option<String>,
    /// Its commit waits for the WAL flush: `false` for an agent that debounces its writes (a
    /// batch of only such appends commits with `synchronous_commit = off`).
    durable: bool,
    reply: oneshot::Sender<Result<Vec<SharedEvent>>>,
}

/// Counters of what the writer did (for benchmarks and tests).
#[derive(Debug, Default)]
pub(crate) struct WriterStats {
    pub batches: std::sync::atomic::AtomicU64,
    /// Batches of debounced appends only, committed without waiting for the WAL flush.
    pub relaxed: std::sync::atomic::AtomicU64,
    pub appends: std::sync::atomic::AtomicU64,
}

/// The replica's writer: [`SHARDS`] group-commit queues, each session always on the same one
/// (so its appends keep their order), so the database works on several batches at once.
#[derive(Debug)]
pub(crate) struct Writer {
    shards: Vec<Shard>,
    pub stats: Arc<WriterStats>,
}

#[derive(Debug)]
struct Shard {
    tx: mpsc::UnboundedSender<Append>,
    task: JoinHandle<()>,
}

impl Drop for Shard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Writer {
    pub fn start(pool: Pool, notifier: Arc<Notifier>) -> Writer {
        let stats = Arc::new(WriterStats::default());
        let shards = (0..SHARDS)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel();
                let task = tokio::spawn(run(pool.clone(), notifier.clone(), rx, stats.clone()));
                Shard { tx, task }
            })
            .collect();
        Writer { shards, stats }
    }

    /// Queues an append (`fence`: the lease token it is written under, if any; `record`: the
    /// session's new record, written with it; `durable`: see [`Append`]); the answer comes once
    /// its batch committed (or failed). Queued, it is written even if the caller stops waiting.
    pub async fn append(
        &self,
        agent: Arc<str>,
        session: SessionId,
        events: Vec<NewEvent>,
        fence: Option<String>,
        record: Option<String>,
        durable: bool,
    ) -> Result<Vec<SharedEvent>> {
        let shard = {
            use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
            let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one((&*agent, session.as_str()));
            &self.shards[(hash % self.shards.len() as u64) as usize]
        };
        let (reply, answer) = oneshot::channel();
        let closed = Error::LogClosed(session.clone());
        shard.tx.send(Append { agent, session, events, fence, record, durable, reply }).map_err(|_| closed)?;
        answer.await.map_err(|_| Error::Task("the event writer stopped".into()))?
    }
}

async fn run(pool: Pool, notifier: Arc<Notifier>, mut rx: mpsc::UnboundedReceiver<Append>, stats: Arc<WriterStats>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // An append that would have joined a batch holding its session under another fence: it
    // starts the next batch instead.
    let mut carried: Option<Append> = None;
    loop {
        let first = match carried.take() {
            Some(first) => first,
            None => match rx.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let Ok(permit) = in_flight.clone().acquire_owned().await else { return };
        let mut size = first.events.len();
        let mut batch = vec![first];
        while size < MAX_BATCH_EVENTS {
            match rx.try_recv() {
                Ok(next) => {
                    let fenced_otherwise = batch
                        .iter()
                        .any(|a| a.agent == next.agent && a.session == next.session && a.fence != next.fence);
                    if fenced_otherwise {
                        carried = Some(next);
                        break;
                    }
                    size += next.events.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        stats.batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if relaxed(&batch) {
            stats.relaxed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        stats.appends.fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        // The next batch starts once this one holds its session locks: a session in both waits
        // for this commit and continues after it, so appends keep their queue order.
        let (locked, is_locked) = oneshot::channel();
        let (pool, notifier) = (pool.clone(), notifier.clone());
        tokio::spawn(async move {
            write(&pool, &notifier, batch, locked).await;
            drop(permit);
        });
        let _ = is_locked.await;
    }
}

/// Whether a batch commits without waiting for the WAL flush: all its appends are debounced.
fn relaxed(batch: &[Append]) -> bool {
    batch.iter().all(|a| !a.durable)
}

/// What became of one append of a batch before the commit.
enum Planned {
    Refused(Error),
    Written(Vec<SharedEvent>),
}

async fn write(pool: &Pool, notifier: &Notifier, batch: Vec<Append>, locked: oneshot::Sender<()>) {
    let result = write_batch(pool, &batch, locked).await;
    match result {
        Ok(planned) => {
            // Each session's committed events, in batch order, for its followers here.
            let mut written: Vec<(Arc<str>, SessionId, Vec<SharedEvent>)> = Vec::new();
            for (append, planned) in batch.into_iter().zip(planned) {
                match planned {
                    Planned::Written(events) => {
                        match written.iter_mut().find(|(a, s, _)| *a == append.agent && *s == append.session) {
                            Some((_, _, all)) => all.extend(events.iter().cloned()),
                            None => written.push((append.agent.clone(), append.session.clone(), events.clone())),
                        }
                        let _ = append.reply.send(Ok(events));
                    }
                    Planned::Refused(error) => {
                        let _ = append.reply.send(Err(error));
                    }
                }
            }
            for (agent, session, events) in written {
                notifier.committed(&agent, session.as_str(), events);
            }
        }
        Err(error) => {
            let (unavailable, message) = (error.is_unavailable(), error.to_string());
            for append in batch {
                let copy =
                    if unavailable { Error::Unavailable(message.clone()) } else { Error::Backend(message.clone()) };
                let _ = append.reply.send(Err(copy));
            }
        }
    }
}

/// Writes one batch in one transaction, one round trip. `Err` means nothing of it was written.
/// `on_locked` is told once the batch's sessions are locked (or the batch failed before).
async fn write_batch(pool: &Pool, batch: &[Append], on_locked: oneshot::Sender<()>) -> Result<Vec<Planned>> {
    let client = pool.get().await.map_err(crate::error::pool)?;
    let leases = client.prepare_cached(LEASES).await.map_err(db)?;
    let sessions = client.prepare_cached(SESSIONS).await.map_err(db)?;
    let insert = client.prepare_cached(INSERT).await.map_err(db)?;
    let records = client.prepare_cached(RECORDS).await.map_err(db)?;

    // The sessions of the batch, each once, and the fenced appends' lease tokens.
    let mut keys: Vec<(&str, &str)> = batch.iter().map(|a| (&*a.agent, a.session.as_str())).collect();
    keys.sort_unstable();
    keys.dedup();
    let (key_agents, key_ids): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    let fenced: Vec<usize> = (0..batch.len()).filter(|&i| batch[i].fence.is_some()).collect();
    let fence_agents: Vec<&str> = fenced.iter().map(|&i| &*batch[i].agent).collect();
    let fence_ids: Vec<&str> = fenced.iter().map(|&i| batch[i].session.as_str()).collect();
    let fence_tokens: Vec<&str> = fenced.iter().filter_map(|&i| batch[i].fence.as_deref()).collect();

    // Every event encoded with index 0 (the database writes the real one), in batch order; an
    // append that cannot be encoded is refused and sends nothing.
    let at = timestamp_now();
    let mut encoded: Vec<std::result::Result<Vec<Event>, Error>> = Vec::with_capacity(batch.len());
    let (mut agents, mut ids, mut fences, mut heads, mut tails) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The record written with each session's appends: its last append's that carries one.
    let mut replaced: HashMap<(&str, &str), (Option<&str>, &str)> = HashMap::new();
    for append in batch {
        let key = (&*append.agent, append.session.as_str());
        let mut events = Vec::with_capacity(append.events.len());
        let mut lines = Vec::with_capacity(append.events.len());
        let mut failed = None;
        for event in &append.events {
            let event = Event {
                index: 0,
                session_id: append.session.clone(),
                turn_id: event.turn_id.clone(),
                at,
                data: event.data.clone(),
            };
            match serde_json::to_string(&event) {
                Ok(line) => match line.find(INDEX_FIELD) {
                    Some(at) => {
                        let split = at + INDEX_FIELD.len() - 2;
                        lines.push((line[..split].to_owned(), line[split + 1..].to_owned()));
                    }
                    None => {
                        failed = Some(Error::Backend("an encoded event has no index field".into()));
                        break;
                    }
                },
                Err(error) => {
                    failed = Some(Error::Encode(error));
                    break;
                }
            }
            events.push(event);
        }
        if let Some(error) = failed {
            encoded.push(Err(error));
            continue;
        }
        for (head, tail) in lines {
            agents.push(key.0);
            ids.push(key.1);
            fences.push(append.fence.as_deref());
            heads.push(head);
            tails.push(tail);
        }
        if let Some(record) = &append.record {
            replaced.insert(key, (append.fence.as_deref(), record.as_str()));
        }
        encoded.push(Ok(events));
    }
    let (mut record_agents, mut record_ids, mut record_fences, mut record_bodies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((agent, id), (fence, record)) in replaced {
        record_agents.push(agent);
        record_ids.push(id);
        record_fences.push(fence);
        record_bodies.push(record);
    }

    // The round trip: begin, check the leases, lock the sessions, insert, replace the records,
    // commit. (`biased`: polled in order, so the statements go out in this order.)
    let mut on_locked = Some(on_locked);
    let lease_params: &Params = &[&fence_agents, &fence_ids, &fence_tokens];
    let session_params: &Params = &[&key_agents, &key_ids];
    let event_params: &Params = &[&agents, &ids, &fences, &heads, &tails];
    let record_params: &Params = &[&record_agents, &record_ids, &record_fences, &record_bodies];
    let begin = if relaxed(batch) { crate::db::BEGIN_KEYED_RELAXED } else { crate::db::BEGIN_KEYED };
    let (begun, held, locked, inserted, updated, committed) = tokio::join!(
        biased;
        client.batch_execute(begin),
        client.query(&leases, lease_params),
        async {
            let locked = client.query(&sessions, session_params).await;
            if let Some(on_locked) = on_locked.take() {
                let _ = on_locked.send(());
            }
            locked
        },
        async {
            if heads.is_empty() {
                return Ok(0);
            }
            client.execute(&insert, event_params).await
        },
        async {
            if record_bodies.is_empty() {
                return Ok(0);
            }
            client.execute(&records, record_params).await
        },
        client.batch_execute("COMMIT"),
    );
    // A failed statement makes the rest fail and the commit a rollback.
    begun.map_err(db)?;
    let held = held.map_err(db)?;
    let rows = locked.map_err(db)?;
    let inserted = inserted.map_err(db)?;
    updated.map_err(db)?;
    committed.map_err(db)?;

    // Which appends the database wrote and their indices: the same rules as its statements.
    let held: std::collections::HashSet<usize> =
        held.iter().map(|row| fenced[(row.get::<_, i64>(0) - 1) as usize]).collect();
    let mut next: HashMap<(&str, &str), i64> = rows.iter().map(|row| ((row.get(0), row.get(1)), row.get(2))).collect();
    let mut planned = Vec::with_capacity(batch.len());
    let mut written = 0u64;
    for (i, (append, events)) in batch.iter().zip(encoded).enumerate() {
        let key = (&*append.agent, append.session.as_str());
        let Some(first) = next.get(&key).copied() else {
            planned.push(Planned::Refused(Error::SessionNotFound(append.session.clone())));
            continue;
        };
        if append.fence.is_some() && !held.contains(&i) {
            planned.push(Planned::Refused(Error::LeaseLost(append.session.clone())));
            continue;
        }
        let mut events = match events {
            Ok(events) => events,
            Err(error) => {
                planned.push(Planned::Refused(error));
                continue;
            }
        };
        for (offset, event) in events.iter_mut().enumerate() {
            event.index = (first + offset as i64) as u64;
        }
        next.insert(key, first + events.len() as i64);
        written += events.len() as u64;
        planned.push(Planned::Written(events.into_iter().map(Arc::new).collect()));
    }
    if written != inserted {
        // Never expected (the database applies the same rules): fail rather than acknowledge
        // indices the log may not hold. The commit is done; followers read what it holds.
        return Err(Error::Backend(format!(
            "the event writer expected to write {written} events and the database wrote {inserted}"
        )));
    }
    Ok(planned)
}

#[cfg(test)]
mod tests {
    use super::{INSERT, LEASES, RECORDS, SESSIONS};

    /// An append batch probes by key even on a new database's empty tables (see
    /// [`crate::db::BEGIN_KEYED`]): no statement reads a table whole.
    #[tokio::test]
    async fn a_batch_looks_its_sessions_and_leases_up_by_key() {
        let (a, s, f) = ("'{bot}'", "'{ses_1}'", "'{t1}'");
        let statements = [
            (LEASES, format!("{a}, {s}, {f}")),
            (SESSIONS, format!("{a}, {s}")),
            (INSERT, format!("{a}, {s}, {f}, '{{h}}', '{{t}}'")),
            (RECORDS, format!("{a}, {s}, {f}, '{{r}}'")),
        ];
        let statements: Vec<(&str, &str)> = statements.iter().map(|(sql, args)| (*sql, args.as_str())).collect();
        let Some(plans) = crate::db::keyed_plans(&statements).await else { return };
        for plan in plans {
            assert!(!plan.contains("Seq Scan") && !plan.contains("hashed SubPlan"), "{plan}");
            assert!(plan.contains("Index Scan using bdk_sessions_pkey") || plan.contains("_leases_pkey"), "{plan}");
        }
    }
}
