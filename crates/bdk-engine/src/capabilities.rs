//! What the engine is told about the agent's run-time capabilities beyond its tools: skills,
//! subagents and hooks, as plain data. `setup.rs` fills it from a discovered project; the
//! capability modules (`skills.rs`, `subagents.rs`, `hooks/`) act on it. Like `types.rs`, this
//! module imports nothing of the crate.

use std::path::PathBuf;
use std::sync::Arc;

use bdk_model::{ModelProvider, Price};

/// The agent's skills, subagents and hooks. Empty by default: an engine built without a
/// project advertises no skills, has no `task` tool and runs no hooks.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// Advertised to the model by name and description; loaded with the skill tool.
    pub skills: Vec<SkillSpec>,
    /// Reachable through the `task` tool (empty when the agent's tool allowlist leaves `task` out).
    pub subagents: Vec<SubagentSpec>,
    /// Observers of every session's events.
    pub hooks: Vec<HookSpec>,
    /// The agent's durable state root (hook context `stateRoot`; relative file sinks land here).
    pub state_root: Option<PathBuf>,
    /// Artifact kinds, the `tag_artifact` opt-in and the retention cap (`artifacts.toml`).
    pub artifacts: ArtifactsSpec,
    /// The result gate (`result.toml`), when the agent has one.
    pub result_gate: Option<ResultGateSpec>,
    /// Live A/B experiments (`ab.toml`, `ab/*.toml`), disabled ones included (they assign
    /// nothing but still report totals).
    pub abs: Vec<AbSpec>,
    /// `local.cwd`, absolute: session workspaces are `<this>/<session id>/` (`local_cwd.rs`).
    /// `None`: under the state directory.
    pub workspace_parent: Option<PathBuf>,
    /// How long conversations are kept inside the model's context window (`compaction.rs`).
    pub compaction: CompactionSpec,
    /// Each extension mount's namespace and `config`: what the commands an extension
    /// contributed (schedule `run`, reminder handlers, channel handlers) are given.
    pub extensions: Vec<bdk_tools::command::ExtensionContext>,
}

/// `agent.toml`'s `[compaction]` and `[model] context_window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionSpec {
    pub enabled: bool,
    /// Tokens one request may hold; `None`: the built-in table's for the turn's model (and
    /// when that has none, compaction happens only when the provider refuses a request).
    pub context_window: Option<u64>,
    /// Compact when a request is estimated above this share of the window.
    pub threshold: f64,
    /// The most recent turns kept verbatim (with the messages that asked for them).
    pub keep_turns: u32,
}

impl Default for CompactionSpec {
    fn default() -> Self {
        CompactionSpec { enabled: true, context_window: None, threshold: 0.8, keep_turns: 2 }
    }
}

/// One experiment.
#[derive(Debug, Clone)]
pub struct AbSpec {
    pub id: String,
    pub description: Option<String>,
    pub enabled: bool,
    pub arms: Vec<AbArmSpec>,
}

/// One arm: its weight and what it changes.
#[derive(Debug, Clone)]
pub struct AbArmSpec {
    pub id: String,
    pub weight: u32,
    /// Appended to the agent's instructions for sessions in this arm.
    pub instructions: Option<String>,
    /// The model id sessions in this arm run on, with its provider.
    pub model: Option<(String, SubagentModel)>,
}

/// What `artifacts.toml` says, or its defaults when the agent has none (host code can still tag
/// free-form kinds then; the model gets no tool).
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactsSpec {
    /// Offer the model `tag_artifact`.
    pub agent_tool: bool,
    /// How many artifacts are kept; the oldest-updated are evicted past it.
    pub max: usize,
    /// Declared kinds; empty: kinds are free-form and an omitted kind is `artifact`.
    pub kinds: Vec<ArtifactKindSpec>,
}

impl Default for ArtifactsSpec {
    fn default() -> Self {
        ArtifactsSpec { agent_tool: false, max: DEFAULT_ARTIFACTS_MAX, kinds: Vec::new() }
    }
}

/// The retention cap without `artifacts.toml` (the reference's default).
pub const DEFAULT_ARTIFACTS_MAX: usize = 1000;

#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactKindSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema the artifact's data must match.
    pub schema: Option<serde_json::Value>,
}

/// The result gate: a command that accepts or rejects each turn's final text.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultGateSpec {
    pub command: Vec<String>,
    pub timeout: std::time::Duration,
    /// Where the command runs (the agent folder).
    pub cwd: PathBuf,
    /// Rejections the model may revise after; one more fails the turn.
    pub max_revisions: u32,
}

/// One skill as the model may load it.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillSpec {
    /// The skill's name (`<ns>__<name>` for an extension's).
    pub name: String,
    /// The routing rule the model reads before deciding to load it.
    pub description: String,
    /// The Markdown body (frontmatter removed).
    pub body: String,
    /// Sibling files of a folder skill, relative to the skill's folder.
    pub files: Vec<String>,
}

/// One subagent the `task` tool can run.
#[derive(Debug, Clone)]
pub struct SubagentSpec {
    pub id: String,
    /// The routing rule listed in the `task` tool's description.
    pub description: String,
    /// Its system prompt; empty: the parent's instructions.
    pub instructions: String,
    /// Model steps per child turn; `None`: the parent's.
    pub max_steps: Option<u32>,
    /// Its own model; `None`: the parent's provider.
    pub model: Option<SubagentModel>,
}

/// A subagent's own model.
#[derive(Debug, Clone)]
pub struct SubagentModel {
    pub provider: Arc<dyn ModelProvider>,
    pub price: Option<Price>,
}

/// One hook: which events it wants and where they go.
#[derive(Debug, Clone, PartialEq)]
pub struct HookSpec {
    pub name: String,
    /// Event types, or `"*"`.
    pub events: Vec<String>,
    pub sink: HookSinkSpec,
    /// The working directory of a `command` sink (the agent folder).
    pub cwd: PathBuf,
    /// Extra environment of a `command` sink: an extension's hook gets `BDK_EXTENSION` and
    /// `BDK_EXTENSION_CONFIG`.
    pub env: Vec<(String, String)>,
}

/// Where a hook's events go.
#[derive(Debug, Clone, PartialEq)]
pub enum HookSinkSpec {
    /// A long-lived process reading one JSON line per event on stdin.
    Command(Vec<String>),
    /// NDJSON appended to a file.
    File(PathBuf),
    /// Batched JSON POSTs; `${NAME}` placeholders are already resolved.
    Http { url: String, headers: Vec<(String, String)> },
}

impl HookSpec {
    /// Whether the hook subscribed to `event_type`.
    pub fn wants(&self, event_type: &str) -> bool {
        self.events.iter().any(|e| e == "*" || e == event_type)
    }
}
