//! Rules that span files: one meaning per name, references that must resolve, and environment
//! placeholders that are not set. Per-file rules live with their format in `formats/`.

use std::collections::BTreeMap;

use crate::diag::{Code, Diagnostics};
use crate::formats::agent::BUILTIN_TOOLS;
use crate::model::{Advertise, ConnectionScope, Execution, HookSink, Project, ScheduleAction, ToolBody, ToolDef};
use crate::parse;
use crate::source::SourceFile;

/// Built-in harness tools active when `agent.toml` sets no `tools` allowlist.
pub const DEFAULT_BUILTINS: &[&str] = &["read", "ls", "glob", "grep", "write", "edit", "shell"];

pub fn run(project: &Project, agent_toml: Option<&SourceFile>, diags: &mut Diagnostics) {
    unique_names(project, diags);
    model_tool_names(project, diags);
    unreachable_subagents(project, agent_toml, diags);
    placeholders(project, diags);
    schedule_channels(project, diags);
    eval_tool_references(project, diags);
    sandbox_coverage(project, agent_toml, diags);
}

/// Adds tools registered in Rust (an embedder's native tools, `source: "native"`) to `project`,
/// so its manifest lists them, and re-runs the rules that read tool names: a native tool whose
/// name a file tool, a built-in or an MCP tool already claims is a `name_clash` error, a name the
/// model APIs refuse is `invalid_name`, and an eval may name a native tool.
pub fn add_native_tools(project: &mut Project, tools: Vec<ToolDef>) {
    if tools.is_empty() {
        return;
    }
    let mut diags = Diagnostics::new();
    for tool in tools.iter().filter(|t| !parse::is_valid_tool_name(&t.name)) {
        diags.report(Code::InvalidName, None, None, format!("native tool `{}` is not a valid tool name", tool.name));
    }
    project.caps.tools.extend(tools);
    // The re-run reports the clashes found at load again (deduplicated below); the eval
    // references are checked afresh, now against the native tools too.
    let unknown_reference = Code::UnknownToolReference.as_str();
    diags.extend(project.diagnostics.drain(..).filter(|d| d.code != unknown_reference).collect());
    model_tool_names(project, &mut diags);
    eval_tool_references(project, &mut diags);
    project.diagnostics = diags.into_sorted();
}

/// Within one kind, a name means one thing (`schedules/a.md` and `schedules/a.toml` clash).
fn unique_names(project: &Project, diags: &mut Diagnostics) {
    let caps = &project.caps;
    let kinds: [(&str, Vec<(&str, &str)>); 9] = [
        ("skill", caps.skills.iter().map(|s| (s.name.as_str(), s.file.as_str())).collect()),
        ("connection", caps.connections.iter().map(|c| (c.name.as_str(), c.file.as_str())).collect()),
        ("subagent", caps.subagents.iter().map(|s| (s.id.as_str(), s.file.as_str())).collect()),
        ("channel", caps.channels.iter().map(|c| (c.id.as_str(), c.file.as_str())).collect()),
        ("schedule", caps.schedules.iter().map(|s| (s.id.as_str(), s.file.as_str())).collect()),
        ("hook", caps.hooks.iter().map(|h| (h.name.as_str(), h.file.as_str())).collect()),
        ("reminder", caps.reminders.iter().map(|r| (r.name.as_str(), r.file.as_str())).collect()),
        ("experiment", project.abs.iter().map(|a| (a.id.as_str(), a.file.as_str())).collect()),
        (
            "artifact kind",
            caps.artifact_kinds
                .iter()
                .map(|k| (k.name.as_str(), project.artifacts.as_ref().map_or("", |a| a.file.as_str())))
                .collect(),
        ),
    ];
    for (kind, names) in kinds {
        let mut first: BTreeMap<&str, &str> = BTreeMap::new();
        for (name, file) in names {
            if let Some(prev) = first.insert(name, file) {
                let message = if prev == file {
                    format!("{kind} `{name}` is defined twice")
                } else {
                    format!("{kind} `{name}` is also defined by {prev}")
                };
                diags.report(Code::NameClash, Some(file), None, message);
            }
        }
    }
}

/// The names the model calls tools by: authored tools, active built-ins, advertised MCP tools
/// (`ns__tool` for a connection inside an extension), extension tools (already namespaced),
/// `task` and the opt-in tools. Each must be unique.
fn model_tool_names(project: &Project, diags: &mut Diagnostics) {
    // name -> (who claims it, the file it is claimed in)
    let mut owners: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut claim = |name: &str, owner: String, file: Option<&str>, diags: &mut Diagnostics| {
        if let Some((prev, prev_file)) = owners.get(name) {
            // The message never names the file it is attached to.
            let message = if prev_file.as_deref() == file && file.is_some() {
                format!("tool name `{name}` is claimed twice in this file")
            } else if file.is_none() {
                // Attached to no file (a native tool): say whose name it is.
                format!("{owner} has a name already claimed by {prev}")
            } else {
                format!("tool name `{name}` is already claimed by {prev}")
            };
            diags.report(Code::NameClash, file, None, message);
        } else {
            owners.insert(name.to_owned(), (owner, file.map(str::to_owned)));
        }
    };
    for builtin in active_builtins(project) {
        claim(builtin, format!("the built-in `{builtin}` tool"), None, diags);
    }
    for tool in &project.caps.tools {
        let owner = tool.file.clone().unwrap_or_else(|| format!("the native tool `{}`", tool.name));
        claim(&tool.name, owner, tool.file.as_deref(), diags);
    }
    for conn in project.caps.connections.iter().filter(|c| c.scope == ConnectionScope::Model) {
        for name in conn.advertised_names() {
            claim(&name, format!("MCP connection `{}` ({})", conn.name, conn.file), Some(&conn.file), diags);
        }
    }
}

/// An allowlist without `task` hides every subagent: the model has no way to delegate.
fn unreachable_subagents(project: &Project, agent_toml: Option<&SourceFile>, diags: &mut Diagnostics) {
    let Some(tools) = &project.harness.tools else { return };
    if project.caps.subagents.is_empty() || tools.iter().any(|t| t == "task") {
        return;
    }
    let ids: Vec<String> = project.caps.subagents.iter().map(|s| format!("`{}`", s.id)).collect();
    let (file, pos) = match agent_toml {
        Some(src) => (Some(src.rel.clone()), src.pos_of_key("tools")),
        None => (None, None),
    };
    let what = if ids.len() == 1 { "subagent" } else { "subagents" };
    diags.report(
        Code::UnreachableSubagents,
        file.as_deref(),
        pos,
        format!("`tools` leaves out \"task\", so the model can never delegate to {what} {}", ids.join(", ")),
    );
}

/// Built-in tool names the model will see.
pub fn active_builtins(project: &Project) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = match &project.harness.tools {
        Some(list) => BUILTIN_TOOLS.iter().copied().filter(|b| list.iter().any(|t| t == b) && *b != "mcp").collect(),
        None => DEFAULT_BUILTINS.to_vec(),
    };
    if !project.caps.subagents.is_empty() && !names.contains(&"task") && project.harness.tools.is_none() {
        names.push("task");
    }
    if project.artifacts.as_ref().is_some_and(|a| a.agent_tool) {
        names.push("tag_artifact");
    }
    if !project.caps.skills.is_empty() {
        names.push("load_skill");
    }
    if project.harness.builtin_reminders {
        names.extend(["reminders_create", "reminders_list", "reminders_cancel"]);
    }
    names
}

/// `${NAME}` read from the environment at run time: in connections and in HTTP hook sinks.
fn placeholders(project: &Project, diags: &mut Diagnostics) {
    let connections = project.caps.connections.iter().map(|c| (c.file.as_str(), c.placeholders.clone()));
    let hooks = project.caps.hooks.iter().filter_map(|h| match &h.sink {
        HookSink::Http { url, headers } => {
            let mut names: Vec<String> = std::iter::once(url.as_str())
                .chain(headers.iter().map(|(_, v)| v.as_str()))
                .flat_map(parse::placeholders)
                .collect();
            names.sort();
            names.dedup();
            Some((h.file.as_str(), names))
        }
        HookSink::Command(_) | HookSink::File(_) => None,
    });
    for (file, names) in connections.chain(hooks) {
        for name in names.iter().filter(|n| std::env::var_os(n).is_none()) {
            diags.report(
                Code::UnsetPlaceholder,
                Some(file),
                None,
                format!("${{{name}}} is not set in this environment"),
            );
        }
    }
}

/// Under `local.sandbox`, says which tools still run unconfined: the command tools (server
/// execution), one warning each, at `agent.toml`'s `sandbox` key.
fn sandbox_coverage(project: &Project, agent_toml: Option<&SourceFile>, diags: &mut Diagnostics) {
    if !project.harness.sandbox {
        return;
    }
    let unconfined =
        project.caps.tools.iter().filter(|t| {
            t.execution == Execution::Server && matches!(t.body, ToolBody::Command(_) | ToolBody::Script(_))
        });
    for tool in unconfined {
        diags.report(
            Code::SandboxNotEnforced,
            agent_toml.map(|src| src.rel.as_str()),
            agent_toml.and_then(|src| src.pos_of_key("sandbox")),
            format!(
                "`local.sandbox` does not confine the command tool `{}`: it runs on the host unconfined",
                tool.name
            ),
        );
    }
}

fn schedule_channels(project: &Project, diags: &mut Diagnostics) {
    for schedule in &project.caps.schedules {
        if let ScheduleAction::Receive { channel, .. } = &schedule.action
            && !project.caps.channels.iter().any(|c| &c.id == channel)
        {
            diags.report(
                Code::UnknownChannel,
                Some(&schedule.file),
                None,
                format!("{}: receive names channel `{channel}`, which does not exist", schedule.file),
            );
        }
    }
}

fn eval_tool_references(project: &Project, diags: &mut Diagnostics) {
    let Some(evals) = &project.evals else { return };
    if project.caps.connections.iter().any(|c| c.advertise == Advertise::All) {
        // Names come from a live MCP server; nothing to check against before it runs.
        return;
    }
    let builtins = active_builtins(project);
    let known = |name: &str| {
        builtins.contains(&name)
            || project.caps.tools.iter().any(|t| t.name == name)
            || project.caps.connections.iter().any(|c| c.advertised_names().iter().any(|x| x == name))
            // A tool file that failed to load was reported on its own: no follow-on here.
            || project.bot_dir.join("tools").join(format!("{name}.toml")).is_file()
    };
    let known_names: Vec<String> = builtins
        .iter()
        .map(|b| (*b).to_owned())
        .chain(project.caps.tools.iter().map(|t| t.name.clone()))
        .chain(project.caps.connections.iter().flat_map(|c| c.advertised_names()))
        .collect();
    for case in &evals.cases {
        let names = case
            .expect
            .called_tool
            .iter()
            .map(|c| c.name.as_str())
            .chain(case.expect.not_called_tool.iter().map(String::as_str));
        for name in names.filter(|n| !known(n)) {
            diags.report(
                Code::UnknownToolReference,
                Some(&case.file),
                None,
                format!(
                    "{}: eval `{}` names tool `{name}`, which this agent does not have{}",
                    case.file,
                    case.id,
                    crate::suggest::did_you_mean(name, known_names.iter().map(String::as_str))
                ),
            );
        }
    }
}
