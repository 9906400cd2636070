//! `bdk schedules`: each schedule of each project with its next firing and the last recorded
//! outcome, read from where `serve` keeps the agent's firings: its state directory, or its
//! PostgreSQL database (`--database-url`, `BDK_DATABASE_URL`, or `storage.toml`). Nothing is
//! fired, written or migrated. Also the helper `bdk info` uses to show the last outcome.

use std::path::Path;

use bdk_project::Project;
use bdk_protocol::info::ProjectInfo;
use bdk_server::backend::{Backends, DATABASE_URL_ENV};
use bdk_store::FsStore;
use bdk_store_pg::PgOptions;

use crate::Embed;
use crate::cli::SchedulesArgs;
use crate::exit::Exit;
use crate::report;

pub fn run(args: &SchedulesArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(&args.project.dirs);
    let (errors, _) = report::count(discovery.all_diagnostics());
    let mut infos = Vec::new();
    for project in &discovery.projects {
        let mut info = bdk_project::manifest(project);
        let dir = bdk_server::mount::state_dir(project, args.state_root.as_deref());
        annotate_from_state(&mut info, project, &dir, args.database_url.clone());
        infos.push(info);
    }
    if args.project.json {
        let rows: Vec<_> =
            infos.iter().map(|i| serde_json::json!({ "agent": i.slug, "schedules": i.schedules })).collect();
        report::emit(&format!("{}\n", serde_json::to_string_pretty(&serde_json::json!({ "agents": rows }))?));
    } else {
        let mut out = String::new();
        for info in &infos {
            out.push_str(&format!("{}\n", info.slug));
            if info.schedules.is_empty() {
                out.push_str("  (no schedules)\n");
            }
            for s in &info.schedules {
                out.push_str(&format!("  {} \"{}\" {}\n", s.id, s.cron, s.kind));
                out.push_str(&format!(
                    "    next: {}\n",
                    s.next_fire_at.as_deref().unwrap_or("never (does not fire here)")
                ));
                match &s.last_firing {
                    Some(f) => {
                        let error = f.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
                        out.push_str(&format!("    last: {} (due {}, {}){error}\n", f.status, f.due_at, f.trigger));
                    }
                    None => out.push_str("    last: none recorded\n"),
                }
            }
        }
        report::emit(&out);
    }
    for d in discovery.all_diagnostics() {
        eprintln!("{}", report::one_line(d));
    }
    Ok(if errors > 0 { Exit::ProjectErrors } else { Exit::Ok })
}

/// Fills each schedule's last firing from where the agent's firings are kept: the database
/// `serve` would use (`database_url`, else `BDK_DATABASE_URL`, else `storage.toml`), or the
/// state directory `dir` when it exists (reading never creates one). A database that cannot be
/// read leaves the firings unknown and says why on stderr.
pub fn annotate_from_state(info: &mut ProjectInfo, project: &Project, dir: &Path, database_url: Option<String>) {
    if info.schedules.is_empty() {
        return;
    }
    let host_url = database_url.or_else(|| std::env::var(DATABASE_URL_ENV).ok());
    // One connection, and no migration: a read must not change the database.
    let options = PgOptions { pool_size: 1, migrate: false, ..PgOptions::default() };
    let mut backends = Backends::new(host_url, options);
    let on_database = match backends.url_for(project, &|name| std::env::var(name).ok()) {
        Ok(url) => url.is_some(),
        Err(error) => {
            report::emit_err(&format!("bdk: {error}; last firings not read\n"));
            return;
        }
    };
    if !on_database && !dir.join("timed").is_dir() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    runtime.block_on(async {
        if !on_database {
            if let Ok(store) = FsStore::open(dir) {
                bdk_engine::schedules::annotate(info, &store, true).await;
            }
            return;
        }
        match backends.open(project, dir).await {
            Ok(store) => bdk_engine::schedules::annotate(info, &*store.timed(), true).await,
            Err(error) => report::emit_err(&format!("bdk: {error}; last firings not read\n")),
        }
    });
}
