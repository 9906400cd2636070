//! [`ArtifactStore`] on disk:
//!
//! ```text
//! <root>/artifacts/<id>.json      the record, replaced atomically
//! <root>/artifacts/<id>.content   its content bytes, when it has any
//! ```
//!
//! Tags of one store are serialized by a lock held inside the blocking task (never across an
//! await), so two tags of one key make one record and the retention cap holds after each tag.
//! Content is written before the record that describes it, so a reader never sees a record whose
//! content is missing; an eviction removes the record first, then its content. What a tag makes
//! of the record is the trait's ([`ArtifactTag::apply`]); this file only stores it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use chrono::Utc;

use super::atomic::write_atomic;
use super::{FsStore, blocking};
use crate::api::BoxFuture;
use crate::artifacts::{ArtifactQuery, ArtifactRecord, ArtifactStore, ArtifactTag, Tagged, is_artifact_id};
use crate::error::{Error, Result};

/// Serializes tags (an upsert reads every record, then writes).
static TAG_LOCK: Mutex<()> = Mutex::new(());

fn dir(store: &FsStore) -> PathBuf {
    store.layout().root().join("artifacts")
}

fn record_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.json"))
}

fn content_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.content"))
}

/// Every readable record. A missing folder is empty; a damaged record is skipped (logged).
fn read_all(dir: &Path) -> Result<Vec<ArtifactRecord>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else { continue };
        if !is_artifact_id(id) {
            continue;
        }
        if let Some(record) = read_one(dir, id)? {
            out.push(record);
        }
    }
    Ok(out)
}

fn read_one(dir: &Path, id: &str) -> Result<Option<ArtifactRecord>> {
    let path = record_path(dir, id);
    match fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(record) => Ok(Some(record)),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "skipping an unreadable artifact record");
                Ok(None)
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

fn newest_first(records: &mut [ArtifactRecord]) {
    records.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| b.id.cmp(&a.id)));
}

impl ArtifactStore for FsStore {
    fn tag(&self, tag: ArtifactTag, max: Option<usize>) -> BoxFuture<'_, Result<Tagged>> {
        let (dir, syncs) = (dir(self), self.sync_counters());
        Box::pin(blocking(&self.inner.syncs, move || {
            tag.check_size()?;
            let _guard = TAG_LOCK.lock().unwrap_or_else(|p| p.into_inner());
            fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let mut all = read_all(&dir)?;
            let existing =
                all.iter().position(|r| r.principal == tag.principal && r.kind == tag.kind && r.key == tag.key);
            let (record, created, content) = tag.apply(existing.map(|at| all.swap_remove(at)), Utc::now());
            if let Some(bytes) = content {
                let path = content_path(&dir, &record.id);
                write_atomic(&path, &bytes, &syncs).map_err(|e| Error::io(&path, e))?;
            }
            let bytes = serde_json::to_vec_pretty(&record).map_err(Error::Encode)?;
            let path = record_path(&dir, &record.id);
            write_atomic(&path, &bytes, &syncs).map_err(|e| Error::io(&path, e))?;
            let mut evicted = Vec::new();
            if let Some(max) = max {
                // `all` holds every other record; the tagged one is the newest and stays.
                newest_first(&mut all);
                for old in all.iter().skip(max.saturating_sub(1)) {
                    remove(&record_path(&dir, &old.id))?;
                    remove(&content_path(&dir, &old.id))?;
                    evicted.push(old.id.clone());
                }
            }
            Ok(Tagged { record, created, evicted })
        }))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<ArtifactRecord>>> {
        let (dir, id) = (dir(self), id.to_owned());
        Box::pin(blocking(&self.inner.syncs, move || if is_artifact_id(&id) { read_one(&dir, &id) } else { Ok(None) }))
    }

    fn list<'a>(&'a self, query: &'a ArtifactQuery) -> BoxFuture<'a, Result<Vec<ArtifactRecord>>> {
        let (dir, query) = (dir(self), query.clone());
        Box::pin(blocking(&self.inner.syncs, move || {
            let mut records: Vec<ArtifactRecord> = read_all(&dir)?.into_iter().filter(|r| query.matches(r)).collect();
            newest_first(&mut records);
            if let Some(limit) = query.limit {
                records.truncate(limit);
            }
            Ok(records)
        }))
    }

    fn content<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        let (dir, id) = (dir(self), id.to_owned());
        Box::pin(blocking(&self.inner.syncs, move || {
            if !is_artifact_id(&id) || read_one(&dir, &id)?.and_then(|r| r.content).is_none() {
                return Ok(None);
            }
            let path = content_path(&dir, &id);
            match fs::read(&path) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::io(&path, e)),
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::ContentInfo;

    fn tag(principal: &str, key: &str) -> ArtifactTag {
        ArtifactTag {
            kind: "report".into(),
            key: key.into(),
            title: Some(format!("Report {key}")),
            data: None,
            principal: principal.into(),
            session_id: None,
            source: "host".into(),
            content: None,
        }
    }

    #[tokio::test]
    async fn a_key_is_updated_in_place_and_owners_do_not_share_keys() {
        let temp = tempfile::tempdir().unwrap();
        let store = FsStore::open(temp.path()).unwrap();
        let first = store.tag(tag("alice", "w1"), None).await.unwrap();
        assert!(first.created);
        let mut again = tag("alice", "w1");
        again.title = Some("Renamed".into());
        again.content = Some((
            ContentInfo { file_name: "r.md".into(), content_type: "text/markdown".into(), size: 2 },
            b"hi".to_vec(),
        ));
        let second = store.tag(again, None).await.unwrap();
        assert!(!second.created);
        assert_eq!(second.record.id, first.record.id);
        assert_eq!(second.record.title.as_deref(), Some("Renamed"));
        let other = store.tag(tag("bob", "w1"), None).await.unwrap();
        assert_ne!(other.record.id, first.record.id);
        assert_eq!(store.content(&first.record.id).await.unwrap().unwrap(), b"hi");
        assert!(store.content(&other.record.id).await.unwrap().is_none());
        let alice = ArtifactQuery { principal: Some("alice".into()), ..Default::default() };
        assert_eq!(store.list(&alice).await.unwrap().len(), 1);
        assert!(store.get("art_../../x").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_cap_evicts_the_oldest_updated() {
        let temp = tempfile::tempdir().unwrap();
        let store = FsStore::open(temp.path()).unwrap();
        let a = store.tag(tag("p", "a"), Some(2)).await.unwrap().record.id;
        let b = store.tag(tag("p", "b"), Some(2)).await.unwrap().record.id;
        // Touching `a` makes `b` the oldest-updated.
        store.tag(tag("p", "a"), Some(2)).await.unwrap();
        let third = store.tag(tag("p", "c"), Some(2)).await.unwrap();
        assert_eq!(third.evicted, vec![b.clone()]);
        let left: Vec<String> =
            store.list(&ArtifactQuery::default()).await.unwrap().into_iter().map(|r| r.id).collect();
        assert_eq!(left, vec![third.record.id, a]);
        assert!(store.get(&b).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn content_over_the_cap_is_refused_and_nothing_is_written() {
        let temp = tempfile::tempdir().unwrap();
        let store = FsStore::open(temp.path()).unwrap();
        let mut big = tag("alice", "w1");
        let size = crate::artifacts::MAX_CONTENT_BYTES + 1;
        big.content = Some((
            ContentInfo { file_name: "big.bin".into(), content_type: "application/octet-stream".into(), size: 0 },
            vec![b'x'; size],
        ));
        let err = store.tag(big, None).await.unwrap_err();
        assert!(matches!(err, Error::TooLarge { what: "artifact content", .. }), "{err}");
        assert!(store.list(&ArtifactQuery::default()).await.unwrap().is_empty());
    }
}
