//! The OpenAI-compatible provider's own behaviour: the request body it sends (tools,
//! stream_options, reasoning_effort, token limits, auth), both reasoning fields, and errors
//! reported inside the stream. Shared behaviour is in `conformance.rs`.

use std::sync::Arc;

use bdk_model::{
    Effort, HttpConfig, Message, ModelError, ModelEvent, ModelParams, ModelProvider, ModelRequest, OpenAiProvider,
    ProviderKind, ProviderOptions, Retrying, ToolSpec,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use bdk_test_support::fake_server::{FakeServer, Reply};
use bdk_test_support::openai_sse as oa;

use super::support::{collect, events, fast_options, last_error, reasoning_of, text_of};

/// An OpenAI-compatible provider of `kind` pointed at `server`, with retries.
pub fn provider(server: &FakeServer, kind: ProviderKind, options: ProviderOptions) -> Arc<dyn ModelProvider> {
    let config = HttpConfig {
        model: "test-model".into(),
        base_url: server.url(),
        api_key: Some("sk-test".into()),
        params: ModelParams::default(),
        timeouts: options.timeouts,
    };
    let inner = OpenAiProvider::new(kind, config).unwrap();
    Arc::new(Retrying::new(Arc::new(inner), options.retry))
}

fn ok_reply() -> Reply {
    Reply::sse(vec![oa::role(), oa::text("ok"), oa::finish("stop"), oa::usage(1, 1, 0, 0), oa::done()])
}

#[tokio::test]
async fn request_body_has_tools_stream_options_and_effort() {
    let server = FakeServer::start().await;
    server.push(ok_reply());
    let request = ModelRequest {
        system: Some("sys".into()),
        messages: vec![Message::user("hi")].into(),
        tools: vec![ToolSpec {
            name: "add".into(),
            description: "Adds numbers".into(),
            input_schema: json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}),
        }]
        .into(),
        params: ModelParams {
            effort: Some(Effort::High),
            max_tokens: Some(256),
            temperature: Some(0.5),
            ..Default::default()
        },
    };
    events(provider(&server, ProviderKind::Xai, fast_options()).stream(request, CancellationToken::new())).await;
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.header("authorization"), Some("Bearer sk-test"));
    let body = &recorded.body;
    assert_eq!(body["model"], json!("test-model"));
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["reasoning_effort"], json!("high"));
    assert_eq!(body["max_completion_tokens"], json!(256));
    assert_eq!(body["temperature"], json!(0.5));
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "sys"}));
    assert_eq!(
        body["tools"][0],
        json!({"type": "function", "function": {"name": "add", "description": "Adds numbers",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}}})
    );
}

#[tokio::test]
async fn local_servers_get_max_tokens_and_no_key() {
    let server = FakeServer::start().await;
    server.push(ok_reply());
    let config = HttpConfig {
        model: "qwen3:8b".into(),
        base_url: server.url(),
        api_key: None,
        params: ModelParams::default(),
        timeouts: fast_options().timeouts,
    };
    let provider = OpenAiProvider::new(ProviderKind::OpenAiCompatible, config).unwrap();
    let request = ModelRequest {
        messages: vec![Message::user("hi")].into(),
        params: ModelParams { max_tokens: Some(64), ..Default::default() },
        ..Default::default()
    };
    events(provider.stream(request, CancellationToken::new())).await;
    let recorded = &server.requests()[0];
    assert_eq!(recorded.header("authorization"), None);
    assert_eq!(recorded.body["max_tokens"], json!(64));
    assert!(recorded.body.get("reasoning_effort").is_none());
    assert!(recorded.body.get("tools").is_none());
}

#[tokio::test]
async fn reasoning_arrives_in_either_field() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![
        oa::reasoning_content("one "),
        oa::reasoning("two"),
        oa::text("answer"),
        oa::finish("stop"),
        oa::done(),
    ]));
    let events = events(provider(&server, ProviderKind::OpenAi, fast_options()).stream(
        ModelRequest { messages: vec![Message::user("q")].into(), ..Default::default() },
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(reasoning_of(&events), "one two");
    assert_eq!(text_of(&events), "answer");
}

#[tokio::test]
async fn error_chunk_mid_stream_fails_the_call() {
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![
        oa::text("partial"),
        oa::data(json!({"error": {"message": "model overloaded", "type": "server_error"}})),
    ]));
    let items = collect(provider(&server, ProviderKind::OpenAi, fast_options()).stream(
        ModelRequest { messages: vec![Message::user("q")].into(), ..Default::default() },
        CancellationToken::new(),
    ))
    .await;
    assert!(matches!(items[0], Ok(ModelEvent::TextDelta { .. })));
    assert_eq!(last_error(&items), ModelError::Server { status: 500, message: "model overloaded".into() });
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn context_length_and_unknown_model_are_named() {
    let server = FakeServer::start().await;
    server.push(Reply::status(
        400,
        r#"{"error":{"message":"This model's maximum context length is 128000 tokens","code":"context_length_exceeded"}}"#,
    ));
    server.push(Reply::status(404, r#"{"error":{"message":"The model `nope` does not exist"}}"#));
    let p = provider(&server, ProviderKind::OpenAi, fast_options());
    let request = ModelRequest { messages: vec![Message::user("q")].into(), ..Default::default() };
    let first = collect(p.stream(request.clone(), CancellationToken::new())).await;
    assert_eq!(last_error(&first).code(), "context_length_exceeded");
    let second = collect(p.stream(request, CancellationToken::new())).await;
    let err = last_error(&second);
    assert_eq!(err.code(), "model_unavailable");
    assert!(err.to_string().contains("BDK_MODEL"), "{err}");
    assert_eq!(server.requests().len(), 2, "neither is retried");
}

#[tokio::test]
async fn connection_refused_is_a_network_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = HttpConfig {
        model: "m".into(),
        base_url: format!("http://127.0.0.1:{port}/v1"),
        api_key: None,
        params: ModelParams::default(),
        timeouts: fast_options().timeouts,
    };
    let provider = OpenAiProvider::new(ProviderKind::OpenAiCompatible, config).unwrap();
    let items = collect(provider.stream(ModelRequest::default(), CancellationToken::new())).await;
    let err = last_error(&items);
    assert_eq!(err.code(), "network", "{err}");
    assert!(err.is_retryable());
}
