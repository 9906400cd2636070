//! Continuation tokens and ownership: racing follow-ups on one token, stale tokens, stable
//! channel tokens, the owner check on every per-session call, and a property test of rotation
//! over any sequence of current, earlier, foreign and tampered tokens.

use std::collections::HashSet;

use bdk_engine::{Admission, EngineError, ListScope, Principal};
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_racing_follow_ups_on_one_token_admit_exactly_one() {
    let fx = Fixture::echo().await;
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
    let fx = Fixture::echo().await;
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
    let fx = Fixture::echo().await;
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
    let fx = Fixture::echo().await;
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

/// What a generated follow-up presents.
#[derive(Debug, Clone)]
enum Presented {
    /// The session's current token.
    Current,
    /// The `n`-th token the session had (modulo how many it has had).
    Earlier(usize),
    /// A well-formed token the session never had.
    Foreign,
    /// Its current token with one character changed.
    Tampered,
}

fn presented() -> impl proptest::strategy::Strategy<Value = Presented> {
    use proptest::prelude::*;
    prop_oneof![
        3 => Just(Presented::Current),
        2 => any::<usize>().prop_map(Presented::Earlier),
        1 => Just(Presented::Foreign),
        1 => Just(Presented::Tampered),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Any sequence of follow-ups (each with the current, an earlier, a foreign or a tampered
    /// token, with preempt or coalesce admission): exactly those presenting the current token are
    /// accepted, each acceptance rotates to a token never seen before, every other one is
    /// `StaleToken` and changes nothing, and the stored record ends on the last token handed out.
    #[test]
    fn only_the_current_token_is_ever_accepted(
        ops in proptest::collection::vec((presented(), proptest::prelude::any::<bool>()), 1..10),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let fx = Fixture::echo().await;
            let started = fx.start("hello").await;
            let id = started.session_id.clone();
            let mut seen = vec![started.continuation_token.clone()];
            let mut accepted = 0usize;
            for (i, (presented, preempt)) in ops.into_iter().enumerate() {
                let current = seen.last().unwrap().clone();
                let token = match presented {
                    Presented::Current => current.clone(),
                    Presented::Earlier(n) => seen[n % seen.len()].clone(),
                    Presented::Foreign => "http:00000000000000000000000000000000".to_owned(),
                    Presented::Tampered => {
                        let mut t = current.clone();
                        let last = t.pop().unwrap();
                        t.push(if last == '0' { '1' } else { '0' });
                        t
                    }
                };
                let admission = if preempt { Admission::Preempt } else { Admission::Coalesce };
                let outcome = within(fx.engine.follow_up(&id, follow(&format!("m{i}"), &token, admission))).await;
                if token == current {
                    let ok = outcome.unwrap_or_else(|e| panic!("the current token was refused: {e:?}"));
                    assert!(!seen.contains(&ok.continuation_token), "a rotated token is new");
                    seen.push(ok.continuation_token);
                    accepted += 1;
                } else {
                    assert!(matches!(outcome, Err(EngineError::StaleToken(_))), "{outcome:?}");
                }
            }
            let record = within(fx.engine.session(&id, &alice())).await.unwrap();
            assert_eq!(record.continuation_token.as_deref(), seen.last().map(String::as_str));
            let events = within(fx.engine.events(&id, &alice(), 0)).await.unwrap();
            assert_eq!(count(&events, "message.received"), 1 + accepted);
        });
    }
}
