//! Guards the scoped host data: a session's kv and files are its own (invisible to other
//! sessions and to the agent-wide scope, removed with the session), the agent scope is the kv
//! store's data, and file paths never leave their area.

use bdk_protocol::SessionId;
use bdk_store::{DataScope, Error, HostDataStore, KvStore, SessionStore};
use serde_json::json;

use super::support::{Fixture, within};

#[tokio::test]
async fn session_kv_is_private_to_its_session() {
    let fx = Fixture::new();
    let (a, b) = (fx.session().await, fx.session().await);
    let (sa, sb) = (DataScope::Session(a.clone()), DataScope::Session(b));
    let data = &fx.store;
    within(data.kv_put(&sa, "k", json!("from a"))).await.unwrap();
    within(data.kv_put(&DataScope::Agent, "k", json!("shared"))).await.unwrap();
    assert_eq!(within(data.kv_get(&sa, "k")).await.unwrap(), Some(json!("from a")));
    assert_eq!(within(data.kv_get(&sb, "k")).await.unwrap(), None);
    assert_eq!(within(data.kv_keys(&sb, "")).await.unwrap(), Vec::<String>::new());
    // The agent scope is the kv store's own data.
    assert_eq!(within(KvStore::get(&fx.store, "k")).await.unwrap(), Some(json!("shared")));
    assert_eq!(within(data.kv_keys(&sa, "")).await.unwrap(), ["k"]);
    assert!(!within(data.kv_delete(&sb, "k")).await.unwrap());
    assert!(within(data.kv_delete(&sa, "k")).await.unwrap());

    within(data.kv_put(&sa, "again", json!(1))).await.unwrap();
    within(SessionStore::delete(&fx.store, &a)).await.unwrap();
    assert_eq!(within(data.kv_get(&sa, "again")).await.unwrap(), None, "deleted with the session");
    let err = within(data.kv_put(&sa, "again", json!(2))).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
    let ghost = DataScope::Session(SessionId::generate());
    let err = within(data.file_write(&ghost, "x", b"1".to_vec())).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");
}

#[tokio::test]
async fn files_round_trip_and_list() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let scope = DataScope::Session(id.clone());
    let data = &fx.store;
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
    assert!(fx.dir.path().join("weather/sessions").join(id.as_str()).join("files/reports/a.txt").exists());
}

#[tokio::test]
async fn file_paths_never_leave_their_area() {
    let fx = Fixture::new();
    for bad in ["../kv/x.json", "/etc/passwd", "a/../../b", ".secret", ""] {
        let err = within(fx.store.file_write(&DataScope::Agent, bad, b"x".to_vec())).await.unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
        let err = within(fx.store.file_read(&DataScope::Agent, bad)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}: {err}");
    }
}
