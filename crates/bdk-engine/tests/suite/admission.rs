//! `max_running_turns`: a turn that finds every slot taken records `turn.queued` with its
//! position, then runs when a slot frees.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bdk_engine::{Admission, Engine, Trajectory};
use bdk_model::ScriptedProvider;
use bdk_protocol::EventData;
use bdk_protocol::event::SessionMode;

use super::support::*;

#[tokio::test]
async fn a_turn_over_the_limit_queues_then_runs() {
    let mut config = config();
    config.max_running_turns = 1;
    // A's answer is held until B is queued behind it, so the order never depends on timing.
    let (fx, gate) = Fixture::gated(config, ScriptedProvider::new(vec![say("first"), say("second")]), 1).await;
    let a = fx.start("a").await;
    in_step(&fx.engine, &a.session_id, 1).await;
    let b = fx.start("b").await;
    until(&fx.engine, &b.session_id, |e| e.event_type() == "turn.queued").await;
    gate.open();

    let b_events = settled(&fx.engine, &b.session_id, 1).await;
    let b_shape: Vec<&str> = shape(&b_events).into_iter().filter(|t| *t != "agent.bound").collect();
    assert_eq!(
        b_shape[..4],
        ["session.started", "message.received", "turn.queued", "turn.started"],
        "{:?}",
        types(&b_events)
    );
    let Some(EventData::TurnQueued(queued)) =
        b_events.iter().map(|e| &e.data).find(|d| matches!(d, EventData::TurnQueued(_)))
    else {
        panic!()
    };
    assert_eq!(queued.position, 1);
    assert_eq!(Trajectory::from_events(&b_events).reply.as_deref(), Some("second"));

    let a_events = settled(&fx.engine, &a.session_id, 1).await;
    assert_eq!(count(&a_events, "turn.queued"), 0);
    assert_eq!(Trajectory::from_events(&a_events).reply.as_deref(), Some("first"));
    // A ended before B began.
    let a_done = a_events.iter().find(|e| e.event_type() == "turn.completed").unwrap().at;
    let b_began = b_events.iter().find(|e| e.event_type() == "turn.started").unwrap().at;
    assert!(a_done <= b_began);
}

/// A follow-up asks for its turn's slot while its message is written; when the write is refused
/// the slot is given back. With one slot, a session started afterwards runs without queueing
/// (a slot kept by the refused follow-up would hold it in the queue for good).
#[tokio::test]
async fn a_slot_claimed_beside_a_refused_message_is_given_back() {
    let fx = Fixture::echo().await;
    let mut stores = if on_postgres() { fx.backend.stores() } else { fx.fs.stores() };
    let refuse = Arc::new(AtomicBool::new(false));
    stores.events = Arc::new(RefusingMessages { inner: stores.events.clone(), refuse: refuse.clone() });
    let mut config = config();
    config.max_running_turns = 1;
    let engine = Engine::new(config, stores, Arc::new(ScriptedProvider::echo()), fx.tools.clone());

    let a = within(engine.start_session(start("a", SessionMode::Chat))).await.unwrap();
    settled(&engine, &a.session_id, 1).await;
    refuse.store(true, Ordering::SeqCst);
    let refused =
        within(engine.follow_up(&a.session_id, follow("again", &a.continuation_token, Admission::Preempt))).await;
    assert!(refused.is_err(), "{refused:?}");
    refuse.store(false, Ordering::SeqCst);

    let b = within(engine.start_session(start("b", SessionMode::Chat))).await.unwrap();
    let b_events = settled(&engine, &b.session_id, 1).await;
    assert_eq!(count(&b_events, "turn.queued"), 0, "{:?}", types(&b_events));
    assert_eq!(Trajectory::from_events(&b_events).reply.as_deref(), Some("b"));
}
