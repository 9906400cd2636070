//! Project templates for `bdk init`. Each template is one of the example projects under
//! `examples/`, embedded at build time, so the examples the test suite validates are exactly what
//! `init` writes. `--name` adds `name = "..."` to the copied `bot/agent.toml`.

use std::fs;
use std::path::{Component, Path};

use include_dir::{Dir, DirEntry, include_dir};

static EXAMPLES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../examples");

#[derive(Debug)]
pub struct Template {
    pub name: &'static str,
    pub description: &'static str,
    dir: &'static Dir<'static>,
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
            EXAMPLES.get_dir(folder).map(|dir| Template { name, description, dir })
        })
        .collect()
}

pub fn find(name: &str) -> Option<Template> {
    all().into_iter().find(|t| t.name == name)
}

/// Writes the template under `target`; returns the number of files written.
pub fn write(template: &Template, target: &Path, name: Option<&str>) -> std::io::Result<usize> {
    let mut count = 0;
    write_dir(template.dir, template.dir.path(), target, &mut count)?;
    if let Some(name) = name {
        let agent = target.join("bot/agent.toml");
        let existing = fs::read_to_string(&agent).unwrap_or_default();
        let quoted = serde_json::to_string(name).unwrap_or_else(|_| format!("\"{name}\""));
        fs::write(&agent, format!("name = {quoted}\n{existing}"))?;
    }
    Ok(count)
}

/// State and build output that may sit in a developer's example folder never ship.
fn skipped(rel: &Path) -> bool {
    rel.components().any(|c| matches!(c, Component::Normal(n) if n == ".bdk" || n == "target" || n == "__pycache__"))
}

fn write_dir(dir: &Dir<'_>, root: &Path, target: &Path, count: &mut usize) -> std::io::Result<()> {
    for entry in dir.entries() {
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        if skipped(rel) {
            continue;
        }
        match entry {
            DirEntry::Dir(sub) => write_dir(sub, root, target, count)?,
            DirEntry::File(file) => {
                let dest = target.join(rel);
                if let Some(parent) = dest.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(&dest, file.contents())?;
                #[cfg(unix)]
                if rel.extension().is_some_and(|e| e == "py" || e == "sh") {
                    use std::os::unix::fs::PermissionsExt;
                    fs::set_permissions(&dest, fs::Permissions::from_mode(0o755))?;
                }
                *count += 1;
            }
        }
    }
    Ok(())
}
