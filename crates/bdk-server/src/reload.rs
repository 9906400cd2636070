//! Hot reload (`bdk serve --dev`), the host's half: rebuilding each mounted agent's definitions
//! from a fresh discovery and swapping them in for new turns, and the reload status that
//! `GET /v1/health` serves. Watching the files and printing diagnostics belong to the CLI.
//!
//! A reload is all or nothing: a discovery with an error diagnostic, or one agent whose tools
//! cannot be built, changes nothing and is reported as `failed` with its diagnostics; the last
//! good definitions keep serving. What swaps: the project `/v1/info` shows, and the engine's
//! instructions, `max_steps`, model and price, tools (command, agent, native and built-in,
//! reminders' tools included), skills, subagents, result gate, artifacts and A/B experiments.
//! What does not (it is wired into routes, clocks or connections at mount): channels, MCP
//! connections, hooks, schedules, named reminder handlers, storage, hosting, the sandbox,
//! `max_running_turns`, and agents added or removed; a change to one of those is reported as a
//! note that it needs a restart.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bdk_engine::reminders::tools::ReminderSlot;
use bdk_engine::{AgentConfig, Definitions};
use bdk_model::ModelLayer;
use bdk_project::{Discovery, Project};
use bdk_protocol::Diagnostic;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::mount::{self, ExtendTools};
use crate::state::AppState;

/// How the host mounted one agent: what a reload needs to build its definitions the same way.
#[derive(Debug, Clone)]
pub struct Remount {
    /// The agent's state directory (`BDK_STATE_ROOT` of its commands).
    pub state_dir: PathBuf,
    /// The slot its `reminders_*` tools reach its reminders through.
    pub reminders: ReminderSlot,
    /// The command-line layer of model resolution it was mounted with.
    pub cli_model: ModelLayer,
    /// Its MCP connections, kept across reloads (a changed set needs a restart).
    pub hub: Option<bdk_mcp::McpHub>,
}

/// The outcome of the last reload, as `GET /v1/health` shows it (`reload`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadReport {
    /// `watching` (nothing reloaded yet), `ok` or `failed`.
    pub status: &'static str,
    /// When the last reload was attempted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
    /// When definitions were last swapped in (`None`: the ones served since start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ok_at: Option<DateTime<Utc>>,
    /// Successful reloads since start.
    pub reloads: u64,
    /// The last reload's diagnostics (a failed one's errors, or an ok one's warnings).
    pub diagnostics: Vec<Diagnostic>,
    /// Why a failed reload failed when it is not a diagnostic (tools that could not be built).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Changes the last reload saw that take effect only after a restart.
    pub needs_restart: Vec<String>,
}

/// The shared, current [`ReloadReport`] (`None` in `AppState`: this host does not reload).
#[derive(Debug, Clone)]
pub struct ReloadStatus(Arc<Mutex<ReloadReport>>);

impl Default for ReloadStatus {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(ReloadReport { status: "watching", ..ReloadReport::default() })))
    }
}

impl ReloadStatus {
    pub fn report(&self) -> ReloadReport {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, update: impl FnOnce(&mut ReloadReport)) {
        update(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// What [`Reloader::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// These agents now run new turns on the new definitions.
    Swapped { agents: Vec<String>, needs_restart: Vec<String> },
    /// Nothing changed: the discovery had errors, or an agent's tools could not be built.
    Failed { error: Option<String> },
}

/// Rebuilds and swaps the definitions of the agents of one [`AppState`].
pub struct Reloader {
    state: AppState,
    status: ReloadStatus,
    extend: Arc<ExtendTools>,
    mounts: HashMap<String, Remount>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").field("agents", &self.mounts.keys().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}

impl Reloader {
    /// `mounts` by slug: how each agent of `state` was mounted. `extend` adds the embedder's
    /// native tools, as at mount. The status is the one `state` serves (one is created and
    /// attached if it has none: use the returned reloader's state).
    pub fn new(state: AppState, extend: Arc<ExtendTools>, mounts: HashMap<String, Remount>) -> Self {
        let status = state.reload.clone().unwrap_or_default();
        let state = AppState { reload: Some(status.clone()), ..state };
        Self { state, status, extend, mounts }
    }

    /// The state with this reloader's status attached (serve this one).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Swaps in what `discovery` defines for every mounted agent it finds, or nothing at all
    /// when it has an error diagnostic or an agent's tools fail to build. Updates the status.
    pub fn apply(&self, discovery: &Discovery) -> Outcome {
        let at = Utc::now();
        let diagnostics: Vec<Diagnostic> = discovery.all_diagnostics().cloned().collect();
        if discovery.has_errors() {
            self.status.set(|r| {
                *r = ReloadReport { status: "failed", at: Some(at), diagnostics, ..r.clone() };
                r.error = None;
                r.needs_restart.clear();
            });
            return Outcome::Failed { error: None };
        }
        let mut notes = Vec::new();
        let mut staged = Vec::new();
        for project in &discovery.projects {
            let Some(agent) = self.state.agents.iter().find(|a| a.slug() == project.slug) else {
                notes.push(format!("agent `{}` is new: it is served after a restart", project.slug));
                continue;
            };
            let Some(mount) = self.mounts.get(&project.slug) else { continue };
            notes.extend(restart_notes(&agent.current(), project));
            match definitions(project, mount, self.extend.as_ref()) {
                Ok(definitions) => staged.push((agent, project.clone(), definitions)),
                Err(error) => {
                    let error = error.to_string();
                    self.status.set(|r| {
                        *r = ReloadReport {
                            status: "failed",
                            at: Some(at),
                            diagnostics: diagnostics.clone(),
                            error: Some(error.clone()),
                            needs_restart: Vec::new(),
                            ..r.clone()
                        }
                    });
                    return Outcome::Failed { error: Some(error) };
                }
            }
        }
        for agent in self.state.agents.iter() {
            if !discovery.projects.iter().any(|p| p.slug == agent.slug()) {
                notes.push(format!("agent `{}` is no longer found: it keeps serving until a restart", agent.slug()));
            }
        }
        let mut agents = Vec::new();
        for (agent, project, definitions) in staged {
            agent.engine.reload(definitions);
            agent.live.store(project);
            agents.push(agent.slug().to_owned());
        }
        self.status.set(|r| {
            *r = ReloadReport {
                status: "ok",
                at: Some(at),
                last_ok_at: Some(at),
                reloads: r.reloads + 1,
                diagnostics,
                error: None,
                needs_restart: notes.clone(),
            }
        });
        Outcome::Swapped { agents, needs_restart: notes }
    }
}

/// The engine definitions of `project`, built as the host built them at mount.
fn definitions(project: &Project, mount: &Remount, extend: &ExtendTools) -> Result<Definitions, mount::MountError> {
    let (tools, _) = mount::tools_on_hub(project, &mount.state_dir, extend, &mount.reminders, mount.hub.clone())?;
    let (resolved, provider) = mount::provider(project, mount.cli_model.clone());
    if let Some(problem) = &resolved.problem {
        tracing::warn!(agent = %project.slug, "model calls will fail: {problem}");
    }
    Ok(Definitions {
        config: AgentConfig::from_project(project),
        provider,
        tools,
        price: resolved.price,
        capabilities: bdk_engine::capabilities(project, &mount.state_dir),
    })
}

/// What changed between `old` and `new` that a reload does not apply.
fn restart_notes(old: &Project, new: &Project) -> Vec<String> {
    let slug = &new.slug;
    let checks: [(&str, bool); 10] = [
        ("channels", old.caps.channels != new.caps.channels),
        ("MCP connections", old.caps.connections != new.caps.connections),
        ("hooks", old.caps.hooks != new.caps.hooks),
        ("schedules", old.caps.schedules != new.caps.schedules),
        ("named reminder handlers", old.caps.reminders != new.caps.reminders),
        ("storage.toml", old.storage != new.storage),
        ("hosting", old.hosting != new.hosting),
        (
            "local.sandbox",
            (old.harness.sandbox, old.harness.sandbox_network) != (new.harness.sandbox, new.harness.sandbox_network),
        ),
        ("max_running_turns", old.harness.max_running_turns != new.harness.max_running_turns),
        ("evals", old.evals != new.evals),
    ];
    checks
        .iter()
        .filter(|(_, changed)| *changed)
        .map(|(what, _)| format!("{slug}: {what} changed; restart `bdk serve` to apply"))
        .collect()
}
