//! The conformance suite of the storage traits: one set of behaviour checks that every backend
//! must pass. A backend's test suite implements [`Backend`] (a fresh, empty state; a second
//! handle on the same state, as a restarted process or a second replica opens it) and expands
//! [`conformance_suite!`](crate::conformance_suite) to get one `#[tokio::test]` per check.
//!
//! Only behaviour the traits promise is checked here; what is particular to one backend (the
//! filesystem's atomic `session.json`, a torn final line) stays in that backend's own tests.
//! Enabled by the `conformance` feature; test code, so it panics on a failed check.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{CallId, EventData, SessionId};
use chrono::{TimeZone, Utc};
use serde_json::json;

use crate::api::{BoxFuture, DataScope, NewEvent, Stores};
use crate::error::Error;
use crate::record::{SessionRecord, SessionStatus};
use crate::timed::{FiringRecord, FiringStatus, ReminderRecord, TimedKind, TimedStore};

/// Every wait of the suite is bounded by this.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// One backend's state, open: its stores as the engine holds them.
pub trait Instance: Send + Sync {
    fn stores(&self) -> Stores;
    fn timed(&self) -> Arc<dyn TimedStore>;
    /// A second, independent handle on the same state, as a restarted process opens it. The
    /// checks stop writing through the first handle once they reopened (a restart), except for
    /// what a backend promises across processes: session records, firing claims, kv.
    fn reopen(&self) -> BoxFuture<'_, Box<dyn Instance>>;
    /// A handle that runs at the same time as this one (another replica on the same state), for
    /// backends that support several processes at once; `None` for single-process backends.
    fn replica(&self) -> Option<BoxFuture<'_, Box<dyn Instance>>> {
        None
    }
}

/// Another replica's handle, or this one for single-process backends.
async fn replica_or_same(state: &dyn Instance) -> Stores {
    match state.replica() {
        Some(replica) => replica.await.stores(),
        None => state.stores(),
    }
}

/// Makes fresh, isolated states of one backend.
pub trait Backend: Send + Sync {
    /// A new, empty state that no other test sees.
    fn fresh(&self) -> BoxFuture<'_, Box<dyn Instance>>;
}

/// Awaits `future` or panics after [`TIMEOUT`].
pub async fn within<F: Future>(future: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, future).await {
        Ok(output) => output,
        Err(_) => panic!("timed out after {TIMEOUT:?}"),
    }
}

fn record(id: &SessionId) -> SessionRecord {
    SessionRecord::new(id.clone(), SessionMode::Chat, "http", "local")
}

fn delta(text: impl Into<String>) -> NewEvent {
    NewEvent::new(EventData::MessageAppended(TextDelta { delta: text.into() }))
}

fn text_of(data: &EventData) -> String {
    match data {
        EventData::MessageAppended(d) => d.delta.clone(),
        other => panic!("not a delta: {other:?}"),
    }
}

async fn session(stores: &Stores) -> SessionId {
    let id = SessionId::generate();
    within(stores.sessions.create(record(&id))).await.unwrap();
    id
}

/// Expands to one `#[tokio::test]` per conformance check, each on a fresh state of the backend
/// `$make` yields (`async` expression of type `Option<impl Backend>`; `None` skips the suite,
/// which the expression should announce loudly).
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@each $make;
            sessions_create_get_update_list, delete_removes_everything, ids_can_be_reused_after_delete,
            indices_are_dense_under_concurrent_appends, indices_continue_after_reopen, read_from_and_limit,
            followers_see_every_event_once, followers_on_another_handle_see_appends, follower_of_an_empty_log_waits,
            deleting_a_session_ends_its_streams, kv_round_trip, kv_rejects_invalid_keys, host_data_is_scoped,
            host_files_round_trip, host_file_paths_stay_inside, workspaces_exist_for_live_sessions,
            firings_are_claimed_once, reminders_round_trip, list_open_lists_running_and_unknown_status,
            append_with_record_writes_both,
        );
    };
    (@each $make:expr; $($case:ident,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(backend) = $make.await else { return };
                $crate::conformance::$case(&backend).await;
            }
        )*
    };
}

/// Create, get, update, list (oldest first), `SessionExists`, `SessionNotFound`, unknown fields
/// kept, and another handle sees the same.
pub async fn sessions_create_get_update_list(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let a = session(&s).await;
    tokio::time::sleep(Duration::from_millis(2)).await;
    let b = session(&s).await;

    let mut rec = within(s.sessions.get(&a)).await.unwrap().unwrap();
    assert_eq!(rec.id, a);
    assert_eq!((rec.channel.as_str(), rec.principal.as_str()), ("http", "local"));
    rec.title = Some("Weather in Paris".into());
    rec.continuation_token = Some("tok_2".into());
    rec.status = Some(SessionStatus::Running);
    rec.extra.insert("custom".into(), json!({"x": 1}));
    within(s.sessions.update(rec.clone())).await.unwrap();
    let other = state.reopen().await;
    assert_eq!(within(other.stores().sessions.get(&a)).await.unwrap(), Some(rec.clone()));
    rec.status = Some(SessionStatus::Waiting);
    within(s.sessions.update_derived(rec.clone())).await.unwrap();
    assert_eq!(within(other.stores().sessions.get(&a)).await.unwrap().unwrap().status, Some(SessionStatus::Waiting));

    let ids: Vec<SessionId> = within(s.sessions.list()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, [a.clone(), b], "oldest first");

    let err = within(s.sessions.create(record(&a))).await.unwrap_err();
    assert!(matches!(err, Error::SessionExists(_)), "{err}");
    let ghost = SessionId::generate();
    assert!(within(s.sessions.get(&ghost)).await.unwrap().is_none());
    let err = within(s.sessions.update(record(&ghost))).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
}

/// `list_open` lists the sessions whose status is `running` or unknown, oldest first, following
/// status changes and deletes, on this handle and on a reopened one.
pub async fn list_open_lists_running_and_unknown_status(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let open_ids = |records: Vec<SessionRecord>| records.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let unknown = session(&s).await;
    let mut records = Vec::new();
    for status in [SessionStatus::Running, SessionStatus::Waiting, SessionStatus::Completed, SessionStatus::Failed] {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let id = SessionId::generate();
        let mut rec = record(&id);
        rec.status = Some(status);
        within(s.sessions.create(rec.clone())).await.unwrap();
        records.push(rec);
    }
    let running = records[0].id.clone();
    assert_eq!(open_ids(within(s.sessions.list_open()).await.unwrap()), [unknown.clone(), running.clone()]);

    // The waiting one runs again; the running one settles; the unknown one is deleted.
    let mut waiting = records[1].clone();
    waiting.status = Some(SessionStatus::Running);
    within(s.sessions.update(waiting.clone())).await.unwrap();
    let mut settled = records[0].clone();
    settled.status = Some(SessionStatus::Completed);
    within(s.sessions.update_derived(settled)).await.unwrap();
    within(s.sessions.delete(&unknown)).await.unwrap();
    assert_eq!(open_ids(within(s.sessions.list_open()).await.unwrap()), [waiting.id.clone()]);
    let other = state.reopen().await;
    assert_eq!(open_ids(within(other.stores().sessions.list_open()).await.unwrap()), [waiting.id]);
}

/// Deleting removes the record, the log and the session's host data; a second delete is `false`.
pub async fn delete_removes_everything(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let (keep, gone) = (session(&s).await, session(&s).await);
    within(s.events.append(&gone, vec![delta("a")])).await.unwrap();
    let scope = DataScope::Session(gone.clone());
    within(s.data.kv_put(&scope, "k", json!(1))).await.unwrap();
    within(s.data.file_write(&scope, "notes.md", b"x".to_vec())).await.unwrap();

    assert!(within(s.sessions.delete(&gone)).await.unwrap());
    assert!(!within(s.sessions.delete(&gone)).await.unwrap());
    let ids: Vec<SessionId> = within(s.sessions.list()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, [keep]);
    assert!(within(s.sessions.get(&gone)).await.unwrap().is_none());
    let err = within(s.events.append(&gone, vec![delta("b")])).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    let err = within(s.events.read(&gone, 0, None)).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    assert!(within(s.events.follow(&gone, 0)).await.is_err());
    assert_eq!(within(s.data.kv_get(&scope, "k")).await.unwrap(), None, "deleted with the session");
    assert_eq!(within(s.data.file_read(&scope, "notes.md")).await.unwrap(), None);
    let err = within(s.data.kv_put(&scope, "k", json!(2))).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    let other = state.reopen().await;
    assert_eq!(within(other.stores().sessions.list()).await.unwrap().len(), 1);
}

/// An id used again after a delete starts from an empty log.
pub async fn ids_can_be_reused_after_delete(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let id = session(&s).await;
    within(s.events.append(&id, vec![delta("old"), delta("old2")])).await.unwrap();
    within(s.sessions.delete(&id)).await.unwrap();
    within(s.sessions.create(record(&id))).await.unwrap();
    assert_eq!(within(s.events.append(&id, vec![delta("new")])).await.unwrap()[0].index, 0);
    assert_eq!(within(s.events.len(&id)).await.unwrap(), 1);
    let events = within(state.reopen().await.stores().events.read(&id, 0, None)).await.unwrap();
    assert_eq!(events.iter().map(|e| text_of(&e.data)).collect::<Vec<_>>(), ["new"]);
}

/// Dense, unique indices from 0 under 20 concurrent appenders on two handles, with multi-event
/// appends kept contiguous, and every event read back once at its index.
pub async fn indices_are_dense_under_concurrent_appends(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let other = replica_or_same(state.as_ref()).await;
    let s = state.stores();
    let id = session(&s).await;
    let mut tasks = Vec::new();
    for writer in 0..20 {
        let events = if writer % 2 == 0 { s.events.clone() } else { other.events.clone() };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let mut indices = Vec::new();
            for n in 0..10 {
                let batch = if n % 3 == 0 {
                    vec![delta(format!("{writer}:{n}a")), delta(format!("{writer}:{n}b"))]
                } else {
                    vec![delta(format!("{writer}:{n}"))]
                };
                let acked = events.append(&id, batch).await.unwrap();
                if acked.len() == 2 {
                    assert_eq!(acked[1].index, acked[0].index + 1, "one append is contiguous");
                }
                assert!(acked.iter().all(|e| e.session_id == id));
                indices.extend(acked.iter().map(|e| e.index));
            }
            indices
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let indices = within(task).await.unwrap();
        assert!(indices.windows(2).all(|w| w[0] < w[1]), "one appender's events stay in its order");
        all.extend(indices);
    }
    all.sort_unstable();
    assert_eq!(all, (0..20 * 14).collect::<Vec<u64>>(), "dense, unique, from 0");
    let events = within(s.events.read(&id, 0, None)).await.unwrap();
    let mut seen = HashMap::new();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.index, i as u64);
        *seen.entry(text_of(&event.data)).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 20 * 14);
    assert!(seen.values().all(|&n| n == 1));
}

/// Indices continue on another handle; sessions are independent; an empty append is empty.
pub async fn indices_continue_after_reopen(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let (a, b) = (session(&s).await, session(&s).await);
    within(s.events.append(&a, vec![delta("1"), delta("2")])).await.unwrap();
    within(s.events.append(&b, vec![delta("1")])).await.unwrap();
    let other = state.reopen().await.stores();
    assert_eq!(within(other.events.append(&a, vec![delta("3")])).await.unwrap()[0].index, 2);
    assert_eq!(within(other.events.append(&b, vec![delta("2")])).await.unwrap()[0].index, 1);
    assert!(within(other.events.append(&a, Vec::new())).await.unwrap().is_empty());
    assert_eq!(within(other.events.len(&a)).await.unwrap(), 3);
    // What an append acknowledged is what a read returns.
    let acked = within(other.events.append(&a, vec![delta("4")])).await.unwrap();
    let read = within(other.events.read(&a, 3, None)).await.unwrap();
    assert_eq!(read, vec![(*acked[0]).clone()]);
}

/// `append_with_record` appends and replaces the record (another handle sees both); on a
/// session that is gone it writes neither.
pub async fn append_with_record_writes_both(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let id = session(&s).await;
    within(s.events.append(&id, vec![delta("0")])).await.unwrap();
    let mut rec = within(s.sessions.get(&id)).await.unwrap().unwrap();
    rec.continuation_token = Some("tok_next".into());
    rec.status = Some(SessionStatus::Running);
    let written = within(s.events.append_with_record(&id, vec![delta("1"), delta("2")], rec.clone())).await.unwrap();
    assert_eq!(written.iter().map(|e| e.index).collect::<Vec<_>>(), [1, 2]);
    let other = replica_or_same(state.as_ref()).await;
    assert_eq!(within(other.sessions.get(&id)).await.unwrap(), Some(rec.clone()));
    assert_eq!(within(other.events.len(&id)).await.unwrap(), 3);

    let ghost = SessionId::generate();
    let err = within(s.events.append_with_record(&ghost, vec![delta("x")], record(&ghost))).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    assert!(within(s.sessions.get(&ghost)).await.unwrap().is_none());
}

/// `read` from any index, with limits, empty past the end.
pub async fn read_from_and_limit(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let id = session(&s).await;
    within(s.events.append(&id, (0..300).map(|i| delta(i.to_string())).collect())).await.unwrap();
    for from in [0, 1, 127, 299, 300, 350] {
        let events = within(s.events.read(&id, from, None)).await.unwrap();
        assert_eq!(events.iter().map(|e| e.index).collect::<Vec<_>>(), (from..300).collect::<Vec<_>>());
        assert!(events.iter().all(|e| text_of(&e.data) == e.index.to_string()));
    }
    let events = within(s.events.read(&id, 100, Some(5))).await.unwrap();
    assert_eq!(events.iter().map(|e| e.index).collect::<Vec<_>>(), [100, 101, 102, 103, 104]);
    assert!(within(s.events.read(&id, 0, Some(0))).await.unwrap().is_empty());
}

const APPENDERS: u64 = 6;
const PER_APPENDER: u64 = 40;
const TOTAL: u64 = APPENDERS * PER_APPENDER;

async fn collect(stores: Stores, id: SessionId, from: u64, pause: Duration) -> Vec<u64> {
    let mut stream = stores.events.follow(&id, from).await.unwrap();
    let mut seen = Vec::new();
    while seen.last().is_none_or(|&last| last + 1 < TOTAL) {
        let event = stream.next().await.expect("stream ended early").unwrap();
        seen.push(event.index);
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    seen
}

async fn follow_while_appending(appending: Stores, following: Stores) {
    let id = session(&appending).await;
    within(appending.events.append(&id, (0..20).map(|i| delta(i.to_string())).collect())).await.unwrap();
    let mut followers = Vec::new();
    for (from, pause) in
        [(0, Duration::ZERO), (10, Duration::ZERO), (0, Duration::from_millis(1)), (200, Duration::ZERO)]
    {
        followers.push((from, tokio::spawn(collect(following.clone(), id.clone(), from, pause))));
    }
    let mut appenders = Vec::new();
    for a in 0..APPENDERS {
        let (events, id) = (appending.events.clone(), id.clone());
        appenders.push(tokio::spawn(async move {
            let per = if a == 0 { PER_APPENDER - 20 } else { PER_APPENDER };
            for n in 0..per {
                events.append(&id, vec![delta(format!("{a}:{n}"))]).await.unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    followers.push((5, tokio::spawn(collect(following.clone(), id.clone(), 5, Duration::ZERO))));
    for task in appenders {
        within(task).await.unwrap();
    }
    for (from, task) in followers {
        let seen = within(task).await.unwrap();
        assert_eq!(seen, (from..TOTAL).collect::<Vec<_>>(), "follower from {from}");
    }
}

/// Replay-then-follow while appends run: every index once, in order, from any start (behind,
/// ahead of the log, joining late).
pub async fn followers_see_every_event_once(backend: &dyn Backend) {
    let state = backend.fresh().await;
    follow_while_appending(state.stores(), state.stores()).await;
}

/// The same when the followers use another replica's handle than the appenders.
pub async fn followers_on_another_handle_see_appends(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let other = replica_or_same(state.as_ref()).await;
    follow_while_appending(state.stores(), other).await;
}

/// A follower of an empty log waits for the first event.
pub async fn follower_of_an_empty_log_waits(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let id = session(&s).await;
    let mut stream = within(s.events.follow(&id, 0)).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(50), stream.next()).await;
    assert!(waiting.is_err(), "nothing to yield yet");
    within(s.events.append(&id, vec![delta("first")])).await.unwrap();
    assert_eq!(within(stream.next()).await.unwrap().unwrap().index, 0);
}

/// Deleting the session ends its streams (on every handle).
pub async fn deleting_a_session_ends_its_streams(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let other = replica_or_same(state.as_ref()).await;
    let s = state.stores();
    let id = session(&s).await;
    within(s.events.append(&id, vec![delta("a")])).await.unwrap();
    let mut stream = within(s.events.follow(&id, 0)).await.unwrap();
    let mut remote = within(other.events.follow(&id, 0)).await.unwrap();
    assert_eq!(within(stream.next()).await.unwrap().unwrap().index, 0);
    assert_eq!(within(remote.next()).await.unwrap().unwrap().index, 0);
    assert!(within(s.sessions.delete(&id)).await.unwrap());
    assert!(within(stream.next()).await.is_none());
    assert!(within(remote.next()).await.is_none());
}

/// The agent kv: get/put/overwrite/delete/keys with odd keys.
pub async fn kv_round_trip(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let kv = state.stores().kv;
    assert_eq!(within(kv.get("pr:acme/checkout#42")).await.unwrap(), None);
    within(kv.put("pr:acme/checkout#42", json!({"agentId": "bc-1"}))).await.unwrap();
    within(kv.put("pr:acme/checkout#42", json!({"agentId": "bc-2"}))).await.unwrap();
    within(kv.put("pr:acme/other#1", json!(3))).await.unwrap();
    within(kv.put("../escape", json!("safe"))).await.unwrap();
    assert_eq!(within(kv.get("pr:acme/checkout#42")).await.unwrap(), Some(json!({"agentId": "bc-2"})));
    assert_eq!(within(state.reopen().await.stores().kv.get("../escape")).await.unwrap(), Some(json!("safe")));
    assert_eq!(within(kv.keys("pr:acme/")).await.unwrap(), ["pr:acme/checkout#42", "pr:acme/other#1"]);
    assert_eq!(within(kv.keys("")).await.unwrap().len(), 3);
    assert!(within(kv.delete("pr:acme/other#1")).await.unwrap());
    assert!(!within(kv.delete("pr:acme/other#1")).await.unwrap());
    assert_eq!(within(kv.keys("pr:")).await.unwrap(), ["pr:acme/checkout#42"]);
}

/// Empty and over-long keys are `InvalidKey`.
pub async fn kv_rejects_invalid_keys(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let kv = state.stores().kv;
    let err = within(kv.put("", json!(1))).await.unwrap_err();
    assert!(matches!(err, Error::InvalidKey { reason: "empty", .. }), "{err}");
    let err = within(kv.get(&"/".repeat(100))).await.unwrap_err();
    assert!(matches!(err, Error::InvalidKey { reason: "too long", .. }), "{err}");
}

/// A session's kv is its own; the agent scope is the kv store's data; writes to a missing
/// session are `SessionNotFound`.
pub async fn host_data_is_scoped(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let (a, b) = (session(&s).await, session(&s).await);
    let (sa, sb) = (DataScope::Session(a), DataScope::Session(b));
    within(s.data.kv_put(&sa, "k", json!("from a"))).await.unwrap();
    within(s.data.kv_put(&DataScope::Agent, "k", json!("shared"))).await.unwrap();
    assert_eq!(within(s.data.kv_get(&sa, "k")).await.unwrap(), Some(json!("from a")));
    assert_eq!(within(s.data.kv_get(&sb, "k")).await.unwrap(), None);
    assert_eq!(within(s.data.kv_keys(&sb, "")).await.unwrap(), Vec::<String>::new());
    assert_eq!(within(s.kv.get("k")).await.unwrap(), Some(json!("shared")));
    assert_eq!(within(s.data.kv_keys(&sa, "")).await.unwrap(), ["k"]);
    assert!(!within(s.data.kv_delete(&sb, "k")).await.unwrap());
    assert!(within(s.data.kv_delete(&sa, "k")).await.unwrap());
    let ghost = DataScope::Session(SessionId::generate());
    let err = within(s.data.file_write(&ghost, "x", b"1".to_vec())).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    assert_eq!(within(s.data.kv_get(&ghost, "k")).await.unwrap(), None, "reads of a missing session are empty");
}

/// Files: write, overwrite, read, list (sorted, by prefix), delete, folders vs files.
pub async fn host_files_round_trip(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let id = session(&s).await;
    let scope = DataScope::Session(id);
    let data = &s.data;
    within(data.file_write(&scope, "reports/a.txt", b"alpha".to_vec())).await.unwrap();
    within(data.file_write(&scope, "reports/b.bin", vec![0, 255])).await.unwrap();
    within(data.file_write(&scope, "top.md", b"# hi".to_vec())).await.unwrap();
    within(data.file_write(&scope, "top.md", b"# hello".to_vec())).await.unwrap();
    assert_eq!(within(data.file_read(&scope, "reports/a.txt")).await.unwrap().as_deref(), Some(&b"alpha"[..]));
    assert_eq!(within(data.file_read(&scope, "nope")).await.unwrap(), None);
    assert_eq!(within(data.file_read(&scope, "top.md/x")).await.unwrap(), None);
    let listed = within(data.file_list(&scope, "")).await.unwrap();
    let paths: Vec<_> = listed.iter().map(|f| (f.path.as_str(), f.size)).collect();
    assert_eq!(paths, [("reports/a.txt", 5), ("reports/b.bin", 2), ("top.md", 7)]);
    assert_eq!(within(data.file_list(&scope, "reports/")).await.unwrap().len(), 2);
    assert_eq!(within(data.file_list(&DataScope::Agent, "")).await.unwrap(), []);
    assert!(within(data.file_delete(&scope, "top.md")).await.unwrap());
    assert!(!within(data.file_delete(&scope, "top.md")).await.unwrap());
    let err = within(data.file_read(&scope, "reports")).await.unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }), "{err}");
    let err = within(data.file_write(&scope, "reports/a.txt/deeper", b"x".to_vec())).await.unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }), "{err}");
    let err = within(data.file_write(&scope, "reports", b"x".to_vec())).await.unwrap_err();
    assert!(matches!(err, Error::InvalidPath { .. }), "{err}");
}

/// No file path leaves its area.
pub async fn host_file_paths_stay_inside(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let data = state.stores().data;
    for bad in ["../kv/x.json", "/etc/passwd", "a/../../b", ".secret", ""] {
        let err = within(data.file_write(&DataScope::Agent, bad, b"x".to_vec())).await.unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
        let err = within(data.file_read(&DataScope::Agent, bad)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
    }
}

/// A session's workspace exists only for a live session; a call's scratch folder comes and goes.
pub async fn workspaces_exist_for_live_sessions(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let s = state.stores();
    let id = session(&s).await;
    let dir = within(s.workspaces.session_workspace(&id)).await.unwrap();
    assert!(dir.is_dir());
    let err = within(s.workspaces.session_workspace(&SessionId::generate())).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    let call = CallId::generate("inspect_pr");
    let scratch = within(s.workspaces.call_workspace(&call)).await.unwrap();
    assert!(scratch.is_dir());
    assert_eq!(scratch, s.workspaces.call_workspace_path(&call));
    within(s.workspaces.remove_call_workspace(&call)).await.unwrap();
    assert!(!scratch.exists());
    within(s.workspaces.remove_call_workspace(&call)).await.unwrap();
}

fn firing(owner: &str, minute: u32) -> FiringRecord {
    let due = Utc.with_ymd_and_hms(2026, 1, 1, 9, minute, 0).unwrap();
    FiringRecord {
        kind: TimedKind::Schedule,
        owner: owner.into(),
        due_at: due,
        trigger: "cron".into(),
        status: FiringStatus::Claimed,
        session_ids: Vec::new(),
        claimed_at: due,
        finished_at: None,
        error: None,
    }
}

/// One claim of a key wins, also across handles racing for it; updates, history, open firings.
pub async fn firings_are_claimed_once(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let mut handles = vec![state.timed()];
    for _ in 0..2 {
        handles.push(state.reopen().await.timed());
    }
    let mut racers = Vec::new();
    for n in 0..9 {
        let timed = handles[n % 3].clone();
        racers.push(tokio::spawn(async move { timed.claim_firing(firing("daily", 0)).await.unwrap() }));
    }
    let mut wins = 0;
    for racer in racers {
        wins += usize::from(within(racer).await.unwrap());
    }
    assert_eq!(wins, 1, "exactly one claim of a key wins");
    let timed = &handles[1];
    assert!(within(timed.claim_firing(firing("daily", 1))).await.unwrap());
    assert_eq!(within(timed.open_firings()).await.unwrap().len(), 2);
    let mut done = firing("daily", 0);
    done.status = FiringStatus::Completed;
    done.session_ids = vec![SessionId::generate()];
    done.finished_at = Some(done.due_at);
    within(timed.update_firing(done.clone())).await.unwrap();
    let rows = within(handles[2].firings(TimedKind::Schedule, "daily")).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.status).collect::<Vec<_>>(), [FiringStatus::Completed, FiringStatus::Claimed]);
    assert_eq!(rows[0], done);
    assert!(within(timed.firings(TimedKind::Reminder, "daily")).await.unwrap().is_empty());
    assert_eq!(within(timed.open_firings()).await.unwrap().len(), 1);
    let err = within(timed.claim_firing(firing("../x", 0))).await.unwrap_err();
    assert!(matches!(err, Error::InvalidKey { .. }), "{err}");
}

/// Reminders: put, replace, get, list oldest first.
pub async fn reminders_round_trip(backend: &dyn Backend) {
    let state = backend.fresh().await;
    let timed = state.timed();
    let at = |minute| Utc.with_ymd_and_hms(2026, 1, 1, 9, minute, 0).unwrap();
    let reminder = |id: &str, minute| ReminderRecord {
        id: id.into(),
        session_id: SessionId::generate(),
        continuation_token: None,
        principal: "local".into(),
        purpose: Some("check the build".into()),
        cadence: "every".into(),
        cadence_value: "2h".into(),
        prompt: Some("Is it green?".into()),
        until: None,
        handler: None,
        args: json!({"n": 1}),
        status: "active".into(),
        next_due_at: Some(at(minute + 1)),
        created_at: at(minute),
        fired: 0,
    };
    within(timed.put_reminder(reminder("rem_b", 5))).await.unwrap();
    within(timed.put_reminder(reminder("rem_a", 7))).await.unwrap();
    let mut done = reminder("rem_b", 5);
    done.status = "done".into();
    done.fired = 3;
    within(timed.put_reminder(done.clone())).await.unwrap();
    let other = state.reopen().await.timed();
    assert_eq!(within(other.reminder("rem_b")).await.unwrap(), Some(done));
    assert_eq!(within(other.reminder("rem_zz")).await.unwrap(), None);
    assert_eq!(within(other.reminder("../x")).await.unwrap(), None);
    let ids: Vec<String> = within(other.reminders()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["rem_b", "rem_a"], "oldest first");
}
