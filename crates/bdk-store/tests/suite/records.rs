//! Guards the record that rides in the log: a new session's first record and every
//! `append_with_record` are durable with their events in one commit (one file sync, no
//! directory sync), `session.json` follows without a sync, and whatever a power loss or a kill
//! leaves of `session.json` (an older copy, a torn file) is rebuilt from the log, while a newer
//! `session.json` (a status written after the events) still wins over the log's older record.

use bdk_protocol::SessionId;
use bdk_store::{EventLog, SessionRecord, SessionStatus, SessionStore, SyncStats};

use super::support::{Fixture, delta, record, within};

fn with_token(id: &SessionId, token: &str) -> SessionRecord {
    let mut rec = record(id);
    rec.continuation_token = Some(token.into());
    rec.status = Some(SessionStatus::Running);
    rec
}

#[tokio::test]
async fn a_record_and_its_events_cost_one_file_sync() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    let before = fx.store.syncs();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    // Nothing yet: the first commit makes the new folder durable with its events.
    assert_eq!(fx.store.syncs().since(before), SyncStats::default());
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    // The log's data, then the folder's entries and `sessions/`; the record rides in it.
    assert_eq!(fx.store.syncs().since(before), SyncStats { file_syncs: 1, dir_syncs: 2 });

    let before = fx.store.syncs();
    within(fx.store.append_with_record(&id, vec![delta("second")], with_token(&id, "two"))).await.unwrap();
    assert_eq!(fx.store.syncs().since(before), SyncStats { file_syncs: 1, dir_syncs: 0 });
    let got = within(fx.store.get(&id)).await.unwrap().unwrap();
    assert_eq!(got.continuation_token.as_deref(), Some("two"));

    // Events read back as they were appended: the record is not part of any event.
    let events = within(fx.reopen().read(&id, 0, None)).await.unwrap();
    assert_eq!(events.len(), 2);
    let first_line = std::fs::read_to_string(fx.store.layout().events_path(&id)).unwrap();
    let first_line = first_line.lines().next().unwrap();
    let expected = serde_json::to_string(&events[0]).unwrap();
    assert!(first_line.starts_with(&expected[..expected.len() - 1]), "{first_line}");
    assert!(first_line.contains("\"sessionRecord\":{"), "{first_line}");
}

/// A session created by one store and first appended to by another (a restart between the
/// two): the log opened empty syncs the folder with its first commit, as a created log does.
#[tokio::test]
async fn a_log_opened_empty_syncs_its_folder_with_its_first_commit() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    let store = fx.reopen();
    let before = store.syncs();
    within(store.append(&id, vec![delta("first")])).await.unwrap();
    assert_eq!(store.syncs().since(before), SyncStats { file_syncs: 1, dir_syncs: 2 });
    let before = store.syncs();
    within(store.append(&id, vec![delta("second")])).await.unwrap();
    assert_eq!(store.syncs().since(before), SyncStats { file_syncs: 1, dir_syncs: 0 });
}

#[tokio::test]
async fn a_record_in_the_log_newer_than_session_json_wins_after_a_restart() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    let json = fx.store.layout().session_json(&id);
    let older = std::fs::read(&json).unwrap();
    within(fx.store.append_with_record(&id, vec![delta("second")], with_token(&id, "two"))).await.unwrap();
    within(fx.store.append(&id, vec![delta("turn")])).await.unwrap();

    // The last replacement of `session.json` was lost (power loss, or a kill right after the
    // log's sync): the file holds the older record.
    std::fs::write(&json, &older).unwrap();
    let store = fx.reopen();
    let got = within(store.get(&id)).await.unwrap().unwrap();
    assert_eq!(got.continuation_token.as_deref(), Some("two"));
    let listed = within(store.list()).await.unwrap();
    assert_eq!(listed[0].continuation_token.as_deref(), Some("two"));
    let open = within(store.list_open()).await.unwrap();
    assert_eq!(open.iter().map(|r| &r.id).collect::<Vec<_>>(), [&id]);

    // The next write accounts for the log's record, and is not overridden by it.
    let mut settled = got;
    settled.status = Some(SessionStatus::Waiting);
    within(store.update_derived(settled.clone())).await.unwrap();
    assert_eq!(within(fx.reopen().get(&id)).await.unwrap(), Some(settled));
}

#[tokio::test]
async fn a_status_written_after_the_events_wins_over_the_logs_older_record() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    within(fx.store.append_with_record(&id, vec![delta("message")], with_token(&id, "two"))).await.unwrap();
    within(fx.store.append(&id, vec![delta("turn")])).await.unwrap();
    let mut waiting = with_token(&id, "two");
    waiting.status = Some(SessionStatus::Waiting);
    within(fx.store.update_derived(waiting.clone())).await.unwrap();
    let got = within(fx.reopen().get(&id)).await.unwrap().unwrap();
    assert_eq!(got.status, Some(SessionStatus::Waiting));
    assert_eq!(got.continuation_token.as_deref(), Some("two"));
    // A settled session is not listed as open.
    assert!(within(fx.reopen().list_open()).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_torn_session_json_is_rebuilt_from_the_log() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    within(fx.store.append_with_record(&id, vec![delta("message")], with_token(&id, "two"))).await.unwrap();
    // A power loss after a rename whose data never reached the disk.
    std::fs::write(fx.store.layout().session_json(&id), b"").unwrap();
    let store = fx.reopen();
    let got = within(store.get(&id)).await.unwrap().unwrap();
    assert_eq!(got.continuation_token.as_deref(), Some("two"));
    assert_eq!(within(store.list()).await.unwrap().len(), 1);
    assert_eq!(within(store.read(&id, 0, None)).await.unwrap().len(), 1);

    // A session torn before its first commit was never answered: there is none.
    let never = SessionId::generate();
    within(fx.store.create(with_token(&never, "x"))).await.unwrap();
    std::fs::write(fx.store.layout().session_json(&never), b"{\"id\":").unwrap();
    assert_eq!(within(fx.reopen().get(&never)).await.unwrap(), None);
}

#[tokio::test]
async fn a_created_sessions_first_record_is_in_its_first_commit() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    within(fx.store.append(&id, vec![delta("a")])).await.unwrap();
    std::fs::remove_file(fx.store.layout().session_json(&id)).unwrap();
    std::fs::write(fx.store.layout().session_json(&id), b"\0\0\0").unwrap();
    let got = within(fx.reopen().get(&id)).await.unwrap().unwrap();
    assert_eq!(got.continuation_token.as_deref(), Some("one"));
    // Only the first commit carries it.
    within(fx.store.append(&id, vec![delta("b")])).await.unwrap();
    let log = std::fs::read_to_string(fx.store.layout().events_path(&id)).unwrap();
    assert_eq!(log.matches("\"sessionRecord\"").count(), 1);
}

/// `create` writes `session.json` in place and the first commit, which carries the same record,
/// leaves it alone: a new session's record reaches the folder once, with no rename. Readers
/// that do not know the file is current (another process, a restart) find the same record in
/// the log.
#[cfg(unix)]
#[tokio::test]
async fn a_new_sessions_session_json_is_written_once() {
    use std::os::unix::fs::MetadataExt;

    let fx = Fixture::new();
    let id = SessionId::generate();
    let path = fx.store.layout().session_json(&id);
    let record = with_token(&id, "one");
    within(fx.store.create(record.clone())).await.unwrap();
    let created = std::fs::metadata(&path).unwrap();
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (after.ino(), after.mtime(), after.mtime_nsec()),
        (created.ino(), created.mtime(), created.mtime_nsec())
    );
    assert_eq!(within(fx.store.get(&id)).await.unwrap(), Some(record.clone()));
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    assert_eq!(within(fx.reopen().get(&id)).await.unwrap(), Some(record));
}

/// The commits of a session that exists, its record's replacements with them included, run
/// on the store's writer threads: none hands work to tokio's blocking pool.
#[tokio::test]
async fn appends_and_their_records_make_no_blocking_pool_hop() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    let before = fx.store.blocking_hops();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    assert_eq!(fx.store.blocking_hops() - before, 1, "creating the folder is one hop");
    let before = fx.store.blocking_hops();
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    within(fx.store.append_with_record(&id, vec![delta("message")], with_token(&id, "two"))).await.unwrap();
    let mut waiting = with_token(&id, "two");
    waiting.status = Some(SessionStatus::Waiting);
    within(fx.store.append_with_record(&id, vec![delta("closing")], waiting.clone())).await.unwrap();
    assert_eq!(within(fx.store.read(&id, 0, None)).await.unwrap().len(), 3);
    assert_eq!(fx.store.blocking_hops() - before, 0);
    assert_eq!(within(fx.store.get(&id)).await.unwrap(), Some(waiting));
}

/// A session's open-session marker is made once while its log is open: a settled record keeps
/// it (the next message would make it again), and releasing the log (its actor retired)
/// removes it. A process that stops first leaves it, and the next start's listing drops it.
#[tokio::test]
async fn a_sessions_marker_stays_between_turns_and_goes_with_its_log() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    let marker = fx.store.layout().root().join("open").join(id.as_str());
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    assert!(marker.exists(), "a running record is marked before it is written");
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    let mut waiting = with_token(&id, "one");
    waiting.status = Some(SessionStatus::Waiting);
    within(fx.store.append_with_record(&id, vec![delta("closing")], waiting.clone())).await.unwrap();
    assert!(marker.exists(), "kept while the log is open");
    assert!(within(fx.store.list_open()).await.unwrap().is_empty(), "not listed as open");
    assert!(marker.exists(), "the listing leaves a marker an open log keeps");
    within(fx.store.append_with_record(&id, vec![delta("message")], with_token(&id, "two"))).await.unwrap();
    within(fx.store.append_with_record(&id, vec![delta("closing")], waiting.clone())).await.unwrap();
    assert!(fx.store.release_idle_log(&id));
    assert!(!marker.exists(), "released with its log");

    // Stopped with the log open: the next start drops the marker of the settled session.
    let other = SessionId::generate();
    let marker = fx.store.layout().root().join("open").join(other.as_str());
    within(fx.store.create(with_token(&other, "one"))).await.unwrap();
    let mut waiting = with_token(&other, "one");
    waiting.status = Some(SessionStatus::Waiting);
    within(fx.store.append_with_record(&other, vec![delta("closing")], waiting)).await.unwrap();
    assert!(marker.exists());
    assert!(within(fx.reopen().list_open()).await.unwrap().is_empty());
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_record_replaced_before_the_first_commit_is_the_one_that_commit_carries() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    let mut titled = with_token(&id, "one");
    titled.title = Some("named".into());
    within(fx.store.update_derived(titled.clone())).await.unwrap();
    within(fx.store.append(&id, vec![delta("first")])).await.unwrap();
    assert_eq!(within(fx.store.get(&id)).await.unwrap(), Some(titled.clone()));
    // Even with `session.json` torn, the log has the newer record, not the created one.
    std::fs::write(fx.store.layout().session_json(&id), b"").unwrap();
    assert_eq!(within(fx.reopen().get(&id)).await.unwrap(), Some(titled));
}

#[tokio::test]
async fn reading_a_record_reads_no_log_unless_session_json_may_be_behind() {
    let fx = Fixture::new();
    let id = SessionId::generate();
    within(fx.store.create(with_token(&id, "one"))).await.unwrap();
    within(fx.store.append_with_record(&id, vec![delta("message")], with_token(&id, "two"))).await.unwrap();
    within(fx.store.append(&id, vec![delta("the turn runs")])).await.unwrap();
    // This process wrote `session.json` after the log's last record: it is current.
    let reads = fx.store.log_reads();
    within(fx.store.list()).await.unwrap();
    within(fx.store.get(&id)).await.unwrap();
    assert_eq!(fx.store.log_reads(), reads);
    // After a restart the log has grown past what `session.json` accounts for (the turn's
    // events): the bytes past it are read once per record read, until the next record write.
    let store = fx.reopen();
    assert_eq!(within(store.list()).await.unwrap()[0].continuation_token.as_deref(), Some("two"));
    assert_eq!(store.log_reads(), 1);
    let mut waiting = with_token(&id, "two");
    waiting.status = Some(SessionStatus::Waiting);
    within(store.update_derived(waiting)).await.unwrap();
    let reads = store.log_reads();
    within(store.list()).await.unwrap();
    assert_eq!(store.log_reads(), reads);
    // Nor after a restart: `session.json` now accounts for the whole log.
    let restarted = fx.reopen();
    within(restarted.list()).await.unwrap();
    assert_eq!(restarted.log_reads(), 0);
}
