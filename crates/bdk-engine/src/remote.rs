//! Several replicas on one database: commands for a session whose lease another replica holds
//! are forwarded to that replica and answered by its actor, so admission (token check and
//! rotation, preempt, coalesce), stop and approvals happen where the turn runs. Also the two background
//! tasks a leased engine runs: the inbox that answers commands forwarded here, and the sweep that
//! closes turns of replicas that died (their leases expired).
//!
//! The wire format is private to bdk (JSON through the store's [`SessionLeases`]): a command
//! `{"command": "followUp" | "stop" | "recover" | "direct" | "approvals" | "resolve", ...}` and an answer `{"ok": ...}` or
//! `{"error": code, "message": ...}`. The store only carries it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bdk_protocol::event::ApprovalDecision;
use bdk_protocol::{CallId, SessionId};
use bdk_store::{Incoming, SessionLeases};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::approvals::PendingApproval;
use crate::direct::ForwardedCall;
use crate::engine::Core;
use crate::error::{EngineError, Result};
use crate::types::{Admission, FollowUp, FollowUpAccepted, Principal};

/// How long a forwarded command waits for the holder's answer. A stop waits for the turn to
/// settle, so this is generous; a holder that died answers nothing and its lease expires first.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a forwarded direct tool call waits for the holder's answer: the call runs there, up
/// to its tool's own timeout.
const DIRECT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Forwards past this many replicas give up (the lease is moving; the caller retries).
pub(crate) const MAX_HOPS: u8 = 2;

/// The replica that last answered a follow-up or stop forwarded from here, per session, so the
/// next one goes straight there: finding the holder through the lease costs this replica an actor,
/// the lease claim and a read of the holder's name first. Only a hint: a holder that let the
/// session go takes it back when the follow-up reaches it, or forwards it on; one that died
/// fails the forward as unavailable, which drops the entry, and the follow-up then takes the
/// usual way. Bounded: when full, it starts over.
#[derive(Debug, Default)]
pub(crate) struct Holders(Mutex<HashMap<SessionId, String>>);

impl Holders {
    const MAX: usize = 4096;

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, String>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get(&self, id: &SessionId) -> Option<String> {
        self.map().get(id).cloned()
    }

    pub fn note(&self, id: &SessionId, replica: &str) {
        let mut map = self.map();
        if map.len() >= Self::MAX && !map.contains_key(id) {
            map.clear();
        }
        map.insert(id.clone(), replica.to_owned());
    }

    pub fn forget(&self, id: &SessionId) {
        self.map().remove(id);
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "camelCase")]
enum Remote {
    #[serde(rename_all = "camelCase")]
    FollowUp {
        message: String,
        principal: String,
        continuation_token: String,
        coalesce: bool,
        workspace_files: Vec<(String, String)>,
        hops: u8,
    },
    #[serde(rename_all = "camelCase")]
    Stop {
        principal: String,
        hops: u8,
    },
    Recover,
    #[serde(rename_all = "camelCase")]
    Approvals {
        principal: String,
    },
    #[serde(rename_all = "camelCase")]
    Direct {
        call: ForwardedCall,
    },
    #[serde(rename_all = "camelCase")]
    Resolve {
        call_id: CallId,
        decision: ApprovalDecision,
        principal: String,
    },
}

/// Sends a follow-up to `replica`, which holds the session's lease.
pub(crate) async fn follow_up(
    leases: &Arc<dyn SessionLeases>,
    replica: &str,
    id: &SessionId,
    request: FollowUp,
    hops: u8,
) -> Result<FollowUpAccepted> {
    let command = Remote::FollowUp {
        message: request.message,
        principal: request.principal.0,
        continuation_token: request.continuation_token,
        coalesce: request.admission == Admission::Coalesce,
        workspace_files: request.workspace_files,
        hops: hops + 1,
    };
    let answer = send(leases, replica, id, &command).await?;
    serde_json::from_value(answer)
        .map_err(|e| EngineError::Store(bdk_store::Error::Backend(format!("a forwarded follow-up's answer: {e}"))))
}

/// Sends a stop to `replica`, which holds the session's lease.
pub(crate) async fn stop(
    leases: &Arc<dyn SessionLeases>,
    replica: &str,
    id: &SessionId,
    principal: &Principal,
    hops: u8,
) -> Result<()> {
    send(leases, replica, id, &Remote::Stop { principal: principal.0.clone(), hops: hops + 1 }).await.map(drop)
}

/// Lists the parked calls of a session running on `replica`.
pub(crate) async fn approvals(
    leases: &Arc<dyn SessionLeases>,
    replica: &str,
    id: &SessionId,
    principal: &Principal,
) -> Result<Vec<PendingApproval>> {
    let answer = send(leases, replica, id, &Remote::Approvals { principal: principal.0.clone() }).await?;
    serde_json::from_value(answer)
        .map_err(|e| EngineError::Store(bdk_store::Error::Backend(format!("a forwarded approvals listing: {e}"))))
}

/// Decides a call parked on `replica`.
pub(crate) async fn resolve(
    leases: &Arc<dyn SessionLeases>,
    replica: &str,
    id: &SessionId,
    call_id: &CallId,
    decision: ApprovalDecision,
    principal: &Principal,
) -> Result<PendingApproval> {
    let command = Remote::Resolve { call_id: call_id.clone(), decision, principal: principal.0.clone() };
    let answer = send(leases, replica, id, &command).await?;
    serde_json::from_value(answer)
        .map_err(|e| EngineError::Store(bdk_store::Error::Backend(format!("a forwarded approval: {e}"))))
}

/// Runs a direct tool call on `replica`, which holds the session's lease; returns its answer.
pub(crate) async fn direct(
    leases: &Arc<dyn SessionLeases>,
    replica: &str,
    id: &SessionId,
    call: ForwardedCall,
) -> Result<Value> {
    send_within(leases, replica, id, &Remote::Direct { call }, DIRECT_TIMEOUT).await
}

async fn send(leases: &Arc<dyn SessionLeases>, replica: &str, id: &SessionId, command: &Remote) -> Result<Value> {
    send_within(leases, replica, id, command, FORWARD_TIMEOUT).await
}

async fn send_within(
    leases: &Arc<dyn SessionLeases>,
    replica: &str,
    id: &SessionId,
    command: &Remote,
    timeout: Duration,
) -> Result<Value> {
    let body = serde_json::to_value(command).map_err(|e| EngineError::Store(bdk_store::Error::Encode(e)))?;
    let answer = leases.forward(replica, id, body, timeout).await?;
    decode(id, answer)
}

fn encode<T: Serialize>(result: Result<T>) -> Value {
    match result {
        Ok(value) => json!({ "ok": value }),
        Err(error) => {
            let code = match &error {
                EngineError::Store(store) if store.is_unavailable() => "store_unavailable",
                other => other.code(),
            };
            let call = match &error {
                EngineError::ApprovalNotFound(call) => Some(call.as_str().to_owned()),
                _ => None,
            };
            json!({ "error": code, "message": error.to_string(), "callId": call })
        }
    }
}

fn decode(id: &SessionId, answer: Value) -> Result<Value> {
    if let Some(ok) = answer.get("ok") {
        return Ok(ok.clone());
    }
    let code = answer.get("error").and_then(Value::as_str).unwrap_or("internal_error");
    let message = answer.get("message").and_then(Value::as_str).unwrap_or("the replica gave no reason").to_owned();
    let id = id.clone();
    Err(match code {
        "session_not_found" => EngineError::SessionNotFound(id),
        "forbidden" => EngineError::Forbidden(id),
        "stale_continuation_token" => EngineError::StaleToken(id),
        "session_busy" => EngineError::SessionBusy(id),
        "session_not_followable" => EngineError::NotFollowable(id),
        "shutting_down" => EngineError::Draining,
        "invalid_request" => EngineError::InvalidRequest(message),
        "approval_not_found" => match answer.get("callId").and_then(Value::as_str).map(CallId::parse) {
            Some(Ok(call)) => EngineError::ApprovalNotFound(call),
            _ => EngineError::Store(bdk_store::Error::Backend(message)),
        },
        "session_leased_elsewhere" => EngineError::Store(bdk_store::Error::Unavailable(message)),
        "store_unavailable" => EngineError::Store(bdk_store::Error::Unavailable(message)),
        _ => EngineError::Store(bdk_store::Error::Backend(message)),
    })
}

/// Starts the inbox (commands forwarded to this replica) and the sweep of expired leases.
pub(crate) fn start(core: &Arc<Core>, leases: &Arc<dyn SessionLeases>) {
    if let Some(mut inbox) = leases.serve() {
        let weak = Arc::downgrade(core);
        tokio::spawn(async move {
            while let Some(incoming) = inbox.recv().await {
                let Some(core) = weak.upgrade() else { return };
                tokio::spawn(answer(core, incoming));
            }
        });
    }
    tokio::spawn(sweep(Arc::downgrade(core), leases.clone()));
}

async fn answer(core: Arc<Core>, incoming: Incoming) {
    let Incoming { session, body, reply } = incoming;
    let answer = match serde_json::from_value::<Remote>(body) {
        Ok(Remote::FollowUp { message, principal, continuation_token, coalesce, workspace_files, hops }) => {
            let request = FollowUp {
                message,
                principal: Principal(principal),
                continuation_token,
                admission: if coalesce { Admission::Coalesce } else { Admission::Preempt },
                workspace_files,
            };
            encode(core.follow_up_at(&session, request, hops).await)
        }
        Ok(Remote::Stop { principal, hops }) => encode(core.stop_at(&session, &Principal(principal), hops).await),
        Ok(Remote::Recover) => encode(core.recover_one(&session).await),
        Ok(Remote::Direct { call }) => encode(crate::direct::call_forwarded(&core, &session, call).await),
        Ok(Remote::Approvals { principal }) => encode(core.approvals_here(&session, &Principal(principal)).await),
        Ok(Remote::Resolve { call_id, decision, principal }) => {
            encode(core.resolve_here(&session, &call_id, decision, &Principal(principal)).await)
        }
        Err(error) => {
            json!({ "error": "invalid_request", "message": format!("unreadable forwarded command: {error}") })
        }
    };
    let _ = reply.send(answer);
}

/// Every half lease period: sessions whose holder stopped renewing its lease (it died) get an
/// actor here, which claims the lease and closes what the dead replica left running, exactly as
/// start-up recovery would. Several replicas sweeping at once get one winner (the lease).
async fn sweep(core: Weak<Core>, leases: Arc<dyn SessionLeases>) {
    let mut tick = tokio::time::interval((leases.period() / 2).max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(core) = core.upgrade() else { return };
        if core.root.is_cancelled() {
            return;
        }
        let expired = match leases.expired().await {
            Ok(expired) => expired,
            Err(error) => {
                tracing::warn!(%error, "could not look for expired session leases");
                continue;
            }
        };
        for id in expired {
            let core = core.clone();
            tokio::spawn(async move {
                match core.recover_one(&id).await {
                    Ok(0) | Err(EngineError::LeasedElsewhere { .. } | EngineError::SessionNotFound(_)) => {}
                    Ok(n) => tracing::info!(session = %id, turns = n, "closed turns a dead replica left running"),
                    Err(error) => tracing::warn!(session = %id, %error, "could not take over a session"),
                }
            });
        }
    }
}
