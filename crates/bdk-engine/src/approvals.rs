//! Human approval of tool calls: the registry of parked calls, how a person's decision reaches
//! the turn that waits for it, and how restart recovery closes calls a dead process left parked.
//!
//! Lifecycle. When a model-initiated call's input is valid and the registry says
//! `needs_approval`, dispatch parks it here and records `action.approval_requested`; the turn
//! keeps running (its other calls go on). [`Core::resolve_approval`] takes the parked entry out
//! of the registry (so a call is decided exactly once) and hands the decision to the dispatcher,
//! which records `action.approval_resolved` and only then answers the resolver; an approved call
//! then runs and gets its `action.result`, a denied one gets an `isError` result the model reads.
//! A turn that is stopped, preempted or drained while a call is parked ends that call like any
//! other (`action.result`, "the tool call was cancelled"), and its entry leaves the registry.
//!
//! The registry is memory; the log is what survives. After a restart, recovery puts a parked
//! call back here from its `action.approval_requested` and its turn goes on waiting for it
//! (`resume.rs`; decision note "approvals outlive a restart"). A parked call has no expiry of
//! its own: it waits until it is decided or its turn ends. Only a call recovery cannot restore
//! (a subagent child's, or one in a turn that is not the session's last open one) is closed
//! with `action.approval_resolved` (decision `expired`) and an `isError` `action.result`,
//! before that turn's `turn.failed`, so every requested call keeps a result in the log.
//!
//! This module does not decide whether a call needs approval (the tool registry does) nor run
//! calls (`dispatch.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use bdk_protocol::event::{ActionResult, ApprovalDecision, ApprovalResolved, timestamp_now};
use bdk_protocol::{CallId, Event, EventData, SessionId, TurnId};
use bdk_store::NewEvent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::types::Principal;

/// What the model reads when a person denies a call.
pub const DENIED: &str = "denied by a human reviewer: the call was not run";
/// What the model reads for a parked call recovery could not restore (see the module docs).
pub const EXPIRED: &str = "approval expired: the host restarted before anyone decided; the call was not run";

/// One parked call, as `GET /v1/session/:id/approvals` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub call_id: CallId,
    pub tool_name: String,
    pub input: Value,
    pub requested_at: DateTime<Utc>,
    pub turn_id: TurnId,
}

/// A decision on its way to the dispatcher that parked the call.
#[derive(Debug)]
pub(crate) struct Resolution {
    pub decision: ApprovalDecision,
    pub principal: String,
    /// Fired once `action.approval_resolved` is durable.
    pub recorded: oneshot::Sender<()>,
}

#[derive(Debug)]
struct Parked {
    pending: PendingApproval,
    decide: oneshot::Sender<Resolution>,
}

/// Every parked call of one engine, by session, in the order they were parked.
#[derive(Debug, Default)]
pub(crate) struct Approvals {
    parked: Mutex<HashMap<SessionId, Vec<Parked>>>,
}

impl Approvals {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Vec<Parked>>> {
        self.parked.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Parks a call; the receiver yields the decision.
    fn park(&self, session: &SessionId, pending: PendingApproval) -> oneshot::Receiver<Resolution> {
        let (decide, decided) = oneshot::channel();
        self.lock().entry(session.clone()).or_default().push(Parked { pending, decide });
        decided
    }

    /// Parks a call again after a restart (`resume.rs`), keeping its original `requested_at`.
    pub fn restore(&self, session: &SessionId, pending: PendingApproval) -> oneshot::Receiver<Resolution> {
        self.park(session, pending)
    }

    /// Sets a parked call's `requested_at` to its `action.approval_requested` event's time.
    pub fn stamp(&self, session: &SessionId, call_id: &CallId, at: DateTime<Utc>) {
        if let Some(parked) =
            self.lock().get_mut(session).and_then(|c| c.iter_mut().find(|p| &p.pending.call_id == call_id))
        {
            parked.pending.requested_at = at;
        }
    }

    /// Withdraws a parked call nobody will wait for (no-op when it is not parked).
    pub fn withdraw(&self, session: &SessionId, call_id: &CallId) {
        self.take(session, call_id);
    }

    pub fn list(&self, session: &SessionId) -> Vec<PendingApproval> {
        self.lock().get(session).map(|calls| calls.iter().map(|p| p.pending.clone()).collect()).unwrap_or_default()
    }

    /// Removes a parked call (to decide it, or because its turn ended).
    fn take(&self, session: &SessionId, call_id: &CallId) -> Option<Parked> {
        let mut parked = self.lock();
        let calls = parked.get_mut(session)?;
        let at = calls.iter().position(|p| &p.pending.call_id == call_id)?;
        let taken = calls.remove(at);
        if calls.is_empty() {
            parked.remove(session);
        }
        Some(taken)
    }
}

/// The calls one dispatch parked. Dropping it (the step is over, or the turn was cancelled or
/// panicked) withdraws those still parked, so the registry never lists a call nobody waits for.
#[derive(Debug)]
pub(crate) struct ParkedCalls<'a> {
    approvals: &'a Approvals,
    session: SessionId,
    calls: Vec<CallId>,
}

impl<'a> ParkedCalls<'a> {
    pub fn new(approvals: &'a Approvals, session: &SessionId) -> Self {
        ParkedCalls { approvals, session: session.clone(), calls: Vec::new() }
    }

    /// Parks one call of `turn`; the receiver yields the decision.
    pub fn park(
        &mut self,
        turn: &TurnId,
        call_id: &CallId,
        tool_name: &str,
        input: &Value,
    ) -> oneshot::Receiver<Resolution> {
        let pending = PendingApproval {
            call_id: call_id.clone(),
            tool_name: tool_name.to_owned(),
            input: input.clone(),
            requested_at: timestamp_now(),
            turn_id: turn.clone(),
        };
        self.calls.push(call_id.clone());
        self.approvals.park(&self.session, pending)
    }

    /// Takes charge of a call parked before this dispatch began (restored after a restart).
    pub fn adopt(&mut self, call_id: &CallId) {
        self.calls.push(call_id.clone());
    }
}

impl Drop for ParkedCalls<'_> {
    fn drop(&mut self) {
        for call_id in &self.calls {
            self.approvals.take(&self.session, call_id);
        }
    }
}

/// `action.approval_resolved` for a decision.
pub(crate) fn resolved_event(call_id: &CallId, tool_name: &str, resolution: &Resolution) -> EventData {
    EventData::ApprovalResolved(ApprovalResolved {
        call_id: call_id.clone(),
        tool_name: tool_name.to_owned(),
        decision: resolution.decision,
        principal: Some(resolution.principal.clone()),
        reason: None,
    })
}

/// Whether the session's record says a turn runs (or has no status yet).
fn running(record: &bdk_store::SessionRecord) -> bool {
    record.status.is_none_or(|status| status == bdk_store::record::SessionStatus::Running)
}

impl Core {
    /// The session's parked calls, after the owner check. With several replicas, the replica
    /// running the session's turn is asked (parked calls live in its memory).
    pub async fn approvals(
        self: &Arc<Self>,
        session: &SessionId,
        principal: &Principal,
    ) -> Result<Vec<PendingApproval>> {
        let record = self.owned_record(session, principal).await?;
        if let Some((leases, replica)) = self.runner_elsewhere(session, running(&record)).await? {
            return crate::remote::approvals(&leases, &replica, session, principal).await;
        }
        Ok(self.approvals.list(session))
    }

    /// [`Core::approvals`] answered here (a forwarded request).
    pub(crate) async fn approvals_here(
        &self,
        session: &SessionId,
        principal: &Principal,
    ) -> Result<Vec<PendingApproval>> {
        self.owned_record(session, principal).await?;
        Ok(self.approvals.list(session))
    }

    /// Decides one parked call. Returns once `action.approval_resolved` is durable. With
    /// several replicas, the decision goes to the replica running the session's turn.
    pub async fn resolve_approval(
        self: &Arc<Self>,
        session: &SessionId,
        call_id: &CallId,
        decision: ApprovalDecision,
        principal: &Principal,
    ) -> Result<PendingApproval> {
        if decision == ApprovalDecision::Expired {
            return Err(EngineError::InvalidRequest("decision must be \"approve\" or \"deny\"".into()));
        }
        let record = self.owned_record(session, principal).await?;
        if let Some((leases, replica)) = self.runner_elsewhere(session, running(&record)).await? {
            return crate::remote::resolve(&leases, &replica, session, call_id, decision, principal).await;
        }
        self.resolve_here(session, call_id, decision, principal).await
    }

    /// [`Core::resolve_approval`] decided here (the owner already checked).
    pub(crate) async fn resolve_here(
        &self,
        session: &SessionId,
        call_id: &CallId,
        decision: ApprovalDecision,
        principal: &Principal,
    ) -> Result<PendingApproval> {
        if decision == ApprovalDecision::Expired {
            return Err(EngineError::InvalidRequest("decision must be \"approve\" or \"deny\"".into()));
        }
        self.owned_record(session, principal).await?;
        let not_pending = || EngineError::ApprovalNotFound(call_id.clone());
        let parked = self.approvals.take(session, call_id).ok_or_else(not_pending)?;
        let (recorded, was_recorded) = oneshot::channel();
        let resolution = Resolution { decision, principal: principal.as_str().to_owned(), recorded };
        // The dispatcher is gone or drops the decision when the turn ended meanwhile.
        parked.decide.send(resolution).map_err(|_| not_pending())?;
        was_recorded.await.map_err(|_| not_pending())?;
        Ok(parked.pending)
    }
}

/// Restart recovery, for turns it does not restore: for each call of an `open` turn that was parked (requested, never
/// resolved, no result), `action.approval_resolved` (`expired`) and an `isError`
/// `action.result`, in the turn, in the order the calls were parked.
pub(crate) fn expire_parked(events: &[Event], open: &[TurnId]) -> Vec<NewEvent> {
    let open: HashSet<&TurnId> = open.iter().collect();
    let mut closed: HashSet<&CallId> = HashSet::new();
    for event in events {
        match &event.data {
            EventData::ApprovalResolved(resolved) => {
                closed.insert(&resolved.call_id);
            }
            EventData::ActionResult(result) => {
                closed.insert(&result.call_id);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for event in events {
        let (EventData::ApprovalRequested(requested), Some(turn)) = (&event.data, &event.turn_id) else { continue };
        if !open.contains(turn) || closed.contains(&requested.call_id) {
            continue;
        }
        out.push(NewEvent::in_turn(
            turn.clone(),
            EventData::ApprovalResolved(ApprovalResolved {
                call_id: requested.call_id.clone(),
                tool_name: requested.tool_name.clone(),
                decision: ApprovalDecision::Expired,
                principal: None,
                reason: Some("the host restarted while the call was parked".into()),
            }),
        ));
        out.push(NewEvent::in_turn(
            turn.clone(),
            EventData::ActionResult(ActionResult {
                call_id: requested.call_id.clone(),
                tool_name: requested.tool_name.clone(),
                is_error: true,
                result: Value::String(EXPIRED.into()),
                duration_ms: 0,
                stubbed: None,
                direct: None,
            }),
        ));
    }
    out
}
