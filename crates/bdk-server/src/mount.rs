//! Mounting a discovered project as a served agent: where its state lives, which model it runs
//! on, its engine settings, and the engine itself (recovered before the first request).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_engine::{AgentConfig, Engine, EngineOptions};
use bdk_model::{ModelInput, ModelLayer, ModelProvider, ProviderOptions, ResolvedModel};
use bdk_project::Project;
use bdk_store::FsStore;
use bdk_tools::ToolRegistry;

use crate::state::Agent;

/// The project's state directory: `<state_root>/<slug>` with `--state-root`, else
/// `<project>/.bdk`.
pub fn state_dir(project: &Project, state_root: Option<&Path>) -> PathBuf {
    match state_root {
        Some(root) => root.join(&project.slug),
        None => project.dir.join(".bdk"),
    }
}

/// Resolves the project's model (command line layer `cli`, then `BDK_MODEL*`, then `agent.toml`)
/// and builds its provider. Never fails: without a usable model, calls fail with
/// `model_unavailable` and the reason.
pub fn provider(project: &Project, cli: ModelLayer) -> (ResolvedModel, Arc<dyn ModelProvider>) {
    let input = ModelInput { cli, ..bdk_engine::model_input(project) };
    let resolved = bdk_model::resolve(&input, &|name| std::env::var(name).ok());
    let provider = bdk_model::build(&resolved, &ProviderOptions::default());
    (resolved, provider)
}

/// The project's tools: its command, agent and persistent tools plus the built-in workspace tools
/// its `tools` allowlist admits. Commands see `state_dir` as `BDK_STATE_ROOT`.
pub fn tools(project: &Project, state_dir: &Path) -> Result<Arc<dyn ToolRegistry>, MountError> {
    let registry = bdk_tools::ProjectTools::builder(project)
        .state_root(state_dir)
        .build()
        .map_err(|source| MountError::Tools { slug: project.slug.clone(), source })?;
    Ok(Arc::new(registry))
}

/// Why an agent could not be mounted.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("{slug}: cannot open the state directory {}: {source}", dir.display())]
    Store {
        slug: String,
        dir: PathBuf,
        #[source]
        source: bdk_store::Error,
    },
    #[error("{slug}: cannot load its tools: {source}")]
    Tools {
        slug: String,
        #[source]
        source: bdk_tools::Error,
    },
    #[error("{slug}: recovering sessions left open by the last run failed: {source}")]
    Recover {
        slug: String,
        #[source]
        source: bdk_engine::EngineError,
    },
}

/// Opens the agent's store in `state_dir`, builds its engine and closes turns a previous
/// process left open. Returns the agent and how many turns were closed.
pub async fn mount(
    project: Project,
    state_dir: &Path,
    provider: Arc<dyn ModelProvider>,
    tools: Arc<dyn ToolRegistry>,
    options: EngineOptions,
) -> Result<(Agent, usize), MountError> {
    let store = FsStore::open(state_dir).map_err(|source| MountError::Store {
        slug: project.slug.clone(),
        dir: state_dir.to_path_buf(),
        source,
    })?;
    let engine = Engine::with_options(AgentConfig::from_project(&project), store.stores(), provider, tools, options);
    let recovered =
        engine.recover().await.map_err(|source| MountError::Recover { slug: project.slug.clone(), source })?;
    Ok((Agent::new(project, engine), recovered))
}
