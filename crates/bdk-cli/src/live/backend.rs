//! What `run` and `chat` need from wherever the agent runs: send a message, follow a session's
//! events, decide a parked call, stop a turn, read the cost, save the trace. [`Local`] is the
//! in-process engine on a project folder; [`Remote`](super::remote::Remote) a running server's
//! session API (`chat --url`).
//!
//! [`Local`]: super::local::Local

use bdk_engine::CostReport;
use bdk_protocol::event::{ApprovalDecision, SessionMode};
use bdk_protocol::{CallId, Event, SessionId};
use tokio::sync::mpsc;

/// How a message enters a session.
pub struct Send<'a> {
    pub message: &'a str,
    /// Continue this session.
    pub session: Option<&'a SessionId>,
    /// The token from the last accepted message, when the caller keeps it (chat); without it,
    /// the local backend reads the session's current token from `session.json`.
    pub token: Option<&'a str>,
    pub mode: SessionMode,
    pub dry_run: bool,
    pub purpose: &'a str,
}

/// An accepted message: the session, where its new events start, and the next token.
pub struct Sent {
    pub id: SessionId,
    pub from: u64,
    pub token: String,
}

/// A session's events from some index on, as they land.
pub type Events = mpsc::UnboundedReceiver<anyhow::Result<Event>>;

pub trait Backend: Sync {
    async fn send(&self, send: Send<'_>) -> anyhow::Result<Sent>;
    async fn follow(&self, id: &SessionId, from: u64) -> anyhow::Result<Events>;
    async fn resolve(&self, id: &SessionId, call: &CallId, decision: ApprovalDecision) -> anyhow::Result<()>;
    async fn stop(&self, id: &SessionId) -> anyhow::Result<()>;
    async fn cost(&self, id: &SessionId) -> anyhow::Result<CostReport>;
    /// Saves or locates the session's events; returns where they are (a path or a URL).
    async fn trace(&self, id: &SessionId) -> anyhow::Result<String>;
    /// Waits until the session's recorded status is settled (local state only).
    async fn settle(&self, id: &SessionId);
    /// The session's status as recorded, for the resume banner.
    async fn status(&self, id: &SessionId) -> anyhow::Result<String>;
}
