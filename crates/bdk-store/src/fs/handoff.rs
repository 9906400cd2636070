//! The replay-to-live hand-off as a protocol, free of files and of tokio: the publish and
//! subscribe steps that must share one lock, and the follower's state machine (position
//! bookkeeping, disk first, then live, and catching up again after a lag).
//!
//! `log.rs` publishes through [`publish_then_ack`] and `follow.rs` runs [`Follower`] on the real file and
//! tokio's broadcast channel. `handoff_tests.rs` runs the same code under `shuttle`, which
//! schedules the threads of a writer and followers deterministically at random and checks that
//! every follower sees each index exactly once, in order, and that an acknowledged append is
//! visible to whoever starts reading after the acknowledgement. Reading the file (or the
//! log's in-memory tail) is not here; the writer's batching and index assignment are pure
//! functions in `writer.rs`, which the same tests drive.
//!
//! The invariant: a commit updates the durable mark and broadcasts its events while holding the
//! mark's lock, and a follower reads the mark and subscribes while holding the same lock. So each
//! event is either below the mark the follower read (it comes from disk) or broadcast after the
//! follower subscribed (it comes from the channel), never both and never neither.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::DerefMut;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A mutual-exclusion lock: `std::sync::Mutex` in production, `shuttle`'s in tests.
pub(crate) trait Lock<T> {
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a;

    fn lock(&self) -> Self::Guard<'_>;
}

impl<T> Lock<T> for Mutex<T> {
    type Guard<'a>
        = MutexGuard<'a, T>
    where
        T: 'a;

    fn lock(&self) -> MutexGuard<'_, T> {
        // A panic while holding the lock leaves plain numbers behind; they stay usable.
        Mutex::lock(self).unwrap_or_else(PoisonError::into_inner)
    }
}

/// The sending side of a live channel: tokio's broadcast channel in production.
pub(crate) trait Topic {
    type Item;
    type Receiver;

    /// A receiver of every item sent after this call.
    fn subscribe(&self) -> Self::Receiver;

    /// Sends to every receiver; having none is fine.
    fn send(&self, item: Self::Item);
}

/// Atomically: `read` of the durable state now, and a receiver of everything published after it.
pub(crate) fn subscribe<S, L, T, R>(state: &L, topic: &T, read: impl FnOnce(&S) -> R) -> (R, T::Receiver)
where
    L: Lock<S>,
    T: Topic,
{
    let guard = state.lock();
    let receiver = topic.subscribe();
    (read(&guard), receiver)
}

/// Makes a commit visible: `update` moves the durable state past it and its events are
/// broadcast, under one lock (see the module docs). Call after the commit is durable and before
/// acknowledging it.
pub(crate) fn publish<S, L, T>(
    state: &L,
    topic: &T,
    update: impl FnOnce(&mut S),
    events: impl IntoIterator<Item = T::Item>,
) where
    L: Lock<S>,
    T: Topic,
{
    let mut guard = state.lock();
    update(&mut guard);
    for event in events {
        topic.send(event);
    }
}

/// Ends a durable commit: [`publish`] its requests' events, then answer each request, so that
/// whoever holds an acknowledgement finds its events in any read or follow that starts after.
pub(crate) fn publish_then_ack<S, L, T, A>(
    state: &L,
    topic: &T,
    update: impl FnOnce(&mut S),
    requests: Vec<(A, Vec<T::Item>)>,
    mut ack: impl FnMut(A, Vec<T::Item>),
) where
    L: Lock<S>,
    T: Topic,
    T::Item: Clone,
{
    publish(state, topic, update, requests.iter().flat_map(|(_, events)| events.iter().cloned()));
    for (request, events) in requests {
        ack(request, events);
    }
}

/// What a live receiver yields.
#[derive(Debug)]
pub(crate) enum Live<E> {
    Event(E),
    /// The receiver fell behind the channel's buffer; what it missed is durable.
    Lagged,
    /// Every sender is gone and everything sent was received.
    Closed,
}

/// A log as a follower sees it: a durable prefix to read and a live channel above it.
pub(crate) trait Source: Send {
    type Event: Send;
    /// Where a read of the durable prefix continues.
    type Cursor: Send;
    type Receiver: Send;
    type Error: Send;

    fn index(event: &Self::Event) -> u64;

    /// Through [`subscribe`]: a cursor over the durable events at or past `from` (`None` when
    /// there are none) and a receiver for every later one. `None` when the log is closed.
    fn snapshot(&self, from: u64) -> Option<(Option<Self::Cursor>, Self::Receiver)>;

    /// The next durable events at `cursor` with an index of at least `want`, and the cursor to
    /// continue from (`None` at the end of the prefix the cursor was taken for).
    fn read(&self, cursor: Self::Cursor, want: u64) -> impl Future<Output = Result<Chunk<Self>, Self::Error>> + Send;

    fn recv(receiver: &mut Self::Receiver) -> impl Future<Output = Live<Self::Event>> + Send;

    /// Told when the follower lagged and is about to catch up from disk.
    fn lagged(&self, _want: u64) {}
}

/// Events read from the durable prefix, and where the read continues (`None`: nothing left).
pub(crate) type Chunk<S> = (Vec<<S as Source>::Event>, Option<<S as Source>::Cursor>);

/// Replay, then follow: hands out every event from `from` on exactly once, in index order.
#[derive(Debug)]
pub(crate) struct Follower<S: Source> {
    source: S,
    /// The next index to hand out.
    want: u64,
    disk: Option<S::Cursor>,
    /// `None` once the stream has ended.
    live: Option<S::Receiver>,
    pending: VecDeque<S::Event>,
}

impl<S: Source> Follower<S> {
    pub fn start(source: S, from: u64) -> Self {
        let (disk, live) = match source.snapshot(from) {
            Some((disk, receiver)) => (disk, Some(receiver)),
            None => (None, None),
        };
        Follower { source, want: from, disk, live, pending: VecDeque::new() }
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// Ends the stream: drops the live receiver and whatever was read ahead.
    pub fn end(&mut self) {
        self.live = None;
        self.disk = None;
        self.pending.clear();
    }

    /// The next event; `None` once the log is closed. The stream ends after an error.
    pub async fn next(&mut self) -> Option<Result<S::Event, S::Error>> {
        loop {
            let receiver = self.live.as_mut()?;
            if let Some(event) = self.pending.pop_front() {
                self.want = S::index(&event) + 1;
                return Some(Ok(event));
            }
            if let Some(cursor) = self.disk.take() {
                match self.source.read(cursor, self.want).await {
                    Ok((events, next)) => {
                        self.pending.extend(events);
                        self.disk = next;
                    }
                    Err(error) => {
                        self.live = None;
                        return Some(Err(error));
                    }
                }
                continue;
            }
            match S::recv(receiver).await {
                // Published before `want` was asked for (a follower that starts ahead of the log).
                Live::Event(event) if S::index(&event) < self.want => {}
                Live::Event(event) if S::index(&event) == self.want => {
                    self.want += 1;
                    return Some(Ok(event));
                }
                Live::Event(_) | Live::Lagged => {
                    // Fell behind the channel: everything missed is on disk by now.
                    self.source.lagged(self.want);
                    match self.source.snapshot(self.want) {
                        Some((disk, receiver)) => (self.disk, self.live) = (disk, Some(receiver)),
                        None => self.live = None,
                    }
                }
                Live::Closed => self.live = None,
            }
        }
    }
}
