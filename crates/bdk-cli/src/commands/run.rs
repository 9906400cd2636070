//! `bdk run`: one turn of a project's agent, in-process, in the project's state directory (the
//! one `serve` uses), as a chat-mode session that waits for a follow-up (so `--session` and
//! `bdk chat --session` can continue it). Text mode streams the reply, reasoning (on a terminal) and tool calls as
//! they happen, then prints usage, the session id and the trace path; `--json` prints the
//! trajectory that `bdk trajectory` also prints. `--session ID` sends the message to an existing
//! session; `--approve` / `--deny` decide parked calls. A call that needs approval with no
//! policy covering it stops the turn and exits 4 naming the flags, instead of waiting forever.
//! The session's events are saved to `traces/<sessionId>.ndjson`.

use std::io::{IsTerminal as _, Write as _};

use anyhow::{Context, bail};
use bdk_engine::Trajectory;
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;

use crate::Embed;
use crate::cli::RunArgs;
use crate::exit::Exit;
use crate::live::backend::{Backend as _, Send};
use crate::live::drive::{self, Ended, Policy};
use crate::live::local::Local;
use crate::live::render::{self, Render};
use crate::report;

pub fn run(args: &RunArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(std::slice::from_ref(&args.dir));
    if discovery.has_errors() {
        report::emit_err(&report::diagnostics_text(&discovery));
        return Ok(Exit::ProjectErrors);
    }
    let mut projects = discovery.projects;
    if projects.len() != 1 {
        bail!("`bdk run` needs exactly one project; {} holds {}", args.dir.display(), projects.len());
    }
    let project = projects.remove(0);
    let session =
        args.session.as_deref().map(SessionId::parse).transpose().map_err(|e| anyhow::anyhow!("--session: {e}"))?;
    // Declared before the runtime, so it is dropped (and flushed) after the turn's tasks end.
    let export = crate::otel::Export::from_env(&project.slug)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(run_turn(project, args, session, embed, export.telemetry()))
}

async fn run_turn(
    project: bdk_project::Project,
    args: &RunArgs,
    session: Option<SessionId>,
    embed: &Embed,
    telemetry: bdk_telemetry::Telemetry,
) -> anyhow::Result<Exit> {
    let local = Local::open(&project, args.state_root.as_deref(), embed, telemetry).await?;
    let sent = local
        .send(Send {
            message: &args.message,
            session: session.as_ref(),
            token: None,
            mode: SessionMode::Chat,
            dry_run: args.dry_run,
            purpose: "run",
        })
        .await?;
    let policy = Policy { approve: args.approve.clone(), deny: args.deny.clone() };
    let colour = render::colour_for(std::io::stdout().is_terminal());
    let mut render = Render::new(colour, colour);
    let mut sink: Box<dyn std::io::Write> =
        if args.json { Box::new(std::io::sink()) } else { Box::new(std::io::stdout()) };
    let (seen, ended) = drive::follow_turn(&local, &sent.id, sent.from, &policy, None, &mut render, &mut *sink).await?;
    render.break_line(&mut *sink)?;
    drop(sink);
    let parked = match ended {
        Ended::Settled => None,
        Ended::NeedsApproval(request) => {
            // Nobody can decide it and this process is about to end: stop the turn so the
            // session's log and status say what happened, then say how to decide next time.
            local.engine.stop(&sent.id, &local.principal).await?;
            Some(request)
        }
        Ended::Closed => bail!("the session's event log closed before the turn ended"),
    };
    local.settle_status(&sent.id).await;
    let trace = local.write_trace(&sent.id).await?;
    let all = local.engine.events(&sent.id, &local.principal, 0).await?;
    let trajectory = Trajectory::from_events(&all);
    if args.json {
        print_json(&trajectory)?;
    } else {
        let this_turn = Trajectory::from_events(&seen);
        print_summary(&this_turn, &sent.id, &trace)?;
    }
    if let Some(request) = parked {
        let tool = &request.tool_name;
        eprintln!(
            "error: the {tool} call needs approval ({}) and no --approve or --deny covers it; the turn was stopped\n\
             hint: decide ahead with `--approve {tool}` (or `--approve all`) or `--deny {tool}`, and continue with \
             `bdk run --session {} --message ...`, or answer it yourself in `bdk chat --session {}`",
            render::one_line(&request.input),
            sent.id,
            sent.id
        );
        return Ok(Exit::NeedsApproval);
    }
    if let (false, Some(error)) = (args.json, &trajectory.error) {
        eprintln!("error: {error}");
    }
    Ok(if trajectory.error.is_some() { Exit::Failure } else { Exit::Ok })
}

/// The trajectory as pretty JSON (`run --json`, `bdk trajectory`).
pub(super) fn print_json(trajectory: &Trajectory) -> anyhow::Result<()> {
    let mut out = serde_json::to_string_pretty(trajectory)?;
    out.push('\n');
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// After the streamed turn: its usage, the session id and where the trace is.
fn print_summary(turn: &Trajectory, id: &SessionId, trace: &std::path::Path) -> anyhow::Result<()> {
    let usage = &turn.usage;
    let out = format!(
        "\nusage: {} input ({} cached), {} output tokens; estimated cost ${:.6}\nsession: {id}\ntrace: {}\n",
        usage.input_tokens,
        usage.cached_input_tokens,
        usage.output_tokens,
        turn.cost_usd,
        trace.display()
    );
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    Ok(())
}
