//! Approvals: a call whose tool needs approval parks (`action.approval_requested`, the turn keeps
//! running) until the owner approves it (it runs) or denies it (the model reads the denial);
//! several parked calls resolve independently; stopping the turn cancels a parked call; a
//! restart expires it deterministically and the session goes on.

use bdk_engine::{Admission, DENIED, EXPIRED, EngineError, ListScope, RESTARTED};
use bdk_model::{Message, ScriptStep};
use bdk_protocol::EventData;
use bdk_protocol::event::{ApprovalDecision, TurnFailStatus};
use serde_json::json;

use super::support::*;
use super::tool_project::*;

fn promote_then(text: &str) -> Vec<ScriptStep> {
    vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})), say(text)]
}

#[tokio::test]
async fn a_parked_call_waits_for_approval_then_runs() {
    let fx = ToolFixture::standard(promote_then("Promoted."));
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
    let fx = ToolFixture::standard(promote_then("Understood, not promoted."));
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
    ]);
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
    let fx = ToolFixture::standard(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})), say("Back.")]);
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
async fn preempting_or_draining_the_turn_cancels_a_parked_call() {
    let fx = ToolFixture::standard(vec![
        ScriptStep::tool_call("c1", "promote", json!({"env": "prod"})),
        say("Something else."),
        ScriptStep::tool_call("c2", "promote", json!({"env": "prod"})),
    ]);
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

    // Draining cancels a parked call once the grace period is over.
    within(fx.engine.follow_up(id, follow("promote now", &accepted.continuation_token, Admission::Preempt)))
        .await
        .unwrap();
    let events = parked(&fx.engine, id, 2).await;
    let (second, _) = requested_calls(&events).pop().unwrap();
    within(fx.engine.drain(std::time::Duration::from_millis(50))).await;
    let events = within(fx.engine.events(id, &alice(), 0)).await.unwrap();
    assert!(result_of(&events, &second).result.as_str().unwrap().contains("cancelled"));
    let Some(EventData::TurnFailed(failed)) = events.iter().rev().nth(1).map(|e| &e.data) else { panic!() };
    assert_eq!(failed.message, bdk_engine::SHUTTING_DOWN);
    assert!(!fx.bot().join("promoted.marker").exists());
}

#[tokio::test]
async fn only_the_owner_sees_and_resolves_approvals() {
    let fx = ToolFixture::standard(promote_then("ok"));
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

#[test]
fn a_restart_expires_a_parked_call_and_the_session_goes_on() {
    //! Guards: the host "dies" (its runtime is dropped) with a call parked; recovery records
    //! `approval_resolved` (expired) and an error result before `turn.failed`, and the next turn's
    //! model sees the call paired with that result.
    let fx = ToolFixture::standard(vec![ScriptStep::tool_call("c1", "promote", json!({"env": "prod"}))]);
    let first = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (id, token, call) = first.block_on(async {
        let started = fx.chat("promote it").await;
        let events = parked(&fx.engine, &started.session_id, 1).await;
        let (call, _) = requested_calls(&events).remove(0);
        (started.session_id, started.continuation_token, call)
    });
    drop(first);

    let second = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    second.block_on(async {
        let (engine, provider) = fx.restart(vec![say("It was not promoted.")]);
        assert_eq!(within(engine.recover()).await.unwrap(), 1);
        let events = within(engine.events(&id, &alice(), 0)).await.unwrap();
        let shape = shape(&events);
        assert_eq!(
            shape[shape.len() - 5..],
            [
                "action.approval_requested",
                "action.approval_resolved",
                "action.result",
                "turn.failed",
                "session.waiting"
            ]
        );
        let resolution = resolution_of(&events, &call).unwrap();
        assert_eq!(resolution.decision, ApprovalDecision::Expired);
        assert_eq!(resolution.principal, None);
        let result = result_of(&events, &call);
        assert!(result.is_error);
        assert_eq!(result.result, json!(EXPIRED));
        let Some(EventData::TurnFailed(failed)) = events.iter().rev().nth(1).map(|e| &e.data) else { panic!() };
        assert_eq!(failed.message, RESTARTED);
        assert!(within(engine.approvals(&id, &alice())).await.unwrap().is_empty());
        // Idempotent.
        assert_eq!(within(engine.recover()).await.unwrap(), 0);

        within(engine.follow_up(&id, follow("did it work?", &token, Admission::Preempt))).await.unwrap();
        let events = settled(&engine, &id, 2).await;
        assert_eq!(bdk_engine::Trajectory::from_events(&events).reply.as_deref(), Some("It was not promoted."));
        let messages = &provider.requests()[0].messages;
        assert_eq!(messages.len(), 4, "{messages:?}");
        assert!(matches!(&messages[1], Message::Assistant { tool_calls, .. } if tool_calls.len() == 1));
        assert!(matches!(&messages[2], Message::Tool { content, is_error: true, .. } if content == EXPIRED));
        assert!(!fx.bot().join("promoted.marker").exists());
    });
}
