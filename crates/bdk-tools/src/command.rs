//! Running a command tool, one process per call (DESIGN.md §3): argv spawned in its own process
//! group with the tool's folder as cwd, `{"input", "context"}` on stdin, JSON (or text) on stdout,
//! a non-zero exit reported with the stderr tail, and the whole group, and every process it
//! started (`contain.rs`), ended when the tool exits, times out, is cancelled, floods its
//! output, or when the call future is dropped. The call waits for a slot under the host's cap
//! on tool processes before it starts.
//!
//! This module knows nothing of schemas or policy; the registry validates before it gets here.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, Command};
use tokio_util::sync::CancellationToken;

use crate::contain::{self, Contained};
use crate::process::{self, Capped, Collected, GroupGuard};
use crate::sandbox::Sandbox;
use crate::{CallIdentity, HostAccess, ToolInvocation, ToolOutcome};

/// Environment variable names a command sees.
pub mod env {
    pub const HOST_URL: &str = "BDK_HOST_URL";
    pub const HOST_TOKEN: &str = "BDK_HOST_TOKEN";
    pub const SESSION_ID: &str = "BDK_SESSION_ID";
    pub const WORKSPACE_DIR: &str = "BDK_WORKSPACE_DIR";
    pub const STATE_ROOT: &str = "BDK_STATE_ROOT";
    pub const TOOL_CALL_ID: &str = "BDK_TOOL_CALL_ID";
    /// The namespace of the extension whose command this is.
    pub const EXTENSION: &str = "BDK_EXTENSION";
    /// That extension's `config` table, as JSON.
    pub const EXTENSION_CONFIG: &str = "BDK_EXTENSION_CONFIG";
}

/// Stdout beyond this fails the call (the process is killed).
pub const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;
/// How much of stderr a failed call reports.
pub const DEFAULT_STDERR_TAIL: usize = 4 * 1024;

/// Output limits of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most bytes read from stdout.
    pub max_output: usize,
    /// Bytes of stderr kept for an error result.
    pub stderr_tail: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_output: DEFAULT_MAX_OUTPUT, stderr_tail: DEFAULT_STDERR_TAIL }
    }
}

/// Who is calling and from where: the `context` object on stdin and the `BDK_*` environment.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    pub call_id: String,
    pub session_id: Option<String>,
    pub turn_id: Option<String>,
    pub workspace: Option<PathBuf>,
    pub state_root: Option<PathBuf>,
    pub dry_run: bool,
    pub as_of: Option<DateTime<Utc>>,
    pub host: Option<HostAccess>,
    pub identity: Option<CallIdentity>,
    /// The session's `purpose` (`"eval"` for eval sessions).
    pub purpose: Option<String>,
    /// Set when the command is an extension's: its namespace and `config`.
    pub extension: Option<ExtensionContext>,
}

/// The extension a command belongs to (`extensions/<ns>.toml`): what its `config` says.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionContext {
    pub namespace: String,
    /// The mount's `config` table, with `${NAME}` placeholders in strings read from the
    /// environment when the command starts (so secrets are read at call time).
    pub config: Value,
}

impl ExtensionContext {
    /// The config with `${NAME}` placeholders resolved now.
    pub fn resolved_config(&self) -> Value {
        resolve_placeholders(&self.config)
    }
}

fn resolve_placeholders(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            let mut out = text.clone();
            for name in bdk_project::parse::placeholders(text) {
                out = out.replace(&format!("${{{name}}}"), &std::env::var(&name).unwrap_or_default());
            }
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(resolve_placeholders).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), resolve_placeholders(v))).collect()),
        other => other.clone(),
    }
}

impl CallContext {
    pub fn from_invocation(invocation: &ToolInvocation, state_root: Option<&Path>) -> Self {
        Self {
            call_id: invocation.call_id.to_string(),
            session_id: invocation.session_id.as_ref().map(ToString::to_string),
            turn_id: invocation.turn_id.as_ref().map(ToString::to_string),
            workspace: invocation.workspace.clone(),
            state_root: state_root.map(Path::to_path_buf),
            dry_run: invocation.dry_run,
            as_of: invocation.as_of,
            host: invocation.host.clone(),
            identity: invocation.identity.clone(),
            purpose: invocation.purpose.clone(),
            extension: None,
        }
    }

    /// The `context` object: `sessionId`, `turnId`, `callId`, `workspaceDir`, `stateRoot`,
    /// `dryRun`, `asOf`, `purpose` (absent values are `null`), and for a direct call made with a
    /// continuation token `channel` and `continuationKey`, and for a call with host access
    /// `hostUrl` and `hostToken` (absent otherwise).
    pub fn to_json(&self) -> Value {
        let mut context = json!({
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "callId": self.call_id,
            "workspaceDir": self.workspace.as_ref().map(|p| p.display().to_string()),
            "stateRoot": self.state_root.as_ref().map(|p| p.display().to_string()),
            "dryRun": self.dry_run,
            "asOf": self.as_of.map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            "purpose": self.purpose,
        });
        if let (Some(extension), Some(object)) = (&self.extension, context.as_object_mut()) {
            object.insert(
                "extension".into(),
                json!({ "namespace": extension.namespace, "config": extension.resolved_config() }),
            );
        }
        if let (Some(identity), Some(object)) = (&self.identity, context.as_object_mut()) {
            object.insert("channel".into(), Value::String(identity.channel.clone()));
            object.insert("continuationKey".into(), Value::String(identity.key.clone()));
        }
        // A persistent process's environment is fixed at start, so per-call host access travels
        // here too (`hostUrl`, `hostToken`; absent when the call has none).
        if let (Some(host), Some(object)) = (&self.host, context.as_object_mut()) {
            object.insert("hostUrl".into(), Value::String(host.url.clone()));
            object.insert("hostToken".into(), Value::String(host.token.clone()));
        }
        context
    }

    /// Sets the `BDK_*` variables on `command`, and removes inherited ones this call lacks so a
    /// host's own token never leaks into a tool.
    pub fn apply_env(&self, command: &mut Command) {
        set_or_remove(command, env::TOOL_CALL_ID, Some(self.call_id.as_str()));
        set_or_remove(command, env::SESSION_ID, self.session_id.as_deref());
        let workspace = self.workspace.as_ref().map(|p| p.display().to_string());
        set_or_remove(command, env::WORKSPACE_DIR, workspace.as_deref());
        let state_root = self.state_root.as_ref().map(|p| p.display().to_string());
        set_or_remove(command, env::STATE_ROOT, state_root.as_deref());
        set_or_remove(command, env::HOST_URL, self.host.as_ref().map(|h| h.url.as_str()));
        set_or_remove(command, env::HOST_TOKEN, self.host.as_ref().map(|h| h.token.as_str()));
        let extension = self.extension.as_ref();
        set_or_remove(command, env::EXTENSION, extension.map(|e| e.namespace.as_str()));
        let config = extension.map(|e| e.resolved_config().to_string());
        set_or_remove(command, env::EXTENSION_CONFIG, config.as_deref());
        // The tool call's span, when telemetry is on (the engine makes it current): the
        // command's own spans join the trace. Never an inherited one.
        let traceparent = bdk_telemetry::traceparent::current();
        set_or_remove(command, bdk_telemetry::traceparent::ENV, traceparent.as_deref());
    }
}

fn set_or_remove(command: &mut Command, key: &str, value: Option<&str>) {
    match value {
        Some(value) => command.env(key, value),
        None => command.env_remove(key),
    };
}

/// What the process reads on stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinShape {
    /// `{"input": ..., "context": {...}}` (server tools, DESIGN.md §3).
    Envelope,
    /// The input object alone (agent-tool scripts, as in the reference).
    Input,
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// The tool name, for messages.
    pub name: String,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub timeout: Duration,
    pub limits: Limits,
    pub stdin: StdinShape,
    /// Run confined to `cwd` (an agent tool under `local.sandbox`).
    pub sandbox: Option<Sandbox>,
}

/// Builds the process for `spec` (not yet spawned). A relative program path containing `/`
/// resolves against `cwd`, so `["lib/tool.py"]` means the bot folder's `lib/`. With a sandbox
/// the program runs confined to `cwd`.
pub(crate) fn command_for(argv: &[String], cwd: &Path, sandbox: Option<&Sandbox>) -> Option<Command> {
    let (program, args) = argv.split_first()?;
    let program_path = Path::new(program);
    let program = if program.contains('/') && program_path.is_relative() {
        cwd.join(program_path)
    } else {
        PathBuf::from(program)
    };
    let mut command = match sandbox {
        Some(sandbox) => sandbox.command(cwd, &program),
        None => Command::new(program),
    };
    command.args(args).current_dir(cwd);
    Some(command)
}

/// The stdin bytes for a call.
pub(crate) fn request_bytes(shape: StdinShape, input: &Value, context: &CallContext) -> Vec<u8> {
    let value = match shape {
        StdinShape::Envelope => json!({ "input": input, "context": context.to_json() }),
        StdinShape::Input => input.clone(),
    };
    let mut bytes = value.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

/// Runs `spec` once. Never panics; every failure is an `is_error` outcome naming the tool.
pub async fn run(spec: &CommandSpec, context: &CallContext, input: &Value, cancel: CancellationToken) -> ToolOutcome {
    let name = &spec.name;
    let Some(mut command) = command_for(&spec.argv, &spec.cwd, spec.sandbox.as_ref()) else {
        return ToolOutcome::error(format!("`{name}` has an empty command"));
    };
    context.apply_env(&mut command);
    // A slot under the host's cap on tool processes; waiting for it can be cancelled.
    let _slot = tokio::select! {
        biased;
        () = cancel.cancelled() => return ToolOutcome::error(format!("`{name}` was cancelled")),
        slot = contain::admit() => slot,
    };
    let contained = Contained::tag(&mut command);
    let mut child = match process::spawn(&mut command).await {
        Ok(child) => child,
        Err(error) => {
            contained.end().await;
            let program = spec.argv.first().map(String::as_str).unwrap_or_default();
            return ToolOutcome::error(format!("`{name}` could not start `{program}`: {error}"));
        }
    };
    let mut guard = GroupGuard::new(&child);
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        guard.finish();
        contained.end().await;
        return ToolOutcome::error(format!("`{name}` started without its pipes"));
    };

    let request = request_bytes(spec.stdin, input, context);
    let writer = tokio::spawn(write_stdin(stdin, request));
    let limits = spec.limits;
    let io = process::collect(&mut child, stdout, stderr, (limits.max_output, limits.stderr_tail), &contained);

    let finished = tokio::select! {
        biased;
        () = cancel.cancelled() => Err(format!("`{name}` was cancelled")),
        () = tokio::time::sleep(spec.timeout) => Err(format!(
            "`{name}` timed out after {} and was killed",
            process::duration(spec.timeout)
        )),
        done = io => Ok(done),
    };
    writer.abort();
    guard.finish();
    contained.end().await;
    let Collected { status, stdout, stderr } = match finished {
        Ok(done) => done,
        Err(message) => return ToolOutcome::error(message),
    };

    let status = match status {
        Ok(status) => status,
        Err(error) => return ToolOutcome::error(format!("`{name}` could not be waited for: {error}")),
    };
    let stdout = match stdout {
        Ok(Capped::Complete(bytes)) => bytes,
        Ok(Capped::Exceeded) => {
            return ToolOutcome::error(format!(
                "`{name}` output exceeded {} and the process was killed",
                process::size(limits.max_output)
            ));
        }
        Err(error) => return ToolOutcome::error(format!("`{name}` stdout could not be read: {error}")),
    };
    if !status.success() {
        return exit_error(name, status, &stderr, &stdout, limits.stderr_tail);
    }
    parse_stdout(&stdout)
}

async fn write_stdin(mut stdin: ChildStdin, request: Vec<u8>) {
    // A tool that never reads stdin closes it by exiting: a broken pipe here is not an error.
    let _ = stdin.write_all(&request).await;
    let _ = stdin.shutdown().await;
}

/// The error outcome of a process that exited unsuccessfully.
pub(crate) fn exit_error(name: &str, status: ExitStatus, stderr: &[u8], stdout: &[u8], keep: usize) -> ToolOutcome {
    let how = describe_exit(status);
    let detail = if stderr.iter().any(|b| !b.is_ascii_whitespace()) {
        process::tail_text(stderr, keep)
    } else {
        process::tail_text(stdout, keep)
    };
    if detail.is_empty() {
        ToolOutcome::error(format!("`{name}` {how}"))
    } else {
        ToolOutcome::error(format!("`{name}` {how}: {detail}"))
    }
}

/// `exited with status 3`, `was killed by signal 9`.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "failed".to_owned(),
    }
}

/// Reads a successful stdout: JSON becomes the result (an `{content, isError?}` envelope sets
/// the error flag), anything else passes through as text.
pub fn parse_stdout(stdout: &[u8]) -> ToolOutcome {
    let text = String::from_utf8_lossy(stdout);
    let trimmed = text.trim();
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => outcome_of(value),
        Err(_) => ToolOutcome::ok(Value::String(trimmed.to_owned())),
    }
}

/// A result already parsed as JSON: an envelope (see [`is_envelope`]) or the value itself.
pub(crate) fn outcome_of(value: Value) -> ToolOutcome {
    match value {
        Value::Object(map) if is_envelope(&map) => envelope(map),
        value => ToolOutcome::ok(value),
    }
}

/// `{ "content": [...], "isError"?: bool, "structuredContent"?: ... }`, the reference's rich result.
fn is_envelope(map: &Map<String, Value>) -> bool {
    map.get("content").is_some_and(Value::is_array)
        && map.keys().all(|k| matches!(k.as_str(), "content" | "isError" | "structuredContent"))
}

fn envelope(mut map: Map<String, Value>) -> ToolOutcome {
    let is_error = map.remove("isError").and_then(|v| v.as_bool()).unwrap_or(false);
    ToolOutcome { is_error, result: Value::Object(map), stubbed: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_is_json_or_text() {
        assert_eq!(parse_stdout(b"{\"a\": 1}\n"), ToolOutcome::ok(json!({"a": 1})));
        assert_eq!(parse_stdout(b"\"hi\""), ToolOutcome::ok(json!("hi")));
        assert_eq!(parse_stdout(b"plain words\n"), ToolOutcome::ok(json!("plain words")));
        assert_eq!(parse_stdout(b""), ToolOutcome::ok(json!("")));
    }

    #[test]
    fn envelopes_carry_the_error_flag() {
        let outcome = parse_stdout(br#"{"content": [{"type": "text", "text": "no"}], "isError": true}"#);
        assert!(outcome.is_error);
        assert_eq!(outcome.result, json!({"content": [{"type": "text", "text": "no"}]}));
        // An ordinary object that happens to have `content` is not an envelope.
        let outcome = parse_stdout(br#"{"content": "x", "n": 1}"#);
        assert!(!outcome.is_error);
    }

    #[test]
    fn context_has_every_key() {
        let context = CallContext { call_id: "tool_x_1".into(), dry_run: true, ..CallContext::default() };
        let value = context.to_json();
        for key in ["sessionId", "turnId", "callId", "workspaceDir", "stateRoot", "dryRun", "asOf", "purpose"] {
            assert!(value.get(key).is_some(), "{key}");
        }
        assert_eq!(value["dryRun"], json!(true));
    }
}
