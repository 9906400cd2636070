//! Waking followers: a registry of per-session signals on this replica, bumped on every local
//! append and by the `LISTEN bdk_events` connection for appends and deletes on any replica (the
//! same connection wakes command inboxes, command senders and turns waiting for a slot). A
//! signal only says "look again": followers read rows, so a lost or merged notification costs
//! latency, never an event (followers also look again every [`POLL`]). A local append also
//! leaves its committed events here (the newest batch of each followed session), so a
//! follower on this replica that is exactly there takes them without reading them back. The
//! registry also keeps the newest position each followed session is known to have reached
//! (local commits, and the position an append's notification carries): a follower woken by a
//! signal reads only when that is past it (or unknown), so its own replica's appends, which it
//! takes from here and which come back as notifications too, cost it no read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bdk_store::SharedEvent;
use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

/// The channel the event trigger notifies on.
pub(crate) const CHANNEL: &str = "bdk_events";

/// Forwarded session commands: payload `<target replica> <agent> <command id>`.
pub(crate) const COMMANDS: &str = "bdk_commands";

/// Answers to forwarded commands: payload `<command id>`.
pub(crate) const REPLIES: &str = "bdk_replies";

/// Running-turn slots given up: payload `<agent>`.
pub(crate) const SLOTS: &str = "bdk_slots";

/// The registry key turns waiting for one of `agent`'s slots wait on.
pub(crate) fn slots_key(agent: &str) -> (String, String) {
    ("\u{1}slots".to_owned(), agent.to_owned())
}

/// The registry key a replica's command inbox for `agent` waits on.
pub(crate) fn inbox_key(replica: &str, agent: &str) -> (String, String) {
    (format!("\u{1}commands {replica}"), agent.to_owned())
}

/// The registry key the sender of command `id` waits on.
pub(crate) fn reply_key(id: i64) -> (String, String) {
    ("\u{1}reply".to_owned(), id.to_string())
}

/// How long a follower waits without a signal before it reads again anyway.
pub(crate) const POLL: Duration = Duration::from_secs(2);

pub(crate) type Key = (String, String);

#[derive(Debug, Default)]
struct Registry {
    signals: Mutex<HashMap<Key, Weak<watch::Sender<u64>>>>,
    /// Of each followed session: the next index some commit is known to have reached (a local
    /// commit, or a notification's position). Absent: unknown (a follower woken then reads).
    known: Mutex<HashMap<Key, u64>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Weak<watch::Sender<u64>>>> {
        self.signals.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<Key, u64>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes whatever waits on `key`, after noting that its log reached `next` (`None`: a
    /// change of unknown extent, such as a delete).
    fn bump_to(&self, key: &Key, next: Option<u64>) {
        let sender = self.lock().get(key).and_then(Weak::upgrade);
        if let Some(sender) = sender {
            {
                let mut known = self.known();
                match next {
                    Some(next) => {
                        let entry = known.entry(key.clone()).or_insert(next);
                        *entry = (*entry).max(next);
                    }
                    None => {
                        known.remove(key);
                    }
                }
            }
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn bump(&self, key: &Key) {
        self.bump_to(key, None);
    }

    fn bump_all(&self) {
        self.known().clear();
        let senders: Vec<_> = self.lock().values().filter_map(Weak::upgrade).collect();
        for sender in senders {
            sender.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// A follower's subscription: dropping the last one of a session frees its slot.
#[derive(Debug)]
pub(crate) struct Signal {
    _sender: Arc<watch::Sender<u64>>,
    pub receiver: watch::Receiver<u64>,
}

#[derive(Debug)]
pub(crate) struct Notifier {
    registry: Arc<Registry>,
    /// Signals kept for as long as the notifier lives (one per agent's slot queue), so a
    /// receiver handed out alone keeps working.
    kept: Mutex<HashMap<Key, Arc<watch::Sender<u64>>>>,
    /// The newest committed batch of each followed session appended on this replica.
    recent: Mutex<HashMap<Key, Vec<SharedEvent>>>,
    task: JoinHandle<()>,
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Notifier {
    /// Starts the listening task on its own connection (reconnecting with backoff).
    pub fn start(config: tokio_postgres::Config) -> Notifier {
        let registry = Arc::new(Registry::default());
        let task = tokio::spawn(listen(config, Arc::downgrade(&registry)));
        Notifier { registry, kept: Mutex::default(), recent: Mutex::default(), task }
    }

    pub fn subscribe(&self, agent: &str, session: &str) -> Signal {
        self.subscribe_key((agent.to_owned(), session.to_owned()))
    }

    /// A signal under any key (command inboxes and reply waits use keys no session has).
    pub fn subscribe_key(&self, key: Key) -> Signal {
        let mut signals = self.registry.lock();
        signals.retain(|_, weak| weak.strong_count() > 0);
        self.recent().retain(|key, _| signals.contains_key(key));
        self.registry.known().retain(|key, _| signals.contains_key(key));
        let sender = match signals.get(&key).and_then(Weak::upgrade) {
            Some(sender) => sender,
            None => {
                let sender = Arc::new(watch::channel(0).0);
                signals.insert(key, Arc::downgrade(&sender));
                sender
            }
        };
        let receiver = sender.subscribe();
        Signal { _sender: sender, receiver }
    }

    /// Wakes this replica's followers of a session (after a local append or delete).
    pub fn bump(&self, agent: &str, session: &str) {
        self.registry.bump(&(agent.to_owned(), session.to_owned()));
    }

    /// Leaves the events of a session that this replica just committed for its followers
    /// here (only while it has followers), then wakes them.
    pub fn committed(&self, agent: &str, session: &str, events: Vec<SharedEvent>) {
        let key = (agent.to_owned(), session.to_owned());
        let next = events.last().map(|event| event.index + 1);
        if self.registry.lock().get(&key).is_some_and(|weak| weak.strong_count() > 0) {
            self.recent().insert(key.clone(), events);
        }
        self.registry.bump_to(&key, next);
    }

    /// Whether this replica knows of no commit to the session past `next` (a follower there
    /// woken by a signal has nothing to read). `false` when it does not know.
    pub fn caught_up(&self, agent: &str, session: &str, next: u64) -> bool {
        self.registry.known().get(&(agent.to_owned(), session.to_owned())).is_some_and(|&known| known <= next)
    }

    /// The events from index `from` on of the session's newest local batch, when that batch
    /// holds `from` (a follower exactly there needs no read).
    pub fn recent_from(&self, agent: &str, session: &str, from: u64) -> Option<Vec<SharedEvent>> {
        let recent = self.recent();
        let events = recent.get(&(agent.to_owned(), session.to_owned()))?;
        let first = events.first()?.index;
        let skip = usize::try_from(from.checked_sub(first)?).ok()?;
        (skip < events.len()).then(|| events[skip..].to_vec())
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<SharedEvent>>> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes whatever waits on `key` on this replica.
    pub fn bump_key(&self, key: &Key) {
        self.registry.bump(key);
    }

    /// A receiver of the signal under `key`, which stays registered while the notifier lives.
    pub fn watch_key(&self, key: Key) -> watch::Receiver<u64> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = kept.get(&key) {
            return sender.subscribe();
        }
        let signal = self.subscribe_key(key.clone());
        let receiver = signal.receiver.clone();
        kept.insert(key, signal._sender);
        receiver
    }
}

async fn listen(config: tokio_postgres::Config, registry: Weak<Registry>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if let Ok((client, mut connection)) = config.connect(NoTls).await {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let driver = tokio::spawn(async move {
                let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                while let Some(Ok(message)) = messages.next().await {
                    if let AsyncMessage::Notification(n) = message
                        && tx.send((n.channel().to_owned(), n.payload().to_owned())).is_err()
                    {
                        break;
                    }
                }
            });
            let listen = format!("LISTEN {CHANNEL}; LISTEN {COMMANDS}; LISTEN {REPLIES}; LISTEN {SLOTS}");
            if client.batch_execute(&listen).await.is_ok() {
                backoff = Duration::from_millis(100);
                // Anything appended while we were not listening: everyone looks again.
                match registry.upgrade() {
                    Some(registry) => registry.bump_all(),
                    None => return,
                }
                while let Some((channel, payload)) = rx.recv().await {
                    let Some(registry) = registry.upgrade() else { return };
                    let mut parts = payload.splitn(3, ' ');
                    match channel.as_str() {
                        COMMANDS => {
                            if let (Some(target), Some(agent)) = (parts.next(), parts.next()) {
                                registry.bump(&inbox_key(target, agent));
                            }
                        }
                        SLOTS => {
                            if let Some(agent) = parts.next() {
                                registry.bump(&slots_key(agent));
                            }
                        }
                        REPLIES => {
                            if let Some(id) = parts.next().and_then(|id| id.parse().ok()) {
                                registry.bump(&reply_key(id));
                            }
                        }
                        _ => {
                            if let (Some(agent), Some(session)) = (parts.next(), parts.next()) {
                                // An append's payload ends with the session's next index; a
                                // delete's with `deleted`.
                                let next = parts.next().and_then(|n| n.parse().ok());
                                registry.bump_to(&(agent.to_owned(), session.to_owned()), next);
                            }
                        }
                    }
                }
                tracing::warn!("the database notification connection closed; reconnecting");
            }
            driver.abort();
        }
        let Some(registry) = registry.upgrade() else { return };
        registry.bump_all();
        drop(registry);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
