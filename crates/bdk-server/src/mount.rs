//! Mounting a discovered project as a served agent: where its state lives, which model it runs
//! on, its engine settings, and the engine itself (recovered before the first request).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bdk_engine::clock::SystemClock;
use bdk_engine::reminders::Reminders;
use bdk_engine::reminders::tools::ReminderSlot;
use bdk_engine::schedules::{ScheduleOptions, Schedules};
use bdk_engine::{AgentConfig, Engine, EngineOptions};
use bdk_model::{ModelInput, ModelLayer, ModelProvider, ProviderOptions, ResolvedModel};
use bdk_project::Project;
use bdk_tools::{ProjectTools, ProjectToolsBuilder, ToolRegistry};

use crate::backend::AgentStore;
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

/// What an embedder does to every agent's registry builder before it is built: it adds native
/// tools (`bdk_cli::Embed` makes one).
pub type ExtendTools = dyn Fn(ProjectToolsBuilder) -> ProjectToolsBuilder + Send + Sync;

/// The project's tools: its command, agent and persistent tools plus the built-in workspace tools
/// its `tools` allowlist admits. Commands see `state_dir` as `BDK_STATE_ROOT`.
pub fn tools(project: &Project, state_dir: &Path) -> Result<Arc<dyn ToolRegistry>, MountError> {
    tools_with(project, state_dir, &|builder| builder)
}

/// [`tools`] plus what `extend` registers (native tools). Its `reminders_*` tools (with
/// `builtin_tools.reminders`) reach no reminders: to serve them, build the registry with
/// [`tools_with_reminders`] and mount with [`mount_with`] on the same slot.
pub fn tools_with(
    project: &Project,
    state_dir: &Path,
    extend: &ExtendTools,
) -> Result<Arc<dyn ToolRegistry>, MountError> {
    tools_with_reminders(project, state_dir, extend, &ReminderSlot::default())
}

/// [`tools_with`] whose `reminders_*` tools reach the [`Reminders`] that [`mount_with`] puts
/// in `slot`. The registry is built before the engine (the engine holds it), so the two meet
/// through a slot the caller creates for each agent and passes to both.
pub fn tools_with_reminders(
    project: &Project,
    state_dir: &Path,
    extend: &ExtendTools,
    slot: &ReminderSlot,
) -> Result<Arc<dyn ToolRegistry>, MountError> {
    Ok(tools_on_hub(project, state_dir, extend, slot, None)?.0)
}

/// [`tools_with_reminders`] on the MCP connections of `hub` when given (a hot reload keeps
/// the connections it started with), else on new ones for the project's connections. Returns
/// the registry and the hub it uses (`None`: the agent has no connections).
pub fn tools_on_hub(
    project: &Project,
    state_dir: &Path,
    extend: &ExtendTools,
    slot: &ReminderSlot,
    hub: Option<bdk_mcp::McpHub>,
) -> Result<(Arc<dyn ToolRegistry>, Option<bdk_mcp::McpHub>), MountError> {
    let mut builder = extend(ProjectTools::builder(project).state_root(state_dir));
    if project.harness.builtin_reminders {
        builder = bdk_engine::reminders::tools::register(builder, slot);
    }
    let registry = builder.build().map_err(|source| MountError::Tools { slug: project.slug.clone(), source })?;
    let hub = hub.or_else(|| connections_hub(project));
    let registry: Arc<dyn ToolRegistry> = match &hub {
        Some(hub) => Arc::new(bdk_mcp::McpTools::new(Arc::new(registry), hub.clone())),
        None => Arc::new(registry),
    };
    Ok((registry, hub))
}

/// `registry` plus the project's MCP connections (none started yet): advertised tools and the
/// `mcp` tool for the model, `host.mcp` for host code. Without connections, `registry` as is.
pub fn with_connections(project: &Project, registry: Arc<dyn ToolRegistry>) -> Arc<dyn ToolRegistry> {
    match connections_hub(project) {
        Some(hub) => Arc::new(bdk_mcp::McpTools::new(registry, hub)),
        None => registry,
    }
}

/// A hub (nothing started yet) for the project's MCP connections, if it has any. Its peers
/// (the other agents of the host) are attached when the host's routes are built.
fn connections_hub(project: &Project) -> Option<bdk_mcp::McpHub> {
    if project.caps.connections.is_empty() {
        return None;
    }
    Some(bdk_mcp::McpHub::new(&project.caps.connections, &project.bot_dir, bdk_mcp::PeerSlot::default()))
}

/// Adds the native tools `extend` registers to `project`'s model, so its manifest (`bdk info`,
/// and `GET /v1/info` once the project is mounted) lists them with `source: "native"`, and a
/// name one of them shares with a file tool or a built-in is a `name_clash` error diagnostic
/// rather than an override. Nothing is built or run.
pub fn add_native_tools(project: &mut Project, extend: &ExtendTools) {
    let defs = extend(ProjectTools::empty(project.bot_dir.clone()).without_builtins()).native_defs();
    bdk_project::checks::add_native_tools(project, defs);
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
/// process left open. Returns the agent and how many turns were closed. The `reminders_*`
/// tools of `tools` reach no reminders; see [`mount_with`].
pub async fn mount(
    project: Project,
    state_dir: &Path,
    provider: Arc<dyn ModelProvider>,
    tools: Arc<dyn ToolRegistry>,
    options: EngineOptions,
) -> Result<(Agent, usize), MountError> {
    mount_with(project, state_dir, provider, tools, options, &ReminderSlot::default()).await
}

/// [`mount`], filling `slot` (the one `tools` was built with by [`tools_with_reminders`]) with
/// the agent's reminders.
pub async fn mount_with(
    project: Project,
    state_dir: &Path,
    provider: Arc<dyn ModelProvider>,
    tools: Arc<dyn ToolRegistry>,
    options: EngineOptions,
    slot: &ReminderSlot,
) -> Result<(Agent, usize), MountError> {
    let store = crate::backend::open_fs(&project, state_dir).map_err(|source| MountError::Store {
        slug: project.slug.clone(),
        dir: state_dir.to_path_buf(),
        source,
    })?;
    mount_on(project, state_dir, AgentStore::Fs(store), provider, tools, options, slot).await
}

/// [`mount_with`] on a store already opened (either backend, see [`crate::backend`]).
pub async fn mount_on(
    project: Project,
    state_dir: &Path,
    store: AgentStore,
    provider: Arc<dyn ModelProvider>,
    tools: Arc<dyn ToolRegistry>,
    options: EngineOptions,
    slot: &ReminderSlot,
) -> Result<(Agent, usize), MountError> {
    let options = EngineOptions { capabilities: bdk_engine::capabilities(&project, state_dir), ..options };
    // Artifacts live where the agent's other state lives.
    let artifacts = match &store {
        AgentStore::Fs(fs) => Some(Arc::new(fs.clone()) as Arc<dyn bdk_store::ArtifactStore>),
        AgentStore::Pg(pg) => Some(Arc::new(pg.clone()) as Arc<dyn bdk_store::ArtifactStore>),
    };
    let options = EngineOptions { artifacts: options.artifacts.clone().or(artifacts), ..options };
    // On PostgreSQL, replicas share sessions: a session runs where its lease is (decision 0021).
    let leases = match &store {
        AgentStore::Fs(_) => None,
        AgentStore::Pg(pg) => Some(pg.leases()),
    };
    let options = EngineOptions { leases: options.leases.clone().or(leases), ..options };
    // `storage.toml`'s `policy.restore` bounds what start-up recovery restores.
    let restore = project.storage.as_ref().map_or_else(Default::default, |s| bdk_engine::RestoreLimits {
        max_sessions: s.restore_max_sessions,
        max_age: s.restore_max_age,
    });
    let options = EngineOptions { restore, ..options };
    // Tool processes a killed previous run left behind are ended before anything else runs.
    let ledger = state_dir.join(bdk_tools::contain::LEDGER_DIR);
    if let Err(error) = bdk_tools::contain::adopt_ledger(&ledger) {
        tracing::warn!(%error, ledger = %ledger.display(), "cannot use the tool process ledger");
    }
    let engine = Engine::with_options(AgentConfig::from_project(&project), store.stores(), provider, tools, options);
    let recovered =
        engine.recover().await.map_err(|source| MountError::Recover { slug: project.slug.clone(), source })?;
    let schedules = Schedules::new(
        engine.clone(),
        store.timed(),
        Arc::new(SystemClock),
        &project.caps.schedules,
        ScheduleOptions::default(),
    );
    let reminders = Reminders::new(engine.clone(), store.timed(), Arc::new(SystemClock), &project.caps.reminders);
    // The tools built with this slot now reach these reminders.
    if slot.set(reminders.clone()).is_err() {
        tracing::warn!(agent = %project.slug, "a reminder slot was mounted twice; its tools keep the first agent's reminders");
    }
    Ok((Agent::new(project, engine).with_schedules(schedules).with_reminders(reminders), recovered))
}
