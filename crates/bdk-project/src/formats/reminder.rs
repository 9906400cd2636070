//! `reminders/<name>.toml`: named reminder handlers. Reminders themselves are created at run
//! time; a named handler stays armed across restarts because it is found here by name.

use std::time::Duration;

use serde::Deserialize;

use crate::commands;
use crate::diag::{Code, Diagnostics};
use crate::model::ReminderDef;
use crate::parse::{self, DurationValue};
use crate::source::SourceFile;

use super::Origin;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReminderFile {
    description: Option<String>,
    command: Vec<String>,
    timeout: Option<DurationValue>,
}

pub fn load(src: &SourceFile, name: &str, origin: &Origin, diags: &mut Diagnostics) -> Option<ReminderDef> {
    if !parse::is_valid_name(name) {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{name}` is not a valid reminder name", src.rel),
        );
        return None;
    }
    let file: ReminderFile = parse::toml_file(src, diags)?;
    if file.command.first().is_none_or(|c| c.trim().is_empty()) {
        diags.report(
            Code::MissingField,
            Some(&src.rel),
            src.pos_of_key("command"),
            format!("{}: `command` is empty", src.rel),
        );
        return None;
    }
    commands::check_files(&file.command, &origin.bot_dir, src, "command", src.pos_of_key("command"), diags);
    let timeout = parse::duration(file.timeout.as_ref(), src, "timeout", DEFAULT_TIMEOUT, diags);
    Some(ReminderDef {
        name: origin.name(name),
        source: origin.source,
        file: src.rel.clone(),
        description: file.description,
        command: file.command,
        timeout,
        cwd: origin.bot_dir.clone(),
    })
}
