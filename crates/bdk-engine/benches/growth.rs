//! What a turn costs as its conversation grows (`cargo bench -p bdk-engine --bench growth`):
//! one session of sequential text turns with the scripted provider in-process, state on tmpfs
//! where there is one. Prints allocations, bytes allocated and CPU per turn for the first
//! follow-ups and for the last ones, and their ratio: a host whose per-turn work is flat shows
//! ~1.0; one that copies the history every turn or step grows with it.
//!
//! Prints figures; never fails on them. `BDK_BENCH_TURNS` sets the conversation's length
//! (default 200); each figure averages `BDK_BENCH_WINDOW` turns (default 10).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_engine::{Admission, AgentConfig, Engine, FollowUp, Principal, StartSession};
use bdk_model::ScriptedProvider;
use bdk_protocol::EventData;
use bdk_protocol::event::SessionMode;
use bdk_store::{EventStream, FsStore};
use bdk_tools::NoTools;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

async fn next_waiting(stream: &mut EventStream) {
    while let Some(event) = stream.next().await {
        if matches!(event.unwrap().data, EventData::SessionWaiting(_)) {
            return;
        }
    }
    panic!("stream ended");
}

/// CPU time of this process so far: the sum over its threads of the time on a CPU, from
/// `/proc/self/task/*/schedstat` (nanoseconds; `/proc/self/stat` counts 10 ms ticks).
fn cpu_time() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// One turn's figures.
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    allocations: usize,
    bytes: usize,
    cpu: Duration,
    wall: Duration,
}

impl Cost {
    fn mean(costs: &[Cost]) -> Cost {
        let n = costs.len().max(1);
        Cost {
            allocations: costs.iter().map(|c| c.allocations).sum::<usize>() / n,
            bytes: costs.iter().map(|c| c.bytes).sum::<usize>() / n,
            cpu: costs.iter().map(|c| c.cpu).sum::<Duration>() / n as u32,
            wall: costs.iter().map(|c| c.wall).sum::<Duration>() / n as u32,
        }
    }
}

async fn conversation(root: &Path, turns: usize, window: usize) {
    let store = FsStore::open(root.join("growth")).unwrap();
    let config = AgentConfig {
        slug: "bench".into(),
        instructions: "You are a benchmark. ".repeat(50),
        max_steps: 4,
        max_running_turns: 64,
        idle_timeout: Duration::from_secs(600),
    };
    let engine = Engine::new(config, store.stores(), Arc::new(ScriptedProvider::echo()), Arc::new(NoTools));
    let principal = Principal::new("bench");
    let started = engine
        .start_session(StartSession {
            message: "hello".into(),
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
        .unwrap();
    let id = started.session_id.clone();
    let mut stream = engine.follow(&id, &principal, 0).await.unwrap();
    next_waiting(&mut stream).await;
    let mut token = started.continuation_token;
    let mut costs = Vec::with_capacity(turns);
    for i in 1..turns {
        let region = Region::new(GLOBAL);
        let (cpu0, wall0) = (cpu_time(), Instant::now());
        let request = FollowUp {
            message: format!("follow-up number {i}, a sentence of ordinary length for a chat message"),
            principal: principal.clone(),
            continuation_token: token,
            admission: Admission::Preempt,
            workspace_files: Vec::new(),
        };
        token = engine.follow_up(&id, request).await.unwrap().continuation_token;
        next_waiting(&mut stream).await;
        let stats = region.change();
        costs.push(Cost {
            allocations: stats.allocations + stats.reallocations,
            bytes: stats.bytes_allocated + stats.bytes_reallocated.max(0) as usize,
            cpu: cpu_time() - cpu0,
            wall: wall0.elapsed(),
        });
    }
    let window = window.min(costs.len() / 2).max(1);
    let first = Cost::mean(&costs[..window]);
    let last = Cost::mean(&costs[costs.len() - window..]);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("one conversation of {turns} text turns; means over {window} turns:");
    println!(
        "  first follow-ups: {} allocations, {} bytes, CPU {:.0} us, wall {:.0} us per turn",
        first.allocations,
        first.bytes,
        us(first.cpu),
        us(first.wall)
    );
    println!(
        "  last follow-ups:  {} allocations, {} bytes, CPU {:.0} us, wall {:.0} us per turn",
        last.allocations,
        last.bytes,
        us(last.cpu),
        us(last.wall)
    );
    println!(
        "  last / first: allocations {:.2}x, bytes {:.2}x, CPU {:.2}x, wall {:.2}x",
        last.allocations as f64 / first.allocations.max(1) as f64,
        last.bytes as f64 / first.bytes.max(1) as f64,
        us(last.cpu) / us(first.cpu).max(1.0),
        us(last.wall) / us(first.wall).max(1.0),
    );
    engine.drain(Duration::from_secs(5)).await;
}

fn main() {
    let turns = env_usize("BDK_BENCH_TURNS", 200);
    let window = env_usize("BDK_BENCH_WINDOW", 10);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
        conversation(dir.path(), turns, window).await;
    });
}
