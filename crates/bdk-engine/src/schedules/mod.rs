//! Schedules: deploy-time cron (`schedules/<id>.md` and `.toml`). This module owns when a
//! schedule is due (the cron loop, the missed-firing policy) and dispatching one by hand; what
//! a firing does is `fire.rs`, cron arithmetic is `cron.rs`. It depends on the engine core and
//! the timed-work store; the core knows nothing of it.
//!
//! Exactly once: every firing is claimed in the [`TimedStore`] under `(schedule, due time)`
//! before it starts, so a second claim (a restart, a retried request) does not run it again, and
//! a claim still open at start-up is finished (`recover`), never dropped. Recovery runs beside
//! the first requests (the server answers while it starts), so it picks up only the claims this
//! process does not hold: a dispatch claimed a moment earlier is never started a second time.

mod cron;
mod fire;
mod report;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bdk_project::model::{ScheduleAction, ScheduleDef};
use bdk_protocol::SessionId;
use bdk_store::{FiringRecord, TimedKind, TimedStore};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use cron::{CronExpr, missed};
pub use fire::{CHANNEL, principal};
pub use report::{annotate, firing_info, last_firing};

use crate::api::Engine;
use crate::clock::Clock;
use crate::timed_error::TimedError;

/// How late a firing missed while the process was down may still run (once) at start-up.
pub const DEFAULT_MISSED_GRACE: Duration = Duration::from_secs(60 * 60);

/// What started a firing (recorded on its row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The cron loop, on time.
    Cron,
    /// Start-up, for the latest occurrence missed while the process was down.
    Missed,
    /// `POST /v1/dev/schedules/:id`.
    Dev,
    /// `POST /v1/internal/schedules/:id/fire` (an external scheduler).
    Internal,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Cron => "cron",
            Trigger::Missed => "missed",
            Trigger::Dev => "dev",
            Trigger::Internal => "internal",
        }
    }
}

/// Settings of the schedule clock.
#[derive(Debug, Clone)]
pub struct ScheduleOptions {
    /// See [`DEFAULT_MISSED_GRACE`].
    pub missed_grace: Duration,
}

impl Default for ScheduleOptions {
    fn default() -> Self {
        Self { missed_grace: DEFAULT_MISSED_GRACE }
    }
}

/// What a dispatch returns: `{scheduleId, sessionIds}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dispatched {
    pub schedule_id: String,
    pub session_ids: Vec<SessionId>,
}

/// One schedule's state for `info` and `bdk schedules`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    pub id: String,
    pub cron: String,
    /// `prompt`, `run` or `receive`.
    pub kind: &'static str,
    /// Whether this host fires it (every kind does, `receive` included).
    pub runs: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<FiringRecord>,
}

/// A schedule with its parsed cron.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    pub def: ScheduleDef,
    pub cron: CronExpr,
}

impl Schedule {
    /// Every kind fires (a `receive` one hands its message into its channel).
    fn runs(&self) -> bool {
        true
    }

    fn kind(&self) -> &'static str {
        match self.def.action {
            ScheduleAction::Prompt(_) => "prompt",
            ScheduleAction::Run(_) => "run",
            ScheduleAction::Receive { .. } => "receive",
        }
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub engine: Engine,
    pub store: Arc<dyn TimedStore>,
    pub clock: Arc<dyn Clock>,
    pub schedules: Vec<Schedule>,
    pub options: ScheduleOptions,
    /// Ends waiters and the cron loop at shutdown.
    pub cancel: CancellationToken,
    /// Firings still running in the background.
    pub tasks: TaskTracker,
    /// The firings this process claimed (or picked up) and has not finished, by
    /// `(schedule, due)`. `recover` reads the open rows under this lock and leaves these alone.
    pub held: tokio::sync::Mutex<HashSet<(String, DateTime<Utc>)>>,
}

/// One agent's schedules. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Schedules {
    inner: Arc<Inner>,
}

impl Schedules {
    /// The schedules of `defs` (an expression that does not parse is left out; validation has
    /// already reported it).
    pub fn new(
        engine: Engine,
        store: Arc<dyn TimedStore>,
        clock: Arc<dyn Clock>,
        defs: &[ScheduleDef],
        options: ScheduleOptions,
    ) -> Self {
        // A refused firing record shows in `/v1/health` like a refused event append.
        let store = engine.core().store_health.timed(store);
        let schedules = defs
            .iter()
            .filter_map(|def| CronExpr::parse(&def.cron).ok().map(|cron| Schedule { def: def.clone(), cron }))
            .collect();
        let inner = Inner {
            engine,
            store,
            clock,
            schedules,
            options,
            cancel: CancellationToken::new(),
            tasks: TaskTracker::new(),
            held: tokio::sync::Mutex::new(HashSet::new()),
        };
        Self { inner: Arc::new(inner) }
    }

    fn find(&self, id: &str) -> Result<&Schedule, TimedError> {
        self.inner.schedules.iter().find(|s| s.def.id == id).ok_or_else(|| TimedError::UnknownSchedule(id.to_owned()))
    }

    /// Fires `id` now, by hand, through the production path: a fresh firing row, then the
    /// schedule's action. Returns once its sessions exist; they run in the background.
    pub async fn dispatch(&self, id: &str, trigger: Trigger) -> Result<Dispatched, TimedError> {
        let schedule = self.find(id)?;
        let mut due = self.inner.clock.now();
        if trigger == Trigger::Internal {
            // An external scheduler fires once per minute at most: a retry within the same
            // minute finds the claim and gets the first firing's sessions back.
            due = minute_floor(due);
        }
        loop {
            match fire::fire(&self.inner, schedule, due, trigger).await? {
                Some(dispatched) => return Ok(dispatched),
                None if trigger == Trigger::Internal => {
                    let rows = self.inner.store.firings(TimedKind::Schedule, id).await?;
                    let sessions = rows.into_iter().find(|r| r.due_at == due).map(|r| r.session_ids);
                    return Ok(Dispatched { schedule_id: id.to_owned(), session_ids: sessions.unwrap_or_default() });
                }
                // Two manual dispatches in one millisecond: the second takes the next one.
                None => due += chrono::Duration::milliseconds(1),
            }
        }
    }

    /// Finishes firings a previous process claimed and did not finish: a firing whose session
    /// was started is followed to its end (never started twice); one whose session never
    /// started is started now. Returns how many were picked up. Call after `Engine::recover`.
    /// A firing this process claimed itself (a dispatch racing start-up) is not picked up.
    pub async fn recover(&self) -> Result<usize, TimedError> {
        let open = {
            let mut held = self.inner.held.lock().await;
            let open = self.inner.store.open_firings().await?;
            let open: Vec<FiringRecord> = open
                .into_iter()
                .filter(|r| r.kind == TimedKind::Schedule && !held.contains(&(r.owner.clone(), r.due_at)))
                .collect();
            held.extend(open.iter().map(|r| (r.owner.clone(), r.due_at)));
            open
        };
        let mut picked = 0;
        for record in open {
            let Ok(schedule) = self.find(&record.owner) else {
                // The schedule was removed: close its row so it is not picked up forever.
                fire::finish(&self.inner, record, Err("the schedule no longer exists".into())).await;
                continue;
            };
            fire::resume(&self.inner, schedule, record).await?;
            picked += 1;
        }
        Ok(picked)
    }

    /// The missed-firing policy, applied once at start-up: a schedule that has fired before in
    /// this state directory, and whose latest occurrence passed unfired within the grace
    /// window, fires once now. Returns how many fired.
    pub async fn fire_missed(&self) -> Result<usize, TimedError> {
        let now = self.inner.clock.now();
        let mut fired = 0;
        for schedule in self.inner.schedules.iter().filter(|s| s.runs()) {
            let rows = self.inner.store.firings(TimedKind::Schedule, &schedule.def.id).await?;
            if rows.is_empty() {
                // Never armed here before: nothing was missed.
                continue;
            }
            let late = missed(&schedule.cron, now, self.inner.options.missed_grace, |due| {
                rows.iter().any(|r| r.due_at == due)
            });
            if let Some(due) = late
                && fire::fire(&self.inner, schedule, due, Trigger::Missed).await?.is_some()
            {
                fired += 1;
            }
        }
        Ok(fired)
    }

    /// The cron loop: sleeps until the next occurrence of any schedule and fires every schedule
    /// due then. Runs until [`Schedules::shutdown`]. Failures are logged and recorded on the
    /// firing; the loop goes on.
    pub async fn run(&self) {
        let inner = &self.inner;
        loop {
            let now = inner.clock.now();
            let due = inner.schedules.iter().filter(|s| s.runs()).filter_map(|s| s.cron.next_after(now)).min();
            let Some(due) = due else {
                inner.cancel.cancelled().await;
                return;
            };
            tokio::select! {
                () = inner.cancel.cancelled() => return,
                () = inner.clock.sleep_until(due) => {}
            }
            for schedule in inner.schedules.iter().filter(|s| s.runs() && s.cron.next_after(now) == Some(due)) {
                if let Err(error) = fire::fire(inner, schedule, due, Trigger::Cron).await {
                    tracing::error!(schedule = %schedule.def.id, %error, "schedule firing failed");
                }
            }
        }
    }

    /// The store firings are recorded in.
    pub fn store(&self) -> &Arc<dyn TimedStore> {
        &self.inner.store
    }

    /// Each schedule's next firing (from the clock's now) and its latest recorded firing.
    pub async fn status(&self) -> Result<Vec<ScheduleStatus>, TimedError> {
        let now = self.inner.clock.now();
        let mut out = Vec::new();
        for schedule in &self.inner.schedules {
            let last = last_firing(self.inner.store.as_ref(), &schedule.def.id).await?;
            out.push(ScheduleStatus {
                id: schedule.def.id.clone(),
                cron: schedule.def.cron.clone(),
                kind: schedule.kind(),
                runs: schedule.runs(),
                next_fire_at: schedule.runs().then(|| schedule.cron.next_after(now)).flatten(),
                last,
            });
        }
        Ok(out)
    }

    /// Stops the cron loop and the waiters; firings still open stay claimed for the next start.
    pub fn shutdown(&self) {
        self.inner.cancel.cancel();
        self.inner.tasks.close();
    }

    /// Waits until every background firing has settled (tests and shutdown).
    pub async fn settled(&self) {
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.tasks.reopen();
    }
}

/// `t` with seconds and below cut off.
fn minute_floor(t: DateTime<Utc>) -> DateTime<Utc> {
    let secs = t.timestamp();
    DateTime::from_timestamp(secs - secs.rem_euclid(60), 0).unwrap_or(t)
}
