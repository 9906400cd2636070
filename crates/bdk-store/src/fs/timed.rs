//! [`TimedStore`] on disk:
//!
//! ```text
//! <root>/timed/firings/<kind>/<owner>/<due millis, 20 digits>.json   one file per firing
//! <root>/timed/reminders/<id>.json                                   one file per reminder
//! ```
//!
//! A claim writes its row to a temp file, fsyncs it, and hard-links it to the row's name: the
//! link fails if the name exists, so exactly one claim of a key wins, and a reader never sees a
//! half-written row. Updates replace the row atomically. Each owner keeps its newest
//! [`KEEP_FIRINGS`] rows; older ones are pruned when a firing is updated.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::atomic::{temp_path, write_atomic};
use super::syncs::SyncCounters;
use super::{FsStore, blocking};
use crate::api::BoxFuture;
use crate::error::{Error, Result};
use crate::timed::{FiringRecord, FiringStatus, ReminderRecord, TimedKind, TimedStore};

/// Firing rows kept per owner.
pub const KEEP_FIRINGS: usize = 200;

fn timed_dir(root: &Path) -> PathBuf {
    root.join("timed")
}

fn owner_dir(root: &Path, kind: TimedKind, owner: &str) -> Result<PathBuf> {
    check_segment(owner)?;
    Ok(timed_dir(root).join("firings").join(kind.as_str()).join(owner))
}

fn reminders_dir(root: &Path) -> PathBuf {
    timed_dir(root).join("reminders")
}

/// Owners and reminder ids become one path segment: plain names only.
fn check_segment(name: &str) -> Result<()> {
    let plain = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if plain { Ok(()) } else { Err(Error::InvalidKey { key: name.to_owned(), reason: "not a plain name" }) }
}

fn row_path(root: &Path, record: &FiringRecord) -> Result<PathBuf> {
    let millis = record.due_at.timestamp_millis().max(0);
    Ok(owner_dir(root, record.kind, &record.owner)?.join(format!("{millis:020}.json")))
}

fn claim(root: &Path, record: &FiringRecord, syncs: &SyncCounters) -> Result<bool> {
    let path = row_path(root, record)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let bytes = serde_json::to_vec_pretty(record).map_err(Error::Encode)?;
    let tmp = temp_path(&path);
    let written = (|| {
        use std::io::Write as _;
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(&bytes)?;
        syncs.data(&file)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    let linked = fs::hard_link(&tmp, &path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => syncs.dir(&dir).map(|()| true).map_err(|e| Error::io(&dir, e)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::io(&path, e)),
    }
}

fn update(root: &Path, record: &FiringRecord, syncs: &SyncCounters) -> Result<()> {
    let path = row_path(root, record)?;
    let bytes = serde_json::to_vec_pretty(record).map_err(Error::Encode)?;
    write_atomic(&path, &bytes, syncs).map_err(|e| Error::io(&path, e))?;
    if let Some(dir) = path.parent() {
        prune(dir)?;
    }
    Ok(())
}

/// The row files of one owner folder, sorted by due time (names are zero-padded millis).
fn row_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".json") && !name.starts_with('.')
        })
        .collect();
    files.sort();
    Ok(files)
}

fn prune(dir: &Path) -> Result<()> {
    let files = row_files(dir)?;
    if files.len() <= KEEP_FIRINGS {
        return Ok(());
    }
    for old in &files[..files.len() - KEEP_FIRINGS] {
        // Never prune a row that is still open: recovery needs it.
        if read_row(old).is_ok_and(|r| r.status == FiringStatus::Claimed) {
            continue;
        }
        let _ = fs::remove_file(old);
    }
    Ok(())
}

fn read_row(path: &Path) -> Result<FiringRecord> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::json(path, e))
}

fn firings_of(dir: &Path) -> Result<Vec<FiringRecord>> {
    row_files(dir)?.iter().map(|p| read_row(p)).collect()
}

fn open_firings(root: &Path) -> Result<Vec<FiringRecord>> {
    let mut open = Vec::new();
    for kind in [TimedKind::Schedule, TimedKind::Reminder] {
        let kind_dir = timed_dir(root).join("firings").join(kind.as_str());
        let owners = match fs::read_dir(&kind_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&kind_dir, e)),
        };
        for owner in owners.filter_map(|e| e.ok()) {
            open.extend(firings_of(&owner.path())?.into_iter().filter(|r| r.status == FiringStatus::Claimed));
        }
    }
    open.sort_by_key(|r| r.due_at);
    Ok(open)
}

fn put_reminder(root: &Path, record: &ReminderRecord, syncs: &SyncCounters) -> Result<()> {
    check_segment(&record.id)?;
    let dir = reminders_dir(root);
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let path = dir.join(format!("{}.json", record.id));
    let bytes = serde_json::to_vec_pretty(record).map_err(Error::Encode)?;
    write_atomic(&path, &bytes, syncs).map_err(|e| Error::io(&path, e))
}

fn get_reminder(root: &Path, id: &str) -> Result<Option<ReminderRecord>> {
    if check_segment(id).is_err() {
        return Ok(None);
    }
    let path = reminders_dir(root).join(format!("{id}.json"));
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::json(&path, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

fn all_reminders(root: &Path) -> Result<Vec<ReminderRecord>> {
    let dir = reminders_dir(root);
    let mut out = Vec::new();
    for path in row_files(&dir)? {
        let bytes = fs::read(&path).map_err(|e| Error::io(&path, e))?;
        out.push(serde_json::from_slice::<ReminderRecord>(&bytes).map_err(|e| Error::json(&path, e))?);
    }
    out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(out)
}

impl TimedStore for FsStore {
    fn claim_firing(&self, record: FiringRecord) -> BoxFuture<'_, Result<bool>> {
        let root = self.layout().root().to_path_buf();
        let syncs = self.sync_counters();
        Box::pin(blocking(&self.inner.syncs, move || claim(&root, &record, &syncs)))
    }

    fn update_firing(&self, record: FiringRecord) -> BoxFuture<'_, Result<()>> {
        let root = self.layout().root().to_path_buf();
        let syncs = self.sync_counters();
        Box::pin(blocking(&self.inner.syncs, move || update(&root, &record, &syncs)))
    }

    fn firings<'a>(&'a self, kind: TimedKind, owner: &'a str) -> BoxFuture<'a, Result<Vec<FiringRecord>>> {
        let root = self.layout().root().to_path_buf();
        let owner = owner.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || firings_of(&owner_dir(&root, kind, &owner)?)))
    }

    fn open_firings(&self) -> BoxFuture<'_, Result<Vec<FiringRecord>>> {
        let root = self.layout().root().to_path_buf();
        Box::pin(blocking(&self.inner.syncs, move || open_firings(&root)))
    }

    fn put_reminder(&self, record: ReminderRecord) -> BoxFuture<'_, Result<()>> {
        let root = self.layout().root().to_path_buf();
        let syncs = self.sync_counters();
        Box::pin(blocking(&self.inner.syncs, move || put_reminder(&root, &record, &syncs)))
    }

    fn reminder<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ReminderRecord>>> {
        let root = self.layout().root().to_path_buf();
        let id = id.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || get_reminder(&root, &id)))
    }

    fn reminders(&self) -> BoxFuture<'_, Result<Vec<ReminderRecord>>> {
        let root = self.layout().root().to_path_buf();
        Box::pin(blocking(&self.inner.syncs, move || all_reminders(&root)))
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone as _, Utc};

    use super::*;

    fn row(owner: &str, minute: u32) -> FiringRecord {
        let due = Utc.with_ymd_and_hms(2026, 1, 1, 9, minute, 0).unwrap();
        FiringRecord {
            kind: TimedKind::Schedule,
            owner: owner.into(),
            due_at: due,
            trigger: "cron".into(),
            status: FiringStatus::Claimed,
            session_ids: Vec::new(),
            claimed_at: due,
            finished_at: None,
            error: None,
        }
    }

    #[tokio::test]
    async fn a_key_is_claimed_once_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        assert!(store.claim_firing(row("daily", 0)).await.unwrap());
        assert!(!store.claim_firing(row("daily", 0)).await.unwrap(), "a second claim of one key loses");
        assert!(store.claim_firing(row("daily", 1)).await.unwrap());
        let reopened = FsStore::open(dir.path()).unwrap();
        assert!(!reopened.claim_firing(row("daily", 0)).await.unwrap());
        assert_eq!(reopened.open_firings().await.unwrap().len(), 2);
        let mut done = row("daily", 0);
        done.status = FiringStatus::Completed;
        reopened.update_firing(done).await.unwrap();
        let rows = reopened.firings(TimedKind::Schedule, "daily").await.unwrap();
        assert_eq!(rows.iter().map(|r| r.status).collect::<Vec<_>>(), [FiringStatus::Completed, FiringStatus::Claimed]);
        assert_eq!(reopened.open_firings().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn owners_must_be_plain_names() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        assert!(matches!(store.claim_firing(row("../x", 0)).await, Err(Error::InvalidKey { .. })));
        assert!(store.reminder("../x").await.unwrap().is_none());
    }
}
