//! `result.toml`: a host command that commits the final assistant text of each turn. It reads
//! `{"text": ..., "context": ...}` on stdin; a non-zero exit rejects the result.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::commands;
use crate::diag::{Code, Diagnostics};
use crate::model::ResultDef;
use crate::parse::{self, DurationValue};
use crate::source::SourceFile;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Rejections the model may revise after before the turn fails.
pub const DEFAULT_MAX_REVISIONS: u32 = 2;
/// The most `max_revisions` accepts.
pub const MAX_REVISIONS_LIMIT: u32 = 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultFile {
    command: Vec<String>,
    timeout: Option<DurationValue>,
    max_revisions: Option<u32>,
}

/// `bot_dir` is the agent folder, where the command runs.
pub fn load(src: &SourceFile, bot_dir: &Path, diags: &mut Diagnostics) -> Option<ResultDef> {
    let file: ResultFile = parse::toml_file(src, diags)?;
    if file.command.first().is_none_or(|c| c.trim().is_empty()) {
        diags.report(
            Code::MissingField,
            Some(&src.rel),
            src.pos_of_key("command"),
            format!("{}: `command` is empty", src.rel),
        );
        return None;
    }
    commands::check_files(&file.command, bot_dir, src, "command", src.pos_of_key("command"), diags);
    let timeout = parse::duration(file.timeout.as_ref(), src, "timeout", DEFAULT_TIMEOUT, diags);
    if file.max_revisions.is_some_and(|m| m > MAX_REVISIONS_LIMIT) {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("max_revisions"),
            format!("{}: `max_revisions` must be at most {MAX_REVISIONS_LIMIT}", src.rel),
        );
    }
    let max_revisions = file.max_revisions.unwrap_or(DEFAULT_MAX_REVISIONS).min(MAX_REVISIONS_LIMIT);
    Some(ResultDef { file: src.rel.clone(), command: file.command, timeout, max_revisions })
}
