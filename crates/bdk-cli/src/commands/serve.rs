//! `bdk serve`: discover, refuse on error diagnostics, mount every agent (state, model, engine,
//! recovery), listen, print where, and serve until SIGTERM or ctrl-c, then drain and exit 0.
//!
//! stdout gets exactly the startup lines (`listening on http://HOST:PORT`, then one line per
//! agent) so scripts and tests can read the address; logs go to stderr (filter: `BDK_LOG`,
//! default `info`) and to the ring buffer behind `GET /v1/logs`.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;

use anyhow::{Context as _, bail};
use bdk_engine::EngineOptions;
use bdk_model::ModelLayer;
use bdk_server::reload::{Reloader, Remount};
use bdk_server::{AppState, AuthPolicy, BearerToken, HostTokens, LogBuffer, Mode, ServeOptions, mount};
use tokio::net::TcpListener;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::Embed;
use crate::cli::{LogFormat, ServeArgs, ServeMode};
use crate::exit::Exit;
use crate::report;

/// The port tried first when `--port` is not given.
const DEFAULT_PORT: u16 = 3000;
/// How many ports after the default are tried when it is busy.
const PORT_TRIES: u16 = 20;
/// The variable that filters log output (`tracing` env-filter syntax).
const LOG_ENV: &str = "BDK_LOG";

pub fn run(args: &ServeArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(&args.dirs);
    if discovery.has_errors() {
        eprint!("{}", report::diagnostics_text(&discovery));
        eprintln!("error: not serving: fix the errors above (`bdk validate` shows them too)");
        return Ok(Exit::ProjectErrors);
    }
    for diagnostic in discovery.all_diagnostics() {
        eprintln!("{}", report::one_line(diagnostic));
    }
    let projects = discovery.projects;
    if projects.is_empty() {
        bail!("no project found under the --dir folders");
    }
    let mode = match args.mode {
        ServeMode::Multi => Mode::Multi,
        ServeMode::Single => Mode::Single,
    };
    if mode == Mode::Single && projects.len() != 1 {
        bail!("--mode single serves exactly one agent, and {} were found", projects.len());
    }
    let tokens = args
        .bearer_tokens
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(|t| BearerToken::parse(t).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // A GitHub or Slack channel that cannot verify what it receives may not serve outside --dev.
    let problems: Vec<String> =
        projects.iter().flat_map(|p| bdk_server::channels::startup_problems(p, args.dev)).collect();
    if !problems.is_empty() {
        bail!("channels cannot start:\n  {}", problems.join("\n  "));
    }
    let mut options = ServeOptions {
        mode,
        dev: args.dev,
        auth: AuthPolicy::from_flags(tokens, args.allow_anonymous),
        playground: !args.no_playground,
        docs: !args.no_docs,
        schedules: !args.no_schedules,
        control_plane: !args.no_control_plane,
        metrics: args.metrics,
        ..ServeOptions::default()
    };
    options.body_limit = args.body_limit;
    options.connections = bdk_server::ConnectionLimits {
        max_connections: args.max_connections.unwrap_or_else(bdk_server::listen::default_max_connections),
        reserved: args.reserved_connections,
        header_timeout: args.header_timeout,
        body_timeout: args.body_timeout,
    };
    refuse_unconfinable(&projects, args.allow_unconfined)?;
    if let Some(max) = args.max_tool_processes {
        bdk_tools::contain::set_max_processes(max);
    }

    let logs = LogBuffer::default();
    init_logging(&logs, args.log_format);
    // OTEL_* variables: opt-in export. A single agent names the service by default.
    let default_service = match projects.as_slice() {
        [one] => one.slug.clone(),
        _ => bdk_telemetry::config::DEFAULT_SERVICE_NAME.to_owned(),
    };
    let otel = bdk_telemetry::OtelConfig::from_env(&default_service)
        .map_err(|e| anyhow::anyhow!("telemetry: {e} (see docs/telemetry.md)"))?;
    for warning in otel.iter().flat_map(|c| c.warnings.iter()) {
        tracing::warn!("telemetry: {warning}");
    }
    // The exporters run on threads of their own (never on the runtime); they are shut down
    // after the drain, so the last spans and metrics go out.
    let installed =
        bdk_telemetry::export::install(otel.as_ref(), args.metrics, env!("CARGO_PKG_VERSION")).context("telemetry")?;
    let workers = args.worker_threads.map_or_else(default_worker_threads, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    tracing::info!(workers = runtime.metrics().num_workers(), "runtime started");
    if let Some(summary) = installed.telemetry.summary() {
        tracing::info!("telemetry: {summary}");
    }
    // Gives the memory a burst of sessions freed back to the OS once the burst is over
    // (glibc keeps it otherwise; decision 0031).
    let trimmer = bdk_alloc::Trimmer::start();
    let served = runtime.block_on(serve(args, embed, projects, options, logs, &installed));
    drop(trimmer);
    installed.shutdown();
    served?;
    // Everything is logged synchronously to stderr; make sure it and stdout are out.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    Ok(Exit::Ok)
}

async fn serve(
    args: &ServeArgs,
    embed: &Embed,
    projects: Vec<bdk_project::Project>,
    options: ServeOptions,
    logs: LogBuffer,
    installed: &bdk_telemetry::export::Installed,
) -> anyhow::Result<()> {
    let mut agents = Vec::with_capacity(projects.len());
    // Tool calls reach the host services with tokens from this table (`BDK_HOST_TOKEN`).
    let host_tokens = HostTokens::new();
    // Each agent's eval runs (`/v1/dev/evals...`): saved where the agent's state is, each run's
    // own sessions under `<dir>/evals/<runId>/state/` on this machine.
    let mut evals = std::collections::HashMap::new();
    // Filesystem by default; PostgreSQL with --database-url / BDK_DATABASE_URL / storage.toml.
    let pg_options = bdk_store_pg::PgOptions {
        migrate: !args.no_migrate,
        pool_size: args.database_pool_size,
        session_lease: session_lease_from_env()?,
        ..bdk_store_pg::PgOptions::default()
    };
    let mut backends = bdk_server::backend::Backends::new(args.database_url.clone(), pg_options);
    // How each agent was mounted, for `--dev` hot reloads.
    let mut remounts = std::collections::HashMap::new();
    for project in projects {
        let dir = mount::state_dir(&project, args.state_root.as_deref());
        let (resolved, provider) = mount::provider(&project, ModelLayer::default());
        if let Some(problem) = &resolved.problem {
            tracing::warn!(agent = %project.slug, "model calls will fail: {problem}");
        }
        let slug = project.slug.clone();
        let info = provider.info();
        let options = EngineOptions {
            price: resolved.price,
            host: Some(host_tokens.authority(&slug)),
            max_tool_calls_per_step: Some(args.max_tool_calls_per_step),
            max_output_bytes: Some(args.max_output_bytes),
            max_output_tokens: args.max_output_tokens,
            telemetry: installed.telemetry.clone(),
            ..EngineOptions::default()
        };
        // One slot per agent: its `reminders_*` tools reach the reminders mounted below.
        let reminder_slot = bdk_engine::reminders::tools::ReminderSlot::default();
        let (tools, hub) = mount::tools_on_hub(&project, &dir, embed.extender().as_ref(), &reminder_slot, None)?;
        remounts.insert(
            slug.clone(),
            Remount { state_dir: dir.clone(), reminders: reminder_slot.clone(), cli_model: ModelLayer::default(), hub },
        );
        let store = backends.open(&project, &dir).await?;
        let runs = store.eval_runs();
        let telemetry = installed.telemetry.clone();
        evals.insert(
            slug.clone(),
            super::eval::service(&project, &dir, runs, provider.clone(), resolved.price, embed, telemetry).await?,
        );
        let backend = store.backend();
        let (agent, recovered) =
            mount::mount_on(project, &dir, store, provider, tools, options, &reminder_slot).await?;
        tracing::info!(
            agent = %slug,
            backend,
            provider = %info.provider,
            model = %info.model,
            state = %dir.display(),
            recovered_turns = recovered,
            "agent mounted"
        );
        agents.push(agent);
    }

    let listener = bind(&args.host, args.port).await?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let mut state = AppState::new(agents, options, logs)
        .with_host_tokens(host_tokens)
        .with_evals(evals)
        .with_telemetry(installed.telemetry.clone(), installed.prometheus.clone());
    if args.dev {
        // Watch the served folders and swap definitions for new turns on a change.
        let reloader = Reloader::new(state, embed.extender(), remounts.clone());
        state = reloader.state().clone();
        let skip = remounts.into_values().map(|m| m.state_dir).collect();
        crate::watch::spawn(crate::watch::Watch {
            reloader: std::sync::Arc::new(reloader),
            dirs: args.dirs.clone(),
            skip,
            embed: embed.clone(),
        });
    }
    // Signal handlers go in before the address is announced: a supervisor (or a test) may send
    // SIGTERM as soon as it reads `listening on`.
    let shutdown = bdk_server::shutdown_signal();
    print_startup(&state, addr);
    tracing::info!(%addr, auth = state.options.auth.name(), dev = state.options.dev, "listening");
    bdk_server::serve(listener, state, shutdown, args.drain_grace).await.context("serving")?;
    Ok(())
}

/// The runtime's worker threads without `--worker-threads`: one less than the CPUs, at least
/// one. A turn hands work between threads (runtime workers, the store's writer threads, the
/// blocking pool, tool processes); on a small machine every extra worker mostly adds wake-ups
/// (a worker waking another to steal a task it could have run itself), and the CPU it would
/// take is the one the writers and tools need (docs/decisions/0009-hot-path.md).
fn default_worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

/// Binds `host:port`. Without `--port`, a busy 3000 moves on to the next free port (and says so).
async fn bind(host: &str, requested: Option<u16>) -> anyhow::Result<TcpListener> {
    let ports: Vec<u16> = match requested {
        Some(port) => vec![port],
        None => (DEFAULT_PORT..DEFAULT_PORT + PORT_TRIES).collect(),
    };
    let mut last_error = None;
    for (i, port) in ports.iter().enumerate() {
        match TcpListener::bind((host, *port)).await {
            Ok(listener) => {
                if i > 0 {
                    eprintln!("note: port {DEFAULT_PORT} is busy; using {port}");
                }
                return Ok(listener);
            }
            Err(err) if err.kind() == std::io::ErrorKind::AddrInUse && requested.is_some() => {
                bail!("cannot listen on {host}:{port}: the port is in use; pass another --port (0 picks a free one)")
            }
            Err(err) if err.kind() == std::io::ErrorKind::AddrInUse => last_error = Some(err),
            Err(err) => return Err(err).with_context(|| format!("cannot listen on {host}:{port}")),
        }
    }
    Err(anyhow::anyhow!(
        "cannot listen on {host}: ports {DEFAULT_PORT}-{} are all in use ({}); pass --port",
        DEFAULT_PORT + PORT_TRIES - 1,
        last_error.map(|e| e.to_string()).unwrap_or_default()
    ))
}

/// `listening on http://ADDR` first (one line, for scripts), then each agent's base URL, the
/// playground and the docs. Under `--dev` on a terminal, offers to open the playground.
fn print_startup(state: &AppState, addr: SocketAddr) {
    let origin = format!("http://{addr}");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {origin}");
    for agent in state.agents.iter() {
        let _ = writeln!(out, "  {}: {origin}{}/v1/", agent.slug(), state.base_path(agent));
    }
    // The playground: each agent's under --dev, else the index (or the one agent's page).
    if state.options.playground {
        let playgrounds: Vec<String> =
            state.agents.iter().map(|agent| format!("{origin}{}/playground", state.base_path(agent))).collect();
        if state.options.dev {
            for url in &playgrounds {
                let _ = writeln!(out, "  playground: {url}");
            }
        } else {
            let _ = writeln!(out, "  playground: {origin}/");
        }
        let _ = out.flush();
        if state.options.dev && crate::browser::interactive() {
            let first =
                if playgrounds.len() == 1 { playgrounds.into_iter().next() } else { Some(format!("{origin}/")) };
            if let Some(url) = first {
                crate::browser::offer(url);
            }
        }
    }
    if state.options.docs {
        let _ = writeln!(out, "  docs: {origin}/docs");
    }
    let _ = out.flush();
}

/// stderr plus the `/v1/logs` ring buffer, both filtered by `BDK_LOG` (default `info`): at
/// `info`, one access line per request and a line per turn start and end. `--log-format json`
/// writes one JSON object per line (timestamp, level, target, fields) instead.
fn init_logging(logs: &LogBuffer, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env(LOG_ENV)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let registry = tracing_subscriber::registry().with(filter).with(logs.layer());
    // A second subscriber (an embedding that set its own) is fine: ours is then not installed.
    let _ = match format {
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(crate::live::render::colour_for(std::io::stderr().is_terminal()))
                    .with_target(false),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr).with_current_span(false))
            .try_init(),
    };
}

/// Agents with `local.sandbox = true` are served only where their tools can be confined, unless
/// `--allow-unconfined` says to run them unconfined.
fn refuse_unconfinable(projects: &[bdk_project::Project], allow_unconfined: bool) -> anyhow::Result<()> {
    let sandboxed: Vec<&str> = projects.iter().filter(|p| p.harness.sandbox).map(|p| p.slug.as_str()).collect();
    if sandboxed.is_empty() {
        return Ok(());
    }
    let Err(why) = bdk_tools::sandbox::probe() else { return Ok(()) };
    let agents = sandboxed.join(", ");
    if !allow_unconfined {
        bail!(
            "{agents}: `local.sandbox = true` cannot be enforced here: {why}; pass --allow-unconfined to serve with its tools unconfined"
        );
    }
    bdk_tools::sandbox::set_allow_unconfined(true);
    eprintln!("warning: {agents}: tools run UNCONFINED (--allow-unconfined): {why}");
    Ok(())
}

/// `BDK_SESSION_LEASE_MS`: how long a replica's session lease outlives its last heartbeat (the
/// bound on noticing a dead replica; default 10 000, at least 300).
fn session_lease_from_env() -> anyhow::Result<std::time::Duration> {
    match std::env::var("BDK_SESSION_LEASE_MS") {
        Ok(value) if !value.trim().is_empty() => match value.trim().parse::<u64>() {
            Ok(ms) if ms >= 300 => Ok(std::time::Duration::from_millis(ms)),
            _ => anyhow::bail!(
                "BDK_SESSION_LEASE_MS must be a whole number of milliseconds, at least 300 (got {value:?})"
            ),
        },
        _ => Ok(bdk_store_pg::DEFAULT_SESSION_LEASE),
    }
}
