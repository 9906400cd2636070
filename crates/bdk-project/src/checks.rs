//! Rules that span files: one meaning per name, references that must resolve, and environment
//! placeholders that are not set. Per-file rules live with their format in `formats/`.

use std::collections::BTreeMap;

use crate::diag::{Code, Diagnostics};
use crate::formats::agent::BUILTIN_TOOLS;
use crate::model::{Advertise, ConnectionScope, Project, ScheduleAction};

/// Built-in harness tools active when `agent.toml` sets no `tools` allowlist.
pub const DEFAULT_BUILTINS: &[&str] = &["read", "ls", "glob", "grep", "write", "edit", "shell"];

pub fn run(project: &Project, diags: &mut Diagnostics) {
    unique_names(project, diags);
    model_tool_names(project, diags);
    placeholders(project, diags);
    schedule_channels(project, diags);
    eval_tool_references(project, diags);
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
                diags.report(
                    Code::NameClash,
                    Some(file),
                    None,
                    format!("{file}: {kind} `{name}` is also defined by {prev}"),
                );
            }
        }
    }
}

/// The names the model calls tools by: authored tools, active built-ins, advertised MCP tools,
/// extension tools (already namespaced), `task` and the opt-in tools. Each must be unique.
fn model_tool_names(project: &Project, diags: &mut Diagnostics) {
    let mut owners: BTreeMap<String, String> = BTreeMap::new();
    let mut claim = |name: &str, owner: String, file: Option<&str>, diags: &mut Diagnostics| {
        if let Some(prev) = owners.get(name) {
            diags.report(
                Code::NameClash,
                file,
                None,
                format!("tool name `{name}` is claimed by {owner} and by {prev}"),
            );
        } else {
            owners.insert(name.to_owned(), owner);
        }
    };
    for builtin in active_builtins(project) {
        claim(builtin, format!("the built-in `{builtin}` tool"), None, diags);
    }
    for tool in &project.caps.tools {
        claim(&tool.name, tool.file.clone().unwrap_or_else(|| "a native tool".to_owned()), tool.file.as_deref(), diags);
    }
    for conn in project.caps.connections.iter().filter(|c| c.scope == ConnectionScope::Model) {
        if let Advertise::Only(names) = &conn.advertise {
            for name in names {
                claim(name, format!("MCP connection `{}` ({})", conn.name, conn.file), Some(&conn.file), diags);
            }
        }
    }
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
    if project.harness.builtin_reminders {
        names.extend(["reminders_create", "reminders_list", "reminders_cancel"]);
    }
    names
}

fn placeholders(project: &Project, diags: &mut Diagnostics) {
    for conn in &project.caps.connections {
        for name in conn.placeholders.iter().filter(|n| std::env::var_os(n).is_none()) {
            diags.report(
                Code::UnsetPlaceholder,
                Some(&conn.file),
                None,
                format!("{}: ${{{name}}} is not set in this environment", conn.file),
            );
        }
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
            || project
                .caps
                .connections
                .iter()
                .any(|c| matches!(&c.advertise, Advertise::Only(n) if n.iter().any(|x| x == name)))
    };
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
                format!("{}: eval `{}` names tool `{name}`, which this agent does not have", case.file, case.id),
            );
        }
    }
}
