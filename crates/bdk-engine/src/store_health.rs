//! Whether the state store takes writes. The engine's session, event, kv, host data, artifact
//! and timed-work stores are wrapped so every write's outcome is seen here: a write that fails because the disk is full or read-only
//! ([`bdk_store::Error::is_write_fault`]) marks the store unwritable, and a probe write
//! ([`SessionStore::probe_write`]) retried every [`PROBE_EVERY`] notices by itself when writes
//! work again. `/v1/health` reports the state; actors holding a turn's closing events that
//! could not be written wait on [`StoreHealth::recovered`] to write them.
//!
//! It decides nothing about turns or requests: an unwritable store still serves reads, and each
//! write still tries (and fails with its own error) while the state says unwritable.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bdk_protocol::SessionId;
use bdk_store::{
    ArtifactQuery, ArtifactRecord, ArtifactStore, ArtifactTag, BoxFuture, DataScope, EventLog, FileEntry, FiringRecord,
    HostDataStore, KvStore, LogLayer, NewEvent, ReminderRecord, SessionRecord, SessionStore, SharedEvent, Stores,
    Tagged, TimedKind, TimedStore,
};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

/// How often the probe write is retried while the store refuses writes.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// What `/v1/health` shows about the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreStatus {
    /// Whether the last write (or probe) succeeded.
    pub writable: bool,
    /// Why writes fail (the OS error, without a path), while they do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When writes started failing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
struct Fault {
    error: String,
    since: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct State {
    fault: Option<Fault>,
    /// A probe task is running (it ends once the fault clears).
    probing: bool,
}

/// The store's write health, shared by the wrapped stores, the probe and the actors.
#[derive(Debug)]
pub(crate) struct StoreHealth {
    state: Mutex<State>,
    /// Bumped each time writes work again after a fault.
    recovered: watch::Sender<u64>,
    sessions: Arc<dyn SessionStore>,
}

impl StoreHealth {
    pub fn status(&self) -> StoreStatus {
        match &self.lock().fault {
            None => StoreStatus { writable: true, error: None, since: None },
            Some(fault) => StoreStatus { writable: false, error: Some(fault.error.clone()), since: Some(fault.since) },
        }
    }

    /// A receiver that changes each time writes work again after a fault.
    pub fn recovered(&self) -> watch::Receiver<u64> {
        self.recovered.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes a write's outcome. `wrote`: success proves the store takes writes (a delete on
    /// a full disk succeeds and proves nothing).
    fn observe<T>(self: &Arc<Self>, result: &bdk_store::Result<T>, wrote: bool) {
        match result {
            Ok(_) if wrote => self.writable(),
            Ok(_) => {}
            Err(error) => {
                if let Some(reason) = write_fault_reason(error) {
                    self.unwritable(reason);
                }
            }
        }
    }

    fn writable(&self) {
        let was = self.lock().fault.take();
        if let Some(fault) = was {
            tracing::info!(failing_since = %fault.since, "the state store takes writes again");
            self.recovered.send_modify(|n| *n += 1);
        }
    }

    fn unwritable(self: &Arc<Self>, reason: String) {
        let mut state = self.lock();
        if state.fault.is_none() {
            tracing::error!(error = %reason, "the state store refuses writes; reads still work, writes answer 503 until it recovers");
        }
        let since = state.fault.as_ref().map_or_else(Utc::now, |f| f.since);
        state.fault = Some(Fault { error: reason, since });
        if !state.probing {
            state.probing = true;
            tokio::spawn(probe(Arc::downgrade(self)));
        }
    }
}

/// Retries the probe write until the fault clears (or the engine is gone).
async fn probe(health: std::sync::Weak<StoreHealth>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let Some(health) = health.upgrade() else { return };
        {
            // Under the lock: a fault noted after this sees `probing` false and starts a probe.
            let mut state = health.lock();
            if state.fault.is_none() {
                state.probing = false;
                return;
            }
        }
        let result = health.sessions.probe_write().await;
        health.observe(&result, true);
    }
}

/// The OS error of a write fault, without its path (health answers need no auth).
fn write_fault_reason(error: &bdk_store::Error) -> Option<String> {
    match error {
        bdk_store::Error::Io { source, .. } if error.is_write_fault() => Some(source.to_string()),
        _ => None,
    }
}

/// Wraps the session, event, kv and host data stores so their writes report to a new
/// [`StoreHealth`]. Artifacts and timed work are wrapped where they join the engine
/// ([`StoreHealth::artifacts`], [`StoreHealth::timed`]).
pub(crate) fn watch(stores: Stores) -> (Stores, Arc<StoreHealth>) {
    let health = Arc::new(StoreHealth {
        state: Mutex::new(State::default()),
        recovered: watch::channel(0).0,
        sessions: stores.sessions.clone(),
    });
    let sessions: Arc<dyn SessionStore> = Arc::new(Watched { inner: stores.sessions.clone(), health: health.clone() });
    let events: Arc<dyn EventLog> = Arc::new(Watched { inner: stores.events.clone(), health: health.clone() });
    let kv: Arc<dyn KvStore> = Arc::new(Watched { inner: stores.kv.clone(), health: health.clone() });
    let data: Arc<dyn HostDataStore> = Arc::new(Watched { inner: stores.data.clone(), health: health.clone() });
    (Stores { sessions, events, kv, data, ..stores }, health)
}

impl StoreHealth {
    /// `store` with its writes reporting here.
    pub fn artifacts(self: &Arc<Self>, store: Arc<dyn ArtifactStore>) -> Arc<dyn ArtifactStore> {
        Arc::new(Watched { inner: store, health: self.clone() })
    }

    /// `store` (schedule firings, reminders) with its writes reporting here.
    pub fn timed(self: &Arc<Self>, store: Arc<dyn TimedStore>) -> Arc<dyn TimedStore> {
        Arc::new(Watched { inner: store, health: self.clone() })
    }
}

#[derive(Debug)]
struct Watched<T: ?Sized> {
    inner: Arc<T>,
    health: Arc<StoreHealth>,
}

impl<T: ?Sized> Watched<T> {
    /// `write`, its outcome noted (`wrote`: see [`StoreHealth::observe`]).
    fn seen<'a, R: Send + 'a>(
        &'a self,
        write: BoxFuture<'a, bdk_store::Result<R>>,
        wrote: bool,
    ) -> BoxFuture<'a, bdk_store::Result<R>> {
        let health = self.health.clone();
        Box::pin(async move {
            let result = write.await;
            health.observe(&result, wrote);
            result
        })
    }
}

impl SessionStore for Watched<dyn SessionStore> {
    fn create(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.seen(self.inner.create(record), true)
    }

    fn get<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<Option<SessionRecord>>> {
        self.inner.get(id)
    }

    fn update(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.seen(self.inner.update(record), true)
    }

    fn update_derived(&self, record: SessionRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.seen(self.inner.update_derived(record), true)
    }

    fn list(&self) -> BoxFuture<'_, bdk_store::Result<Vec<SessionRecord>>> {
        self.inner.list()
    }

    fn list_open(&self) -> BoxFuture<'_, bdk_store::Result<Vec<SessionRecord>>> {
        self.inner.list_open()
    }

    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.seen(self.inner.delete(id), false)
    }

    fn probe_write(&self) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.seen(self.inner.probe_write(), true)
    }
}

impl LogLayer for Watched<dyn EventLog> {
    fn inner(&self) -> &Arc<dyn EventLog> {
        &self.inner
    }

    fn write<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
        record: Option<SessionRecord>,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<SharedEvent>>> {
        let wrote = !events.is_empty() || record.is_some();
        self.seen(bdk_store::append_to(self.inner.as_ref(), session, events, record), wrote)
    }
}

impl KvStore for Watched<dyn KvStore> {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<Value>>> {
        self.inner.get(key)
    }

    fn put<'a>(&'a self, key: &'a str, value: Value) -> BoxFuture<'a, bdk_store::Result<()>> {
        self.seen(self.inner.put(key, value), true)
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.seen(self.inner.delete(key), false)
    }

    fn keys<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, bdk_store::Result<Vec<String>>> {
        self.inner.keys(prefix)
    }
}

impl HostDataStore for Watched<dyn HostDataStore> {
    fn kv_get<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<Value>>> {
        self.inner.kv_get(scope, key)
    }

    fn kv_put<'a>(&'a self, scope: &'a DataScope, key: &'a str, value: Value) -> BoxFuture<'a, bdk_store::Result<()>> {
        self.seen(self.inner.kv_put(scope, key, value), true)
    }

    fn kv_delete<'a>(&'a self, scope: &'a DataScope, key: &'a str) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.seen(self.inner.kv_delete(scope, key), false)
    }

    fn kv_keys<'a>(&'a self, scope: &'a DataScope, prefix: &'a str) -> BoxFuture<'a, bdk_store::Result<Vec<String>>> {
        self.inner.kv_keys(scope, prefix)
    }

    fn file_read<'a>(
        &'a self,
        scope: &'a DataScope,
        path: &'a str,
    ) -> BoxFuture<'a, bdk_store::Result<Option<Vec<u8>>>> {
        self.inner.file_read(scope, path)
    }

    fn file_write<'a>(
        &'a self,
        scope: &'a DataScope,
        path: &'a str,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, bdk_store::Result<()>> {
        self.seen(self.inner.file_write(scope, path, bytes), true)
    }

    fn file_delete<'a>(&'a self, scope: &'a DataScope, path: &'a str) -> BoxFuture<'a, bdk_store::Result<bool>> {
        self.seen(self.inner.file_delete(scope, path), false)
    }

    fn file_list<'a>(
        &'a self,
        scope: &'a DataScope,
        prefix: &'a str,
    ) -> BoxFuture<'a, bdk_store::Result<Vec<FileEntry>>> {
        self.inner.file_list(scope, prefix)
    }
}

impl ArtifactStore for Watched<dyn ArtifactStore> {
    fn tag(&self, tag: ArtifactTag, max: Option<usize>) -> BoxFuture<'_, bdk_store::Result<Tagged>> {
        self.seen(self.inner.tag(tag, max), true)
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<ArtifactRecord>>> {
        self.inner.get(id)
    }

    fn list<'a>(&'a self, query: &'a ArtifactQuery) -> BoxFuture<'a, bdk_store::Result<Vec<ArtifactRecord>>> {
        self.inner.list(query)
    }

    fn content<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<Vec<u8>>>> {
        self.inner.content(id)
    }
}

impl TimedStore for Watched<dyn TimedStore> {
    fn claim_firing(&self, record: FiringRecord) -> BoxFuture<'_, bdk_store::Result<bool>> {
        self.seen(self.inner.claim_firing(record), true)
    }

    fn update_firing(&self, record: FiringRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.seen(self.inner.update_firing(record), true)
    }

    fn firings<'a>(&'a self, kind: TimedKind, owner: &'a str) -> BoxFuture<'a, bdk_store::Result<Vec<FiringRecord>>> {
        self.inner.firings(kind, owner)
    }

    fn open_firings(&self) -> BoxFuture<'_, bdk_store::Result<Vec<FiringRecord>>> {
        self.inner.open_firings()
    }

    fn put_reminder(&self, record: ReminderRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.seen(self.inner.put_reminder(record), true)
    }

    fn reminder<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<ReminderRecord>>> {
        self.inner.reminder(id)
    }

    fn reminders(&self) -> BoxFuture<'_, bdk_store::Result<Vec<ReminderRecord>>> {
        self.inner.reminders()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Artifact and timed stores whose every write fails as on a full disk.
    #[derive(Debug)]
    struct Full;

    fn full<T>() -> BoxFuture<'static, bdk_store::Result<T>> {
        let source = std::io::Error::from_raw_os_error(28);
        Box::pin(async move { Err(bdk_store::Error::Io { path: "/state".into(), source }) })
    }

    impl ArtifactStore for Full {
        fn tag(&self, _: ArtifactTag, _: Option<usize>) -> BoxFuture<'_, bdk_store::Result<Tagged>> {
            full()
        }
        fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<ArtifactRecord>>> {
            Box::pin(async { Ok(None) })
        }
        fn list<'a>(&'a self, _: &'a ArtifactQuery) -> BoxFuture<'a, bdk_store::Result<Vec<ArtifactRecord>>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn content<'a>(&'a self, _: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<Vec<u8>>>> {
            Box::pin(async { Ok(None) })
        }
    }

    impl TimedStore for Full {
        fn claim_firing(&self, _: FiringRecord) -> BoxFuture<'_, bdk_store::Result<bool>> {
            full()
        }
        fn update_firing(&self, _: FiringRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
            full()
        }
        fn firings<'a>(&'a self, _: TimedKind, _: &'a str) -> BoxFuture<'a, bdk_store::Result<Vec<FiringRecord>>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn open_firings(&self) -> BoxFuture<'_, bdk_store::Result<Vec<FiringRecord>>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn put_reminder(&self, _: ReminderRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
            full()
        }
        fn reminder<'a>(&'a self, _: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<ReminderRecord>>> {
            Box::pin(async { Ok(None) })
        }
        fn reminders(&self) -> BoxFuture<'_, bdk_store::Result<Vec<ReminderRecord>>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    fn new_health() -> (tempfile::TempDir, Arc<StoreHealth>) {
        let dir = tempfile::tempdir().unwrap();
        let fs = bdk_store::FsStore::open(dir.path()).unwrap();
        (dir, watch(fs.stores()).1)
    }

    fn firing() -> FiringRecord {
        FiringRecord {
            kind: TimedKind::Schedule,
            owner: "nightly".into(),
            due_at: Utc::now(),
            trigger: "cron".into(),
            status: bdk_store::FiringStatus::Claimed,
            session_ids: Vec::new(),
            claimed_at: Utc::now(),
            finished_at: None,
            error: None,
        }
    }

    #[tokio::test]
    async fn refused_artifact_and_timed_writes_mark_the_store_unwritable() {
        let (_dir, health) = new_health();
        let artifacts = health.artifacts(Arc::new(Full));
        assert!(artifacts.list(&ArtifactQuery::default()).await.is_ok());
        assert!(health.status().writable, "a read proves nothing");
        let tag = ArtifactTag {
            kind: "report".into(),
            key: "k".into(),
            title: None,
            data: None,
            principal: "alice".into(),
            session_id: None,
            source: "host".into(),
            content: None,
        };
        assert!(artifacts.tag(tag, None).await.is_err());
        let status = health.status();
        assert!(
            !status.writable && status.error.as_deref().unwrap_or_default().contains("No space left"),
            "{status:?}"
        );

        for write in ["claim", "update"] {
            let (_dir, health) = new_health();
            let timed = health.timed(Arc::new(Full));
            let result = match write {
                "claim" => timed.claim_firing(firing()).await.map(drop),
                _ => timed.update_firing(firing()).await,
            };
            assert!(result.is_err());
            assert!(!health.status().writable, "a refused {write} of a firing record");
        }
    }
}
