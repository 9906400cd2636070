//! A replica that stalls past its session lease (a frozen VM) while a turn streams: another
//! replica takes the session over (closes the turn, runs a follow-up), and when the stalled
//! replica resumes, the database refuses its turn's appends, so the turn stops without writing
//! and the new holder's log stays its own. The stalled replica then forwards the next follow-up
//! to the holder like any other replica. Needs `BDK_TEST_DATABASE_URL` (skipped loudly without).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_engine::{Admission, AgentConfig, Engine, EngineOptions, FollowUp, Principal, StartSession};
use bdk_model::ScriptedProvider;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{EventData, SessionId};
use bdk_store::EventStream;
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
use bdk_test_support::postgres::{self, TestDb};
use bdk_tools::NoTools;

use super::support::{slow_text, within};

async fn replica(db: &TestDb, local: &std::path::Path, lease: Duration, provider: ScriptedProvider) -> Engine {
    let options =
        PgOptions { schema: Some(db.schema().to_owned()), pool_size: 4, session_lease: lease, ..Default::default() };
    let database = PgDatabase::connect(db.base_url(), &options).await.unwrap();
    let store = PgStore::new(database, "agent", local);
    let config = AgentConfig {
        slug: "agent".into(),
        instructions: "Test.".into(),
        max_steps: 4,
        max_running_turns: 8,
        idle_timeout: Duration::from_secs(60),
    };
    let options = EngineOptions { leases: Some(store.leases()), ..EngineOptions::default() };
    Engine::with_options(config, store.stores(), Arc::new(provider), Arc::new(NoTools), options)
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

fn follow_up(message: &str, token: String) -> FollowUp {
    FollowUp {
        message: message.into(),
        principal: Principal::new("alice"),
        continuation_token: token,
        admission: Admission::Preempt,
        workspace_files: Vec::new(),
    }
}

/// Reads `stream` until an event `matches`; returns its index.
async fn until(stream: &mut EventStream, what: &str, matches: impl Fn(&EventData) -> bool) -> u64 {
    within(what, async {
        loop {
            let event = stream.next().await.expect("the stream goes on").unwrap();
            if matches(&event.data) {
                return event.index;
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_on_a_replica_that_lost_its_lease_stops_without_writing() {
    let Some(db) = postgres::fresh("stale_replica").await else { return };
    let local = tempfile::tempdir().unwrap();
    let alice = Principal::new("alice");
    // a renews its leases every 20 minutes, so once its lease is expired by hand it stays
    // expired, as a stalled process's would. Its one turn streams for about ten seconds.
    let a = replica(
        &db,
        &local.path().join("a"),
        Duration::from_secs(3600),
        ScriptedProvider::new(vec![slow_text(200, Duration::from_millis(50))]),
    )
    .await;
    let b = replica(&db, &local.path().join("b"), Duration::from_secs(10), ScriptedProvider::echo()).await;

    let started = a.start_session(start()).await.unwrap();
    let id: SessionId = started.session_id.clone();
    let stale_turn = started.turn_id.clone();
    let mut stream = b.follow(&id, &alice, 0).await.unwrap();
    until(&mut stream, "a's turn streaming", |d| matches!(d, EventData::MessageAppended(_))).await;

    // a stalls past its lease; b takes the session over with a follow-up.
    db.execute("UPDATE bdk_session_leases SET expires_at = now() - interval '1 second'").await;
    let accepted =
        within("b's follow-up", b.follow_up(&id, follow_up("over to b", started.continuation_token))).await.unwrap();
    until(&mut stream, "b's turn", |d| matches!(d, EventData::SessionWaiting(_))).await; // a's turn closed
    until(&mut stream, "b's turn", |d| matches!(d, EventData::SessionWaiting(_))).await; // b's turn

    // a's turn goes on streaming until its next append is refused; then it ends.
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.is_busy(&id) {
        assert!(Instant::now() < deadline, "the stalled replica's turn never stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Nothing of a's turn after b closed it.
    let log = b.events(&id, &alice, 0).await.unwrap();
    for (i, event) in log.iter().enumerate() {
        assert_eq!(event.index, i as u64, "the log is dense");
    }
    let closed = log
        .iter()
        .position(|e| e.turn_id.as_ref() == Some(&stale_turn) && matches!(e.data, EventData::TurnFailed(_)))
        .expect("b closed a's turn");
    let late: Vec<u64> =
        log[closed + 1..].iter().filter(|e| e.turn_id.as_ref() == Some(&stale_turn)).map(|e| e.index).collect();
    assert!(late.is_empty(), "the stalled replica wrote {} events after the takeover, at {late:?}", late.len());
    assert!(log.iter().any(|e| e.turn_id == accepted.turn_id && matches!(e.data, EventData::TurnCompleted(_))));

    // a now forwards the session's follow-ups to b, which runs them.
    let again = within("a forwards", a.follow_up(&id, follow_up("via a", accepted.continuation_token))).await.unwrap();
    until(&mut stream, "the forwarded turn", |d| matches!(d, EventData::SessionWaiting(_))).await;
    let log = b.events(&id, &alice, 0).await.unwrap();
    assert!(log.iter().any(|e| e.turn_id == again.turn_id && matches!(e.data, EventData::TurnCompleted(_))));
}
