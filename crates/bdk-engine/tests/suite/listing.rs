//! `GET /v1/sessions` reads only `session.json` records: the actor keeps each record's status
//! in step with its log, a listing of thousands of sessions opens no log, and after a restart
//! recovery leaves every record's status equal to what its log says (records from before the
//! field existed included).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bdk_engine::{Engine, ListScope};
use bdk_model::ScriptedProvider;
use bdk_protocol::event::{MessageReceived, SessionMode, SessionStarted, SessionWaiting, TurnStarted};
use bdk_protocol::{Event, EventData, SessionId, TurnId};
use bdk_store::record::SessionStatus;
use bdk_store::{BoxFuture, EventLog, EventStream, FsStore, NewEvent, SessionRecord, SessionStore, SharedEvent};
use tokio::task::JoinSet;

use super::support::*;

/// An [`EventLog`] that counts every call reaching the log, then forwards it to the store.
#[derive(Debug)]
struct Counting {
    inner: FsStore,
    calls: AtomicUsize,
}

impl Counting {
    fn touch(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

impl EventLog for Counting {
    fn append<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        self.touch();
        self.inner.append(session, events)
    }

    fn append_with_record<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: bdk_store::SessionRecord,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        self.touch();
        self.inner.append_with_record(session, events, record)
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<Event>>> {
        self.touch();
        self.inner.read(session, from, limit)
    }

    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, bdk_store::Result<EventStream>> {
        self.touch();
        self.inner.follow(session, from)
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<u64>> {
        self.touch();
        self.inner.len(session)
    }

    fn release(&self, session: &SessionId) {
        self.inner.release(session);
    }
}

fn started(mode: SessionMode) -> EventData {
    EventData::SessionStarted(SessionStarted {
        mode,
        channel: "http".into(),
        principal: "alice".into(),
        title: None,
        dry_run: None,
        as_of: None,
        purpose: None,
    })
}

fn received() -> EventData {
    EventData::MessageReceived(MessageReceived { text: "hello".into(), principal: None })
}

/// Writes a session straight to the store: its record (with `status`) and `events`.
async fn write_session(store: &FsStore, status: Option<SessionStatus>, events: Vec<NewEvent>) -> SessionId {
    let id = SessionId::generate();
    let mut record = SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice");
    record.status = status;
    store.create(record).await.unwrap();
    if !events.is_empty() {
        store.append(&id, events).await.unwrap();
    }
    store.close_log(&id);
    id
}

fn status_of(listed: &[bdk_engine::SessionSummary], id: &SessionId) -> String {
    listed.iter().find(|s| &s.session_id == id).map(|s| s.status.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listing_reads_records_only_and_statuses_survive_a_restart() {
    if filesystem_only(
        "listing_reads_records_only_and_statuses_survive_a_restart",
        "records written on disk behind the engine's back",
    ) {
        return;
    }
    const BULK: usize = 2_000;
    let fx = Fixture::new(vec![say("chat answer"), say("task result"), hang()]).await;

    // Sessions the engine runs: the actor keeps their records' status.
    let chat = fx.start("hi").await.session_id;
    settled(&fx.engine, &chat, 1).await;
    let task = within(fx.engine.start_session(start("do it", SessionMode::Task))).await.unwrap().session_id;
    settled(&fx.engine, &task, 1).await;
    let busy = fx.start("take your time").await.session_id;
    in_step(&fx.engine, &busy, 1).await;
    let listed = within(fx.engine.list(ListScope::All)).await.unwrap();
    assert_eq!(status_of(&listed, &chat), "waiting");
    assert_eq!(status_of(&listed, &task), "completed");
    assert_eq!(status_of(&listed, &busy), "running");
    within(fx.engine.stop(&busy, &alice())).await.unwrap();
    let listed = within(fx.engine.list(ListScope::All)).await.unwrap();
    assert_eq!(status_of(&listed, &busy), "waiting");
    let record = within(fx.fs.get(&busy)).await.unwrap().unwrap();
    assert_eq!(record.status, Some(SessionStatus::Waiting));

    // Written behind the engine's back: a record from before `status` existed (its log is
    // settled), and a turn a dead process left open (its record still says running).
    let store = fx.store();
    let legacy = write_session(
        &store,
        None,
        vec![
            NewEvent::new(started(SessionMode::Chat)),
            NewEvent::new(received()),
            NewEvent::new(EventData::SessionWaiting(SessionWaiting {})),
        ],
    )
    .await;
    let turn = TurnId::generate();
    let crashed = write_session(
        &store,
        Some(SessionStatus::Running),
        vec![
            NewEvent::new(started(SessionMode::Chat)),
            NewEvent::new(received()),
            NewEvent::in_turn(turn, EventData::TurnStarted(TurnStarted::default())),
        ],
    )
    .await;
    let mut bulk = JoinSet::new();
    for _ in 0..BULK {
        let store = store.clone();
        bulk.spawn(async move { write_session(&store, Some(SessionStatus::Waiting), Vec::new()).await });
    }
    within(bulk.join_all()).await;

    // Restart on a log that counts every call.
    let fs = fx.store();
    let counting = Arc::new(Counting { inner: fs.clone(), calls: AtomicUsize::new(0) });
    let mut stores = fs.stores();
    stores.events = counting.clone();
    let engine = Engine::new(config(), stores, Arc::new(ScriptedProvider::echo()), fx.tools.clone());
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    assert_eq!(within(fs.get(&legacy)).await.unwrap().unwrap().status, Some(SessionStatus::Waiting));

    counting.calls.store(0, Ordering::SeqCst);
    let listed = within(engine.list(ListScope::All)).await.unwrap();
    assert_eq!(counting.calls.load(Ordering::SeqCst), 0, "the listing reached the event log");
    assert_eq!(fs.open_logs(), 0);
    assert_eq!(listed.len(), BULK + 5);
    assert_eq!(status_of(&listed, &chat), "waiting");
    assert_eq!(status_of(&listed, &task), "completed");
    assert_eq!(status_of(&listed, &busy), "waiting");
    assert_eq!(status_of(&listed, &legacy), "waiting");
    assert_eq!(status_of(&listed, &crashed), "waiting");
    assert_eq!(listed.iter().filter(|s| s.status == "waiting").count(), BULK + 4);
}

#[tokio::test]
async fn a_record_without_status_falls_back_to_its_log() {
    if filesystem_only(
        "a_record_without_status_falls_back_to_its_log",
        "records written on disk and the store's open-log count",
    ) {
        return;
    }
    let fx = Fixture::echo().await;
    let store = fx.store();
    let waiting = write_session(
        &store,
        None,
        vec![NewEvent::new(started(SessionMode::Chat)), NewEvent::new(EventData::SessionWaiting(SessionWaiting {}))],
    )
    .await;
    let open =
        write_session(&store, None, vec![NewEvent::new(started(SessionMode::Chat)), NewEvent::new(received())]).await;
    let listed = within(fx.engine.list(ListScope::All)).await.unwrap();
    assert_eq!(status_of(&listed, &waiting), "waiting");
    assert_eq!(status_of(&listed, &open), "running");
    assert_eq!(fx.fs.open_logs(), 0, "the fallback releases the logs it opened");
}
