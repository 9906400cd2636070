//! One worker per hook: it takes events off the hook's queue in batches, adds the hook context
//! (session id, channel, mode, principal, agent, channel continuation, purpose, state root) to
//! each event envelope as `context`, and
//! writes them to the sink: a long-lived command (one JSON line per event on stdin, restarted
//! with backoff when it exits; its stdout is drained and discarded, its stderr logged), a file
//! (NDJSON appended) or an HTTP endpoint (a JSON array per batch, retried with backoff). What
//! cannot be delivered is counted as dropped and logged; nothing here can reach a turn.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bdk_protocol::SessionId;
use bdk_store::SharedEvent;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::{Counters, Shared};
use crate::capabilities::{HookSinkSpec, HookSpec};

/// Events written to a sink at once, at most.
const BATCH: usize = 256;
/// First wait before restarting a command that exited (doubles up to [`MAX_BACKOFF`]).
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Attempts per HTTP batch.
const HTTP_ATTEMPTS: u32 = 3;
/// Session contexts a worker remembers before it forgets them all.
const MAX_CONTEXTS: usize = 10_000;

pub(crate) async fn worker(
    spec: HookSpec,
    mut rx: mpsc::Receiver<SharedEvent>,
    shared: Shared,
    counters: Arc<Counters>,
) {
    let mut contexts: HashMap<SessionId, Value> = HashMap::new();
    let mut sink = Sink::new(&spec, &shared.state_root, counters.clone());
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(event) => batch.push(event),
                Err(_) => break,
            }
        }
        let mut lines = Vec::with_capacity(batch.len());
        for event in &batch {
            let context = context(&mut contexts, &shared, &event.session_id).await;
            // The envelope as the stream has it, with the hook context beside `data`.
            let mut line = serde_json::to_value(&**event).unwrap_or(Value::Null);
            if let Value::Object(fields) = &mut line {
                fields.insert("context".into(), context);
            }
            lines.push(line);
        }
        let count = batch.len() as u64;
        let span = crate::telemetry::hook_span(&shared.telemetry, &spec.name, count);
        if span.run(sink.deliver(&lines)).await {
            span.end();
            counters.delivered.fetch_add(count, Ordering::Relaxed);
        } else {
            span.fail("the hook could not deliver the events");
            span.end();
            crate::telemetry::hook_dropped(&shared.telemetry, &spec.name, count);
            counters.dropped.fetch_add(count, Ordering::Relaxed);
            tracing::warn!(hook = %spec.name, count, "hook could not deliver events; dropped");
        }
    }
}

/// The reference's hook context for `session`, read from its record once.
async fn context(cache: &mut HashMap<SessionId, Value>, shared: &Shared, session: &SessionId) -> Value {
    if let Some(context) = cache.get(session) {
        return context.clone();
    }
    if cache.len() >= MAX_CONTEXTS {
        cache.clear();
    }
    let record = shared.sessions.get(session).await.ok().flatten();
    let context = json!({
        "sessionId": session,
        "channel": record.as_ref().map(|r| r.channel.clone()),
        "mode": record.as_ref().map(|r| r.mode),
        "principal": record.as_ref().map(|r| r.principal.clone()),
        "agent": {"name": shared.agent},
        // A channel's continuation never rotates; an HTTP session's token is a credential and
        // rotates, so it is left out.
        "continuationToken": record
            .as_ref()
            .filter(|r| r.channel != "http")
            .and_then(|r| r.continuation_token.clone()),
        "purpose": record.as_ref().and_then(|r| r.purpose.clone()),
        "stateRoot": shared.state_root,
    });
    cache.insert(session.clone(), context.clone());
    context
}

enum Sink {
    Command(Box<CommandSink>),
    File(std::path::PathBuf),
    Http { client: reqwest::Client, url: String, headers: Vec<(String, String)> },
}

impl Sink {
    fn new(spec: &HookSpec, state_root: &Option<std::path::PathBuf>, counters: Arc<Counters>) -> Self {
        match &spec.sink {
            HookSinkSpec::Command(argv) => Sink::Command(Box::new(CommandSink {
                name: spec.name.clone(),
                state_root: state_root.clone(),
                argv: argv.clone(),
                cwd: spec.cwd.clone(),
                env: spec.env.clone(),
                running: None,
                backoff: FIRST_BACKOFF,
                counters,
            })),
            HookSinkSpec::File(path) => Sink::File(path.clone()),
            HookSinkSpec::Http { url, headers } => {
                Sink::Http { client: reqwest::Client::new(), url: url.clone(), headers: headers.clone() }
            }
        }
    }

    /// Writes `lines`; `false` when they could not be delivered.
    async fn deliver(&mut self, lines: &[Value]) -> bool {
        match self {
            Sink::Command(command) => command.deliver(&ndjson(lines)).await,
            Sink::File(path) => match append(path, &ndjson(lines)).await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "hook file sink failed");
                    false
                }
            },
            Sink::Http { client, url, headers } => post(client, url, headers, lines).await,
        }
    }
}

fn ndjson(lines: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

async fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(path).await?;
    file.write_all(bytes).await?;
    file.flush().await
}

async fn post(client: &reqwest::Client, url: &str, headers: &[(String, String)], lines: &[Value]) -> bool {
    let mut wait = FIRST_BACKOFF;
    for attempt in 1..=HTTP_ATTEMPTS {
        let mut request = client.post(url).json(&lines).timeout(Duration::from_secs(10));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(response) if response.status().is_success() => return true,
            Ok(response) => {
                tracing::warn!(%url, status = %response.status(), attempt, "hook HTTP sink refused a batch")
            }
            Err(error) => tracing::warn!(%url, %error, attempt, "hook HTTP sink failed"),
        }
        if attempt < HTTP_ATTEMPTS {
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
    false
}

/// A long-lived hook command.
struct CommandSink {
    name: String,
    /// `BDK_STATE_ROOT` for the command.
    state_root: Option<std::path::PathBuf>,
    argv: Vec<String>,
    cwd: std::path::PathBuf,
    env: Vec<(String, String)>,
    running: Option<(Child, ChildStdin)>,
    backoff: Duration,
    counters: Arc<Counters>,
}

impl CommandSink {
    /// Writes to the running command, restarting it (after a backoff) when it has exited.
    async fn deliver(&mut self, bytes: &[u8]) -> bool {
        for _ in 0..2 {
            if self.running.is_none() {
                match self.spawn() {
                    Ok(running) => self.running = Some(running),
                    Err(error) => {
                        tracing::warn!(hook = %self.name, %error, "hook command could not start");
                        self.pause().await;
                        continue;
                    }
                }
            }
            let Some((_, stdin)) = self.running.as_mut() else { continue };
            let written = async {
                stdin.write_all(bytes).await?;
                stdin.flush().await
            }
            .await;
            match written {
                Ok(()) => {
                    self.backoff = FIRST_BACKOFF;
                    return true;
                }
                Err(error) => {
                    tracing::warn!(hook = %self.name, %error, "hook command exited; restarting it");
                    if let Some((mut child, _)) = self.running.take() {
                        let _ = child.start_kill();
                    }
                    self.counters.restarts.fetch_add(1, Ordering::Relaxed);
                    self.pause().await;
                }
            }
        }
        false
    }

    async fn pause(&mut self) {
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn spawn(&self) -> std::io::Result<(Child, ChildStdin)> {
        let (program, args) = self.argv.split_first().ok_or_else(|| std::io::Error::other("empty command"))?;
        let mut command = Command::new(program);
        if let Some(root) = &self.state_root {
            // The hook's place for derived state exists even when nothing else wrote there yet
            // (on PostgreSQL the state folder holds only local working files).
            if let Err(error) = std::fs::create_dir_all(root) {
                tracing::warn!(hook = %self.name, %error, "cannot create the hook's state root");
            }
            command.env("BDK_STATE_ROOT", root);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut child = command
            .args(args)
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| std::io::Error::other("no stdin"))?;
        if let Some(mut stdout) = child.stdout.take() {
            // Drained and discarded: a hook that floods stdout cannot block itself or us.
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 8192];
                while matches!(stdout.read(&mut buffer).await, Ok(n) if n > 0) {}
            });
        }
        if let Some(stderr) = child.stderr.take() {
            let name = self.name.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let shown: String = line.chars().take(500).collect();
                    tracing::info!(hook = %name, "{shown}");
                }
            });
        }
        Ok((child, stdin))
    }
}
