//! The index of sessions that may have an open turn, so restart recovery reads those and not
//! every `session.json` ever written: `<state>/open/<session-id>`, one empty marker file each.
//!
//! A marker is created before a record saying `running` (or a record with no status) is
//! written, and removed, once a settled status (`waiting`, `completed`, `failed`) is written or
//! the session is deleted. While a session's log is open in this process, its handle keeps the
//! marker it made past a settled record and removes it when the log is released (the actor
//! retired): a session going from turn to turn makes it once instead of a file creation and
//! removal per turn (`record_file.rs`). A process that stops first leaves those markers
//! behind, stale, for the next start's [`list`] to drop.
//!
//! Neither the creation nor the removal is synced: a process that dies (SIGKILL, a panic)
//! leaves the marker in the kernel's hands, so restart recovery finds it. A power loss can lose a marker
//! made shortly before it (a new session's, or a waiting session's that took a message); such a
//! session's open turn is closed when the session is next used instead (the engine checks a
//! record that says `running` when an actor first loads it), and its record, rebuilt from the
//! log, still says `running`. A marker can also outlive what it stands for (a crash after the
//! settled write, or a session folder deleted by hand); [`list`] checks each against its record
//! and removes the stale ones. A session that stays running (follow-ups while a turn runs)
//! finds its marker present and pays nothing.
//!
//! `open/.built` says the index is complete. Without it (a state folder from a build before the
//! index, or one whose `open/` was lost), the first [`list`] reads every record once, marks the
//! open ones, and writes `.built`; from then on it reads only the markers.
//!
//! It owns the markers, not the records (`sessions.rs`).

use std::fs::{self, File, OpenOptions};
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

/// Where `id`'s marker lives.
pub(crate) fn marker(layout: &Layout, id: &SessionId) -> PathBuf {
    dir(layout).join(id.as_str())
}

/// Makes sure the marker at `path` exists (an existing one is left as it is). Not synced (see
/// the module docs): a process that dies keeps it; a power loss can lose it. One `open`, no
/// `stat` first: the marker is made on a transition to `running`, when it is absent.
pub(crate) fn mark_at(path: &Path) -> Result<()> {
    let create = || OpenOptions::new().write(true).create(true).truncate(false).open(path).map(drop);
    match create() {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // First marker of this state folder.
            let dir = path.parent().unwrap_or(path);
            fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            create().map_err(|e| Error::io(path, e))
        }
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Removes `id`'s marker, if any. Not synced: a marker that comes back after a crash is stale
/// and [`list`] drops it.
pub(crate) fn unmark(layout: &Layout, id: &SessionId) {
    unmark_at(&marker(layout, id));
}

/// Removes the marker at `path`, if any (see [`unmark`]).
pub(crate) fn unmark_at(path: &Path) {
    if let Err(error) = fs::remove_file(path)
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
    open_here: impl Fn(&SessionId) -> bool,
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
            // A settled session whose log is open here: the log keeps its marker until it is
            // released (`record_file.rs`).
            Ok(Some(_)) if open_here(&id) => {}
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
