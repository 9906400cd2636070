//! The scripted provider replays its script step by step, echoes when it has none, reports
//! scripted errors, and stops promptly when cancelled.

use std::time::Duration;

use bdk_model::{
    FinishReason, Message, ModelError, ModelEvent, ModelProvider, ModelRequest, ScriptStep, ScriptedProvider, ToolCall,
    Usage,
};
use futures_util::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{WAIT, collect, events, last_error, text_of};

fn ask(text: &str) -> ModelRequest {
    ModelRequest { messages: vec![Message::user(text)].into(), ..Default::default() }
}

#[tokio::test]
async fn replays_steps_in_order() {
    let usage = Usage { input_tokens: 3, output_tokens: 2, ..Default::default() };
    let provider = ScriptedProvider::new(vec![
        ScriptStep::tool_call("c1", "add", json!({"a": 1})).with_reasoning("need a tool"),
        ScriptStep::text("The answer is 3.").with_usage(usage),
    ]);
    let first = events(provider.stream(ask("1+2?"), CancellationToken::new())).await;
    assert_eq!(first[0], ModelEvent::ReasoningDelta { text: "need ".into() });
    assert!(first.contains(&ModelEvent::ToolCall {
        call: ToolCall { id: "c1".into(), name: "add".into(), arguments: r#"{"a":1}"#.into() }
    }));
    assert_eq!(first.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));

    let second = events(provider.stream(ask("go on"), CancellationToken::new())).await;
    assert_eq!(text_of(&second), "The answer is 3.");
    assert!(second.contains(&ModelEvent::Usage { usage }));
    assert_eq!(second.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));

    let third = collect(provider.stream(ask("more"), CancellationToken::new())).await;
    assert_eq!(last_error(&third).code(), "model_unavailable");
    assert_eq!(provider.requests().len(), 3);
}

#[tokio::test]
async fn the_request_record_keeps_only_the_newest() {
    //! Guards: an echo provider serving a long-running demo does not grow without bound.
    let provider = ScriptedProvider::echo();
    let total = bdk_model::REQUESTS_KEPT + 10;
    for n in 0..total {
        drop(provider.stream(ask(&format!("m{n}")), CancellationToken::new()));
    }
    let kept = provider.requests();
    assert_eq!(kept.len(), bdk_model::REQUESTS_KEPT);
    assert_eq!(kept.first().unwrap().messages, [Message::user("m10")]);
    assert_eq!(kept.last().unwrap().messages, [Message::user(format!("m{}", total - 1))]);
}

#[tokio::test]
async fn echo_repeats_the_last_user_message() {
    let provider = ScriptedProvider::echo();
    let request = ModelRequest {
        messages: vec![Message::user("first"), Message::assistant("ok"), Message::user("say this back")].into(),
        ..Default::default()
    };
    let events = events(provider.stream(request, CancellationToken::new())).await;
    assert_eq!(text_of(&events), "say this back");
    assert!(events.iter().any(|e| matches!(e, ModelEvent::Usage { usage } if usage.output_tokens > 0)));
    assert_eq!(provider.info().provider, "scripted");
}

#[tokio::test]
async fn scripted_errors_can_follow_output() {
    let step = ScriptStep {
        text: Some("half".into()),
        error: Some(ModelError::Network { message: "cut".into() }),
        ..Default::default()
    };
    let provider = ScriptedProvider::new(vec![step]);
    let items = collect(provider.stream(ask("x"), CancellationToken::new())).await;
    assert_eq!(items[0], Ok(ModelEvent::TextDelta { text: "half".into() }));
    assert_eq!(last_error(&items), ModelError::Network { message: "cut".into() });
}

#[tokio::test]
async fn scripts_parse_from_json() {
    let provider = ScriptedProvider::from_json(&json!([
        {"text": "hello", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]))
    .unwrap();
    assert_eq!(text_of(&events(provider.stream(ask("x"), CancellationToken::new())).await), "hello");
    assert!(ScriptedProvider::from_json(&json!([{"txt": "typo"}])).is_err());
}

#[tokio::test]
async fn cancellation_interrupts_a_slow_step() {
    let provider = ScriptedProvider::new(vec![ScriptStep::text("a b c d e f").with_delay(Duration::from_millis(50))]);
    let cancel = CancellationToken::new();
    let mut stream = provider.stream(ask("x"), cancel.clone());
    let first = tokio::time::timeout(WAIT, stream.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(ModelEvent::TextDelta { .. }))));
    cancel.cancel();
    let next = tokio::time::timeout(WAIT, stream.next()).await.unwrap();
    assert_eq!(next, Some(Err(ModelError::Cancelled)));
    assert_eq!(tokio::time::timeout(WAIT, stream.next()).await.unwrap(), None);
}
