//! Direct-call latency over loopback HTTP (`POST /v1/tools/:name`): a real host on 127.0.0.1:0
//! with filesystem state, one keep-alive client calling one tool after another, unbound (so each
//! command call also creates and removes its scratch workspace `tool-calls/<callId>/`; the native
//! tool never asks for its own, so it gets none). Three tools: a
//! native Rust tool, a command tool (`/bin/sh`, one process per call) and a persistent command
//! tool (one long-lived python3 process speaking NDJSON; skipped without python3).
//!
//! Prints p50/p99/mean and calls per second over HTTP, the same calls through `Engine::call_tool`
//! in-process, and `GET /v1/health` as the floor any request pays; with state on disk and on
//! tmpfs. Asserts nothing about absolute times. Aim (issue 5): native under 300 µs p50,
//! persistent under 1 ms p50.
//! `cargo bench -p bdk-server --bench calls [-- CALLS]` (default 2000 for the fast tools).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bdk_engine::{AgentConfig, DirectCall, Engine, Principal};
use bdk_model::ScriptedProvider;
use bdk_server::{Agent, AppState, LogBuffer, Mode, ServeOptions};
use bdk_store::FsStore;
use bdk_tools::{NativeTool, ProjectTools, ToolContext, ToolError};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoInput {
    text: String,
}

/// Echoes its input: the cost measured is the host's, not the tool's.
struct NativeEcho;

impl NativeTool for NativeEcho {
    type Input = EchoInput;

    fn name(&self) -> &str {
        "native_echo"
    }

    fn description(&self) -> &str {
        "Echo the text."
    }

    fn effect(&self) -> bdk_project::model::Predicate {
        bdk_project::model::Predicate::Always(false)
    }

    async fn call(&self, input: EchoInput, _ctx: ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ "text": input.text }))
    }
}

const SCHEMA: &str = r#"
[input_schema]
type = "object"
required = ["text"]
properties = { text = { type = "string" } }
"#;

const SH_COMMAND: &str = r#"description = "Echo, one sh process per call."
effect = "read"
command = ["/bin/sh", "-c", "read -r line; printf '{\"text\":\"hello\"}'"]
"#;

const PY_PERSISTENT: &str = r#"description = "Echo, one long-lived python3 process."
effect = "read"
persistent = true
command = ["python3", "lib/persistent.py"]
"#;

const PERSISTENT_SCRIPT: &str = "import json, sys\nfor line in sys.stdin:\n    r = json.loads(line)\n    \
sys.stdout.write(json.dumps({'id': r['id'], 'result': {'text': r['input']['text']}}) + '\\n')\n    \
sys.stdout.flush()\n";

fn main() {
    let calls: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(2000);
    let python = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !python {
        println!("(python3 not found: the persistent tool is skipped)");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    // State on the temp dir's disk, and where there is one on tmpfs: the scratch folder's
    // `mkdir` + `rmdir` is a filesystem cost, the rest is the host's.
    let mut places = vec![("disk", std::env::temp_dir())];
    if std::path::Path::new("/dev/shm").is_dir() {
        places.push(("tmpfs", "/dev/shm".into()));
    }
    runtime.block_on(async {
        for (label, place) in places {
            let host = Host::start(&place, python).await;
            host.health(200).await;
            let (floor, _, _) = figures(host.health(calls).await);
            println!(
                "state on {label} ({}); one caller, unbound calls (a scratch folder each); \
                 GET /v1/health p50 {floor:.0?} (the HTTP floor)",
                place.display()
            );
            println!(
                "  {:<14} {:>6} {:>10} {:>10} {:>10} {:>9} {:>12}",
                "tool", "calls", "HTTP p50", "HTTP p99", "HTTP mean", "calls/s", "engine p50"
            );
            let mut cases = vec![("native_echo", 200, calls)];
            if python {
                cases.push(("py_persistent", 100, calls));
            }
            cases.push(("sh_command", 20, (calls / 10).max(50)));
            for (tool, warmup, calls) in cases {
                host.measure(tool, warmup).await;
                let started = Instant::now();
                let times = host.measure(tool, calls).await;
                let rate = calls as f64 / started.elapsed().as_secs_f64();
                let (p50, p99, mean) = figures(times);
                let (engine_p50, _, _) = figures(host.measure_engine(tool, calls).await);
                println!(
                    "  {tool:<14} {calls:>6} {:>10} {:>10} {:>10} {rate:>9.0} {:>12}",
                    format!("{p50:.0?}"),
                    format!("{p99:.0?}"),
                    format!("{mean:.0?}"),
                    format!("{engine_p50:.0?}"),
                );
            }
        }
    });
}

struct Host {
    base: String,
    client: reqwest::Client,
    engine: Engine,
    _dir: tempfile::TempDir,
}

impl Host {
    async fn start(place: &std::path::Path, python: bool) -> Host {
        let dir = tempfile::tempdir_in(place).unwrap();
        let project_dir = dir.path().join("bench");
        let bot = project_dir.join("bot");
        std::fs::create_dir_all(bot.join("tools")).unwrap();
        std::fs::create_dir_all(bot.join("lib")).unwrap();
        std::fs::write(bot.join("agent.toml"), "name = \"bench\"\n").unwrap();
        std::fs::write(bot.join("instructions.md"), "Bench.\n").unwrap();
        std::fs::write(bot.join("tools/sh_command.toml"), format!("{SH_COMMAND}{SCHEMA}")).unwrap();
        if python {
            std::fs::write(bot.join("tools/py_persistent.toml"), format!("{PY_PERSISTENT}{SCHEMA}")).unwrap();
            std::fs::write(bot.join("lib/persistent.py"), PERSISTENT_SCRIPT).unwrap();
        }
        let discovery = bdk_project::discover(&[project_dir]);
        assert!(!discovery.has_errors(), "{:?}", discovery.all_diagnostics().collect::<Vec<_>>());
        let project = discovery.projects.into_iter().next().unwrap();
        let state = dir.path().join("state");
        let tools = ProjectTools::builder(&project).native(NativeEcho).state_root(&state).build().unwrap();
        let store = FsStore::open(&state).unwrap();
        let engine = Engine::new(
            AgentConfig::from_project(&project),
            store.stores(),
            Arc::new(ScriptedProvider::echo()),
            Arc::new(tools),
        );
        let options = ServeOptions { mode: Mode::Single, ..ServeOptions::default() };
        let app = AppState::new(vec![Agent::new(project, engine.clone())], options, LogBuffer::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(bdk_server::serve(listener, app, std::future::pending(), Duration::from_secs(1)));
        let client = reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
        Host { base: format!("http://{addr}"), client, engine, _dir: dir }
    }

    /// Calls `tool` `n` times in a row; returns each call's latency (request sent to body read).
    async fn measure(&self, tool: &str, n: usize) -> Vec<Duration> {
        let url = format!("{}/v1/tools/{tool}", self.base);
        let body = json!({"input": {"text": "hello"}}).to_string();
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let started = Instant::now();
            let response = self.client.post(&url).body(body.clone()).send().await.unwrap();
            let status = response.status();
            let answer = response.bytes().await.unwrap();
            times.push(started.elapsed());
            assert!(status.is_success(), "{tool}: {status} {}", String::from_utf8_lossy(&answer));
            let text = String::from_utf8_lossy(&answer);
            assert!(text.contains("\"isError\":false"), "{tool}: {text}");
        }
        times
    }

    /// `GET /v1/health` `n` times: what any request costs here.
    async fn health(&self, n: usize) -> Vec<Duration> {
        let url = format!("{}/v1/health", self.base);
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let started = Instant::now();
            let response = self.client.get(&url).send().await.unwrap();
            response.bytes().await.unwrap();
            times.push(started.elapsed());
        }
        times
    }

    /// The same calls through `Engine::call_tool` in-process: the host's share without HTTP.
    async fn measure_engine(&self, tool: &str, n: usize) -> Vec<Duration> {
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let call = DirectCall::new(tool, json!({"text": "hello"}), Principal::new("local"));
            let started = Instant::now();
            let outcome = self.engine.call_tool(call).await.unwrap();
            times.push(started.elapsed());
            assert!(!outcome.is_error, "{tool}: {outcome:?}");
        }
        times
    }
}

/// p50, p99 and mean of `times`.
fn figures(mut times: Vec<Duration>) -> (Duration, Duration, Duration) {
    times.sort();
    let pick = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    (pick(0.50), pick(0.99), mean)
}
