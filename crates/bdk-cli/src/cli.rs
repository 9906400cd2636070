//! The command-line grammar. Every flag is documented in docs/cli.md.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "bdk",
    version,
    about = "Build, check and serve filesystem-first LLM agents.",
    propagate_version = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a project and print every diagnostic; exits 1 when there are errors.
    Validate(ProjectArgs),
    /// Describe what a project exposes: model, tools, skills, channels, schedules, ...
    Info(ProjectArgs),
    /// Scaffold a new project that passes `bdk validate`.
    Init(InitArgs),
    /// Serve one or more agents over HTTP (the session API of docs/http.md).
    Serve(ServeArgs),
    /// Run one turn in-process, streaming the reply and tool calls; `--session` continues one.
    Run(RunArgs),
    /// Talk to an agent interactively: streamed replies, approvals asked inline, /commands.
    Chat(ChatArgs),
    /// Print the reply, tool calls and usage of a saved event stream (the JSON of `run --json`).
    Trajectory(TrajectoryArgs),
    /// Print a session's per-turn token usage and estimated cost.
    Cost(CostArgs),
    /// Call one server tool directly, with no model turn; prints the route's JSON envelope.
    Call(CallArgs),
    /// List each schedule with its next firing and its last recorded outcome.
    Schedules(SchedulesArgs),
    /// Run a project's evals (or list them, or compare two saved runs); exits 1 when a case fails.
    Eval(EvalArgs),
    /// Print help for bdk or a command; `--json` prints the command tree with every flag.
    Help(HelpArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    Completions(CompletionsArgs),
    /// Run a command confined by Landlock (how `local.sandbox` launches tools; not for people).
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec(SandboxExecArgs),
    /// GitHub tooling: `replay` sends a saved webhook delivery, signed, to a running server.
    Github(GithubArgs),
    /// MCP connections: `bdk mcp list` opens each server and lists the tools it offers.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Apply the PostgreSQL schema migrations, and optionally copy filesystem state into it.
    Migrate(MigrateArgs),
}

/// `bdk mcp ...`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Open each MCP connection (model and host) and list its tools; exits 3 when one fails.
    List(ProjectArgs),
}

/// `bdk github`.
#[derive(Debug, Args)]
pub struct GithubArgs {
    #[command(subcommand)]
    pub command: GithubCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum GithubCommand {
    /// Sign a saved webhook delivery (`X-Hub-Signature-256`) and send it to a running server.
    Replay(ReplayArgs),
}

/// `bdk github replay`. Exit codes: 0 the server accepted it (2xx), 3 otherwise.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The saved delivery (the JSON body GitHub posted), e.g. `pull_request.opened.json`.
    #[arg(value_name = "PAYLOAD.json")]
    pub payload: PathBuf,
    /// The server (`http://127.0.0.1:3000`: the loopback fan-out `/v1/webhooks/github`), or a
    /// channel's webhook URL (`.../v1/channels/<id>/webhook`).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// The event (`X-GitHub-Event`); default: the file name's first part, else the payload's shape.
    #[arg(long, value_name = "EVENT")]
    pub event: Option<String>,
    /// The environment variable holding the webhook secret to sign with.
    #[arg(long, value_name = "NAME", default_value = "GITHUB_WEBHOOK_SECRET")]
    pub secret_env: Option<String>,
    /// The delivery id (`X-GitHub-Delivery`); default: a fresh one.
    #[arg(long, value_name = "ID")]
    pub delivery: Option<String>,
}

/// `bdk sandbox-exec`: confine this process, then exec the command.
#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    /// A folder the command may read and write (the session workspace). Repeatable.
    #[arg(long = "rw", value_name = "DIR")]
    pub read_write: Vec<PathBuf>,
    /// A folder the command may read and execute from. Repeatable.
    #[arg(long = "ro", value_name = "DIR")]
    pub read_only: Vec<PathBuf>,
    /// Allow TCP connect and bind.
    #[arg(long)]
    pub network: bool,
    /// Run unconfined (with a warning) where the kernel cannot confine.
    #[arg(long)]
    pub allow_unconfined: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

/// `bdk help`.
#[derive(Debug, Args)]
pub struct HelpArgs {
    /// The command (and subcommand) to describe; none describes `bdk` itself.
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Print the command tree as JSON: each command's name, about, flags and subcommands.
    #[arg(long)]
    pub json: bool,
}

/// `bdk completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

impl Command {
    /// The project folders the command reads (their `.env` files are loaded).
    pub fn dirs(&self) -> Vec<PathBuf> {
        match self {
            Command::Validate(a) | Command::Info(a) => a.dirs.clone(),
            Command::Serve(a) => a.dirs.clone(),
            Command::Run(a) => vec![a.dir.clone()],
            Command::Chat(a) => vec![a.dir.clone()],
            Command::Cost(a) => a.dir.iter().cloned().collect(),
            Command::Call(a) => a.dir.iter().cloned().collect(),
            Command::Schedules(a) => a.project.dirs.clone(),
            Command::Eval(a) => vec![a.dir.clone()],
            Command::Init(_)
            | Command::Trajectory(_)
            | Command::Help(_)
            | Command::Completions(_)
            | Command::SandboxExec(_)
            | Command::Github(_) => Vec::new(),
            Command::Mcp(McpCommand::List(a)) => a.dirs.clone(),
            Command::Migrate(_) => Vec::new(),
        }
    }
}

/// `bdk schedules`.
#[derive(Debug, Args)]
pub struct SchedulesArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Where state lives: `<DIR>/<slug>/` per agent (default: `<project>/.bdk/`, as `serve` uses).
    #[arg(long, value_name = "DIR")]
    pub state_root: Option<PathBuf>,
    /// Read the firings from this PostgreSQL database, as `serve --database-url` keeps them
    /// (default: `BDK_DATABASE_URL`, else the project's `storage.toml`). Nothing is migrated.
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,
}

#[derive(Debug, Args)]
pub struct ProjectArgs {
    /// A project folder (holding bot/ or agent/) or a folder of projects. Repeatable.
    #[arg(long = "dir", value_name = "DIR", default_value = ".")]
    pub dirs: Vec<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to create (it must not exist, or be empty).
    #[arg(value_name = "DIR", required_unless_present = "list")]
    pub dir: Option<PathBuf>,
    /// The template to start from.
    #[arg(long, default_value = "default", value_name = "NAME")]
    pub template: String,
    /// The agent's display name, written to bot/agent.toml (default: the folder name).
    #[arg(long)]
    pub name: Option<String>,
    /// List the templates and exit.
    #[arg(long)]
    pub list: bool,
}

/// `bdk serve`. Flags are documented in docs/cli.md and docs/http.md.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A project folder (holding bot/ or agent/) or a folder of projects. Repeatable.
    #[arg(long = "dir", value_name = "DIR", default_value = ".")]
    pub dirs: Vec<PathBuf>,
    /// Port to listen on; 0 picks any free port. Without the flag, 3000 or the next free one.
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Local-development behaviour: session listings show every principal to loopback callers.
    #[arg(long)]
    pub dev: bool,
    /// Route layout: `multi` (`/<slug>/v1/...`) or `single` (`/v1/...`, exactly one agent).
    #[arg(long, value_enum, default_value = "multi")]
    pub mode: ServeMode,
    /// Require `Authorization: Bearer SECRET`; `NAME=SECRET` names the principal. Repeatable.
    #[arg(
        long = "bearer-token",
        value_name = "[NAME=]SECRET",
        env = "BDK_BEARER_TOKEN",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub bearer_tokens: Vec<String>,
    /// Admit requests without credentials (as principal `anonymous`).
    #[arg(long)]
    pub allow_anonymous: bool,
    /// Serve agents with `local.sandbox = true` even where the kernel cannot confine their
    /// tools (no Landlock): their tools then run unconfined, with a warning.
    #[arg(long)]
    pub allow_unconfined: bool,
    /// Where session state lives: `<DIR>/<slug>/` per agent (default: `<project>/.bdk/`).
    #[arg(long, value_name = "DIR")]
    pub state_root: Option<PathBuf>,
    /// Serve no playground or agent index (`/`, `/v1/agents`).
    #[arg(long)]
    pub no_playground: bool,
    /// Serve no documentation site.
    #[arg(long)]
    pub no_docs: bool,
    /// Never fire schedules on their cron cadence (dispatch by hand still works under --dev).
    #[arg(long)]
    pub no_schedules: bool,
    /// Serve Prometheus text metrics at `GET /metrics` (no auth; off by default). Spans and
    /// OTLP metrics are configured by the standard OTEL_* variables instead (docs/telemetry.md).
    #[arg(long)]
    pub metrics: bool,
    /// Run no schedule or reminder clocks; serve `POST /v1/internal/schedules/:id/fire` for an
    /// external scheduler instead (requests must carry the timed-work marker header).
    #[arg(long)]
    pub no_control_plane: bool,
    /// After SIGTERM or ctrl-c, how long running turns may finish before they are cancelled.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    pub drain_grace: std::time::Duration,
    /// Connections held at once (default: 1024, or half the open-file limit when lower).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// One-request connections admitted past --max-connections, so health checks still answer.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub reserved_connections: usize,
    /// Time to read a request's head; also how long a keep-alive connection may sit idle.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub header_timeout: std::time::Duration,
    /// Longest pause between two chunks of a request body.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub body_timeout: std::time::Duration,
    /// Largest request body in bytes (413 above it, refused on `Content-Length` before reading).
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub body_limit: usize,
    /// Threads that run the async work (HTTP, sessions, model streams); default: one less than
    /// the CPUs, at least one (the other CPU stays for the store's writers and tool processes).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    /// Tool processes (command, agent and shell calls) running at once; more wait for a slot
    /// (default: four per CPU, at least 8).
    #[arg(long, value_name = "N")]
    pub max_tool_processes: Option<usize>,
    /// Tool calls one model step may run; the rest get an error result naming the limit.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_tool_calls_per_step: usize,
    /// Bytes of output (text, reasoning, tool-call arguments) one model step may produce; past
    /// it the step is cut off and the turn fails with `output_too_large`.
    #[arg(long, value_name = "BYTES", default_value_t = 1024 * 1024)]
    pub max_output_bytes: usize,
    /// Output tokens one model step may use, as the provider reports them (default: no cap).
    #[arg(long, value_name = "N")]
    pub max_output_tokens: Option<u64>,
    /// Log lines on stderr: `text` for people (an access line per request, a line per turn
    /// start and end) or `json`, one object per line for machines.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Keep every agent's durable state in this PostgreSQL database instead of the filesystem
    /// (replicas sharing one database serve the same sessions). See docs/deployment.md.
    #[arg(long, value_name = "URL", env = "BDK_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Do not apply pending database migrations at start (refuse to start if any are pending).
    #[arg(long)]
    pub no_migrate: bool,
    /// Connections each agent database pool may hold.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub database_pool_size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `bdk migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The PostgreSQL database to bring up to date.
    #[arg(long, value_name = "URL", env = "BDK_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Also copy a filesystem state directory into the database: a state root holding one
    /// folder per agent slug (`--state-root`), or one agent's state directory with --agent.
    #[arg(long, value_name = "DIR")]
    pub from_fs: Option<PathBuf>,
    /// The agent slug the rows of a single state directory (`--from-fs <project>/.bdk`) belong to.
    #[arg(long, value_name = "SLUG")]
    pub agent: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeMode {
    Multi,
    Single,
}

/// `bdk run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The project folder (holding bot/ or agent/).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// The user message.
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub message: String,
    /// Print the trajectory as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where state lives: `<STATE_ROOT>/<slug>/` (default: `<project>/.bdk/`, as `serve` uses).
    #[arg(long, value_name = "DIR")]
    pub state_root: Option<PathBuf>,
    /// Send the message to this existing session (printed by an earlier `run` or `chat`).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Approve parked calls of this tool without asking; `all` approves every tool. Repeatable.
    #[arg(long, value_name = "TOOL|all")]
    pub approve: Vec<String>,
    /// Deny parked calls of this tool; `all` denies every tool not approved by name. Repeatable.
    #[arg(long, value_name = "TOOL|all")]
    pub deny: Vec<String>,
    /// Start the session in dry-run mode: write-effect tools return their `dry_run_result`.
    #[arg(long, conflicts_with = "session")]
    pub dry_run: bool,
}

/// `bdk chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The project folder (holding bot/ or agent/).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Chat with a running server instead; the agent's base URL (e.g. `http://127.0.0.1:3000/hello`).
    #[arg(long, value_name = "URL", conflicts_with = "state_root")]
    pub url: Option<String>,
    /// With `--url`: the bearer token the server requires.
    #[arg(long, value_name = "SECRET", env = "BDK_TOKEN", hide_env_values = true, requires = "url")]
    pub token: Option<String>,
    /// With `--url --session`: the session's current continuation token (it rotates on every
    /// message; `POST /v1/session` and each follow-up answer it).
    #[arg(long, value_name = "TOKEN", requires = "session")]
    pub continuation_token: Option<String>,
    /// Resume this session instead of starting a new one on the first message.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Send this message first (then keep reading messages from the terminal).
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub message: Option<String>,
    /// Approve parked calls of this tool without asking; `all` approves every tool. Repeatable.
    #[arg(long, value_name = "TOOL|all")]
    pub approve: Vec<String>,
    /// Deny parked calls of this tool without asking; `all` denies every tool. Repeatable.
    #[arg(long, value_name = "TOOL|all")]
    pub deny: Vec<String>,
    /// Start new sessions in dry-run mode (toggle with `/dry-run`).
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dir`: where state lives (default: `<project>/.bdk/`, as `serve` uses).
    #[arg(long, value_name = "DIR")]
    pub state_root: Option<PathBuf>,
}

/// `bdk trajectory`.
#[derive(Debug, Args)]
pub struct TrajectoryArgs {
    /// A saved event stream: `traces/<sessionId>.ndjson` or `sessions/<id>/events.ndjson`.
    #[arg(long, value_name = "FILE")]
    pub events: PathBuf,
}

/// `bdk cost`.
#[derive(Debug, Args)]
pub struct CostArgs {
    /// The session id.
    #[arg(long, value_name = "ID")]
    pub session: String,
    /// Read the session from this project's state directory (default: `.` unless `--url`).
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    pub dir: Option<PathBuf>,
    /// Ask a running server instead (`GET /v1/session/:id/cost`); the agent's base URL.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With `--url`: the bearer token the server requires.
    #[arg(long, value_name = "SECRET", env = "BDK_TOKEN", hide_env_values = true, requires = "url")]
    pub token: Option<String>,
    /// The state root `serve` used (default: `<project>/.bdk/`); not with `--url`.
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    pub state_root: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `bdk call`. Exit codes: 0 the tool ran, 1 it reported `isError`, 3 an error code.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool to call (a server tool of the project).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Run on this project, through an ephemeral in-process server on its state directory
    /// (default: `.` unless `--url`).
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    pub dir: Option<PathBuf>,
    /// Call a running server instead (`POST /v1/tools/:name`); the agent's base URL.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// The tool's input, a JSON object; `-` reads it from stdin.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub input: String,
    /// Bind the call to this session: its workspace, the owner check, recorded on its stream.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Bind by continuation token (`<channelId>:<key>`); with no session behind it, the call runs
    /// in a scratch workspace with the token's channel and key as its identity.
    #[arg(long, value_name = "TOKEN")]
    pub continuation_token: Option<String>,
    /// With `--url`: the bearer token the server requires.
    #[arg(long, value_name = "SECRET", env = "BDK_TOKEN", hide_env_values = true, requires = "url")]
    pub token: Option<String>,
    /// The state root `serve` uses (default: `<project>/.bdk/`); not with `--url`.
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    pub state_root: Option<PathBuf>,
}

/// `bdk eval`. Exit codes: 0 every case passed, 1 a case failed (or `--compare` found a
/// regression, or the project has errors), 3 nothing to run.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The project folder (holding bot/ or agent/, with evals/ beside it).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// List the selected evals and exit.
    #[arg(long)]
    pub list: bool,
    /// Only evals with this tag. Repeatable: any of them.
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Only this eval id and the cases under it. Repeatable: any of them.
    #[arg(long = "filter", value_name = "ID")]
    pub filters: Vec<String>,
    /// Run every selected case this many times (instead of its `iterations`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: Option<u32>,
    /// Print JSON (the run snapshot, the list, or the comparison) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JUnit XML to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Compare two saved runs (ids, or paths to run.json files) instead of running.
    #[arg(long, num_args = 2, value_names = ["RUN_A", "RUN_B"], conflicts_with_all = ["list", "junit", "iterations"])]
    pub compare: Option<Vec<String>>,
    /// Where state lives: `<STATE_ROOT>/<slug>/` (default: `<project>/.bdk/`, as `serve` uses).
    #[arg(long, value_name = "DIR")]
    pub state_root: Option<PathBuf>,
}
