//! PostgreSQL turn benchmark (`cargo bench -p bdk-server --bench pg_turns`, needs
//! `BDK_TEST_DATABASE_URL`): text turns through the engine on the PostgreSQL backend with the
//! scripted provider in-process, so what is measured is the host: latency of one text turn
//! (request to the durable `session.waiting`, p50/p95/p99; a new session's first turn and a
//! follow-up) with the commits each turn made (the replica's counters: durable commits wait for
//! the WAL flush, relaxed ones do not) and the round trips and statements its pool sent (counted
//! on the wire, `PgOptions::count_round_trips`), and turns per second with 1 and with 3
//! replicas (each its own pool, `LISTEN` connection and session leases) on one database, the
//! sessions spread over the replicas, each session's follow-ups sent to a replica other than the
//! one running it (so every follow-up is forwarded to the lease holder), and the latency of a
//! forwarded follow-up alone. The latencies are measured once more with a model that takes
//! `BDK_BENCH_MODEL_MS` (default 1) to answer, as a real one takes time, giving the host overhead
//! over it (each turn's latency less its model call's own time): the part of the host's work
//! that runs beside the model call does not count against it.
//!
//! Prints figures; never fails on them. `BDK_BENCH_TURNS`, `BDK_BENCH_SESSIONS` scale it;
//! `BDK_BENCH_MAX_RUNNING` sets `max_running_turns` (default 256: every turn claims a slot shared by
//! the replicas; 0: no limit, no claim).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bdk_engine::{Admission, AgentConfig, Engine, EngineOptions, FollowUp, Principal, StartSession};
use bdk_model::{ModelProvider, ModelRequest, ModelStream, ProviderInfo, ScriptedProvider};
use bdk_protocol::EventData;
use bdk_protocol::event::SessionMode;
use bdk_store::EventStream;
use bdk_store_pg::{PgDatabase, PgOptions, PgStore};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use bdk_test_support::postgres::{self, TestDb};
use bdk_tools::NoTools;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The echo provider answering only after `delay`, as a real model takes time; it keeps how long
/// each call took to its first output.
#[derive(Debug)]
struct Slow {
    inner: ScriptedProvider,
    delay: Duration,
    took: Arc<Mutex<Vec<Duration>>>,
}

impl ModelProvider for Slow {
    fn info(&self) -> ProviderInfo {
        self.inner.info()
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let (started, delay, took) = (Instant::now(), self.delay, self.took.clone());
        let mut inner = self.inner.stream(request, cancel);
        Box::pin(
            futures_util::stream::once(async move {
                tokio::time::sleep(delay).await;
                let first = inner.next().await;
                took.lock().unwrap().push(started.elapsed());
                futures_util::stream::iter(first).chain(inner)
            })
            .flatten(),
        )
    }
}

async fn replica(db: &TestDb, local: &std::path::Path) -> (Engine, Arc<PgDatabase>) {
    replica_at(&db.url(), local, Arc::new(ScriptedProvider::echo())).await
}

/// A replica on `url` (its search path names the test schema).
async fn replica_at(url: &str, local: &std::path::Path, provider: Arc<dyn ModelProvider>) -> (Engine, Arc<PgDatabase>) {
    let options = PgOptions { pool_size: 16, count_round_trips: true, ..PgOptions::default() };
    let database = PgDatabase::connect(url, &options).await.unwrap();
    let store = PgStore::new(database.clone(), "bench", local.join(format!("r{}", fastrand_suffix())));
    let config = AgentConfig {
        slug: "bench".into(),
        instructions: "You are a benchmark.".into(),
        max_steps: 4,
        max_running_turns: u32::try_from(env_usize("BDK_BENCH_MAX_RUNNING", 256)).unwrap_or(u32::MAX),
        idle_timeout: Duration::from_secs(60),
    };
    let options = EngineOptions { leases: Some(store.leases()), ..EngineOptions::default() };
    let engine = Engine::with_options(config, store.stores(), provider, Arc::new(NoTools), options);
    (engine, database)
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
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

fn follow_up(i: usize, token: String) -> FollowUp {
    FollowUp {
        message: format!("message {i}"),
        principal: Principal::new("bench"),
        continuation_token: token,
        admission: Admission::Preempt,
        workspace_files: Vec::new(),
    }
}

async fn next_waiting(stream: &mut EventStream) {
    while let Some(event) = stream.next().await {
        if matches!(event.unwrap().data, EventData::SessionWaiting(_)) {
            return;
        }
    }
    panic!("stream ended");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What one replica's database did while `f` ran: durable and relaxed commits, appends, and
/// what its pool sent (counted on the wire).
struct Counted {
    commits: bdk_store_pg::Commits,
    appends: u64,
    wire: bdk_store_pg::RoundTrips,
}

fn counted(database: &PgDatabase) -> Counted {
    Counted { commits: database.commits(), appends: database.append_batches().1, wire: database.round_trips() }
}

fn per_turn(before: &Counted, after: &Counted, turns: usize) -> String {
    let n = turns as f64;
    let durable = (after.commits.durable - before.commits.durable) as f64 / n;
    let relaxed = (after.commits.relaxed - before.commits.relaxed) as f64 / n;
    let appends = (after.appends - before.appends) as f64 / n;
    let trips = (after.wire.round_trips - before.wire.round_trips) as f64 / n;
    let statements = (after.wire.statements - before.wire.statements) as f64 / n;
    let prepared = (after.wire.prepared - before.wire.prepared) as f64 / n;
    format!(
        "{durable:.2} durable + {relaxed:.2} relaxed commits per turn ({appends:.2} event appends); \
         {trips:.2} round trips carrying {statements:.2} statements ({prepared:.2} prepared) per turn"
    )
}

fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    format!(
        "p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
        ms(percentile(samples, 0.5)),
        ms(percentile(samples, 0.95)),
        ms(percentile(samples, 0.99)),
    )
}

/// What the host added to each turn: its latency less its model call's (`took`, when the model
/// takes time).
fn overhead(samples: &[Duration], took: Option<&Mutex<Vec<Duration>>>) -> String {
    let Some(took) = took else { return String::new() };
    let mut took = std::mem::take(&mut *took.lock().unwrap());
    assert_eq!(took.len(), samples.len(), "one model call per turn");
    let mut over: Vec<Duration> = samples.iter().zip(&took).map(|(s, t)| s.saturating_sub(*t)).collect();
    format!("; the model call itself {}; host overhead over it {}", summary(&mut took), summary(&mut over))
}

/// New sessions one after another, then sequential follow-ups in one session, on one replica.
/// `took`: the model's own time per call, when it takes time.
async fn latency(
    engine: &Engine,
    database: &PgDatabase,
    turns: usize,
    label: &str,
    took: Option<&Mutex<Vec<Duration>>>,
) {
    let principal = Principal::new("bench");
    let starts = (turns / 4).max(1);
    let mut samples = Vec::with_capacity(starts);
    let before = counted(database);
    if let Some(took) = took {
        took.lock().unwrap().clear();
    }
    for i in 0..starts {
        let t0 = Instant::now();
        let started = engine.start_session(start(&format!("hello {i}"))).await.unwrap();
        let mut stream = engine.follow(&started.session_id, &principal, 0).await.unwrap();
        next_waiting(&mut stream).await;
        samples.push(t0.elapsed());
    }
    let after = counted(database);
    let over = overhead(&samples, took);
    println!(
        "new-session text turn on PostgreSQL ({label}; {starts} sessions, request to session.waiting): {}; {}{over}",
        summary(&mut samples),
        per_turn(&before, &after, starts)
    );

    let started = engine.start_session(start("hello")).await.unwrap();
    let id = started.session_id.clone();
    let mut stream = engine.follow(&id, &principal, 0).await.unwrap();
    next_waiting(&mut stream).await;
    let mut token = started.continuation_token;
    let mut samples = Vec::with_capacity(turns);
    let before = counted(database);
    if let Some(took) = took {
        took.lock().unwrap().clear();
    }
    for i in 0..turns {
        let t0 = Instant::now();
        token = engine.follow_up(&id, follow_up(i, token)).await.unwrap().continuation_token;
        next_waiting(&mut stream).await;
        samples.push(t0.elapsed());
    }
    let after = counted(database);
    let over = overhead(&samples, took);
    println!(
        "follow-up text turn on PostgreSQL ({label}; {turns} sequential follow-ups, request to session.waiting): {}; {}{over}",
        summary(&mut samples),
        per_turn(&before, &after, turns)
    );
}

/// Sequential follow-ups in one session sent through a replica that does not hold it: each is
/// forwarded to the holder (`bdk_session_commands`) and answered back.
async fn forwarded((home, home_db): (&Engine, &PgDatabase), (other, other_db): (&Engine, &PgDatabase), turns: usize) {
    let principal = Principal::new("bench");
    let started = home.start_session(start("hello")).await.unwrap();
    let id = started.session_id.clone();
    let mut stream = other.follow(&id, &principal, 0).await.unwrap();
    next_waiting(&mut stream).await;
    let mut token = started.continuation_token;
    let (mut accepted, mut done) = (Vec::with_capacity(turns), Vec::with_capacity(turns));
    let (home_before, other_before) = (counted(home_db), counted(other_db));
    for i in 0..turns {
        let t0 = Instant::now();
        token = other.follow_up(&id, follow_up(i, token)).await.unwrap().continuation_token;
        accepted.push(t0.elapsed());
        next_waiting(&mut stream).await;
        done.push(t0.elapsed());
    }
    let (home_after, other_after) = (counted(home_db), counted(other_db));
    println!(
        "forwarded follow-up ({turns} sequential follow-ups through a replica that does not hold the session): \
         accepted {}; request to session.waiting {}; the holder: {}; the sender: {}",
        summary(&mut accepted),
        summary(&mut done),
        per_turn(&home_before, &home_after, turns),
        per_turn(&other_before, &other_after, turns)
    );
}

/// `sessions` sessions x `turns` turns, session `s` started on replica `s % n` and followed up
/// through replica `(s + 1) % n`.
async fn throughput(engines: &[Engine], sessions: usize, turns: usize) {
    let n = engines.len();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let (home, other) = (engines[s % n].clone(), engines[(s + 1) % n].clone());
        tasks.push(tokio::spawn(async move {
            let principal = Principal::new("bench");
            let started = home.start_session(start(&format!("session {s}"))).await.unwrap();
            let id = started.session_id.clone();
            let mut stream = other.follow(&id, &principal, 0).await.unwrap();
            next_waiting(&mut stream).await;
            let mut token = started.continuation_token;
            for i in 1..turns {
                token = other.follow_up(&id, follow_up(i, token)).await.unwrap().continuation_token;
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
        "throughput ({n} replica{}, {sessions} sessions x {turns} turns{}): {total} turns in {:.2} s = {:.0} turns/s",
        if n == 1 { "" } else { "s" },
        if n == 1 { "" } else { ", follow-ups forwarded" },
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let Some(db) = postgres::fresh("bench_pg_turns").await else { return };
        let local = tempfile::tempdir().unwrap();
        let turns = env_usize("BDK_BENCH_TURNS", 200);
        let sessions = env_usize("BDK_BENCH_SESSIONS", 32);
        // The same database without waiting for each commit's WAL flush: what durability costs.
        let echo = Arc::new(ScriptedProvider::echo());
        let (relaxed, relaxed_db) =
            replica_at(&format!("{}%20-c%20synchronous_commit%3Doff", db.url()), local.path(), echo).await;
        latency(&relaxed, &relaxed_db, turns, "synchronous_commit = off", None).await;
        relaxed.drain(Duration::from_secs(5)).await;
        let delay = Duration::from_millis(env_usize("BDK_BENCH_MODEL_MS", 1) as u64);
        let took = Arc::new(Mutex::new(Vec::new()));
        let model = Arc::new(Slow { inner: ScriptedProvider::echo(), delay, took: took.clone() });
        let (slow, slow_db) = replica_at(&db.url(), local.path(), model).await;
        let label = format!("durable commits, a model answering after {} ms", delay.as_millis());
        latency(&slow, &slow_db, turns, &label, Some(&took)).await;
        slow.drain(Duration::from_secs(5)).await;
        let (one, one_db) = replica(&db, local.path()).await;
        latency(&one, &one_db, turns, "durable commits", None).await;
        throughput(std::slice::from_ref(&one), sessions, 10).await;
        let (two, two_db) = replica(&db, local.path()).await;
        let three = vec![one.clone(), two.clone(), replica(&db, local.path()).await.0];
        throughput(&three, sessions, 10).await;
        forwarded((&one, &one_db), (&two, &two_db), turns / 4).await;
        for engine in &three {
            engine.drain(Duration::from_secs(5)).await;
        }
    });
}
