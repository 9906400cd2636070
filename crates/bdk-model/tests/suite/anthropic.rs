//! The Anthropic provider's own behaviour: headers and body (system prompt, tools, tool
//! results), thinking with signatures, cache token usage and `error` events mid-stream. Shared
//! behaviour is in `conformance.rs`.

use std::sync::Arc;

use bdk_model::{
    AnthropicProvider, FinishReason, HttpConfig, Message, ModelError, ModelEvent, ModelParams, ModelProvider,
    ModelRequest, ProviderOptions, Retrying, ToolCall, ToolSpec, Usage,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use bdk_test_support::anthropic_sse as an;
use bdk_test_support::fake_server::{FakeServer, Reply};

use super::support::{collect, events, fast_options, last_error, reasoning_of, text_of};

/// An Anthropic provider pointed at `server`, with retries.
pub fn provider(server: &FakeServer, options: ProviderOptions) -> Arc<dyn ModelProvider> {
    let config = HttpConfig {
        model: "claude-test".into(),
        base_url: server.url(),
        api_key: Some("sk-ant-test".into()),
        params: ModelParams::default(),
        timeouts: options.timeouts,
    };
    Arc::new(Retrying::new(Arc::new(AnthropicProvider::new(config).unwrap()), options.retry))
}

fn request() -> ModelRequest {
    ModelRequest { messages: vec![Message::user("hi")].into(), ..Default::default() }
}

#[tokio::test]
async fn request_has_headers_system_tools_and_tool_results() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![an::message_start(1, 0, 0), an::message_delta("end_turn", 1), an::message_stop()]));
    let request = ModelRequest {
        system: Some("You are terse.".into()),
        messages: vec![
            Message::user("what is 1+2?"),
            Message::Assistant {
                content: String::new(),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: "toolu_1".into(),
                    name: "add".into(),
                    arguments: r#"{"a":1,"b":2}"#.into(),
                }],
            },
            Message::tool_result("toolu_1", "3", false),
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "add".into(),
            description: "Adds".into(),
            input_schema: json!({"type": "object"}),
        }]
        .into(),
        params: ModelParams { max_tokens: Some(1000), ..Default::default() },
    };
    events(provider(&server, fast_options()).stream(request, CancellationToken::new())).await;
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    let body = &recorded.body;
    assert_eq!(body["system"], json!("You are terse."));
    assert_eq!(body["max_tokens"], json!(1000));
    assert_eq!(body["tools"][0], json!({"name": "add", "description": "Adds", "input_schema": {"type": "object"}}));
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1, "b": 2}})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}]})
    );
}

#[tokio::test]
async fn thinking_text_tool_use_and_cache_usage() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![
        an::message_start(20, 1000, 50),
        an::thinking_start(0),
        an::thinking(0, "Let me "),
        an::thinking(0, "check."),
        an::signature(0, "EqQBCgIYAh"),
        an::block_stop(0),
        an::text_start(1),
        an::text(1, "Checking."),
        an::block_stop(1),
        an::tool_use_start(2, "toolu_9", "weather"),
        an::input_json(2, ""),
        an::input_json(2, r#"{"city": "#),
        an::input_json(2, r#""Oslo"}"#),
        an::block_stop(2),
        an::message_delta("tool_use", 77),
        an::message_stop(),
    ]));
    let events = events(provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(reasoning_of(&events), "Let me check.");
    assert!(events.contains(&ModelEvent::ReasoningSignature { signature: "EqQBCgIYAh".into() }));
    assert_eq!(text_of(&events), "Checking.");
    assert!(events.contains(&ModelEvent::ToolCall {
        call: ToolCall { id: "toolu_9".into(), name: "weather".into(), arguments: r#"{"city": "Oslo"}"#.into() }
    }));
    let usage = events.iter().find_map(|e| if let ModelEvent::Usage { usage } = e { Some(*usage) } else { None });
    let expected = Usage {
        input_tokens: 1070,
        output_tokens: 77,
        cached_input_tokens: 1000,
        cache_write_tokens: 50,
        reasoning_tokens: None,
    };
    assert_eq!(usage, Some(expected));
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

#[tokio::test]
async fn error_event_mid_stream_is_not_retried() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![
        an::message_start(5, 0, 0),
        an::text_start(0),
        an::text(0, "Hel"),
        an::error("overloaded_error", "Overloaded"),
    ]));
    let items = collect(provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert!(matches!(items[0], Ok(ModelEvent::TextDelta { .. })));
    assert_eq!(last_error(&items), ModelError::Server { status: 529, message: "Overloaded".into() });
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn error_event_before_output_is_retried() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![an::error("overloaded_error", "Overloaded")]));
    server.push(Reply::sse(vec![
        an::message_start(5, 0, 0),
        an::text_start(0),
        an::text(0, "fine"),
        an::block_stop(0),
        an::message_delta("end_turn", 1),
        an::message_stop(),
    ]));
    let events = events(provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn max_tokens_stop_is_length() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![an::message_start(5, 0, 0), an::message_delta("max_tokens", 9), an::message_stop()]));
    let events = events(provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Length }));
}
