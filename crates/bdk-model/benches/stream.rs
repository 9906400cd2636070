//! How much the provider adds on top of the network: streams a 100,000-token reply from the fake
//! server once as raw bytes and once through each HTTP provider, and prints tokens per second
//! and the ratio. Reports numbers; never fails on them. Run: `cargo bench -p bdk-model`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use bdk_model::{
    AnthropicProvider, HttpConfig, Message, ModelEvent, ModelParams, ModelProvider, ModelRequest, OpenAiProvider,
    ProviderKind, Timeouts,
};
use bdk_test_support::{FakeServer, Part, Reply, anthropic_sse, openai_sse};
use futures_util::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TOKENS: usize = 100_000;
/// SSE events per HTTP chunk, roughly what a fast server's writes coalesce to.
const EVENTS_PER_CHUNK: usize = 16;

fn body(format: &str) -> Vec<Part> {
    match format {
        "openai" => openai_sse::long_text_reply(TOKENS, EVENTS_PER_CHUNK),
        _ => anthropic_sse::long_text_reply(TOKENS, EVENTS_PER_CHUNK),
    }
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
    let request = ModelRequest { messages: vec![Message::user("go")].into(), ..Default::default() };
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
