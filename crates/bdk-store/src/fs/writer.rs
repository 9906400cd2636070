//! The store's writer threads: the one place event logs are written. Appends to every open log
//! of the store queue on one bounded channel. A few threads take turns at it: the one whose turn
//! it is (the listener) waits for the next append, takes everything queued and lets go of the
//! queue, then groups its batch by log and commits each log's share with one `write` and one
//! fsync (`log.rs`), then publishes and acknowledges it, and goes back to the queue.
//!
//! The queue changes hands lazily: the other threads wait aside, and an append that finds no
//! listener (the last one is busy committing) wakes one of them to take the queue. Handing it on
//! at every batch instead woke a thread that had nothing to do whenever appends came one at a
//! time (a wake-up and two context switches per append, which is most of a quiet server's
//! appends); now a lone append wakes only the listener. No append hops through tokio's blocking pool;
//! a batch that spans many sessions costs one wake-up, and its fsyncs run side by side
//! (short-lived threads), as do the fsyncs of batches taken by different threads, so a
//! session's commit never waits for another session's device flush.
//!
//! A log's commits stay in order and one at a time: a batch holds a log's write side from its
//! write to its publication, so a later batch for the same log waits for it (and then carries
//! everything queued meanwhile: group commit). Batches lock their logs in one global order (by
//! address), so two threads never wait for each other.
//!
//! With write debouncing (`FsStoreOptions::sync_delay`), a commit is acknowledged once written
//! and its fsync is left to the store's syncer thread (`deferred.rs`). With nothing to wait for
//! but the `write` into the page cache (microseconds), the appending task makes its commit
//! itself ([`WriterHandle::send`]): a hand-off to a writer thread and back would cost more than
//! the write (two wake-ups and about four context switches per commit), and the store starts
//! no writer thread. Commits of one log still go one at a time, under its write side's lock.
//!
//! The batching itself is pure ([`take_batch`], [`by_log`], [`assign`]), so the `shuttle` tests
//! in `handoff_tests.rs` drive the same functions as production.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;

use tokio::sync::mpsc;

use super::deferred::Deferred;
use super::log::{AppendRequest, FsStoreOptions, Shared, Written};
use super::syncs::SyncCounters;
use crate::error::{Error, Result};

/// The sending side of a store's writer threads. They end once every handle is dropped and what
/// was queued is written.
#[derive(Debug, Clone)]
pub(crate) struct WriterHandle {
    requests: mpsc::Sender<AppendRequest>,
    queue: Arc<Queue>,
    /// Write debouncing's syncer, if the store debounces.
    deferred: Option<Arc<Deferred>>,
}

/// The receiving side, shared by the writer threads.
#[derive(Debug)]
struct Queue {
    /// Held by the listener while it waits for appends and takes a batch.
    requests: Mutex<mpsc::Receiver<AppendRequest>>,
    /// A thread waits for appends on `requests` right now.
    listening: AtomicBool,
    /// Threads waiting aside: `true` once one is asked to take the queue (an append found no
    /// listener), until one of them does.
    wanted: Mutex<bool>,
    wake: Condvar,
    /// Every sender is gone and the queue is empty: the threads end.
    closed: AtomicBool,
}

impl WriterHandle {
    /// Starts the writer threads of a store, or with a `sync_delay` its debounced syncer instead.
    pub fn start(options: &FsStoreOptions, syncs: &Arc<SyncCounters>) -> std::io::Result<Self> {
        let deferred = match options.sync_delay.is_zero() {
            true => None,
            false => Some(Arc::new(Deferred::start(options.sync_delay, syncs.clone())?)),
        };
        let (requests, receiver) = mpsc::channel(options.queue_capacity.max(1));
        let queue = Arc::new(Queue {
            requests: Mutex::new(receiver),
            listening: AtomicBool::new(false),
            wanted: Mutex::new(false),
            wake: Condvar::new(),
            closed: AtomicBool::new(false),
        });
        let max_batch_events = options.max_batch_events.max(1);
        // Debounced, every append is committed by its own task (`send`): no thread is needed.
        let threads = if deferred.is_some() { 0 } else { options.writer_threads.max(1) };
        for _ in 0..threads {
            let queue = queue.clone();
            thread::Builder::new().name("bdk-store-writer".into()).spawn(move || run(&queue, max_batch_events))?;
        }
        Ok(WriterHandle { requests, queue, deferred })
    }

    /// Syncs the commits write debouncing has left unsynced so far (the store is closing).
    pub fn flush_deferred(&self) {
        if let Some(deferred) = &self.deferred {
            deferred.flush();
        }
    }

    /// Queues an append; waits while the queue is full. `Err` when the thread has stopped. With
    /// no thread listening (every one is committing), asks a waiting one to take the queue.
    /// Debounced, commits it here instead (see the module docs).
    pub async fn send(&self, request: AppendRequest) -> Result<(), AppendRequest> {
        if let Some(deferred) = &self.deferred {
            // Debounced: nothing to wait for but the `write` itself, so it runs here, with no
            // hand-off to a writer thread and back.
            commit(vec![vec![request]], Some(deferred));
            return Ok(());
        }
        self.requests.send(request).await.map_err(|e| e.0)?;
        if !self.queue.listening.load(Ordering::SeqCst) {
            self.queue.want();
        }
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        self.requests.is_closed()
    }

    /// Appends queued and not yet taken by the thread.
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.requests.max_capacity() - self.requests.capacity()
    }
}

impl Queue {
    /// Asks one waiting thread to take the queue (a no-op while one is already asked).
    fn want(&self) {
        let mut wanted = self.wanted.lock().unwrap_or_else(PoisonError::into_inner);
        if !*wanted {
            *wanted = true;
            self.wake.notify_one();
        }
    }

    /// Waits aside until asked to take the queue. `false` once the threads are to end.
    fn wait_aside(&self) -> bool {
        let wanted = self.wanted.lock().unwrap_or_else(PoisonError::into_inner);
        let mut wanted = self
            .wake
            .wait_while(wanted, |wanted| !*wanted && !self.closed.load(Ordering::SeqCst))
            .unwrap_or_else(PoisonError::into_inner);
        *wanted = false;
        !self.closed.load(Ordering::SeqCst)
    }

    /// Listens for the next append and takes a batch, holding `requests`. `None` once every
    /// sender is gone and the queue is empty.
    fn take(
        &self,
        mut requests: std::sync::MutexGuard<'_, mpsc::Receiver<AppendRequest>>,
        max_batch_events: usize,
    ) -> Option<Vec<AppendRequest>> {
        self.listening.store(true, Ordering::SeqCst);
        let first = requests.blocking_recv();
        self.listening.store(false, Ordering::SeqCst);
        let Some(first) = first else {
            // The store and its logs were dropped: wake every thread waiting aside to end.
            self.closed.store(true, Ordering::SeqCst);
            let _wanted = self.wanted.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_all();
            return None;
        };
        // An append queued between `blocking_recv` and here may have found no listener and
        // asked a waiting thread to take over: it gets the queue once this batch is taken.
        Some(take_batch(first, |r| r.events.len(), max_batch_events, || requests.try_recv().ok()))
    }
}

fn run(queue: &Queue, max_batch_events: usize) {
    loop {
        // Back from a commit: take the queue if it is free, else wait aside until an append
        // finds nobody listening. Asked to take it, wait for the listener to let go.
        let requests = match queue.requests.try_lock() {
            Ok(requests) => requests,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                if !queue.wait_aside() {
                    return;
                }
                queue.requests.lock().unwrap_or_else(PoisonError::into_inner)
            }
        };
        if queue.closed.load(Ordering::SeqCst) {
            return;
        }
        let Some(batch) = queue.take(requests, max_batch_events) else { return };
        let mut groups = by_log(batch, |r| Arc::as_ptr(&r.log));
        // One global locking order, so batches on different threads cannot deadlock.
        groups.sort_by_key(|requests| Arc::as_ptr(&requests[0].log) as usize);
        commit(groups, None);
    }
}

/// The most threads that fsync the logs of one batch at once.
const SYNC_THREADS: usize = 16;

/// Commits a batch, one group of requests per log: writes each log's share, fsyncs them all
/// (in parallel when there are several, so the file system can fold them into one journal
/// commit instead of paying one device flush after another), then publishes and acknowledges
/// each. A log that fails is cut back and its own requests fail; the others are unaffected.
/// With `deferred` (write debouncing), the syncs are left to it instead.
fn commit(groups: Vec<Vec<AppendRequest>>, deferred: Option<&Deferred>) {
    let logs: Vec<Arc<Shared>> = groups.iter().map(|requests| requests[0].log.clone()).collect();
    let written: Vec<Written<'_>> =
        logs.iter().zip(groups).filter_map(|(log, requests)| guard(log, || log.write(requests)).flatten()).collect();
    let synced = match deferred {
        None => sync_all(&written),
        Some(deferred) => written
            .iter()
            .map(|w| {
                w.defer(deferred);
                Ok(())
            })
            .collect(),
    };
    for (written, synced) in written.into_iter().zip(synced) {
        let log = written.log();
        guard(log, || written.finish(synced));
    }
}

/// Runs one log's part of a commit. A bug in it must not stop every log of the store: that log
/// stops instead (its waiters get `LogClosed`; the next use reopens and recovers it).
fn guard<T>(log: &Shared, f: impl FnOnce() -> T) -> Option<T> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(_) => {
            tracing::error!(session = %log.session, "event log commit panicked; the log will be reopened");
            log.stop();
            None
        }
    }
}

/// Syncs every written log: on this thread when there is one, on up to [`SYNC_THREADS`]
/// threads at once when there are more.
fn sync_all(written: &[Written<'_>]) -> Vec<Result<()>> {
    if written.len() <= 1 {
        return written.iter().map(Written::sync).collect();
    }
    let per_thread = written.len().div_ceil(SYNC_THREADS);
    let sync_chunk = |chunk: &[Written<'_>]| chunk.iter().map(Written::sync).collect::<Vec<_>>();
    thread::scope(|scope| {
        let mut chunks = written.chunks(per_thread);
        let own = chunks.next().unwrap_or_default();
        let others: Vec<_> = chunks
            .map(|chunk| {
                (
                    chunk,
                    thread::Builder::new().name("bdk-store-sync".into()).spawn_scoped(scope, move || sync_chunk(chunk)),
                )
            })
            .collect();
        let mut results = sync_chunk(own);
        for (chunk, spawned) in others {
            let synced = match spawned {
                Ok(handle) => handle.join().unwrap_or_else(|_| {
                    chunk.iter().map(|_| Err(Error::Task("an fsync thread panicked".into()))).collect()
                }),
                // No thread to spare: sync here.
                Err(_) => sync_chunk(chunk),
            };
            results.extend(synced);
        }
        results
    })
}

/// A group commit's requests: `first`, then whatever `next` has queued, until the batch holds
/// `max_events` events or the queue is empty.
pub(crate) fn take_batch<R>(
    first: R,
    events: impl Fn(&R) -> usize,
    max_events: usize,
    mut next: impl FnMut() -> Option<R>,
) -> Vec<R> {
    let mut count = events(&first);
    let mut batch = vec![first];
    while count < max_events {
        let Some(request) = next() else { break };
        count += events(&request);
        batch.push(request);
    }
    batch
}

/// Splits a batch by log: each log's requests in the order they were queued, logs in the order
/// their first request was.
pub(crate) fn by_log<R, K: PartialEq>(batch: Vec<R>, key: impl Fn(&R) -> K) -> Vec<Vec<R>> {
    let mut groups: Vec<(K, Vec<R>)> = Vec::new();
    for request in batch {
        let k = key(&request);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, requests)) => requests.push(request),
            None => groups.push((k, vec![request])),
        }
    }
    groups.into_iter().map(|(_, requests)| requests).collect()
}

/// Gives one log's requests consecutive indices from `next` on, in order. `stage(request,
/// first)` returns the staged request and how many indices it took, or `None` when it failed
/// (it has answered the request itself) and took none. Returns the staged requests and the
/// index after the last one.
pub(crate) fn assign<R, S>(
    next: u64,
    requests: impl IntoIterator<Item = R>,
    mut stage: impl FnMut(R, u64) -> Option<(S, u64)>,
) -> (Vec<S>, u64) {
    let mut index = next;
    let mut staged = Vec::new();
    for request in requests {
        if let Some((s, taken)) = stage(request, index) {
            index += taken;
            staged.push(s);
        }
    }
    (staged, index)
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod store_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_stops_at_the_event_limit_and_keeps_queue_order() {
        let mut queue = vec![3, 1, 5, 2].into_iter();
        let batch = take_batch(2, |&n| n, 6, || queue.next());
        assert_eq!(batch, [2, 3, 1]);
        assert_eq!(queue.next(), Some(5), "the rest stays queued");
        let mut empty = std::iter::empty();
        assert_eq!(take_batch(9, |&n| n, 6, || empty.next()), [9], "one request may exceed the limit");
    }

    #[test]
    fn requests_group_by_log_in_queue_order() {
        let batch = vec![("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2)];
        let groups = by_log(batch, |&(log, _)| log);
        assert_eq!(groups, [vec![("a", 1), ("a", 2)], vec![("b", 1), ("b", 2)], vec![("c", 1)]]);
    }

    #[test]
    fn indices_are_consecutive_and_a_failed_request_takes_none() {
        let (staged, next) =
            assign(10, [2u64, 0, 3], |n, first| (n != 0).then(|| ((first..first + n).collect::<Vec<_>>(), n)));
        assert_eq!(staged, [vec![10, 11], vec![12, 13, 14]]);
        assert_eq!(next, 15);
    }
}
