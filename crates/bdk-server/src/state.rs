//! What the routes share: the mounted agents (each with its engine and project), the serve
//! options, the log buffer, and the token that ends live streams at shutdown.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bdk_engine::Engine;
use bdk_engine::reminders::Reminders;
use bdk_engine::schedules::Schedules;
use bdk_eval::EvalService;
use bdk_project::Project;
use tokio_util::sync::CancellationToken;

use crate::auth::{AuthPolicy, AuthState};
use crate::host_services::HostTokens;
use crate::logs::LogBuffer;

/// The default request body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// Route layout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// `/<slug>/v1/...` per agent, host routes at the root.
    #[default]
    Multi,
    /// One agent at `/v1/...`.
    Single,
}

/// How the host serves, from the `serve` flags.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub mode: Mode,
    pub dev: bool,
    pub auth: AuthPolicy,
    /// `--no-playground` clears it: no `/` index, no `/v1/agents`, no `playgroundUrl`.
    pub playground: bool,
    /// `--no-docs` clears it (no docs routes are served yet).
    pub docs: bool,
    /// Largest request body accepted (413 above it).
    pub body_limit: usize,
    /// Schedules fire on their cron cadence. `--no-schedules` clears it; `--dev` never fires
    /// by itself either way.
    pub schedules: bool,
    /// The host runs its own schedule and reminder clocks. `--no-control-plane` clears it: no
    /// clocks, and the `/v1/internal/.../fire` routes exist instead.
    pub control_plane: bool,
    /// Caps and timeouts on connections (`listen.rs`).
    pub connections: crate::listen::ConnectionLimits,
    /// Where channels read their secrets and tokens (the process environment by default).
    pub channel_env: crate::channels::ChannelEnv,
    /// `--metrics`: serve the Prometheus text endpoint `GET /metrics` (needs a renderer, see
    /// [`AppState::with_telemetry`]).
    pub metrics: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            mode: Mode::Multi,
            dev: false,
            auth: AuthPolicy::LocalDevStrict,
            playground: true,
            docs: true,
            body_limit: DEFAULT_BODY_LIMIT,
            schedules: true,
            control_plane: true,
            connections: crate::listen::ConnectionLimits::default(),
            channel_env: crate::channels::ChannelEnv::default(),
            metrics: false,
        }
    }
}

/// One mounted agent.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The project as it was mounted: what routes, channels and clocks were built from. What
    /// a hot reload changes is in [`Agent::current`].
    pub project: Arc<Project>,
    /// The project as last (re)loaded (`reload.rs`); the mounted one until a reload.
    pub live: LiveProject,
    pub engine: Engine,
    /// The agent's schedules (`None`: this agent was mounted without a timed-work store).
    pub schedules: Option<Schedules>,
    /// The agent's reminders (`None`: mounted without a timed-work store).
    pub reminders: Option<Reminders>,
}

impl Agent {
    pub fn new(project: Project, engine: Engine) -> Self {
        let project = Arc::new(project);
        Self { live: LiveProject::new(project.clone()), project, engine, schedules: None, reminders: None }
    }

    /// The project as last (re)loaded: `/v1/info`, `/v1/meta` and the agent index read this.
    pub fn current(&self) -> Arc<Project> {
        self.live.load()
    }

    /// The agent with its schedules attached.
    pub fn with_schedules(mut self, schedules: Schedules) -> Self {
        self.schedules = Some(schedules);
        self
    }

    /// The agent with its reminders attached.
    pub fn with_reminders(mut self, reminders: Reminders) -> Self {
        self.reminders = Some(reminders);
        self
    }

    /// Whether this host fires schedules by itself: production serve with its own clocks.
    pub fn clocks_run(options: &ServeOptions) -> bool {
        options.schedules && Self::reminder_clock_runs(options)
    }

    /// Whether this host fires reminders by itself: not under `--dev` or `--no-control-plane`.
    pub fn reminder_clock_runs(options: &ServeOptions) -> bool {
        options.control_plane && !options.dev
    }

    pub fn slug(&self) -> &str {
        &self.project.slug
    }
}

/// A project that a hot reload can replace; every clone of an [`Agent`] sees the replacement.
#[derive(Debug, Clone)]
pub struct LiveProject(Arc<RwLock<Arc<Project>>>);

impl LiveProject {
    pub fn new(project: Arc<Project>) -> Self {
        Self(Arc::new(RwLock::new(project)))
    }

    pub fn load(&self) -> Arc<Project> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn store(&self, project: Project) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(project);
    }
}

/// Everything the router is built from. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AppState {
    pub agents: Arc<Vec<Agent>>,
    pub options: Arc<ServeOptions>,
    pub logs: LogBuffer,
    /// Cancelled at shutdown, after the engines drained: live streams end then.
    pub streams_end: CancellationToken,
    /// The live host-service tokens of running tool calls (`host_services`).
    pub host_tokens: HostTokens,
    /// Each agent's eval runs, by slug (`/v1/dev/evals...`); an agent without one answers 404.
    pub evals: Arc<HashMap<String, Arc<EvalService>>>,
    /// The hot-reload status `GET /v1/health` shows (`serve --dev`); `None`: no reloading.
    pub reload: Option<crate::reload::ReloadStatus>,
    /// Request spans and metrics (`telemetry.rs`); disabled by default.
    pub telemetry: bdk_telemetry::Telemetry,
    /// The `/metrics` renderer, when `--metrics` asked for one.
    pub prometheus: Option<bdk_telemetry::prometheus::Prometheus>,
    /// When the host started, for `uptimeSeconds` in `/v1/health`.
    pub started: std::time::Instant,
}

impl AppState {
    pub fn new(agents: Vec<Agent>, options: ServeOptions, logs: LogBuffer) -> Self {
        Self {
            agents: Arc::new(agents),
            options: Arc::new(options),
            logs,
            streams_end: CancellationToken::new(),
            host_tokens: HostTokens::new(),
            evals: Arc::new(HashMap::new()),
            reload: None,
            telemetry: bdk_telemetry::Telemetry::disabled(),
            prometheus: None,
            started: std::time::Instant::now(),
        }
    }

    /// The host with request spans and metrics on `telemetry`, and `/metrics` rendered by
    /// `prometheus` when `options.metrics` is set.
    pub fn with_telemetry(
        mut self,
        telemetry: bdk_telemetry::Telemetry,
        prometheus: Option<bdk_telemetry::prometheus::Prometheus>,
    ) -> Self {
        self.telemetry = telemetry;
        self.prometheus = prometheus;
        self
    }

    /// Serves `/v1/dev/evals...` for the agents in `evals` (by slug).
    pub fn with_evals(mut self, evals: HashMap<String, Arc<EvalService>>) -> Self {
        self.evals = Arc::new(evals);
        self
    }

    /// Serves host services with `tokens`, the table whose authorities the agents' engines were
    /// built with (`EngineOptions::host = Some(tokens.authority(slug))`).
    pub fn with_host_tokens(mut self, tokens: HostTokens) -> Self {
        self.host_tokens = tokens;
        self
    }

    /// The URL prefix of `agent`'s routes: `/<slug>` in the multi-agent layout, empty in single.
    pub fn base_path(&self, agent: &Agent) -> String {
        match self.options.mode {
            Mode::Multi => format!("/{}", agent.slug()),
            Mode::Single => String::new(),
        }
    }

    pub(crate) fn auth_state(&self) -> AuthState {
        AuthState { policy: Arc::new(self.options.auth.clone()), dev: self.options.dev }
    }
}

/// The state of one agent's routes.
#[derive(Debug, Clone)]
pub struct AgentState {
    pub app: AppState,
    pub agent: Agent,
    pub base_path: Arc<str>,
}

impl AgentState {
    pub fn engine(&self) -> &Engine {
        &self.agent.engine
    }
}
