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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultFile {
    command: Vec<String>,
    timeout: Option<DurationValue>,
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
    Some(ResultDef { file: src.rel.clone(), command: file.command, timeout })
}
