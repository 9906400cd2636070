//! Counting durable syncs: every `fsync`/`fdatasync` the filesystem backend makes, on a file or
//! on a directory, goes through one [`SyncCounters`] per store, so tests and benchmarks count
//! the syncs an operation costs instead of timing it.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// How many durable syncs a store has made since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// `fsync`/`fdatasync` of a file's data (event log commits, `session.json`, kv values, ...).
    pub file_syncs: u64,
    /// `fsync` of a directory, making created, renamed or removed entries durable.
    pub dir_syncs: u64,
}

impl SyncStats {
    /// The syncs made between `earlier` and `self`.
    pub fn since(self, earlier: SyncStats) -> SyncStats {
        SyncStats {
            file_syncs: self.file_syncs.saturating_sub(earlier.file_syncs),
            dir_syncs: self.dir_syncs.saturating_sub(earlier.dir_syncs),
        }
    }
}

/// The counters of one store, shared by everything that syncs on its behalf.
#[derive(Debug, Default)]
pub(crate) struct SyncCounters {
    file: AtomicU64,
    dir: AtomicU64,
    /// `session.json` reads (not a sync; counted here so tests count what start-up reads).
    records: AtomicU64,
    /// Event log files opened for reading (not a sync either).
    log_reads: AtomicU64,
    /// Work handed to tokio's blocking pool (`fs::blocking`).
    blocking_hops: AtomicU64,
    /// Event log files held open for appending (not a sync: the budget of
    /// `FsStoreOptions::max_open_logs` is kept against it).
    open_logs: AtomicUsize,
}

impl SyncCounters {
    pub fn stats(&self) -> SyncStats {
        SyncStats { file_syncs: self.file.load(Ordering::Relaxed), dir_syncs: self.dir.load(Ordering::Relaxed) }
    }

    /// `fdatasync`: the file's data and the metadata needed to read it back (its length).
    pub fn data(&self, file: &File) -> io::Result<()> {
        self.file.fetch_add(1, Ordering::Relaxed);
        file.sync_data()
    }

    /// Counts one `session.json` read.
    pub fn record_read(&self) {
        self.records.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_reads(&self) -> u64 {
        self.records.load(Ordering::Relaxed)
    }

    /// Counts one opening of an event log to read it (recovery, a read past the memory tail, or
    /// a record read that looks for a newer record in the log).
    pub fn log_read(&self) {
        self.log_reads.fetch_add(1, Ordering::Relaxed);
    }

    pub fn log_reads(&self) -> u64 {
        self.log_reads.load(Ordering::Relaxed)
    }

    /// Counts one hop to tokio's blocking pool.
    pub fn blocking_hop(&self) {
        self.blocking_hops.fetch_add(1, Ordering::Relaxed);
    }

    pub fn blocking_hops(&self) -> u64 {
        self.blocking_hops.load(Ordering::Relaxed)
    }

    /// Counts an event log file opened for appending; returns how many are open now.
    pub fn log_opened(&self) -> usize {
        self.open_logs.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Counts an event log file closed.
    pub fn log_closed(&self) {
        self.open_logs.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn open_logs(&self) -> usize {
        self.open_logs.load(Ordering::Relaxed)
    }

    /// Makes a directory's entries (creations, renames, removals) durable.
    pub fn dir(&self, dir: &Path) -> io::Result<()> {
        self.dir.fetch_add(1, Ordering::Relaxed);
        sync_dir(dir)
    }
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Directories cannot be opened for fsync here; rename durability is up to the platform.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}
