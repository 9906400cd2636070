//! `bdk validate`: discovery diagnostics, grouped by file, or as JSON.

use bdk_protocol::Diagnostic;
use serde::Serialize;

use crate::Embed;
use crate::cli::ProjectArgs;
use crate::exit::Exit;
use crate::report;

/// `bdk validate --json` output.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ValidateReport<'a> {
    ok: bool,
    errors: usize,
    warnings: usize,
    /// Problems that belong to no single project.
    diagnostics: &'a [Diagnostic],
    projects: Vec<ProjectReport<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ProjectReport<'a> {
    slug: &'a str,
    dir: String,
    ok: bool,
    diagnostics: &'a [Diagnostic],
}

pub fn run(args: &ProjectArgs, embed: &Embed) -> anyhow::Result<Exit> {
    let discovery = embed.discover(&args.dirs);
    let (errors, warnings) = report::count(discovery.all_diagnostics());
    if args.json {
        let out = ValidateReport {
            ok: errors == 0,
            errors,
            warnings,
            diagnostics: &discovery.diagnostics,
            projects: discovery
                .projects
                .iter()
                .map(|p| ProjectReport {
                    slug: &p.slug,
                    dir: p.dir.display().to_string(),
                    ok: !p.has_errors(),
                    diagnostics: &p.diagnostics,
                })
                .collect(),
        };
        report::emit(&format!("{}\n", serde_json::to_string_pretty(&out)?));
    } else {
        let text = report::diagnostics_text(&discovery);
        let colour = crate::live::render::colour_for(std::io::IsTerminal::is_terminal(&std::io::stdout()));
        report::emit(&if colour { report::colourise(&text) } else { text });
    }
    Ok(if errors > 0 { Exit::ProjectErrors } else { Exit::Ok })
}
