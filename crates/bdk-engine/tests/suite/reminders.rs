//! Reminders against a manual clock: a prompt reminder survives a restart and wakes its
//! conversation once; a cancelled reminder never fires; a named handler's `followup` wakes the
//! conversation; bad input (past `at`, `every` below a second, unknown handler) is refused with a
//! code. Nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use bdk_engine::Engine;
use bdk_engine::clock::ManualClock;
use bdk_engine::reminders::{CreateReminder, Reminders};
use bdk_model::ScriptedProvider;
use bdk_project::model::ReminderDef;
use bdk_protocol::info::Source;
use bdk_protocol::{EventData, SessionId};
use bdk_store::{FiringRecord, FiringStatus, TimedKind, TimedStore};
use chrono::{DateTime, TimeZone as _, Utc};

use super::support::{Fixture, alice, say, settled, within};

fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, h, m, 0).unwrap()
}

fn reminders(
    engine: &Engine,
    fs: &Arc<dyn TimedStore>,
    clock: &Arc<ManualClock>,
    handlers: &[ReminderDef],
) -> Reminders {
    Reminders::new(engine.clone(), fs.clone(), clock.clone(), handlers)
}

fn prompt(delay: &str) -> CreateReminder {
    CreateReminder {
        purpose: Some("ci_recheck".into()),
        delay: Some(delay.into()),
        prompt: Some("Re-check CI. Only act if still failing.".into()),
        until: Some("CI is green".into()),
        ..CreateReminder::default()
    }
}

async fn rows_until(fs: &Arc<dyn TimedStore>, id: &str, done: impl Fn(&[FiringRecord]) -> bool) -> Vec<FiringRecord> {
    within(async {
        loop {
            let rows = fs.firings(TimedKind::Reminder, id).await.unwrap();
            if done(&rows) {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// The user messages the session has received, in order.
async fn messages(engine: &Engine, session: &SessionId) -> Vec<String> {
    let events = engine.events(session, &alice(), 0).await.unwrap();
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageReceived(m) => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_reminder_survives_a_restart_and_fires_once() {
    let fx = Fixture::new(vec![say("hello"), say("checked")]).await;
    let started = fx.start("watch my PR").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let created = within(reminders(&fx.engine, &fx.timed, &clock, &[]).create(&started.session_id, prompt("2h"))).await;
    let created = created.unwrap();
    assert_eq!(created.next_due_at, Some(at(11, 0)));

    // Restart: a new engine and reminders on the same state; the clock passes the due time.
    let engine = fx.restart(Arc::new(ScriptedProvider::new(vec![say("checked")])));
    within(engine.recover()).await.unwrap();
    let store = fx.backend.timed();
    let clock = Arc::new(ManualClock::new(at(11, 30)));
    let after = reminders(&engine, &store, &clock, &[]);
    assert_eq!(within(after.list(Some(&started.session_id))).await.unwrap().len(), 1, "still armed");
    let looping = tokio::spawn({
        let after = after.clone();
        async move { after.run().await }
    });
    let rows = rows_until(&store, &created.id, |r| r.len() == 1 && r[0].status != FiringStatus::Claimed).await;
    assert_eq!((rows[0].status, rows[0].due_at), (FiringStatus::Completed, at(11, 0)));
    settled(&engine, &started.session_id, 2).await;
    let said = messages(&engine, &started.session_id).await;
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[1].contains("Re-check CI") && said[1].contains("CI is green") && said[1].contains(&created.id));

    // A one-shot is done: later times fire nothing more.
    clock.set(at(15, 0));
    let listed = within(after.list(None)).await.unwrap();
    assert_eq!((listed[0].status.as_str(), listed[0].fired), ("done", 1));
    after.shutdown();
    within(looping).await.unwrap();
    assert_eq!(store.firings(TimedKind::Reminder, &created.id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_cancelled_reminder_never_fires() {
    let fx = Fixture::new(vec![say("hello"), say("woken")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let rem = reminders(&fx.engine, &fx.timed, &clock, &[]);
    let cancelled = within(rem.create(&started.session_id, prompt("1h"))).await.unwrap();
    let sentinel = within(rem.create(&started.session_id, prompt("2h"))).await.unwrap();
    let done = within(rem.cancel(&cancelled.id, Some(&started.session_id))).await.unwrap();
    assert_eq!((done.status.as_str(), done.next_due_at), ("cancelled", None));
    let looping = tokio::spawn({
        let rem = rem.clone();
        async move { rem.run().await }
    });
    // Both due times pass; the sentinel (due later) fires, the cancelled one never does.
    clock.set(at(12, 0));
    rows_until(&fx.timed, &sentinel.id, |r| r.len() == 1 && r[0].status == FiringStatus::Completed).await;
    assert!(fx.timed.firings(TimedKind::Reminder, &cancelled.id).await.unwrap().is_empty());
    let err = within(rem.dispatch(&cancelled.id)).await.unwrap_err();
    assert_eq!(err.code(), "reminder_not_active");
    // Another session cannot cancel (or see) it.
    let other = SessionId::generate();
    assert_eq!(rem.cancel(&sentinel.id, Some(&other)).await.unwrap_err().code(), "reminder_not_found");
    rem.shutdown();
    within(looping).await.unwrap();
}

#[tokio::test]
async fn a_named_handler_runs_and_its_followup_wakes_the_conversation() {
    let fx = Fixture::new(vec![say("hello"), say("on it")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let handler = ReminderDef {
        name: "ci_recheck".into(),
        source: Source::File,
        file: "bot/reminders/ci_recheck.toml".into(),
        description: None,
        command: vec![
            "sh".into(),
            "-c".into(),
            r#"cat >/dev/null; echo '{"followup": "CI for PR 42 changed"}'"#.into(),
        ],
        timeout: Duration::from_secs(10),
        cwd: std::env::temp_dir(),
    };
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let rem = reminders(&fx.engine, &fx.timed, &clock, &[handler]);
    let request = CreateReminder {
        every: Some("30m".into()),
        handler: Some("ci_recheck".into()),
        args: serde_json::json!({"prUrl": "https://example.invalid/pr/42"}),
        ..CreateReminder::default()
    };
    let created = within(rem.create(&started.session_id, request)).await.unwrap();
    let row = within(rem.dispatch(&created.id)).await.unwrap();
    assert_eq!((row.status, row.trigger.as_str()), (FiringStatus::Completed, "dev"), "{:?}", row.error);
    settled(&fx.engine, &started.session_id, 2).await;
    let said = messages(&fx.engine, &started.session_id).await;
    assert_eq!(said.last().map(String::as_str), Some("CI for PR 42 changed"));
    // A dev dispatch leaves the cadence alone.
    assert_eq!(within(rem.list(None)).await.unwrap()[0].next_due_at, Some(at(9, 30)));
}

#[tokio::test]
async fn a_named_reminder_survives_a_restart_and_its_handler_runs_once_with_its_args() {
    //! Guards: a named-handler reminder is found again by name after a restart, its due time
    //! fires once, the handler gets its JSON args on stdin, and its `followup` wakes the
    //! conversation.
    let fx = Fixture::new(vec![say("hello")]).await;
    let started = fx.start("watch my PR").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let out = fx.dir.path().join("handler-runs");
    // Appends its stdin (one JSON line per run) to `out`, then asks for a follow-up.
    let script = r#"cat >> "$0"; echo '{"followup": "CI for PR 42 changed"}'"#;
    let handler = ReminderDef {
        name: "ci_recheck".into(),
        source: Source::File,
        file: "bot/reminders/ci_recheck.toml".into(),
        description: None,
        command: vec!["sh".into(), "-c".into(), script.into(), out.to_string_lossy().into_owned()],
        timeout: Duration::from_secs(10),
        cwd: std::env::temp_dir(),
    };
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let request = CreateReminder {
        purpose: Some("ci_recheck".into()),
        delay: Some("2h".into()),
        handler: Some("ci_recheck".into()),
        args: serde_json::json!({"prUrl": "https://example.invalid/pr/42"}),
        ..CreateReminder::default()
    };
    let rem = reminders(&fx.engine, &fx.timed, &clock, std::slice::from_ref(&handler));
    let created = within(rem.create(&started.session_id, request)).await.unwrap();
    assert_eq!(created.next_due_at, Some(at(11, 0)));

    // Restart past the due time: the handler is found by name in the new process.
    let engine = fx.restart(Arc::new(ScriptedProvider::new(vec![say("on it")])));
    within(engine.recover()).await.unwrap();
    let store = fx.backend.timed();
    let clock = Arc::new(ManualClock::new(at(11, 30)));
    let after = reminders(&engine, &store, &clock, &[handler]);
    let looping = tokio::spawn({
        let after = after.clone();
        async move { after.run().await }
    });
    let rows = rows_until(&store, &created.id, |r| r.len() == 1 && r[0].status != FiringStatus::Claimed).await;
    assert_eq!((rows[0].status, rows[0].due_at), (FiringStatus::Completed, at(11, 0)), "{:?}", rows[0].error);
    settled(&engine, &started.session_id, 2).await;
    assert_eq!(messages(&engine, &started.session_id).await.last().map(String::as_str), Some("CI for PR 42 changed"));
    after.shutdown();
    within(looping).await.unwrap();

    let runs = std::fs::read_to_string(&out).unwrap();
    let runs: Vec<serde_json::Value> =
        runs.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(runs.len(), 1, "one run for one due time: {runs:?}");
    let input = &runs[0]["input"];
    assert_eq!(input["args"]["prUrl"], serde_json::json!("https://example.invalid/pr/42"), "{input}");
    assert_eq!(input["reminderId"], serde_json::json!(created.id), "{input}");
    assert_eq!(input["purpose"], serde_json::json!("ci_recheck"), "{input}");
    let listed = within(after.list(None)).await.unwrap();
    assert_eq!((listed[0].status.as_str(), listed[0].fired), ("done", 1));
}

#[tokio::test]
async fn bad_reminders_are_refused_with_a_code() {
    let fx = Fixture::new(vec![say("hello")]).await;
    let started = fx.start("hi").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let clock = Arc::new(ManualClock::new(at(9, 0)));
    let rem = reminders(&fx.engine, &fx.timed, &clock, &[]);
    let refuse = |request: CreateReminder| {
        let rem = rem.clone();
        let session = started.session_id.clone();
        async move { rem.create(&session, request).await.unwrap_err() }
    };
    let past =
        CreateReminder { at: Some("2026-03-02T08:00:00Z".into()), prompt: Some("x".into()), ..Default::default() };
    let err = refuse(past).await;
    assert_eq!(err.code(), "invalid_reminder");
    assert!(err.to_string().contains("in the past"), "{err}");
    let fast = CreateReminder { every: Some("500ms".into()), prompt: Some("x".into()), ..Default::default() };
    assert!(refuse(fast).await.to_string().contains("at least one second"));
    let unknown = CreateReminder { delay: Some("1h".into()), handler: Some("nope".into()), ..Default::default() };
    assert_eq!(refuse(unknown).await.code(), "unknown_handler");
    let two = CreateReminder {
        delay: Some("1h".into()),
        every: Some("1h".into()),
        prompt: Some("x".into()),
        ..Default::default()
    };
    assert_eq!(refuse(two).await.code(), "invalid_reminder");
    let neither = CreateReminder { delay: Some("1h".into()), ..Default::default() };
    assert_eq!(refuse(neither).await.code(), "invalid_reminder");
    let nobody = rem.create(&SessionId::generate(), prompt("1h")).await.unwrap_err();
    assert_eq!(nobody.code(), "session_not_found");
    assert!(within(rem.list(None)).await.unwrap().is_empty());
}
