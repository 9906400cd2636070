//! Shared fixtures: a bot folder in a temporary directory, tool definitions built in code, and
//! calls that never wait forever.

mod agent;
mod builtins;
mod command;
mod containment;
mod dry_run;
mod native;
mod persistent;
mod time_args;
mod validation;
mod workspace;

use std::fs;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bdk_project::model::{Execution, Predicate, ToolBody, ToolDef};
use bdk_protocol::info::Source;
use bdk_tools::{ProjectTools, ToolInvocation, ToolOutcome, ToolRegistry};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// No single wait in this suite may take longer.
pub const WAIT: Duration = Duration::from_secs(30);

/// Awaits `future`, failing the test after [`WAIT`].
pub async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future).await.expect("timed out waiting")
}

/// A bot folder (`<tmp>/bot`) plus a workspace and a state root beside it.
pub struct Bot {
    pub dir: TempDir,
}

impl Bot {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("bot/lib")).unwrap();
        fs::create_dir_all(dir.path().join("workspace")).unwrap();
        fs::create_dir_all(dir.path().join("state")).unwrap();
        Self { dir }
    }

    pub fn bot(&self) -> PathBuf {
        self.dir.path().join("bot")
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Writes an executable file under the bot folder and returns its path.
    pub fn script(&self, rel: &str, body: &str) -> PathBuf {
        let path = self.bot().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, body).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// A server command tool with a permissive schema, run from this bot folder.
    pub fn command(&self, name: &str, argv: &[&str]) -> ToolDef {
        def(name, ToolBody::Command(argv.iter().map(|s| s.to_string()).collect()), &self.bot())
    }

    /// A registry of `defs` (no built-ins) with this bot's state root.
    pub fn registry(&self, defs: Vec<ToolDef>) -> ProjectTools {
        let mut builder = ProjectTools::empty(self.bot()).without_builtins().state_root(self.state());
        for def in defs {
            builder = builder.tool(def);
        }
        builder.build().unwrap()
    }

    /// An invocation bound to this bot's workspace.
    pub fn invocation(&self, name: &str, input: Value) -> ToolInvocation {
        let mut invocation = ToolInvocation::generate(name, input);
        invocation.workspace = Some(self.workspace());
        invocation
    }
}

/// A tool definition with defaults: any-object input, effect write, no approval, 60 s.
pub fn def(name: &str, body: ToolBody, cwd: &Path) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: format!("The {name} test tool."),
        source: Source::File,
        file: Some(format!("bot/tools/{name}.toml")),
        execution: Execution::Server,
        effect_write: Predicate::Always(true),
        needs_approval: Predicate::Always(false),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        dry_run_result: None,
        time_args: Vec::new(),
        timeout: Duration::from_secs(20),
        body,
        persistent: false,
        cwd: cwd.to_path_buf(),
    }
}

/// Calls `name` with `input` through the registry trait, bounded by [`WAIT`].
pub async fn call(tools: &ProjectTools, invocation: ToolInvocation) -> ToolOutcome {
    within(tools.call(invocation, CancellationToken::new())).await
}

/// The text of an error outcome (panics on a success).
pub fn error_text(outcome: &ToolOutcome) -> String {
    assert!(outcome.is_error, "expected an error, got {outcome:?}");
    outcome.result.as_str().unwrap_or_default().to_owned()
}

/// Whether process `pid` has exited (gone, or a zombie nobody reaped yet).
pub fn is_dead(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// Waits (up to [`WAIT`]) until `pid` has exited.
pub async fn wait_dead(pid: u32) {
    within(async {
        while !is_dead(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// Waits (up to [`WAIT`]) until `path` exists and holds a pid.
pub async fn read_pid(path: &Path) -> u32 {
    within(async {
        loop {
            if let Ok(text) = fs::read_to_string(path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The timeouts [`time_out_after_pid_file`] tries, shortest first (each one the tools print in
/// milliseconds). A loaded machine can take seconds to start `sh`, so no single one would do.
const PID_FILE_TIMEOUTS: [u64; 7] = [250, 500, 1500, 2500, 5500, 10500, 20500];

/// Runs `attempt(timeout_ms)`, a call whose process writes a pid to `pidfile` and then hangs
/// until its timeout, with longer and longer timeouts until one struck after the pid file was
/// written (the event the test needs; a timeout that struck first proves nothing, as the process
/// it would name never started). Each attempt must end with the timeout error. Returns the
/// timeout that worked and the pid.
pub async fn time_out_after_pid_file<F, Fut>(pidfile: &Path, mut attempt: F) -> (u64, u32)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ToolOutcome>,
{
    for ms in PID_FILE_TIMEOUTS {
        let _ = fs::remove_file(pidfile);
        let text = error_text(&attempt(ms).await);
        assert!(text.contains(&format!("timed out after {ms}ms")), "{text}");
        // The call has ended its processes: a pid file that is not complete now never will be.
        if let Some(pid) = fs::read_to_string(pidfile).ok().and_then(|t| t.trim().parse().ok()) {
            return (ms, pid);
        }
    }
    panic!("the pid file was never written before a timeout of up to {PID_FILE_TIMEOUTS:?} ms");
}
