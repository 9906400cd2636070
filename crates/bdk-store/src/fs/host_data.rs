//! Scoped `host.kv` and `host.files` on disk. The agent-wide scope uses `kv/` (the same folder
//! as [`KvStore`](crate::KvStore)) and `files/`; a session's scope lives inside its session folder
//! (`sessions/<id>/kv/`, `sessions/<id>/files/`), so deleting the session removes its data.
//!
//! File paths are checked lexically before any IO ([`check_path`]): relative, `/`-separated,
//! every segment a plain name that does not start with a dot. No path can name anything outside
//! its area, and the hidden temp files of atomic writes never collide with a user's file. Files
//! are only ever created through this module; listing does not follow symlinks.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::atomic::write_atomic;
use super::kv::{delete_in, get_in, keys_in, put_in};
use super::{FsStore, Layout, blocking};
use crate::api::{BoxFuture, DataScope, FileEntry, HostDataStore};
use crate::error::{Error, Result};

/// Longest accepted file path, in bytes.
const MAX_PATH: usize = 1024;

/// The folders of one scope, and whether the scope can take writes.
struct Area {
    kv: PathBuf,
    files: PathBuf,
    /// For a session scope: its `session.json`, which must exist for a write.
    session: Option<(PathBuf, bdk_protocol::SessionId)>,
}

impl Area {
    fn of(layout: &Layout, scope: &DataScope) -> Area {
        match scope {
            DataScope::Agent => Area { kv: layout.kv_dir(), files: layout.files_dir(), session: None },
            DataScope::Session(id) => Area {
                kv: layout.session_kv_dir(id),
                files: layout.session_files_dir(id),
                session: Some((layout.session_json(id), id.clone())),
            },
        }
    }

    /// Refuses writes into a session that does not exist (so no orphan folder appears).
    fn writable(&self) -> Result<()> {
        match &self.session {
            Some((json, id)) if !json.exists() => Err(Error::SessionNotFound(id.clone())),
            _ => Ok(()),
        }
    }
}

impl HostDataStore for FsStore {
    fn kv_get<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, Result<Option<Value>>> {
        let area = Area::of(self.layout(), scope);
        let key = key.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || get_in(&area.kv, &key)))
    }

    fn kv_put<'a>(&'a self, scope: &'a DataScope, key: &'a str, value: Value) -> BoxFuture<'a, Result<()>> {
        let (area, syncs) = (Area::of(self.layout(), scope), self.sync_counters());
        let key = key.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || {
            area.writable()?;
            put_in(&area.kv, &key, &value, &syncs)
        }))
    }

    fn kv_delete<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, Result<bool>> {
        let (area, syncs) = (Area::of(self.layout(), scope), self.sync_counters());
        let key = key.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || delete_in(&area.kv, &key, &syncs)))
    }

    fn kv_keys<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        let area = Area::of(self.layout(), scope);
        let prefix = prefix.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || keys_in(&area.kv, &prefix)))
    }

    fn file_read<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>>> {
        let area = Area::of(self.layout(), scope);
        let path = path.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || {
            let full = area.files.join(check_path(&path)?);
            match fs::read(&full) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if is_absent(&e) => Ok(None),
                Err(_) if full.is_dir() => Err(Error::InvalidPath { path, reason: "is a folder" }),
                Err(e) => Err(Error::io(&full, e)),
            }
        }))
    }

    fn file_write<'a>(&'a self, scope: &'a DataScope, path: &'a str, bytes: Vec<u8>) -> BoxFuture<'a, Result<()>> {
        let (area, syncs) = (Area::of(self.layout(), scope), self.sync_counters());
        let path = path.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || {
            let full = area.files.join(check_path(&path)?);
            area.writable()?;
            if full.is_dir() {
                return Err(Error::InvalidPath { path, reason: "is a folder" });
            }
            let parent = full.parent().unwrap_or(&area.files);
            if let Err(e) = fs::create_dir_all(parent) {
                return Err(match e.kind() {
                    io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => {
                        Error::InvalidPath { path, reason: "a parent is a file" }
                    }
                    _ => Error::io(parent, e),
                });
            }
            write_atomic(&full, &bytes, &syncs).map_err(|e| Error::io(&full, e))
        }))
    }

    fn file_delete<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, Result<bool>> {
        let (area, syncs) = (Area::of(self.layout(), scope), self.sync_counters());
        let path = path.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || {
            let full = area.files.join(check_path(&path)?);
            match fs::remove_file(&full) {
                Ok(()) => {
                    let parent = full.parent().unwrap_or(&area.files);
                    syncs.dir(parent).map(|()| true).map_err(|e| Error::io(parent, e))
                }
                Err(e) if is_absent(&e) => Ok(false),
                Err(_) if full.is_dir() => Err(Error::InvalidPath { path, reason: "is a folder" }),
                Err(e) => Err(Error::io(&full, e)),
            }
        }))
    }

    fn file_list<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, Result<Vec<FileEntry>>> {
        let area = Area::of(self.layout(), scope);
        let prefix = prefix.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || {
            let mut out = Vec::new();
            walk(&area.files, "", &mut out)?;
            out.retain(|entry| entry.path.starts_with(&prefix));
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(out)
        }))
    }
}

/// `NotFound`, or a parent that is a file (`NotADirectory`): either way there is no such file.
fn is_absent(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

/// Every plain file under `dir`, with paths relative to the area. Hidden names (temp files of
/// atomic writes) and symlinks are skipped.
fn walk(dir: &Path, relative: &str, out: &mut Vec<FileEntry>) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        if name.starts_with('.') {
            continue;
        }
        let path = if relative.is_empty() { name } else { format!("{relative}/{name}") };
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if kind.is_dir() {
            walk(&entry.path(), &path, out)?;
        } else if kind.is_file() {
            let size = entry.metadata().map_err(|e| Error::io(entry.path(), e))?.len();
            out.push(FileEntry { path, size });
        }
    }
    Ok(())
}

/// The relative path `path` names inside an area, or `InvalidPath`: empty, too long, absolute,
/// a `\` or NUL, or a segment that is empty, `.`, `..` or starts with a dot.
pub(crate) fn check_path(path: &str) -> Result<PathBuf> {
    let invalid = |reason| Err(Error::InvalidPath { path: path.to_owned(), reason });
    if path.is_empty() {
        return invalid("empty");
    }
    if path.len() > MAX_PATH {
        return invalid("too long");
    }
    if path.starts_with('/') {
        return invalid("absolute paths are not allowed");
    }
    if path.contains('\\') || path.contains('\0') {
        return invalid("backslashes and NUL are not allowed");
    }
    let mut out = PathBuf::new();
    for segment in path.split('/') {
        if segment.is_empty() {
            return invalid("empty path segment");
        }
        if segment == ".." {
            return invalid("`..` would leave the files area");
        }
        if segment.starts_with('.') {
            return invalid("segments may not start with a dot");
        }
        out.push(segment);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_their_area() {
        assert_eq!(check_path("a/b.txt").unwrap(), Path::new("a/b.txt"));
        assert_eq!(check_path("notes").unwrap(), Path::new("notes"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "a/./b", ".hidden", "a/.b", "a\\b", "a/", "a\0b"] {
            assert!(matches!(check_path(bad), Err(Error::InvalidPath { .. })), "{bad:?}");
        }
        assert!(check_path(&"x".repeat(MAX_PATH + 1)).is_err());
    }
}
