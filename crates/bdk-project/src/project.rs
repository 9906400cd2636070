//! Discovery: from `--dir` arguments to projects. A directory holding `bot/` (or the legacy
//! `agent/`) is one project; a directory whose children hold them is a serve root of several,
//! each slugged by its folder name.

use std::path::{Path, PathBuf};

use bdk_protocol::Diagnostic;

use crate::diag::{Code, Diagnostics};
use crate::formats::{Origin, ab, agent, artifacts, evals, extension, result, storage};
use crate::model::{Capabilities, ExtensionDef, Instructions, Layout, Project};
use crate::source::{self, Entry, MAX_DEFINITION_BYTES, Rel};
use crate::{checks, walk};

/// Path segments a slug may not take: they are routes of the host itself.
pub const RESERVED_SLUGS: &[&str] = &["v1", "playground", "docs"];

/// Everything found under the `--dir` arguments.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub projects: Vec<Project>,
    /// Problems that belong to no single project (nothing found, clashing slugs).
    pub diagnostics: Vec<Diagnostic>,
}

impl Discovery {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error) || self.projects.iter().any(Project::has_errors)
    }

    /// Every diagnostic: host-level ones first, then each project's.
    pub fn all_diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().chain(self.projects.iter().flat_map(|p| p.diagnostics.iter()))
    }
}

/// Whether `slug` may name an agent in the multi-agent layout.
pub fn is_valid_slug(slug: &str) -> bool {
    crate::parse::is_valid_name(slug) && !RESERVED_SLUGS.contains(&slug)
}

/// Discovers every project under `dirs` (each a project or a serve root of projects).
pub fn discover(dirs: &[PathBuf]) -> Discovery {
    let mut discovery = Discovery::default();
    let mut host = Diagnostics::new();
    // Several --dir projects share one host and are routed by slug, like a serve root's.
    let routed = dirs.len() > 1;
    for dir in dirs {
        let shown = dir.display().to_string();
        if !dir.is_dir() {
            host.report_with_hint(
                Code::NoProject,
                Some(&shown),
                None,
                "is not a directory",
                "pass --dir a project folder (one holding bot/)",
            );
            continue;
        }
        if layout_of(dir).is_some() {
            discovery.projects.push(load_project(dir, routed));
            continue;
        }
        let mut children: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(iter) => {
                iter.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_dir() && layout_of(p).is_some()).collect()
            }
            Err(err) => {
                host.report(Code::IoError, Some(&shown), None, format!("cannot be listed: {err}"));
                continue;
            }
        };
        children.sort();
        if children.is_empty() {
            host.report(
                Code::NoProject,
                Some(&shown),
                None,
                "holds no bot/ or agent/ folder, and no folder directly under it does",
            );
        }
        discovery.projects.extend(children.iter().map(|child| load_project(child, true)));
    }
    let mut seen: Vec<(&str, &Path)> = Vec::new();
    for project in &discovery.projects {
        if let Some((_, first)) = seen.iter().find(|(slug, _)| *slug == project.slug) {
            let message = if *first == project.dir {
                format!("this project is given twice (slug `{}`)", project.slug)
            } else {
                format!("slug `{}` is already taken by {}", project.slug, first.display())
            };
            host.report(Code::DuplicateSlug, Some(&project.dir.display().to_string()), None, message);
        } else {
            seen.push((&project.slug, &project.dir));
        }
    }
    peer_slugs(&mut discovery.projects);
    discovery.diagnostics = host.into_sorted();
    discovery
}

/// An `agent = "<slug>"` connection reaches an agent mounted in the same host: a slug none of
/// the discovered projects has is an `unknown_peer` error on the connection's file.
fn peer_slugs(projects: &mut [Project]) {
    let slugs: Vec<String> = projects.iter().map(|p| p.slug.clone()).collect();
    for project in projects.iter_mut() {
        let mut diags = Diagnostics::new();
        for conn in &project.caps.connections {
            if let crate::model::Transport::Agent { slug } = &conn.transport
                && !slugs.contains(slug)
            {
                diags.report(
                    Code::UnknownPeer,
                    Some(&conn.file),
                    None,
                    format!("connection `{}` names agent `{slug}`, which is not mounted with this project", conn.name),
                );
            }
        }
        if diags.has_errors() {
            diags.extend(std::mem::take(&mut project.diagnostics));
            project.diagnostics = diags.into_sorted();
        }
    }
}

fn layout_of(dir: &Path) -> Option<Layout> {
    if dir.join("bot").is_dir() {
        Some(Layout::Bot)
    } else if dir.join("agent").is_dir() {
        Some(Layout::Agent)
    } else {
        None
    }
}

/// Loads the project in `dir` (which holds `bot/` or `agent/`). `in_serve_root` makes an
/// unusable slug an error rather than a warning, since the multi-agent layout routes by it.
pub fn load_project(dir: &Path, in_serve_root: bool) -> Project {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let rel = Rel::new(&dir);
    let mut diags = Diagnostics::new();
    let layout = layout_of(&dir).unwrap_or(Layout::Bot);
    let bot_dir = dir.join(layout.dir_name());
    if layout == Layout::Bot && dir.join("agent").is_dir() {
        diags.report(Code::BothLayouts, Some("agent"), None, "both bot/ and agent/ exist; agent/ is ignored");
    }
    let dir_name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "agent".to_owned());
    if !is_valid_slug(&dir_name) {
        let message = format!("folder name `{dir_name}` is not a usable slug");
        if in_serve_root {
            diags.report(Code::InvalidSlug, None, None, message);
        } else {
            diags.report_as(
                Code::InvalidSlug,
                bdk_protocol::Severity::Warning,
                None,
                None,
                format!("{message}; serve it with --mode single or rename the folder"),
                "rename the folder to match [A-Za-z0-9][A-Za-z0-9_-]* and avoid v1, playground and docs",
            );
        }
    }

    let walked = walk::walk(&bot_dir, &Origin::project(bot_dir.clone()), &rel, &mut diags);
    let mut caps = walked.caps;
    let mut root = agent::RootAgent::default();
    // Kept for cross-file checks that point into agent.toml.
    let mut agent_src = None;
    let mut artifacts_def = None;
    let mut result_def = None;
    let mut storage_def = None;
    let mut abs = Vec::new();
    // Reported once extensions are mounted: a folder holding a mount target is not stray.
    let mut strays = Vec::new();
    for entry in &walked.rest {
        let shown = rel.of(&entry.path);
        match (entry.name.as_str(), entry.is_dir) {
            ("agent.toml", false) => {
                if let Some(src) = read(entry, &rel, &mut diags) {
                    root = agent::load_root(&src, &mut diags);
                    agent_src = Some(src);
                }
            }
            ("artifacts.toml", false) => {
                if let Some((def, kinds)) = read(entry, &rel, &mut diags)
                    .and_then(|src| artifacts::load(&src, &Origin::project(bot_dir.clone()), &mut diags))
                {
                    artifacts_def = Some(def);
                    caps.artifact_kinds.extend(kinds);
                }
            }
            ("result.toml", false) => {
                result_def = read(entry, &rel, &mut diags).and_then(|src| result::load(&src, &bot_dir, &mut diags))
            }
            ("storage.toml", false) => {
                storage_def = read(entry, &rel, &mut diags).and_then(|src| storage::load(&src, &mut diags))
            }
            ("ab.toml", false) => {
                abs.extend(read(entry, &rel, &mut diags).and_then(|src| ab::load(&src, "ab", &mut diags)))
            }
            ("ab", true) => {
                for child in source::list_dir(&entry.path, &rel, &mut diags) {
                    if !child.is_dir && child.extension() == Some("toml") {
                        abs.extend(
                            read(&child, &rel, &mut diags).and_then(|src| ab::load(&src, child.stem(), &mut diags)),
                        );
                    } else {
                        walk::report_stray(&child, "ab/ holds <experiment>.toml files", &rel, &mut diags);
                    }
                }
            }
            ("instructions.md", false) | ("instructions", true) | ("lib", true) => {}
            ("evals", true) => diags.report(
                Code::EvalsInsideBot,
                Some(&shown),
                None,
                format!("{shown}: evals inside the agent folder are ignored"),
            ),
            (
                "agent.toml" | "artifacts.toml" | "result.toml" | "storage.toml" | "ab.toml" | "instructions.md",
                true,
            ) => {
                diags.report(Code::ExpectedFile, Some(&shown), None, "is a directory, expected a file");
            }
            _ => strays.push(entry),
        }
    }
    let mut instructions = match agent::load_instructions(&bot_dir, &rel, &mut diags) {
        Some(instructions) => instructions,
        None => {
            let shown = rel.of(&bot_dir);
            diags.report(
                Code::MissingInstructions,
                Some(&shown),
                None,
                format!("{shown}: the root agent has no instructions.md"),
            );
            Instructions::default()
        }
    };

    let mut extensions = Vec::new();
    if let Some(folder) = &walked.extensions {
        for entry in source::list_dir(&folder.path, &rel, &mut diags) {
            if let Some((def, ext_caps)) = extension::load(&entry, &rel, &mut diags) {
                merge(&mut caps, ext_caps);
                if let Some(ext) = def.instructions.as_ref().filter(|i| !i.text.trim().is_empty()) {
                    append_instructions(&mut instructions, ext);
                }
                extensions.push(def);
            }
        }
    }
    for entry in strays {
        if !entry.is_dir && (walk::CAPABILITY_FOLDERS.contains(&entry.name.as_str()) || entry.name == "lib") {
            let shown = rel.of(&entry.path);
            diags.report(Code::ExpectedDirectory, Some(&shown), None, "is a file, expected a folder");
        } else if !(entry.is_dir && extensions.iter().any(|e: &ExtensionDef| e.path.starts_with(&entry.path))) {
            walk::report_stray(entry, "see docs/formats.md for what the agent folder holds", &rel, &mut diags);
        }
    }
    let evals = evals::load(&dir, &rel, &mut diags);

    let mut project = Project {
        name: root.name.clone().unwrap_or_else(|| dir_name.clone()),
        slug: dir_name,
        description: root.description,
        model: root.model,
        harness: root.harness,
        hosting: root.hosting,
        dir,
        bot_dir,
        layout,
        instructions,
        caps,
        artifacts: artifacts_def,
        result: result_def,
        storage: storage_def,
        abs,
        extensions,
        evals,
        diagnostics: Vec::new(),
    };
    checks::run(&project, agent_src.as_ref(), &mut diags);
    project.diagnostics = diags.into_sorted();
    project
}

/// Extension instructions follow the root's, in mount order.
fn append_instructions(into: &mut Instructions, ext: &Instructions) {
    if into.text.trim().is_empty() {
        into.text = ext.text.clone();
    } else {
        into.text = format!("{}\n\n{}", into.text, ext.text);
    }
    into.files.extend(ext.files.iter().cloned());
}

fn read(entry: &Entry, rel: &Rel, diags: &mut Diagnostics) -> Option<source::SourceFile> {
    source::read_text(&entry.path, rel, MAX_DEFINITION_BYTES, diags)
}

fn merge(into: &mut Capabilities, from: Capabilities) {
    into.tools.extend(from.tools);
    into.skills.extend(from.skills);
    into.connections.extend(from.connections);
    into.subagents.extend(from.subagents);
    into.channels.extend(from.channels);
    into.hooks.extend(from.hooks);
    into.schedules.extend(from.schedules);
    into.reminders.extend(from.reminders);
    into.artifact_kinds.extend(from.artifact_kinds);
    into.seeds.extend(from.seeds);
}
