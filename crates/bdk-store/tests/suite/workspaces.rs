//! Guards workspace directories: a session's `workspace/` exists only for a live session; a
//! direct call's scratch folder is created and removed under `tool-calls/`.

use bdk_protocol::{CallId, SessionId};
use bdk_store::{Error, WorkspaceStore};

use super::support::{Fixture, within};

#[tokio::test]
async fn session_and_call_workspaces() {
    let fx = Fixture::new();
    let id = fx.session().await;
    let hops = fx.store.blocking_hops();
    let dir = within(fx.store.session_workspace(&id)).await.unwrap();
    assert_eq!(dir, fx.store.layout().session_dir(&id).join("workspace"));
    assert!(dir.is_dir());
    // Created, then found: in line both times (a tool turn asks once).
    assert_eq!(within(fx.store.session_workspace(&id)).await.unwrap(), dir);
    assert_eq!(fx.store.blocking_hops(), hops, "no trip to the blocking pool");

    let err = within(fx.store.session_workspace(&SessionId::generate())).await.unwrap_err();
    assert!(matches!(err, Error::SessionNotFound(_)), "{err}");

    let call = CallId::generate("inspect_pr");
    let scratch = within(fx.store.call_workspace(&call)).await.unwrap();
    assert!(scratch.is_dir() && scratch.starts_with(fx.store.layout().tool_calls_dir()));
    within(fx.store.remove_call_workspace(&call)).await.unwrap();
    assert!(!scratch.exists());
    within(fx.store.remove_call_workspace(&call)).await.unwrap();

    assert_eq!(fx.store.trace_path(&id), fx.store.layout().traces_dir().join(format!("{id}.ndjson")));
}
