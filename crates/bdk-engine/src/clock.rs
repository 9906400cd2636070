//! The clock timed work reads and sleeps on: the system clock in production, a manual one in
//! tests, so cron evaluation, missed-firing policy and reminder due times are tested without
//! sleeping. Owns nothing else.

use std::fmt;
use std::sync::Mutex;

use bdk_store::BoxFuture;
use chrono::{DateTime, Utc};
use tokio::sync::watch;

/// Wall-clock time in UTC and a way to wait for an instant.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> DateTime<Utc>;

    /// Resolves once `now() >= at` (at once when it already is).
    fn sleep_until(&self, at: DateTime<Utc>) -> BoxFuture<'static, ()>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            // Re-check after each sleep: the wall clock may have been adjusted meanwhile.
            loop {
                let left = at - Utc::now();
                let Ok(left) = left.to_std() else { return };
                if left.is_zero() {
                    return;
                }
                tokio::time::sleep(left).await;
            }
        })
    }
}

/// A clock that moves only when told to. Sleepers wake when it reaches their instant.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
    tick: watch::Sender<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self { now: Mutex::new(start), tick: watch::Sender::new(start) }
    }

    /// Moves the clock to `at` (never backwards) and wakes whoever is due.
    pub fn set(&self, at: DateTime<Utc>) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        if at > *now {
            *now = at;
            self.tick.send_replace(at);
        }
    }

    /// How many sleepers are waiting on this clock (tests wait for a loop to be asleep before
    /// moving the clock).
    pub fn sleepers(&self) -> usize {
        self.tick.receiver_count()
    }

    pub fn advance(&self, by: chrono::Duration) {
        let at = self.now() + by;
        self.set(at);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let mut rx = self.tick.subscribe();
        Box::pin(async move {
            // Ends only if the clock is dropped; then nothing will ever be due.
            if rx.wait_for(|now| *now >= at).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}
