//! `bdk cost --dir D --session ID`: a session's per-turn usage and estimated cost, folded from
//! the `turn.completed` events in the project's state directory (what
//! `GET /v1/session/:id/cost` returns). The `--url` form asks a running server.

use anyhow::{Context, bail};
use bdk_engine::{CostReport, cost_report};
use bdk_protocol::SessionId;
use bdk_server::mount;
use bdk_store::FsStore;

use crate::cli::CostArgs;
use crate::exit::Exit;
use crate::report;

pub fn run(args: &CostArgs) -> anyhow::Result<Exit> {
    let session = SessionId::parse(args.session.as_str()).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(url) = &args.url {
        print(&super::cost_url::fetch(url, &session, args.token.as_deref())?, args.json)?;
        return Ok(Exit::Ok);
    }
    let dir = &args.dir.clone().unwrap_or_else(|| std::path::PathBuf::from("."));
    let discovery = bdk_project::discover(std::slice::from_ref(dir));
    if discovery.has_errors() {
        report::emit_err(&report::diagnostics_text(&discovery));
        return Ok(Exit::ProjectErrors);
    }
    let Some(project) = discovery.projects.first() else { bail!("no project in {}", dir.display()) };
    let state = mount::state_dir(project, args.state_root.as_deref());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let report = runtime.block_on(async {
        let stores = FsStore::open(&state).with_context(|| format!("opening {}", state.display()))?.stores();
        if stores.sessions.get(&session).await?.is_none() {
            bail!("session {session} not found in {}", state.display());
        }
        // Through the layer that expands the stored form of `turn.completed` (docs/formats.md).
        let events = bdk_engine::stored_text::layer(stores.events).read(&session, 0, None).await?;
        Ok(cost_report(&session, &events))
    })?;
    print(&report, args.json)?;
    Ok(Exit::Ok)
}

/// Prints a cost report as JSON or as a table.
pub(crate) fn print(report: &CostReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    println!("session {}", report.session_id);
    for turn in &report.turns {
        println!(
            "  {}  {:<16} {:>9} in {:>9} out  ${:.6}",
            turn.turn_id,
            turn.model.as_deref().unwrap_or("-"),
            turn.usage.input_tokens,
            turn.usage.output_tokens,
            turn.cost_usd
        );
    }
    println!(
        "total: {} turn(s), {} input ({} cached), {} output tokens, estimated ${:.6}",
        report.turns.len(),
        report.usage.input_tokens,
        report.usage.cached_input_tokens,
        report.usage.output_tokens,
        report.cost_usd
    );
    Ok(())
}
