//! One task per live session: the only place a session's requests are decided. Commands arrive
//! on a bounded mailbox and are answered on oneshot channels, one at a time, so the owner check,
//! the continuation-token check and the token's rotation are atomic with the admission they
//! guard: of fifty follow-ups racing on one token exactly one is accepted.
//!
//! The actor starts turns (each its own task, see `turn.rs`; a message's turn usually starts
//! while the message is written, and writes nothing before it is, see `accepting.rs`), cancels
//! them (preempt, stop),
//! queues coalesced messages, and writes the session-level event that closes each turn
//! (`session.waiting`, `session.completed`, `session.failed`), and keeps the session's status in
//! its record in step: `running` from the accepted message (written with the token's rotation),
//! the settled status with the closing event (in the same commit), so a record is written only
//! on a transition. A closing event written later (the store had refused it) gets its status
//! written after it; a crash between the two leaves the record stale, and recovery rewrites
//! it. When idle for
//! `AgentConfig::idle_timeout` it retires: the registry forgets it and the store may release
//! the session's log, so an idle session costs no task. The next request re-creates it from the
//! store; nothing it holds is not also on disk.
//!
//! When the store refuses the closing events (a full or read-only disk), the actor keeps them
//! (`unwritten`) and writes them as soon as writes work again: when the store's probe sees it
//! (`store_health.rs`), on a slow timer, or ahead of the next message, which is refused (503)
//! while they cannot be written. Nothing else lands in the log before them, and the actor does
//! not retire while it holds them. A host stopped meanwhile closes the turn at the next start.

use std::mem;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bdk_protocol::event::{
    AgentBound, FailureCode, MessageReceived, SessionCompleted, SessionFailed, SessionMode,
    SessionStarted as SessionStartedEvent, SessionWaiting, TurnFailStatus, TurnFailed,
};
use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::record::SessionStatus;
use bdk_store::{NewEvent, SessionRecord};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::accepting::Accepting;
use crate::access::{check_followable, check_owner};
use crate::admission::Admitted;
use crate::conversation::Conversation;
use crate::dispatch::ToolSettings;
use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::joined::{self, Ended};
use crate::resume::Resumed;
use crate::tokens;
use crate::turn::{self, TurnContext, TurnEnd, TurnOutcome};
use crate::types::{Admission, FollowUp, FollowUpAccepted, Principal, SessionStarted, StartSession};
use crate::workspace::WorkspacePrep;

/// What a session's actor is asked to do. The large requests are boxed: a mailbox allocates a
/// block of 32 commands when it is made, so every live actor paid 32 times the largest variant
/// (216 bytes before, ~7 KiB a mailbox).
#[derive(Debug)]
pub(crate) enum Command {
    /// Record the first message of a session just created and start its first turn.
    Start {
        request: Box<StartSession>,
        reply: oneshot::Sender<Result<SessionStarted>>,
        /// The caller's trace context (telemetry on): the parent of the turn's span.
        trace: Option<bdk_telemetry::Context>,
    },
    FollowUp {
        request: Box<FollowUp>,
        reply: oneshot::Sender<Result<FollowUpAccepted>>,
        trace: Option<bdk_telemetry::Context>,
    },
    Stop {
        principal: Principal,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Continue a turn restart recovery restored (`resume.rs`): it waits for its parked calls.
    Resume {
        turn: TurnId,
        resumed: Box<Resumed>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// A direct tool call bound to this session (`direct.rs` runs it; the actor admits it).
    Direct {
        call: Box<crate::direct::BoundCall>,
        reply: oneshot::Sender<Result<crate::direct::DirectOutcome>>,
    },
    /// Several replicas: claim the session's lease and close what a dead holder left open
    /// (the answer is how many turns). Nothing else happens.
    Recover {
        reply: oneshot::Sender<Result<usize>>,
    },
}

impl Command {
    /// Answers the command with `error` without doing it.
    fn refuse(self, error: EngineError) {
        match self {
            Command::Start { reply, .. } => drop(reply.send(Err(error))),
            Command::FollowUp { reply, .. } => drop(reply.send(Err(error))),
            Command::Stop { reply, .. } => drop(reply.send(Err(error))),
            Command::Resume { reply, .. } => drop(reply.send(Err(error))),
            Command::Direct { reply, .. } => drop(reply.send(Err(error))),
            Command::Recover { reply } => drop(reply.send(Err(error))),
        }
    }
}

/// A settled turn: how it ended and its closing events, not yet written.
#[derive(Debug)]
struct Settled {
    end: TurnEnd,
    closing: Vec<NewEvent>,
    /// The turn's running-turn slot, given back once `closing` is written (or kept).
    slot: Option<crate::admission::Slot>,
    /// The tools the turn called, for the turn log.
    tools: Vec<String>,
}

/// Closing events the store refused, kept until it takes them (see the module docs).
#[derive(Debug)]
struct Unwritten {
    events: Vec<NewEvent>,
    /// The settled status to record once they are written (`None`: a coalesced follow-up turn
    /// starts instead).
    status: Option<SessionStatus>,
}

/// How often an actor holding unwritten closing events retries without a sign from the probe.
const RETRY_UNWRITTEN: std::time::Duration = std::time::Duration::from_secs(5);

/// A turn task in flight.
#[derive(Debug)]
struct Running {
    turn_id: TurnId,
    cancel: CancellationToken,
    handle: JoinHandle<TurnOutcome>,
    /// Keeps `drain` waiting until the turn's closing events are durable.
    _track: TaskTrackerToken,
}

#[derive(Debug)]
/// What a session just created seeds its actor with: its record, and the session's lease when
/// it was claimed beside the record's creation.
#[derive(Clone)]
pub(crate) struct Seed {
    pub record: SessionRecord,
    pub lease: Option<String>,
}

pub(crate) struct Actor {
    core: Arc<Core>,
    id: SessionId,
    /// `session.json`, loaded on the first command; this actor is its only writer.
    record: Option<SessionRecord>,
    /// Child of the engine's root token; each turn's token is a child of this one.
    cancel: CancellationToken,
    running: Option<Running>,
    /// Coalesced messages already recorded, waiting for the follow-up turn.
    pending: usize,
    /// The `workspaceFiles` of those messages, written before that turn.
    pending_files: Vec<(String, String)>,
    /// Set once this actor's first turn has materialized the session workspace.
    workspace_ready: Arc<AtomicBool>,
    /// The conversation folded from the log so far, lent to each turn and handed back.
    conversation: Option<Conversation>,
    /// Mirrors `running.is_some()` for `Engine::is_busy`.
    busy: Arc<AtomicBool>,
    /// The record's owner for the registry's owner check, set once the record is known.
    owner: Arc<OnceLock<String>>,
    /// The trace context of the request that starts the next turn (telemetry on).
    trace: Option<bdk_telemetry::Context>,
    /// With session leases: the token of the lease this actor holds (it admits nothing without).
    lease: Option<String>,
    /// With session leases: the replica found holding the lease; this actor then only refuses.
    elsewhere: Option<String>,
    /// A settled turn's closing events the store refused (see the module docs).
    unwritten: Option<Unwritten>,
    /// Whether this actor has checked its session for a turn a previous process left open
    /// ([`Actor::close_leftovers`]).
    checked_leftovers: bool,
}

impl Actor {
    pub fn new(
        core: Arc<Core>,
        id: SessionId,
        seed: Option<Seed>,
        busy: Arc<AtomicBool>,
        owner: Arc<OnceLock<String>>,
    ) -> Self {
        let cancel = core.root.child_token();
        let (record, lease) = seed.map_or((None, None), |seed| (Some(seed.record), seed.lease));
        if let Some(record) = &record {
            let _ = owner.set(record.principal.clone());
        }
        Actor {
            core,
            id,
            record,
            cancel,
            running: None,
            pending: 0,
            pending_files: Vec::new(),
            workspace_ready: Arc::default(),
            conversation: None,
            busy,
            owner,
            trace: None,
            lease,
            elsewhere: None,
            unwritten: None,
            checked_leftovers: false,
        }
    }

    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let idle_timeout = self.core.defs().config.idle_timeout;
        crate::telemetry::actors(&self.core.telemetry, 1);
        let mut recovered = self.core.store_health.recovered();
        loop {
            let idle = self.running.is_none();
            let stuck = self.unwritten.is_some();
            tokio::select! {
                command = rx.recv() => match command {
                    Some(command) => {
                        if !self.handle(command).await {
                            self.core.forget(&self.id);
                            rx.close();
                            while let Some(command) = rx.recv().await {
                                self.handle(command).await;
                            }
                            break;
                        }
                    }
                    None => break,
                },
                joined = settle(&mut self.running), if !idle => self.turn_ended(joined).await,
                _ = recovered.changed(), if stuck => self.retry_unwritten().await,
                () = tokio::time::sleep(RETRY_UNWRITTEN), if stuck => self.retry_unwritten().await,
                () = tokio::time::sleep(idle_timeout), if idle && !stuck => {
                    if self.core.retire(&self.id, &rx) {
                        break;
                    }
                }
            }
        }
        self.core.stores.events.release(&self.id);
        crate::telemetry::actors(&self.core.telemetry, -1);
        self.core.telemetry.forget_session(self.id.as_str());
        if let (Some(leases), Some(token)) = (&self.core.leases, self.lease.take())
            && let Err(error) = leases.release(&self.id, &token).await
        {
            // It expires by itself one lease period later.
            tracing::warn!(session = %self.id, %error, "could not release the session's lease");
        }
    }

    /// With session leases: holds the session's lease before anything is decided here. On a
    /// fresh claim the record and conversation are read again (another replica may have moved
    /// the session on), and a session its last holder left `running` (it died mid-turn) is
    /// closed as start-up recovery closes it, a turn waiting for approvals restored and run by
    /// this actor. Returns how many turns that closed.
    async fn ensure_lease(&mut self, starting: bool, own_turn: bool) -> Result<usize> {
        let Some(leases) = self.core.leases.clone() else { return self.close_leftovers(own_turn).await };
        if self.lease.is_some() {
            return Ok(0);
        }
        if let Some(replica) = &self.elsewhere {
            return Err(EngineError::LeasedElsewhere { session: self.id.clone(), replica: replica.clone() });
        }
        match leases.acquire(&self.id).await? {
            bdk_store::Claim::Elsewhere { replica } => {
                self.elsewhere = Some(replica.clone());
                Err(EngineError::LeasedElsewhere { session: self.id.clone(), replica })
            }
            bdk_store::Claim::Held { token } => {
                self.lease = Some(token);
                self.core.holders.forget(&self.id);
                if starting {
                    return Ok(0);
                }
                self.record = None;
                self.conversation = None;
                let record = self.record().await?.clone();
                if record.status.is_some_and(|s| s != SessionStatus::Running) {
                    return Ok(0);
                }
                let (closed, plan) = crate::recovery::recover_log(&self.core, &record, true).await?;
                self.core.stores.events.release(&self.id);
                self.record = None;
                // A turn the last holder left waiting for approvals continues here, as after a
                // restart of one process.
                if let Some(turn) = self.run_restored(plan).await? {
                    tracing::info!(session = %self.id, %turn, "took over a turn waiting for approval");
                }
                Ok(closed)
            }
        }
    }

    /// Without session leases: the first time this actor loads a record that says `running` (a
    /// turn may be open), unless its first command starts or continues a turn itself, closes
    /// what the log leaves open as start-up recovery does (a turn waiting for approvals is
    /// restored and run here). Start-up recovery finds such sessions through the store's index
    /// of open sessions, which a power loss can take an entry from (the filesystem store does
    /// not sync it): this closes that session's turn at its next use instead. No actor runs
    /// a turn for the session meanwhile (this one is its only actor), so whatever the log leaves
    /// open is a previous process's. A subagent's child session is skipped: its turn runs in its
    /// parent's, not in an actor. Once per actor; a settled record costs nothing more than
    /// loading it. Returns how many turns it closed.
    async fn close_leftovers(&mut self, own_turn: bool) -> Result<usize> {
        if std::mem::replace(&mut self.checked_leftovers, true) || own_turn || self.running.is_some() {
            return Ok(0);
        }
        let record = self.record().await?.clone();
        if record.status.is_some_and(|s| s != SessionStatus::Running) || record.channel == crate::subagents::CHANNEL {
            return Ok(0);
        }
        let (closed, plan) = crate::recovery::recover_log(&self.core, &record, true).await?;
        self.record = None;
        self.conversation = None;
        if closed > 0 {
            tracing::info!(session = %self.id, turns = closed, "closed turns a previous process left open");
        }
        if let Some(turn) = self.run_restored(plan).await? {
            tracing::info!(session = %self.id, %turn, "restored a turn waiting for approval");
        }
        Ok(closed)
    }

    /// Runs here the turn recovery found waiting for approvals, if any: its parked calls go
    /// back in the registry and the turn resumes. Returns its id.
    async fn run_restored(&mut self, plan: Option<crate::resume::Plan>) -> Result<Option<TurnId>> {
        let Some(plan) = plan else { return Ok(None) };
        let turn = plan.turn.clone();
        let resumed = Box::new(plan.restore(&self.core, &self.id));
        self.resume(turn.clone(), resumed).await?;
        Ok(Some(turn))
    }

    /// Handles one command. Returns `false` when the session does not exist or another replica
    /// holds its lease (the actor should answer what is queued and exit).
    async fn handle(&mut self, command: Command) -> bool {
        let starting = matches!(command, Command::Start { .. });
        let own_turn = matches!(command, Command::Start { .. } | Command::Resume { .. } | Command::Recover { .. });
        let recovered = match self.ensure_lease(starting, own_turn).await {
            Ok(n) => n,
            Err(EngineError::LeasedElsewhere { session, replica }) => {
                match command {
                    // A write runs where the session's turns run: the holder admits it.
                    Command::Direct { call, reply } if call.is_write() && call.may_forward() => {
                        let (core, id) = (self.core.clone(), self.id.clone());
                        tokio::spawn(async move {
                            let _ = reply.send(crate::direct::forward(core, id, replica, *call).await);
                        });
                    }
                    // Reads run anywhere (a write past the forwarding limit is busy).
                    Command::Direct { call, reply } => {
                        crate::direct::admit(&self.core, &self.id, true, *call, reply).await
                    }
                    other => other.refuse(EngineError::LeasedElsewhere { session, replica }),
                }
                return false;
            }
            Err(error) => {
                let missing = matches!(error, EngineError::SessionNotFound(_));
                command.refuse(error);
                return !missing;
            }
        };
        match command {
            Command::Recover { reply } => {
                let _ = reply.send(Ok(recovered));
            }
            Command::Start { request, reply, trace } => {
                self.trace = trace;
                let _ = reply.send(self.start(*request).await);
            }
            Command::FollowUp { request, reply, trace } => {
                self.trace = trace;
                let result = self.follow_up(*request).await;
                let missing = matches!(result, Err(EngineError::SessionNotFound(_)));
                let _ = reply.send(result);
                return !missing;
            }
            Command::Stop { principal, reply } => {
                let result = self.stop(&principal).await;
                let missing = matches!(result, Err(EngineError::SessionNotFound(_)));
                let _ = reply.send(result);
                return !missing;
            }
            Command::Resume { turn, resumed, reply } => {
                let result = self.resume(turn, resumed).await;
                let missing = matches!(result, Err(EngineError::SessionNotFound(_)));
                let _ = reply.send(result);
                return !missing;
            }
            Command::Direct { call, reply } => {
                crate::direct::admit(&self.core, &self.id, self.running.is_some(), *call, reply).await;
            }
        }
        true
    }

    /// The session's record, loading it on first use.
    async fn record(&mut self) -> Result<&SessionRecord> {
        if self.record.is_none() {
            let loaded = self.core.stores.sessions.get(&self.id).await?;
            let loaded = loaded.ok_or_else(|| EngineError::SessionNotFound(self.id.clone()))?;
            let _ = self.owner.set(loaded.principal.clone());
            self.record = Some(loaded);
        }
        self.record.as_ref().ok_or_else(|| EngineError::SessionNotFound(self.id.clone()))
    }

    async fn start(&mut self, request: StartSession) -> Result<SessionStarted> {
        let record = self.record().await?.clone();
        let started = SessionStartedEvent {
            mode: request.mode,
            channel: request.channel,
            principal: request.principal.0,
            title: request.title,
            dry_run: request.dry_run.then_some(true),
            as_of: request.as_of,
            purpose: request.purpose,
        };
        let received = MessageReceived { text: request.message, principal: None };
        // A channel conversation keeps its arm across sessions (its token is stable).
        let sticky = match &request.continuation_key {
            Some(_) => record.continuation_token.clone().unwrap_or_else(|| self.id.to_string()),
            None => self.id.to_string(),
        };
        let mut events = vec![NewEvent::new(EventData::SessionStarted(started))];
        let defs = self.core.defs();
        let assigned = crate::ab::assign(&defs.capabilities.abs, &sticky);
        let bound = agent_bound(&defs, &self.id, &assigned);
        for assigned in assigned {
            events.push(NewEvent::new(EventData::AbAssigned(assigned)));
        }
        events.push(NewEvent::new(EventData::AgentBound(bound)));
        events.push(NewEvent::new(EventData::MessageReceived(received)));
        // The session was just created with an empty log: these events are all of it, and its
        // first turn need not read them back.
        self.conversation.get_or_insert_default();
        let turn_id = if request.workspace_files.is_empty() {
            self.append_starting(events, None).await?
        } else {
            let (appended, turn_id, admitted) = self.append_admitting(events, None, true).await;
            appended?;
            self.start_turn(request.workspace_files, turn_id.clone(), None, admitted, None);
            turn_id
        };
        crate::telemetry::admission(&self.core.telemetry, crate::telemetry::Admission::Started);
        Ok(SessionStarted {
            session_id: self.id.clone(),
            continuation_token: record.continuation_token.unwrap_or_default(),
            turn_id,
        })
    }

    async fn follow_up(&mut self, request: FollowUp) -> Result<FollowUpAccepted> {
        let record = self.record().await?;
        check_owner(record, &request.principal)?;
        check_followable(record)?;
        if !tokens::matches(record.continuation_token.as_deref(), &request.continuation_token) {
            return Err(EngineError::StaleToken(self.id.clone()));
        }
        if self.core.is_draining() {
            return Err(EngineError::Draining);
        }
        let coalesce = self.running.is_some() && request.admission == Admission::Coalesce;
        let starts_at_once = self.running.is_none();
        let kind = match (coalesce, self.running.is_some()) {
            (true, _) => crate::telemetry::Admission::Coalesced,
            (false, true) => crate::telemetry::Admission::Preempted,
            (false, false) => crate::telemetry::Admission::FollowedUp,
        };
        crate::telemetry::admission(&self.core.telemetry, kind);
        // Preempt: the running turn settles (`turn.failed`, cancelled) before the message,
        // and both are written together.
        let preempted = if coalesce { None } else { self.interrupt().await };
        if let Some(preempted) = &preempted {
            crate::turn_log::closed(&self.id, &preempted.closing, &preempted.tools);
        }
        // Closing events the store refused earlier go first; while they cannot be written,
        // neither can the message (503), and they stay kept.
        let mut events = self.unwritten.as_ref().map(|u| u.events.clone()).unwrap_or_default();
        events.extend(preempted.iter().flat_map(|p| p.closing.iter().cloned()));
        let received = MessageReceived { text: request.message, principal: None };
        events.push(NewEvent::new(EventData::MessageReceived(received)));
        // The token's rotation (and the `running` status) are written with the message: one
        // durable write, and neither without the other.
        let (continuation_token, next) = self.rotated_token().await?;
        let held = self.record.as_ref().and_then(|r| r.continuation_token.as_deref());
        let rotated = next.as_ref().is_some_and(|next| next.continuation_token.as_deref() != held);
        // The common case: nothing to close first and a conversation the actor kept current.
        let ahead = starts_at_once
            && events.len() == 1
            && request.workspace_files.is_empty()
            && self.pending_files.is_empty()
            && self.conversation.as_ref().is_some_and(Conversation::is_current);
        if ahead {
            let turn_id = self.append_starting(events, next.clone()).await?;
            self.unwritten = None;
            self.took_record(next, rotated, &continuation_token);
            return Ok(FollowUpAccepted { continuation_token, turn_id: Some(turn_id) });
        }
        // A preempting turn asks for its slot once its predecessor's is given back.
        let (appended, turn_id, admitted) = self.append_admitting(events, next.clone(), starts_at_once).await;
        if let Err(error) = appended {
            if let Some(preempted) = preempted
                && matches!(&error, EngineError::Store(e) if e.is_write_fault() || e.is_unavailable())
            {
                // The preempted turn is closed like any other once the store takes writes.
                let (events, status) = self.settle_events(preempted);
                self.unwritten = Some(Unwritten { events, status: Some(status) });
            }
            return Err(error);
        }
        self.unwritten = None;
        self.took_record(next, rotated, &continuation_token);
        let turn_id = if coalesce {
            self.pending += 1;
            self.pending_files.extend(request.workspace_files);
            None
        } else {
            // Files of messages coalesced earlier go first; the newest message's win.
            let mut files = mem::take(&mut self.pending_files);
            files.extend(request.workspace_files);
            Some(self.start_turn(files, turn_id, None, admitted, None))
        };
        Ok(FollowUpAccepted { continuation_token, turn_id })
    }

    async fn stop(&mut self, principal: &Principal) -> Result<()> {
        check_owner(self.record().await?, principal)?;
        self.pending = 0;
        self.pending_files.clear();
        if let Some(outcome) = self.interrupt().await {
            self.close(outcome).await?;
        }
        self.write_unwritten().await
    }

    /// The token an accepted message answers with: a fresh one for an HTTP token (channel
    /// tokens are stable), and the record to write with the message (the new token, status
    /// `running`), or `None` when neither changes.
    async fn rotated_token(&mut self) -> Result<(String, Option<SessionRecord>)> {
        let record = self.record().await?;
        let current = record.continuation_token.clone().unwrap_or_default();
        let rotates = tokens::rotates(&current);
        if !rotates && record.status == Some(SessionStatus::Running) {
            return Ok((current, None));
        }
        let mut next = record.clone();
        let token = if rotates { tokens::http_token() } else { current };
        next.continuation_token = Some(token.clone());
        next.status = Some(SessionStatus::Running);
        next.updated_at = bdk_protocol::event::timestamp_now();
        Ok((token, Some(next)))
    }

    /// Keeps the session's record written with an accepted message (`next`, with `token`, which
    /// `rotated` from the one held).
    fn took_record(&mut self, next: Option<SessionRecord>, rotated: bool, token: &str) {
        let Some(next) = next else { return };
        if rotated {
            let old = self.record.as_ref().and_then(|r| r.continuation_token.as_deref());
            self.core.direct_tokens.rotate(old, token, &self.id);
        }
        self.record = Some(next);
    }

    /// The record with `status`, when that changes it.
    fn settled_record(&self, status: SessionStatus) -> Option<SessionRecord> {
        let record = self.record.as_ref().filter(|r| r.status != Some(status))?;
        let mut next = record.clone();
        next.status = Some(status);
        next.updated_at = bdk_protocol::event::timestamp_now();
        Some(next)
    }

    /// Records `status` in `session.json` if it changed. The closing event is already durable,
    /// so the write does not wait for an fsync (the status is derived data: recovery rebuilds it
    /// from the log after a crash) and a failure is logged, not returned: the listing shows the
    /// old status until recovery.
    async fn save_status(&mut self, status: SessionStatus) {
        let Some(next) = self.settled_record(status) else { return };
        match self.core.stores.sessions.update_derived(next.clone()).await {
            Ok(()) => self.record = Some(next),
            Err(error) => tracing::error!(session = %self.id, %error, "could not record the session's status"),
        }
    }

    /// Runs a turn restored after a restart under its own id. The session is `running` in its
    /// record already (recovery left it so).
    async fn resume(&mut self, turn: TurnId, resumed: Box<Resumed>) -> Result<()> {
        self.record().await?;
        if self.running.is_some() {
            return Err(EngineError::InvalidRequest("the session already runs a turn".into()));
        }
        self.start_turn(Vec::new(), turn, Some(resumed), None, None);
        Ok(())
    }

    /// Starts turn `turn_id`; `files` are its message's `workspaceFiles`. `resume`: a restored
    /// turn (under its recorded id). `admitted`: its `max_running_turns` admission, when it was
    /// asked for while the message was written (`None`: the turn asks). `accepting`: its
    /// message, still being written ([`Actor::append_starting`]).
    fn start_turn(
        &mut self,
        files: Vec<(String, String)>,
        turn_id: TurnId,
        resume: Option<Box<Resumed>>,
        admitted: Option<Admitted>,
        accepting: Option<Accepting>,
    ) -> TurnId {
        crate::turn_log::started(&self.id, &turn_id);
        let cancel = self.cancel.child_token();
        let settings = self
            .record
            .as_ref()
            .map(|r| ToolSettings { dry_run: r.dry_run, as_of: r.as_of, purpose: r.purpose.clone() })
            .unwrap_or_default();
        let context = TurnContext {
            core: self.core.clone(),
            defs: self.core.defs(),
            session: self.id.clone(),
            turn: turn_id.clone(),
            cancel: cancel.clone(),
            conversation: self.conversation.take().unwrap_or_default(),
            settings,
            workspace: WorkspacePrep { files, ready: self.workspace_ready.clone() },
            persona: None,
            resume,
            admitted,
            accepting,
            trace: self.trace.take(),
        };
        // Boxed: a turn's future is tens of kilobytes, which spawning would copy more than once.
        let handle = tokio::spawn(Box::pin(turn::run(context)));
        self.running = Some(Running { turn_id: turn_id.clone(), cancel, handle, _track: self.core.turns.token() });
        self.busy.store(true, Ordering::SeqCst);
        turn_id
    }

    /// Cancels the running turn, if any, and waits for it to settle. Its closing events are in
    /// the outcome, for the caller to write.
    async fn interrupt(&mut self) -> Option<Settled> {
        let mut running = self.running.take()?;
        running.cancel.cancel();
        let joined = (&mut running.handle).await;
        let outcome = self.outcome(&running.turn_id, joined);
        // Before the closing events: a follow-up they admit may run where the saved copy is read.
        if self.workspace_ready.load(Ordering::SeqCst)
            && let Err(error) = self.core.stores.workspaces.save_session_workspace(&self.id).await
        {
            tracing::warn!(session = %self.id, %error, "could not save the session workspace");
        }
        self.busy.store(false, Ordering::SeqCst);
        drop(running);
        Some(outcome)
    }

    /// A turn task finished on its own: run the coalesced follow-up, or close the turn.
    async fn turn_ended(&mut self, joined: std::result::Result<TurnOutcome, JoinError>) {
        let Some(running) = self.running.take() else { return };
        let mut outcome = self.outcome(&running.turn_id, joined);
        let slot = outcome.slot.take();
        // Before the closing events: a follow-up they admit may run where the saved copy is read.
        if self.workspace_ready.load(Ordering::SeqCst)
            && let Err(error) = self.core.stores.workspaces.save_session_workspace(&self.id).await
        {
            tracing::warn!(session = %self.id, %error, "could not save the session workspace");
        }
        self.busy.store(false, Ordering::SeqCst);
        if matches!(outcome.end, TurnEnd::Failed { error: FailureCode::Storage, .. }) {
            // What the turn folded may not all be in the log: the next turn reads it afresh.
            self.conversation = None;
        }
        let result = if outcome.end == TurnEnd::Suspended {
            // Left open for the next start to restore: no session-level event, still `running`.
            self.append(outcome.closing).await
        } else if self.follow_up_waits() {
            crate::turn_log::closed(&self.id, &outcome.closing, &outcome.tools);
            self.unwritten = Some(Unwritten { events: outcome.closing, status: None });
            self.write_unwritten().await
        } else {
            self.close(outcome).await
        };
        if let Err(error) = result {
            tracing::error!(session = %self.id, %error, "could not record the end of a turn");
        }
        // Only now may `drain` return, or the next queued turn start: the turn's last events are
        // durable (or kept, when the store refuses them; recovery closes the turn if the host
        // stops first).
        drop(slot);
        drop(running);
    }

    /// Whether coalesced messages wait for a follow-up turn once the running one closes.
    fn follow_up_waits(&self) -> bool {
        let mode = self.record.as_ref().map_or(SessionMode::Chat, |r| r.mode);
        self.pending > 0 && mode == SessionMode::Chat && !self.core.is_draining()
    }

    /// Writes the closing events the store refused earlier, if any; then records the settled
    /// status, or starts the coalesced follow-up turn. On failure they stay kept.
    async fn write_unwritten(&mut self) -> Result<()> {
        let Some(unwritten) = &self.unwritten else { return Ok(()) };
        self.append(unwritten.events.clone()).await?;
        let status = self.unwritten.take().and_then(|u| u.status);
        match status {
            Some(status) => self.save_status(status).await,
            None if self.follow_up_waits() && self.running.is_none() => {
                self.pending = 0;
                let files = mem::take(&mut self.pending_files);
                self.start_turn(files, TurnId::generate(), None, None, None);
            }
            None => {}
        }
        Ok(())
    }

    /// [`write_unwritten`](Self::write_unwritten) from the retry timer or the probe's signal.
    async fn retry_unwritten(&mut self) {
        match self.write_unwritten().await {
            Ok(()) => tracing::info!(session = %self.id, "wrote the end of a turn the store had refused"),
            Err(error) => tracing::debug!(session = %self.id, %error, "the store still refuses the end of a turn"),
        }
    }

    /// The turn's outcome, taking back the conversation fold. A turn task that panicked gets
    /// its `turn.failed` here (and the next turn folds the log afresh); one the runtime dropped
    /// while shutting down is left open, with nothing written, for the next start.
    fn outcome(&mut self, turn_id: &TurnId, joined: std::result::Result<TurnOutcome, JoinError>) -> Settled {
        match joined::ended(joined) {
            Ended::Returned(outcome) => {
                self.conversation = Some(outcome.conversation);
                Settled { end: outcome.end, closing: outcome.closing, slot: outcome.slot, tools: outcome.tools }
            }
            Ended::ShuttingDown => {
                Settled { end: TurnEnd::Suspended, closing: Vec::new(), slot: None, tools: Vec::new() }
            }
            Ended::Panicked(error) => {
                tracing::error!(session = %self.id, turn = %turn_id, %error, "turn task failed");
                let message = "the turn stopped on an internal error".to_owned();
                let failed = TurnFailed {
                    status: TurnFailStatus::Failed,
                    message: message.clone(),
                    error: Some(FailureCode::Internal),
                    usage: None,
                    estimated_cost_usd: None,
                };
                let closing = vec![NewEvent::in_turn(turn_id.clone(), EventData::TurnFailed(failed))];
                Settled {
                    end: TurnEnd::Failed { message, error: FailureCode::Internal },
                    closing,
                    slot: None,
                    tools: Vec::new(),
                }
            }
        }
    }

    /// Writes the turn's closing events and the session-level event after them: chat sessions
    /// wait for a follow-up, task sessions end.
    async fn close(&mut self, mut outcome: Settled) -> Result<()> {
        if outcome.end == TurnEnd::Suspended {
            // Left open for the next start to restore: no session-level event, still `running`.
            return self.append(outcome.closing).await;
        }
        let tools = std::mem::take(&mut outcome.tools);
        let (events, status) = self.settle_events(outcome);
        crate::turn_log::closed(&self.id, &events, &tools);
        // The settled status rides in the closing events' commit: one durable write instead of
        // a write and a status update after it, and no listing shows the session `running`
        // after its `session.waiting`. A database writes it in the same transaction; the
        // filesystem in the commit's first line, and its writer thread replaces `session.json`
        // before the append answers, so the turn's end makes no blocking-pool hop.
        let settled = self.settled_record(status);
        match self.append_with(events.clone(), settled.clone()).await {
            Ok(_) => {
                match settled {
                    Some(record) => self.record = Some(record),
                    None => self.save_status(status).await,
                }
                Ok(())
            }
            Err(EngineError::Store(error)) if error.is_write_fault() || error.is_unavailable() => {
                self.unwritten = Some(Unwritten { events, status: Some(status) });
                Err(EngineError::Store(error))
            }
            Err(error) => Err(error),
        }
    }

    /// The turn's closing events and the session-level event after them, and the status the
    /// session settles in.
    fn settle_events(&self, outcome: Settled) -> (Vec<NewEvent>, SessionStatus) {
        let mode = self.record.as_ref().map_or(SessionMode::Chat, |r| r.mode);
        let (data, status) = match (mode, outcome.end) {
            // A suspended turn never gets here (`close` writes it as it is).
            (SessionMode::Chat, _) | (SessionMode::Task, TurnEnd::Suspended) => {
                (EventData::SessionWaiting(SessionWaiting {}), SessionStatus::Waiting)
            }
            (SessionMode::Task, TurnEnd::Completed { result }) => {
                (EventData::SessionCompleted(SessionCompleted { result }), SessionStatus::Completed)
            }
            (SessionMode::Task, TurnEnd::Failed { message, error } | TurnEnd::Cancelled { message, error }) => {
                (EventData::SessionFailed(SessionFailed { message, error: Some(error) }), SessionStatus::Failed)
            }
        };
        let mut events = outcome.closing;
        events.push(NewEvent::new(data));
        (events, status)
    }

    /// Folds events this actor just wrote (a turn's closing events, an accepted message) into
    /// the conversation it lends the next turn, so that turn need not read them back from the
    /// log (a round trip on a database, a disk read once no follower keeps a log's newest
    /// events in memory). Only when they continue the fold with nothing between; otherwise the
    /// turn reads ([`Conversation::fold_own`]).
    fn fold_written(&mut self, written: &[bdk_store::SharedEvent]) {
        if let Some(conversation) = &mut self.conversation {
            conversation.fold_own(written);
        }
    }

    /// Appends the events that start a new turn (with the session's new `record`, as
    /// [`Actor::append_with`]), and names the turn. With `admit`, the turn's
    /// `max_running_turns` admission is asked for while they are written: on a shared database
    /// the claim is a round trip, which then overlaps the write's. A write that fails drops the
    /// admission, giving the slot (or the place in the queue) back.
    async fn append_admitting(
        &mut self,
        events: Vec<NewEvent>,
        record: Option<SessionRecord>,
        admit: bool,
    ) -> (Result<()>, TurnId, Option<Admitted>) {
        let (turn_id, core, id) = (TurnId::generate(), self.core.clone(), self.id.clone());
        let admission = async {
            if !admit {
                return None;
            }
            Some(core.slots.admit(&id, &turn_id).await)
        };
        let (appended, admitted) = tokio::join!(self.append_with(events, record), admission);
        (appended.map(drop), turn_id, admitted)
    }

    /// Starts the turn that `events` (ending with its message) start before they are written,
    /// on the conversation with them folded ahead, and then writes them (with the session's new
    /// `record`), so that the turn's model call overlaps their commit (`accepting.rs`). The
    /// turn asks for its `max_running_turns` slot itself, meanwhile. A write that fails drops
    /// the turn, which wrote nothing. The actor's conversation is current, or new.
    async fn append_starting(&mut self, events: Vec<NewEvent>, record: Option<SessionRecord>) -> Result<TurnId> {
        let turn_id = TurnId::generate();
        let conversation = self.conversation.get_or_insert_default();
        let (accepting, acceptor) = crate::accepting::fold_ahead(conversation, &self.id, &events);
        self.start_turn(Vec::new(), turn_id.clone(), None, None, Some(accepting));
        match self.append_with(events, record).await {
            Ok(written) => {
                acceptor.accept(written);
                Ok(turn_id)
            }
            Err(error) => {
                drop(acceptor);
                self.drop_turn().await;
                Err(error)
            }
        }
    }

    /// Drops the turn started on a message that was not written: it wrote nothing, and its
    /// outcome (with the fold that holds the message) is discarded; its slot is given back.
    async fn drop_turn(&mut self) {
        let Some(mut running) = self.running.take() else { return };
        running.cancel.cancel();
        let _ = (&mut running.handle).await;
        self.busy.store(false, Ordering::SeqCst);
        self.conversation = None;
        tracing::warn!(session = %self.id, turn = %running.turn_id, "the message was not written; its turn is dropped");
    }

    async fn append(&mut self, events: Vec<NewEvent>) -> Result<()> {
        self.append_with(events, None).await.map(drop)
    }

    /// Appends `events`, with the session's new `record` in the same durable write when set;
    /// answers what was written.
    async fn append_with(
        &mut self,
        events: Vec<NewEvent>,
        record: Option<SessionRecord>,
    ) -> Result<Vec<bdk_store::SharedEvent>> {
        let log = &self.core.stores.events;
        let appended = match record {
            Some(record) => log.append_with_record(&self.id, events, record).await,
            None => log.append(&self.id, events).await,
        };
        match appended {
            Ok(written) => {
                self.fold_written(&written);
                Ok(written)
            }
            Err(bdk_store::Error::LeaseLost(id)) => {
                // Another replica claimed the session (this one stalled past its lease): it
                // owns the log now. Nothing was written; forget what this actor cached, so the
                // next command claims the lease again (and is forwarded to the holder).
                tracing::warn!(session = %self.id, "the session's lease moved to another replica; this replica stops writing to it");
                self.lease = None;
                self.record = None;
                self.conversation = None;
                Err(EngineError::Store(bdk_store::Error::LeaseLost(id)))
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// Resolves when the running turn's task ends; never when there is none.
async fn settle(running: &mut Option<Running>) -> std::result::Result<TurnOutcome, JoinError> {
    match running {
        Some(running) => (&mut running.handle).await,
        None => std::future::pending().await,
    }
}

/// `agent.bound` for a new session: BDK runs the conversation itself, so the backing agent is
/// the session (its id is the id to resume with) and the model is the one its turns run on
/// (an A/B arm's, when the session's arm sets one). There is no cloud conversation URL.
fn agent_bound(defs: &crate::defs::Defs, id: &SessionId, assigned: &[bdk_protocol::event::AbAssigned]) -> AgentBound {
    let pairs: Vec<(String, String)> = assigned.iter().map(|a| (a.experiment.clone(), a.arm.clone())).collect();
    let arms = crate::ab::arms(&defs.capabilities.abs, &pairs);
    let model = arms.iter().rev().find_map(|arm| arm.model.as_ref().map(|(id, _)| id.clone()));
    AgentBound { agent_id: id.to_string(), url: None, model: Some(model.unwrap_or_else(|| defs.model.clone())) }
}

#[cfg(test)]
mod tests {
    /// Every live actor's mailbox holds a block of 32 commands from the start.
    #[test]
    fn a_command_is_small() {
        let size = std::mem::size_of::<super::Command>();
        assert!(size <= 64, "Command is {size} bytes: box the variant that grew");
    }
}
