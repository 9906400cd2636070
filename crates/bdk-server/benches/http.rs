//! Turns per second and turn latency over HTTP: a real host on 127.0.0.1:0 with durable
//! filesystem state and the scripted (echo) model, driven by N concurrent clients. Each client
//! opens a session, keeps its NDJSON stream open, and sends follow-ups one after another; a
//! turn's latency is from sending the POST to reading its `session.waiting` on the stream.
//!
//! Prints figures; asserts nothing about absolute times.
//! `cargo bench -p bdk-server --bench http [-- CLIENTS TURNS_PER_CLIENT]` (defaults 32 and 40).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_engine::{AgentConfig, Engine};
use bdk_model::ScriptedProvider;
use bdk_protocol::http::SessionResponse;
use bdk_server::{Agent, AppState, LogBuffer, ServeOptions};
use bdk_store::FsStore;
use serde_json::{Value, json};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with('-'));
    let clients: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let turns: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(40);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // The same runs on the temp dir's disk (fsync is real) and, where there is one, on tmpfs
    // (fsync is nearly free), to tell host overhead from durability cost.
    let mut places = vec![("disk", std::env::temp_dir())];
    if std::path::Path::new("/dev/shm").is_dir() {
        places.push(("tmpfs", "/dev/shm".into()));
    }
    runtime.block_on(async {
        for (label, place) in places {
            println!("state on {label} ({}):", place.display());
            let host = Host::start(&place).await;
            // Warm up.
            run(&host, clients.min(8), 2).await;
            let sequential = run(&host, 1, 200).await;
            sequential.print("  1 client, sequential turns");
            let concurrent = run(&host, clients, turns).await;
            concurrent.print(&format!("  {clients} concurrent clients"));
            println!(
                "  ratio: p50 under load / p50 alone = {:.1}x",
                concurrent.percentile(0.50).as_secs_f64() / sequential.percentile(0.50).as_secs_f64()
            );
        }
    });
}

struct Host {
    base: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Host {
    async fn start(place: &std::path::Path) -> Host {
        let dir = tempfile::tempdir_in(place).unwrap();
        let project_dir = dir.path().join("projects/bench");
        std::fs::create_dir_all(project_dir.join("bot")).unwrap();
        std::fs::write(project_dir.join("bot/agent.toml"), "name = \"bench\"\nmax_running_turns = 64\n").unwrap();
        std::fs::write(project_dir.join("bot/instructions.md"), "Echo.\n").unwrap();
        let discovery = bdk_project::discover(&[project_dir]);
        assert!(!discovery.has_errors());
        let project = discovery.projects.into_iter().next().unwrap();
        let store = FsStore::open(dir.path().join("state")).unwrap();
        let engine = Engine::new(
            AgentConfig::from_project(&project),
            store.stores(),
            Arc::new(ScriptedProvider::echo()),
            Arc::new(bdk_tools::NoTools),
        );
        let state = AppState::new(vec![Agent::new(project, engine)], ServeOptions::default(), LogBuffer::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(bdk_server::serve(listener, state, std::future::pending(), Duration::from_secs(1)));
        let client = reqwest::Client::builder().pool_max_idle_per_host(256).build().unwrap();
        Host { base: format!("http://{addr}/bench"), client, _dir: dir }
    }
}

struct Figures {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Figures {
    fn percentile(&self, p: f64) -> Duration {
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i]
    }

    fn print(&self, label: &str) {
        println!(
            "{label}: {} turns in {:.2}s = {:.0} turns/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.latencies.len(),
            self.wall.as_secs_f64(),
            self.latencies.len() as f64 / self.wall.as_secs_f64(),
            ms(self.percentile(0.50)),
            ms(self.percentile(0.99)),
            ms(*self.latencies.last().unwrap()),
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `clients` tasks, each one session of `turns` turns (the first is the session's start).
async fn run(host: &Host, clients: usize, turns: usize) -> Figures {
    let began = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let client = host.client.clone();
            let base = host.base.clone();
            tokio::spawn(async move { client_turns(&client, &base, i, turns).await })
        })
        .collect();
    let mut latencies = Vec::with_capacity(clients * turns);
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let wall = began.elapsed();
    latencies.sort();
    Figures { latencies, wall }
}

async fn client_turns(client: &reqwest::Client, base: &str, i: usize, turns: usize) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(turns);
    let sent = Instant::now();
    let started: SessionResponse = client
        .post(format!("{base}/v1/session"))
        .json(&json!({"message": format!("client {i}")}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = started.session_id.to_string();
    let mut token = started.continuation_token;
    let mut stream = client.get(format!("{base}/v1/session/{id}/stream")).send().await.unwrap();
    let mut buffer = Vec::new();
    wait_waiting(&mut stream, &mut buffer).await;
    latencies.push(sent.elapsed());
    for turn in 1..turns {
        let sent = Instant::now();
        let reply: Value = client
            .post(format!("{base}/v1/session/{id}"))
            .json(&json!({"continuationToken": token, "message": format!("turn {turn}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        token = reply["continuationToken"].as_str().expect("follow-up accepted").to_owned();
        wait_waiting(&mut stream, &mut buffer).await;
        latencies.push(sent.elapsed());
    }
    latencies
}

/// Reads the stream until a `session.waiting` line.
async fn wait_waiting(stream: &mut reqwest::Response, buffer: &mut Vec<u8>) {
    loop {
        while let Some(pos) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=pos).collect();
            if line.windows(17).any(|w| w == b"\"session.waiting\"") {
                return;
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), stream.chunk()).await.unwrap().unwrap().unwrap();
        buffer.extend_from_slice(&chunk);
    }
}
