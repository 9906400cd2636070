//! What a plain text turn costs the disk, counted through the store's own sync counters (not
//! timed): a new session and a follow-up each make a fixed, small number of durable syncs,
//! a session whose turns call no tool never gets a workspace folder, a turn reads nothing
//! back from the log that its session's actor already folded, and on a database a new
//! session's lease is claimed while its record is written, not after.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bdk_engine::{Admission, Engine};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_protocol::event::{MessageReceived, SessionMode};
use bdk_protocol::{EventData, SessionId};
use bdk_store::{NewEvent, SessionLeases, SessionRecord, SessionStore, SyncStats};
use futures_util::future::BoxFuture;
use serde_json::json;

use super::support::{
    CountingLog, Fixture, RefusingMessages, alice, config, filesystem_only, follow, on_postgres, settled, start, within,
};

#[tokio::test]
async fn a_new_session_text_turn_makes_two_file_syncs_and_two_directory_syncs() {
    if filesystem_only(
        "a_new_session_text_turn_makes_two_file_syncs_and_two_directory_syncs",
        "the store's fsync counters",
    ) {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("hello there"), ScriptStep::text("again")]).await;
    let before = fx.fs.syncs();
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    // Two group commits of the log: the POST's `session.started` + `message.received`, which
    // also carries the session's first record (`session.json` is replaced without a sync), and
    // the whole turn with `session.waiting`. Directories: the session folder's entries and
    // `sessions/` for the new folder. The open-session marker is not synced.
    assert_eq!(fx.fs.syncs().since(before), SyncStats { file_syncs: 2, dir_syncs: 2 });

    let before = fx.fs.syncs();
    let reply = within(
        fx.engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    assert!(reply.turn_id.is_some());
    settled(&fx.engine, &started.session_id, 2).await;
    // `message.received` with the rotated token's record in the same commit, then the turn.
    // No directory: `session.json` and the marker the waiting session gets back are not synced.
    assert_eq!(fx.fs.syncs().since(before), SyncStats { file_syncs: 2, dir_syncs: 0 });
}

/// A text turn's store work runs on the store's writer threads: a follow-up hands nothing to
/// tokio's blocking pool (its message, its turn, and the settled status that rides in the
/// turn's closing commit), and a new session only the creation of its folder.
#[tokio::test]
async fn a_text_turn_makes_no_blocking_pool_hop() {
    if filesystem_only("a_text_turn_makes_no_blocking_pool_hop", "the filesystem store's hop counter") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("hello there"), ScriptStep::text("again")]).await;
    let before = fx.fs.blocking_hops();
    let started = fx.start("hi").await;
    let first = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(fx.fs.blocking_hops() - before, 1, "creating the session's folder");

    // A client that keeps its stream open (a stream opened afresh from index 0 reads the log
    // from disk, once the events no follower waits for have left memory).
    let next = first.last().map_or(0, |e| e.index + 1);
    let mut stream = within(fx.engine.follow(&started.session_id, &alice(), next)).await.unwrap();
    let before = fx.fs.blocking_hops();
    let reply = within(
        fx.engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    loop {
        let event = within(stream.next()).await.unwrap().unwrap();
        if matches!(event.data, EventData::SessionWaiting(_)) {
            break;
        }
    }
    assert_eq!(fx.fs.blocking_hops() - before, 0);
    let record = within(fx.fs.get(&started.session_id)).await.unwrap().unwrap();
    assert_eq!(record.status, Some(bdk_store::SessionStatus::Waiting));
    assert_eq!(record.continuation_token, Some(reply.continuation_token));
}

#[tokio::test]
async fn a_session_that_calls_no_tool_creates_no_workspace_folder() {
    if filesystem_only("a_session_that_calls_no_tool_creates_no_workspace_folder", "the filesystem layout's folders") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("just words")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let session_dir = fx.fs.layout().session_dir(&started.session_id);
    assert!(session_dir.join("session.json").is_file());
    assert!(!fx.fs.layout().workspace_dir(&started.session_id).exists());
}

#[tokio::test]
async fn the_workspace_folder_appears_with_the_first_tool_call() {
    if filesystem_only("the_workspace_folder_appears_with_the_first_tool_call", "the filesystem layout's folders") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::tool_call("c1", "add", json!({"a": 1, "b": 2})), ScriptStep::text("three")])
        .await;
    let started = fx.start("add").await;
    settled(&fx.engine, &started.session_id, 1).await;
    assert!(fx.fs.layout().workspace_dir(&started.session_id).is_dir());
    let calls = fx.tools.calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].workspace.as_deref(), Some(fx.fs.layout().workspace_dir(&started.session_id).as_path()));
}

/// The owner check of a stream (or a read) on a session whose actor is live answers from the
/// actor's record: it reads no `session.json`, shown here by removing the file.
#[tokio::test]
async fn a_stream_of_a_live_session_reads_no_session_record() {
    if filesystem_only("a_stream_of_a_live_session_reads_no_session_record", "the filesystem layout's files") {
        return;
    }
    let fx = Fixture::new(vec![ScriptStep::text("hello there")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let id = &started.session_id;
    std::fs::remove_file(fx.fs.layout().session_dir(id).join("session.json")).unwrap();
    let mut stream = within(fx.engine.follow(id, &alice(), 0)).await.unwrap();
    assert!(within(stream.next()).await.is_some_and(|e| e.is_ok()));
    let events = within(fx.engine.events(id, &alice(), 0)).await.unwrap();
    assert!(!events.is_empty());
    let bob = bdk_engine::Principal::new("bob");
    let refused = within(fx.engine.follow(id, &bob, 0)).await.map(drop);
    assert!(matches!(refused, Err(bdk_engine::EngineError::Forbidden(_))), "{refused:?}");
}

/// A turn starts on the conversation its session's actor keeps: what the turns before wrote
/// and the message that starts it were folded as they were written, so it reads nothing back
/// from the log (on a database, a round trip per turn). When something else wrote to the log
/// since, the turn reads, and its model sees what was written.
#[tokio::test]
async fn a_turn_reads_the_log_back_only_when_someone_else_wrote_to_it() {
    let fx = Fixture::echo().await;
    let (engine, counting, provider) = echo_engine(&fx, |inner, _| CountingLog::wrap(inner));
    let (started, mut stream) = first_turn(&engine).await;
    let id = &started.session_id;
    let reads = counting.reads();
    let reply =
        within(engine.follow_up(id, follow("second", &started.continuation_token, Admission::Preempt))).await.unwrap();
    waiting(&mut stream).await;
    assert_eq!(counting.reads(), reads, "a follow-up on a conversation its actor kept reads nothing back");

    // Someone else writes to the log between the turns.
    let foreign = MessageReceived { text: "written by someone else".into(), principal: None };
    let log: &dyn bdk_store::EventLog = counting.as_ref();
    within(log.append(id, vec![NewEvent::new(EventData::MessageReceived(foreign))])).await.unwrap();
    let reads = counting.reads();
    within(engine.follow_up(id, follow("third", &reply.continuation_token, Admission::Preempt))).await.unwrap();
    waiting(&mut stream).await;
    assert!(counting.reads() > reads, "the turn reads what it had not folded");
    let requests = provider.requests();
    let last = format!("{:?}", requests.last().unwrap().messages);
    for text in ["first", "second", "written by someone else", "third"] {
        assert!(last.contains(text), "{text:?} missing from the model's request: {last}");
    }
    // The third turn started on a fold without the other writer's message, and started again
    // on the log (`accepting.rs`): the first start left nothing in the log.
    let events = within(engine.events(id, &alice(), 0)).await.unwrap();
    assert_eq!(events.iter().filter(|e| matches!(e.data, EventData::TurnStarted(_))).count(), 3);
    assert!(!events.iter().any(|e| matches!(e.data, EventData::TurnFailed(_))));
}

/// A log whose appends of a message (a `message.received` outside a turn) wait, up to a bound,
/// until the model has been asked something since the append began, and record whether it
/// was.
#[derive(Debug)]
struct MessageLog {
    inner: Arc<dyn bdk_store::EventLog>,
    provider: Arc<ScriptedProvider>,
    asked_first: Mutex<Vec<bool>>,
}

impl bdk_store::LogLayer for MessageLog {
    fn inner(&self) -> &Arc<dyn bdk_store::EventLog> {
        &self.inner
    }

    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: Option<SessionRecord>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<bdk_store::SharedEvent>>> {
        Box::pin(async move {
            let message = events.iter().any(|e| e.turn_id.is_none() && matches!(e.data, EventData::MessageReceived(_)));
            if message {
                let asked = self.provider.requests().len();
                let deadline = Instant::now() + Duration::from_secs(3);
                let first = loop {
                    if self.provider.requests().len() > asked {
                        break true;
                    }
                    if Instant::now() > deadline {
                        break false;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                };
                self.asked_first.lock().unwrap().push(first);
            }
            bdk_store::append_to(self.inner.as_ref(), session, events, record).await
        })
    }
}

/// An engine on `fx`'s store whose provider echoes, with its log wrapped by `wrap` (which gets
/// the provider too); answers the wrapped log too.
fn echo_engine<L: bdk_store::EventLog + 'static>(
    fx: &Fixture,
    wrap: impl FnOnce(Arc<dyn bdk_store::EventLog>, &Arc<ScriptedProvider>) -> Arc<L>,
) -> (Engine, Arc<L>, Arc<ScriptedProvider>) {
    let mut stores = if on_postgres() { fx.backend.stores() } else { fx.fs.stores() };
    let provider = Arc::new(ScriptedProvider::echo());
    let log = wrap(stores.events.clone(), &provider);
    stores.events = log.clone();
    (Engine::new(config(), stores, provider.clone(), fx.tools.clone()), log, provider)
}

/// Starts a session with "first", and follows it through its first turn.
async fn first_turn(engine: &Engine) -> (bdk_engine::SessionStarted, bdk_store::EventStream) {
    let started = within(engine.start_session(start("first", SessionMode::Chat))).await.unwrap();
    let mut stream = within(engine.follow(&started.session_id, &alice(), 0)).await.unwrap();
    waiting(&mut stream).await;
    (started, stream)
}

/// A turn's model call does not wait for the durable commit of the message that starts it: the
/// model is asked while the message is written (the request is still answered only after the
/// commit), for a new session and for a follow-up.
#[tokio::test]
async fn a_turns_model_call_overlaps_the_commit_of_its_message() {
    let fx = Fixture::echo().await;
    let (engine, log, provider) = echo_engine(&fx, |inner, provider| {
        Arc::new(MessageLog { inner, provider: provider.clone(), asked_first: Mutex::default() })
    });
    let (started, mut stream) = first_turn(&engine).await;
    let id = &started.session_id;
    within(engine.follow_up(id, follow("second", &started.continuation_token, Admission::Preempt))).await.unwrap();
    waiting(&mut stream).await;
    assert_eq!(*log.asked_first.lock().unwrap(), [true, true], "the model was asked while each message was written");
    let events = within(engine.events(id, &alice(), 0)).await.unwrap();
    let said: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageReceived(m) => Some(m.text.as_str()),
            EventData::MessageCompleted(m) => Some(m.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said.len(), 4, "{said:?}");
    assert_eq!(provider.requests().len(), 2);
}

/// A message that cannot be written is refused, and the turn started on it while it was being
/// written leaves no trace: no event, no status, and the next message's turn never shows the
/// model the refused one.
#[tokio::test]
async fn the_turn_of_a_message_that_cannot_be_written_leaves_no_trace() {
    let fx = Fixture::echo().await;
    let refuse = Arc::new(AtomicBool::new(false));
    let (engine, _, provider) =
        echo_engine(&fx, |inner, _| Arc::new(RefusingMessages { inner, refuse: refuse.clone() }));
    let (started, mut stream) = first_turn(&engine).await;
    let id = &started.session_id;
    let before = within(engine.events(id, &alice(), 0)).await.unwrap().len();

    refuse.store(true, Ordering::SeqCst);
    let refused =
        within(engine.follow_up(id, follow("refused", &started.continuation_token, Admission::Preempt))).await;
    assert!(matches!(&refused, Err(bdk_engine::EngineError::Store(e)) if e.is_write_fault()), "{refused:?}");
    refuse.store(false, Ordering::SeqCst);
    assert_eq!(within(engine.events(id, &alice(), 0)).await.unwrap().len(), before, "nothing was written");

    // The token did not rotate: the next message goes in with it, and runs.
    within(engine.follow_up(id, follow("second", &started.continuation_token, Admission::Preempt))).await.unwrap();
    waiting(&mut stream).await;
    let events = within(engine.events(id, &alice(), 0)).await.unwrap();
    assert_eq!(events.iter().filter(|e| matches!(e.data, EventData::TurnStarted(_))).count(), 2);
    assert!(!events.iter().any(|e| matches!(e.data, EventData::TurnFailed(_))));
    let last = format!("{:?}", provider.requests().last().unwrap().messages);
    assert!(last.contains("second") && !last.contains("refused"), "{last}");
}

/// Reads `stream` up to the next `session.waiting`.
async fn waiting(stream: &mut bdk_store::EventStream) {
    loop {
        let event = within(stream.next()).await.unwrap().unwrap();
        if matches!(event.data, EventData::SessionWaiting(_)) {
            return;
        }
    }
}

/// A session store whose `create` waits, up to a bound, until the new session's lease is held:
/// it returns at once when the lease is claimed at the same time, and late when the lease is
/// claimed only after the record is written.
#[derive(Debug)]
struct CreateAwaitsLease {
    inner: Arc<dyn SessionStore>,
    leases: Arc<dyn SessionLeases>,
    held_before_written: Mutex<Vec<bool>>,
}

impl SessionStore for CreateAwaitsLease {
    fn create(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        Box::pin(async move {
            let deadline = Instant::now() + Duration::from_secs(3);
            let held = loop {
                if self.leases.holder(&record.id).await?.is_some() {
                    break true;
                }
                if Instant::now() > deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            self.held_before_written.lock().unwrap().push(held);
            self.inner.create(record).await
        })
    }
    fn get<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<Option<SessionRecord>>> {
        self.inner.get(id)
    }
    fn update(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.inner.update(record)
    }
    fn update_derived(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.inner.update_derived(record)
    }
    fn list(&self) -> BoxFuture<'_, bdk_store::Result<Vec<SessionRecord>>> {
        self.inner.list()
    }
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.inner.delete(id)
    }
}

/// On a database, a new session's lease is claimed beside its record: the two writes need
/// nothing from each other, and claimed after it (by the session's actor) the lease cost the
/// first message a round trip more.
#[tokio::test]
async fn a_new_sessions_lease_is_claimed_while_its_record_is_written() {
    let fx = Fixture::echo().await;
    // Session leases are the database's; the filesystem pass has none (it runs in the
    // PostgreSQL pass, which `.ci/run` makes, or reports loudly that it cannot).
    let Some(leases) = fx.backend.leases() else { return };
    let mut stores = fx.backend.stores();
    let awaiting = Arc::new(CreateAwaitsLease {
        inner: stores.sessions.clone(),
        leases: leases.clone(),
        held_before_written: Mutex::default(),
    });
    stores.sessions = awaiting.clone();
    let options = bdk_engine::EngineOptions { leases: Some(leases.clone()), ..Default::default() };
    let engine = Engine::with_options(config(), stores, Arc::new(ScriptedProvider::echo()), fx.tools.clone(), options);
    let started = within(engine.start_session(start("first", SessionMode::Chat))).await.unwrap();
    assert_eq!(*awaiting.held_before_written.lock().unwrap(), [true]);
    let mut stream = within(engine.follow(&started.session_id, &alice(), 0)).await.unwrap();
    waiting(&mut stream).await;
    assert!(within(leases.holder(&started.session_id)).await.unwrap().is_some());
}
