//! Policy the engine applies around a call, as pure functions of a tool definition and its
//! validated input: its effect (dry-run stubbing, busy-session admission), whether it needs
//! approval, the dry-run stub, and the `time_args` rules of a session created with `asOf`
//! (the reference's Tools page, "Bound time arguments under asOf").
//!
//! These compile predicate schemas on each use; [`crate::ProjectTools`] answers the same
//! questions from schemas compiled once.

use bdk_project::model::ToolDef;
use bdk_project::schema;
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validate::predicate_holds;

/// The stub a dry-run write answers with when the tool declares no `dry_run_result`.
pub const DEFAULT_DRY_RUN_RESULT: &str = "Operation acknowledged.";

/// Whether a call changes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Read,
    Write,
}

impl Effect {
    pub fn is_write(self) -> bool {
        self == Effect::Write
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
        }
    }
}

/// The effect of calling `tool` with `input`. An undeclared effect is a write; a predicate is
/// a write when the input matches it.
pub fn effect_of(tool: &ToolDef, input: &Value) -> Effect {
    if predicate_holds(&tool.effect_write, input) { Effect::Write } else { Effect::Read }
}

/// Whether calling `tool` with `input` waits for a person.
pub fn needs_approval(tool: &ToolDef, input: &Value) -> bool {
    predicate_holds(&tool.needs_approval, input)
}

/// What a dry-run session answers instead of running a write: `dry_run_result`, or
/// "Operation acknowledged.".
pub fn dry_run_stub(tool: &ToolDef) -> Value {
    tool.dry_run_result.clone().unwrap_or_else(|| Value::String(DEFAULT_DRY_RUN_RESULT.to_owned()))
}

/// Checks the `time_args` of a call in a session frozen at `as_of`: every named argument must
/// be present, an absolute ISO-8601 instant with a timezone, and no later than `as_of`.
/// `Err` is the refusal the model reads, telling it to retry with absolute bounds.
pub fn check_time_args(tool: &ToolDef, input: &Value, as_of: DateTime<Utc>) -> Result<(), String> {
    check_time_names(&tool.name, &tool.time_args, input, as_of)
}

/// [`check_time_args`] over bare names (for callers without a [`ToolDef`]).
pub fn check_time_names(tool: &str, names: &[String], input: &Value, as_of: DateTime<Utc>) -> Result<(), String> {
    let as_of_text = as_of.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let mut problems = Vec::new();
    for name in names {
        match input.get(name) {
            None | Some(Value::Null) => problems.push(format!("`{name}` is missing")),
            Some(Value::String(text)) => match parse_instant(text) {
                Ok(instant) if instant.with_timezone(&Utc) > as_of => {
                    problems.push(format!("`{name}` = {text:?} is later than the session's asOf ({as_of_text})"));
                }
                Ok(_) => {}
                Err(Unusable::NoTimezone) => {
                    problems.push(format!("`{name}` = {text:?} has no timezone"));
                }
                Err(Unusable::NotAbsolute) => {
                    problems.push(format!("`{name}` = {text:?} is not an absolute ISO-8601 instant"));
                }
            },
            Some(other) => problems.push(format!("`{name}` is {other}, not an ISO-8601 instant string")),
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "`{tool}` refused: this session is frozen at asOf {as_of_text}, and {}. Retry with absolute \
         bounds: give every one of {} as an ISO-8601 instant with a timezone (for example \
         {example}), no later than {as_of_text}.",
        problems.join("; "),
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
        example = (as_of - chrono::Duration::days(1)).to_rfc3339_opts(SecondsFormat::Secs, true),
    ))
}

/// Why a session created with `asOf` must refuse to start: a `time_args` name absent from its
/// tool's input schema (a misspelled name would silently check nothing). `None` when all is well.
pub fn time_args_refusal<'a>(tools: impl IntoIterator<Item = &'a ToolDef>) -> Option<String> {
    let mut problems = Vec::new();
    for tool in tools {
        let props = schema::property_names(&tool.input_schema);
        for name in &tool.time_args {
            if !props.contains(&name.as_str()) {
                problems
                    .push(format!("tool `{}` names time_args `{name}`, which is not in its input schema", tool.name));
            }
        }
    }
    if problems.is_empty() {
        None
    } else {
        Some(format!(
            "a session with asOf cannot start: {} (a misspelled name would silently check nothing)",
            problems.join("; ")
        ))
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    NoTimezone,
    NotAbsolute,
}

/// Offsets written `+02:00`, `+0200` or `Z`; seconds and fractions optional; extended or basic.
const WITH_OFFSET: &[&str] = &[
    "%Y-%m-%dT%H:%M:%S%.f%:z",
    "%Y-%m-%dT%H:%M:%S%.f%z",
    "%Y-%m-%dT%H:%M%:z",
    "%Y-%m-%dT%H:%M%z",
    "%Y%m%dT%H%M%S%.f%z",
    "%Y%m%dT%H%M%z",
];

const WITHOUT_OFFSET: &[&str] =
    &["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y%m%dT%H%M%S%.f"];

fn parse_instant(text: &str) -> Result<DateTime<FixedOffset>, Unusable> {
    let text = text.trim();
    if let Ok(instant) = DateTime::parse_from_rfc3339(text) {
        return Ok(instant);
    }
    // chrono's `%z` does not read `Z`; spell it as an offset.
    let zulu = text.strip_suffix(['Z', 'z']).map(|t| format!("{t}+00:00"));
    let candidate = zulu.as_deref().unwrap_or(text);
    for format in WITH_OFFSET {
        if let Ok(instant) = DateTime::parse_from_str(candidate, format) {
            return Ok(instant);
        }
    }
    let naive = WITHOUT_OFFSET.iter().any(|f| NaiveDateTime::parse_from_str(text, f).is_ok())
        || NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok()
        || NaiveDate::parse_from_str(text, "%Y%m%d").is_ok();
    Err(if naive { Unusable::NoTimezone } else { Unusable::NotAbsolute })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_need_a_timezone() {
        for ok in [
            "2025-03-01T12:00:00Z",
            "2025-03-01T12:00:00.250Z",
            "2025-03-01T12:00:00+02:00",
            "2025-03-01T12:00:00+0200",
            "2025-03-01T12:00Z",
            "2025-03-01 12:00:00Z",
            "20250301T120000Z",
        ] {
            assert!(parse_instant(ok).is_ok(), "{ok}");
        }
        for naive in ["2025-03-01T12:00:00", "2025-03-01", "2025-03-01 12:00"] {
            assert_eq!(parse_instant(naive), Err(Unusable::NoTimezone), "{naive}");
        }
        for relative in ["yesterday", "now-1h", "last week", "", "P1D"] {
            assert_eq!(parse_instant(relative), Err(Unusable::NotAbsolute), "{relative}");
        }
    }
}
