//! `hooks/<name>.toml`: observe-only subscribers to session events. A hook is a long-lived
//! `command` reading NDJSON events on stdin, or a built-in `sink` (file or HTTP).

use std::collections::BTreeMap;

use bdk_protocol::events;
use serde::Deserialize;

use crate::commands;
use crate::diag::{Code, Diagnostics};
use crate::model::{HookDef, HookSink};
use crate::parse;
use crate::source::SourceFile;

use super::Origin;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HookFile {
    events: Vec<String>,
    command: Option<Vec<String>>,
    sink: Option<SinkFile>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum SinkFile {
    File {
        path: String,
    },
    Http {
        url: String,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
}

pub fn load(src: &SourceFile, name: &str, origin: &Origin, diags: &mut Diagnostics) -> Option<HookDef> {
    if !parse::is_valid_name(name) {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{name}` is not a valid hook name", src.rel),
        );
        return None;
    }
    let file: HookFile = parse::toml_file(src, diags)?;
    if file.events.is_empty() {
        diags.report_with_hint(
            Code::MissingField,
            Some(&src.rel),
            src.pos_of_key("events"),
            format!("{}: hook `{name}` subscribes to no events", src.rel),
            "list event types, or \"*\" for every event",
        );
    }
    for event in file.events.iter().filter(|e| !events::is_known_event(e)) {
        diags.report(
            Code::UnknownEvent,
            Some(&src.rel),
            src.pos_of_key("events"),
            format!("{}: `{event}` is not an event type; it never fires", src.rel),
        );
    }
    let sink = match (file.command, file.sink) {
        (Some(command), None) if command.first().is_some_and(|c| !c.trim().is_empty()) => HookSink::Command(command),
        (None, Some(SinkFile::File { path })) if !path.trim().is_empty() => HookSink::File(path),
        (None, Some(SinkFile::Http { url, headers })) if url.starts_with("http://") || url.starts_with("https://") => {
            HookSink::Http { url, headers: headers.into_iter().collect() }
        }
        (Some(_), Some(_)) | (None, None) => {
            diags.report(
                Code::HookSink,
                Some(&src.rel),
                None,
                format!("{}: hook `{name}` needs exactly one of `command` and `sink`", src.rel),
            );
            return None;
        }
        _ => {
            diags.report_with_hint(
                Code::HookSink,
                Some(&src.rel),
                src.pos_of_key("command").or(src.pos_of_key("sink")),
                format!("{}: hook `{name}` has an empty command, path, or a URL that is not http(s)", src.rel),
                "command = [\"program\", \"arg\"], or [sink] kind = \"file\", path = ..., or kind = \"http\", url = \"https://...\"",
            );
            return None;
        }
    };
    if let HookSink::Command(command) = &sink {
        commands::check_files(command, &origin.bot_dir, src, "command", src.pos_of_key("command"), diags);
    }
    if file.events.is_empty() {
        return None;
    }
    Some(HookDef {
        name: origin.name(name),
        source: origin.source,
        file: src.rel.clone(),
        events: file.events,
        sink,
        cwd: origin.bot_dir.clone(),
    })
}
