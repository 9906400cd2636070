//! `host.kv` on disk: one JSON file per key under a kv folder (`kv/` for the agent-wide store,
//! `sessions/<id>/kv/` for one session's), replaced atomically. Keys are percent-encoded into
//! file names, so any key maps to exactly one plain file in that folder.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::atomic::write_atomic;
use super::syncs::SyncCounters;
use super::{FsStore, blocking};
use crate::api::{BoxFuture, KvStore};
use crate::error::{Error, Result};

/// File names stay under common filesystem limits (255 bytes) with the `.json` suffix.
const MAX_FILE_STEM: usize = 240;

impl KvStore for FsStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Value>>> {
        let dir = self.layout().kv_dir();
        let key = key.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || get_in(&dir, &key)))
    }

    fn put<'a>(&'a self, key: &'a str, value: Value) -> BoxFuture<'a, Result<()>> {
        let (dir, syncs) = (self.layout().kv_dir(), self.sync_counters());
        let key = key.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || put_in(&dir, &key, &value, &syncs)))
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool>> {
        let (dir, syncs) = (self.layout().kv_dir(), self.sync_counters());
        let key = key.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || delete_in(&dir, &key, &syncs)))
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Vec<String>>> {
        let dir = self.layout().kv_dir();
        let prefix = prefix.to_owned();
        Box::pin(blocking(&self.inner.syncs, move || keys_in(&dir, &prefix)))
    }
}

// The blocking operations on one kv folder, shared by the agent-wide store and the scoped host
// data (`host_data.rs`). A folder that does not exist yet reads as empty.

pub(super) fn get_in(dir: &Path, key: &str) -> Result<Option<Value>> {
    let path = key_path(dir, key)?;
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::json(&path, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Stores `value` atomically, creating the folder if needed.
pub(super) fn put_in(dir: &Path, key: &str, value: &Value, syncs: &SyncCounters) -> Result<()> {
    let path = key_path(dir, key)?;
    let bytes = serde_json::to_vec(value).map_err(Error::Encode)?;
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    write_atomic(&path, &bytes, syncs).map_err(|e| Error::io(&path, e))
}

pub(super) fn delete_in(dir: &Path, key: &str, syncs: &SyncCounters) -> Result<bool> {
    let path = key_path(dir, key)?;
    match fs::remove_file(&path) {
        Ok(()) => syncs.dir(dir).map(|()| true).map_err(|e| Error::io(dir, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(&path, e)),
    }
}

pub(super) fn keys_in(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut keys = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(key) = name.to_str().and_then(|n| n.strip_suffix(".json")).and_then(decode) else {
            continue;
        };
        if key.starts_with(prefix) {
            keys.push(key);
        }
    }
    keys.sort();
    Ok(keys)
}

fn key_path(dir: &Path, key: &str) -> Result<PathBuf> {
    let invalid = |reason| Error::InvalidKey { key: key.to_owned(), reason };
    if key.is_empty() {
        return Err(invalid("empty"));
    }
    let stem = encode(key);
    if stem.len() > MAX_FILE_STEM {
        return Err(invalid("too long"));
    }
    Ok(dir.join(format!("{stem}.json")))
}

/// `[A-Za-z0-9_-]` stay; every other byte becomes `%XX`. No encoded name starts with `.`, so
/// temp files (`.name.tmp`) never look like keys.
fn encode(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn decode(stem: &str) -> Option<String> {
    let bytes = stem.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = stem.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_file_names() {
        for key in ["plain", "a/b", "../x", ".hidden", "100%", "caf\u{e9} \u{2603}", "pr:owner/repo#1"] {
            let stem = encode(key);
            assert!(!stem.starts_with('.') && !stem.contains('/'), "{stem}");
            assert_eq!(decode(&stem).as_deref(), Some(key));
        }
        assert_eq!(decode("%zz"), None);
        assert_eq!(decode("%4"), None);
    }
}
