//! Guards the append path under write faults (a full disk, injected through `faults`): a failed
//! write fails only its own batch, a torn line it leaves is cut before the next write even when
//! the first cut fails too, readers and followers never see it, and the writer keeps running.

use std::time::Duration;

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{EventData, SessionId};

use super::faults::{self, Fault};
use crate::api::{EventLog, NewEvent, SessionStore};
use crate::fs::FsStore;
use crate::fs::recover::recover;
use crate::fs::syncs::SyncCounters;
use crate::record::SessionRecord;

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

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future).await.expect("timed out")
}

/// A store in a temp dir with one session created in it, and that session's log file.
async fn with_session() -> (tempfile::TempDir, FsStore, SessionId, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let id = SessionId::generate();
    store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
    let path = store.layout().events_path(&id);
    (dir, store, id, path)
}

#[tokio::test]
async fn a_torn_write_whose_cut_also_fails_is_cut_before_the_next_append() {
    let (_dir, store, id, path) = with_session().await;
    within(store.append(&id, vec![delta("a"), delta("b")])).await.unwrap();
    let mut follower = within(store.follow(&id, 0)).await.unwrap();
    let durable = std::fs::metadata(&path).unwrap().len();

    faults::inject(&path, Fault { torn_writes: 1, failed_cuts: 1, ..Fault::default() });
    let error = within(store.append(&id, vec![delta("lost")])).await.unwrap_err();
    assert!(error.is_write_fault(), "{error}");
    assert!(std::fs::metadata(&path).unwrap().len() > durable, "the torn half line is still in the file");

    // Reads stop at the durable mark; the torn bytes are invisible.
    assert_eq!(texts(&within(store.read(&id, 0, None)).await.unwrap()), ["a", "b"]);
    assert_eq!(within(store.len(&id)).await.unwrap(), 2);

    // Writes work again: the torn bytes are cut first, and the next event takes index 2.
    let written = within(store.append(&id, vec![delta("c")])).await.unwrap();
    assert_eq!(written[0].index, 2);
    assert_eq!(texts(&within(store.read(&id, 0, None)).await.unwrap()), ["a", "b", "c"]);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(within(follower.next()).await.unwrap().unwrap().index);
    }
    assert_eq!(seen, [0, 1, 2], "a follower saw no gap and no torn event");

    // The file itself is clean: a restart finds nothing to drop.
    drop(follower);
    store.close_log(&id);
    let recovered = recover(&path, &SyncCounters::default()).unwrap();
    assert_eq!((recovered.next_index, recovered.dropped_bytes, recovered.cut_pending), (3, 0, false));
}

#[tokio::test]
async fn a_torn_write_is_cut_at_once_when_the_cut_works() {
    let (_dir, store, id, path) = with_session().await;
    within(store.append(&id, vec![delta("a")])).await.unwrap();
    let durable = std::fs::metadata(&path).unwrap().len();

    faults::inject(&path, Fault { torn_writes: 2, ..Fault::default() });
    for _ in 0..2 {
        let error = within(store.append(&id, vec![delta("lost")])).await.unwrap_err();
        assert!(error.is_write_fault(), "{error}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), durable, "cut back at once");
    }
    assert!(!within(store.log(&id)).await.unwrap().is_closed(), "the writer still runs");
    within(store.append(&id, vec![delta("b")])).await.unwrap();
    assert_eq!(texts(&within(store.read(&id, 0, None)).await.unwrap()), ["a", "b"]);
}

/// A new session's first commit syncs its folder after its data: when that folder sync fails,
/// the append fails alone and leaves nothing (the log is cut back), and the next append syncs
/// the folder before it answers, carrying the session's first record.
#[tokio::test]
async fn a_first_commit_whose_folder_sync_fails_keeps_nothing_and_the_next_one_syncs_the_folder() {
    let (dir, store, id, path) = with_session().await;
    faults::inject(&path, Fault { failed_dir_syncs: 1, ..Fault::default() });

    let error = within(store.append(&id, vec![delta("lost")])).await.unwrap_err();
    assert!(error.is_write_fault(), "{error}");
    assert!(within(store.read(&id, 0, None)).await.unwrap().is_empty());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "the failed commit was cut back");

    let before = store.syncs();
    within(store.append(&id, vec![delta("kept")])).await.unwrap();
    assert_eq!(store.syncs().since(before).dir_syncs, 2, "the folder is synced by the next commit");
    let events = within(store.read(&id, 0, None)).await.unwrap();
    assert_eq!(texts(&events), ["kept"]);
    assert_eq!(events[0].index, 0);
    // The first record rode in that commit: a store opened afresh reads it back.
    let reopened = FsStore::open(dir.path()).unwrap();
    assert!(within(reopened.get(&id)).await.unwrap().is_some());
    let before = store.syncs();
    within(store.append(&id, vec![delta("later")])).await.unwrap();
    assert_eq!(store.syncs().since(before).dir_syncs, 0);
}
