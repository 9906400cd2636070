//! What a text turn costs the PostgreSQL backend in commits, counted by the database handle's
//! own counters (never by timing): a new session's first turn is two durable commits (its first
//! events, its turn's events) and a follow-up two (the accepted message with the rotated token,
//! the turn's events). The rotated token is durable when the follow-up is answered. The settled
//! status rides in the turn's closing commit, so a follow-up makes no relaxed commit and the
//! record says `waiting` once `session.waiting` is seen. Needs `BDK_TEST_DATABASE_URL`
//! (skipped loudly without).

use std::sync::Arc;
use std::time::Duration;

use bdk_engine::{Admission, AgentConfig, Engine, EngineOptions, FollowUp, Principal, StartSession};
use bdk_model::ScriptedProvider;
use bdk_protocol::EventData;
use bdk_protocol::event::SessionMode;
use bdk_store::record::SessionStatus;
use bdk_store::{EventStream, SessionStore};
use bdk_store_pg::{Commits, PgDatabase, PgOptions, PgStore};
use bdk_test_support::postgres::{self, TestDb};
use bdk_tools::NoTools;

use super::support::within;

async fn replica(db: &TestDb, local: &std::path::Path) -> (Engine, Arc<PgDatabase>, PgStore) {
    replica_with(db, local, false).await
}

/// [`replica`], its store debouncing its writes or not (`storage.toml`'s `policy.debounce_ms`).
async fn replica_with(db: &TestDb, local: &std::path::Path, debounced: bool) -> (Engine, Arc<PgDatabase>, PgStore) {
    // A lease of an hour: no heartbeat (a relaxed commit of its own, uncounted) or sweep runs
    // between the counts below.
    let options = PgOptions {
        schema: Some(db.schema().to_owned()),
        pool_size: 4,
        session_lease: Duration::from_secs(3600),
        ..Default::default()
    };
    let database = PgDatabase::connect(db.base_url(), &options).await.unwrap();
    let store = PgStore::new(database.clone(), "agent", local).debounced(debounced);
    let config = AgentConfig {
        slug: "agent".into(),
        instructions: "Test.".into(),
        max_steps: 4,
        // A limit: the turn slots are the database's, shared by the replicas.
        max_running_turns: 8,
        idle_timeout: Duration::from_secs(60),
    };
    let options = EngineOptions { leases: Some(store.leases()), ..EngineOptions::default() };
    let engine =
        Engine::with_options(config, store.stores(), Arc::new(ScriptedProvider::echo()), Arc::new(NoTools), options);
    (engine, database, store)
}

fn start() -> StartSession {
    StartSession {
        message: "hello".into(),
        principal: Principal::new("alice"),
        channel: "http".into(),
        continuation_key: None,
        mode: SessionMode::Chat,
        title: None,
        dry_run: false,
        as_of: None,
        purpose: None,
        workspace_files: Vec::new(),
    }
}

async fn waiting(stream: &mut EventStream) {
    within("session.waiting", async {
        loop {
            let event = stream.next().await.expect("the stream goes on").unwrap();
            if matches!(event.data, EventData::SessionWaiting(_)) {
                return;
            }
        }
    })
    .await;
}

/// Starts a session and follows it until its first turn settles.
async fn first_turn(engine: &Engine, alice: &Principal) -> (bdk_engine::SessionStarted, EventStream) {
    let started = within("the start", engine.start_session(start())).await.unwrap();
    let mut stream = engine.follow(&started.session_id, alice, 0).await.unwrap();
    waiting(&mut stream).await;
    (started, stream)
}

fn durable(before: Commits, after: Commits) -> u64 {
    after.durable - before.durable
}

fn relaxed(before: Commits, after: Commits) -> u64 {
    after.relaxed - before.relaxed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_turn_costs_two_durable_commits() {
    let Some(db) = postgres::fresh("turn_commits").await else { return };
    let local = tempfile::tempdir().unwrap();
    let (engine, database, store) = replica(&db, local.path()).await;
    let alice = Principal::new("alice");

    let before = database.commits();
    let (started, mut stream) = first_turn(&engine, &alice).await;
    let id = started.session_id.clone();
    assert_eq!(durable(before, database.commits()), 2, "a new session: its first events, its turn's events");
    // The session row and the lease claim; the settled status rode in the turn's commit.
    assert_eq!(relaxed(before, database.commits()), 2, "a new session: its row, its lease");
    let record = store.get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, Some(SessionStatus::Waiting), "the status committed with session.waiting");

    let mut token = started.continuation_token;
    for i in 0..3 {
        let before = database.commits();
        let request = FollowUp {
            message: format!("again {i}"),
            principal: alice.clone(),
            continuation_token: token.clone(),
            admission: Admission::Preempt,
            workspace_files: Vec::new(),
        };
        let accepted = within("the follow-up", engine.follow_up(&id, request)).await.unwrap();
        assert_ne!(accepted.continuation_token, token);
        token = accepted.continuation_token;
        // Answered: the message and the new token were committed, before the answer. (The
        // turn runs on meanwhile, and on a busy machine its commit may be counted here too; that
        // they were one commit shows in the total of two below.)
        assert!(durable(before, database.commits()) >= 1, "the accepted message and the rotated token");
        let record = store.get(&id).await.unwrap().unwrap();
        assert_eq!(record.continuation_token.as_deref(), Some(token.as_str()));
        waiting(&mut stream).await;
        assert_eq!(durable(before, database.commits()), 2, "a follow-up: its message and token, its turn's events");
        // The status `waiting` was written with the turn's events, not after them.
        assert_eq!(relaxed(before, database.commits()), 0, "a follow-up writes nothing relaxed");
        let record = store.get(&id).await.unwrap().unwrap();
        assert_eq!(record.status, Some(SessionStatus::Waiting));
    }
    engine.drain(Duration::from_secs(5)).await;
}

/// With write debouncing, the same turns commit their events without waiting for the WAL
/// flush: nothing of a turn is a durable commit, and it still reads back and settles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debounced_text_turn_makes_no_durable_commit() {
    let Some(db) = postgres::fresh("debounced_commits").await else { return };
    let local = tempfile::tempdir().unwrap();
    let (engine, database, store) = replica_with(&db, local.path(), true).await;
    let alice = Principal::new("alice");

    let before = database.commits();
    let (started, mut stream) = first_turn(&engine, &alice).await;
    let id = started.session_id.clone();
    assert_eq!(durable(before, database.commits()), 0, "a new session");
    assert_eq!(relaxed(before, database.commits()), 4, "its row, its lease, its first events, its turn's events");

    let before = database.commits();
    let request = follow_up(0, &started.continuation_token);
    within("the follow-up", engine.follow_up(&id, request)).await.unwrap();
    waiting(&mut stream).await;
    assert_eq!((durable(before, database.commits()), relaxed(before, database.commits())), (0, 2), "a follow-up");
    let record = store.get(&id).await.unwrap().unwrap();
    assert_eq!(record.status, Some(SessionStatus::Waiting));
    let events = engine.events(&id, &alice, 0).await.unwrap();
    assert!(events.iter().any(|e| matches!(&e.data, EventData::MessageReceived(m) if m.text == "again 0")));
    engine.drain(Duration::from_secs(5)).await;
}

/// Two replicas on one database and a session started on the first (`home`), its first turn
/// done, followed from the second (`other`).
struct Pair {
    _db: TestDb,
    _local: tempfile::TempDir,
    home: Engine,
    other: Engine,
    other_db: Arc<PgDatabase>,
    other_store: PgStore,
    id: bdk_protocol::SessionId,
    token: String,
    stream: EventStream,
}

async fn pair(name: &str) -> Option<Pair> {
    let db = postgres::fresh(name).await?;
    let local = tempfile::tempdir().unwrap();
    let (home, _, _) = replica(&db, local.path()).await;
    let (other, other_db, other_store) = replica(&db, local.path()).await;
    let started = within("the start", home.start_session(start())).await.unwrap();
    let id = started.session_id.clone();
    let mut stream = other.follow(&id, &Principal::new("alice"), 0).await.unwrap();
    waiting(&mut stream).await;
    let token = started.continuation_token;
    Some(Pair { _db: db, _local: local, home, other, other_db, other_store, id, token, stream })
}

fn follow_up(i: usize, token: &str) -> FollowUp {
    FollowUp {
        message: format!("again {i}"),
        principal: Principal::new("alice"),
        continuation_token: token.to_owned(),
        admission: Admission::Preempt,
        workspace_files: Vec::new(),
    }
}

/// A follow-up sent to a replica that does not run the session is forwarded to the one that
/// does. The first time, the receiving replica tries the session's lease to learn who holds it
/// (a relaxed commit); after that it forwards straight to the holder it learned, committing
/// nothing itself. The holder still decides: a stale token is refused the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarding_replica_remembers_who_runs_the_session() {
    let Some(mut p) = pair("forward_commits").await else { return };
    let mut claims = Vec::new();
    for i in 0..3 {
        let before = p.other_db.commits();
        let accepted =
            within("the forwarded follow-up", p.other.follow_up(&p.id, follow_up(i, &p.token))).await.unwrap();
        claims.push(relaxed(before, p.other_db.commits()));
        p.token = accepted.continuation_token;
        waiting(&mut p.stream).await;
        assert!(!p.other.is_busy(&p.id), "the turn ran on the holder");
    }
    assert_eq!(claims, [1, 0, 0], "a lease claim the first time only");
    // A stop goes the same way.
    let before = p.other_db.commits();
    within("the forwarded stop", p.other.stop(&p.id, &Principal::new("alice"))).await.unwrap();
    assert_eq!(relaxed(before, p.other_db.commits()), 0, "no lease claim for the stop");
    let stale = p.other.follow_up(&p.id, follow_up(9, "not-the-token")).await.unwrap_err();
    assert!(matches!(stale, bdk_engine::EngineError::StaleToken(_)), "{stale:?}");
    p.other.drain(Duration::from_secs(5)).await;
    p.home.drain(Duration::from_secs(5)).await;
}

/// The remembered holder is only a hint: once it has shut down (its leases released, its
/// inbox answering `shutting_down` or gone), a follow-up sent to the replica that remembered it
/// takes the usual way and runs there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remembered_holder_that_shut_down_is_passed_over() {
    let Some(mut p) = pair("forward_gone").await else { return };
    // Forwarded once: `other` now remembers `home`.
    let accepted = within("the forward", p.other.follow_up(&p.id, follow_up(0, &p.token))).await.unwrap();
    waiting(&mut p.stream).await;
    p.home.drain(Duration::from_secs(5)).await;

    let accepted = within("the follow-up after", p.other.follow_up(&p.id, follow_up(1, &accepted.continuation_token)))
        .await
        .unwrap();
    let leases = p.other_store.leases();
    assert_eq!(leases.holder(&p.id).await.unwrap().as_deref(), Some(leases.replica()), "claimed here");
    waiting(&mut p.stream).await;
    // It runs here from now on.
    within("a local follow-up", p.other.follow_up(&p.id, follow_up(2, &accepted.continuation_token))).await.unwrap();
    waiting(&mut p.stream).await;
    p.other.drain(Duration::from_secs(5)).await;
}
