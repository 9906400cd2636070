//! The store's writer thread and the in-memory tail, through seams rather than timing: a batch
//! that spans several logs (the writer held inside another log's commit while appends queue),
//! one failing log in such a batch, and reads served from the tail (counted disk reads).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{EventData, SessionId};

use crate::api::{EventLog, NewEvent, SessionStore, SharedEvent};
use crate::error::Result;
use crate::fs::log::faults::{self, Fault};
use crate::fs::log::{TAIL_BYTES, TAIL_EVENTS};
use crate::fs::{FsStore, FsStoreOptions};
use crate::record::SessionRecord;

fn delta(text: &str) -> NewEvent {
    NewEvent::new(EventData::MessageAppended(TextDelta { delta: text.into() }))
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future).await.expect("timed out")
}

/// Yields to the runtime until `done` holds (the writer thread runs beside this test).
async fn until(mut done: impl FnMut() -> bool) {
    within(async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

async fn session(store: &FsStore) -> SessionId {
    let id = SessionId::generate();
    store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
    id
}

fn spawn_append(store: &FsStore, id: &SessionId, text: &str) -> tokio::task::JoinHandle<Result<Vec<SharedEvent>>> {
    let (store, id, events) = (store.clone(), id.clone(), vec![delta(text)]);
    tokio::spawn(async move { store.append(&id, events).await })
}

/// The most events a batch takes in these tests.
const BATCH: usize = 8;

/// A store with one writer thread whose batches take at most [`BATCH`] events.
fn store(dir: &tempfile::TempDir) -> FsStore {
    let options = FsStoreOptions { max_batch_events: BATCH, writer_threads: 1, ..FsStoreOptions::default() };
    FsStore::open_with(dir.path(), options).unwrap()
}

/// With the caller holding `blocker`'s write side: sends an append to `blocker`, which the
/// writer thread takes and then waits in, and queues `appends` behind it. Dropping the guard
/// lets them go as one batch. The blocking append fills a batch by itself, so the thread does
/// not look at the queue again before it waits.
async fn queue_behind(
    store: &FsStore,
    blocker: &SessionId,
    appends: &[(&SessionId, &str)],
) -> Vec<tokio::task::JoinHandle<Result<Vec<SharedEvent>>>> {
    let writer = store.inner.writer.clone();
    let sent = Arc::new(AtomicBool::new(false));
    let first = {
        let (store, id, sent) = (store.clone(), blocker.clone(), sent.clone());
        tokio::spawn(async move {
            sent.store(true, Ordering::SeqCst);
            store.append(&id, (0..BATCH).map(|_| delta("blocker")).collect()).await
        })
    };
    // Sent, then taken by the writer thread, which now waits for the guard.
    until(|| sent.load(Ordering::SeqCst) && writer.queued() == 0).await;
    let mut tasks = vec![first];
    tasks.extend(appends.iter().map(|(id, text)| spawn_append(store, id, text)));
    until(|| writer.queued() == appends.len()).await;
    tasks
}

#[tokio::test]
#[allow(clippy::await_holding_lock)] // the guard is what holds the writer thread
async fn a_batch_spanning_several_logs_makes_one_write_and_sync_per_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let (x, a, b) = (session(&store).await, session(&store).await, session(&store).await);
    let before = store.syncs();

    let blocker = within(store.log(&x)).await.unwrap();
    let guard = blocker.shared.hold_writes();
    let tasks = queue_behind(&store, &x, &[(&a, "a1"), (&b, "b1"), (&a, "a2"), (&b, "b2")]).await;
    drop(guard);
    let mut acked = Vec::new();
    for task in tasks {
        acked.push(within(task).await.unwrap().unwrap());
    }

    let indices: Vec<u64> = acked.iter().map(|events| events[0].index).collect();
    assert_eq!(indices, [0, 0, 0, 1, 1], "each log numbers its own events, in queue order");
    for (id, commits) in [(&x, 1), (&a, 1), (&b, 1)] {
        assert_eq!(within(store.log_info(id)).await.unwrap().commits, commits, "one group commit per log");
    }
    assert_eq!(store.syncs().since(before).file_syncs, 3, "one fdatasync per log");
    assert_eq!(within(store.read(&a, 0, None)).await.unwrap().len(), 2);
}

#[tokio::test]
#[allow(clippy::await_holding_lock)]
async fn a_failing_log_does_not_fail_another_log_in_the_same_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir);
    let (x, a, b) = (session(&store).await, session(&store).await, session(&store).await);
    within(store.append(&a, vec![delta("kept")])).await.unwrap();
    let a_path = store.layout().events_path(&a);
    let durable = std::fs::metadata(&a_path).unwrap().len();
    faults::inject(&a_path, Fault { torn_writes: 1, ..Fault::default() });

    let blocker = within(store.log(&x)).await.unwrap();
    let guard = blocker.shared.hold_writes();
    let tasks = queue_behind(&store, &x, &[(&a, "lost"), (&b, "b1")]).await;
    drop(guard);
    let mut results = Vec::new();
    for task in tasks {
        results.push(within(task).await.unwrap());
    }
    let error = results[1].as_ref().unwrap_err();
    assert!(error.is_write_fault(), "{error}");
    assert_eq!(results[2].as_ref().unwrap()[0].index, 0, "the other log's append went through");
    assert_eq!(std::fs::metadata(&a_path).unwrap().len(), durable, "the torn write was cut back");
    assert_eq!(within(store.read(&b, 0, None)).await.unwrap().len(), 1);

    // The failed log keeps working.
    let next = within(store.append(&a, vec![delta("again")])).await.unwrap();
    assert_eq!(next[0].index, 1);
    assert_eq!(within(store.read(&a, 0, None)).await.unwrap().len(), 2);
}

#[tokio::test]
async fn reads_and_follows_near_the_end_come_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let reads = store.log_reads();
    let id = session(&store).await;
    within(store.append(&id, vec![delta("a"), delta("b")])).await.unwrap();
    assert_eq!(store.log_reads(), reads, "a new session's log is not reopened or recovered");

    // A read and a follow from the start, right after the append: no disk read.
    assert_eq!(within(store.read(&id, 0, None)).await.unwrap().len(), 2);
    assert_eq!(within(store.read(&id, 1, Some(1))).await.unwrap()[0].index, 1);
    let mut follower = within(store.follow(&id, 0)).await.unwrap();
    within(store.append(&id, vec![delta("c")])).await.unwrap();
    for want in 0..3 {
        assert_eq!(within(follower.next()).await.unwrap().unwrap().index, want);
    }
    assert_eq!(store.log_reads(), reads, "served from the tail");

    // Past the tail's limit, the oldest events are read from the file.
    let many: Vec<NewEvent> = (0..TAIL_EVENTS).map(|i| delta(&i.to_string())).collect();
    within(store.append(&id, many)).await.unwrap();
    let all = within(store.read(&id, 0, None)).await.unwrap();
    assert_eq!(all.iter().map(|e| e.index).collect::<Vec<_>>(), (0..3 + TAIL_EVENTS as u64).collect::<Vec<_>>());
    assert_eq!(store.log_reads(), reads + 1, "one disk read for events older than the tail");
    let mut late = within(store.follow(&id, 1)).await.unwrap();
    assert_eq!(within(late.next()).await.unwrap().unwrap().index, 1);
    assert_eq!(store.log_reads(), reads + 2);
    // The newest events are still in memory.
    let newest = within(store.read(&id, 3, None)).await.unwrap();
    assert_eq!(newest.len(), TAIL_EVENTS);
    assert_eq!(store.log_reads(), reads + 2);
    for want in 3..3 + TAIL_EVENTS as u64 {
        assert_eq!(within(follower.next()).await.unwrap().unwrap().index, want, "live, in order");
    }
}

#[tokio::test]
async fn the_tail_is_bounded_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let id = session(&store).await;
    let big = "x".repeat(TAIL_BYTES / 2);
    within(store.append(&id, vec![delta(&big), delta(&big), delta(&big)])).await.unwrap();
    let reads = store.log_reads();
    assert_eq!(within(store.read(&id, 2, None)).await.unwrap().len(), 1);
    assert_eq!(store.log_reads(), reads, "the newest event fits");
    assert_eq!(within(store.read(&id, 0, None)).await.unwrap().len(), 3);
    assert_eq!(store.log_reads(), reads + 1, "the older ones were dropped from memory");
}

#[tokio::test]
async fn a_reopened_log_reads_from_disk_until_it_appends() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let id = session(&store).await;
    within(store.append(&id, vec![delta("a")])).await.unwrap();
    store.close_log(&id);
    let reads = store.log_reads();
    assert_eq!(within(store.read(&id, 0, None)).await.unwrap().len(), 1);
    assert_eq!(store.log_reads(), reads + 2, "recovery, then the read itself");
    within(store.append(&id, vec![delta("b")])).await.unwrap();
    assert_eq!(within(store.read(&id, 1, None)).await.unwrap().len(), 1);
    assert_eq!(store.log_reads(), reads + 2, "what this log committed since is in memory");
}

#[tokio::test]
#[allow(clippy::await_holding_lock)]
async fn a_commit_does_not_wait_for_another_logs_commit() {
    let dir = tempfile::tempdir().unwrap();
    let options = FsStoreOptions { max_batch_events: BATCH, writer_threads: 2, ..FsStoreOptions::default() };
    let store = FsStore::open_with(dir.path(), options).unwrap();
    let (x, a) = (session(&store).await, session(&store).await);

    let blocker = within(store.log(&x)).await.unwrap();
    let guard = blocker.shared.hold_writes();
    let tasks = queue_behind(&store, &x, &[]).await;
    // One thread waits inside X's commit; the other commits A meanwhile.
    let written = within(store.append(&a, vec![delta("a")])).await.unwrap();
    assert_eq!(written[0].index, 0);
    drop(guard);
    for task in tasks {
        within(task).await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_to_many_logs_keep_each_log_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(session(&store).await);
    }
    let mut followers = Vec::new();
    for id in &ids {
        followers.push(within(store.follow(id, 0)).await.unwrap());
    }
    let mut tasks = Vec::new();
    for id in &ids {
        for appender in 0..4 {
            let (store, id) = (store.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                for n in 0..10 {
                    let events = (0..=n % 3).map(|_| delta(&format!("{appender}"))).collect();
                    let written = store.append(&id, events).await.unwrap();
                    assert!(written.windows(2).all(|w| w[1].index == w[0].index + 1));
                }
            }));
        }
    }
    for task in tasks {
        within(task).await.unwrap();
    }
    let per_log: u64 = 4 * (0..10u64).map(|n| n % 3 + 1).sum::<u64>();
    for (id, follower) in ids.iter().zip(&mut followers) {
        let read = within(store.read(id, 0, None)).await.unwrap();
        assert_eq!(read.iter().map(|e| e.index).collect::<Vec<_>>(), (0..per_log).collect::<Vec<_>>());
        for want in 0..per_log {
            assert_eq!(within(follower.next()).await.unwrap().unwrap().index, want);
        }
    }
}

#[tokio::test]
async fn a_log_nobody_follows_keeps_no_channel_and_no_tail_from_before() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let id = session(&store).await;
    within(store.append(&id, vec![delta("a")])).await.unwrap();
    let memory = store.log_memory();
    assert_eq!((memory.open_logs, memory.live_channels, memory.tail_events), (1, 0, 1), "no follower, no channel");

    let mut first = within(store.follow(&id, 0)).await.unwrap();
    let mut second = within(store.follow(&id, 0)).await.unwrap();
    within(store.append(&id, vec![delta("b")])).await.unwrap();
    for follower in [&mut first, &mut second] {
        for want in 0..2 {
            assert_eq!(within(follower.next()).await.unwrap().unwrap().index, want);
        }
    }
    assert_eq!(store.log_memory().live_channels, 1, "one channel for both followers");
    drop(first);
    assert_eq!(store.log_memory().tail_events, 2, "a follower is left");
    drop(second);
    let memory = store.log_memory();
    assert_eq!((memory.live_channels, memory.tail_events), (0, 0), "the last follower took both");

    // What comes next is in memory again; what came before is read from the file.
    within(store.append(&id, vec![delta("c")])).await.unwrap();
    let reads = store.log_reads();
    assert_eq!(within(store.read(&id, 2, None)).await.unwrap().len(), 1);
    assert_eq!(store.log_reads(), reads);
    let mut late = within(store.follow(&id, 0)).await.unwrap();
    for want in 0..3 {
        assert_eq!(within(late.next()).await.unwrap().unwrap().index, want);
    }
    assert_eq!(store.log_reads(), reads + 1);
    assert!(!store.release_idle_log(&id), "followed");
    drop(late);
    assert!(store.release_idle_log(&id));
    assert_eq!(store.log_memory(), crate::fs::LogMemory::default());
}

/// The queue changes hands only when an append finds no thread listening (`writer.rs`): one
/// appender waiting for each append in turn, with every thread of the store's default count
/// racing back from its commit, is never left with an append nobody takes (each would wait
/// for the test's timeout), and neither are a few such appenders at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_one_at_a_time_are_always_taken() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let id = session(&store).await;
    for i in 0..300 {
        let written = within(store.append(&id, vec![delta("a")])).await.unwrap();
        assert_eq!(written[0].index, i);
    }
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let store = store.clone();
        let id = session(&store).await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..100 {
                within(store.append(&id, vec![delta("b")])).await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(task).await.unwrap();
    }
}

#[tokio::test]
async fn debounced_commits_are_acknowledged_written_and_synced_together_later() {
    let dir = tempfile::tempdir().unwrap();
    // A delay no test machine's pause reaches: every append below is acknowledged before it.
    let options = FsStoreOptions { sync_delay: Duration::from_secs(3), ..FsStoreOptions::default() };
    let store = FsStore::open_with(dir.path(), options).unwrap();
    let (a, b) = (session(&store).await, session(&store).await);
    let before = store.syncs();
    within(store.append(&a, vec![delta("a1")])).await.unwrap();
    // The appending task commits it itself: answered at its first poll, with no writer thread.
    {
        let mut append = std::pin::pin!(store.append(&a, vec![delta("a2")]));
        let polled = append.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        assert!(matches!(polled, std::task::Poll::Ready(Ok(_))), "answered at once");
    }
    within(store.append(&b, vec![delta("b1")])).await.unwrap();
    assert_eq!(store.syncs().since(before), crate::fs::SyncStats::default(), "acknowledged unsynced");
    // Written before it was acknowledged: another store on the same folder (a restarted
    // process) reads it back.
    let text = std::fs::read_to_string(store.layout().events_path(&a)).unwrap();
    assert!(text.contains("a1") && text.contains("a2"), "{text}");

    until(|| store.syncs().since(before).dir_syncs == 3).await;
    let synced = store.syncs().since(before);
    assert_eq!(synced.file_syncs, 2, "each log once: {synced:?}");
    assert_eq!(synced.dir_syncs, 3, "each new folder, and sessions/ once for both: {synced:?}");
    within(store.append(&a, vec![delta("a3")])).await.unwrap();
    let counters = store.sync_counters();
    drop(store);
    assert_eq!(counters.stats().since(before).file_syncs, 3, "closing the store syncs what is pending");
}
