//! Appends are fenced on the session lease: a replica whose lease expired and was claimed by
//! another cannot write to the session any more (the database refuses it in the append's own
//! transaction), and the new holder's log is untouched. Also: concurrent appends share group
//! commits, and a refused append does not fail the others of its batch.

use std::time::{Duration, Instant};

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{EventData, SessionId};
use bdk_store::{Claim, Error, EventLog, NewEvent, SessionLeases, SessionRecord, SessionStore};
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
use bdk_test_support::postgres::{self, TestDb};
use tokio_postgres::NoTls;

use super::support::options;

/// A replica whose heartbeat renews rarely (every 20 minutes): its lease is expired by hand, as
/// if the process had stalled.
async fn replica(db: &TestDb) -> PgStore {
    let opts = PgOptions { session_lease: Duration::from_secs(3600), pool_size: 4, ..options(db) };
    let database = PgDatabase::connect(db.base_url(), &opts).await.unwrap();
    PgStore::new(database, "agent", std::env::temp_dir().join("bdk-pg-fencing-unused"))
}

fn delta(text: &str) -> NewEvent {
    NewEvent::new(EventData::MessageAppended(TextDelta { delta: text.into() }))
}

fn texts(events: &[bdk_protocol::Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match &e.data {
            EventData::MessageAppended(d) => d.delta.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// Moves the session's lease past its expiry (what a stalled holder's lease looks like).
async fn expire(db: &TestDb, session: &SessionId) {
    let (client, connection) = tokio_postgres::connect(&db.url(), NoTls).await.unwrap();
    let driver = tokio::spawn(connection);
    client
        .execute(
            "UPDATE bdk_session_leases SET expires_at = now() - interval '1 second' WHERE session_id = $1",
            &[&session.as_str()],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_lease_was_taken_over_cannot_append() {
    let Some(db) = postgres::fresh("fencing").await else { return };
    let (a, b) = (replica(&db).await, replica(&db).await);
    let id = SessionId::generate();
    a.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
    let Claim::Held { .. } = a.acquire(&id).await.unwrap() else { panic!("a claims the free lease") };
    a.append(&id, vec![delta("a0"), delta("a1")]).await.unwrap();

    // a stalls; its lease expires and b claims it.
    expire(&db, &id).await;
    let Claim::Held { token } = b.acquire(&id).await.unwrap() else { panic!("b claims the expired lease") };
    b.append(&id, vec![delta("b0")]).await.unwrap();

    // a resumes and tries to go on writing: refused, nothing written.
    let refused = a.append(&id, vec![delta("a2"), delta("a3")]).await.unwrap_err();
    assert!(matches!(refused, Error::LeaseLost(ref s) if *s == id), "{refused}");
    assert!(refused.to_string().contains("no longer holds the lease"), "{refused}");

    // b's log goes on where b left it.
    b.append(&id, vec![delta("b1")]).await.unwrap();
    let log = b.read(&id, 0, None).await.unwrap();
    assert_eq!(texts(&log), ["a0", "a1", "b0", "b1"]);
    assert_eq!(log.iter().map(|e| e.index).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(a.len(&id).await.unwrap(), 4);

    // Once b lets go, a may claim the session again and write under its new holding.
    SessionLeases::release(&b, &id, &token).await.unwrap();
    let Claim::Held { .. } = a.acquire(&id).await.unwrap() else { panic!("a claims the released lease") };
    a.append(&id, vec![delta("a4")]).await.unwrap();
    assert_eq!(texts(&b.read(&id, 4, None).await.unwrap()), ["a4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_append_leaves_the_rest_of_its_batch_written() {
    let Some(db) = postgres::fresh("fencing_batch").await else { return };
    let (a, b) = (replica(&db).await, replica(&db).await);
    let (lost, kept) = (SessionId::generate(), SessionId::generate());
    for id in [&lost, &kept] {
        a.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
        let Claim::Held { .. } = a.acquire(id).await.unwrap() else { panic!("a claims the free lease") };
    }
    expire(&db, &lost).await;
    let Claim::Held { .. } = b.acquire(&lost).await.unwrap() else { panic!("b claims the expired lease") };

    // Many appends at once, so they share batches: the fenced ones fail alone.
    let missing = SessionId::generate();
    let mut writes = Vec::new();
    for i in 0..40 {
        let (a, lost, kept, missing) = (a.clone(), lost.clone(), kept.clone(), missing.clone());
        writes.push(tokio::spawn(async move {
            let target = match i % 4 {
                0 => &lost,
                3 => &missing,
                _ => &kept,
            };
            (i % 4, a.append(target, vec![delta(&format!("w{i}"))]).await)
        }));
    }
    for write in writes {
        match write.await.unwrap() {
            (0, result) => assert!(matches!(result, Err(Error::LeaseLost(_))), "{result:?}"),
            (3, result) => assert!(matches!(result, Err(Error::SessionNotFound(_))), "{result:?}"),
            (_, result) => assert_eq!(result.unwrap().len(), 1),
        }
    }
    assert_eq!(a.len(&lost).await.unwrap(), 0);
    let log = a.read(&kept, 0, None).await.unwrap();
    assert_eq!(log.len(), 20);
    assert_eq!(log.iter().map(|e| e.index).collect::<Vec<_>>(), (0..20).collect::<Vec<u64>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_group_commits_and_stay_dense() {
    let Some(db) = postgres::fresh("group_commit").await else { return };
    let store = replica(&db).await;
    // More writers than the replica can have batches in flight (4 queues x 4), so appends queue
    // behind a batch whatever the database's speed: sharing a commit is certain, not a race.
    const WRITERS: usize = 64;
    const APPENDS: usize = 10;
    let ids: Vec<SessionId> = (0..WRITERS).map(|_| SessionId::generate()).collect();
    for id in &ids {
        store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
    }
    let (batches_before, appends_before) = store.database().append_batches();
    let started = Instant::now();
    let mut writers = Vec::new();
    for id in ids.clone() {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..APPENDS {
                let written = store.append(&id, vec![delta(&format!("{i}a")), delta(&format!("{i}b"))]).await.unwrap();
                assert_eq!(written[0].index, 2 * i as u64);
            }
        }));
    }
    for writer in writers {
        tokio::time::timeout(Duration::from_secs(120), writer).await.expect("appends finish").unwrap();
    }
    let (batches, appends) = store.database().append_batches();
    let (batches, appends) = (batches - batches_before, appends - appends_before);
    assert_eq!(appends, (WRITERS * APPENDS) as u64);
    assert!(
        batches < appends,
        "{WRITERS} concurrent writers never shared a commit: {batches} batches ({:?})",
        started.elapsed()
    );
    for id in &ids {
        let log = store.read(id, 0, None).await.unwrap();
        assert_eq!(log.iter().map(|e| e.index).collect::<Vec<_>>(), (0..2 * APPENDS as u64).collect::<Vec<u64>>());
        assert_eq!(texts(&log[..2]), ["0a", "0b"]);
    }
}
