//! Restart recovery: a turn left open by a dead process is closed with `turn.failed` saying the
//! host restarted, the session waits (chat) or fails (task), recovery is idempotent, and a
//! follow-up works afterwards.

use bdk_engine::{Admission, RESTARTED, Trajectory};
use bdk_model::ScriptedProvider;
use bdk_protocol::event::{
    FailureCode, MessageReceived, SessionMode, SessionStarted, StepStarted, TextDelta, TurnFailStatus, TurnStarted,
};
use bdk_protocol::{EventData, SessionId, TurnId};
use bdk_store::{EventLog, FsStore, NewEvent, SessionRecord, SessionStore};
use std::sync::Arc;

use super::support::*;

/// Writes a session whose turn was in flight when the "process died".
async fn interrupted_session(store: &FsStore, mode: SessionMode) -> (SessionId, String) {
    let id = SessionId::generate();
    let mut record = SessionRecord::new(id.clone(), mode, "http", "alice");
    record.continuation_token = Some("http:0123".into());
    within(store.create(record)).await.unwrap();
    let turn = TurnId::generate();
    let started = SessionStarted {
        mode,
        channel: "http".into(),
        principal: "alice".into(),
        title: None,
        dry_run: None,
        as_of: None,
        purpose: None,
    };
    let events = vec![
        NewEvent::new(EventData::SessionStarted(started)),
        NewEvent::new(EventData::MessageReceived(MessageReceived { text: "hello".into(), principal: None })),
        NewEvent::in_turn(turn.clone(), EventData::TurnStarted(TurnStarted::default())),
        NewEvent::in_turn(turn.clone(), EventData::StepStarted(StepStarted { step: 0 })),
        NewEvent::in_turn(turn, EventData::MessageAppended(TextDelta { delta: "half an ans".into() })),
    ];
    within(store.append(&id, events)).await.unwrap();
    (id, "http:0123".into())
}

#[tokio::test]
async fn recovery_closes_an_interrupted_turn_and_a_follow_up_works() {
    let fx = Fixture::echo();
    let (id, token) = {
        let store = fx.store();
        let written = interrupted_session(&store, SessionMode::Chat).await;
        store.close_log(&written.0);
        written
    };
    let provider = Arc::new(ScriptedProvider::new(vec![say("back again")]));
    let engine = fx.restart(provider.clone());
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
    assert_eq!(shape(&events)[shape(&events).len() - 2..], ["turn.failed", "session.waiting"]);
    let Some(EventData::TurnFailed(failed)) = events.iter().rev().nth(1).map(|e| &e.data) else { panic!() };
    assert_eq!(failed.status, TurnFailStatus::Failed);
    assert_eq!(failed.message, RESTARTED);
    assert_eq!(failed.error, Some(FailureCode::HostRestarted));
    assert!(failed.message.contains("restarted"));
    let listed = within(engine.list(bdk_engine::ListScope::All)).await.unwrap();
    assert_eq!(listed[0].status, "waiting");

    // Idempotent.
    assert_eq!(within(engine.recover()).await.unwrap(), 0);
    assert_eq!(within(engine.events(&id, &alice(), 0)).await.unwrap().len(), events.len());

    within(engine.follow_up(&id, follow("are you there?", &token, Admission::Preempt))).await.unwrap();
    let events = settled(&engine, &id, 2).await;
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("back again"));
    // The half-written answer is part of the conversation the model sees.
    let messages = &provider.requests()[0].messages;
    assert_eq!(messages.len(), 3, "{messages:?}");
}

#[tokio::test]
async fn recovery_fails_an_interrupted_task_session() {
    let fx = Fixture::echo();
    let id = {
        let store = fx.store();
        let (id, _) = interrupted_session(&store, SessionMode::Task).await;
        store.close_log(&id);
        id
    };
    let engine = fx.restart(Arc::new(ScriptedProvider::echo()));
    assert_eq!(within(engine.recover()).await.unwrap(), 1);
    let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
    let Some(EventData::SessionFailed(failed)) = events.last().map(|e| &e.data) else { panic!("{:?}", types(&events)) };
    assert_eq!(failed.message, RESTARTED);
    assert_eq!(failed.error, Some(FailureCode::HostRestarted));
}
