//! One conformance suite that every HTTP provider passes: the same scenarios (text, reasoning,
//! one and several tool calls with fragmented arguments, split UTF-8, empty deltas, a usage-only
//! final chunk, missing end marker, disconnects, malformed chunks, 429 and 5xx retries, 401,
//! timeouts, cancellation), each written once against [`Dialect`] and run for both wire formats.

use std::sync::Arc;
use std::time::Duration;

use bdk_model::{
    FinishReason, Message, ModelError, ModelEvent, ModelProvider, ModelRequest, ProviderKind, ProviderOptions,
    TimeoutPhase, ToolCall, Usage,
};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use bdk_test_support::fake_server::{End, FakeServer, Part, Reply, rechunk};
use bdk_test_support::{anthropic_sse as an, openai_sse as oa};

use super::support::{WAIT, collect, events, fast_options, last_error, reasoning_of, text_of};

/// How one wire format says each scenario.
trait Dialect {
    fn provider(&self, server: &FakeServer, options: ProviderOptions) -> Arc<dyn ModelProvider>;
    /// A reply's opening (before any content).
    fn open(&self) -> Vec<Part>;
    fn text(&self, text: &str) -> Part;
    fn empty_text(&self) -> Part;
    fn reasoning(&self, text: &str) -> Vec<Part>;
    /// Tool calls as `(id, name, argument fragments)`, fragments interleaved where the format allows.
    fn tool_calls(&self, calls: &[(&str, &str, &[&str])]) -> Vec<Part>;
    /// The closing with usage (input 10, output 5) and a finish reason, without the end marker.
    fn close(&self, reason: &str) -> Vec<Part>;
    /// The end marker (`[DONE]`, `message_stop`).
    fn end_marker(&self) -> Part;
    fn stop(&self) -> &'static str;
    fn tool_stop(&self) -> &'static str;

    fn reply(&self, body: Vec<Part>, reason: &str) -> Vec<Part> {
        let mut parts = self.open();
        parts.extend(body);
        parts.extend(self.close(reason));
        parts.push(self.end_marker());
        parts
    }
}

struct OpenAi;
struct Anthropic;

fn request() -> ModelRequest {
    ModelRequest { system: Some("be brief".into()), messages: vec![Message::user("hi")].into(), ..Default::default() }
}

impl Dialect for OpenAi {
    fn provider(&self, server: &FakeServer, options: ProviderOptions) -> Arc<dyn ModelProvider> {
        super::openai::provider(server, ProviderKind::OpenAiCompatible, options)
    }
    fn open(&self) -> Vec<Part> {
        vec![oa::role()]
    }
    fn text(&self, text: &str) -> Part {
        oa::text(text)
    }
    fn empty_text(&self) -> Part {
        oa::text("")
    }
    fn reasoning(&self, text: &str) -> Vec<Part> {
        vec![oa::reasoning_content(text)]
    }
    fn tool_calls(&self, calls: &[(&str, &str, &[&str])]) -> Vec<Part> {
        let mut parts: Vec<Part> = Vec::new();
        for (i, (id, name, _)) in calls.iter().enumerate() {
            parts.push(oa::tool_call(i as u64, Some(id), Some(name), ""));
        }
        let longest = calls.iter().map(|(_, _, f)| f.len()).max().unwrap_or(0);
        for step in 0..longest {
            for (i, (_, _, fragments)) in calls.iter().enumerate() {
                if let Some(fragment) = fragments.get(step) {
                    parts.push(oa::tool_call(i as u64, None, None, fragment));
                }
            }
        }
        parts
    }
    fn close(&self, reason: &str) -> Vec<Part> {
        vec![oa::finish(reason), oa::usage(10, 5, 0, 0)]
    }
    fn end_marker(&self) -> Part {
        oa::done()
    }
    fn stop(&self) -> &'static str {
        "stop"
    }
    fn tool_stop(&self) -> &'static str {
        "tool_calls"
    }
}

impl Dialect for Anthropic {
    fn provider(&self, server: &FakeServer, options: ProviderOptions) -> Arc<dyn ModelProvider> {
        super::anthropic::provider(server, options)
    }
    fn open(&self) -> Vec<Part> {
        vec![an::message_start(10, 0, 0), an::ping(), an::text_start(0)]
    }
    fn text(&self, text: &str) -> Part {
        an::text(0, text)
    }
    fn empty_text(&self) -> Part {
        an::text(0, "")
    }
    fn reasoning(&self, text: &str) -> Vec<Part> {
        // The text block opened by `open` is index 0; thinking takes index 1 here.
        vec![an::thinking_start(1), an::thinking(1, text), an::signature(1, "sig"), an::block_stop(1)]
    }
    fn tool_calls(&self, calls: &[(&str, &str, &[&str])]) -> Vec<Part> {
        let mut parts = Vec::new();
        for (i, (id, name, fragments)) in calls.iter().enumerate() {
            let index = i as u64 + 1;
            parts.push(an::tool_use_start(index, id, name));
            parts.extend(fragments.iter().map(|f| an::input_json(index, f)));
            parts.push(an::block_stop(index));
        }
        parts
    }
    fn close(&self, reason: &str) -> Vec<Part> {
        vec![an::block_stop(0), an::message_delta(reason, 5)]
    }
    fn end_marker(&self) -> Part {
        an::message_stop()
    }
    fn stop(&self) -> &'static str {
        "end_turn"
    }
    fn tool_stop(&self) -> &'static str {
        "tool_use"
    }
}

/// Runs `scenario` for every dialect.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod openai_compatible { $( #[tokio::test] async fn $name() { super::$name(&super::OpenAi).await } )* }
        mod anthropic_messages { $( #[tokio::test] async fn $name() { super::$name(&super::Anthropic).await } )* }
    };
}

conformance!(
    text_and_usage,
    reasoning_then_text,
    one_tool_call,
    parallel_fragmented_tool_calls,
    utf8_split_across_chunks,
    empty_deltas_are_skipped,
    usage_only_final_chunk,
    missing_end_marker_is_tolerated,
    disconnect_mid_stream,
    malformed_chunk,
    rate_limit_with_retry_after_then_success,
    server_error_then_success,
    unauthorized_is_not_retried,
    slow_first_byte_times_out,
    idle_stream_times_out_without_retry,
    cancellation_mid_stream_drops_the_connection,
);

async fn run(dialect: &dyn Dialect, server: &FakeServer) -> Vec<Result<ModelEvent, ModelError>> {
    let provider = dialect.provider(server, fast_options());
    collect(provider.stream(request(), CancellationToken::new())).await
}

async fn text_and_usage(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(Reply::sse(d.reply(vec![d.text("Hello"), d.text(", world")], d.stop())));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "Hello, world");
    let usage = events.iter().find_map(|e| if let ModelEvent::Usage { usage } = e { Some(*usage) } else { None });
    assert_eq!(usage.map(|u| (u.input_tokens, u.output_tokens)), Some((10, 5)));
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
    assert_eq!(server.requests().len(), 1);
}

async fn reasoning_then_text(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let mut body = d.reasoning("Think.");
    body.push(d.text("Answer."));
    server.push(Reply::sse(d.reply(body, d.stop())));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(reasoning_of(&events), "Think.");
    assert_eq!(text_of(&events), "Answer.");
}

async fn one_tool_call(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(Reply::sse(d.reply(d.tool_calls(&[("call_a", "lookup", &[r#"{"q":"#, r#""x"}"#])]), d.tool_stop())));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    let calls: Vec<_> =
        events.iter().filter_map(|e| if let ModelEvent::ToolCall { call } = e { Some(call) } else { None }).collect();
    assert_eq!(calls, [&ToolCall { id: "call_a".into(), name: "lookup".into(), arguments: r#"{"q":"x"}"#.into() }]);
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::ToolCalls }));
}

async fn parallel_fragmented_tool_calls(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let calls: &[(&str, &str, &[&str])] = &[
        ("call_1", "weather", &[r#"{"ci"#, r#"ty": "Par"#, r#"is"}"#]),
        ("call_2", "time", &[r#"{"tz":"#, r#" "UTC"}"#]),
        ("call_3", "noop", &[]),
    ];
    server.push(Reply::sse(d.reply(d.tool_calls(calls), d.tool_stop())));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| if let ModelEvent::ToolCall { call } = e { Some(call.clone()) } else { None })
        .collect();
    assert_eq!(calls.len(), 3, "{events:?}");
    assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("call_1", "weather"));
    assert_eq!(calls[0].arguments_json().unwrap(), serde_json::json!({"city": "Paris"}));
    assert_eq!(calls[1].arguments_json().unwrap(), serde_json::json!({"tz": "UTC"}));
    assert_eq!(calls[2].arguments, "{}");
    // Every call comes before the usage and the finish.
    let last_call = events.iter().rposition(|e| matches!(e, ModelEvent::ToolCall { .. })).unwrap();
    let usage = events.iter().position(|e| matches!(e, ModelEvent::Usage { .. })).unwrap();
    assert!(last_call < usage && usage < events.len() - 1);
}

async fn utf8_split_across_chunks(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let text = "h\u{e9}llo \u{1F600} \u{4E16}\u{754C}";
    // Three-byte pieces cut every multi-byte character and every line somewhere.
    server.push(Reply::sse(rechunk(d.reply(vec![d.text(text)], d.stop()), 3)));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), text);
}

async fn empty_deltas_are_skipped(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(Reply::sse(d.reply(vec![d.empty_text(), d.text("x"), d.empty_text()], d.stop())));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    let deltas: Vec<_> = events.iter().filter(|e| matches!(e, ModelEvent::TextDelta { .. })).collect();
    assert_eq!(deltas, [&ModelEvent::TextDelta { text: "x".into() }]);
}

async fn usage_only_final_chunk(d: &dyn Dialect) {
    // Usage arrives after all content in a final chunk of its own: OpenAI's `choices: []` chunk
    // after the finish-reason chunk; Anthropic's closing `message_delta` (output tokens) adding to
    // `message_start`'s input count. Usage is reported once, whole, and `finish` stays last.
    let server = FakeServer::start().await;
    let mut parts = d.open();
    parts.push(d.text("x"));
    parts.extend(d.close(d.stop()));
    parts.push(d.end_marker());
    server.push(Reply::sse(parts));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    let usages: Vec<Usage> =
        events.iter().filter_map(|e| if let ModelEvent::Usage { usage } = e { Some(*usage) } else { None }).collect();
    assert_eq!(usages.iter().map(|u| (u.input_tokens, u.output_tokens)).collect::<Vec<_>>(), [(10, 5)], "{events:?}");
    let finishes = events.iter().filter(|e| matches!(e, ModelEvent::Finish { .. })).count();
    assert_eq!(finishes, 1, "{events:?}");
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

async fn missing_end_marker_is_tolerated(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let mut parts = d.open();
    parts.push(d.text("done"));
    parts.extend(d.close(d.stop()));
    server.push(Reply::sse(parts));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "done");
    assert_eq!(events.last(), Some(&ModelEvent::Finish { reason: FinishReason::Stop }));
}

async fn disconnect_mid_stream(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let mut parts = d.open();
    parts.push(d.text("partial"));
    server.push(Reply::Sse { parts, end: End::Abort });
    let items = run(d, &server).await;
    assert!(matches!(items.first(), Some(Ok(ModelEvent::TextDelta { .. }))), "{items:?}");
    assert_eq!(last_error(&items).code(), "network", "{items:?}");
    assert_eq!(server.requests().len(), 1, "output was streamed: no retry");
}

async fn malformed_chunk(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let mut parts = d.open();
    parts.push(Part::Bytes(b"data: {\"choices\": [oops\n\n".to_vec()));
    server.push(Reply::sse(parts));
    let items = run(d, &server).await;
    assert!(matches!(last_error(&items), ModelError::MalformedStream { .. }), "{items:?}");
    assert_eq!(server.requests().len(), 1, "malformed streams are not retried");
}

async fn rate_limit_with_retry_after_then_success(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(
        Reply::status(429, r#"{"error":{"message":"slow down","type":"rate_limit_error"}}"#)
            .with_header("retry-after-ms", "300"),
    );
    server.push(Reply::sse(d.reply(vec![d.text("ok")], d.stop())));
    let started = std::time::Instant::now();
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "ok");
    assert_eq!(server.requests().len(), 2);
    assert!(started.elapsed() >= Duration::from_millis(300), "retry-after was not honoured");
}

async fn server_error_then_success(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(Reply::status(500, r#"{"error":{"message":"oops"}}"#));
    server.push(Reply::status(503, "upstream unavailable"));
    server.push(Reply::sse(d.reply(vec![d.text("ok")], d.stop())));
    let events = events(d.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&events), "ok");
    assert_eq!(server.requests().len(), 3);
}

async fn unauthorized_is_not_retried(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(Reply::status(401, r#"{"error":{"message":"invalid x-api-key","type":"authentication_error"}}"#));
    let items = run(d, &server).await;
    assert_eq!(last_error(&items), ModelError::Authentication { message: "invalid x-api-key".into() });
    assert_eq!(server.requests().len(), 1);
}

async fn slow_first_byte_times_out(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    server.push(Reply::Hang);
    let mut options = fast_options();
    options.timeouts.first_byte = Duration::from_millis(200);
    options.retry.max_retries = 0;
    let items = collect(d.provider(&server, options).stream(request(), CancellationToken::new())).await;
    assert!(matches!(last_error(&items), ModelError::Timeout { phase: TimeoutPhase::FirstByte, .. }), "{items:?}");

    // Headers at once, then a body that starts too late: still the first-byte deadline.
    let mut parts = vec![Part::Delay(Duration::from_secs(2))];
    parts.extend(d.reply(vec![d.text("late")], d.stop()));
    server.push(Reply::sse(parts));
    let items = collect(d.provider(&server, options).stream(request(), CancellationToken::new())).await;
    assert!(matches!(last_error(&items), ModelError::Timeout { phase: TimeoutPhase::FirstByte, .. }), "{items:?}");
    assert_eq!(server.requests().len(), 2);
}

async fn idle_stream_times_out_without_retry(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let mut parts = d.open();
    parts.push(d.text("thinking..."));
    server.push(Reply::Sse { parts, end: End::Hang });
    let mut options = fast_options();
    // The text must beat the idle deadline even when the fake server is slow to write it.
    options.timeouts.idle = Duration::from_millis(1000);
    let items = collect(d.provider(&server, options).stream(request(), CancellationToken::new())).await;
    assert!(matches!(items.first(), Some(Ok(ModelEvent::TextDelta { .. }))), "{items:?}");
    assert!(matches!(last_error(&items), ModelError::Timeout { phase: TimeoutPhase::Idle, .. }), "{items:?}");
    assert_eq!(server.requests().len(), 1, "output was streamed: no retry");
}

async fn cancellation_mid_stream_drops_the_connection(d: &dyn Dialect) {
    let server = FakeServer::start().await;
    let mut parts = d.open();
    parts.push(d.text("first"));
    server.push(Reply::Sse { parts, end: End::Hang });
    let cancel = CancellationToken::new();
    let mut stream = d.provider(&server, fast_options()).stream(request(), cancel.clone());
    let first = tokio::time::timeout(WAIT, stream.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(ModelEvent::TextDelta { .. }))), "{first:?}");
    cancel.cancel();
    let next = tokio::time::timeout(WAIT, stream.next()).await.expect("cancellation ended the hung stream");
    assert_eq!(next, Some(Err(ModelError::Cancelled)));
    assert_eq!(tokio::time::timeout(WAIT, stream.next()).await.unwrap(), None);
    server.wait_for_disconnects(1).await;
}

#[tokio::test]
async fn usage_counts_survive_the_trip() {
    // OpenAI-specific token details: cached prompt tokens and reasoning tokens.
    let server = FakeServer::start().await;
    server.push(Reply::sse(vec![oa::text("x"), oa::finish("stop"), oa::usage(100, 40, 60, 25), oa::done()]));
    let events = events(OpenAi.provider(&server, fast_options()).stream(request(), CancellationToken::new())).await;
    let usage = events.iter().find_map(|e| if let ModelEvent::Usage { usage } = e { Some(*usage) } else { None });
    let expected = Usage {
        input_tokens: 100,
        output_tokens: 40,
        cached_input_tokens: 60,
        cache_write_tokens: 0,
        reasoning_tokens: Some(25),
    };
    assert_eq!(usage, Some(expected));
}
