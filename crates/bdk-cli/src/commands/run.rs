//! `bdk run`: one turn of a project's agent, in-process, as a task session in the project's
//! state directory (the one `serve` uses). Prints the reply, the tool calls and usage (or the
//! trajectory JSON that `bdk trajectory` also prints) and saves the session's events to
//! `traces/<sessionId>.ndjson`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use bdk_engine::{AgentConfig, Engine, EngineOptions, Principal, StartSession, Trajectory};
use bdk_model::ModelLayer;
use bdk_protocol::event::SessionMode;
use bdk_protocol::{Event, EventData};
use bdk_server::mount;
use bdk_store::FsStore;

use crate::Embed;
use crate::cli::RunArgs;
use crate::exit::Exit;
use crate::report;

/// The principal `run` sessions belong to: the same as loopback callers of `serve`.
const PRINCIPAL: &str = bdk_server::auth::LOCAL_PRINCIPAL;
/// The channel recorded on `run` sessions.
const CHANNEL: &str = "cli";

pub fn run(args: &RunArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(std::slice::from_ref(&args.dir));
    if discovery.has_errors() {
        report::emit(&report::diagnostics_text(&discovery));
        return Ok(Exit::ProjectErrors);
    }
    let mut projects = discovery.projects;
    if projects.len() != 1 {
        bail!("`bdk run` needs exactly one project; {} holds {}", args.dir.display(), projects.len());
    }
    let project = projects.remove(0);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let (trajectory, trace) = runtime.block_on(run_turn(project, args, embed))?;
    print(&trajectory, args.json)?;
    if !args.json {
        println!("trace: {}", trace.display());
    }
    Ok(if trajectory.status == "failed" { Exit::Failure } else { Exit::Ok })
}

async fn run_turn(
    project: bdk_project::Project,
    args: &RunArgs,
    embed: &Embed,
) -> anyhow::Result<(Trajectory, PathBuf)> {
    let dir = mount::state_dir(&project, args.state_root.as_deref());
    let (resolved, provider) = mount::provider(&project, ModelLayer::default());
    let store = FsStore::open(&dir).with_context(|| format!("opening the state directory {}", dir.display()))?;
    let stores = store.stores();
    let options = EngineOptions {
        price: resolved.price,
        capabilities: bdk_engine::capabilities(&project, &dir),
        artifacts: Some(std::sync::Arc::new(store.clone())),
        ..EngineOptions::default()
    };
    let config = AgentConfig::from_project(&project);
    let tools = embed.registry(&project, &dir)?;
    let engine = Engine::with_options(config, stores.clone(), provider, tools, options);

    let principal = Principal::new(PRINCIPAL);
    let started = engine
        .start_session(StartSession {
            message: args.message.clone(),
            principal: principal.clone(),
            channel: CHANNEL.into(),
            continuation_key: None,
            mode: SessionMode::Task,
            title: None,
            dry_run: false,
            as_of: None,
            purpose: Some("run".into()),
            workspace_files: Vec::new(),
        })
        .await?;
    let id = started.session_id;
    let mut stream = engine.follow(&id, &principal, 0).await?;
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let event = (*event?).clone();
        let done = matches!(event.data, EventData::SessionCompleted(_) | EventData::SessionFailed(_));
        events.push(event);
        if done {
            break;
        }
    }
    drop(stream);
    let trace = stores.workspaces.trace_path(&id);
    write_trace(&trace, &events)?;
    Ok((Trajectory::from_events(&events), trace))
}

fn write_trace(path: &Path, events: &[Event]) -> anyhow::Result<()> {
    let mut out = Vec::with_capacity(events.len() * 256);
    for event in events {
        serde_json::to_writer(&mut out, event)?;
        out.push(b'\n');
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

/// Prints a trajectory: pretty JSON, or the reply, tool calls and usage as text.
pub(super) fn print(trajectory: &Trajectory, json: bool) -> anyhow::Result<()> {
    let mut out = String::new();
    if json {
        out.push_str(&serde_json::to_string_pretty(trajectory)?);
        out.push('\n');
    } else {
        if let Some(reply) = &trajectory.reply {
            out.push_str(reply.trim_end());
            out.push_str("\n\n");
        }
        for call in &trajectory.tool_calls {
            let result = match (&call.result, call.is_error) {
                (Some(result), Some(true)) => format!("error: {}", one_line(result)),
                (Some(result), _) => one_line(result),
                (None, _) => "(no result)".into(),
            };
            out.push_str(&format!("tool {} {} -> {}\n", call.tool_name, one_line(&call.input), result));
        }
        let usage = &trajectory.usage;
        out.push_str(&format!(
            "usage: {} input ({} cached), {} output tokens; estimated cost ${:.6}\n",
            usage.input_tokens, usage.cached_input_tokens, usage.output_tokens, trajectory.cost_usd
        ));
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    if let (false, Some(error)) = (json, &trajectory.error) {
        eprintln!("error: {error}");
    }
    Ok(())
}

/// A JSON value on one line, strings unquoted, cut at 200 characters.
fn one_line(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(s) => s.replace('\n', " "),
        other => other.to_string(),
    };
    if text.chars().count() > 200 { format!("{}...", text.chars().take(200).collect::<String>()) } else { text }
}
