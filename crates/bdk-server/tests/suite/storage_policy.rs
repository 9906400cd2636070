//! `storage.toml`'s policies reach the store the host opens for the agent: with
//! `policy.debounce_ms`, the filesystem store acknowledges a commit once written and syncs it
//! later (counted by the store's own counters), and a PostgreSQL store commits its appends
//! without waiting for the WAL flush.

use bdk_protocol::event::{SessionMode, TextDelta};
use bdk_protocol::{EventData, SessionId};
use bdk_server::backend::{AgentStore, Backends};
use bdk_store::record::SessionRecord;
use bdk_store::{EventLog, NewEvent, SessionStore};
use bdk_store_pg::PgOptions;
use bdk_test_support::postgres;

use super::support::{within, write_project};

/// The agent `helper` under `root`, with `storage` as its `storage.toml`.
fn project(root: &std::path::Path, storage: &str) -> bdk_project::Project {
    let dir = write_project(root, "helper");
    std::fs::write(dir.join("bot/storage.toml"), storage).unwrap();
    let mut discovery = bdk_project::discover(&[root.to_path_buf()]);
    assert!(!discovery.has_errors(), "{:?}", discovery.all_diagnostics().collect::<Vec<_>>());
    discovery.projects.remove(0)
}

#[tokio::test]
async fn a_debouncing_agents_filesystem_store_acknowledges_commits_before_syncing_them() {
    let dir = tempfile::tempdir().unwrap();
    let project = project(&dir.path().join("projects"), "[policy]\ndebounce_ms = 600000\n");
    let state = dir.path().join("state");
    let mut backends = Backends::new(None, PgOptions::default());
    let AgentStore::Fs(store) = backends.open(&project, &state).await.unwrap() else { panic!("a filesystem store") };
    let id = SessionId::generate();
    store.create(SessionRecord::new(id.clone(), SessionMode::Chat, "http", "alice")).await.unwrap();
    let before = store.syncs();
    let delta = NewEvent::new(EventData::MessageAppended(TextDelta { delta: "hi".into() }));
    within("the append", store.append(&id, vec![delta])).await.unwrap();
    assert_eq!(store.syncs().since(before).file_syncs, 0, "acknowledged before any sync");
    let reopened = bdk_store::FsStore::open(&state).unwrap();
    assert_eq!(reopened.read(&id, 0, None).await.unwrap().len(), 1, "written before it was acknowledged");
}

#[tokio::test]
async fn a_debouncing_agent_on_postgres_gets_a_debounced_store() {
    let Some(db) = postgres::fresh("storage_policy").await else { return };
    let dir = tempfile::tempdir().unwrap();
    for (storage, debounced) in [("[policy]\ndebounce_ms = 1000\n", true), ("[policy]\n", false)] {
        let root = dir.path().join(format!("projects-{debounced}"));
        let project = project(&root, storage);
        let mut backends = Backends::new(Some(db.url()), PgOptions::default());
        let AgentStore::Pg(store) = backends.open(&project, &dir.path().join("state")).await.unwrap() else {
            panic!("a PostgreSQL store")
        };
        assert_eq!(store.is_debounced(), debounced, "{storage}");
    }
}
