//! Session leases between replicas of one database: one holder at a time (also when fifty
//! claims race), a dead holder's lease expires and is claimed by another, a stale release leaves
//! a newer holding alone, and a forwarded command is answered by the replica it was sent to (or
//! fails fast when that replica holds nothing). Running-turn slots are counted for every
//! replica, queue in one order, and come free when their holder dies; a claim with a slot free
//! is one short statement that passes no waiter; a replica shutting down
//! releases all its leases at once. Every wait has a timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_protocol::SessionId;
use bdk_store::{Claim, SessionLeases, SlotClaim};
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
use bdk_test_support::postgres::{self, TestDb};
use serde_json::json;

use super::support::options;

const LEASE: Duration = Duration::from_millis(2000);

async fn replica(db: &TestDb) -> PgStore {
    let opts = PgOptions { session_lease: LEASE, pool_size: 4, ..options(db) };
    let database = PgDatabase::connect(db.base_url(), &opts).await.unwrap();
    PgStore::new(database, "agent", std::env::temp_dir().join("bdk-pg-leases-unused"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_has_one_holder_until_its_holder_stops_renewing_it() {
    let Some(db) = postgres::fresh("leases_holder").await else { return };
    let (a, b) = (replica(&db).await, replica(&db).await);
    let id = SessionId::generate();
    let Claim::Held { token: first } = a.acquire(&id).await.unwrap() else { panic!("a free lease is claimed") };
    assert_eq!(b.acquire(&id).await.unwrap(), Claim::Elsewhere { replica: a.replica().to_owned() });
    // The heartbeat keeps it past its period.
    tokio::time::sleep(LEASE * 2).await;
    assert_eq!(b.acquire(&id).await.unwrap(), Claim::Elsewhere { replica: a.replica().to_owned() });
    assert!(b.expired().await.unwrap().is_empty());
    // Its own holder claims it again under a new token; the old token's release changes nothing.
    let Claim::Held { token: second } = a.acquire(&id).await.unwrap() else { panic!("the holder renews") };
    assert_ne!(first, second);
    a.release(&id, &first).await.unwrap();
    assert!(matches!(b.acquire(&id).await.unwrap(), Claim::Elsewhere { .. }));

    // a dies (its database handle and heartbeat go): one period later b may take over.
    let a_replica = a.replica().to_owned();
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if b.expired().await.unwrap().contains(&id) {
            break;
        }
        assert!(Instant::now() < deadline, "a's lease never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Claim::Held { token } = b.acquire(&id).await.unwrap() else { panic!("an expired lease is claimed") };
    assert!(b.expired().await.unwrap().is_empty());
    assert_ne!(a_replica, b.replica());
    // Released, it is free for anyone.
    b.release(&id, &token).await.unwrap();
    let c = replica(&db).await;
    assert!(matches!(c.acquire(&id).await.unwrap(), Claim::Held { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_racing_claims_on_three_replicas_get_one_holder() {
    let Some(db) = postgres::fresh("leases_race").await else { return };
    let replicas = Arc::new(vec![replica(&db).await, replica(&db).await, replica(&db).await]);
    let id = SessionId::generate();
    let mut claims = Vec::new();
    for i in 0..50 {
        let (replicas, id) = (replicas.clone(), id.clone());
        claims.push(tokio::spawn(async move {
            let r = &replicas[i % 3];
            (r.replica().to_owned(), r.acquire(&id).await.unwrap())
        }));
    }
    let mut holders = std::collections::HashSet::new();
    let mut named = std::collections::HashSet::new();
    for claim in claims {
        match claim.await.unwrap() {
            (replica, Claim::Held { .. }) => drop(holders.insert(replica)),
            (_, Claim::Elsewhere { replica }) => drop(named.insert(replica)),
        }
    }
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert!(named.is_subset(&holders), "{named:?} {holders:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_command_is_answered_by_its_target() {
    let Some(db) = postgres::fresh("leases_forward").await else { return };
    let (a, b) = (replica(&db).await, replica(&db).await);
    let id = SessionId::generate();
    assert!(matches!(b.acquire(&id).await.unwrap(), Claim::Held { .. }));
    let mut inbox = b.serve().expect("the first serve gets the inbox");
    assert!(b.serve().is_none());
    let answering = tokio::spawn(async move {
        let incoming = inbox.recv().await.unwrap();
        let answer = json!({ "ok": { "session": incoming.session.as_str(), "got": incoming.body } });
        incoming.reply.send(answer).unwrap();
    });
    let answer = a.forward(b.replica(), &id, json!({ "command": "ping" }), Duration::from_secs(10)).await.unwrap();
    assert_eq!(answer, json!({ "ok": { "session": id.as_str(), "got": { "command": "ping" } } }));
    tokio::time::timeout(Duration::from_secs(10), answering).await.unwrap().unwrap();
    // The sender took the answer and the row with it.
    let (raw, connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let left = raw.query_one("SELECT count(*) FROM bdk_session_commands", &[]).await.unwrap();
    assert_eq!(left.get::<_, i64>(0), 0);

    // A target that holds no lease on the session and never takes the command (a replica that
    // died): fails fast, as unavailable (the caller claims the lease itself), before the timeout.
    let other = SessionId::generate();
    let started = Instant::now();
    let error = a.forward("r0-gone", &other, json!({ "command": "ping" }), Duration::from_secs(20)).await;
    assert!(error.as_ref().is_err_and(|e| e.is_unavailable()), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_slots_are_counted_across_replicas_and_freed_when_their_holder_dies() {
    let Some(db) = postgres::fresh("leases_slots").await else { return };
    let (a, b, c) = (replica(&db).await, replica(&db).await, replica(&db).await);
    let ids: Vec<SessionId> = (0..4).map(|_| SessionId::generate()).collect();
    for (store, id) in [(&a, &ids[0]), (&a, &ids[1]), (&b, &ids[2]), (&c, &ids[3])] {
        assert!(matches!(store.acquire(id).await.unwrap(), Claim::Held { .. }));
    }
    // Two slots: a's two turns take them; b's and c's queue in one line, in order.
    assert_eq!(a.claim_slot(&ids[0], "t0", 2).await.unwrap(), SlotClaim::Running);
    assert_eq!(a.claim_slot(&ids[1], "t1", 2).await.unwrap(), SlotClaim::Running);
    assert_eq!(b.claim_slot(&ids[2], "t2", 2).await.unwrap(), SlotClaim::Queued { position: 1 });
    assert_eq!(c.claim_slot(&ids[3], "t3", 2).await.unwrap(), SlotClaim::Queued { position: 2 });
    // Asking again keeps the place; the head of the line gets the first slot given back.
    assert_eq!(c.claim_slot(&ids[3], "t3", 2).await.unwrap(), SlotClaim::Queued { position: 2 });
    // The release wakes the waiting replicas (NOTIFY), so they ask again without polling.
    let mut woken_b = b.slot_released().expect("the database backend signals releases");
    let mut woken_c = c.slot_released().expect("the database backend signals releases");
    woken_b.borrow_and_update();
    woken_c.borrow_and_update();
    a.release_slot(&ids[0], "t0").await.unwrap();
    let told =
        |r: Result<Result<(), _>, _>, who: &str| r.unwrap_or_else(|_| panic!("{who} is told a slot was released"));
    told(tokio::time::timeout(Duration::from_secs(10), woken_b.changed()).await, "b").unwrap();
    told(tokio::time::timeout(Duration::from_secs(10), woken_c.changed()).await, "c").unwrap();
    assert_eq!(c.claim_slot(&ids[3], "t3", 2).await.unwrap(), SlotClaim::Queued { position: 1 });
    assert_eq!(b.claim_slot(&ids[2], "t2", 2).await.unwrap(), SlotClaim::Running);

    // a dies holding t1's slot: once its lease expires, the slot is free again.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if c.claim_slot(&ids[3], "t3", 2).await.unwrap() == SlotClaim::Running {
            break;
        }
        assert!(Instant::now() < deadline, "the dead replica's slot never came free");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A given-up place leaves the line.
    b.release_slot(&ids[2], "t2").await.unwrap();
    c.release_slot(&ids[3], "t3").await.unwrap();
    assert_eq!(b.claim_slot(&ids[2], "t4", 1).await.unwrap(), SlotClaim::Running);
}

/// The common claim, a slot free, is one statement besides the lock and the transaction's ends
/// (counted on the wire); one that must wait asks in full. Neither passes a waiter, and
/// the short one counts a dead replica's rows as taken (the full one drops them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_slot_free_is_one_short_statement_that_passes_no_waiter() {
    let Some(db) = postgres::fresh("leases_short_claim").await else { return };
    // A long lease: no heartbeat renews it on the one connection while the claims are counted.
    let counted =
        PgOptions { session_lease: Duration::from_secs(600), pool_size: 1, count_round_trips: true, ..options(&db) };
    let database = PgDatabase::connect(db.base_url(), &counted).await.unwrap();
    let a = PgStore::new(database.clone(), "agent", std::env::temp_dir().join("bdk-pg-leases-unused"));
    let ids: Vec<SessionId> = (0..4).map(|_| SessionId::generate()).collect();
    for id in &ids {
        assert!(matches!(a.acquire(id).await.unwrap(), Claim::Held { .. }));
    }
    // Prepares every statement of both kinds of claim on the one connection.
    assert_eq!(a.claim_slot(&ids[0], "warm", 1).await.unwrap(), SlotClaim::Running);
    assert_eq!(a.claim_slot(&ids[1], "warm", 1).await.unwrap(), SlotClaim::Queued { position: 1 });
    a.release_slot(&ids[0], "warm").await.unwrap();
    a.release_slot(&ids[1], "warm").await.unwrap();

    let claim = async |id: &SessionId, turn: &str, max: u32| {
        let before = database.round_trips();
        let claimed = a.claim_slot(id, turn, max).await.unwrap();
        let after = database.round_trips();
        (claimed, after.statements - before.statements)
    };
    // BEGIN (with its SET LOCALs), the lock, the insert, COMMIT: pipelined.
    assert_eq!(claim(&ids[0], "t0", 2).await, (SlotClaim::Running, 4));
    assert_eq!(claim(&ids[1], "t1", 2).await.0, SlotClaim::Running);
    // Full: the short claim, then BEGIN, the lock, four statements and COMMIT.
    assert_eq!(claim(&ids[2], "t2", 2).await, (SlotClaim::Queued { position: 1 }, 11));

    // A slot given back while t2 waits: the rows (t1 running, t2 waiting) fill both slots, so
    // a newcomer queues behind t2, which runs when it asks again.
    a.release_slot(&ids[0], "t0").await.unwrap();
    assert_eq!(claim(&ids[3], "t3", 2).await.0, SlotClaim::Queued { position: 1 });
    assert_eq!(claim(&ids[2], "t2", 2).await.0, SlotClaim::Running);

    // A dead replica's row (its lease gone) counts until a full claim drops it.
    for (session, turn) in [(&ids[1], "t1"), (&ids[2], "t2"), (&ids[3], "t3")] {
        a.release_slot(session, turn).await.unwrap();
    }
    db.execute(
        "INSERT INTO bdk_turn_slots (agent, session_id, turn_id, replica, running) \
         VALUES ('agent', 'ses_gone', 't', 'r-dead', true)",
    )
    .await;
    assert_eq!(claim(&ids[0], "t4", 1).await, (SlotClaim::Running, 11));
    let (raw, connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let rows =
        raw.query_one("SELECT count(*), count(*) FILTER (WHERE running) FROM bdk_turn_slots", &[]).await.unwrap();
    assert_eq!((rows.get::<_, i64>(0), rows.get::<_, i64>(1)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_shutting_down_releases_its_leases_at_once() {
    let Some(db) = postgres::fresh("leases_release_all").await else { return };
    let (a, b) = (replica(&db).await, replica(&db).await);
    let (first, second) = (SessionId::generate(), SessionId::generate());
    assert!(matches!(a.acquire(&first).await.unwrap(), Claim::Held { .. }));
    assert!(matches!(a.acquire(&second).await.unwrap(), Claim::Held { .. }));
    assert!(matches!(b.acquire(&first).await.unwrap(), Claim::Elsewhere { .. }));
    assert_eq!(a.release_all().await.unwrap(), 2);
    // Free now (not one period later), and listed for the sweep: a session left running is
    // taken over by another replica without a request.
    let expired = b.expired().await.unwrap();
    assert!(expired.contains(&first) && expired.contains(&second), "{expired:?}");
    assert!(matches!(b.acquire(&first).await.unwrap(), Claim::Held { .. }));
    assert!(a.holder(&second).await.unwrap().is_none());
    // a's heartbeat, still running, renews none of them.
    tokio::time::sleep(LEASE).await;
    assert!(b.expired().await.unwrap().contains(&second));
    assert_eq!(a.acquire(&first).await.unwrap(), Claim::Elsewhere { replica: b.replica().to_owned() });
}
