//! `local.cwd`: a clean parent for session workspaces. Without it a session's workspace is
//! `<state>/sessions/<id>/workspace/`, under whatever folders hold the state directory; with it
//! the workspace is `<local.cwd>/<session id>/`, so the working directory of the turn's tools
//! (the built-in file and shell tools, agent tools, a session-bound direct call) has only the
//! parents the agent's author chose.
//!
//! It is a wrapper of the store's [`WorkspaceStore`] installed by `Core::new` when the agent
//! sets `local.cwd`; it owns only where a session's workspace is, not what goes into it
//! (`workspace.rs`) nor the scratch folders of direct calls (the store's, unchanged). A
//! workspace under `local.cwd` is a local folder: a backend that carries workspaces to other
//! replicas (PostgreSQL) does not carry these.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_protocol::{CallId, SessionId};
use bdk_store::{BoxFuture, SessionStore, Stores, WorkspaceStore};

/// `stores` with session workspaces under `parent` when it is set.
pub(crate) fn wrap(stores: Stores, parent: Option<&Path>) -> Stores {
    let Some(parent) = parent else { return stores };
    let workspaces: Arc<dyn WorkspaceStore> = Arc::new(CwdWorkspaces {
        sessions: stores.sessions.clone(),
        inner: stores.workspaces.clone(),
        parent: parent.to_path_buf(),
    });
    Stores { workspaces, ..stores }
}

#[derive(Debug)]
struct CwdWorkspaces {
    sessions: Arc<dyn SessionStore>,
    inner: Arc<dyn WorkspaceStore>,
    parent: PathBuf,
}

impl WorkspaceStore for CwdWorkspaces {
    fn session_workspace<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<PathBuf>> {
        Box::pin(async move {
            if self.sessions.get(id).await?.is_none() {
                return Err(bdk_store::Error::SessionNotFound(id.clone()));
            }
            let dir = self.parent.join(id.as_str());
            let made = dir.clone();
            tokio::task::spawn_blocking(move || std::fs::create_dir_all(&made))
                .await
                .map_err(|error| bdk_store::Error::Task(error.to_string()))?
                .map_err(|source| bdk_store::Error::Io { path: dir.clone(), source })?;
            Ok(dir)
        })
    }

    fn call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, bdk_store::Result<PathBuf>> {
        self.inner.call_workspace(call)
    }

    fn call_workspace_path(&self, call: &CallId) -> PathBuf {
        self.inner.call_workspace_path(call)
    }

    fn remove_call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, bdk_store::Result<()>> {
        self.inner.remove_call_workspace(call)
    }

    fn trace_path(&self, id: &SessionId) -> PathBuf {
        self.inner.trace_path(id)
    }

    // The folder under `local.cwd` is the workspace itself; there is no other copy to save.
    fn save_session_workspace<'a>(&'a self, _id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}
