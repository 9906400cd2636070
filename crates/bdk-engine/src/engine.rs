//! The engine's shared core: one agent's config, stores, model and tools, the registry of live
//! session actors, and the state every session shares (turn slots, the draining flag, the root
//! cancellation token, the tracker drain waits on).
//!
//! It routes each per-session request to that session's actor (spawning it on demand from the
//! store) and answers the read-only requests (record, list) itself. It decides nothing about a
//! turn: that is `actor.rs` and `turn.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bdk_model::ModelProvider;
use bdk_protocol::SessionId;
use bdk_store::record::SessionStatus;
use bdk_store::{BoxFuture, EventFollower, EventStream, SessionRecord, SharedEvent, Stores};
use bdk_tools::ToolRegistry;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

// Kept reachable at their old path for code written against it.
#[allow(unused_imports)]
pub(crate) use crate::access::{check_followable, check_owner};
use crate::actor::{Actor, Command, Seed};
use crate::admission::TurnSlots;
use crate::approvals::Approvals;
use crate::defs::{Definitions, Defs};
use crate::error::{EngineError, Result};
use crate::types::{
    AgentConfig, EngineOptions, FollowUp, FollowUpAccepted, ListScope, Principal, SessionStarted, SessionSummary,
    StartSession,
};
use crate::{status, tokens};

/// Commands a session's mailbox holds before senders wait (backpressure).
const MAILBOX: usize = 64;

/// Shared by every clone of an [`Engine`](crate::Engine) and by every actor and turn task.
#[derive(Debug)]
pub(crate) struct Core {
    /// The agent's slug, fixed for the engine's life.
    pub slug: String,
    pub stores: Stores,
    /// Instructions, model, tools and capabilities: the snapshot each turn takes (`defs.rs`).
    defs: crate::defs::Current,
    pub slots: TurnSlots,
    /// Parent of every session's token: cancelling it cancels every turn.
    pub root: CancellationToken,
    draining: AtomicBool,
    /// One token per running turn, held until the turn's final events are durable.
    pub turns: TaskTracker,
    /// Continuation token → session, for direct calls bound by token.
    pub direct_tokens: crate::direct::TokenIndex,
    /// Tool calls parked until a person approves or denies them.
    pub approvals: Approvals,
    /// The host services' authority and state (`host.rs`).
    pub host: crate::host::HostState,
    /// The hooks' hub, when the agent has hooks (its tap wraps `stores.events`).
    pub hooks: Option<Arc<crate::hooks::HookHub>>,
    /// Most tool calls run from one model step; the rest are refused with a tool error.
    pub max_calls_per_step: usize,
    /// Caps on one model step's output (bytes always, tokens when set).
    pub max_output_bytes: usize,
    pub max_output_tokens: Option<u64>,
    /// Where artifacts are kept (`artifacts.rs`).
    pub artifact_store: Option<Arc<dyn bdk_store::ArtifactStore>>,
    /// The agent's reminders for host services, once they exist (`reminders::Reminders::new`
    /// attaches them; the link is weak).
    pub reminders: Mutex<Option<Arc<dyn bdk_tools::ReminderAccess>>>,
    /// Spans and metrics (`telemetry.rs`).
    pub telemetry: bdk_telemetry::Telemetry,
    /// Session leases shared with other replicas (`remote.rs`); `None` on one process.
    pub leases: Option<Arc<dyn bdk_store::SessionLeases>>,
    /// The replica last seen running each session forwarded from here (`remote.rs`).
    pub holders: crate::remote::Holders,
    /// Whether the store takes writes (`store_health.rs`); its wrappers are in `stores`.
    pub store_health: Arc<crate::store_health::StoreHealth>,
    /// Which sessions start-up recovery restores (`recovery.rs`).
    pub restore: crate::types::RestoreLimits,
    actors: Mutex<HashMap<SessionId, Mailbox>>,
}

/// The registry's view of a live actor.
#[derive(Debug)]
struct Mailbox {
    tx: mpsc::Sender<Command>,
    busy: Arc<AtomicBool>,
    /// The session's owner once the actor knows its record (it never changes): the owner check
    /// of a stream or read of a live session reads no `session.json`.
    owner: Arc<OnceLock<String>>,
}

impl Core {
    pub fn new(
        config: AgentConfig,
        stores: Stores,
        provider: Arc<dyn ModelProvider>,
        tools: Arc<dyn ToolRegistry>,
        options: EngineOptions,
    ) -> Arc<Self> {
        let stores = crate::local_cwd::wrap(stores, options.capabilities.workspace_parent.as_deref());
        let stores = bdk_store::Stores {
            events: crate::stored_text::layer(crate::telemetry::timed_log(stores.events.clone(), &options.telemetry)),
            ..stores
        };
        let (stores, store_health) = crate::store_health::watch(stores);
        let (stores, hooks) = crate::hooks::tap(stores, &config.slug, &options.capabilities, &options.telemetry);
        let defs = Defs::new(Definitions {
            config: config.clone(),
            provider,
            tools,
            price: options.price,
            capabilities: options.capabilities.clone(),
        });
        let core = Arc::new(Core {
            slots: TurnSlots::new(config.max_running_turns, options.leases.clone()),
            slug: config.slug,
            stores,
            defs: crate::defs::Current::new(defs),
            root: CancellationToken::new(),
            draining: AtomicBool::new(false),
            turns: TaskTracker::new(),
            direct_tokens: Default::default(),
            approvals: Approvals::default(),
            host: crate::host::HostState::new(options.host),
            hooks,
            max_calls_per_step: options.max_tool_calls_per_step.unwrap_or(crate::dispatch::MAX_CALLS_PER_STEP).max(1),
            max_output_bytes: options.max_output_bytes.unwrap_or(crate::stream::MAX_OUTPUT_BYTES).max(1),
            max_output_tokens: options.max_output_tokens,
            artifact_store: options.artifacts.map(|store| store_health.artifacts(store)),
            reminders: Mutex::new(None),
            telemetry: options.telemetry,
            leases: options.leases,
            holders: Default::default(),
            store_health,
            restore: options.restore,
            actors: Mutex::new(HashMap::new()),
        });
        if let Some(leases) = &core.leases {
            crate::remote::start(&core, leases);
        }
        core
    }

    /// The definitions new turns run with now (one consistent version; see `defs.rs`).
    pub fn defs(&self) -> Arc<Defs> {
        self.defs.load()
    }

    /// Makes `definitions` what new turns run with; running turns finish on theirs. The slug
    /// and `max_running_turns` keep their values.
    pub fn reload(&self, definitions: Definitions) {
        let mut definitions = definitions;
        definitions.config.slug = self.slug.clone();
        drop(self.defs.store(Defs::new(definitions)));
    }

    /// The agent's reminders as host services reach them, if any were created for it.
    pub fn reminder_access(&self) -> Option<Arc<dyn bdk_tools::ReminderAccess>> {
        self.reminders.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    fn actors(&self) -> MutexGuard<'_, HashMap<SessionId, Mailbox>> {
        self.actors.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The session's mailbox, spawning its actor if none is live. `seed` seeds a new actor (a
    /// session just created); otherwise the actor loads the record from the store.
    fn mailbox(self: &Arc<Self>, id: &SessionId, seed: Option<Seed>) -> mpsc::Sender<Command> {
        let mut actors = self.actors();
        if let Some(mailbox) = actors.get(id).filter(|m| !m.tx.is_closed()) {
            return mailbox.tx.clone();
        }
        let (tx, rx) = mpsc::channel(MAILBOX);
        let busy = Arc::new(AtomicBool::new(false));
        let owner = Arc::new(OnceLock::new());
        actors.insert(id.clone(), Mailbox { tx: tx.clone(), busy: busy.clone(), owner: owner.clone() });
        drop(actors);
        let actor = Actor::new(self.clone(), id.clone(), seed, busy, owner);
        // Boxed: an actor's future is large, and spawning would copy it more than once.
        tokio::spawn(Box::pin(actor.run(rx)));
        tx
    }

    /// Sends `command` to the session's actor and waits for its answer. `make` builds the
    /// command around the reply channel.
    pub(crate) async fn call<T>(
        self: &Arc<Self>,
        id: &SessionId,
        seed: Option<Seed>,
        make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        let mut command = make(reply);
        // An actor that just retired closes its mailbox; the second round spawns a fresh one.
        for _ in 0..3 {
            match self.mailbox(id, seed.clone()).send(command).await {
                Ok(()) => return answer.await.unwrap_or_else(|_| Err(actor_stopped())),
                Err(mpsc::error::SendError(returned)) => command = returned,
            }
        }
        Err(actor_stopped())
    }

    /// Called by an idle actor: removes it from the registry if nobody holds or is about to use
    /// its mailbox. Returns whether it may exit. Deciding under the registry lock means no
    /// command can slip into a mailbox that is about to be dropped.
    pub fn retire(&self, id: &SessionId, rx: &mpsc::Receiver<Command>) -> bool {
        let mut actors = self.actors();
        let unused = actors.get(id).is_some_and(|m| m.tx.strong_count() == 1) && rx.is_empty();
        if unused {
            actors.remove(id);
        }
        unused
    }

    /// Drops the registry entry of an actor that is exiting for good (its session is gone).
    pub fn forget(&self, id: &SessionId) {
        self.actors().remove(id);
    }

    pub fn is_busy(&self, id: &SessionId) -> bool {
        self.actors().get(id).is_some_and(|m| m.busy.load(Ordering::SeqCst))
    }

    pub fn is_live(&self, id: &SessionId) -> bool {
        self.actors().contains_key(id)
    }

    /// Lets the store free the session's open log when no actor is live for it (a read or a
    /// follower that opened it is done). A live actor releases it itself when it retires.
    pub fn release_if_idle(&self, id: &SessionId) {
        if !self.is_live(id) {
            self.stores.events.release(id);
        }
    }

    pub async fn start_session(self: &Arc<Self>, request: StartSession) -> Result<SessionStarted> {
        if self.is_draining() {
            return Err(EngineError::Draining);
        }
        check_message(&request.message)?;
        check_files(&request.workspace_files)?;
        if let Some(as_of) = request.as_of {
            check_as_of(self.defs().tools.as_ref(), as_of)?;
        }
        let id = SessionId::generate();
        let token = match &request.continuation_key {
            Some(key) => tokens::channel_token(&request.channel, key)?,
            None => tokens::http_token(),
        };
        let mut record = SessionRecord::new(id.clone(), request.mode, &request.channel, request.principal.as_str());
        record.title = request.title.clone();
        record.continuation_token = Some(token.clone());
        record.dry_run = request.dry_run;
        record.as_of = request.as_of;
        record.purpose = request.purpose.clone();
        record.status = Some(SessionStatus::Running);
        let lease = self.create_session(&record).await?;
        self.direct_tokens.note(&token, &id);
        let trace = self.telemetry.current();
        let seed = Seed { record, lease };
        self.call(&id, Some(seed), |reply| Command::Start { request: Box::new(request), reply, trace }).await
    }

    /// Writes a new session's record. With session leases, claims the session's lease at the
    /// same time (its row needs nothing from the record's), which its actor would otherwise
    /// claim after it: one database round trip fewer before the first message is written.
    /// Returns the lease when it was claimed; without one the actor claims it as for any session.
    async fn create_session(&self, record: &SessionRecord) -> Result<Option<String>> {
        let created = self.stores.sessions.create(record.clone());
        let Some(leases) = &self.leases else {
            created.await?;
            return Ok(None);
        };
        let (created, claimed) = tokio::join!(created, leases.acquire(&record.id));
        let token = match claimed {
            Ok(bdk_store::Claim::Held { token }) => Some(token),
            Ok(bdk_store::Claim::Elsewhere { .. }) | Err(_) => None,
        };
        if let Err(error) = created {
            if let Some(token) = &token {
                // It expires by itself one lease period later.
                let _ = leases.release(&record.id, token).await;
            }
            return Err(error.into());
        }
        Ok(token)
    }

    pub async fn follow_up(self: &Arc<Self>, id: &SessionId, request: FollowUp) -> Result<FollowUpAccepted> {
        check_message(&request.message)?;
        check_files(&request.workspace_files)?;
        let result = self.follow_up_at(id, request, 0).await;
        if matches!(result, Err(EngineError::StaleToken(_) | EngineError::SessionBusy(_))) {
            crate::telemetry::admission(&self.telemetry, crate::telemetry::Admission::Conflict);
        }
        result
    }

    /// A follow-up that already crossed `hops` replicas: this replica's actor admits it, or the
    /// replica holding the session's lease does.
    pub(crate) async fn follow_up_at(
        self: &Arc<Self>,
        id: &SessionId,
        request: FollowUp,
        hops: u8,
    ) -> Result<FollowUpAccepted> {
        let remembered = self.via_remembered(id, |leases, replica| {
            let request = request.clone();
            async move { crate::remote::follow_up(&leases, &replica, id, request, hops).await }
        });
        if let Some(answered) = remembered.await {
            return answered;
        }
        let forward = self.leases.as_ref().map(|_| request.clone());
        let trace = self.telemetry.current();
        match self.call(id, None, |reply| Command::FollowUp { request: Box::new(request), reply, trace }).await {
            Err(EngineError::LeasedElsewhere { replica, .. }) if hops < crate::remote::MAX_HOPS => {
                let (Some(leases), Some(request)) = (&self.leases, forward) else {
                    return Err(EngineError::LeasedElsewhere { session: id.clone(), replica });
                };
                match crate::remote::follow_up(leases, &replica, id, request.clone(), hops).await {
                    // The holder died before taking it: claim the lease here (or find the new holder).
                    Err(EngineError::Store(error)) if error.is_unavailable() => {
                        Box::pin(self.follow_up_at(id, request, hops + 1)).await
                    }
                    answered => {
                        self.holders.note(id, &replica);
                        answered
                    }
                }
            }
            other => other,
        }
    }

    pub async fn stop(self: &Arc<Self>, id: &SessionId, principal: &Principal) -> Result<()> {
        self.stop_at(id, principal, 0).await
    }

    /// With session leases and no actor for session `id` here: `send`s a command straight to
    /// the replica remembered as running it (`remote::Holders`), without trying its lease
    /// first. `None`: nobody is remembered, or the one remembered died or is shutting down (and
    /// is forgotten); the caller takes the usual way.
    async fn via_remembered<T, F>(
        &self,
        id: &SessionId,
        send: impl FnOnce(Arc<dyn bdk_store::SessionLeases>, String) -> F,
    ) -> Option<Result<T>>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let leases = self.leases.clone()?;
        let replica = self.holders.get(id).filter(|_| !self.is_live(id))?;
        match send(leases, replica).await {
            Err(EngineError::Draining) => self.holders.forget(id),
            Err(EngineError::Store(error)) if error.is_unavailable() => self.holders.forget(id),
            answered => return Some(answered),
        }
        None
    }

    /// [`Core::stop`] that already crossed `hops` replicas.
    pub(crate) async fn stop_at(self: &Arc<Self>, id: &SessionId, principal: &Principal, hops: u8) -> Result<()> {
        let remembered = self.via_remembered(id, |leases, replica| async move {
            crate::remote::stop(&leases, &replica, id, principal, hops).await
        });
        if let Some(answered) = remembered.await {
            return answered;
        }
        let sent = principal.clone();
        match self.call(id, None, |reply| Command::Stop { principal: sent, reply }).await {
            Err(EngineError::LeasedElsewhere { replica, .. }) if hops < crate::remote::MAX_HOPS => {
                let Some(leases) = &self.leases else {
                    return Err(EngineError::LeasedElsewhere { session: id.clone(), replica });
                };
                match crate::remote::stop(leases, &replica, id, principal, hops).await {
                    Err(EngineError::Store(error)) if error.is_unavailable() => {
                        Box::pin(self.stop_at(id, principal, hops + 1)).await
                    }
                    answered => {
                        self.holders.note(id, &replica);
                        answered
                    }
                }
            }
            other => other,
        }
    }

    /// With session leases: the leases and the replica running the session, when that is
    /// another replica (a session with a live actor here runs here). `running`: the session's
    /// record says a turn runs; when no live replica holds its lease (its holder died or shut
    /// down), this replica claims it first, restoring a turn left waiting for approvals here.
    pub(crate) async fn runner_elsewhere(
        self: &Arc<Self>,
        id: &SessionId,
        running: bool,
    ) -> Result<Option<(Arc<dyn bdk_store::SessionLeases>, String)>> {
        let Some(leases) = &self.leases else { return Ok(None) };
        if self.is_live(id) {
            return Ok(None);
        }
        let holder = leases.holder(id).await?.filter(|replica| replica != leases.replica());
        if holder.is_none() && running {
            return match self.recover_one(id).await {
                Ok(_) => Ok(None),
                Err(EngineError::LeasedElsewhere { replica, .. }) => Ok(Some((leases.clone(), replica))),
                Err(error) => Err(error),
            };
        }
        Ok(holder.map(|replica| (leases.clone(), replica)))
    }

    /// With session leases: claims the session's lease here (unless a live replica holds it)
    /// and closes the turns a dead holder left open. Returns how many turns it closed.
    pub(crate) async fn recover_one(self: &Arc<Self>, id: &SessionId) -> Result<usize> {
        self.call(id, None, |reply| Command::Recover { reply }).await
    }

    /// The session's record if `principal` owns it.
    pub async fn owned_record(&self, id: &SessionId, principal: &Principal) -> Result<SessionRecord> {
        let record = self.stores.sessions.get(id).await?.ok_or_else(|| EngineError::SessionNotFound(id.clone()))?;
        check_owner(&record, principal)?;
        Ok(record)
    }

    /// The owner check alone: answered from the live actor's record when there is one (a
    /// session's owner never changes), else from the store as [`owned_record`](Self::owned_record).
    pub async fn check_owned(&self, id: &SessionId, principal: &Principal) -> Result<()> {
        let known = self.actors().get(id).and_then(|m| m.owner.get().map(|owner| owner == principal.as_str()));
        match known {
            Some(true) => Ok(()),
            Some(false) => Err(EngineError::Forbidden(id.clone())),
            None => self.owned_record(id, principal).await.map(drop),
        }
    }

    pub async fn list(&self, scope: ListScope) -> Result<Vec<SessionSummary>> {
        // Only `session.json` records: their actors keep `status` current. A record written
        // before that field existed falls back to its log's last event (opened, then released).
        let records = self.stores.sessions.list().await?;
        let mut out = Vec::new();
        for record in records {
            if let ListScope::Owner(principal) = &scope
                && record.principal != principal.as_str()
            {
                continue;
            }
            let (status, updated_at) = match record.status {
                Some(status) => (status.as_str(), record.updated_at),
                None => {
                    let last = last_event(self, &record.id).await;
                    self.release_if_idle(&record.id);
                    match &last {
                        Some(event) => (status::of_last_event(event), event.at.max(record.updated_at)),
                        None => (status::RUNNING, record.updated_at),
                    }
                }
            };
            // A channel token is a stable address (`<channel>:<key>`); an HTTP token is a
            // rotating credential and is never listed.
            let continuation_token =
                record.continuation_token.filter(|token| !crate::tokens::rotates(token) && record.channel != "http");
            out.push(SessionSummary {
                continuation_token,
                session_id: record.id,
                mode: record.mode,
                channel: record.channel,
                principal: record.principal,
                title: record.title,
                status: status.to_owned(),
                created_at: record.created_at,
                updated_at,
            });
        }
        Ok(out)
    }

    /// Stops admitting turns, gives running ones `grace`, then cancels them and waits for their
    /// final events. With session leases, the leases this replica holds are then released, so
    /// another replica takes its sessions at once instead of one lease period later.
    pub async fn drain(&self, grace: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        self.turns.close();
        if tokio::time::timeout(grace, self.turns.wait()).await.is_err() {
            tracing::info!("drain: grace period over; cancelling running turns");
            self.root.cancel();
            self.turns.wait().await;
        }
        if let Some(leases) = &self.leases {
            match leases.release_all().await {
                Ok(n) => tracing::info!(sessions = n, "drain: released this replica's session leases"),
                // They expire by themselves one lease period later.
                Err(error) => tracing::warn!(%error, "drain: could not release this replica's session leases"),
            }
        }
    }
}

/// The last event of a session's log that tells its status (direct tool calls skipped), if it
/// has one and it can be read.
async fn last_event(core: &Core, id: &SessionId) -> Option<bdk_protocol::Event> {
    const CHUNK: u64 = 8;
    let mut end = core.stores.events.len(id).await.ok()?;
    while end > 0 {
        let from = end.saturating_sub(CHUNK);
        let events = core.stores.events.read(id, from, Some((end - from) as usize)).await.ok()?;
        if let Some(event) = status::last_status_event(&events) {
            return Some(event.clone());
        }
        end = from;
    }
    None
}

fn check_message(message: &str) -> Result<()> {
    if message.trim().is_empty() {
        return Err(EngineError::InvalidRequest("the message is empty".into()));
    }
    Ok(())
}

/// `workspaceFiles` paths must be relative and stay inside the workspace (what the file system
/// then refuses fails the turn instead).
fn check_files(files: &[(String, String)]) -> Result<()> {
    for (path, _) in files {
        let parts = std::path::Path::new(path).components();
        let inside = parts.clone().next().is_some()
            && parts.into_iter().all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir));
        if !inside {
            return Err(EngineError::InvalidRequest(format!(
                "workspaceFiles path {path:?} must be relative and stay inside the workspace"
            )));
        }
    }
    Ok(())
}

/// A session created with `asOf`: the instant may not be in the future, and every tool's
/// `time_args` must name properties of its input schema (else nothing would be checked).
fn check_as_of(tools: &dyn ToolRegistry, as_of: chrono::DateTime<chrono::Utc>) -> Result<()> {
    if as_of > chrono::Utc::now() {
        return Err(EngineError::InvalidRequest(format!("asOf {} is in the future", as_of.to_rfc3339())));
    }
    match tools.time_args_refusal() {
        Some(refusal) => Err(EngineError::InvalidTimeArgs(refusal)),
        None => Ok(()),
    }
}

/// What a caller sees when an actor went away without answering (it panicked).
fn actor_stopped() -> EngineError {
    EngineError::Store(bdk_store::Error::Task("the session's actor stopped unexpectedly".into()))
}

/// A follower handed out by `Engine::follow`: when it is dropped, the session's log is released
/// unless an actor is using it, so following an idle session leaves nothing open behind.
#[derive(Debug)]
pub(crate) struct Following {
    inner: Option<EventStream>,
    core: std::sync::Weak<Core>,
    id: SessionId,
}

impl Following {
    pub fn wrap(stream: EventStream, core: &Arc<Core>, id: &SessionId) -> EventStream {
        Box::new(Following { inner: Some(stream), core: Arc::downgrade(core), id: id.clone() })
    }
}

impl EventFollower for Following {
    fn next(&mut self) -> BoxFuture<'_, Option<bdk_store::Result<SharedEvent>>> {
        match &mut self.inner {
            Some(inner) => inner.next(),
            None => Box::pin(async { None }),
        }
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        // The inner follower first, so its subscription no longer keeps the log open.
        drop(self.inner.take());
        if let Some(core) = self.core.upgrade() {
            core.release_if_idle(&self.id);
        }
    }
}
