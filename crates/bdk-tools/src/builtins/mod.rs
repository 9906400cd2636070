//! The built-in harness tools on a session workspace: read, ls, glob, grep, write, edit, shell.
//! Every path is confined to the workspace ([`crate::workspace::confine`]), every tool has a
//! timeout and an output cap, and the agent's `tools` allowlist decides which the model gets
//! (default: all seven). `task`, `mcp`, skills and reminders belong to the engine, not here.

mod fs;
mod shell;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bdk_project::model::{Execution, Predicate, ToolBody, ToolDef};

use crate::sandbox::Sandbox;
use bdk_protocol::info::Source;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::ToolOutcome;
use crate::process;

/// The built-in tools, in the order the model sees them.
pub const ALL: &[Builtin] =
    &[Builtin::Read, Builtin::Ls, Builtin::Glob, Builtin::Grep, Builtin::Write, Builtin::Edit, Builtin::Shell];

/// How long a file tool (read, ls, glob, grep, write, edit) may run.
pub const FS_TIMEOUT: Duration = Duration::from_secs(30);

/// One built-in tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    Read,
    Ls,
    Glob,
    Grep,
    Write,
    Edit,
    Shell,
}

impl Builtin {
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Read => "read",
            Builtin::Ls => "ls",
            Builtin::Glob => "glob",
            Builtin::Grep => "grep",
            Builtin::Write => "write",
            Builtin::Edit => "edit",
            Builtin::Shell => "shell",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        ALL.iter().copied().find(|b| b.name() == name)
    }

    /// Whether it changes the workspace (stubbed in dry-run sessions).
    pub fn writes(self) -> bool {
        matches!(self, Builtin::Write | Builtin::Edit | Builtin::Shell)
    }

    pub fn description(self) -> &'static str {
        match self {
            Builtin::Read => {
                "Read a text file in the workspace. `offset` is the first line (1-based) and `limit` \
                 the number of lines; long files are cut."
            }
            Builtin::Ls => "List a folder of the workspace (default: its root). Folders end with `/`.",
            Builtin::Glob => {
                "Find files in the workspace whose path matches a glob such as `**/*.rs` or `src/*.md`. \
                 Paths are relative to the workspace."
            }
            Builtin::Grep => {
                "Search file contents in the workspace with a regular expression. Prints `path:line:text`. \
                 `glob` narrows the files searched."
            }
            Builtin::Write => "Write a file in the workspace, creating folders as needed and replacing any file there.",
            Builtin::Edit => {
                "Replace an exact string in a workspace file. `old_string` must occur exactly once unless \
                 `replace_all` is true."
            }
            Builtin::Shell => {
                "Run a shell command (`sh -c`) in the workspace root. Returns the exit code, stdout and stderr."
            }
        }
    }

    pub fn input_schema(self) -> Value {
        let path = json!({"type": "string", "description": "A path relative to the workspace."});
        match self {
            Builtin::Read => json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            Builtin::Ls => json!({
                "type": "object",
                "properties": {"path": path},
                "additionalProperties": false
            }),
            Builtin::Glob => json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A glob; `**` crosses folders, `*` does not."},
                    "path": {"type": "string", "description": "The folder to search (default: the workspace root)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            Builtin::Grep => json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A regular expression (Rust syntax)."},
                    "path": {"type": "string", "description": "A file or folder (default: the workspace root)."},
                    "glob": {"type": "string", "description": "Only search files whose path matches this glob."},
                    "ignore_case": {"type": "boolean"}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
            Builtin::Write => json!({
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": false
            }),
            Builtin::Edit => json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "old_string": {"type": "string", "minLength": 1},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
            Builtin::Shell => json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1},
                    "timeout_ms": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": shell::MAX_TIMEOUT.as_millis() as u64,
                        "description": "Kill the command after this long (default 120000)."
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    /// The definition the registry keeps for it (validation, effect, dry-run).
    pub fn def(self, cwd: PathBuf) -> ToolDef {
        ToolDef {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            source: Source::Native,
            file: None,
            execution: Execution::Agent,
            effect_write: Predicate::Always(self.writes()),
            needs_approval: Predicate::Always(false),
            input_schema: self.input_schema(),
            output_schema: None,
            dry_run_result: None,
            time_args: Vec::new(),
            timeout: if self == Builtin::Shell { shell::MAX_TIMEOUT } else { FS_TIMEOUT },
            body: ToolBody::Native,
            persistent: false,
            cwd,
        }
    }
}

/// The built-ins an agent gets: its `tools` allowlist (names that are not built-ins here are
/// ignored), or all seven.
pub fn active(allowlist: Option<&[String]>) -> Vec<Builtin> {
    match allowlist {
        Some(names) => ALL.iter().copied().filter(|b| names.iter().any(|n| n == b.name())).collect(),
        None => ALL.to_vec(),
    }
}

/// Runs `builtin` with validated `input` in `workspace`.
pub async fn run(
    builtin: Builtin,
    input: Value,
    workspace: Option<&Path>,
    sandbox: Option<&Sandbox>,
    cancel: CancellationToken,
) -> ToolOutcome {
    let name = builtin.name();
    let Some(workspace) = workspace else {
        return ToolOutcome::error(format!("`{name}` needs a session workspace, and this call has none"));
    };
    if let Err(error) = std::fs::create_dir_all(workspace) {
        return ToolOutcome::error(format!("the workspace cannot be created: {error}"));
    }
    if builtin == Builtin::Shell {
        return shell::run(&input, workspace, sandbox, cancel).await;
    }
    let root = workspace.to_path_buf();
    let deadline = std::time::Instant::now() + FS_TIMEOUT;
    let job = tokio::task::spawn_blocking(move || fs::run(builtin, &input, &root, deadline));
    tokio::select! {
        biased;
        () = cancel.cancelled() => ToolOutcome::error(format!("`{name}` was cancelled")),
        () = tokio::time::sleep(FS_TIMEOUT) => {
            ToolOutcome::error(format!("`{name}` timed out after {}", process::duration(FS_TIMEOUT)))
        }
        joined = job => match joined {
            Ok(Ok(text)) => ToolOutcome::ok(Value::String(text)),
            Ok(Err(message)) => ToolOutcome::error(message),
            Err(error) => ToolOutcome::error(format!("`{name}` failed: {error}")),
        },
    }
}
