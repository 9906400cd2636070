//! `extensions/<ns>.toml` (with `path` to a bot-shaped folder) or `extensions/<ns>/` (the folder
//! itself, with an optional `extension.toml`): a mount whose tools, skills, connections,
//! subagents, channels, hooks, schedules, reminders, artifact kinds and seeds become `<ns>__<name>`.
//! Its instructions are appended to the root agent's. Extensions are trusted host code: the
//! namespace prevents collisions, it is not a sandbox.

use std::path::PathBuf;

use serde::Deserialize;

use crate::diag::{Code, Diagnostics};
use crate::model::{Capabilities, Contributed, ExtensionDef, Hosting};
use crate::source::{self, Entry, MAX_DEFINITION_BYTES, Rel};
use crate::{parse, walk};

use super::agent::{self, HostingFile};
use super::{NAMESPACE_SEPARATOR, Origin, artifacts};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MountFile {
    path: Option<String>,
    description: Option<String>,
    #[serde(default)]
    config: toml::Table,
    hosting: Option<HostingFile>,
}

pub fn load(entry: &Entry, rel: &Rel, diags: &mut Diagnostics) -> Option<(ExtensionDef, Capabilities)> {
    let namespace = if entry.is_dir { entry.name.clone() } else { entry.stem().to_owned() };
    let shown = rel.of(&entry.path);
    if !parse::is_valid_name(&namespace) || namespace.contains(NAMESPACE_SEPARATOR) {
        diags.report_with_hint(
            Code::InvalidName,
            Some(&shown),
            None,
            format!("{shown}: `{namespace}` is not a valid extension namespace"),
            "name the file or folder with letters, digits, `_` and `-`, starting with a letter or digit, \
             and no `__` (it separates the namespace from the names the extension contributes)",
        );
        return None;
    }
    let (mount, dir, file) = if entry.is_dir {
        let meta = entry.path.join("extension.toml");
        let mount = if meta.is_file() {
            let src = source::read_text(&meta, rel, MAX_DEFINITION_BYTES, diags)?;
            let mount: MountFile = parse::toml_file(&src, diags)?;
            if mount.path.is_some() {
                diags.report_with_hint(
                    Code::UnknownKey,
                    Some(&src.rel),
                    src.pos_of_key("path"),
                    format!("{}: `path` is only for extensions/<ns>.toml mounts", src.rel),
                    "remove `path`; this folder is the extension",
                );
            }
            mount
        } else {
            MountFile::default()
        };
        (mount, entry.path.clone(), rel.of(&if meta.is_file() { meta } else { entry.path.clone() }))
    } else if entry.extension() == Some("toml") {
        let src = source::read_text(&entry.path, rel, MAX_DEFINITION_BYTES, diags)?;
        let mount: MountFile = parse::toml_file(&src, diags)?;
        let Some(path) = mount.path.clone() else {
            diags.report(
                Code::ExtensionPath,
                Some(&src.rel),
                None,
                format!("{}: extension `{namespace}` has no `path`", src.rel),
            );
            return None;
        };
        let base = entry.path.parent().map(PathBuf::from).unwrap_or_default();
        // Canonical, so files inside are named `bot/vendor/ci/...`, not `bot/extensions/../...`.
        let dir = base.join(&path);
        let dir = dir.canonicalize().unwrap_or(dir);
        if !dir.is_dir() {
            diags.report(
                Code::ExtensionPath,
                Some(&src.rel),
                src.pos_of_key("path"),
                format!("{}: `path = \"{path}\"` is not a folder", src.rel),
            );
            return None;
        }
        (mount, dir, src.rel)
    } else {
        walk::report_stray(entry, "extensions/ holds <ns>.toml mounts and <ns>/ folders", rel, diags);
        return None;
    };

    let origin = Origin::extension(&namespace, dir.clone());
    let walked = walk::walk(&dir, &origin, rel, diags);
    let mut caps = walked.caps;
    if let Some(nested) = &walked.extensions {
        let shown = rel.of(&nested.path);
        diags.report(
            Code::UnknownFolder,
            Some(&shown),
            None,
            format!("{shown}: extensions cannot mount extensions; ignored"),
        );
    }
    let instructions = agent::load_instructions(&dir, rel, diags);
    for rest in &walked.rest {
        match (rest.name.as_str(), rest.is_dir) {
            ("instructions.md", false) | ("instructions", true) | ("extension.toml", false) | ("lib", true) => {}
            ("artifacts.toml", false) => {
                if let Some(src) = source::read_text(&rest.path, rel, MAX_DEFINITION_BYTES, diags)
                    && let Some((_, kinds)) = artifacts::load(&src, &origin, diags)
                {
                    caps.artifact_kinds.extend(kinds);
                }
            }
            _ => walk::report_stray(
                rest,
                "an extension contributes capability folders, instructions and artifacts.toml",
                rel,
                diags,
            ),
        }
    }
    let contributed = Contributed {
        tools: caps.tools.iter().map(|t| t.name.clone()).collect(),
        skills: caps.skills.iter().map(|s| s.name.clone()).collect(),
        connections: caps.connections.iter().map(|c| c.name.clone()).collect(),
        subagents: caps.subagents.iter().map(|s| s.id.clone()).collect(),
        channels: caps.channels.iter().map(|c| c.id.clone()).collect(),
        schedules: caps.schedules.iter().map(|s| s.id.clone()).collect(),
        hooks: caps.hooks.iter().map(|h| h.name.clone()).collect(),
        reminders: caps.reminders.iter().map(|r| r.name.clone()).collect(),
        artifact_kinds: caps.artifact_kinds.iter().map(|k| k.name.clone()).collect(),
        seeds: caps.seeds.iter().map(|s| s.rel.clone()).collect(),
    };
    let config = match serde_json::to_value(&mount.config) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => Default::default(),
    };
    let def = ExtensionDef {
        namespace,
        file,
        path: dir,
        description: mount.description,
        config,
        instructions,
        hosting: mount.hosting.map(Hosting::from).unwrap_or_default(),
        contributed,
    };
    Some((def, caps))
}
