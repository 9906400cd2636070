//! `max_running_turns`: a fair semaphore of turn slots shared by every session of the agent. A
//! turn that finds no free slot learns its queue position first (for `turn.queued`), then waits
//! its turn. Preempt and coalesce (per-session admission) live in the actor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The agent's turn slots.
#[derive(Debug)]
pub(crate) struct TurnSlots {
    semaphore: Arc<Semaphore>,
    waiting: Arc<AtomicU32>,
}

/// A place in the queue; waiting on it yields a slot.
#[derive(Debug)]
pub(crate) struct QueuedTurn {
    /// 1-based position when the turn joined the queue.
    pub position: u32,
    semaphore: Arc<Semaphore>,
    waiting: Arc<AtomicU32>,
}

impl TurnSlots {
    /// `max` turns at once; 0 means no limit.
    pub fn new(max: u32) -> Self {
        let permits = if max == 0 { Semaphore::MAX_PERMITS } else { max as usize };
        TurnSlots { semaphore: Arc::new(Semaphore::new(permits)), waiting: Arc::new(AtomicU32::new(0)) }
    }

    /// A slot now, or a place in the queue.
    pub fn admit(&self) -> Result<OwnedSemaphorePermit, QueuedTurn> {
        match self.semaphore.clone().try_acquire_owned() {
            Ok(permit) => Ok(permit),
            Err(_) => {
                let position = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
                Err(QueuedTurn { position, semaphore: self.semaphore.clone(), waiting: self.waiting.clone() })
            }
        }
    }
}

impl QueuedTurn {
    /// Waits for a slot (the semaphore is FIFO). Dropping the future leaves the queue.
    pub async fn wait(self) -> Option<OwnedSemaphorePermit> {
        self.semaphore.clone().acquire_owned().await.ok()
    }
}

impl Drop for QueuedTurn {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_house_queues_in_order() {
        let slots = TurnSlots::new(1);
        let first = slots.admit().unwrap();
        let second = slots.admit().unwrap_err();
        let third = slots.admit().unwrap_err();
        assert_eq!((second.position, third.position), (1, 2));
        drop(first);
        let permit = second.wait().await.unwrap();
        drop(permit);
        assert!(third.wait().await.is_some());
        assert_eq!(slots.waiting.load(Ordering::SeqCst), 0);
    }
}
