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
        let mut infos: Vec<_> = discovery.projects.iter().map(bdk_project::manifest).collect();
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
            report::emit(&report::summary(&bdk_project::manifest(project)));
        }
        if !discovery.diagnostics.is_empty() {
            report::emit(&report::diagnostics_text(&discovery));
        }
    }
    Ok(if errors > 0 { Exit::ProjectErrors } else { Exit::Ok })
}
