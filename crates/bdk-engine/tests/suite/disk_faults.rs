//! Guards disk faults mid-turn without root: stores that refuse every write (as a full or
//! read-only disk does) while a switch is on. The turn that hits it closes (`turn.failed`,
//! error `storage`) once writes work again, with no acknowledged event lost; meanwhile writes
//! are refused with `store_unavailable`, reads work and the store status says what is wrong,
//! and it recovers by itself. The real thing (a full tmpfs) is in the server suite.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bdk_engine::{Admission, Engine, HostScope};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_protocol::CallId;
use bdk_protocol::event::FailureCode;
use bdk_protocol::{Event, EventData, SessionId};
use bdk_store::{
    BoxFuture, DataScope, EventLog, EventStream, FileEntry, FsStore, HostDataStore, NewEvent, SessionRecord,
    SessionStore, SharedEvent,
};
use bdk_tools::Scope;

use serde_json::{Value, json};

use super::support::*;

/// A session store and event log over `FsStore` whose writes fail with ENOSPC while `full`.
#[derive(Debug, Clone)]
struct Faulty {
    fs: FsStore,
    full: Arc<AtomicBool>,
}

impl Faulty {
    fn refuse<T: Send + 'static>(&self) -> Option<BoxFuture<'static, bdk_store::Result<T>>> {
        self.full.load(Ordering::SeqCst).then(|| {
            let source = io::Error::from_raw_os_error(28);
            let path = self.fs.layout().root().to_path_buf();
            Box::pin(async move { Err(bdk_store::Error::Io { path, source }) }) as BoxFuture<'static, _>
        })
    }
}

impl SessionStore for Faulty {
    fn create(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.refuse().unwrap_or_else(|| self.fs.create(record))
    }
    fn get<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<Option<SessionRecord>>> {
        SessionStore::get(&self.fs, id)
    }
    fn update(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.refuse().unwrap_or_else(|| self.fs.update(record))
    }
    fn update_derived(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.refuse().unwrap_or_else(|| self.fs.update_derived(record))
    }
    fn list(&self) -> BoxFuture<'_, bdk_store::Result<Vec<SessionRecord>>> {
        self.fs.list()
    }
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<bool>> {
        SessionStore::delete(&self.fs, id)
    }
    fn probe_write(&self) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.refuse().unwrap_or_else(|| self.fs.probe_write())
    }
}

impl EventLog for Faulty {
    fn append<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        self.refuse().unwrap_or_else(|| self.fs.append(session, events))
    }
    fn append_with_record<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: SessionRecord,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        self.refuse().unwrap_or_else(|| self.fs.append_with_record(session, events, record))
    }
    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<Event>>> {
        self.fs.read(session, from, limit)
    }
    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, bdk_store::Result<EventStream>> {
        self.fs.follow(session, from)
    }
    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<u64>> {
        self.fs.len(session)
    }
    fn release(&self, session: &SessionId) {
        self.fs.release(session);
    }
}

impl HostDataStore for Faulty {
    fn kv_get<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<Value>>> {
        self.fs.kv_get(scope, key)
    }
    fn kv_put<'a>(&'a self, scope: &'a DataScope, key: &'a str, value: Value) -> BoxFuture<'a, bdk_store::Result<()>> {
        self.refuse().unwrap_or_else(|| self.fs.kv_put(scope, key, value))
    }
    fn kv_delete<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.refuse().unwrap_or_else(|| self.fs.kv_delete(scope, key))
    }
    fn kv_keys<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, bdk_store::Result<Vec<String>>> {
        self.fs.kv_keys(scope, prefix)
    }
    fn file_read<'a>(
        &'a self,
        scope: &'a DataScope,
        path: &'a str,
    ) -> BoxFuture<'a, bdk_store::Result<Option<Vec<u8>>>> {
        self.fs.file_read(scope, path)
    }
    fn file_write<'a>(
        &'a self,
        scope: &'a DataScope,
        path: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, bdk_store::Result<()>> {
        self.refuse().unwrap_or_else(|| self.fs.file_write(scope, path, bytes))
    }
    fn file_delete<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.refuse().unwrap_or_else(|| self.fs.file_delete(scope, path))
    }
    fn file_list<'a>(
        &'a self,
        scope: &'a DataScope,
        prefix: &'a str,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<FileEntry>>> {
        self.fs.file_list(scope, prefix)
    }
}

fn faulty_engine(dir: &tempfile::TempDir, gate: Arc<Gated>) -> (Engine, Arc<AtomicBool>) {
    let fs = FsStore::open(dir.path().join("test")).unwrap();
    let full = Arc::new(AtomicBool::new(false));
    let faulty = Faulty { fs: fs.clone(), full: full.clone() };
    let mut stores = fs.stores();
    stores.sessions = Arc::new(faulty.clone());
    stores.events = Arc::new(faulty.clone());
    stores.data = Arc::new(faulty);
    (Engine::new(config(), stores, gate, Arc::new(TestTools::default())), full)
}

/// Polls `check` until it holds (bounded by the suite's timeout).
async fn eventually(check: impl Fn() -> bool) {
    within(async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_turn_that_hits_a_full_disk_closes_once_writes_work_again() {
    if filesystem_only("a_turn_that_hits_a_full_disk_closes_once_writes_work_again", "injected disk faults") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A tool call: its request must be durable before the tool runs, so the turn meets the full
    // disk mid-turn (a plain answer is written whole with the turn's end).
    let provider = Arc::new(ScriptedProvider::new(vec![
        ScriptStep::tool_call("c0", "add", json!({"a": 1, "b": 2})),
        say("after the disk was fixed"),
    ]));
    let gate = Gated::new(provider, 1);
    let (engine, full) = faulty_engine(&dir, gate.clone());
    let started = within(engine.start_session(start("hi", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    let id = started.session_id.clone();
    in_step(&engine, &id, 1).await;
    let acknowledged = durable(&engine, &id).await;

    // The disk fills while the model holds its answer; then the answer arrives.
    full.store(true, Ordering::SeqCst);
    gate.open();
    eventually(|| !engine.store_status().writable).await;
    let status = engine.store_status();
    assert!(status.error.as_deref().unwrap_or_default().contains("No space left"), "{status:?}");
    assert!(status.since.is_some());

    // Writes are refused with a retryable code; reads still work.
    let refused = within(engine.follow_up(&id, follow("again", &started.continuation_token, Admission::Preempt)))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "store_unavailable", "{refused}");
    let new = within(engine.start_session(start("new", bdk_protocol::event::SessionMode::Chat))).await.unwrap_err();
    assert_eq!(new.code(), "store_unavailable", "{new}");
    within(engine.session(&id, &alice())).await.unwrap();
    assert_eq!(durable(&engine, &id).await[..acknowledged.len()], acknowledged[..]);

    // The disk is fixed: the probe notices, and the turn closes by itself.
    full.store(false, Ordering::SeqCst);
    let events = settled(&engine, &id, 1).await;
    let failed = events
        .iter()
        .find_map(|e| match &e.data {
            EventData::TurnFailed(f) => Some(f.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no turn.failed: {:?}", types(&events)));
    assert_eq!(failed.error, Some(FailureCode::Storage));
    assert_eq!(types(&events).last(), Some(&"session.waiting"));
    eventually(|| engine.store_status().writable).await;
    assert_eq!(engine.store_status().error, None);

    // Nothing acknowledged was lost, the log is dense, and the session takes the next message
    // with the token it had (the refused follow-up rotated nothing).
    let all = durable(&engine, &id).await;
    assert_eq!(all[..acknowledged.len()], acknowledged[..]);
    assert!(all.iter().enumerate().all(|(i, e)| e.index == i as u64));
    within(engine.follow_up(&id, follow("again", &started.continuation_token, Admission::Preempt))).await.unwrap();
    let events = settled(&engine, &id, 2).await;
    assert!(events.iter().any(|e| matches!(&e.data, EventData::MessageAppended(d) if d.delta.contains("fixed"))));
}

#[tokio::test]
async fn a_follow_up_after_the_disk_is_fixed_lands_after_the_closed_turn() {
    if filesystem_only("a_follow_up_after_the_disk_is_fixed_lands_after_the_closed_turn", "injected disk faults") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(ScriptedProvider::new(vec![say("kept whole"), say("second")]));
    let gate = Gated::new(provider, 1);
    let (engine, full) = faulty_engine(&dir, gate.clone());
    let started = within(engine.start_session(start("hi", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    let id = started.session_id.clone();
    in_step(&engine, &id, 1).await;
    full.store(true, Ordering::SeqCst);
    gate.open();
    eventually(|| !engine.store_status().writable).await;
    // Writes work again, and a message arrives before the retry: the kept closing events go
    // first, in the same write.
    full.store(false, Ordering::SeqCst);
    within(engine.follow_up(&id, follow("next", &started.continuation_token, Admission::Preempt))).await.unwrap();
    let events = settled(&engine, &id, 2).await;
    let shape = shape(&events);
    // The first turn's answer was written whole with its end, once the store took it.
    let closed = shape.iter().position(|t| *t == "turn.completed").unwrap();
    let received = shape.iter().rposition(|t| *t == "message.received").unwrap();
    assert!(closed < received, "{shape:?}");
    assert_eq!(count(&events, "turn.completed"), 2, "{shape:?}");
    assert_eq!(count(&events, "turn.failed"), 0, "{shape:?}");
    assert!(events.iter().any(|e| matches!(&e.data, EventData::MessageAppended(d) if d.delta.contains("kept whole"))));
}

#[tokio::test]
async fn a_refused_host_kv_or_file_write_marks_the_store_unwritable_until_writes_work() {
    if filesystem_only(
        "a_refused_host_kv_or_file_write_marks_the_store_unwritable_until_writes_work",
        "injected disk faults",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = Gated::new(Arc::new(ScriptedProvider::new(vec![say("hello")])), 0);
    let (engine, full) = faulty_engine(&dir, gate);
    let started = within(engine.start_session(start("hi", bdk_protocol::event::SessionMode::Chat))).await.unwrap();
    let id = started.session_id.clone();
    settled(&engine, &id, 1).await;
    let host = engine.host_services(HostScope::session(id.clone(), CallId::generate("memo")));

    for write in ["kv", "file"] {
        full.store(true, Ordering::SeqCst);
        let refused = match write {
            "kv" => within(host.kv_put(Scope::Agent, "note".into(), json!("x"))).await.unwrap_err(),
            _ => within(host.file_write(Scope::Session, "notes/a.txt".into(), b"x".to_vec())).await.unwrap_err(),
        };
        assert!(!engine.store_status().writable, "a refused {write} write: {refused:?}");
        assert!(engine.store_status().error.unwrap_or_default().contains("No space left"));
        // Reads still work; the probe notices when writes work again.
        within(host.kv_get(Scope::Agent, "note".into())).await.unwrap();
        full.store(false, Ordering::SeqCst);
        eventually(|| engine.store_status().writable).await;
    }
    within(host.kv_put(Scope::Agent, "note".into(), json!("kept"))).await.unwrap();
    assert_eq!(within(host.kv_get(Scope::Agent, "note".into())).await.unwrap(), Some(json!("kept")));
}

/// Every durable event of the session, in order.
async fn durable(engine: &Engine, id: &SessionId) -> Vec<Event> {
    within(engine.events(id, &alice(), 0)).await.unwrap()
}
