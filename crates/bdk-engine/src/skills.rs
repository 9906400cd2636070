//! Skills at run time: each skill is advertised to the model by name and description (a
//! section appended to the system prompt; the body never is), and the built-in
//! [`TOOL`] tool hands the model one skill's body, with the paths of its sibling files, when it
//! asks. The files themselves are in the session workspace under `.bdk/skills/<name>/`
//! (materialized by the tool registry), where the workspace tools read them.
//!
//! It owns neither discovery (`bdk-project`) nor materialization (`bdk-tools`).

use bdk_tools::{ToolOutcome, ToolSpec};
use serde_json::{Value, json};

use crate::capabilities::SkillSpec;

/// The built-in skill-loading tool.
pub const TOOL: &str = "load_skill";

/// Where a skill's files are in the session workspace.
const SKILLS_DIR: &str = ".bdk/skills";

/// The system prompt with the skills section appended (unchanged without skills).
pub(crate) fn system_prompt(instructions: &str, skills: &[SkillSpec]) -> String {
    if skills.is_empty() {
        return instructions.to_owned();
    }
    let mut out = instructions.trim_end().to_owned();
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str("## Skills\n\n");
    out.push_str(&format!(
        "These skills are available. When a task matches a skill's description, call `{TOOL}` with \
         its name before you act, then follow it.\n\n"
    ));
    for skill in skills {
        out.push_str(&format!("- `{}`: {}\n", skill.name, one_line(&skill.description)));
    }
    out
}

/// The tool's spec, listing the skill names it accepts.
pub(crate) fn spec(skills: &[SkillSpec]) -> ToolSpec {
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    ToolSpec {
        name: TOOL.into(),
        description: "Load a skill: returns its full instructions and the workspace paths of its \
                      reference files (read them with the workspace tools). The skills and when to \
                      use each are listed in the system prompt."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {"name": {"type": "string", "enum": names, "description": "The skill to load."}},
            "required": ["name"],
            "additionalProperties": false,
        }),
        output_schema: None,
    }
}

/// Answers one call: the skill's body and its files, or an error the model reads.
pub(crate) fn call(skills: &[SkillSpec], input: &Value) -> ToolOutcome {
    let Some(name) = input.get("name").and_then(Value::as_str) else {
        return ToolOutcome::error(format!("`{TOOL}` needs `name`: one of {}", listing(skills)));
    };
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        return ToolOutcome::error(format!("there is no skill `{name}`; the skills are {}", listing(skills)));
    };
    let dir = format!("{SKILLS_DIR}/{}", skill.name);
    let mut text = format!("# Skill `{}`\n\n{}", skill.name, skill.body.trim());
    if !skill.files.is_empty() {
        text.push_str(&format!("\n\n## Files of this skill (in the workspace, under `{dir}/`)\n\n"));
        for file in &skill.files {
            text.push_str(&format!("- `{dir}/{file}`\n"));
        }
    }
    ToolOutcome::ok(Value::String(text))
}

fn listing(skills: &[SkillSpec]) -> String {
    skills.iter().map(|s| format!("`{}`", s.name)).collect::<Vec<_>>().join(", ")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, files: &[&str]) -> SkillSpec {
        SkillSpec {
            name: name.into(),
            description: format!("Use when {name}\n is needed."),
            body: "1. Step one.\n".into(),
            files: files.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn the_prompt_lists_names_and_descriptions_never_bodies() {
        let prompt = system_prompt("Be brief.", &[skill("triage", &[])]);
        assert!(prompt.starts_with("Be brief.\n\n## Skills"));
        assert!(prompt.contains("- `triage`: Use when triage is needed."));
        assert!(!prompt.contains("Step one"));
        assert_eq!(system_prompt("Be brief.", &[]), "Be brief.");
    }

    #[test]
    fn loading_returns_the_body_and_sibling_paths() {
        let skills = [skill("triage", &["references/a.md"])];
        let outcome = call(&skills, &json!({"name": "triage"}));
        assert!(!outcome.is_error);
        let text = outcome.result.as_str().unwrap();
        assert!(text.contains("1. Step one."));
        assert!(text.contains("`.bdk/skills/triage/references/a.md`"));
    }

    #[test]
    fn an_unknown_or_missing_name_is_a_tool_error() {
        let skills = [skill("triage", &[])];
        let unknown = call(&skills, &json!({"name": "deploy"}));
        assert!(unknown.is_error);
        assert!(unknown.result.as_str().unwrap().contains("`triage`"));
        assert!(call(&skills, &json!({})).is_error);
    }
}
