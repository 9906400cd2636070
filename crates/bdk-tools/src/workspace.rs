//! Session workspaces: confining paths to one, and materializing one before the first turn.
//!
//! Materialization writes skills to `.bdk/skills/<name>/SKILL.md` (with a folder skill's sibling
//! files), agent-tool scripts to `.bdk/tools/<name>` (executable) with a catalog section in
//! `AGENTS.md`, copies `sandbox/workspace/**` seeds in, and writes per-send `workspaceFiles`.
//! It is idempotent: harness-owned files (`.bdk/`, the catalog section) are rewritten only when
//! they changed, seeds are copied only where the session has no file yet (its edits survive),
//! and per-send files always win.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use bdk_project::Project;
use bdk_project::model::{Execution, Seed, ToolBody};
use serde_json::Value;

use crate::error::{Error, Result};

/// Where skills land, under the workspace.
pub const SKILLS_DIR: &str = ".bdk/skills";
/// Where agent-tool scripts land, under the workspace.
pub const TOOLS_DIR: &str = ".bdk/tools";
/// The file the agent-tool catalog is written into.
pub const CATALOG_FILE: &str = "AGENTS.md";

const CATALOG_BEGIN: &str = "<!-- bdk:agent-tools:begin -->";
const CATALOG_END: &str = "<!-- bdk:agent-tools:end -->";

/// Resolves `path` (relative to `root`, or absolute inside it) to a path inside `root`.
///
/// `..` may not climb out, an absolute path must lie inside the workspace, and symlinks are
/// resolved: a link that leads outside (or dangles) is refused. The path itself need not exist;
/// its deepest existing ancestor is what gets resolved. `Err` is a message for the model.
pub fn confine(root: &Path, path: &str) -> std::result::Result<PathBuf, String> {
    let root = root.canonicalize().map_err(|e| format!("the workspace is not usable: {e}"))?;
    let given = Path::new(path);
    let relative = if given.is_absolute() {
        match given.strip_prefix(&root) {
            Ok(rest) => rest.to_path_buf(),
            Err(_) => return Err(format!("`{path}` is outside the workspace; use a path relative to it")),
        }
    } else {
        given.to_path_buf()
    };
    let mut normal = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => normal.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(format!("`{path}` leaves the workspace"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("`{path}` is outside the workspace; use a path relative to it"));
            }
        }
    }
    let candidate = root.join(&normal);
    // Resolve the deepest part that exists; the rest is appended as written.
    let mut existing = candidate.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        match fs::symlink_metadata(existing) {
            Ok(_) => break,
            Err(_) => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(format!("`{path}` cannot be resolved"));
                };
                rest.push(name);
                existing = parent;
            }
        }
    }
    let resolved = existing.canonicalize().map_err(|_| format!("`{path}` goes through a dangling symlink"))?;
    if !resolved.starts_with(&root) {
        return Err(format!("`{path}` resolves outside the workspace through a symlink"));
    }
    let mut out = resolved;
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    Ok(out)
}

/// A skill to copy in.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFiles {
    pub name: String,
    /// The skill's Markdown file (`skills/<name>.md` or `skills/<name>/SKILL.md`).
    pub source: PathBuf,
    /// Sibling files, relative to the skill folder.
    pub files: Vec<String>,
}

/// An agent tool's script and what its catalog entry says.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentScript {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub script: String,
}

/// Everything a session workspace starts with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspacePlan {
    pub skills: Vec<SkillFiles>,
    pub agent_tools: Vec<AgentScript>,
    pub seeds: Vec<Seed>,
}

impl WorkspacePlan {
    /// Whether materializing this plan writes nothing (no skill, agent tool or seed).
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty() && self.agent_tools.is_empty() && self.seeds.is_empty()
    }

    pub fn from_project(project: &Project) -> Self {
        let skills = project
            .caps
            .skills
            .iter()
            .map(|s| SkillFiles { name: s.name.clone(), source: s.path.clone(), files: s.files.clone() })
            .collect();
        let agent_tools = project
            .caps
            .tools
            .iter()
            .filter(|t| t.execution == Execution::Agent)
            .filter_map(|t| match &t.body {
                ToolBody::Script(script) => Some(AgentScript {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                    script: script.clone(),
                }),
                _ => None,
            })
            .collect();
        Self { skills, agent_tools, seeds: project.caps.seeds.clone() }
    }
}

/// The path of agent tool `name`'s script in `workspace`.
pub fn agent_tool_path(workspace: &Path, name: &str) -> PathBuf {
    workspace.join(TOOLS_DIR).join(name)
}

/// Prepares `workspace` from `plan` and writes the per-send `files` (path → content). Creates
/// the workspace folder when missing. Idempotent.
pub fn materialize(workspace: &Path, plan: &WorkspacePlan, files: &[(String, String)]) -> Result<()> {
    fs::create_dir_all(workspace).map_err(|e| Error::io(workspace, e))?;
    for skill in &plan.skills {
        let dir = workspace.join(SKILLS_DIR).join(&skill.name);
        let body = fs::read(&skill.source).map_err(|e| Error::io(&skill.source, e))?;
        write_if_changed(&dir.join("SKILL.md"), &body, false)?;
        let folder = skill.source.parent().unwrap_or(Path::new("."));
        for rel in &skill.files {
            let from = folder.join(rel);
            let bytes = fs::read(&from).map_err(|e| Error::io(&from, e))?;
            let to = confine_new(&dir, rel)?;
            write_if_changed(&to, &bytes, false)?;
        }
    }
    write_agent_scripts(workspace, plan)?;
    write_catalog(workspace, &plan.agent_tools)?;
    for seed in &plan.seeds {
        let to = confine_new(workspace, &seed.rel)?;
        if fs::symlink_metadata(&to).is_err() {
            let bytes = fs::read(&seed.path).map_err(|e| Error::io(&seed.path, e))?;
            write_if_changed(&to, &bytes, false)?;
        }
    }
    write_files(workspace, files)
}

/// Writes the agent-tool scripts of `plan` (executable), without touching the catalog.
pub(crate) fn write_agent_scripts(workspace: &Path, plan: &WorkspacePlan) -> Result<()> {
    for tool in &plan.agent_tools {
        write_if_changed(&agent_tool_path(workspace, &tool.name), tool.script.as_bytes(), true)?;
    }
    Ok(())
}

/// Writes per-send files (path → content) into `workspace`, each confined to it. Every bad path
/// is refused before anything is written.
pub fn write_files(workspace: &Path, files: &[(String, String)]) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    fs::create_dir_all(workspace).map_err(|e| Error::io(workspace, e))?;
    let mut targets = Vec::with_capacity(files.len());
    for (path, content) in files {
        targets.push((confine_new(workspace, path)?, content));
    }
    for (to, content) in targets {
        write_if_changed(&to, content.as_bytes(), false)?;
    }
    Ok(())
}

/// [`confine`] for a file about to be written: it must name something under the root.
fn confine_new(root: &Path, path: &str) -> Result<PathBuf> {
    let to = confine(root, path).map_err(|reason| Error::Path { path: path.to_owned(), reason })?;
    let root = root.canonicalize().map_err(|e| Error::io(root, e))?;
    if to == root {
        return Err(Error::Path { path: path.to_owned(), reason: "names the workspace itself, not a file".to_owned() });
    }
    Ok(to)
}

/// Writes `bytes` to `path` (creating folders) unless it already holds exactly that.
fn write_if_changed(path: &Path, bytes: &[u8], executable: bool) -> Result<()> {
    let same = fs::read(path).is_ok_and(|old| old == bytes);
    if !same {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        write_atomic(path, bytes).map_err(|e| Error::io(path, e))?;
    }
    if executable {
        let mode = fs::metadata(path).map_err(|e| Error::io(path, e))?.permissions().mode();
        if mode & 0o111 != 0o111 {
            fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(|e| Error::io(path, e))?;
        }
    }
    Ok(())
}

/// Writes through a temporary sibling and renames, so a script is never executed half-written
/// and never held open for writing by the path that runs it.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Puts the agent-tool catalog between its markers in `AGENTS.md` (appending the section when
/// absent, removing it when there are no agent tools).
fn write_catalog(workspace: &Path, tools: &[AgentScript]) -> Result<()> {
    let path = workspace.join(CATALOG_FILE);
    let existing = fs::read_to_string(&path).ok();
    if tools.is_empty() && existing.as_deref().is_none_or(|text| !text.contains(CATALOG_BEGIN)) {
        return Ok(());
    }
    let section = if tools.is_empty() { String::new() } else { catalog(tools) };
    let text = existing.unwrap_or_default();
    let updated = match (text.find(CATALOG_BEGIN), text.find(CATALOG_END)) {
        (Some(begin), Some(end)) if end > begin => {
            let after = &text[end + CATALOG_END.len()..];
            let after = after.strip_prefix('\n').unwrap_or(after);
            format!("{}{section}{after}", &text[..begin])
        }
        _ if text.is_empty() => section,
        _ => {
            let sep = if text.ends_with("\n\n") {
                ""
            } else if text.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            format!("{text}{sep}{section}")
        }
    };
    write_if_changed(&path, updated.as_bytes(), false)
}

/// The catalog section, markers included.
pub fn catalog(tools: &[AgentScript]) -> String {
    let mut out = format!("{CATALOG_BEGIN}\n## Agent tools\n\n");
    out.push_str(&format!(
        "These tools are scripts in `{TOOLS_DIR}/`. Run one from the workspace root with its input \
         as a JSON object on stdin; it prints its result on stdout, and a non-zero exit means it \
         failed.\n"
    ));
    for tool in tools {
        let example = example_input(&tool.input_schema);
        let schema = serde_json::to_string_pretty(&tool.input_schema).unwrap_or_else(|_| tool.input_schema.to_string());
        out.push_str(&format!(
            "\n### `{name}`\n\n{description}\n\n```sh\necho '{example}' | {TOOLS_DIR}/{name}\n```\n\nInput schema:\n\n```json\n{schema}\n```\n",
            name = tool.name,
            description = tool.description.trim(),
        ));
    }
    out.push_str(CATALOG_END);
    out.push('\n');
    out
}

/// A placeholder input naming the schema's required (or all) properties.
fn example_input(schema: &Value) -> String {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut example = serde_json::Map::new();
    if let Some(props) = props {
        for (name, prop) in props {
            if !required.is_empty() && !required.contains(&name.as_str()) {
                continue;
            }
            let value = match prop.get("type").and_then(Value::as_str) {
                Some("integer" | "number") => Value::from(0),
                Some("boolean") => Value::Bool(false),
                Some("array") => Value::Array(Vec::new()),
                Some("object") => Value::Object(serde_json::Map::new()),
                _ => Value::String("...".to_owned()),
            };
            example.insert(name.clone(), value);
        }
    }
    // A single quote would end the shell string in the example.
    Value::Object(example).to_string().replace('\'', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("sub")).unwrap();
        let canon = root.canonicalize().unwrap();
        assert_eq!(confine(root, "sub/../a.txt").unwrap(), canon.join("a.txt"));
        assert_eq!(confine(root, "new/dir/f").unwrap(), canon.join("new/dir/f"));
        assert_eq!(confine(root, ".").unwrap(), canon);
        assert!(confine(root, "../x").is_err());
        assert!(confine(root, "sub/../../x").is_err());
        assert!(confine(root, "/etc/passwd").is_err());
        assert_eq!(confine(root, &canon.join("sub/f").display().to_string()).unwrap(), canon.join("sub/f"));
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        assert!(confine(root, "out/x").is_err());
        std::os::unix::fs::symlink("sub", root.join("in")).unwrap();
        assert_eq!(confine(root, "in/x").unwrap(), canon.join("sub/x"));
        std::os::unix::fs::symlink("/nonexistent/nowhere", root.join("dangling")).unwrap();
        assert!(confine(root, "dangling").is_err());
    }

    #[test]
    fn example_inputs_name_required_properties() {
        let schema = serde_json::json!({
            "type": "object",
            "required": ["message"],
            "properties": {"message": {"type": "string"}, "n": {"type": "integer"}}
        });
        assert_eq!(example_input(&schema), r#"{"message":"..."}"#);
    }
}
