//! Start-up recovery of timed work runs beside the first requests (the server answers while it
//! starts): a dispatch whose claim is already in the store, but whose firing has not finished,
//! is this process's own work. Recovery must leave it alone: a schedule firing is not started a
//! second time, a reminder firing is not closed as "interrupted by a restart". A store wrapper
//! holds the dispatch right after its claim, so the race is the same on every run.

use std::sync::Arc;

use bdk_engine::clock::ManualClock;
use bdk_engine::reminders::{CreateReminder, Reminders};
use bdk_engine::schedules::{ScheduleOptions, Schedules, Trigger};
use bdk_project::model::{ScheduleAction, ScheduleDef};
use bdk_protocol::info::Source;
use bdk_store::{BoxFuture, FiringRecord, FiringStatus, ReminderRecord, TimedKind, TimedStore};
use chrono::{DateTime, TimeZone as _, Utc};
use tokio::sync::Notify;

use super::support::{Fixture, say, settled, within};

/// A timed store that, after a successful claim, says so and waits for `go` before returning.
#[derive(Debug)]
struct HeldClaims {
    inner: Arc<dyn TimedStore>,
    claimed: Notify,
    go: Notify,
}

impl HeldClaims {
    fn new(inner: &Arc<dyn TimedStore>) -> Arc<Self> {
        Arc::new(Self { inner: inner.clone(), claimed: Notify::new(), go: Notify::new() })
    }
}

impl TimedStore for HeldClaims {
    fn claim_firing(&self, record: FiringRecord) -> BoxFuture<'_, bdk_store::Result<bool>> {
        Box::pin(async move {
            let claimed = self.inner.claim_firing(record).await?;
            if claimed {
                self.claimed.notify_one();
                self.go.notified().await;
            }
            Ok(claimed)
        })
    }
    fn update_firing(&self, record: FiringRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.inner.update_firing(record)
    }
    fn firings<'a>(&'a self, kind: TimedKind, owner: &'a str) -> BoxFuture<'a, bdk_store::Result<Vec<FiringRecord>>> {
        self.inner.firings(kind, owner)
    }
    fn open_firings(&self) -> BoxFuture<'_, bdk_store::Result<Vec<FiringRecord>>> {
        self.inner.open_firings()
    }
    fn put_reminder(&self, record: ReminderRecord) -> BoxFuture<'_, bdk_store::Result<()>> {
        self.inner.put_reminder(record)
    }
    fn reminder<'a>(&'a self, id: &'a str) -> BoxFuture<'a, bdk_store::Result<Option<ReminderRecord>>> {
        self.inner.reminder(id)
    }
    fn reminders(&self) -> BoxFuture<'_, bdk_store::Result<Vec<ReminderRecord>>> {
        self.inner.reminders()
    }
}

fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, h, m, 0).unwrap()
}

#[tokio::test]
async fn recovery_racing_a_dev_dispatch_does_not_start_the_firing_again() {
    let fx = Fixture::new(vec![say("done"), say("a second session")]).await;
    let store = HeldClaims::new(&fx.timed);
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let def = ScheduleDef {
        id: "heartbeat".into(),
        source: Source::File,
        file: "bot/schedules/heartbeat.md".into(),
        cron: "0 9 * * 1-5".into(),
        description: None,
        action: ScheduleAction::Prompt("Pull open incidents.".into()),
        cwd: std::env::temp_dir(),
        timeout: std::time::Duration::from_secs(300),
    };
    let sched = Schedules::new(fx.engine.clone(), store.clone(), clock, &[def], ScheduleOptions::default());
    let dispatch = tokio::spawn({
        let sched = sched.clone();
        async move { sched.dispatch("heartbeat", Trigger::Dev).await }
    });
    // The dispatch's row is claimed (no session yet); start-up recovery runs now.
    within(store.claimed.notified()).await;
    assert_eq!(within(sched.recover()).await.unwrap(), 0, "the dispatch's own claim is not a leftover");
    store.go.notify_one();
    let dispatched = within(dispatch).await.unwrap().unwrap();

    let rows = within(async {
        loop {
            let rows = fx.timed.firings(TimedKind::Schedule, "heartbeat").await.unwrap();
            if rows.iter().all(|r| r.status != FiringStatus::Claimed) {
                return rows;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].status, &rows[0].session_ids), (FiringStatus::Completed, &dispatched.session_ids));
    assert_eq!(fx.engine.list(bdk_engine::ListScope::All).await.unwrap().len(), 1, "one session");
}

#[tokio::test]
async fn recovery_racing_a_reminder_dispatch_does_not_close_it_as_interrupted() {
    let fx = Fixture::new(vec![say("hello"), say("checked")]).await;
    let started = fx.start("watch my PR").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let store = HeldClaims::new(&fx.timed);
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let rem = Reminders::new(fx.engine.clone(), store.clone(), clock, &[]);
    let request =
        CreateReminder { delay: Some("2h".into()), prompt: Some("Re-check CI.".into()), ..CreateReminder::default() };
    let created = within(rem.create(&started.session_id, request)).await.unwrap();
    let dispatch = tokio::spawn({
        let (rem, id) = (rem.clone(), created.id.clone());
        async move { rem.dispatch(&id).await }
    });
    within(store.claimed.notified()).await;
    let recovering = tokio::spawn({
        let rem = rem.clone();
        async move { rem.recover().await }
    });
    store.go.notify_one();
    let row = within(dispatch).await.unwrap().unwrap();
    assert_eq!(within(recovering).await.unwrap().unwrap(), 0, "the dispatch's own claim is not a leftover");
    assert_eq!(row.status, FiringStatus::Completed, "{:?}", row.error);
    let rows = fx.timed.firings(TimedKind::Reminder, &created.id).await.unwrap();
    assert_eq!((rows.len(), rows[0].status), (1, FiringStatus::Completed), "{:?}", rows[0].error);
}
