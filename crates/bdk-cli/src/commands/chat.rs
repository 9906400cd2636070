//! `bdk chat`: an interactive conversation with a project's agent, in-process on the state
//! directory `serve` uses. Each line is a message (or a `/command`); the reply, reasoning
//! (dimmed) and tool calls stream as they happen; a call that needs approval is asked inline
//! (`y`/`n`); `/stop` or ctrl-c interrupts a running turn. The session's continuation token is
//! kept across messages (it rotates on each), and `--session ID` resumes an earlier session.
//! End of input (ctrl-d) or `/quit` ends the chat and prints the session id. `--url` talks to a
//! running server's session API instead of a project folder.

use std::io::{BufRead as _, IsTerminal as _, Write};

use anyhow::{Context as _, bail};
use bdk_protocol::SessionId;
use bdk_protocol::event::SessionMode;
use tokio::sync::mpsc;

use crate::Embed;
use crate::cli::ChatArgs;
use crate::exit::Exit;
use crate::live::backend::{Backend, Send};
use crate::live::drive::{self, Ended, Lines, Policy};
use crate::live::local::Local;
use crate::live::remote::Remote;
use crate::live::render::{self, Render};
use crate::report;

const HELP: &str = "\
/stop     interrupt the running turn (also ctrl-c)
/new      start a new session with the next message
/dry-run  toggle dry-run (write tools return their dry_run_result) for the next new session
/cost     this session's tokens and estimated cost
/trace    save this session's events to traces/<id>.ndjson and print the path
/session  print the session id
/quit     end the chat (also ctrl-d)";

pub fn run(args: &ChatArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let session =
        args.session.as_deref().map(SessionId::parse).transpose().map_err(|e| anyhow::anyhow!("--session: {e}"))?;
    if let Some(url) = &args.url {
        let remote = Remote::new(url, args.token.clone())?;
        let runtime =
            tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
        let exit = runtime.block_on(converse(&remote, url, args, session));
        runtime.shutdown_background();
        return exit;
    }
    let discovery = embed.discover(std::slice::from_ref(&args.dir));
    if discovery.has_errors() {
        report::emit_err(&report::diagnostics_text(&discovery));
        return Ok(Exit::ProjectErrors);
    }
    let mut projects = discovery.projects;
    if projects.len() != 1 {
        bail!("`bdk chat` needs exactly one project; {} holds {}", args.dir.display(), projects.len());
    }
    let project = projects.remove(0);
    let export = crate::otel::Export::from_env(&project.slug)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let exit = runtime.block_on(async {
        let local = Local::open(&project, args.state_root.as_deref(), embed, export.telemetry()).await?;
        converse(&local, &project.slug, args, session).await
    });
    // The stdin reader thread may still be blocked on a read; do not wait for it.
    runtime.shutdown_background();
    exit
}

/// What the conversation has so far.
struct Chat {
    session: Option<SessionId>,
    token: Option<String>,
    dry_run: bool,
}

/// The conversation loop over any backend; `name` is what the banner says it talks to.
async fn converse<B: Backend>(
    backend: &B,
    name: &str,
    args: &ChatArgs,
    session: Option<SessionId>,
) -> anyhow::Result<Exit> {
    let colour = render::colour_for(std::io::stdout().is_terminal());
    let mut render = Render::new(colour, true);
    let mut out = std::io::stdout();
    let policy = Policy { approve: args.approve.clone(), deny: args.deny.clone() };
    let mut state = Chat { session: None, token: args.continuation_token.clone(), dry_run: args.dry_run };
    if let Some(id) = session {
        let status = backend.status(&id).await?;
        render.line(&mut out, &format!("resumed session {id} ({status})"))?;
        state.session = Some(id);
    }
    render.line(&mut out, &format!("chatting with {name} — /help for commands, ctrl-d to quit"))?;
    let mut lines = stdin_lines();
    let mut pending = args.message.clone();
    loop {
        let line = match pending.take() {
            Some(message) => message,
            None => {
                render.prompt(&mut out, "> ")?;
                tokio::select! {
                    line = lines.recv() => match line {
                        Some(line) => line,
                        None => break,
                    },
                    _ = tokio::signal::ctrl_c() => break,
                }
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('/') {
            if !command(line, backend, &mut state, &mut render, &mut out).await? {
                break;
            }
            continue;
        }
        let sent = backend
            .send(Send {
                message: line,
                session: state.session.as_ref(),
                token: state.token.as_deref(),
                mode: SessionMode::Chat,
                dry_run: state.dry_run,
                purpose: "chat",
            })
            .await;
        let sent = match sent {
            Ok(sent) => sent,
            Err(error) => {
                render.line(&mut out, &format!("error: {error:#}"))?;
                continue;
            }
        };
        if state.session.is_none() {
            let dry = if state.dry_run { " (dry run)" } else { "" };
            render.line(&mut out, &format!("session {}{dry}", sent.id))?;
        }
        state.session = Some(sent.id.clone());
        state.token = Some(sent.token);
        let (_, ended) =
            drive::follow_turn(backend, &sent.id, sent.from, &policy, Some(&mut lines), &mut render, &mut out).await?;
        match ended {
            Ended::Settled => {}
            Ended::NeedsApproval(request) => {
                backend.stop(&sent.id).await?;
                render.line(
                    &mut out,
                    &format!("error: input ended with the {} call undecided; the turn was stopped", request.tool_name),
                )?;
                break;
            }
            Ended::Closed => bail!("the session's event log closed before the turn ended"),
        }
    }
    if let Some(id) = &state.session {
        backend.settle(id).await;
        render.line(&mut out, &format!("session: {id}"))?;
    }
    Ok(Exit::Ok)
}

/// Runs a `/command`; returns `false` when the chat should end.
async fn command<B: Backend>(
    line: &str,
    backend: &B,
    state: &mut Chat,
    render: &mut Render,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let name = line.split_whitespace().next().unwrap_or_default();
    match name {
        "/quit" | "/exit" => return Ok(false),
        "/help" => render.line(out, HELP)?,
        "/new" => {
            state.session = None;
            state.token = None;
            render.line(out, "the next message starts a new session")?;
        }
        "/dry-run" => {
            state.dry_run = !state.dry_run;
            state.session = None;
            state.token = None;
            let now = if state.dry_run { "on" } else { "off" };
            render.line(out, &format!("dry run {now}: the next message starts a new session"))?;
        }
        "/stop" => render.line(out, "no turn is running")?,
        "/session" => match &state.session {
            Some(id) => render.line(out, id.as_ref())?,
            None => render.line(out, "no session yet: send a message")?,
        },
        "/cost" => match &state.session {
            Some(id) => {
                let report = backend.cost(id).await?;
                let usage = &report.usage;
                render.line(
                    out,
                    &format!(
                        "{} turns: {} input ({} cached), {} output tokens; estimated cost ${:.6}",
                        report.turns.len(),
                        usage.input_tokens,
                        usage.cached_input_tokens,
                        usage.output_tokens,
                        report.cost_usd
                    ),
                )?;
            }
            None => render.line(out, "no session yet: send a message")?,
        },
        "/trace" => match &state.session {
            Some(id) => {
                let place = backend.trace(id).await?;
                render.line(out, &format!("trace: {place}"))?;
            }
            None => render.line(out, "no session yet: send a message")?,
        },
        other => render.line(out, &format!("unknown command {other}; /help lists them"))?,
    }
    Ok(true)
}

/// Lines from stdin, read on a thread of their own (a blocking read never stalls the turn).
fn stdin_lines() -> Lines {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
