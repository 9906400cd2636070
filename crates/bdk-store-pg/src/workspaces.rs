//! [`WorkspaceStore`] for PostgreSQL deployments. Tools run in local directories (under
//! `local_dir`, laid out like the filesystem backend's state root), but a session's workspace
//! follows the session: [`PgStore::save_workspace`] copies it into `bdk_workspace_files` after a
//! turn (bumping the session's `workspace_version`), and [`WorkspaceStore::session_workspace`]
//! restores the saved copy on any replica whose local copy is older. Workspaces up to
//! [`MAX_WORKSPACE_BYTES`] follow; a larger one stays on the replica that wrote it (logged).
//!
//! A save is based on the version the local copy holds: a replica whose copy is older than the
//! saved one (a turn that called no tool, so nothing restored it) saves nothing, instead of
//! writing its stale or empty folder over what another replica saved.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use bdk_protocol::{CallId, SessionId};
use bdk_store::{BoxFuture, Error, Layout, Result, WorkspaceStore};

use crate::db::Params;
use crate::error::db;
use crate::store::PgStore;

/// The largest session workspace saved to the database: 64 MiB in all.
pub const MAX_WORKSPACE_BYTES: u64 = 64 * 1024 * 1024;

/// The local file recording which saved version a local workspace holds.
const VERSION_FILE: &str = "workspace.version";

/// Moves the saved version on, when the saved one is still the version the local copy was
/// restored from (`$3`; `NULL`: whatever it is).
const BUMP_VERSION: &str = "UPDATE bdk_sessions SET workspace_version = workspace_version + 1 \
     WHERE agent = $1 AND id = $2 AND ($3::int8 IS NULL OR workspace_version = $3) RETURNING workspace_version";

const CLEAR_FILES: &str = "DELETE FROM bdk_workspace_files WHERE agent = $1 AND session_id = $2";

/// Every file of a workspace in one statement.
const INSERT_FILES: &str = "INSERT INTO bdk_workspace_files (agent, session_id, path, mode, bytes) \
     SELECT $1, $2, f.path, f.mode, f.bytes FROM unnest($3::text[], $4::int4[], $5::bytea[]) AS f(path, mode, bytes)";

impl PgStore {
    fn layout(&self) -> Layout {
        Layout::new(self.local.to_path_buf())
    }

    fn local_version(&self, id: &SessionId) -> i64 {
        let path = self.layout().session_dir(id).join(VERSION_FILE);
        fs::read_to_string(path).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }

    fn set_local_version(&self, id: &SessionId, version: i64) -> Result<()> {
        let path = self.layout().session_dir(id).join(VERSION_FILE);
        fs::write(&path, version.to_string()).map_err(|e| Error::Io { path, source: e })
    }

    /// Removes this replica's local copy of a deleted session.
    pub(crate) async fn remove_local_session(&self, id: &SessionId) {
        let dir = self.layout().session_dir(id);
        let _ = tokio::task::spawn_blocking(move || fs::remove_dir_all(dir)).await;
    }

    /// Saves the session's local workspace to the database, so the next turn on any replica
    /// starts from it. Returns the bytes saved (`None` when it was over the limit and stayed
    /// local, or when the local copy is older than the saved one and so saves nothing).
    pub async fn save_workspace(&self, id: &SessionId) -> Result<Option<u64>> {
        let based_on = self.local_version(id);
        let saved = self.save_workspace_from(id, &self.layout().workspace_dir(id), Some(based_on)).await?;
        Ok(saved.map(|(version, total)| {
            if let Err(error) = self.set_local_version(id, version) {
                tracing::warn!(session = %id, %error, "could not record the workspace version");
            }
            total
        }))
    }

    /// Saves the folder `dir` as the session's workspace; the new version and bytes saved
    /// (`None`: over the limit, it stays local; or empty, as the saved one is; or `based_on`, the
    /// version the folder was restored from, is older than the saved one: not saved).
    pub(crate) async fn save_workspace_from(
        &self,
        id: &SessionId,
        dir: &Path,
        based_on: Option<i64>,
    ) -> Result<Option<(i64, u64)>> {
        let dir = dir.to_path_buf();
        let files =
            tokio::task::spawn_blocking(move || collect(&dir)).await.map_err(|e| Error::Task(e.to_string()))??;
        let total: u64 = files.iter().map(|(_, _, bytes)| bytes.len() as u64).sum();
        if total > MAX_WORKSPACE_BYTES {
            tracing::warn!(session = %id, bytes = total, limit = MAX_WORKSPACE_BYTES,
                "the session workspace is over the limit; it stays on this replica");
            return Ok(None);
        }
        if files.is_empty() && based_on == Some(0) {
            // An empty folder that never held a saved version (a text turn's): whatever is
            // saved is empty too or newer (every save, imports included, moves the version
            // past 0), so nothing would be written. No round trip.
            return Ok(None);
        }
        let mut client = self.db.client().await?;
        if files.is_empty() {
            // An empty workspace over an empty saved one (a text turn's): nothing to save, and
            // no commit to wait for.
            let statement = client
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM bdk_workspace_files WHERE agent = $1 AND session_id = $2)",
                )
                .await
                .map_err(db)?;
            let saved = client.query_one(&statement, &[&&*self.agent, &id.as_str()]).await.map_err(db)?;
            if !saved.get::<_, bool>(0) {
                return Ok(None);
            }
        }
        // Four round trips whatever the number of files: `BEGIN`, the version check, the files
        // replaced (pipelined), the commit. Every statement is prepared once per connection.
        let tx = client.transaction().await.map_err(db)?;
        let (bump, exists, clear, insert) = tokio::try_join!(
            tx.prepare_cached(BUMP_VERSION),
            tx.prepare_cached(crate::data::SESSION_EXISTS),
            tx.prepare_cached(CLEAR_FILES),
            tx.prepare_cached(INSERT_FILES),
        )
        .map_err(db)?;
        // Planned as key lookups (`db::BEGIN_KEYED`): the files are found by their session.
        let (agent, session) = (&*self.agent, id.as_str());
        let versioned: &Params = &[&agent, &session, &based_on];
        let (keyed, row) = tokio::join!(biased; tx.batch_execute(crate::db::KEYED), tx.query_opt(&bump, versioned));
        keyed.map_err(db)?;
        let row = row.map_err(db)?;
        let Some(row) = row else {
            let exists = tx.query_opt(&exists, &[&agent, &session]).await.map_err(db)?;
            if exists.is_none() {
                return Err(Error::SessionNotFound(id.clone()));
            }
            tracing::debug!(session = %id, ?based_on, "the local workspace is older than the saved one; not saved");
            return Ok(None);
        };
        let version: i64 = row.get(0);
        let paths: Vec<&str> = files.iter().map(|(path, _, _)| path.as_str()).collect();
        let modes: Vec<i32> = files.iter().map(|(_, mode, _)| *mode).collect();
        let contents: Vec<&[u8]> = files.iter().map(|(_, _, bytes)| bytes.as_slice()).collect();
        let (by_session, rows): (&Params, &Params) =
            (&[&agent, &session], &[&agent, &session, &paths, &modes, &contents]);
        let (cleared, inserted) = tokio::join!(biased; tx.execute(&clear, by_session), tx.execute(&insert, rows));
        cleared.map_err(db)?;
        inserted.map_err(db)?;
        tx.commit().await.map_err(db)?;
        self.db.count_commit(true);
        Ok(Some((version, total)))
    }

    /// Replaces the local workspace with the saved one when the saved one is newer.
    async fn restore_workspace(&self, id: &SessionId, saved: i64) -> Result<()> {
        if saved <= self.local_version(id) {
            return Ok(());
        }
        let client = self.db.client().await?;
        let rows = client
            .query(
                "SELECT path, mode, bytes FROM bdk_workspace_files WHERE agent = $1 AND session_id = $2",
                &[&&*self.agent, &id.as_str()],
            )
            .await
            .map_err(db)?;
        let files: Vec<(String, i32, Vec<u8>)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect();
        let dir = self.layout().workspace_dir(id);
        tokio::task::spawn_blocking(move || replace(&dir, &files)).await.map_err(|e| Error::Task(e.to_string()))??;
        self.set_local_version(id, saved)
    }
}

/// Every plain file under `dir`: relative path, mode bits, content. Symlinks are skipped.
fn collect(dir: &Path) -> Result<Vec<(String, i32, Vec<u8>)>> {
    let mut out = Vec::new();
    walk(dir, "", &mut out).map_err(|e| Error::Io { path: dir.to_path_buf(), source: e })?;
    Ok(out)
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, i32, Vec<u8>)>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&entry.path(), &path, out)?;
        } else if kind.is_file() {
            out.push((path, mode_of(&entry.metadata()?), fs::read(entry.path())?));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn mode_of(meta: &fs::Metadata) -> i32 {
    use std::os::unix::fs::PermissionsExt;
    (meta.permissions().mode() & 0o777) as i32
}

#[cfg(not(unix))]
fn mode_of(_meta: &fs::Metadata) -> i32 {
    0o644
}

fn replace(dir: &Path, files: &[(String, i32, Vec<u8>)]) -> Result<()> {
    let io = |path: &Path, e| Error::Io { path: path.to_path_buf(), source: e };
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(dir, e)),
    }
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    for (rel, mode, bytes) in files {
        // Saved paths came from a walk of a workspace; still, never write outside it.
        if rel.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
            continue;
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        fs::write(&path, bytes).map_err(|e| io(&path, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&path, fs::Permissions::from_mode(*mode as u32));
        }
        #[cfg(not(unix))]
        let _ = mode;
    }
    Ok(())
}

impl WorkspaceStore for PgStore {
    fn session_workspace<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<PathBuf>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let statement = client
                .prepare_cached("SELECT workspace_version FROM bdk_sessions WHERE agent = $1 AND id = $2")
                .await
                .map_err(db)?;
            let row = client.query_opt(&statement, &[&&*self.agent, &id.as_str()]).await.map_err(db)?;
            drop(client);
            let Some(row) = row else { return Err(Error::SessionNotFound(id.clone())) };
            let dir = self.layout().workspace_dir(id);
            fs::create_dir_all(&dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
            self.restore_workspace(id, row.get(0)).await?;
            Ok(dir)
        })
    }

    fn call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, Result<PathBuf>> {
        Box::pin(async move {
            let dir = self.layout().call_dir(call);
            fs::create_dir_all(&dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
            Ok(dir)
        })
    }

    fn call_workspace_path(&self, call: &CallId) -> PathBuf {
        self.layout().call_dir(call)
    }

    fn remove_call_workspace<'a>(&'a self, call: &'a CallId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let dir = self.layout().call_dir(call);
            match fs::remove_dir_all(&dir) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::Io { path: dir, source: e }),
            }
        })
    }

    fn trace_path(&self, id: &SessionId) -> PathBuf {
        self.layout().trace_path(id)
    }

    fn save_session_workspace<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move { self.save_workspace(id).await.map(|_| ()) })
    }
}

#[cfg(test)]
mod tests {
    /// A save finds the session and its files by key, even on empty tables.
    #[tokio::test]
    async fn a_save_finds_its_session_and_files_by_key() {
        let statements = [(super::BUMP_VERSION, "'bot', 's', 0"), (super::CLEAR_FILES, "'bot', 's'")];
        let Some(plans) = crate::db::keyed_plans(&statements).await else { return };
        for plan in plans {
            assert!(plan.contains("_pkey") && !plan.contains("Seq Scan"), "{plan}");
        }
    }
}
