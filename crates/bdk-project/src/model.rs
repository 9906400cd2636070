//! The typed project: every definition discovery produces, resolved and checked. Runtime crates
//! read these; nothing here touches the filesystem.

use std::path::PathBuf;
use std::time::Duration;

use bdk_protocol::Diagnostic;
use bdk_protocol::info::Source;
use serde_json::{Map, Value};

/// `bot/` or the legacy `agent/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Bot,
    Agent,
}

impl Layout {
    pub fn dir_name(self) -> &'static str {
        match self {
            Layout::Bot => "bot",
            Layout::Agent => "agent",
        }
    }
}

/// One discovered project (one agent).
#[derive(Debug, Clone)]
pub struct Project {
    /// The project directory (holding `bot/`).
    pub dir: PathBuf,
    /// The agent folder (`<dir>/bot` or `<dir>/agent`).
    pub bot_dir: PathBuf,
    pub layout: Layout,
    pub slug: String,
    pub name: String,
    pub description: Option<String>,
    pub model: Option<ModelDef>,
    pub harness: Harness,
    pub hosting: Option<Hosting>,
    pub instructions: Instructions,
    pub caps: Capabilities,
    pub artifacts: Option<ArtifactsDef>,
    pub result: Option<ResultDef>,
    pub storage: Option<StorageDef>,
    pub abs: Vec<AbDef>,
    pub extensions: Vec<ExtensionDef>,
    pub evals: Option<EvalsDef>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Project {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn tool(&self, name: &str) -> Option<&ToolDef> {
        self.caps.tools.iter().find(|t| t.name == name)
    }
}

/// What a bot-shaped folder contributes. The root agent's own capabilities and every extension's
/// (already namespaced) are merged into one of these.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    pub tools: Vec<ToolDef>,
    pub skills: Vec<SkillDef>,
    pub connections: Vec<ConnectionDef>,
    pub subagents: Vec<SubagentDef>,
    pub channels: Vec<ChannelDef>,
    pub hooks: Vec<HookDef>,
    pub schedules: Vec<ScheduleDef>,
    pub reminders: Vec<ReminderDef>,
    pub artifact_kinds: Vec<ArtifactKind>,
    /// Seed files under `sandbox/workspace/`, relative to it, with their absolute paths.
    pub seeds: Vec<Seed>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelDef {
    pub id: String,
    pub provider: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub params: Map<String, Value>,
    pub pricing: Option<Pricing>,
    /// Tokens one request may hold (`[model] context_window`); `None`: the built-in table's.
    pub context_window: Option<u64>,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pricing {
    pub input: f64,
    pub output: f64,
    pub cached_input: Option<f64>,
}

/// Harness settings from `agent.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Harness {
    /// Built-in tool allowlist; `None` means the default set.
    pub tools: Option<Vec<String>>,
    pub builtin_reminders: bool,
    pub max_steps: u32,
    pub max_running_turns: u32,
    pub sandbox: bool,
    /// Confined tools may use TCP (`local.sandbox_network`).
    pub sandbox_network: bool,
    pub cwd: Option<String>,
    /// `[compaction]`: how long conversations are kept inside the context window.
    pub compaction: Compaction,
}

/// `agent.toml` `[compaction]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compaction {
    pub enabled: bool,
    /// Compact when the next request is estimated above this share of the context window.
    pub threshold: f64,
    /// The most recent turns (with the messages that asked for them) kept verbatim.
    pub keep_turns: u32,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction {
            enabled: true,
            threshold: crate::formats::agent::DEFAULT_COMPACTION_THRESHOLD,
            keep_turns: crate::formats::agent::DEFAULT_KEEP_TURNS,
        }
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self {
            tools: None,
            builtin_reminders: false,
            max_steps: 50,
            max_running_turns: 16,
            sandbox: false,
            sandbox_network: false,
            cwd: None,
            compaction: Compaction::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hosting {
    pub egress_domains: Vec<String>,
    pub secret_names: Vec<String>,
}

/// The always-on system prompt: files joined in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Instructions {
    /// Project-relative names of the files, in join order.
    pub files: Vec<String>,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Execution {
    Server,
    Agent,
}

impl Execution {
    pub fn as_str(self) -> &'static str {
        match self {
            Execution::Server => "server",
            Execution::Agent => "agent",
        }
    }
}

/// A fixed answer, or a JSON Schema over the validated input ("true when the input matches").
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    Always(bool),
    When(Value),
}

/// How a tool's body runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolBody {
    /// argv run with the agent folder as cwd, JSON on stdin/stdout.
    Command(Vec<String>),
    /// An inline script (agent tools; also allowed for server tools).
    Script(String),
    /// Registered in Rust through the library.
    Native,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub source: Source,
    /// Project-relative definition file (`None` for native tools).
    pub file: Option<String>,
    pub execution: Execution,
    /// `When(schema)` means write when the input matches, read otherwise.
    pub effect_write: Predicate,
    pub needs_approval: Predicate,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub dry_run_result: Option<Value>,
    pub time_args: Vec<String>,
    pub timeout: Duration,
    pub body: ToolBody,
    /// Run the body as one long-lived process speaking NDJSON (server tools only).
    pub persistent: bool,
    /// The folder a command runs in (the bot folder it was defined in).
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SkillDef {
    pub name: String,
    pub description: String,
    pub source: Source,
    pub file: String,
    pub path: PathBuf,
    pub body: String,
    /// Sibling files of a directory skill, relative to the skill folder.
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionScope {
    /// `mcp-connections/`: the model, server tools and handlers see it.
    Model,
    /// `host-connections/`: host code only.
    Host,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio { command: String, args: Vec<String>, env: Vec<(String, String)> },
    Http { url: String, headers: Vec<(String, String)> },
    Agent { slug: String },
}

/// Which of a connection's tools the model sees by name.
#[derive(Debug, Clone, PartialEq)]
pub enum Advertise {
    None,
    All,
    Only(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionDef {
    pub name: String,
    pub scope: ConnectionScope,
    pub source: Source,
    pub file: String,
    pub description: Option<String>,
    pub transport: Transport,
    /// The server's own tool names, as written in `advertise_tools`.
    pub advertise: Advertise,
    pub placeholders: Vec<String>,
    /// The extension namespace it was mounted under; the model sees its tools as `ns__tool`.
    pub namespace: Option<String>,
    /// `allow_tools`: only these server tools are reachable (`None`: all).
    pub allow_tools: Option<Vec<String>>,
    /// `deny_tools`: these server tools are never reachable.
    pub deny_tools: Vec<String>,
    /// Each call's limit (`timeout`, default 60 s).
    pub timeout: std::time::Duration,
}

impl ConnectionDef {
    /// Whether `allow_tools`/`deny_tools` admit the server tool `tool` (its own name).
    pub fn admits(&self, tool: &str) -> bool {
        !self.deny_tools.iter().any(|t| t == tool)
            && self.allow_tools.as_ref().is_none_or(|a| a.iter().any(|t| t == tool))
    }

    /// The name the model calls one of this server's tools by: `ns__tool` inside an extension.
    pub fn model_tool_name(&self, tool: &str) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}{}{tool}", crate::formats::NAMESPACE_SEPARATOR),
            None => tool.to_owned(),
        }
    }

    /// The model-facing names of the tools listed in `advertise_tools` (none for `false`/`true`).
    pub fn advertised_names(&self) -> Vec<String> {
        match &self.advertise {
            Advertise::Only(names) => names.iter().map(|n| self.model_tool_name(n)).collect(),
            Advertise::None | Advertise::All => Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubagentDef {
    pub id: String,
    pub description: String,
    pub source: Source,
    pub file: String,
    pub model: Option<ModelDef>,
    pub instructions: Instructions,
    pub max_steps: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    Custom,
    Webhook,
    Github,
    Slack,
}

impl ChannelKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Custom => "custom",
            ChannelKind::Webhook => "webhook",
            ChannelKind::Github => "github",
            ChannelKind::Slack => "slack",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Preempt,
    Coalesce,
}

impl Admission {
    pub fn as_str(self) -> &'static str {
        match self {
            Admission::Preempt => "preempt",
            Admission::Coalesce => "coalesce",
        }
    }
}

/// One policy of a channel's auth chain.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthPolicy {
    LocalDevStrict,
    Bearer { token_env: String, principal: Option<String> },
    AllowAll,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChannelDef {
    pub id: String,
    pub kind: ChannelKind,
    pub source: Source,
    pub file: String,
    pub description: Option<String>,
    pub auth: Vec<AuthPolicy>,
    pub admission: Admission,
    pub routes: Vec<RouteDef>,
    /// The kind-specific table (`[github]`, `[slack]`, `[webhook]`) as JSON.
    pub settings: Option<Value>,
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouteDef {
    pub method: String,
    pub path: String,
    pub description: Option<String>,
    pub body_schema: Option<Value>,
    pub query_schema: Option<Value>,
    pub handler: Vec<String>,
    pub timeout: Duration,
    /// Request headers the handler sees (lowercase names).
    pub headers: Vec<String>,
    /// The declarative form (no handler): templates that map the request into a `send`.
    pub send: Option<RouteSend>,
}

/// A route's declarative `send`: `{{body.x}}`-style templates over the request.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSend {
    pub message: String,
    pub continuation_key: Option<String>,
    pub title: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HookSink {
    /// Long-lived command reading NDJSON events on stdin.
    Command(Vec<String>),
    /// Appends NDJSON to a file (relative paths resolve under the state root).
    File(String),
    /// POSTs each event as JSON.
    Http { url: String, headers: Vec<(String, String)> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct HookDef {
    pub name: String,
    pub source: Source,
    pub file: String,
    pub events: Vec<String>,
    pub sink: HookSink,
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleAction {
    /// A task-mode session with this prompt.
    Prompt(String),
    /// A command run with the agent folder as cwd.
    Run(Vec<String>),
    /// A message handed into a channel.
    Receive { channel: String, message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleDef {
    pub id: String,
    pub source: Source,
    pub file: String,
    pub cron: String,
    pub description: Option<String>,
    pub action: ScheduleAction,
    pub cwd: PathBuf,
    /// How long a `run` command may take before it is killed and the firing fails.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReminderDef {
    pub name: String,
    pub source: Source,
    pub file: String,
    pub description: Option<String>,
    pub command: Vec<String>,
    pub timeout: Duration,
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactKind {
    pub name: String,
    pub description: String,
    pub source: Source,
    pub schema: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactsDef {
    pub file: String,
    pub agent_tool: bool,
    pub max: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResultDef {
    pub file: String,
    pub command: Vec<String>,
    pub timeout: Duration,
    /// Rejections the model may revise after before the turn fails.
    pub max_revisions: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StorageDef {
    pub file: String,
    pub backend: String,
    pub url_env: Option<String>,
    pub debounce: Duration,
    pub restore_max_sessions: Option<u32>,
    pub restore_max_age: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AbDef {
    pub id: String,
    pub file: String,
    pub description: Option<String>,
    pub enabled: bool,
    pub arms: Vec<AbArm>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AbArm {
    pub id: String,
    pub weight: u32,
    pub model: Option<String>,
    pub instructions: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionDef {
    pub namespace: String,
    pub file: String,
    pub path: PathBuf,
    pub description: Option<String>,
    pub config: Map<String, Value>,
    /// This mount's own instructions; discovery has already appended them to the root agent's
    /// (`Project::instructions`), so runtimes must not append them again.
    pub instructions: Option<Instructions>,
    pub hosting: Hosting,
    /// The namespaced names it contributed, by kind.
    pub contributed: Contributed,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contributed {
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
}

#[derive(Debug, Clone, PartialEq)]
pub struct Seed {
    /// Path under the workspace.
    pub rel: String,
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvalsDef {
    pub max_concurrency: u32,
    pub timeout: Duration,
    /// The model that grades `judge` rubrics (`None`: the agent's own model).
    pub judge_model: Option<ModelDef>,
    pub cases: Vec<EvalCase>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvalCase {
    pub id: String,
    pub file: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub turns: Vec<EvalTurn>,
    pub expect: Expectations,
    pub iterations: u32,
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvalTurn {
    pub message: String,
}

/// What a case asserts about its trajectory. Every assertion is reported, never only the first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectations {
    pub succeeded: Option<bool>,
    pub called_tool: Vec<CalledTool>,
    pub not_called_tool: Vec<String>,
    pub reply_includes: Vec<String>,
    pub reply_matches: Vec<String>,
    pub max_turn_ms: Option<u64>,
    /// A JSON Schema the final reply, read as JSON, must satisfy.
    pub reply_schema: Option<Value>,
    pub max_tool_calls: Option<u32>,
    pub max_cost_usd: Option<f64>,
    /// The whole conversation (every turn) took no longer than this.
    pub max_duration: Option<Duration>,
    /// A rubric a second model grades the conversation against (model-graded).
    pub judge: Option<String>,
}

impl Expectations {
    pub fn count(&self) -> usize {
        usize::from(self.succeeded.is_some())
            + self.called_tool.len()
            + self.not_called_tool.len()
            + self.reply_includes.len()
            + self.reply_matches.len()
            + usize::from(self.max_turn_ms.is_some())
            + usize::from(self.reply_schema.is_some())
            + usize::from(self.max_tool_calls.is_some())
            + usize::from(self.max_cost_usd.is_some())
            + usize::from(self.max_duration.is_some())
            + usize::from(self.judge.is_some())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CalledTool {
    pub name: String,
    /// A partial input: every key given must match.
    pub input: Option<Value>,
}
