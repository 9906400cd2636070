//! The `shell` tool: `sh -c <command>` in the workspace root, in its own process group, stdin
//! closed, each output stream capped; the command and every process it started (`contain.rs`)
//! are ended when it exits, times out or is cancelled.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use crate::ToolOutcome;
use crate::command::env;
use crate::contain::{self, Contained};
use crate::process::{self, Capped, Collected, GroupGuard};
use crate::sandbox::Sandbox;

/// The timeout when the call gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Each of stdout and stderr is cut to this many bytes (the end is kept).
pub const OUTPUT_CAP: usize = 64 * 1024;
/// Output past this is not even read: the command is killed.
const FLOOD_CAP: usize = 16 * 1024 * 1024;

pub(super) async fn run(
    input: &Value,
    workspace: &Path,
    sandbox: Option<&Sandbox>,
    cancel: CancellationToken,
) -> ToolOutcome {
    let Some(script) = input.get("command").and_then(Value::as_str) else {
        return ToolOutcome::error("`command` is required");
    };
    let timeout = input
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(MAX_TIMEOUT);
    let mut command = match sandbox {
        Some(sandbox) => sandbox.command(workspace, "sh"),
        None => Command::new("sh"),
    };
    command.arg("-c").arg(script).current_dir(workspace).env(env::WORKSPACE_DIR, workspace);
    command.env_remove(env::HOST_TOKEN).env_remove(env::HOST_URL);
    let _slot = tokio::select! {
        biased;
        () = cancel.cancelled() => return ToolOutcome::error("`shell` was cancelled"),
        slot = contain::admit() => slot,
    };
    let contained = Contained::tag(&mut command);
    let mut child = match process::spawn(&mut command).await {
        Ok(child) => child,
        Err(error) => {
            contained.end().await;
            return ToolOutcome::error(format!("`shell` could not start sh: {error}"));
        }
    };
    // Nothing is fed to the command: close stdin at once.
    drop(child.stdin.take());
    let mut guard = GroupGuard::new(&child);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        guard.finish();
        contained.end().await;
        return ToolOutcome::error("`shell` started without its pipes");
    };
    let io = process::collect(&mut child, stdout, stderr, (FLOOD_CAP, OUTPUT_CAP), &contained);
    let done = tokio::select! {
        biased;
        () = cancel.cancelled() => Err("`shell` was cancelled".to_owned()),
        () = tokio::time::sleep(timeout) => Err(format!(
            "`shell` timed out after {} and was killed",
            process::duration(timeout)
        )),
        done = io => Ok(done),
    };
    guard.finish();
    contained.end().await;
    let Collected { status, stdout, stderr } = match done {
        Ok(done) => done,
        Err(message) => return ToolOutcome::error(message),
    };
    let stdout = match stdout {
        Ok(Capped::Complete(bytes)) => cut(&bytes),
        Ok(Capped::Exceeded) => {
            return ToolOutcome::error(format!(
                "`shell` output exceeded {} and the command was killed",
                process::size(FLOOD_CAP)
            ));
        }
        Err(error) => return ToolOutcome::error(format!("`shell` output could not be read: {error}")),
    };
    let status = match status {
        Ok(status) => status,
        Err(error) => return ToolOutcome::error(format!("`shell` could not be waited for: {error}")),
    };
    let code = status.code();
    let result = json!({
        "exitCode": code,
        "stdout": stdout,
        "stderr": cut(&stderr),
    });
    ToolOutcome { is_error: code != Some(0), result, stubbed: false }
}

/// Text of at most [`OUTPUT_CAP`] bytes: the start and the end, with a marker between.
fn cut(bytes: &[u8]) -> String {
    if bytes.len() <= OUTPUT_CAP {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let half = OUTPUT_CAP / 2;
    format!(
        "{}\n[… {} cut …]\n{}",
        String::from_utf8_lossy(&bytes[..half]),
        process::size(bytes.len() - OUTPUT_CAP),
        String::from_utf8_lossy(&bytes[bytes.len() - half..])
    )
}
