//! One module per file format. Each owns its raw `*File` struct (serde, `deny_unknown_fields`)
//! and turns it into a typed definition from `crate::model`, reporting what is wrong.

use std::path::PathBuf;

use bdk_protocol::info::Source;

pub mod ab;
pub mod agent;
pub mod artifacts;
pub mod channel;
pub mod connection;
pub mod evals;
pub mod extension;
pub mod hook;
pub mod reminder;
pub mod result;
pub mod schedule;
pub mod skill;
pub mod storage;
pub mod subagent;
pub mod tool;

/// Separates an extension's namespace from the names it contributes (`ci__failed_jobs`).
pub const NAMESPACE_SEPARATOR: &str = "__";

/// The namespace of the extension that contributed `name` (`ci` for `ci__nightly`), or `None`
/// for the project's own definitions. A namespace never contains the separator, so the part
/// before the first one is it.
pub fn namespace_of(name: &str, source: Source) -> Option<&str> {
    if source != Source::Extension {
        return None;
    }
    name.split_once(NAMESPACE_SEPARATOR).map(|(namespace, _)| namespace)
}

/// Where definitions being loaded come from: the project itself or an extension mount.
#[derive(Debug, Clone)]
pub struct Origin {
    pub source: Source,
    pub namespace: Option<String>,
    /// The bot-shaped folder the definitions live in; commands run there.
    pub bot_dir: PathBuf,
}

impl Origin {
    pub fn project(bot_dir: PathBuf) -> Self {
        Self { source: Source::File, namespace: None, bot_dir }
    }

    pub fn extension(namespace: &str, bot_dir: PathBuf) -> Self {
        Self { source: Source::Extension, namespace: Some(namespace.to_owned()), bot_dir }
    }

    /// The name the rest of the system sees: `ns__name` inside an extension.
    pub fn name(&self, name: &str) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}{NAMESPACE_SEPARATOR}{name}"),
            None => name.to_owned(),
        }
    }
}
