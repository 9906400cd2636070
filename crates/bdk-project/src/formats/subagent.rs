//! `subagents/<id>/`: a child agent the model delegates to through the `task` tool.
//! `agent.toml` with a `description` is required; capability folders inside are ignored.

use crate::diag::{Code, Diagnostics};
use crate::model::{Instructions, SubagentDef};
use crate::source::{self, Entry, MAX_DEFINITION_BYTES, Rel};
use crate::{parse, walk};

use super::{Origin, agent};

pub fn load(entry: &Entry, origin: &Origin, rel: &Rel, diags: &mut Diagnostics) -> Option<SubagentDef> {
    let id = entry.name.as_str();
    let shown = rel.of(&entry.path);
    if !parse::is_valid_name(id) {
        diags.report(Code::InvalidName, Some(&shown), None, format!("{shown}: `{id}` is not a valid subagent id"));
        return None;
    }
    let mut config = None;
    let mut has_agent_toml = false;
    for child in source::list_dir(&entry.path, rel, diags) {
        let child_rel = rel.of(&child.path);
        match (child.name.as_str(), child.is_dir) {
            ("agent.toml", false) => {
                has_agent_toml = true;
                if let Some(src) = source::read_text(&child.path, rel, MAX_DEFINITION_BYTES, diags) {
                    config = agent::load_subagent(&src, diags).map(|c| (c, src));
                }
            }
            ("agent.toml", true) => {
                has_agent_toml = true;
                diags.report(Code::ExpectedFile, Some(&child_rel), None, "is a directory, expected a file");
            }
            ("instructions.md", false) | ("instructions", true) => {}
            (name, true) if walk::CAPABILITY_FOLDERS.contains(&name) || name == "lib" => {
                diags.report(
                    Code::SubagentCapabilityIgnored,
                    Some(&child_rel),
                    None,
                    format!("{child_rel}: subagents inherit the parent's capabilities; this folder is ignored"),
                );
            }
            (_, true) => diags.report(
                Code::UnknownFolder,
                Some(&child_rel),
                None,
                format!("{child_rel}: unknown folder in subagent `{id}`"),
            ),
            (_, false) if walk::is_script_definition(&child) => {
                diags.report(
                    Code::TypescriptDefinition,
                    Some(&child_rel),
                    None,
                    format!("{child_rel}: TypeScript/JavaScript definitions are not loaded"),
                );
            }
            (_, false) => diags.report(
                Code::StrayFile,
                Some(&child_rel),
                None,
                format!("{child_rel}: not part of a subagent (agent.toml, instructions.md)"),
            ),
        }
    }
    if !has_agent_toml {
        diags.report(Code::MissingAgentToml, Some(&shown), None, format!("{shown}: subagent `{id}` has no agent.toml"));
        return None;
    }
    let (config, src) = config?;
    let Some(description) = config.description else {
        diags.report(
            Code::MissingDescription,
            Some(&src.rel),
            None,
            format!("{}: subagent `{id}` needs a description; the parent delegates by it", src.rel),
        );
        return None;
    };
    let from_files = agent::load_instructions(&entry.path, rel, diags);
    let instructions = match (from_files, config.instructions) {
        (Some(files), Some(_)) => {
            diags.report_with_hint(
                Code::StrayFile,
                Some(&src.rel),
                src.pos_of_key("instructions"),
                format!("{}: inline `instructions` ignored because an instructions file exists", src.rel),
                "keep one source of instructions",
            );
            files
        }
        (Some(files), None) => files,
        (None, Some(text)) => Instructions { files: vec![src.rel.clone()], text },
        (None, None) => Instructions::default(),
    };
    Some(SubagentDef {
        id: origin.name(id),
        description,
        source: origin.source,
        file: src.rel.clone(),
        model: config.model,
        instructions,
        max_steps: config.max_steps,
    })
}
