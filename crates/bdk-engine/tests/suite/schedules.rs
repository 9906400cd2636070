//! Schedules against a manual clock: the cron loop fires on time and once per due time, a
//! firing is recorded before it starts and survives a restart in the middle (neither lost nor
//! doubled), the missed-firing policy fires once, dev dispatch returns the session, and a `run`
//! command that hangs is bounded by its timeout and recorded as failed. Nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use bdk_engine::clock::ManualClock;
use bdk_engine::schedules::{ScheduleOptions, Schedules, Trigger};
use bdk_engine::{Engine, TimedError};
use bdk_model::ScriptedProvider;
use bdk_project::model::{ScheduleAction, ScheduleDef};
use bdk_protocol::event::SessionMode;
use bdk_protocol::info::Source;
use bdk_store::{FiringRecord, FiringStatus, SessionStore, TimedKind, TimedStore};
use chrono::{DateTime, TimeZone as _, Utc};

use super::support::{Fixture, hang, say, within};

fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, h, m, s).unwrap()
}

fn schedule(id: &str, cron: &str, action: ScheduleAction) -> ScheduleDef {
    ScheduleDef {
        id: id.into(),
        source: Source::File,
        file: format!("bot/schedules/{id}.toml"),
        cron: cron.into(),
        description: None,
        action,
        cwd: std::env::temp_dir(),
        timeout: Duration::from_secs(300),
    }
}

fn prompt(id: &str, cron: &str) -> ScheduleDef {
    schedule(id, cron, ScheduleAction::Prompt("Summarize open incidents.".into()))
}

fn timed(fs: &Arc<dyn TimedStore>) -> Arc<dyn TimedStore> {
    fs.clone()
}

fn schedules(engine: &Engine, fs: &Arc<dyn TimedStore>, clock: &Arc<ManualClock>, defs: &[ScheduleDef]) -> Schedules {
    Schedules::new(engine.clone(), timed(fs), clock.clone(), defs, ScheduleOptions::default())
}

/// Waits until the firing rows of `id` satisfy `done`.
async fn rows_until(fs: &Arc<dyn TimedStore>, id: &str, done: impl Fn(&[FiringRecord]) -> bool) -> Vec<FiringRecord> {
    within(async {
        loop {
            let rows = fs.firings(TimedKind::Schedule, id).await.unwrap();
            if done(&rows) {
                return rows;
            }
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

fn all_done(rows: &[FiringRecord], n: usize) -> bool {
    rows.len() == n && rows.iter().all(|r| r.status != FiringStatus::Claimed)
}

/// Waits until the cron loop sleeps on the clock, so moving the clock wakes it.
async fn asleep(clock: &ManualClock) {
    within(async {
        while clock.sleepers() == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn the_cron_loop_fires_a_prompt_schedule_once_per_due_time() {
    let fx = Fixture::new(vec![say("first summary"), say("second summary")]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 30)));
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[prompt("heartbeat", "* * * * *")]);
    let looping = tokio::spawn({
        let sched = sched.clone();
        async move { sched.run().await }
    });

    asleep(&clock).await;
    assert!(fx.timed.firings(TimedKind::Schedule, "heartbeat").await.unwrap().is_empty(), "nothing before it is due");
    clock.set(at(9, 1, 0));
    let rows = rows_until(&fx.timed, "heartbeat", |r| all_done(r, 1)).await;
    assert_eq!(rows[0].due_at, at(9, 1, 0));
    assert_eq!((rows[0].status, rows[0].trigger.as_str()), (FiringStatus::Completed, "cron"));
    let owner = bdk_engine::Principal::new("schedule:heartbeat");
    let record = within(fx.engine.session(&rows[0].session_ids[0], &owner)).await.unwrap();
    assert_eq!((record.mode, record.channel.as_str()), (SessionMode::Task, "schedule"));

    // The next minute fires again, once.
    asleep(&clock).await;
    clock.set(at(9, 2, 0));
    let rows = rows_until(&fx.timed, "heartbeat", |r| all_done(r, 2)).await;
    assert_eq!(rows[1].due_at, at(9, 2, 0));
    assert_ne!(rows[0].session_ids, rows[1].session_ids);
    sched.shutdown();
    within(looping).await.unwrap();
    assert_eq!(fx.engine.list(bdk_engine::ListScope::All).await.unwrap().len(), 2);
}

#[tokio::test]
async fn dev_dispatch_returns_the_session_and_unknown_ids_are_refused() {
    let fx = Fixture::new(vec![say("done")]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 0)));
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[prompt("heartbeat", "0 9 * * 1-5")]);
    let dispatched = within(sched.dispatch("heartbeat", Trigger::Dev)).await.unwrap();
    assert_eq!(dispatched.schedule_id, "heartbeat");
    assert_eq!(dispatched.session_ids.len(), 1);
    let rows = rows_until(&fx.timed, "heartbeat", |r| all_done(r, 1)).await;
    assert_eq!((rows[0].trigger.as_str(), &rows[0].session_ids), ("dev", &dispatched.session_ids));
    let err = sched.dispatch("nope", Trigger::Dev).await.unwrap_err();
    assert!(matches!(err, TimedError::UnknownSchedule(_)), "{err}");
    assert_eq!(err.code(), "schedule_not_found");
}

#[tokio::test]
async fn an_internal_retry_within_the_minute_does_not_fire_again() {
    let fx = Fixture::new(vec![say("done"), say("never")]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 5)));
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[prompt("heartbeat", "0 9 * * *")]);
    let first = within(sched.dispatch("heartbeat", Trigger::Internal)).await.unwrap();
    clock.set(at(9, 0, 40));
    let retry = within(sched.dispatch("heartbeat", Trigger::Internal)).await.unwrap();
    assert_eq!(first, retry);
    let rows = rows_until(&fx.timed, "heartbeat", |r| all_done(r, 1)).await;
    assert_eq!(rows[0].due_at, at(9, 0, 0));
}

#[tokio::test]
async fn a_claim_whose_session_never_started_is_started_at_the_next_start() {
    let fx = Fixture::new(vec![say("recovered")]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 10)));
    // The previous process claimed the firing and died before starting its session.
    let claim = FiringRecord {
        kind: TimedKind::Schedule,
        owner: "heartbeat".into(),
        due_at: at(9, 0, 0),
        trigger: "cron".into(),
        status: FiringStatus::Claimed,
        session_ids: Vec::new(),
        claimed_at: at(9, 0, 0),
        finished_at: None,
        error: None,
    };
    assert!(fx.timed.claim_firing(claim).await.unwrap());
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[prompt("heartbeat", "0 9 * * *")]);
    assert_eq!(within(sched.recover()).await.unwrap(), 1);
    let rows = rows_until(&fx.timed, "heartbeat", |r| all_done(r, 1)).await;
    assert_eq!((rows[0].status, rows[0].session_ids.len()), (FiringStatus::Completed, 1));
    // Not fired a second time as "missed": its row exists.
    assert_eq!(within(sched.fire_missed()).await.unwrap(), 0);
    assert_eq!(fx.engine.list(bdk_engine::ListScope::All).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_restart_in_the_middle_of_a_firing_neither_loses_nor_doubles_it() {
    let fx = Fixture::new(vec![hang()]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 10)));
    let defs = [prompt("heartbeat", "0 9 * * *")];
    let sched = schedules(&fx.engine, &fx.timed, &clock, &defs);
    let dispatched = within(sched.dispatch("heartbeat", Trigger::Dev)).await.unwrap();
    let session = dispatched.session_ids[0].clone();
    // The process dies mid-firing, and just before the session id reached the row.
    sched.shutdown();
    within(fx.engine.drain(Duration::ZERO)).await;
    let mut rows = fx.timed.firings(TimedKind::Schedule, "heartbeat").await.unwrap();
    rows[0].session_ids.clear();
    rows[0].status = FiringStatus::Claimed;
    fx.timed.update_firing(rows[0].clone()).await.unwrap();

    // Restart: the engine closes the interrupted turn, the schedules pick the open row up.
    let engine = fx.restart(Arc::new(ScriptedProvider::new(vec![say("would be a double")])));
    within(engine.recover()).await.unwrap();
    let store = fx.backend.timed();
    let sched = schedules(&engine, &store, &clock, &defs);
    assert_eq!(within(sched.recover()).await.unwrap(), 1);
    let rows = rows_until(&store, "heartbeat", |r| all_done(r, 1)).await;
    assert_eq!(rows[0].session_ids, vec![session], "the session already started is followed, not restarted");
    assert_eq!(rows[0].status, FiringStatus::Failed);
    // The interrupted session ended failed (the drain closed its turn); its outcome is the
    // firing's, recorded once.
    assert!(rows[0].error.as_deref().is_some_and(|e| e.contains("shutting down")), "{:?}", rows[0].error);
    assert_eq!(engine.list(bdk_engine::ListScope::All).await.unwrap().len(), 1, "no second session");
}

#[tokio::test]
async fn a_firing_missed_while_down_fires_once_within_the_grace_window() {
    let fx = Fixture::new(vec![say("late"), say("never")]).await;
    let store = fx.backend.timed();
    // The schedule fired yesterday in this state directory.
    let yesterday = FiringRecord {
        kind: TimedKind::Schedule,
        owner: "daily".into(),
        due_at: at(9, 0, 0) - chrono::Duration::days(1),
        trigger: "cron".into(),
        status: FiringStatus::Completed,
        session_ids: Vec::new(),
        claimed_at: at(9, 0, 0) - chrono::Duration::days(1),
        finished_at: None,
        error: None,
    };
    assert!(store.claim_firing(yesterday).await.unwrap());
    let defs = [prompt("daily", "0 9 * * *"), prompt("fresh", "0 9 * * *")];
    let clock = Arc::new(ManualClock::new(at(9, 30, 0)));
    let sched = schedules(&fx.engine, &store, &clock, &defs);
    assert_eq!(within(sched.fire_missed()).await.unwrap(), 1, "only the schedule that had run here before");
    assert_eq!(within(sched.fire_missed()).await.unwrap(), 0, "once, never again");
    let rows = rows_until(&store, "daily", |r| all_done(r, 2)).await;
    assert_eq!((rows[1].due_at, rows[1].trigger.as_str()), (at(9, 0, 0), "missed"));

    // Past the grace window nothing fires.
    let later = Arc::new(ManualClock::new(at(9, 0, 0) + chrono::Duration::days(1) + chrono::Duration::hours(2)));
    let sched = schedules(&fx.engine, &store, &later, &defs);
    assert_eq!(within(sched.fire_missed()).await.unwrap(), 0);
}

#[tokio::test]
async fn a_hanging_run_command_is_bounded_by_its_timeout_and_recorded_as_failed() {
    let fx = Fixture::new(vec![]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 0)));
    let mut def =
        schedule("poll", "*/5 * * * *", ScheduleAction::Run(vec!["sh".into(), "-c".into(), "sleep 30".into()]));
    def.timeout = Duration::from_millis(300);
    let ok = schedule(
        "tick",
        "*/5 * * * *",
        ScheduleAction::Run(vec!["sh".into(), "-c".into(), "cat >/dev/null; echo '{\"ok\":true}'".into()]),
    );
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[def, ok]);
    let dispatched = within(sched.dispatch("poll", Trigger::Dev)).await.unwrap();
    assert!(dispatched.session_ids.is_empty());
    let rows = rows_until(&fx.timed, "poll", |r| all_done(r, 1)).await;
    assert_eq!(rows[0].status, FiringStatus::Failed);
    assert!(rows[0].error.as_deref().unwrap_or("").contains("timed out"), "{:?}", rows[0].error);
    within(sched.dispatch("tick", Trigger::Dev)).await.unwrap();
    let rows = rows_until(&fx.timed, "tick", |r| all_done(r, 1)).await;
    assert_eq!(rows[0].status, FiringStatus::Completed, "{:?}", rows[0].error);
}

#[tokio::test]
async fn receive_schedules_hand_their_message_into_the_channel_and_continue_one_conversation() {
    //! Guards: `receive` starts a chat session on the named channel as `schedule:<id>`, keyed
    //! `schedule:<id>`, and the next firing continues that same session.
    let fx = Fixture::new(vec![say("noted"), say("noted again")]).await;
    let clock = Arc::new(ManualClock::new(at(9, 0, 0)));
    let def = schedule("intake", "0 9 * * *", ScheduleAction::Receive { channel: "ops".into(), message: "hi".into() });
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[def]);
    let status = within(sched.status()).await.unwrap();
    assert!(status[0].runs && status[0].next_fire_at.is_some());
    let first = within(sched.dispatch("intake", Trigger::Dev)).await.unwrap();
    assert_eq!(first.session_ids.len(), 1);
    let rows = rows_until(&fx.timed, "intake", |r| all_done(r, 1)).await;
    assert_eq!(rows[0].status, FiringStatus::Completed, "{:?}", rows[0].error);
    let record =
        within(SessionStore::get(&*fx.backend.stores().sessions, &first.session_ids[0])).await.unwrap().unwrap();
    assert_eq!((record.channel.as_str(), record.principal.as_str()), ("ops", "schedule:intake"));
    assert_eq!(record.mode, SessionMode::Chat);
    assert_eq!(record.continuation_token.as_deref(), Some("ops:schedule:intake"));
    clock.set(at(9, 1, 0));
    let second = within(sched.dispatch("intake", Trigger::Dev)).await.unwrap();
    assert_eq!(second.session_ids, first.session_ids);
}

#[tokio::test]
async fn status_shows_the_next_firing_from_the_clock_and_the_last_outcome() {
    let fx = Fixture::new(vec![say("ok")]).await;
    let clock = Arc::new(ManualClock::new(at(8, 59, 0)));
    let sched = schedules(&fx.engine, &fx.timed, &clock, &[prompt("daily", "0 9 * * *")]);
    let status = within(sched.status()).await.unwrap();
    assert_eq!((status[0].next_fire_at, status[0].last.is_none()), (Some(at(9, 0, 0)), true));
    within(sched.dispatch("daily", Trigger::Dev)).await.unwrap();
    rows_until(&fx.timed, "daily", |r| all_done(r, 1)).await;
    let status = within(sched.status()).await.unwrap();
    assert_eq!(status[0].last.as_ref().map(|r| r.status), Some(FiringStatus::Completed));
}
