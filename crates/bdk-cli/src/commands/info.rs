//! `bdk info`: a readable summary, or the JSON manifest (`GET /v1/info`'s shape for one
//! project; `{ "agents": [...] }` for several).

use bdk_protocol::info::AgentsInfo;

use crate::Embed;
use crate::cli::ProjectArgs;
use crate::exit::Exit;
use crate::report;

pub fn run(args: &ProjectArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(&args.dirs);
    let (errors, _) = report::count(discovery.all_diagnostics());
    if args.json {
        let mut infos: Vec<_> = discovery.projects.iter().map(manifest).collect();
        let text = if infos.len() == 1 && discovery.diagnostics.is_empty() {
            serde_json::to_string_pretty(&infos.remove(0))?
        } else {
            serde_json::to_string_pretty(&AgentsInfo { agents: infos })?
        };
        report::emit(&format!("{text}\n"));
        for d in &discovery.diagnostics {
            eprintln!("{}", report::one_line(d));
        }
    } else {
        for project in &discovery.projects {
            report::emit(&report::summary(&manifest(project)));
        }
        if !discovery.diagnostics.is_empty() {
            report::emit(&report::diagnostics_text(&discovery));
        }
    }
    Ok(if errors > 0 { Exit::ProjectErrors } else { Exit::Ok })
}

/// The manifest, with each schedule's last recorded firing from the default state directory,
/// or the database `serve` would use (`BDK_DATABASE_URL`, `storage.toml`).
fn manifest(project: &bdk_project::Project) -> bdk_protocol::info::ProjectInfo {
    let mut info = bdk_project::manifest(project);
    let dir = bdk_server::mount::state_dir(project, None);
    super::schedules::annotate_from_state(&mut info, project, &dir, None);
    info
}
