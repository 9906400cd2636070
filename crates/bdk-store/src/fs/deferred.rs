//! Write debouncing (`storage.toml`'s `policy.debounce_ms`): event log commits are written (by
//! the appending task itself, `writer.rs`) and acknowledged at once, and their `fdatasync` (with
//! a new session's folder syncs) is left to one thread that makes every log written since its
//! last pass durable together, at most `delay` after the first of those writes.
//!
//! The `write` runs on the caller's thread, a runtime worker: it copies into the page cache and
//! returns in microseconds, and would block only under the kernel's dirty-page throttling (dirty
//! pages past `vm.dirty_ratio`), where the writer threads would stall the turns as much.
//!
//! What this trades: a commit reaches the kernel (`write`) before it is acknowledged, so a
//! killed or crashed `bdk` process loses nothing; a power loss or kernel crash can lose what was
//! acknowledged in the last `delay`. A sync that fails is logged as an error (the kernel may
//! have dropped the pages it could not write, so those events may not survive a power loss).
//! Dropping the store syncs whatever is pending before it returns.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::syncs::SyncCounters;

/// The syncer of one store: owned by the store and its writer threads; dropping the last owner
/// syncs what is pending and ends the thread.
#[derive(Debug)]
pub(crate) struct Deferred {
    state: Arc<State>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct State {
    pending: Mutex<Pending>,
    wake: Condvar,
    delay: Duration,
    syncs: Arc<SyncCounters>,
}

#[derive(Debug, Default)]
struct Pending {
    /// Each log written since the last pass; `true`: its session folder is new, so the folder
    /// and `sessions/` are synced after it.
    logs: HashMap<PathBuf, bool>,
    /// When the oldest of them was written.
    since: Option<Instant>,
    closed: bool,
}

impl Deferred {
    pub fn start(delay: Duration, syncs: Arc<SyncCounters>) -> std::io::Result<Deferred> {
        let state = Arc::new(State { pending: Mutex::default(), wake: Condvar::new(), delay, syncs });
        let thread = {
            let state = state.clone();
            thread::Builder::new().name("bdk-store-debounce".into()).spawn(move || state.run())?
        };
        Ok(Deferred { state, thread: Some(thread) })
    }

    /// Notes a commit written to `log` and acknowledged unsynced (`new_folder`: the log's
    /// session folder has never been synced).
    pub fn written(&self, log: &Path, new_folder: bool) {
        let mut pending = self.state.lock();
        pending.since.get_or_insert_with(Instant::now);
        *pending.logs.entry(log.to_path_buf()).or_default() |= new_folder;
        if pending.logs.len() == 1 {
            self.state.wake.notify_one();
        }
    }

    /// Syncs what is pending now, on this thread (the store is being closed).
    pub fn flush(&self) {
        let logs = {
            let mut pending = self.state.lock();
            pending.since = None;
            std::mem::take(&mut pending.logs)
        };
        self.state.sync_all(logs);
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        self.state.lock().closed = true;
        self.state.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl State {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(&self) {
        loop {
            let logs = {
                let mut pending = self.lock();
                loop {
                    if pending.closed {
                        break;
                    }
                    match pending.since {
                        None => pending = self.wake.wait(pending).unwrap_or_else(PoisonError::into_inner),
                        Some(since) => {
                            let left = self.delay.saturating_sub(since.elapsed());
                            if left.is_zero() {
                                break;
                            }
                            pending = self.wake.wait_timeout(pending, left).unwrap_or_else(PoisonError::into_inner).0;
                        }
                    }
                }
                pending.since = None;
                (std::mem::take(&mut pending.logs), pending.closed)
            };
            let (logs, closed) = logs;
            self.sync_all(logs);
            if closed {
                return;
            }
        }
    }

    /// Syncs each log's data, then each new session folder, then each parent of those
    /// (`sessions/`) once. A log deleted meanwhile (its session was) has nothing left to sync.
    fn sync_all(&self, logs: HashMap<PathBuf, bool>) {
        let mut folders = BTreeSet::new();
        let mut parents = BTreeSet::new();
        for (log, new_folder) in logs {
            match File::open(&log).and_then(|file| self.syncs.data(&file)) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => failed(&log, &error),
            }
            if let Some(folder) = log.parent().filter(|_| new_folder) {
                parents.extend(folder.parent().map(Path::to_path_buf));
                folders.insert(folder.to_path_buf());
            }
        }
        for dir in folders.iter().chain(&parents) {
            match self.syncs.dir(dir) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => failed(dir, &error),
                _ => {}
            }
        }
    }
}

fn failed(path: &Path, error: &std::io::Error) {
    tracing::error!(
        path = %path.display(),
        %error,
        "a debounced sync failed: events acknowledged in the last policy.debounce_ms may not survive a power loss"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_logs_are_synced_together_once_the_delay_passed_and_at_drop() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("sessions").join("s1");
        std::fs::create_dir_all(&session).unwrap();
        let (a, b) = (session.join("events.ndjson"), dir.path().join("other.ndjson"));
        std::fs::write(&a, b"x\n").unwrap();
        std::fs::write(&b, b"y\n").unwrap();
        let syncs = Arc::new(SyncCounters::default());
        let deferred = Deferred::start(Duration::from_millis(50), syncs.clone()).unwrap();
        deferred.written(&a, true);
        deferred.written(&a, false);
        deferred.written(&b, false);
        assert_eq!(syncs.stats().file_syncs, 0, "nothing is synced before the delay");
        let deadline = Instant::now() + Duration::from_secs(10);
        while syncs.stats().dir_syncs < 2 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        let stats = syncs.stats();
        assert_eq!((stats.file_syncs, stats.dir_syncs), (2, 2), "each log once; a's new folder and its parent");

        // Two new folders in one pass: `sessions/` is synced once for both.
        let (c, d) = (dir.path().join("sessions/s2/events.ndjson"), dir.path().join("sessions/s3/events.ndjson"));
        for log in [&c, &d] {
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
            std::fs::write(log, b"z\n").unwrap();
            deferred.written(log, true);
        }
        deferred.flush();
        let stats = syncs.stats();
        assert_eq!((stats.file_syncs, stats.dir_syncs), (4, 5), "two folders and sessions/ once");

        // A log deleted before its pass is skipped; what is pending at drop is synced by it.
        deferred.written(&dir.path().join("gone.ndjson"), false);
        deferred.written(&b, false);
        drop(deferred);
        assert_eq!(syncs.stats().file_syncs, 5);
    }
}
