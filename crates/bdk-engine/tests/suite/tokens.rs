//! Continuation tokens and ownership: racing follow-ups on one token, stale tokens, stable
//! channel tokens, and the owner check on every per-session call.

use std::collections::HashSet;

use bdk_engine::{Admission, EngineError, ListScope, Principal};
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_racing_follow_ups_on_one_token_admit_exactly_one() {
    let fx = Fixture::echo();
    let started = fx.start("hello").await;
    settled(&fx.engine, &started.session_id, 1).await;

    let mut tasks = Vec::new();
    for i in 0..50 {
        let engine = fx.engine.clone();
        let id = started.session_id.clone();
        let token = started.continuation_token.clone();
        tasks.push(tokio::spawn(async move {
            engine.follow_up(&id, follow(&format!("racer {i}"), &token, Admission::Preempt)).await
        }));
    }
    let mut accepted = Vec::new();
    let mut stale = 0;
    for task in tasks {
        match within(task).await.unwrap() {
            Ok(ok) => accepted.push(ok),
            Err(EngineError::StaleToken(_)) => stale += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(accepted.len(), 1);
    assert_eq!(stale, 49);

    let events = settled(&fx.engine, &started.session_id, 2).await;
    assert_eq!(count(&events, "message.received"), 2);
    assert_eq!(count(&events, "turn.started"), 2);
    let turns: HashSet<_> =
        events.iter().filter(|e| e.event_type() == "turn.started").map(|e| e.turn_id.clone()).collect();
    assert_eq!(turns.len(), 2, "no turn runs twice");
    // Let anything stray land, then check nothing else ran.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let all = within(fx.engine.events(&started.session_id, &alice(), 0)).await.unwrap();
    assert_eq!(all.len(), events.len());

    // The winner's token is the only valid one now.
    let next = &accepted[0].continuation_token;
    let refused = within(
        fx.engine.follow_up(&started.session_id, follow("late", &started.continuation_token, Admission::Preempt)),
    )
    .await;
    assert!(matches!(refused, Err(EngineError::StaleToken(_))));
    within(fx.engine.follow_up(&started.session_id, follow("next", next, Admission::Preempt))).await.unwrap();
    let record = within(fx.engine.session(&started.session_id, &alice())).await.unwrap();
    assert_ne!(record.continuation_token.as_deref(), Some(next.as_str()), "rotated again and persisted");
}

#[tokio::test]
async fn channel_tokens_are_stable() {
    let fx = Fixture::echo();
    let mut request = start("hi", SessionMode::Chat);
    request.channel = "github".into();
    request.continuation_key = Some("pr:acme/app#1".into());
    let started = within(fx.engine.start_session(request)).await.unwrap();
    assert_eq!(started.continuation_token, "github:pr:acme/app#1");
    settled(&fx.engine, &started.session_id, 1).await;
    let accepted =
        within(fx.engine.follow_up(&started.session_id, follow("again", "github:pr:acme/app#1", Admission::Preempt)))
            .await
            .unwrap();
    assert_eq!(accepted.continuation_token, "github:pr:acme/app#1");
}

#[tokio::test]
async fn only_the_owner_may_touch_a_session() {
    let fx = Fixture::echo();
    let started = fx.start("mine").await;
    settled(&fx.engine, &started.session_id, 1).await;
    let id = &started.session_id;
    let bob = Principal::new("bob");
    let forbidden = |r: Result<(), EngineError>| assert!(matches!(r, Err(EngineError::Forbidden(_))), "{r:?}");

    let mut wrong = follow("x", &started.continuation_token, Admission::Preempt);
    wrong.principal = bob.clone();
    forbidden(within(fx.engine.follow_up(id, wrong)).await.map(drop));
    forbidden(within(fx.engine.stop(id, &bob)).await);
    forbidden(within(fx.engine.events(id, &bob, 0)).await.map(drop));
    forbidden(within(fx.engine.follow(id, &bob, 0)).await.map(drop));
    forbidden(within(fx.engine.cost(id, &bob)).await.map(drop));
    forbidden(within(fx.engine.session(id, &bob)).await.map(drop));

    assert!(within(fx.engine.list(ListScope::Owner(bob))).await.unwrap().is_empty());
    let mine = within(fx.engine.list(ListScope::Owner(alice()))).await.unwrap();
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].session_id, *id);
    assert_eq!(mine[0].status, "waiting");
    assert_eq!(within(fx.engine.list(ListScope::All)).await.unwrap().len(), 1);

    // A forbidden follow-up did not use up the token.
    within(fx.engine.follow_up(id, follow("ok", &started.continuation_token, Admission::Preempt))).await.unwrap();
}

#[tokio::test]
async fn unknown_sessions_are_not_found() {
    let fx = Fixture::echo();
    let id = SessionId::generate();
    let missing = within(fx.engine.follow_up(&id, follow("x", "http:nope", Admission::Preempt))).await;
    assert!(matches!(missing, Err(EngineError::SessionNotFound(_))), "{missing:?}");
    let missing = within(fx.engine.stop(&id, &alice())).await;
    assert!(matches!(missing, Err(EngineError::SessionNotFound(_))), "{missing:?}");
    let missing = within(fx.engine.cost(&id, &alice())).await;
    assert!(matches!(missing, Err(EngineError::SessionNotFound(_))), "{missing:?}");
    let empty = within(fx.engine.start_session(start("  ", SessionMode::Chat))).await;
    assert!(matches!(empty, Err(EngineError::InvalidRequest(_))), "{empty:?}");
}
