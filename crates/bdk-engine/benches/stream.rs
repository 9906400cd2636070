//! Host overhead of one long streamed reply (`cargo bench -p bdk-engine --bench stream`): a
//! 100,000-token reply from the fake OpenAI-compatible server (`bdk-test-support`) read three
//! ways, best of three each:
//!
//! - raw: the HTTP body as bytes (the floor: socket, chunked decoding);
//! - provider: through `OpenAiProvider` (SSE parsing, JSON, typed events), as
//!   `bdk-model`'s `stream` bench does;
//! - engine: through the provider and a session on an `FsStore` (deltas batched into durable
//!   `message.appended` events, `message.completed`, `turn.completed`), timed from the request
//!   to the durable `session.waiting`.
//!
//! Prints tokens per second, the host overhead per token over raw, and what the reply left in
//! the log (events, bytes, group commits), on disk and on tmpfs (where fsync is free), so the two
//! show what durability costs. Reports numbers; never fails on them. `BDK_BENCH_TOKENS` scales.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_engine::{AgentConfig, Engine, Principal, StartSession};
use bdk_model::{
    HttpConfig, Message, ModelEvent, ModelParams, ModelProvider, ModelRequest, OpenAiProvider, ProviderKind, Timeouts,
};
use bdk_protocol::EventData;
use bdk_protocol::event::SessionMode;
use bdk_store::FsStore;
use bdk_test_support::{FakeServer, Part, Reply, openai_sse};
use bdk_tools::NoTools;
use futures_util::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// SSE events per HTTP chunk, as in `bdk-model`'s bench.
const EVENTS_PER_CHUNK: usize = 16;
const RUNS: usize = 3;

fn provider(server: &FakeServer) -> Arc<dyn ModelProvider> {
    let config = HttpConfig {
        model: "fake-model".into(),
        base_url: server.url(),
        api_key: None,
        params: ModelParams::default(),
        timeouts: Timeouts::default(),
    };
    Arc::new(OpenAiProvider::new(ProviderKind::OpenAiCompatible, config).unwrap())
}

async fn raw(server: &FakeServer) -> Duration {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.url()))
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

async fn provider_only(server: &FakeServer, tokens: usize) -> Duration {
    let started = Instant::now();
    let request = ModelRequest { messages: vec![Message::user("go")].into(), ..Default::default() };
    let mut stream = provider(server).stream(request, CancellationToken::new());
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if let ModelEvent::TextDelta { .. } = event.unwrap() {
            deltas += 1;
        }
    }
    assert_eq!(deltas, tokens);
    started.elapsed()
}

/// What one reply through the engine left behind.
#[derive(Debug, Clone, Copy)]
struct Logged {
    elapsed: Duration,
    events: u64,
    appended: usize,
    bytes: u64,
    commits: u64,
}

async fn through_engine(engine: &Engine, store: &FsStore) -> Logged {
    let principal = Principal::new("bench");
    let started = Instant::now();
    let session = engine
        .start_session(StartSession {
            message: "Write at length.".into(),
            principal: principal.clone(),
            channel: "http".into(),
            continuation_key: None,
            mode: SessionMode::Chat,
            title: None,
            dry_run: false,
            as_of: None,
            purpose: None,
            workspace_files: Vec::new(),
        })
        .await
        .unwrap()
        .session_id;
    let mut stream = engine.follow(&session, &principal, 0).await.unwrap();
    let mut appended = 0;
    while let Some(event) = stream.next().await {
        match &event.unwrap().data {
            EventData::MessageAppended(_) => appended += 1,
            EventData::TurnFailed(failed) => panic!("the turn failed: {}", failed.message),
            EventData::SessionWaiting(_) => break,
            _ => {}
        }
    }
    let elapsed = started.elapsed();
    let info = store.log_info(&session).await.unwrap();
    Logged { elapsed, events: info.events, appended, bytes: info.bytes, commits: info.commits }
}

fn per_sec(tokens: usize, d: Duration) -> f64 {
    tokens as f64 / d.as_secs_f64()
}

/// Host overhead of `through` over `floor`: µs per token and tokens per second.
fn overhead(tokens: usize, through: Duration, floor: Duration) -> String {
    let extra = through.saturating_sub(floor);
    let rate = if extra.is_zero() { f64::INFINITY } else { per_sec(tokens, extra) };
    format!("{:.2} µs/token ({rate:.0} tok/s)", extra.as_secs_f64() * 1e6 / tokens as f64)
}

async fn bench(label: &str, root: &Path, tokens: usize, parts: &[Part]) {
    let server = FakeServer::start().await;
    let store = FsStore::open(root.join("stream")).unwrap();
    let config = AgentConfig {
        slug: "stream".into(),
        instructions: "You are a benchmark.".into(),
        max_steps: 2,
        max_running_turns: 4,
        idle_timeout: Duration::from_secs(60),
    };
    let engine = Engine::new(config, store.stores(), provider(&server), Arc::new(NoTools));

    let (mut raw_best, mut provider_best) = (Duration::MAX, Duration::MAX);
    let mut engine_best: Option<Logged> = None;
    // Alternating, so no reader gets a warmer machine.
    for _ in 0..RUNS {
        server.push(Reply::sse(parts.to_vec()));
        raw_best = raw_best.min(raw(&server).await);
        server.push(Reply::sse(parts.to_vec()));
        provider_best = provider_best.min(provider_only(&server, tokens).await);
        server.push(Reply::sse(parts.to_vec()));
        let run = through_engine(&engine, &store).await;
        if engine_best.is_none_or(|best| run.elapsed < best.elapsed) {
            engine_best = Some(run);
        }
    }
    let engine_run = engine_best.unwrap();
    let text_bytes = tokens * 3;
    println!("{label}: {tokens} tokens ({text_bytes} bytes of text), best of {RUNS}");
    println!("  raw       {:>10.0} tok/s  {:>8.1} ms", per_sec(tokens, raw_best), ms(raw_best));
    println!(
        "  provider  {:>10.0} tok/s  {:>8.1} ms  host overhead over raw {}",
        per_sec(tokens, provider_best),
        ms(provider_best),
        overhead(tokens, provider_best, raw_best),
    );
    println!(
        "  engine    {:>10.0} tok/s  {:>8.1} ms  host overhead over raw {}; over the provider {}",
        per_sec(tokens, engine_run.elapsed),
        ms(engine_run.elapsed),
        overhead(tokens, engine_run.elapsed, raw_best),
        overhead(tokens, engine_run.elapsed, provider_best),
    );
    println!(
        "  log: {} events ({} message.appended, {:.0} tokens each), {} bytes ({:.2} bytes per text byte), {} group commits",
        engine_run.events,
        engine_run.appended,
        tokens as f64 / engine_run.appended.max(1) as f64,
        engine_run.bytes,
        engine_run.bytes as f64 / text_bytes as f64,
        engine_run.commits,
    );
    engine.drain(Duration::from_secs(5)).await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let tokens = std::env::var("BDK_BENCH_TOKENS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let parts = openai_sse::long_text_reply(tokens, EVENTS_PER_CHUNK);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let disk = tempfile::tempdir().unwrap();
        bench("disk, fsync", disk.path(), tokens, &parts).await;
        let shm = Path::new("/dev/shm");
        if let Some(tmpfs) = shm.is_dir().then(|| tempfile::tempdir_in(shm).ok()).flatten() {
            bench("tmpfs, fsync is free", tmpfs.path(), tokens, &parts).await;
        }
    });
}
