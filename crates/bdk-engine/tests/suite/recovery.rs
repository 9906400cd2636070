//! Restart recovery: a turn left open by a dead process is closed with `turn.failed` saying the
//! host restarted, the session waits (chat) or fails (task), recovery is idempotent, and a
//! follow-up works afterwards.

use bdk_engine::{Admission, RESTARTED, Trajectory};
use bdk_model::ScriptedProvider;
use bdk_protocol::event::{
    FailureCode, MessageReceived, SessionMode, SessionStarted, StepStarted, TextDelta, TurnFailStatus, TurnStarted,
};
use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::{NewEvent, SessionRecord, SessionStatus, SessionStore};
use std::sync::Arc;

use super::support::*;

/// Writes, through a fresh handle on the fixture's state (released before the engine restarts), a
/// session whose turn was in flight when the "process died".
async fn interrupted(fx: &Fixture, mode: SessionMode) -> (SessionId, String) {
    interrupted_ago(fx, mode, std::time::Duration::ZERO).await
}

/// [`interrupted`], its record last updated `ago`.
async fn interrupted_ago(fx: &Fixture, mode: SessionMode, ago: std::time::Duration) -> (SessionId, String) {
    if on_postgres() {
        return interrupted_session_ago(&fx.backend.stores(), mode, ago).await;
    }
    let store = fx.store();
    let written = interrupted_session_ago(&store.stores(), mode, ago).await;
    store.close_log(&written.0);
    written
}

async fn interrupted_session(store: &bdk_store::Stores, mode: SessionMode) -> (SessionId, String) {
    interrupted_session_ago(store, mode, std::time::Duration::ZERO).await
}

async fn interrupted_session_ago(
    store: &bdk_store::Stores,
    mode: SessionMode,
    ago: std::time::Duration,
) -> (SessionId, String) {
    let id = SessionId::generate();
    let mut record = SessionRecord::new(id.clone(), mode, "http", "alice");
    record.updated_at -= chrono::Duration::from_std(ago).unwrap();
    record.continuation_token = Some("http:0123".into());
    within(store.sessions.create(record)).await.unwrap();
    let turn = TurnId::generate();
    let started = SessionStarted {
        mode,
        channel: "http".into(),
        principal: "alice".into(),
        title: None,
        dry_run: None,
        as_of: None,
        purpose: None,
    };
    let events = vec![
        NewEvent::new(EventData::SessionStarted(started)),
        NewEvent::new(EventData::MessageReceived(MessageReceived { text: "hello".into(), principal: None })),
        NewEvent::in_turn(turn.clone(), EventData::TurnStarted(TurnStarted::default())),
        NewEvent::in_turn(turn.clone(), EventData::StepStarted(StepStarted { step: 0 })),
        NewEvent::in_turn(turn, EventData::MessageAppended(TextDelta { delta: "half an ans".into() })),
    ];
    within(store.events.append(&id, events)).await.unwrap();
    (id, "http:0123".into())
}

#[tokio::test]
async fn recovery_closes_an_interrupted_turn_and_a_follow_up_works() {
    let fx = Fixture::echo().await;
    let (id, token) = interrupted(&fx, SessionMode::Chat).await;
    let provider = Arc::new(ScriptedProvider::new(vec![say("back again")]));
    let engine = fx.restart(provider.clone());
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
    assert_eq!(shape(&events)[shape(&events).len() - 2..], ["turn.failed", "session.waiting"]);
    let Some(EventData::TurnFailed(failed)) = events.iter().rev().nth(1).map(|e| &e.data) else { panic!() };
    assert_eq!(failed.status, TurnFailStatus::Failed);
    assert_eq!(failed.message, RESTARTED);
    assert_eq!(failed.error, Some(FailureCode::HostRestarted));
    assert!(failed.message.contains("restarted"));
    let listed = within(engine.list(bdk_engine::ListScope::All)).await.unwrap();
    assert_eq!(listed[0].status, "waiting");

    // Idempotent.
    assert_eq!(within(engine.recover()).await.unwrap(), 0);
    assert_eq!(within(engine.events(&id, &alice(), 0)).await.unwrap().len(), events.len());

    within(engine.follow_up(&id, follow("are you there?", &token, Admission::Preempt))).await.unwrap();
    let events = settled(&engine, &id, 2).await;
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("back again"));
    // The half-written answer is part of the conversation the model sees.
    let messages = &provider.requests()[0].messages;
    assert_eq!(messages.len(), 3, "{messages:?}");
}

/// `storage.toml`'s `policy.restore`: start-up restores the most recently updated sessions
/// within the limits; one left out is closed the first time it is used, as a restarted
/// process's session would have been at start-up.
#[tokio::test]
async fn start_up_restores_the_newest_sessions_within_the_limits_and_the_rest_at_their_next_use() {
    let fx = Fixture::echo().await;
    let hour = std::time::Duration::from_secs(3600);
    let (stale, token) = interrupted_ago(&fx, SessionMode::Chat, 48 * hour).await;
    let (older, _) = interrupted_ago(&fx, SessionMode::Chat, 2 * hour).await;
    let (newest, _) = interrupted_ago(&fx, SessionMode::Chat, hour).await;
    let restore = bdk_engine::RestoreLimits { max_sessions: Some(1), max_age: Some(24 * hour) };
    let options = bdk_engine::EngineOptions { restore, ..Default::default() };
    let provider = Arc::new(ScriptedProvider::new(vec![say("back again")]));
    let engine = bdk_engine::Engine::with_options(config(), fx.backend.stores(), provider, fx.tools.clone(), options);
    assert_eq!(within(engine.recover()).await.unwrap(), 1, "only the newest session");
    let last = |events: &[bdk_protocol::Event]| shape(events).last().map(|t| t.to_string()).unwrap_or_default();
    assert_eq!(last(&within(engine.events(&newest, &alice(), 0)).await.unwrap()), "session.waiting");
    for id in [&older, &stale] {
        assert_eq!(last(&within(engine.events(id, &alice(), 0)).await.unwrap()), "message.appended", "left as it was");
    }

    // The stale one's next use closes its turn first, then runs the new one.
    closed_at_next_use(&engine, &stale, &token).await;
}

/// Follows up on a session whose turn a previous process left open (and start-up did not
/// close): its actor closes that turn (`host_restarted`) before the new message's turn, which
/// answers "back again". Returns the session's events.
async fn closed_at_next_use(engine: &bdk_engine::Engine, id: &SessionId, token: &str) -> Vec<bdk_protocol::Event> {
    within(engine.follow_up(id, follow("are you there?", token, Admission::Preempt))).await.unwrap();
    let events = settled(engine, id, 2).await;
    let types = types(&events);
    let failed = types.iter().position(|t| *t == "turn.failed").expect("the left turn is closed");
    let received = types.iter().rposition(|t| *t == "message.received").unwrap();
    assert!(failed < received, "{types:?}");
    let Some(EventData::TurnFailed(closed)) = events.get(failed).map(|e| &e.data) else { panic!() };
    assert_eq!(closed.error, Some(FailureCode::HostRestarted));
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("back again"));
    events
}

#[tokio::test]
async fn recovery_fails_an_interrupted_task_session() {
    let fx = Fixture::echo().await;
    let (id, _) = interrupted(&fx, SessionMode::Task).await;
    let engine = fx.restart(Arc::new(ScriptedProvider::echo()));
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
    let Some(EventData::SessionFailed(failed)) = events.last().map(|e| &e.data) else { panic!("{:?}", types(&events)) };
    assert_eq!(failed.message, RESTARTED);
    assert_eq!(failed.error, Some(FailureCode::HostRestarted));
}

#[tokio::test]
async fn start_up_reads_no_log_of_thousands_of_closed_sessions() {
    //! Guards: recovery cost follows the sessions that were open. 2,000 settled sessions on
    //! disk (their records say `waiting`, `completed` or `failed`) have no log read at all (the
    //! count of log reads, not a clock, is checked, so more sessions prove nothing more); the
    //! one interrupted session is recovered.
    if filesystem_only("start_up_reads_no_log_of_thousands_of_closed_sessions", "it writes session folders on disk") {
        return;
    }
    let fx = Fixture::echo().await;
    let open = {
        let store = fx.store();
        let (id, _) = interrupted_session(&store.stores(), SessionMode::Chat).await;
        store.close_log(&id);
        id
    };
    let sessions = fx.dir.path().join("test/sessions");
    let statuses = [SessionStatus::Waiting, SessionStatus::Completed, SessionStatus::Failed];
    for i in 0..2_000 {
        let id = SessionId::generate();
        let mut record = SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice");
        record.status = Some(statuses[i % 3]);
        let dir = sessions.join(id.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("session.json"), serde_json::to_vec(&record).unwrap()).unwrap();
        std::fs::write(dir.join("events.ndjson"), b"").unwrap();
    }
    let store = fx.store();
    let mut stores = store.stores();
    let counting = CountingLog::wrap(stores.events.clone());
    stores.events = counting.clone();
    let engine = bdk_engine::Engine::new(config(), stores, Arc::new(ScriptedProvider::echo()), fx.tools.clone());
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    assert_eq!(counting.reads(), 1, "only the open session's log is read");
    let events = within(engine.events(&open, &alice(), 0)).await.unwrap();
    assert_eq!(events.last().unwrap().event_type(), "session.waiting");
}

/// Writes `n` settled sessions straight into `sessions/`, as this build leaves them: a record
/// with a settled status, an empty log and no `open/` marker.
fn write_closed_sessions(state: &std::path::Path, n: usize) {
    let statuses = [SessionStatus::Waiting, SessionStatus::Completed, SessionStatus::Failed];
    for i in 0..n {
        let id = SessionId::generate();
        let mut record = SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice");
        record.status = Some(statuses[i % 3]);
        let dir = state.join("sessions").join(id.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("session.json"), serde_json::to_vec(&record).unwrap()).unwrap();
        std::fs::write(dir.join("events.ndjson"), b"").unwrap();
    }
}

#[tokio::test]
async fn start_up_reads_no_record_of_ten_thousand_closed_sessions() {
    //! Guards: the index of open sessions. With 10,000 settled sessions on disk, start-up reads
    //! the `session.json` of the open session only (the store's read counter, not a clock), and
    //! that session is still recovered. The time it takes is printed for the record.
    if filesystem_only(
        "start_up_reads_no_record_of_ten_thousand_closed_sessions",
        "session folders on disk and the store's record-read counter",
    ) {
        return;
    }
    let fx = Fixture::echo().await;
    let state = fx.dir.path().join("test");
    let open = {
        let store = fx.store();
        let (id, _) = interrupted_session(&store.stores(), SessionMode::Chat).await;
        store.close_log(&id);
        // An earlier start built the index (this folder then had one session).
        assert_eq!(within(store.list_open()).await.unwrap().len(), 1);
        id
    };
    write_closed_sessions(&state, 10_000);

    let store = fx.store();
    let engine =
        bdk_engine::Engine::new(config(), store.stores(), Arc::new(ScriptedProvider::echo()), fx.tools.clone());
    let began = std::time::Instant::now();
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    let took = began.elapsed();
    let reads = store.record_reads();
    println!("start-up recovery with 10,000 closed sessions: {took:?}, {reads} session.json read(s)");
    assert!(reads <= 3, "{reads} session.json files read");
    let events = within(engine.events(&open, &alice(), 0)).await.unwrap();
    assert_eq!(events.last().unwrap().event_type(), "session.waiting");
    // Closed now: its marker is gone, and the next start reads nothing.
    assert!(!state.join("open").join(open.to_string()).exists());
    let again = fx.store();
    assert!(within(again.list_open()).await.unwrap().is_empty());
    assert_eq!(again.record_reads(), 0);
    // For comparison: what reading every record (the start-up before the index) costs.
    let began = std::time::Instant::now();
    assert_eq!(within(again.list()).await.unwrap().len(), 10_001);
    println!("reading all 10,001 session.json files: {:?}", began.elapsed());
}

#[tokio::test]
async fn the_open_index_is_built_once_from_an_older_state_folder_and_drops_stale_markers() {
    //! Guards: a state folder from before the index (no `open/.built`) is scanned once and the
    //! open sessions marked; a marker whose session settled or vanished is removed when listed.
    if filesystem_only(
        "the_open_index_is_built_once_from_an_older_state_folder_and_drops_stale_markers",
        "the open-session index folder",
    ) {
        return;
    }
    let fx = Fixture::echo().await;
    let state = fx.dir.path().join("test");
    write_closed_sessions(&state, 50);
    let open = {
        let store = fx.store();
        let (id, _) = interrupted_session(&store.stores(), SessionMode::Chat).await;
        store.close_log(&id);
        id
    };
    let store = fx.store();
    let listed = within(store.list_open()).await.unwrap();
    assert_eq!(listed.iter().map(|r| &r.id).collect::<Vec<_>>(), [&open]);
    assert_eq!(store.record_reads(), 51, "the one full scan");
    assert!(state.join("open/.built").exists());

    // Stale markers: a settled session's, and one whose folder is gone.
    let settled_id = within(store.list()).await.unwrap().into_iter().find(|r| r.id != open).unwrap().id;
    std::fs::write(state.join("open").join(settled_id.to_string()), b"").unwrap();
    std::fs::write(state.join("open").join(SessionId::generate().to_string()), b"").unwrap();
    let store = fx.store();
    assert_eq!(within(store.list_open()).await.unwrap().len(), 1);
    assert_eq!(store.record_reads(), 3);
    assert_eq!(std::fs::read_dir(state.join("open")).unwrap().count(), 2, "the open session's marker and .built");

    // A settled status removes the marker; a running one puts it back.
    let mut record = within(store.get(&open)).await.unwrap().unwrap();
    record.status = Some(SessionStatus::Waiting);
    within(store.update_derived(record.clone())).await.unwrap();
    assert!(!state.join("open").join(open.to_string()).exists());
    record.status = Some(SessionStatus::Running);
    within(store.update(record)).await.unwrap();
    assert!(state.join("open").join(open.to_string()).exists());
    within(store.delete(&open)).await.unwrap();
    assert!(!state.join("open").join(open.to_string()).exists());
}

#[tokio::test]
async fn a_turn_whose_open_marker_was_lost_is_closed_at_the_sessions_next_use() {
    //! Guards: the filesystem store does not sync the open-session markers, so a power loss can
    //! take one. Start-up recovery then does not see that session; its open turn is closed when
    //! the session is next used, before the follow-up's own message, and the follow-up runs.
    if filesystem_only(
        "a_turn_whose_open_marker_was_lost_is_closed_at_the_sessions_next_use",
        "the open-session index folder",
    ) {
        return;
    }
    let fx = Fixture::echo().await;
    let state = fx.dir.path().join("test");
    let (id, token) = {
        let store = fx.store();
        let written = interrupted_session(&store.stores(), SessionMode::Chat).await;
        store.close_log(&written.0);
        // An earlier start built the index.
        assert_eq!(within(store.list_open()).await.unwrap().len(), 1);
        written
    };
    std::fs::remove_file(state.join("open").join(id.to_string())).unwrap();

    let provider = Arc::new(ScriptedProvider::new(vec![say("back again")]));
    let engine = fx.restart(provider.clone());
    assert_eq!(within(engine.recover()).await.unwrap(), 0, "start-up does not see the session");
    let events = closed_at_next_use(&engine, &id, &token).await;
    let types = types(&events);
    assert_eq!(types.iter().filter(|t| **t == "turn.failed").count(), 1, "{types:?}");
}
