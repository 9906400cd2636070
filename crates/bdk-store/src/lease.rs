//! Session leases: which replica runs a session when several `bdk serve` processes share one
//! database. A backend that serves one process (the filesystem) has none; the engine then
//! decides everything in its own actors, as always.
//!
//! The contract: a replica's session actor admits commands only while it holds the session's
//! lease. [`SessionLeases::acquire`] claims a free or expired lease (or renews this replica's
//! own), the backend keeps held leases alive with a heartbeat, and [`SessionLeases::release`]
//! gives one up when the actor retires. A command that reaches a replica whose peer holds the
//! lease is forwarded to that peer ([`SessionLeases::forward`]) and answered there, so token
//! checks, preempt, coalesce and stop run where the turn runs. This module decides nothing about
//! turns: it carries opaque JSON commands and answers.

use std::fmt;
use std::time::Duration;

use bdk_protocol::SessionId;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use crate::api::BoxFuture;
use crate::error::Result;

/// The outcome of [`SessionLeases::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This replica holds the lease now; `token` identifies this holding (for `release`).
    Held { token: String },
    /// Another replica holds a live lease.
    Elsewhere { replica: String },
}

/// The outcome of [`SessionLeases::claim_slot`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotClaim {
    /// The turn holds one of the agent's `max_running_turns` slots now.
    Running,
    /// Every slot is taken; the turn waits, `position` (1-based) in the queue of all replicas.
    Queued { position: u32 },
}

/// A command another replica forwarded to this one: answer it on `reply`.
#[derive(Debug)]
pub struct Incoming {
    pub session: SessionId,
    pub body: Value,
    pub reply: oneshot::Sender<Value>,
}

/// One agent's view of the session leases of a shared database.
pub trait SessionLeases: Send + Sync + fmt::Debug {
    /// This replica's id (unique per process).
    fn replica(&self) -> &str;

    /// How long a lease outlives its holder's last heartbeat: the bound on noticing a dead replica.
    fn period(&self) -> Duration;

    /// Claims the session's lease if it is free, expired or already this replica's.
    fn acquire<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<Claim>>;

    /// Gives up a lease held under `token` (a later holding under another token is untouched).
    fn release<'a>(&'a self, session: &'a SessionId, token: &'a str) -> BoxFuture<'a, Result<()>>;

    /// The replica holding a live lease on the session, if any (claims nothing).
    fn holder<'a>(&'a self, session: &'a SessionId) -> BoxFuture<'a, Result<Option<String>>>;

    /// Sessions whose lease expired (its holder stopped renewing it: the replica died).
    fn expired(&self) -> BoxFuture<'_, Result<Vec<SessionId>>>;

    /// Sends `body` to `replica` for `session` and waits up to `timeout` for its answer
    /// (`Unavailable` when none comes).
    fn forward<'a>(
        &'a self,
        replica: &'a str,
        session: &'a SessionId,
        body: Value,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<Value>>;

    /// Claims one of the agent's `max` running-turn slots for `turn` of `session`, shared by every
    /// replica on the database, or queues it. Asking again for a queued turn keeps its place and
    /// claims the slot once its turn comes; [`SessionLeases::release_slot`] gives either up. A
    /// slot whose session lease is no longer this replica's (it died) is free again.
    fn claim_slot<'a>(&'a self, session: &'a SessionId, turn: &'a str, max: u32) -> BoxFuture<'a, Result<SlotClaim>>;

    /// Gives up the slot (or the place in the queue) of `turn`.
    fn release_slot<'a>(&'a self, session: &'a SessionId, turn: &'a str) -> BoxFuture<'a, Result<()>>;

    /// A signal that changes whenever a slot (or a place in the queue) may have been given up
    /// on any replica: a queued turn asks again then. Only a wake-up (it may be late, merged or
    /// lost): waiters still ask now and then. `None`: the backend has none; waiters poll.
    fn slot_released(&self) -> Option<watch::Receiver<u64>>;

    /// A replica shutting down: every lease it holds is free to claim at once (not one lease
    /// period later). Returns how many.
    fn release_all(&self) -> BoxFuture<'_, Result<u64>>;

    /// The commands other replicas forward to this one. The first call gets the receiver and
    /// starts delivering; later calls get `None`.
    fn serve(&self) -> Option<mpsc::Receiver<Incoming>>;
}
