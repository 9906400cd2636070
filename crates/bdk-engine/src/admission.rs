//! `max_running_turns`: the turn slots shared by every session of the agent. A turn that finds
//! no free slot learns its queue position first (for `turn.queued`), then waits its turn.
//! Preempt and coalesce (per-session admission) live in the actor.
//!
//! One process: a fair semaphore. Several replicas on one database (session leases): the slots
//! are rows the database counts for the whole host group ([`SessionLeases::claim_slot`]), so the
//! limit and the queue hold across replicas. A waiting turn asks again when a slot of this
//! replica is released, when the store signals one released on any replica
//! ([`SessionLeases::slot_released`]), and every [`SHARED_POLL`] (a lost signal, a holder that
//! died; every [`SHARED_POLL_UNSIGNALLED`] for a store without the signal).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bdk_protocol::{SessionId, TurnId};
use bdk_store::{SessionLeases, SlotClaim};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

/// How often a turn waiting for a slot shared with other replicas asks the database again
/// without being woken (the safety net behind the store's signal).
const SHARED_POLL: Duration = Duration::from_secs(2);

/// The same for a store that signals no slot released on another replica.
const SHARED_POLL_UNSIGNALLED: Duration = Duration::from_millis(250);

/// The agent's turn slots.
#[derive(Debug)]
pub(crate) struct TurnSlots {
    semaphore: Arc<Semaphore>,
    waiting: Arc<AtomicU32>,
    /// Several replicas: the slots live in the database; `max` is the limit (0: none).
    shared: Option<Shared>,
}

#[derive(Debug, Clone)]
struct Shared {
    leases: Arc<dyn SessionLeases>,
    max: u32,
    /// Wakes this replica's waiting turns when one of its slots is released.
    released: Arc<Notify>,
}

/// What asking for a slot answers: a slot now, or a place in the queue.
pub(crate) type Admitted = bdk_store::Result<Result<Slot, QueuedTurn>>;

/// A slot, held until the turn ends (dropping it releases it).
#[derive(Debug)]
pub(crate) enum Slot {
    Local { _permit: OwnedSemaphorePermit },
    Shared { _slot: SharedSlot },
}

/// A slot (or a place in the queue) in the database; dropping it gives it up.
#[derive(Debug)]
pub(crate) struct SharedSlot {
    shared: Shared,
    session: SessionId,
    turn: TurnId,
}

impl Drop for SharedSlot {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (shared, session, turn) = (self.shared.clone(), self.session.clone(), self.turn.clone());
        runtime.spawn(async move {
            if let Err(error) = shared.leases.release_slot(&session, turn.as_str()).await {
                // The next claim drops it once this replica's lease on the session is gone.
                tracing::warn!(%session, %error, "could not release a running-turn slot");
            }
            shared.released.notify_waiters();
        });
    }
}

/// A place in the queue; waiting on it yields a slot.
#[derive(Debug)]
pub(crate) struct QueuedTurn {
    /// 1-based position when the turn joined the queue.
    pub position: u32,
    place: Place,
}

#[derive(Debug)]
enum Place {
    Local { semaphore: Arc<Semaphore>, waiting: Arc<AtomicU32> },
    Shared(Option<SharedSlot>),
}

impl TurnSlots {
    /// `max` turns at once; 0 means no limit. With `leases` the limit holds for every replica
    /// sharing their database.
    pub fn new(max: u32, leases: Option<Arc<dyn SessionLeases>>) -> Self {
        let permits = if max == 0 { Semaphore::MAX_PERMITS } else { max as usize };
        let shared = match (leases, max) {
            (Some(leases), 1..) => Some(Shared { leases, max, released: Arc::default() }),
            _ => None,
        };
        TurnSlots { semaphore: Arc::new(Semaphore::new(permits)), waiting: Arc::new(AtomicU32::new(0)), shared }
    }

    /// A slot now, or a place in the queue.
    pub async fn admit(&self, session: &SessionId, turn: &TurnId) -> Admitted {
        if let Some(shared) = &self.shared {
            let slot = SharedSlot { shared: shared.clone(), session: session.clone(), turn: turn.clone() };
            return Ok(match shared.leases.claim_slot(session, turn.as_str(), shared.max).await? {
                SlotClaim::Running => Ok(Slot::Shared { _slot: slot }),
                SlotClaim::Queued { position } => Err(QueuedTurn { position, place: Place::Shared(Some(slot)) }),
            });
        }
        Ok(match self.semaphore.clone().try_acquire_owned() {
            Ok(permit) => Ok(Slot::Local { _permit: permit }),
            Err(_) => {
                let position = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
                let place = Place::Local { semaphore: self.semaphore.clone(), waiting: self.waiting.clone() };
                Err(QueuedTurn { position, place })
            }
        })
    }
}

impl QueuedTurn {
    /// Waits for a slot (first come, first served). Dropping the future leaves the queue.
    pub async fn wait(mut self) -> Option<Slot> {
        match &mut self.place {
            Place::Local { semaphore, .. } => {
                semaphore.clone().acquire_owned().await.ok().map(|permit| Slot::Local { _permit: permit })
            }
            Place::Shared(slot) => {
                let slot = slot.take()?;
                let notify = slot.shared.released.clone();
                let mut signal = slot.shared.leases.slot_released();
                let mut poll = if signal.is_some() { SHARED_POLL } else { SHARED_POLL_UNSIGNALLED };
                loop {
                    let released = notify.notified();
                    // Seen before asking: a release after the claim below wakes the wait.
                    if let Some(signal) = &mut signal {
                        signal.borrow_and_update();
                    }
                    match slot.shared.leases.claim_slot(&slot.session, slot.turn.as_str(), slot.shared.max).await {
                        Ok(SlotClaim::Running) => return Some(Slot::Shared { _slot: slot }),
                        Ok(SlotClaim::Queued { .. }) => {}
                        Err(error) => tracing::warn!(session = %slot.session, %error, "could not ask for a turn slot"),
                    }
                    tokio::select! {
                        () = released => {}
                        open = changed(&mut signal) => if !open {
                            // The store dropped its signal: poll from now on.
                            signal = None;
                            poll = SHARED_POLL_UNSIGNALLED;
                        },
                        () = tokio::time::sleep(poll) => {}
                    }
                }
            }
        }
    }
}

/// Resolves when `signal` changes (`true`) or its sender is gone (`false`); never without one.
async fn changed(signal: &mut Option<watch::Receiver<u64>>) -> bool {
    match signal {
        Some(signal) => signal.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

impl Drop for QueuedTurn {
    fn drop(&mut self) {
        if let Place::Local { waiting, .. } = &self.place {
            waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_house_queues_in_order() {
        let slots = TurnSlots::new(1, None);
        let (session, turn) = (SessionId::generate(), TurnId::generate());
        let first = slots.admit(&session, &turn).await.unwrap().unwrap();
        let second = slots.admit(&session, &turn).await.unwrap().unwrap_err();
        let third = slots.admit(&session, &turn).await.unwrap().unwrap_err();
        assert_eq!((second.position, third.position), (1, 2));
        drop(first);
        let permit = second.wait().await.unwrap();
        drop(permit);
        assert!(third.wait().await.is_some());
        assert_eq!(slots.waiting.load(Ordering::SeqCst), 0);
    }
}
