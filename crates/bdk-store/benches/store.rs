//! Event log benchmark: durable append throughput (one appender, 32 appenders with and without
//! group commit, and a raw one-fsync-per-line baseline), replay speed, and bytes per event.
//! Reports figures and ratios; it never passes or fails on absolute times.
//!
//! `cargo bench -p bdk-store --bench store` (set `BDK_BENCH_DIR` to measure another disk).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use bdk_protocol::event::{
    ActionCall, ActionResult, ActionsRequested, MessageReceived, StepCompleted, StepStarted, TextCompleted, TextDelta,
    TurnCompleted, TurnStarted, Usage,
};
use bdk_protocol::{CallId, EventData, SessionId, TurnId};
use bdk_store::{EventLog, FsStore, FsStoreOptions, NewEvent, SessionRecord, SessionStore};
use serde_json::json;

const SEQUENTIAL_APPENDS: usize = 400;
const CONCURRENT_APPENDERS: usize = 32;
const APPENDS_PER_APPENDER: usize = 60;
const REPLAY_EVENTS: usize = 100_000;

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let base = match std::env::var_os("BDK_BENCH_DIR") {
        Some(dir) => tempfile::tempdir_in(dir)?,
        None => tempfile::tempdir()?,
    };
    println!("bdk-store event log benchmark ({})", base.path().display());
    runtime.block_on(run(base.path()))
}

async fn run(base: &Path) -> Result<()> {
    let raw = raw_fsync_baseline(&base.join("raw.ndjson"), SEQUENTIAL_APPENDS)?;
    report("raw file, write + fdatasync per line", SEQUENTIAL_APPENDS, 1.0, raw);

    let (store, id) = fresh(base, "single", FsStoreOptions::default()).await?;
    let start = Instant::now();
    for n in 0..SEQUENTIAL_APPENDS {
        store.append(&id, vec![sample(n)]).await?;
    }
    let single = start.elapsed();
    let info = store.log_info(&id).await?;
    report("store, 1 appender", SEQUENTIAL_APPENDS, per_commit(&info), single);

    let total = CONCURRENT_APPENDERS * APPENDS_PER_APPENDER;
    let no_group = FsStoreOptions { max_batch_events: 1, ..FsStoreOptions::default() };
    let (elapsed_off, info_off) = concurrent(base, "nogroup", no_group).await?;
    report("store, 32 appenders, group commit off", total, per_commit(&info_off), elapsed_off);
    let (elapsed_on, info_on) = concurrent(base, "group", FsStoreOptions::default()).await?;
    report("store, 32 appenders, group commit on", total, per_commit(&info_on), elapsed_on);
    println!(
        "  group commit speedup with 32 appenders: {:.1}x ({} fsyncs instead of {})",
        elapsed_off.as_secs_f64() / elapsed_on.as_secs_f64(),
        info_on.commits,
        info_off.commits
    );
    println!(
        "  32 appenders with group commit vs raw one-fsync-per-append: {:.1}x",
        rate(total, elapsed_on) / rate(SEQUENTIAL_APPENDS, raw)
    );

    replay(base).await
}

async fn concurrent(base: &Path, name: &str, options: FsStoreOptions) -> Result<(Duration, bdk_store::LogInfo)> {
    let (store, id) = fresh(base, name, options).await?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for a in 0..CONCURRENT_APPENDERS {
        let (store, id) = (store.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..APPENDS_PER_APPENDER {
                store.append(&id, vec![sample(a * APPENDS_PER_APPENDER + n)]).await?;
            }
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = start.elapsed();
    Ok((elapsed, store.log_info(&id).await?))
}

async fn replay(base: &Path) -> Result<()> {
    let (store, id) = fresh(base, "replay", FsStoreOptions::default()).await?;
    for chunk in 0..REPLAY_EVENTS / 1000 {
        store.append(&id, (0..1000).map(|n| sample(chunk * 1000 + n)).collect()).await?;
    }
    let bytes = store.log_info(&id).await?.bytes;
    println!("\nreplay of {REPLAY_EVENTS} events ({:.1} MiB)", bytes as f64 / 1048576.0);
    println!("  bytes per event (realistic turn mix): {:.0}", bytes as f64 / REPLAY_EVENTS as f64);

    // A fresh store pays the open-time scan (torn-tail check, checkpoints) once.
    let reopened = FsStore::open(store.layout().root())?;
    let start = Instant::now();
    let info = reopened.log_info(&id).await?;
    let open = start.elapsed();
    println!("  open + recovery scan: {:>10.0} events/s ({:.1} ms)", rate(info.events as usize, open), ms(open));

    let start = Instant::now();
    let events = reopened.read(&id, 0, None).await?;
    let read = start.elapsed();
    println!("  read (parse to typed events): {:>10.0} events/s ({:.1} ms)", rate(events.len(), read), ms(read));

    let start = Instant::now();
    let mut stream = reopened.follow(&id, 0).await?;
    let mut n = 0;
    while n < REPLAY_EVENTS {
        match stream.next().await {
            Some(event) => {
                event?;
                n += 1;
            }
            None => break,
        }
    }
    let follow = start.elapsed();
    println!("  follow from 0 (replay part): {:>10.0} events/s ({:.1} ms)", rate(n, follow), ms(follow));

    let start = Instant::now();
    let tail = reopened.read(&id, REPLAY_EVENTS as u64 - 100, None).await?;
    println!("  read the last 100 (checkpoint seek): {:.2} ms", ms(start.elapsed()));
    anyhow::ensure!(tail.len() == 100);
    Ok(())
}

fn raw_fsync_baseline(path: &Path, n: usize) -> Result<Duration> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let line = format!("{}\n", serde_json::to_string(&json!({"type": "message.appended", "data": {"delta": "x"}}))?);
    let start = Instant::now();
    for _ in 0..n {
        file.write_all(line.as_bytes())?;
        file.sync_data()?;
    }
    Ok(start.elapsed())
}

async fn fresh(base: &Path, name: &str, options: FsStoreOptions) -> Result<(FsStore, SessionId)> {
    let store = FsStore::open_with(base.join(name), options)?;
    let id = SessionId::generate();
    store.create(SessionRecord::new(id.clone(), bdk_protocol::event::SessionMode::Chat, "http", "bench")).await?;
    Ok((store, id))
}

/// The n-th event of a repeating turn: mostly text deltas, some tool traffic, one summary.
fn sample(n: usize) -> NewEvent {
    let turn = TurnId::generate();
    let call_id = CallId::generate("get_weather");
    let data = match n % 20 {
        0 => EventData::MessageReceived(MessageReceived {
            text: "What's the weather in Paris tomorrow?".into(),
            principal: None,
        }),
        1 => EventData::TurnStarted(TurnStarted { model: Some("grok-4.5".into()) }),
        2 => EventData::StepStarted(StepStarted { step: 0 }),
        3 => EventData::ActionsRequested(ActionsRequested {
            calls: vec![ActionCall {
                call_id,
                tool_name: "get_weather".into(),
                input: json!({"city": "Paris", "days": 1}),
            }],
            direct: None,
        }),
        4 => EventData::ActionResult(ActionResult {
            call_id,
            tool_name: "get_weather".into(),
            is_error: false,
            result: json!({"city": "Paris", "forecast": [{"day": "2025-06-02", "highC": 24, "lowC": 15, "sky": "sunny"}]}),
            duration_ms: 42,
            stubbed: None,
            direct: None,
        }),
        17 => EventData::MessageCompleted(TextCompleted {
            text: "Tomorrow in Paris: sunny, high of 24°C and low of 15°C. A light jacket for the evening.".into(),
        }),
        18 => EventData::StepCompleted(StepCompleted {
            step: 1,
            duration_ms: 830,
            finish_reason: Some("stop".into()),
            usage: None,
        }),
        19 => EventData::TurnCompleted(TurnCompleted {
            usage: Usage { input_tokens: 2400, output_tokens: 120, cached_input_tokens: 2048, reasoning_tokens: 64 },
            estimated_cost_usd: Some(0.00231),
            model: Some("grok-4.5".into()),
            result: None,
            duration_ms: Some(1900),
        }),
        _ => EventData::MessageAppended(TextDelta { delta: "sunny, high of ".into() }),
    };
    NewEvent { turn_id: (!n.is_multiple_of(20)).then_some(turn), data }
}

fn per_commit(info: &bdk_store::LogInfo) -> f64 {
    info.events as f64 / info.commits.max(1) as f64
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

fn report(label: &str, appends: usize, events_per_fsync: f64, elapsed: Duration) {
    println!(
        "  {label:<42} {:>8.0} appends/s  ({:.2} ms/append, {events_per_fsync:.1} events per fsync)",
        rate(appends, elapsed),
        ms(elapsed) / appends as f64
    );
}
