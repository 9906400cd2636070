//! Guards session metadata: create/get/update/list, `session.json` replaced atomically (a reader
//! never sees a partial file, no temp files linger), and a deleted folder means no session.

use std::time::Duration;

use bdk_protocol::SessionId;
use bdk_store::{Error, EventLog, SessionRecord, SessionStore, WorkspaceStore};

use super::support::{Fixture, delta, record, within};

#[tokio::test]
async fn create_get_update_list() {
    let fx = Fixture::new();
    let a = fx.session().await;
    tokio::time::sleep(Duration::from_millis(2)).await;
    let b = fx.session().await;

    let mut rec = within(fx.store.get(&a)).await.unwrap().unwrap();
    assert_eq!(rec, record(&a).clone_with_times(&rec));
    rec.title = Some("Weather in Paris".into());
    rec.continuation_token = Some("tok_2".into());
    rec.extra.insert("custom".into(), serde_json::json!(1));
    within(fx.store.update(rec.clone())).await.unwrap();
    assert_eq!(within(fx.reopen().get(&a)).await.unwrap(), Some(rec));

    let ids: Vec<SessionId> = within(fx.store.list()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, [a.clone(), b], "oldest first");

    let err = within(fx.store.create(record(&a))).await.unwrap_err();
    assert!(matches!(err, Error::SessionExists(_)), "{err}");
    let ghost = SessionId::generate();
    assert!(within(fx.store.get(&ghost)).await.unwrap().is_none());
    let err = within(fx.store.update(record(&ghost))).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    assert!(!fx.store.layout().session_dir(&ghost).exists());
}

trait CloneWithTimes {
    fn clone_with_times(&self, other: &SessionRecord) -> SessionRecord;
}

impl CloneWithTimes for SessionRecord {
    fn clone_with_times(&self, other: &SessionRecord) -> SessionRecord {
        SessionRecord { created_at: other.created_at, updated_at: other.updated_at, ..self.clone() }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_json_is_replaced_atomically() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let path = fx.store.layout().session_json(&id);
    let writer = {
        let (store, id) = (fx.store.clone(), id.clone());
        tokio::spawn(async move {
            for n in 0..200 {
                let mut rec = record(&id);
                // Sizes vary so a torn write would show as invalid JSON or a mixed title.
                rec.title = Some(format!("{n}-{}", "x".repeat(n * 37 % 3000)));
                store.update(rec).await.unwrap();
            }
        })
    };
    let reader = tokio::task::spawn_blocking(move || {
        let mut reads = 0;
        while reads < 2000 {
            let bytes = std::fs::read(&path).unwrap();
            let rec: SessionRecord = serde_json::from_slice(&bytes).expect("always a complete record");
            if let Some(title) = rec.title {
                let (n, xs) = title.split_once('-').unwrap();
                assert_eq!(xs.len(), n.parse::<usize>().unwrap() * 37 % 3000);
            }
            reads += 1;
        }
    });
    within(writer).await.unwrap();
    within(reader).await.unwrap();

    let names: Vec<String> = std::fs::read_dir(fx.store.layout().session_dir(&id))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["events.ndjson", "session.json"], "no temp files left behind");
}

#[tokio::test]
async fn deleting_the_folder_removes_the_session() {
    let fx = Fixture::new();
    let (keep, gone) = (fx.session().await, fx.session().await);
    within(fx.store.append(&gone, vec![delta("a")])).await.unwrap();
    within(fx.store.session_workspace(&gone)).await.unwrap();

    // Removed by hand, behind the running store's back.
    std::fs::remove_dir_all(fx.store.layout().session_dir(&gone)).unwrap();

    let ids: Vec<SessionId> = within(fx.store.list()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, [keep]);
    assert!(within(fx.store.get(&gone)).await.unwrap().is_none());
    let err = within(fx.store.append(&gone, vec![delta("b")])).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    let err = within(fx.store.read(&gone, 0, None)).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    let err = within(fx.store.follow(&gone, 0)).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    assert!(!fx.store.layout().session_dir(&gone).exists(), "nothing recreated it");

    // And after a restart.
    let store = fx.reopen();
    assert_eq!(within(store.list()).await.unwrap().len(), 1);
    assert!(within(store.read(&gone, 0, None)).await.is_err());

    // The id can be used again, starting from an empty log.
    within(fx.store.create(record(&gone))).await.unwrap();
    assert_eq!(within(fx.store.append(&gone, vec![delta("new")])).await.unwrap()[0].index, 0);
    assert_eq!(within(fx.store.read(&gone, 0, None)).await.unwrap().len(), 1);
}

#[tokio::test]
async fn delete_through_the_api() {
    let fx = Fixture::new();
    let id = fx.session().await;
    within(fx.store.append(&id, vec![delta("a")])).await.unwrap();
    assert!(within(fx.store.delete(&id)).await.unwrap());
    assert!(!within(fx.store.delete(&id)).await.unwrap());
    assert!(within(fx.store.list()).await.unwrap().is_empty());
    let leftovers = std::fs::read_dir(fx.store.layout().sessions_dir()).unwrap().count();
    assert_eq!(leftovers, 0, "the folder and its trash are gone");
    let err = within(fx.store.append(&id, vec![delta("b")])).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
}

#[tokio::test]
async fn unreadable_records_are_skipped_in_listings() {
    let fx = Fixture::new();
    let (good, bad) = (fx.session().await, fx.session().await);
    // A log with events but no record in it (as written before records rode in the log): the
    // damaged `session.json` cannot be rebuilt.
    let line = r#"{"type":"session.waiting","index":0,"sessionId":"ses_x","at":"2025-01-01T00:00:00.000Z","data":{}}"#;
    std::fs::write(fx.store.layout().events_path(&bad), format!("{line}\n")).unwrap();
    std::fs::write(fx.store.layout().session_json(&bad), b"{not json").unwrap();
    std::fs::create_dir_all(fx.store.layout().sessions_dir().join("not-a-session")).unwrap();
    let store = fx.reopen();
    let ids: Vec<SessionId> = within(store.list()).await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, [good]);
    assert!(matches!(within(store.get(&bad)).await, Err(Error::Json { .. })));
}

#[tokio::test]
async fn recreating_a_removed_session_starts_a_fresh_log() {
    let fx = Fixture::new();
    let id = fx.session().await;
    within(fx.store.append(&id, vec![delta("old")])).await.unwrap();
    std::fs::remove_dir_all(fx.store.layout().session_dir(&id)).unwrap();

    // Nothing touched the log in between, so the store still has it open.
    within(fx.store.create(record(&id))).await.unwrap();
    let acked = within(fx.store.append(&id, vec![delta("new")])).await.unwrap();
    assert_eq!(acked[0].index, 0);
    let events = within(fx.reopen().read(&id, 0, None)).await.unwrap();
    assert_eq!(events.len(), 1, "the append went to the new file, not the unlinked one");
}
