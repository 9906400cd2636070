//! `artifacts.toml`: declared artifact kinds, the `tag_artifact` opt-in and retention.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::diag::{Code, Diagnostics};
use crate::model::{ArtifactKind, ArtifactsDef};
use crate::parse;
use crate::schema;
use crate::source::SourceFile;

use super::Origin;

/// Local servers keep this many artifacts, evicting the oldest-updated.
pub const DEFAULT_MAX: u32 = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArtifactsFile {
    #[serde(default)]
    agent_tool: bool,
    max: Option<u32>,
    #[serde(default)]
    kinds: BTreeMap<String, KindFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KindFile {
    description: String,
    schema: Option<toml::Value>,
}

/// Loads the file; returns its settings (root agents only) and the kinds it declares.
pub fn load(src: &SourceFile, origin: &Origin, diags: &mut Diagnostics) -> Option<(ArtifactsDef, Vec<ArtifactKind>)> {
    let file: ArtifactsFile = parse::toml_file(src, diags)?;
    if file.max == Some(0) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("max"),
            format!("{}: `max` must be positive", src.rel),
        );
    }
    if file.agent_tool && file.kinds.is_empty() {
        diags.report(
            Code::ArtifactsNoKinds,
            Some(&src.rel),
            src.pos_of_key("agent_tool"),
            format!("{}: agent_tool = true needs at least one declared kind", src.rel),
        );
    }
    let mut kinds = Vec::new();
    for (name, kind) in file.kinds {
        if !parse::is_valid_name(&name) {
            diags.report(
                Code::InvalidName,
                Some(&src.rel),
                src.pos_of_key(&name),
                format!("{}: `{name}` is not a valid artifact kind", src.rel),
            );
            continue;
        }
        if kind.description.trim().is_empty() {
            diags.report(
                Code::MissingDescription,
                Some(&src.rel),
                src.pos_of_key(&name),
                format!("{}: artifact kind `{name}` has an empty description", src.rel),
            );
        }
        let schema = kind.schema.as_ref().and_then(|s| schema::check(s, src, "schema", diags));
        kinds.push(ArtifactKind {
            name: origin.name(&name),
            description: kind.description,
            source: origin.source,
            schema,
        });
    }
    let def = ArtifactsDef {
        file: src.rel.clone(),
        agent_tool: file.agent_tool,
        max: file.max.filter(|m| *m > 0).unwrap_or(DEFAULT_MAX),
    };
    Some((def, kinds))
}
