//! Session metadata on disk: `sessions/<id>/session.json`, replaced atomically, and backed by
//! the records the event log carries (`record_file.rs`). A session exists when its folder has a
//! `session.json` that is readable or whose log carries a record, so deleting the folder
//! removes the session.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use bdk_protocol::SessionId;

use super::atomic::{replace_atomic, write_atomic, write_new};
use super::open_index;
use super::record_file::{self, LogView, encode};
use super::syncs::SyncCounters;
use super::{FsStore, Layout, blocking};
use crate::api::{BoxFuture, SessionStore};
use crate::error::{Error, Result};
use crate::record::SessionRecord;

/// Deleted session folders are renamed to `.trash-*` first, so they vanish atomically.
const TRASH_PREFIX: &str = ".trash-";

impl SessionStore for FsStore {
    fn create(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        // A handle cached for an earlier session of this id (folder removed by hand) would
        // still point at the old, unlinked file.
        self.close_log(&record.id);
        let layout = self.layout().clone();
        Box::pin(async move {
            let file = {
                let record = record.clone();
                blocking(&self.inner.syncs, move || create(&layout, &record)).await?
            };
            if let Some(record) = self.register_created(record, file) {
                // Its log was opened meanwhile and will not carry the record or sync the new
                // folder: both are made durable here.
                let (layout, syncs) = (self.layout().clone(), self.sync_counters());
                blocking(&self.inner.syncs, move || {
                    let path = layout.session_json(&record.id);
                    write_atomic(&path, &encode(&record, Some(0))?, &syncs).map_err(|e| Error::io(&path, e))?;
                    let sessions = layout.sessions_dir();
                    syncs.dir(&sessions).map_err(|e| Error::io(&sessions, e))
                })
                .await?;
            }
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<Option<SessionRecord>>> {
        let (layout, syncs) = (self.layout().clone(), self.sync_counters());
        let view = self.log_view(id);
        let id = id.clone();
        Box::pin(blocking(&self.inner.syncs, move || read_record(&layout, &id, &syncs, view)))
    }

    fn update(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        self.replace_record(record, write_atomic)
    }

    fn update_derived(&self, record: SessionRecord) -> BoxFuture<'_, Result<()>> {
        self.replace_record(record, |path, bytes, _| replace_atomic(path, bytes))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionRecord>>> {
        let (layout, syncs, store) = (self.layout().clone(), self.sync_counters(), self.clone());
        Box::pin(blocking(&self.inner.syncs, move || list(&layout, &syncs, &|id| store.log_view(id))))
    }

    /// Reads only the sessions `open/` marks (`open_index.rs`).
    fn list_open(&self) -> BoxFuture<'_, Result<Vec<SessionRecord>>> {
        let (layout, syncs, store) = (self.layout().clone(), self.sync_counters(), self.clone());
        Box::pin(blocking(&self.inner.syncs, move || {
            let view = |id: &SessionId| store.log_view(id);
            open_index::list(
                &layout,
                &syncs,
                |id| read_record(&layout, id, &syncs, view(id)),
                |id| store.is_log_open(id),
                || list(&layout, &syncs, &view),
            )
        }))
    }

    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool>> {
        // Stop the writer first so nothing new lands after the folder is gone.
        self.close_log(id);
        let (layout, syncs) = (self.layout().clone(), self.sync_counters());
        let id = id.clone();
        Box::pin(blocking(&self.inner.syncs, move || {
            let deleted = delete(&layout, &id, &syncs)?;
            open_index::unmark(&layout, &id);
            Ok(deleted)
        }))
    }

    fn probe_write(&self) -> BoxFuture<'_, Result<()>> {
        let (path, syncs) = (self.layout().root().join(PROBE_FILE), self.sync_counters());
        Box::pin(blocking(&self.inner.syncs, move || {
            let stamp = bdk_protocol::event::timestamp_now().to_rfc3339();
            write_atomic(&path, stamp.as_bytes(), &syncs).map_err(|e| Error::io(&path, e))
        }))
    }
}

impl FsStore {
    /// How many `session.json` files this store has read since it was opened (`get`, `list`,
    /// `list_open`): what start-up recovery costs, counted instead of timed.
    pub fn record_reads(&self) -> u64 {
        self.sync_counters().record_reads()
    }
}

/// The file [`SessionStore::probe_write`] replaces in the state root (a timestamp).
const PROBE_FILE: &str = ".write-probe";

impl FsStore {
    /// Replaces an existing session's `session.json` with `write` (durable or not). It accounts
    /// for every record the log carries so far (`record_file.rs`), so the log's durable length
    /// is read first, opening the log if it is not open.
    fn replace_record(
        &self,
        record: SessionRecord,
        write: fn(&std::path::Path, &[u8], &SyncCounters) -> io::Result<()>,
    ) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let log = match self.log(&record.id).await {
                Ok(log) => Some(log.shared.clone()),
                Err(Error::SessionNotFound(id)) => return Err(Error::SessionNotFound(id)),
                // Unreadable (damaged): its length on disk, read below.
                Err(error) => {
                    tracing::warn!(session = %record.id, %error, "cannot open the log to replace its record");
                    None
                }
            };
            let (layout, syncs) = (self.layout().clone(), self.sync_counters());
            blocking(&self.inner.syncs, move || match log {
                Some(log) => log.replacing_record(|len, first, files| {
                    // Not committed yet: the first commit carries this record instead.
                    if first.is_some() {
                        *first = Some(record.clone());
                    }
                    replace_record(&layout, &record, Some(len), write, &syncs)?;
                    // `replace_record` made the marker or removed it.
                    files.marked = open_index::is_open(record.status);
                    files.settled = !files.marked;
                    Ok(())
                }),
                None => replace_record(&layout, &record, None, write, &syncs),
            })
            .await
        })
    }
}

fn replace_record(
    layout: &Layout,
    record: &SessionRecord,
    log_bytes: Option<u64>,
    write: fn(&std::path::Path, &[u8], &SyncCounters) -> io::Result<()>,
    syncs: &SyncCounters,
) -> Result<()> {
    let path = layout.session_json(&record.id);
    if !path.exists() {
        return Err(Error::SessionNotFound(record.id.clone()));
    }
    let log_bytes = match log_bytes {
        Some(len) => len,
        None => record_file::log_len(&layout.events_path(&record.id))?,
    };
    let bytes = encode(record, Some(log_bytes))?;
    let open = open_index::is_open(record.status);
    let marker = open_index::marker(layout, &record.id);
    if open {
        open_index::mark_at(&marker)?;
    }
    match write(&path, &bytes, syncs) {
        // The folder went away between the check and the write.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::SessionNotFound(record.id.clone())),
        Ok(()) if !open => {
            open_index::unmark_at(&marker);
            Ok(())
        }
        other => other.map_err(|e| Error::io(&path, e)),
    }
}

/// Folder, empty log, then `session.json` last: a crash midway leaves an invisible folder.
///
/// Nothing is synced here. The log's first commit (the session's first events) makes it all
/// durable: the record rides in it, and once its data is synced it syncs the session folder
/// (its two entries) and `sessions/` (the new folder), so on a journaling file system the
/// folder costs no journal commit of its own, only two cheap directory syncs after the one
/// commit. Until then `session.json` is replaced without a sync, and a power loss before that
/// commit can lose the session or leave its record torn (no client was told of the session
/// yet, and [`read_record`] then finds none).
///
/// A record that may have an open turn gets its `open/` marker first (not synced either, see
/// `open_index.rs`).
///
/// Returns the empty log, open for appending, for the store's registry of open logs.
fn create(layout: &Layout, record: &SessionRecord) -> Result<File> {
    if open_index::is_open(record.status) {
        open_index::mark_at(&open_index::marker(layout, &record.id))?;
    }
    let dir = layout.session_dir(&record.id);
    match fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(Error::SessionExists(record.id.clone())),
        Err(e) => return Err(Error::io(&dir, e)),
    }
    let result = (|| {
        // Accounts for no record in the log: the one the first commit carries wins (the same).
        let bytes = encode(record, Some(0))?;
        let events = layout.events_path(&record.id);
        let log = OpenOptions::new().append(true).create_new(true).open(&events).map_err(|e| Error::io(&events, e))?;
        // Written in place, not renamed over: nothing can be replaced in a folder just made.
        // A reader meanwhile may find it empty or half written, which reads as a session that
        // does not exist yet (its log is empty), and so does a crash before it is complete.
        let json = layout.session_json(&record.id);
        write_new(&json, &bytes).map_err(|e| Error::io(&json, e))?;
        Ok(log)
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&dir);
    }
    result
}

/// The session's record: `session.json`, unless the log carries a newer one past what it
/// accounts for (a power loss or a kill took `session.json`'s last replacement), or it is torn
/// and the log carries one. `view`: what this process knows of the log (when `session.json` is
/// known to be current, the log is not read).
fn read_record(layout: &Layout, id: &SessionId, syncs: &SyncCounters, view: LogView) -> Result<Option<SessionRecord>> {
    syncs.record_read();
    let path = layout.session_json(id);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let events = layout.events_path(id);
    let end = match view {
        LogView::Open(end) => Some(end),
        LogView::Current | LogView::Closed => None,
    };
    match record_file::decode(&bytes) {
        // Written before records rode in the log (its log carries none), or known current.
        Ok((record, None)) => Ok(Some(record)),
        Ok((record, Some(_))) if view == LogView::Current => Ok(Some(record)),
        Ok((record, Some(from))) => {
            let len = match end {
                Some(end) => end,
                None => record_file::log_len(&events)?,
            };
            if len <= from {
                return Ok(Some(record));
            }
            syncs.log_read();
            Ok(Some(record_file::newest_embedded(&events, from, end)?.map_or(record, |(newer, _)| newer)))
        }
        Err(error) => {
            syncs.log_read();
            match record_file::newest_embedded(&events, 0, end)? {
                Some((record, _)) => Ok(Some(record)),
                // Torn before the session's first commit: it never existed for any client.
                None if record_file::log_len(&events)? == 0 => Ok(None),
                None => Err(Error::json(&path, error)),
            }
        }
    }
}

/// Every readable session, oldest first. Unreadable ones are skipped with a warning so one bad
/// file does not hide the rest.
fn list(layout: &Layout, syncs: &SyncCounters, view: &dyn Fn(&SessionId) -> LogView) -> Result<Vec<SessionRecord>> {
    let dir = layout.sessions_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut records = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        let Some(id) = entry.file_name().to_str().and_then(|name| SessionId::parse(name).ok()) else {
            continue;
        };
        match read_record(layout, &id, syncs, view(&id)) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => {}
            Err(error) => tracing::warn!(session = %id, %error, "skipping an unreadable session"),
        }
    }
    records.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(records)
}

fn delete(layout: &Layout, id: &SessionId, syncs: &SyncCounters) -> Result<bool> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = layout.session_dir(id);
    let sessions = layout.sessions_dir();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let trash = sessions.join(format!("{TRASH_PREFIX}{id}-{}-{n}", std::process::id()));
    match fs::rename(&dir, &trash) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(&dir, e)),
    }
    syncs.dir(&sessions).map_err(|e| Error::io(&sessions, e))?;
    if let Err(error) = fs::remove_dir_all(&trash) {
        tracing::warn!(path = %trash.display(), %error, "could not remove a deleted session's files");
    }
    Ok(true)
}

/// Removes trash left by a crash during `delete`. Best effort.
pub(super) fn sweep_trash(layout: &Layout) {
    let Ok(entries) = fs::read_dir(layout.sessions_dir()) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(TRASH_PREFIX) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}
