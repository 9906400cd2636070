//! Guards what the database itself enforces and how opening one fails: dense append-only logs
//! even against a client writing rows by hand, migrations applied once and a newer schema
//! refused, an unreachable server named without its password, and workspaces that follow their
//! session to another replica.

use std::sync::Arc;
use std::time::Duration;

use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;
use bdk_store::{DataScope, HostDataStore, SessionRecord, SessionStore, WorkspaceStore};
use bdk_store_pg::{PgDatabase, PgError, PgOptions, SCHEMA_VERSION};
use bdk_test_support::postgres;
use tokio_postgres::NoTls;

use super::support::{PgInstance, options};

async fn raw(db: &postgres::TestDb) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&db.url(), NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[tokio::test]
async fn the_database_keeps_logs_dense_and_append_only() {
    let Some(db) = postgres::fresh("dense").await else { return };
    let fx = PgInstance::open(Arc::new(db), Arc::new(tempfile::tempdir().unwrap())).await;
    let id = SessionId::generate();
    fx.store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "p")).await.unwrap();
    let client = raw(&fx.test_db).await;
    let insert = |idx: i64| format!("INSERT INTO bdk_events VALUES ('agent', '{id}', {idx}, '{{}}')");
    let gap = client.batch_execute(&insert(1)).await.unwrap_err();
    assert!(gap.to_string().contains("next index") || format!("{gap:?}").contains("next index"), "{gap:?}");
    client.batch_execute(&insert(0)).await.unwrap();
    assert!(client.batch_execute(&insert(0)).await.is_err(), "no duplicate index");
    assert!(client.batch_execute(&insert(2)).await.is_err(), "no gap");
    let err =
        client.batch_execute(&format!("UPDATE bdk_events SET body = 'x' WHERE session_id = '{id}'")).await.unwrap_err();
    assert!(format!("{err:?}").contains("append-only"), "{err:?}");
    assert!(client.batch_execute(&format!("DELETE FROM bdk_events WHERE session_id = '{id}'")).await.is_err());
    // Deleting the session removes its events.
    assert!(fx.store.delete(&id).await.unwrap());
    let left = client.query_one("SELECT count(*) FROM bdk_events", &[]).await.unwrap();
    assert_eq!(left.get::<_, i64>(0), 0);
}

#[tokio::test]
async fn migrations_apply_once_and_a_newer_schema_is_refused() {
    let Some(db) = postgres::fresh("migrate").await else { return };
    let opts = options(&db);
    let unmigrated =
        PgDatabase::connect(db.base_url(), &PgOptions { migrate: false, ..opts.clone() }).await.unwrap_err();
    assert!(matches!(unmigrated, PgError::NeedsMigration { found: 0, .. }), "{unmigrated}");
    // Three replicas starting at once: one applies, the others find nothing to do.
    let (a, b, c) = tokio::join!(
        PgDatabase::connect(db.base_url(), &opts),
        PgDatabase::connect(db.base_url(), &opts),
        PgDatabase::connect(db.base_url(), &opts)
    );
    let applied: usize = [a.unwrap(), b.unwrap(), c.unwrap()].iter().map(|d| d.migration().applied.len()).sum();
    assert_eq!(applied, SCHEMA_VERSION as usize);
    PgDatabase::connect(db.base_url(), &PgOptions { migrate: false, ..opts.clone() }).await.unwrap();

    let client = raw(&db).await;
    client
        .batch_execute("INSERT INTO bdk_schema_migrations (version, name) VALUES (999, 'from_the_future')")
        .await
        .unwrap();
    let err = PgDatabase::connect(db.base_url(), &opts).await.unwrap_err();
    assert!(matches!(err, PgError::NewerSchema { found: 999, .. }), "{err}");
    assert!(err.to_string().contains("newer than this build supports"), "{err}");
}

#[tokio::test]
async fn an_unreachable_database_is_named_without_its_password() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://bdk:hunter2@127.0.0.1:{port}/bdk");
    let opts = PgOptions { connect_timeout: Duration::from_secs(2), ..PgOptions::default() };
    let err = PgDatabase::connect(&url, &opts).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PgError::Connect { .. }), "{text}");
    assert!(text.contains(&format!("postgres://bdk:***@127.0.0.1:{port}/bdk")), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let err = PgDatabase::connect("postgres://u:secret@[bad", &opts).await.unwrap_err();
    assert!(!err.to_string().contains("secret"), "{err}");
}

#[tokio::test]
async fn a_workspace_follows_its_session_to_another_replica() {
    let Some(db) = postgres::fresh("workspace").await else { return };
    let db = Arc::new(db);
    let a = PgInstance::open(db.clone(), Arc::new(tempfile::tempdir().unwrap())).await;
    let b = PgInstance::open(db.clone(), Arc::new(tempfile::tempdir().unwrap())).await;
    let id = SessionId::generate();
    a.store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "p")).await.unwrap();
    let dir_a = a.store.session_workspace(&id).await.unwrap();
    std::fs::create_dir_all(dir_a.join("notes")).unwrap();
    std::fs::write(dir_a.join("notes/plan.md"), "step 1").unwrap();
    std::fs::write(dir_a.join("top.txt"), "hello").unwrap();
    assert_eq!(a.store.save_workspace(&id).await.unwrap(), Some(11));

    // The follow-up runs on replica b: it sees what the turn on a left.
    let dir_b = b.store.session_workspace(&id).await.unwrap();
    assert_ne!(dir_a, dir_b);
    assert_eq!(std::fs::read_to_string(dir_b.join("notes/plan.md")).unwrap(), "step 1");
    std::fs::write(dir_b.join("notes/plan.md"), "step 2").unwrap();
    std::fs::remove_file(dir_b.join("top.txt")).unwrap();
    b.store.save_workspace(&id).await.unwrap();

    // Back on a: its stale copy is replaced.
    let dir_a = a.store.session_workspace(&id).await.unwrap();
    assert_eq!(std::fs::read_to_string(dir_a.join("notes/plan.md")).unwrap(), "step 2");
    assert!(!dir_a.join("top.txt").exists());
    // An unchanged local copy is kept as it is (no restore without a newer save).
    std::fs::write(dir_a.join("scratch"), "local").unwrap();
    let dir_a = a.store.session_workspace(&id).await.unwrap();
    assert!(dir_a.join("scratch").exists());
    a.store.save_workspace(&id).await.unwrap();

    // A turn on a third replica that calls no tool never restores the workspace; saving its
    // empty local folder afterwards must not wipe what a saved.
    let c = PgInstance::open(db.clone(), Arc::new(tempfile::tempdir().unwrap())).await;
    assert_eq!(c.store.save_workspace(&id).await.unwrap(), None);
    // Nor does b's copy, older than a's last save.
    std::fs::write(dir_b.join("stale.txt"), "old").unwrap();
    assert_eq!(b.store.save_workspace(&id).await.unwrap(), None);
    let dir_c = c.store.session_workspace(&id).await.unwrap();
    assert_eq!(std::fs::read_to_string(dir_c.join("notes/plan.md")).unwrap(), "step 2");
    assert!(dir_c.join("scratch").exists());
    assert!(!dir_c.join("stale.txt").exists());
}

#[tokio::test]
async fn a_filesystem_state_directory_imports_exactly() {
    use bdk_protocol::EventData;
    use bdk_protocol::event::TextDelta;
    use bdk_store::{DataScope, EventLog, FsStore, HostDataStore, KvStore, NewEvent, TimedStore};

    let Some(db) = postgres::fresh("import").await else { return };
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open(dir.path().join("agent")).unwrap();
    let id = SessionId::generate();
    let mut record = SessionRecord::new(id.clone(), SessionMode::Chat, "http", "p");
    record.continuation_token = Some("tok_1".into());
    fs.create(record.clone()).await.unwrap();
    let delta = |t: &str| NewEvent::new(EventData::MessageAppended(TextDelta { delta: t.into() }));
    fs.append(&id, (0..1500).map(|i| delta(&i.to_string())).collect()).await.unwrap();
    KvStore::put(&fs, "shared", serde_json::json!({"n": 1})).await.unwrap();
    let scope = DataScope::Session(id.clone());
    fs.kv_put(&scope, "mine", serde_json::json!(2)).await.unwrap();
    fs.file_write(&scope, "notes/a.md", b"alpha".to_vec()).await.unwrap();
    std::fs::create_dir_all(fs.layout().workspace_dir(&id)).unwrap();
    std::fs::write(fs.layout().workspace_dir(&id).join("plan.txt"), "keep").unwrap();

    let fx = PgInstance::open(Arc::new(db), Arc::new(tempfile::tempdir().unwrap())).await;
    let report = fx.store.import_fs(&fs).await.unwrap();
    assert_eq!((report.sessions, report.events, report.kv, report.files, report.workspaces), (1, 1500, 2, 1, 1));
    assert_eq!(SessionStore::get(&fx.store, &id).await.unwrap(), Some(record));
    assert_eq!(fx.store.read(&id, 0, None).await.unwrap(), fs.read(&id, 0, None).await.unwrap(), "events kept exactly");
    assert_eq!(fx.store.append(&id, vec![delta("next")]).await.unwrap()[0].index, 1500);
    assert_eq!(fx.store.kv_get(&scope, "mine").await.unwrap(), Some(serde_json::json!(2)));
    assert_eq!(fx.store.file_read(&scope, "notes/a.md").await.unwrap().as_deref(), Some(&b"alpha"[..]));
    let ws = fx.store.session_workspace(&id).await.unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("plan.txt")).unwrap(), "keep");
    assert!(TimedStore::reminders(&fx.store).await.unwrap().is_empty());
    // A second run skips what is there.
    let again = fx.store.import_fs(&fs).await.unwrap();
    assert_eq!((again.sessions, again.skipped_sessions), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_connections_fail_as_unavailable_and_recover_by_themselves() {
    use bdk_protocol::EventData;
    use bdk_protocol::event::TextDelta;
    use bdk_store::{EventLog, NewEvent};

    let Some(db) = postgres::fresh("lost").await else { return };
    let app = format!("bdk_lost_{}", std::process::id());
    let url = format!("{}?application_name={app}", db.base_url());
    let database = PgDatabase::connect(&url, &options(&db)).await.unwrap();
    let local = tempfile::tempdir().unwrap();
    let store = bdk_store_pg::PgStore::new(database, "agent", local.path());
    let id = SessionId::generate();
    store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "p")).await.unwrap();
    let delta = |t: &str| NewEvent::new(EventData::MessageAppended(TextDelta { delta: t.into() }));
    let mut follower = store.follow(&id, 0).await.unwrap();
    store.append(&id, vec![delta("before")]).await.unwrap();
    assert_eq!(follower.next().await.unwrap().unwrap().index, 0);

    // The server drops every connection of this store (pool and LISTEN), as a restart would.
    let admin = raw(&db).await;
    admin
        .execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", &[&app])
        .await
        .unwrap();

    // Calls fail as unavailable (retryable) or succeed on a fresh connection; they soon succeed
    // (the deadline is generous for a loaded machine), and the follower sees the append without
    // a gap.
    let mut appended = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while tokio::time::Instant::now() < deadline {
        match store.append(&id, vec![delta("after")]).await {
            Ok(events) => {
                assert_eq!(events[0].index, 1);
                appended = true;
                break;
            }
            Err(error) => assert!(error.is_unavailable(), "{error}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(appended, "the store did not recover");
    let next = tokio::time::timeout(Duration::from_secs(30), follower.next()).await.unwrap();
    assert_eq!(next.unwrap().unwrap().index, 1, "the follower outlived the outage");
}

/// A store on one connection whose round trips are counted, with one session.
async fn counted_session(
    db: &postgres::TestDb,
) -> (tempfile::TempDir, Arc<PgDatabase>, bdk_store_pg::PgStore, SessionId) {
    let local = tempfile::tempdir().unwrap();
    let counted = PgOptions { pool_size: 1, count_round_trips: true, ..options(db) };
    let database = PgDatabase::connect(db.base_url(), &counted).await.unwrap();
    let store = bdk_store_pg::PgStore::new(database.clone(), "agent", local.path().join("agent"));
    let id = SessionId::generate();
    store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "p")).await.unwrap();
    (local, database, store, id)
}

/// Saving a workspace sends the same statements whatever its number of files (they go in one
/// `INSERT`), in a handful of round trips, counted on the wire.
#[tokio::test]
async fn a_workspace_save_costs_the_same_statements_for_one_file_or_forty() {
    let Some(db) = postgres::fresh("workspace_trips").await else { return };
    let (_local, database, store, id) = counted_session(&db).await;
    let dir = store.session_workspace(&id).await.unwrap();
    // Statements are prepared on the connection's first save.
    std::fs::write(dir.join("first.txt"), "warm").unwrap();
    store.save_workspace(&id).await.unwrap();

    let mut sent = Vec::new();
    for files in [1, 40] {
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(dir.join("notes")).unwrap();
        for n in 0..files {
            std::fs::write(dir.join(format!("notes/{n}.md")), format!("note {n}")).unwrap();
        }
        let before = database.round_trips();
        assert!(store.save_workspace(&id).await.unwrap().is_some());
        let after = database.round_trips();
        sent.push((after.round_trips - before.round_trips, after.statements - before.statements));
    }
    assert_eq!(sent[0].1, sent[1].1, "statements for 1 and 40 files: {sent:?}");
    assert!(sent[1].0 <= 6, "round trips for 40 files: {sent:?}");

    // What was saved is what a fresh replica restores.
    let other = tempfile::tempdir().unwrap();
    let b = PgDatabase::connect(db.base_url(), &options(&db)).await.unwrap();
    let b = bdk_store_pg::PgStore::new(b, "agent", other.path().join("agent"));
    let restored = b.session_workspace(&id).await.unwrap();
    assert_eq!(std::fs::read_dir(restored.join("notes")).unwrap().count(), 40);
    assert_eq!(std::fs::read_to_string(restored.join("notes/39.md")).unwrap(), "note 39");
    assert!(!restored.join("first.txt").exists());
}

/// A kv or file operation found by its key is one round trip per statement (prepared once per
/// connection; an unprepared statement costs a round trip of its own to prepare).
#[tokio::test]
async fn host_data_by_key_is_one_round_trip_per_statement() {
    let Some(db) = postgres::fresh("data_trips").await else { return };
    let (_local, database, store, id) = counted_session(&db).await;
    let scope = DataScope::Session(id.clone());
    let rounds = async || {
        store.kv_put(&scope, "k", serde_json::json!({ "n": 1 })).await.unwrap();
        assert_eq!(store.kv_get(&scope, "k").await.unwrap(), Some(serde_json::json!({ "n": 1 })));
        assert_eq!(store.file_read(&scope, "f.txt").await.unwrap(), None);
        assert!(store.kv_delete(&scope, "k").await.unwrap());
    };
    rounds().await; // prepares
    let before = database.round_trips();
    rounds().await;
    let after = database.round_trips();
    // put: the session's check and the upsert; get; read (and its folder check, planned
    // for its pattern each time: two); delete.
    let (trips, statements) = (after.round_trips - before.round_trips, after.statements - before.statements);
    assert_eq!(statements, 6, "{trips} round trips");
    assert!(trips <= 7, "{trips} round trips for {statements} statements");
}

/// Opening a follower is one statement: its first read also says whether the session exists
/// (before, a check of its own went first). A session that does not exist is refused on that
/// same read.
#[tokio::test]
async fn a_follower_opens_with_one_read_that_also_finds_the_session() {
    let Some(db) = postgres::fresh("follow_trips").await else { return };
    use bdk_protocol::EventData;
    use bdk_protocol::event::TextDelta;
    use bdk_store::{EventLog, NewEvent};
    let (_local, database, store, id) = counted_session(&db).await;
    let delta = |t: &str| NewEvent::new(EventData::MessageAppended(TextDelta { delta: t.into() }));
    store.append(&id, vec![delta("a"), delta("b")]).await.unwrap();
    drop(store.follow(&id, 0).await.unwrap()); // prepares

    let before = database.round_trips();
    let mut stream = store.follow(&id, 0).await.unwrap();
    let mut read = Vec::new();
    for _ in 0..2 {
        read.push(stream.next().await.unwrap().unwrap().index);
    }
    let after = database.round_trips();
    assert_eq!(read, [0, 1]);
    assert_eq!(after.statements - before.statements, 1, "statements to open and read two events");

    let before = database.round_trips();
    let missing = store.follow(&SessionId::generate(), 0).await.err().unwrap();
    let after = database.round_trips();
    assert!(matches!(missing, bdk_store::Error::SessionNotFound(_)), "{missing}");
    assert_eq!(after.statements - before.statements, 1, "statements to refuse a missing session");
}
