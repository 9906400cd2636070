//! Engine benchmark (`cargo bench -p bdk-engine --bench turns`): host overhead per text-only
//! turn with the scripted provider in-process (p50/p99, on disk and on tmpfs where fsync is
//! free, so the two show what durability costs), turns per second with concurrent sessions,
//! resident memory of 10,000 idle sessions created through the engine, and the CPU a turn costs
//! with OpenTelemetry export on (spans and metrics over OTLP/HTTP to a local sink) versus off.
//!
//! Prints figures; never fails on them. Set `BDK_BENCH_TURNS`, `BDK_BENCH_SESSIONS` to scale;
//! `BDK_BENCH_SESSIONS=0 BDK_BENCH_OTEL_ONLY=1` runs only the telemetry figure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_engine::{Admission, AgentConfig, Engine, FollowUp, Principal, StartSession};
use bdk_model::ScriptedProvider;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{EventData, SessionId};
use bdk_store::{EventStream, FsStore};
use bdk_tools::NoTools;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config(idle: Duration) -> AgentConfig {
    AgentConfig {
        slug: "bench".into(),
        instructions: "You are a benchmark.".into(),
        max_steps: 4,
        max_running_turns: 64,
        idle_timeout: idle,
    }
}

fn engine(root: &Path, idle: Duration) -> Engine {
    engine_and_store(root, idle).0
}

fn engine_and_store(root: &Path, idle: Duration) -> (Engine, FsStore) {
    let store = FsStore::open(root.join("bench")).unwrap();
    let engine = Engine::new(config(idle), store.stores(), Arc::new(ScriptedProvider::echo()), Arc::new(NoTools));
    (engine, store)
}

fn start(message: &str) -> StartSession {
    StartSession {
        message: message.into(),
        principal: Principal::new("bench"),
        channel: "http".into(),
        continuation_key: None,
        mode: SessionMode::Chat,
        title: None,
        dry_run: false,
        as_of: None,
        purpose: None,
        workspace_files: Vec::new(),
    }
}

/// Reads the stream until the next `session.waiting`.
async fn next_waiting(stream: &mut EventStream) {
    while let Some(event) = stream.next().await {
        if matches!(event.unwrap().data, EventData::SessionWaiting(_)) {
            return;
        }
    }
    panic!("stream ended");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Sequential text turns: sessions of `per_session` turns each (a start, then follow-ups),
/// timed from the request to the durable `session.waiting`, as a client following the stream
/// sees it.
async fn latency(root: &Path, label: &str, turns: usize, per_session: usize) {
    let engine = engine(root, Duration::from_secs(60));
    let principal = Principal::new("bench");
    let mut samples = Vec::with_capacity(turns);
    while samples.len() < turns {
        let t0 = Instant::now();
        let started = engine.start_session(start("hello")).await.unwrap();
        let id = started.session_id.clone();
        let mut stream = engine.follow(&id, &principal, 0).await.unwrap();
        next_waiting(&mut stream).await;
        samples.push(t0.elapsed());
        let mut token = started.continuation_token;
        for i in 1..per_session {
            let t0 = Instant::now();
            let request = FollowUp {
                message: format!("message {i}"),
                principal: principal.clone(),
                continuation_token: token,
                admission: Admission::Preempt,
                workspace_files: Vec::new(),
            };
            token = engine.follow_up(&id, request).await.unwrap().continuation_token;
            next_waiting(&mut stream).await;
            samples.push(t0.elapsed());
        }
    }
    samples.sort();
    let total: Duration = samples.iter().sum();
    println!(
        "turn latency ({label}; {} sequential text turns, {per_session} per session; 3 durable appends each): \
         p50 {:.3} ms, p99 {:.3} ms, mean {:.3} ms",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99)),
        ms(total / samples.len() as u32),
    );
    engine.drain(Duration::from_secs(5)).await;
}

/// `sessions` sessions running `turns` turns each, all at once.
async fn throughput(root: &Path, label: &str, sessions: usize, turns: usize) {
    let engine = engine(root, Duration::from_secs(60));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            let principal = Principal::new("bench");
            let started = engine.start_session(start(&format!("session {s}"))).await.unwrap();
            let id = started.session_id.clone();
            let mut stream = engine.follow(&id, &principal, 0).await.unwrap();
            next_waiting(&mut stream).await;
            let mut token = started.continuation_token;
            for i in 1..turns {
                let request = FollowUp {
                    message: format!("message {i}"),
                    principal: principal.clone(),
                    continuation_token: token,
                    admission: Admission::Preempt,
                    workspace_files: Vec::new(),
                };
                token = engine.follow_up(&id, request).await.unwrap().continuation_token;
                next_waiting(&mut stream).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = t0.elapsed();
    let total = sessions * turns;
    println!(
        "throughput ({label}, {sessions} concurrent sessions x {turns} turns): {total} turns in {:.2} s = {:.0} turns/s",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    engine.drain(Duration::from_secs(5)).await;
}

/// CPU time (user + system) of this process so far: the turns and every thread, the
/// exporters' included.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state; 100 ticks a second.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A local OTLP/HTTP sink: answers every request 200 with an empty body, keeping connections.
fn otlp_sink() -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if writer.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// Sequential text turns with telemetry off and on (spans and metrics exported to a local
/// sink, flushed at the end and counted): a warm-up round, then `OTEL_ROUNDS` rounds of each,
/// alternating to even out noise. Reports CPU per turn.
async fn telemetry_overhead(root: &Path, turns: usize) {
    let sink = otlp_sink();
    let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", sink.clone())];
    let config = bdk_telemetry::OtelConfig::from_lookup(
        |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone()),
        "bench",
    )
    .unwrap()
    .unwrap();
    let mut cpu = [Duration::ZERO; 2];
    let mut wall = [Duration::ZERO; 2];
    const OTEL_ROUNDS: usize = 3;
    for round in 0..=2 * OTEL_ROUNDS {
        // Round 0 warms the allocator, the page cache and the runtime, and is not counted.
        let on = round % 2 == 1;
        let installed = if on {
            bdk_telemetry::export::install(Some(&config), false, "bench").unwrap()
        } else {
            bdk_telemetry::export::Installed::default()
        };
        let store = FsStore::open(root.join(format!("otel-{round}"))).unwrap();
        let options = bdk_engine::EngineOptions { telemetry: installed.telemetry.clone(), ..Default::default() };
        let engine = Engine::with_options(
            config_for_bench(),
            store.stores(),
            Arc::new(ScriptedProvider::echo()),
            Arc::new(NoTools),
            options,
        );
        let principal = Principal::new("bench");
        let (cpu0, wall0) = (cpu_time(), Instant::now());
        let mut done = 0;
        while done < turns {
            let started = engine.start_session(start("hello")).await.unwrap();
            let id = started.session_id.clone();
            let mut stream = engine.follow(&id, &principal, 0).await.unwrap();
            next_waiting(&mut stream).await;
            let mut token = started.continuation_token;
            done += 1;
            for i in 1..10.min(turns - done + 1) {
                let request = FollowUp {
                    message: format!("message {i}"),
                    principal: principal.clone(),
                    continuation_token: token,
                    admission: Admission::Preempt,
                    workspace_files: Vec::new(),
                };
                token = engine.follow_up(&id, request).await.unwrap().continuation_token;
                next_waiting(&mut stream).await;
                done += 1;
            }
        }
        engine.drain(Duration::from_secs(5)).await;
        // The export is part of the cost: flush it before reading the clock.
        tokio::task::spawn_blocking(move || installed.shutdown()).await.unwrap();
        if round == 0 {
            continue;
        }
        let i = usize::from(on);
        cpu[i] += cpu_time() - cpu0;
        wall[i] += wall0.elapsed();
    }
    let per_turn = |d: Duration| d.as_secs_f64() * 1e6 / (OTEL_ROUNDS * turns) as f64;
    println!(
        "telemetry overhead ({turns} sequential text turns x {OTEL_ROUNDS} rounds each; spans + metrics to a local OTLP sink): \
         CPU per turn off {:.0} us, on {:.0} us ({:+.1}%); wall per turn off {:.0} us, on {:.0} us",
        per_turn(cpu[0]),
        per_turn(cpu[1]),
        (cpu[1].as_secs_f64() / cpu[0].as_secs_f64().max(1e-9) - 1.0) * 100.0,
        per_turn(wall[0]),
        per_turn(wall[1]),
    );
}

fn config_for_bench() -> AgentConfig {
    config(Duration::from_secs(60))
}

/// Creates `count` sessions through the engine (one turn each), lets every actor retire, and
/// reports resident memory before and after.
async fn idle_memory(root: &Path, count: usize) {
    let (engine, store) = engine_and_store(root, Duration::from_millis(200));
    let before = rss_kib();
    let t0 = Instant::now();
    let mut ids: Vec<SessionId> = Vec::with_capacity(count);
    let batch = 200;
    for chunk in 0..count.div_ceil(batch) {
        let mut tasks = Vec::new();
        for i in 0..batch.min(count - chunk * batch) {
            let engine = engine.clone();
            tasks.push(tokio::spawn(async move {
                let started = engine.start_session(start(&format!("hello {chunk}/{i}"))).await.unwrap();
                let mut stream = engine.follow(&started.session_id, &Principal::new("bench"), 0).await.unwrap();
                next_waiting(&mut stream).await;
                started.session_id
            }));
        }
        for task in tasks {
            ids.push(task.await.unwrap());
        }
    }
    let created = t0.elapsed();
    let peak = rss_kib();
    // Let every actor pass its idle timeout and retire, releasing its log.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let busy = ids.iter().filter(|id| engine.is_busy(id)).count();
    let after = rss_kib();
    println!(
        "idle sessions: {count} created in {:.1} s; VmRSS before {} MiB, after creating {} MiB, \
         after actors retired {} MiB => {:.1} KiB per idle session ({busy} busy, {} logs open)",
        created.as_secs_f64(),
        before / 1024,
        peak / 1024,
        after / 1024,
        (after.saturating_sub(before)) as f64 / count as f64,
        store.open_logs(),
    );
    // The sessions are still there: a follow-up to an old one re-creates its actor.
    let listed = engine.list(bdk_engine::ListScope::All).await.unwrap().len();
    println!("idle sessions: {listed} listed");
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let turns = env_usize("BDK_BENCH_TURNS", 1000);
    let sessions = env_usize("BDK_BENCH_SESSIONS", 10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let disk = tempfile::tempdir().unwrap();
        let shm = Path::new("/dev/shm");
        let tmpfs = if shm.is_dir() { tempfile::tempdir_in(shm).ok() } else { None };

        // Memory first, on the cleanest heap.
        if sessions > 0 {
            idle_memory(disk.path(), sessions).await;
        }

        let otel_root = tmpfs.as_ref().map_or(disk.path(), |t| t.path()).join("otel");
        telemetry_overhead(&otel_root, turns).await;
        if std::env::var_os("BDK_BENCH_OTEL_ONLY").is_some() {
            return;
        }

        latency(&disk.path().join("lat"), "disk, fsync", turns, 10).await;
        if let Some(tmpfs) = &tmpfs {
            latency(&tmpfs.path().join("lat"), "tmpfs, fsync is free", turns, 10).await;
            latency(&tmpfs.path().join("long"), "tmpfs, one long session", turns, turns).await;
        }
        throughput(&disk.path().join("tput"), "disk, fsync", 32, turns / 20).await;
        if let Some(tmpfs) = &tmpfs {
            throughput(&tmpfs.path().join("tput"), "tmpfs", 32, turns / 20).await;
        }
    });
}
