//! `bdk migrate`: brings a PostgreSQL database's schema up to date (what `serve` also does at
//! start unless `--no-migrate`), and with `--from-fs DIR` copies filesystem state into it: a
//! state root (`<DIR>/<slug>/sessions/...`, one agent per folder) or, with `--agent SLUG`, one
//! agent's state directory (`<project>/.bdk`). Prints what it did; exits 3 when it cannot.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use bdk_store::FsStore;
use bdk_store_pg::{ImportReport, PgDatabase, PgOptions, PgStore};

use crate::cli::MigrateArgs;
use crate::exit::Exit;

pub fn run(args: &MigrateArgs) -> anyhow::Result<Exit> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(migrate(args))
}

/// The agents to import: `(slug, state directory)`.
fn agents(dir: &Path, agent: Option<&str>) -> anyhow::Result<Vec<(String, PathBuf)>> {
    if !dir.is_dir() {
        bail!("--from-fs {}: no such folder", dir.display());
    }
    if let Some(slug) = agent {
        if !dir.join("sessions").is_dir() {
            bail!("--from-fs {}: not an agent state directory (no sessions/ folder)", dir.display());
        }
        return Ok(vec![(slug.to_owned(), dir.to_path_buf())]);
    }
    if dir.join("sessions").is_dir() {
        bail!(
            "--from-fs {}: this is one agent's state directory; say which agent it belongs to with --agent SLUG",
            dir.display()
        );
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        if path.join("sessions").is_dir()
            && let Some(slug) = entry.file_name().to_str()
        {
            out.push((slug.to_owned(), path));
        }
    }
    out.sort();
    if out.is_empty() {
        bail!("--from-fs {}: no agent state directories (<slug>/sessions/) in it", dir.display());
    }
    Ok(out)
}

async fn migrate(args: &MigrateArgs) -> anyhow::Result<Exit> {
    let plan = match &args.from_fs {
        Some(dir) => agents(dir, args.agent.as_deref())?,
        None => Vec::new(),
    };
    let db = PgDatabase::connect(&args.database_url, &PgOptions::default()).await?;
    let migration = db.migration().clone();
    let mut imported: Vec<(String, ImportReport)> = Vec::new();
    for (slug, dir) in plan {
        let from = FsStore::open(&dir).with_context(|| format!("opening {}", dir.display()))?;
        // Importing writes rows only; the store's local folder is never created.
        let local = std::env::temp_dir().join(format!("bdk-migrate-{}", std::process::id()));
        let store = PgStore::new(db.clone(), slug.clone(), local);
        let report = store.import_fs(&from).await.with_context(|| format!("importing agent {slug}"))?;
        imported.push((slug, report));
    }
    if args.json {
        let agents: Vec<_> = imported
            .iter()
            .map(|(slug, r)| {
                serde_json::json!({
                    "agent": slug, "sessions": r.sessions, "skippedSessions": r.skipped_sessions,
                    "events": r.events, "kv": r.kv, "files": r.files, "workspaces": r.workspaces,
                    "firings": r.firings, "reminders": r.reminders,
                    "evalRuns": r.eval_runs, "skippedEvalRuns": r.skipped_eval_runs,
                })
            })
            .collect();
        let out = serde_json::json!({
            "database": db.url(),
            "schema": {"from": migration.from, "to": migration.to, "applied": migration.applied},
            "imported": agents,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if migration.applied.is_empty() {
            println!("{}: schema is up to date (version {})", db.url(), migration.to);
        } else {
            println!(
                "{}: schema migrated from version {} to {} ({})",
                db.url(),
                migration.from,
                migration.to,
                migration.applied.join(", ")
            );
        }
        for (slug, r) in &imported {
            println!(
                "  {slug}: {} sessions ({} events), {} already there; {} kv, {} files, {} workspaces, {} firings, {} reminders; {} eval runs ({} already there)",
                r.sessions,
                r.events,
                r.skipped_sessions,
                r.kv,
                r.files,
                r.workspaces,
                r.firings,
                r.reminders,
                r.eval_runs,
                r.skipped_eval_runs
            );
        }
    }
    Ok(Exit::Ok)
}
