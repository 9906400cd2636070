//! `bdk serve` as a process: startup (refuses error diagnostics, prints the bound address), a
//! SIGKILL mid-turn followed by a restart on the same state root (acknowledged events survive,
//! the interrupted turn is closed, a follow-up works), a parked approval surviving a SIGKILL,
//! SIGTERM draining. Every wait has a timeout.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::support::{OutputWithin, bdk};

const WAIT: Duration = Duration::from_secs(30);

/// A project whose scripted model answers `steps` (TOML tables of the scripted provider).
pub(super) fn write_project(root: &Path, slug: &str, steps: &[&str]) -> PathBuf {
    let dir = root.join(slug);
    std::fs::create_dir_all(dir.join("bot")).unwrap();
    let mut toml = format!("name = \"{slug}\"\n\n[model]\nid = \"script\"\nprovider = \"scripted\"\n");
    for step in steps {
        toml.push_str(&format!("\n[[model.params.script]]\n{step}\n"));
    }
    std::fs::write(dir.join("bot/agent.toml"), toml).unwrap();
    std::fs::write(dir.join("bot/instructions.md"), "Answer briefly.\n").unwrap();
    dir
}

/// A step streaming `words` words, `delay_ms` before each event.
pub(super) fn slow_step(words: usize, delay_ms: u64) -> String {
    let text = (0..words).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    format!("text = \"{text}\"\ndelay_ms = {delay_ms}")
}

/// A running `bdk serve` child. Killed on drop.
pub(super) struct Server {
    child: Child,
    pub(super) origin: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    pub(super) fn start(args: &[&str]) -> Server {
        let mut command = bdk();
        command.arg("serve").arg("--port").arg("0").args(args);
        Server::launch(command, &[])
    }

    /// Starts `command` (a `bdk serve ...`) with no model or token settings from this
    /// environment, only `envs`, and waits for its `listening on` line.
    pub(super) fn launch(mut command: Command, envs: &[(&str, &str)]) -> Server {
        // No model settings or provider keys from the environment: each test's agent.toml decides.
        let model_vars = ["BDK_MODEL", "BDK_MODEL_PROVIDER", "BDK_MODEL_BASE_URL", "BDK_MODEL_API_KEY"];
        let keys = ["XAI_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"];
        for var in model_vars.into_iter().chain(keys).chain(["BDK_BEARER_TOKEN", "BDK_DATABASE_URL"]) {
            command.env_remove(var);
        }
        command.envs(envs.iter().copied());
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn bdk serve");
        let stdout = child.stdout.take().unwrap();
        let (lines_tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines_tx.send(line);
            }
        });
        let mut stderr_pipe = child.stderr.take().unwrap();
        let (stderr_tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            let _ = stderr_tx.send(text);
        });
        let first = match lines.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("bdk serve printed no address; stderr: {}", stderr.recv_timeout(WAIT).unwrap_or_default());
            }
        };
        let origin = first.strip_prefix("listening on ").unwrap_or_else(|| panic!("unexpected first line {first:?}"));
        assert!(origin.starts_with("http://127.0.0.1:"), "{origin}");
        Server { origin: origin.to_owned(), child, stderr }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit; returns its status and stderr.
    pub(super) fn wait(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let stderr = self.stderr.recv_timeout(WAIT).unwrap_or_default();
                return (status, stderr);
            }
            assert!(Instant::now() < deadline, "bdk serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, and reap.
    pub(super) fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(WAIT).build().unwrap()
}

pub(super) async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Reads NDJSON events from a streaming response, one at a time.
pub(super) struct Stream {
    response: reqwest::Response,
    buffer: Vec<u8>,
    /// The response ended with its proper end (not an error or a reset).
    ended_cleanly: bool,
}

impl Stream {
    pub(super) async fn open(url: String) -> Stream {
        let response = within("the stream", client().get(url).send()).await.unwrap();
        assert_eq!(response.status(), 200);
        Stream { response, buffer: Vec::new(), ended_cleanly: false }
    }

    /// The next event, or `None` when the stream ended (cleanly or not).
    pub(super) async fn next(&mut self) -> Option<Value> {
        within("a stream line", async {
            loop {
                if let Some(pos) = self.buffer.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = self.buffer.drain(..=pos).collect();
                    return Some(serde_json::from_slice(&line).unwrap());
                }
                match self.response.chunk().await {
                    Ok(Some(chunk)) => self.buffer.extend_from_slice(&chunk),
                    Ok(None) => {
                        self.ended_cleanly = true;
                        return None;
                    }
                    Err(_) => return None,
                }
            }
        })
        .await
    }

    /// Reads events up to and including the first of type `kind`; returns what it read.
    pub(super) async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let Some(event) = self.next().await else { panic!("the stream ended before {kind}: {seen:#?}") };
            let done = event["type"] == kind;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// Opens the live stream at `url` and reads it up to and including the first event of type
/// `kind`.
pub(super) async fn stream_until(url: String, kind: &str) -> Vec<Value> {
    Stream::open(url).await.until(kind).await
}

pub(super) async fn post(url: String, body: Value) -> (u16, Value) {
    let response = within("a POST", client().post(url).json(&body).send()).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The NDJSON events at `url` (a `/events` read).
pub(super) async fn events(url: String) -> Vec<Value> {
    let text = within("events", async { client().get(url).send().await.unwrap().text().await.unwrap() }).await;
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn serve_refuses_a_project_with_errors() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("broken");
    std::fs::create_dir_all(dir.join("bot")).unwrap();
    std::fs::write(dir.join("bot/agent.toml"), "name = 3\n").unwrap();
    let output = bdk().args(["serve", "--port", "0", "--dir"]).arg(&dir).output_within();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error[") && stderr.contains("not serving"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing may claim to listen");
}

/// A wrong hook, skill or subagent file is an error diagnostic of its own, and `serve` refuses
/// the project for it like for any other error.
#[test]
fn serve_refuses_a_wrong_hook_skill_or_subagent_file() {
    let cases = [
        ("bot/hooks/audit.toml", "command = [\"true\"]\n", "missing_field"),
        ("bot/skills/triage/SKILL.md", "# Triage\n", "missing_description"),
        ("bot/subagents/researcher/agent.toml", "max_steps = 3\n", "missing_description"),
    ];
    for (file, text, code) in cases {
        let root = tempfile::tempdir().unwrap();
        let dir = write_project(root.path(), "broken", &[]);
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let validate = bdk().args(["validate", "--dir"]).arg(&dir).output_within();
        let said = String::from_utf8_lossy(&validate.stdout).into_owned() + &String::from_utf8_lossy(&validate.stderr);
        assert_ne!(validate.status.code(), Some(0), "{file}: {said}");
        assert!(said.contains(code) && said.contains(file), "{file}: {said}");
        let output = bdk().args(["serve", "--port", "0", "--dir"]).arg(&dir).output_within();
        assert_eq!(output.status.code(), Some(1), "{file}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("not serving") && stderr.contains(file), "{file}: {stderr}");
        assert!(output.stdout.is_empty(), "{file}: nothing may claim to listen");
    }
}

#[test]
fn single_mode_needs_exactly_one_agent() {
    let root = tempfile::tempdir().unwrap();
    write_project(root.path(), "a", &[]);
    write_project(root.path(), "b", &[]);
    let output = bdk().args(["serve", "--port", "0", "--mode", "single", "--dir"]).arg(root.path()).output_within();
    assert_eq!(output.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&output.stderr).contains("exactly one agent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_its_address_and_exits_0_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
    let health: Value =
        client().get(format!("{}/v1/health", server.origin)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["ok"], json!(true));
    assert!(project.join(".bdk/sessions").is_dir(), "the default state root is <project>/.bdk");
    let logs: Value =
        client().get(format!("{}/v1/logs?after=0", server.origin)).send().await.unwrap().json().await.unwrap();
    let lines = logs["lines"].as_array().unwrap();
    assert!(lines.iter().any(|l| l["message"].as_str().unwrap().starts_with("listening")), "{logs}");
    let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("shutdown complete"), "{stderr}");
}

/// A supervisor may send SIGTERM the moment it reads `listening on`: the signal handlers are in
/// place before that line is printed, so the server drains and exits 0 instead of dying from the
/// default action (which it did when the handlers were installed on the first poll).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_right_after_the_listening_line_still_drains() {
    let root = tempfile::tempdir().unwrap();
    let project = write_project(root.path(), "hello", &[]);
    for _ in 0..5 {
        let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
        let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
        assert!(status.success());
        let (status, stderr) = server.wait();
        assert_eq!(status.code(), Some(0), "{stderr}");
    }
}

/// The kill test: SIGKILL mid-turn, restart on the same state root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_restarts_with_every_acknowledged_event_and_the_turn_closed() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let project = write_project(&root.path().join("projects"), "slow", &[&slow_step(400, 25)]);
    let args = ["--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap()];
    let server = Server::start(&args);
    let base = format!("{}/slow", server.origin);

    let (status, started) = post(format!("{base}/v1/session"), json!({"message": "take your time"})).await;
    assert_eq!(status, 200, "{started}");
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let token = started["continuationToken"].as_str().unwrap().to_owned();

    // Read until a few deltas have been acknowledged on the stream, then kill -9.
    let mut stream = Stream::open(format!("{base}/v1/session/{id}/stream")).await;
    let mut acknowledged = Vec::new();
    while acknowledged.iter().filter(|e: &&Value| e["type"] == "message.appended").count() < 3 {
        acknowledged.push(stream.next().await.expect("stream ended before the kill"));
    }
    server.kill();
    drop(stream);

    // Restart on the same state root, with a model that answers at once.
    write_project(&root.path().join("projects"), "slow", &["text = \"back again\""]);
    let server = Server::start(&args);
    let base = format!("{}/slow", server.origin);
    let recorded = events(format!("{base}/v1/session/{id}/events")).await;
    assert!(recorded.len() > acknowledged.len(), "the interrupted turn was not closed: {recorded:?}");
    assert_eq!(&recorded[..acknowledged.len()], &acknowledged[..], "an acknowledged event was lost or changed");
    for (i, event) in recorded.iter().enumerate() {
        assert_eq!(event["index"], json!(i), "indices stay dense");
    }
    let turn = acknowledged.iter().find(|e| e["type"] == "turn.started").unwrap()["turnId"].clone();
    let closing: Vec<_> = recorded[acknowledged.len()..].iter().collect();
    let failed = closing.iter().find(|e| e["type"] == "turn.failed").expect("turn.failed after the restart");
    assert_eq!(failed["turnId"], turn);
    assert!(failed["data"]["message"].as_str().unwrap().contains("restarted"), "{failed}");
    assert!(closing.iter().all(|e| e["type"] != "turn.completed"));

    // The session waits for a follow-up, with the token it had.
    let (status, reply) =
        post(format!("{base}/v1/session/{id}"), json!({"continuationToken": token, "message": "again"})).await;
    assert_eq!(status, 200, "{reply}");
    let mut stream = Stream::open(format!("{base}/v1/session/{id}/stream?startIndex={}", recorded.len())).await;
    loop {
        let event = stream.next().await.expect("stream ended before the follow-up finished");
        if event["type"] == "message.completed" {
            assert_eq!(event["data"]["text"], json!("back again"));
        }
        if event["type"] == "turn.completed" {
            break;
        }
        assert_ne!(event["type"], json!("turn.failed"), "{event}");
    }
}

/// A tool that needs approval; it leaves `deployed.marker` in the bot folder when it runs.
const DEPLOY: &str = r#"description = "Deploy."
needs_approval = true
command = ["sh", "-c", "cat > /dev/null; touch deployed.marker; echo '{\"deployed\": true}'"]
"#;

async fn approvals(url: String) -> Vec<Value> {
    let body: Value =
        within("approvals", async { client().get(url).send().await.unwrap().json().await.unwrap() }).await;
    body["approvals"].as_array().cloned().unwrap_or_default()
}

/// SIGKILL while a call waits for approval: after the restart the call is listed again, the
/// turn is still open, and approving it runs the tool and completes that turn; a stream opened
/// after the restart sees the continuation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_approval_survives_a_sigkill_and_approving_it_completes_the_turn() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let projects = root.path().join("projects");
    let project = write_project(&projects, "ops", &["tool_calls = [{ name = \"deploy\", arguments = {} }]"]);
    std::fs::create_dir_all(project.join("bot/tools")).unwrap();
    std::fs::write(project.join("bot/tools/deploy.toml"), DEPLOY).unwrap();
    let args = ["--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap()];
    let server = Server::start(&args);
    let base = format!("{}/ops", server.origin);
    let (status, started) = post(format!("{base}/v1/session"), json!({"message": "deploy"})).await;
    assert_eq!(status, 200, "{started}");
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let turn = started["turnId"].clone();
    // Parked, and listed with its event's time once that event is in the log.
    let parked = within("the call to park", async {
        loop {
            let listed = approvals(format!("{base}/v1/session/{id}/approvals")).await;
            let recorded = events(format!("{base}/v1/session/{id}/events")).await;
            let requested = recorded.iter().find(|e| e["type"] == "action.approval_requested");
            if let (Some(call), Some(event)) = (listed.first(), requested)
                && call["requestedAt"] == event["at"]
            {
                return listed;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    server.kill();

    // Restart with a model that answers once the result is in.
    write_project(&projects, "ops", &["text = \"Deployed after the restart.\""]);
    let server = Server::start(&args);
    let base = format!("{}/ops", server.origin);
    assert_eq!(approvals(format!("{base}/v1/session/{id}/approvals")).await, parked);
    let recorded = events(format!("{base}/v1/session/{id}/events")).await;
    assert_eq!(recorded.last().unwrap()["type"], json!("action.approval_requested"), "{recorded:?}");
    assert!(!project.join("bot/deployed.marker").exists());

    let mut stream = Stream::open(format!("{base}/v1/session/{id}/stream?startIndex={}", recorded.len())).await;
    let call = parked[0]["callId"].as_str().unwrap();
    let (status, decided) =
        post(format!("{base}/v1/session/{id}/approvals/{call}"), json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{decided}");
    let mut seen = Vec::new();
    loop {
        let event = stream.next().await.expect("stream ended before the turn completed");
        assert_ne!(event["type"], json!("turn.failed"), "{event}");
        seen.push(event["type"].as_str().unwrap().to_owned());
        if event["type"] == "action.result" {
            assert_eq!(event["data"]["result"], json!({"deployed": true}));
        }
        if event["type"] == "message.completed" {
            assert_eq!(event["data"]["text"], json!("Deployed after the restart."));
        }
        if event["type"] == "turn.completed" {
            assert_eq!(event["turnId"], turn);
            break;
        }
    }
    assert_eq!(seen[..2], ["action.approval_resolved", "action.result"], "{seen:?}");
    assert!(project.join("bot/deployed.marker").exists());
}

/// SIGTERM mid-turn: new connections are refused at once while the open stream keeps
/// streaming; the turn gets the grace period, is cancelled, its closing events reach the stream,
/// which then ends cleanly (not by a reset), and the process exits 0. A restart finds nothing
/// left to recover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_running_turns_and_exits_0() {
    let root = tempfile::tempdir().unwrap();
    let state = root.path().join("state");
    let project = write_project(&root.path().join("projects"), "slow", &[&slow_step(4000, 25)]);
    let args = ["--dir", project.to_str().unwrap(), "--state-root", state.to_str().unwrap(), "--drain-grace", "5s"];
    let server = Server::start(&args);
    let base = format!("{}/slow", server.origin);
    let (_, started) = post(format!("{base}/v1/session"), json!({"message": "long"})).await;
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let mut stream = Stream::open(format!("{base}/v1/session/{id}/stream")).await;
    while stream.next().await.expect("stream ended early")["type"] != "message.appended" {}

    let began = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap().success());
    // The listener stops accepting while the turn is still in its grace period.
    let health = format!("{}/v1/health", server.origin);
    within("new connections refused", async {
        loop {
            let fresh = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
            match fresh.get(&health).send().await {
                Err(_) => break,
                Ok(answer) if answer.status() == 503 => break,
                Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
    .await;
    assert_eq!(stream.next().await.expect("the open stream still streams")["type"], json!("message.appended"));
    let mut failed = None;
    while let Some(event) = stream.next().await {
        if event["type"] == "turn.failed" {
            failed = Some(event);
        }
    }
    let failed = failed.expect("the stream ended without turn.failed");
    assert_eq!(failed["data"]["status"], json!("cancelled"));
    assert!(failed["data"]["message"].as_str().unwrap().contains("shutting down"), "{failed}");
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let took = began.elapsed();
    assert!(took >= Duration::from_millis(4900), "cancelled before the grace period: {took:?}");
    assert!(stream.ended_cleanly, "the stream ended with a reset, not its end");
    assert!(stderr.contains("shutdown complete"), "{stderr}");

    // Restart: the turn was closed by the drain, so recovery closes nothing more.
    let server = Server::start(&args);
    let recorded = events(format!("{}/slow/v1/session/{id}/events", server.origin)).await;
    assert_eq!(recorded.iter().filter(|e| e["type"] == "turn.failed").count(), 1, "{recorded:?}");
}

/// Runs one turn on a fresh server with `extra` flags, stops it, and returns its stderr.
async fn one_turn_log(extra: &[&str]) -> String {
    let root = tempfile::tempdir().unwrap();
    let steps = ["tool_calls = [{ name = \"echo\", arguments = { n = 1 } }]", "text = \"hi there\""];
    let project = write_project(root.path(), "hello", &steps);
    std::fs::create_dir_all(project.join("bot/tools")).unwrap();
    std::fs::write(
        project.join("bot/tools/echo.toml"),
        "description = \"Echoes.\"\neffect = \"read\"\ncommand = [\"cat\"]\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    let mut args = vec!["--mode", "single", "--dir", project.to_str().unwrap()];
    args.extend_from_slice(extra);
    let server = Server::start(&args);
    let (status, started) = post(format!("{}/v1/session", server.origin), json!({"message": "hello"})).await;
    assert_eq!(status, 200, "{started}");
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let mut stream = Stream::open(format!("{}/v1/session/{id}/stream", server.origin)).await;
    while let Some(event) = stream.next().await {
        if event["type"] == "session.waiting" {
            break;
        }
    }
    let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_log_shows_each_request_and_turn() {
    let stderr = one_turn_log(&[]).await;
    assert!(stderr.contains("POST /v1/session 200"), "an access line per request: {stderr}");
    assert!(stderr.contains("GET /v1/session/ses_"), "{stderr}");
    assert!(stderr.contains("turn started"), "{stderr}");
    assert!(stderr.contains("turn completed in"), "{stderr}");
    assert!(stderr.contains("output tokens, $"), "tokens and cost: {stderr}");
    assert!(stderr.contains("; tools: echo"), "the tools the turn called: {stderr}");
    // `POST /v1/session 200 <N> ms`: method, path, status and duration.
    let access = stderr.lines().find_map(|l| l.split_once("POST /v1/session 200 ")).map(|(_, rest)| rest).unwrap();
    let (ms, unit) = access.split_once(' ').unwrap_or_default();
    assert!(ms.parse::<u64>().is_ok() && unit.starts_with("ms"), "the access line's duration: {access}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_format_json_writes_one_object_per_line() {
    let stderr = one_turn_log(&["--log-format", "json"]).await;
    let lines: Vec<Value> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let access = lines.iter().find(|l| l["target"] == "bdk::access" && l["fields"]["method"] == "POST").unwrap();
    assert_eq!(access["fields"]["status"], 200, "{access}");
    assert_eq!(access["fields"]["path"], "/v1/session");
    let turn = lines.iter().find(|l| l["target"] == "bdk::turn" && l["fields"]["output_tokens"].is_u64()).unwrap();
    assert!(turn["fields"]["cost_usd"].is_number(), "{turn}");
    assert_eq!(turn["fields"]["tools"], "echo", "{turn}");
    assert!(access["fields"]["duration_ms"].is_u64(), "{access}");
}

/// A turn a new message preempts still gets its end line (it ends with the message, not with a
/// `session.waiting` of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_ends_a_preempted_turn_too() {
    let root = tempfile::tempdir().unwrap();
    // The first turn streams for minutes; the follow-up preempts it.
    let slow = slow_step(3000, 100);
    let project = write_project(root.path(), "hello", &[&slow, "text = \"second\""]);
    let server = Server::start(&["--mode", "single", "--dir", project.to_str().unwrap()]);
    let (status, started) = post(format!("{}/v1/session", server.origin), json!({"message": "first"})).await;
    assert_eq!(status, 200, "{started}");
    let id = started["sessionId"].as_str().unwrap().to_owned();
    let mut stream = Stream::open(format!("{}/v1/session/{id}/stream", server.origin)).await;
    stream.until("message.appended").await;
    let token = started["continuationToken"].as_str().unwrap();
    let (status, reply) =
        post(format!("{}/v1/session/{id}", server.origin), json!({"continuationToken": token, "message": "again"}))
            .await;
    assert_eq!(status, 200, "{reply}");
    stream.until("session.waiting").await;
    let status = Command::new("kill").args(["-TERM", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("turn started").count(), 2, "{stderr}");
    assert!(stderr.contains("turn cancelled: turn interrupted ("), "the preempted turn's end: {stderr}");
    assert!(stderr.contains("turn completed in"), "{stderr}");
}
