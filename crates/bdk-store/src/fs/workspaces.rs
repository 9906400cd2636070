//! Working directories on disk: a session's `workspace/` and a direct call's `tool-calls/<callId>/`.
//! What goes into them (skills, seeds, tool scripts) is the engine's business.

use std::fs;
use std::io;
use std::path::PathBuf;

use bdk_protocol::{CallId, SessionId};

use super::{FsStore, blocking};
use crate::api::{BoxFuture, WorkspaceStore};
use crate::error::{Error, Result};

impl WorkspaceStore for FsStore {
    // Called once per tool turn: a `stat` of `session.json`, then `make_dir`, in line.
    fn session_workspace<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<PathBuf>> {
        let (json, dir, id) = (self.layout().session_json(id), self.layout().workspace_dir(id), id.clone());
        Box::pin(async move {
            if !json.exists() {
                return Err(Error::SessionNotFound(id));
            }
            self.make_dir(dir).await
        })
    }

    // A direct call's scratch folder is one `mkdir` and, when the call left it empty (the common
    // case), one `rmdir`: microseconds, done in line. A trip to the blocking pool and back costs
    // more than that, twice per call (`bdk-server`'s `calls` bench). Only the recursive removal of
    // a folder a tool filled goes to the pool.
    fn call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, Result<PathBuf>> {
        Box::pin(self.make_dir(self.layout().call_dir(call)))
    }

    fn call_workspace_path(&self, call: &CallId) -> PathBuf {
        self.layout().call_dir(call)
    }

    // A scratch folder never created (a native tool that did not use it) is one failed `rmdir`.
    fn remove_call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, Result<()>> {
        let dir = self.layout().call_dir(call);
        Box::pin(async move {
            match fs::remove_dir(&dir) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(_) => {
                    blocking(&self.inner.syncs, move || match fs::remove_dir_all(&dir) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io(&dir, e)),
                        _ => Ok(()),
                    })
                    .await
                }
            }
        })
    }

    fn trace_path(&self, id: &SessionId) -> PathBuf {
        self.layout().trace_path(id)
    }
}

impl FsStore {
    /// `dir`, created if it is not there: one `mkdir` (and a `stat` when it exists), in line.
    /// Only a failed `mkdir` goes to the blocking pool, to create the folder with its parents or
    /// say why not.
    async fn make_dir(&self, dir: PathBuf) -> Result<PathBuf> {
        match fs::create_dir(&dir) {
            Ok(()) => Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(dir),
            Err(_) => {
                blocking(&self.inner.syncs, move || {
                    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
                    Ok(dir)
                })
                .await
            }
        }
    }
}
