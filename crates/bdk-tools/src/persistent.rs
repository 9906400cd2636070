//! Persistent command tools: long-lived processes per tool (`persistent = true`), so a hot tool
//! pays process start-up once. A process reads one NDJSON request per line on stdin,
//! `{"id", "input", "context"}`, and answers each with one line on stdout, `{"id", "result"}` or
//! `{"id", "error"}`. Each process handles one call at a time; concurrent calls (from any
//! sessions) are spread over a small pool of up to [`DEFAULT_PROCESSES`] processes, started
//! only as concurrency needs them, so a tool used one call at a time keeps one process. Calls
//! beyond the pool wait for a free process (within their timeout).
//!
//! Each process runs in its own group with the tool's folder as cwd and `BDK_STATE_ROOT` set
//! (per-call facts arrive in `context`, not the environment). It is started on first use and
//! again after it dies; a call in flight when it dies, times out, is cancelled or floods its
//! output gets an `isError` result and the process is killed, to be restarted by the next call.
//! Dropping the [`PersistentTool`] kills the process group.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Mutex, MutexGuard, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ToolOutcome;
use crate::command::{self, CallContext, Limits, env};
use crate::process::{self, GroupGuard};

/// The most processes one persistent tool runs at once, unless set with
/// [`PersistentTool::with_processes`].
pub const DEFAULT_PROCESSES: usize = 4;

/// One persistent tool and its pool of processes.
pub struct PersistentTool {
    name: String,
    argv: Vec<String>,
    cwd: PathBuf,
    state_root: Option<PathBuf>,
    limits: Limits,
    /// One slot per process the pool may run; a call holds one slot for its whole exchange.
    slots: Vec<Mutex<Option<Running>>>,
    /// As many permits as slots: a call with a permit always finds a free slot.
    free: Semaphore,
}

impl fmt::Debug for PersistentTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PersistentTool").field("name", &self.name).field("argv", &self.argv).finish_non_exhaustive()
    }
}

struct Running {
    child: Child,
    guard: GroupGuard,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<SyncMutex<Vec<u8>>>,
    stderr_task: JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.guard.finish();
        self.stderr_task.abort();
    }
}

/// One request line: `{"id", "input", "context"}`.
#[derive(serde::Serialize)]
struct Request<'a> {
    id: &'a str,
    input: &'a Value,
    context: Value,
}

/// Why an exchange failed; the process is discarded after any of these.
enum Failure {
    Died,
    Overflow,
    Io(std::io::Error),
}

impl PersistentTool {
    pub fn new(
        name: impl Into<String>,
        argv: Vec<String>,
        cwd: PathBuf,
        state_root: Option<PathBuf>,
        limits: Limits,
    ) -> Self {
        Self { name: name.into(), argv, cwd, state_root, limits, slots: Vec::new(), free: Semaphore::new(0) }
            .with_processes(DEFAULT_PROCESSES)
    }

    /// Sets the most processes this tool runs at once (at least one).
    pub fn with_processes(mut self, processes: usize) -> Self {
        let processes = processes.max(1);
        self.slots = (0..processes).map(|_| Mutex::new(None)).collect();
        self.free = Semaphore::new(processes);
        self
    }

    /// The id of a running process, if any (for tests and diagnostics).
    pub async fn pid(&self) -> Option<u32> {
        self.pids().await.into_iter().next()
    }

    /// The ids of the running processes, in slot order.
    pub async fn pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        for slot in &self.slots {
            if let Some(pid) = slot.lock().await.as_ref().and_then(|r| r.child.id()) {
                pids.push(pid);
            }
        }
        pids
    }

    /// A free slot, preferring one whose process is running. The caller holds a permit, so
    /// one is free unless `pids` is looking at it; then wait for the first.
    async fn free_slot(&self) -> MutexGuard<'_, Option<Running>> {
        let mut empty = None;
        for slot in &self.slots {
            if let Ok(guard) = slot.try_lock() {
                if guard.is_some() {
                    return guard;
                }
                empty.get_or_insert(guard);
            }
        }
        match empty {
            Some(guard) => guard,
            None => self.slots[0].lock().await,
        }
    }

    /// Runs one call. `timeout` covers waiting for earlier calls too.
    pub async fn call(
        &self,
        context: &CallContext,
        input: &Value,
        timeout: Duration,
        cancel: CancellationToken,
    ) -> ToolOutcome {
        let name = &self.name;
        let deadline = Instant::now() + timeout;
        let timed_out =
            || ToolOutcome::error(format!("`{name}` timed out after {} and was killed", process::duration(timeout)));
        let cancelled = || ToolOutcome::error(format!("`{name}` was cancelled"));

        // Declared first, so it is released after the slot.
        let _permit = tokio::select! {
            biased;
            () = cancel.cancelled() => return cancelled(),
            () = tokio::time::sleep_until(deadline) => return timed_out(),
            permit = self.free.acquire() => match permit {
                Ok(permit) => permit,
                Err(_) => return ToolOutcome::error(format!("`{name}` has no process")),
            },
        };
        let mut slot = tokio::select! {
            biased;
            () = cancel.cancelled() => return cancelled(),
            () = tokio::time::sleep_until(deadline) => return timed_out(),
            slot = self.free_slot() => slot,
        };
        if slot.as_mut().is_none_or(|r| !matches!(r.child.try_wait(), Ok(None))) {
            *slot = None;
            match self.start().await {
                Ok(running) => *slot = Some(running),
                Err(error) => {
                    let program = self.argv.first().map(String::as_str).unwrap_or_default();
                    return ToolOutcome::error(format!("`{name}` could not start `{program}`: {error}"));
                }
            }
        }
        let Some(running) = slot.as_mut() else {
            return ToolOutcome::error(format!("`{name}` has no process"));
        };

        let id = context.call_id.clone();
        // Written from the borrowed input (no copy of it into a `Value` tree first).
        let line = Request { id: &id, input, context: context.to_json() };
        let mut request = match serde_json::to_string(&line) {
            Ok(request) => request,
            Err(error) => return ToolOutcome::error(format!("`{name}`: the call could not be encoded: {error}")),
        };
        request.push('\n');
        let max_output = self.limits.max_output;
        let result = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            () = tokio::time::sleep_until(deadline) => Some(Err(None)),
            done = exchange(running, request, &id, max_output) => Some(done.map_err(Some)),
        };
        match result {
            Some(Ok(outcome)) => outcome,
            None => {
                *slot = None;
                cancelled()
            }
            Some(Err(None)) => {
                *slot = None;
                timed_out()
            }
            Some(Err(Some(failure))) => {
                let outcome = self.failure(running, failure).await;
                *slot = None;
                outcome
            }
        }
    }

    async fn start(&self) -> std::io::Result<Running> {
        let mut command = command::command_for(&self.argv, &self.cwd, None)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"))?;
        let context = CallContext { state_root: self.state_root.clone(), ..CallContext::default() };
        context.apply_env(&mut command);
        command.env_remove(env::TOOL_CALL_ID);
        let mut child = process::spawn(&mut command).await?;
        let guard = GroupGuard::new(&child);
        let missing = || std::io::Error::other("the process started without its pipes");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let mut stderr_pipe = child.stderr.take().ok_or_else(missing)?;
        let stderr = Arc::new(SyncMutex::new(Vec::new()));
        let keep = self.limits.stderr_tail;
        let sink = Arc::clone(&stderr);
        let stderr_task = tokio::spawn(async move {
            let mut chunk = vec![0u8; 8 * 1024];
            while let Ok(n) = stderr_pipe.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut tail) = sink.lock() {
                    tail.extend_from_slice(&chunk[..n]);
                    if tail.len() > keep {
                        let cut = tail.len() - keep;
                        tail.drain(..cut);
                    }
                }
            }
        });
        Ok(Running { child, guard, stdin, stdout: BufReader::new(stdout), stderr, stderr_task })
    }

    /// The outcome of a failed exchange, with the exit status and stderr tail when it died.
    async fn failure(&self, running: &mut Running, failure: Failure) -> ToolOutcome {
        let name = &self.name;
        match failure {
            Failure::Overflow => ToolOutcome::error(format!(
                "`{name}` answered with a line longer than {}; the process was killed",
                process::size(self.limits.max_output)
            )),
            Failure::Died | Failure::Io(_) => {
                running.guard.kill();
                let status = tokio::time::timeout(Duration::from_secs(2), running.child.wait()).await;
                // Give the stderr reader a moment to collect the last words.
                let _ = tokio::time::timeout(Duration::from_millis(200), &mut running.stderr_task).await;
                let tail = running.stderr.lock().map(|t| t.clone()).unwrap_or_default();
                let how = match status {
                    Ok(Ok(status)) => command::describe_exit(status),
                    _ => "stopped answering".to_owned(),
                };
                let io = match failure {
                    Failure::Io(error) => format!(" ({error})"),
                    _ => String::new(),
                };
                let tail = process::tail_text(&tail, self.limits.stderr_tail);
                let tail = if tail.is_empty() { String::new() } else { format!(": {tail}") };
                ToolOutcome::error(format!(
                    "`{name}` (persistent) {how}{io} while handling the call; it restarts on the next call{tail}"
                ))
            }
        }
    }
}

/// Sends one request and reads lines until the answer with `id` arrives.
async fn exchange(running: &mut Running, request: String, id: &str, max_line: usize) -> Result<ToolOutcome, Failure> {
    if let Err(error) = running.stdin.write_all(request.as_bytes()).await {
        return Err(if error.kind() == std::io::ErrorKind::BrokenPipe { Failure::Died } else { Failure::Io(error) });
    }
    running.stdin.flush().await.map_err(Failure::Io)?;
    loop {
        let line = read_line(&mut running.stdout, max_line).await?;
        let Ok(Value::Object(mut response)) = serde_json::from_slice::<Value>(&line) else {
            tracing::debug!("a persistent tool printed a line that is not a response; skipped");
            continue;
        };
        if response.get("id").and_then(Value::as_str) != Some(id) {
            tracing::debug!("a persistent tool answered another id; skipped");
            continue;
        }
        if let Some(error) = response.remove("error") {
            let message = match error {
                Value::String(text) => text,
                Value::Object(ref map) if map.get("message").is_some_and(Value::is_string) => {
                    map.get("message").and_then(Value::as_str).unwrap_or_default().to_owned()
                }
                other => other.to_string(),
            };
            return Ok(ToolOutcome::error(message));
        }
        // The line is parsed once: the result is taken as it is, not written out and re-read.
        return Ok(match response.remove("result") {
            Some(value) => command::outcome_of(value),
            None => ToolOutcome::ok(Value::Null),
        });
    }
}

/// One line of stdout without its newline; `Died` at EOF, `Overflow` past `max` bytes.
async fn read_line(reader: &mut BufReader<ChildStdout>, max: usize) -> Result<Vec<u8>, Failure> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await.map_err(Failure::Io)?;
        if buf.is_empty() {
            return Err(Failure::Died);
        }
        if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&buf[..pos]);
            reader.consume(pos + 1);
            return if line.len() > max { Err(Failure::Overflow) } else { Ok(line) };
        }
        let n = buf.len();
        line.extend_from_slice(buf);
        reader.consume(n);
        if line.len() > max {
            return Err(Failure::Overflow);
        }
    }
}
