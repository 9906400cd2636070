//! Session lifecycle: preempt, coalesce, stop, task sessions, drain, idle actors retiring, and
//! the conversation rebuilt from the log by a restarted engine.

use std::sync::Arc;
use std::time::Duration;

use bdk_engine::{Admission, EngineError, INTERRUPTED, SHUTTING_DOWN, Trajectory};
use bdk_model::{Message, ScriptedProvider};
use bdk_protocol::EventData;
use bdk_protocol::event::{SessionMode, TurnFailStatus};

use super::support::*;

fn failures(events: &[bdk_protocol::Event]) -> Vec<(TurnFailStatus, String)> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::TurnFailed(f) => Some((f.status, f.message.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn preempt_cancels_the_running_turn_then_runs_the_new_message() {
    let fx = Fixture::new(vec![hang(), say("after")]).await;
    let started = fx.start("first").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    let accepted = within(
        fx.engine.follow_up(&started.session_id, follow("second", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    assert_ne!(accepted.continuation_token, started.continuation_token, "HTTP tokens rotate");
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(failures(&events), [(TurnFailStatus::Cancelled, INTERRUPTED.to_owned())]);
    let failed_at = types(&events).iter().position(|t| *t == "turn.failed").unwrap();
    let second_message = types(&events).iter().rposition(|t| *t == "message.received").unwrap();
    assert!(failed_at < second_message, "the old turn settles before the new message: {:?}", types(&events));
    assert_eq!(count(&events, "turn.started"), 2);
    assert_eq!(events[failed_at].turn_id.as_ref(), Some(&started.turn_id));
    let completed = events.iter().find(|e| e.event_type() == "turn.completed").unwrap();
    assert_eq!(completed.turn_id, accepted.turn_id);
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("after"));
    // The new turn saw both messages (the interrupted turn said nothing).
    assert_eq!(fx.provider.requests()[1].messages, [Message::user("first"), Message::user("second")]);
}

#[tokio::test]
async fn coalesced_messages_become_one_follow_up_turn() {
    // The first answer is held until all three messages are in, so none can land after it.
    let (fx, gate) = Fixture::gated(config(), ScriptedProvider::new(vec![say("one"), say("merged")]), 1).await;
    let started = fx.start("first").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    let mut token = started.continuation_token.clone();
    for text in ["a", "b", "c"] {
        let accepted =
            within(fx.engine.follow_up(&started.session_id, follow(text, &token, Admission::Coalesce))).await.unwrap();
        assert_eq!(accepted.turn_id, None, "coalesced into the next turn");
        token = accepted.continuation_token;
    }
    gate.open();
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "turn.started"), 2);
    assert_eq!(count(&events, "turn.completed"), 2, "the running turn was not interrupted: {:?}", types(&events));
    assert!(failures(&events).is_empty());
    let second = &fx.provider.requests()[1].messages;
    assert_eq!(
        second,
        &[
            Message::user("first"),
            Message::assistant("one"),
            Message::user("a"),
            Message::user("b"),
            Message::user("c")
        ]
    );
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("merged"));
}

#[tokio::test]
async fn stop_cancels_and_the_session_stays_followable() {
    let fx = Fixture::new(vec![hang(), say("still here")]).await;
    let started = fx.start("first").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    assert!(fx.engine.is_busy(&started.session_id));
    within(fx.engine.stop(&started.session_id, &alice())).await.unwrap();
    assert!(!fx.engine.is_busy(&started.session_id));
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(failures(&events), [(TurnFailStatus::Cancelled, INTERRUPTED.to_owned())]);
    assert_eq!(shape(&events)[shape(&events).len() - 2..], ["turn.failed", "session.waiting"]);
    // Stopping an idle session is a no-op.
    within(fx.engine.stop(&started.session_id, &alice())).await.unwrap();

    within(fx.engine.follow_up(&started.session_id, follow("again", &started.continuation_token, Admission::Preempt)))
        .await
        .unwrap();
    let events = settled(&fx.engine, &started.session_id, 2).await;
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("still here"));
}

#[tokio::test]
async fn a_task_session_completes_and_takes_no_follow_ups() {
    let fx = Fixture::new(vec![say("the result")]).await;
    let started = within(fx.engine.start_session(start("do the thing", SessionMode::Task))).await.unwrap();
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let Some(EventData::SessionCompleted(done)) = events.last().map(|e| &e.data) else {
        panic!("{:?}", types(&events))
    };
    assert_eq!(done.result.as_deref(), Some("the result"));
    let refused = within(
        fx.engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)),
    )
    .await;
    assert!(matches!(refused, Err(EngineError::NotFollowable(_))), "{refused:?}");
    let listed = within(fx.engine.list(bdk_engine::ListScope::All)).await.unwrap();
    assert_eq!(listed[0].status, "completed");
}

#[tokio::test]
async fn drain_cancels_running_turns_after_the_grace_period_and_refuses_new_ones() {
    let fx = Fixture::new(vec![hang()]).await;
    let started = fx.start("first").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    within(fx.engine.drain(Duration::from_millis(50))).await;
    // Final events are durable when drain returns.
    let events = within(fx.engine.events(&started.session_id, &alice(), 0)).await.unwrap();
    assert_eq!(failures(&events), [(TurnFailStatus::Cancelled, SHUTTING_DOWN.to_owned())]);
    assert_eq!(events.last().unwrap().event_type(), "session.waiting");
    let refused = within(fx.engine.start_session(start("new", SessionMode::Chat))).await;
    assert!(matches!(refused, Err(EngineError::Draining)), "{refused:?}");
    let refused = within(
        fx.engine.follow_up(&started.session_id, follow("more", &started.continuation_token, Admission::Preempt)),
    )
    .await;
    assert!(matches!(refused, Err(EngineError::Draining)), "{refused:?}");
}

#[tokio::test]
async fn drain_lets_short_turns_finish() {
    let fx = Fixture::new(vec![say("quick").with_delay(Duration::from_millis(50))]).await;
    let started = fx.start("first").await;
    in_step(&fx.engine, &started.session_id, 1).await;
    within(fx.engine.drain(Duration::from_secs(10))).await;
    let events = within(fx.engine.events(&started.session_id, &alice(), 0)).await.unwrap();
    assert!(failures(&events).is_empty(), "{:?}", types(&events));
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("quick"));
}

#[tokio::test]
async fn a_restarted_engine_rebuilds_the_conversation_from_the_log() {
    let fx = Fixture::new(vec![say("first answer")]).await;
    let started = fx.start("first question").await;
    settled(&fx.engine, &started.session_id, 1).await;
    within(fx.engine.drain(Duration::from_secs(5))).await;

    let provider = Arc::new(ScriptedProvider::new(vec![say("second answer")]));
    let engine = fx.restart(provider.clone());
    assert_eq!(within(engine.recover()).await.unwrap(), 0);
    within(
        engine
            .follow_up(&started.session_id, follow("second question", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    let events = settled(&engine, &started.session_id, 2).await;
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("second answer"));
    assert_eq!(
        provider.requests()[0].messages,
        [Message::user("first question"), Message::assistant("first answer"), Message::user("second question")]
    );
}

/// Waits until every actor of `fx` retired and released its log.
async fn no_open_logs(fx: &Fixture) {
    within(async {
        while fx.fs.open_logs() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn idle_actors_retire_and_come_back_on_demand() {
    if filesystem_only("idle_actors_retire_and_come_back_on_demand", "the store's open-log count") {
        return;
    }
    let fx = Fixture::echo().await;
    let started = fx.start("one").await;
    settled(&fx.engine, &started.session_id, 1).await;
    // Past the idle timeout the actor retires and releases the log.
    no_open_logs(&fx).await;
    let accepted = within(
        fx.engine.follow_up(&started.session_id, follow("two", &started.continuation_token, Admission::Preempt)),
    )
    .await
    .unwrap();
    let events = settled(&fx.engine, &started.session_id, 2).await;
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("two"));
    // The rotated token was persisted: a fresh actor still knows it.
    no_open_logs(&fx).await;
    within(fx.engine.follow_up(&started.session_id, follow("three", &accepted.continuation_token, Admission::Preempt)))
        .await
        .unwrap();
    settled(&fx.engine, &started.session_id, 3).await;

    // Reading or following an idle session leaves nothing open once done.
    no_open_logs(&fx).await;
    within(fx.engine.events(&started.session_id, &alice(), 0)).await.unwrap();
    within(fx.engine.cost(&started.session_id, &alice())).await.unwrap();
    within(fx.engine.list(bdk_engine::ListScope::All)).await.unwrap();
    assert_eq!(fx.fs.open_logs(), 0);
    let mut stream = within(fx.engine.follow(&started.session_id, &alice(), 0)).await.unwrap();
    within(stream.next()).await.unwrap().unwrap();
    assert_eq!(fx.fs.open_logs(), 1, "a follower keeps the log open");
    drop(stream);
    assert_eq!(fx.fs.open_logs(), 0);
}
