//! Hooks at run time: observe-only subscribers to every session's events (`hooks/<name>.toml`).
//!
//! The engine's event log is wrapped in a tap ([`TappedLog`]): once an append is durable, its
//! events go to the [`HookHub`], which puts each session's events back in index order (appends
//! of one session may be acknowledged out of order) and offers each to every hook that wants it.
//! Each hook has a bounded queue and one worker task that writes to its sink (`sinks.rs`); a full
//! queue drops the event and counts it (logged, and shown in `/v1/health`), so a slow or stuck
//! hook never holds up a turn. Nothing a hook does can fail or change a turn.
//!
//! It depends on the store's traits only; the core builds it from the capabilities.

mod sinks;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bdk_protocol::SessionId;
use bdk_store::{BoxFuture, EventLog, LogLayer, NewEvent, SessionStore, SharedEvent};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::capabilities::HookSpec;

/// Events a hook's queue holds before new ones are dropped.
pub const QUEUE: usize = 4096;
/// Out-of-order events held per session before a gap is given up on.
const MAX_PENDING: usize = 1024;

/// One hook's counters, for `/v1/health` and the logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookStatus {
    pub name: String,
    /// Events handed to the sink.
    pub delivered: u64,
    /// Events dropped because the hook's queue was full (or its sink gave up on them).
    pub dropped: u64,
    /// Times a hook command was (re)started after exiting.
    pub restarts: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub delivered: AtomicU64,
    pub dropped: AtomicU64,
    pub restarts: AtomicU64,
}

/// What a hook's line carries besides the event (the reference's hook context).
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub agent: String,
    pub state_root: Option<PathBuf>,
    pub sessions: Arc<dyn SessionStore>,
    /// Delivery spans and the `bdk.hook.dropped` counter.
    pub telemetry: bdk_telemetry::Telemetry,
}

#[derive(Debug)]
struct Hook {
    spec: HookSpec,
    tx: mpsc::Sender<SharedEvent>,
    /// Taken by the worker when it starts (on the first event).
    rx: Mutex<Option<mpsc::Receiver<SharedEvent>>>,
    counters: Arc<Counters>,
}

/// Per-session order: the next index to release and what arrived early.
#[derive(Debug, Default)]
struct Order {
    next: Option<u64>,
    pending: BTreeMap<u64, SharedEvent>,
}

/// Every hook of one agent.
#[derive(Debug)]
pub(crate) struct HookHub {
    hooks: Vec<Hook>,
    shared: Shared,
    order: Mutex<HashMap<SessionId, Order>>,
}

impl HookHub {
    pub fn new(specs: Vec<HookSpec>, shared: Shared) -> Arc<Self> {
        Self::with_queue(specs, shared, QUEUE)
    }

    /// [`HookHub::new`] with queues of `queue` events.
    pub fn with_queue(specs: Vec<HookSpec>, shared: Shared, queue: usize) -> Arc<Self> {
        let hooks = specs
            .into_iter()
            .map(|spec| {
                let (tx, rx) = mpsc::channel(queue.max(1));
                Hook { spec, tx, rx: Mutex::new(Some(rx)), counters: Arc::default() }
            })
            .collect();
        Arc::new(HookHub { hooks, shared, order: Mutex::new(HashMap::new()) })
    }

    pub fn status(&self) -> Vec<HookStatus> {
        self.hooks
            .iter()
            .map(|h| HookStatus {
                name: h.spec.name.clone(),
                delivered: h.counters.delivered.load(Ordering::Relaxed),
                dropped: h.counters.dropped.load(Ordering::Relaxed),
                restarts: h.counters.restarts.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Durable events of `session`, in any order across appends: released to the hooks in
    /// index order, each exactly once.
    fn notify(&self, session: &SessionId, events: &[SharedEvent]) {
        let ready = {
            let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
            let entry = order.entry(session.clone()).or_default();
            let mut ready = Vec::new();
            for event in events {
                match entry.next {
                    // Late after the session's entry was forgotten (see `forget`) and a newer
                    // append came first: delivered now rather than held forever.
                    Some(next) if event.index < next => ready.push(event.clone()),
                    _ => {
                        entry.pending.insert(event.index, event.clone());
                    }
                }
            }
            let mut next = entry.next.unwrap_or_else(|| entry.pending.keys().next().copied().unwrap_or(0));
            if entry.pending.len() > MAX_PENDING {
                // An acknowledgement that never came (its append was dropped): move on.
                let skip_to = entry.pending.keys().next().copied().unwrap_or(next);
                tracing::warn!(session = %session, from = next, to = skip_to, "hooks: giving up on a gap in the event order");
                next = skip_to;
            }
            while let Some(event) = entry.pending.remove(&next) {
                ready.push(event);
                next += 1;
            }
            entry.next = Some(next);
            ready
        };
        for event in ready {
            self.offer(&event);
        }
    }

    /// Drops the session's order entry once nothing of it is held back: called when the
    /// session's log is released (its actor went idle), so the map holds only sessions in use.
    /// An entry with events still waiting for a gap stays.
    fn forget(&self, session: &SessionId) {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        if order.get(session).is_some_and(|entry| entry.pending.is_empty()) {
            order.remove(session);
        }
    }

    /// How many sessions the order map tracks.
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.order.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn offer(&self, event: &SharedEvent) {
        for hook in self.hooks.iter().filter(|h| h.spec.wants(event.event_type())) {
            self.start(hook);
            if hook.tx.try_send(event.clone()).is_err() {
                let dropped = hook.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                crate::telemetry::hook_dropped(&self.shared.telemetry, &hook.spec.name, 1);
                if dropped.is_power_of_two() {
                    tracing::warn!(hook = %hook.spec.name, dropped, "hook queue full: events dropped");
                }
            }
        }
    }

    /// Starts the hook's worker on first use (the hub may be built outside a runtime).
    fn start(&self, hook: &Hook) {
        let taken = hook.rx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(rx) = taken {
            tokio::spawn(sinks::worker(hook.spec.clone(), rx, self.shared.clone(), hook.counters.clone()));
        }
    }
}

/// `stores` with the hooks' tap on its event log, and the hub, when `capabilities` has hooks.
pub(crate) fn tap(
    stores: bdk_store::Stores,
    agent: &str,
    capabilities: &crate::capabilities::Capabilities,
    telemetry: &bdk_telemetry::Telemetry,
) -> (bdk_store::Stores, Option<Arc<HookHub>>) {
    if capabilities.hooks.is_empty() {
        return (stores, None);
    }
    let shared = Shared {
        agent: agent.to_owned(),
        state_root: capabilities.state_root.clone(),
        sessions: stores.sessions.clone(),
        telemetry: telemetry.clone(),
    };
    let hub = HookHub::new(capabilities.hooks.clone(), shared);
    let events: Arc<dyn EventLog> = Arc::new(TappedLog { inner: stores.events.clone(), hub: hub.clone() });
    (bdk_store::Stores { events, ..stores }, Some(hub))
}

/// The event log with the hooks' tap: appends go to the real log, and once durable, to the hub.
#[derive(Debug)]
pub(crate) struct TappedLog {
    pub inner: Arc<dyn EventLog>,
    pub hub: Arc<HookHub>,
}

impl LogLayer for TappedLog {
    fn inner(&self) -> &Arc<dyn EventLog> {
        &self.inner
    }

    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: Option<bdk_store::SessionRecord>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            let appended = bdk_store::append_to(self.inner.as_ref(), session, events, record).await?;
            self.hub.notify(session, &appended);
            Ok(appended)
        })
    }

    fn release(&self, session: &SessionId) {
        self.hub.forget(session);
        self.inner.release(session);
    }
}

#[cfg(test)]
mod tests {
    use bdk_protocol::event::SessionWaiting;
    use bdk_protocol::{Event, EventData};

    use super::*;
    use crate::capabilities::HookSinkSpec;

    fn event(session: &SessionId, index: u64) -> SharedEvent {
        Arc::new(Event {
            index,
            session_id: session.clone(),
            turn_id: None,
            at: bdk_protocol::event::timestamp_now(),
            data: EventData::SessionWaiting(SessionWaiting {}),
        })
    }

    fn command_hook(name: &str, script: &str, dir: &std::path::Path) -> HookSpec {
        HookSpec {
            name: name.into(),
            events: vec!["*".into()],
            sink: HookSinkSpec::Command(vec!["python3".into(), "-c".into(), script.into()]),
            cwd: dir.to_path_buf(),
            env: Vec::new(),
        }
    }

    /// A hook that floods stdout still takes every event; one that never reads fills its queue,
    /// and the excess is dropped and counted while `notify` (the turn's path) never waits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flooding_hook_is_drained_and_a_stuck_one_drops_and_counts() {
        let temp = tempfile::tempdir().unwrap();
        let store = bdk_store::FsStore::open(temp.path()).unwrap();
        let flood = "import sys\nfor line in sys.stdin:\n    sys.stdout.write('x' * 20000)\n    sys.stdout.flush()\n";
        let stuck = "import time\ntime.sleep(60)\n";
        let specs = vec![command_hook("flood", flood, temp.path()), command_hook("stuck", stuck, temp.path())];
        let shared =
            Shared { agent: "a".into(), state_root: None, sessions: Arc::new(store), telemetry: Default::default() };
        let hub = HookHub::with_queue(specs, shared, 8);
        let session = SessionId::generate();
        const EVENTS: u64 = 2000;
        let started = std::time::Instant::now();
        for index in 0..EVENTS {
            hub.notify(&session, &[event(&session, index)]);
            if index % 8 == 7 {
                // Lets the flooding hook's worker keep up (its queue is small too).
                tokio::task::yield_now().await;
                while hub.hooks[0].tx.capacity() < 8 && started.elapsed() < std::time::Duration::from_secs(30) {
                    tokio::task::yield_now().await;
                }
            }
        }
        let counters = |i: usize| {
            let c = &hub.hooks[i].counters;
            (c.delivered.load(Ordering::Relaxed), c.dropped.load(Ordering::Relaxed), c.restarts.load(Ordering::Relaxed))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while counters(0).0 < EVENTS && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let (delivered, dropped, restarts) = counters(0);
        assert_eq!((delivered, dropped, restarts), (EVENTS, 0, 0), "the flooding hook");
        let (delivered, dropped, _) = counters(1);
        assert!(dropped > 0, "the stuck hook dropped nothing ({delivered} delivered)");
        assert!(delivered + dropped <= EVENTS);
        let status = hub.status();
        assert_eq!(status[1].name, "stuck");
        assert_eq!(status[1].dropped, dropped);
    }

    /// Refuses every append, as a full disk would.
    #[derive(Debug)]
    struct Refusing(Arc<dyn EventLog>);

    impl LogLayer for Refusing {
        fn inner(&self) -> &Arc<dyn EventLog> {
            &self.0
        }

        fn write<'a>(
            &'a self,
            _session: &'a SessionId,
            _events: Vec<NewEvent>,
            _record: Option<bdk_store::SessionRecord>,
        ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
            Box::pin(async {
                Err(bdk_store::Error::Io { path: "events.ndjson".into(), source: std::io::Error::other("disk full") })
            })
        }
    }

    /// A hook named `audit` that appends every event to `dir/audit.ndjson`.
    fn audit_file_hook(dir: &std::path::Path) -> HookSpec {
        HookSpec {
            name: "audit".into(),
            events: vec!["*".into()],
            sink: HookSinkSpec::File(dir.join("audit.ndjson")),
            cwd: dir.to_path_buf(),
            env: Vec::new(),
        }
    }

    /// Only what the log accepted reaches a hook: an append the log refused is never seen.
    #[tokio::test]
    async fn a_hook_sees_only_what_the_log_accepted() {
        let temp = tempfile::tempdir().unwrap();
        let store = bdk_store::FsStore::open(temp.path()).unwrap();
        let spec = audit_file_hook(temp.path());
        let stores = store.stores();
        let shared = Shared {
            agent: "a".into(),
            state_root: None,
            sessions: stores.sessions.clone(),
            telemetry: Default::default(),
        };
        let hub = HookHub::new(vec![spec], shared);
        let real = stores.events.clone();
        let refusing = TappedLog { inner: Arc::new(Refusing(real.clone())), hub: hub.clone() };
        let accepting = TappedLog { inner: real.clone(), hub: hub.clone() };
        let session = SessionId::generate();
        let record =
            bdk_store::SessionRecord::new(session.clone(), bdk_protocol::event::SessionMode::Chat, "http", "alice");
        stores.sessions.create(record).await.unwrap();
        let waiting = || vec![NewEvent::new(EventData::SessionWaiting(SessionWaiting {}))];
        assert!(refusing.append(&session, waiting()).await.is_err());
        accepting.append(&session, waiting()).await.unwrap();
        assert!(refusing.append(&session, waiting()).await.is_err());
        accepting.append(&session, waiting()).await.unwrap();

        let counters = &hub.hooks[0].counters;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while counters.delivered.load(Ordering::Relaxed) < 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let text = std::fs::read_to_string(temp.path().join("audit.ndjson")).unwrap();
        let indices: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["index"].as_u64().unwrap())
            .collect();
        assert_eq!(indices, [0, 1], "exactly the two accepted events, in order");
        assert_eq!(real.len(&session).await.unwrap(), 2);
        assert_eq!(counters.dropped.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn an_idle_session_leaves_no_order_entry_and_late_events_are_not_lost() {
        let temp = tempfile::tempdir().unwrap();
        let store = bdk_store::FsStore::open(temp.path()).unwrap();
        let spec = audit_file_hook(temp.path());
        let shared =
            Shared { agent: "a".into(), state_root: None, sessions: Arc::new(store), telemetry: Default::default() };
        let hub = HookHub::new(vec![spec], shared);
        let (a, b) = (SessionId::generate(), SessionId::generate());
        hub.notify(&a, &[event(&a, 0), event(&a, 1)]);
        // `b` waits for index 0, which has not come.
        hub.notify(&b, &[event(&b, 0)]);
        hub.notify(&b, &[event(&b, 2)]);
        assert_eq!(hub.tracked(), 2);
        hub.forget(&a);
        hub.forget(&b);
        assert_eq!(hub.tracked(), 1, "an entry holding events back stays");
        // After a reset, a late event older than what was released is still delivered.
        hub.notify(&a, &[event(&a, 3)]);
        hub.notify(&a, &[event(&a, 2)]);
        let delivered = || hub.hooks[0].counters.delivered.load(Ordering::Relaxed);
        let dropped = hub.hooks[0].counters.dropped.load(Ordering::Relaxed);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while delivered() < 5 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!((delivered(), dropped), (5, 0));
    }
}
