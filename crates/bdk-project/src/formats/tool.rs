//! `tools/<name>.toml`: one tool per file; the file stem is the name the model sees.

use std::time::Duration;

use serde::Deserialize;

use crate::commands;
use crate::diag::{Code, Diagnostics};
use crate::model::{Execution, Predicate, ToolBody, ToolDef};
use crate::parse::{self, DurationValue};
use crate::schema;
use crate::source::SourceFile;

use super::Origin;

/// Tools time out after this long unless `timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    description: Option<String>,
    input_schema: Option<toml::Value>,
    output_schema: Option<toml::Value>,
    #[serde(default)]
    execution: ExecutionFile,
    effect: Option<toml::Value>,
    needs_approval: Option<toml::Value>,
    dry_run_result: Option<toml::Value>,
    #[serde(default)]
    time_args: Vec<String>,
    timeout: Option<DurationValue>,
    command: Option<Vec<String>>,
    script: Option<String>,
    #[serde(default)]
    persistent: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ExecutionFile {
    #[default]
    Server,
    Agent,
}

pub fn load(src: &SourceFile, name: &str, origin: &Origin, diags: &mut Diagnostics) -> Option<ToolDef> {
    if !parse::is_valid_tool_name(name) {
        diags.report(
            Code::InvalidName,
            Some(&src.rel),
            None,
            format!("{}: `{name}` is not a valid tool name", src.rel),
        );
        return None;
    }
    // Keys that did not parse were reported and dropped: check the rest, then drop the tool.
    let (file, dropped): (ToolFile, Vec<String>) = parse::toml_file_partial(src, diags)?;
    let body_dropped = dropped.iter().any(|k| k == "command" || k == "script");
    let description = file.description.filter(|d| !d.trim().is_empty());
    if description.is_none() {
        diags.report(
            Code::MissingDescription,
            Some(&src.rel),
            src.pos_of_key("description"),
            format!("{}: tool `{name}` has no description", src.rel),
        );
    }
    let execution = match file.execution {
        ExecutionFile::Server => Execution::Server,
        ExecutionFile::Agent => Execution::Agent,
    };
    let body = match (file.command, file.script) {
        (Some(_), Some(_)) => {
            diags.report(
                Code::ToolBodyConflict,
                Some(&src.rel),
                src.pos_of_key("script"),
                format!("{}: tool `{name}` sets both `command` and `script`", src.rel),
            );
            None
        }
        (None, None) if body_dropped => None,
        (None, None) => {
            diags.report(
                Code::ToolBodyMissing,
                Some(&src.rel),
                None,
                format!("{}: tool `{name}` has neither `command` nor `script`", src.rel),
            );
            None
        }
        (Some(command), None) if command.is_empty() || command[0].trim().is_empty() => {
            diags.report(
                Code::ToolBodyMissing,
                Some(&src.rel),
                src.pos_of_key("command"),
                format!("{}: `command` is empty; give the program and its arguments", src.rel),
            );
            None
        }
        (Some(_), None) if execution == Execution::Agent => {
            diags.report(
                Code::AgentToolNeedsScript,
                Some(&src.rel),
                src.pos_of_key("command"),
                format!("{}: agent tool `{name}` uses `command`", src.rel),
            );
            None
        }
        (Some(command), None) => Some(ToolBody::Command(command)),
        (None, Some(script)) if script.trim().is_empty() => {
            diags.report(
                Code::ToolBodyMissing,
                Some(&src.rel),
                src.pos_of_key("script"),
                format!("{}: `script` is empty", src.rel),
            );
            None
        }
        (None, Some(script)) => Some(ToolBody::Script(script)),
    };
    if file.persistent && execution == Execution::Agent {
        diags.report(
            Code::InvalidValue,
            Some(&src.rel),
            src.pos_of_key("persistent"),
            format!(
                "{}: agent tool `{name}` cannot be persistent; only server tools run a long-lived process",
                src.rel
            ),
        );
    }
    if let Some(ToolBody::Command(command)) = &body {
        commands::check_files(command, &origin.bot_dir, src, "command", src.pos_of_key("command"), diags);
    }

    let input_schema = match &file.input_schema {
        Some(value) => schema::check_object(value, src, "input_schema", diags),
        None => Some(schema::any_object()),
    };
    let output_schema = file.output_schema.as_ref().map(|v| schema::check(v, src, "output_schema", diags));
    let effect_write = predicate(file.effect.as_ref(), src, "effect", diags, |s| match s {
        "read" => Some(false),
        "write" => Some(true),
        _ => None,
    });
    let needs_approval = predicate(file.needs_approval.as_ref(), src, "needs_approval", diags, |_| None);
    let dry_run_result = file.dry_run_result.as_ref().and_then(|v| serde_json::to_value(v).ok());
    let timeout = parse::duration(file.timeout.as_ref(), src, "timeout", DEFAULT_TIMEOUT, diags);

    if let Some(schema) = &input_schema {
        let props = schema::property_names(schema);
        for arg in &file.time_args {
            if !props.contains(&arg.as_str()) {
                diags.report(
                    Code::TimeArgsUnknownProperty,
                    Some(&src.rel),
                    src.pos_of_key("time_args"),
                    format!("{}: time_args names `{arg}`, which is not a property of input_schema", src.rel),
                );
            }
        }
    }

    if !dropped.is_empty() {
        return None;
    }
    Some(ToolDef {
        name: origin.name(name),
        description: description?,
        source: origin.source,
        file: Some(src.rel.clone()),
        execution,
        effect_write: effect_write?,
        needs_approval: needs_approval?,
        input_schema: input_schema?,
        output_schema: output_schema.flatten(),
        dry_run_result,
        time_args: file.time_args,
        timeout,
        body: body?,
        persistent: file.persistent && execution == Execution::Server,
        cwd: origin.bot_dir.clone(),
    })
}

/// Reads a boolean, one of the keywords `keyword` accepts, or a schema table.
fn predicate(
    value: Option<&toml::Value>,
    src: &SourceFile,
    key: &str,
    diags: &mut Diagnostics,
    keyword: impl Fn(&str) -> Option<bool>,
) -> Option<Predicate> {
    match value {
        // Undeclared effect counts as a write; undeclared approval is not needed.
        None => Some(Predicate::Always(key == "effect")),
        Some(toml::Value::Boolean(b)) if key != "effect" => Some(Predicate::Always(*b)),
        Some(toml::Value::String(s)) => match keyword(s) {
            Some(b) => Some(Predicate::Always(b)),
            None => {
                let (allowed, words): (&str, &[&str]) = if key == "effect" {
                    ("\"read\", \"write\" or a schema table", &["read", "write"])
                } else {
                    ("true, false or a schema table", &["true", "false"])
                };
                let suggestion = crate::suggest::did_you_mean(s, words.iter().copied());
                diags.report_with_hint(
                    Code::InvalidValue,
                    Some(&src.rel),
                    src.pos_of_key(key),
                    format!("{}: `{key} = \"{s}\"` is not allowed{suggestion}", src.rel),
                    format!("`{key}` takes {allowed}"),
                );
                None
            }
        },
        Some(table @ toml::Value::Table(_)) => schema::check(table, src, key, diags).map(Predicate::When),
        Some(other) => {
            let expected =
                if key == "effect" { "\"read\", \"write\" or a schema table" } else { "a boolean or a schema table" };
            diags.report(
                Code::WrongType,
                Some(&src.rel),
                src.pos_of_key(key),
                format!("{}: `{key}` is a {}, expected {expected}", src.rel, other.type_str()),
            );
            None
        }
    }
}
