//! A fixture for the tool-policy tests: a real project folder in a temp dir with tiny `sh`
//! command tools, loaded by `bdk-project` and run by `bdk-tools`' `ProjectTools`, under an
//! engine with the scripted provider. What the engine wires (approvals, dry-run, asOf,
//! workspace preparation) is then exercised end to end.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_engine::{Engine, SessionStarted, StartSession};
use bdk_model::{ScriptStep, ScriptedProvider};
use bdk_protocol::event::{ActionResult, ApprovalResolved, SessionMode};
use bdk_protocol::{CallId, Event, EventData, SessionId};
use bdk_store::Stores;
use bdk_tools::ProjectTools;
use tempfile::TempDir;

use super::support::*;

/// Needs approval; a write; leaves `promoted.marker` in the bot folder when it runs.
pub const PROMOTE: &str = r#"description = "Promote a build."
needs_approval = true
effect = "write"
command = ["sh", "-c", "cat > /dev/null; touch promoted.marker; echo '{\"promoted\": true}'"]

[input_schema]
type = "object"
required = ["env"]
properties = { env = { type = "string" } }
"#;

/// A read.
pub const LOOKUP: &str = r#"description = "Look something up."
effect = "read"
command = ["sh", "-c", "cat > /dev/null; echo '\"found\"'"]
"#;

/// A write with a dry-run result; leaves `published.marker` when it runs.
pub const PUBLISH: &str = r#"description = "Publish."
effect = "write"
dry_run_result = { published = false }
command = ["sh", "-c", "cat > /dev/null; touch published.marker; echo '{\"published\": true}'"]
"#;

/// A read bounded by `time_args`.
pub const WINDOW: &str = r#"description = "Query a time window."
effect = "read"
time_args = ["since"]
command = ["sh", "-c", "cat > /dev/null; echo '\"window\"'"]

[input_schema]
type = "object"
properties = { since = { type = "string" } }
"#;

/// Prints `notes.txt` from the session workspace.
pub const CAT_NOTES: &str = r#"description = "Read notes.txt from the workspace."
effect = "read"
command = ["sh", "-c", "cat > /dev/null; cat \"$BDK_WORKSPACE_DIR/notes.txt\""]
"#;

/// The tools of [`ToolFixture::standard`].
const STANDARD: [(&str, &str); 3] =
    [("bot/tools/promote.toml", PROMOTE), ("bot/tools/lookup.toml", LOOKUP), ("bot/tools/publish.toml", PUBLISH)];

pub struct ToolFixture {
    pub dir: TempDir,
    /// The state on this run's backend.
    pub backend: TestStore,
    /// The stores the engine runs on.
    pub stores: Stores,
    pub engine: Engine,
    pub provider: Arc<ScriptedProvider>,
    pub tools: Arc<ProjectTools>,
}

impl ToolFixture {
    /// A project with `files` (paths under the project root, e.g. `bot/tools/x.toml`) besides
    /// `bot/instructions.md`, and a provider replaying `steps`, on this run's backend.
    pub async fn new(files: &[(&str, &str)], steps: Vec<ScriptStep>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let backend = TestStore::open(&dir.path().join("state")).await;
        Self::build(dir, backend, files, steps)
    }

    /// The usual tools: promote, lookup, publish.
    pub async fn standard(steps: Vec<ScriptStep>) -> Self {
        Self::new(&STANDARD, steps).await
    }

    /// [`ToolFixture::standard`] on the filesystem, built outside any runtime: for tests that
    /// stop a runtime to simulate a crash (a database handle would die with it).
    pub fn standard_on_filesystem(steps: Vec<ScriptStep>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let backend = TestStore::filesystem(&dir.path().join("state"));
        Self::build(dir, backend, &STANDARD, steps)
    }

    fn build(dir: TempDir, backend: TestStore, files: &[(&str, &str)], steps: Vec<ScriptStep>) -> Self {
        let root = dir.path().join("proj");
        write(&root.join("bot/instructions.md"), "You are a test agent.\n");
        for (rel, text) in files {
            write(&root.join(rel), text);
        }
        let project = bdk_project::load_project(&root, false);
        let tools = Arc::new(ProjectTools::builder(&project).without_builtins().build().unwrap());
        let provider = Arc::new(ScriptedProvider::new(steps));
        let stores = backend.stores();
        let engine = Engine::new(config(), stores.clone(), provider.clone(), tools.clone());
        ToolFixture { dir, backend, stores, engine, provider, tools }
    }

    pub fn bot(&self) -> PathBuf {
        self.dir.path().join("proj/bot")
    }

    /// A fresh store and engine on the same state folder and tools, as after a restart.
    pub fn restart(&self, steps: Vec<ScriptStep>) -> (Engine, Arc<ScriptedProvider>) {
        let provider = Arc::new(ScriptedProvider::new(steps));
        (Engine::new(config(), self.backend.stores(), provider.clone(), self.tools.clone()), provider)
    }

    pub async fn start(&self, request: StartSession) -> SessionStarted {
        within(self.engine.start_session(request)).await.unwrap()
    }

    pub async fn chat(&self, message: &str) -> SessionStarted {
        self.start(start(message, SessionMode::Chat)).await
    }

    pub async fn workspace(&self, id: &SessionId) -> PathBuf {
        within(self.stores.workspaces.session_workspace(id)).await.unwrap()
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// The `action.result` of `call` (panics when there is none).
pub fn result_of<'a>(events: &'a [Event], call: &CallId) -> &'a ActionResult {
    events
        .iter()
        .find_map(|e| match &e.data {
            EventData::ActionResult(r) if &r.call_id == call => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no action.result for {call}: {:?}", types(events)))
}

/// The `action.approval_resolved` of `call`, if any.
pub fn resolution_of<'a>(events: &'a [Event], call: &CallId) -> Option<&'a ApprovalResolved> {
    events.iter().find_map(|e| match &e.data {
        EventData::ApprovalResolved(r) if &r.call_id == call => Some(r),
        _ => None,
    })
}

/// The call ids of the `actions.requested` events, in order.
pub fn requested_calls(events: &[Event]) -> Vec<(CallId, String)> {
    events
        .iter()
        .filter_map(|e| match &e.data {
            EventData::ActionsRequested(r) => Some(r.calls.iter().map(|c| (c.call_id.clone(), c.tool_name.clone()))),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Waits until `n` calls of the session are parked (`action.approval_requested`).
pub async fn parked(engine: &Engine, id: &SessionId, n: usize) -> Vec<Event> {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    until(engine, id, |e| {
        matches!(e.data, EventData::ApprovalRequested(_))
            && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == n
    })
    .await
}
