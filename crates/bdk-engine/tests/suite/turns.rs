//! The turn loop: the events of a text turn and of a tool-calling turn (several calls in one
//! step, run concurrently), model errors, the step budget, and usage and cost.

use bdk_engine::{Admission, Trajectory};
use bdk_model::Message;
use bdk_model::{ModelError, ScriptStep, Usage};
use bdk_protocol::EventData;
use bdk_protocol::event::{SessionMode, TurnFailStatus};
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn a_text_turn_records_its_events_in_order() {
    let fx = Fixture::new(vec![say("Hello there, friend.").with_reasoning("The user greets me.")]).await;
    let started = fx.start("hi").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(
        shape(&events),
        [
            "session.started",
            "agent.bound",
            "message.received",
            "turn.started",
            "step.started",
            "reasoning.appended",
            "reasoning.completed",
            "message.appended",
            "message.completed",
            "step.completed",
            "turn.completed",
            "session.waiting",
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::MessageAppended(d) => Some(d.delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello there, friend.");
    // The session is the backing conversation: bound once, before the first message, with the
    // model its turns run on, outside any turn.
    let EventData::AgentBound(bound) = &events[1].data else { panic!("{:?}", types(&events)) };
    assert_eq!(bound.agent_id, started.session_id.to_string());
    assert_eq!(bound.url, None);
    let Some(EventData::TurnStarted(turn_started)) =
        events.iter().map(|e| &e.data).find(|d| matches!(d, EventData::TurnStarted(_)))
    else {
        panic!()
    };
    assert_eq!(bound.model, turn_started.model);
    assert!(bound.model.is_some());
    assert_eq!(events[1].turn_id, None);
    assert!(events.iter().all(|e| e.turn_id.is_none() || e.turn_id.as_ref() == Some(&started.turn_id)));
    let Some(EventData::TurnCompleted(done)) =
        events.iter().map(|e| &e.data).find(|d| matches!(d, EventData::TurnCompleted(_)))
    else {
        panic!("no turn.completed")
    };
    assert_eq!(done.result.as_deref(), Some("Hello there, friend."));
    assert_eq!((done.usage.input_tokens, done.usage.output_tokens), (10, 5));
    assert_eq!(done.model.as_deref(), Some("script"));

    let request = &fx.provider.requests()[0];
    assert_eq!(request.system.as_deref(), Some("You are a test agent."));
    assert_eq!(request.messages, [Message::user("hi")]);
    assert_eq!(request.tools.len(), 3);
}

/// What a step costs does not grow with the conversation: each step's request shares the
/// messages of the request before it (the same allocations, not copies). Within a turn a step
/// adds only its call and results; a follow-up's first request extends the previous turn's first,
/// adding only what the log recorded since. Checked by identity, not by timing.
#[tokio::test]
async fn requests_share_the_conversation_instead_of_copying_it() {
    let fx = Fixture::new(vec![
        ScriptStep::tool_call("c1", "add", json!({"a": 1, "b": 2})),
        say("three"),
        ScriptStep::tool_call("c2", "add", json!({"a": 3, "b": 4})),
        say("seven"),
        say("done"),
    ])
    .await;
    let started = fx.start("one").await;
    let id = started.session_id.clone();
    settled(&fx.engine, &id, 1).await;
    let mut token = started.continuation_token;
    for (n, text) in ["two", "three"].into_iter().enumerate() {
        token = within(fx.engine.follow_up(&id, follow(text, &token, Admission::Preempt)))
            .await
            .unwrap()
            .continuation_token;
        settled(&fx.engine, &id, n + 2).await;
    }
    let requests = fx.provider.requests();
    assert_eq!(requests.len(), 5);
    let (first, second, third) = (&requests[0], &requests[2], &requests[4]);
    assert!(requests[1].messages.extends(&first.messages), "the second step of turn 1 copied the first's messages");
    assert!(requests[3].messages.extends(&second.messages), "the second step of turn 2 copied the first's messages");
    assert!(second.messages.extends(&first.messages), "turn 2 rebuilt the conversation before turn 1");
    assert!(third.messages.extends(&second.messages), "turn 3 rebuilt the conversation before turn 2");
    assert!(!third.messages.extends(&requests[3].messages), "a step's own messages are rebuilt from the log");
    assert_eq!(third.messages.len(), 9, "{:?}", third.messages);
    assert_eq!(third.messages.last(), Some(&Message::user("three")));
    // One system prompt per definitions snapshot, shared by every step of every turn.
    let system = |i: usize| requests[i].system.clone().unwrap();
    assert!((1..5).all(|i| std::sync::Arc::ptr_eq(&system(0), &system(i))));
}

#[tokio::test]
async fn several_tool_calls_in_one_step_run_concurrently_and_are_recorded() {
    let fx = Fixture::new(vec![
        ScriptStep::tool_call("c1", "pair", json!({}))
            .with_tool_call("c2", "pair", json!({}))
            .with_tool_call("c3", "add", json!({"a": 3, "b": 4}))
            .with_usage(Usage { input_tokens: 7, output_tokens: 3, ..Default::default() }),
        say("All done."),
    ])
    .await;
    let started = fx.start("go").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let shape = shape(&events);
    let requested = shape.iter().position(|t| *t == "actions.requested").unwrap();
    assert_eq!(shape[requested - 1], "step.completed");
    assert_eq!(shape[requested + 1..requested + 4], ["action.result"; 3]);
    assert_eq!(shape[requested + 4], "step.started");
    assert_eq!(count(&events, "step.started"), 2);

    let Some(EventData::ActionsRequested(requested)) =
        events.iter().map(|e| &e.data).find(|d| matches!(d, EventData::ActionsRequested(_)))
    else {
        panic!()
    };
    assert_eq!(requested.calls.len(), 3);
    assert!(requested.calls[0].call_id.as_str().starts_with("tool_pair_"));
    let trajectory = Trajectory::from_events(&events);
    assert_eq!(trajectory.tool_calls.len(), 3);
    for call in &trajectory.tool_calls {
        assert_eq!(call.is_error, Some(false), "{call:?}");
    }
    assert_eq!(trajectory.tool_calls[2].result, Some(json!(7)));
    assert_eq!(trajectory.reply.as_deref(), Some("All done."));
    assert_eq!(trajectory.usage.input_tokens, 17);

    // The second step saw the calls and their results, answered by the same ids.
    let second = &fx.provider.requests()[1];
    let Message::Assistant { tool_calls, .. } = &second.messages[1] else { panic!("{:?}", second.messages) };
    assert_eq!(tool_calls.len(), 3);
    let results: Vec<_> = second
        .messages
        .iter()
        .skip(2)
        .map(|m| match m {
            Message::Tool { call_id, content, .. } => (call_id.clone(), content.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(results.iter().map(|r| &r.0).collect::<Vec<_>>(), tool_calls.iter().map(|c| &c.id).collect::<Vec<_>>());
    assert_eq!(results[2].1, "7");
    let invocations = fx.tools.calls.lock().unwrap();
    assert!(invocations.iter().all(|i| i.workspace.as_ref().is_some_and(|w| w.is_dir())));
}

#[tokio::test]
async fn a_model_error_fails_the_turn_and_a_chat_session_waits() {
    let broken = ScriptStep {
        text: Some("partial ".into()),
        ..ScriptStep::error(ModelError::Server { status: 500, message: "boom".into() })
    };
    let fx = Fixture::new(vec![broken, say("recovered")]).await;
    let started = fx.start("hi").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let failed = events.iter().find_map(|e| match &e.data {
        EventData::TurnFailed(f) => Some(f.clone()),
        _ => None,
    });
    let failed = failed.expect("turn.failed");
    assert_eq!(failed.status, TurnFailStatus::Failed);
    assert!(failed.message.contains("boom"), "{}", failed.message);
    // The partial text reached the log.
    assert!(events.iter().any(|e| matches!(&e.data, EventData::MessageAppended(d) if d.delta.contains("partial"))));
    assert_eq!(events.last().unwrap().event_type(), "session.waiting");

    let accepted = within(
        fx.engine.follow_up(&started.session_id, follow("again", &started.continuation_token, Default::default())),
    )
    .await
    .unwrap();
    assert!(accepted.turn_id.is_some());
    let events = settled(&fx.engine, &started.session_id, 2).await;
    assert_eq!(Trajectory::from_events(&events).reply.as_deref(), Some("recovered"));
}

#[tokio::test]
async fn a_model_error_fails_a_task_session() {
    let fx = Fixture::new(vec![ScriptStep::error(ModelError::Authentication { message: "bad key".into() })]).await;
    let started = within(fx.engine.start_session(start("do it", SessionMode::Task))).await.unwrap();
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let Some(EventData::SessionFailed(failed)) = events.last().map(|e| &e.data) else { panic!("{:?}", types(&events)) };
    assert!(failed.message.contains("bad key"));
}

#[tokio::test]
async fn running_out_of_steps_fails_the_turn() {
    let mut config = config();
    config.max_steps = 2;
    let steps = (0..3).map(|i| ScriptStep::tool_call(format!("c{i}"), "add", json!({"a": i}))).collect();
    let fx = Fixture::with(config, bdk_model::ScriptedProvider::new(steps)).await;
    let started = fx.start("loop").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    assert_eq!(count(&events, "step.started"), 2);
    assert_eq!(count(&events, "action.result"), 2);
    let failed = events.iter().find_map(|e| match &e.data {
        EventData::TurnFailed(f) => Some(f.clone()),
        _ => None,
    });
    let failed = failed.expect("turn.failed");
    assert_eq!(failed.status, TurnFailStatus::Failed);
    assert!(failed.message.contains("max_steps"), "{}", failed.message);
}

#[tokio::test]
async fn broken_tool_arguments_are_told_to_the_model() {
    let mut step = ScriptStep::default();
    step.tool_calls.push(bdk_model::ToolCall { id: "c1".into(), name: "add".into(), arguments: "{not json".into() });
    let fx = Fixture::new(vec![step, say("sorry")]).await;
    let started = fx.start("go").await;
    let events = settled(&fx.engine, &started.session_id, 1).await;
    let trajectory = Trajectory::from_events(&events);
    assert_eq!(trajectory.tool_calls[0].is_error, Some(true));
    assert!(fx.tools.calls.lock().unwrap().is_empty(), "the tool must not run");
    assert_eq!(trajectory.reply.as_deref(), Some("sorry"));
}

#[tokio::test]
async fn cost_folds_completed_turns() {
    let fx = Fixture::new(vec![say("one"), say("two")]).await;
    let started = fx.start("a").await;
    settled(&fx.engine, &started.session_id, 1).await;
    within(fx.engine.follow_up(&started.session_id, follow("b", &started.continuation_token, Default::default())))
        .await
        .unwrap();
    settled(&fx.engine, &started.session_id, 2).await;
    let report = within(fx.engine.cost(&started.session_id, &alice())).await.unwrap();
    assert_eq!(report.turns.len(), 2);
    assert_eq!(report.usage.input_tokens, 20);
    assert_eq!(report.usage.output_tokens, 10);
    // The scripted model has no price: estimates are recorded as 0.
    assert_eq!(report.cost_usd, 0.0);
}
