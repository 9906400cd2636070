//! Approvals: a call whose tool needs approval parks (`action.approval_requested`, the turn keeps
//! running) until the owner approves it (it runs) or denies it (the model reads the denial);
//! several parked calls resolve independently; stopping the turn cancels a parked call; a
//! parked call and its turn survive a restart (SIGKILL-like or a drain) and are decided after
//! it; a parked call recovery cannot restore expires deterministically.

use bdk_engine::{Admission, DENIED, EXPIRED, EngineError, ListScope, RESTARTED};
use bdk_model::{Message, ScriptStep};
use bdk_protocol::EventData;
use bdk_protocol::event::{ApprovalDecision, StepStarted, TurnFailStatus};
use bdk_store::{FsStore, NewEvent};
use serde_json::json;

use super::support::*;
use super::tool_project::*;

fn promote_then(text: &str) -> Vec<ScriptStep> {
    vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})), say(text)]
}

#[tokio::test]
async fn a_parked_call_waits_for_approval_then_runs() {
    let fx = ToolFixture::standard(promote_then("Promoted.")).await;
    let started = fx.chat("promote it").await;
    let id = &started.session_id;
    let events = parked(&fx.engine, id, 1).await;
    let kinds = shape(&events);
    assert_eq!(kinds[kinds.len() - 3..], ["step.completed", "actions.requested", "action.approval_requested"]);
    let (call, _) = requested_calls(&events).remove(0);

    // Parked: listed, the turn still running, the body not run.
    let pending = within(fx.engine.approvals(id, &alice())).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].call_id, call);
    assert_eq!(pending[0].tool_name, "promote");
    assert_eq!(pending[0].input, json!({"env": "prod"}));
    assert_eq!(pending[0].turn_id, started.turn_id);
    assert!(fx.engine.is_busy(id));
    assert_eq!(within(fx.engine.list(ListScope::All)).await.unwrap()[0].status, "running");
    assert!(!fx.bot().join("promoted.marker").exists());

    let resolved = within(fx.engine.resolve_approval(id, &call, ApprovalDecision::Approve, &alice())).await.unwrap();
    assert_eq!(resolved.call_id, call);
    assert!(within(fx.engine.approvals(id, &alice())).await.unwrap().is_empty());

    let events = settled(&fx.engine, id, 1).await;
    let shape = shape(&events);
    let at = shape.iter().position(|t| *t == "action.approval_requested").unwrap();
    assert_eq!(shape[at..at + 3], ["action.approval_requested", "action.approval_resolved", "action.result"]);
    assert_eq!(shape[shape.len() - 2..], ["turn.completed", "session.waiting"]);
    let resolution = resolution_of(&events, &call).unwrap();
    assert_eq!(resolution.decision, ApprovalDecision::Approve);
    assert_eq!(resolution.principal.as_deref(), Some("alice"));
    let result = result_of(&events, &call);
    assert!(!result.is_error, "{result:?}");
    assert_eq!(result.result, json!({"promoted": true}));
    assert!(fx.bot().join("promoted.marker").exists());

    // Decided once: a second answer finds nothing parked.
    let again = within(fx.engine.resolve_approval(id, &call, ApprovalDecision::Deny, &alice())).await;
    assert!(matches!(again, Err(EngineError::ApprovalNotFound(_))), "{again:?}");
}

#[tokio::test]
async fn a_denied_call_does_not_run_and_the_model_is_told() {
    let fx = ToolFixture::standard(promote_then("Understood, not promoted.")).await;
    let started = fx.chat("promote it").await;
    let id = &started.session_id;
    let events = parked(&fx.engine, id, 1).await;
    let (call, _) = requested_calls(&events).remove(0);

    within(fx.engine.resolve_approval(id, &call, ApprovalDecision::Deny, &alice())).await.unwrap();
    let events = settled(&fx.engine, id, 1).await;
    assert_eq!(resolution_of(&events, &call).unwrap().decision, ApprovalDecision::Deny);
    let result = result_of(&events, &call);
    assert!(result.is_error);
    assert_eq!(result.result, json!(DENIED));
    assert!(!fx.bot().join("promoted.marker").exists());

    let messages = &fx.provider.requests()[1].messages;
    let Some(Message::Tool { content, is_error, .. }) = messages.last() else { panic!("{messages:?}") };
    assert_eq!(content, DENIED);
    assert!(*is_error);
}

#[tokio::test]
async fn parked_calls_of_one_step_resolve_independently() {
    let fx = ToolFixture::standard(vec![
        ScriptStep::tool_call("c1", "promote", json!({"env": "staging"}))
            .with_tool_call("c2", "lookup", json!({}))
            .with_tool_call("c3", "promote", json!({"env": "prod"})),
        say("Done."),
    ])
    .await;
    let started = fx.chat("go").await;
    let id = &started.session_id;
    let events = parked(&fx.engine, id, 2).await;
    let calls = requested_calls(&events);
    let (staging, lookup, prod) = (calls[0].0.clone(), calls[1].0.clone(), calls[2].0.clone());

    // The read ran while both promotions wait.
    let events = until(&fx.engine, id, |e| matches!(&e.data, EventData::ActionResult(r) if r.call_id == lookup)).await;
    assert_eq!(result_of(&events, &lookup).result, json!("found"));
    let pending = within(fx.engine.approvals(id, &alice())).await.unwrap();
    assert_eq!(pending.iter().map(|p| &p.call_id).collect::<Vec<_>>(), [&staging, &prod]);

    // Decided in the opposite order.
    within(fx.engine.resolve_approval(id, &prod, ApprovalDecision::Deny, &alice())).await.unwrap();
    let pending = within(fx.engine.approvals(id, &alice())).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert!(fx.engine.is_busy(id), "the turn waits for the other call");
    within(fx.engine.resolve_approval(id, &staging, ApprovalDecision::Approve, &alice())).await.unwrap();

    let events = settled(&fx.engine, id, 1).await;
    assert!(result_of(&events, &prod).is_error);
    assert_eq!(result_of(&events, &staging).result, json!({"promoted": true}));
    // The model gets all three results, in the order it asked.
    let messages = &fx.provider.requests()[1].messages;
    let results: Vec<&str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(results, [r#"{"promoted":true}"#, "found", DENIED]);
}

#[tokio::test]
async fn stopping_the_turn_cancels_a_parked_call() {
    let fx =
        ToolFixture::standard(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})), say("Back.")]).await;
    let started = fx.chat("promote it").await;
    let id = &started.session_id;
    let events = parked(&fx.engine, id, 1).await;
    let (call, _) = requested_calls(&events).remove(0);

    within(fx.engine.stop(id, &alice())).await.unwrap();
    let events = settled(&fx.engine, id, 1).await;
    let result = result_of(&events, &call);
    assert!(result.is_error);
    assert!(result.result.as_str().unwrap().contains("cancelled"), "{result:?}");
    assert!(resolution_of(&events, &call).is_none());
    let Some(EventData::TurnFailed(failed)) = events.iter().rev().nth(1).map(|e| &e.data) else { panic!() };
    assert_eq!(failed.status, TurnFailStatus::Cancelled);
    assert!(within(fx.engine.approvals(id, &alice())).await.unwrap().is_empty());
    let late = within(fx.engine.resolve_approval(id, &call, ApprovalDecision::Approve, &alice())).await;
    assert!(matches!(late, Err(EngineError::ApprovalNotFound(_))), "{late:?}");
    assert!(!fx.bot().join("promoted.marker").exists());

    // The session goes on; the model sees the cancelled call paired with its result.
    let token = started.continuation_token.clone();
    within(fx.engine.follow_up(id, follow("and now?", &token, Admission::Preempt))).await.unwrap();
    settled(&fx.engine, id, 2).await;
    let messages = &fx.provider.requests()[1].messages;
    assert!(matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 1), "{messages:?}");
    assert!(matches!(&messages[2], Message::Tool { is_error: true, .. }), "{messages:?}");
}

#[tokio::test]
async fn preempting_cancels_a_parked_call_and_draining_leaves_it_parked() {
    let fx = ToolFixture::standard(vec![
        ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})),
        say("Something else."),
        ScriptStep::tool_call("c2", "promote", json!({"env": "prod"})),
    ])
    .await;
    let started = fx.chat("promote it").await;
    let id = &started.session_id;
    let events = parked(&fx.engine, id, 1).await;
    let (first, _) = requested_calls(&events).remove(0);

    // A follow-up preempts the parked turn.
    let accepted =
        within(fx.engine.follow_up(id, follow("never mind", &started.continuation_token, Admission::Preempt)))
            .await
            .unwrap();
    let events = settled(&fx.engine, id, 1).await;
    assert!(result_of(&events, &first).result.as_str().unwrap().contains("cancelled"));
    assert!(within(fx.engine.approvals(id, &alice())).await.unwrap().is_empty());

    // A second parked call; draining past the grace leaves it parked (see
    // `draining_leaves_a_parked_turn_open_for_the_next_start`), so the turn writes nothing more.
    within(fx.engine.follow_up(id, follow("promote now", &accepted.continuation_token, Admission::Preempt)))
        .await
        .unwrap();
    let events = parked(&fx.engine, id, 2).await;
    let (second, _) = requested_calls(&events).pop().unwrap();
    within(fx.engine.drain(std::time::Duration::from_millis(50))).await;
    let events = within(fx.engine.events(id, &alice(), 0)).await.unwrap();
    assert!(events.iter().all(|e| !matches!(&e.data, EventData::ActionResult(r) if r.call_id == second)));
    assert_eq!(shape(&events).last(), Some(&"action.approval_requested"));
    assert!(!fx.bot().join("promoted.marker").exists());
}

#[tokio::test]
async fn only_the_owner_sees_and_resolves_approvals() {
    let fx = ToolFixture::standard(promote_then("ok")).await;
    let started = fx.chat("promote it").await;
    let id = &started.session_id;
    let events = parked(&fx.engine, id, 1).await;
    let (call, _) = requested_calls(&events).remove(0);
    let mallory = bdk_engine::Principal::new("mallory");
    assert!(matches!(within(fx.engine.approvals(id, &mallory)).await, Err(EngineError::Forbidden(_))));
    let denied = within(fx.engine.resolve_approval(id, &call, ApprovalDecision::Approve, &mallory)).await;
    assert!(matches!(denied, Err(EngineError::Forbidden(_))), "{denied:?}");
    let expired = within(fx.engine.resolve_approval(id, &call, ApprovalDecision::Expired, &alice())).await;
    assert!(matches!(expired, Err(EngineError::InvalidRequest(_))), "{expired:?}");
    assert_eq!(within(fx.engine.approvals(id, &alice())).await.unwrap().len(), 1, "still parked");
    within(fx.engine.stop(id, &alice())).await.unwrap();
}

/// Runs `first` on a runtime of its own and drops that runtime: every task of the engine built
/// on it dies with it, as in a SIGKILL (nothing is closed, only what was durable stays).
fn then_die<T>(first: impl std::future::Future<Output = T>) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let out = runtime.block_on(first);
    drop(runtime);
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

#[test]
fn a_parked_call_survives_a_restart_and_approving_it_completes_the_turn() {
    //! Guards: the host dies with a call parked; the next start restores the turn (no
    //! `turn.failed`, still `running`), lists the call as before, and approving it runs the tool;
    //! the same turn then completes with the model reading the result; a stream attached after the
    //! restart sees the continuation.
    if filesystem_only(
        "a_parked_call_survives_a_restart_and_approving_it_completes_the_turn",
        "it stops a runtime to simulate a crash, and a database handle dies with its runtime",
    ) {
        return;
    }
    let fx = ToolFixture::standard_on_filesystem(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"}))]);
    let (id, turn, call, requested_at) = then_die(async {
        let started = fx.chat("promote it").await;
        let events = parked(&fx.engine, &started.session_id, 1).await;
        let (call, _) = requested_calls(&events).remove(0);
        // Listed with its event's time once that event is durable (the time a restart restores).
        let at = events.last().unwrap().at;
        within(async {
            while within(fx.engine.approvals(&started.session_id, &alice())).await.unwrap()[0].requested_at != at {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
        (started.session_id, started.turn_id, call, at)
    });

    runtime().block_on(async {
        let (engine, provider) = fx.restart(vec![say("Promoted after the restart.")]);
        assert_eq!(within(engine.recover()).await.unwrap(), 0, "nothing closed");
        let before = within(engine.events(&id, &alice(), 0)).await.unwrap();
        assert_eq!(shape(&before).last(), Some(&"action.approval_requested"), "{:?}", shape(&before));
        let pending = within(engine.approvals(&id, &alice())).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].call_id, call);
        assert_eq!(pending[0].turn_id, turn);
        assert_eq!(pending[0].requested_at, requested_at);
        assert_eq!(pending[0].input, json!({"env": "prod"}));
        assert!(engine.is_busy(&id));
        assert_eq!(within(engine.list(ListScope::All)).await.unwrap()[0].status, "running");
        assert!(!fx.bot().join("promoted.marker").exists());
        // Idempotent: a second pass neither closes nor re-parks.
        assert_eq!(within(engine.recover()).await.unwrap(), 0);
        assert_eq!(within(engine.approvals(&id, &alice())).await.unwrap().len(), 1);

        // A stream attached after the restart, from the end of the log.
        let from = before.len() as u64;
        let mut stream = within(engine.follow(&id, &alice(), from)).await.unwrap();
        within(engine.resolve_approval(&id, &call, ApprovalDecision::Approve, &alice())).await.unwrap();
        let mut tail = Vec::new();
        within(async {
            while let Some(event) = stream.next().await {
                let event = (*event.unwrap()).clone();
                let done = matches!(event.data, EventData::SessionWaiting(_));
                tail.push(event);
                if done {
                    break;
                }
            }
        })
        .await;
        let kinds = shape(&tail);
        assert_eq!(kinds[..2], ["action.approval_resolved", "action.result"], "{kinds:?}");
        assert_eq!(kinds[kinds.len() - 2..], ["turn.completed", "session.waiting"], "{kinds:?}");
        assert!(!kinds.contains(&"turn.started") && !kinds.contains(&"turn.failed"), "{kinds:?}");
        assert!(tail.iter().filter(|e| e.turn_id.is_some()).all(|e| e.turn_id.as_ref() == Some(&turn)));
        let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
        assert_eq!(resolution_of(&events, &call).unwrap().principal.as_deref(), Some("alice"));
        assert_eq!(result_of(&events, &call).result, json!({"promoted": true}));
        assert!(fx.bot().join("promoted.marker").exists());
        assert_eq!(bdk_engine::Trajectory::from_events(&events).reply.as_deref(), Some("Promoted after the restart."));
        // The step after the restart is step 1 of the same turn, and the model reads the result.
        let steps: Vec<u32> = events
            .iter()
            .filter_map(|e| match &e.data {
                EventData::StepStarted(s) => Some(s.step),
                _ => None,
            })
            .collect();
        assert_eq!(steps, [0, 1]);
        let messages = &provider.requests()[0].messages;
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 1));
        assert!(
            matches!(&messages[2], Message::Tool { content, is_error: false, .. } if content == r#"{"promoted":true}"#)
        );
        assert!(within(engine.approvals(&id, &alice())).await.unwrap().is_empty());
        // The settled status is written just after `session.waiting`.
        within(async {
            while within(engine.list(ListScope::All)).await.unwrap()[0].status != "waiting" {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
    });
}

#[test]
fn a_parked_call_survives_a_restart_and_denying_it_tells_the_model() {
    //! Guards: the deny path after a restart; a sibling call that had finished keeps its result
    //! and is not run again.
    if filesystem_only(
        "a_parked_call_survives_a_restart_and_denying_it_tells_the_model",
        "it stops a runtime to simulate a crash, and a database handle dies with its runtime",
    ) {
        return;
    }
    let fx = ToolFixture::standard_on_filesystem(vec![
        ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})).with_tool_call("c2", "lookup", json!({})),
    ]);
    let (id, promote, lookup) = then_die(async {
        let started = fx.chat("promote it").await;
        let id = started.session_id;
        let events = parked(&fx.engine, &id, 1).await;
        let calls = requested_calls(&events);
        let (promote, lookup) = (calls[0].0.clone(), calls[1].0.clone());
        until(&fx.engine, &id, |e| matches!(&e.data, EventData::ActionResult(r) if r.call_id == lookup)).await;
        (id, promote, lookup)
    });

    runtime().block_on(async {
        let (engine, provider) = fx.restart(vec![say("Understood, not promoted.")]);
        assert_eq!(within(engine.recover()).await.unwrap(), 0);
        within(engine.resolve_approval(&id, &promote, ApprovalDecision::Deny, &alice())).await.unwrap();
        let events = settled(&engine, &id, 1).await;
        assert_eq!(resolution_of(&events, &promote).unwrap().decision, ApprovalDecision::Deny);
        assert_eq!(result_of(&events, &promote).result, json!(DENIED));
        let lookups =
            events.iter().filter(|e| matches!(&e.data, EventData::ActionResult(r) if r.call_id == lookup)).count();
        assert_eq!(lookups, 1, "the finished call keeps its one result");
        assert!(!fx.bot().join("promoted.marker").exists());
        let messages = &provider.requests()[0].messages;
        let results: Vec<(&str, bool)> = messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { content, is_error, .. } => Some((content.as_str(), *is_error)),
                _ => None,
            })
            .collect();
        assert_eq!(results, [(DENIED, true), ("found", false)]);
        let shape = shape(&events);
        assert_eq!(shape[shape.len() - 2..], ["turn.completed", "session.waiting"]);
    });
}

#[test]
fn stopping_a_restored_turn_cancels_its_parked_call() {
    //! Guards: a restored turn ends like a live one when stopped: the call gets a cancelled
    //! result, it is no longer listed, and deciding it is `ApprovalNotFound`.
    if filesystem_only(
        "stopping_a_restored_turn_cancels_its_parked_call",
        "it stops a runtime to simulate a crash, and a database handle dies with its runtime",
    ) {
        return;
    }
    let fx = ToolFixture::standard_on_filesystem(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"}))]);
    let (id, call) = then_die(async {
        let started = fx.chat("promote it").await;
        let events = parked(&fx.engine, &started.session_id, 1).await;
        (started.session_id, requested_calls(&events).remove(0).0)
    });
    runtime().block_on(async {
        let (engine, _) = fx.restart(Vec::new());
        within(engine.recover()).await.unwrap();
        within(engine.stop(&id, &alice())).await.unwrap();
        let events = settled(&engine, &id, 1).await;
        assert!(result_of(&events, &call).result.as_str().unwrap().contains("cancelled"));
        assert!(within(engine.approvals(&id, &alice())).await.unwrap().is_empty());
        let late = within(engine.resolve_approval(&id, &call, ApprovalDecision::Approve, &alice())).await;
        assert!(matches!(late, Err(EngineError::ApprovalNotFound(_))), "{late:?}");
        assert!(!fx.bot().join("promoted.marker").exists());
    });
}

#[test]
fn draining_leaves_a_parked_turn_open_for_the_next_start() {
    //! Guards: a graceful shutdown (drain past its grace) with only a parked call left writes no
    //! `turn.failed`: the next start restores the call, and approving it completes the turn.
    if filesystem_only(
        "draining_leaves_a_parked_turn_open_for_the_next_start",
        "it stops a runtime to simulate a crash, and a database handle dies with its runtime",
    ) {
        return;
    }
    let fx = ToolFixture::standard_on_filesystem(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"}))]);
    let (id, call) = runtime().block_on(async {
        let started = fx.chat("promote it").await;
        let events = parked(&fx.engine, &started.session_id, 1).await;
        let call = requested_calls(&events).remove(0).0;
        within(fx.engine.drain(std::time::Duration::from_millis(50))).await;
        let events = within(fx.engine.events(&started.session_id, &alice(), 0)).await.unwrap();
        assert_eq!(shape(&events).last(), Some(&"action.approval_requested"), "{:?}", shape(&events));
        (started.session_id, call)
    });
    runtime().block_on(async {
        let (engine, _) = fx.restart(vec![say("Done.")]);
        assert_eq!(within(engine.recover()).await.unwrap(), 0);
        within(engine.resolve_approval(&id, &call, ApprovalDecision::Approve, &alice())).await.unwrap();
        let events = settled(&engine, &id, 1).await;
        assert_eq!(result_of(&events, &call).result, json!({"promoted": true}));
        assert_eq!(bdk_engine::Trajectory::from_events(&events).reply.as_deref(), Some("Done."));
    });
}

#[test]
fn a_parked_call_of_an_earlier_open_turn_still_expires() {
    //! Guards: the expiry path that remains: a parked call whose turn recovery does not restore
    //! (here the turn is not in its tool calls any more: a later step started) is closed with
    //! `approval_resolved` (expired) and an error result before `turn.failed`.
    if filesystem_only(
        "a_parked_call_of_an_earlier_open_turn_still_expires",
        "it stops a runtime to simulate a crash, and a database handle dies with its runtime",
    ) {
        return;
    }
    let fx = ToolFixture::standard_on_filesystem(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"}))]);
    let id = then_die(async {
        let started = fx.chat("promote it").await;
        parked(&fx.engine, &started.session_id, 1).await;
        started.session_id
    });
    // Forge what a crash inside a later step would leave: the turn's next `step.started`.
    let store = FsStore::open(fx.dir.path().join("state")).unwrap();
    let events = runtime().block_on(async {
        let log = store.stores().events;
        let events = log.read(&id, 0, None).await.unwrap();
        let turn = events.last().unwrap().turn_id.clone().unwrap();
        log.append(&id, vec![NewEvent::in_turn(turn, EventData::StepStarted(StepStarted { step: 1 }))]).await.unwrap();
        events
    });
    drop(store);
    let (call, _) = requested_calls(&events).remove(0);
    runtime().block_on(async {
        let (engine, _) = fx.restart(Vec::new());
        assert_eq!(within(engine.recover()).await.unwrap(), 1);
        let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
        let shape = shape(&events);
        assert_eq!(
            shape[shape.len() - 4..],
            ["action.approval_resolved", "action.result", "turn.failed", "session.waiting"]
        );
        assert_eq!(resolution_of(&events, &call).unwrap().decision, ApprovalDecision::Expired);
        assert_eq!(result_of(&events, &call).result, json!(EXPIRED));
        let Some(EventData::TurnFailed(failed)) = events.iter().rev().nth(1).map(|e| &e.data) else { panic!() };
        assert_eq!(failed.message, RESTARTED);
        assert!(within(engine.approvals(&id, &alice())).await.unwrap().is_empty());
    });
}
