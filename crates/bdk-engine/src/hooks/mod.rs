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

use bdk_protocol::{Event, SessionId};
use bdk_store::{BoxFuture, EventLog, EventStream, NewEvent, SessionStore, SharedEvent};
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
        let hooks = specs
            .into_iter()
            .map(|spec| {
                let (tx, rx) = mpsc::channel(QUEUE);
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
            for event in events {
                entry.pending.insert(event.index, event.clone());
            }
            let mut ready = Vec::new();
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

    fn offer(&self, event: &SharedEvent) {
        for hook in self.hooks.iter().filter(|h| h.spec.wants(event.event_type())) {
            self.start(hook);
            if hook.tx.try_send(event.clone()).is_err() {
                let dropped = hook.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
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
) -> (bdk_store::Stores, Option<Arc<HookHub>>) {
    if capabilities.hooks.is_empty() {
        return (stores, None);
    }
    let shared = Shared {
        agent: agent.to_owned(),
        state_root: capabilities.state_root.clone(),
        sessions: stores.sessions.clone(),
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

impl EventLog for TappedLog {
    fn append<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        Box::pin(async move {
            let appended = self.inner.append(session, events).await?;
            self.hub.notify(session, &appended);
            Ok(appended)
        })
    }

    fn read<'a>(
        &'a self,
        session: &'a SessionId,
        from: u64,
        limit: Option<usize>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<Event>>> {
        self.inner.read(session, from, limit)
    }

    fn follow<'a>(&'a self, session: &'a SessionId, from: u64) -> BoxFuture<'a, bdk_store::Result<EventStream>> {
        self.inner.follow(session, from)
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<u64>> {
        self.inner.len(session)
    }

    fn release(&self, session: &SessionId) {
        self.inner.release(session);
    }
}
