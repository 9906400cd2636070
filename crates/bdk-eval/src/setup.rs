//! What a run needs from its host: the project, the agent's state directory (eval state goes
//! in `evals/` under it), the agent's model, the judge's model and how to build the agent's
//! tools on a given state root. The CLI and the server both fill it in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_engine::{AgentConfig, Engine, EngineOptions};
use bdk_model::{ModelInput, ModelLayer, ModelProvider, Price, ProviderOptions};
use bdk_project::Project;
use bdk_store::FsStore;
use bdk_tools::ToolRegistry;

use crate::error::{EvalError, Result};

/// The `purpose` every eval session carries (`session.created`, the session record).
pub const PURPOSE: &str = "eval";

/// Builds the agent's tools with `state_root` as their durable state (`BDK_STATE_ROOT`, kv,
/// files): each run gets its own, apart from the served agent's.
pub type ToolsFactory = Arc<dyn Fn(&Path) -> std::result::Result<Arc<dyn ToolRegistry>, String> + Send + Sync>;

/// Everything a run is built from. Cheap to clone.
#[derive(Clone)]
pub struct EvalSetup {
    pub project: Arc<Project>,
    /// The agent's state directory (`<project>/.bdk` or `<state root>/<slug>`).
    pub state_dir: PathBuf,
    /// The agent's model.
    pub provider: Arc<dyn ModelProvider>,
    /// Token prices for the agent's cost estimates (`None`: the built-in table's).
    pub price: Option<Price>,
    /// The model that grades `judge` rubrics.
    pub judge: Arc<dyn ModelProvider>,
    pub tools: ToolsFactory,
    /// Spans and metrics of the runs' turns (disabled: none).
    pub telemetry: bdk_telemetry::Telemetry,
}

impl std::fmt::Debug for EvalSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalSetup")
            .field("agent", &self.project.slug)
            .field("state_dir", &self.state_dir)
            .field("provider", &self.provider.info())
            .field("judge", &self.judge.info())
            .finish_non_exhaustive()
    }
}

impl EvalSetup {
    /// `<state dir>/evals`: every run's folder.
    pub fn evals_dir(&self) -> PathBuf {
        self.state_dir.join("evals")
    }

    /// An engine on a store of the run's own (`<run dir>/state`), with tools built on it. Turn
    /// slots are at least `max_concurrency`, so attempts never queue behind each other.
    pub(crate) fn engine(&self, run_dir: &Path, max_concurrency: u32) -> Result<Engine> {
        let state = run_dir.join("state");
        let store = FsStore::open(&state)?;
        let tools = (self.tools)(&state).map_err(EvalError::Tools)?;
        let mut config = AgentConfig::from_project(&self.project);
        config.max_running_turns = config.max_running_turns.max(max_concurrency);
        // Skills, subagents and hooks as in production: hooks see eval sessions by their
        // `purpose`, and their own state (command sinks' `BDK_STATE_ROOT`) is the run's.
        let options = EngineOptions {
            price: self.price,
            capabilities: bdk_engine::capabilities(&self.project, &state),
            artifacts: Some(std::sync::Arc::new(store.clone())),
            telemetry: self.telemetry.clone(),
            ..EngineOptions::default()
        };
        Ok(Engine::with_options(config, store.stores(), self.provider.clone(), tools, options))
    }
}

/// The judge's model: `judge_model` from `evals/evals.toml` (resolved like an agent's `[model]`,
/// its key from the environment), else `agent` (the agent's own model).
pub fn judge_provider(project: &Project, agent: &Arc<dyn ModelProvider>) -> Arc<dyn ModelProvider> {
    let Some(model) = project.evals.as_ref().and_then(|e| e.judge_model.as_ref()) else {
        return agent.clone();
    };
    let layer = bdk_engine::model_layer(model);
    // The judge's settings form the top layer: `BDK_MODEL*` fill in only what it leaves unset.
    let input = ModelInput { cli: layer, agent: ModelLayer::default() };
    let resolved = bdk_model::resolve(&input, &|name| std::env::var(name).ok());
    bdk_model::build(&resolved, &ProviderOptions::default())
}
