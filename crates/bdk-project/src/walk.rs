//! Walks a bot-shaped folder's capability folders (`tools/`, `skills/`, ...) into
//! [`Capabilities`]. The root agent and extension mounts share it; the files at the folder's
//! top level (agent.toml, artifacts.toml, ...) are handed back to the caller, which knows which
//! of them its role allows.

use std::path::Path;

use crate::diag::{Code, Diagnostics};
use crate::formats::{Origin, channel, connection, hook, reminder, schedule, skill, subagent, tool};
use crate::model::{Capabilities, ConnectionScope, Seed};
use crate::source::{self, Entry, MAX_DEFINITION_BYTES, MAX_MARKDOWN_BYTES, Rel};

/// Folders that hold capabilities, in the order they are walked.
pub const CAPABILITY_FOLDERS: &[&str] = &[
    "tools",
    "skills",
    "mcp-connections",
    "host-connections",
    "subagents",
    "channels",
    "hooks",
    "schedules",
    "reminders",
    "extensions",
    "sandbox",
];

/// Files written for the Node original (`.ts`, `.js`, ...), reported as not loaded.
pub fn is_script_definition(entry: &Entry) -> bool {
    matches!(entry.extension(), Some("ts" | "mts" | "cts" | "js" | "mjs" | "cjs"))
}

/// What a walk found: the capabilities, and top-level entries that are not capability folders.
#[derive(Debug, Default)]
pub struct Walked {
    pub caps: Capabilities,
    pub rest: Vec<Entry>,
    /// The `extensions/` folder, if present; only the root agent mounts extensions.
    pub extensions: Option<Entry>,
}

pub fn walk(bot_dir: &Path, origin: &Origin, rel: &Rel, diags: &mut Diagnostics) -> Walked {
    let mut walked = Walked::default();
    for entry in source::list_dir(bot_dir, rel, diags) {
        if !entry.is_dir || !CAPABILITY_FOLDERS.contains(&entry.name.as_str()) {
            walked.rest.push(entry);
            continue;
        }
        let caps = &mut walked.caps;
        match entry.name.as_str() {
            "tools" => each_file(&entry, &["toml"], rel, diags, |e, d| {
                let src = source::read_text(&e.path, rel, MAX_DEFINITION_BYTES, d)?;
                tool::load(&src, e.stem(), origin, d)
            })
            .into_iter()
            .for_each(|t| caps.tools.push(t)),
            "skills" => {
                for child in source::list_dir(&entry.path, rel, diags) {
                    if child.is_dir || child.extension() == Some("md") {
                        caps.skills.extend(skill::load(&child, origin, rel, diags));
                    } else {
                        report_stray(&child, "skills/ holds <name>.md files and <name>/SKILL.md folders", rel, diags);
                    }
                }
            }
            "mcp-connections" | "host-connections" => {
                let scope =
                    if entry.name == "mcp-connections" { ConnectionScope::Model } else { ConnectionScope::Host };
                let loaded = each_file(&entry, &["toml"], rel, diags, |e, d| {
                    let src = source::read_text(&e.path, rel, MAX_DEFINITION_BYTES, d)?;
                    connection::load(&src, e.stem(), scope, origin, d)
                });
                caps.connections.extend(loaded);
            }
            "subagents" => {
                for child in source::list_dir(&entry.path, rel, diags) {
                    if child.is_dir {
                        caps.subagents.extend(subagent::load(&child, origin, rel, diags));
                    } else {
                        report_stray(&child, "subagents/ holds one folder per subagent", rel, diags);
                    }
                }
            }
            "channels" => caps.channels.extend(each_file(&entry, &["toml"], rel, diags, |e, d| {
                let src = source::read_text(&e.path, rel, MAX_DEFINITION_BYTES, d)?;
                channel::load(&src, e.stem(), origin, d)
            })),
            "hooks" => caps.hooks.extend(each_file(&entry, &["toml"], rel, diags, |e, d| {
                let src = source::read_text(&e.path, rel, MAX_DEFINITION_BYTES, d)?;
                hook::load(&src, e.stem(), origin, d)
            })),
            "schedules" => caps.schedules.extend(each_file(&entry, &["md", "toml"], rel, diags, |e, d| {
                if e.extension() == Some("md") {
                    let src = source::read_text(&e.path, rel, MAX_MARKDOWN_BYTES, d)?;
                    schedule::load_markdown(&src, e.stem(), origin, d)
                } else {
                    let src = source::read_text(&e.path, rel, MAX_DEFINITION_BYTES, d)?;
                    schedule::load_toml(&src, e.stem(), origin, d)
                }
            })),
            "reminders" => caps.reminders.extend(each_file(&entry, &["toml"], rel, diags, |e, d| {
                let src = source::read_text(&e.path, rel, MAX_DEFINITION_BYTES, d)?;
                reminder::load(&src, e.stem(), origin, d)
            })),
            "sandbox" => caps.seeds.extend(seeds(&entry, rel, diags)),
            "extensions" => walked.extensions = Some(entry),
            _ => {}
        }
    }
    walked
}

/// Loads every file in `folder` whose extension is in `exts`; reports everything else.
fn each_file<T>(
    folder: &Entry,
    exts: &[&str],
    rel: &Rel,
    diags: &mut Diagnostics,
    mut load: impl FnMut(&Entry, &mut Diagnostics) -> Option<T>,
) -> Vec<T> {
    let expected = format!(
        "{}/ holds {} files",
        folder.name,
        exts.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(" and ")
    );
    let mut loaded = Vec::new();
    for entry in source::list_dir(&folder.path, rel, diags) {
        // A directory named like a definition (`x.toml/`) goes to the loader too, whose read
        // reports it as expected_file.
        if entry.extension().is_some_and(|e| exts.contains(&e)) {
            loaded.extend(load(&entry, diags));
        } else {
            report_stray(&entry, &expected, rel, diags);
        }
    }
    loaded
}

pub fn report_stray(entry: &Entry, expected: &str, rel: &Rel, diags: &mut Diagnostics) {
    let shown = rel.of(&entry.path);
    if entry.is_dir {
        let known = CAPABILITY_FOLDERS.iter().copied().chain(["lib", "sandbox", "instructions"]);
        let suggestion = crate::suggest::did_you_mean(&entry.name, known);
        diags.report(
            Code::UnknownFolder,
            Some(&shown),
            None,
            format!("{shown}: unexpected folder{suggestion}; {expected}"),
        );
    } else if is_script_definition(entry) {
        diags.report(
            Code::TypescriptDefinition,
            Some(&shown),
            None,
            format!("{shown}: TypeScript/JavaScript definitions are not loaded; {expected}"),
        );
    } else {
        diags.report(Code::StrayFile, Some(&shown), None, format!("{shown}: not loaded; {expected}"));
    }
}

/// `sandbox/workspace/**`: seed files copied into each session workspace.
fn seeds(sandbox: &Entry, rel: &Rel, diags: &mut Diagnostics) -> Vec<Seed> {
    let mut seeds = Vec::new();
    for entry in source::list_dir(&sandbox.path, rel, diags) {
        if entry.is_dir && entry.name == "workspace" {
            for file in source::walk_files(&entry.path, rel, diags) {
                seeds.push(Seed { path: entry.path.join(&file), rel: file });
            }
        } else {
            report_stray(&entry, "sandbox/ holds a workspace/ folder of seed files", rel, diags);
        }
    }
    seeds
}
