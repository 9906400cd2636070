//! A fixture for the agent-folder capabilities (skills, subagents, hooks): a real project in a
//! temp dir whose `agent.toml` points an `openai-compatible` model at the fake model server,
//! loaded by `bdk-project`, with the tools `bdk-tools` builds and the capabilities
//! `bdk_engine::capabilities` derives, under a real engine. Plus small readers of the fake
//! server's recorded requests.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_engine::{Engine, EngineOptions, Principal, SessionStarted};
use bdk_model::ProviderOptions;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{Event, SessionId};
use bdk_store::Stores;
use bdk_test_support::{FakeServer, Part, Reply, openai_sse as oa};
use bdk_tools::ProjectTools;
use serde_json::Value;
use tempfile::TempDir;

use super::support::*;

pub struct Folder {
    /// Holds the project and state folders for the test's lifetime.
    _dir: TempDir,
    /// The agent's state directory (local working folders in the PostgreSQL pass).
    state: PathBuf,
    /// The state on this run's backend.
    backend: TestStore,
    /// The stores the engine runs on.
    stores: Stores,
    pub engine: Engine,
    pub model: FakeServer,
}

impl Folder {
    /// A project with `files` (paths under `bot/`) besides `instructions.md` and `agent.toml`.
    pub async fn new(files: &[(&str, &str)]) -> Self {
        Self::with_agent_toml("", files).await
    }

    /// [`Folder::new`] with `extra` appended to `agent.toml` right after the `[model]` table's
    /// keys: it may add `[model]` keys, then tables of its own.
    pub async fn with_agent_toml(extra: &str, files: &[(&str, &str)]) -> Self {
        let model = FakeServer::start().await;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        write(&root.join("bot/instructions.md"), "You are the parent agent.\n");
        write(
            &root.join("bot/agent.toml"),
            &format!(
                "name = \"folder\"\n\n[model]\nid = \"fake-model\"\nprovider = \"openai-compatible\"\n\
                 base_url = \"{}\"\npricing = {{ input = 1.0, output = 2.0 }}\n{extra}",
                model.url()
            ),
        );
        for (rel, text) in files {
            write(&root.join("bot").join(rel), text);
        }
        let state = dir.path().join("state");
        let backend = TestStore::open(&state).await;
        let (stores, engine) = open_engine(&root, &state, &backend);
        Folder { _dir: dir, state, backend, stores, engine, model }
    }

    /// A second engine on the same project and state, as after a restart.
    pub fn reopen(&self) -> Engine {
        open_engine(&self._dir.path().join("proj"), &self.state, &self.backend).1
    }
}

fn open_engine(root: &Path, state: &Path, backend: &TestStore) -> (Stores, Engine) {
    {
        let project = bdk_project::load_project(root, false);
        let errors: Vec<_> =
            project.diagnostics.iter().filter(|d| d.severity == bdk_protocol::Severity::Error).collect();
        assert!(errors.is_empty(), "the test project has errors: {errors:?}");
        let state = state.to_path_buf();
        let tools = Arc::new(ProjectTools::builder(&project).state_root(&state).build().unwrap());
        let resolved = bdk_model::resolve(&bdk_engine::model_input(&project), &|_| None);
        let provider = bdk_model::build(&resolved, &ProviderOptions::default());
        let stores = backend.stores();
        let options = EngineOptions {
            price: resolved.price,
            capabilities: bdk_engine::capabilities(&project, &state),
            ..EngineOptions::default()
        };
        let engine = Engine::with_options(config_of(&project), stores.clone(), provider, tools, options);
        (stores, engine)
    }
}

impl Folder {
    pub async fn start(&self, message: &str) -> SessionStarted {
        within(self.engine.start_session(start(message, SessionMode::Chat))).await.unwrap()
    }

    pub fn state(&self) -> PathBuf {
        self.state.clone()
    }

    /// The firing and reminder store on this run's backend.
    pub fn timed(&self) -> Arc<dyn bdk_store::TimedStore> {
        self.backend.timed()
    }

    /// The test project as discovery sees it (for what the engine does not own: schedules,
    /// reminder handlers).
    pub fn project(&self) -> bdk_project::Project {
        bdk_project::load_project(&self._dir.path().join("proj"), false)
    }

    /// The temp folder holding `proj/` (the project) and `state/`.
    pub fn root(&self) -> PathBuf {
        self._dir.path().to_path_buf()
    }

    pub async fn workspace(&self, id: &SessionId) -> PathBuf {
        within(self.stores.workspaces.session_workspace(id)).await.unwrap()
    }

    /// Every event of `id` so far.
    pub async fn events(&self, id: &SessionId) -> Vec<Event> {
        within(self.engine.events(id, &Principal::new("alice"), 0)).await.unwrap()
    }
}

fn config_of(project: &bdk_project::Project) -> bdk_engine::AgentConfig {
    let mut config = bdk_engine::AgentConfig::from_project(project);
    config.idle_timeout = std::time::Duration::from_millis(200);
    config
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A model reply that calls tools: `(id, name, arguments JSON)`.
pub fn calls(list: &[(&str, &str, &str)], usage: (u64, u64)) -> Reply {
    let mut parts: Vec<Part> = vec![oa::role()];
    for (index, (id, name, arguments)) in list.iter().enumerate() {
        parts.push(oa::tool_call(index as u64, Some(id), Some(name), arguments));
    }
    parts.extend([oa::finish("tool_calls"), oa::usage(usage.0, usage.1, 0, 0), oa::done()]);
    Reply::sse(parts)
}

/// A model reply with a final text.
pub fn text(text: &str, usage: (u64, u64)) -> Reply {
    Reply::sse(oa::text_reply(text, usage.0, usage.1))
}

/// The system prompt of a recorded Chat Completions request.
pub fn system_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The tool names a recorded request offered.
pub fn tools_of(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| tools.iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// The tool results a recorded request carries, as `(tool_call_id, content)`.
pub fn tool_results_of(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| (m["tool_call_id"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap_or_default().to_owned()))
        .collect()
}
