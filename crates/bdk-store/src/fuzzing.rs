//! One entry point that feeds arbitrary bytes to the event log's recovery and reader, for the
//! cargo-fuzz target `log` (`fuzz/`). Not part of the public API.
//!
//! The properties checked (a panic is a finding): recovery of any file returns; when it keeps
//! the log, the file is cut to exactly the valid prefix of the input, every kept line is read
//! back by the reader as the event it claims to be, and a second recovery drops nothing; when it
//! reports corruption, the file is left as it was.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;
use crate::fs::follow::{Cursor, read_chunk};
use crate::fs::recover::recover;
use crate::fs::syncs::SyncCounters;

/// Writes `bytes` as an event log in a scratch folder, recovers it and reads it back, checking
/// the properties above.
pub fn recover_and_read(bytes: &[u8]) {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("bdk-fuzz-log-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path: PathBuf = dir.join(format!("{}.ndjson", N.fetch_add(1, Ordering::Relaxed)));
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    let syncs = SyncCounters::default();
    match recover(&path, &syncs) {
        Ok(recovered) => {
            let kept = std::fs::read(&path).unwrap_or_default();
            assert_eq!(kept.len() as u64, recovered.len, "the file is cut to the valid prefix");
            assert_eq!(&bytes[..kept.len()], &kept[..], "recovery only cuts, never rewrites");
            assert_eq!(recovered.dropped_bytes, (bytes.len() - kept.len()) as u64);
            assert!(kept.is_empty() || kept.ends_with(b"\n"), "the kept prefix ends on a line");
            assert_eq!(kept.iter().filter(|b| **b == b'\n').count() as u64, recovered.next_index);
            let cursor = Cursor { offset: 0, index: 0, end: recovered.len };
            match read_chunk(&path, cursor, 0, usize::MAX) {
                // A kept line is JSON with the right index, but it may not be a whole event
                // (a hand-edited log): the reader then says so, it does not panic.
                Ok((events, next)) => {
                    assert_eq!(events.len() as u64, recovered.next_index);
                    assert!(events.iter().enumerate().all(|(i, e)| e.index == i as u64));
                    assert_eq!(next.offset, recovered.len);
                }
                Err(Error::Json { .. }) => {}
                Err(other) => panic!("reading a recovered log failed: {other}"),
            }
            let again = recover(&path, &syncs).unwrap_or_else(|e| panic!("second recovery failed: {e}"));
            assert_eq!((again.len, again.next_index, again.dropped_bytes), (recovered.len, recovered.next_index, 0));
            assert_eq!(again.checkpoints, recovered.checkpoints);
        }
        Err(Error::Corrupt { .. }) => {
            assert_eq!(std::fs::read(&path).unwrap_or_default(), bytes, "corruption is reported, not repaired");
        }
        Err(other) => panic!("recovery failed on a readable file: {other}"),
    }
    let _ = std::fs::remove_file(&path);
}

#[cfg(test)]
mod tests {
    /// The fuzz target's seed corpus holds (so the properties run in the normal suite too).
    #[test]
    fn the_seed_corpus_holds_the_properties() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/log");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            super::recover_and_read(&std::fs::read(entry.unwrap().path()).unwrap());
            seeds += 1;
        }
        assert!(seeds >= 4, "seeds in {}", dir.display());
    }
}
