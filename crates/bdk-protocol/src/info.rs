//! The project manifest: what `bdk info --json` prints for one project and `GET /v1/info`
//! returns. Field names are camelCase on the wire, like every other HTTP payload.
//!
//! The manifest only describes; it is built from the typed project model in `bdk-project`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Diagnostic;

/// Several projects, as `bdk info --json` prints them when more than one is mounted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentsInfo {
    pub agents: Vec<ProjectInfo>,
}

/// One project's manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectInfo {
    pub name: String,
    pub slug: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `bot` or the legacy `agent`.
    pub layout: String,
    pub model: ModelInfo,
    pub harness: HarnessInfo,
    pub instructions: InstructionsInfo,
    pub tools: Vec<ToolInfo>,
    pub skills: Vec<SkillInfo>,
    pub connections: Vec<ConnectionInfo>,
    pub subagents: Vec<SubagentInfo>,
    pub channels: Vec<ChannelInfo>,
    pub schedules: Vec<ScheduleInfo>,
    pub hooks: Vec<HookInfo>,
    pub reminders: Vec<ReminderInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<ArtifactsInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageInfo>,
    pub abs: Vec<AbInfo>,
    pub extensions: Vec<ExtensionInfo>,
    pub sandbox: SandboxInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosting: Option<HostingInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evals: Option<EvalsInfo>,
    pub diagnostics: Vec<Diagnostic>,
}

/// The model an agent runs on, as declared (resolution against env and CLI happens at run time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub params: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pricing: Option<PricingInfo>,
    /// `default` when nothing was declared, `agent.toml` otherwise. A subagent without its own
    /// model has no `model` at all (it runs on the parent's).
    pub source: String,
}

/// USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingInfo {
    pub input: f64,
    pub output: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessInfo {
    /// The built-in harness tool allowlist; absent means the default set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    pub builtin_tools: BuiltinToolsInfo,
    pub max_steps: u32,
    pub max_running_turns: u32,
    pub local: LocalInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuiltinToolsInfo {
    pub reminders: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalInfo {
    pub sandbox: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstructionsInfo {
    pub files: Vec<String>,
    pub bytes: u64,
}

/// Where a capability came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A file in the project.
    File,
    /// Registered in Rust through the library.
    Native,
    /// Contributed by an extension mount.
    Extension,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// `server` or `agent`.
    pub execution: String,
    /// `"read"`, `"write"`, or `{"writeWhen": <schema>}`.
    pub effect: Value,
    /// `true`, `false`, or `{"when": <schema>}`.
    pub needs_approval: Value,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run_result: Option<Value>,
    pub timeout_ms: u64,
    /// `command`, `script` or `native`.
    pub runner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillInfo {
    pub name: String,
    pub description: String,
    pub source: Source,
    pub file: String,
    /// Sibling files of a `SKILL.md` directory skill, relative to the skill directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionInfo {
    pub name: String,
    /// `model` (mcp-connections/) or `host` (host-connections/, never shown to the model).
    pub scope: String,
    pub source: Source,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `stdio`, `http` or `agent`.
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Names of the env vars (stdio) or headers (http) it sets; values are never listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// `${NAME}` placeholders read from the environment each time a client opens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placeholders: Vec<String>,
    /// `false`, `true` (every tool), or the list of advertised tool names.
    pub advertise_tools: Value,
    /// `allow_tools`: only these server tools are reachable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_tools: Option<Vec<String>>,
    /// `deny_tools`: these server tools are never reachable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_tools: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentInfo {
    pub id: String,
    pub description: String,
    pub source: Source,
    pub file: String,
    /// The subagent's own model; absent means it inherits the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    pub instructions: InstructionsInfo,
    /// The subagent's own step limit for one delegated run; absent means the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelInfo {
    pub id: String,
    /// `custom`, `webhook`, `github` or `slack`.
    pub kind: String,
    pub source: Source,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The auth chain in order; empty means the server's chain.
    pub auth: Vec<Value>,
    /// `preempt` or `coalesce`.
    pub admission: String,
    pub routes: Vec<RouteInfo>,
    /// Kind-specific settings (`[github]`, `[slack]`, `[webhook]`), secrets named, never valued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteInfo {
    pub method: String,
    pub path: String,
    /// The path under the agent's base, e.g. `/v1/channels/drive/pr`.
    pub mounted_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handler: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleInfo {
    pub id: String,
    pub source: Source,
    pub file: String,
    pub cron: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `prompt`, `run` or `receive`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<ReceiveInfo>,
    /// The next firing in UTC, RFC 3339; absent when the expression never fires again, or the
    /// schedule does not fire by itself here (`receive`; a serve under `--dev`,
    /// `--no-schedules` or `--no-control-plane`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_at: Option<String>,
    /// The latest recorded firing in the agent's state directory, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_firing: Option<FiringInfo>,
}

/// One recorded firing of a schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FiringInfo {
    /// The due time it served, RFC 3339.
    pub due_at: String,
    /// `cron`, `missed`, `dev` or `internal`.
    pub trigger: String,
    /// `claimed` (running or open), `completed` or `failed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiveInfo {
    pub channel: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookInfo {
    pub name: String,
    pub source: Source,
    pub file: String,
    pub events: Vec<String>,
    /// `{"kind":"command","command":[...]}`, `{"kind":"file","path":...}` or `{"kind":"http","url":...}`.
    pub sink: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReminderInfo {
    pub name: String,
    pub source: Source,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub command: Vec<String>,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactsInfo {
    pub file: String,
    pub agent_tool: bool,
    pub max: u32,
    pub kinds: Vec<ArtifactKindInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactKindInfo {
    pub name: String,
    pub description: String,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultInfo {
    pub file: String,
    pub command: Vec<String>,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageInfo {
    pub file: String,
    pub backend: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    pub debounce_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_max_sessions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_max_age_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbInfo {
    pub id: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub enabled: bool,
    pub arms: Vec<AbArmInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbArmInfo {
    pub id: String,
    pub weight: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// An extension mount and what it contributes, every name already namespaced (`ns__name`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionInfo {
    pub namespace: String,
    pub file: String,
    /// The mounted bot-shaped folder, relative to the project when it lies inside it.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub instructions: bool,
    pub tools: Vec<String>,
    pub skills: Vec<String>,
    pub connections: Vec<String>,
    pub subagents: Vec<String>,
    pub channels: Vec<String>,
    pub schedules: Vec<String>,
    pub hooks: Vec<String>,
    pub reminders: Vec<String>,
    pub artifact_kinds: Vec<String>,
    pub seeds: Vec<String>,
    pub egress_domains: Vec<String>,
    pub secret_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub config: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxInfo {
    /// Seed files under `sandbox/workspace/`, relative to it.
    pub seeds: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostingInfo {
    pub egress_domains: Vec<String>,
    pub secret_names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalsInfo {
    pub max_concurrency: u32,
    pub timeout_ms: u64,
    pub cases: Vec<EvalCaseInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalCaseInfo {
    /// The path under `evals/` without `.eval.toml`, plus `/<case>` for table cases.
    pub id: String,
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub turns: usize,
    pub expectations: usize,
}
