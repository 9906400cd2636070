//! The index of sessions that may have an open turn, so restart recovery reads those and not
//! every `session.json` ever written: `<state>/open/<session-id>`, one empty marker file each.
//!
//! A marker is created, durably (the file, then one `fsync` of `open/`), before a record saying
//! `running` (or a record with no status) is written, so a session whose status says running
//! always has its marker, whatever crash comes after. It is removed, without a sync, once a
//! settled status (`waiting`, `completed`, `failed`) is written or the session is deleted. A
//! marker can thus outlive what it stands for (a crash after the settled write, or a session
//! folder deleted by hand); [`list`] checks each against its record and removes the stale ones.
//! A session that stays running (follow-ups while a turn runs) finds its marker present and
//! pays nothing.
//!
//! `open/.built` says the index is complete. Without it (a state folder from a build before the
//! index, or one whose `open/` was lost), the first [`list`] reads every record once, marks the
//! open ones, and writes `.built`; from then on it reads only the markers.
//!
//! It owns the markers, not the records (`sessions.rs`).

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use bdk_protocol::SessionId;

use super::Layout;
use super::syncs::SyncCounters;
use crate::error::{Error, Result};
use crate::record::{SessionRecord, SessionStatus};

/// The folder of markers, under the agent's state folder.
pub(crate) const OPEN_DIR: &str = "open";
/// Present once the index lists every open session.
const BUILT: &str = ".built";

fn dir(layout: &Layout) -> PathBuf {
    layout.root().join(OPEN_DIR)
}

/// Whether a record with this status may have an open turn.
pub(crate) fn is_open(status: Option<SessionStatus>) -> bool {
    status.is_none_or(|s| s == SessionStatus::Running)
}

/// Makes sure `id` has a durable marker (a no-op when it has one).
pub(crate) fn mark(layout: &Layout, id: &SessionId, syncs: &SyncCounters) -> Result<()> {
    let dir = dir(layout);
    let path = dir.join(id.as_str());
    if path.exists() {
        return Ok(());
    }
    match File::create(&path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // First marker of this state folder. Without `.built` the folder is not trusted yet,
            // so the folder's own entry needs no sync.
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            File::create(&path).map_err(|e| Error::io(&path, e))?;
        }
        Err(e) => return Err(Error::io(&path, e)),
    }
    syncs.dir(&dir).map_err(|e| Error::io(&dir, e))
}

/// Removes `id`'s marker, if any. Not synced: a marker that comes back after a crash is stale
/// and [`list`] drops it.
pub(crate) fn unmark(layout: &Layout, id: &SessionId) {
    let path = dir(layout).join(id.as_str());
    if let Err(error) = fs::remove_file(&path)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), %error, "could not remove an open-session marker");
    }
}

/// The records of every session that may have an open turn, oldest first, reading only the
/// marked ones' records (`read` reads one). Stale markers are removed.
pub(crate) fn list(
    layout: &Layout,
    syncs: &SyncCounters,
    read: impl Fn(&SessionId) -> Result<Option<SessionRecord>>,
    every: impl FnOnce() -> Result<Vec<SessionRecord>>,
) -> Result<Vec<SessionRecord>> {
    let dir = dir(layout);
    if !dir.join(BUILT).exists() {
        return build(layout, &dir, syncs, every);
    }
    let entries = fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        let Some(id) = entry.file_name().to_str().and_then(|name| SessionId::parse(name).ok()) else { continue };
        match read(&id) {
            Ok(Some(record)) if is_open(record.status) => records.push(record),
            Ok(_) => unmark(layout, &id),
            Err(error) => tracing::warn!(session = %id, %error, "skipping an unreadable session"),
        }
    }
    records.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(records)
}

/// Builds the index from every record (once per state folder).
fn build(
    layout: &Layout,
    dir: &Path,
    syncs: &SyncCounters,
    every: impl FnOnce() -> Result<Vec<SessionRecord>>,
) -> Result<Vec<SessionRecord>> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let open: Vec<SessionRecord> = every()?.into_iter().filter(|r| is_open(r.status)).collect();
    for record in &open {
        let path = dir.join(record.id.as_str());
        File::create(&path).map_err(|e| Error::io(&path, e))?;
    }
    // The markers are durable before `.built` says they are complete.
    syncs.dir(dir).map_err(|e| Error::io(dir, e))?;
    let built = dir.join(BUILT);
    File::create(&built).map_err(|e| Error::io(&built, e))?;
    syncs.dir(dir).map_err(|e| Error::io(dir, e))?;
    let root = layout.root();
    syncs.dir(root).map_err(|e| Error::io(root, e))?;
    tracing::info!(open = open.len(), "built the index of open sessions");
    Ok(open)
}
