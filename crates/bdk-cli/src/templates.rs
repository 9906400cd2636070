//! Project templates for `bdk init`. Each template is one of the example projects under
//! `examples/`, embedded at build time by `build.rs` (only `bot/`, `evals/`, `README.md` and
//! `.gitignore`), so the examples the test suite validates are exactly what
//! `init` writes. `--name` sets `name = "..."` in the copied `bot/agent.toml`.

use std::fs;
use std::path::Path;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/templates.rs"));
}

#[derive(Debug)]
pub struct Template {
    pub name: &'static str,
    pub description: &'static str,
    folder: &'static str,
}

/// Template name, example folder, description.
const TEMPLATES: &[(&str, &str, &str)] = &[
    ("default", "hello", "a minimal agent: instructions, one command tool, one skill, one smoke eval"),
    (
        "pr-reviewer",
        "pr-reviewer",
        "reviews pull requests: inspect_pr (read) and submit_review (write, needs approval)",
    ),
    ("ops-bot", "ops-bot", "an operations bot with a schedule, a skill, a subagent and a hook"),
];

pub fn all() -> Vec<Template> {
    TEMPLATES
        .iter()
        .filter_map(|(name, folder, description)| {
            embedded::FILES.iter().any(|(f, ..)| f == folder).then_some(Template { name, description, folder })
        })
        .collect()
}

pub fn find(name: &str) -> Option<Template> {
    all().into_iter().find(|t| t.name == name)
}

/// Writes the template under `target`; returns the number of files written.
pub fn write(template: &Template, target: &Path, name: Option<&str>) -> std::io::Result<usize> {
    let mut count = 0;
    for (_, rel, contents) in embedded::FILES.iter().filter(|(folder, ..)| *folder == template.folder) {
        let dest = target.join(rel);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&dest, contents)?;
        #[cfg(unix)]
        if Path::new(rel).extension().is_some_and(|e| e == "py" || e == "sh") {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))?;
        }
        count += 1;
    }
    if let Some(name) = name {
        let agent = target.join("bot/agent.toml");
        let existing = fs::read_to_string(&agent).unwrap_or_default();
        fs::write(&agent, with_name(&existing, name))?;
    }
    Ok(count)
}

/// `agent.toml` text with its top-level `name` set to `name`: an existing `name = ...` line
/// before the first table header is replaced (a second one would be a duplicate key), otherwise
/// the line is added at the top.
fn with_name(agent_toml: &str, name: &str) -> String {
    // A JSON string is a valid TOML basic string (quotes and backslashes escaped).
    let quoted = serde_json::to_string(name).unwrap_or_else(|_| format!("\"{name}\""));
    let line = format!("name = {quoted}");
    let mut out = String::with_capacity(agent_toml.len() + line.len() + 1);
    let mut replaced = false;
    let mut in_table = false;
    for current in agent_toml.split_inclusive('\n') {
        let trimmed = current.trim_start();
        in_table |= trimmed.starts_with('[');
        let is_name = trimmed.strip_prefix("name").is_some_and(|rest| rest.trim_start().starts_with('='));
        if !in_table && !replaced && is_name {
            out.push_str(&line);
            out.push_str(if current.ends_with("\r\n") {
                "\r\n"
            } else if current.ends_with('\n') {
                "\n"
            } else {
                ""
            });
            replaced = true;
        } else {
            out.push_str(current);
        }
    }
    if replaced { out } else { format!("{line}\n{agent_toml}") }
}

#[cfg(test)]
mod tests {
    use super::with_name;

    #[test]
    fn name_is_added_at_the_top() {
        assert_eq!(with_name("description = \"x\"\n", "Bot"), "name = \"Bot\"\ndescription = \"x\"\n");
        assert_eq!(with_name("", "Bot"), "name = \"Bot\"\n");
    }

    #[test]
    fn an_existing_top_level_name_is_replaced() {
        let toml = "# Settings\nname = \"Old\"\ndescription = \"x\"\n[model]\nname = \"kept\"\n";
        assert_eq!(
            with_name(toml, "New \"One\""),
            "# Settings\nname = \"New \\\"One\\\"\"\ndescription = \"x\"\n[model]\nname = \"kept\"\n"
        );
        assert_eq!(with_name("  name=\"Old\"", "New"), "name = \"New\"");
    }

    #[test]
    fn names_in_tables_and_look_alikes_are_left_alone() {
        let toml = "names = [\"a\"]\n[hosting]\nname = \"x\"\n";
        assert_eq!(with_name(toml, "Bot"), format!("name = \"Bot\"\n{toml}"));
    }
}
