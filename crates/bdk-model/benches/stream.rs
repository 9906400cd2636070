//! How much the provider adds on top of the network: streams a 100,000-token reply from the fake
//! server once as raw bytes and once through each HTTP provider, and prints tokens per second
//! and the ratio. Reports numbers; never fails on them. Run: `cargo bench -p bdk-model`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/suite/support/fake_server.rs"]
mod fake_server;

use std::time::{Duration, Instant};

use bdk_model::{
    AnthropicProvider, HttpConfig, Message, ModelEvent, ModelParams, ModelProvider, ModelRequest, OpenAiProvider,
    ProviderKind, Timeouts,
};
use fake_server::{FakeServer, Part, Reply};
use futures_util::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TOKENS: usize = 100_000;
/// SSE events per HTTP chunk, roughly what a fast server's writes coalesce to.
const EVENTS_PER_CHUNK: usize = 16;

fn body(format: &str) -> Vec<Part> {
    let mut events: Vec<String> = Vec::with_capacity(TOKENS + 8);
    match format {
        "openai" => {
            for i in 0..TOKENS {
                let chunk = json!({"choices": [{"index": 0, "delta": {"content": format!("t{} ", i % 10)}}]});
                events.push(format!("data: {chunk}\n\n"));
            }
            events.push(format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            ));
            events.push("data: [DONE]\n\n".into());
        }
        _ => {
            let start = json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}});
            events.push(format!("event: message_start\ndata: {start}\n\n"));
            let block =
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
            events.push(format!("event: content_block_start\ndata: {block}\n\n"));
            for i in 0..TOKENS {
                let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!("t{} ", i % 10)}});
                events.push(format!("event: content_block_delta\ndata: {delta}\n\n"));
            }
            let end = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": TOKENS}});
            events.push(format!("event: message_delta\ndata: {end}\n\n"));
            events.push(format!("event: message_stop\ndata: {}\n\n", json!({"type": "message_stop"})));
        }
    }
    events.chunks(EVENTS_PER_CHUNK).map(|group| Part::Bytes(group.concat().into_bytes())).collect()
}

async fn raw_read(server: &FakeServer, path: &str) -> Duration {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{}/{path}", server.url()))
        .json(&json!({"model": "m", "stream": true}))
        .send()
        .await
        .unwrap();
    let mut bytes = response.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        chunk.unwrap();
    }
    started.elapsed()
}

async fn provider_read(provider: &dyn ModelProvider) -> Duration {
    let started = Instant::now();
    let request = ModelRequest { messages: vec![Message::user("go")], ..Default::default() };
    let mut stream = provider.stream(request, CancellationToken::new());
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if let ModelEvent::TextDelta { .. } = event.unwrap() {
            deltas += 1;
        }
    }
    assert_eq!(deltas, TOKENS);
    started.elapsed()
}

fn config(server: &FakeServer) -> HttpConfig {
    HttpConfig {
        model: "m".into(),
        base_url: server.url(),
        api_key: None,
        params: ModelParams::default(),
        timeouts: Timeouts::default(),
    }
}

#[tokio::main]
async fn main() {
    for format in ["openai", "anthropic"] {
        let parts = body(format);
        let server = FakeServer::start().await;
        let mut raw = Duration::MAX;
        let mut through = Duration::MAX;
        // Best of three each, alternating, so neither side gets a warmer machine.
        for _ in 0..3 {
            server.push(Reply::sse(parts.clone()));
            raw = raw.min(raw_read(&server, "raw").await);
            server.push(Reply::sse(parts.clone()));
            let elapsed = if format == "openai" {
                provider_read(&OpenAiProvider::new(ProviderKind::OpenAiCompatible, config(&server)).unwrap()).await
            } else {
                provider_read(&AnthropicProvider::new(config(&server)).unwrap()).await
            };
            through = through.min(elapsed);
        }
        let per_sec = |d: Duration| TOKENS as f64 / d.as_secs_f64();
        let overhead = through.saturating_sub(raw);
        println!(
            "{format:>9}: {TOKENS} tokens  raw {:>9.0} tok/s  provider {:>9.0} tok/s  ratio {:.2}x  host overhead {:.2} µs/token ({:.0} tok/s)",
            per_sec(raw),
            per_sec(through),
            through.as_secs_f64() / raw.as_secs_f64(),
            overhead.as_secs_f64() * 1e6 / TOKENS as f64,
            if overhead.is_zero() { f64::INFINITY } else { per_sec(overhead) },
        );
    }
}
